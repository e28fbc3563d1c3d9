/* See objcache.h. */
#include "util/objcache.h"

#include "util/gc.h"
#include <gc/gc_inline.h>

void *vat__objcache_refill(vat__objcache *c, size_t granules) {
  size_t bytes = granules * VAT__GC_GRANULE;
  void *head = NULL;
  void **tail = &head;
  for (int i = 0; i < VAT__OBJCACHE_REFILL_BLOCKS; i++) {
    /* One block's free objects, cleared but for their links. Appended
     * where the list ends, so the objects go out in address order. */
    void *list = NULL;
    GC_generic_malloc_many(bytes, GC_I_NORMAL, &list);
    if (list == NULL)
      break;
    *tail = list;
    while (GC_NEXT(list) != NULL)
      list = GC_NEXT(list);
    tail = &GC_NEXT(list);
  }
  void *p = vat__oom_check(head, "an object");
  c->refills++;
  c->free[granules - 1] = GC_NEXT(p);
  GC_NEXT(p) = NULL;
  return p;
}

void vat__objcache_drop(vat__objcache *c) {
  /* Unlinked one by one: a stale word left pointing at one object (the
   * collector scans conservatively) would otherwise keep every object
   * after it in its list. */
  for (size_t g = 0; g < VAT__OBJCACHE_CLASSES; g++) {
    void *p = c->free[g];
    c->free[g] = NULL;
    while (p != NULL) {
      void *next = GC_NEXT(p);
      GC_NEXT(p) = NULL;
      p = next;
    }
  }
}
