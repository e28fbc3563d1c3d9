/* A connection that its own send ends (vat/net.h, options out_max_bytes):
 * the request whose frame found the output queue full is answered once,
 * with the end's reason; and the reason says whose frames filled the
 * queue, the peer's answers it does not read or this side's own calls. */
#define GC_THREADS 1
#include <gc/gc.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "net_support.h"
#include "support.h"
#include "vat/caps.h"

enum { LIMIT = 64 << 10 }; /* out_pause_bytes and out_max_bytes here */

static const vat_atom *sel(const char *name) {
  return vat_atom_intern(name);
}

static vat_conn_options small_limits(void) {
  vat_conn_options opt;
  vat_conn_options_default(&opt);
  opt.out_pause_bytes = opt.out_max_bytes = LIMIT;
  return opt;
}

/* Asserts `reason` is overloaded("<prefix>: N bytes queued") with N past
 * `limit`; any overloaded(...) for a NULL prefix. */
static void assert_overloaded(vat_value reason, const char *prefix,
                              size_t limit) {
  char text[256], format[96];
  vat_format(reason, text, sizeof text);
  ck_assert_msg(vat_type_of(reason) == VAT_T_ERROR &&
                    vat_error_code(reason) == vat_atom_overloaded() &&
                    vat_string_data(vat_error_payload(reason)) != NULL,
                "not overloaded(...): %s", text);
  if (prefix == NULL)
    return;
  unsigned long long queued = 0;
  snprintf(format, sizeof format, "%s: %%llu bytes queued", prefix);
  ck_assert_msg(
      sscanf(vat_string_data(vat_error_payload(reason)), format, &queued) == 1,
      "not \"%s: N bytes queued\": %s", prefix, text);
  ck_assert_uint_gt(queued, limit);
}

/* --- A request answered once ----------------------------------------------
 * vat_request's reply entity keeps the first answer and drops the others
 * without a trace, so the test's request carries a reply entity of its own
 * that counts every answer it gets. */

typedef struct answers {
  _Atomic uint64_t count;
  vat_value first;
  bool first_broke;
} answers;

static void answers_receive(vat_turn *turn, void *state,
                            const vat_atom *selector, vat_value value) {
  (void)turn;
  answers *a = state;
  if (selector != sel("resolve") && selector != sel("break"))
    return;
  if (atomic_load(&a->count) == 0) {
    a->first = value;
    a->first_broke = selector == sel("break");
  }
  atomic_fetch_add(&a->count, 1);
}

static const vat_entity_def answers_def = {.state_size = sizeof(answers),
                                           .receive = answers_receive};

/* Answers the count, in a turn of the counting vat: after every answer
 * sent to it before this request was. */
static void count_answers(vat_turn *turn, void *state, void *arg,
                          vat_resolver *r) {
  (void)arg;
  answers *a = state;
  expect_vat_ok(vat_resolve(turn, r, vat_int((int64_t)atomic_load(&a->count))));
}

START_TEST(a_request_whose_send_ends_the_connection_is_answered_once) {
  int sv[2];
  ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
  vat_system *sys = test_system(2);
  vat_conn_options opt = small_limits();
  vat_conn *c;
  raw_open(sys, sv[0], &opt, &c);
  vat_ref *remote = raw_answer_bootstrap(sv[1], c);
  /* The raw peer reads nothing from here on. A one-way message far
   * larger than the socket takes fills it, and the rest of its frame stays
   * queued past the limit: the next frame ends the connection, whatever
   * the timing. */
  size_t big_len = 4u << 20;
  char *big = malloc(big_len + 1);
  memset(big, 'z', big_len);
  big[big_len] = '\0';
  ck_assert_vat_ok(vat_host_send_msg(remote, sel("note"), vat_string(big)));
  free(big);
  vat_conn_info info;
  double end = test_wall_seconds() + WAIT_S;
  do {
    ck_assert_vat_ok(vat_conn_inspect(c, &info));
    ck_assert_msg(test_wall_seconds() < end, "only %zu bytes queued",
                  info.out_queued);
    test_sleep(0.001);
  } while (info.out_queued <= LIMIT);
  /* The request whose frame finds the queue full. */
  answers *a;
  vat_ref *counter;
  ck_assert_vat_ok(vat_host_spawn(sys, &answers_def, &counter, (void **)&a));
  vat_value request[2] = {vat_list(NULL, 0), vat_ref_value(counter)};
  ck_assert_vat_ok(vat_host_send_msg(
      remote, sel("add"), vat_record(sel("vat.request"), request, 2)));
  vat_value reason, count;
  ck_assert_vat_ok(vat_promise_wait(vat_conn_closed(c), WAIT_S, &reason));
  assert_overloaded(reason, NULL, LIMIT);
  /* The turn that answered ended the connection, before `closed` settled:
   * its answers reached the counter before this question does. */
  vat_promise *p;
  ck_assert_vat_ok(vat_host_call(counter, count_answers, NULL, 0, &p));
  ck_assert_vat_ok(vat_promise_wait(p, WAIT_S, &count));
  int64_t n = -1;
  vat_get_int(count, &n);
  ck_assert_msg(n == 1, "answered %lld times", (long long)n);
  ck_assert(a->first_broke);
  ck_assert(vat_equal(a->first, reason));
  close(sv[1]);
  test_quiesce(sys);
}
END_TEST

/* --- A burst of this side's own sends ------------------------------------
 * A client sending one-way messages (each a CTP_CALL) faster than its
 * peer takes them passes out_max_bytes with its own frames, the peer
 * owing nothing: the peer reads, only slower, and the cause must not say
 * it does not read. The server's connection vat is held in a turn (pause
 * point net.write.before_send) while the burst comes: the frames it has
 * not taken pause its reading (its out_pause_bytes), so on any machine the
 * client's queue only grows once the socket is full. */

enum {
  BURST_LIMIT = (4 << 20) / TEST_SCALE,
  BURST_MAX = 1000000,
  BURST_WINDOW = 256,
};

START_TEST(a_burst_of_own_sends_past_the_limit_is_named_as_such) {
  int sv[2];
  ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
  /* Small buffers, so that the burst soon fills what lies between. */
  int small = 8 << 10;
  for (int i = 0; i < 2; i++) {
    setsockopt(sv[i], SOL_SOCKET, SO_SNDBUF, &small, sizeof small);
    setsockopt(sv[i], SOL_SOCKET, SO_RCVBUF, &small, sizeof small);
  }
  vat_system *sys = test_system(2);
  vat_ref *served;
  ck_assert_vat_ok(vat_host_spawn(sys, &server_def, &served, NULL));
  vat_conn_options server_opt = small_limits(), client_opt;
  vat_conn_options_default(&client_opt);
  client_opt.out_pause_bytes = client_opt.out_max_bytes = BURST_LIMIT;
  vat_conn *server, *client;
  ck_assert_vat_ok(vat_conn_open(sys, sv[0], served, &server_opt, &server));
  ck_assert_vat_ok(vat_conn_open(sys, sv[1], NULL, &client_opt, &client));
  vat_ref *remote = wait_ref(vat_conn_bootstrap(client));
  vat_value v;
  vat_promise_wait(vat_conn_bootstrap(server), WAIT_S, &v); /* none offered */
  /* A question waiting on the server: the end breaks it. */
  vat_promise *pending;
  ck_assert_vat_ok(
      vat_host_request(remote, sel("hang"), vat_list(NULL, 0), 0, &pending));
  vat_value two[2] = {vat_int(1), vat_int(1)};
  ck_assert_vat_ok(ask(remote, "add", two, 2, &v));
  /* The server's connection vat stops in the turn that sends this. */
  vat__test_point_arm("net.write.before_send");
  ck_assert_vat_ok(vat_host_send_msg(vat_conn_bootstrap_ref(server),
                                     sel("ping"), vat_null()));
  ck_assert_msg(vat__test_point_wait(WAIT_S), "the server sent nothing");
  /* The burst, until the connection ends; never more than a window ahead
   * of the client's vat, whose end waits behind what it has not taken. */
  vat_ref *client_vat = vat_conn_bootstrap_ref(client);
  double deadline = test_wall_seconds() + WAIT_S;
  int sent = 0;
  while (sent < BURST_MAX &&
         vat_promise_peek(pending, NULL) == VAT_PROMISE_PENDING) {
    if (vat_ref_queue_len(client_vat) > BURST_WINDOW) {
      ck_assert_msg(test_wall_seconds() < deadline, "%d sent, no end", sent);
      test_sleep(0.0005);
      continue;
    }
    ck_assert_vat_ok(vat_host_send_msg(remote, sel("note"), vat_int(sent)));
    sent++;
  }
  vat_value reason;
  int rc = vat_promise_wait(pending, WAIT_S, &reason);
  vat__test_point_release();
  ck_assert_vat_err(rc, VAT_EBROKEN);
  assert_overloaded(reason, "sending faster than the peer reads", BURST_LIMIT);
  ck_assert_vat_ok(vat_promise_wait(vat_conn_closed(client), WAIT_S, &v));
  ck_assert(vat_equal(v, reason));
  vat_conn_close(server);
  vat_promise_wait(vat_conn_closed(server), WAIT_S, NULL);
  test_quiesce(sys);
}
END_TEST

void test_net_ends_tests(Suite *s) {
  TCase *tc = test_case("ends", 60);
  tcase_add_test(tc, a_request_whose_send_ends_the_connection_is_answered_once);
  tcase_add_test(tc, a_burst_of_own_sends_past_the_limit_is_named_as_such);
  suite_add_tcase(s, tc);
}
