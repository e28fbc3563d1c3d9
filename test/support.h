/* Helpers shared by the test suites. */
#ifndef VAT_TEST_SUPPORT_H
#define VAT_TEST_SUPPORT_H

#include <check.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "util/testpoint.h" /* pause points: vat__test_point_arm() and friends */
#include "vat.h"

/** Divides the sizes of the heavy tests. The hostile build collects at
 *  every turn boundary, so it runs them smaller. */
#if VAT_HOSTILE
#define TEST_SCALE 100
#else
#define TEST_SCALE 1
#endif

/** Checked fixture: initialises the library in the forked test process. */
void test_init(void);

/** A test case with the init fixture and `timeout_s` (0: Check's default). */
TCase *test_case(const char *name, double timeout_s);

/** Asserts a libvat call returned VAT_OK, printing the code's name if not. */
#define ck_assert_vat_ok(expr)                                                 \
  do {                                                                         \
    int vat__rc = (expr);                                                      \
    ck_assert_msg(vat__rc == VAT_OK, "%s returned %s (%s)", #expr,             \
                  vat_err_name(vat__rc), vat_strerror(vat__rc));               \
  } while (0)

/** Asserts a libvat call returned the error `code`. */
#define ck_assert_vat_err(expr, code)                                          \
  do {                                                                         \
    int vat__rc = (expr);                                                      \
    ck_assert_msg(vat__rc == (code), "%s returned %s, expected %s", #expr,     \
                  vat_err_name(vat__rc), vat_err_name(code));                  \
  } while (0)

/** Checks a libvat call made inside a handler, where Check's assertions
 *  are too slow for hot loops (each one writes to a file) and would end the
 *  test from a worker thread. A failure is counted and the first few are
 *  printed; test_quiesce() asserts the count is zero. */
#define expect_vat_ok(expr)                                                    \
  do {                                                                         \
    int vat__rc = (expr);                                                      \
    if (vat__rc != VAT_OK)                                                     \
      test_record_bad_call(#expr, vat__rc, __FILE__, __LINE__);                \
  } while (0)

void test_record_bad_call(const char *expr, int rc, const char *file, int line);
/** How many expect_vat_ok checks failed so far in this test process. */
uint64_t test_bad_calls(void);

/** Spawns a vat from the host with `state_size` bytes of state; stores the
 *  state in *state when `state` is not NULL. Asserts success. */
vat_ref *test_spawn(vat_system *sys, size_t state_size, void **state);

/** A vat that counts the messages it gets: send it test_hit. */
typedef struct test_counter {
  _Atomic uint64_t hits;
} test_counter;
void test_hit(vat_turn *turn, void *state, void *arg);
vat_ref *test_spawn_counter(vat_system *sys, test_counter **state);

/** Two vats that send balls back and forth: test_volley_back, its
 *  argument the hops left, goes to the peer until none are left, then
 *  counts one in `done`. test_spawn_volley_pair spawns such a pair and
 *  names its ends; send either end test_volley_back to start a ball. */
typedef struct test_volley {
  vat_ref *peer;
  _Atomic uint64_t *done;
} test_volley;
void test_volley_back(vat_turn *turn, void *state, void *arg);
void test_spawn_volley_pair(vat_system *sys, _Atomic uint64_t *done,
                            vat_ref *ends[2]);

/** Seconds on the monotonic clock, and CPU seconds of this process. */
double test_wall_seconds(void);
double test_cpu_seconds(void);
/** Waits, up to 10 s, for a 0.1 s window in which the process used
 *  (nearly) no CPU: its threads (workers, the collector's, a sanitizer's)
 *  have settled. A condition, not a fixed pause; false if never. */
bool test_settled_to_idle(void);

/** A system with `workers` workers (0: the default count). */
vat_system *test_system(unsigned workers);

/** A host-driven system (no workers), in deterministic mode with `seed`
 *  (0: the library's default seed) when `deterministic`. */
vat_system *test_host_system(bool deterministic, uint64_t seed);

/** Shuts `sys` down, asserting it reached quiescence within 30 s with
 *  nothing dropped, then destroys it. Runtime tests end with this. */
void test_quiesce(vat_system *sys);

/** The system's counters. */
vat_stats test_stats(vat_system *sys);

/** A seed for randomized tests: $VAT_TEST_SEED if set, else from the clock.
 *  Printed to stderr so a failing run can be replayed. */
uint64_t test_seed(const char *test_name);

/** xorshift64*: a small, seedable generator for test sizes and choices. */
static inline uint64_t test_rand(uint64_t *state) {
  uint64_t x = *state;
  x ^= x >> 12;
  x ^= x << 25;
  x ^= x >> 27;
  *state = x;
  return x * 0x2545F4914F6CDD1DULL;
}

/** A uniform integer in [lo, hi]. */
static inline uint64_t test_rand_between(uint64_t *state, uint64_t lo,
                                         uint64_t hi) {
  return lo + test_rand(state) % (hi - lo + 1);
}

/** The first failure a test's own threads saw: they cannot use
 *  ck_assert, so they record it here and the test's thread checks
 *  `failed` once they are joined. */
typedef struct test_failure {
  _Atomic int failed;
  char text[256];
} test_failure;

/** Records a failure in `f` unless one is recorded already. Any thread. */
void test_fail_first(test_failure *f, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/** Whether $VAT_TEST_QUICK is set: the run is under a tool that runs one
 *  thread at a time (valgrind), so stress tests shrink and tests of how
 *  work spreads over threads do not check it. */
bool test_quick(void);

/** A random size in [lo, hi] for a stress test; a tenth of it when
 *  test_quick(). */
uint32_t test_stress_size(uint64_t *state, uint32_t lo, uint32_t hi);

/** Sleeps until `seconds` have passed. A bare nanosleep or usleep returns
 *  early when the collector signals the thread to stop the world, which
 *  happens at every turn in the hostile build. */
void test_sleep(double seconds);

/** Sleeps until `*flag` (read with acquire) reaches `value` or `timeout_s`
 *  passes; returns whether it did. For host threads waiting on vats. */
bool test_wait_u64(_Atomic uint64_t *flag, uint64_t value, double timeout_s);

/** The whole of the file at `path` (malloc'd, for free) and its length in
 *  *len; asserts it could be read. */
char *test_read_file(const char *path, size_t *len);

/* An entity answering the request add(a, b) with a + b: the served object
 * of the connection tests. */
extern const vat_entity_def test_adder_def;

#endif
