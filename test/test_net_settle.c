/* A promise this side exported settles on the wire (CTP_RESOLVE) as an
 * answer does (CTP_RETURN): broken, its reason goes through the same
 * table of vat/net.h, so the peer tells refusals apart the same way
 * whether it asked for the value or was handed a promise for it; a value
 * that cannot go is the same exception. And what the peer sends settles
 * ours the same way both ways. */
#define GC_THREADS 1
#include <gc/gc.h>

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

/* --- The served object: the same outcome as an answer, or later ---------- */

enum { REASONS = 7 };

/* Reasons a call or a promise breaks with, one of each row of the table
 * in vat/net.h. */
static vat_value reason_of(int64_t i) {
  switch (i) {
  case 0:
    return vat_error(vat_atom_refused(), vat_string("echo"));
  case 1:
    return vat_atom_value(vat_atom_killed());
  case 2:
    return vat_error(sel("limit"), vat_string("too many"));
  case 3:
    return vat_error(sel("NotFound"), vat_string("no such key"));
  case 4:
    return vat_error(sel("RangeError"), vat_string("kept as is"));
  case 5:
    return vat_int(42);
  default:
    return vat_atom_value(vat_atom_revoked());
  }
}

/* What the peer reads each reason as: the exception's name, and the start
 * of its message (NULL: the reason is a value, carried as the payload). */
static const struct {
  const char *name, *message;
} seen_as[REASONS] = {
    {"TypeError", "refused: echo"},
    {"killed", "vat ended: killed"},
    {"RangeError", "limit: too many"},
    {"NotFound", "NotFound: no such key"},
    {"RangeError", "kept as is"},
    {"Error", NULL},
    {"revoked", "revoked"},
};

/* What no CapData form can carry: a string that is not UTF-8. */
static vat_value unsendable(void) {
  return vat_string_n("a\xff", 2);
}

/* answer(i): breaks the answer with reason i. later(i): answers with
 * [p] and breaks p with reason i. unsendable(), unsendable_later(): the
 * same with a value that cannot go, resolved. fresh(), fresh_later(): a
 * new ref of this vat, one export more. */
static void settler_receive(vat_turn *turn, void *state,
                            const vat_atom *selector, vat_value value) {
  (void)state;
  vat_value args;
  vat_ref *reply;
  if (!vat_request_parse(value, &args, &reply))
    return;
  int64_t i = 0;
  vat_get_int(vat_at(args, 0), &i);
  bool later = selector == sel("later") ||
               selector == sel("unsendable_later") ||
               selector == sel("fresh_later");
  bool broken = selector == sel("answer") || selector == sel("later");
  vat_value outcome = broken ? reason_of(i) : unsendable();
  if (selector == sel("fresh") || selector == sel("fresh_later")) {
    vat_ref *fresh;
    expect_vat_ok(vat_entity_new(turn, &test_adder_def, &fresh, NULL));
    outcome = vat_ref_value(fresh);
  }
  if (!later) {
    expect_vat_ok(broken ? vat_reply_error(turn, reply, outcome)
                         : vat_reply(turn, reply, outcome));
    return;
  }
  vat_promise *p;
  vat_resolver *r;
  expect_vat_ok(vat_promise_new(&p, &r));
  vat_value pv = vat_promise_value(p);
  expect_vat_ok(vat_reply(turn, reply, vat_list(&pv, 1)));
  expect_vat_ok(broken ? vat_break(turn, r, outcome)
                       : vat_resolve(turn, r, outcome));
}

static const vat_entity_def settler_def = {.receive = settler_receive};

/* Two libvat sides: `settler` served by p->a (with `opt`), p->remote its
 * proxy on p->b. */
static void open_settler(pair *p, const vat_conn_options *opt) {
  int sv[2];
  ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
  p->sys = test_system(2);
  ck_assert_vat_ok(vat_host_spawn(p->sys, &settler_def, &p->served, NULL));
  p->client = NULL;
  ck_assert_vat_ok(vat_conn_open(p->sys, sv[0], p->served, opt, &p->a));
  ck_assert_vat_ok(vat_conn_open(p->sys, sv[1], NULL, NULL, &p->b));
  p->remote = wait_ref(vat_conn_bootstrap(p->b));
}

/* What method(i) answered (broken: *broken set), or what the promise in
 * its answer [p] settled with. */
static vat_value outcome(vat_ref *remote, const char *method, int64_t i,
                         bool *broken) {
  vat_value arg = vat_int(i), v;
  int rc = ask(remote, method, &arg, 1, &v);
  if (strstr(method, "later") != NULL) {
    ck_assert_msg(rc == VAT_OK, "%s(%lld): %s", method, (long long)i,
                  vat_err_name(rc));
    vat_promise *p = vat_value_promise(vat_at(v, 0));
    ck_assert_ptr_nonnull(p);
    rc = vat_promise_wait(p, WAIT_S, &v);
  }
  ck_assert_msg(rc == VAT_OK || rc == VAT_EBROKEN, "%s(%lld): %s", method,
                (long long)i, vat_err_name(rc));
  *broken = rc == VAT_EBROKEN;
  return v;
}

/* method(i) and method_later(i) settle alike on the peer. */
static vat_value assert_alike(vat_ref *remote, const char *method,
                              const char *later, int64_t i) {
  bool broke_now, broke_later;
  vat_value now = outcome(remote, method, i, &broke_now);
  vat_value then = outcome(remote, later, i, &broke_later);
  char a[256], b[256];
  vat_format(now, a, sizeof a);
  vat_format(then, b, sizeof b);
  ck_assert_msg(broke_now && broke_later && vat_equal(now, then),
                "%s(%lld): the answer %s %s, the promise %s %s", method,
                (long long)i, broke_now ? "broke with" : "was", a,
                broke_later ? "broke with" : "was", b);
  return now;
}

START_TEST(a_broken_promise_reaches_a_libvat_peer_as_a_broken_answer) {
  pair p;
  open_settler(&p, NULL);
  for (int64_t i = 0; i < REASONS; i++) {
    vat_value v = assert_alike(p.remote, "answer", "later", i);
    char text[256];
    vat_format(v, text, sizeof text);
    ck_assert_msg(vat_type_of(v) == VAT_T_ERROR &&
                      vat_error_code(v) == sel(seen_as[i].name),
                  "reason %lld: not %s(...): %s", (long long)i, seen_as[i].name,
                  text);
    if (seen_as[i].message != NULL)
      ck_assert_msg(vat_string_data(vat_error_payload(v)) != NULL &&
                        strncmp(vat_string_data(vat_error_payload(v)),
                                seen_as[i].message,
                                strlen(seen_as[i].message)) == 0,
                    "reason %lld: not %s(\"%s...\"): %s", (long long)i,
                    seen_as[i].name, seen_as[i].message, text);
    else
      ck_assert_msg(vat_equal(vat_error_payload(v), reason_of(i)),
                    "reason %lld: not carried: %s", (long long)i, text);
  }
  /* A value with no CapData form: the same exception, whichever way it was
   * to go. */
  vat_value v = assert_alike(p.remote, "unsendable", "unsendable_later", 0);
  ck_assert(vat_type_of(v) == VAT_T_ERROR && vat_error_code(v) == sel("Error"));
  close_pair(&p);
}
END_TEST

START_TEST(a_promise_settled_past_max_exports_breaks_as_an_answer_would) {
  /* The bootstrap, then the promise in fresh_later's answer: the exports
   * are full, and the fresh ref either way is one too many. */
  vat_conn_options opt;
  vat_conn_options_default(&opt);
  opt.max_exports = 2;
  pair p;
  open_settler(&p, &opt);
  bool broke_now, broke_later;
  vat_value then = outcome(p.remote, "fresh_later", 0, &broke_later);
  vat_value now = outcome(p.remote, "fresh", 0, &broke_now);
  char a[256], b[256];
  vat_format(now, a, sizeof a);
  vat_format(then, b, sizeof b);
  ck_assert_msg(broke_now && broke_later && vat_equal(now, then) &&
                    vat_error_code(now) == sel("RangeError"),
                "the answer %s, the promise %s", a, b);
  ck_assert_str_eq(vat_string_data(vat_error_payload(now)),
                   "limit: too many exports");
  close_pair(&p);
}
END_TEST

/* --- What the peer sends ---------------------------------------------------
 * An exception in a CTP_RETURN and a rejection in a CTP_RESOLVE, the same
 * capdata: the question and the promise break with the same reason. */

START_TEST(a_peer_rejection_breaks_ours_as_its_exception_does) {
  int sv[2];
  ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
  vat_system *sys = test_system(2);
  vat_conn *c;
  raw_open(sys, sv[0], NULL, &c);
  vat_ref *remote = raw_answer_bootstrap(sv[1], c);
  static const char *const reasons[] = {
      "{\\\"@qclass\\\":\\\"error\\\",\\\"name\\\":\\\"TypeError\\\","
      "\\\"message\\\":\\\"refused: echo\\\"}",
      "{\\\"@qclass\\\":\\\"error\\\",\\\"name\\\":\\\"Error\\\","
      "\\\"message\\\":\\\"gone\\\",\\\"errorId\\\":\\\"error:captp:1\\\"}",
      "{\\\"@qclass\\\":\\\"bigint\\\",\\\"digits\\\":\\\"7\\\"}",
  };
  char buf[8192], frame[512];
  for (int i = 0; i < 3; i++) {
    vat_promise *asked, *holder;
    ck_assert_vat_ok(
        vat_host_request(remote, sel("fail"), vat_list(NULL, 0), 0, &asked));
    ck_assert_vat_ok(
        vat_host_request(remote, sel("later"), vat_list(NULL, 0), 0, &holder));
    int q = 2 + 2 * i;
    char want[48];
    snprintf(want, sizeof want, "\"questionID\":\"q-%d\"", q + 1);
    raw_read_until(sv[1], buf, sizeof buf, want, WAIT_S);
    ck_assert_msg(strstr(buf, want) != NULL, "no q-%d: %s", q + 1, buf);
    snprintf(frame, sizeof frame,
             "{\"type\":\"CTP_RETURN\",\"answerID\":\"q-%d\",\"exception\":"
             "{\"body\":\"%s\",\"slots\":[]}}",
             q, reasons[i]);
    raw_frame(sv[1], frame);
    snprintf(frame, sizeof frame,
             "{\"type\":\"CTP_RETURN\",\"answerID\":\"q-%d\",\"result\":"
             "{\"body\":\"[{\\\"@qclass\\\":\\\"slot\\\",\\\"index\\\":0}]\","
             "\"slots\":[\"p+%d\"]}}",
             q + 1, i + 1);
    raw_frame(sv[1], frame);
    snprintf(frame, sizeof frame,
             "{\"type\":\"CTP_RESOLVE\",\"promiseID\":\"p-%d\",\"rej\":"
             "{\"body\":\"%s\",\"slots\":[]}}",
             i + 1, reasons[i]);
    raw_frame(sv[1], frame);
    vat_value exception, held, rejection;
    ck_assert_vat_err(vat_promise_wait(asked, WAIT_S, &exception), VAT_EBROKEN);
    ck_assert_vat_ok(vat_promise_wait(holder, WAIT_S, &held));
    vat_promise *theirs = vat_value_promise(vat_at(held, 0));
    ck_assert_ptr_nonnull(theirs);
    ck_assert_vat_err(vat_promise_wait(theirs, WAIT_S, &rejection),
                      VAT_EBROKEN);
    char a[256], b[256];
    vat_format(exception, a, sizeof a);
    vat_format(rejection, b, sizeof b);
    ck_assert_msg(vat_equal(exception, rejection),
                  "reason %d: the question broke with %s, the promise with %s",
                  i, a, b);
  }
  raw_hang_up(sv[1], c, sys);
}
END_TEST

void test_net_settle_tests(Suite *s) {
  TCase *tc = test_case("settle", 60);
  tcase_add_test(tc, a_broken_promise_reaches_a_libvat_peer_as_a_broken_answer);
  tcase_add_test(tc,
                 a_promise_settled_past_max_exports_breaks_as_an_answer_would);
  tcase_add_test(tc, a_peer_rejection_breaks_ours_as_its_exception_does);
  suite_add_tcase(s, tc);
}
