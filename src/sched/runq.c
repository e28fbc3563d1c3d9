/* See runq.h. The memory orders follow the single-owner ring protocol. */
#include "sched/runq.h"

#include "sched/task.h"
#include "util/cpu.h"

#define SLOT(q, i) (&(q)->slots[(i) % VAT__RUNQ_SIZE])

void vat__runq_init(vat__runq *q) {
  atomic_init(&q->head, 0);
  atomic_init(&q->tail, 0);
  for (uint32_t i = 0; i < VAT__RUNQ_SIZE; i++)
    atomic_init(&q->slots[i], NULL);
}

VAT__HOT bool vat__runq_push(vat__runq *q, vat__task *v) {
  /* Acquire on head: a thief's CAS released the slots it read, so the slot
   * we are about to overwrite is no longer being read. */
  uint32_t head = atomic_load_explicit(&q->head, memory_order_acquire);
  uint32_t tail = atomic_load_explicit(&q->tail, memory_order_relaxed);
  if (tail - head >= VAT__RUNQ_SIZE)
    return false;
  atomic_store_explicit(SLOT(q, tail), v, memory_order_relaxed);
  /* Release: a consumer that sees the new tail sees the slot and the vat. */
  atomic_store_explicit(&q->tail, tail + 1, memory_order_release);
  return true;
}

vat__task *vat__runq_pop(vat__runq *q) {
  for (;;) {
    uint32_t head = atomic_load_explicit(&q->head, memory_order_acquire);
    uint32_t tail = atomic_load_explicit(&q->tail, memory_order_relaxed);
    if (head == tail)
      return NULL;
    vat__task *v = atomic_load_explicit(SLOT(q, head), memory_order_relaxed);
    /* Release: pairs with a pusher's acquire of head (slot now reusable). */
    if (atomic_compare_exchange_weak_explicit(&q->head, &head, head + 1,
                                              memory_order_release,
                                              memory_order_relaxed))
      return v;
  }
}

vat__task *vat__runq_take_half(vat__runq *q, uint32_t *count) {
  for (;;) {
    uint32_t head = atomic_load_explicit(&q->head, memory_order_acquire);
    uint32_t tail = atomic_load_explicit(&q->tail, memory_order_relaxed);
    uint32_t n = (tail - head) / 2;
    if (n == 0)
      return NULL;
    /* Claim the slots first: until the CAS wins, a thief may take these
     * vats, and their links are then the thief's to write. */
    if (!atomic_compare_exchange_strong_explicit(&q->head, &head, head + n,
                                                 memory_order_release,
                                                 memory_order_relaxed))
      continue;
    /* Ours now, and only the owner (us) writes slots: safe to read. */
    vat__task *first = NULL, *last = NULL;
    for (uint32_t i = 0; i < n; i++) {
      vat__task *v =
          atomic_load_explicit(SLOT(q, head + i), memory_order_relaxed);
      if (last)
        last->next = v;
      else
        first = v;
      last = v;
    }
    last->next = NULL;
    *count = n;
    return first;
  }
}

vat__task *vat__runq_steal(vat__runq *into, vat__runq *from) {
  uint32_t into_tail = atomic_load_explicit(&into->tail, memory_order_relaxed);
  for (;;) {
    /* Acquire on both: the victim's pushes (tail) and pops (head) published
     * the slots we read. */
    uint32_t head = atomic_load_explicit(&from->head, memory_order_acquire);
    uint32_t tail = atomic_load_explicit(&from->tail, memory_order_acquire);
    uint32_t n = tail - head;
    n -= n / 2;
    if (n == 0 || n > VAT__RUNQ_SIZE / 2)
      return NULL; /* empty, or a torn read of a moving queue */
    for (uint32_t i = 0; i < n; i++) {
      vat__task *v =
          atomic_load_explicit(SLOT(from, head + i), memory_order_relaxed);
      atomic_store_explicit(SLOT(into, into_tail + i), v, memory_order_relaxed);
    }
    /* acq_rel: acquire the victim's state; release tells the victim (and
     * other thieves) these slots are ours. */
    if (atomic_compare_exchange_strong_explicit(&from->head, &head, head + n,
                                                memory_order_acq_rel,
                                                memory_order_relaxed)) {
      /* Keep the newest stolen vat to run now; publish the rest. */
      n--;
      vat__task *run =
          atomic_load_explicit(SLOT(into, into_tail + n), memory_order_relaxed);
      if (n > 0)
        atomic_store_explicit(&into->tail, into_tail + n, memory_order_release);
      return run;
    }
  }
}

vat__task *vat__runq_draw(vat__runq *q, uint32_t k) {
  uint32_t head = atomic_load_explicit(&q->head, memory_order_relaxed);
  _Atomic(vat__task *) *a = SLOT(q, head), *b = SLOT(q, head + k);
  vat__task *chosen = atomic_load_explicit(b, memory_order_relaxed);
  atomic_store_explicit(b, atomic_load_explicit(a, memory_order_relaxed),
                        memory_order_relaxed);
  atomic_store_explicit(a, chosen, memory_order_relaxed);
  return vat__runq_pop(q);
}

uint32_t vat__runq_size(vat__runq *q) {
  uint32_t head = atomic_load_explicit(&q->head, memory_order_acquire);
  uint32_t tail = atomic_load_explicit(&q->tail, memory_order_acquire);
  return tail - head;
}
