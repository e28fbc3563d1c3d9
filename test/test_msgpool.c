/* Message-node pools and their depot on their own: the order a refilled
 * pool hands nodes out in, what a batch lists, a full
 * depot that leaves batches to the collector, and a stress run of nodes
 * going round between a producer's pool and a consumer's. */
#include "util/gc.h"

#include <inttypes.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/msgpool.h"
#include "suites.h"
#include "support.h"

enum {
  BATCH = VAT__MSGPOOL_BATCH,
  CAP = VAT__MSGPOOL_CAP,
  LONE_CAP = VAT__MSGPOOL_LONE_CAP
};

static vat__msgdepot *depot_new(void) {
  vat__msgdepot *d = GC_MALLOC(sizeof *d);
  ck_assert_ptr_nonnull(d);
  vat__msgdepot_init(d);
  return d;
}

static vat__msgpool *pool_new(vat__msgdepot *depot) {
  vat__msgpool *p = GC_MALLOC(sizeof *p); /* zeroed: an empty pool */
  ck_assert_ptr_nonnull(p);
  if (depot != NULL)
    vat__msgpool_join(p, depot);
  return p;
}

static void shuffle(vat__msg **v, size_t n, uint64_t *rng) {
  for (size_t i = n - 1; i > 0; i--) {
    size_t j = (size_t)test_rand_between(rng, 0, i);
    vat__msg *t = v[i];
    v[i] = v[j];
    v[j] = t;
  }
}

/* Allocates `n` nodes from `from` and frees them into `into` in a random
 * order; returns them in that order. */
static vat__msg **free_shuffled(vat__msgpool *from, vat__msgpool *into,
                                size_t n, uint64_t *rng) {
  vat__msg **nodes = GC_MALLOC(n * sizeof *nodes);
  ck_assert_ptr_nonnull(nodes);
  for (size_t i = 0; i < n; i++)
    nodes[i] = vat__msg_alloc(from);
  shuffle(nodes, n, rng);
  for (size_t i = 0; i < n; i++)
    vat__msg_free(into, nodes[i]);
  return nodes;
}

/* Nodes freed on one worker in any order reach a worker that refills from
 * the depot in address order: the order a burst's consumer on another core
 * then walks them in, one the prefetcher follows (msgpool.h). */
START_TEST(a_refill_hands_out_nodes_in_address_order) {
  uint64_t rng = test_seed("msgpool order");
  vat__msgdepot *depot = depot_new();
  vat__msgpool *maker = pool_new(depot), *freer = pool_new(depot),
               *taker = pool_new(depot);
  enum { N = CAP };
  /* The free that fills the pool hands its newest BATCH over. */
  vat__msg **nodes = free_shuffled(maker, freer, N, &rng);
  ck_assert_uint_eq(atomic_load(&depot->count), 1);
  vat__msg *prev = NULL;
  size_t from_batch = 0;
  for (size_t i = 0; i < BATCH; i++) {
    vat__msg *m = vat__msg_alloc(taker);
    if (prev != NULL && (uintptr_t)m <= (uintptr_t)prev)
      ck_abort_msg("node %zu of a refill at %p, after %p", i, (void *)m,
                   (void *)prev);
    prev = m;
    for (size_t j = N - BATCH; j < N; j++)
      from_batch += nodes[j] == m;
  }
  /* The newest BATCH freed, each once. */
  ck_assert_uint_eq(from_batch, BATCH);
  ck_assert_uint_eq(atomic_load(&depot->count), 0);
}
END_TEST

/* A batch already in runs of nearby lines (here: slab order, backwards)
 * is handed out as it came, not sorted: sorting it would cost the refill
 * and gain the prefetcher nothing. */
START_TEST(a_batch_in_runs_keeps_its_order) {
  vat__msgdepot *depot = depot_new();
  vat__msgpool *maker = pool_new(depot), *freer = pool_new(depot),
               *taker = pool_new(depot);
  enum { N = CAP };
  vat__msg **nodes = GC_MALLOC(N * sizeof *nodes);
  ck_assert_ptr_nonnull(nodes);
  for (size_t i = 0; i < N; i++)
    nodes[i] = vat__msg_alloc(maker);
  /* The free that fills the pool hands its newest BATCH over, newest
   * first: nodes[N - 1] down to nodes[N - BATCH]. */
  for (size_t i = 0; i < N; i++)
    vat__msg_free(freer, nodes[i]);
  ck_assert_uint_eq(atomic_load(&depot->count), 1);
  for (size_t i = 0; i < BATCH; i++) {
    vat__msg *m = vat__msg_alloc(taker);
    if (m != nodes[N - 1 - i])
      ck_abort_msg("node %zu of a refill in runs is %p, not %p", i, (void *)m,
                   (void *)nodes[N - 1 - i]);
  }
}
END_TEST

/* A batch in the depot lists its nodes twice over, the same way: by
 * address in its array, and linked in that order, the last linked to
 * nothing (a depot with one pool hands the list back whole). Its nodes
 * hold nothing of what their messages carried, and the array of a batch
 * taken out keeps no node from the collector. */
START_TEST(a_batch_lists_its_nodes_once) {
  vat__msgdepot *depot = depot_new();
  /* Two pools: one alone on its depot would not spill at CAP. */
  vat__msgpool *pool = pool_new(depot), *taker = pool_new(depot);
  enum { N = CAP };
  vat__msg **nodes = GC_MALLOC(N * sizeof *nodes);
  for (size_t i = 0; i < N; i++) {
    vat__msg *m = nodes[i] = vat__msg_alloc(pool);
    m->target = (vat_ref *)m;
    m->arg = m;
    m->aux.signal_data = m;
  }
  for (size_t i = 0; i < N; i++)
    vat__msg_free(pool, nodes[i]);
  ck_assert_uint_eq(atomic_load(&depot->count), 1);
  vat__msgbatch *batch = depot->full;
  for (size_t i = 0; i < BATCH; i++) {
    vat__msg *m = batch->nodes[i];
    vat__msg *want = i + 1 < BATCH ? batch->nodes[i + 1] : NULL;
    if (atomic_load(&m->next) != want)
      ck_abort_msg("node %zu of a batch links elsewhere than its array", i);
    if (m->target != NULL || m->arg != NULL || m->aux.signal_data != NULL)
      ck_abort_msg("node %zu of a batch still holds its message", i);
  }
  /* Emptied by another pool's refill, the array keeps nothing. */
  vat__msg_alloc(taker);
  for (size_t i = 0; i < BATCH; i++)
    ck_assert_ptr_null(batch->nodes[i]);
}
END_TEST

static int by_address(const void *a, const void *b) {
  uintptr_t x = (uintptr_t)*(vat__msg *const *)a;
  uintptr_t y = (uintptr_t)*(vat__msg *const *)b;
  return x < y ? -1 : x > y;
}

/* A depot with one pool (a one-worker system) gives a batch back as it
 * was spilled, still linked: every node once, none lost, none twice. */
START_TEST(a_lone_pool_takes_its_batches_back_whole) {
  uint64_t rng = test_seed("msgpool lone");
  vat__msgdepot *depot = depot_new();
  vat__msgpool *pool = pool_new(depot);
  enum { N = 3 * LONE_CAP };
  vat__msg **nodes = free_shuffled(pool, pool, N, &rng);
  ck_assert_uint_gt(atomic_load(&depot->count), 0);
  size_t listed = pool->count + atomic_load(&depot->count) * BATCH;
  ck_assert_uint_eq(listed, N);
  vat__msg **back = GC_MALLOC(N * sizeof *back);
  for (size_t i = 0; i < N; i++)
    back[i] = vat__msg_alloc(pool);
  ck_assert_uint_eq(atomic_load(&depot->count), 0);
  /* The same N nodes: sort both lists of addresses and compare. */
  qsort(nodes, N, sizeof *nodes, by_address);
  qsort(back, N, sizeof *back, by_address);
  for (size_t i = 0; i < N; i++)
    if (nodes[i] != back[i])
      ck_abort_msg("node %zu handed back is %p, not %p", i, (void *)back[i],
                   (void *)nodes[i]);
}
END_TEST

/* A pool alone on its depot (one worker) keeps up to LONE_CAP free nodes
 * before it spills: a spill would only come back to it. A pool that
 * shares its depot spills at CAP, for the others to take. */
static size_t frees_until_spill(vat__msgpool *pool, vat__msgdepot *depot,
                                vat__msgpool *maker) {
  size_t frees = 0;
  while (atomic_load(&depot->count) == 0 && frees < 4 * LONE_CAP) {
    vat__msg_free(pool, vat__msg_alloc(maker));
    frees++;
  }
  return frees;
}

START_TEST(a_lone_pool_spills_only_past_its_larger_cap) {
  vat__msgpool *maker = pool_new(NULL);
  vat__msgdepot *lone = depot_new();
  ck_assert_uint_eq(frees_until_spill(pool_new(lone), lone, maker), LONE_CAP);
  vat__msgdepot *shared = depot_new();
  vat__msgpool *pool = pool_new(shared);
  pool_new(shared);
  ck_assert_uint_eq(frees_until_spill(pool, shared, maker), CAP);
}
END_TEST

/* A full depot lets strays go and keeps home nodes: the first nodes a
 * depot's pools take from the collector, as many as they and the depot
 * keep (2 x CAP + VAT__MSGDEPOT_CAP batches with two pools), come from
 * its chunks, and are never left to the collector, which one of them
 * still listed would keep their chunk from (msgpool.h); those taken past
 * them are strays, each its own object, and go once the depot is full. */
START_TEST(a_full_depot_keeps_home_nodes_and_lets_strays_go) {
  vat__msgdepot *depot = depot_new();
  vat__msgpool *maker = pool_new(depot), *freer = pool_new(depot);
  enum { HOME = 2 * CAP + VAT__MSGDEPOT_CAP * BATCH, STRAYS = 2 * CAP };
  vat__msg **home = GC_MALLOC(HOME * sizeof *home);
  vat__msg **strays = GC_MALLOC(STRAYS * sizeof *strays);
  ck_assert_ptr_nonnull(home);
  ck_assert_ptr_nonnull(strays);
  for (size_t i = 0; i < HOME; i++)
    home[i] = vat__msg_alloc(maker);
  for (size_t i = 0; i < STRAYS; i++)
    strays[i] = vat__msg_alloc(maker);
  /* The home nodes fill the depot past its cap; then the strays come. */
  for (size_t i = 0; i < HOME; i++)
    vat__msg_free(freer, home[i]);
  ck_assert_uint_ge(atomic_load(&depot->count), VAT__MSGDEPOT_CAP);
  for (size_t i = 0; i < STRAYS; i++)
    vat__msg_free(freer, strays[i]);
  size_t n = 0, cap = HOME + STRAYS;
  vat__msg **listed = GC_MALLOC(cap * sizeof *listed);
  ck_assert_ptr_nonnull(listed);
  for (vat__msg *m = freer->free; m != NULL && n < cap;
       m = atomic_load_explicit(&m->next, memory_order_relaxed))
    listed[n++] = m;
  for (vat__msgbatch *b = depot->full; b != NULL; b = b->next)
    for (size_t i = 0; i < BATCH && n < cap; i++)
      listed[n++] = b->nodes[i];
  ck_assert_uint_eq(n, freer->count + atomic_load(&depot->count) * BATCH);
  qsort(listed, n, sizeof *listed, by_address);
  for (size_t i = 0; i < HOME; i++)
    if (bsearch(&home[i], listed, n, sizeof *listed, by_address) == NULL)
      ck_abort_msg("home node %zu of %d (%p) was let go", i, (int)HOME,
                   (void *)home[i]);
  /* Strays stay only among the pool's last frees, fewer than a batch. */
  size_t strays_listed = 0;
  for (size_t i = 0; i < STRAYS; i++)
    strays_listed +=
        bsearch(&strays[i], listed, n, sizeof *listed, by_address) != NULL;
  ck_assert_uint_lt(strays_listed, BATCH);
}
END_TEST

#if !VAT_GC_NO_COLLECT
/* Past the depot's cap a spill leaves its batch to the collector: no pool,
 * depot or array lists those nodes any more, and no free node points at
 * them. Unpooled nodes are objects of their own, so the collector can say
 * which went. */
static _Atomic size_t finalized;

static void count_finalized(void *obj, void *data) {
  (void)obj;
  (void)data;
  atomic_fetch_add(&finalized, 1);
}

START_TEST(a_full_depot_leaves_batches_to_the_collector) {
  vat__msgdepot *depot = depot_new();
  vat__msgpool *pool = pool_new(depot), *maker = pool_new(NULL);
  atomic_store(&finalized, 0);
  /* The depot at its cap and the pool one node short of full, of pooled
   * nodes. */
  while (atomic_load(&depot->count) < VAT__MSGDEPOT_CAP ||
         pool->count != LONE_CAP - 1)
    vat__msg_free(pool, vat__msg_alloc(maker));
  /* Watched nodes now. The first fills the pool: its newest BATCH, that
   * node among them, spill, and the full depot refuses them. The next
   * BATCH fill it again and spill alike. The last KEPT stay in the pool. */
  enum { DROPPED = 1 + BATCH, KEPT = 100 };
  for (size_t i = 0; i < DROPPED + KEPT; i++) {
    vat__msg *m = vat__msg_alloc_unpooled();
    GC_register_finalizer(m, count_finalized, NULL, NULL, NULL);
    vat__msg_free(pool, m);
  }
  ck_assert_uint_eq(atomic_load(&depot->count), VAT__MSGDEPOT_CAP);
  ck_assert_uint_eq(pool->count, LONE_CAP - BATCH + KEPT);
  for (int i = 0; i < 4; i++) {
    GC_gcollect();
    GC_invoke_finalizers();
  }
  size_t gone = atomic_load(&finalized);
  fprintf(stderr, "msgpool: %zu of %d dropped nodes collected\n", gone,
          DROPPED);
  /* The collector is conservative: a stale word may keep a few; the ones
   * the pool lists it must keep. */
  ck_assert_uint_ge(gone, DROPPED * 9 / 10);
  ck_assert_uint_le(gone, DROPPED);
}
END_TEST

#endif

/* --- Stress: nodes going round between two threads' pools ---------------- */

enum { RING = 4096 };

typedef struct round_trip {
  _Atomic(vat__msg *) ring[RING];
  _Atomic size_t head, tail; /* consumer takes at head, producer puts at tail */
  vat__msgdepot *depot;
  vat__msgpool *producer_pool, *consumer_pool; /* joined before the threads */
  uint64_t total, seed;
  test_failure failure;
} round_trip;

/* Each node is marked while it is in flight (`aux.signal_data` = its
 * sequence number + 1): a pool that handed out a node still in flight would hand out a
 * marked one, and a node lost or handed out twice breaks the count. */
static void *produce(void *arg) {
  round_trip *rt = arg;
  vat__msgpool *pool = rt->producer_pool;
  uint64_t rng = rt->seed | 1;
  for (uint64_t seq = 0; seq < rt->total;) {
    uint64_t burst = test_rand_between(&rng, 1, 3 * BATCH);
    for (uint64_t k = 0; k < burst && seq < rt->total; k++, seq++) {
      vat__msg *m = vat__msg_alloc(pool);
      if (m->aux.signal_data != NULL || m->arg != NULL) {
        test_fail_first(&rt->failure, "node %p handed out while in flight",
                        (void *)m);
        return NULL;
      }
      m->aux.signal_data = (void *)(uintptr_t)(seq + 1);
      size_t t = atomic_load_explicit(&rt->tail, memory_order_relaxed);
      while (t - atomic_load_explicit(&rt->head, memory_order_acquire) == RING)
        sched_yield();
      atomic_store_explicit(&rt->ring[t % RING], m, memory_order_relaxed);
      atomic_store_explicit(&rt->tail, t + 1, memory_order_release);
    }
    /* Now and then the producer frees nodes of its own, as a worker that
     * also consumes does. */
    if (test_rand_between(&rng, 0, 7) == 0)
      for (unsigned k = 0; k < 3; k++)
        vat__msg_free(pool, vat__msg_alloc(pool));
  }
  return NULL;
}

static void *consume(void *arg) {
  round_trip *rt = arg;
  vat__msgpool *pool = rt->consumer_pool;
  uint64_t rng = (rt->seed ^ 0x9e3779b97f4a7c15u) | 1;
  for (uint64_t seq = 0; seq < rt->total; seq++) {
    size_t h = atomic_load_explicit(&rt->head, memory_order_relaxed);
    while (atomic_load_explicit(&rt->tail, memory_order_acquire) == h)
      sched_yield();
    vat__msg *m = atomic_load_explicit(&rt->ring[h % RING], memory_order_relaxed);
    atomic_store_explicit(&rt->head, h + 1, memory_order_release);
    if ((uintptr_t)m->aux.signal_data != seq + 1) {
      test_fail_first(&rt->failure, "message %" PRIu64 " carried mark %" PRIuPTR,
                      seq, (uintptr_t)m->aux.signal_data);
      return NULL;
    }
    vat__msg_free(pool, m);
    /* Now and then a burst of its own, which takes back batches it
     * spilled itself (still linked) as well as the producer's. */
    if (test_rand_between(&rng, 0, 4095) == 0) {
      enum { MAX_OWN = 3 * BATCH };
      vat__msg *own[MAX_OWN];
      size_t k = (size_t)test_rand_between(&rng, 1, MAX_OWN);
      for (size_t i = 0; i < k; i++) {
        own[i] = vat__msg_alloc(pool);
        if (own[i]->aux.signal_data != NULL || own[i]->arg != NULL) {
          test_fail_first(&rt->failure, "node %p handed out while in flight",
                          (void *)own[i]);
          return NULL;
        }
        own[i]->aux.signal_data = own;
      }
      for (size_t i = 0; i < k; i++)
        vat__msg_free(pool, own[i]);
    }
  }
  return NULL;
}

START_TEST(nodes_go_round_between_two_threads) {
  uint64_t seed = test_seed("msgpool stress");
  for (unsigned round = 0; round < 4; round++) {
    uint64_t rng = seed + round * 0x9e3779b97f4a7c15u + 1;
    round_trip *rt = GC_MALLOC(sizeof *rt);
    ck_assert_ptr_nonnull(rt);
    rt->depot = depot_new();
    rt->producer_pool = pool_new(rt->depot);
    rt->consumer_pool = pool_new(rt->depot);
    rt->total = test_stress_size(&rng, 500000, 2000000);
    rt->seed = test_rand(&rng);
    pthread_t p, c;
    ck_assert_int_eq(pthread_create(&c, NULL, consume, rt), 0);
    ck_assert_int_eq(pthread_create(&p, NULL, produce, rt), 0);
    pthread_join(p, NULL);
    pthread_join(c, NULL);
    if (atomic_load(&rt->failure.failed))
      ck_abort_msg("VAT_TEST_SEED=%" PRIu64 " round %u: %s", seed, round,
                   rt->failure.text);
    /* Whatever is left in the depot is within its cap. */
    ck_assert_uint_le(atomic_load(&rt->depot->count), VAT__MSGDEPOT_CAP);
  }
}
END_TEST

Suite *test_msgpool_suite(void) {
  Suite *s = suite_create("msgpool");
  TCase *tc = test_case("core", 60);
  tcase_add_test(tc, a_refill_hands_out_nodes_in_address_order);
  tcase_add_test(tc, a_batch_in_runs_keeps_its_order);
  tcase_add_test(tc, a_batch_lists_its_nodes_once);
  tcase_add_test(tc, a_lone_pool_takes_its_batches_back_whole);
  tcase_add_test(tc, a_lone_pool_spills_only_past_its_larger_cap);
  tcase_add_test(tc, a_full_depot_keeps_home_nodes_and_lets_strays_go);
#if !VAT_GC_NO_COLLECT /* nothing is reclaimed where nothing collects */
  tcase_add_test(tc, a_full_depot_leaves_batches_to_the_collector);
#endif
  suite_add_tcase(s, tc);
  TCase *stress = test_case("stress", 240);
  tcase_add_test(stress, nodes_go_round_between_two_threads);
  suite_add_tcase(s, stress);
  return s;
}
