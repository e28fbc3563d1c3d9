/* libvat — simulation testing: run a program under many schedules and
 * faults, one seed each, and replay the seed that breaks it.
 *
 * A scenario builds the program in a simulated world: a fresh host-driven
 * system in deterministic mode (vat/host.h), made by the harness for each
 * seed, and as many more systems, simulated machines, as the scenario
 * makes in it ("Worlds of several systems" below). The harness then runs
 * it one step at a time. A step is one choice
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
 * or when it runs more than max_turns turns (a livelock); and, on this
 * machine, when it takes more real time or memory than the options bound
 * a seed to (max_seed_time_ns, max_seed_memory: 60 s, 1 GiB). The campaign
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
 * among the first 256 ready vats of each system in the order they became
 * ready, as the deterministic mode's own draw is:
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
 * fault strikes (at most max_faults per seed), and which, among the kinds
 * fault_kinds enables (kill and fail unless it says otherwise). A fault
 * strikes the vat chosen for that step; one that cannot strike it waits,
 * and strikes the vat of the next step where it can. The kinds, and when
 * each can strike its vat (never a vat that has ended and still runs to
 * drop what it was sent):
 *  - VAT_SIM_KILL: the vat is killed (as vat_host_exit with `killed`:
 *    it ends before its next message, even if it traps exits; links and
 *    monitors see `killed`; what it has queued becomes dead letters).
 *  - VAT_SIM_FAIL: the vat's turn fails: the message it was about to
 *    handle is taken from it, its handler does not run, and the vat ends
 *    as a failed turn ends it (vat_fail) with the reason `sim_fault`.
 *    Only when its next message is an ordinary one (not a signal, an
 *    urgent message or a run of several sent by one turn), the turn loop
 *    has nothing to do first for the vat (a signal that overtakes, an
 *    urgent message, a mute), and its queue is not counted for overload
 *    (vat/core.h).
 *  - VAT_SIM_DELAY: what the vat's turn at this step sends to other vats
 *    is held back for 1 to max_delay_steps steps (the plan says how many)
 *    and then delivered, so that what other senders send those vats
 *    meanwhile arrives first. The runtime's rules stay rules: only the
 *    turn's plain and dynamic messages are held, and only when the turn
 *    commits no effects (vat_call's requests, like every signal, and
 *    urgent messages never are); what the same sender sends the same vat
 *    later never arrives before them (sending it releases them first);
 *    and whatever else reaches a vat (a signal, an urgent message, what
 *    a promise forwards, anything sent outside a turn: a dying vat's exit
 *    signals and down notifications, a timer) first releases everything
 *    held for that vat. Held messages are delivered when the world would
 *    otherwise go quiet, and at its end. Only the vat the step runs. In
 *    a world of several systems, on any of them, between vats of one
 *    system (what a turn sends another machine's vat by a ref is never
 *    held; what crosses a simulated network is late by its latency).
 *  - VAT_SIM_JITTER: the armed timer the vat set (vat_later, vat_every)
 *    that is due first fires later by 1 ns to max_jitter_ns on the
 *    virtual clock (the plan says how much); never earlier. A periodic
 *    timer keeps its period from the later time. Only while the vat has
 *    an armed timer.
 *  - VAT_SIM_TIMEOUT: the first request the vat received and has not
 *    answered whose caller asked for a timeout (vat_call, vat_host_call)
 *    breaks now with `timeout`, as though its deadline had passed; the
 *    vat's later answer is dropped, as any late answer. Only while the
 *    vat owes such an answer.
 *    A vat waiting for its timer or working on an answer is seldom the one
 *    a step runs: a drawn jitter or timeout that cannot strike the step's
 *    vat strikes the first vat after it, in the order first ready, that
 *    it can.
 *  - VAT_SIM_STOP: the world's system is stopped right after the step's
 *    turn, as vat_system_shutdown(sys, 0) stops it: no further turn runs;
 *    what is queued (and held) is dropped and counted, a request's promise
 *    breaking with `shutdown`; pending timers are cancelled; the vats
 *    still alive are not ended one by one (vat_ref_is_dead stays false,
 *    vat_ref_exit_reason reads `shutdown`) and their stop callbacks do not
 *    run. The scenario's check then runs once, with `quiescent` true, and
 *    must hold; `done` is not asked (a stopped program need not have
 *    finished). There vat_sim_system_stopped(sys) is true and the notes
 *    say "stop m0", so that an end-state check can tell a stopped world
 *    from a finished one. In a world of several systems it is the struck vat's
 *    machine that stops so, and the world goes on (below).
 * Faults at a time: in a world of several systems, a machine's crash and
 * an event source's faults (a simulated network's partitions and
 * disconnects: vat/sim_net.h) are drawn from the seed too (crash_chance
 * of vat_sim_system_options, a link's fault_rate), each at a time on the
 * world's clock rather than at a step, and strike when the clock gets
 * there (only while the world has something else to do: "Worlds of
 * several systems" below). They are faults of the run like the others:
 * in its plan, replayed from it, shrunk. (What the scenario asks for
 * itself, vat_sim_system_crash and vat_sim_net_fault, is part of the
 * scenario: every run has it, whatever the plan, and it is in
 * vat_sim_result.notes, not in the plan.)
 *
 * The faults that struck are reported with a failure (vat_sim_result.plan)
 * in a plan's text form, in the order they struck:
 *
 *   step 12: kill acct-b; step 30: delay vat#2 3 steps; step 41: jitter
 *   ticker +250ms; at 3223613ns: disconnect m0-bank; step 50: fail
 *   acct-a; at 40ms: crash m1; step 60: timeout server; at 1500us:
 *   partition m0-m1 for 3s; step 70: stop acct-a
 *
 * (one line; "none" for no fault). A vat is named by its label when that
 * is a plain word ([A-Za-z0-9_.-]) that no other vat seen had as the fault
 * struck, else as vat#I, I counting the vats in the order they were first
 * ready. A jitter, a fault's time and a partition's length are each a
 * whole number of ns, us, ms or s, exact (vat_sim_time_format). After
 * "at T:" comes what strikes then: "crash" and the machine's name, or the
 * text of a source's fault, as the source wrote it (vat_sim_source_fault;
 * the network's are "partition A-B for D" and "disconnect A-B", A-B the
 * link between machines A and B).
 *
 * An explicit plan: vat_sim_options.plan (or VAT_SIM_PLAN in the
 * environment, which wins) in that same form replaces the faults the seed
 * would draw, of both kinds (fault_rate, max_faults and fault_kinds are
 * then not read, and the crashes and source faults the seed draws do not
 * strike), while the seed still drives the schedule and all else. Each
 * fault at a step strikes the vat it names at its step; when it cannot
 * strike then (its vat not seen yet, or not in a state where that kind can
 * strike, as above), it waits, and strikes at the first later step where
 * it can; a fault whose vat never allows it never strikes
 * (vat_sim_result.plan_missed counts those). Faults due at one step
 * strike in the plan's order. A fault at a time strikes at its time, in
 * the order of the plan among those of one time, before that step looks
 * at what is ready; one whose machine is not there or is down never
 * strikes (plan_missed counts it too). One whose text no source knows
 * ("explode m0-m1"), or whose source finds nothing it names as it falls
 * due (a network fault on a link not made by then), is a mistake in the
 * plan: the run stops there and the campaign returns VAT_EINVAL, its
 * message naming the fault and what is wrong with it. So the
 * plan a run reports, pasted back with its seed, strikes the same faults
 * at the same steps and times and replays that run exactly (same turns,
 * digest, notes and message), whether its faults were drawn or planned. The
 * text is read strictly: anything not in the form above is refused with
 * VAT_EINVAL and a line in vat_sim_result.message saying where and what was
 * expected. A reported plan too long for vat_sim_result.plan ends with "..."
 * and cannot be pasted back (the seed alone still replays a drawn plan).
 *
 * Shrinking: when a seed fails, the campaign looks for a smaller run that
 * fails the same way (the same vat_sim_result.verdict), under the same
 * seed and options, with explicit plans made from the failing run's
 * faults, of both kinds: faults are dropped (halves, then quarters, ...
 * then one at a time) while the run still fails so, and then each fault
 * left is moved to an earlier step, or an earlier time for a fault at a
 * time (a binary search), while the run still fails so in no more turns,
 * which shortens it; both again while they change the plan. Fewer faults come
 * first: a shrunk run may take more turns than the failing one when it has
 * fewer faults. The result is in vat_sim_result.shrunk: its plan, message,
 * turns, digest, and a replay (the seed and VAT_SIM_PLAN, as Replay says)
 * that runs it again exactly. Cost: each candidate is one more run of the seed,
 * at most shrink_runs of them (default 200); the tests' failures with two to
 * six faults at a step took 6 to 19 runs, one with no fault takes none; a fault
 * at a time's search is over nanoseconds, some 20 to 40 runs each (the
 * network's bug program: one to six faults at a time shrunk in 43 to 119 runs).
 * Set shrink_runs to 0 to skip it.
 *
 * Replay: set VAT_SIM_SEED=N (decimal, or hexadecimal after 0x) in the
 * environment to make every vat_sim_run run seed N alone (with the
 * options the program gives it, and the plan in VAT_SIM_PLAN if set), or
 * call vat_sim_replay with the same scenario
 * and options (and the plan in options.plan). An empty VAT_SIM_SEED or
 * VAT_SIM_PLAN counts as unset (so `VAT_SIM_PLAN= prog` runs the
 * program's own plan); the plan of no faults is "none". A result's
 * vat_sim_result.replay is two lines. The first is the assignments to put
 * before the program's command in a shell, and nothing else, ready to
 * paste: "VAT_SIM_SEED=7", or, when the run followed an explicit plan,
 * "VAT_SIM_SEED=7 VAT_SIM_PLAN='step 12: kill acct-b'". The second is a
 * shell comment ("# ...") on what that assumes: the scenario, the strategy,
 * the faults (those the seed drew: at a step at the options' rate, and at
 * a time by the world's machines and sources, counted; or the plan's),
 * and the call that replays it in code.
 *
 * With VAT_TRACE=FILE set (vat/trace.h), the world of each seed a campaign
 * runs writes the trace of its turns to FILE as it ends, over the one
 * before, in virtual time; so FILE holds the last seed's, and after a
 * replay of one seed, that seed's run as it was found. One file, FILE
 * only: the runs that shrink a failure, the failing run's traced run (it
 * has its own file, below), a world's other machines and a parallel
 * campaign's workers read no VAT_TRACE (their runs would write over the
 * seed's, or into FILE.2, FILE.3, ... as other traced systems do).
 *
 * The failing run's trace: with vat_sim_options.trace_path (or
 * VAT_SIM_TRACE=FILE in the environment) a campaign that finds a failure
 * runs it once more (the shrunk run, when shrinking found one) with
 * tracing on, and writes that run's trace to the file (vat/trace.h): one
 * track per vat (named as plans name it), a slice per turn, an arrow per
 * message, and each fault that struck as an instant event on its vat's
 * track, named by its kind, with its step and its text in the plan
 * ("args": {"step": N, "fault": "step N: kill acct-b"}); a fault at a
 * time on the host's track, named "crash" or by its source's name
 * ("network"), with the world's step count then and its text ("at 3s:
 * crash m1"), and no "vat" (it strikes a machine or a link, not a vat). In a
 * world of several systems the trace is of the first system's turns only (the
 * scenario's own); every fault is marked there, wherever it struck. The trace
 * is in the world's virtual time (vat/trace.h: each turn 1 ns long, and a turn
 * after the clock moved at exactly the virtual time), a fault at the time of
 * its step's turn (a fault at a time: of the turn after it struck); and one
 * seed and plan traced again, in this process or another, write the same file
 * byte for byte.
 *
 * Parallel campaigns: with options.jobs other than 1, a campaign of more
 * than one seed runs in worker processes, copies of the caller made with
 * fork(2) (no exec). They take the seeds in small chunks, lowest first,
 * and none starts a seed above the lowest failing one found so far. The
 * result is what the same campaign run here, one seed after another,
 * would report: the lowest failing seed, run again in the calling
 * process, so that every field is exact and the replay is proven across
 * processes, and then shrunk and traced here as a serial campaign does
 * (workers do neither); seeds_run counts the seeds up to it; total_turns
 * and total_faults sum those seeds only (a worker may have run higher
 * seeds meanwhile: they are not counted). When no seed fails, the fields
 * are the last seed's, as its worker found them, with totals over all.
 * A seed that went past a bound (max_seed_time_ns, max_seed_memory) in a
 * worker is reported as that worker found it, and not run again here:
 * another run would pay as much again, and prove nothing of the seed.
 * Two outcomes exist only in parallel:
 *  - a seed that fails in a worker and not the same way here (not failing,
 *    or another message, turn count or digest) is reported failed with its
 *    worker's figures, verdict VAT_SIM_NOT_DETERMINISTIC and the message
 *    "not deterministic: ...", neither shrunk nor traced: the scenario
 *    depends on something outside its world;
 *  - a worker that dies inside a seed (the program crashed, or called
 *    exit) fails that seed with verdict VAT_SIM_WORKER_DIED, the message
 *    "its worker process died ...", plan "unknown" and no figures: replay
 *    it with VAT_SIM_SEED (here, under a debugger).
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

typedef enum vat_sim_fault_kind {
  VAT_SIM_KILL,
  VAT_SIM_FAIL,
  VAT_SIM_DELAY,
  VAT_SIM_JITTER,
  VAT_SIM_TIMEOUT,
  VAT_SIM_STOP,
} vat_sim_fault_kind;

/* vat_sim_options.fault_kinds: a set of kinds, VAT_SIM_FAULT(kind) each. */
#define VAT_SIM_FAULT(kind) (1u << (kind))
#define VAT_SIM_FAULTS_DEFAULT                                                 \
  (VAT_SIM_FAULT(VAT_SIM_KILL) | VAT_SIM_FAULT(VAT_SIM_FAIL))
#define VAT_SIM_FAULTS_ALL (VAT_SIM_FAULT(VAT_SIM_STOP + 1) - 1u)

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
  /** The kinds the seed draws from, VAT_SIM_FAULT(kind) each; 0 (the
   *  default): VAT_SIM_FAULTS_DEFAULT, kill and fail, drawn as they
   *  always were, so seeds keep their runs. */
  unsigned fault_kinds;
  /** A drawn delay holds for 1 to this many steps (default 8); a drawn
   *  jitter is 1 ns to this many (default 1 s). At least 1 when the kind
   *  is drawn. */
  uint64_t max_delay_steps;
  uint64_t max_jitter_ns;
  /** An explicit fault plan in the text form above; NULL (the default):
   *  the seed draws the faults. VAT_SIM_PLAN, when set, wins in
   *  vat_sim_run. The text is read once, when the call begins. */
  const char *plan;
  /** Runs shrinking may take after a failure (above); 0: no shrinking.
   *  Default 200. */
  unsigned shrink_runs;
  /** Where a campaign that finds a failure writes that run's trace
   *  (above); NULL (the default): VAT_SIM_TRACE, or nowhere. */
  const char *trace_path;
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
  /** Bounds on what one seed's run may cost this process, so that a
   *  campaign never looks hung: the real time it takes (its setup, steps
   *  and checks, on the monotonic clock; default 60 s) and how far it
   *  grows the collector's memory in use (its heap less its free bytes:
   *  what the run keeps, and its garbage not yet collected; default 1
   *  GiB). 0: no bound. Read between steps: a turn that never returns is
   *  not stopped. Past either, the seed fails, VAT_SIM_OUT_OF_TIME or
   *  VAT_SIM_OUT_OF_MEMORY, with a message naming the bound, and the
   *  campaign stops there as at any failure; it is neither shrunk nor
   *  traced (each run would cost as much again). Such a verdict depends
   *  on this machine and process, not on the seed alone: its replay runs
   *  the same turns, as far as the bound lets it. In the environment,
   *  VAT_SIM_MAX_SEED_TIME (a time as a plan writes one: "30s", "500ms")
   *  and VAT_SIM_MAX_SEED_MEMORY (bytes, or a whole number of KiB, MiB or
   *  GiB: "512MiB"), when set, win; "0" lifts the bound. */
  uint64_t max_seed_time_ns;
  uint64_t max_seed_memory;
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

enum {
  VAT_SIM_MAX_REPORTED_FAULTS = 32,
  VAT_SIM_PLAN_SIZE = 1024, /* a plan's text, its terminating NUL included */
  VAT_SIM_NOTES_SIZE = 512, /* vat_sim_result.notes, its NUL included */
};

typedef struct vat_sim_fault {
  uint64_t step; /* the step it struck at, from 1 */
  vat_sim_fault_kind kind;
  unsigned vat;    /* the vat's index: vats counted as they were first ready */
  uint64_t amount; /* a delay's steps, a jitter's nanoseconds; else 0 */
} vat_sim_fault;

/* How a seed ended; a failure's kind, which shrinking keeps. */
typedef enum vat_sim_verdict {
  VAT_SIM_PASSED,
  VAT_SIM_BROKE_INVARIANT, /* the check returned false */
  VAT_SIM_STUCK,           /* quiescent, and not done */
  VAT_SIM_MISSED_DEADLINE, /* not quiescent by deadline_ns */
  VAT_SIM_TOO_MANY_TURNS,  /* max_turns turns and not quiescent */
  VAT_SIM_SETUP_FAILED,    /* the scenario's setup returned NULL */
  VAT_SIM_RUN_FAILED,      /* a run call failed */
  /* Only in parallel campaigns (above): */
  VAT_SIM_NOT_DETERMINISTIC, /* it failed in a worker, not so here */
  VAT_SIM_WORKER_DIED,       /* its worker process died running it */
  /* Past a bound on this process's resources (vat_sim_options): */
  VAT_SIM_OUT_OF_TIME,   /* max_seed_time_ns of real time */
  VAT_SIM_OUT_OF_MEMORY, /* max_seed_memory more memory in use */
} vat_sim_verdict;

/* A failure shrunk (above). */
typedef struct vat_sim_shrunk {
  bool done;     /* shrinking ran on this failure */
  uint64_t runs; /* runs it took */
  uint64_t turns, steps, digest;
  unsigned nfaults;      /* faults at a step */
  unsigned timed_faults; /* faults at a time */
  char message[256];
  char plan[VAT_SIM_PLAN_SIZE];
  char replay[VAT_SIM_PLAN_SIZE + 256];
} vat_sim_shrunk;

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
  uint64_t total_faults; /* over the seeds counted in seeds_run, both kinds */
  vat_sim_verdict verdict;
  unsigned nfaults; /* faults at a step that struck (the first
                       VAT_SIM_MAX_REPORTED_FAULTS are in `faults`) */
  vat_sim_fault faults[VAT_SIM_MAX_REPORTED_FAULTS];
  unsigned timed_faults; /* faults at a time that struck (crashes, a
                            source's: "Faults at a time" below), in `plan` */
  unsigned plan_missed;  /* an explicit plan's faults that never struck */
  char message[256];     /* what failed; "" when nothing did */
  char plan[VAT_SIM_PLAN_SIZE]; /* the faults, "step 12: kill acct-b; ...";
                                   "none" */
  /** What runs the seed again (Replay, above): a line of assignments to
   *  paste before the program's command, "VAT_SIM_SEED=7" (and
   *  " VAT_SIM_PLAN='...'" after an explicit plan), then a "# ..." line
   *  on the scenario and options it assumes. */
  char replay[VAT_SIM_PLAN_SIZE + 256];
  /** What the world's machines and event sources went through (crashes,
   *  a network's partitions and disconnects: "Worlds of several systems"
   *  below), in order, each with its time on the virtual clock:
   *  "2.500 ms: partition m0-m1 for 3.000 s; 40.000 ms: crash m1";
   *  "none". They come from the seed too: the replay line runs them
   *  again. */
  char notes[VAT_SIM_NOTES_SIZE];
  vat_sim_shrunk shrunk; /* when it failed */
  bool trace_written;    /* the failing run's trace is in the file */
} vat_sim_result;

/** Runs seeds [first, first + count), one fresh world each, and stops at
 *  the first that fails. With VAT_SIM_SEED set in the environment, runs
 *  that seed alone instead. `o` NULL: defaults. Returns VAT_OK whether or
 *  not a seed failed (see out->failed); an error when the campaign could
 *  not run.
 *  Host thread. Errors: VAT_EINVAL (NULL sc, sc->setup or out, count 0,
 *  fault_rate outside [0, 1], an unknown strategy, pct_depth, pct_steps
 *  or max_turns 0, an unknown fault kind, a drawn kind's maximum 0, jobs
 *  above VAT_SIM_MAX_JOBS, VAT_SIM_SEED not a number, VAT_SIM_MAX_SEED_TIME
 *  or VAT_SIM_MAX_SEED_MEMORY not of their forms, a plan that does not
 *  parse: out->message, when out is not NULL, names the option or the
 *  variable and says why; a plan's fault at a time refused as it fell
 *  due, above: the campaign stops at that seed, out->message names the
 *  fault and why, out->failed is false),
 *  those of vat_system_new: then the campaign stops at the seed whose
 *  world could not be made, and out->seed is that seed, out->message says
 *  why, out->failed is false and its other figures are zero; and in
 *  parallel VAT_EIO (a pipe, the shared memory or a fork(2) failed, errno
 *  says which; the workers already started are stopped and waited for). */
int vat_sim_run(const vat_sim_scenario *sc, const vat_sim_options *o,
                uint64_t first, uint64_t count, vat_sim_result *out);

/** Runs `seed` alone, as the campaign ran it, with o->plan if given
 *  (VAT_SIM_SEED and VAT_SIM_PLAN are not read). Errors as vat_sim_run. */
int vat_sim_replay(const vat_sim_scenario *sc, const vat_sim_options *o,
                   uint64_t seed, vat_sim_result *out);

/* --- Worlds of several systems: simulated machines -----------------------
 *
 * A scenario may make more systems in its world (vat_sim_system_new), each
 * a machine of its own: host-driven, deterministic, its seed drawn from
 * the world's. The harness runs them as one. A step chooses among the
 * ready vats of every system that has not crashed or stopped, by the
 * world's
 * strategy: VAT_SIM_RANDOM uniformly over all of them, VAT_SIM_PCT by
 * priorities shared by every system (a vat's index counts the vats of all
 * systems as they were first ready). (A step that ran no turn, a dead vat
 * dropping what it was sent, is followed by one among its own system's
 * ready vats.) When nothing is ready, the world's one virtual clock moves,
 * for every system at once, to the earliest thing due in any of them: a
 * timer, a crash, an event source's event or fault. The liveness
 * deadline counts all of them; the world is quiescent when no system has
 * a vat ready or a timer armed and no source an event pending: a crash or
 * a source's fault planned for later does not keep it going (and never
 * strikes). Faults strike vats of any system alike.
 * The same seed runs the same turns of the same systems in the same order,
 * with the same digest.
 *
 * Vats of different systems should talk only as programs on different
 * machines do: over connections (vat/sim_net.h joins machines with
 * libvat's real CapTP connections over a simulated network). A ref of
 * another system's vat works as it does between any two systems, carried
 * by no network, which no fault can reach.
 *
 * A machine crash (vat_sim_system_crash, or drawn when the system is made:
 * vat_sim_system_options) freezes the system where it stands: none of its
 * vats runs again, none of its timers fires, what it was sent waits for
 * ever, and no vat ends (no exit signal, no monitor fires: the other
 * machines learn of it as a network shows it, by silence). It is shut
 * down with the world. The crash is in vat_sim_result.notes; a drawn one
 * is a fault at a time of the run's plan too ("at 40ms: crash m1").
 *
 * A stop fault (VAT_SIM_STOP) that strikes a vat stops that vat's machine
 * after the step, as vat_system_shutdown(sys, 0) stops a system: what it
 * has queued (and held by delay faults) is dropped and counted, its
 * pending timers are cancelled, its vats read `shutdown` and are not
 * ended one by one. The other machines run on: the world ends as any
 * world does, its check asked at quiescence and then `done` (a world of
 * one system ends at the stop instead, as above). A stop is a shutdown,
 * not a crash: the machine's own promises break, its queues are
 * emptied; but as its connection vats are not ended one by one they
 * write nothing, and to the other machines it is silent as a crashed
 * one (the network drops what is sent to it). It is in the plan as the
 * fault that struck, and in vat_sim_result.notes as "stop NAME";
 * vat_sim_system_stopped says so.
 *
 * Event sources. What a world simulates beyond its systems (libvat-net's
 * network: vat/sim_net.h) registers as a source: the time of its next
 * event, and a call that fires what is due. The clock goes to its events
 * as to timers; a world with one pending is not quiescent; each firing is
 * mixed into the digest. A source draws from the world's seed
 * (vat_sim_draw), so the seed replays what it does. The faults it draws
 * it hands to the world as faults at a time (vat_sim_source_fault: a
 * text, which the world hands back to its strike call when their time
 * comes), so that they are in the plan, replayed from it and shrunk; what
 * each fault did, it reports in the notes (vat_sim_note).
 *
 * Times are on the world's virtual clock as vat_system_now reads it on
 * any of its systems (they move together, from 0 at the world's start).
 * The calls below name the world by one of its systems, and are made
 * while it runs (from its scenario's setup or check, a source's calls,
 * or where one says so a turn of its vats), on the thread that runs it;
 * a system of no world running there is VAT_EINVAL. */

enum { VAT_SIM_MAX_SYSTEMS = 16 };

typedef struct vat_sim_system_options {
  /** Its name in reports and plans: a word of [A-Za-z0-9_.], at most 31
   *  bytes, not "m" and a number, no other machine's (copied); NULL: "m"
   *  and its index in the world (the scenario's first system is m0). */
  const char *name;
  /** The probability, drawn from the world's seed as the system is made,
   *  that this machine crashes, at a time drawn uniformly from [now, now
   *  + crash_window_ns): a fault at a time ("at T: crash NAME"), which an
   *  explicit plan replaces. Default 0: never. */
  double crash_chance;
  uint64_t crash_window_ns; /* default 1 s; at least 1 with a chance */
} vat_sim_system_options;

/** Fills `o` with the defaults. Any thread. */
void vat_sim_system_options_default(vat_sim_system_options *o);

/** Makes one more system in the world of `sys` (*out): host-driven,
 *  deterministic, its seed drawn from the world's, its clock at the
 *  world's time, no crash hook. The harness runs it, and shuts it down
 *  and destroys it when the world ends: the scenario must not. `o` NULL:
 *  defaults. Not inside a turn. Errors: VAT_EINVAL (NULL out, sys of no
 *  running world, crash_chance outside [0, 1] or a window of 0, a name
 *  not of the form above), VAT_EINTURN, VAT_EBUSY (the world has
 *  VAT_SIM_MAX_SYSTEMS, or a machine of that name), and those of
 *  vat_system_new. */
int vat_sim_system_new(vat_system *sys, const vat_sim_system_options *o,
                       vat_system **out);

/** Crashes the machine of `sys` at `at_ns` on the world's clock (before
 *  the next step when that is not later than now), as above, unless a
 *  crash is due before that. Also inside a turn: the crash comes between
 *  steps. Errors: VAT_EINVAL. A crashed system: VAT_OK, nothing more. */
int vat_sim_system_crash(vat_system *sys, uint64_t at_ns);

/** Whether the machine of `sys` has crashed (false outside a world). */
bool vat_sim_system_crashed(vat_system *sys);

/** Whether the machine of `sys` was stopped by a stop fault (false
 *  outside a world), in a world of one system as in one of several (there
 *  the check's last call sees it true): see VAT_SIM_STOP. */
bool vat_sim_system_stopped(vat_system *sys);

/** The name of `sys` in reports; NULL when no world running here has it. */
const char *vat_sim_system_name(vat_system *sys);

typedef struct vat_sim_source {
  /** Its name in the failing run's trace, where its faults are marked
   *  ("network"); NULL: "source". */
  const char *name;
  /** The time of its next event on the world's clock; UINT64_MAX: none.
   *  One due (at or before now) fires before the next step. A pending
   *  event keeps the world from being quiescent. */
  uint64_t (*next_event)(void *ctx);
  /** The time of its next fault (may be NULL: none). It fires as an
   *  event does when the clock gets there, but does not keep the world
   *  going: a world with nothing else to do is quiescent, and a fault
   *  planned for later never strikes (nor does a crash planned for
   *  later). */
  uint64_t (*next_fault)(void *ctx);
  /** Fires every event due at or before `now`, from the host side (it
   *  may send to the world's vats with vat_host_send, make connections,
   *  make systems); returns a hash of what it did, for the digest. */
  uint64_t (*fire)(void *ctx, uint64_t now);
  /** A system of the world went down: it crashed, or a stop fault
   *  stopped it (may be NULL). It runs no more. */
  void (*down)(void *ctx, vat_system *sys);
  /** The world ends, before its systems are shut down: what the source
   *  holds outside the collector goes now (may be NULL). */
  void (*ended)(void *ctx);
  /** Strikes now one of its faults at a time, `text` as it gave it to
   *  vat_sim_source_fault or as a plan holds it (may be NULL: it has none
   *  a plan can name). Returns VAT_OK when it struck (it notes it, with
   *  vat_sim_note, as any fault it makes), with a hash of what it did in
   *  *hash, for the digest; VAT_ENOTFOUND when `text` is one of its
   *  faults but what it names is not there (the fault does not strike; a
   *  plan's is refused, above); VAT_EINVAL when `text` is none of its
   *  faults (the world asks its next source; a plan's fault no source
   *  knows is refused). */
  int (*strike)(void *ctx, const char *text, uint64_t *hash);
} vat_sim_source;

/** Registers `src` (kept by address: give it static storage) with `ctx`
 *  in the world of `sys`, until the world ends. Errors: VAT_EINVAL (NULL
 *  src or ctx, next_event or fire missing, no world), VAT_EBUSY (src is
 *  registered in that world already). */
int vat_sim_source_add(vat_system *sys, const vat_sim_source *src, void *ctx);

/** The ctx `src` is registered with in the world of `sys`; NULL when it
 *  is not, or no world runs. */
void *vat_sim_source_find(vat_system *sys, const vat_sim_source *src);

/** A number drawn from the world's seed for its sources: a stream of its
 *  own, so drawing changes neither the schedule nor the harness's
 *  faults. 0 when no world runs `sys`. */
uint64_t vat_sim_draw(vat_system *sys);

/** A fault at a time that `src`, registered in the world of `sys`, drew
 *  from the world's seed (vat_sim_draw): the world strikes it at `at_ns`
 *  on its clock (before the next step, when that is not later than now)
 *  by calling src->strike(ctx, text), and reports it in the run's plan as
 *  "at T: text" (T as vat_sim_time_format writes it). Under an explicit
 *  plan the call does nothing and returns VAT_OK: the plan's faults
 *  replace the seed's, and a source that draws the same either way keeps
 *  its later draws as they were. `text` (copied): printable ASCII, at
 *  most 120 bytes, with no ';' or "'", no blank at either end, not
 *  beginning "crash " (the harness's own word); it must say all the fault
 *  is (what it strikes, how long), for a plan to strike it again from the
 *  text alone. Errors: VAT_EINVAL (no world, src not registered there or
 *  without strike, a bad text). */
int vat_sim_source_fault(vat_system *sys, const vat_sim_source *src,
                         uint64_t at_ns, const char *text);

/** Writes `ns` as a plan writes a time: a whole number in the largest
 *  unit that states it exactly, "3s", "1500ms", "250us", "7ns" ("0s" for
 *  0). Returns what snprintf returns. Any thread. */
int vat_sim_time_format(uint64_t ns, char *buf, size_t size);

/** Reads a time so written at the start of `text` (digits, then ns, us,
 *  ms or s, no blank between nor a word character after), into *ns, and
 *  where it ends into *end (may be NULL). Errors: VAT_EINVAL (NULL text
 *  or ns, no such time there, past UINT64_MAX ns). Any thread. */
int vat_sim_time_parse(const char *text, uint64_t *ns, const char **end);

/** Reports a fault a source made: `text` (cut at 120 bytes) goes into
 *  vat_sim_result.notes with the time, and into the digest. Errors:
 *  VAT_EINVAL (NULL text, no world). */
int vat_sim_note(vat_system *sys, const char *text);

#ifdef __cplusplus
}
#endif

#endif
