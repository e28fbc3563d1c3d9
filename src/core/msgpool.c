/* See msgpool.h. */
#include "core/msgpool.h"

#include "util/gc.h"
#include "util/mem.h"

enum {
  SLAB_NODES = 256, /* 16 KiB: one collector allocation per refill */
  /* Nodes moved to or from the depot at once; a worker keeps at most
   * VAT__MSGPOOL_CAP free nodes. */
  BATCH = VAT__MSGPOOL_BATCH,
  DEPOT_CAP = 64, /* batches the depot keeps at most (~3 MiB) */
};

void vat__msgdepot_init(vat__msgdepot *depot) {
  pthread_mutex_init(&depot->lock, NULL);
  depot->batches = NULL;
  atomic_init(&depot->count, 0);
}

static vat__msg *next_of(vat__msg *m) {
  return atomic_load_explicit(&m->next, memory_order_relaxed);
}

static void refill_from_slab(vat__msgpool *pool) {
  vat__msg *slab = vat__oom_check(
      GC_memalign(sizeof(vat__msg), SLAB_NODES * sizeof(vat__msg)),
      "message nodes");
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

/* A batch given up to the collector: its nodes must not point at each
 * other, or one of them still reachable (a stale word anywhere, or a node
 * of the same slab kept in a pool) would keep the whole chain alive, and
 * with it the slabs the chain runs through. */
static void unlink_batch(vat__msg *m) {
  while (m != NULL) {
    vat__msg *next = next_of(m);
    atomic_store_explicit(&m->next, NULL, memory_order_relaxed);
    m = next;
  }
}

/* Hands the newest BATCH free nodes to the depot, or to the collector when
 * the depot is full. */
void vat__msgpool_spill(vat__msgpool *pool) {
  vat__msg *batch = pool->free, *last = batch;
  for (size_t i = 1; i < BATCH; i++)
    last = next_of(last);
  pool->free = next_of(last);
  pool->count -= BATCH;
  atomic_store_explicit(&last->next, NULL, memory_order_relaxed);
  vat__msgdepot *depot = pool->depot;
  bool kept = false;
  if (depot != NULL) {
    pthread_mutex_lock(&depot->lock);
    if (atomic_load_explicit(&depot->count, memory_order_relaxed) < DEPOT_CAP) {
      batch->arg = depot->batches;
      depot->batches = batch;
      atomic_fetch_add_explicit(&depot->count, 1, memory_order_relaxed);
      kept = true;
    }
    pthread_mutex_unlock(&depot->lock);
  }
  if (!kept)
    unlink_batch(batch);
}

void vat__msgpool_refill(vat__msgpool *pool) {
  if (!refill_from_depot(pool))
    refill_from_slab(pool);
}

vat__msg *vat__msg_alloc_unpooled(void) {
  return vat__oom_check(GC_MALLOC(sizeof(vat__msg)), "a message");
}
