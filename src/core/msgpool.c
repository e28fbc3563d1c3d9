/* See msgpool.h. */
#include "core/msgpool.h"

#include <string.h>

#include "util/gc.h"
#include "util/mem.h"
#include <gc/gc_inline.h> /* GC_generic_malloc_many, GC_I_NORMAL */

enum {
  SLAB_NODES = 256, /* 16 KiB: one collector allocation per refill */
  /* Nodes moved to or from the depot at once; a worker keeps at most
   * VAT__MSGPOOL_CAP free nodes (VAT__MSGPOOL_LONE_CAP alone). */
  BATCH = VAT__MSGPOOL_BATCH,
  DEPOT_CAP = VAT__MSGDEPOT_CAP,
};

void vat__msgdepot_init(vat__msgdepot *depot) {
  pthread_mutex_init(&depot->lock, NULL);
  depot->full = NULL;
  depot->empty = NULL;
  atomic_init(&depot->count, 0);
  for (unsigned i = 0; i < VAT__MSGDEPOT_CHUNKS; i++) {
    atomic_init(&depot->home[i], NULL);
    atomic_init(&depot->home_nodes[i], 0);
  }
  atomic_init(&depot->home_chunks, 0);
  atomic_init(&depot->home_done, false);
  depot->home_carved = 0;
  depot->pools = 0;
}

void vat__msgpool_join(vat__msgpool *pool, vat__msgdepot *depot) {
  pool->depot = depot;
  depot->pools++;
}

static vat__msg *next_of(vat__msg *m) {
  return atomic_load_explicit(&m->next, memory_order_relaxed);
}

/* The nodes a depot's pools and the depot itself can keep, all of them
 * full: its home nodes (below). */
static size_t home_budget(const vat__msgdepot *depot) {
  size_t cap = depot->pools == 1 ? VAT__MSGPOOL_LONE_CAP : VAT__MSGPOOL_CAP;
  return depot->pools * cap + (size_t)DEPOT_CAP * BATCH;
}

/* Whether `m` is one of the depot's home nodes. */
static bool is_home(const vat__msgdepot *depot, const vat__msg *m) {
  unsigned n = atomic_load_explicit(&depot->home_chunks, memory_order_acquire);
  for (unsigned i = 0; i < n; i++) {
    uintptr_t lo =
        (uintptr_t)atomic_load_explicit(&depot->home[i], memory_order_relaxed);
    size_t len =
        atomic_load_explicit(&depot->home_nodes[i], memory_order_relaxed) *
        sizeof(vat__msg);
    if ((uintptr_t)m - lo < len)
      return true;
  }
  return false;
}

/* SLAB_NODES home nodes from the depot's chunks, linked lowest address
 * first, or NULL once they are all carved. */
static vat__msg *carve_home(vat__msgdepot *depot) {
  if (depot == NULL ||
      atomic_load_explicit(&depot->home_done, memory_order_relaxed))
    return NULL;
  size_t budget = home_budget(depot);
  vat__msg *first = NULL;
  pthread_mutex_lock(&depot->lock);
  unsigned n = atomic_load_explicit(&depot->home_chunks, memory_order_relaxed);
  size_t in_chunks = 0;
  for (unsigned i = 0; i < n; i++)
    in_chunks +=
        atomic_load_explicit(&depot->home_nodes[i], memory_order_relaxed);
  if (depot->home_carved == in_chunks && in_chunks < budget &&
      n < VAT__MSGDEPOT_CHUNKS) {
    size_t nodes = in_chunks > 0 ? in_chunks : SLAB_NODES;
    if (nodes > budget - in_chunks || n == VAT__MSGDEPOT_CHUNKS - 1)
      nodes = budget - in_chunks;
    vat__msg *chunk =
        vat__oom_check(GC_memalign(sizeof(vat__msg), nodes * sizeof(vat__msg)),
                       "message nodes");
    atomic_store_explicit(&depot->home[n], chunk, memory_order_relaxed);
    atomic_store_explicit(&depot->home_nodes[n], nodes, memory_order_relaxed);
    /* Release: a pool that sees the count sees the chunk. */
    atomic_store_explicit(&depot->home_chunks, n + 1, memory_order_release);
    in_chunks += nodes;
    n++;
  }
  if (depot->home_carved < in_chunks) {
    vat__msg *chunk =
        atomic_load_explicit(&depot->home[n - 1], memory_order_relaxed);
    size_t at = depot->home_carved -
                (in_chunks - atomic_load_explicit(&depot->home_nodes[n - 1],
                                                  memory_order_relaxed));
    first = &chunk[at];
    for (size_t i = 0; i < SLAB_NODES - 1; i++)
      atomic_store_explicit(&first[i].next, &first[i + 1],
                            memory_order_relaxed);
    depot->home_carved += SLAB_NODES;
  }
  if (depot->home_carved >= budget)
    atomic_store_explicit(&depot->home_done, true, memory_order_relaxed);
  pthread_mutex_unlock(&depot->lock);
  return first;
}

/* Home nodes while the depot's pools and the depot could keep them all
 * (a chunk's SLAB_NODES at a time); past that, strays, each an object of
 * its own (vat__msgpool_spill says why), a block of the collector's at a
 * time: GC_generic_malloc_many hands out a block's free objects at once
 * (one lock per 4 KiB block), cleared, linked through their first word,
 * which is the node's link, in address order. They are asked for exactly
 * 64 bytes, without the byte GC_MALLOC adds for pointers just past an
 * object's end, so that they fill a 64-byte class, whose blocks put them
 * on line boundaries; a pointer past one's end would keep its neighbour
 * instead, and nothing here makes one. */
static void refill_from_collector(vat__msgpool *pool) {
  vat__msg *home = carve_home(pool->depot);
  if (home != NULL) {
    pool->free = home; /* the pool is empty: the last link is NULL */
    pool->count += SLAB_NODES;
    return;
  }
  void *list = NULL;
  GC_generic_malloc_many(sizeof(vat__msg), GC_I_NORMAL, &list);
  vat__msg *m = pool->free = vat__oom_check(list, "message nodes");
  for (pool->count++; next_of(m) != NULL; pool->count++)
    m = next_of(m);
}

/* Orders a batch's addresses for the prefetcher, into `out` (`in` is the
 * other buffer). A batch that already runs in steps of a few lines, up
 * or down, with fewer than SORT_JUMPS jumps between such runs, is left as
 * it is: its runs average 16 nodes or more, which the prefetcher follows.
 * Any other is radix sorted by cache line, in digits of 11 bits over the
 * span the batch covers (one digit for nodes within 128 KiB of each
 * other, two within 256 MiB: the usual case, three beyond). On a flood
 * over two workers, sorting every batch cost 7% of the samples and made
 * short runs slower than not sorting at all; sorting none left the long
 * ones where they were (1M and 10M messages, M msg/s: 16.6 and 15.8
 * sorting all, 19.0 and 12.8 sorting none, 18.9 and 16.3 with this
 * threshold). Reads the addresses only, never the nodes. Every node is in
 * one of the two buffers throughout, both scanned by the collector. */
enum { SORT_JUMPS = 64, JUMP_BYTES = 4 * 64 };
enum { DIGIT_BITS = 11, DIGITS = 1u << DIGIT_BITS };

static void sort_by_address(vat__msg **in, vat__msg **out) {
  uintptr_t lo = UINTPTR_MAX, hi = 0;
  size_t jumps = 0;
  for (size_t i = 0; i < BATCH; i++) {
    uintptr_t a = (uintptr_t)in[i];
    lo = a < lo ? a : lo;
    hi = a > hi ? a : hi;
    if (i > 0) {
      uintptr_t b = (uintptr_t)in[i - 1];
      jumps += (a > b ? a - b : b - a) > JUMP_BYTES;
    }
  }
  if (jumps < SORT_JUMPS) {
    memcpy(out, in, BATCH * sizeof *out);
    return;
  }
  uintptr_t span = (hi - lo) >> 6;
  unsigned passes = 1;
  while (passes < 3 && span >> (DIGIT_BITS * passes) != 0)
    passes++;
  /* An odd number of passes ends in `out`; an even one copies first. */
  vat__msg **src = in, **dst = out;
  if (passes % 2 == 0) {
    memcpy(out, in, BATCH * sizeof *out);
    src = out;
    dst = in;
  }
  for (unsigned pass = 0; pass < passes; pass++) {
    unsigned shift = DIGIT_BITS * pass;
    uint16_t start[DIGITS + 1];
    memset(start, 0, sizeof start);
    for (size_t i = 0; i < BATCH; i++)
      start[((((uintptr_t)src[i] - lo) >> 6 >> shift) & (DIGITS - 1)) + 1]++;
    for (size_t d = 1; d <= DIGITS; d++)
      start[d] += start[d - 1];
    for (size_t i = 0; i < BATCH; i++)
      dst[start[(((uintptr_t)src[i] - lo) >> 6 >> shift) & (DIGITS - 1)]++] =
          src[i];
    vat__msg **t = src;
    src = dst;
    dst = t;
  }
}

/* Links a batch that may come from another core into the pool (empty:
 * this is a refill), in an order the prefetcher follows. */
static void link_in_address_order(vat__msgpool *pool, vat__msgbatch *batch) {
  if (pool->sorted == NULL)
    pool->sorted = vat__gc_alloc(BATCH * sizeof *pool->sorted);
  sort_by_address(batch->nodes, pool->sorted);
  /* Linked from the last back: independent stores to known addresses,
   * which the core overlaps, and the list starts at the first. */
  vat__msg *list = pool->free;
  for (size_t i = BATCH; i-- > 0;) {
    atomic_store_explicit(&pool->sorted[i]->next, list, memory_order_relaxed);
    list = pool->sorted[i];
  }
  pool->free = list;
  pool->count += BATCH;
  /* Arrays kept must not keep what they listed from the collector. */
  memset(pool->sorted, 0, BATCH * sizeof *pool->sorted);
}

static bool refill_from_depot(vat__msgpool *pool) {
  vat__msgdepot *depot = pool->depot;
  /* A peek without the lock, a hint only: a miss costs a refill from the collector. */
  if (depot == NULL ||
      atomic_load_explicit(&depot->count, memory_order_relaxed) == 0)
    return false;
  pthread_mutex_lock(&depot->lock);
  vat__msgbatch *batch = depot->full;
  if (batch) {
    depot->full = batch->next;
    atomic_fetch_sub_explicit(&depot->count, 1, memory_order_relaxed);
    /* The batch's array becomes this pool's spare; the one it had goes
     * back for others' spills. */
    if (pool->spare != NULL) {
      pool->spare->next = depot->empty;
      depot->empty = pool->spare;
      pool->spare = NULL;
    }
  }
  pthread_mutex_unlock(&depot->lock);
  if (batch == NULL)
    return false;
  if (depot->pools == 1) {
    /* Its own nodes, still linked, and in this core's cache: nothing to
     * gain from another order. */
    pool->free = batch->nodes[0];
    pool->count += BATCH;
  } else {
    link_in_address_order(pool, batch);
  }
  memset(batch->nodes, 0, sizeof batch->nodes);
  batch->next = NULL;
  pool->spare = batch;
  return true;
}

void vat__msgpool_refill(vat__msgpool *pool) {
  if (!refill_from_depot(pool))
    refill_from_collector(pool);
}

/* Past the depot's cap: leaves the strays among the newest BATCH free
 * nodes to the collector, their links cut, and keeps the home nodes.
 * Returns how many it left. */
static size_t drop_strays(vat__msgpool *pool) {
  const vat__msgdepot *depot = pool->depot;
  vat__msg *m = pool->free, *kept = NULL, *last_kept = NULL;
  size_t dropped = 0;
  for (size_t i = 0; i < BATCH; i++) {
    vat__msg *next = next_of(m);
    if (depot != NULL && is_home(depot, m)) {
      if (last_kept != NULL)
        atomic_store_explicit(&last_kept->next, m, memory_order_relaxed);
      else
        kept = m;
      last_kept = m;
    } else {
      atomic_store_explicit(&m->next, NULL, memory_order_relaxed);
      dropped++;
    }
    m = next;
  }
  if (last_kept != NULL) {
    atomic_store_explicit(&last_kept->next, m, memory_order_relaxed);
    pool->free = kept;
  } else {
    pool->free = m;
  }
  pool->count -= dropped;
  return dropped;
}

/* Hands the newest BATCH free nodes to the depot. Past its cap they are
 * left to the collector instead, but only strays: the nodes taken from
 * the collector once the depot's home nodes were as many as it and its
 * pools keep. Home nodes are never left to it. They lie in chunks, each
 * one collector object, and one node of a chunk still listed keeps it:
 * when nodes of slabs (as chunks were) were left to the collector, the
 * slabs stayed in memory for the nodes still listed, and as the nodes
 * kept moved from burst to burst (a run's header is freed before its run,
 * so some of a burst's newest nodes are among the first its consumer
 * frees), the slabs they kept grew without end: on two workers the live
 * heap grew ~1.2 MB a burst of 250,000 (the memory suite's
 * message_bursts_across_workers_leave_the_live_heap_flat). Nodes that
 * were each an object of their own, all let go alike, did not stop the
 * kept ones moving either: each kept its 4 KiB block of the collector
 * from counting as free, and the blocks with one grew (~150 KiB a
 * burst). With home nodes kept, the strays kept take turns with those let
 * go, and the heap stays flat. The depot takes a batch past its cap when
 * fewer than half of it are strays: home nodes are no more than the depot
 * and its pools keep, so those batches are bounded too.
 *
 * The newest, though the oldest would leave the warmest lines here: the
 * walk to them is half as long, and handing the oldest over made a flood
 * over two workers slower (14.1 against 15.1 M msg/s). The array they
 * travel in is this pool's spare, or one the depot hands back in the same
 * lock; only when neither is there is one made. */
void vat__msgpool_spill(vat__msgpool *pool) {
  vat__msgdepot *depot = pool->depot;
  /* The cap is set here, at the first free, when every pool of the depot
   * has joined (vat__msgpool_join: before any is used). */
  size_t cap = depot != NULL && depot->pools == 1 ? VAT__MSGPOOL_LONE_CAP
                                                  : VAT__MSGPOOL_CAP;
  if (pool->cap != cap) {
    pool->cap = cap;
    if (pool->count < cap)
      return;
  }
  if (depot == NULL) {
    /* Nothing but strays (refill_from_collector). */
    drop_strays(pool);
    return;
  }
  bool room =
      atomic_load_explicit(&depot->count, memory_order_relaxed) < DEPOT_CAP;
  if (!room && drop_strays(pool) >= BATCH / 2)
    return;
  vat__msgbatch *batch = pool->spare;
  if (batch == NULL)
    batch = vat__gc_alloc(sizeof *batch);
  pool->spare = NULL;
  vat__msg *first = pool->free, *last = first;
  batch->nodes[0] = first;
  for (size_t i = 1; i < BATCH; i++) {
    last = next_of(last);
    batch->nodes[i] = last;
  }
  pool->free = next_of(last);
  pool->count -= BATCH;
  atomic_store_explicit(&last->next, NULL, memory_order_relaxed);
  pthread_mutex_lock(&depot->lock);
  batch->next = depot->full;
  depot->full = batch;
  atomic_fetch_add_explicit(&depot->count, 1, memory_order_relaxed);
  if ((pool->spare = depot->empty) != NULL) {
    depot->empty = pool->spare->next;
    pool->spare->next = NULL;
  }
  pthread_mutex_unlock(&depot->lock);
}

vat__msg *vat__msg_alloc_unpooled(void) {
  return vat__oom_check(GC_MALLOC(sizeof(vat__msg)), "a message");
}
