/* The exits module's map: insertion-ordered, like CPython's compact dict.
 * Entries are appended to a dense array in the order their keys were
 * first put; an index of buckets (linear probing) points into it. So
 * iteration is in insertion order, whatever the keys hash to — which is
 * what makes a vat's links and monitors fire in the order they were made,
 * and the same in every run — and walks a dense array, not a sparse table.
 *
 * Layout: one collector allocation per map, the entries (cap - cap / 4 of
 * them: the table grows at 3/4 full) followed by the index (cap buckets of
 * uint32: 0 empty, else the entry's position + 1). A removed entry keeps
 * its bucket (its key becomes VAT__XMAP_GONE, which matches no key), so
 * probes never break; an insertion may reuse such a bucket; growing
 * compacts the entries, keeping their order. */
#include <string.h>

#include "exits/map.h"
#include "util/mem.h"

static uint32_t entries_cap(uint32_t cap) {
  return cap - cap / 4;
}

static uint32_t *index_of(const vat__xmap *m) {
  return (uint32_t *)(m->slots + entries_cap(m->cap));
}

static uint32_t bucket_of(uint64_t key, uint32_t cap) {
  key ^= key >> 33;
  key *= 0xff51afd7ed558ccdULL;
  key ^= key >> 33;
  return (uint32_t)key & (cap - 1);
}

static vat__xslot *find(const vat__xmap *m, uint64_t key) {
  if (m->cap == 0)
    return NULL;
  const uint32_t *index = index_of(m);
  for (uint32_t i = bucket_of(key, m->cap);; i = (i + 1) & (m->cap - 1)) {
    if (index[i] == 0)
      return NULL;
    vat__xslot *s = &m->slots[index[i] - 1];
    if (s->key == key)
      return s;
  }
}

/* `size` is written with relaxed atomic stores (plain moves) by the owner
 * alone, so a snapshot on another thread may read it (vat_ref_inspect);
 * the owner reads it plainly. */
static void set_size(vat__xmap *m, uint32_t size) {
  __atomic_store_n(&m->size, size, __ATOMIC_RELAXED);
}

/* Appends a key known to be absent; there is room for one more entry. */
static void append(vat__xmap *m, uint64_t key, void *value) {
  uint32_t *index = index_of(m);
  uint32_t i = bucket_of(key, m->cap);
  while (index[i] != 0 && m->slots[index[i] - 1].key != VAT__XMAP_GONE)
    i = (i + 1) & (m->cap - 1);
  m->slots[m->used] = (vat__xslot){key, value};
  index[i] = ++m->used;
  set_size(m, m->size + 1);
}

static void resize(vat__xmap *m, uint32_t cap) {
  const vat__xmap old = *m;
  size_t bytes =
      entries_cap(cap) * sizeof *m->slots + (size_t)cap * sizeof(uint32_t);
  m->slots = vat__gc_alloc(bytes); /* zeroed: every bucket empty */
  m->cap = cap;
  m->used = 0;
  set_size(m, 0);
  for (uint32_t i = 0; i < old.used; i++)
    if (old.slots[i].key != VAT__XMAP_GONE)
      append(m, old.slots[i].key, old.slots[i].value);
}

void *vat__xmap_get(const vat__xmap *m, uint64_t key) {
  vat__xslot *s = find(m, key);
  return s ? s->value : NULL;
}

void vat__xmap_put(vat__xmap *m, uint64_t key, void *value) {
  vat__xslot *s = find(m, key);
  if (s != NULL) {
    s->value = value; /* keeps its place in the order */
    return;
  }
  if (m->used == entries_cap(m->cap)) {
    /* Full of entries, live or removed: compact, and grow if more than
     * half of the room would be live. */
    uint32_t cap = 4;
    while ((m->size + 1) * 2 > entries_cap(cap))
      cap *= 2;
    resize(m, cap);
  }
  append(m, key, value);
}

bool vat__xmap_remove(vat__xmap *m, uint64_t key) {
  vat__xslot *s = find(m, key);
  if (s == NULL)
    return false;
  /* Cleared at once, so a stale word never pins a dead vat. */
  *s = (vat__xslot){VAT__XMAP_GONE, NULL};
  set_size(m, m->size - 1);
  if (m->size == 0) {
    /* Emptied: forget the removed entries too. */
    memset(index_of(m), 0, m->cap * sizeof(uint32_t));
    m->used = 0;
  }
  return true;
}

void vat__xmap_each(const vat__xmap *m,
                    void (*fn)(void *ctx, uint64_t key, void *value),
                    void *ctx) {
  for (uint32_t i = 0; i < m->used; i++) {
    uint64_t key = m->slots[i].key;
    if (key != VAT__XMAP_GONE)
      fn(ctx, key, m->slots[i].value);
  }
}

void vat__xmap_clear(vat__xmap *m) {
  m->slots = NULL;
  m->cap = m->used = 0;
  set_size(m, 0);
}

uint32_t vat__xmap_size_peek(const vat__xmap *m) {
  return __atomic_load_n(&m->size, __ATOMIC_RELAXED);
}
