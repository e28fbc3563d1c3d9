/* Method names from the wire: each call reaches its target with the atom
 * of its own name, however many names a connection calls and in whatever
 * order (the connection keeps a small cache of the names it saw last, in
 * which names share slots, of one length or of several). */
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include "net_support.h"
#include "support.h"
#include "vat/caps.h"

/* Answers each call with the name of its selector. */
static void name_receive(vat_turn *turn, void *state, const vat_atom *selector,
                         vat_value value) {
  vat_ref *reply;
  (void)state;
  if (vat_request_parse(value, NULL, &reply))
    expect_vat_ok(vat_reply(
        turn, reply,
        vat_string_n(vat_atom_name(selector), vat_atom_len(selector))));
}

static const vat_entity_def name_echo_def = {.receive = name_receive};

/* Two connections over a socket pair in a new system: `a` serves the name
 * echo, `remote` is its proxy on `b` (which serves nothing). */
static pair open_echo_pair(void) {
  int sv[2];
  ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
  pair c = {.sys = test_system(2)};
  ck_assert_vat_ok(vat_host_spawn(c.sys, &name_echo_def, &c.served, NULL));
  ck_assert_vat_ok(vat_conn_open(c.sys, sv[0], c.served, NULL, &c.a));
  ck_assert_vat_ok(vat_conn_open(c.sys, sv[1], NULL, NULL, &c.b));
  c.remote = wait_ref(vat_conn_bootstrap(c.b));
  return c;
}

enum { NAMES = 64, ROUNDS = 4 };

START_TEST(each_call_reaches_its_target_by_its_own_name) {
  uint64_t seed = test_seed("each_call_reaches_its_target_by_its_own_name");
  pair c = open_echo_pair();
  vat_ref *proxy = c.remote;
  /* Names of one length that differ in their last bytes, called in a new
   * random order each round: the cache's slots are shared and replaced. */
  char names[NAMES][16];
  for (int i = 0; i < NAMES; i++)
    snprintf(names[i], sizeof names[i], "method-%03d", i);
  vat_promise *p[ROUNDS * NAMES];
  int called[ROUNDS * NAMES];
  for (int r = 0; r < ROUNDS; r++) {
    int order[NAMES];
    for (int i = 0; i < NAMES; i++)
      order[i] = i;
    for (int i = NAMES - 1; i > 0; i--) {
      int j = (int)test_rand_between(&seed, 0, (uint64_t)i);
      int t = order[i];
      order[i] = order[j];
      order[j] = t;
    }
    for (int i = 0; i < NAMES; i++) {
      int k = r * NAMES + i;
      called[k] = order[i];
      ck_assert_vat_ok(vat_host_request(proxy, vat_atom_intern(names[order[i]]),
                                        vat_list(NULL, 0), 0, &p[k]));
    }
  }
  for (int k = 0; k < ROUNDS * NAMES; k++) {
    vat_value v;
    ck_assert_vat_ok(vat_promise_wait(p[k], WAIT_S, &v));
    ck_assert_msg(vat_type_of(v) == VAT_T_STRING &&
                      strcmp(vat_string_data(v), names[called[k]]) == 0,
                  "call %d to %s reached %s", k, names[called[k]],
                  vat_type_of(v) == VAT_T_STRING ? vat_string_data(v) : "?");
  }
  close_pair(&c);
}
END_TEST

/* Names of every length from 1 to 64, each a prefix of the longer ones,
 * called longest first, then shortest first, then longest first again:
 * more names than the cache has slots, so names of different lengths
 * share slots, and a name found in a slot that begins as the called one
 * (a longer name cached, a shorter called) is not taken for it. */
enum { PREFIXES = 64 };

START_TEST(names_of_different_lengths_reach_their_own_method) {
  pair c = open_echo_pair();
  vat_ref *proxy = c.remote;
  char longest[PREFIXES + 1];
  for (int i = 0; i < PREFIXES; i++)
    longest[i] = (char)('a' + i % 26);
  longest[PREFIXES] = '\0';
  enum { CALLS = 3 * PREFIXES };
  vat_promise *p[CALLS];
  int len[CALLS];
  for (int k = 0; k < CALLS; k++) {
    int i = k % PREFIXES;
    len[k] = k / PREFIXES == 1 ? 1 + i : PREFIXES - i;
    ck_assert_vat_ok(
        vat_host_request(proxy, vat_atom_intern_n(longest, (size_t)len[k]),
                         vat_list(NULL, 0), 0, &p[k]));
  }
  for (int k = 0; k < CALLS; k++) {
    vat_value v;
    ck_assert_vat_ok(vat_promise_wait(p[k], WAIT_S, &v));
    ck_assert_msg(vat_type_of(v) == VAT_T_STRING &&
                      vat_string_len(v) == (size_t)len[k] &&
                      memcmp(vat_string_data(v), longest, (size_t)len[k]) == 0,
                  "call %d to the name of %d bytes reached %s", k, len[k],
                  vat_type_of(v) == VAT_T_STRING ? vat_string_data(v) : "?");
  }
  close_pair(&c);
}
END_TEST

void test_net_names_tests(Suite *s) {
  TCase *tc = test_case("names", 60);
  tcase_add_test(tc, each_call_reaches_its_target_by_its_own_name);
  tcase_add_test(tc, names_of_different_lengths_reach_their_own_method);
  suite_add_tcase(s, tc);
}
