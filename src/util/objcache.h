/* A thread's own free lists of small collector objects, each refilled with
 * several of the collector's blocks at a time.
 *
 * The collector's thread-local free lists, behind GC_MALLOC, refill one
 * 4 KiB block at a time (GC_generic_malloc_many), and each refill takes the
 * allocation lock and, with parallel marking, the mark lock twice, and
 * updates shared counters: on two workers that spawn, every refill pulls
 * those lines from the other core. A vat is one such object, so skynet
 * refilled every 28 vats, and those lines cost two workers a tenth of their
 * time (bench/README.md, "One refill, many blocks"). Asking for a batch of
 * blocks back to back finds the lines still here for all but the first.
 *
 * The objects are zeroed and scanned, like GC_MALLOC's, and as large as
 * the request and the byte the collector adds for interior pointers,
 * rounded up to 16-byte granules: the size GC_MALLOC gives small requests,
 * so the layout rules of core/vat.c hold for them (for some larger ones
 * GC_MALLOC rounds further, to fewer size classes). Objects waiting in a cache
 * are reachable through it: a cache lives in collector memory (a worker),
 * and vat__objcache_drop lets them go. Not thread-safe: one thread at a
 * time, its owner's. */
#ifndef VAT_UTIL_OBJCACHE_H
#define VAT_UTIL_OBJCACHE_H

#include <stddef.h>
#include <stdint.h>

#include "util/mem.h"

enum {
  /* Bytes per granule, and the byte the collector adds to each request
   * with interior pointers on (which vat_init insists on). */
  VAT__GC_GRANULE = 16,
  VAT__GC_EXTRA = 1,
  /* The largest request served from a cache: a vat with up to 400 bytes of
   * state. Larger ones go to GC_MALLOC. */
  VAT__OBJCACHE_MAX = 511,
  VAT__OBJCACHE_CLASSES = (VAT__OBJCACHE_MAX + VAT__GC_EXTRA) / VAT__GC_GRANULE,
  /* Blocks per refill: 64 KiB of one size. Skynet on two workers took
   * 0.087, 0.081, 0.080, 0.073 and 0.069 s with 1, 4, 8, 16 and 32 blocks
   * (medians of 9), spawn 0.161, 0.158, 0.154, 0.149 and 0.160 s; one
   * worker was the same with each. */
  VAT__OBJCACHE_REFILL_BLOCKS = 16,
};

typedef struct vat__objcache {
  /* By granules, less one: free[g - 1] lists objects of g granules,
   * linked through their first word (the collector's GC_NEXT; this header
   * leaves gc.h out, which would redefine pthread_create for its
   * includers). */
  void *free[VAT__OBJCACHE_CLASSES];
  uint64_t refills; /* batches taken from the collector (tests) */
} vat__objcache;

/** Refills c's list of `granules`-granule objects and takes one from it. */
void *vat__objcache_refill(vat__objcache *c, size_t granules);

/** A zeroed, scanned collector object of at least `size` bytes, from `c`
 *  when it serves that size; aborts when memory is exhausted. */
static inline void *vat__objcache_alloc(vat__objcache *c, size_t size) {
  if (size > VAT__OBJCACHE_MAX)
    return vat__gc_alloc(size);
  size_t granules =
      (size + VAT__GC_EXTRA + VAT__GC_GRANULE - 1) / VAT__GC_GRANULE;
  void *p = c->free[granules - 1];
  if (__builtin_expect(p == NULL, 0))
    return vat__objcache_refill(c, granules);
  c->free[granules - 1] = *(void **)p;
  *(void **)p = NULL;
  return p;
}

/** Lets the collector have back what c holds, each object unlinked from
 *  the next; c stays usable. */
void vat__objcache_drop(vat__objcache *c);

#endif
