/* Host-driven systems: progress only inside the run call, the wake-up
 * descriptor, budgets, no spinning, mixed use with threaded systems, and
 * the deterministic mode. */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "support.h"

static vat_system *host_system(bool deterministic, uint64_t seed) {
  vat_config cfg;
  vat_config_default(&cfg);
  cfg.workers = 0;
  cfg.deterministic = deterministic;
  cfg.seed = seed;
  vat_system *sys;
  ck_assert_vat_ok(vat_system_new(&cfg, &sys));
  return sys;
}

/* Polls until `fd` is readable or `timeout_ms` passed. The collector's
 * stop-the-world signals interrupt poll (EINTR): go on to the deadline. */
static bool readable(int fd, int timeout_ms) {
  double until = test_wall_seconds() + timeout_ms * 1e-3;
  for (;;) {
    struct pollfd p = {.fd = fd, .events = POLLIN};
    double left_ms = (until - test_wall_seconds()) * 1e3;
    int n = poll(&p, 1, left_ms > 0 ? (int)left_ms + 1 : 0);
    if (n == 1)
      return (p.revents & POLLIN) != 0;
    if (n == 0 || errno != EINTR)
      return false;
  }
}

START_TEST(progress_only_inside_run) {
  vat_system *sys = host_system(false, 0);
  test_counter *c;
  vat_ref *ref = test_spawn_counter(sys, &c);
  for (int i = 0; i < 100; i++)
    ck_assert_vat_ok(vat_host_send(ref, test_hit, NULL));
  test_sleep(0.05);
  ck_assert_uint_eq(atomic_load(&c->hits), 0);
  vat_run_result r;
  ck_assert_vat_ok(vat_system_run(sys, 0, 0, &r));
  ck_assert_uint_eq(r.turns, 100);
  ck_assert(!r.more);
  ck_assert_uint_eq(atomic_load(&c->hits), 100);
  test_quiesce(sys);
}
END_TEST

START_TEST(run_respects_turn_budget) {
  vat_system *sys = host_system(false, 0);
  test_counter *c;
  vat_ref *ref = test_spawn_counter(sys, &c);
  for (int i = 0; i < 100; i++)
    ck_assert_vat_ok(vat_host_send(ref, test_hit, NULL));
  vat_run_result r;
  ck_assert_vat_ok(vat_system_run(sys, 7, 0, &r));
  ck_assert_uint_eq(r.turns, 7);
  ck_assert(r.more);
  ck_assert_vat_ok(vat_system_run_until_quiescent(sys, 0, &r));
  ck_assert_uint_eq(r.turns, 93);
  ck_assert(!r.more);
  ck_assert_uint_eq(atomic_load(&c->hits), 100);
  test_quiesce(sys);
}
END_TEST

/* A vat that keeps itself busy, until told to stop or for 30 s at most. */
typedef struct spinner {
  _Atomic uint64_t stop;
  double until;
  uint64_t turns;
} spinner;

static void spin_on(vat_turn *turn, void *state, void *arg) {
  (void)arg;
  spinner *sp = state;
  sp->turns++;
  if (!atomic_load_explicit(&sp->stop, memory_order_acquire) &&
      test_wall_seconds() < sp->until)
    expect_vat_ok(vat_send(turn, vat_self(turn), spin_on, NULL));
}

/* host.h: vat_system_run returns once `max_ns` passed, with work left. */
START_TEST(run_respects_time_budget) {
  vat_system *sys = host_system(false, 0);
  spinner *sp;
  vat_ref *ref = test_spawn(sys, sizeof(spinner), (void **)&sp);
  sp->until = test_wall_seconds() + 30;
  ck_assert_vat_ok(vat_host_send(ref, spin_on, NULL));
  vat_run_result r;
  double t0 = test_wall_seconds();
  ck_assert_vat_ok(vat_system_run(sys, 0, 20 * 1000000, &r));
  double took = test_wall_seconds() - t0;
  ck_assert_msg(r.more, "ran dry in %.3f s: the budget was ignored", took);
  ck_assert_uint_eq(r.turns, sp->turns);
  ck_assert_msg(took < 10, "a 20 ms budget took %.3f s", took);
  atomic_store_explicit(&sp->stop, 1, memory_order_release);
  test_quiesce(sys);
}
END_TEST

/* host.h: "Sends made by the system's own turns do not make it readable:
 * they are what `more` reports." */
static void send_on(vat_turn *turn, void *state, void *arg) {
  (void)state;
  uintptr_t left = (uintptr_t)arg;
  if (left > 0)
    expect_vat_ok(vat_send(turn, vat_self(turn), send_on, (void *)(left - 1)));
}

START_TEST(own_sends_do_not_wake_the_fd) {
  vat_system *sys = host_system(false, 0);
  int fd;
  ck_assert_vat_ok(vat_system_fd(sys, &fd));
  vat_ref *ref = test_spawn(sys, 8, NULL);
  ck_assert_vat_ok(vat_host_send(ref, send_on, (void *)(uintptr_t)100));
  ck_assert(readable(fd, 0)); /* a host thread's send does */
  vat_run_result r;
  ck_assert_vat_ok(vat_system_run(sys, 10, 0, &r));
  ck_assert_uint_eq(r.turns, 10);
  ck_assert(r.more);
  ck_assert_msg(!readable(fd, 0), "the system's own sends woke its fd");
  ck_assert_vat_ok(vat_system_run(sys, 0, 0, &r));
  ck_assert_uint_eq(r.turns, 91);
  ck_assert(!r.more);
  ck_assert(!readable(fd, 0));
  test_quiesce(sys);
}
END_TEST

/* run_until_quiescent stops after `max_turns`, with `more` set. */
START_TEST(run_until_quiescent_respects_max_turns) {
  vat_system *sys = host_system(true, 3);
  vat_ref *ref = test_spawn(sys, 8, NULL);
  ck_assert_vat_ok(vat_host_send(ref, send_on, (void *)(uintptr_t)100));
  vat_run_result r;
  ck_assert_vat_ok(vat_system_run_until_quiescent(sys, 25, &r));
  ck_assert_uint_eq(r.turns, 25);
  ck_assert(r.more);
  ck_assert_vat_ok(vat_system_run_until_quiescent(sys, 0, &r));
  ck_assert_uint_eq(r.turns, 76);
  ck_assert(!r.more);
  test_quiesce(sys);
}
END_TEST

/* run_until_quiescent runs "until nothing is ready and no timer is due":
 * a zero-delay timer armed by a turn is due at once, on the virtual clock
 * too, so the same call fires it and runs its message. */
static void arm_now(vat_turn *turn, void *state, void *arg) {
  (void)state;
  expect_vat_ok(vat_later(turn, 0, arg, test_hit, NULL, NULL));
}

START_TEST(run_until_quiescent_fires_timers_that_fall_due) {
  vat_system *sys = host_system(true, 5);
  test_counter *c;
  vat_ref *cref = test_spawn_counter(sys, &c);
  vat_ref *ref = test_spawn(sys, 8, NULL);
  ck_assert_vat_ok(vat_host_send(ref, arm_now, cref));
  vat_run_result r;
  ck_assert_vat_ok(vat_system_run_until_quiescent(sys, 0, &r));
  ck_assert_uint_eq(atomic_load(&c->hits), 1);
  ck_assert_uint_eq(r.turns, 2);
  int64_t ns;
  ck_assert_vat_ok(vat_system_next_timer(sys, &ns));
  ck_assert_int_eq(ns, -1);
  test_quiesce(sys);
}
END_TEST

typedef struct late_sender {
  vat_ref *to;
  int rc;
} late_sender;

static void *send_later(void *arg) {
  late_sender *s = arg;
  s->rc = vat_thread_register();
  test_sleep(0.1);
  if (s->rc == VAT_OK)
    s->rc = vat_host_send(s->to, test_hit, NULL);
  vat_thread_unregister();
  return NULL;
}

START_TEST(fd_wakes_poll_when_another_thread_sends) {
  vat_system *sys = host_system(false, 0);
  test_counter *c;
  vat_ref *ref = test_spawn_counter(sys, &c);
  int fd;
  ck_assert_vat_ok(vat_system_fd(sys, &fd));
  ck_assert(!readable(fd, 0));
  late_sender s = {.to = ref};
  pthread_t t;
  ck_assert_int_eq(pthread_create(&t, NULL, send_later, &s), 0);
  ck_assert_msg(readable(fd, 5000), "poll was not woken by a send");
  pthread_join(t, NULL);
  ck_assert_vat_ok(s.rc);
  vat_run_result r;
  ck_assert_vat_ok(vat_system_run(sys, 0, 0, &r));
  ck_assert_uint_eq(r.turns, 1);
  ck_assert(!readable(fd, 0)); /* the run call cleared it */
  test_quiesce(sys);
}
END_TEST

START_TEST(idle_embedded_host_does_not_spin) {
  vat_system *sys = host_system(false, 0);
  int fd;
  ck_assert_vat_ok(vat_system_fd(sys, &fd));
  double cpu = test_cpu_seconds(), start = test_wall_seconds();
  int loops = 0;
  while (test_wall_seconds() - start < 2.0) {
    vat_run_result r;
    ck_assert_vat_ok(vat_system_run(sys, 0, 0, &r));
    int64_t ns;
    ck_assert_vat_ok(vat_system_next_timer(sys, &ns));
    ck_assert_int_eq(ns, -1);
    int timeout = r.more ? 0 : 250; /* the loop's own tick */
    struct pollfd p = {.fd = fd, .events = POLLIN};
    poll(&p, 1, timeout);
    loops++;
  }
  double used = test_cpu_seconds() - cpu;
  fprintf(stderr, "idle_embedded_host: %.4f s CPU in 2 s, %d loops\n", used,
          loops);
  ck_assert_int_le(loops, 10);
  ck_assert_msg(used < 0.02, "idle host loop used %.4f s CPU", used);
  test_quiesce(sys);
}
END_TEST

/* --- Mixed use -------------------------------------------------------------
 */

typedef struct relay {
  vat_ref *peer;
  _Atomic uint64_t got;
} relay;

static void relay_back(vat_turn *turn, void *state, void *arg) {
  relay *r = state;
  atomic_fetch_add_explicit(&r->got, 1, memory_order_release);
  uintptr_t left = (uintptr_t)arg;
  if (left > 0)
    expect_vat_ok(vat_send(turn, r->peer, relay_back, (void *)(left - 1)));
}

START_TEST(host_driven_and_threaded_systems_talk) {
  vat_system *host = host_system(false, 0), *threaded = test_system(2);
  vat_ref *a, *b;
  relay *ra, *rb;
  ck_assert_vat_ok(vat_host_spawn(
      host, &(vat_entity_def){.state_size = sizeof(relay)}, &a, (void **)&ra));
  ck_assert_vat_ok(
      vat_host_spawn(threaded, &(vat_entity_def){.state_size = sizeof(relay)},
                     &b, (void **)&rb));
  ra->peer = b;
  rb->peer = a;
  ck_assert_vat_ok(vat_host_send(a, relay_back, (void *)(uintptr_t)100));
  int fd;
  ck_assert_vat_ok(vat_system_fd(host, &fd));
  double start = test_wall_seconds();
  while (atomic_load(&ra->got) < 51 && test_wall_seconds() - start < 30) {
    vat_run_result r;
    ck_assert_vat_ok(vat_system_run(host, 0, 0, &r));
    /* The threaded system's reply wakes us; without it we would hang. */
    if (!r.more && atomic_load(&ra->got) < 51)
      ck_assert_msg(readable(fd, 10000),
                    "a reply from the threaded system did not wake the fd");
  }
  ck_assert_uint_eq(atomic_load(&ra->got), 51);
  test_quiesce(host);
  test_quiesce(threaded);
  ck_assert_uint_eq(atomic_load(&rb->got), 50);
}
END_TEST

/* --- Errors ----------------------------------------------------------------
 */

typedef struct in_turn {
  vat_system *sys;
  int run_rc;
} in_turn;

static void run_from_turn(vat_turn *turn, void *state, void *arg) {
  (void)turn;
  (void)arg;
  in_turn *t = state;
  t->run_rc = vat_system_run(t->sys, 0, 0, NULL);
}

START_TEST(run_errors) {
  vat_system *threaded = test_system(1), *host = host_system(false, 0);
  int fd;
  ck_assert_vat_err(vat_system_run(NULL, 0, 0, NULL), VAT_EINVAL);
  ck_assert_vat_err(vat_system_run(threaded, 0, 0, NULL), VAT_ENOTSUP);
  ck_assert_vat_err(vat_system_fd(threaded, &fd), VAT_ENOTSUP);
  ck_assert_vat_err(vat_system_fd(host, NULL), VAT_EINVAL);
  ck_assert_vat_err(vat_system_advance_clock(host, 1), VAT_ENOTSUP);
  ck_assert_vat_err(vat_system_next_timer(host, NULL), VAT_EINVAL);
  vat_ref *ref;
  in_turn *t;
  ck_assert_vat_ok(
      vat_host_spawn(host, &(vat_entity_def){.state_size = sizeof(in_turn)},
                     &ref, (void **)&t));
  t->sys = host;
  ck_assert_vat_ok(vat_host_send(ref, run_from_turn, NULL));
  ck_assert_vat_ok(vat_system_run(host, 0, 0, NULL));
  ck_assert_int_eq(t->run_rc, VAT_EINTURN);
  test_quiesce(host);
  test_quiesce(threaded);
  ck_assert_vat_err(vat_system_run(host, 0, 0, NULL), VAT_ECLOSED);
  ck_assert_vat_err(vat_system_fd(host, &fd), VAT_ECLOSED);
}
END_TEST

typedef struct blocker {
  sem_t *entered, *release;
} blocker;

static void block_in_turn(vat_turn *turn, void *state, void *arg) {
  (void)turn;
  (void)arg;
  blocker *b = state;
  sem_post(b->entered);
  sem_wait(b->release);
}

static void *run_in_thread(void *arg) {
  vat_system *sys = arg;
  vat_thread_register();
  vat_system_run(sys, 0, 0, NULL);
  vat_thread_unregister();
  return NULL;
}

START_TEST(one_runner_at_a_time) {
  vat_system *sys = host_system(false, 0);
  sem_t entered, release;
  sem_init(&entered, 0, 0);
  sem_init(&release, 0, 0);
  vat_ref *ref;
  blocker *b;
  ck_assert_vat_ok(
      vat_host_spawn(sys, &(vat_entity_def){.state_size = sizeof(blocker)},
                     &ref, (void **)&b));
  b->entered = &entered;
  b->release = &release;
  ck_assert_vat_ok(vat_host_send(ref, block_in_turn, NULL));
  pthread_t t;
  ck_assert_int_eq(pthread_create(&t, NULL, run_in_thread, sys), 0);
  sem_wait(&entered);
  ck_assert_vat_err(vat_system_run(sys, 0, 0, NULL), VAT_EBUSY);
  sem_post(&release);
  pthread_join(t, NULL);
  test_quiesce(sys);
}
END_TEST

START_TEST(shutdown_runs_a_host_driven_system_dry) {
  vat_system *sys = host_system(false, 0);
  test_counter *c;
  vat_ref *ref = test_spawn_counter(sys, &c);
  for (int i = 0; i < 1000; i++)
    ck_assert_vat_ok(vat_host_send(ref, test_hit, NULL));
  test_quiesce(sys);
  ck_assert_uint_eq(atomic_load(&c->hits), 1000);
}
END_TEST

/* --- Deterministic mode -----------------------------------------------------
 */

enum { PRODUCERS = 6, ROUNDS = 12, TRACE_MAX = PRODUCERS * ROUNDS * 2 };

typedef struct logger {
  uint8_t trace[TRACE_MAX];
  size_t len;
} logger;

typedef struct producer {
  vat_ref *log;
  uint8_t id;
  int rounds;
} producer;

static void log_entry(vat_turn *turn, void *state, void *arg) {
  (void)turn;
  logger *l = state;
  if (l->len < TRACE_MAX)
    l->trace[l->len++] = (uint8_t)(uintptr_t)arg;
}

/* A racy program: every producer logs twice per round and re-sends itself;
 * the order of entries at the logger depends only on scheduling. */
static void produce(vat_turn *turn, void *state, void *arg) {
  (void)arg;
  producer *p = state;
  expect_vat_ok(vat_send(turn, p->log, log_entry, (void *)(uintptr_t)p->id));
  expect_vat_ok(vat_send(turn, p->log, log_entry, (void *)(uintptr_t)p->id));
  if (++p->rounds < ROUNDS)
    expect_vat_ok(vat_send(turn, vat_self(turn), produce, NULL));
}

static void trace_with_seed(uint64_t seed, logger *out) {
  vat_system *sys = host_system(true, seed);
  vat_ref *log;
  logger *l;
  ck_assert_vat_ok(vat_host_spawn(
      sys, &(vat_entity_def){.state_size = sizeof(logger)}, &log, (void **)&l));
  for (int i = 0; i < PRODUCERS; i++) {
    vat_ref *ref;
    producer *p;
    ck_assert_vat_ok(
        vat_host_spawn(sys, &(vat_entity_def){.state_size = sizeof(producer)},
                       &ref, (void **)&p));
    p->log = log;
    p->id = (uint8_t)i;
    ck_assert_vat_ok(vat_host_send(ref, produce, NULL));
  }
  vat_run_result r;
  ck_assert_vat_ok(vat_system_run_until_quiescent(sys, 0, &r));
  ck_assert(!r.more);
  ck_assert_uint_eq(l->len, TRACE_MAX);
  *out = *l;
  test_quiesce(sys);
}

START_TEST(same_seed_same_trace_other_seeds_other_traces) {
  uint64_t seed = test_seed("deterministic mode");
  logger first, again;
  trace_with_seed(seed, &first);
  trace_with_seed(seed, &again);
  ck_assert_msg(memcmp(first.trace, again.trace, TRACE_MAX) == 0,
                "seed %llu gave two different traces",
                (unsigned long long)seed);
  int different = 0;
  for (uint64_t other = 1; other <= 5; other++) {
    logger t;
    trace_with_seed(seed + other, &t);
    different += memcmp(first.trace, t.trace, TRACE_MAX) != 0;
  }
  ck_assert_msg(different >= 4,
                "only %d of 5 other seeds changed the interleaving (seed "
                "%llu)",
                different, (unsigned long long)seed);
}
END_TEST

START_TEST(virtual_clock_moves_only_when_advanced) {
  vat_system *sys = host_system(true, 1);
  uint64_t t0 = vat_system_now(sys);
  test_sleep(0.02);
  ck_assert_uint_eq(vat_system_now(sys), t0);
  ck_assert_vat_ok(vat_system_advance_clock(sys, 1500));
  ck_assert_uint_eq(vat_system_now(sys), t0 + 1500);
  test_quiesce(sys);
}
END_TEST

Suite *test_host_suite(void) {
  Suite *s = suite_create("host");
  TCase *tc = test_case("host", 60);
  tcase_add_test(tc, progress_only_inside_run);
  tcase_add_test(tc, run_respects_turn_budget);
  tcase_add_test(tc, run_respects_time_budget);
  tcase_add_test(tc, own_sends_do_not_wake_the_fd);
  tcase_add_test(tc, run_until_quiescent_respects_max_turns);
  tcase_add_test(tc, run_until_quiescent_fires_timers_that_fall_due);
  tcase_add_test(tc, fd_wakes_poll_when_another_thread_sends);
  tcase_add_test(tc, idle_embedded_host_does_not_spin);
  tcase_add_test(tc, host_driven_and_threaded_systems_talk);
  tcase_add_test(tc, run_errors);
  tcase_add_test(tc, one_runner_at_a_time);
  tcase_add_test(tc, shutdown_runs_a_host_driven_system_dry);
  tcase_add_test(tc, same_seed_same_trace_other_seeds_other_traces);
  tcase_add_test(tc, virtual_clock_moves_only_when_advanced);
  suite_add_tcase(s, tc);
  return s;
}
