#include "msgpool.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vat_gc.h"

enum {
  SLAB_NODES = 256,       /* ~12 KiB: one collector allocation per refill */
  POOL_CAP = 1u << 16,    /* free nodes a worker keeps at most */
};

static void refill(vat__msgpool *pool) {
  vat__msg *slab = GC_MALLOC(SLAB_NODES * sizeof(vat__msg));
  if (slab == NULL) {
    fputs("libvat: out of memory allocating message nodes\n", stderr);
    abort();
  }
  for (size_t i = 0; i < SLAB_NODES; i++) {
    atomic_store_explicit(&slab[i].next, pool->free, memory_order_relaxed);
    pool->free = &slab[i];
  }
  pool->count += SLAB_NODES;
}

vat__msg *vat__msg_alloc(vat__msgpool *pool) {
  if (pool->free == NULL)
    refill(pool);
  vat__msg *m = pool->free;
  pool->free = atomic_load_explicit(&m->next, memory_order_relaxed);
  pool->count--;
  atomic_store_explicit(&m->next, NULL, memory_order_relaxed);
  return m;
}

void vat__msg_free(vat__msgpool *pool, vat__msg *m) {
  m->target = NULL;
  m->arg = NULL;
  m->value = (vat_value){0};
  if (pool->count >= POOL_CAP) {
    /* Leave it to the collector; a stale link would keep a chain alive. */
    atomic_store_explicit(&m->next, NULL, memory_order_relaxed);
    return;
  }
  atomic_store_explicit(&m->next, pool->free, memory_order_relaxed);
  pool->free = m;
  pool->count++;
}

vat__msg *vat__msg_alloc_unpooled(void) {
  vat__msg *m = GC_MALLOC(sizeof *m);
  if (m == NULL) {
    fputs("libvat: out of memory allocating a message\n", stderr);
    abort();
  }
  return m;
}
