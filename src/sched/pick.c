/* Which vat runs next, the rarer looks (pick.h has the common ones): the
 * shared queue, stealing, a host-driven system's choices, and what is
 * left queued after the runners stopped.
 */
#include "sched/pick.h"

#include "sched/sched.h"

enum {
  /* The most vats a runner takes from the shared queue at once: fewer
   * than its run queue holds, and a short walk under the queue's lock. */
  INJECT_BATCH = 32,
};

static uint32_t next_random(vat__runner *r) {
  /* xorshift32: victims only need to differ between runners and calls. */
  uint32_t x = r->rng;
  x ^= x << 13;
  x ^= x >> 17;
  x ^= x << 5;
  return r->rng = x;
}

/* About half of the victim's fresh vats, one CAS each: its owner pops the
 * other end, so a batch cannot be claimed in one move. Runs the oldest,
 * the largest branch of a tree; the rest go on this runner's deque. */
static vat__task *steal_fresh(vat__runner *r, vat__runner *victim) {
  uint32_t n = vat__deque_size(&victim->fresh);
  if (n == 0)
    return NULL;
  vat__task *run = vat__deque_steal(&victim->fresh);
  for (uint32_t i = 1; run != NULL && i < n / 2; i++) {
    vat__task *t = vat__deque_steal(&victim->fresh);
    if (t == NULL)
      break;
    if (!vat__deque_push(&r->fresh, t))
      vat__enqueue(r, t);
  }
  return run;
}

vat__task *vat__steal(vat__runner *r) {
  vat__sched *s = r->sched;
  unsigned n = s->nrunners;
  if (n < 2)
    return NULL;
  unsigned start = next_random(r) % n;
  for (unsigned i = 0; i < n; i++) {
    vat__runner *victim = s->runners[(start + i) % n];
    if (victim == r)
      continue;
    vat__task *t = steal_fresh(r, victim);
    if (t == NULL)
      t = vat__runq_steal(&r->runq, &victim->runq);
    if (t) {
      vat__count(&r->steals, 1);
      return t;
    }
  }
  return NULL;
}

/* With its run queue empty: a share of the shared queue (its length over
 * the number of runners, as Go's scheduler takes from its global queue, at
 * most INJECT_BATCH), one lock for all of it. Runs the oldest; the rest go
 * to the run queue, in order, where idle runners may steal them. */
vat__task *vat__take_injected(vat__runner *r) {
  vat__sched *s = r->sched;
  uint32_t want = vat__inject_size(&s->inject) / s->nrunners + 1, n;
  vat__task *first = vat__inject_pop_batch(
      &s->inject, want < INJECT_BATCH ? want : INJECT_BATCH, &n);
  if (first == NULL)
    return NULL;
  for (vat__task *t = first->next, *next; t != NULL; t = next) {
    next = t->next;
    t->next = NULL; /* a stale link would pin the rest of the chain */
    if (!vat__runq_push(&r->runq, t))
      vat__enqueue(r, t); /* not with INJECT_BATCH < VAT__RUNQ_SIZE */
  }
  first->next = NULL;
  if (n > 1) /* they were anyone's to take: let a parked runner see them */
    vat__wake_one(s);
  return first;
}

vat__task *vat__pick_fifo(vat__runner *r) {
  vat__task *t = r->next;
  if (t != NULL) {
    r->next = NULL;
    return t;
  }
  if ((t = vat__runq_pop(&r->runq)) != NULL)
    return t;
  return vat__inject_pop(&r->sched->inject);
}

bool vat__sched_ready(vat__runner *r) {
  return r->next != NULL || vat__runq_size(&r->runq) != 0 ||
         vat__inject_size(&r->sched->inject) != 0;
}

/* Deterministic mode: one message per pick, so that the interleaving
 * depends only on the seed and the inputs. */
static uint64_t det_random(vat__sched *s) {
  uint64_t x = s->det_rng;
  x ^= x >> 12;
  x ^= x << 25;
  x ^= x >> 27;
  s->det_rng = x;
  return x * 0x2545F4914F6CDD1Dull;
}

/* Every ready vat is in the run queue or the shared queue (the next slot
 * is flushed), and one is drawn from the union. The run queue holds at
 * most its size, so the draw needs no extra memory: the drawn vat is
 * swapped to the head and popped. */
uint32_t vat__pick_seeded_ready(vat__runner *r, vat__task **ready) {
  vat__sched *s = r->sched;
  vat__runq *q = &r->runq;
  if (r->next) {
    vat__task *t = r->next;
    r->next = NULL;
    if (!vat__runq_push(q, t))
      vat__schedule_external(s, t);
  }
  /* Top the run queue up from the shared queue, in arrival order, so the
   * draw covers everything that is ready (up to the queue's size). */
  for (vat__task *t; vat__runq_size(q) < VAT__RUNQ_SIZE &&
                     (t = vat__inject_pop(&s->inject)) != NULL;)
    vat__runq_push(q, t);
  uint32_t n = vat__runq_size(q);
  /* Taken out and put back as they were, which leaves the queue
   * unchanged. */
  for (uint32_t i = 0; ready != NULL && i < n; i++)
    ready[i] = vat__runq_pop(q);
  for (uint32_t i = 0; ready != NULL && i < n; i++)
    vat__runq_push(q, ready[i]);
  return n;
}

vat__task *vat__pick_seeded(vat__runner *r) {
  vat__sched *s = r->sched;
  vat__runq *q = &r->runq;
  /* A chooser (src/sim/) sees them all, in queue order. */
  vat__task *ready[VAT__RUNQ_SIZE];
  uint32_t n = vat__pick_seeded_ready(r, s->det_choose ? ready : NULL);
  if (n == 0)
    return NULL;
  if (s->det_choose == NULL)
    return vat__runq_draw(q, (uint32_t)(det_random(s) % n));
  uint32_t k = s->det_choose(s->det_choose_ctx, ready, n);
  return vat__runq_draw(q, k < n ? k : 0);
}

vat__task *vat__sched_take_stranded(vat__sched *s) {
  vat__task *t;
  for (unsigned i = 0; i < s->nrunners; i++) {
    vat__runner *r = s->runners[i];
    if ((t = vat__take_private(r)) != NULL ||
        (t = vat__deque_pop(&r->fresh)) != NULL ||
        (t = vat__runq_pop(&r->runq)) != NULL)
      return t;
  }
  return vat__inject_pop(&s->inject);
}

/* Looked at under the lock by a runner that counted itself parked, and
 * without it by the last spinner to find work (loop/threads.c). */
bool vat__work_visible(vat__sched *s) {
  if (vat__inject_size(&s->inject) != 0)
    return true;
  for (unsigned i = 0; i < s->nrunners; i++)
    if (vat__queued(s->runners[i]) != 0)
      return true;
  return false;
}
