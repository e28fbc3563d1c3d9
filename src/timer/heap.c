/* The timer service's deadline heap: a 4-ary min-heap ordered by
 * (deadline, arming sequence); each timer keeps its heap slot, so
 * cancelling is a removal in O(log n), not a search. A 4-ary heap does a
 * quarter fewer levels than a binary one and its children share a cache
 * line of the slot array. Under the service lock. */
#include "timer/service.h"
#include "util/gc.h"
#include "util/mem.h"

static inline bool earlier(const vat_timer *a, const vat_timer *b) {
  return a->deadline < b->deadline ||
         (a->deadline == b->deadline && a->seq < b->seq);
}

static inline void place(service *s, size_t i, vat_timer *t) {
  s->heap[i] = t;
  t->slot = (uint32_t)i;
}

static void sift_up(service *s, size_t i, vat_timer *t) {
  while (i > 0) {
    size_t parent = (i - 1) / 4;
    if (!earlier(t, s->heap[parent]))
      break;
    place(s, i, s->heap[parent]);
    i = parent;
  }
  place(s, i, t);
}

static void sift_down(service *s, size_t i, vat_timer *t) {
  for (;;) {
    size_t first = 4 * i + 1;
    if (first >= s->n)
      break;
    size_t best = first;
    size_t end = first + 4 < s->n ? first + 4 : s->n;
    for (size_t c = first + 1; c < end; c++)
      if (earlier(s->heap[c], s->heap[best]))
        best = c;
    if (!earlier(s->heap[best], t))
      break;
    place(s, i, s->heap[best]);
    i = best;
  }
  place(s, i, t);
}

void vat__timer_heap_insert(service *s, vat_timer *t) {
  if (s->n == s->cap) {
    size_t cap = s->cap ? s->cap * 2 : 256;
    vat_timer **heap =
        vat__oom_check(GC_REALLOC(s->heap, cap * sizeof *heap), "timers");
    s->heap = heap;
    s->cap = cap;
  }
  t->seq = s->seq++;
  sift_up(s, s->n++, t);
}

void vat__timer_heap_remove(service *s, vat_timer *t) {
  size_t i = t->slot;
  t->slot = NOT_ARMED;
  vat_timer *last = s->heap[--s->n];
  s->heap[s->n] = NULL;
  if (last == t)
    return;
  if (i > 0 && earlier(last, s->heap[(i - 1) / 4]))
    sift_up(s, i, last);
  else
    sift_down(s, i, last);
}
