/* The worker threads' loop: one thread per worker, each asking the
 * scheduler for a vat (sched/pick.h), running a batch of its turns
 * (core/turn.c), and handing it back when it has more (sched/place.c).
 * With nothing to do a worker spins a little, then parks on the system's
 * condition variable; whoever queues work where another worker must steal
 * it wakes one parked worker, unless one is already spinning
 * (sched/park.c). Where the process has an idle poller (vat/host.h), a
 * worker polls it while it spins, parks in it instead when it can take it,
 * and polls it between batches now and then.
 */
#include <sched.h>
#include <signal.h>
#include <string.h>

#include "core/overload.h"
#include "core/system.h"
#include "core/thread.h"
#include "core/trace.h"
#include "core/turn.h"
#include "loop/loop.h"
#include "sched/pick.h"
#include "sched/poller.h"
#include "sched/sched.h"
#include "util/clock.h"
#include "util/cpu.h"
#include "util/gc.h" /* pthread_create registers the workers */
#include "util/mem.h"
#include "util/testpoint.h"

static bool stopping(vat_system *sys) {
  return vat__system_state(sys) >= VAT__STOPPED;
}

/* Polls the idle poller `p`, its right held: its handlers' sends to this
 * system's vats wake no other worker (sched/park.c). */
static void poll_io(vat__worker *w, const vat_idle_poller *p, bool block) {
  vat__polling_for = &w->sys->sched;
  p->poll(p->ctx, block);
  vat__polling_for = NULL;
}

/* Polls the idle poller without blocking, if there is one and no other
 * thread polls it. Whether it did. */
static bool poll_now(vat__worker *w) {
  const vat_idle_poller *p = vat__idle_poller();
  if (p == NULL || !p->acquire(p->ctx, false))
    return false;
  poll_io(w, p, false);
  p->release(p->ctx);
  return true;
}

/* A spinning worker stops spinning: it found work, or it goes where it
 * looks for none for a while. The last spinner to stop wakes another
 * worker when it sees more waiting (in any run queue, or the shared
 * queue): senders wake only one worker at a time (sched/park.c), so a
 * burst spreads over parked workers this way, one after the other; and
 * what a sender left to this worker, counted spinning, is not left
 * behind. The look costs a load per worker, once per idle period, like a
 * steal. */
static void stop_spinning(vat__worker *w) {
  vat__sched *s = &w->sys->sched;
  if (atomic_fetch_sub_explicit(&s->spinning, 1, memory_order_seq_cst) == 1 &&
      vat__work_visible(s))
    vat__wake_one(s);
}

static vat__task *found_work(vat__worker *w, vat__task *t) {
  stop_spinning(w);
  return t;
}

/* poll_now from a spinning worker. Inside the poll it looks for no work:
 * counted spinning there, it would keep senders from waking a parked
 * worker for as long as the poll's handlers run (a test holds one at a
 * write), so it stops spinning for the poll and starts again after. */
static bool poll_spinning(vat__worker *w) {
  vat__sched *s = &w->sys->sched;
  if (vat__idle_poller() == NULL)
    return false; /* nothing to poll: spinning as ever */
  stop_spinning(w); /* for the poll */
  bool polled = poll_now(w);
  atomic_fetch_add_explicit(&s->spinning, 1, memory_order_seq_cst); /* again */
  return polled;
}

/* Blocks in the poller `p`, its right held, instead of on park_cond:
 * called and returns with the system's lock held, counted parked and, while
 * it polls, polling, so that a sender wakes it through the poller when no
 * worker sleeps on park_cond (sched/park.c). */
static void park_polling(vat__worker *w, const vat_idle_poller *p) {
  vat__sched *s = &w->sys->sched;
  s->polling++;
  pthread_mutex_unlock(&s->lock);
  /* Counted polling, not yet blocked: a sender's wake-up must still reach
   * it (tests hold a worker here). */
  VAT__TEST_POINT("sched.idle.before_poll");
  poll_io(w, p, true);
  pthread_mutex_lock(&s->lock);
  s->polling--;
}

/* Sleeps until woken, under the system's lock, on park_cond or, with `p`,
 * in the poller; timed for snapshots. The clock is read only here, around
 * the sleep, never per message. */
static void park(vat__worker *w, const vat_idle_poller *p) {
  uint64_t since = vat__monotonic_ns();
  vat__count(&w->parks, 1);
  atomic_store_explicit(&w->park_since, since, memory_order_relaxed);
  if (w->trace != NULL)
    vat__trace_mark(w->trace, VAT__TR_PARK);
  if (p != NULL)
    park_polling(w, p);
  else
    pthread_cond_wait(&w->sys->sched.park_cond, &w->sys->sched.lock);
  if (w->trace != NULL)
    vat__trace_mark(w->trace, VAT__TR_WAKE);
  /* Added before park_since clears: a snapshot in between counts this
   * sleep twice, never not at all (it clamps to the worker's lifetime). */
  vat__count(&w->idle_ns, vat__monotonic_ns() - since);
  atomic_store_explicit(&w->park_since, 0, memory_order_relaxed);
}

/* Waits to take the right to poll, as one worker of `s` at a time: the
 * wait (for the loop's thread, held in a handler) counts it neither parked
 * nor spinning, so a sender wakes nobody for it; the system's other
 * workers park on park_cond meanwhile, where a send reaches them. */
static bool acquire_alone(vat__sched *s, const vat_idle_poller *p) {
  /* acq_rel: one winner; what the last waiter did comes before ours. */
  if (atomic_exchange_explicit(&s->acquiring, true, memory_order_acq_rel))
    return false;
  bool took = p->acquire(p->ctx, true);
  atomic_store_explicit(&s->acquiring, false, memory_order_release);
  return took;
}

/* Parks unless there is work or the system stops; called spinning.
 * Returns whether it parked. It parks in the idle poller when it can take
 * the right to poll, on park_cond otherwise. */
static bool park_unless_work(vat__worker *w) {
  vat_system *sys = w->sys;
  vat__sched *s = &sys->sched;
  bool parks = false;
  const vat_idle_poller *p = vat__idle_poller();
  bool spinning = true;
  if (p != NULL && !stopping(sys)) {
    /* Taking the right may wait for its holder (the loop's thread, held
     * in a handler): not counted spinning meanwhile, as a sender would
     * leave its vat to us. Work that came first is seen under the lock
     * below, after we count ourselves parked. */
    stop_spinning(w); /* for the wait */
    spinning = false;
    if (!acquire_alone(s, p))
      p = NULL;
  } else {
    p = NULL;
  }
  pthread_mutex_lock(&s->lock);
  atomic_fetch_add_explicit(&s->parked, 1, memory_order_seq_cst);
  if (spinning)
    atomic_fetch_sub_explicit(&s->spinning, 1, memory_order_seq_cst);
  atomic_thread_fence(memory_order_seq_cst);
  if (!stopping(sys) && !vat__work_visible(s)) {
    if (vat__quiescent_locked(s))
      pthread_cond_broadcast(&s->quiet_cond);
    park(w, p);
    parks = true;
  }
  atomic_fetch_sub_explicit(&s->parked, 1, memory_order_seq_cst);
  pthread_mutex_unlock(&s->lock);
  if (p != NULL)
    p->release(p->ctx);
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
      if (i % 8 == 7) {
        /* A poll is a system call too: it stands for the yield. */
        if (!poll_spinning(w))
          sched_yield();
      } else
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

/* A busy worker polls the idle poller once in this many batches, as a
 * Tokio worker polls its I/O driver every 61 tasks: while every worker is
 * busy none idles to poll, and what the peers send would wait. With 8 or
 * 16 pipelined calls ran no faster than without; with 32 and 64 they ran
 * ~15% faster (bench/README.md). */
#define POLL_EVERY_BATCHES 64

static VAT__HOT void *worker_main(void *arg) {
  vat__worker *w = arg;
  vat_system *sys = w->sys;
  vat__current_worker = w;
  vat__mark_thread_registered();
  unsigned batches = 0;
  while (!stopping(sys)) {
    if (++batches % POLL_EVERY_BATCHES == 0)
      poll_now(w);
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
  /* The workers start with SIGPIPE blocked: the idle poller's writes to a
   * socket the peer closed then fail with EPIPE (vat/host.h), without a
   * change to the process's signal dispositions. */
  sigset_t pipe, old;
  sigemptyset(&pipe);
  sigaddset(&pipe, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &pipe, &old);
  int rc = VAT_OK;
  for (unsigned i = 0; i < sys->nworkers; i++) {
    /* pthread_create is the collector's wrapper (util/gc.h): the thread is
     * registered and its stack scanned. */
    if (pthread_create(&sys->workers[i]->thread, NULL, worker_main,
                       sys->workers[i]) != 0) {
      atomic_store_explicit(&sys->state, VAT__STOPPED, memory_order_release);
      vat__wake_all(&sys->sched);
      for (unsigned j = 0; j < i; j++)
        pthread_join(sys->workers[j]->thread, NULL);
      rc = VAT_ENOMEM;
      break;
    }
  }
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  return rc;
}

void vat__workers_join(vat_system *sys) {
  if (sys->host_driven)
    return;
  for (unsigned i = 0; i < sys->nworkers; i++)
    pthread_join(sys->workers[i]->thread, NULL);
}
