/* Message nodes without the collector on the hot path.
 *
 * Each worker keeps a free list of nodes. A node freed on another worker
 * than the one that allocated it joins the freeing worker's list, so a
 * producer on one core and a consumer on another would drain one list and
 * flood the other. The system's depot evens that out: a worker with too
 * many free nodes hands a batch to the depot, and a worker that ran out
 * takes a batch from it (one lock per batch, not per node) before it carves
 * a new slab from the collector. Past the depot's cap, batches are left to
 * the collector, so a burst does not pin memory for ever.
 *
 * Pools and the depot live in collector memory reachable from their system,
 * so listed nodes are never reclaimed.
 */
#ifndef VAT_MSGPOOL_H
#define VAT_MSGPOOL_H

#include <pthread.h>
#include <stddef.h>

#include "message.h"

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
void vat__msgdepot_destroy(vat__msgdepot *depot);

/** A zeroed node. Aborts on out-of-memory. Owner thread only. */
vat__msg *vat__msg_alloc(vat__msgpool *pool);
/** Returns a node, clearing what it held so nothing stays reachable. */
void vat__msg_free(vat__msgpool *pool, vat__msg *m);

/** A node from the collector, for threads without a pool (host threads). */
vat__msg *vat__msg_alloc_unpooled(void);

#endif
