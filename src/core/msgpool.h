/* Message nodes without the collector on the hot path.
 *
 * Each worker keeps a free list of nodes. A node freed on another worker
 * than the one that allocated it joins the freeing worker's list, so a
 * producer on one core and a consumer on another would drain one list and
 * flood the other. The system's depot evens that out: a worker with too
 * many free nodes hands a batch to the depot, and a worker that ran out
 * takes a batch from it (one lock per batch, not per node) before it carves
 * a new slab from the collector. Past the depot's cap, batches are left to
 * the collector with their links cut, so a burst does not pin memory for
 * ever: what stays is at most VAT__MSGPOOL_CAP nodes per worker and the
 * depot's batches.
 *
 * Pools and the depot live in collector memory reachable from their system,
 * so listed nodes are never reclaimed.
 */
#ifndef VAT_CORE_MSGPOOL_H
#define VAT_CORE_MSGPOOL_H

#include <pthread.h>
#include <stddef.h>

#include "core/message.h"

/* Batches of free nodes shared by a system's workers. */
typedef struct vat__msgdepot {
  pthread_mutex_t lock;
  vat__msg *batches;    /* linked through each batch's first node's `arg` */
  _Atomic size_t count; /* written under the lock; read without it, as a hint */
} vat__msgdepot;

typedef struct vat__msgpool {
  vat__msg *free;
  size_t count;
  vat__msgdepot *depot; /* NULL: no sharing */
} vat__msgpool;

void vat__msgdepot_init(vat__msgdepot *depot);

/* The slow halves of alloc and free, out of line. */
void vat__msgpool_refill(vat__msgpool *pool);
void vat__msgpool_spill(vat__msgpool *pool);

enum { VAT__MSGPOOL_BATCH = 1024, VAT__MSGPOOL_CAP = 2 * VAT__MSGPOOL_BATCH };

/** A node whose link is NULL; the caller sets the rest. Aborts on
 *  out-of-memory. Owner thread only. Inline: one per send. */
static inline vat__msg *vat__msg_alloc(vat__msgpool *pool) {
  if (__builtin_expect(pool->free == NULL, 0))
    vat__msgpool_refill(pool);
  vat__msg *m = pool->free;
  pool->free = atomic_load_explicit(&m->next, memory_order_relaxed);
  pool->count--;
  atomic_store_explicit(&m->next, NULL, memory_order_relaxed);
  return m;
}

/** Returns a node, clearing what it held so nothing stays reachable. */
static inline void vat__msg_free(vat__msgpool *pool, vat__msg *m) {
  m->target = NULL;
  m->arg = NULL;
  m->value = (vat_value){0};
  m->aux = NULL;
  atomic_store_explicit(&m->next, pool->free, memory_order_relaxed);
  pool->free = m;
  if (__builtin_expect(++pool->count >= VAT__MSGPOOL_CAP, 0))
    vat__msgpool_spill(pool);
}

/** A node from the collector, for threads without a pool (host threads). */
vat__msg *vat__msg_alloc_unpooled(void);

#endif
