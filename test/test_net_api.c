/* Small promises of vat/net.h that no other test held: NULL and missing
 * arguments, the connection vat's label, a payload that is not a list, and
 * an error relayed with fields of its own. */
#define GC_THREADS 1
#include <gc/gc.h>

#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "net_support.h"
#include "support.h"
#include "vat/caps.h"
#include "vat/observe.h"

static const vat_atom *sel(const char *name) {
  return vat_atom_intern(name);
}

/* vat_conn_pipeline with one argument missing after another, in a turn:
 * answers how many were refused with VAT_EINVAL, nothing sent. */
static void pipeline_without(vat_turn *turn, void *state, void *arg,
                             vat_resolver *r) {
  (void)state;
  vat_ref *target = arg;
  vat_promise *out;
  vat_ref *answer;
  const vat_atom *m = sel("self");
  vat_value none = vat_list(NULL, 0);
  int refused = 0;
  refused +=
      vat_conn_pipeline(turn, NULL, m, none, 0, &out, &answer) == VAT_EINVAL;
  refused += vat_conn_pipeline(turn, target, NULL, none, 0, &out, &answer) ==
             VAT_EINVAL;
  refused +=
      vat_conn_pipeline(turn, target, m, none, 0, NULL, &answer) == VAT_EINVAL;
  refused +=
      vat_conn_pipeline(turn, target, m, none, 0, &out, NULL) == VAT_EINVAL;
  expect_vat_ok(vat_resolve(turn, r, vat_int(refused)));
}

static void never_accepts(void *ctx, vat_listener *l, int rc, vat_conn *conn) {
  (void)ctx;
  (void)l;
  (void)rc;
  (void)conn;
}

START_TEST(null_and_missing_arguments_are_refused) {
  ck_assert_ptr_null(vat_conn_closed(NULL));
  ck_assert_ptr_null(vat_conn_bootstrap_ref(NULL));
  ck_assert_int_eq(vat_listener_port(NULL), 0);
  ck_assert_vat_err(vat_listener_close(NULL), VAT_EINVAL);
  ck_assert_vat_err(vat_listener_serve(NULL, NULL, NULL), VAT_EINVAL);
  vat_system *sys = test_system(1);
  /* Served needs the listener's options `loop`. */
  vat_listener *l;
  ck_assert_vat_ok(vat_listen(sys, "tcp:127.0.0.1:0", NULL, NULL, &l));
  ck_assert_vat_err(vat_listener_serve(l, never_accepts, NULL), VAT_EINVAL);
  ck_assert_vat_ok(vat_listener_close(l));
  /* Pipelining: every argument but the arguments. */
  vat_ref *any;
  ck_assert_vat_ok(vat_host_spawn(sys, &server_def, &any, NULL));
  vat_ref *caller = test_spawn(sys, 0, NULL);
  vat_promise *p;
  vat_value v;
  ck_assert_vat_ok(vat_host_call(caller, pipeline_without, any, 0, &p));
  ck_assert_vat_ok(vat_promise_wait(p, WAIT_S, &v));
  int64_t refused = -1;
  vat_get_int(v, &refused);
  ck_assert_msg(refused == 4, "%lld of 4 refused", (long long)refused);
  test_quiesce(sys);
}
END_TEST

START_TEST(a_connection_vat_has_its_label) {
  /* "captp" unless the options name one (vat/observe.h reads it). */
  int sv[2];
  ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
  vat_system *sys = test_system(1);
  vat_conn_options opt;
  vat_conn_options_default(&opt);
  opt.label = "to the ledger";
  vat_conn *plain, *named;
  raw_open(sys, sv[0], NULL, &plain);
  raw_open(sys, sv[1], &opt, &named);
  ck_assert_str_eq(vat_ref_label(vat_conn_bootstrap_ref(plain)), "captp");
  ck_assert_str_eq(vat_ref_label(vat_conn_bootstrap_ref(named)),
                   "to the ledger");
  vat_conn_close(plain);
  wait_closed(plain, "closed");
  wait_closed(named, "disconnected by the peer");
  test_quiesce(sys);
}
END_TEST

START_TEST(a_payload_that_is_not_a_list_goes_as_the_one_argument) {
  pair p;
  open_pair(&p);
  vat_promise *echoed;
  ck_assert_vat_ok(
      vat_host_request(p.remote, sel("echo"), vat_string("alone"), 0, &echoed));
  vat_value v;
  ck_assert_vat_ok(vat_promise_wait(echoed, WAIT_S, &v));
  ck_assert_str_eq(vat_string_data(v), "alone");
  close_pair(&p);
}
END_TEST

/* --- An error with fields of its own --------------------------------------
 * What a caller relays from Endo (an Error with an errorId) keeps its
 * fields, whatever its name: the refusal table rewrites only a reason
 * whose payload is null, a string or an atom. */

static void relayer_receive(vat_turn *turn, void *state,
                            const vat_atom *selector, vat_value value) {
  (void)state;
  (void)selector;
  vat_value args;
  vat_ref *reply;
  if (!vat_request_parse(value, &args, &reply))
    return;
  vat_value keys[2] = {vat_atom_named("errorId"), vat_atom_named("message")};
  vat_value vals[2] = {vat_string("error:captp:endo#20001"),
                       vat_string("no such key")};
  expect_vat_ok(vat_reply_error(
      turn, reply, vat_error(sel("NotFound"), vat_map(keys, vals, 2))));
}

START_TEST(an_error_with_fields_of_its_own_keeps_them) {
  int sv[2];
  ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
  vat_system *sys = test_system(1);
  vat_ref *relayer;
  ck_assert_vat_ok(vat_host_spawn(
      sys, &(vat_entity_def){.receive = relayer_receive}, &relayer, NULL));
  vat_conn *c;
  ck_assert_vat_ok(vat_conn_open(sys, sv[0], relayer, NULL, &c));
  raw_frame(sv[1], "{\"type\":\"CTP_BOOTSTRAP\",\"questionID\":\"q-1\"}");
  raw_frame(sv[1], "{\"type\":\"CTP_CALL\",\"questionID\":\"q-2\",\"target\":"
                   "\"q-1\",\"method\":{\"body\":\"[\\\"get\\\",[]]\","
                   "\"slots\":[]}}");
  char buf[8192];
  raw_read_until(sv[1], buf, sizeof buf, "\"answerID\":\"q-2\"", WAIT_S);
  const char *at = strstr(buf, "\"answerID\":\"q-2\"");
  ck_assert_msg(at != NULL, "no answer: %s", buf);
  ck_assert_msg(strstr(at, "\\\"name\\\":\\\"NotFound\\\"") &&
                    strstr(at, "\\\"#error\\\":\\\"no such key\\\"") &&
                    strstr(at, "\\\"errorId\\\":\\\"error:captp:endo#20001"),
                "%s", at);
  raw_hang_up(sv[1], c, sys);
}
END_TEST

void test_net_api_tests(Suite *s) {
  TCase *tc = test_case("api", 60);
  tcase_add_test(tc, null_and_missing_arguments_are_refused);
  tcase_add_test(tc, a_connection_vat_has_its_label);
  tcase_add_test(tc, a_payload_that_is_not_a_list_goes_as_the_one_argument);
  tcase_add_test(tc, an_error_with_fields_of_its_own_keeps_them);
  suite_add_tcase(s, tc);
}
