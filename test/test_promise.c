/* Requests and promises: resolve, break, exactly once, `when` in the
 * observer's vat, broken promises when the callee dies, pipelining,
 * request timeouts, blocking waits from host threads, and a stress of
 * concurrent requests across both workers. */
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "support.h"

/* --- A callee with a few behaviours --------------------------------------- */

typedef struct callee {
  vat_resolver *kept;
  _Atomic uint64_t kept_n; /* resolvers kept so far */
  vat_ref *helper;
  uint64_t handled;
} callee;

static void answer_arg(vat_turn *turn, void *state, void *arg,
                       vat_resolver *r) {
  ((callee *)state)->handled++;
  expect_vat_ok(vat_resolve(turn, r, vat_int((int64_t)(intptr_t)arg)));
}

static void refuse(vat_turn *turn, void *state, void *arg, vat_resolver *r) {
  (void)state;
  (void)arg;
  expect_vat_ok(vat_break(turn, r, vat_atom_named("refused")));
}

static void keep(vat_turn *turn, void *state, void *arg, vat_resolver *r) {
  (void)turn;
  (void)arg;
  ((callee *)state)->kept = r;
  atomic_fetch_add_explicit(&((callee *)state)->kept_n, 1,
                            memory_order_release);
}

static void resolve_kept(vat_turn *turn, void *state, void *arg) {
  callee *c = state;
  expect_vat_ok(vat_resolve(turn, c->kept, vat_int((int64_t)(intptr_t)arg)));
}

static void keep_and_stop(vat_turn *turn, void *state, void *arg,
                          vat_resolver *r) {
  keep(turn, state, arg, r);
  expect_vat_ok(vat_stop(turn));
}

static void answer_then_fail(vat_turn *turn, void *state, void *arg,
                             vat_resolver *r) {
  (void)state;
  (void)arg;
  expect_vat_ok(vat_resolve(turn, r, vat_int(1)));
  expect_vat_ok(vat_fail(turn, vat_atom_named("crashed")));
}

static void answer_twice(vat_turn *turn, void *state, void *arg,
                         vat_resolver *r) {
  (void)state;
  (void)arg;
  expect_vat_ok(vat_resolve(turn, r, vat_int(7)));
  if (vat_resolve(turn, r, vat_int(8)) != VAT_EBUSY ||
      vat_break(turn, r, vat_atom_named("x")) != VAT_EBUSY)
    test_record_bad_call("second answer", VAT_OK, __FILE__, __LINE__);
}

/* Hands the resolver to a helper vat, which answers. */
static void helper_answers(vat_turn *turn, void *state, void *arg) {
  (void)state;
  expect_vat_ok(vat_resolve(turn, arg, vat_int(99)));
}

static void delegate(vat_turn *turn, void *state, void *arg, vat_resolver *r) {
  (void)arg;
  expect_vat_ok(vat_send(turn, ((callee *)state)->helper, helper_answers, r));
}

/* Answers a request with its own promise: a cycle. */
static void answer_with_own_promise(vat_turn *turn, void *state, void *arg,
                                    vat_resolver *r) {
  (void)state;
  (void)arg;
  expect_vat_ok(
      vat_resolve(turn, r, vat_promise_value(vat_resolver_promise(r))));
}

/* The helper answers, then its turn fails: the answer never leaves. */
static void helper_answers_then_fails(vat_turn *turn, void *state, void *arg) {
  (void)state;
  expect_vat_ok(vat_resolve(turn, arg, vat_int(99)));
  expect_vat_ok(vat_fail(turn, vat_atom_named("helper_crashed")));
}

static void delegate_to_failing(vat_turn *turn, void *state, void *arg,
                                vat_resolver *r) {
  (void)arg;
  expect_vat_ok(
      vat_send(turn, ((callee *)state)->helper, helper_answers_then_fails, r));
}

/* --- A caller that records what it observed --------------------------------
 */

typedef struct caller {
  vat_ref *callee;
  vat_request_fn fn;
  void *arg;
  double timeout_s;
  vat_promise *promise;
  _Atomic uint64_t settled;
  bool resolved;
  vat_value value;
  bool in_own_vat;
  bool after_turn;
  bool turn_done;
} caller;

static void record(vat_turn *turn, void *state, void *ctx, bool resolved,
                   vat_value value) {
  caller *c = state;
  c->in_own_vat = vat_self(turn) == ctx;
  c->resolved = resolved;
  c->value = value;
  c->after_turn = c->turn_done;
  atomic_fetch_add_explicit(&c->settled, 1, memory_order_release);
}

static void start_call(vat_turn *turn, void *state, void *arg) {
  (void)arg;
  caller *c = state;
  expect_vat_ok(
      vat_call(turn, c->callee, c->fn, c->arg, c->timeout_s, &c->promise));
  expect_vat_ok(vat_when(turn, c->promise, record, vat_self(turn)));
}

static caller *run_call(vat_system *sys, vat_ref *to, vat_request_fn fn,
                        void *arg, double timeout_s) {
  caller *c;
  vat_ref *ref = test_spawn(sys, sizeof(caller), (void **)&c);
  c->callee = to;
  c->fn = fn;
  c->arg = arg;
  c->timeout_s = timeout_s;
  ck_assert_vat_ok(vat_host_send(ref, start_call, NULL));
  return c;
}

static void expect_settled(caller *c, bool resolved, vat_value value) {
  ck_assert(test_wait_u64(&c->settled, 1, 10));
  ck_assert(c->in_own_vat);
  ck_assert_int_eq(c->resolved, resolved);
  char a[64], b[64];
  vat_format(c->value, a, sizeof a);
  vat_format(value, b, sizeof b);
  ck_assert_msg(vat_equal(c->value, value), "got %s, expected %s", a, b);
}

START_TEST(resolve_runs_when_in_observer_vat) {
  vat_system *sys = test_system(2);
  callee *ce;
  vat_ref *to = test_spawn(sys, sizeof(callee), (void **)&ce);
  caller *c = run_call(sys, to, answer_arg, (void *)(intptr_t)42, 0);
  expect_settled(c, true, vat_int(42));
  ck_assert_int_eq(vat_promise_peek(c->promise, NULL), VAT_PROMISE_RESOLVED);
  test_quiesce(sys);
  ck_assert_uint_eq(atomic_load(&c->settled), 1);
}
END_TEST

START_TEST(break_delivers_reason) {
  vat_system *sys = test_system(2);
  vat_ref *to = test_spawn(sys, sizeof(callee), NULL);
  caller *c = run_call(sys, to, refuse, NULL, 0);
  expect_settled(c, false, vat_atom_named("refused"));
  test_quiesce(sys);
}
END_TEST

START_TEST(answered_exactly_once) {
  vat_system *sys = test_system(2);
  vat_ref *to = test_spawn(sys, sizeof(callee), NULL);
  caller *c = run_call(sys, to, answer_twice, NULL, 0);
  expect_settled(c, true, vat_int(7));
  test_quiesce(sys);
  ck_assert_uint_eq(atomic_load(&c->settled), 1);
}
END_TEST

START_TEST(answer_in_a_later_turn) {
  vat_system *sys = test_system(2);
  callee *ce;
  vat_ref *to = test_spawn(sys, sizeof(callee), (void **)&ce);
  caller *c = run_call(sys, to, keep, NULL, 0);
  test_sleep(0.02);
  ck_assert_uint_eq(atomic_load(&c->settled), 0);
  /* The request may still be on its way on a loaded machine. */
  ck_assert(test_wait_u64(&ce->kept_n, 1, 10));
  ck_assert_vat_ok(vat_host_send(to, resolve_kept, (void *)(intptr_t)5));
  expect_settled(c, true, vat_int(5));
  test_quiesce(sys);
}
END_TEST

START_TEST(answer_from_another_vat) {
  vat_system *sys = test_system(2);
  callee *ce;
  vat_ref *to = test_spawn(sys, sizeof(callee), (void **)&ce);
  ce->helper = test_spawn(sys, 8, NULL);
  caller *c = run_call(sys, to, delegate, NULL, 0);
  expect_settled(c, true, vat_int(99));
  test_quiesce(sys);
}
END_TEST

/* The callee answers with a promise of its own, resolved later. */
typedef struct follower {
  vat_promise *inner;
  vat_resolver *inner_r;
  _Atomic uint64_t ready;
} follower;

static void answer_with_promise(vat_turn *turn, void *state, void *arg,
                                vat_resolver *r) {
  (void)arg;
  follower *f = state;
  expect_vat_ok(vat_promise_new(&f->inner, &f->inner_r));
  atomic_store_explicit(&f->ready, 1, memory_order_release);
  expect_vat_ok(vat_resolve(turn, r, vat_promise_value(f->inner)));
}

START_TEST(resolve_with_promise_follows_it) {
  vat_system *sys = test_system(2);
  follower *f;
  vat_ref *to = test_spawn(sys, sizeof(follower), (void **)&f);
  caller *c = run_call(sys, to, answer_with_promise, NULL, 0);
  ck_assert(!test_wait_u64(&c->settled, 1, 0.05));
  /* Resolved from this host thread: any thread may. */
  ck_assert(test_wait_u64(&f->ready, 1, 10));
  ck_assert_vat_ok(vat_resolve(NULL, f->inner_r, vat_string("late")));
  expect_settled(c, true, vat_string("late"));
  test_quiesce(sys);
}
END_TEST

/* vat_when on a settled promise still runs as a turn of its own. */
static void when_on_settled(vat_turn *turn, void *state, void *arg) {
  caller *c = state;
  vat_promise *p;
  vat_resolver *r;
  (void)arg;
  expect_vat_ok(vat_promise_new(&p, &r));
  expect_vat_ok(vat_resolve(NULL, r, vat_int(3)) == VAT_EINTURN ? VAT_OK : -99);
  /* Resolving in this turn takes effect at commit. */
  expect_vat_ok(vat_resolve(turn, r, vat_int(3)));
  expect_vat_ok(vat_when(turn, p, record, vat_self(turn)));
  c->turn_done = true;
}

START_TEST(when_never_runs_inside_current_turn) {
  vat_system *sys = test_system(1);
  caller *c;
  vat_ref *ref = test_spawn(sys, sizeof(caller), (void **)&c);
  ck_assert_vat_ok(vat_host_send(ref, when_on_settled, NULL));
  expect_settled(c, true, vat_int(3));
  ck_assert(c->after_turn);
  test_quiesce(sys);
}
END_TEST

/* --- Callee death -----------------------------------------------------------
 */

static void stop_now(vat_turn *turn, void *state, void *arg) {
  (void)state;
  (void)arg;
  expect_vat_ok(vat_stop(turn));
}

START_TEST(broken_when_callee_dead_before) {
  vat_system *sys = test_system(2);
  vat_ref *to = test_spawn(sys, sizeof(callee), NULL);
  ck_assert_vat_ok(vat_host_send(to, stop_now, NULL));
  for (int i = 0; i < 1000 && !vat_ref_is_dead(to); i++)
    test_sleep(0.001);
  ck_assert(vat_ref_is_dead(to));
  caller *c = run_call(sys, to, answer_arg, NULL, 0);
  expect_settled(c, false, vat_atom_value(vat_atom_normal()));
  test_quiesce(sys);
}
END_TEST

START_TEST(broken_when_callee_dies_during_request) {
  vat_system *sys = test_system(2);
  vat_ref *to = test_spawn(sys, sizeof(callee), NULL);
  caller *c = run_call(sys, to, keep_and_stop, NULL, 0);
  expect_settled(c, false, vat_atom_value(vat_atom_normal()));
  test_quiesce(sys);
}
END_TEST

START_TEST(failed_turn_breaks_its_request) {
  vat_system *sys = test_system(2);
  vat_ref *to = test_spawn(sys, sizeof(callee), NULL);
  caller *c = run_call(sys, to, answer_then_fail, NULL, 0);
  expect_settled(c, false, vat_atom_named("crashed"));
  test_quiesce(sys);
}
END_TEST

/* --- Pipelining -------------------------------------------------------------
 */

typedef struct seq_sink {
  uint64_t got[16];
  _Atomic uint64_t n;
} seq_sink;

static void sink_take(vat_turn *turn, void *state, void *arg) {
  (void)turn;
  seq_sink *s = state;
  uint64_t n = atomic_load_explicit(&s->n, memory_order_relaxed);
  if (n < 16)
    s->got[n] = (uintptr_t)arg;
  atomic_store_explicit(&s->n, n + 1, memory_order_release);
}

static void sink_answer(vat_turn *turn, void *state, void *arg,
                        vat_resolver *r) {
  sink_take(turn, state, arg);
  expect_vat_ok(vat_resolve(turn, r, vat_int(1000 + (intptr_t)arg)));
}

typedef struct pipeliner {
  vat_promise *p;
  vat_resolver *r;
  vat_ref *sink;
} pipeliner;

static void pipe_resolve(vat_turn *turn, void *state, void *arg) {
  (void)arg;
  pipeliner *pl = state;
  expect_vat_ok(vat_resolve(turn, pl->r, vat_ref_value(pl->sink)));
  /* Sent after the resolution in the same turn: still after the queued
   * ones. */
  expect_vat_ok(vat_promise_send(turn, pl->p, sink_take, (void *)4));
}

static void pipe_after(vat_turn *turn, void *state, void *arg) {
  (void)arg;
  pipeliner *pl = state;
  expect_vat_ok(vat_promise_send(turn, pl->p, sink_take, (void *)5));
}

typedef struct pipe_state {
  pipeliner pl;
  caller c; /* what the pipelined call's `when` saw */
} pipe_state;

static void record_pipe(vat_turn *turn, void *state, void *ctx, bool ok,
                        vat_value v) {
  record(turn, &((pipe_state *)state)->c, ctx, ok, v);
}

static void pipe_before2(vat_turn *turn, void *state, void *arg) {
  (void)arg;
  pipeliner *pl = &((pipe_state *)state)->pl;
  expect_vat_ok(vat_promise_new(&pl->p, &pl->r));
  for (uintptr_t i = 0; i < 3; i++)
    expect_vat_ok(vat_promise_send(turn, pl->p, sink_take, (void *)i));
  vat_promise *answer;
  expect_vat_ok(
      vat_promise_call(turn, pl->p, sink_answer, (void *)3, 0, &answer));
  expect_vat_ok(vat_when(turn, answer, record_pipe, vat_self(turn)));
}

START_TEST(pipelined_sends_arrive_in_order_after_resolution) {
  vat_system *sys = test_system(2);
  seq_sink *sink;
  vat_ref *sink_ref = test_spawn(sys, sizeof(seq_sink), (void **)&sink);
  pipe_state *ps;
  vat_ref *pref = test_spawn(sys, sizeof(pipe_state), (void **)&ps);
  ps->pl.sink = sink_ref;
  ck_assert_vat_ok(vat_host_send(pref, pipe_before2, NULL));
  test_sleep(0.02);
  ck_assert_uint_eq(atomic_load(&sink->n), 0);
  ck_assert_vat_ok(vat_host_send(pref, pipe_resolve, NULL));
  ck_assert_vat_ok(vat_host_send(pref, pipe_after, NULL));
  ck_assert(test_wait_u64(&sink->n, 6, 10));
  for (uint64_t i = 0; i < 6; i++)
    ck_assert_uint_eq(sink->got[i], i);
  ck_assert(test_wait_u64(&ps->c.settled, 1, 10));
  ck_assert(ps->c.resolved);
  ck_assert(vat_equal(ps->c.value, vat_int(1003)));
  test_quiesce(sys);
  ck_assert_uint_eq(atomic_load(&sink->n), 6);
}
END_TEST

static void pipe_break(vat_turn *turn, void *state, void *arg) {
  (void)arg;
  pipeliner *pl = &((pipe_state *)state)->pl;
  expect_vat_ok(vat_break(turn, pl->r, vat_atom_named("gone")));
}

START_TEST(pipelined_messages_dropped_when_broken) {
  vat_system *sys = test_system(2);
  seq_sink *sink;
  vat_ref *sink_ref = test_spawn(sys, sizeof(seq_sink), (void **)&sink);
  pipe_state *ps;
  vat_ref *pref = test_spawn(sys, sizeof(pipe_state), (void **)&ps);
  ps->pl.sink = sink_ref;
  ck_assert_vat_ok(vat_host_send(pref, pipe_before2, NULL));
  ck_assert_vat_ok(vat_host_send(pref, pipe_break, NULL));
  ck_assert(test_wait_u64(&ps->c.settled, 1, 10));
  ck_assert(!ps->c.resolved);
  ck_assert(vat_equal(ps->c.value, vat_atom_named("gone")));
  test_quiesce(sys);
  ck_assert_uint_eq(atomic_load(&sink->n), 0);
}
END_TEST

/* A pipelined call on a promise that resolves to a number, not a ref; and
 * one on a promise that never resolves, with a timeout of its own. */
typedef struct pipe_odd {
  vat_promise *p, *never;
  vat_resolver *r, *never_r;
  vat_promise *calls[2];
  _Atomic uint64_t settled;
  vat_value reasons[2];
} pipe_odd;

static void odd_settled(vat_turn *turn, void *state, void *ctx, bool ok,
                        vat_value v) {
  (void)turn;
  pipe_odd *po = state;
  po->reasons[(uintptr_t)ctx] = ok ? vat_null() : v;
  atomic_fetch_add(&po->settled, 1);
}

static void odd_start(vat_turn *turn, void *state, void *arg) {
  (void)arg;
  pipe_odd *po = state;
  expect_vat_ok(vat_promise_new(&po->p, &po->r));
  expect_vat_ok(vat_promise_new(&po->never, &po->never_r));
  expect_vat_ok(
      vat_promise_call(turn, po->p, answer_arg, NULL, 0, &po->calls[0]));
  expect_vat_ok(
      vat_promise_call(turn, po->never, answer_arg, NULL, 0.05, &po->calls[1]));
  for (uintptr_t i = 0; i < 2; i++)
    expect_vat_ok(vat_when(turn, po->calls[i], odd_settled, (void *)i));
  expect_vat_ok(vat_resolve(turn, po->r, vat_int(12)));
}

START_TEST(pipelined_call_to_non_ref_or_never) {
  vat_system *sys = test_system(2);
  pipe_odd *po;
  vat_ref *ref = test_spawn(sys, sizeof(pipe_odd), (void **)&po);
  ck_assert_vat_ok(vat_host_send(ref, odd_start, NULL));
  ck_assert(test_wait_u64(&po->settled, 2, 10));
  ck_assert(vat_is_atom(po->reasons[0], vat_atom_not_a_ref()));
  ck_assert(vat_is_atom(po->reasons[1], vat_atom_timeout()));
  test_quiesce(sys);
}
END_TEST

/* --- Timeouts
 * ----------------------------------------------------------------- */

START_TEST(request_timeout_breaks_and_late_answer_dropped) {
  vat_system *sys = test_system(2);
  callee *ce;
  vat_ref *to = test_spawn(sys, sizeof(callee), (void **)&ce);
  double t0 = test_wall_seconds();
  caller *c = run_call(sys, to, keep, NULL, 0.05);
  expect_settled(c, false, vat_atom_value(vat_atom_timeout()));
  double elapsed = test_wall_seconds() - t0;
  ck_assert_msg(elapsed >= 0.05, "broke after %.4f s", elapsed);
  ck_assert_msg(elapsed < 5, "broke after %.4f s", elapsed);
  /* The late answer is accepted and dropped. */
  /* The request may still be on its way on a loaded machine. */
  ck_assert(test_wait_u64(&ce->kept_n, 1, 10));
  ck_assert_vat_ok(vat_host_send(to, resolve_kept, (void *)(intptr_t)1));
  test_sleep(0.02);
  vat_value v;
  ck_assert_int_eq(vat_promise_peek(c->promise, &v), VAT_PROMISE_BROKEN);
  test_quiesce(sys);
  ck_assert_uint_eq(atomic_load(&c->settled), 1);
}
END_TEST

/* A late timeout does nothing visible, so the test looks at the timer
 * itself: on a virtual clock, once the answer came, no timer is pending. */
START_TEST(answer_in_time_cancels_timeout) {
  vat_system *sys = test_host_system(true, 0);
  vat_ref *to = test_spawn(sys, sizeof(callee), NULL);
  caller *c = run_call(sys, to, answer_arg, (void *)(intptr_t)8, 0.5);
  ck_assert_vat_ok(vat_system_run_until_quiescent(sys, 0, NULL));
  expect_settled(c, true, vat_int(8));
  int64_t ns;
  ck_assert_vat_ok(vat_system_next_timer(sys, &ns));
  ck_assert_msg(ns == -1, "a timer is still pending, due in %ld ns", (long)ns);
  ck_assert_vat_ok(vat_system_advance_clock(sys, 1000000000));
  ck_assert_vat_ok(vat_system_run_until_quiescent(sys, 0, NULL));
  test_quiesce(sys);
  ck_assert_uint_eq(atomic_load(&c->settled), 1);
}
END_TEST

/* --- Host threads -----------------------------------------------------------
 */

START_TEST(host_wait_gets_answer) {
  vat_system *sys = test_system(2);
  vat_ref *to = test_spawn(sys, sizeof(callee), NULL);
  vat_promise *p;
  ck_assert_vat_ok(vat_host_call(to, answer_arg, (void *)(intptr_t)11, 0, &p));
  vat_value v;
  ck_assert_vat_ok(vat_promise_wait(p, 10, &v));
  ck_assert(vat_equal(v, vat_int(11)));
  ck_assert_vat_ok(vat_promise_wait(p, 0, &v));
  ck_assert_vat_ok(vat_host_call(to, refuse, NULL, 0, &p));
  ck_assert_vat_err(vat_promise_wait(p, -1, &v), VAT_EBROKEN);
  ck_assert(vat_equal(v, vat_atom_named("refused")));
  test_quiesce(sys);
}
END_TEST

START_TEST(host_wait_times_out) {
  vat_system *sys = test_system(2);
  callee *ce;
  vat_ref *to = test_spawn(sys, sizeof(callee), (void **)&ce);
  vat_promise *p;
  ck_assert_vat_ok(vat_host_call(to, keep, NULL, 0, &p));
  ck_assert_vat_err(vat_promise_wait(p, 0, NULL), VAT_ETIMEDOUT);
  double t0 = test_wall_seconds();
  ck_assert_vat_err(vat_promise_wait(p, 0.05, NULL), VAT_ETIMEDOUT);
  double elapsed = test_wall_seconds() - t0;
  ck_assert_msg(elapsed >= 0.05 && elapsed < 5, "waited %.4f s", elapsed);
  /* Still answerable after a wait gave up. */
  /* The request may still be on its way on a loaded machine. */
  ck_assert(test_wait_u64(&ce->kept_n, 1, 10));
  ck_assert_vat_ok(vat_host_send(to, resolve_kept, (void *)(intptr_t)2));
  vat_value v;
  ck_assert_vat_ok(vat_promise_wait(p, 10, &v));
  ck_assert(vat_equal(v, vat_int(2)));
  /* A request's own timeout, seen by a waiter. */
  ck_assert_vat_ok(vat_host_call(to, keep, NULL, 0.05, &p));
  ck_assert_vat_err(vat_promise_wait(p, 10, &v), VAT_EBROKEN);
  ck_assert(vat_is_atom(v, vat_atom_timeout()));
  test_quiesce(sys);
}
END_TEST

static _Atomic uint64_t wait_rc_seen;

static void wait_in_turn(vat_turn *turn, void *state, void *arg) {
  (void)turn;
  (void)state;
  int rc = vat_promise_wait(arg, 1, NULL);
  atomic_store(&wait_rc_seen, (uint64_t)(rc + 1000));
}

START_TEST(wait_from_turn_is_an_error) {
  vat_system *sys = test_system(2);
  vat_promise *p;
  vat_resolver *r;
  ck_assert_vat_ok(vat_promise_new(&p, &r));
  vat_ref *ref = test_spawn(sys, 8, NULL);
  ck_assert_vat_ok(vat_host_send(ref, wait_in_turn, p));
  for (int i = 0; i < 5000 && atomic_load(&wait_rc_seen) == 0; i++)
    test_sleep(0.001);
  uint64_t seen = atomic_load(&wait_rc_seen);
  ck_assert(seen != 0);
  ck_assert_int_eq((int)seen - 1000, VAT_EINTURN);
  test_quiesce(sys);
}
END_TEST

START_TEST(dead_callee_host_call_breaks) {
  vat_system *sys = test_system(1);
  vat_ref *to = test_spawn(sys, sizeof(callee), NULL);
  ck_assert_vat_ok(vat_host_send(to, stop_now, NULL));
  vat_promise *p;
  ck_assert_vat_ok(vat_host_call(to, answer_arg, NULL, 0, &p));
  vat_value v;
  ck_assert_vat_err(vat_promise_wait(p, 10, &v), VAT_EBROKEN);
  ck_assert(vat_is_atom(v, vat_atom_normal()));
  test_quiesce(sys);
}
END_TEST

START_TEST(promise_as_value) {
  vat_promise *p;
  vat_resolver *r;
  ck_assert_vat_ok(vat_promise_new(&p, &r));
  vat_value v = vat_promise_value(p);
  ck_assert_int_eq(vat_type_of(v), VAT_T_PROMISE);
  ck_assert_ptr_eq(vat_value_promise(v), p);
  ck_assert_ptr_null(vat_value_promise(vat_int(1)));
  ck_assert(vat_equal(v, vat_promise_value(p)));
  ck_assert_uint_eq(vat_hash(v), vat_hash(vat_promise_value(p)));
  char buf[64];
  vat_format(v, buf, sizeof buf);
  ck_assert_msg(strncmp(buf, "<promise 0x", 11) == 0, "%s", buf);
  vat_value list = vat_list(&v, 1);
  ck_assert_ptr_eq(vat_value_promise(vat_at(list, 0)), p);
  ck_assert_int_eq(vat_promise_peek(p, NULL), VAT_PROMISE_PENDING);
  ck_assert_vat_ok(vat_resolve(NULL, r, vat_int(1)));
  ck_assert_vat_err(vat_resolve(NULL, r, vat_int(1)), VAT_EBUSY);
  ck_assert_int_eq(vat_promise_peek(p, NULL), VAT_PROMISE_RESOLVED);
  ck_assert_vat_err(vat_break(NULL, r, vat_null()), VAT_EINVAL);
  ck_assert_vat_err(vat_call(NULL, NULL, answer_arg, NULL, 0, &p),
                    VAT_ENOTINTURN);
}
END_TEST

/* --- Edges of the API the header promises --------------------------------- */

typedef struct edges {
  vat_promise *to_int; /* resolves to an integer: not a ref */
  vat_ref *sink;
  int when_null_p, when_null_fn, send_rc;
} edges;

static void try_edges(vat_turn *turn, void *state, void *arg) {
  (void)arg;
  edges *e = state;
  e->when_null_p = vat_when(turn, NULL, record, NULL);
  e->when_null_fn = vat_when(turn, e->to_int, NULL, NULL);
  /* Pipelined to a promise that settles on an integer: dropped. */
  e->send_rc = vat_promise_send(turn, e->to_int, test_hit, NULL);
}

START_TEST(promise_api_edges) {
  vat_system *sys = test_system(1);
  vat_promise *p;
  vat_resolver *r;
  ck_assert_vat_ok(vat_promise_new(&p, &r));
  ck_assert_ptr_eq(vat_resolver_promise(r), p);
  /* NaN is no timeout: refused, not a wait for ever. */
  ck_assert_vat_err(vat_promise_wait(p, NAN, NULL), VAT_EINVAL);
  ck_assert_vat_err(vat_promise_wait(p, 0, NULL), VAT_ETIMEDOUT);
  test_counter *c;
  edges *e;
  vat_ref *sink = test_spawn_counter(sys, &c);
  vat_ref *ref = test_spawn(sys, sizeof(edges), (void **)&e);
  e->to_int = p;
  e->sink = sink;
  ck_assert_vat_ok(vat_host_send(ref, try_edges, NULL));
  ck_assert_vat_ok(vat_resolve(NULL, r, vat_int(5)));
  vat_value v;
  ck_assert_vat_ok(vat_promise_wait(p, 10, &v));
  ck_assert(vat_equal(v, vat_int(5)));
  ck_assert_vat_ok(vat_host_send(ref, try_edges, NULL)); /* settled now */
  test_quiesce(sys);
  ck_assert_int_eq(e->when_null_p, VAT_EINVAL);
  ck_assert_int_eq(e->when_null_fn, VAT_EINVAL);
  ck_assert_int_eq(e->send_rc, VAT_OK);
  ck_assert_uint_eq(atomic_load(&c->hits), 0);
}
END_TEST

/* promise.h: the wait's timeout is real time, even in deterministic mode,
 * where the virtual clock does not move by itself. */
START_TEST(wait_uses_real_time_in_deterministic_mode) {
  vat_system *sys = test_host_system(true, 0);
  vat_ref *to = test_spawn(sys, sizeof(callee), NULL);
  vat_promise *p;
  ck_assert_vat_ok(vat_host_call(to, answer_arg, (void *)(intptr_t)1, 0, &p));
  double t0 = test_wall_seconds();
  ck_assert_vat_err(vat_promise_wait(p, 0.05, NULL), VAT_ETIMEDOUT);
  double took = test_wall_seconds() - t0;
  ck_assert_msg(took >= 0.05, "waited %.4f s", took);
  ck_assert_uint_eq(vat_system_now(sys), 0); /* the virtual clock stood */
  ck_assert_vat_ok(vat_system_run_until_quiescent(sys, 0, NULL));
  ck_assert_vat_ok(vat_promise_wait(p, 0, NULL));
  test_quiesce(sys);
}
END_TEST

/* promise.h: VAT_ECLOSED once the target's system is closing. */
START_TEST(host_call_into_closed_system) {
  vat_system *sys = test_system(1);
  vat_ref *to = test_spawn(sys, sizeof(callee), NULL);
  ck_assert_vat_ok(vat_system_shutdown(sys, 10));
  vat_promise *p = NULL;
  ck_assert_vat_err(vat_host_call(to, answer_arg, NULL, 0, &p), VAT_ECLOSED);
  ck_assert_vat_ok(vat_system_destroy(sys));
  ck_assert_vat_err(vat_host_call(to, answer_arg, NULL, 0, &p), VAT_ECLOSED);
}
END_TEST

/* --- Stress: many concurrent requests on both workers -------------------- */

/* A tenth as many calls in the hostile build, which collects at every
 * turn: the full size took 27-55 s there, near the case's time limit. */
enum { CALLERS = 64, CALLS_EACH = TEST_SCALE > 1 ? 20 : 200, CALLEES = 16 };

typedef struct stress_callee {
  vat_resolver *kept[4];
  unsigned nkept;
  uint64_t n;
} stress_callee;

/* Answers at once, later, by breaking, or by dying now and then. */
static void stress_handle(vat_turn *turn, void *state, void *arg,
                          vat_resolver *r) {
  stress_callee *s = state;
  uintptr_t k = (uintptr_t)arg;
  s->n++;
  switch (k % 4) {
  case 0:
    expect_vat_ok(vat_resolve(turn, r, vat_int((int64_t)k)));
    break;
  case 1:
    expect_vat_ok(vat_break(turn, r, vat_int((int64_t)k)));
    break;
  default:
    s->kept[s->nkept++] = r;
    if (s->nkept == 4) {
      for (unsigned i = 0; i < 4; i++)
        expect_vat_ok(vat_resolve(turn, s->kept[i], vat_int(-1)));
      s->nkept = 0;
    }
  }
}

typedef struct stress_caller {
  vat_ref **callees;
  _Atomic uint64_t *counts; /* per request */
  _Atomic uint64_t *total;
  uint64_t index;
  uint64_t sent;
} stress_caller;

static void stress_settled(vat_turn *turn, void *state, void *ctx, bool ok,
                           vat_value v) {
  (void)turn;
  (void)ok;
  (void)v;
  stress_caller *c = state;
  atomic_fetch_add(&c->counts[(uintptr_t)ctx], 1);
  atomic_fetch_add(c->total, 1);
}

static void stress_go(vat_turn *turn, void *state, void *arg) {
  (void)arg;
  stress_caller *c = state;
  for (int i = 0; i < 20 && c->sent < CALLS_EACH; i++, c->sent++) {
    uintptr_t id = c->index * CALLS_EACH + c->sent;
    vat_promise *p;
    /* Some requests carry a timeout: a kept resolver may never be used. */
    expect_vat_ok(vat_call(turn, c->callees[(id * 7) % CALLEES], stress_handle,
                           (void *)id, id % 5 == 0 ? 0.2 : 0, &p));
    expect_vat_ok(vat_when(turn, p, stress_settled, (void *)id));
  }
  if (c->sent < CALLS_EACH)
    expect_vat_ok(vat_send(turn, vat_self(turn), stress_go, NULL));
}

static void stress_stop(vat_turn *turn, void *state, void *arg) {
  (void)state;
  (void)arg;
  expect_vat_ok(vat_stop(turn));
}

START_TEST(stress_concurrent_requests_settle_once) {
  vat_system *sys = test_system(2);
  static vat_ref *callees[CALLEES];
  static _Atomic uint64_t counts[CALLERS * CALLS_EACH];
  static _Atomic uint64_t total;
  for (int i = 0; i < CALLEES; i++)
    callees[i] = test_spawn(sys, sizeof(stress_callee), NULL);
  for (uint64_t i = 0; i < CALLERS; i++) {
    stress_caller *c;
    vat_ref *ref = test_spawn(sys, sizeof(stress_caller), (void **)&c);
    *c = (stress_caller){
        .callees = callees, .counts = counts, .total = &total, .index = i};
    ck_assert_vat_ok(vat_host_send(ref, stress_go, NULL));
  }
  /* Kill the callees part-way: their kept resolvers break. */
  test_sleep(0.02);
  for (int i = 0; i < CALLEES; i += 4)
    ck_assert_vat_ok(vat_host_send(callees[i], stress_stop, NULL));
  ck_assert_msg(test_wait_u64(&total, CALLERS * CALLS_EACH, 60),
                "settled %lu of %d", (unsigned long)atomic_load(&total),
                CALLERS * CALLS_EACH);
  test_sleep(0.3); /* room for a second settlement to show up */
  test_quiesce(sys);
  ck_assert_uint_eq(atomic_load(&total), CALLERS * CALLS_EACH);
  for (int i = 0; i < CALLERS * CALLS_EACH; i++)
    ck_assert_uint_eq(atomic_load(&counts[i]), 1);
}
END_TEST

/* --- Pipelined sends keep their order when the promise resolves mid-turn -- */

typedef struct order_sink {
  _Atomic uint64_t n;
  uintptr_t got[2];
} order_sink;

static void order_take(vat_turn *turn, void *state, void *arg) {
  (void)turn;
  order_sink *s = state;
  uint64_t n = atomic_load_explicit(&s->n, memory_order_relaxed);
  if (n < 2)
    s->got[n] = (uintptr_t)arg;
  /* Release: the host that sees the count sees the entry. */
  atomic_store_explicit(&s->n, n + 1, memory_order_release);
}

typedef struct midturn {
  vat_promise *p;
  _Atomic uint64_t sent_a;   /* the handler sent A: resolve now */
  _Atomic uint64_t resolved; /* the host resolved p: send B now */
  _Atomic uint64_t spin_timeouts;
} midturn;

static void send_a_wait_send_b(vat_turn *turn, void *state, void *arg) {
  (void)arg;
  midturn *mt = state;
  expect_vat_ok(vat_promise_send(turn, mt->p, order_take, (void *)1));
  atomic_store_explicit(&mt->sent_a, 1, memory_order_release);
  /* Bounded: a host that never resolves must not hang the worker. */
  double deadline = test_wall_seconds() + 10;
  while (!atomic_load_explicit(&mt->resolved, memory_order_acquire)) {
    if (test_wall_seconds() > deadline) {
      atomic_fetch_add(&mt->spin_timeouts, 1);
      break;
    }
    sched_yield(); /* on a busy machine, let the host thread run */
  }
  expect_vat_ok(vat_promise_send(turn, mt->p, order_take, (void *)2));
}

START_TEST(pipelined_sends_keep_order_when_resolved_mid_turn) {
  enum { ITERATIONS = 2000 / TEST_SCALE };
  uint64_t seed =
      test_seed("pipelined_sends_keep_order_when_resolved_mid_turn");
  vat_system *sys = test_system(2);
  order_sink *sink;
  vat_ref *sink_ref = test_spawn(sys, sizeof(order_sink), (void **)&sink);
  midturn *mt;
  vat_ref *sender = test_spawn(sys, sizeof(midturn), (void **)&mt);
  for (int i = 0; i < ITERATIONS; i++) {
    vat_resolver *r;
    ck_assert_vat_ok(vat_promise_new(&mt->p, &r));
    atomic_store(&mt->sent_a, 0);
    atomic_store(&mt->resolved, 0);
    atomic_store(&sink->n, 0);
    ck_assert_vat_ok(vat_host_send(sender, send_a_wait_send_b, NULL));
    ck_assert(test_wait_u64(&mt->sent_a, 1, 10));
    /* Directly, or through a promise that resolved already (p follows it). */
    vat_value to = vat_ref_value(sink_ref);
    if (test_rand(&seed) & 1) {
      vat_promise *q;
      vat_resolver *qr;
      ck_assert_vat_ok(vat_promise_new(&q, &qr));
      ck_assert_vat_ok(vat_resolve(NULL, qr, to));
      to = vat_promise_value(q);
    }
    ck_assert_vat_ok(vat_resolve(NULL, r, to));
    atomic_store_explicit(&mt->resolved, 1, memory_order_release);
    ck_assert(test_wait_u64(&sink->n, 2, 10));
    ck_assert_msg(sink->got[0] == 1 && sink->got[1] == 2,
                  "iteration %d: the target saw %c then %c", i,
                  sink->got[0] == 1 ? 'A' : 'B', sink->got[1] == 1 ? 'A' : 'B');
  }
  ck_assert_uint_eq(atomic_load(&mt->spin_timeouts), 0);
  test_quiesce(sys);
  ck_assert_uint_eq(atomic_load(&sink->n), 2);
}
END_TEST

/* --- A host woken by an answer finds the answering turn's sends out ------ */

typedef struct probed {
  test_counter c;
  uint64_t hits_at_probe;
  _Atomic uint64_t probes;
} probed;

static void probe(vat_turn *turn, void *state, void *arg) {
  (void)turn;
  (void)arg;
  probed *pr = state;
  pr->hits_at_probe = atomic_load_explicit(&pr->c.hits, memory_order_relaxed);
  atomic_fetch_add_explicit(&pr->probes, 1, memory_order_release);
}

static void send_then_answer(vat_turn *turn, void *state, void *arg,
                             vat_resolver *r) {
  (void)state;
  expect_vat_ok(vat_send(turn, arg, test_hit, NULL));
  expect_vat_ok(vat_resolve(turn, r, vat_int(1)));
}

START_TEST(host_woken_by_answer_finds_the_turns_sends_queued) {
  enum { ITERATIONS = 500 / TEST_SCALE };
  /* One worker: while it is held just after the resolution, nothing else
   * runs, so the probe lands exactly where the host's action would. */
  vat_system *sys = test_system(1);
  probed *pr;
  vat_ref *target = test_spawn(sys, sizeof(probed), (void **)&pr);
  vat_ref *answerer = test_spawn(sys, 8, NULL);
  for (uint64_t i = 0; i < ITERATIONS; i++) {
    vat__test_point_arm("promise.resolve_commit.after_settle");
    vat_promise *p;
    ck_assert_vat_ok(vat_host_call(answerer, send_then_answer, target, 0, &p));
    ck_assert(vat__test_point_wait(10));
    ck_assert_int_eq(vat_promise_peek(p, NULL), VAT_PROMISE_RESOLVED);
    ck_assert_vat_ok(vat_host_send(target, probe, NULL));
    vat__test_point_release();
    ck_assert(test_wait_u64(&pr->probes, i + 1, 10));
    ck_assert_msg(pr->hits_at_probe == i + 1,
                  "iteration %llu: the send made before the answer came "
                  "after the host's probe (%llu hits at the probe)",
                  (unsigned long long)i, (unsigned long long)pr->hits_at_probe);
  }
  test_quiesce(sys);
  ck_assert_uint_eq(atomic_load(&pr->c.hits), ITERATIONS);
}
END_TEST

START_TEST(stress_host_woken_by_answer_finds_the_turns_sends_queued) {
  enum { ITERATIONS = 5000 / TEST_SCALE };
  vat_system *sys = test_system(2);
  probed *pr;
  vat_ref *target = test_spawn(sys, sizeof(probed), (void **)&pr);
  vat_ref *answerer = test_spawn(sys, 8, NULL);
  uint64_t late = 0;
  for (uint64_t i = 0; i < ITERATIONS; i++) {
    vat_promise *p;
    ck_assert_vat_ok(vat_host_call(answerer, send_then_answer, target, 0, &p));
    ck_assert_vat_ok(vat_promise_wait(p, 10, NULL));
    ck_assert_vat_ok(vat_host_send(target, probe, NULL));
    ck_assert(test_wait_u64(&pr->probes, i + 1, 10));
    late += pr->hits_at_probe != i + 1;
  }
  ck_assert_msg(late == 0,
                "%llu of %d probes overtook the answering turn's "
                "send",
                (unsigned long long)late, ITERATIONS);
  test_quiesce(sys);
}
END_TEST

/* --- A resolution and a send of one turn arrive in the turn's order ------- */

typedef struct order_watch {
  vat_promise *p;
  _Atomic uint64_t watching;
  _Atomic uint64_t n;
  char got[2]; /* 'W' the when notification, 'S' the send */
} order_watch;

static void order_note(order_watch *ow, char what) {
  uint64_t n = atomic_load_explicit(&ow->n, memory_order_relaxed);
  if (n < 2)
    ow->got[n] = what;
  atomic_store_explicit(&ow->n, n + 1, memory_order_release);
}

static void order_when(vat_turn *turn, void *state, void *ctx, bool ok,
                       vat_value v) {
  (void)turn;
  (void)ctx;
  (void)ok;
  (void)v;
  order_note(state, 'W');
}

static void order_sent(vat_turn *turn, void *state, void *arg) {
  (void)turn;
  (void)arg;
  order_note(state, 'S');
}

static void order_watch_start(vat_turn *turn, void *state, void *arg) {
  (void)arg;
  order_watch *ow = state;
  expect_vat_ok(vat_when(turn, ow->p, order_when, NULL));
  atomic_store_explicit(&ow->watching, 1, memory_order_release);
}

typedef struct order_resolver {
  vat_resolver *r;
  vat_ref *watcher;
} order_resolver;

static void resolve_then_send(vat_turn *turn, void *state, void *arg) {
  order_resolver * or = state;
  if (arg == NULL)
    expect_vat_ok(vat_resolve(turn, or->r, vat_int(1)));
  expect_vat_ok(vat_send(turn, or->watcher, order_sent, NULL));
  if (arg != NULL)
    expect_vat_ok(vat_resolve(turn, or->r, vat_int(1)));
}

START_TEST(resolution_and_send_arrive_in_turn_order) {
  enum { ITERATIONS = 400 / TEST_SCALE };
  uint64_t seed = test_seed("resolution_and_send_arrive_in_turn_order");
  vat_system *sys = test_system(2);
  order_watch *ow;
  vat_ref *watcher = test_spawn(sys, sizeof(order_watch), (void **)&ow);
  order_resolver * or ;
  vat_ref *resolver = test_spawn(sys, sizeof(order_resolver), (void **)& or);
  or->watcher = watcher;
  for (int i = 0; i < ITERATIONS; i++) {
    bool send_first = test_rand(&seed) & 1;
    ck_assert_vat_ok(vat_promise_new(&ow->p, & or->r));
    atomic_store(&ow->watching, 0);
    atomic_store(&ow->n, 0);
    ck_assert_vat_ok(vat_host_send(watcher, order_watch_start, NULL));
    ck_assert(test_wait_u64(&ow->watching, 1, 10));
    ck_assert_vat_ok(vat_host_send(resolver, resolve_then_send,
                                   send_first ? (void *)1 : NULL));
    ck_assert(test_wait_u64(&ow->n, 2, 10));
    char want0 = send_first ? 'S' : 'W', want1 = send_first ? 'W' : 'S';
    ck_assert_msg(ow->got[0] == want0 && ow->got[1] == want1,
                  "iteration %d: the turn made %c then %c; the watcher saw %c "
                  "then %c",
                  i, want0, want1, ow->got[0], ow->got[1]);
  }
  test_quiesce(sys);
}
END_TEST

/* --- Promises of promise.h no test checked -------------------------------- */

/* A NULL out is VAT_EINVAL, for a host call, a call and a pipelined call
 * alike, and the request is never sent: the callee's handler never runs.
 * (The call used to be sent and then stored through NULL.) */
typedef struct null_outs {
  vat_ref *callee;
  vat_promise *pending;  /* unresolved while the calls are made */
  vat_promise *resolved; /* resolved to the callee already */
  int call_rc, pcall_pending_rc, pcall_resolved_rc;
} null_outs;

static void call_with_null_outs(vat_turn *turn, void *state, void *arg) {
  (void)arg;
  null_outs *n = state;
  n->call_rc = vat_call(turn, n->callee, answer_arg, NULL, 1, NULL);
  n->pcall_pending_rc =
      vat_promise_call(turn, n->pending, answer_arg, NULL, 0, NULL);
  n->pcall_resolved_rc =
      vat_promise_call(turn, n->resolved, answer_arg, NULL, 0, NULL);
}

START_TEST(null_out_is_refused_and_nothing_sent) {
  vat_system *sys = test_host_system(true, 1);
  callee *ce;
  vat_ref *to = test_spawn(sys, sizeof(callee), (void **)&ce);
  ck_assert_vat_err(vat_host_call(to, answer_arg, NULL, 0, NULL), VAT_EINVAL);
  ck_assert_vat_err(vat_host_call(to, answer_arg, NULL, 1, NULL), VAT_EINVAL);
  vat_promise *np;
  vat_resolver *nr;
  ck_assert_vat_err(vat_promise_new(NULL, &nr), VAT_EINVAL);
  ck_assert_vat_err(vat_promise_new(&np, NULL), VAT_EINVAL);
  null_outs *n;
  vat_ref *ref = test_spawn(sys, sizeof(null_outs), (void **)&n);
  n->callee = to;
  vat_resolver *pending_r, *resolved_r;
  ck_assert_vat_ok(vat_promise_new(&n->pending, &pending_r));
  ck_assert_vat_ok(vat_promise_new(&n->resolved, &resolved_r));
  ck_assert_vat_ok(vat_resolve(NULL, resolved_r, vat_ref_value(to)));
  ck_assert_vat_ok(vat_host_send(ref, call_with_null_outs, NULL));
  ck_assert_vat_ok(vat_system_run_until_quiescent(sys, 0, NULL));
  /* A pipelined call the failed vat_promise_call left behind would go
   * now. */
  ck_assert_vat_ok(vat_resolve(NULL, pending_r, vat_ref_value(to)));
  ck_assert_vat_ok(vat_system_advance_clock(sys, 2000000000));
  ck_assert_vat_ok(vat_system_run_until_quiescent(sys, 0, NULL));
  ck_assert_int_eq(n->call_rc, VAT_EINVAL);
  ck_assert_int_eq(n->pcall_pending_rc, VAT_EINVAL);
  ck_assert_int_eq(n->pcall_resolved_rc, VAT_EINVAL);
  ck_assert_uint_eq(ce->handled, 0);
  /* The same calls with an out are sent: the count above can move. */
  vat_promise *p;
  ck_assert_vat_ok(vat_host_call(to, answer_arg, NULL, 0, &p));
  ck_assert_vat_ok(vat_system_run_until_quiescent(sys, 0, NULL));
  ck_assert_uint_eq(ce->handled, 1);
  test_quiesce(sys);
}
END_TEST

/* promise.h: "A promise resolved with itself breaks with promise_cycle". */
START_TEST(promise_resolved_with_itself_breaks_as_a_cycle) {
  vat_system *sys = test_system(1);
  vat_promise *p;
  vat_resolver *r;
  ck_assert_vat_ok(vat_promise_new(&p, &r));
  ck_assert_vat_ok(vat_resolve(NULL, r, vat_promise_value(p)));
  vat_value v;
  ck_assert_vat_err(vat_promise_wait(p, 10, &v), VAT_EBROKEN);
  ck_assert_msg(vat_is_atom(v, vat_atom_intern("promise_cycle")),
                "broke with another reason");
  /* A longer cycle is not caught (promise.h says so): both stay pending. */
  vat_promise *q, *s;
  vat_resolver *qr, *sr;
  ck_assert_vat_ok(vat_promise_new(&q, &qr));
  ck_assert_vat_ok(vat_promise_new(&s, &sr));
  ck_assert_vat_ok(vat_resolve(NULL, qr, vat_promise_value(s)));
  ck_assert_vat_ok(vat_resolve(NULL, sr, vat_promise_value(q)));
  ck_assert_int_eq(vat_promise_peek(q, NULL), VAT_PROMISE_PENDING);
  ck_assert_int_eq(vat_promise_peek(s, NULL), VAT_PROMISE_PENDING);
  /* From a turn, answering a request with its own promise. */
  vat_ref *to = test_spawn(sys, sizeof(callee), NULL);
  caller *c = run_call(sys, to, answer_with_own_promise, NULL, 0);
  expect_settled(c, false, vat_atom_named("promise_cycle"));
  test_quiesce(sys);
}
END_TEST

/* promise.h: a vat handed another vat's resolver owes the answer once it
 * answers: if that turn fails, its vat ends and the promise breaks with
 * the failure, although the callee that got the request lives on. */
START_TEST(failed_turn_of_a_handed_resolver_breaks_it) {
  vat_system *sys = test_system(2);
  callee *ce;
  vat_ref *to = test_spawn(sys, sizeof(callee), (void **)&ce);
  ce->helper = test_spawn(sys, 8, NULL);
  caller *c = run_call(sys, to, delegate_to_failing, NULL, 0);
  expect_settled(c, false, vat_atom_named("helper_crashed"));
  test_quiesce(sys);
  ck_assert(vat_ref_is_dead(ce->helper));
  ck_assert(!vat_ref_is_dead(to));
}
END_TEST

/* --- Held items: a followed promise, a wait that gave up ------------------
 */

/* vat/promise.h: resolving with a promise makes the request follow it; the
 * callee's end breaks only what it still owes, and it owes nothing once it
 * answered, even with a promise still pending. */
static void answer_with_promise_and_stop(vat_turn *turn, void *state, void *arg,
                                         vat_resolver *r) {
  answer_with_promise(turn, state, arg, r);
  expect_vat_ok(vat_stop(turn));
}

START_TEST(a_followed_promise_outlives_the_callee) {
  /* Host-driven: each run goes until nothing is left to do, the callee's
   * end and all it settles included. */
  vat_system *sys = test_host_system(false, 0);
  vat_run_result res;
  for (int same_turn = 0; same_turn < 2; same_turn++) {
    follower *f;
    vat_ref *to = test_spawn(sys, sizeof(follower), (void **)&f);
    caller *c = run_call(
        sys, to, same_turn ? answer_with_promise_and_stop : answer_with_promise,
        NULL, 0);
    ck_assert_vat_ok(vat_system_run_until_quiescent(sys, 0, &res));
    ck_assert_uint_eq(atomic_load(&f->ready), 1);
    if (!same_turn) {
      ck_assert_vat_ok(vat_host_send(to, stop_now, NULL));
      ck_assert_vat_ok(vat_system_run_until_quiescent(sys, 0, &res));
    }
    ck_assert(vat_ref_is_dead(to));
    ck_assert_msg(atomic_load(&c->settled) == 0,
                  "the request settled when its callee ended (%s turn)",
                  same_turn ? "same" : "later");
    ck_assert_vat_ok(vat_resolve(NULL, f->inner_r, vat_string("late")));
    ck_assert_vat_ok(vat_system_run_until_quiescent(sys, 0, &res));
    expect_settled(c, true, vat_string("late"));
  }
  test_quiesce(sys);
}
END_TEST

/* vat/promise.h: a wait that times out leaves `p` as it was, so whoever
 * waits on it or watches it later is told when it settles, at once: not
 * at the end of their own timeout, nor never. */
enum { TOLD_WITHIN_S = TEST_SCALE > 1 ? 10 : 2, LATER_WAIT_S = 30 };

typedef struct watcher {
  vat_promise *p;
  _Atomic uint64_t watching, told;
  double told_at;
} watcher;

static void watched_settled(vat_turn *turn, void *state, void *ctx,
                            bool resolved, vat_value value) {
  (void)turn, (void)ctx, (void)resolved, (void)value;
  watcher *w = state;
  w->told_at = test_wall_seconds();
  atomic_store(&w->told, 1);
}

static void watch_promise(vat_turn *turn, void *state, void *arg) {
  (void)arg;
  watcher *w = state;
  expect_vat_ok(vat_when(turn, w->p, watched_settled, NULL));
  atomic_store(&w->watching, 1);
}

typedef struct later_wait {
  vat_promise *p;
  _Atomic uint64_t started, done;
  int rc;
  double returned_at;
} later_wait;

static void *later_wait_thread(void *arg) {
  later_wait *lw = arg;
  int rc = vat_thread_register();
  atomic_store(&lw->started, 1);
  if (rc == VAT_OK)
    rc = vat_promise_wait(lw->p, LATER_WAIT_S, NULL);
  lw->returned_at = test_wall_seconds();
  lw->rc = rc;
  atomic_store(&lw->done, 1);
  vat_thread_unregister();
  return NULL;
}

START_TEST(a_timed_out_wait_leaves_the_promise_intact) {
  vat_system *sys = test_system(2);
  callee *ce;
  vat_ref *to = test_spawn(sys, sizeof(callee), (void **)&ce);
  vat_promise *p;
  ck_assert_vat_ok(vat_host_call(to, keep, NULL, 0, &p));
  ck_assert(test_wait_u64(&ce->kept_n, 1, 10));
  ck_assert_vat_err(vat_promise_wait(p, 0.01, NULL), VAT_ETIMEDOUT);
  /* Watched after the wait gave up: a turn that has run, so the watch is
   * in place before the promise settles. */
  watcher *w;
  vat_ref *wr = test_spawn(sys, sizeof *w, (void **)&w);
  w->p = p;
  ck_assert_vat_ok(vat_host_send(wr, watch_promise, NULL));
  ck_assert(test_wait_u64(&w->watching, 1, 10));
  later_wait lw = {.p = p};
  pthread_t th;
  ck_assert_int_eq(pthread_create(&th, NULL, later_wait_thread, &lw), 0);
  ck_assert(test_wait_u64(&lw.started, 1, 10));
  double settled_at = test_wall_seconds();
  ck_assert_vat_ok(vat_host_send(to, resolve_kept, (void *)(intptr_t)5));
  /* The watch is deterministic: it is told, or it never is. */
  ck_assert_msg(test_wait_u64(&w->told, 1, TOLD_WITHIN_S),
                "vat_when not told within %d s of the settling", TOLD_WITHIN_S);
  ck_assert(test_wait_u64(&lw.done, 1, LATER_WAIT_S + 10));
  pthread_join(th, NULL);
  ck_assert_vat_ok(lw.rc);
  ck_assert_msg(lw.returned_at - settled_at < TOLD_WITHIN_S,
                "a later wait was told %.3f s after the settling",
                lw.returned_at - settled_at);
  ck_assert_vat_ok(vat_promise_wait(p, 0, NULL));
  test_quiesce(sys);
}
END_TEST

Suite *test_promise_suite(void) {
  Suite *s = suite_create("promise");
  TCase *tc = test_case("promise", 60);
  tcase_add_test(tc, resolve_runs_when_in_observer_vat);
  tcase_add_test(tc, break_delivers_reason);
  tcase_add_test(tc, answered_exactly_once);
  tcase_add_test(tc, answer_in_a_later_turn);
  tcase_add_test(tc, answer_from_another_vat);
  tcase_add_test(tc, resolve_with_promise_follows_it);
  tcase_add_test(tc, when_never_runs_inside_current_turn);
  tcase_add_test(tc, broken_when_callee_dead_before);
  tcase_add_test(tc, broken_when_callee_dies_during_request);
  tcase_add_test(tc, failed_turn_breaks_its_request);
  tcase_add_test(tc, pipelined_sends_arrive_in_order_after_resolution);
  tcase_add_test(tc, pipelined_messages_dropped_when_broken);
  tcase_add_test(tc, pipelined_call_to_non_ref_or_never);
  tcase_add_test(tc, request_timeout_breaks_and_late_answer_dropped);
  tcase_add_test(tc, answer_in_time_cancels_timeout);
  tcase_add_test(tc, host_wait_gets_answer);
  tcase_add_test(tc, host_wait_times_out);
  tcase_add_test(tc, wait_from_turn_is_an_error);
  tcase_add_test(tc, dead_callee_host_call_breaks);
  tcase_add_test(tc, promise_as_value);
  tcase_add_test(tc, promise_api_edges);
  tcase_add_test(tc, wait_uses_real_time_in_deterministic_mode);
  tcase_add_test(tc, host_call_into_closed_system);
  tcase_add_test(tc, stress_concurrent_requests_settle_once);
  tcase_add_test(tc, pipelined_sends_keep_order_when_resolved_mid_turn);
  tcase_add_test(tc, host_woken_by_answer_finds_the_turns_sends_queued);
  tcase_add_test(tc, stress_host_woken_by_answer_finds_the_turns_sends_queued);
  tcase_add_test(tc, resolution_and_send_arrive_in_turn_order);
  tcase_add_test(tc, null_out_is_refused_and_nothing_sent);
  tcase_add_test(tc, promise_resolved_with_itself_breaks_as_a_cycle);
  tcase_add_test(tc, failed_turn_of_a_handed_resolver_breaks_it);
  tcase_add_test(tc, a_followed_promise_outlives_the_callee);
  tcase_add_test(tc, a_timed_out_wait_leaves_the_promise_intact);
  suite_add_tcase(s, tc);
  return s;
}
