/* Stress: many vats, both workers busy, randomized sizes, repeated; every
 * count verified exactly. A rare failure here is a bug, not noise. */
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>

#define GC_THREADS 1
#include <gc/gc.h>

#include "support.h"

typedef struct hopper {
  vat_ref **all; /* every hopper, to pick a random next one */
  uint64_t count;
  uint64_t rng;
  uint64_t received;
  _Atomic int busy; /* detects two threads in one vat at once */
  _Atomic uint64_t overlaps;
  _Atomic uint64_t *finished;
} hopper;

/* arg: hops left for this token. */
static void hop(vat_turn *turn, void *state, void *arg) {
  hopper *h = state;
  if (atomic_exchange_explicit(&h->busy, 1, memory_order_acquire))
    atomic_fetch_add(&h->overlaps, 1);
  h->received++;
  uintptr_t left = (uintptr_t)arg;
  if (left == 0) {
    atomic_fetch_add_explicit(h->finished, 1, memory_order_release);
  } else {
    /* A burst of 1-3 sends per turn: one carries the token, the others are
     * zero-hop messages that end where they land. */
    unsigned extra = (unsigned)(test_rand(&h->rng) % 3);
    for (unsigned i = 0; i < extra; i++)
      expect_vat_ok(vat_send(turn, h->all[test_rand(&h->rng) % h->count], hop,
                             (void *)0));
    expect_vat_ok(vat_send(turn, h->all[test_rand(&h->rng) % h->count], hop,
                           (void *)(left - 1)));
  }
  atomic_store_explicit(&h->busy, 0, memory_order_release);
}

typedef struct injector {
  vat_ref **all;
  uint64_t count, tokens, hops, seed;
  int failures;
} injector;

static void *inject_tokens(void *arg) {
  injector *in = arg;
  uint64_t rng = in->seed;
  for (uint64_t t = 0; t < in->tokens; t++)
    if (vat_host_send(in->all[test_rand(&rng) % in->count], hop,
                      (void *)(uintptr_t)in->hops) != VAT_OK)
      in->failures++;
  return NULL;
}

static void one_round(uint64_t *rng, int round) {
  uint64_t vats = test_rand_between(rng, 1000, 5000);
  uint64_t tokens = test_rand_between(rng, 250, 500) / TEST_SCALE + 2;
  uint64_t hops = test_rand_between(rng, 400, 800);
  unsigned batch = (unsigned)test_rand_between(rng, 1, 100);
  enum { INJECTORS = 2 };
  vat_config cfg;
  vat_config_default(&cfg);
  cfg.workers = 2;
  cfg.batch = batch;
  vat_system *sys;
  ck_assert_vat_ok(vat_system_new(&cfg, &sys));

  _Atomic uint64_t *finished = GC_MALLOC(sizeof *finished);
  vat_ref **all = GC_MALLOC(vats * sizeof *all);
  hopper **states = GC_MALLOC(vats * sizeof *states);
  for (uint64_t i = 0; i < vats; i++) {
    ck_assert_vat_ok(
        vat_host_spawn(sys, &(vat_entity_def){.state_size = sizeof(hopper)},
                       &all[i], (void **)&states[i]));
    states[i]->all = all;
    states[i]->count = vats;
    states[i]->rng = test_rand(rng) | 1;
    states[i]->finished = finished;
  }
  pthread_t threads[INJECTORS];
  injector jobs[INJECTORS];
  for (int i = 0; i < INJECTORS; i++) {
    jobs[i] =
        (injector){all, vats, tokens / INJECTORS, hops, test_rand(rng) | 1, 0};
    ck_assert_int_eq(pthread_create(&threads[i], NULL, inject_tokens, &jobs[i]),
                     0);
  }
  for (int i = 0; i < INJECTORS; i++) {
    pthread_join(threads[i], NULL);
    ck_assert_int_eq(jobs[i].failures, 0);
  }
  uint64_t injected = INJECTORS * (tokens / INJECTORS);
  ck_assert(test_wait_u64(finished, injected, 120));
  test_quiesce(sys);

  uint64_t received = 0, overlaps = 0;
  for (uint64_t i = 0; i < vats; i++) {
    received += states[i]->received;
    overlaps += atomic_load(&states[i]->overlaps);
  }
  vat_stats st = test_stats(sys);
  fprintf(stderr,
          "stress round %d: %" PRIu64 " vats, %" PRIu64 " tokens x %" PRIu64
          " hops, batch %u: %" PRIu64 " turns\n",
          round, vats, injected, hops, batch, st.delivered);
  ck_assert_uint_eq(overlaps, 0);
  ck_assert_uint_eq(received, st.delivered);
  ck_assert_uint_eq(st.dead_letters, 0);
  /* Each token makes hops+1 deliveries; extras end where they land. */
  ck_assert_uint_ge(received, injected * (hops + 1));
  ck_assert_uint_eq(atomic_load(finished) - injected,
                    received - injected * (hops + 1));
  ck_assert_uint_ge(received, 100000 / TEST_SCALE);
}

START_TEST(random_hops_across_thousands_of_vats) {
  uint64_t rng = test_seed("random_hops_across_thousands_of_vats");
  for (int round = 0; round < 20; round++)
    one_round(&rng, round);
}
END_TEST

Suite *test_stress_suite(void) {
  Suite *s = suite_create("stress");
  TCase *tc = test_case("stress", 300);
  tcase_add_test(tc, random_hops_across_thousands_of_vats);
  suite_add_tcase(s, tc);
  return s;
}
