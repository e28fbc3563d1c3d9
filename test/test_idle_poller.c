/* Idle workers polling the host's I/O (vat/host.h, vat_idle_poller_set).
 *
 * A fake I/O source: a pipe whose every byte is an event, sent by the poll
 * to a vat of the system; an eventfd for the poller's wake-ups. The right
 * to poll is a mutex. Each test runs in its own process (the runner
 * forks), so each sets the process's one poller afresh. */
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "core/system.h"
#include "sched/sched.h"
#include "support.h"
#include "vat/host.h"

typedef struct fake_io {
  pthread_mutex_t right;
  int events[2]; /* a byte written to [1]: one event */
  int wake_fd;
  vat_ref *target; /* each event is a message to it */
  _Atomic uint64_t blocking_polls, wakes;
  _Atomic uint64_t errors; /* on the workers' threads, checked after */
  /* When set, the next poll that does not block holds its worker until
   * `let_go`, with `held` up meanwhile. */
  _Atomic uint64_t hold_next, held, let_go;
  /* The same for the next `hold_acquire` acquires that may wait:
   * `acquire_held` counts those held. */
  _Atomic uint64_t hold_acquire, acquire_held, acquire_go;
  pthread_t event_thread; /* the thread that read the last event */
} fake_io;

static fake_io io;

/* The turns the events run: the thread each ran on. */
static _Atomic uint64_t events_run;
static pthread_t turn_thread;

static void event_turn(vat_turn *turn, void *state, void *arg) {
  (void)turn;
  (void)state;
  (void)arg;
  turn_thread = pthread_self();
  atomic_fetch_add_explicit(&events_run, 1, memory_order_release);
}

/* Takes one off `n` if it is above 0; whether it did. */
static bool take_one(_Atomic uint64_t *n) {
  uint64_t v = atomic_load(n);
  while (v > 0 && !atomic_compare_exchange_weak(n, &v, v - 1))
    ;
  return v > 0;
}

static bool fake_acquire(void *ctx, bool wait) {
  fake_io *f = ctx;
  if (wait && take_one(&f->hold_acquire)) {
    atomic_fetch_add(&f->acquire_held, 1);
    if (!test_wait_u64(&f->acquire_go, 1, 30))
      atomic_fetch_add(&f->errors, 1);
    return false;
  }
  return pthread_mutex_trylock(&f->right) == 0;
}

static void fake_poll(void *ctx, bool block) {
  fake_io *f = ctx;
  if (!block && atomic_exchange(&f->hold_next, 0)) {
    atomic_store(&f->held, 1);
    if (!test_wait_u64(&f->let_go, 1, 30))
      atomic_fetch_add(&f->errors, 1);
  }
  if (block)
    atomic_fetch_add(&f->blocking_polls, 1);
  struct pollfd fds[2] = {{.fd = f->events[0], .events = POLLIN},
                          {.fd = f->wake_fd, .events = POLLIN}};
  if (poll(fds, 2, block ? -1 : 0) <= 0)
    return;
  uint64_t n;
  if ((fds[1].revents & POLLIN) &&
      read(f->wake_fd, &n, sizeof n) != (ssize_t)sizeof n)
    atomic_fetch_add(&f->errors, 1);
  char byte;
  if ((fds[0].revents & POLLIN) && read(f->events[0], &byte, 1) == 1) {
    f->event_thread = pthread_self();
    if (vat_host_send(f->target, event_turn, NULL) != VAT_OK)
      atomic_fetch_add(&f->errors, 1);
  }
}

static void fake_release(void *ctx) {
  pthread_mutex_unlock(&((fake_io *)ctx)->right);
}

static void fake_wake(void *ctx) {
  fake_io *f = ctx;
  atomic_fetch_add(&f->wakes, 1);
  uint64_t one = 1;
  if (write(f->wake_fd, &one, sizeof one) != (ssize_t)sizeof one)
    atomic_fetch_add(&f->errors, 1);
}

static const vat_idle_poller fake = {.acquire = fake_acquire,
                                     .poll = fake_poll,
                                     .release = fake_release,
                                     .wake = fake_wake,
                                     .ctx = &io};

/* Sets the fake as the process's poller (before the system starts, so
 * that its workers find it from their first idle moment). */
static void fake_set(void) {
  pthread_mutex_init(&io.right, NULL);
  ck_assert_int_eq(pipe(io.events), 0);
  io.wake_fd = eventfd(0, EFD_CLOEXEC);
  ck_assert_int_ge(io.wake_fd, 0);
  atomic_store(&events_run, 0);
  ck_assert_vat_ok(vat_idle_poller_set(&fake));
}

static void fake_event(void) {
  ck_assert_int_eq(write(io.events[1], "e", 1), 1);
}

static unsigned polling_now(vat_system *sys) {
  pthread_mutex_lock(&sys->sched.lock);
  unsigned n = sys->sched.polling;
  pthread_mutex_unlock(&sys->sched.lock);
  return n;
}

static unsigned parked_now(vat_system *sys) {
  return atomic_load(&sys->sched.parked);
}

/* Waits up to 10 s for `count` of `sys` to read 1, and asserts it does. */
static void wait_for_one(unsigned (*count)(vat_system *), vat_system *sys) {
  double t0 = test_wall_seconds();
  while (count(sys) != 1 && test_wall_seconds() - t0 < 10)
    test_sleep(0.001);
  ck_assert_uint_eq(count(sys), 1);
}

/* A host's send to a new vat runs while a worker is held elsewhere. */
static void a_send_runs(vat_system *sys, const char *held_where) {
  vat_ref *v = test_spawn(sys, 0, NULL);
  ck_assert_vat_ok(vat_host_send(v, event_turn, NULL));
  ck_assert_msg(test_wait_u64(&events_run, 1, 10),
                "the send waited for the worker %s", held_where);
}

START_TEST(the_idle_poller_is_checked_and_set_once) {
  vat_idle_poller p = fake;
  ck_assert_int_eq(vat_idle_poller_set(NULL), VAT_EINVAL);
  for (int i = 0; i < 4; i++) { /* each function missing in turn */
    p = fake;
    if (i == 0)
      p.acquire = NULL;
    else if (i == 1)
      p.poll = NULL;
    else if (i == 2)
      p.release = NULL;
    else
      p.wake = NULL;
    ck_assert_int_eq(vat_idle_poller_set(&p), VAT_EINVAL);
  }
  fake_set();
  ck_assert_int_eq(vat_idle_poller_set(&fake), VAT_EBUSY);
}
END_TEST

/* Two idle workers: one blocks in the poller, the other sleeps. An event
 * runs its vat's turn on the worker that read it, and no other worker is
 * woken for it. */
START_TEST(an_event_runs_on_the_worker_that_polled_it) {
  fake_set();
  vat_system *sys = test_system(2);
  io.target = test_spawn(sys, 0, NULL);
  ck_assert(vat__wait_quiescent(&sys->sched, 30));
  /* The first to park took the right; the other sleeps on park_cond. */
  ck_assert_uint_eq(polling_now(sys), 1);
  uint64_t signals = atomic_load(&sys->sched.wakes);
  uint64_t polls = atomic_load(&io.blocking_polls);
  ck_assert_uint_ge(polls, 1);

  fake_event();
  ck_assert(test_wait_u64(&events_run, 1, 10));
  ck_assert_msg(pthread_equal(io.event_thread, turn_thread),
                "the event's turn ran on another thread than its poll");
  ck_assert_msg(atomic_load(&sys->sched.wakes) == signals,
                "a worker was woken for an event its poller runs itself");
  test_quiesce(sys);
  ck_assert_uint_eq(atomic_load(&io.errors), 0);
}
END_TEST

/* One worker, counted polling but not yet blocked in the poll: a host's
 * send then must wake it through the poller (there is no worker on
 * park_cond to signal), and its poll must return for it. */
START_TEST(a_send_wakes_a_worker_about_to_block_in_the_poller) {
  fake_set();
  vat__test_point_arm("sched.idle.before_poll");
  vat_system *sys = test_system(1);
  ck_assert_msg(vat__test_point_wait(10), "the worker never polled");
  vat_ref *v = test_spawn(sys, 0, NULL);
  ck_assert_vat_ok(vat_host_send(v, event_turn, NULL));
  vat__test_point_release();
  ck_assert_msg(test_wait_u64(&events_run, 1, 10),
                "the send never ran: its wake-up did not reach the poller");
  ck_assert_uint_ge(atomic_load(&io.wakes), 1);
  test_quiesce(sys);
  ck_assert_uint_eq(atomic_load(&io.errors), 0);
}
END_TEST

/* Shutdown wakes a worker blocked in the poller, and joins it. */
START_TEST(shutdown_wakes_a_worker_blocked_in_the_poller) {
  fake_set();
  vat_system *sys = test_system(1);
  ck_assert(vat__wait_quiescent(&sys->sched, 30));
  ck_assert_uint_eq(polling_now(sys), 1);
  uint64_t wakes = atomic_load(&io.wakes);
  double t0 = test_wall_seconds();
  ck_assert_vat_ok(vat_system_shutdown(sys, 10));
  vat_system_destroy(sys);
  ck_assert_uint_gt(atomic_load(&io.wakes), wakes);
  ck_assert_msg(test_wall_seconds() - t0 < 5, "shutdown took %.1f s",
                test_wall_seconds() - t0);
}
END_TEST

/* A worker that polls while it looks for work stops looking for the
 * poll: held in the poll's handlers, it must not keep a sender from waking
 * the other worker, parked. */
START_TEST(a_worker_held_in_its_poll_leaves_sends_to_another) {
  fake_set();
  atomic_store(&io.hold_next, 1);
  vat_system *sys = test_system(2);
  ck_assert(test_wait_u64(&io.held, 1, 10));
  /* The other one parks: on park_cond, as the first holds the right. */
  wait_for_one(parked_now, sys);
  a_send_runs(sys, "held in its poll");
  atomic_store(&io.let_go, 1);
  test_quiesce(sys);
  ck_assert_uint_eq(atomic_load(&io.errors), 0);
}
END_TEST

/* The same while it waits to take the right (the holder slow to let go):
 * a send wakes the other worker, parked. */
START_TEST(a_worker_waiting_for_the_poller_leaves_sends_to_another) {
  fake_set();
  atomic_store(&io.hold_acquire, 1);
  vat_system *sys = test_system(2);
  ck_assert(test_wait_u64(&io.acquire_held, 1, 10));
  wait_for_one(parked_now, sys);
  a_send_runs(sys, "waiting for the poller");
  atomic_store(&io.acquire_go, 1);
  test_quiesce(sys);
  ck_assert_uint_eq(atomic_load(&io.errors), 0);
}
END_TEST

/* Both workers idle while the right's holder is slow to let go (the
 * loop's thread held in a handler): one waits for the right, the other
 * parks where a send reaches it. Were both to wait, neither counted
 * parked nor spinning, a send would wake nobody until the holder let go. */
START_TEST(one_worker_at_a_time_waits_for_the_poller) {
  fake_set();
  atomic_store(&io.hold_acquire, 2);
  vat_system *sys = test_system(2);
  double t0 = test_wall_seconds();
  while (atomic_load(&io.acquire_held) + parked_now(sys) < 2 &&
         test_wall_seconds() - t0 < 10)
    test_sleep(0.001);
  a_send_runs(sys, "waiting for the poller, the other one too");
  uint64_t waited = atomic_load(&io.acquire_held);
  ck_assert_uint_eq(waited, 1);
  atomic_store(&io.acquire_go, 1);
  test_quiesce(sys);
  ck_assert_uint_eq(atomic_load(&io.errors), 0);
}
END_TEST

static _Atomic uint64_t sigpipe_blocked;

static void look_at_the_signal_mask(vat_turn *turn, void *state, void *arg) {
  (void)turn;
  (void)state;
  (void)arg;
  sigset_t mask;
  pthread_sigmask(SIG_BLOCK, NULL, &mask);
  atomic_store(&sigpipe_blocked, sigismember(&mask, SIGPIPE) ? 1 : 2);
}

/* A poll may write to a socket whose peer hung up: on a worker, that fails
 * with EPIPE, and the host's own threads keep their mask. */
START_TEST(workers_block_sigpipe_and_the_host_keeps_its_mask) {
  sigset_t before, after;
  pthread_sigmask(SIG_BLOCK, NULL, &before);
  ck_assert(!sigismember(&before, SIGPIPE));
  vat_system *sys = test_system(2);
  pthread_sigmask(SIG_BLOCK, NULL, &after);
  ck_assert(!sigismember(&after, SIGPIPE));
  atomic_store(&sigpipe_blocked, 0);
  vat_ref *v = test_spawn(sys, 0, NULL);
  ck_assert_vat_ok(vat_host_send(v, look_at_the_signal_mask, NULL));
  ck_assert(test_wait_u64(&sigpipe_blocked, 1, 10));
  ck_assert_msg(atomic_load(&sigpipe_blocked) == 1,
                "a worker runs with SIGPIPE unblocked");
  test_quiesce(sys);
}
END_TEST

void test_idle_poller_tests(Suite *s) {
  TCase *tc = test_case("idle_poller", 60);
  tcase_add_test(tc, the_idle_poller_is_checked_and_set_once);
  tcase_add_test(tc, an_event_runs_on_the_worker_that_polled_it);
  tcase_add_test(tc, a_send_wakes_a_worker_about_to_block_in_the_poller);
  tcase_add_test(tc, shutdown_wakes_a_worker_blocked_in_the_poller);
  tcase_add_test(tc, a_worker_held_in_its_poll_leaves_sends_to_another);
  tcase_add_test(tc, a_worker_waiting_for_the_poller_leaves_sends_to_another);
  tcase_add_test(tc, one_worker_at_a_time_waits_for_the_poller);
  tcase_add_test(tc, workers_block_sigpipe_and_the_host_keeps_its_mask);
  suite_add_tcase(s, tc);
}
