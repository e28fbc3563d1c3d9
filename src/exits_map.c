/* The exits module's hash map: linear probing, grown at 3/4 full counting
 * removed slots, so probes always end at an empty one. */
#include <stdlib.h>

#include "exits_map.h"
#include "vat_gc.h"

static uint32_t slot_of(uint64_t key, uint32_t cap) {
  key ^= key >> 33;
  key *= 0xff51afd7ed558ccdULL;
  key ^= key >> 33;
  return (uint32_t)key & (cap - 1);
}

static vat__xslot *find(const vat__xmap *m, uint64_t key) {
  if (m->cap == 0)
    return NULL;
  for (uint32_t i = slot_of(key, m->cap);; i = (i + 1) & (m->cap - 1)) {
    vat__xslot *s = &m->slots[i];
    if (s->key == key)
      return s;
    if (s->key == 0)
      return NULL;
  }
}

static void insert_fresh(vat__xmap *m, uint64_t key, void *value) {
  uint32_t i = slot_of(key, m->cap);
  while (m->slots[i].key != 0 && m->slots[i].key != VAT__XMAP_GONE)
    i = (i + 1) & (m->cap - 1);
  if (m->slots[i].key == 0)
    m->used++;
  m->slots[i] = (vat__xslot){key, value};
  m->size++;
}

static void resize(vat__xmap *m, uint32_t cap) {
  vat__xslot *old = m->slots;
  uint32_t old_cap = m->cap;
  m->slots = GC_MALLOC(cap * sizeof *m->slots);
  if (m->slots == NULL)
    abort();
  m->cap = cap;
  m->size = m->used = 0;
  for (uint32_t i = 0; i < old_cap; i++)
    if (old[i].key != 0 && old[i].key != VAT__XMAP_GONE)
      insert_fresh(m, old[i].key, old[i].value);
}

void *vat__xmap_get(const vat__xmap *m, uint64_t key) {
  vat__xslot *s = find(m, key);
  return s ? s->value : NULL;
}

void vat__xmap_put(vat__xmap *m, uint64_t key, void *value) {
  vat__xslot *s = find(m, key);
  if (s != NULL) {
    s->value = value;
    return;
  }
  if ((m->used + 1) * 4 > m->cap * 3) {
    uint32_t cap = m->cap ? m->cap : 4;
    while ((m->size + 1) * 2 > cap)
      cap *= 2;
    resize(m, cap);
  }
  insert_fresh(m, key, value);
}

bool vat__xmap_remove(vat__xmap *m, uint64_t key) {
  vat__xslot *s = find(m, key);
  if (s == NULL)
    return false;
  *s = (vat__xslot){VAT__XMAP_GONE, NULL};
  m->size--;
  if (m->size == 0) {
    /* Emptied: forget the tombstones too. */
    for (uint32_t i = 0; i < m->cap; i++)
      m->slots[i] = (vat__xslot){0, NULL};
    m->used = 0;
  }
  return true;
}

void vat__xmap_each(const vat__xmap *m,
                    void (*fn)(void *ctx, uint64_t key, void *value),
                    void *ctx) {
  for (uint32_t i = 0; i < m->cap; i++) {
    uint64_t key = m->slots[i].key;
    if (key != 0 && key != VAT__XMAP_GONE)
      fn(ctx, key, m->slots[i].value);
  }
}

void vat__xmap_clear(vat__xmap *m) {
  *m = (vat__xmap){0};
}
