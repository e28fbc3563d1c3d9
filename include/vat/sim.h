/* libvat — simulation testing: run a program under many schedules and
 * faults, one seed each, and replay the seed that breaks it.
 *
 * A scenario builds the program in a simulated world: a fresh host-driven
 * system in deterministic mode (vat/host.h), made by the harness for each
 * seed. The harness then runs it one step at a time. A step is one choice
 * of the scheduler: one ready vat is chosen and handles one message (a
 * turn). After every turn it asks the scenario's check; when nothing is
 * ready it moves the virtual clock to the next timer; once the world is
 * quiescent (nothing ready, no timer pending) it asks the check a last
 * time and then whether the program is done.
 *
 *   static void *build(vat_system *sys, void *ctx) { ...spawn, send... }
 *   static bool check(void *world, bool quiescent, char *why, size_t n);
 *   static bool done(void *world);
 *
 *   vat_sim_scenario sc = {.name = "bank", .setup = build,
 *                          .check = check, .done = done};
 *   vat_sim_options o;
 *   vat_sim_options_default(&o);
 *   o.strategy = VAT_SIM_PCT;
 *   o.fault_rate = 0.05;
 *   vat_sim_result r;
 *   vat_sim_run(&sc, &o, 1, 1000, &r);   // seeds 1..1000
 *   if (r.failed) fprintf(stderr, "%s\n%s\n", r.message, r.replay);
 *
 * A seed fails when the check returns false, when the world is quiescent
 * and the program is not done (a deadlock: nothing will ever happen
 * again), when it is not quiescent by the deadline on the virtual clock,
 * or when it runs more than max_turns turns (a livelock). The campaign
 * stops at the first failing seed and reports it.
 *
 * What is deterministic: everything the seed and the scenario decide.
 * The seed fixes the system's seed, the strategy's choices and the fault
 * plan; the world starts empty each time, so one seed run again runs the
 * same turns in the same order, with the same faults at the same steps,
 * and fails the same way (vat_sim_result.turns and .digest, a hash of the
 * sequence of choices and faults, are equal). This holds as long as the
 * scenario is deterministic itself: no wall clock, no threads, no
 * systems of its own with workers, no input from outside the world.
 *
 * Strategies (which ready vat runs next; the runtime's rules stay its
 * rules: a vat's messages from one sender keep their order, signals
 * overtake as they do, a muted vat is not ready). A step's choice is made
 * among the first 256 ready vats in the order they became ready, as the
 * deterministic mode's own draw is:
 *  - VAT_SIM_RANDOM: uniformly among the ready vats, at every step.
 *  - VAT_SIM_PCT: probabilistic concurrency testing (Burckhardt et al.,
 *    ASPLOS 2010). Each vat gets a random priority when it is first
 *    ready; each step runs the ready vat of highest priority. At d - 1
 *    change points, steps drawn uniformly from [1, k] (k the expected
 *    length of a run in steps), the vat chosen for that step is lowered
 *    below every vat not lowered yet, and below those lowered at earlier
 *    change points, and the choice is made again. In the paper's model
 *    (n threads, k steps) a bug that needs d ordering constraints is
 *    found with probability at least 1 / (n k^(d-1)) per seed. With
 *    d = 1 (no change point) a vat runs whenever it is ready unless one
 *    of higher priority is.
 *
 * Faults: with fault_rate > 0 each step draws, from the seed, whether a
 * fault strikes the vat chosen for that step (at most max_faults per
 * seed), and which:
 *  - VAT_SIM_KILL: the vat is killed (as vat_host_exit with `killed`:
 *    it ends before its next message, even if it traps exits; links and
 *    monitors see `killed`; what it has queued becomes dead letters).
 *  - VAT_SIM_FAIL: the vat's turn fails: the message it was about to
 *    handle is taken from it, its handler does not run, and the vat ends
 *    as a failed turn ends it (vat_fail) with the reason `sim_fault`.
 *    When the next message is not an ordinary one (a signal, an urgent
 *    message, a run of several sent by one turn), or the turn loop has
 *    something to do first for the vat (a signal that overtakes, an
 *    urgent message, a mute), or the vat's queue is counted for overload
 *    (vat/core.h), the fault waits.
 * A fault that cannot strike the step's vat (a FAIL as above, or a vat
 * that has ended and still runs to drop what it was sent) waits, and
 * strikes the vat of the next step where it can.
 * The faults that struck are reported with a failure (vat_sim_result.plan)
 * as "step N: kill LABEL" (the vat's label, or vat#I, I counting the vats
 * in the order they were first ready).
 *
 * Replay: set VAT_SIM_SEED=N in the environment to make every vat_sim_run
 * run seed N alone (with the options the program gives it), or call
 * vat_sim_replay with the same scenario and options. A failure's
 * vat_sim_result.replay is that line, ready to paste. With VAT_TRACE=FILE
 * set too, each world writes its trace of turns to FILE as it ends
 * (vat/trace.h), so a replay of one seed leaves that seed's trace there
 * (the last world's, when a program runs several campaigns).
 *
 * Parallel campaigns: with options.jobs other than 1, a campaign of more
 * than one seed runs in worker processes, copies of the caller made with
 * fork(2) (no exec). They take the seeds in small chunks, lowest first,
 * and none starts a seed above the lowest failing one found so far. The
 * result is what the same campaign run here, one seed after another,
 * would report: the lowest failing seed, run again in the calling
 * process, so that every field is exact and the replay is proven across
 * processes; seeds_run counts the seeds up to it; total_turns and
 * total_faults sum those seeds only (a worker may have run higher seeds
 * meanwhile: they are not counted). When no seed fails, the fields are
 * the last seed's, as its worker found them, with totals over all. Two
 * outcomes exist only in parallel:
 *  - a seed that fails in a worker and not the same way here (not failing,
 *    or another message, turn count or digest) is reported failed with its
 *    worker's figures and the message "not deterministic: ...": the
 *    scenario depends on something outside its world;
 *  - a worker that dies inside a seed (the program crashed, or called
 *    exit) fails that seed with the message "its worker process died
 *    ...", plan "unknown" and no figures: replay it with VAT_SIM_SEED
 *    (here, under a debugger).
 * A worker is a process with the calling thread alone. Its scenario runs
 * as it would here, but what it changes in memory stays in the worker
 * (a counter in the caller sees only the seeds run here), and it must not
 * touch systems made before the campaign that have worker threads (they
 * have no threads there). It writes no trace (VAT_TRACE): the failing
 * seed's run here does. The caller's buffered output is flushed before
 * the workers start, and each worker's when it ends; workers end with
 * _exit(2), running no atexit handler, and run none of the caller's
 * collector finalisers. The collector must handle fork (libgc's default
 * on Linux; the calls around fork(2) work in its manual mode too).
 *
 * Progress: while a campaign of more than one seed has run for a second,
 * and stderr is a terminal, a line on stderr shows the seeds run of the
 * campaign's count, seeds and turns per second and the seeds that failed,
 * redrawn four times a second and erased when the campaign ends. Nothing
 * is written when stderr is not a terminal. VAT_SIM_PROGRESS=0 in the
 * environment turns it off; VAT_SIM_PROGRESS=1 draws it from the start.
 *
 * The crash hook of the simulated systems is off (a fault would print a
 * report for each seed); a scenario that wants to see crashes monitors
 * its vats. Host thread; the calls run the worlds on the calling thread
 * (or, in parallel, in worker processes).
 */
#ifndef VAT_SIM_H
#define VAT_SIM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "vat/core.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum vat_sim_strategy {
  VAT_SIM_RANDOM = 0, /* uniform among the ready vats */
  VAT_SIM_PCT,        /* priorities with d - 1 change points */
} vat_sim_strategy;

typedef struct vat_sim_options {
  vat_sim_strategy strategy;
  /** PCT's depth d (at least 1; default 3) and expected run length k in
   *  steps (default 1000); ignored by VAT_SIM_RANDOM. */
  unsigned pct_depth;
  uint64_t pct_steps;
  /** Probability that a step brings a fault, in [0, 1]. 0 (the default):
   *  none. */
  double fault_rate;
  /** Faults at most per seed; 0: no limit. Default 1. */
  unsigned max_faults;
  /** A seed fails once it has run this many turns. Default 1000000. */
  uint64_t max_turns;
  /** The liveness deadline, in nanoseconds on the virtual clock from the
   *  world's start: it must be quiescent and done by then. Default 60 s. */
  uint64_t deadline_ns;
  /** Worker processes for a campaign's seeds (Parallel campaigns, above):
   *  1 (the default) runs them here, one after another; 0: one per
   *  online core; at most VAT_SIM_MAX_JOBS. Fewer start when there are
   *  fewer chunks of seeds than that. */
  unsigned jobs;
} vat_sim_options;

enum { VAT_SIM_MAX_JOBS = 1024 };

/** Fills `o` with the defaults: VAT_SIM_RANDOM, no faults. Any thread. */
void vat_sim_options_default(vat_sim_options *o);

typedef struct vat_sim_scenario {
  const char *name; /* for the report; may be NULL */
  /** Builds the program in `sys` (fresh, host-driven, deterministic,
   *  seeded): spawns its vats and sends what starts it, as a host thread
   *  does. Returns the world the checks look at (any pointer; the harness
   *  keeps it reachable for the collector while the seed runs), or NULL
   *  when it could not build it (the seed fails). */
  void *(*setup)(vat_system *sys, void *ctx);
  /** The invariant: true when it holds; else it writes why (a line) into
   *  `why` (`size` bytes) and returns false. Called after every turn with
   *  `quiescent` false and once at quiescence with it true (there it may
   *  check what must hold at the end). It runs between turns, on the
   *  host thread, and may read the vats' states directly: no vat runs
   *  meanwhile. NULL: no check. */
  bool (*check)(void *world, bool quiescent, char *why, size_t size);
  /** Whether the program did its job, asked at quiescence. NULL: done. */
  bool (*done)(void *world);
  void *ctx; /* handed to setup */
} vat_sim_scenario;

typedef enum vat_sim_fault_kind {
  VAT_SIM_KILL,
  VAT_SIM_FAIL
} vat_sim_fault_kind;

enum { VAT_SIM_MAX_REPORTED_FAULTS = 8 };

typedef struct vat_sim_fault {
  uint64_t step; /* the step it struck at, from 1 */
  vat_sim_fault_kind kind;
  unsigned vat; /* the vat's index: vats counted as they were first ready */
} vat_sim_fault;

typedef struct vat_sim_result {
  bool failed;
  /** The failing seed, or (none failed) the last one run. The fields
   *  below are that seed's. */
  uint64_t seed;
  uint64_t seeds_run;    /* seeds run, the failing one included; in
                            parallel, the seeds up to the failing one */
  uint64_t turns;        /* turns the seed ran */
  uint64_t steps;        /* the scheduler's choices in it */
  uint64_t digest;       /* hash of its choices and faults, in order */
  uint64_t now_ns;       /* virtual clock at its end, from the world's start */
  uint64_t total_turns;  /* over the seeds counted in seeds_run */
  uint64_t total_faults; /* over the seeds counted in seeds_run */
  unsigned nfaults;      /* faults that struck (the first
                            VAT_SIM_MAX_REPORTED_FAULTS are in `faults`) */
  vat_sim_fault faults[VAT_SIM_MAX_REPORTED_FAULTS];
  char message[256]; /* what failed; "" when nothing did */
  char plan[256];    /* the faults, "step 12: kill acct-b; ..."; "none" */
  char replay[256];  /* one line that runs the seed again */
} vat_sim_result;

/** Runs seeds [first, first + count), one fresh world each, and stops at
 *  the first that fails. With VAT_SIM_SEED set in the environment, runs
 *  that seed alone instead. `o` NULL: defaults. Returns VAT_OK whether or
 *  not a seed failed (see out->failed); an error when the campaign could
 *  not run.
 *  Host thread. Errors: VAT_EINVAL (NULL sc, sc->setup or out, count 0,
 *  fault_rate outside [0, 1], pct_depth 0, jobs above VAT_SIM_MAX_JOBS,
 *  VAT_SIM_SEED not a number), those of vat_system_new, and in parallel
 *  VAT_EIO (a pipe, the shared memory or a fork(2) failed, errno says
 *  which; the workers already started are stopped and waited for). */
int vat_sim_run(const vat_sim_scenario *sc, const vat_sim_options *o,
                uint64_t first, uint64_t count, vat_sim_result *out);

/** Runs `seed` alone, as the campaign ran it (VAT_SIM_SEED is not read).
 *  Errors as vat_sim_run. */
int vat_sim_replay(const vat_sim_scenario *sc, const vat_sim_options *o,
                   uint64_t seed, vat_sim_result *out);

#ifdef __cplusplus
}
#endif

#endif
