/* Collector memory for the runtime's own objects, and the one
 * out-of-memory policy: the library returns every failure as a code except
 * running out of memory, which prints what was being allocated and aborts
 * (STYLE.md: abort only on out-of-memory). Every allocation in src/ except
 * lib/ and value/'s public constructors goes through here. */
#ifndef VAT_UTIL_MEM_H
#define VAT_UTIL_MEM_H

#include <stddef.h>

/** Reports that `what` could not be allocated, and aborts. */
_Noreturn void vat__oom(const char *what);

/** `p`, or vat__oom(what) when it is NULL. */
static inline void *vat__oom_check(void *p, const char *what) {
  if (__builtin_expect(p == NULL, 0))
    vat__oom(what);
  return p;
}

/** Zeroed, scanned collector memory; aborts when memory is exhausted. */
void *vat__gc_alloc(size_t size);

/** As vat__gc_alloc, aligned to `align` bytes (a power of two). */
void *vat__gc_alloc_aligned(size_t align, size_t size);

#endif
