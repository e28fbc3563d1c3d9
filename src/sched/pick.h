/* Which vat a worker thread runs next. Inline, for the thread loop
 * (loop/threads.c), where it runs once per batch: out of line, it cost a
 * ping-pong 22 instructions a message. The rarer looks (the shared queue,
 * stealing) are pick.c's.
 *
 * A runner runs, in order of preference: the vat it woke last (its `next`
 * slot), the vats in its `busy` list, its fresh deque newest first, its
 * run queue oldest first, the system's shared queue, and vats stolen from
 * another runner (the oldest of its fresh deque, else of its run queue).
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
 */
#ifndef VAT_SCHED_PICK_H
#define VAT_SCHED_PICK_H

#include "sched/sched.h"
#include "util/testpoint.h"

enum {
  /* Look at the shared queue every so often even when busy, so injected
   * vats do not starve behind a full local queue (Go uses 61 too: a prime
   * avoids lock-step with periodic workloads). */
  VAT__INJECT_EVERY = 61,
  /* Vats taken from the fresh deque in a row, while it did not empty,
   * before the run queue's oldest gets a turn. More than a batch of turns
   * wakes in most programs: a vat that spawns a few vats per turn (bench
   * spawn: 4, 256 a batch) must see each batch run before its own next
   * batch, or each forced early run piles another batch on the deque (at
   * every 61st tick, 4,000 vats alive instead of 256, and 25% slower). */
  VAT__FRESH_RUN_MAX = 1024,
  /* Every so many ticks, the fresh deque's oldest vat runs first. Rarely:
   * the oldest fresh vat is the largest branch not yet walked, and each
   * one started early adds its frontier to what is alive (skynet, one
   * worker: 0.15 s and 7 MiB at about this period, 0.27 s and 21 MiB at a
   * quarter of it, 0.37 s and 52 MiB at every VAT__INJECT_EVERY). Prime,
   * like VAT__INJECT_EVERY: the check is made only on ticks that reach the
   * queues, and with an even period a pair of vats taking turns with the
   * next slot kept it on the other ticks for ever. */
  VAT__FAIR_FRESH_EVERY = 15607,
  /* Runs from the next slot and the busy list in a row before the run
   * queue gets a turn. */
  VAT__PRIVATE_STREAK_MAX = 256,
};

/* pick.c and place.c: the rare looks, out of line. */
vat__task *vat__take_injected(vat__runner *r);
vat__task *vat__steal(vat__runner *r);
void vat__enqueue(vat__runner *r, vat__task *t);

/** How many vats wait in r's queues (a snapshot, from any thread). */
static inline uint32_t vat__queued(vat__runner *r) {
  return vat__runq_size(&r->runq) + vat__deque_size(&r->fresh);
}

/* The next slot, else the busy list's oldest vat. */
static inline vat__task *vat__take_private(vat__runner *r) {
  vat__task *t = r->next;
  if (t != NULL) {
    r->next = NULL;
    return t;
  }
  if (r->busy_len == 0)
    return NULL;
  t = r->busy[0];
  r->busy[0] = r->busy[1];
  r->busy[1] = NULL;
  r->busy_len--;
  return t;
}

/* Fresh vats newest first, then the run queue's oldest. So that a vat
 * behind a stream of newer ones still runs, the run queue's oldest goes
 * first after VAT__FRESH_RUN_MAX fresh vats in a row, and the deque's
 * oldest now and then (VAT__FAIR_FRESH_EVERY). */
static inline __attribute__((always_inline)) vat__task *
vat__take_queued(vat__runner *r) {
  vat__task *t;
  if (r->fresh_run >= VAT__FRESH_RUN_MAX) {
    r->fresh_run = 0;
    if ((t = vat__runq_pop(&r->runq)) != NULL)
      return t;
  }
  if (r->ticks % VAT__FAIR_FRESH_EVERY == 0 &&
      (t = vat__deque_steal(&r->fresh)) != NULL)
    return t;
  if ((t = vat__deque_pop(&r->fresh)) != NULL) {
    r->fresh_run++;
    return t;
  }
  r->fresh_run = 0;
  return vat__runq_pop(&r->runq);
}

/** A worker thread's next vat, or NULL when it found none to run. */
static inline __attribute__((always_inline)) vat__task *
vat__pick(vat__runner *r) {
  vat__task *t;
  if (++r->ticks % VAT__INJECT_EVERY == 0 &&
      (t = vat__inject_pop(&r->sched->inject)) != NULL)
    return t;
  if ((t = vat__take_private(r)) != NULL) {
    if (++r->private_streak < VAT__PRIVATE_STREAK_MAX)
      return t;
    /* Now and then a private vat goes to the run queue: queued vats get
     * their turn, and an idle runner may take it. Not when it is the only
     * vat here: an idle runner would gain nothing by it, and waking one
     * for it costs more than the turns it runs (a failure travelling a
     * chain of a million linked vats took twice as long). */
    if (r->next == NULL && r->busy_len == 0 && vat__queued(r) == 0) {
      r->private_streak = 0;
      return t;
    }
    vat__enqueue(r, t);
    /* A test steals it here, before the run queue's pop below. */
    VAT__TEST_POINT("sched.pick.private_behind");
  }
  r->private_streak = 0;
  if ((t = vat__take_queued(r)) != NULL)
    return t;
  if ((t = vat__take_injected(r)) != NULL)
    return t;
  if ((t = vat__steal(r)) != NULL)
    return t;
  /* The private vat sent behind above may have been stolen before the
   * pop took it back. Its partner is still in the busy list, which no
   * other runner sees: reported as nothing to do, it waited for ever
   * once this runner parked (at once with spin 0). */
  return vat__take_private(r);
}

#endif
