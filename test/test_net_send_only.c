/* Send-only calls (vat/captp.h, note [10]): a one-way message goes as a
 * CTP_CALL without a questionID to a peer whose CTP_BOOTSTRAP said it
 * takes those, and as a question, answered and ignored, to one that did
 * not (Endo). The side that takes one answers nothing, delivers it in
 * order, and holds it among the peer's calls taken (max_calls_taken)
 * until its target is done with it. */
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "net_support.h"
#include "support.h"
#include "vat/caps.h"

static const vat_atom *sel(const char *name) {
  return vat_atom_intern(name);
}

/* --- The client's side: what its one-way messages become ----------------- */

/* Sends three one-way pings and one request to the raw peer's bootstrap,
 * after the peer's own BOOTSTRAP (`peers_bootstrap`); what the peer read
 * up to the request. */
static void one_way_then_request(const char *peers_bootstrap, char *buf,
                                 size_t size) {
  int sv[2];
  ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
  vat_system *sys = test_system(2);
  vat_conn *c;
  raw_open(sys, sv[0], NULL, &c);
  raw_frame(sv[1], peers_bootstrap);
  /* Its BOOTSTRAP came before this answer: the connection has read it. */
  vat_ref *remote = raw_answer_bootstrap(sv[1], c);
  for (int i = 0; i < 3; i++)
    ck_assert_vat_ok(vat_host_send_msg(remote, sel("ping"), vat_null()));
  vat_promise *p;
  ck_assert_vat_ok(
      vat_host_request(remote, sel("last"), vat_list(NULL, 0), 0, &p));
  raw_expect(sv[1], buf, size, "last");
  raw_hang_up(sv[1], c, sys);
}

static int count_of(const char *buf, const char *what) {
  int n = 0;
  for (const char *p = buf; (p = strstr(p, what)) != NULL; p++)
    n++;
  return n;
}

START_TEST(one_way_messages_go_send_only_to_a_peer_that_takes_them) {
  char buf[8192];
  one_way_then_request("{\"type\":\"CTP_BOOTSTRAP\",\"questionID\":\"q-1\","
                       "\"acceptsSendOnly\":true}",
                       buf, sizeof buf);
  ck_assert_msg(count_of(buf, "{\"type\":\"CTP_CALL\",\"target\":\"o-1\","
                              "\"method\":{\"body\":\"#[\\\"ping\\\"") == 3,
                "%s", buf);
  /* The request is a question: the first after the bootstrap's. */
  ck_assert_msg(strstr(buf, "{\"type\":\"CTP_CALL\",\"questionID\":\"q-2\","
                            "\"target\":\"o-1\",\"method\":{\"body\":"
                            "\"#[\\\"last\\\"") != NULL,
                "%s", buf);
}
END_TEST

START_TEST(one_way_messages_to_endo_are_questions) {
  /* Endo's BOOTSTRAP says nothing of send-only calls. */
  char buf[8192];
  one_way_then_request("{\"type\":\"CTP_BOOTSTRAP\",\"questionID\":\"q-1\"}",
                       buf, sizeof buf);
  for (int q = 2; q <= 4; q++) {
    char want[96];
    snprintf(want, sizeof want,
             "{\"type\":\"CTP_CALL\",\"questionID\":\"q-%d\",\"target\":"
             "\"o-1\",\"method\":{\"body\":\"#[\\\"ping\\\"",
             q);
    ck_assert_msg(strstr(buf, want) != NULL, "no q-%d ping: %s", q, buf);
  }
  ck_assert_msg(strstr(buf, "\"questionID\":\"q-5\",\"target\":\"o-1\","
                            "\"method\":{\"body\":\"#[\\\"last\\\"") != NULL,
                "%s", buf);
}
END_TEST

START_TEST(two_libvat_sides_answer_only_what_is_asked) {
  pair p;
  open_pair(&p);
  vat_conn_info a0, b0, a1, b1;
  ck_assert_vat_ok(vat_conn_inspect(p.a, &a0));
  ck_assert_vat_ok(vat_conn_inspect(p.b, &b0));
  enum { ONE_WAY = 50 };
  vat_value args[2] = {vat_int(1), vat_int(2)};
  for (int i = 0; i < ONE_WAY; i++)
    ck_assert_vat_ok(
        vat_host_send_msg(p.remote, sel("add"), vat_list(args, 2)));
  vat_value v;
  ck_assert_vat_ok(ask(p.remote, "add", args, 2, &v));
  ck_assert(vat_equal(v, vat_int(3)));
  ck_assert_vat_ok(vat_conn_inspect(p.a, &a1));
  ck_assert_vat_ok(vat_conn_inspect(p.b, &b1));
  ck_assert_uint_eq(b1.frames_out - b0.frames_out, ONE_WAY + 1);
  ck_assert_uint_eq(a1.frames_in - a0.frames_in, ONE_WAY + 1);
  /* One answer came back: the request's. */
  ck_assert_uint_eq(a1.frames_out - a0.frames_out, 1);
  ck_assert_uint_eq(b1.frames_in - b0.frames_in, 1);
  close_pair(&p);
}
END_TEST

/* A one-way message that carries an answer ref keeps its question, so
 * that what is pipelined on that ref has an address: vat_conn_pipeline
 * on a relay, which passes the call's payload (captp.pipe(args, answer))
 * on to the proxy with vat_send_msg, and what the answer ref forwards
 * (captp.via(answer, message)) as it came. */
typedef struct relay {
  vat_ref *remote;
  _Atomic int64_t sum; /* the pipelined add's answer; -1 if broken */
  _Atomic uint64_t settled;
} relay;

static void relay_receive(vat_turn *turn, void *state, const vat_atom *selector,
                          vat_value value) {
  relay *r = state;
  vat_value args;
  vat_ref *reply;
  if (selector == sel("self") && vat_request_parse(value, &args, &reply))
    value = args; /* one way from here: its reply is dropped */
  expect_vat_ok(vat_send_msg(turn, r->remote, selector, value));
}

static const vat_entity_def relay_def = {.state_size = sizeof(relay),
                                         .receive = relay_receive};

static void summed(vat_turn *turn, void *state, void *ctx, bool resolved,
                   vat_value value) {
  (void)turn;
  (void)ctx;
  relay *r = state;
  int64_t v = -1;
  if (resolved)
    vat_get_int(value, &v);
  atomic_store(&r->sum, v);
  atomic_store(&r->settled, 1);
}

static void pipeline_through_relay(vat_turn *turn, void *state, void *arg) {
  (void)state;
  (void)arg;
  vat_promise *self, *sum;
  vat_ref *answer;
  expect_vat_ok(vat_conn_pipeline(turn, vat_self(turn), sel("self"),
                                  vat_list(NULL, 0), 0, &self, &answer));
  vat_value two[2] = {vat_int(2), vat_int(3)};
  expect_vat_ok(
      vat_request(turn, answer, sel("add"), vat_list(two, 2), 0, &sum));
  expect_vat_ok(vat_when(turn, sum, summed, NULL));
}

START_TEST(a_one_way_message_pipelined_on_keeps_its_question) {
  pair p;
  open_pair(&p);
  vat_ref *ref;
  relay *r;
  ck_assert_vat_ok(vat_host_spawn(p.sys, &relay_def, &ref, (void **)&r));
  r->remote = p.remote;
  ck_assert_vat_ok(vat_host_send(ref, pipeline_through_relay, NULL));
  ck_assert(test_wait_u64(&r->settled, 1, WAIT_S));
  ck_assert_int_eq(atomic_load(&r->sum), 5);
  close_pair(&p);
}
END_TEST

/* --- The serving side: calls nobody answers ------------------------------ */

/* bump() counts, answering the count when asked; hold() is answered only
 * at release(), a message from the test. */
enum { HELD_MAX = 8 };
typedef struct counter {
  atomic_int bumps;
  vat_ref *held[HELD_MAX];
  int n_held;
} counter;

static void counter_receive(vat_turn *turn, void *state,
                            const vat_atom *selector, vat_value value) {
  counter *k = state;
  vat_value args;
  vat_ref *reply = NULL;
  vat_request_parse(value, &args, &reply);
  if (selector == sel("bump")) {
    int n = atomic_fetch_add(&k->bumps, 1) + 1;
    if (reply != NULL)
      expect_vat_ok(vat_reply(turn, reply, vat_int(n)));
  } else if (selector == sel("hold") && reply != NULL && k->n_held < HELD_MAX) {
    k->held[k->n_held++] = reply;
  } else if (selector == sel("release")) {
    for (int i = 0; i < k->n_held; i++)
      expect_vat_ok(vat_reply(turn, k->held[i], vat_null()));
    k->n_held = 0;
  }
}

static const vat_entity_def counter_def = {.state_size = sizeof(counter),
                                           .receive = counter_receive};

static void send_only(int fd, const char *target, const char *method) {
  char frame[256];
  snprintf(frame, sizeof frame,
           "{\"type\":\"CTP_CALL\",\"target\":\"%s\",\"method\":{\"body\":"
           "\"#[\\\"%s\\\",[]]\",\"slots\":[]}}",
           target, method);
  raw_frame(fd, frame);
}

/* Reads up to the answer to q-<q>: the only CTP_RETURN that came, and
 * its body holds `body`. */
static void expect_only_answer(int fd, int q, const char *body) {
  char buf[8192], want[32];
  snprintf(want, sizeof want, "\"answerID\":\"q-%d\"", q);
  raw_expect(fd, buf, sizeof buf, want);
  ck_assert_msg(count_of(buf, "CTP_RETURN") == 1 && strstr(buf, body) != NULL,
                "not one answer with %s: %s", body, buf);
}

START_TEST(send_only_calls_are_taken_in_order_and_never_answered) {
  int sv[2];
  ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
  vat_system *sys = test_system(2);
  vat_ref *served;
  counter *k;
  ck_assert_vat_ok(vat_host_spawn(sys, &counter_def, &served, (void **)&k));
  vat_conn_options opt;
  vat_conn_options_default(&opt);
  opt.max_calls_taken = 2;
  vat_conn *c;
  ck_assert_vat_ok(vat_conn_open(sys, sv[0], served, &opt, &c));
  char buf[8192];
  raw_frame(sv[1], "{\"type\":\"CTP_BOOTSTRAP\",\"questionID\":\"q-1\"}");
  raw_expect(sv[1], buf, sizeof buf, "\"answerID\":\"q-1\"");
  /* Two held: the calls it takes at once. What follows waits, in order. */
  send_only(sv[1], "o-1", "hold");
  send_only(sv[1], "o-1", "hold");
  for (int i = 0; i < 3; i++)
    send_only(sv[1], "o-1", "bump");
  raw_send_call(sv[1], 2, "o-1", "bump");
  raw_read_until(sv[1], buf, sizeof buf, "q-2", 0.2);
  ck_assert_msg(strstr(buf, "q-2") == NULL, "answered past the limit: %s", buf);
  ck_assert_int_eq(atomic_load(&k->bumps), 0);
  vat_conn_info info;
  ck_assert_vat_ok(vat_conn_inspect(c, &info));
  ck_assert_uint_eq(info.answers_owed, 0); /* send-only: owed nothing */
  ck_assert_uint_eq(info.frames_out, 2);   /* its BOOTSTRAP and one RETURN */
  /* Answered (to nobody), the held calls free their places: the bumps
   * go, then the question, answered with the count after all of them. */
  ck_assert_vat_ok(vat_host_send_msg(served, sel("release"), vat_null()));
  expect_only_answer(sv[1], 2, "\"result\":{\"body\":\"#\\\"+4\\\"\"");
  ck_assert_vat_ok(vat_conn_inspect(c, &info));
  ck_assert_uint_eq(info.answers_owed, 0);
  /* To a target that is not there: nothing comes back, and the
   * connection goes on. */
  send_only(sv[1], "o-77", "bump");
  raw_send_call(sv[1], 3, "o-1", "bump");
  expect_only_answer(sv[1], 3, "\"result\":{\"body\":\"#\\\"+5\\\"\"");
  ck_assert_vat_ok(vat_conn_inspect(c, &info));
  ck_assert_uint_eq(info.frames_out, 4);
  ck_assert_uint_eq(info.frames_in, 9);
  raw_hang_up(sv[1], c, sys);
}
END_TEST

void test_net_send_only_tests(Suite *s) {
  TCase *tc = test_case("send_only", 60);
  tcase_add_test(tc, one_way_messages_go_send_only_to_a_peer_that_takes_them);
  tcase_add_test(tc, one_way_messages_to_endo_are_questions);
  tcase_add_test(tc, two_libvat_sides_answer_only_what_is_asked);
  tcase_add_test(tc, a_one_way_message_pipelined_on_keeps_its_question);
  tcase_add_test(tc, send_only_calls_are_taken_in_order_and_never_answered);
  suite_add_tcase(s, tc);
}
