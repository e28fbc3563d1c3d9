/* The peer's calls answered: once each, with what the called ref answered
 * first, or, if the vat behind it ends first, with that vat's exit reason
 * (vat/net.h's refusals); an answer sent before the vat ended wins. The
 * connection watches each called ref's vat once for all its calls
 * (net/watches.c), and lets a watch go once its ref can no longer be
 * called. */
#define GC_THREADS 1
#include <gc/gc.h>

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "net/internal.h"
#include "net_support.h"
#include "support.h"
#include "vat/caps.h"
#include "vat/exits.h"

static const vat_atom *sel(const char *name) {
  return vat_atom_intern(name);
}

/* --- The served objects ---------------------------------------------------
 * A keeper, each in a vat of its own: add(a, b); hold() is never answered;
 * twice() answers 1, then 2; refuse_bare() breaks with no reason;
 * last_word() answers 7, then ends its vat with worn_out("tired"). The
 * gate (the bootstrap) hands out keepers: fresh() a new one, keepers() the
 * test's. */

static void keeper_receive(vat_turn *turn, void *state,
                           const vat_atom *selector, vat_value value) {
  (void)state;
  vat_value args;
  vat_ref *reply;
  if (!vat_request_parse(value, &args, &reply))
    return;
  if (selector == sel("add")) {
    int64_t a = 0, b = 0;
    vat_get_int(vat_at(args, 0), &a);
    vat_get_int(vat_at(args, 1), &b);
    expect_vat_ok(vat_reply(turn, reply, vat_int(a + b)));
  } else if (selector == sel("twice")) {
    expect_vat_ok(vat_reply(turn, reply, vat_int(1)));
    expect_vat_ok(vat_reply(turn, reply, vat_int(2)));
  } else if (selector == sel("refuse_bare")) {
    /* "break" with no reason, as a wrapper may send it: a refusal. */
    expect_vat_ok(vat_send_msg(turn, reply, sel("break"), vat_null()));
  } else if (selector == sel("last_word")) {
    expect_vat_ok(vat_reply(turn, reply, vat_int(7)));
    expect_vat_ok(vat_exit(turn, vat_self(turn),
                           vat_error(sel("worn_out"), vat_string("tired"))));
  }
  /* hold: the reply ref is dropped, never answered */
}

static const vat_entity_def keeper_def = {.receive = keeper_receive,
                                          .label = "keeper"};

enum { KEEPERS = 8 };

typedef struct gate {
  vat_ref *keepers[KEEPERS];
} gate;

static void gate_receive(vat_turn *turn, void *state, const vat_atom *selector,
                         vat_value value) {
  gate *g = state;
  vat_value args;
  vat_ref *reply;
  if (!vat_request_parse(value, &args, &reply))
    return;
  if (selector == sel("fresh")) {
    vat_ref *fresh;
    expect_vat_ok(vat_spawn(turn, &keeper_def, &fresh, NULL));
    expect_vat_ok(vat_reply(turn, reply, vat_ref_value(fresh)));
  } else {
    vat_value refs[KEEPERS];
    for (int i = 0; i < KEEPERS; i++)
      refs[i] = vat_ref_value(g->keepers[i]);
    expect_vat_ok(vat_reply(turn, reply, vat_list(refs, KEEPERS)));
  }
}

static const vat_entity_def gate_def = {.state_size = sizeof(gate),
                                        .receive = gate_receive};

/* Two libvat sides over a socketpair: A serves a gate with KEEPERS
 * keepers, B holds proxies of them. */
typedef struct served {
  vat_system *sys;
  gate *gate;
  vat_conn *a, *b;
  vat_ref *remote_gate;
  vat_ref *remote[KEEPERS]; /* B's proxies of the keepers */
} served;

static void open_served(served *s) {
  int sv[2];
  ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
  s->sys = test_system(2);
  vat_ref *gate_ref;
  ck_assert_vat_ok(
      vat_host_spawn(s->sys, &gate_def, &gate_ref, (void **)&s->gate));
  for (int i = 0; i < KEEPERS; i++)
    ck_assert_vat_ok(
        vat_host_spawn(s->sys, &keeper_def, &s->gate->keepers[i], NULL));
  ck_assert_vat_ok(vat_conn_open(s->sys, sv[0], gate_ref, NULL, &s->a));
  ck_assert_vat_ok(vat_conn_open(s->sys, sv[1], NULL, NULL, &s->b));
  s->remote_gate = wait_ref(vat_conn_bootstrap(s->b));
  vat_value refs;
  ck_assert_vat_ok(ask(s->remote_gate, "keepers", NULL, 0, &refs));
  for (int i = 0; i < KEEPERS; i++) {
    s->remote[i] = vat_value_ref(vat_at(refs, (size_t)i));
    ck_assert_ptr_nonnull(s->remote[i]);
  }
}

static void close_served(served *s) {
  ck_assert_vat_ok(vat_conn_close(s->b));
  wait_closed(s->a, "disconnected by the peer|end of stream|read: ");
  test_quiesce(s->sys);
}

/* Ends keeper i's vat (on A's side) with `reason`, and waits until it has. */
static void end_keeper(served *s, int i, vat_value reason) {
  vat_promise *down;
  ck_assert_vat_ok(vat_host_monitor(s->gate->keepers[i], NULL, &down));
  ck_assert_vat_ok(vat_host_exit(s->gate->keepers[i], reason));
  ck_assert_vat_ok(vat_promise_wait(down, WAIT_S, NULL));
}

static vat_promise *call(vat_ref *to, const char *method, int64_t a,
                         int64_t b) {
  vat_value args[2] = {vat_int(a), vat_int(b)};
  vat_promise *p;
  ck_assert_vat_ok(vat_host_request(to, sel(method), vat_list(args, 2), 0, &p));
  return p;
}

/* Asserts `p` broke as a call to a vat that ended with `code`: the
 * exception's name is the reason's code, its message "vat ended: ...". */
static void assert_vat_ended(vat_promise *p, const char *code) {
  vat_value v;
  int rc = vat_promise_wait(p, WAIT_S, &v);
  char text[256];
  vat_format(v, text, sizeof text);
  ck_assert_msg(rc == VAT_EBROKEN && vat_type_of(v) == VAT_T_ERROR &&
                    vat_error_code(v) == sel(code) &&
                    strncmp(vat_string_data(vat_error_payload(v)),
                            "vat ended: ", 11) == 0,
                "%s: not %s(\"vat ended: ...\"): %s", vat_err_name(rc), code,
                text);
}

static void assert_int(vat_promise *p, int64_t want) {
  vat_value v;
  int rc = vat_promise_wait(p, WAIT_S, &v);
  char text[256];
  vat_format(v, text, sizeof text);
  ck_assert_msg(rc == VAT_OK && vat_equal(v, vat_int(want)), "%s: %s, not %lld",
                vat_err_name(rc), text, (long long)want);
}

/* What `count` says of the connection `c`, asked in a turn of its vat. */
typedef uint64_t (*conn_count_fn)(const net_conn *c);

static void count_in_turn(vat_turn *turn, void *state, void *arg,
                          vat_resolver *r) {
  conn_count_fn count = *(conn_count_fn *)arg;
  expect_vat_ok(vat_resolve(turn, r, vat_int((int64_t)count(state))));
}

static int64_t conn_count(vat_conn *c, conn_count_fn count) {
  vat_promise *p;
  vat_value v;
  int64_t n = -1;
  ck_assert_vat_ok(vat_host_call(vat_conn_bootstrap_ref(c), count_in_turn,
                                 &count, 0, &p));
  ck_assert_vat_ok(vat_promise_wait(p, WAIT_S, &v));
  ck_assert_vat_ok(vat_get_int(v, &n));
  return n;
}

static uint64_t watches_of(const net_conn *c) {
  return net_watches_held(c);
}

/* The watches A's connection (serving `c`) holds. */
static int64_t watches_held(vat_conn *c) {
  return conn_count(c, watches_of);
}

/* The answers `c` left undecoded, nobody waiting for them. */
static int64_t values_skipped(vat_conn *c) {
  return conn_count(c, net_values_skipped);
}

/* Makes B's peer one that takes no send-only calls, as Endo is, so that
 * B's one-way messages go as questions and come back answered. In B's
 * connection vat, once B has read A's CTP_BOOTSTRAP (it came before A's
 * answer to B's). */
static uint64_t peer_as_endo(const net_conn *c) {
  ((net_conn *)c)->peer_takes_send_only = false;
  return 0;
}

/* --- Tests --------------------------------------------------------------- */

START_TEST(calls_waiting_on_a_vat_break_when_it_ends) {
  served s;
  open_served(&s);
  vat_promise *held[3];
  for (int i = 0; i < 3; i++)
    held[i] = call(s.remote[0], "hold", 0, 0);
  /* Answered after the three holds: they have arrived and wait. */
  assert_int(call(s.remote[0], "add", 2, 3), 5);
  vat_promise *other = call(s.remote[1], "hold", 0, 0);
  assert_int(call(s.remote[1], "add", 1, 1), 2);
  end_keeper(&s, 0, vat_atom_value(vat_atom_killed()));
  for (int i = 0; i < 3; i++)
    assert_vat_ended(held[i], "killed");
  /* A call after the end is told the same. */
  assert_vat_ended(call(s.remote[0], "add", 1, 2), "killed");
  /* Another keeper's call still waits; its own end breaks it, with its
   * own reason. */
  ck_assert_int_eq(vat_promise_peek(other, NULL), VAT_PROMISE_PENDING);
  end_keeper(&s, 1, vat_error(sel("worn_out"), vat_string("tired")));
  assert_vat_ended(other, "worn_out");
  close_served(&s);
}
END_TEST

START_TEST(an_answer_sent_before_its_vat_ended_wins) {
  served s;
  open_served(&s);
  int n = test_quick() ? 20 : 200;
  for (int i = 0; i < n; i++) {
    vat_value fresh;
    ck_assert_vat_ok(ask(s.remote_gate, "fresh", NULL, 0, &fresh));
    vat_ref *keeper = vat_value_ref(fresh);
    ck_assert_ptr_nonnull(keeper);
    assert_int(call(keeper, "last_word", 0, 0), 7);
    /* Its end is known to A by now or soon: the next call breaks. */
    assert_vat_ended(call(keeper, "add", 1, 1), "worn_out");
  }
  close_served(&s);
}
END_TEST

/* A "break" without a reason is a refusal, as it is to vat_request. */
START_TEST(a_break_without_a_reason_is_a_refusal) {
  served s;
  open_served(&s);
  vat_value v;
  int rc = vat_promise_wait(call(s.remote[0], "refuse_bare", 0, 0), WAIT_S, &v);
  char text[256];
  vat_format(v, text, sizeof text);
  /* The refusals row of vat/net.h: TypeError, "refused". */
  ck_assert_msg(rc == VAT_EBROKEN && vat_type_of(v) == VAT_T_ERROR &&
                    vat_error_code(v) == sel("TypeError") &&
                    strcmp(vat_string_data(vat_error_payload(v)), "refused") ==
                        0,
                "%s: %s", vat_err_name(rc), text);
  close_served(&s);
}
END_TEST

/* Many calls on both workers, to keepers that end at random points: every
 * call settles, with its sum or its keeper's end, and none twice. */
START_TEST(every_call_settles_while_its_targets_end) {
  served s;
  open_served(&s);
  int n = 4000 / TEST_SCALE + 200;
  uint64_t seed0 = test_seed("every_call_settles_while_its_targets_end");
  uint64_t seed = seed0;
  vat_promise **ps = GC_MALLOC((size_t)n * sizeof *ps);
  bool *held = GC_MALLOC_ATOMIC((size_t)n);
  int *to = GC_MALLOC_ATOMIC((size_t)n * sizeof *to);
  bool ended[KEEPERS] = {false};
  for (int i = 0; i < n; i++) {
    to[i] = (int)(test_rand(&seed) % KEEPERS);
    held[i] = test_rand(&seed) % 4 == 0;
    ps[i] = call(s.remote[to[i]], held[i] ? "hold" : "add", i, 1);
    int k = (int)(test_rand(&seed) % KEEPERS);
    if (test_rand(&seed) % (uint64_t)(n / 4) == 0 && !ended[k]) {
      vat_promise *down; /* watched: its end is expected, not a crash */
      ck_assert_vat_ok(vat_host_monitor(s.gate->keepers[k], NULL, &down));
      ck_assert_vat_ok(
          vat_host_exit(s.gate->keepers[k], vat_atom_value(vat_atom_killed())));
      ended[k] = true;
    }
  }
  for (int k = 0; k < KEEPERS; k++)
    if (!ended[k])
      end_keeper(&s, k, vat_atom_value(vat_atom_killed()));
  for (int i = 0; i < n; i++) {
    vat_value v;
    int rc = vat_promise_wait(ps[i], WAIT_S, &v);
    char text[256];
    vat_format(v, text, sizeof text);
    if (rc == VAT_OK)
      ck_assert_msg(!held[i] && vat_equal(v, vat_int(i + 1)),
                    "call %d (seed %llu): %s", i, (unsigned long long)seed0,
                    text);
    else
      ck_assert_msg(rc == VAT_EBROKEN && vat_type_of(v) == VAT_T_ERROR &&
                        vat_error_code(v) == vat_atom_killed(),
                    "call %d (seed %llu): %s %s", i, (unsigned long long)seed0,
                    vat_err_name(rc), text);
  }
  /* Every keeper's watch went with its vat; the gate's stays. */
  ck_assert_int_eq(watches_held(s.a), 1);
  close_served(&s);
}
END_TEST

/* Reads from a raw peer until every one of `wants` is in buf, or the
 * wait is over; buf keeps all it read. */
static void raw_read_all(int fd, char *buf, size_t size, const char **wants,
                         int n) {
  size_t got = 0;
  buf[0] = '\0';
  for (int i = 0; i < n; i++)
    while (strstr(buf, wants[i]) == NULL) {
      size_t r = raw_read_until(fd, buf + got, size - got, wants[i], WAIT_S);
      if (r == 0)
        return;
      got += r;
    }
}

static int occurrences(const char *text, const char *word) {
  int n = 0;
  for (const char *at = strstr(text, word); at; at = strstr(at + 1, word))
    n++;
  return n;
}

START_TEST(a_call_is_answered_once) {
  int sv[2];
  ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
  vat_system *sys = test_system(2);
  vat_ref *keeper;
  ck_assert_vat_ok(vat_host_spawn(sys, &keeper_def, &keeper, NULL));
  vat_conn *c;
  ck_assert_vat_ok(vat_conn_open(sys, sv[0], keeper, NULL, &c));
  raw_frame(sv[1], "{\"type\":\"CTP_BOOTSTRAP\",\"questionID\":\"q-1\"}");
  const char *call =
      "{\"type\":\"CTP_CALL\",\"questionID\":\"q-%d\",\"target\":\"o-1\","
      "\"method\":{\"body\":\"[\\\"%s\\\",[]]\",\"slots\":[]}}";
  char frame[256], buf[8192];
  snprintf(frame, sizeof frame, call, 2, "twice");
  raw_frame(sv[1], frame);
  snprintf(frame, sizeof frame, call, 3, "twice");
  raw_frame(sv[1], frame);
  /* A third call, answered after both: any second answer came by then. */
  snprintf(frame, sizeof frame, call, 4, "add");
  raw_frame(sv[1], frame);
  const char *wants[] = {"\"answerID\":\"q-1\"", "\"answerID\":\"q-2\"",
                         "\"answerID\":\"q-3\"", "\"answerID\":\"q-4\""};
  raw_read_all(sv[1], buf, sizeof buf, wants, 4);
  for (int i = 0; i < 4; i++)
    ck_assert_msg(occurrences(buf, wants[i]) == 1, "%s: %s", wants[i], buf);
  ck_assert_msg(occurrences(buf, "\\\"digits\\\":\\\"2\\\"") == 0, "%s", buf);
  raw_hang_up(sv[1], c, sys);
}
END_TEST

/* A watch lives while its ref can be called: a ref the peer gives back
 * (CTP_DROP), its calls answered, lets its watch go. */
START_TEST(watches_go_with_the_refs_the_peer_drops) {
  int sv[2];
  ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
  vat_system *sys = test_system(2);
  vat_ref *gate_ref;
  gate *g;
  ck_assert_vat_ok(vat_host_spawn(sys, &gate_def, &gate_ref, (void **)&g));
  vat_conn *c;
  ck_assert_vat_ok(vat_conn_open(sys, sv[0], gate_ref, NULL, &c));
  raw_frame(sv[1], "{\"type\":\"CTP_BOOTSTRAP\",\"questionID\":\"q-1\"}");
  char frame[512], buf[8192], want[48];
  raw_read_until(sv[1], buf, sizeof buf, "\"answerID\":\"q-1\"", WAIT_S);
  enum { FRESH = 20 };
  for (int i = 0; i < FRESH; i++) {
    /* fresh() answers o+(2+i); add(i, 1) on it. */
    snprintf(frame, sizeof frame,
             "{\"type\":\"CTP_CALL\",\"questionID\":\"q-%d\",\"target\":"
             "\"o-1\",\"method\":{\"body\":\"[\\\"fresh\\\",[]]\","
             "\"slots\":[]}}",
             2 + 2 * i);
    raw_frame(sv[1], frame);
    snprintf(frame, sizeof frame,
             "{\"type\":\"CTP_CALL\",\"questionID\":\"q-%d\",\"target\":"
             "\"o-%d\",\"method\":{\"body\":\"[\\\"add\\\",[%d,1]]\","
             "\"slots\":[]}}",
             3 + 2 * i, 2 + i, i);
    /* The add goes once the ref it calls is exported. */
    snprintf(want, sizeof want, "\"answerID\":\"q-%d\"", 2 + 2 * i);
    raw_read_until(sv[1], buf, sizeof buf, want, WAIT_S);
    ck_assert_msg(strstr(buf, want) != NULL, "%s", buf);
    raw_frame(sv[1], frame);
    snprintf(want, sizeof want, "\"answerID\":\"q-%d\"", 3 + 2 * i);
    raw_read_until(sv[1], buf, sizeof buf, want, WAIT_S);
    ck_assert_msg(strstr(buf, want) != NULL && strstr(buf, "\"result\""), "%s",
                  buf);
  }
  ck_assert_int_eq(watches_held(c), 1 + FRESH);
  for (int i = 0; i < FRESH; i++) {
    snprintf(frame, sizeof frame,
             "{\"type\":\"CTP_DROP\",\"slotID\":\"o-%d\",\"decRefs\":1}",
             2 + i);
    raw_frame(sv[1], frame);
  }
  /* Taken in order: by this call's answer every drop was. */
  snprintf(frame, sizeof frame,
           "{\"type\":\"CTP_CALL\",\"questionID\":\"q-%d\",\"target\":"
           "\"o-1\",\"method\":{\"body\":\"[\\\"fresh\\\",[]]\","
           "\"slots\":[]}}",
           2 + 2 * FRESH);
  raw_frame(sv[1], frame);
  snprintf(want, sizeof want, "\"answerID\":\"q-%d\"", 2 + 2 * FRESH);
  raw_read_until(sv[1], buf, sizeof buf, want, WAIT_S);
  ck_assert_int_eq(watches_held(c), 1);
  raw_hang_up(sv[1], c, sys);
}
END_TEST

/* The answer to a one-way message (from a peer that answers those) is not
 * decoded: nobody reads it. One carrying refs is, so that they are
 * imported (and dropped in time), and an answer a request waits for is,
 * between them. */
START_TEST(answers_nobody_waits_for_are_left_undecoded) {
  served s;
  open_served(&s);
  conn_count(s.b, peer_as_endo);
  int64_t before = values_skipped(s.b);
  enum { ONE_WAY = 40 };
  vat_value args[2] = {vat_int(1), vat_int(2)};
  for (int i = 0; i < ONE_WAY; i++) {
    ck_assert_vat_ok(
        vat_host_send_msg(s.remote[0], sel("add"), vat_list(args, 2)));
    if (i % 8 == 0) /* its answer carries refs: decoded, not counted */
      ck_assert_vat_ok(
          vat_host_send_msg(s.remote_gate, sel("keepers"), vat_null()));
  }
  /* Answered after the keeper's one-way messages and by then the gate's
   * (both vats answered them first); the connection takes answers in
   * order. */
  vat_promise *gate_p;
  ck_assert_vat_ok(
      vat_host_request(s.remote_gate, sel("keepers"), vat_null(), 0, &gate_p));
  assert_int(call(s.remote[0], "add", 20, 22), 42);
  vat_value refs;
  ck_assert_vat_ok(vat_promise_wait(gate_p, WAIT_S, &refs));
  ck_assert_ptr_eq(vat_value_ref(vat_at(refs, 0)), s.remote[0]);
  ck_assert_int_eq(values_skipped(s.b) - before, ONE_WAY);
  close_served(&s);
}
END_TEST

void test_net_answers_tests(Suite *s) {
  TCase *tc = test_case("answers", 120);
  tcase_add_test(tc, calls_waiting_on_a_vat_break_when_it_ends);
  tcase_add_test(tc, an_answer_sent_before_its_vat_ended_wins);
  tcase_add_test(tc, every_call_settles_while_its_targets_end);
  tcase_add_test(tc, a_break_without_a_reason_is_a_refusal);
  tcase_add_test(tc, a_call_is_answered_once);
  tcase_add_test(tc, watches_go_with_the_refs_the_peer_drops);
  tcase_add_test(tc, answers_nobody_waits_for_are_left_undecoded);
  suite_add_tcase(s, tc);
}
