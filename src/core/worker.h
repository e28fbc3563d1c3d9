/* A worker: a thread that runs vats (or, in a host-driven system, the one
 * context whichever host thread is inside vat_system_run() acts as). The
 * layout lives here, with the core, because the core's turn loop and
 * delivery use its pool and counters on every message; the policy that
 * fills its queues lives in sched/.
 *
 * A worker's run queue, next slot, busy list, pool and counters are its
 * own; other threads only steal from the queue and read the counters.
 */
#ifndef VAT_CORE_WORKER_H
#define VAT_CORE_WORKER_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "core/deque.h"
#include "core/msgpool.h"
#include "core/runq.h"
#include "core/vat.h"
#include "util/objcache.h"

/* Counters a worker writes alone and others read: relaxed atomics, so that
 * increments need no locked instruction. */
typedef _Atomic uint64_t vat__counter;

static inline void vat__count(vat__counter *c, uint64_t n) {
  atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + n,
                        memory_order_relaxed);
}

/* Cache-line aligned, with what thieves touch (the run queue) apart from
 * what only the owner writes, so two workers never share a line. */
struct vat__worker {
  /* Vats that have waited: budgets or private runs used up, vats from the
   * shared queue or stolen. Oldest first, for the owner and thieves. */
  _Alignas(VAT__CACHE_LINE) vat__runq runq;
  /* Vats just woken, displaced from `next`: newest first for the owner,
   * oldest first for thieves (sched/worker.c). */
  _Alignas(VAT__CACHE_LINE) vat__deque fresh;
  _Alignas(VAT__CACHE_LINE) vat__vat *next; /* woken last: runs next */
  /* Vats that used up their budget while the run queue was empty: they
   * run after `next`, on this worker. Like `next`, not stolen (see
   * sched/worker.c). */
  vat__vat *busy[2];
  unsigned busy_len;
  unsigned private_streak; /* runs from `next` or `busy` in a row */
  /* Messages the current batch's turns sent in runs to one vat, past the
   * first of each run (core/flow.h, bursts). */
  unsigned burst;
  vat__msgpool pool;
  /* The header of the current turn's last run of sends to one vat, once
   * it has two messages, until its commit pushes it (core/send.c); and
   * the send an effect was deferred after, which no run may extend (a
   * stale one only makes a run start later). Here, beside the pool every
   * send touches, not in the turn, which every turn would have to clear. */
  vat__msg *run_header;
  vat__msg *run_cut;
  /* This worker's trace ring (core/trace.h); NULL unless the system is
   * traced, which the hot path tests once per turn and per commit. */
  struct vat__trace_ring *trace;
  vat_system *sys;
  uint32_t ticks;
  uint32_t fresh_run; /* vats from `fresh` in a row (sched/worker.c) */
  /* Vats went on `fresh` since the last wake-up (vat__pay_wake). */
  bool wake_owed;
  uint32_t rng;
  vat__counter delivered, dead_letters, spawned, terminated;
  /* For snapshots (vat_system_inspect), off the message path: vats taken
   * from other workers, parks, and nanoseconds spent parked; `park_since`
   * is when the current park began (0: not parked), so a snapshot counts
   * a park still going on. Written by the worker alone. */
  vat__counter steals, parks, idle_ns, park_since;
  /* The vats this worker's turns spawn come from here (util/objcache.h). */
  vat__objcache objects;
  pthread_t thread;
};

#endif
