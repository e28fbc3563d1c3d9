/* The scheduler's blocks: a runner's queues (one per worker, embedded in
 * core/worker.h's vat__worker) and a system's (embedded in vat_system).
 *
 * A runner's run queue, next slot, busy list and counters are its own;
 * other runners only steal from its queues and read its counters.
 */
#ifndef VAT_SCHED_QUEUES_H
#define VAT_SCHED_QUEUES_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "sched/deque.h"
#include "sched/inject.h"
#include "sched/runq.h"
#include "sched/task.h"
#include "util/counter.h"
#include "util/cpu.h"

typedef struct vat__sched vat__sched;

/* Cache-line aligned, with what thieves touch (the run queue, the fresh
 * deque) apart from what only the owner writes, so two runners never
 * share a line. */
typedef struct vat__runner {
  /* Vats that have waited: budgets or private runs used up, vats from the
   * shared queue or stolen. Oldest first, for the owner and thieves. */
  _Alignas(VAT__CACHE_LINE) vat__runq runq;
  /* Vats just woken, displaced from `next`: newest first for the owner,
   * oldest first for thieves (place.c, pick.c). */
  _Alignas(VAT__CACHE_LINE) vat__deque fresh;
  _Alignas(VAT__CACHE_LINE) vat__task *next; /* woken last: runs next */
  /* Vats that used up their budget while the run queue was empty: they
   * run after `next`, on this runner. Like `next`, not stolen (place.c). */
  vat__task *busy[2];
  unsigned busy_len;
  unsigned private_streak; /* runs from `next` or `busy` in a row */
  uint32_t ticks;          /* looks for work (pick.h) */
  uint32_t fresh_run;      /* vats from `fresh` in a row (pick.h) */
  /* Vats went on `fresh` since the last wake-up (vat__pay_wake). */
  bool wake_owed;
  uint32_t rng; /* steal victims */
  vat__sched *sched;
  /* Vats taken from other runners, for snapshots. */
  vat__counter steals;
} vat__runner;

struct vat__sched {
  /* The system's runners, fixed once it starts; one for a host-driven
   * system, which whichever host thread runs it acts as. */
  vat__runner **runners;
  unsigned nrunners;
  bool host_driven;
  vat__inject inject; /* the shared queue */

  /* Parking and quiescence (park.c). The lock guards them, never the
   * message path. */
  pthread_mutex_t lock;
  pthread_cond_t park_cond;  /* parked runners wait here */
  pthread_cond_t quiet_cond; /* shutdown waits here */
  _Atomic unsigned parked;
  /* Of those parked, the ones blocked in the idle poller instead of on
   * park_cond (sched/poller.h); written under the lock. */
  unsigned polling;
  _Atomic unsigned spinning;
  /* A runner waits to take the right to poll (loop/threads.c), counted
   * neither parked nor spinning: the others park where senders reach them. */
  _Atomic bool acquiring;
  /* A parked runner was signalled and has not yet counted itself
   * spinning: senders leave the waking of more to it (park.c). */
  _Atomic bool waking;
  _Atomic uint64_t wakes;         /* signals sent to parked runners (tests) */
  _Atomic unsigned host_inflight; /* senders from outside mid-delivery */

  /* Host-driven wake-ups (wake.c). */
  int wake_fd;               /* eventfd, readable on work */
  _Atomic bool wake_pending; /* a sender writes, or wrote, to wake_fd */
  /* Writes to wake_fd begun and finished, and `wake_done` as the last run
   * call to drain it saw it (owned by the run call). */
  _Atomic uint64_t wake_begun, wake_done;
  uint64_t wake_seen;

  uint64_t det_rng; /* deterministic mode's generator (pick.c) */
  /* Deterministic mode: when set, chooses the next vat instead of the
   * uniform draw: given the ready tasks, oldest first, returns the index
   * of the one to run (pick.c). Set before the first run call. */
  uint32_t (*det_choose)(void *ctx, vat__task *const *ready, uint32_t n);
  void *det_choose_ctx;
};

#endif
