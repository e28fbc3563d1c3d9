/* See deque.h. Indices are free-running 32-bit counters; their differences,
 * read as signed, are sizes. */
#include "sched/deque.h"

#include <assert.h>

#include "sched/task.h"
#include "util/cpu.h"

#define SLOT(d, i) (&(d)->slots[(i) % VAT__DEQUE_SIZE])

void vat__deque_init(vat__deque *d) {
  atomic_init(&d->top, 0);
  atomic_init(&d->bottom, 0);
  d->top_seen = 0;
  d->clean = 0;
  for (uint32_t i = 0; i < VAT__DEQUE_SIZE; i++)
    atomic_init(&d->slots[i], NULL);
}

VAT__HOT bool vat__deque_push(vat__deque *d, vat__task *v) {
  uint32_t b = atomic_load_explicit(&d->bottom, memory_order_relaxed);
  uint32_t t = d->top_seen; /* top is at least this: room is at least so */
  if (b - t >= VAT__DEQUE_SIZE) {
    /* Acquire: a thief's CAS past a slot comes before we overwrite it. */
    t = d->top_seen = atomic_load_explicit(&d->top, memory_order_acquire);
    if (b - t >= VAT__DEQUE_SIZE)
      return false;
  }
  /* The slots below t were stolen: each thief read its slot before its
   * CAS, which an acquire load of top (here or in pop) saw, so no thief
   * still needs them. */
  for (; d->clean != t; d->clean++)
    atomic_store_explicit(SLOT(d, d->clean), NULL, memory_order_relaxed);
  atomic_store_explicit(SLOT(d, b), v, memory_order_relaxed);
  /* Release: a thief that sees the new bottom sees the slot and the vat. */
  atomic_store_explicit(&d->bottom, b + 1, memory_order_release);
  return true;
}

VAT__HOT vat__task *vat__deque_pop(vat__deque *d) {
  uint32_t b = atomic_load_explicit(&d->bottom, memory_order_relaxed);
  uint32_t t = atomic_load_explicit(&d->top, memory_order_relaxed);
  if (b == t) /* empty: only thieves move top, and only towards bottom */
    return NULL;
  b--;
  atomic_store_explicit(&d->bottom, b, memory_order_relaxed);
  /* seq_cst: the claim on slot b (bottom lowered) and the look at top are
   * ordered against a thief's look at bottom after its read of top, so of
   * an owner and a thief after the same last vat, one sees the other. */
  atomic_thread_fence(memory_order_seq_cst);
  /* Acquire, for the clean-up in push (top_seen). */
  t = d->top_seen = atomic_load_explicit(&d->top, memory_order_acquire);
  if ((int32_t)(b - t) < 0) { /* thieves took everything meanwhile */
    atomic_store_explicit(&d->bottom, b + 1, memory_order_relaxed);
    return NULL;
  }
  vat__task *v = atomic_load_explicit(SLOT(d, b), memory_order_relaxed);
  if (b != t) {
    /* More than one left: no thief can win slot b. One may still read
     * it, and then lose its CAS, so the NULL it may see is never used. */
    atomic_store_explicit(SLOT(d, b), NULL, memory_order_relaxed);
    return v;
  }
  /* The last vat: whoever moves top past it has it. A thief that won
   * leaves the slot to the next push's clean-up. */
  if (atomic_compare_exchange_strong_explicit(
          &d->top, &t, t + 1, memory_order_seq_cst, memory_order_relaxed))
    atomic_store_explicit(SLOT(d, b), NULL, memory_order_relaxed);
  else
    v = NULL;
  atomic_store_explicit(&d->bottom, b + 1, memory_order_relaxed);
  return v;
}

vat__task *vat__deque_steal(vat__deque *d) {
  uint32_t t = atomic_load_explicit(&d->top, memory_order_acquire);
  atomic_thread_fence(memory_order_seq_cst);
  /* Acquire: pairs with the owner's release of bottom in push. */
  uint32_t b = atomic_load_explicit(&d->bottom, memory_order_acquire);
  if ((int32_t)(b - t) <= 0)
    return NULL;
  vat__task *v = atomic_load_explicit(SLOT(d, t), memory_order_relaxed);
  /* A slot read by a thief that then loses the CAS may be stale; only the
   * winner's read counts, and the owner does not reuse slot t until top
   * has moved past it. */
  if (!atomic_compare_exchange_strong_explicit(
          &d->top, &t, t + 1, memory_order_seq_cst, memory_order_relaxed))
    return NULL;
  assert(v != NULL); /* the owner clears only slots no thief can win */
  return v;
}

uint32_t vat__deque_size(vat__deque *d) {
  uint32_t t = atomic_load_explicit(&d->top, memory_order_acquire);
  uint32_t b = atomic_load_explicit(&d->bottom, memory_order_acquire);
  int32_t n = (int32_t)(b - t);
  return n > 0 ? (uint32_t)n : 0;
}
