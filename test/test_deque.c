/* The fresh deque on its own: the owner's end newest first, the thieves'
 * oldest first, the full case, and a stress run of one owner against
 * concurrent thieves racing it for the last vats. */
#include "util/gc.h"

#include <inttypes.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "sched/deque.h"
#include "sched/task.h"
#include "suites.h"
#include "support.h"
#include "util/mem.h"

#define SIZE VAT__DEQUE_SIZE

/* Tasks: the deque only holds their addresses. */
static vat__task *vats_new(size_t n) {
  vat__task *v = GC_MALLOC(n * sizeof *v);
  ck_assert_ptr_nonnull(v);
  return v;
}

static vat__deque *deque_new(void) {
  /* Aligned as its type asks: its indices sit on lines of their own. */
  vat__deque *d = vat__gc_alloc_aligned(_Alignof(vat__deque), sizeof *d);
  ck_assert_ptr_nonnull(d);
  vat__deque_init(d);
  return d;
}

START_TEST(owner_takes_newest_thief_oldest) {
  vat__task *v = vats_new(6);
  vat__deque *d = deque_new();
  ck_assert_ptr_null(vat__deque_pop(d));
  ck_assert_ptr_null(vat__deque_steal(d));
  for (size_t i = 0; i < 6; i++)
    ck_assert(vat__deque_push(d, &v[i]));
  ck_assert_uint_eq(vat__deque_size(d), 6);
  ck_assert_ptr_eq(vat__deque_pop(d), &v[5]);
  ck_assert_ptr_eq(vat__deque_steal(d), &v[0]);
  ck_assert_ptr_eq(vat__deque_pop(d), &v[4]);
  ck_assert_ptr_eq(vat__deque_steal(d), &v[1]);
  ck_assert_uint_eq(vat__deque_size(d), 2);
  ck_assert_ptr_eq(vat__deque_pop(d), &v[3]);
  /* The last vat, taken by the owner's CAS. */
  ck_assert_ptr_eq(vat__deque_pop(d), &v[2]);
  ck_assert_ptr_null(vat__deque_pop(d));
  ck_assert_ptr_null(vat__deque_steal(d));
  ck_assert_uint_eq(vat__deque_size(d), 0);
  /* Emptied by a thief, the owner's pop finds nothing and leaves the
   * deque usable. */
  ck_assert(vat__deque_push(d, &v[0]));
  ck_assert_ptr_eq(vat__deque_steal(d), &v[0]);
  ck_assert_ptr_null(vat__deque_pop(d));
  ck_assert(vat__deque_push(d, &v[1]));
  ck_assert_ptr_eq(vat__deque_pop(d), &v[1]);
}
END_TEST

START_TEST(full_deque_refuses) {
  vat__task *v = vats_new(SIZE + 1);
  vat__deque *d = deque_new();
  for (size_t i = 0; i < SIZE; i++)
    ck_assert(vat__deque_push(d, &v[i]));
  ck_assert(!vat__deque_push(d, &v[SIZE]));
  ck_assert_uint_eq(vat__deque_size(d), SIZE);
  /* A steal makes room; the refused push overwrote nothing. */
  ck_assert_ptr_eq(vat__deque_steal(d), &v[0]);
  ck_assert(vat__deque_push(d, &v[SIZE]));
  ck_assert(!vat__deque_push(d, &v[0]));
  for (size_t i = SIZE; i >= 1; i--)
    ck_assert_ptr_eq(vat__deque_pop(d), &v[i]);
  ck_assert_ptr_null(vat__deque_pop(d));
}
END_TEST

START_TEST(order_across_wraparound) {
  enum { N = 5 * SIZE + 7 };
  vat__task *v = vats_new(N);
  vat__deque *d = deque_new();
  /* Steals move the indices round the ring many times; pops between them
   * must still see the newest vat. */
  size_t pushed = 0, stolen = 0;
  while (pushed < N) {
    for (size_t k = 0; k < SIZE / 2 && pushed < N; k++)
      ck_assert(vat__deque_push(d, &v[pushed++]));
    ck_assert_ptr_eq(vat__deque_pop(d), &v[pushed - 1]);
    ck_assert(vat__deque_push(d, &v[pushed - 1]));
    while (vat__deque_size(d) > SIZE / 4)
      ck_assert_ptr_eq(vat__deque_steal(d), &v[stolen++]);
  }
  while (stolen < N)
    ck_assert_ptr_eq(vat__deque_steal(d), &v[stolen++]);
  ck_assert_ptr_null(vat__deque_pop(d));
}
END_TEST

#if !VAT_GC_NO_COLLECT
/* A vat taken from the deque, by the owner or a thief, is no longer held
 * by it: a stale slot would keep a dead vat, and all it references, from
 * the collector until the ring wraps round to that slot (spawn's dead vats
 * were a million live KiB at each collection that way). */
START_TEST(taken_vats_are_not_retained) {
  enum { N = 1000 };
  vat__deque *d = deque_new();
  /* Atomic memory: the links do not keep the vats alive. */
  void **links = GC_MALLOC_ATOMIC(N * sizeof *links);
  ck_assert_ptr_nonnull(links);
  for (int i = 0; i < N; i++) {
    vat__task *v = vats_new(1);
    links[i] = v;
    ck_assert_int_eq(GC_general_register_disappearing_link(&links[i], v), 0);
    ck_assert(vat__deque_push(d, v));
  }
  /* Half go to a thief, half to the owner; then one more push, so the
   * owner's next look at the thieves' end comes after the steals. */
  for (int i = 0; i < N / 2; i++)
    ck_assert_ptr_nonnull(vat__deque_steal(d));
  while (vat__deque_pop(d) != NULL)
    ;
  vat__task *last = vats_new(1);
  ck_assert(vat__deque_push(d, last));
  ck_assert_ptr_eq(vat__deque_pop(d), last);
  for (int round = 0; round < 5; round++)
    GC_gcollect();
  int cleared = 0;
  for (int i = 0; i < N; i++)
    cleared += links[i] == NULL;
  /* Conservative scanning may keep a few alive through stale words. */
  ck_assert_msg(cleared > N * 9 / 10, "%d of %d taken vats still held",
                N - cleared, N);
}
END_TEST
#endif

/* --- Stress: one owner, concurrent thieves -------------------------------
 *
 * The owner pushes every vat once, in index order, and pops at random,
 * mostly keeping the deque to a few vats so that thieves race it for the
 * last one. It keeps a mirror of what it pushed and has not popped: a pop
 * must return the mirror's top, and a pop that finds nothing must find
 * every mirrored vat stolen. A thief's steals come out oldest first, so in
 * increasing index. Each vat must be taken exactly once.
 */

enum { MAX_THIEVES = 3 };

static struct {
  vat__task *vats;
  _Atomic uint32_t *taken;
  vat__deque *deque;
  uint32_t count;
  _Atomic uint32_t taken_total;
  _Atomic bool owner_done;
  test_failure failure;
} st;

static uint32_t take(vat__task *v, unsigned who) {
  if (v < st.vats || v >= st.vats + st.count) {
    test_fail_first(&st.failure, "thread %u took %p, not a pushed vat", who,
                    (void *)v);
    return 0;
  }
  uint32_t i = (uint32_t)(v - st.vats);
  if (atomic_fetch_add(&st.taken[i], 1) != 0)
    test_fail_first(&st.failure, "thread %u took vat %" PRIu32 " a second time",
                    who, i);
  atomic_fetch_add(&st.taken_total, 1);
  return i;
}

typedef struct {
  uint64_t rng;
  uint32_t *mirror; /* indices pushed and not popped, oldest first */
  uint32_t mirrored;
} owner_state;

/* Whether vat i is taken, or will be: a thief that won it counts it just
 * after its steal returns. */
static bool taken_soon(uint32_t i) {
  for (unsigned tries = 0; tries < 1000000; tries++) {
    if (atomic_load(&st.taken[i]) != 0)
      return true;
    sched_yield();
  }
  return false;
}

static void owner_pop(owner_state *o) {
  vat__task *v = vat__deque_pop(st.deque);
  if (v == NULL) {
    for (uint32_t k = 0; k < o->mirrored; k++)
      if (!taken_soon(o->mirror[k]))
        test_fail_first(&st.failure,
                        "pop found nothing, but vat %" PRIu32 " was not taken",
                        o->mirror[k]);
    o->mirrored = 0;
    return;
  }
  uint32_t i = take(v, 0);
  if (o->mirrored == 0 || i != o->mirror[o->mirrored - 1])
    test_fail_first(&st.failure, "owner popped vat %" PRIu32 ", not the newest",
                    i);
  else
    o->mirrored--;
}

static void *run_owner(void *p) {
  owner_state *o = p;
  uint32_t next = 0;
  while (next < st.count && !atomic_load(&st.failure.failed)) {
    /* Mostly a few vats at a time; now and then enough to fill it. */
    uint32_t pushes = test_rand_between(&o->rng, 0, 15) == 0
                          ? (uint32_t)test_rand_between(&o->rng, 0, 2 * SIZE)
                          : (uint32_t)test_rand_between(&o->rng, 1, 3);
    for (uint32_t k = 0; k < pushes && next < st.count; k++) {
      if (!vat__deque_push(st.deque, &st.vats[next]))
        break; /* full: pop below, push this one later */
      /* Stolen vats stay in the mirror until a pop finds them gone, so
       * it can grow past the deque's size: compact it then. */
      if (o->mirrored == 2 * SIZE) {
        uint32_t kept = 0;
        for (uint32_t m = 0; m < o->mirrored; m++)
          if (atomic_load(&st.taken[o->mirror[m]]) == 0)
            o->mirror[kept++] = o->mirror[m];
        o->mirrored = kept;
      }
      o->mirror[o->mirrored++] = next++;
    }
    for (uint32_t k = (uint32_t)test_rand_between(&o->rng, 0, 3); k > 0; k--)
      owner_pop(o);
    if (test_rand_between(&o->rng, 0, 63) == 0)
      sched_yield();
  }
  while (vat__deque_size(st.deque) != 0)
    owner_pop(o);
  owner_pop(o); /* the empty deque's pop checks the mirror once more */
  atomic_store(&st.owner_done, true);
  return NULL;
}

typedef struct {
  unsigned index;
  uint64_t rng;
} thief_state;

static void *run_thief(void *p) {
  thief_state *t = p;
  int64_t last = -1;
  while (!atomic_load(&st.owner_done) && !atomic_load(&st.failure.failed)) {
    vat__task *v = vat__deque_steal(st.deque);
    if (v != NULL) {
      uint32_t i = take(v, t->index);
      if ((int64_t)i <= last)
        test_fail_first(&st.failure,
                        "thief %u stole vat %" PRIu32 " after vat %" PRId64,
                        t->index, i, last);
      last = i;
    } else if (test_rand_between(&t->rng, 0, 7) == 0) {
      sched_yield();
    }
  }
  return NULL;
}

static void stress_round(uint64_t seed, unsigned round) {
  uint64_t rng = seed + round * 0x2545f4914f6cdd1du + 1;
  memset(&st, 0, sizeof st);
  st.count = test_stress_size(&rng, 100000, 300000);
  st.vats = vats_new(st.count);
  st.taken = GC_MALLOC_ATOMIC(st.count * sizeof *st.taken);
  ck_assert_ptr_nonnull(st.taken);
  for (uint32_t i = 0; i < st.count; i++)
    atomic_init(&st.taken[i], 0);
  st.deque = deque_new();

  owner_state owner = {.rng = test_rand(&rng) | 1,
                       .mirror = GC_MALLOC_ATOMIC(2 * SIZE * sizeof(uint32_t))};
  ck_assert_ptr_nonnull(owner.mirror);
  unsigned thieves = (unsigned)test_rand_between(&rng, 1, MAX_THIEVES);
  thief_state ts[MAX_THIEVES];
  pthread_t owner_thread, thief_threads[MAX_THIEVES];
  for (unsigned i = 0; i < thieves; i++) {
    ts[i] = (thief_state){.index = 1 + i, .rng = test_rand(&rng) | 1};
    ck_assert_int_eq(pthread_create(&thief_threads[i], NULL, run_thief, &ts[i]),
                     0);
  }
  ck_assert_int_eq(pthread_create(&owner_thread, NULL, run_owner, &owner), 0);
  pthread_join(owner_thread, NULL);
  for (unsigned i = 0; i < thieves; i++)
    pthread_join(thief_threads[i], NULL);

  ck_assert_msg(!atomic_load(&st.failure.failed),
                "VAT_TEST_SEED=%" PRIu64 " round %u: %s", seed, round,
                st.failure.text);
  ck_assert_uint_eq(atomic_load(&st.taken_total), st.count);
  for (uint32_t i = 0; i < st.count; i++)
    ck_assert_msg(atomic_load(&st.taken[i]) == 1,
                  "VAT_TEST_SEED=%" PRIu64 " round %u: vat %" PRIu32
                  " taken %" PRIu32 " times",
                  seed, round, i, atomic_load(&st.taken[i]));
}

START_TEST(stress_owner_and_thieves) {
  uint64_t seed = test_seed("deque stress");
  for (unsigned round = 0; round < 4; round++)
    stress_round(seed, round);
}
END_TEST

Suite *test_deque_suite(void) {
  Suite *s = suite_create("deque");
  TCase *tc = test_case("unit", 0);
  tcase_add_test(tc, owner_takes_newest_thief_oldest);
  tcase_add_test(tc, full_deque_refuses);
  tcase_add_test(tc, order_across_wraparound);
#if !VAT_GC_NO_COLLECT /* nothing is reclaimed where nothing collects */
  tcase_add_test(tc, taken_vats_are_not_retained);
#endif
  suite_add_tcase(s, tc);

  TCase *stress = test_case("stress", 240);
  tcase_add_test(stress, stress_owner_and_thieves);
  suite_add_tcase(s, stress);
  return s;
}
