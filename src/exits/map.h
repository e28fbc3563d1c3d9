/* A small hash map from non-zero 64-bit keys (vat addresses, monitor ids)
 * to pointers, for one vat's links and monitors. It iterates in insertion
 * order (see map.c), never in hash order: links and monitors fire in
 * the order they were made. Owned by one vat: no locking. Its memory comes from
 * the collector and is scanned, so the values (refs, watches) stay alive while
 * stored. Removed slots are cleared at once, so a stale word never pins a dead
 * vat. */
#ifndef VAT_EXITS_MAP_H
#define VAT_EXITS_MAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct vat__xslot {
  uint64_t key; /* VAT__XMAP_GONE: removed */
  void *value;
} vat__xslot;

typedef struct vat__xmap {
  vat__xslot *slots; /* entries in insertion order, then the index */
  uint32_t cap;      /* index buckets: a power of two, or 0 */
  uint32_t size;     /* live entries */
  uint32_t used;     /* entries appended: live and removed */
} vat__xmap;

#define VAT__XMAP_GONE UINT64_MAX

void *vat__xmap_get(const vat__xmap *m, uint64_t key);
/** Inserts at the end of the order, or replaces the value in place. */
void vat__xmap_put(vat__xmap *m, uint64_t key, void *value);
/** Returns whether the key was there. */
bool vat__xmap_remove(vat__xmap *m, uint64_t key);
/** Calls `fn` for each live entry, in insertion order. `fn` must not
 *  change the map. */
void vat__xmap_each(const vat__xmap *m,
                    void (*fn)(void *ctx, uint64_t key, void *value),
                    void *ctx);
void vat__xmap_clear(vat__xmap *m);
/** The number of live entries, from any thread: the owner stores it with
 *  relaxed atomic stores; a value it had lately. */
uint32_t vat__xmap_size_peek(const vat__xmap *m);

#endif
