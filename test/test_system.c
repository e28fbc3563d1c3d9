/* Systems: configuration, lifecycle, errors, shutdown with work in flight,
 * several systems at once, and an idle system that burns no CPU. */
#include <stdio.h>
#include <time.h>
#include <unistd.h>

#include "support.h"

START_TEST(config_defaults) {
  vat_config cfg;
  vat_config_default(&cfg);
  ck_assert_uint_eq(cfg.workers, (unsigned)sysconf(_SC_NPROCESSORS_ONLN));
  ck_assert_uint_eq(cfg.batch, 64);
  ck_assert_uint_eq(cfg.spin, 64);
  ck_assert(cfg.on_dead_letter == NULL);
}
END_TEST

START_TEST(new_rejects_bad_config) {
  vat_config cfg;
  vat_config_default(&cfg);
  vat_system *sys;
  ck_assert_vat_err(vat_system_new(&cfg, NULL), VAT_EINVAL);
  cfg.deterministic = true; /* only for host-driven systems */
  ck_assert_vat_err(vat_system_new(&cfg, &sys), VAT_EINVAL);
  vat_config_default(&cfg);
  cfg.batch = 0;
  ck_assert_vat_err(vat_system_new(&cfg, &sys), VAT_EINVAL);
  ck_assert_vat_err(vat_system_shutdown(NULL, 1), VAT_EINVAL);
  ck_assert_vat_err(vat_system_destroy(NULL), VAT_EINVAL);
  ck_assert_vat_err(vat_system_stats(NULL, &(vat_stats){0}), VAT_EINVAL);
}
END_TEST

START_TEST(default_system_lifecycle) {
  vat_system *sys;
  ck_assert_vat_ok(vat_system_new(NULL, &sys));
  ck_assert_vat_err(vat_system_stats(sys, NULL), VAT_EINVAL);
  ck_assert_vat_ok(vat_system_shutdown(sys, 5));
  ck_assert_vat_err(vat_system_shutdown(sys, 5), VAT_ECLOSED);
  ck_assert_vat_ok(vat_system_destroy(sys));
  ck_assert_vat_err(vat_system_destroy(sys), VAT_ECLOSED);
  vat_ref *ref;
  ck_assert_vat_err(vat_host_spawn(sys, &(vat_entity_def){0}, &ref, NULL),
                    VAT_ECLOSED);
  ck_assert_uint_eq(test_stats(sys).delivered, 0);
}
END_TEST

static void noop(vat_turn *turn, void *state, void *arg) {
  (void)turn;
  (void)state;
  (void)arg;
}

START_TEST(calls_after_shutdown_are_refused) {
  vat_system *sys = test_system(2);
  vat_ref *ref;
  ck_assert_vat_ok(vat_host_spawn(sys, &(vat_entity_def){0}, &ref, NULL));
  ck_assert_vat_ok(vat_host_send(ref, noop, NULL));
  test_quiesce(sys);
  ck_assert_vat_err(vat_host_send(ref, noop, NULL), VAT_ECLOSED);
  ck_assert_vat_err(vat_host_send_msg(ref, vat_atom_intern("x"), vat_null()),
                    VAT_ECLOSED);
  ck_assert_uint_eq(test_stats(sys).delivered, 1);
}
END_TEST

START_TEST(calls_before_init_are_refused) {
  /* This test case has no init fixture: the library is uninitialised. */
  vat_system *sys;
  ck_assert_vat_err(vat_system_new(NULL, &sys), VAT_ENOTINIT);
  ck_assert_vat_err(vat_thread_register(), VAT_ENOTINIT);
  ck_assert_vat_err(vat_thread_unregister(), VAT_ENOTINIT);
  ck_assert_vat_ok(vat_init());
  ck_assert_vat_ok(vat_init());
  ck_assert_vat_ok(vat_thread_register());
}
END_TEST

/* --- Shutdown with work in flight ---------------------------------------- */

typedef struct bouncer {
  vat_ref *peer;
  uint64_t received;
} bouncer;

/* arg: bounces left. */
static void bounce(vat_turn *turn, void *state, void *arg) {
  bouncer *b = state;
  b->received++;
  uintptr_t left = (uintptr_t)arg;
  if (left > 0)
    expect_vat_ok(vat_send(turn, b->peer, bounce, (void *)(left - 1)));
}

START_TEST(shutdown_waits_for_work_in_flight) {
  enum { PAIRS = 100, BOUNCES = 2000 / TEST_SCALE };
  vat_system *sys = test_system(2);
  bouncer *states[2 * PAIRS];
  for (int i = 0; i < PAIRS; i++) {
    vat_ref *a, *b;
    ck_assert_vat_ok(
        vat_host_spawn(sys, &(vat_entity_def){.state_size = sizeof(bouncer)},
                       &a, (void **)&states[2 * i]));
    ck_assert_vat_ok(
        vat_host_spawn(sys, &(vat_entity_def){.state_size = sizeof(bouncer)},
                       &b, (void **)&states[2 * i + 1]));
    states[2 * i]->peer = b;
    states[2 * i + 1]->peer = a;
    ck_assert_vat_ok(vat_host_send(a, bounce, (void *)(uintptr_t)BOUNCES));
  }
  /* Shut down at once: every committed message must still be delivered. */
  test_quiesce(sys);
  uint64_t total = 0;
  for (int i = 0; i < 2 * PAIRS; i++)
    total += states[i]->received;
  ck_assert_uint_eq(total, (uint64_t)PAIRS * (BOUNCES + 1));
  ck_assert_uint_eq(test_stats(sys).delivered, total);
}
END_TEST

static void forever(vat_turn *turn, void *state, void *arg) {
  (void)state;
  expect_vat_ok(vat_send(turn, vat_self(turn), forever, arg));
}

START_TEST(shutdown_deadline_drops_and_counts) {
  vat_system *sys = test_system(2);
  vat_ref *ref;
  ck_assert_vat_ok(vat_host_spawn(sys, &(vat_entity_def){0}, &ref, NULL));
  ck_assert_vat_ok(vat_host_send(ref, forever, NULL));
  ck_assert_vat_err(vat_system_shutdown(sys, 0.2), VAT_ETIMEDOUT);
  vat_stats st = test_stats(sys);
  ck_assert_uint_eq(st.dropped_at_shutdown, 1);
  ck_assert_uint_gt(st.delivered, 0);
  ck_assert_vat_ok(vat_system_destroy(sys));
}
END_TEST

/* --- Idle systems burn no CPU --------------------------------------------- */

/* Waits until the workers have spun down and parked: a 0.1 s window with
 * (nearly) no CPU used, within 10 s. A condition, not a fixed pause. */
static bool settled_to_idle(void) {
  for (int i = 0; i < 100; i++) {
    double before = test_cpu_seconds();
    test_sleep(0.1);
    if (test_cpu_seconds() - before < 0.002)
      return true;
  }
  return false;
}

START_TEST(idle_system_burns_no_cpu) {
  vat_system *sys = test_system(2);
  test_counter *counter;
  vat_ref *ref = test_spawn_counter(sys, &counter);
  for (int i = 0; i < 1000; i++)
    ck_assert_vat_ok(vat_host_send(ref, test_hit, NULL));
  /* Done (a collection per turn makes that slow in the hostile build),
   * then a moment for the workers to spin down and park. */
  ck_assert(test_wait_u64(&counter->hits, 1000, 30));
  ck_assert_msg(settled_to_idle(), "the workers never parked");
  double before = test_cpu_seconds();
  test_sleep(2);
  double used = test_cpu_seconds() - before;
  fprintf(stderr, "idle_system_burns_no_cpu: %.4f s CPU in 2 s idle\n", used);
  ck_assert_msg(used < 0.02, "idle system used %.4f s CPU in 2 s", used);
  test_quiesce(sys);
}
END_TEST

/* --- Several systems at once ---------------------------------------------- */

START_TEST(several_systems_coexist) {
  enum { SYSTEMS = 4, PAIRS = 20, BOUNCES = 500 / TEST_SCALE };
  vat_system *systems[SYSTEMS];
  bouncer *states[SYSTEMS][2 * PAIRS];
  for (int s = 0; s < SYSTEMS; s++) {
    systems[s] = test_system(1 + s % 2);
    for (int i = 0; i < PAIRS; i++) {
      vat_ref *a, *b;
      ck_assert_vat_ok(vat_host_spawn(
          systems[s], &(vat_entity_def){.state_size = sizeof(bouncer)}, &a,
          (void **)&states[s][2 * i]));
      ck_assert_vat_ok(vat_host_spawn(
          systems[s], &(vat_entity_def){.state_size = sizeof(bouncer)}, &b,
          (void **)&states[s][2 * i + 1]));
      states[s][2 * i]->peer = b;
      states[s][2 * i + 1]->peer = a;
      ck_assert_vat_ok(vat_host_send(a, bounce, (void *)(uintptr_t)BOUNCES));
    }
  }
  for (int s = 0; s < SYSTEMS; s++) {
    test_quiesce(systems[s]);
    ck_assert_uint_eq(test_stats(systems[s]).delivered,
                      (uint64_t)PAIRS * (BOUNCES + 1));
  }
}
END_TEST

/* --- Promises of core.h -----------------------------------------------------
 */

/* vat_system_destroy shuts a running system down first. */
START_TEST(destroy_shuts_down_when_needed) {
  vat_system *sys = test_system(2);
  test_counter *c;
  vat_ref *ref = test_spawn_counter(sys, &c);
  ck_assert_vat_ok(vat_host_send(ref, test_hit, NULL));
  ck_assert(test_wait_u64(&c->hits, 1, 30));
  ck_assert_vat_ok(vat_system_destroy(sys));
  ck_assert_vat_err(vat_system_shutdown(sys, 1), VAT_ECLOSED);
  ck_assert_vat_err(vat_host_send(ref, test_hit, NULL), VAT_ECLOSED);
  ck_assert_uint_eq(test_stats(sys).delivered, 1);
  ck_assert_uint_eq(atomic_load(&c->hits), 1);
}
END_TEST

typedef struct hook_count {
  _Atomic uint64_t calls;
} hook_count;

static void count_hook(void *ctx, vat_ref *target, const vat_atom *selector) {
  (void)target;
  (void)selector;
  atomic_fetch_add(&((hook_count *)ctx)->calls, 1);
}

typedef struct late {
  vat_ref *to;
} late;

static void send_twice(vat_turn *turn, void *state, void *arg) {
  (void)arg;
  late *l = state;
  expect_vat_ok(vat_send(turn, l->to, test_hit, NULL));
  expect_vat_ok(vat_send_msg(turn, l->to, vat_atom_intern("x"), vat_null()));
}

/* core.h: the dead-letter hook runs for messages that reach "a dead vat or
 * a stopped system": here a live vat of a system that was shut down. */
START_TEST(dead_letter_hook_for_a_stopped_system) {
  hook_count hook = {0};
  vat_config cfg;
  vat_config_default(&cfg);
  cfg.workers = 1;
  cfg.on_dead_letter = count_hook;
  cfg.dead_letter_ctx = &hook;
  vat_system *stopped, *live = test_system(1);
  ck_assert_vat_ok(vat_system_new(&cfg, &stopped));
  test_counter *c;
  vat_ref *target = test_spawn_counter(stopped, &c);
  ck_assert_vat_ok(vat_system_shutdown(stopped, 10));
  late *l;
  vat_ref *sender = test_spawn(live, sizeof(late), (void **)&l);
  l->to = target;
  ck_assert_vat_ok(vat_host_send(sender, send_twice, NULL));
  test_quiesce(live);
  ck_assert_uint_eq(atomic_load(&hook.calls), 2);
  ck_assert_uint_eq(test_stats(stopped).dead_letters, 2);
  ck_assert_uint_eq(atomic_load(&c->hits), 0);
  ck_assert_vat_ok(vat_system_destroy(stopped));
}
END_TEST

typedef struct volley {
  vat_ref *peer;
  _Atomic uint64_t *done;
} volley;

static void volley_back(vat_turn *turn, void *state, void *arg) {
  volley *v = state;
  uintptr_t left = (uintptr_t)arg;
  if (left == 0)
    atomic_fetch_add_explicit(v->done, 1, memory_order_release);
  else
    expect_vat_ok(vat_send(turn, v->peer, volley_back, (void *)(left - 1)));
}

/* cfg.spin: 0 parks an idle worker at once (every hand-over between the
 * two workers then goes through a wake-up), a large value spins long; both
 * run every message, and both park when idle. */
START_TEST(spin_setting_keeps_every_message) {
  static const unsigned spins[] = {0, 1, 100000};
  unsigned spin = spins[_i];
  vat_config cfg;
  vat_config_default(&cfg);
  cfg.workers = 2;
  cfg.spin = spin;
  vat_system *sys;
  ck_assert_vat_ok(vat_system_new(&cfg, &sys));
  static _Atomic uint64_t done;
  atomic_store(&done, 0);
  enum { PAIRS = 8, VOLLEYS = 2000 / TEST_SCALE };
  for (int i = 0; i < PAIRS; i++) {
    volley *a, *b;
    vat_ref *ra = test_spawn(sys, sizeof(volley), (void **)&a);
    vat_ref *rb = test_spawn(sys, sizeof(volley), (void **)&b);
    *a = (volley){.peer = rb, .done = &done};
    *b = (volley){.peer = ra, .done = &done};
    ck_assert_vat_ok(
        vat_host_send(ra, volley_back, (void *)(uintptr_t)VOLLEYS));
  }
  ck_assert_msg(test_wait_u64(&done, PAIRS, 60), "spin %u: %lu of %d done",
                spin, (unsigned long)atomic_load(&done), PAIRS);
  ck_assert_msg(settled_to_idle(), "spin %u: the workers never parked", spin);
  test_quiesce(sys);
  ck_assert_uint_eq(test_stats(sys).delivered, (uint64_t)PAIRS * (VOLLEYS + 1));
}
END_TEST

Suite *test_system_suite(void) {
  Suite *s = suite_create("system");
  TCase *tc = test_case("system", 60);
  tcase_add_test(tc, config_defaults);
  tcase_add_test(tc, new_rejects_bad_config);
  tcase_add_test(tc, default_system_lifecycle);
  tcase_add_test(tc, calls_after_shutdown_are_refused);
  tcase_add_test(tc, shutdown_waits_for_work_in_flight);
  tcase_add_test(tc, shutdown_deadline_drops_and_counts);
  tcase_add_test(tc, idle_system_burns_no_cpu);
  tcase_add_test(tc, several_systems_coexist);
  tcase_add_test(tc, destroy_shuts_down_when_needed);
  tcase_add_test(tc, dead_letter_hook_for_a_stopped_system);
  tcase_add_loop_test(tc, spin_setting_keeps_every_message, 0, 3);
  suite_add_tcase(s, tc);
  TCase *uninit = tcase_create("uninitialised");
  tcase_add_test(uninit, calls_before_init_are_refused);
  suite_add_tcase(s, uninit);
  return s;
}
