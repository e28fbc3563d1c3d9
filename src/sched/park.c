/* Parking and quiescence: how idle workers are woken, and how shutdown
 * learns that a system has gone quiet and what it left queued.
 *
 * A system is quiescent when every worker is parked, no sender from
 * outside is mid-delivery (host_inflight, see core/deliver.c) and the
 * shared queue is empty. The last worker to park checks that under the
 * system's lock and wakes shutdown; senders from outside wake it when they
 * leave (vat__notify_quiet).
 */
#include <errno.h>

#include "core/deliver.h"
#include "core/flow.h"
#include "core/system.h"
#include "sched/sched.h"
#include "util/clock.h"

/* Wakes one parked worker if none is looking for work already, and none
 * was woken that has not started looking yet.
 *
 * One wake-up in flight at a time: without `waking`, every sender that
 * queued a vat while a woken worker was still on its way out of the futex
 * (tens of microseconds) found `parked` up and `spinning` down, and took
 * the system's lock to signal again: a spawner making vats took that lock
 * per vat, and with many parked workers a burst woke them all at once, to
 * find one vat each or nothing. The woken worker counts itself spinning,
 * takes `waking` down, and when it finds work and sees more waiting wakes
 * the next one (worker.c, found_work): wake-ups spread one worker at a
 * time, as fast as there is work for them, the way Go's scheduler passes
 * on its spinning token. */
void vat__wake_one(vat_system *sys) {
  /* seq_cst fence: orders the caller's queue push before these loads, as
   * the parking worker orders its `parked` increment before its last look
   * at the queues; one of the two sees the other. */
  atomic_thread_fence(memory_order_seq_cst);
  if (atomic_load_explicit(&sys->parked, memory_order_relaxed) == 0 ||
      atomic_load_explicit(&sys->spinning, memory_order_relaxed) != 0)
    return;
  /* seq_cst: a sender that finds `waking` up leaves its vat to the woken
   * worker, which takes `waking` down (seq_cst) before it looks at the
   * queues: in the single order of seq_cst operations this sender's push
   * and load come before that store, so that look sees the push. */
  if (atomic_exchange_explicit(&sys->waking, true, memory_order_seq_cst))
    return;
  pthread_mutex_lock(&sys->lock);
  /* Under the lock a worker counted parked is waiting on park_cond or
   * already signalled and on its way back; either takes `waking` down. */
  if (atomic_load_explicit(&sys->parked, memory_order_relaxed) != 0) {
    atomic_fetch_add_explicit(&sys->wakes, 1, memory_order_relaxed);
    pthread_cond_signal(&sys->park_cond);
  } else {
    atomic_store_explicit(&sys->waking, false, memory_order_seq_cst);
  }
  pthread_mutex_unlock(&sys->lock);
}

void vat__wake_all(vat_system *sys) {
  pthread_mutex_lock(&sys->lock);
  pthread_cond_broadcast(&sys->park_cond);
  pthread_mutex_unlock(&sys->lock);
}

bool vat__quiescent_locked(vat_system *sys) {
  return atomic_load_explicit(&sys->parked, memory_order_seq_cst) ==
             sys->nworkers &&
         atomic_load_explicit(&sys->host_inflight, memory_order_seq_cst) == 0 &&
         vat__inject_size(&sys->inject) == 0;
}

void vat__notify_quiet(vat_system *sys) {
  pthread_mutex_lock(&sys->lock);
  pthread_cond_broadcast(&sys->quiet_cond);
  pthread_mutex_unlock(&sys->lock);
}

/* Waits until every worker is parked with nothing queued, or the deadline. */
bool vat__wait_quiescent(vat_system *sys, double timeout_s) {
  struct timespec deadline = vat__deadline_after(timeout_s);
  pthread_mutex_lock(&sys->lock);
  bool quiet;
  while (!(quiet = vat__quiescent_locked(sys))) {
    if (pthread_cond_timedwait(&sys->quiet_cond, &sys->lock, &deadline) ==
        ETIMEDOUT) {
      quiet = vat__quiescent_locked(sys);
      break;
    }
  }
  pthread_mutex_unlock(&sys->lock);
  return quiet;
}

/* Waits until no sender from outside is between its state check and its
 * push. Called after STOPPED is published: a sender that comes later sees
 * it and drops its message itself, so the wait is for the few stores of
 * those already past the check, however long they were preempted. */
void vat__wait_senders(vat_system *sys) {
  pthread_mutex_lock(&sys->lock);
  while (atomic_load_explicit(&sys->host_inflight, memory_order_seq_cst) != 0)
    pthread_cond_wait(&sys->quiet_cond, &sys->lock);
  pthread_mutex_unlock(&sys->lock);
}

/* Empties a vat's mailbox after the workers stopped; returns how many
 * messages it held. Signals get their drop, so no promise waits for ever.
 * The vats muted on it (core/flow.h) are in no queue: counted with it. */
static uint64_t count_queued(vat__vat *v) {
  uint64_t n = 0;
  for (vat__msg *m; (m = vat__mailbox_pop_stopped(&v->mailbox)) != NULL; n++)
    vat__drop_at_shutdown(m);
  for (vat__vat *muted = vat__flow_take_muted(v), *next; muted != NULL;
       muted = next) {
    next = muted->rq_next;
    muted->rq_next = NULL;
    n += count_queued(muted); /* a muted vat mutes nobody: one level */
  }
  return n;
}

/* After the workers stopped: what was still queued is dropped, and said. */
uint64_t vat__drop_stranded(vat_system *sys) {
  uint64_t n = 0;
  for (unsigned i = 0; i < sys->nworkers; i++) {
    vat__worker *w = sys->workers[i];
    if (w->next)
      n += count_queued(w->next);
    for (unsigned j = 0; j < w->busy_len; j++)
      n += count_queued(w->busy[j]);
    for (vat__vat *v; (v = vat__deque_pop(&w->fresh)) != NULL;)
      n += count_queued(v);
    for (vat__vat *v; (v = vat__runq_pop(&w->runq)) != NULL;)
      n += count_queued(v);
  }
  for (vat__vat *v; (v = vat__inject_pop(&sys->inject)) != NULL;)
    n += count_queued(v);
  return n;
}
