/* Reading the rings back: see rings.h. */
#include "trace/rings.h"

#include <stdlib.h>
#include <string.h>

#include "vat/error.h"

/* --- Copying the rings --------------------------------------------------- */

/* While the system runs (a write on request), the owner may record during
 * the copy: the count read after it tells which slots it may have
 * overwritten under us, and those are dropped as lost, like a seqlock's
 * reader. Not instrumented for ThreadSanitizer: the racy reads are the
 * design. */
__attribute__((no_sanitize("thread"))) void
vat__trace_copy_ring(vat__trace_ring *r, bool still, vat__trace_track *t) {
  uint64_t slots = r->mask + 1;
  /* Acquire: the slots up to `head` are written. */
  uint64_t head = atomic_load_explicit(&r->head, memory_order_acquire);
  uint64_t first = head > slots ? head - slots : 0;
  for (uint64_t i = first; i < head; i++) {
    const volatile uint64_t *from =
        (const volatile uint64_t *)&r->events[i & r->mask];
    uint64_t *to = (uint64_t *)&t->ev[i - first];
    for (size_t k = 0; k < sizeof(vat__trace_event) / 8; k++)
      to[k] = from[k];
  }
  /* Acquire fence: the copy's reads come before the second look. */
  atomic_thread_fence(memory_order_acquire);
  uint64_t after = atomic_load_explicit(&r->head, memory_order_relaxed);
  /* The owner may be writing slot `after`, which held event after-slots. */
  uint64_t safe = after + !still > slots ? after + !still - slots : 0;
  uint64_t skip = safe > first ? safe - first : 0;
  if (skip > head - first)
    skip = head - first;
  memmove(t->ev, t->ev + skip, (head - first - skip) * sizeof *t->ev);
  t->n = head - first - skip;
  t->lost = first + skip;
}

/* --- Flows --------------------------------------------------------------- */

static int cmp_u64(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? -1 : x > y;
}

bool vat__trace_ids_has(const vat__trace_ids *s, uint64_t id) {
  return id != 0 && bsearch(&id, s->ids, s->n, sizeof *s->ids, cmp_u64) != NULL;
}

size_t vat__trace_ids_place(const vat__trace_ids *s, uint64_t id) {
  const uint64_t *at =
      id ? bsearch(&id, s->ids, s->n, sizeof *s->ids, cmp_u64) : NULL;
  return at ? (size_t)(at - s->ids) + 1 : 0;
}

size_t vat__trace_starts_of(const vat__trace_event *e) {
  return e->kind == VAT__TR_TURN ? e->sends : e->kind == VAT__TR_SEND;
}

uint64_t vat__trace_start_id(const vat__trace_track *t, size_t j, uint32_t k) {
  const vat__trace_event *e = &t->ev[j];
  if (e->kind == VAT__TR_SEND)
    return e->flow;
  return vat__trace_flow_id(t->flow_base, t->lost + j, k);
}

static void sort_unique(vat__trace_ids *out) {
  qsort(out->ids, out->n, sizeof *out->ids, cmp_u64);
  size_t u = 0;
  for (size_t j = 0; j < out->n; j++)
    if (u == 0 || out->ids[u - 1] != out->ids[j])
      out->ids[u++] = out->ids[j];
  out->n = u;
}

int vat__trace_collect_ids(const vat__trace_track *tracks, unsigned n,
                           uint32_t kind, bool starts, vat__trace_ids *out) {
  size_t total = 0;
  for (unsigned i = 0; i < n; i++)
    for (size_t j = 0; j < tracks[i].n; j++)
      total += starts ? vat__trace_starts_of(&tracks[i].ev[j]) : 1;
  out->ids = malloc((total ? total : 1) * sizeof *out->ids);
  out->n = 0;
  if (out->ids == NULL)
    return VAT_ENOMEM;
  for (unsigned i = 0; i < n; i++)
    for (size_t j = 0; j < tracks[i].n; j++) {
      const vat__trace_event *e = &tracks[i].ev[j];
      if (starts) {
        for (uint32_t k = 0; k < vat__trace_starts_of(e); k++)
          out->ids[out->n++] = vat__trace_start_id(&tracks[i], j, k);
      } else if (e->kind == kind && e->flow != 0) {
        out->ids[out->n++] = e->flow;
      }
    }
  sort_unique(out);
  return VAT_OK;
}
