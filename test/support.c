#include "support.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static _Atomic uint64_t bad_calls;

void test_record_bad_call(const char *expr, int rc, const char *file,
                          int line) {
  if (atomic_fetch_add(&bad_calls, 1) < 5)
    fprintf(stderr, "%s:%d: %s returned %s (%s)\n", file, line, expr,
            vat_err_name(rc), vat_strerror(rc));
}

uint64_t test_bad_calls(void) {
  return atomic_load(&bad_calls);
}

void test_init(void) {
  ck_assert_vat_ok(vat_init());
}

TCase *test_case(const char *name, double timeout_s) {
  TCase *tc = tcase_create(name);
  tcase_add_checked_fixture(tc, test_init, NULL);
  if (timeout_s > 0)
    tcase_set_timeout(tc, timeout_s);
  return tc;
}

vat_system *test_system(unsigned workers) {
  vat_config cfg;
  vat_config_default(&cfg);
  if (workers)
    cfg.workers = workers;
  vat_system *sys = NULL;
  ck_assert_vat_ok(vat_system_new(&cfg, &sys));
  return sys;
}

vat_system *test_host_system(bool deterministic, uint64_t seed) {
  vat_config cfg;
  vat_config_default(&cfg);
  cfg.workers = 0;
  cfg.deterministic = deterministic;
  cfg.seed = seed;
  vat_system *sys = NULL;
  ck_assert_vat_ok(vat_system_new(&cfg, &sys));
  return sys;
}

void test_quiesce(vat_system *sys) {
  ck_assert_vat_ok(vat_system_shutdown(sys, 30));
  /* After the shutdown: most handlers run during its wait for quiescence,
   * and a failed call there must fail the test too. */
  ck_assert_uint_eq(test_bad_calls(), 0);
  vat_stats st = test_stats(sys);
  ck_assert_uint_eq(st.dropped_at_shutdown, 0);
  ck_assert_vat_ok(vat_system_destroy(sys));
}

vat_stats test_stats(vat_system *sys) {
  vat_stats st;
  ck_assert_vat_ok(vat_system_stats(sys, &st));
  return st;
}

uint64_t test_seed(const char *test_name) {
  const char *env = getenv("VAT_TEST_SEED");
  uint64_t seed;
  if (env) {
    seed = strtoull(env, NULL, 0);
  } else {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    seed = (uint64_t)ts.tv_nsec * 2654435761u ^ (uint64_t)ts.tv_sec;
  }
  if (seed == 0)
    seed = 1;
  fprintf(stderr,
          "%s: seed %" PRIu64 " (replay with VAT_TEST_SEED=%" PRIu64 ")\n",
          test_name, seed, seed);
  return seed;
}

void test_fail_first(test_failure *f, const char *fmt, ...) {
  int was = 0;
  if (!atomic_compare_exchange_strong(&f->failed, &was, 1))
    return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(f->text, sizeof f->text, fmt, ap);
  va_end(ap);
}

bool test_quick(void) {
  const char *quick = getenv("VAT_TEST_QUICK");
  return quick != NULL && *quick != '\0';
}

uint32_t test_stress_size(uint64_t *state, uint32_t lo, uint32_t hi) {
  uint32_t n = (uint32_t)test_rand_between(state, lo, hi);
  return test_quick() ? n / 10 : n;
}

void test_sleep(double seconds) {
  /* Until a deadline, not for a duration: time spent stopped by the
   * collector counts, or back-to-back collections would stretch the sleep
   * without end. */
  struct timespec until;
  clock_gettime(CLOCK_MONOTONIC, &until);
  long long ns = (long long)until.tv_nsec + (long long)(seconds * 1e9);
  until.tv_sec += (time_t)(ns / 1000000000);
  until.tv_nsec = (long)(ns % 1000000000);
  while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &until, NULL) == EINTR)
    ;
}

bool test_wait_u64(_Atomic uint64_t *flag, uint64_t value, double timeout_s) {
  struct timespec pause = {0, 200000}, start, now;
  clock_gettime(CLOCK_MONOTONIC, &start);
  while (atomic_load_explicit(flag, memory_order_acquire) < value) {
    clock_gettime(CLOCK_MONOTONIC, &now);
    if ((double)(now.tv_sec - start.tv_sec) +
            (double)(now.tv_nsec - start.tv_nsec) * 1e-9 >
        timeout_s)
      return false;
    nanosleep(&pause, NULL);
  }
  return true;
}

vat_ref *test_spawn(vat_system *sys, size_t state_size, void **state) {
  vat_ref *ref = NULL;
  ck_assert_vat_ok(vat_host_spawn(
      sys, &(vat_entity_def){.state_size = state_size}, &ref, state));
  return ref;
}

void test_hit(vat_turn *turn, void *state, void *arg) {
  (void)turn;
  (void)arg;
  test_counter *c = state;
  atomic_fetch_add_explicit(&c->hits, 1, memory_order_release);
}

vat_ref *test_spawn_counter(vat_system *sys, test_counter **state) {
  return test_spawn(sys, sizeof(test_counter), (void **)state);
}

void test_volley_back(vat_turn *turn, void *state, void *arg) {
  test_volley *v = state;
  uintptr_t left = (uintptr_t)arg;
  if (left == 0)
    atomic_fetch_add_explicit(v->done, 1, memory_order_release);
  else
    expect_vat_ok(
        vat_send(turn, v->peer, test_volley_back, (void *)(left - 1)));
}

void test_spawn_volley_pair(vat_system *sys, _Atomic uint64_t *done,
                            vat_ref *ends[2]) {
  test_volley *v[2];
  for (int k = 0; k < 2; k++)
    ends[k] = test_spawn(sys, sizeof(test_volley), (void **)&v[k]);
  for (int k = 0; k < 2; k++)
    *v[k] = (test_volley){.peer = ends[1 - k], .done = done};
}

static double seconds_on(clockid_t clock) {
  struct timespec ts;
  clock_gettime(clock, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

double test_wall_seconds(void) {
  return seconds_on(CLOCK_MONOTONIC);
}

double test_cpu_seconds(void) {
  return seconds_on(CLOCK_PROCESS_CPUTIME_ID);
}

bool test_settled_to_idle(void) {
  for (int i = 0; i < 100; i++) {
    double before = test_cpu_seconds();
    test_sleep(0.1);
    if (test_cpu_seconds() - before < 0.002)
      return true;
  }
  return false;
}

static void adder_receive(vat_turn *turn, void *state, const vat_atom *selector,
                          vat_value value) {
  (void)state;
  vat_value args;
  vat_ref *reply;
  if (!vat_request_parse(value, &args, &reply) ||
      selector != vat_atom_intern("add"))
    return;
  int64_t a = 0, b = 0;
  vat_get_int(vat_at(args, 0), &a);
  vat_get_int(vat_at(args, 1), &b);
  expect_vat_ok(vat_reply(turn, reply, vat_int(a + b)));
}

const vat_entity_def test_adder_def = {.receive = adder_receive};

char *test_read_file(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  ck_assert_msg(f != NULL, "%s: %s", path, strerror(errno));
  size_t cap = 1 << 16, n = 0, got;
  char *buf = malloc(cap);
  while (buf && (got = fread(buf + n, 1, cap - n, f)) > 0)
    if ((n += got) == cap)
      buf = realloc(buf, cap *= 2);
  fclose(f);
  ck_assert_ptr_nonnull(buf);
  *len = n;
  return buf;
}
