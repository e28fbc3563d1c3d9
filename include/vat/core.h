/* libvat — systems, vats, entities, refs, turns and messages.
 *
 * Who may call what (each function's comment says which applies):
 *  - "any thread": any thread registered with the library (see
 *    vat_thread_register); inside or outside a turn.
 *  - "inside a turn": only from a handler while it runs, with the vat_turn
 *    it was given. Anything else returns VAT_ENOTINTURN.
 *  - "host thread": a registered thread that is not running a turn (a turn
 *    must not block or bypass its own commit). Inside a turn: VAT_EINTURN.
 *
 * Memory: systems, vats, entities and refs are objects of the Boehm
 * collector. Keep pointers to them where the collector looks: stacks,
 * globals, and memory from GC_MALLOC. A ref never dangles: a ref to a dead
 * vat is safe to hold and to send to (the message is dropped and counted).
 *
 * If a call that takes a callback fails, the callback never runs.
 */
#ifndef VAT_CORE_H
#define VAT_CORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "vat/error.h"
#include "vat/value.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct vat_system vat_system;
typedef struct vat_turn vat_turn;
/* vat_ref is declared in vat/value.h: a ref to one entity; the entity knows
 * its vat. Compare refs with ==. */

/* --- Process set-up ----------------------------------------------------- */

/** Initialises the library and the collector. Call once from main() before
 *  any other thread exists; later calls do nothing and return VAT_OK.
 *  Every other call made before it returns VAT_ENOTINIT (or NULL).
 *  The library needs the collector to recognise interior pointers (its
 *  default): refs point inside vats. If the host turned that off
 *  (GC_set_all_interior_pointers(0)) it returns VAT_EGCCONFIG and the
 *  library stays uninitialised; it must stay on after vat_init too. */
int vat_init(void);

/** Registers the calling thread with the collector so it may use the
 *  library. The thread that called vat_init and the library's own workers
 *  are registered already; threads made with GC_pthread_create too.
 *  Returns VAT_OK (also when already registered) or VAT_ENOTINIT. */
int vat_thread_register(void);

/** Undoes vat_thread_register before the thread exits. After it, the thread
 *  must not touch library objects. On a thread the collector registered
 *  itself (made with GC_pthread_create; the thread that called vat_init) it
 *  does nothing else: the collector undoes that registration when the
 *  thread ends. Returns VAT_OK, VAT_ENOTREGISTERED or VAT_EINTURN. */
int vat_thread_unregister(void);

/* --- Systems ------------------------------------------------------------ */

/** Called, on the thread that drops it, for each message that reaches a dead
 *  vat or a stopped system. `selector` is NULL for a function message. Runs
 *  outside any turn; must be thread-safe and must not block. */
typedef void (*vat_dead_letter_fn)(void *ctx, vat_ref *target,
                                   const vat_atom *selector);

/** A vat's abnormal end, reported to vat_config.on_crash (see
 *  vat/observe.h for the report, the rules and the default hook). */
typedef struct vat_crash_report vat_crash_report;
typedef void (*vat_crash_fn)(void *ctx, const vat_crash_report *report);

/* --- Overload (see "Overload" below for the calls) ---------------------- */

/** What happens when a vat's queue passes its high mark. A vat is
 *  "counted" once it has overload settings of its own (vat_entity_def.
 *  overload, vat_overload_set) or its queue was found long (at least 128
 *  or its high mark) at the end of a batch that left messages waiting.
 *  Every sender to a counted vat (vats of any system, host threads) adds
 *  what it pushes to the vat's count, once per delivery; the vat corrects
 *  the count at the end of each such batch and when it goes idle. It is
 *  "overloaded" from when a push makes the count reach its high mark, or
 *  its own measure at a batch's end finds it there, until a later measure
 *  finds the queue below its low mark, or it goes idle, or it ends.
 *
 *  The bound, whatever the scheduling, for a counted vat that is not
 *  itself muted: its queue holds at most high - 1 messages, plus, from
 *  each vat sending to it, the rest of the turn whose sends reached the
 *  mark (under VAT_OVERLOAD_DROP and _FAIL, of the delivery that did),
 *  plus the message it is handling, plus what host threads queue with
 *  vat_host_send (never stopped), plus its own sends to itself since its
 *  last batch's end. The count overstates the queue by at most the
 *  messages the vat handled since it last corrected it (one batch), so
 *  it may be marked overloaded that much early. Before a vat is counted,
 *  its queue may pass the mark by what arrives before it first measures:
 *  on one worker at most VAT_SEND_BURST messages and one turn's sends
 *  from each sending vat; on more, what senders on other cores send
 *  meanwhile: give a vat overload settings at spawn for the bound from its
 *  first message. Signals (exits, links, monitors, a request's answer)
 *  are never dropped or refused by any policy. */
typedef enum vat_overload_policy {
  /** Zero: the system's policy (vat_config.overload), VAT_OVERLOAD_MUTE
   *  when that is VAT_OVERLOAD_DEFAULT too. */
  VAT_OVERLOAD_DEFAULT = 0,
  /** Lossless backpressure (Pony's): every message is queued; a vat of
   *  the same system whose turn sends to the overloaded vat is not
   *  scheduled after that turn (it is "muted", its own queue keeps
   *  filling) until the overloaded vat drains below its low mark, goes
   *  idle or ends. A vat is never muted on itself, nor while it is
   *  overloaded itself, so mutes cannot deadlock (every muted vat waits on
   *  a vat that runs). Host threads and vats of other systems are not
   *  muted: vat_host_send still queues at once; vat_host_send_wait
   *  waits. */
  VAT_OVERLOAD_MUTE,
  /** Drop newest: while the vat is overloaded, ordinary messages sent to
   *  it (by vats or host threads) are dropped on arrival, never queued,
   *  and counted in vat_stats.overload_dropped (not as dead letters, and
   *  not reported to the dead-letter hook); their senders are not told
   *  (a vat_host_send still returns VAT_OK) and are not muted. Messages
   *  already queued are all handled. */
  VAT_OVERLOAD_DROP,
  /** Fail: when the queue passes the high mark, the vat ends with the
   *  reason `overloaded` (an atom; abnormal: linked vats die unless they
   *  trap exits, monitors see it; no crash report, as no message was
   *  being handled) at that batch's end, or when it finds its queue empty
   *  if a sender's count found it there; the messages it left queued, and
   *  any ordinary ones sent from when it was overloaded, are dead letters
   *  (those at once, as they are sent). Senders are not muted. */
  VAT_OVERLOAD_FAIL,
  /** No limit: the queue is unbounded, nobody is muted, nothing dropped. */
  VAT_OVERLOAD_NONE,
} vat_overload_policy;

/** A vat's overload settings. Zero fields take the system's values. */
typedef struct vat_overload {
  vat_overload_policy policy;
  /** The queue length that makes the vat overloaded. System default
   *  VAT_QUEUE_HIGH_DEFAULT. */
  size_t high;
  /** Overloaded until its queue is below this. Default high / 4 (at least
   *  1); must not exceed high. */
  size_t low;
} vat_overload;

enum { VAT_QUEUE_HIGH_DEFAULT = 4096 };

/** A vat's batch of turns ends once they sent this many messages in runs
 *  to one vat (a turn's consecutive sends to the same vat, counted past
 *  the first of each run), so that the receivers run and measure their
 *  queues before it sends more: on one worker a flood passes its
 *  receiver's high mark by at most this much plus one turn's sends per
 *  sender, even before the receiver first ran. A turn that sends one
 *  message to each vat it sends to is never cut short by it. */
enum { VAT_SEND_BURST = 1024 };

typedef struct vat_config {
  /** Worker threads, one per core by default. 0 makes a host-driven
   *  system: no threads of its own; it runs only inside vat_system_run()
   *  (see vat/host.h). */
  unsigned workers;
  /** Messages a vat may handle per scheduling before others get a turn
   *  (fairness). Default 64; at least 1. */
  unsigned batch;
  /** Attempts an idle worker makes to find work before it parks (one in
   *  eight yields the processor). Default 512: about 40 µs, longer than a
   *  call to another process over loopback takes to come back, so a
   *  worker waiting on the answer is still looking when it comes, not
   *  parked (a wake-up costs about 25 µs each side). 0 parks at once. */
  unsigned spin;
  /** Optional dead-letter hook and its context. */
  vat_dead_letter_fn on_dead_letter;
  void *dead_letter_ctx;
  /** Host-driven systems only (workers 0): run ready vats in an order drawn
   *  from `seed`, and give timers a virtual clock that only
   *  vat_system_advance_clock() moves. Same seed and same inputs, same
   *  trace of turns. */
  bool deterministic;
  uint64_t seed;
  /** Called once for each vat that ends abnormally (vat/observe.h says
   *  when and where). Default: vat_crash_print, which writes one line to
   *  the FILE * in `crash_ctx`, or to stderr when that is NULL, for each
   *  such vat that nobody watched. NULL: no reports. */
  vat_crash_fn on_crash;
  void *crash_ctx;
  /** Turn tracing (see vat/trace.h). `trace_path` names the file the
   *  trace is written to when the system shuts down; "" traces without
   *  writing one then (vat_system_trace_write() writes on request). NULL
   *  (the default) leaves it to the environment: VAT_TRACE=FILE traces
   *  into FILE. */
  const char *trace_path;
  /** Events each worker's trace ring keeps, rounded up to a power of two;
   *  older ones are overwritten. 0: $VAT_TRACE_EVENTS if set, else 65536
   *  (3 MiB per worker). */
  size_t trace_events;
  /** The default overload settings of the system's vats (zeros: mute
   *  senders past VAT_QUEUE_HIGH_DEFAULT queued messages, until the queue
   *  is below a quarter of that). A vat may have its own (see
   *  vat_entity_def.overload and vat_overload_set). */
  vat_overload overload;
} vat_config;

/** Fills `cfg` with the defaults. Any thread. */
void vat_config_default(vat_config *cfg);

/** Creates a system and starts its workers. `cfg` NULL means defaults.
 *  Host thread. Errors: VAT_EINVAL (NULL out, batch 0, deterministic with
 *  workers, a bad overload policy or low > high), VAT_ENOTINIT,
 * VAT_ENOTREGISTERED, VAT_EINTURN, VAT_ENOMEM (threads, the wake-up
 * descriptor). */
int vat_system_new(const vat_config *cfg, vat_system **out);

/** Stops accepting sends from host threads, waits until the system is
 *  quiescent (no queued message, no vat running) or `timeout_s` seconds
 *  have passed, then stops the workers. Messages still queued then are
 *  dropped and counted (vat_stats.dropped_at_shutdown), a request's promise
 *  breaking with `shutdown`. No accepted message is lost: one whose sender
 *  (a host thread, or a vat of another system) was already past the
 *  system's state check is waited for, so once this returns, delivered +
 *  dead_letters + dropped_at_shutdown + overload_dropped counts every
 *  message accepted.
 *  Then everything outside the system waits on its vats settles with the
 *  reason `shutdown` (vat_atom_shutdown()): promises of requests they
 *  received from host threads (vat_host_call) or from vats of other
 *  systems, and did not answer, break; monitors held by vats of other
 *  systems get their down; links to vats of other systems carry the exit
 *  (which, not `normal`, ends a linked vat that does not trap exits).
 *  Returns VAT_OK when it reached quiescence and dropped nothing,
 *  VAT_ETIMEDOUT when it did not: the deadline passed first, or a vat of
 *  another system sent to it after it was quiescent and before its workers
 *  stopped (that message is dropped and counted). The workers are stopped
 *  either way. VAT_ECLOSED when already shut down.
 *  A host-driven system is run by this call, on the calling thread, until
 *  it is quiescent or the deadline passes (a turn that never returns is
 *  the one thing the deadline cannot cut short; with `timeout_s` 0 no turn
 *  runs); a vat_system_run() on another thread returns at its next batch
 *  of turns.
 *  Host thread; not from one of this system's own turns (VAT_EINTURN). */
int vat_system_shutdown(vat_system *sys, double timeout_s);

/** Shuts the system down (with no wait) if that was not done, and releases
 *  its threads. Later calls on `sys` return VAT_ECLOSED (each after its
 *  argument checks: a NULL out is still VAT_EINVAL), except the two
 *  snapshots, vat_system_stats and vat_system_inspect, which go on
 *  answering with the final counts (and vat_system_now, which has no
 *  error to return). Refs into it stay safe to hold and to send to (dead
 *  letters). Host thread. */
int vat_system_destroy(vat_system *sys);

/* Each message is counted once, in one of delivered, dead_letters,
 * dropped_at_shutdown and overload_dropped. Requests (vat/promise.h) and
 * the signals of vat/exits.h (exits, links, monitors, downs) count as
 * messages: a turn when they run, a dead letter or a drop at shutdown
 * when they do not, and the dead-letter hook hears of them (with a NULL
 * selector). */
typedef struct vat_stats {
  uint64_t delivered;           /* turns run */
  uint64_t dead_letters;        /* messages dropped at a dead vat */
  uint64_t dropped_at_shutdown; /* messages still queued when it stopped */
  uint64_t spawned;             /* vats spawned */
  uint64_t terminated;          /* vats ended */
  uint64_t overload_dropped;    /* dropped by VAT_OVERLOAD_DROP */
} vat_stats;

/** A snapshot of the system's counters (each exact once it is quiescent;
 *  final once vat_system_shutdown returned, and still readable after
 *  vat_system_destroy). Any thread. Errors: VAT_EINVAL (NULL sys or out). */
int vat_system_stats(vat_system *sys, vat_stats *out);

/* --- Entities and vats -------------------------------------------------- */

/** The fast message form: `fn` runs inside the target's vat, as one turn,
 *  with the target entity's state and the argument given at send time. */
typedef void (*vat_fn)(vat_turn *turn, void *state, void *arg);

/** The dynamic message form: a selector and a value, for entities that
 *  dispatch by name. */
typedef void (*vat_receive_fn)(vat_turn *turn, void *state,
                               const vat_atom *selector, vat_value value);

/** Runs when the entity's vat ends, however it ends, to release what the
 *  state holds. Runs on the thread that ran the vat's last turn (a worker,
 *  or the host thread inside vat_system_run), after that turn committed or
 *  was discarded, and outside any turn: the host-thread calls work there
 *  (vat_host_send, vat_host_spawn, vat_resolve with a NULL turn), the
 *  turn-only ones return VAT_ENOTINTURN. Must not block. */
typedef void (*vat_stop_fn)(void *state, vat_value reason);

/** What an entity is made of. */
typedef struct vat_entity_def {
  /** Bytes of state made with the entity: zeroed, aligned for any type,
   *  scanned by the collector (it may hold refs and GC pointers). */
  size_t state_size;
  /** Handles dynamic messages. NULL: dynamic messages to the entity are
   *  dropped as dead letters. */
  vat_receive_fn receive;
  /** Optional: runs once when the entity's vat ends. */
  vat_stop_fn on_stop;
  /** Optional: the vat's label when this definition spawns a vat
   *  (vat_spawn, vat_host_spawn...; copied, see vat/observe.h); ignored
   *  by vat_entity_new. */
  const char *label;
  /** Optional: the overload settings of a vat this definition spawns
   *  (copied; NULL: the system's); ignored by vat_entity_new. A bad
   *  policy or low > high makes the spawn fail with VAT_EINVAL. */
  const vat_overload *overload;
} vat_entity_def;

/** Spawns a new vat whose first entity is made from `def`; stores a ref to
 *  it in *out and, when `state_out` is not NULL, a pointer to its state in
 *  *state_out. The caller may initialise the state through that pointer
 *  until the end of the current turn (inside a turn) or until it first sends
 *  to the new vat (host thread); after that the state belongs to the vat.
 *  Inside a turn: the vat is part of the turn's effects; if the turn fails,
 *  the new vat never runs and dies with the turn's failure reason.
 *  Errors: VAT_EINVAL (NULL out/def), VAT_ENOTINTURN (NULL turn, or not
 *  the current one: as every turn-only call, checked first),
 *  VAT_ETURNFAILED. */
int vat_spawn(vat_turn *turn, const vat_entity_def *def, vat_ref **out,
              void **state_out);

/** vat_spawn from a host thread, into `sys`. Errors: VAT_EINVAL,
 *  VAT_EINTURN, VAT_ENOTINIT, VAT_ENOTREGISTERED, VAT_ECLOSED. */
int vat_host_spawn(vat_system *sys, const vat_entity_def *def, vat_ref **out,
                   void **state_out);

/** Makes another entity in the calling vat. Inside a turn. Same arguments
 *  and errors as vat_spawn. */
int vat_entity_new(vat_turn *turn, const vat_entity_def *def, vat_ref **out,
                   void **state_out);

/* --- Sending ------------------------------------------------------------ */

/** Sends `fn(arg)` to the entity `to`. Inside a turn: buffered, delivered
 *  when the turn commits, never if it fails. Messages from one vat to
 *  another arrive in the order they were committed. A message to a dead vat
 *  is dropped and counted as a dead letter, not reported here. `arg` is kept
 *  alive by the collector while the message is in flight.
 *  Errors: VAT_EINVAL (NULL to/fn), VAT_ENOTINTURN, VAT_ETURNFAILED. */
int vat_send(vat_turn *turn, vat_ref *to, vat_fn fn, void *arg);

/** Sends the dynamic message (`selector`, `value`) to `to`; otherwise as
 *  vat_send. Errors: as vat_send (VAT_EINVAL for a NULL selector). */
int vat_send_msg(vat_turn *turn, vat_ref *to, const vat_atom *selector,
                 vat_value value);

/** vat_send from a host thread: takes effect at once. Messages one host
 *  thread sends to one vat arrive in order. Thread-safe.
 *  Errors: VAT_EINVAL, VAT_EINTURN, VAT_ENOTINIT, VAT_ENOTREGISTERED,
 *  VAT_ECLOSED (the target's system is shutting down or destroyed). */
int vat_host_send(vat_ref *to, vat_fn fn, void *arg);

/** vat_send_msg from a host thread; errors as vat_host_send. */
int vat_host_send_msg(vat_ref *to, const vat_atom *selector, vat_value value);

/** Urgent messages (CAF's `urgent`), for control traffic: as vat_send,
 *  vat_send_msg and vat_host_send, but the message goes ahead of every
 *  ordinary message (and signal) queued for the target when the target
 *  takes it from its mailbox, behind only the urgent messages that came
 *  before it; so urgent messages from one sender keep their order, and a
 *  vat's ordinary messages may be overtaken by its own urgent ones. They
 *  bypass backpressure: sending one does not mute the sender, and
 *  VAT_OVERLOAD_DROP does not drop it. One a vat sends to itself (to any
 *  of its entities) is queued as its other self-sends, in order: it is an
 *  ordinary message then, and others' urgent messages go ahead of it.
 *  Errors: as the plain call. */
int vat_send_urgent(vat_turn *turn, vat_ref *to, vat_fn fn, void *arg);
int vat_send_msg_urgent(vat_turn *turn, vat_ref *to, const vat_atom *selector,
                        vat_value value);
int vat_host_send_urgent(vat_ref *to, vat_fn fn, void *arg);

/* --- Overload ----------------------------------------------------------- */

/** vat_host_send that respects backpressure: while `to`'s vat is
 *  overloaded (see vat_overload_policy) it waits, up to `timeout_s`
 *  seconds, for it to drain below its low mark, then sends. The plain
 *  vat_host_send never waits: it queues past any mark (or, under
 *  VAT_OVERLOAD_DROP, is dropped). With `timeout_s` 0 it does not wait.
 *  Host thread. Errors: as vat_host_send, and VAT_EAGAIN (timeout 0 and
 *  the vat is overloaded) or VAT_ETIMEDOUT (still overloaded at the
 *  deadline): then nothing was sent. A negative or NaN timeout:
 *  VAT_EINVAL. The vat drains only while its system runs: in a
 *  host-driven system, waiting on the thread that runs it waits out the
 *  timeout. */
int vat_host_send_wait(vat_ref *to, vat_fn fn, void *arg, double timeout_s);

/** Changes the calling vat's overload settings (zero fields: the system's
 *  values), from its next batch's end on. Inside a turn. Errors:
 *  VAT_EINVAL (NULL ov, a bad policy, low > high), VAT_ENOTINTURN,
 *  VAT_ETURNFAILED. */
int vat_overload_set(vat_turn *turn, const vat_overload *ov);

/** The number of messages queued for `ref`'s vat and not yet handled.
 *  Any thread, without stopping the vat. For a counted vat (see
 *  vat_overload_policy) it is the vat's count, read in constant time:
 *  exact while the vat is idle; while it runs, it counts too the message
 *  being handled and those handled since the vat's last batch's end, and
 *  misses the vat's sends to itself since then. For a vat not counted the
 *  queue is counted (time proportional to it, a queue found short at
 *  every batch's end), exact while the vat is idle, approximate while it
 *  runs. 0 for NULL or a dead vat. */
size_t vat_ref_queue_len(vat_ref *ref);

/** vat_ref_queue_len, counted no further than `max`: the smaller of the
 *  two. A vat not counted has its queue walked for at most `max`
 *  messages, so "does more than one wait?" costs the same whatever the
 *  queue's length. Any thread. 0 for NULL or a dead vat. */
size_t vat_ref_queue_len_max(vat_ref *ref, size_t max);

/** Whether `ref`'s vat is overloaded now (a snapshot). Any thread. */
bool vat_ref_overloaded(vat_ref *ref);

/** The reason a VAT_OVERLOAD_FAIL vat ends with: the atom "overloaded". */
const vat_atom *vat_atom_overloaded(void);

/* --- The current turn --------------------------------------------------- */

/** The ref of the entity this turn's message was sent to, or NULL when
 *  `turn` is not the caller's current turn. */
vat_ref *vat_self(vat_turn *turn);

/** The system running this turn, or NULL as for vat_self. */
vat_system *vat_turn_system(vat_turn *turn);

/** Ends the calling vat with reason `normal` once this turn commits:
 *  vat_stop_with(turn, normal). Inside a turn. Errors: VAT_ENOTINTURN,
 *  VAT_ETURNFAILED. */
int vat_stop(vat_turn *turn);

/** Ends the calling vat with `reason` once this turn commits (Erlang's
 *  exit/1 after its sends): all of the turn's effects take place first, in
 *  the order the turn made them, even those made after this call; then the
 *  vat ends, and its links and monitors see `reason` (see vat/exits.h: a
 *  `normal` reason kills no linked vat, exactly as vat_stop). Calling it
 *  again in the same turn replaces the reason; a later vat_fail wins over
 *  it. Unlike vat_fail, nothing is discarded. Inside a turn.
 *  Errors: VAT_EINVAL (null reason: nothing changes), VAT_ENOTINTURN,
 *  VAT_ETURNFAILED. */
int vat_stop_with(vat_turn *turn, vat_value reason);

/** Fails the turn: none of its effects (sends, spawns, stop) take place and
 *  the vat ends with `reason` (which must not be null: VAT_EINVAL). The
 *  handler should return soon after; further effects in this turn return
 *  VAT_ETURNFAILED. Inside a turn. Errors: VAT_ENOTINTURN, VAT_EINVAL,
 *  VAT_ETURNFAILED. */
int vat_fail(vat_turn *turn, vat_value reason);

/* --- Refs ---------------------------------------------------------------- */

/** True when both refs name entities of the same vat. Any thread. */
bool vat_ref_same_vat(vat_ref *a, vat_ref *b);

/** The system the ref's vat belongs to (NULL for a NULL ref). Any thread. */
vat_system *vat_ref_system(vat_ref *ref);

/** True once the ref's vat has ended (a snapshot: it may end right after
 *  this returns false). Any thread. */
bool vat_ref_is_dead(vat_ref *ref);

/** The exit reason of the ref's vat: null while it runs; `shutdown` once
 *  its system has stopped with the vat still alive (vat_ref_is_dead stays
 *  false for it: the vat was never ended one by one, but what it owed
 *  outside its system was settled with that reason; see
 *  vat_system_shutdown). Any thread. */
vat_value vat_ref_exit_reason(vat_ref *ref);

/** The well-known reasons, as atoms: "normal", "killed", "noproc". */
const vat_atom *vat_atom_normal(void);
const vat_atom *vat_atom_killed(void);
const vat_atom *vat_atom_noproc(void);

#ifdef __cplusplus
}
#endif

#endif
