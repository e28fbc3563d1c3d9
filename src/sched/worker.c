/* The scheduler loop: one worker thread per core.
 *
 * A worker runs, in order of preference: the vat it woke last (its `next`
 * slot: a ring or a ping-pong stays on one core, in cache), the vats in its
 * `busy` list, its fresh deque newest first, its run queue oldest first,
 * the system's shared queue, and vats stolen from another worker (the
 * oldest of its fresh deque, else of its run queue). With nothing to do it
 * spins a little, then parks on the system's condition variable. Whoever
 * queues work where another worker must steal it wakes one parked worker,
 * unless one is already spinning.
 *
 * Two queues, because vats come in two kinds. A vat displaced from the
 * next slot by a newer wake-up was just woken: its lines are warm, and in
 * a tree of vats (each turn spawning and waking several) it is a branch
 * not yet walked. Run newest first, such a tree is walked depth first,
 * with a few vats per level alive instead of whole levels (skynet: a
 * million vats alive at once, breadth first), and thieves take the
 * oldest, largest branches (Cilk's work-first order). A vat that used up
 * its budget or its private runs has waited its turn and must let the
 * others run: it goes behind, to the run queue, first in, first out. A
 * spawner that makes vats a batch at a time thus lets each batch run
 * before it makes the next. Now and then (FRESH_RUN_MAX, FAIR_FRESH_EVERY)
 * the oldest vat of each queue runs first, so that no vat waits behind a
 * stream of newer ones.
 *
 * The busy list keeps busy vats where they are. A vat that used up its budget
 * with work left, put in the run queue, would be stolen by an idle worker
 * even when it is the only vat waiting here: no parallelism gained, but a
 * producer taken away from its consumer, so that every message between
 * them crosses cores (on a shared 2-core machine a counter fed by one
 * producer ran at a fifth of its one-core rate that way). So when both
 * queues are empty it goes to the busy list instead, and such a pair takes
 * turns on this worker. Vats spread by stealing when more are runnable than
 * one worker runs at once, and a private vat goes to the run queue now and
 * then (PRIVATE_STREAK_MAX), where an idle worker may take it.
 */
#include <sched.h>
#include <string.h>

#include "core/schedule.h"
#include "core/system.h"
#include "core/thread.h"
#include "core/trace.h"
#include "core/turn.h"
#include "sched/sched.h"
#include "util/clock.h"
#include "util/cpu.h"
#include "util/gc.h" /* pthread_create registers the workers */
#include "util/mem.h"
#include "util/testpoint.h"

enum {
  /* Look at the shared queue every so often even when busy, so injected
   * vats do not starve behind a full local queue (Go uses 61 too: a prime
   * avoids lock-step with periodic workloads). */
  INJECT_EVERY = 61,
  /* Vats taken from the fresh deque in a row, while it did not empty,
   * before the run queue's oldest gets a turn. More than a batch of turns
   * wakes in most programs: a vat that spawns a few vats per turn (bench
   * spawn: 4, 256 a batch) must see each batch run before its own next
   * batch, or each forced early run piles another batch on the deque (at
   * every 61st tick, 4,000 vats alive instead of 256, and 25% slower). */
  FRESH_RUN_MAX = 1024,
  /* Every so many ticks, the fresh deque's oldest vat runs first. Rarely:
   * the oldest fresh vat is the largest branch not yet walked, and each
   * one started early adds its frontier to what is alive (skynet, one
   * worker: 0.15 s and 7 MiB at about this period, 0.27 s and 21 MiB at a
   * quarter of it, 0.37 s and 52 MiB at every INJECT_EVERY). Prime, like
   * INJECT_EVERY: the check is made only on ticks that reach the queues,
   * and with an even period a pair of vats taking turns with the next
   * slot kept it on the other ticks for ever. */
  FAIR_FRESH_EVERY = 15607,
  /* Runs from the next slot and the busy list in a row before the run queue
   * gets a turn. */
  PRIVATE_STREAK_MAX = 256,
  /* The most vats a worker takes from the shared queue at once: fewer
   * than its run queue holds, and a short walk under the queue's lock. */
  INJECT_BATCH = 32,
  BUSY_MAX = 2,
};

static uint32_t next_random(vat__worker *w) {
  /* xorshift32: victims only need to differ between workers and calls. */
  uint32_t x = w->rng;
  x ^= x << 13;
  x ^= x >> 17;
  x ^= x << 5;
  return w->rng = x;
}

/* After w queued a vat where another worker may take it. Alone, w has no
 * other worker to wake, and skips the fence vat__wake_one begins with (4%
 * of skynet's time on one worker). */
static inline void wake_another(vat__worker *w) {
  if (w->sys->nworkers > 1)
    vat__wake_one(w->sys);
}

/* Queues `v` on w's run queue; when that is full, moves half of it and `v`
 * to the shared queue. Out of line: inlined, it made vat__schedule's
 * prologue dearer for every message of a ping-pong, which displaces
 * nobody. */
static __attribute__((noinline)) void enqueue(vat__worker *w, vat__vat *v) {
  if (!vat__runq_push(&w->runq, v)) {
    uint32_t n = 0;
    vat__vat *first = vat__runq_take_half(&w->runq, &n);
    if (first == NULL) {
      first = v;
    } else {
      vat__vat *last = first;
      while (last->rq_next)
        last = last->rq_next;
      last->rq_next = v;
    }
    v->rq_next = NULL;
    vat__inject_push(&w->sys->inject, first, v, n + 1);
  }
  wake_another(w);
}

/* A vat displaced from the next slot: on top of the fresh deque. Behind,
 * in the run queue, when the deque is full, or in a host-driven system:
 * one context, no thieves, and its run call takes from the run queue.
 * The wake-up for it is owed, and paid once for all of a commit's sends
 * (vat__pay_wake): its fence cost more than the push (spawn, two
 * workers: a tenth of the time in vat__wake_one, for three vats a turn).
 * A turn's sends take effect only when it commits, so a parked worker
 * waits no longer for them. */
static __attribute__((noinline)) void enqueue_fresh(vat__worker *w,
                                                    vat__vat *v) {
  vat_system *sys = w->sys;
  if (sys->host_driven || !vat__deque_push(&w->fresh, v)) {
    enqueue(w, v);
    return;
  }
  if (sys->nworkers > 1) /* alone, no other worker to wake */
    w->wake_owed = true;
}

void vat__pay_wake(vat__worker *w) {
  w->wake_owed = false;
  vat__wake_one(w->sys);
}

VAT__HOT void vat__schedule(vat__worker *w, vat__vat *v) {
  if (v->sys != w->sys) {
    vat__schedule_external(v->sys, v);
    return;
  }
  vat__vat *displaced = w->next;
  w->next = v;
  if (displaced)
    enqueue_fresh(w, displaced);
}

void vat__schedule_external(vat_system *sys, vat__vat *v) {
  vat__inject_push(&sys->inject, v, v, 1);
  if (sys->host_driven)
    vat__host_wake(sys);
  else
    vat__wake_one(sys);
}

void vat__schedule_stealable(vat__worker *w, vat__vat *v) {
  if (w == NULL || w != vat__current_worker || v->sys != w->sys ||
      w->sys->host_driven) {
    vat__schedule_external(v->sys, v);
    return;
  }
  enqueue(w, v);
}

/* About half of the victim's fresh vats, one CAS each: its owner pops the
 * other end, so a batch cannot be claimed in one move. Runs the oldest,
 * the largest branch of a tree; the rest go on this worker's deque. */
static vat__vat *steal_fresh(vat__worker *w, vat__worker *victim) {
  uint32_t n = vat__deque_size(&victim->fresh);
  if (n == 0)
    return NULL;
  vat__vat *run = vat__deque_steal(&victim->fresh);
  for (uint32_t i = 1; run != NULL && i < n / 2; i++) {
    vat__vat *v = vat__deque_steal(&victim->fresh);
    if (v == NULL)
      break;
    if (!vat__deque_push(&w->fresh, v))
      enqueue(w, v);
  }
  return run;
}

static vat__vat *steal(vat__worker *w) {
  vat_system *sys = w->sys;
  unsigned n = sys->nworkers;
  if (n < 2)
    return NULL;
  unsigned start = next_random(w) % n;
  for (unsigned i = 0; i < n; i++) {
    vat__worker *victim = sys->workers[(start + i) % n];
    if (victim == w)
      continue;
    vat__vat *v = steal_fresh(w, victim);
    if (v == NULL)
      v = vat__runq_steal(&w->runq, &victim->runq);
    if (v) {
      vat__count(&w->steals, 1);
      return v;
    }
  }
  return NULL;
}

/* With its run queue empty: a share of the shared queue (its length over
 * the number of workers, as Go's scheduler takes from its global queue, at
 * most INJECT_BATCH), one lock for all of it. Runs the oldest; the rest go
 * to the run queue, in order, where idle workers may steal them. */
static vat__vat *take_injected(vat__worker *w) {
  vat_system *sys = w->sys;
  uint32_t want = vat__inject_size(&sys->inject) / sys->nworkers + 1, n;
  vat__vat *first = vat__inject_pop_batch(
      &sys->inject, want < INJECT_BATCH ? want : INJECT_BATCH, &n);
  if (first == NULL)
    return NULL;
  for (vat__vat *v = first->rq_next, *next; v != NULL; v = next) {
    next = v->rq_next;
    v->rq_next = NULL; /* a stale link would pin the rest of the chain */
    if (!vat__runq_push(&w->runq, v))
      enqueue(w, v); /* not with INJECT_BATCH < VAT__RUNQ_SIZE */
  }
  first->rq_next = NULL;
  if (n > 1) /* they were anyone's to take: let a parked worker see them */
    vat__wake_one(sys);
  return first;
}

/* The next slot, else the busy list's oldest vat. */
static vat__vat *take_private(vat__worker *w) {
  vat__vat *v = w->next;
  if (v != NULL) {
    w->next = NULL;
    return v;
  }
  if (w->busy_len == 0)
    return NULL;
  v = w->busy[0];
  w->busy[0] = w->busy[1];
  w->busy[1] = NULL;
  w->busy_len--;
  return v;
}

/* How many vats wait in w's queues (a snapshot, from any thread). */
static uint32_t queued(vat__worker *w) {
  return vat__runq_size(&w->runq) + vat__deque_size(&w->fresh);
}

/* Fresh vats newest first, then the run queue's oldest. So that a vat
 * behind a stream of newer ones still runs, the run queue's oldest goes
 * first after FRESH_RUN_MAX fresh vats in a row, and the deque's oldest
 * now and then (FAIR_FRESH_EVERY). */
static inline __attribute__((always_inline)) vat__vat *
take_queued(vat__worker *w) {
  vat__vat *v;
  if (w->fresh_run >= FRESH_RUN_MAX) {
    w->fresh_run = 0;
    if ((v = vat__runq_pop(&w->runq)) != NULL)
      return v;
  }
  if (w->ticks % FAIR_FRESH_EVERY == 0 &&
      (v = vat__deque_steal(&w->fresh)) != NULL)
    return v;
  if ((v = vat__deque_pop(&w->fresh)) != NULL) {
    w->fresh_run++;
    return v;
  }
  w->fresh_run = 0;
  return vat__runq_pop(&w->runq);
}

/* After a batch that used up its budget: `v` still has work. An
 * overloaded vat that is not alone here goes where an idle worker can
 * steal it: its senders are muted (core/flow.h), so the pair the busy
 * list keeps together is broken anyway, and the backlog drains faster on
 * a core of its own. Alone, it stays: in the run queue, both workers
 * took it by turns, batch after batch, and its queue's nodes crossed
 * cores each time (a flood on two workers ran at half its one-worker
 * rate). Its senders, released, are queued where the other worker steals
 * them (vat__schedule_stealable). */
static void requeue(vat__worker *w, vat__vat *v) {
  if (w->busy_len < BUSY_MAX && queued(w) == 0 &&
      (!(atomic_load_explicit(&v->flags, memory_order_relaxed) &
         VAT__OVERLOADED) ||
       (w->busy_len == 0 && w->next == NULL)))
    w->busy[w->busy_len++] = v;
  else
    enqueue(w, v);
}

/* Inlined into worker_main, where it runs once per batch: called from
 * idle() too, it was left out of line, which cost a ping-pong 22
 * instructions a message. */
static inline __attribute__((always_inline)) vat__vat *
find_work(vat__worker *w) {
  vat__vat *v;
  if (++w->ticks % INJECT_EVERY == 0 &&
      (v = vat__inject_pop(&w->sys->inject)) != NULL)
    return v;
  if ((v = take_private(w)) != NULL) {
    if (++w->private_streak < PRIVATE_STREAK_MAX)
      return v;
    /* Now and then a private vat goes to the run queue: queued vats get
     * their turn, and an idle worker may take it. Not when it is the only
     * vat here: an idle worker would gain nothing by it, and waking one
     * for it costs more than the turns it runs (a failure travelling a
     * chain of a million linked vats took twice as long). */
    if (w->next == NULL && w->busy_len == 0 && queued(w) == 0) {
      w->private_streak = 0;
      return v;
    }
    enqueue(w, v);
  }
  w->private_streak = 0;
  if ((v = take_queued(w)) != NULL)
    return v;
  if ((v = take_injected(w)) != NULL)
    return v;
  return steal(w);
}

static bool stopping(vat_system *sys) {
  return vat__system_state(sys) >= VAT__STOPPED;
}

/* Any queue where a worker could find work: looked at under the lock by a
 * worker that counted itself parked, and without it by the last spinner
 * to find work (found_work). */
static bool work_visible(vat_system *sys) {
  if (vat__inject_size(&sys->inject) != 0)
    return true;
  for (unsigned i = 0; i < sys->nworkers; i++)
    if (queued(sys->workers[i]) != 0)
      return true;
  return false;
}

/* Sleeps until woken, under the system's lock; timed for snapshots. The
 * clock is read only here, around the sleep, never per message. */
static void park(vat__worker *w) {
  uint64_t since = vat__monotonic_ns();
  vat__count(&w->parks, 1);
  atomic_store_explicit(&w->park_since, since, memory_order_relaxed);
  if (w->trace != NULL)
    vat__trace_mark(w->trace, VAT__TR_PARK);
  pthread_cond_wait(&w->sys->park_cond, &w->sys->lock);
  if (w->trace != NULL)
    vat__trace_mark(w->trace, VAT__TR_WAKE);
  /* Added before park_since clears: a snapshot in between counts this
   * sleep twice, never not at all (it clamps to the worker's lifetime). */
  vat__count(&w->idle_ns, vat__monotonic_ns() - since);
  atomic_store_explicit(&w->park_since, 0, memory_order_relaxed);
}

/* A spinning worker found `v`: it stops spinning. The last spinner to find
 * work wakes another worker when it sees more waiting (in any run queue,
 * or the shared queue): senders wake only one worker at a time (park.c),
 * so a burst spreads over parked workers this way, one after the other.
 * The look costs a load per worker, once per idle period, like a steal. */
static vat__vat *found_work(vat__worker *w, vat__vat *v) {
  vat_system *sys = w->sys;
  if (atomic_fetch_sub_explicit(&sys->spinning, 1, memory_order_seq_cst) == 1 &&
      work_visible(sys))
    vat__wake_one(sys);
  return v;
}

/* Parks unless there is work or the system stops; called spinning.
 * Returns whether it parked. */
static bool park_unless_work(vat__worker *w) {
  vat_system *sys = w->sys;
  bool parks = false;
  pthread_mutex_lock(&sys->lock);
  atomic_fetch_add_explicit(&sys->parked, 1, memory_order_seq_cst);
  atomic_fetch_sub_explicit(&sys->spinning, 1, memory_order_seq_cst);
  atomic_thread_fence(memory_order_seq_cst);
  if (!stopping(sys) && !work_visible(sys)) {
    if (vat__quiescent_locked(sys))
      pthread_cond_broadcast(&sys->quiet_cond);
    park(w);
    parks = true;
  }
  atomic_fetch_sub_explicit(&sys->parked, 1, memory_order_seq_cst);
  pthread_mutex_unlock(&sys->lock);
  return parks;
}

/* Spins, then parks; once woken, spins again. Returns a vat found, or NULL
 * to look again or to stop. */
static vat__vat *idle(vat__worker *w) {
  vat_system *sys = w->sys;
  if (w->trace != NULL) /* ends the last turn's slice */
    vat__trace_mark(w->trace, VAT__TR_IDLE);
  /* Whether to look before the first pause: not on entry (worker_main
   * looked already), but after a wake-up or a park called off because
   * work showed (with cfg.spin 0, that look is the only one). */
  bool look_first = false, woken = false;
  for (;;) {
    atomic_fetch_add_explicit(&sys->spinning, 1, memory_order_seq_cst);
    /* Counted spinning first, so that a sender who finds `waking` down
     * finds this worker spinning (or the vat it took gone). seq_cst: see
     * vat__wake_one. */
    if (woken)
      atomic_store_explicit(&sys->waking, false, memory_order_seq_cst);
    for (unsigned i = 0; !stopping(sys); i++) {
      vat__vat *v;
      if ((look_first || i > 0) && (v = find_work(w)) != NULL)
        return found_work(w, v);
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
    vat__vat *v = find_work(w);
    if (v == NULL && (v = idle(w)) == NULL)
      continue;
    if (vat__run_batch(w, v, sys->cfg.batch))
      requeue(w, v);
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
  vat__runq_init(&w->runq);
  vat__deque_init(&w->fresh);
  w->sys = sys;
  vat__msgpool_join(&w->pool, &sys->depot);
  w->rng = 2654435761u * (index + 1);
  if (sys->trace_events != 0)
    w->trace = vat__trace_ring_new(sys, index);
  return w;
}

int vat__workers_start(vat_system *sys) {
  for (unsigned i = 0; i < sys->nworkers; i++)
    sys->workers[i] = worker_new(sys, i);
  if (sys->host_driven)
    return VAT_OK;
  for (unsigned i = 0; i < sys->nworkers; i++) {
    /* pthread_create is the collector's wrapper (util/gc.h): the thread is
     * registered and its stack scanned. */
    if (pthread_create(&sys->workers[i]->thread, NULL, worker_main,
                       sys->workers[i]) != 0) {
      atomic_store_explicit(&sys->state, VAT__STOPPED, memory_order_release);
      vat__wake_all(sys);
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
