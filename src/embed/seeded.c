/* Deterministic mode's scheduler: picks the next vat to run at random from
 * all ready vats with a seeded generator, one message per pick, so the
 * interleaving depends only on the seed and the inputs.
 */
#include "core/schedule.h"
#include "core/system.h"
#include "embed/embed.h"

/* Deterministic: every ready vat is in the run queue or the shared queue
 * (its `next` slot is flushed), and one is drawn from the union. The run
 * queue holds at most its size, so the draw needs no extra memory: drawn
 * vats are swapped to the head and popped. */
static uint64_t det_random(vat_system *sys) {
  uint64_t x = sys->det_rng;
  x ^= x >> 12;
  x ^= x << 25;
  x ^= x >> 27;
  sys->det_rng = x;
  return x * 0x2545F4914F6CDD1Dull;
}

vat__vat *vat__next_seeded(vat__worker *w) {
  vat_system *sys = w->sys;
  vat__runq *q = &w->runq;
  if (w->next) {
    vat__vat *v = w->next;
    w->next = NULL;
    if (!vat__runq_push(q, v))
      vat__schedule_external(sys, v);
  }
  /* Top the run queue up from the shared queue, in arrival order, so the
   * draw covers everything that is ready (up to the queue's size). */
  for (vat__vat *v; vat__runq_size(q) < VAT__RUNQ_SIZE &&
                    (v = vat__inject_pop(&sys->inject)) != NULL;)
    vat__runq_push(q, v);
  uint32_t n = vat__runq_size(q);
  if (n == 0)
    return NULL;
  uint32_t head = atomic_load_explicit(&q->head, memory_order_relaxed);
  uint32_t pick = head + (uint32_t)(det_random(sys) % n);
  _Atomic(vat__vat *) *a = &q->slots[head % VAT__RUNQ_SIZE];
  _Atomic(vat__vat *) *b = &q->slots[pick % VAT__RUNQ_SIZE];
  vat__vat *chosen = atomic_load_explicit(b, memory_order_relaxed);
  atomic_store_explicit(b, atomic_load_explicit(a, memory_order_relaxed),
                        memory_order_relaxed);
  atomic_store_explicit(a, chosen, memory_order_relaxed);
  return vat__runq_pop(q);
}
