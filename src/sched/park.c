/* Parking and quiescence: how idle runners are woken, and how shutdown
 * learns that a system has gone quiet.
 *
 * A system is quiescent when every runner is parked, no sender from
 * outside is mid-delivery (host_inflight, which core/deliver.c counts)
 * and the shared queue is empty. The last runner to park checks that
 * under the system's lock and wakes shutdown; senders from outside wake
 * it when they leave (vat__notify_quiet).
 */
#include <errno.h>

#include "sched/poller.h"
#include "sched/sched.h"
#include "util/clock.h"

/* A worker blocked in the idle poller: counted in s->polling, so a poller
 * is set. */
static void wake_poller(void) {
  const vat_idle_poller *p = vat__idle_poller();
  p->wake(p->ctx);
}

/* Wakes one parked runner if none is looking for work already, and none
 * was woken that has not started looking yet.
 *
 * One wake-up in flight at a time: without `waking`, every sender that
 * queued a vat while a woken worker was still on its way out of the futex
 * (tens of microseconds) found `parked` up and `spinning` down, and took
 * the system's lock to signal again: a spawner making vats took that lock
 * per vat, and with many parked workers a burst woke them all at once, to
 * find one vat each or nothing. The woken worker counts itself spinning,
 * takes `waking` down, and when it finds work and sees more waiting wakes
 * the next one (loop/threads.c, found_work): wake-ups spread one worker at a
 * time, as fast as there is work for them, the way Go's scheduler passes
 * on its spinning token. */
void vat__wake_one(vat__sched *s) {
  /* A worker of s sending from its poll looks for work right after it. */
  if (vat__polling_for == s)
    return;
  /* seq_cst fence: orders the caller's queue push before these loads, as
   * the parking worker orders its `parked` increment before its last look
   * at the queues; one of the two sees the other. */
  atomic_thread_fence(memory_order_seq_cst);
  if (atomic_load_explicit(&s->parked, memory_order_relaxed) == 0 ||
      atomic_load_explicit(&s->spinning, memory_order_relaxed) != 0)
    return;
  /* seq_cst: a sender that finds `waking` up leaves its vat to the woken
   * worker, which takes `waking` down (seq_cst) before it looks at the
   * queues: in the single order of seq_cst operations this sender's push
   * and load come before that store, so that look sees the push. */
  if (atomic_exchange_explicit(&s->waking, true, memory_order_seq_cst))
    return;
  pthread_mutex_lock(&s->lock);
  /* Under the lock a worker counted parked is waiting on park_cond or
   * already signalled and on its way back; either takes `waking` down. */
  unsigned parked = atomic_load_explicit(&s->parked, memory_order_relaxed);
  if (parked != 0) {
    atomic_fetch_add_explicit(&s->wakes, 1, memory_order_relaxed);
    /* A worker asleep on park_cond first: one blocked in the poller goes
     * on polling for the rest. */
    if (parked > s->polling)
      pthread_cond_signal(&s->park_cond);
    else
      wake_poller();
  } else {
    atomic_store_explicit(&s->waking, false, memory_order_seq_cst);
  }
  pthread_mutex_unlock(&s->lock);
}

void vat__wake_all(vat__sched *s) {
  pthread_mutex_lock(&s->lock);
  pthread_cond_broadcast(&s->park_cond);
  if (s->polling != 0)
    wake_poller();
  pthread_mutex_unlock(&s->lock);
}

bool vat__quiescent_locked(vat__sched *s) {
  return atomic_load_explicit(&s->parked, memory_order_seq_cst) ==
             s->nrunners &&
         atomic_load_explicit(&s->host_inflight, memory_order_seq_cst) == 0 &&
         vat__inject_size(&s->inject) == 0;
}

void vat__notify_quiet(vat__sched *s) {
  pthread_mutex_lock(&s->lock);
  pthread_cond_broadcast(&s->quiet_cond);
  pthread_mutex_unlock(&s->lock);
}

/* Waits until every runner is parked with nothing queued, or the deadline. */
bool vat__wait_quiescent(vat__sched *s, double timeout_s) {
  struct timespec deadline = vat__deadline_after(timeout_s);
  pthread_mutex_lock(&s->lock);
  bool quiet;
  while (!(quiet = vat__quiescent_locked(s))) {
    if (pthread_cond_timedwait(&s->quiet_cond, &s->lock, &deadline) ==
        ETIMEDOUT) {
      quiet = vat__quiescent_locked(s);
      break;
    }
  }
  pthread_mutex_unlock(&s->lock);
  return quiet;
}

/* Waits until no sender from outside is between its state check and its
 * push. Called after STOPPED is published: a sender that comes later sees
 * it and drops its message itself, so the wait is for the few stores of
 * those already past the check, however long they were preempted. */
void vat__wait_senders(vat__sched *s) {
  pthread_mutex_lock(&s->lock);
  while (atomic_load_explicit(&s->host_inflight, memory_order_seq_cst) != 0)
    pthread_cond_wait(&s->quiet_cond, &s->lock);
  pthread_mutex_unlock(&s->lock);
}
