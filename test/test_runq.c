/* The run queue on its own: ring order, the full case, take_half, steal,
 * and a stress run of one owner against concurrent thieves. */
#include "util/gc.h"

#include <inttypes.h>
#include <sched.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sched/inject.h"
#include "sched/runq.h"
#include "sched/task.h"
#include "suites.h"
#include "support.h"

#define SIZE VAT__RUNQ_SIZE

/* Tasks: only their addresses and links matter to the queue. */
static vat__task *vats_new(size_t n) {
  vat__task *v = GC_MALLOC(n * sizeof *v);
  ck_assert_ptr_nonnull(v);
  return v;
}

static vat__runq *runq_new(void) {
  vat__runq *q = GC_MALLOC(sizeof *q);
  ck_assert_ptr_nonnull(q);
  vat__runq_init(q);
  return q;
}

START_TEST(push_pop_order) {
  vat__task *v = vats_new(10);
  vat__runq *q = runq_new();
  ck_assert_ptr_null(vat__runq_pop(q));
  for (size_t i = 0; i < 10; i++)
    ck_assert(vat__runq_push(q, &v[i]));
  ck_assert_uint_eq(vat__runq_size(q), 10);
  for (size_t i = 0; i < 10; i++)
    ck_assert_ptr_eq(vat__runq_pop(q), &v[i]);
  ck_assert_ptr_null(vat__runq_pop(q));
  ck_assert_uint_eq(vat__runq_size(q), 0);
}
END_TEST

START_TEST(order_across_wraparound) {
  enum { N = 5 * SIZE + 7 };
  vat__task *v = vats_new(N);
  vat__runq *q = runq_new();
  size_t pushed = 0, popped = 0;
  /* Keep between a third and all of the ring occupied so the indices wrap
   * many times with the queue neither empty nor full. */
  while (popped < N) {
    while (pushed < N && pushed - popped < SIZE)
      ck_assert(vat__runq_push(q, &v[pushed++]));
    for (size_t k = 0; k < SIZE / 3 && popped < pushed; k++)
      ck_assert_ptr_eq(vat__runq_pop(q), &v[popped++]);
  }
  ck_assert_ptr_null(vat__runq_pop(q));
}
END_TEST

START_TEST(full_queue_refuses) {
  vat__task *v = vats_new(SIZE + 1);
  vat__runq *q = runq_new();
  for (size_t i = 0; i < SIZE; i++)
    ck_assert(vat__runq_push(q, &v[i]));
  ck_assert_uint_eq(vat__runq_size(q), SIZE);
  ck_assert(!vat__runq_push(q, &v[SIZE]));
  ck_assert_uint_eq(vat__runq_size(q), SIZE);
  /* The refused push left the oldest slot alone. */
  ck_assert_ptr_eq(vat__runq_pop(q), &v[0]);
  ck_assert(vat__runq_push(q, &v[SIZE]));
  ck_assert(!vat__runq_push(q, &v[0]));
  for (size_t i = 1; i <= SIZE; i++)
    ck_assert_ptr_eq(vat__runq_pop(q), &v[i]);
  ck_assert_ptr_null(vat__runq_pop(q));
}
END_TEST

START_TEST(take_half_links_oldest_half) {
  vat__task *v = vats_new(SIZE);
  vat__runq *q = runq_new();
  for (size_t i = 0; i < SIZE; i++)
    ck_assert(vat__runq_push(q, &v[i]));
  uint32_t n = 0;
  vat__task *first = vat__runq_take_half(q, &n);
  ck_assert_uint_eq(n, SIZE / 2);
  ck_assert_ptr_eq(first, &v[0]);
  size_t i = 0;
  for (vat__task *x = first; x != NULL; x = x->next)
    ck_assert_ptr_eq(x, &v[i++]);
  ck_assert_uint_eq(i, SIZE / 2);
  ck_assert_uint_eq(vat__runq_size(q), SIZE / 2);
  for (i = SIZE / 2; i < SIZE; i++)
    ck_assert_ptr_eq(vat__runq_pop(q), &v[i]);

  /* Nothing to halve: one or no vat. */
  ck_assert_ptr_null(vat__runq_take_half(q, &n));
  ck_assert(vat__runq_push(q, &v[0]));
  ck_assert_ptr_null(vat__runq_take_half(q, &n));
  ck_assert_uint_eq(vat__runq_size(q), 1);
  ck_assert(vat__runq_push(q, &v[1]));
  ck_assert(vat__runq_push(q, &v[2]));
  ck_assert_ptr_eq(vat__runq_take_half(q, &n), &v[0]);
  ck_assert_uint_eq(n, 1);
  ck_assert_ptr_null(v[0].next);
  ck_assert_ptr_eq(vat__runq_pop(q), &v[1]);
}
END_TEST

/* Steals from a queue holding `have` vats and checks the split. */
static void check_steal(uint32_t have) {
  vat__task *v = vats_new(have + 1);
  vat__runq *from = runq_new(), *into = runq_new();
  for (uint32_t i = 0; i < have; i++)
    ck_assert(vat__runq_push(from, &v[i]));
  uint32_t want = have - have / 2;
  vat__task *run = vat__runq_steal(into, from);
  /* The thief runs the newest vat it took and queues the older ones. */
  ck_assert_ptr_eq(run, &v[want - 1]);
  ck_assert_uint_eq(vat__runq_size(into), want - 1);
  ck_assert_uint_eq(vat__runq_size(from), have - want);
  for (uint32_t i = 0; i + 1 < want; i++)
    ck_assert_ptr_eq(vat__runq_pop(into), &v[i]);
  ck_assert_ptr_null(vat__runq_pop(into));
  for (uint32_t i = want; i < have; i++)
    ck_assert_ptr_eq(vat__runq_pop(from), &v[i]);
  ck_assert_ptr_null(vat__runq_pop(from));
}

START_TEST(steal_takes_about_half) {
  const uint32_t sizes[] = {1, 2, 3, 10, 127, SIZE - 1, SIZE};
  for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
    check_steal(sizes[i]);
}
END_TEST

START_TEST(steal_from_empty) {
  vat__task *v = vats_new(1);
  vat__runq *from = runq_new(), *into = runq_new();
  ck_assert_ptr_null(vat__runq_steal(into, from));
  ck_assert(vat__runq_push(from, &v[0]));
  ck_assert_ptr_eq(vat__runq_pop(from), &v[0]);
  ck_assert_ptr_null(vat__runq_steal(into, from));
  ck_assert_uint_eq(vat__runq_size(into), 0);
}
END_TEST

START_TEST(steal_after_wraparound) {
  vat__task *v = vats_new(SIZE + 40);
  vat__runq *from = runq_new(), *into = runq_new();
  /* Move the indices near the end of the ring so the stolen run wraps. */
  for (size_t i = 0; i < SIZE - 10; i++) {
    ck_assert(vat__runq_push(from, &v[0]));
    ck_assert_ptr_eq(vat__runq_pop(from), &v[0]);
  }
  for (size_t i = 1; i <= 40; i++)
    ck_assert(vat__runq_push(from, &v[i]));
  ck_assert_ptr_eq(vat__runq_steal(into, from), &v[20]);
  for (size_t i = 1; i < 20; i++)
    ck_assert_ptr_eq(vat__runq_pop(into), &v[i]);
  for (size_t i = 21; i <= 40; i++)
    ck_assert_ptr_eq(vat__runq_pop(from), &v[i]);
}
END_TEST

/* --- Stress: one owner, concurrent thieves -------------------------------
 *
 * The owner pushes every vat once, in index order, popping random batches
 * and moving half the queue out when it is full, as a worker does. Thieves
 * pop their own queue and steal from the owner and from each other. Each
 * vat must be taken exactly once; what the owner takes itself must come out
 * oldest first. Whoever takes a vat owns it and links it through next,
 * as the runtime does when it moves vats to the shared queue.
 */

enum { MAX_THIEVES = 3 };

static struct {
  vat__task *vats;
  _Atomic uint32_t *taken;
  vat__runq *queues[1 + MAX_THIEVES]; /* the owner's first */
  unsigned nqueues;
  uint32_t count;
  _Atomic uint32_t pushed;
  _Atomic uint32_t taken_total;
  _Atomic bool give_up;
  test_failure failure;
} st;

static uint64_t splitmix(uint64_t *s) {
  uint64_t z = (*s += 0x9e3779b97f4a7c15u);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
  return z ^ (z >> 31);
}

static uint32_t below(uint64_t *s, uint32_t n) {
  return (uint32_t)(splitmix(s) % n);
}

static bool finished(void) {
  return atomic_load(&st.taken_total) == st.count || atomic_load(&st.give_up) ||
         atomic_load(&st.failure.failed);
}

/* Counts `v` as taken by thread `who`; returns its index. */
static uint32_t take(vat__task *v, unsigned who) {
  if (v < st.vats || v >= st.vats + st.count) {
    test_fail_first(&st.failure, "thread %u took %p, not a queued vat", who,
                    (void *)v);
    return 0;
  }
  uint32_t i = (uint32_t)(v - st.vats);
  if (i >= atomic_load(&st.pushed))
    test_fail_first(&st.failure,
                    "thread %u took vat %" PRIu32 " before it was pushed", who,
                    i);
  if (atomic_fetch_add(&st.taken[i], 1) != 0)
    test_fail_first(&st.failure, "thread %u took vat %" PRIu32 " a second time",
                    who, i);
  v->next = NULL;
  atomic_fetch_add(&st.taken_total, 1);
  return i;
}

typedef struct {
  uint64_t seed;
  bool fill;           /* push only: the ring is full most of the time */
  uint32_t owner_last; /* last index it took, plus one */
} owner_state;

static void owner_take(owner_state *o, vat__task *v) {
  uint32_t i = take(v, 0);
  if (i + 1 <= o->owner_last)
    test_fail_first(&st.failure,
                    "owner took vat %" PRIu32 " after vat %" PRIu32, i,
                    o->owner_last - 1);
  o->owner_last = i + 1;
}

/* What enqueue() in sched/place.c does with a full queue, minus the shared queue:
 * the older half and the refused vat leave. */
static void owner_move_half(owner_state *o, vat__task *refused) {
  uint32_t n = 0, seen = 0;
  vat__task *v = vat__runq_take_half(st.queues[0], &n);
  while (v != NULL) {
    vat__task *next = v->next; /* take() clears it */
    owner_take(o, v);
    seen++;
    v = next;
  }
  if (seen != n)
    test_fail_first(&st.failure,
                    "take_half said %" PRIu32 " vats, linked %" PRIu32, n,
                    seen);
  /* Never queued: outside the queue's order. */
  take(refused, 0);
}

static void *run_owner(void *p) {
  owner_state *o = p;
  uint64_t rng = o->seed;
  vat__runq *q = st.queues[0];
  uint32_t next = 0;
  while (next < st.count && !atomic_load(&st.failure.failed)) {
    /* Large batches fill the ring; small ones keep it short so thieves
     * race the owner for the last few slots. */
    uint32_t pushes = o->fill || below(&rng, 4) == 0 ? below(&rng, 2 * SIZE)
                                                     : below(&rng, 16);
    for (uint32_t k = 0; k < pushes && next < st.count; k++) {
      vat__task *v = &st.vats[next++];
      /* Published before the push, so a thief never sees it early. */
      atomic_store(&st.pushed, next);
      if (!vat__runq_push(q, v))
        owner_move_half(o, v);
    }
    for (uint32_t k = o->fill ? 0 : below(&rng, 12); k > 0; k--) {
      vat__task *v = vat__runq_pop(q);
      if (v == NULL)
        break;
      owner_take(o, v);
    }
    if (below(&rng, 64) == 0)
      sched_yield();
  }
  vat__task *v;
  while ((v = vat__runq_pop(q)) != NULL)
    owner_take(o, v);
  return NULL;
}

typedef struct {
  unsigned index; /* of its queue in st.queues */
  uint64_t seed;
} thief_state;

static void *run_thief(void *p) {
  thief_state *t = p;
  uint64_t rng = t->seed;
  vat__runq *own = st.queues[t->index];
  while (!finished()) {
    vat__task *v = vat__runq_pop(own);
    if (v == NULL) {
      /* Like vat__steal() in sched/pick.c: only with its own queue empty. */
      unsigned victim = below(&rng, st.nqueues - 1);
      if (victim >= t->index)
        victim++;
      v = vat__runq_steal(own, st.queues[victim]);
    }
    if (v != NULL)
      take(v, t->index);
    else if (below(&rng, 8) == 0)
      sched_yield();
  }
  return NULL;
}

static uint64_t stress_seed(void) {
  const char *env = getenv("VAT_TEST_SEED");
  if (env != NULL && *env != '\0')
    return strtoull(env, NULL, 0);
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (uint64_t)ts.tv_sec * 1000000007u ^ (uint64_t)ts.tv_nsec;
}

/* `seed` is the test's, printed on failure so VAT_TEST_SEED replays it. */
static void stress_round(uint64_t seed, unsigned round, bool fill) {
  uint64_t rng = seed + round * 0x2545f4914f6cdd1du;
  memset(&st, 0, sizeof st);
  st.count = test_stress_size(&rng, 50000, 200000);
  st.vats = vats_new(st.count);
  st.taken = GC_MALLOC_ATOMIC(st.count * sizeof *st.taken);
  ck_assert_ptr_nonnull(st.taken);
  for (uint32_t i = 0; i < st.count; i++)
    atomic_init(&st.taken[i], 0);
  unsigned thieves = 1 + below(&rng, MAX_THIEVES);
  st.nqueues = 1 + thieves;
  for (unsigned i = 0; i < st.nqueues; i++)
    st.queues[i] = runq_new();

  owner_state owner = {.seed = splitmix(&rng), .fill = fill};
  thief_state ts[MAX_THIEVES];
  pthread_t owner_thread, thief_threads[MAX_THIEVES];
  for (unsigned i = 0; i < thieves; i++) {
    ts[i] = (thief_state){.index = 1 + i, .seed = splitmix(&rng)};
    ck_assert_int_eq(pthread_create(&thief_threads[i], NULL, run_thief, &ts[i]),
                     0);
  }
  ck_assert_int_eq(pthread_create(&owner_thread, NULL, run_owner, &owner), 0);
  pthread_join(owner_thread, NULL);
  /* The owner is done; the thieves drain their queues. A lost vat would
   * keep them looking forever, so give them a deadline. */
  struct timespec start, now;
  clock_gettime(CLOCK_MONOTONIC, &start);
  while (!finished()) {
    clock_gettime(CLOCK_MONOTONIC, &now);
    if (now.tv_sec - start.tv_sec > 30)
      atomic_store(&st.give_up, true);
    sched_yield();
  }
  for (unsigned i = 0; i < thieves; i++)
    pthread_join(thief_threads[i], NULL);

  ck_assert_msg(!atomic_load(&st.failure.failed),
                "VAT_TEST_SEED=%" PRIu64 " round %u: %s", seed, round,
                st.failure.text);
  for (uint32_t i = 0; i < st.count; i++)
    ck_assert_msg(atomic_load(&st.taken[i]) == 1,
                  "VAT_TEST_SEED=%" PRIu64 " round %u: vat %" PRIu32
                  " of %" PRIu32 " taken %" PRIu32 " times",
                  seed, round, i, st.count, atomic_load(&st.taken[i]));
  for (unsigned i = 0; i < st.nqueues; i++)
    ck_assert_uint_eq(vat__runq_size(st.queues[i]), 0);
}

START_TEST(stress_owner_and_thieves) {
  uint64_t seed = stress_seed();
  for (unsigned round = 0; round < 4; round++)
    stress_round(seed, round, false);
}
END_TEST

/* take_half and steal both move a full ring's head: the owner's and the
 * thieves' claims on the same slots race here most. */
START_TEST(stress_full_queue_and_thieves) {
  uint64_t seed = stress_seed();
  for (unsigned round = 0; round < 4; round++)
    stress_round(seed, round, true);
}
END_TEST

/* The shared queue hands out a share in one take: oldest first, linked
 * through next with the last link cut, the count and size kept. */
START_TEST(inject_pop_batch_takes_the_oldest_in_order) {
  enum { N = 10 };
  vat__task *v = vats_new(N);
  vat__inject *q = GC_MALLOC(sizeof *q);
  vat__inject_init(q);
  uint32_t n = 99;
  ck_assert_ptr_null(vat__inject_pop_batch(q, 4, &n));
  ck_assert_uint_eq(n, 0);
  for (int i = 0; i < N - 1; i++)
    v[i].next = &v[i + 1];
  vat__inject_push(q, &v[0], &v[N - 1], N);

  vat__task *first = vat__inject_pop_batch(q, 4, &n);
  ck_assert_uint_eq(n, 4);
  ck_assert_uint_eq(vat__inject_size(q), N - 4);
  int i = 0;
  for (vat__task *x = first; x != NULL; x = x->next, i++)
    ck_assert_ptr_eq(x, &v[i]);
  ck_assert_int_eq(i, 4);

  ck_assert_ptr_eq(vat__inject_pop(q), &v[4]);
  first = vat__inject_pop_batch(q, 100, &n); /* more than there is */
  ck_assert_uint_eq(n, N - 5);
  ck_assert_ptr_eq(first, &v[5]);
  ck_assert_ptr_null(v[N - 1].next);
  ck_assert_uint_eq(vat__inject_size(q), 0);
  ck_assert_ptr_null(vat__inject_pop(q));
  vat__inject_push(q, &v[0], &v[0], 1); /* the emptied queue takes more */
  ck_assert_ptr_eq(vat__inject_pop_batch(q, 1, &n), &v[0]);
  ck_assert_uint_eq(n, 1);
}
END_TEST

Suite *test_runq_suite(void) {
  Suite *s = suite_create("runq");
  TCase *tc = test_case("unit", 0);
  tcase_add_test(tc, push_pop_order);
  tcase_add_test(tc, order_across_wraparound);
  tcase_add_test(tc, full_queue_refuses);
  tcase_add_test(tc, take_half_links_oldest_half);
  tcase_add_test(tc, steal_takes_about_half);
  tcase_add_test(tc, steal_from_empty);
  tcase_add_test(tc, steal_after_wraparound);
  tcase_add_test(tc, inject_pop_batch_takes_the_oldest_in_order);
  suite_add_tcase(s, tc);

  TCase *stress = test_case("stress", 240);
  tcase_add_test(stress, stress_owner_and_thieves);
  tcase_add_test(stress, stress_full_queue_and_thieves);
  suite_add_tcase(s, stress);
  return s;
}
