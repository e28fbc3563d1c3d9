/* Internal layouts and the functions the runtime's files share.
 *
 * Ownership in one paragraph: a vat is run by at most one worker at a time
 * (the mailbox protocol guarantees it), so everything in a vat except its
 * mailbox's `top` and its `dead` flag is touched by that worker alone. A
 * worker's run queue, next slot, pool and counters are its own; other
 * threads only steal from the queue and read the counters. The system's
 * mutex guards parking, quiescence and shutdown — never the message path.
 */
#ifndef VAT_INTERNAL_H
#define VAT_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "inject.h"
#include "mailbox.h"
#include "message.h"
#include "msgpool.h"
#include "runq.h"
#include "vat/core.h"

typedef struct vat__vat vat__vat;
typedef struct vat__worker vat__worker;

/* Per-vat state of the modules built on the core (exits, promises, timers),
 * made on first use so that a plain vat pays one pointer for all of them.
 * Each module owns its field and touches it only from the vat's own turns
 * and from its terminate hook. */
struct vat__exits;
struct vat__promises;
struct vat__timers;
typedef struct vat__cold {
  vat_value exit_reason; /* set when the vat ends, before `dead` */
  struct vat__exits *exits;
  struct vat__promises *promises;
  struct vat__timers *timers;
  /* The first entity's stop callback, kept here rather than in `exits`: a
   * short-lived vat that only wants its end seen costs two allocations,
   * not four. */
  vat_stop_fn first_stop;
  /* In its system's boundary registry (vat__boundary_note). */
  bool on_boundary;
} vat__cold;

/* A system-level message with its own delivery and drop behaviour: exit
 * signals, link requests, requests that carry a promise. Modules embed it
 * as the first member of their own struct. `deliver` runs as a turn of the
 * target vat (so it may use the turn API); `drop` runs instead when the
 * target is dead or its system stopped — never both, exactly one of them,
 * once. `w` is NULL when the drop happens on a host thread. */
typedef struct vat__signal vat__signal;
typedef struct vat__signal_class {
  void (*deliver)(vat_turn *turn, void *state, vat__signal *sig);
  void (*drop)(vat__worker *w, vat_ref *target, vat__signal *sig);
} vat__signal_class;
struct vat__signal {
  const vat__signal_class *cls;
};

/* Work a turn defers to its commit (and forgets if it fails). Commit keeps
 * program order: an effect takes place after the sends buffered before it
 * was deferred and before those buffered after it, and what it sends
 * through the turn goes out right after it. So whoever learns of an effect
 * (a host woken by a resolution, a vat sent a link) finds the turn's
 * earlier sends and signals already queued. An effect must not defer
 * another from its commit. */
typedef struct vat__effect vat__effect;
struct vat__effect {
  vat__effect *next;
  void (*commit)(vat_turn *turn, vat__effect *effect);
  vat__msg *after; /* the last send buffered before it; NULL: none */
};

/* An entity: behaviour plus state. A vat_ref points to one. Its state
 * follows it in the same allocation, aligned for any type (the struct's
 * alignment makes its size a multiple of 16). */
struct vat_entity {
  _Alignas(16) vat__vat *vat;
  vat_receive_fn receive;
};

static inline void *vat__state(vat_ref *e) {
  return e + 1;
}

struct vat__vat {
  /* Hot: touched by every message. */
  vat__mailbox mailbox;
  vat__vat *rq_next; /* link in a shared run queue or a turn's spawn list */
  vat_system *sys;
  /* Set once, with release, after cold->exit_reason is written. */
  _Atomic bool dead;
  uint32_t turns;  /* turns run, wrapping: lets an idle timer see silence */
  vat__cold *cold; /* see vat__cold_of(); the exit reason lives there */
  /* The first entity, made with the vat, so spawning is one allocation.
   * Must stay last: its state follows it. The fields above fill exactly one
   * cache line, so the entity needs no padding before it and a vat with a
   * small state fits the collector's 112-byte size class. */
  struct vat_entity first;
};

_Static_assert(offsetof(struct vat__vat, first) == 64,
               "the vat's header is one cache line");

/* Counters a worker writes alone and others read: relaxed atomics, so that
 * increments need no locked instruction. */
typedef _Atomic uint64_t vat__counter;

static inline void vat__count(vat__counter *c, uint64_t n) {
  atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + n,
                        memory_order_relaxed);
}

/* Cache-line aligned, with what thieves touch (the run queue) apart from
 * what only the owner writes, so two workers never share a line. */
#define VAT__CACHE_LINE 64

struct vat__worker {
  _Alignas(VAT__CACHE_LINE) vat__runq runq;
  _Alignas(VAT__CACHE_LINE) vat__vat *next; /* woken last: runs next */
  /* Vats that used up their budget while the run queue was empty: they
   * run after `next`, on this worker. Like `next`, not stolen (see
   * worker.c). */
  vat__vat *lane[2];
  unsigned lane_len;
  unsigned private_streak; /* runs from `next` or `lane` in a row */
  vat__msgpool pool;
  vat_system *sys;
  unsigned index;
  uint32_t ticks;
  uint32_t rng;
  vat__counter delivered, dead_letters, spawned, terminated;
  pthread_t thread;
};

enum vat__system_state {
  VAT__RUNNING,
  VAT__CLOSING, /* host sends refused; waiting for quiescence */
  VAT__STOPPED, /* workers stopping or stopped */
  VAT__DESTROYED,
};

struct vat__timer_service;

struct vat_system {
  vat_config cfg;
  struct vat__timer_service *timers; /* owned by timer.c */
  /* Threaded: one worker struct per thread. Host-driven: one worker struct
   * that whichever host thread is inside vat_system_run() acts as. */
  vat__worker **workers;
  unsigned nworkers;
  bool host_driven;
  int wake_fd;               /* host-driven: eventfd, readable on work */
  _Atomic bool wake_pending; /* a sender writes, or wrote, to wake_fd */
  /* Writes to wake_fd begun and finished, and `wake_done` as the last run
   * call to drain it saw it (owned by the run call); see host.c. */
  _Atomic uint64_t wake_begun, wake_done;
  uint64_t wake_seen;
  _Atomic bool host_running; /* a thread is inside vat_system_run() */
  uint64_t det_rng;          /* deterministic mode's generator */
  vat__inject inject;
  vat__msgdepot depot; /* free message nodes shared by the workers */
  _Atomic int state;

  /* Parking and quiescence. */
  pthread_mutex_t lock;
  pthread_cond_t park_cond;  /* parked workers wait here */
  pthread_cond_t quiet_cond; /* shutdown waits here */
  _Atomic unsigned parked;
  _Atomic unsigned spinning;
  _Atomic unsigned host_inflight; /* host calls between check and push */

  /* Time as timers see it: the monotonic clock, or a virtual clock the
   * host advances (deterministic mode). See vat__clock_now(). */
  bool virtual_clock;
  _Atomic uint64_t virtual_now_ns;

  /* Vats that others outside the system wait on (system.c). */
  pthread_mutex_t boundary_lock;
  struct vat__edge *boundary;
  size_t boundary_len, boundary_prune_at;

  /* Counts made outside the workers (host threads, other systems). */
  _Atomic uint64_t ext_dead_letters, ext_spawned, ext_terminated;
  uint64_t dropped_at_shutdown;
};

struct vat_turn {
  vat__worker *worker;
  vat__vat *vat;
  vat_ref *self;
  vat__msg *msg;
  vat__msg *out_head, *out_tail; /* buffered sends, in order */
  vat__vat *spawned;             /* vats spawned by this turn */
  vat__effect *effects_head, *effects_tail;
  bool failed;
  bool stop;
  bool committing;  /* running effects: they may not defer more */
  vat_value reason; /* failed or stop: how the vat ends */
};

/* The turn running on this thread, and the worker this thread is. Read on
 * every send: the initial-exec model makes that one load, not a call into
 * the dynamic linker (libvat is linked at start-up, not dlopen()ed). */
#define VAT__TLS _Thread_local __attribute__((tls_model("initial-exec")))
extern VAT__TLS vat_turn *vat__current_turn;
extern VAT__TLS vat__worker *vat__current_worker;

/* init.c */
extern const vat_atom *vat__atom_normal, *vat__atom_killed, *vat__atom_noproc;
int vat__check_host(void);
void vat__mark_thread_registered(void);

/* Inline: every send and every turn-side call starts with it. */
static inline int vat__check_turn(vat_turn *turn) {
  if (turn == NULL || turn != vat__current_turn)
    return VAT_ENOTINTURN;
  if (turn->failed)
    return VAT_ETURNFAILED;
  return VAT_OK;
}

/* alloc.c */
/** Zeroed, scanned collector memory; aborts with a message when memory is
 *  exhausted (the one failure the library does not return as a code). */
void *vat__gc_alloc(size_t size);

/* vat.c */
/** The vat's module state, made on first use. Only from the vat's turns
 *  or its terminate hooks. */
vat__cold *vat__cold_of(vat__vat *v);
int vat__vat_new(vat_system *sys, const vat_entity_def *def, vat__vat **out,
                 void **state_out);
void vat__terminate(vat__worker *w, vat__vat *v, vat_value reason);
static inline bool vat__is_dead(const vat__vat *v) {
  return atomic_load_explicit(&v->dead, memory_order_acquire);
}

/* turn.c */
/** Runs up to `budget` messages of `v`. Returns whether it has more. */
bool vat__run_batch(vat__worker *w, vat__vat *v, unsigned budget);

/* turn.c: effects */
void vat__turn_defer(vat_turn *turn, vat__effect *effect);

/* send.c */
/** Sends a signal from a turn (buffered like vat_send) or from a host
 *  thread (at once; VAT_ECLOSED once the system closes). */
int vat__send_signal(vat_turn *turn, vat_ref *to, vat__signal *sig);
int vat__host_send_signal(vat_ref *to, vat__signal *sig);
void vat__deliver(vat__worker *w, vat__msg *first, vat__msg *last);
void vat__dead_letter(vat__worker *w, vat__msg *m);
/** A message still queued when its system stopped: a signal's drop runs. */
void vat__drop_at_shutdown(vat__msg *m);
void vat__dispatch_dynamic(vat_turn *turn, void *state, void *arg);
/** Delivers one message at once, bypassing any turn's buffer: for a turn's
 *  commit effects, terminate hooks, the timer thread and host threads. On a
 *  worker it takes the worker's path; elsewhere the host path, except that a
 *  message refused because its system is closing is dropped (a signal's
 *  drop runs) instead. `sig` non-NULL sends that signal (fn, arg, value
 *  ignored). */
void vat__deliver_now(vat_ref *to, vat_fn fn, void *arg, vat_value value,
                      vat__signal *sig);
/* A signal whose data travels in the message node (its `value` and `aux`,
 * read back from turn->msg) rather than in an allocation of its own:
 * `sig` is then shared, usually static. For the signals a vat's end sends
 * by the thousand. */
void vat__deliver_signal_inline(vat_ref *to, const vat__signal *sig,
                                vat_value value, void *aux);

/* worker.c */
int vat__workers_start(vat_system *sys);
void vat__workers_join(vat_system *sys);
void vat__schedule(vat__worker *w, vat__vat *v);
void vat__schedule_external(vat_system *sys, vat__vat *v);
void vat__wake_all(vat_system *sys);

/* Module hooks the core calls. Each module implements its own in its own
 * file: exits.c, promise.c, timer.c. */
/** The vat ended with `reason` (its `dead` flag is set). */
void vat__exits_terminated(vat__worker *w, vat__vat *v, vat_value reason);
void vat__promises_terminated(vat__worker *w, vat__vat *v, vat_value reason);
void vat__timers_terminated(vat__worker *w, vat__vat *v, vat_value reason);
/** An entity with a stop callback was made in `v`. */
void vat__exits_track_stop(vat__vat *v, vat_ref *entity, vat_stop_fn fn);
/** The system starts (before its workers) and stops (after they joined). */
int vat__timers_start(vat_system *sys);
void vat__timers_stop(vat_system *sys);

/* timer.c, for promise.c's request timeouts. */
/** Arms a one-shot timer that runs `fn(arg)` on the timer thread (outside
 *  any turn, no timer lock held) at `deadline_ns`. Cancel with
 *  vat_timer_cancel. */
struct vat_timer *vat__timer_call_at(vat_system *sys, uint64_t deadline_ns,
                                     void (*fn)(void *arg), void *arg);

/* timer.c, for host-driven systems: the next deadline on the system's
 * clock (UINT64_MAX: none), and firing what is due at `now_ns`. */
uint64_t vat__timers_next_deadline(vat_system *sys);
void vat__timers_fire_due(vat_system *sys, uint64_t now_ns);

/* host.c */
/** Host-driven: makes the wake-up descriptor readable (once per run). */
void vat__host_wake(vat_system *sys);
int vat__host_open(vat_system *sys);
void vat__host_close(vat_system *sys);
/** Host-driven shutdown: runs the system until quiescent or the deadline. */
bool vat__host_drain(vat_system *sys, double timeout_s);

/* system.c */
static inline int vat__system_state(vat_system *sys) {
  return atomic_load_explicit(&sys->state, memory_order_acquire);
}
void vat__notify_quiet(vat_system *sys);
/** CLOCK_MONOTONIC now plus `seconds` (now for seconds <= 0), for timed
 *  waits on condition variables made with that clock. */
struct timespec vat__deadline_after(double seconds);
/** Nanoseconds on the system's clock (monotonic, or virtual). Any thread. */
uint64_t vat__clock_now(vat_system *sys);
bool vat__quiescent_locked(vat_system *sys);
/** Records that `v` holds state someone outside its system waits on: a
 *  request from a host thread or another system, a link or a monitor with
 *  a vat of another system. At shutdown, such vats break what they owe and
 *  fire those links and monitors with `shutdown`. Only from v's own turns;
 *  once per vat, so it costs nothing per message. */
void vat__boundary_note(vat__vat *v);

/* exits.c */
/** v's system stopped with v alive: sends EXIT(reason) along its links and
 *  DOWN(reason) to its monitors that lead out of the system. */
void vat__exits_system_stopped(vat__vat *v, vat_value reason);

#endif
