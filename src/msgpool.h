/* Message nodes without the collector on the hot path.
 *
 * Each worker keeps a free list of nodes. A node freed on another worker
 * than the one that allocated it simply joins that worker's list. Lists are
 * refilled by carving a slab from the collector and are capped: past the
 * cap, freed nodes are left to the collector (a slab is reclaimed once none
 * of its nodes is referenced), so a burst does not pin memory for ever.
 *
 * The pool lives in collector memory reachable from its system, so free
 * nodes are reachable and are never reclaimed while listed.
 */
#ifndef VAT_MSGPOOL_H
#define VAT_MSGPOOL_H

#include <stddef.h>

#include "message.h"

typedef struct vat__msgpool {
  vat__msg *free;
  size_t count;
} vat__msgpool;

/** A zeroed node. Aborts on out-of-memory. Owner thread only. */
vat__msg *vat__msg_alloc(vat__msgpool *pool);
/** Returns a node, clearing what it held so nothing stays reachable. */
void vat__msg_free(vat__msgpool *pool, vat__msg *m);

/** A node from the collector, for threads without a pool (host threads). */
vat__msg *vat__msg_alloc_unpooled(void);

#endif
