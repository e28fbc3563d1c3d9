/* A worker's cache of small collector objects (util/objcache.h) on its own,
 * and the vats a turn spawns taking their memory from it. */
#include "util/gc.h"

#include <stdatomic.h>
#include <stdint.h>
#include <string.h>

#include "core/system.h"
#include "core/vat.h"
#include "core/worker.h"
#include "suites.h"
#include "support.h"
#include "util/objcache.h"

static vat__objcache *cache_new(void) {
  vat__objcache *c = GC_MALLOC(sizeof *c); /* zeroed: an empty cache */
  ck_assert_ptr_nonnull(c);
  return c;
}

static size_t cached_count(const vat__objcache *c, size_t granules) {
  size_t n = 0;
  for (void *p = c->free[granules - 1]; p != NULL; p = GC_NEXT(p))
    n++;
  return n;
}

static bool all_zero(const unsigned char *p, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (p[i] != 0)
      return false;
  return true;
}

/* What the cache hands out is a zeroed collector object, its link word
 * too, of the request and the collector's extra byte rounded up to whole
 * granules (GC_MALLOC rounds some larger sizes further, to fewer size
 * classes); past the largest size it serves, GC_MALLOC's own. */
START_TEST(objects_are_what_gc_malloc_would_give) {
  vat__objcache *c = cache_new();
  for (size_t size = 0; size <= VAT__OBJCACHE_MAX + 64; size += 7) {
    for (int round = 0; round < 3; round++) {
      unsigned char *p = vat__objcache_alloc(c, size);
      ck_assert_ptr_eq(GC_base(p), p);
      size_t granules =
          (size + VAT__GC_EXTRA + VAT__GC_GRANULE - 1) / VAT__GC_GRANULE;
      if (size <= VAT__OBJCACHE_MAX)
        ck_assert_uint_eq(GC_size(p), granules * VAT__GC_GRANULE);
      else
        ck_assert_uint_eq(GC_size(p), GC_size(GC_MALLOC(size)));
      ck_assert_msg(all_zero(p, GC_size(p)), "a %zu-byte object not zeroed",
                    size);
      memset(p, 0xa5, GC_size(p)); /* the next one must not be this one */
    }
  }
}
END_TEST

/* One refill fills the list with several blocks' objects. A size nothing
 * else in the process asks for (31 granules: 8 to a block) comes from new
 * blocks, so the count is exact. */
START_TEST(a_refill_takes_several_blocks) {
  enum { GRANULES = 31, PER_BLOCK = 4096 / (GRANULES * VAT__GC_GRANULE) };
  vat__objcache *c = cache_new();
  size_t size = GRANULES * VAT__GC_GRANULE - VAT__GC_EXTRA;
  vat__objcache_alloc(c, size);
  ck_assert_uint_eq(c->refills, 1);
  size_t cached = cached_count(c, GRANULES);
  ck_assert_uint_eq(cached, VAT__OBJCACHE_REFILL_BLOCKS * PER_BLOCK - 1);
  while (c->free[GRANULES - 1] != NULL)
    vat__objcache_alloc(c, size);
  ck_assert_uint_eq(c->refills, 1);
  vat__objcache_alloc(c, size);
  ck_assert_uint_eq(c->refills, 2);
}
END_TEST

#if !VAT_GC_NO_COLLECT /* nothing is reclaimed where nothing collects */
/* Objects waiting in a cache are the cache's: collections keep them, so
 * the collector does not hand them to anyone else. */
START_TEST(cached_objects_are_not_handed_out_again) {
  enum { SIZE = 127, N = 4096 };
  vat__objcache *c = cache_new();
  vat__objcache_alloc(c, SIZE);
  size_t granules = (SIZE + VAT__GC_EXTRA) / VAT__GC_GRANULE;
  size_t cached = cached_count(c, granules);
  ck_assert_uint_gt(cached, 1);
  void **waiting = GC_MALLOC_ATOMIC(cached * sizeof *waiting); /* hidden */
  ck_assert_ptr_nonnull(waiting);
  size_t i = 0;
  for (void *p = c->free[granules - 1]; p != NULL; p = GC_NEXT(p))
    waiting[i++] = p;
  for (int round = 0; round < 3; round++)
    GC_gcollect();
  /* Plenty of the same size from the collector's own free lists, kept. */
  void **got = GC_MALLOC(N * sizeof *got);
  ck_assert_ptr_nonnull(got);
  for (int k = 0; k < N; k++)
    got[k] = GC_MALLOC(SIZE);
  /* Counted, then asserted once: an assertion per pair costs a message to
   * Check's parent process each, minutes under valgrind. */
  size_t reused = 0;
  for (int k = 0; k < N; k++)
    for (size_t j = 0; j < cached; j++)
      reused += got[k] == waiting[j];
  ck_assert_uint_eq(reused, 0);
  ck_assert_uint_eq(cached_count(c, granules), cached);
}
END_TEST

/* Fills c's list of 127-byte objects and watches each of them with a
 * disappearing link (in atomic memory, so the links keep nothing alive).
 * Returns the links; *n_out is how many, *granules_out the size class. */
static void **watch_cached(vat__objcache *c, size_t *n_out,
                           size_t *granules_out) {
  enum { SIZE = 127 };
  vat__objcache_alloc(c, SIZE);
  size_t granules = (SIZE + VAT__GC_EXTRA) / VAT__GC_GRANULE;
  size_t n = cached_count(c, granules);
  void **links = GC_MALLOC_ATOMIC(n * sizeof *links);
  ck_assert_ptr_nonnull(links);
  size_t i = 0;
  for (void *p = c->free[granules - 1]; p != NULL; p = GC_NEXT(p), i++) {
    links[i] = p;
    ck_assert_int_eq(GC_general_register_disappearing_link(&links[i], p), 0);
  }
  *n_out = n;
  *granules_out = granules;
  return links;
}

static size_t collected(void **links, size_t n) {
  for (int round = 0; round < 5; round++)
    GC_gcollect();
  size_t cleared = 0;
  for (size_t i = 0; i < n; i++)
    cleared += links[i] == NULL;
  return cleared;
}

/* Dropped, they are the collector's again. */
START_TEST(a_dropped_cache_lets_its_objects_go) {
  vat__objcache *c = cache_new();
  size_t n, granules;
  void **links = watch_cached(c, &n, &granules);
  GC_gcollect();
  for (size_t i = 0; i < n; i++)
    ck_assert_ptr_nonnull(links[i]);
  vat__objcache_drop(c);
  ck_assert_ptr_null(c->free[granules - 1]);
  size_t cleared = collected(links, n);
  /* Conservative scanning may keep a few alive through stale words. */
  ck_assert_msg(cleared > n * 9 / 10, "%zu of %zu dropped objects still held",
                n - cleared, n);
}
END_TEST

/* A stale word that still points at a dropped object (a register, a stack
 * slot: valgrind's runs left one) keeps that object, not the rest of its
 * list through the links. Here the stale word is put there on purpose. */
START_TEST(a_stale_word_keeps_only_the_object_it_points_at) {
  vat__objcache *c = cache_new();
  size_t n, granules;
  void **links = watch_cached(c, &n, &granules);
  void **stale = GC_MALLOC(sizeof *stale); /* scanned, held by this frame */
  ck_assert_ptr_nonnull(stale);
  *stale = c->free[granules - 1]; /* the head: every other one follows it */
  vat__objcache_drop(c);
  size_t cleared = collected(links, n);
  ck_assert_ptr_nonnull(links[0]);
  ck_assert_msg(cleared > n * 9 / 10, "%zu of %zu dropped objects still held",
                n - cleared, n);
  ck_assert_ptr_eq(*stale, links[0]);
}
END_TEST
#endif

static void spawn_some(vat_turn *turn, void *state, void *arg) {
  (void)state;
  _Atomic uint64_t *done = arg;
  for (int i = 0; i < 100; i++) {
    vat_ref *ref;
    expect_vat_ok(
        vat_spawn(turn, &(vat_entity_def){.state_size = 16}, &ref, NULL));
  }
  atomic_store(done, 1);
}

/* A turn's spawns take their memory from its worker's cache; a worker
 * that stops drops its cache. */
START_TEST(spawned_vats_come_from_the_workers_cache) {
  vat_system *sys = test_system(1);
  vat__objcache *c = &sys->workers[0]->objects;
  static _Atomic uint64_t done;
  vat_ref *spawner = test_spawn(sys, 0, NULL);
  expect_vat_ok(vat_host_send(spawner, spawn_some, &done));
  ck_assert(test_wait_u64(&done, 1, 30));
  /* 100 vats of 128 bytes from one refill: one block (32 of them) would
   * have needed four. The rest of the refill still waits. */
  ck_assert_uint_eq(c->refills, 1);
  ck_assert_uint_gt(cached_count(c, 8), 0);
  test_quiesce(sys); /* shuts it down: its worker stopped */
  for (size_t g = 1; g <= VAT__OBJCACHE_CLASSES; g++)
    ck_assert_ptr_null(c->free[g - 1]);
}
END_TEST

Suite *test_objcache_suite(void) {
  Suite *s = suite_create("objcache");
  TCase *tc = test_case("core", 60);
  tcase_add_test(tc, objects_are_what_gc_malloc_would_give);
  tcase_add_test(tc, a_refill_takes_several_blocks);
#if !VAT_GC_NO_COLLECT
  tcase_add_test(tc, cached_objects_are_not_handed_out_again);
  tcase_add_test(tc, a_dropped_cache_lets_its_objects_go);
  tcase_add_test(tc, a_stale_word_keeps_only_the_object_it_points_at);
#endif
  tcase_add_test(tc, spawned_vats_come_from_the_workers_cache);
  suite_add_tcase(s, tc);
  return s;
}
