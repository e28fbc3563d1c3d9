/* Pipelining on answer refs over a long connection (vat_conn_pipeline,
 * src/net/pipe.c): the connection knows which question an answer ref
 * stands for as long as the ref lives, after the question's answer too,
 * and no longer. Reads the connection's table itself (net/internal.h),
 * through a function message to the connection's own entity. */
#define GC_THREADS 1
#include <gc/gc.h>

#include <stdio.h>

#include "net/internal.h"
#include "net_support.h"
#include "support.h"
#include "vat/caps.h"

static const vat_atom *sel(const char *name) {
  return vat_atom_intern(name);
}

/* --- A vat that pipelines ------------------------------------------------ */

typedef struct piper {
  vat_ref *remote;
  int calls;             /* pipelined per round */
  _Atomic uint64_t done; /* add()s settled */
  _Atomic uint64_t bad;  /* ...not with 3 */
  vat_ref *kept;         /* an answer ref it holds on to */
} piper;

static void added(vat_turn *turn, void *state, void *ctx, bool resolved,
                  vat_value value) {
  (void)turn;
  (void)ctx;
  piper *pp = state;
  if (!resolved || !vat_equal(value, vat_int(3)))
    atomic_fetch_add(&pp->bad, 1);
  atomic_fetch_add(&pp->done, 1);
}

/* add(1, 2) on `answer`, counted when it settles. */
static void add_on(vat_turn *turn, vat_ref *answer) {
  vat_value two[2] = {vat_int(1), vat_int(2)};
  vat_promise *sum;
  expect_vat_ok(
      vat_request(turn, answer, sel("add"), vat_list(two, 2), 0, &sum));
  expect_vat_ok(vat_when(turn, sum, added, NULL));
}

/* E(E(remote).self()).add(1, 2), `calls` times in one turn; the answer
 * refs are dropped. */
static void pipe_round(vat_turn *turn, void *state, void *arg) {
  (void)arg;
  piper *pp = state;
  for (int i = 0; i < pp->calls; i++) {
    vat_promise *self;
    vat_ref *answer;
    expect_vat_ok(vat_conn_pipeline(turn, pp->remote, sel("self"),
                                    vat_list(NULL, 0), 0, &self, &answer));
    add_on(turn, answer);
  }
}

/* The same once, the answer ref kept. */
static void pipe_and_keep(vat_turn *turn, void *state, void *arg) {
  (void)arg;
  piper *pp = state;
  vat_promise *self;
  expect_vat_ok(vat_conn_pipeline(turn, pp->remote, sel("self"),
                                  vat_list(NULL, 0), 0, &self, &pp->kept));
  add_on(turn, pp->kept);
}

/* add(1, 2) on the kept answer ref again. */
static void add_on_kept(vat_turn *turn, void *state, void *arg) {
  (void)arg;
  add_on(turn, ((piper *)state)->kept);
}

static piper *start_piper(vat_system *sys, vat_ref *remote, int calls,
                          vat_ref **ref) {
  piper *pp;
  ck_assert_vat_ok(vat_host_spawn(
      sys, &(vat_entity_def){.state_size = sizeof(piper)}, ref, (void **)&pp));
  pp->remote = remote;
  pp->calls = calls;
  return pp;
}

/* Sends `fn` to the piper and waits until its add()s settled, `more` of
 * them; then a full collection. */
static void run_and_collect(vat_ref *ref, piper *pp, vat_fn fn, int more) {
  uint64_t want = atomic_load(&pp->done) + (uint64_t)more;
  ck_assert_vat_ok(vat_host_send(ref, fn, NULL));
  ck_assert_msg(test_wait_u64(&pp->done, want, WAIT_S), "%llu of %llu settled",
                (unsigned long long)atomic_load(&pp->done),
                (unsigned long long)want);
  uint64_t bad = atomic_load(&pp->bad);
  ck_assert_msg(bad == 0, "%llu add()s on answer refs broke or went astray",
                (unsigned long long)bad);
  GC_gcollect();
  GC_gcollect();
}

/* The entries of the connection's table of answer refs, read in a turn of
 * its vat. */
static void count_pipes(vat_turn *turn, void *state, void *arg,
                        vat_resolver *r) {
  (void)arg;
  net_conn *c = state;
  expect_vat_ok(vat_resolve(turn, r, vat_int((int64_t)c->pipes.refs.len)));
}

static int64_t pipes_held(vat_conn *conn) {
  vat_promise *p;
  vat_value v;
  ck_assert_vat_ok(
      vat_host_call(vat_conn_bootstrap_ref(conn), count_pipes, NULL, 0, &p));
  ck_assert_vat_ok(vat_promise_wait(p, WAIT_S, &v));
  int64_t n = -1;
  ck_assert(vat_get_int(v, &n) == VAT_OK);
  return n;
}

enum { CALLS = 1000 / TEST_SCALE, ROUNDS = 12 };

START_TEST(answer_refs_leave_the_connection_with_them) {
  /* A long connection pipelining round after round: what it holds for
   * answer refs stays within what the refs alive need (it held an entry
   * for every pipelined call of its life). */
  pair p;
  open_pair(&p);
  vat_ref *ref;
  piper *pp = start_piper(p.sys, p.remote, CALLS, &ref);
  int64_t held[ROUNDS];
  for (int r = 0; r < ROUNDS; r++) {
    run_and_collect(ref, pp, pipe_round, CALLS);
    held[r] = pipes_held(p.b);
    fprintf(stderr, "pipes: after round %d of %d pipelined calls: %lld held\n",
            r + 1, CALLS, (long long)held[r]);
  }
  /* Up to twice what lived at the last sweep, and never swept below 64. */
  for (int r = 0; r < ROUNDS; r++)
    ck_assert_msg(held[r] <= 3 * CALLS + 64,
                  "after round %d of %d pipelined calls: %lld answer refs "
                  "held (of %d made)",
                  r + 1, CALLS, (long long)held[r], (r + 1) * CALLS);
  close_pair(&p);
}
END_TEST

START_TEST(an_answer_ref_reaches_its_question_after_the_answer) {
  /* The kept ref's question was answered long before; sweeps came and
   * went. A call on it still goes to that question, whose answer the peer
   * keeps: add(1, 2) on what self() answered. */
  pair p;
  open_pair(&p);
  vat_ref *ref;
  piper *pp = start_piper(p.sys, p.remote, CALLS, &ref);
  run_and_collect(ref, pp, pipe_and_keep, 1);
  for (int r = 0; r < ROUNDS / 2; r++)
    run_and_collect(ref, pp, pipe_round, CALLS);
  run_and_collect(ref, pp, add_on_kept, 1);
  close_pair(&p);
}
END_TEST

/* --- The table alone --------------------------------------------------------
 * A ref made at the address of one collected: the entry the old one left
 * must not pass for the new one's (whose call may never have gone). Refs
 * here are plain objects of the collector's: the table uses only their
 * addresses and their lives. */

enum { OLD_REFS = 1000, NEW_REFS = 200000, REF_SIZE = 64 };

/* Puts OLD_REFS objects, each for question i + 1, and drops them (in a
 * frame of its own: none stays on the test's stack). */
static __attribute__((noinline)) void put_dropped(net_pipes *pipes) {
  for (int i = 0; i < OLD_REFS; i++) {
    void *ref = GC_MALLOC(REF_SIZE);
    ck_assert_ptr_nonnull(ref);
    ck_assert(net_pipes_put(pipes, ref, (uint64_t)i + 1));
    ck_assert_uint_eq(net_pipes_get(pipes, ref), (uint64_t)i + 1);
  }
}

START_TEST(a_ref_at_a_collected_ones_address_is_not_taken_for_it) {
  net_pipes pipes = {0};
  put_dropped(&pipes);
  GC_gcollect();
  GC_gcollect();
  /* New objects of the same size, until some take old addresses. */
  int reused = 0;
  for (int i = 0; i < NEW_REFS && reused < 32; i++) {
    void *ref = GC_MALLOC(REF_SIZE);
    if (net_table_get(&pipes.refs, (uint64_t)(uintptr_t)ref) == NULL)
      continue; /* no entry at this address */
    reused++;
    ck_assert_msg(net_pipes_get(&pipes, ref) == 0,
                  "a new ref at %p passed for the collected one's question "
                  "%llu",
                  ref, (unsigned long long)net_pipes_get(&pipes, ref));
  }
  ck_assert_msg(reused > 0, "no address of %d collected refs came again in %d",
                OLD_REFS, NEW_REFS);
}
END_TEST

void test_net_pipes_tests(Suite *s) {
  TCase *tc = test_case("pipes", 60);
#if !VAT_GC_NO_COLLECT /* nothing is collected in a build that never does */
  tcase_add_test(tc, answer_refs_leave_the_connection_with_them);
  tcase_add_test(tc, a_ref_at_a_collected_ones_address_is_not_taken_for_it);
#endif
  tcase_add_test(tc, an_answer_ref_reaches_its_question_after_the_answer);
  suite_add_tcase(s, tc);
}
