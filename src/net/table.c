/* A small open-addressing hash table from nonzero uint64 keys to pointers:
 * the connection's imports, exports and questions. Its arrays are the
 * collector's and scanned, so what a table holds (refs, resolvers) stays
 * alive while the connection does. Linear probing; removal shifts the
 * following entries back, so no tombstones pile up. */
#define GC_THREADS 1
#include <gc/gc.h>
#include <string.h>

#include "internal.h"

static size_t slot_of(uint64_t key, size_t cap) {
  key ^= key >> 33; /* spread pointers' low zero bits and sequential ids */
  key *= 0xff51afd7ed558ccdULL;
  key ^= key >> 33;
  return (size_t)key & (cap - 1);
}

static size_t find(const net_table *t, uint64_t key) {
  size_t i = slot_of(key, t->cap);
  while (t->keys[i] != 0 && t->keys[i] != key)
    i = (i + 1) & (t->cap - 1);
  return i;
}

void *net_table_get(const net_table *t, uint64_t key) {
  if (t->cap == 0)
    return NULL;
  size_t i = find(t, key);
  return t->keys[i] == key ? t->vals[i] : NULL;
}

static bool grow(net_table *t) {
  size_t cap = t->cap ? t->cap * 2 : 16;
  net_table n = {GC_MALLOC_ATOMIC(cap * sizeof(uint64_t)),
                 GC_MALLOC(cap * sizeof(void *)), cap, 0};
  if (n.keys == NULL || n.vals == NULL)
    return false;
  memset(n.keys, 0, cap * sizeof(uint64_t));
  for (size_t i = 0; i < t->cap; i++)
    if (t->keys[i] != 0)
      net_table_put(&n, t->keys[i], t->vals[i]);
  *t = n;
  return true;
}

bool net_table_put(net_table *t, uint64_t key, void *val) {
  if ((t->len + 1) * 4 > t->cap * 3 && !grow(t))
    return false;
  size_t i = find(t, key);
  if (t->keys[i] == 0) {
    t->keys[i] = key;
    t->len++;
  }
  t->vals[i] = val;
  return true;
}

void *net_table_take(net_table *t, uint64_t key) {
  if (t->cap == 0)
    return NULL;
  size_t i = find(t, key);
  if (t->keys[i] != key)
    return NULL;
  void *val = t->vals[i];
  size_t mask = t->cap - 1;
  /* Backward shift: move each following entry into the hole unless its
   * home slot lies cyclically in (hole, j]. */
  size_t hole = i;
  for (size_t j = (i + 1) & mask; t->keys[j] != 0; j = (j + 1) & mask) {
    size_t home = slot_of(t->keys[j], t->cap);
    bool stays =
        hole <= j ? (hole < home && home <= j) : (hole < home || home <= j);
    if (!stays) {
      t->keys[hole] = t->keys[j];
      t->vals[hole] = t->vals[j];
      hole = j;
    }
  }
  t->keys[hole] = 0;
  t->vals[hole] = NULL;
  t->len--;
  return val;
}

void net_table_each(const net_table *t, void (*fn)(void *ctx, void *val),
                    void *ctx) {
  for (size_t i = 0; i < t->cap; i++)
    if (t->keys[i] != 0)
      fn(ctx, t->vals[i]);
}
