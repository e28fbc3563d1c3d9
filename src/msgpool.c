#include "msgpool.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vat_gc.h"

enum {
  SLAB_NODES = 256,     /* ~12 KiB: one collector allocation per refill */
  BATCH = 1024,         /* nodes moved to or from the depot at once */
  POOL_CAP = 2 * BATCH, /* a worker keeps at most this many free nodes */
  DEPOT_CAP = 64,       /* batches the depot keeps at most (~3 MiB) */
};

void vat__msgdepot_init(vat__msgdepot *depot) {
  pthread_mutex_init(&depot->lock, NULL);
  depot->batches = NULL;
  atomic_init(&depot->count, 0);
}

void vat__msgdepot_destroy(vat__msgdepot *depot) {
  pthread_mutex_destroy(&depot->lock);
}

static vat__msg *next_of(vat__msg *m) {
  return atomic_load_explicit(&m->next, memory_order_relaxed);
}

static void refill_from_slab(vat__msgpool *pool) {
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

static bool refill_from_depot(vat__msgpool *pool) {
  vat__msgdepot *depot = pool->depot;
  /* A peek without the lock, a hint only: a miss costs a slab refill. */
  if (depot == NULL ||
      atomic_load_explicit(&depot->count, memory_order_relaxed) == 0)
    return false;
  pthread_mutex_lock(&depot->lock);
  vat__msg *batch = depot->batches;
  if (batch) {
    depot->batches = batch->arg;
    atomic_fetch_sub_explicit(&depot->count, 1, memory_order_relaxed);
  }
  pthread_mutex_unlock(&depot->lock);
  if (batch == NULL)
    return false;
  batch->arg = NULL;
  pool->free = batch;
  pool->count = BATCH;
  return true;
}

/* Hands the newest BATCH free nodes to the depot, or to the collector when
 * the depot is full. */
static void spill(vat__msgpool *pool) {
  vat__msg *batch = pool->free, *last = batch;
  for (size_t i = 1; i < BATCH; i++)
    last = next_of(last);
  pool->free = next_of(last);
  pool->count -= BATCH;
  atomic_store_explicit(&last->next, NULL, memory_order_relaxed);
  vat__msgdepot *depot = pool->depot;
  if (depot == NULL)
    return;
  pthread_mutex_lock(&depot->lock);
  if (atomic_load_explicit(&depot->count, memory_order_relaxed) < DEPOT_CAP) {
    batch->arg = depot->batches;
    depot->batches = batch;
    atomic_fetch_add_explicit(&depot->count, 1, memory_order_relaxed);
  }
  pthread_mutex_unlock(&depot->lock);
}

vat__msg *vat__msg_alloc(vat__msgpool *pool) {
  if (pool->free == NULL && !refill_from_depot(pool))
    refill_from_slab(pool);
  vat__msg *m = pool->free;
  pool->free = next_of(m);
  pool->count--;
  atomic_store_explicit(&m->next, NULL, memory_order_relaxed);
  return m;
}

void vat__msg_free(vat__msgpool *pool, vat__msg *m) {
  m->target = NULL;
  m->arg = NULL;
  m->value = (vat_value){0};
  atomic_store_explicit(&m->next, pool->free, memory_order_relaxed);
  pool->free = m;
  if (++pool->count >= POOL_CAP)
    spill(pool);
}

vat__msg *vat__msg_alloc_unpooled(void) {
  vat__msg *m = GC_MALLOC(sizeof *m);
  if (m == NULL) {
    fputs("libvat: out of memory allocating a message\n", stderr);
    abort();
  }
  return m;
}
