/* See mem.h. */
#include "util/mem.h"

#include <stdio.h>
#include <stdlib.h>

#include "util/gc.h"

void vat__oom(const char *what) {
  fprintf(stderr, "libvat: out of memory allocating %s\n", what);
  abort();
}

void *vat__gc_alloc(size_t size) {
  return vat__oom_check(GC_MALLOC(size), "an object");
}

void *vat__gc_alloc_aligned(size_t align, size_t size) {
  return vat__oom_check(GC_memalign(align, size), "an aligned object");
}
