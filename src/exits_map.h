/* A small open-addressing hash map from non-zero 64-bit keys (vat
 * addresses, monitor ids) to pointers, for one vat's links and monitors.
 * Owned by one vat: no locking. Its memory comes from the collector and is
 * scanned, so the values (refs, watches) stay alive while stored. Removed
 * slots are cleared at once, so a stale word never pins a dead vat. */
#ifndef VAT_EXITS_MAP_H
#define VAT_EXITS_MAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct vat__xslot {
  uint64_t key; /* 0: empty; VAT__XMAP_GONE: removed */
  void *value;
} vat__xslot;

typedef struct vat__xmap {
  vat__xslot *slots;
  uint32_t cap;  /* a power of two, or 0 */
  uint32_t size; /* live keys */
  uint32_t used; /* live and removed slots */
} vat__xmap;

#define VAT__XMAP_GONE UINT64_MAX

void *vat__xmap_get(const vat__xmap *m, uint64_t key);
/** Inserts or replaces. */
void vat__xmap_put(vat__xmap *m, uint64_t key, void *value);
/** Returns whether the key was there. */
bool vat__xmap_remove(vat__xmap *m, uint64_t key);
void vat__xmap_each(const vat__xmap *m,
                    void (*fn)(void *ctx, uint64_t key, void *value),
                    void *ctx);
void vat__xmap_clear(vat__xmap *m);

#endif
