/* Where a vat that became runnable waits: the policy that fills a
 * runner's queues (see pick.h for the order they are emptied in).
 *
 * A vat made runnable by a turn goes in its runner's next slot: a ring or
 * a ping-pong stays on one core, in cache. The vat it displaces was just
 * woken too: it goes on the fresh deque, run newest first, and stolen
 * oldest first by idle runners (pick.h says why). A vat that used up its
 * budget goes behind, to the run queue, first in, first out, or, when
 * nothing else waits here, to the busy list (requeue). A full run queue
 * spills half of itself to the system's shared queue, where host threads
 * and other systems put their vats too.
 *
 * Whoever queues work where another runner must steal it wakes one
 * parked runner (park.c), unless one is already spinning.
 */
#include "sched/pick.h"
#include "sched/sched.h"
#include "util/clock.h"
#include "util/cpu.h"
#include "vat/core.h" /* the error codes */

enum { BUSY_MAX = 2 };

int vat__sched_init(vat__sched *s, vat__runner **runners, unsigned n,
                    bool host_driven) {
  s->runners = runners;
  s->nrunners = n;
  s->host_driven = host_driven;
  s->wake_fd = -1;
  vat__inject_init(&s->inject);
  pthread_mutex_init(&s->lock, NULL);
  pthread_cond_init(&s->park_cond, NULL);
  vat__cond_init_monotonic(&s->quiet_cond);
  return host_driven ? vat__host_open(s) : VAT_OK;
}

void vat__runner_init(vat__runner *r, vat__sched *s, unsigned index) {
  vat__runq_init(&r->runq);
  vat__deque_init(&r->fresh);
  r->sched = s;
  r->rng = 2654435761u * (index + 1);
}

/* After r queued a vat where another runner may take it. Alone, r has no
 * other runner to wake, and skips the fence vat__wake_one begins with (4%
 * of skynet's time on one worker). */
static inline void wake_another(vat__runner *r) {
  if (r->sched->nrunners > 1)
    vat__wake_one(r->sched);
}

/* Queues `t` on r's run queue; when that is full, moves half of it and `t`
 * to the shared queue. Out of line: inlined, it made vat__schedule's
 * prologue dearer for every message of a ping-pong, which displaces
 * nobody. */
static __attribute__((noinline)) void enqueue(vat__runner *r, vat__task *t) {
  if (!vat__runq_push(&r->runq, t)) {
    uint32_t n = 0;
    vat__task *first = vat__runq_take_half(&r->runq, &n);
    if (first == NULL) {
      first = t;
    } else {
      vat__task *last = first;
      while (last->next)
        last = last->next;
      last->next = t;
    }
    t->next = NULL;
    vat__inject_push(&r->sched->inject, first, t, n + 1);
  }
  wake_another(r);
}

/* A vat displaced from the next slot: on top of the fresh deque. Behind,
 * in the run queue, when the deque is full, or in a host-driven system:
 * one context, no thieves, and its run call takes from the run queue.
 * The wake-up for it is owed, and paid once for all of a commit's sends
 * (vat__pay_wake): its fence cost more than the push (spawn, two
 * workers: a tenth of the time in vat__wake_one, for three vats a turn).
 * A turn's sends take effect only when it commits, so a parked runner
 * waits no longer for them. */
static __attribute__((noinline)) void enqueue_fresh(vat__runner *r,
                                                    vat__task *t) {
  vat__sched *s = r->sched;
  if (s->host_driven || !vat__deque_push(&r->fresh, t)) {
    enqueue(r, t);
    return;
  }
  if (s->nrunners > 1) /* alone, no other runner to wake */
    r->wake_owed = true;
}

void vat__pay_wake(vat__runner *r) {
  r->wake_owed = false;
  vat__wake_one(r->sched);
}

VAT__HOT void vat__schedule(vat__runner *r, vat__task *t) {
  vat__task *displaced = r->next;
  r->next = t;
  if (displaced)
    enqueue_fresh(r, displaced);
}

void vat__schedule_external(vat__sched *s, vat__task *t) {
  vat__inject_push(&s->inject, t, t, 1);
  if (s->host_driven)
    vat__host_wake(s);
  else
    vat__wake_one(s);
}

void vat__schedule_stealable(vat__runner *r, vat__task *t) {
  if (r->sched->host_driven) {
    vat__schedule_external(r->sched, t);
    return;
  }
  enqueue(r, t);
}

/* An overloaded vat that is not alone here goes where an idle runner can
 * steal it: its senders are muted (core/overload.h), so the pair the busy
 * list keeps together is broken anyway, and the backlog drains faster on
 * a core of its own. Alone, it stays: in the run queue, both workers
 * took it by turns, batch after batch, and its queue's nodes crossed
 * cores each time (a flood on two workers ran at half its one-worker
 * rate). Its senders, released, are queued where the other runner steals
 * them (vat__schedule_stealable).
 *
 * The busy list keeps busy vats where they are. A vat that used up its
 * budget with work left, put in the run queue, would be stolen by an idle
 * runner even when it is the only vat waiting here: no parallelism
 * gained, but a producer taken away from its consumer, so that every
 * message between them crosses cores (on a shared 2-core machine a
 * counter fed by one producer ran at a fifth of its one-core rate that
 * way). So when both queues are empty it goes to the busy list instead,
 * and such a pair takes turns on this runner. */
void vat__requeue(vat__runner *r, vat__task *t, bool overloaded) {
  if (r->busy_len < BUSY_MAX && vat__queued(r) == 0 &&
      (!overloaded || (r->busy_len == 0 && r->next == NULL)))
    r->busy[r->busy_len++] = t;
  else
    enqueue(r, t);
}

/* For pick.h's private streaks: a private vat goes behind, where an idle
 * runner may take it. */
void vat__enqueue(vat__runner *r, vat__task *t) {
  enqueue(r, t);
}
