/* A connection's counts (vat_conn_inspect): frames and their bytes each
 * way, as the raw peer wrote and read them; this side's questions
 * waiting, one-way messages not among them; the peer's questions not yet
 * answered; and all of them kept after the end. */
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "net_support.h"
#include "support.h"

/* Writes `json` as a frame and returns the frame's bytes. */
static size_t frame_sent(int fd, const char *json) {
  raw_frame(fd, json);
  char header[24];
  return (size_t)snprintf(header, sizeof header, "%zu:", strlen(json)) +
         strlen(json) + 1;
}

static vat_conn_info inspect(vat_conn *c) {
  vat_conn_info info;
  ck_assert_vat_ok(vat_conn_inspect(c, &info));
  return info;
}

/* Reads until `want`, adding what came to *read. */
static void read_until(int fd, const char *want, size_t *read) {
  char buf[8192];
  *read += raw_expect(fd, buf, sizeof buf, want);
}

START_TEST(counts_are_what_crossed_and_what_waits) {
  int sv[2];
  vat_conn *c;
  vat_system *sys = raw_served(sv, &c);
  size_t in = 0, out = 0;
  /* Its bootstrap question, waiting. */
  read_until(sv[1], "CTP_BOOTSTRAP", &out);
  vat_conn_info i = inspect(c);
  ck_assert_uint_eq(i.frames_out, 1);
  ck_assert_uint_eq(i.bytes_out, out);
  ck_assert_uint_eq(i.questions, 1);
  ck_assert_uint_eq(i.frames_in + i.bytes_in + i.answers_owed, 0);
  /* The peer's: the bootstrap, add(2, 3), hang() never answered, and
   * add(1, 1), whose answer says every call before it was taken. */
  in +=
      frame_sent(sv[1], "{\"type\":\"CTP_BOOTSTRAP\",\"questionID\":\"q-1\"}");
  in += frame_sent(sv[1], "{\"type\":\"CTP_CALL\",\"questionID\":\"q-2\","
                          "\"target\":\"o-1\",\"method\":{\"body\":"
                          "\"[\\\"add\\\",[2,3]]\",\"slots\":[]}}");
  in += frame_sent(sv[1], "{\"type\":\"CTP_CALL\",\"questionID\":\"q-3\","
                          "\"target\":\"o-1\",\"method\":{\"body\":"
                          "\"[\\\"hang\\\",[]]\",\"slots\":[]}}");
  in += frame_sent(sv[1], "{\"type\":\"CTP_CALL\",\"questionID\":\"q-4\","
                          "\"target\":\"o-1\",\"method\":{\"body\":"
                          "\"[\\\"add\\\",[1,1]]\",\"slots\":[]}}");
  read_until(sv[1], "\"answerID\":\"q-4\"", &out);
  i = inspect(c);
  ck_assert_uint_eq(i.frames_in, 4);
  ck_assert_uint_eq(i.bytes_in, in);
  ck_assert_uint_eq(i.frames_out, 4); /* its bootstrap, three answers */
  ck_assert_uint_eq(i.bytes_out, out);
  ck_assert_uint_eq(i.answers_owed, 1);
  ck_assert_uint_eq(i.questions, 1);
  /* Its bootstrap answered; then a request waits and a one-way message
   * is no question. */
  in += frame_sent(sv[1],
                   "{\"type\":\"CTP_RETURN\",\"answerID\":\"q-1\",\"result\":"
                   "{\"body\":\"{\\\"@qclass\\\":\\\"slot\\\",\\\"index\\\":0}"
                   "\",\"slots\":[\"o+1\"]}}");
  vat_ref *remote = wait_ref(vat_conn_bootstrap(c));
  ck_assert_uint_eq(inspect(c).questions, 0);
  vat_promise *p;
  ck_assert_vat_ok(
      vat_host_request(remote, vat_atom_intern("get"), vat_null(), 0, &p));
  ck_assert_vat_ok(
      vat_host_send_msg(remote, vat_atom_intern("poke"), vat_null()));
  read_until(sv[1], "poke", &out);
  i = inspect(c);
  ck_assert_uint_eq(i.questions, 1);
  ck_assert_uint_eq(i.frames_out, 6);
  ck_assert_uint_eq(i.bytes_out, out);
  /* Another call never answered, then the answer: taken in order, so by
   * the answer the call was counted. */
  in += frame_sent(sv[1], "{\"type\":\"CTP_CALL\",\"questionID\":\"q-5\","
                          "\"target\":\"o-1\",\"method\":{\"body\":"
                          "\"[\\\"hang\\\",[]]\",\"slots\":[]}}");
  in += frame_sent(sv[1], "{\"type\":\"CTP_RETURN\",\"answerID\":\"q-2\","
                          "\"result\":{\"body\":\"7\",\"slots\":[]}}");
  vat_value v;
  ck_assert_vat_ok(vat_promise_wait(p, WAIT_S, &v));
  i = inspect(c);
  ck_assert_uint_eq(i.questions, 0);
  ck_assert_uint_eq(i.answers_owed, 2);
  ck_assert_uint_eq(i.frames_in, 7);
  ck_assert_uint_eq(i.bytes_in, in);
  /* Kept after the end, but for a question waiting: the end broke it. */
  ck_assert_vat_ok(
      vat_host_request(remote, vat_atom_intern("get"), vat_null(), 0, &p));
  read_until(sv[1], "\"q-4\"", &out);
  ck_assert_uint_eq(inspect(c).questions, 1);
  raw_hang_up(sv[1], c, sys);
  ck_assert_vat_err(vat_promise_wait(p, WAIT_S, &v), VAT_EBROKEN);
  i = inspect(c);
  ck_assert_uint_eq(i.frames_in, 7);
  ck_assert_uint_eq(i.bytes_in, in);
  ck_assert_uint_ge(i.frames_out, 7);
  ck_assert_uint_eq(i.questions, 0);
}
END_TEST

void test_net_counts_tests(Suite *s) {
  TCase *tc = test_case("counts", 60);
  tcase_add_test(tc, counts_are_what_crossed_and_what_waits);
  suite_add_tcase(s, tc);
}
