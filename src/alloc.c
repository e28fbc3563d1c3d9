/* Collector memory for the runtime's own objects. */
#include <stdio.h>
#include <stdlib.h>

#include "internal.h"
#include "vat_gc.h"

void *vat__gc_alloc(size_t size) {
  void *p = GC_MALLOC(size);
  if (p == NULL) {
    fputs("libvat: out of memory\n", stderr);
    abort();
  }
  return p;
}
