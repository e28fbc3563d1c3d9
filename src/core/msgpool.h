/* Message nodes without the collector on the hot path.
 *
 * Each worker keeps a free list of nodes, newest first, so a node freed
 * here is the next one sent from here while its line is still in this
 * core's cache. A node freed on another worker than the one that
 * allocated it joins the freeing worker's list, so a producer on one core
 * and a consumer on another would drain one list and flood the other. The
 * system's depot evens that out: a worker with too many free nodes hands
 * a batch to the depot, and a worker that ran out takes a batch from it
 * (one lock per batch, not per node) before it takes new nodes from the
 * collector.
 *
 * Batches travel as arrays of addresses, not as lists threaded through
 * the nodes. A node that crossed cores is in the other core's cache, and
 * a list of such nodes is a chain of misses, each waiting for the one
 * before it (the next address is in the line that misses): a producer fed
 * from the depot waited for one at every send, and handed its consumer
 * nodes in an order the hardware could not prefetch either. From an array
 * the refill knows every address at once: it puts them in address order
 * where they are not in runs already (reading the addresses, never the
 * nodes), then links the nodes, its stores to the other core's lines
 * overlapping instead of queueing. The producer then sends from lines in
 * its own cache, and a burst's consumer walks its nodes in an order the
 * prefetcher follows (bench/README.md, "Message nodes that cross
 * cores").
 *
 * Home nodes are carved from the depot's chunks until there are as many
 * as the pools and the depot keep at most: VAT__MSGPOOL_CAP nodes per
 * worker (VAT__MSGPOOL_LONE_CAP for a pool alone on its depot: a
 * one-worker flood swings by thousands of nodes between its producer's
 * sends and its consumer's frees, and spilling at VAT__MSGPOOL_CAP cost
 * it 15% of its rate, bench/README.md) and the depot's VAT__MSGDEPOT_CAP
 * batches. Past them a refill takes strays, nodes that are collector
 * objects of their own. Past the depot's cap, a spill leaves strays to
 * the collector, their links cut, and keeps home nodes: a chunk is one
 * object, which one of its nodes still listed keeps, so home nodes are
 * never let go; what a burst leaves is the home nodes (4.25 MiB at most
 * on two workers, carved once) and the strays that took turns with them
 * in the lists (msgpool.c).
 *
 * Pools and the depot live in collector memory reachable from their system,
 * so listed nodes are never reclaimed.
 */
#ifndef VAT_CORE_MSGPOOL_H
#define VAT_CORE_MSGPOOL_H

#include <pthread.h>
#include <stddef.h>

#include "core/message.h"

enum {
  VAT__MSGPOOL_BATCH = 1024,
  VAT__MSGPOOL_CAP = 2 * VAT__MSGPOOL_BATCH,
  /* A pool alone on its depot (one worker) keeps more: its spills would
   * only come back to it, and each cost a walk of BATCH nodes. */
  VAT__MSGPOOL_LONE_CAP = 16 * VAT__MSGPOOL_BATCH,
  VAT__MSGDEPOT_CAP = 64, /* full batches the depot keeps at most (4 MiB) */
  /* Chunks of home nodes, doubling from 256: 2^23 nodes' worth, far past
   * what any number of workers' caps add up to. */
  VAT__MSGDEPOT_CHUNKS = 16,
};

/* VAT__MSGPOOL_BATCH free nodes on their way between workers: their
 * addresses, and the same nodes still linked in that order, which a depot
 * with one pool hands back whole. */
typedef struct vat__msgbatch {
  struct vat__msgbatch *next; /* in the depot */
  vat__msg *nodes[VAT__MSGPOOL_BATCH];
} vat__msgbatch;

/* Batches of free nodes shared by a system's workers. */
typedef struct vat__msgdepot {
  pthread_mutex_t lock;
  vat__msgbatch *full;
  vat__msgbatch *empty; /* arrays emptied by refills, for spills to reuse */
  _Atomic size_t count; /* full batches; written under the lock, read
                           without it as a hint */
  unsigned pools;        /* sharing it: set before any of them runs */
  /* Home nodes (msgpool.c): the chunks they are carved from, each as
   * large as those before it together (the first 256 nodes), so that a
   * node is told home or stray by a few comparisons. The addresses are
   * written under the lock and read without it, by pools holding nodes
   * of chunks they saw published. */
  _Atomic(vat__msg *) home[VAT__MSGDEPOT_CHUNKS];
  _Atomic size_t home_nodes[VAT__MSGDEPOT_CHUNKS];
  _Atomic unsigned home_chunks;
  _Atomic bool home_done; /* all carved: refills take strays */
  size_t home_carved;     /* nodes handed out, under the lock */
} vat__msgdepot;

typedef struct vat__msgpool {
  vat__msg *free;
  size_t count;
  size_t cap; /* spills at this count; 0 until the first free (spill) */
  vat__msgdepot *depot; /* NULL: no sharing */
  /* Only for spills and refills, made on first need: an empty array for
   * the next spill, and the refill's sorting space. */
  vat__msgbatch *spare;
  vat__msg **sorted;
} vat__msgpool;

void vat__msgdepot_init(vat__msgdepot *depot);

/** Makes the (zeroed) `pool` share `depot`. Before any pool of the depot
 *  is used. */
void vat__msgpool_join(vat__msgpool *pool, vat__msgdepot *depot);

/* The slow halves of alloc and free, out of line. */
void vat__msgpool_refill(vat__msgpool *pool);
void vat__msgpool_spill(vat__msgpool *pool);

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
  m->aux.run_header = NULL; /* the whole word */
  atomic_store_explicit(&m->next, pool->free, memory_order_relaxed);
  pool->free = m;
  if (__builtin_expect(++pool->count >= pool->cap, 0))
    vat__msgpool_spill(pool);
}

/** A node from the collector, for threads without a pool (host threads). */
vat__msg *vat__msg_alloc_unpooled(void);

#endif
