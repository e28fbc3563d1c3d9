/* The shared loop run by idle workers (net/loop.c, vat/host.h's idle
 * poller): the loop's thread takes the loop when no worker polls it, hands
 * it to a worker that asks for it, and takes it back once every worker is
 * busy. Pause points pin each step: "net.loop.taken" once the thread took
 * the loop, "net.loop.handed" once it handed it to a worker,
 * "net.loop.waits" before it waits for a polling worker to let go, and
 * "net.loop.ask_woken" where a worker that asked wakes. */
#include <stdatomic.h>
#include <stdio.h>
#include <sys/socket.h>
#include <unistd.h>

#include "net_support.h"
#include "support.h"

static _Atomic uint64_t holding, let_go;

static void hold_the_worker(vat_turn *turn, void *state, void *arg) {
  (void)turn;
  (void)state;
  (void)arg;
  atomic_store(&holding, 1);
  test_wait_u64(&let_go, 1, 60);
}

/* The only worker held in a long turn until `let_go`: the thread takes the
 * loop back (held and released at "net.loop.taken"). */
static void keep_the_worker_busy(vat_system *sys) {
  atomic_store(&holding, 0);
  atomic_store(&let_go, 0);
  vat_ref *holder = test_spawn(sys, 0, NULL);
  vat__test_point_arm("net.loop.taken");
  ck_assert_vat_ok(vat_host_send(holder, hold_the_worker, NULL));
  ck_assert(test_wait_u64(&holding, 1, WAIT_S));
  ck_assert_msg(vat__test_point_wait(WAIT_S),
                "the loop's thread never took the loop back from the busy "
                "worker");
  vat__test_point_release();
}

/* Waits for what the raw peer sent to be read. */
static void wait_read(vat_conn *c) {
  vat_conn_info info = {0};
  double t0 = test_wall_seconds();
  while (test_wall_seconds() - t0 < WAIT_S &&
         vat_conn_inspect(c, &info) == VAT_OK && info.in_pending == 0)
    test_sleep(0.001);
  ck_assert_msg(info.in_pending > 0, "nothing was read");
}

/* A system of one worker, the process's only one, with a connection to a
 * raw peer (sv[1]), taken through each step of the loop's hand-overs:
 *  1. the thread holds the loop from the start; the worker, idle, asks
 *     for it, and the thread hands it over;
 *  2. the worker blocked in its poll, the thread waits for it to let go;
 *  3. the worker kept busy in a long turn (it lets go, and tells the
 *     thread), the thread takes the loop back and reads what the peer
 *     sends;
 *  4. the worker free again answers it, and, idle, asks again.
 * Returns with the thread held where it handed the loop over (step 4), so
 * that only the worker polls. */
static vat_system *hand_the_loop_to_the_worker(int sv[2], vat_conn **c) {
  ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
  vat_system *sys = test_system(1);
  vat__test_point_arm("net.loop.handed");
  raw_open(sys, sv[0], NULL, c);
  ck_assert_msg(vat__test_point_wait(WAIT_S),
                "the loop's thread never handed the loop to the worker");
  /* It may wait for the worker at once. */
  vat__test_point_release_then("net.loop.waits");
  ck_assert_msg(vat__test_point_wait(WAIT_S),
                "the loop's thread never waited for the polling worker");
  vat__test_point_release();

  keep_the_worker_busy(sys);
  raw_frame(sv[1], "{\"type\":\"CTP_BOOTSTRAP\",\"questionID\":\"q-1\"}");
  wait_read(*c); /* while the only worker is busy */

  vat__test_point_arm("net.loop.handed");
  atomic_store(&let_go, 1);
  char buf[4096];
  raw_expect(sv[1], buf, sizeof buf, "\"answerID\":\"q-1\"");
  ck_assert_msg(vat__test_point_wait(WAIT_S),
                "the loop's thread never handed the loop over again");
  return sys;
}

/* With the thread held aside, every frame is read and written by the
 * worker. */
START_TEST(the_loop_goes_to_an_idle_worker_and_back_from_a_busy_one) {
  int sv[2];
  vat_conn *c;
  vat_system *sys = hand_the_loop_to_the_worker(sv, &c);
  for (int q = 2; q < 12; q++) {
    char want[64];
    snprintf(want, sizeof want, "\"answerID\":\"q-%d\"", q);
    raw_send_call(sv[1], q, "o-1", "nothing");
    char buf[4096];
    raw_expect(sv[1], buf, sizeof buf, want);
  }
  vat__test_point_release();
  raw_hang_up(sv[1], c, sys);
}
END_TEST

/* A worker that asked for the loop wakes so late that the thread has
 * taken it back (and cleared the ask): it asks again, and gets it. */
START_TEST(a_worker_that_wakes_late_asks_again) {
  int sv[2];
  vat_conn *c;
  vat_system *sys = hand_the_loop_to_the_worker(sv, &c);
  vat__test_point_release();
  /* Again: the worker busy, the thread takes the loop back. */
  keep_the_worker_busy(sys);
  /* Free, the worker asks, and is held once woken by the hand-over. */
  vat__test_point_arm("net.loop.ask_woken");
  atomic_store(&let_go, 1);
  ck_assert_msg(vat__test_point_wait(WAIT_S), "the worker never asked");
  /* Meanwhile the thread takes the loop back: it reads this. */
  raw_send_call(sv[1], 2, "o-1", "nothing");
  wait_read(c);
  vat__test_point_release();
  char buf[4096];
  raw_expect(sv[1], buf, sizeof buf, "\"answerID\":\"q-2\"");
  raw_hang_up(sv[1], c, sys);
}
END_TEST

static _Atomic uint64_t spins, stop_spinning;

static void keep_busy(vat_turn *turn, void *state, void *arg) {
  (void)state;
  atomic_fetch_add(&spins, 1);
  if (!atomic_load(&stop_spinning))
    vat_send(turn, vat_self(turn), keep_busy, arg);
}

/* The thread held aside and the only worker never idle (a vat sends
 * itself message after message): what the peer sends is read by the
 * worker's poll between its batches, and answered. */
START_TEST(a_busy_worker_polls_between_its_batches) {
  int sv[2];
  vat_conn *c;
  vat_system *sys = hand_the_loop_to_the_worker(sv, &c);
  atomic_store(&spins, 0);
  atomic_store(&stop_spinning, 0);
  vat_ref *spinner = test_spawn(sys, 0, NULL);
  ck_assert_vat_ok(vat_host_send(spinner, keep_busy, NULL));
  /* Busy from here on: the worker left its poll to run the spinner. */
  ck_assert(test_wait_u64(&spins, 2, WAIT_S));
  raw_send_call(sv[1], 2, "o-1", "nothing");
  char buf[4096];
  raw_expect(sv[1], buf, sizeof buf, "\"answerID\":\"q-2\"");
  atomic_store(&stop_spinning, 1);
  vat__test_point_release();
  raw_hang_up(sv[1], c, sys);
}
END_TEST

void test_net_worker_io_tests(Suite *s) {
  TCase *tc = test_case("worker_io", 60);
  tcase_add_test(tc, the_loop_goes_to_an_idle_worker_and_back_from_a_busy_one);
  tcase_add_test(tc, a_busy_worker_polls_between_its_batches);
  tcase_add_test(tc, a_worker_that_wakes_late_asks_again);
  suite_add_tcase(s, tc);
}
