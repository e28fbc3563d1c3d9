/* The worker threads' loop: one thread per worker, each asking the
 * scheduler for a vat (sched/pick.h), running a batch of its turns
 * (core/turn.c), and handing it back when it has more (sched/place.c).
 * With nothing to do a worker spins a little, then parks on the system's
 * condition variable; whoever queues work where another worker must steal
 * it wakes one parked worker, unless one is already spinning
 * (sched/park.c).
 */
#include <sched.h>
#include <string.h>

#include "core/overload.h"
#include "core/system.h"
#include "core/thread.h"
#include "core/trace.h"
#include "core/turn.h"
#include "loop/loop.h"
#include "sched/pick.h"
#include "sched/sched.h"
#include "util/clock.h"
#include "util/cpu.h"
#include "util/gc.h" /* pthread_create registers the workers */
#include "util/mem.h"
#include "util/testpoint.h"

static bool stopping(vat_system *sys) {
  return vat__system_state(sys) >= VAT__STOPPED;
}

/* Sleeps until woken, under the system's lock; timed for snapshots. The
 * clock is read only here, around the sleep, never per message. */
static void park(vat__worker *w) {
  uint64_t since = vat__monotonic_ns();
  vat__count(&w->parks, 1);
  atomic_store_explicit(&w->park_since, since, memory_order_relaxed);
  if (w->trace != NULL)
    vat__trace_mark(w->trace, VAT__TR_PARK);
  pthread_cond_wait(&w->sys->sched.park_cond, &w->sys->sched.lock);
  if (w->trace != NULL)
    vat__trace_mark(w->trace, VAT__TR_WAKE);
  /* Added before park_since clears: a snapshot in between counts this
   * sleep twice, never not at all (it clamps to the worker's lifetime). */
  vat__count(&w->idle_ns, vat__monotonic_ns() - since);
  atomic_store_explicit(&w->park_since, 0, memory_order_relaxed);
}

/* A spinning worker found `t`: it stops spinning. The last spinner to find
 * work wakes another worker when it sees more waiting (in any run queue,
 * or the shared queue): senders wake only one worker at a time
 * (sched/park.c), so a burst spreads over parked workers this way, one
 * after the other. The look costs a load per worker, once per idle
 * period, like a steal. */
static vat__task *found_work(vat__worker *w, vat__task *t) {
  vat__sched *s = &w->sys->sched;
  if (atomic_fetch_sub_explicit(&s->spinning, 1, memory_order_seq_cst) == 1 &&
      vat__work_visible(s))
    vat__wake_one(s);
  return t;
}

/* Parks unless there is work or the system stops; called spinning.
 * Returns whether it parked. */
static bool park_unless_work(vat__worker *w) {
  vat_system *sys = w->sys;
  vat__sched *s = &sys->sched;
  bool parks = false;
  pthread_mutex_lock(&s->lock);
  atomic_fetch_add_explicit(&s->parked, 1, memory_order_seq_cst);
  atomic_fetch_sub_explicit(&s->spinning, 1, memory_order_seq_cst);
  atomic_thread_fence(memory_order_seq_cst);
  if (!stopping(sys) && !vat__work_visible(s)) {
    if (vat__quiescent_locked(s))
      pthread_cond_broadcast(&s->quiet_cond);
    park(w);
    parks = true;
  }
  atomic_fetch_sub_explicit(&s->parked, 1, memory_order_seq_cst);
  pthread_mutex_unlock(&s->lock);
  return parks;
}

/* Spins, then parks; once woken, spins again. Returns a vat found, or NULL
 * to look again or to stop. */
static vat__task *idle(vat__worker *w) {
  vat_system *sys = w->sys;
  vat__sched *s = &sys->sched;
  if (w->trace != NULL) /* ends the last turn's slice */
    vat__trace_mark(w->trace, VAT__TR_IDLE);
  /* Whether to look before the first pause: not on entry (worker_main
   * looked already), but after a wake-up or a park called off because
   * work showed (with cfg.spin 0, that look is the only one). */
  bool look_first = false, woken = false;
  for (;;) {
    atomic_fetch_add_explicit(&s->spinning, 1, memory_order_seq_cst);
    /* Counted spinning first, so that a sender who finds `waking` down
     * finds this worker spinning (or the vat it took gone). seq_cst: see
     * vat__wake_one. */
    if (woken)
      atomic_store_explicit(&s->waking, false, memory_order_seq_cst);
    for (unsigned i = 0; !stopping(sys); i++) {
      vat__task *t;
      if ((look_first || i > 0) && (t = vat__pick(&w->run)) != NULL)
        return found_work(w, t);
      if (i == sys->cfg.spin)
        break;
      if (i % 8 == 7)
        sched_yield();
      else
        vat__cpu_relax();
    }
    woken = park_unless_work(w);
    look_first = true;
    /* A woken worker, its lock let go, before it counts itself spinning:
     * a sender now finds `waking` up (tests hold a worker here). */
    VAT__TEST_POINT("sched.idle.woken");
    if (stopping(sys))
      return NULL;
  }
}

static VAT__HOT void *worker_main(void *arg) {
  vat__worker *w = arg;
  vat_system *sys = w->sys;
  vat__current_worker = w;
  vat__mark_thread_registered();
  while (!stopping(sys)) {
    vat__task *t = vat__pick(&w->run);
    if (t == NULL && (t = idle(w)) == NULL)
      continue;
    vat__vat *v = vat__vat_of(t);
    if (vat__run_batch(w, v, sys->cfg.batch))
      vat__requeue(&w->run, t, vat__overload_hint(v));
  }
  if (w->trace != NULL)
    vat__trace_mark(w->trace, VAT__TR_IDLE);
  /* The system may be kept long after it stopped (a ref into it does). */
  vat__objcache_drop(&w->objects);
  vat__current_worker = NULL;
  return NULL;
}

static vat__worker *worker_new(vat_system *sys, unsigned index) {
  vat__worker *w = vat__gc_alloc_aligned(VAT__CACHE_LINE, sizeof *w);
  memset(w, 0, sizeof *w);
  vat__runner_init(&w->run, &sys->sched, index);
  w->sys = sys;
  w->deliver_direct = sys;
  vat__msgpool_join(&w->pool, &sys->depot);
  if (sys->trace_events != 0)
    w->trace = vat__trace_ring_new(sys, index);
  return w;
}

int vat__workers_start(vat_system *sys) {
  for (unsigned i = 0; i < sys->nworkers; i++) {
    sys->workers[i] = worker_new(sys, i);
    sys->sched.runners[i] = &sys->workers[i]->run;
  }
  if (sys->host_driven)
    return VAT_OK;
  for (unsigned i = 0; i < sys->nworkers; i++) {
    /* pthread_create is the collector's wrapper (util/gc.h): the thread is
     * registered and its stack scanned. */
    if (pthread_create(&sys->workers[i]->thread, NULL, worker_main,
                       sys->workers[i]) != 0) {
      atomic_store_explicit(&sys->state, VAT__STOPPED, memory_order_release);
      vat__wake_all(&sys->sched);
      for (unsigned j = 0; j < i; j++)
        pthread_join(sys->workers[j]->thread, NULL);
      return VAT_ENOMEM;
    }
  }
  return VAT_OK;
}

void vat__workers_join(vat_system *sys) {
  if (sys->host_driven)
    return;
  for (unsigned i = 0; i < sys->nworkers; i++)
    pthread_join(sys->workers[i]->thread, NULL);
}
