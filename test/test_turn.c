/* Turns: commit, failure, stop, spawning inside a turn, entities, and the
 * turn-only / host-only rules. */
#include <unistd.h>

#include "core/system.h"
#include "core/worker.h"
#include "support.h"

/* --- A failed turn commits nothing -------------------------------------- */

typedef struct failer {
  vat_ref *peer;
  vat_ref *child;
  int send_after_fail;
  int stop_after_fail;
  int fail_again;
  int fail_null;
} failer;

static void send_then_fail(vat_turn *turn, void *state, void *arg) {
  (void)arg;
  failer *f = state;
  expect_vat_ok(vat_send(turn, f->peer, test_hit, NULL));
  expect_vat_ok(vat_spawn(
      turn,
      &(vat_entity_def){.state_size = sizeof(test_counter), .receive = NULL},
      &f->child, NULL));
  expect_vat_ok(vat_send(turn, f->child, test_hit, NULL));
  f->fail_null = vat_fail(turn, vat_null());
  expect_vat_ok(vat_fail(turn, vat_atom_named("boom")));
  f->send_after_fail = vat_send(turn, f->peer, test_hit, NULL);
  f->stop_after_fail = vat_stop(turn);
  f->fail_again = vat_fail(turn, vat_atom_named("again"));
}

START_TEST(failed_turn_commits_nothing) {
  vat_system *sys = test_system(2);
  test_counter *peer_state;
  vat_ref *peer = test_spawn_counter(sys, &peer_state);
  vat_ref *ref;
  failer *f;
  ck_assert_vat_ok(vat_host_spawn(
      sys, &(vat_entity_def){.state_size = sizeof(failer), .receive = NULL},
      &ref, (void **)&f));
  f->peer = peer;
  ck_assert_vat_ok(vat_host_send(ref, send_then_fail, NULL));
  /* A later message to the dead vat is a dead letter. */
  ck_assert_vat_ok(vat_host_send(ref, send_then_fail, NULL));
  ck_assert_vat_ok(vat_system_shutdown(sys, 30));

  ck_assert_uint_eq(atomic_load(&peer_state->hits), 0);
  ck_assert_int_eq(f->fail_null, VAT_EINVAL);
  ck_assert_int_eq(f->send_after_fail, VAT_ETURNFAILED);
  ck_assert_int_eq(f->stop_after_fail, VAT_ETURNFAILED);
  ck_assert_int_eq(f->fail_again, VAT_ETURNFAILED);
  ck_assert(vat_ref_is_dead(ref));
  ck_assert(vat_is_atom(vat_ref_exit_reason(ref), vat_atom_intern("boom")));
  /* The vat spawned by the failed turn never ran and died with its reason. */
  ck_assert(vat_ref_is_dead(f->child));
  ck_assert(
      vat_is_atom(vat_ref_exit_reason(f->child), vat_atom_intern("boom")));
  vat_stats st = test_stats(sys);
  ck_assert_uint_eq(st.delivered, 1);
  ck_assert_uint_eq(st.dead_letters, 1);
  ck_assert_uint_eq(st.terminated, 2);
  ck_assert_uint_eq(st.spawned, 3); /* peer, failer, and its child */
  ck_assert_vat_ok(vat_system_destroy(sys));
}
END_TEST

/* --- Stop ---------------------------------------------------------------- */

typedef struct stopper {
  vat_ref *peer;
  uint64_t turns;
} stopper;

static void send_then_stop(vat_turn *turn, void *state, void *arg) {
  (void)arg;
  stopper *s = state;
  s->turns++;
  expect_vat_ok(vat_send(turn, s->peer, test_hit, NULL));
  expect_vat_ok(vat_stop(turn));
}

START_TEST(stop_commits_then_ends_normally) {
  vat_system *sys = test_system(2);
  test_counter *peer_state;
  vat_ref *peer = test_spawn_counter(sys, &peer_state);
  vat_ref *ref;
  stopper *s;
  ck_assert_vat_ok(vat_host_spawn(
      sys, &(vat_entity_def){.state_size = sizeof(stopper), .receive = NULL},
      &ref, (void **)&s));
  s->peer = peer;
  ck_assert(!vat_ref_is_dead(ref));
  ck_assert(vat_is_null(vat_ref_exit_reason(ref)));
  for (int i = 0; i < 5; i++)
    ck_assert_vat_ok(vat_host_send(ref, send_then_stop, NULL));
  test_quiesce(sys);
  ck_assert_uint_eq(s->turns, 1);
  ck_assert_uint_eq(atomic_load(&peer_state->hits), 1);
  ck_assert(vat_ref_is_dead(ref));
  ck_assert(vat_is_atom(vat_ref_exit_reason(ref), vat_atom_normal()));
  vat_stats st = test_stats(sys);
  ck_assert_uint_eq(st.dead_letters, 4);
  ck_assert_uint_eq(st.terminated, 1);
}
END_TEST

/* --- Turn-only and host-only calls ---------------------------------------- */

typedef struct misuse {
  vat_turn *saved;
  vat_ref *self;
  int host_send, host_spawn, shutdown, unregister;
  vat_system *seen_system;
} misuse;

static void try_host_calls(vat_turn *turn, void *state, void *arg) {
  misuse *m = state;
  vat_system *sys = arg;
  vat_ref *ignored;
  m->saved = turn;
  m->self = vat_self(turn);
  m->seen_system = vat_turn_system(turn);
  m->host_send = vat_host_send(m->self, test_hit, NULL);
  m->host_spawn = vat_host_spawn(sys, &(vat_entity_def){0}, &ignored, NULL);
  m->shutdown = vat_system_shutdown(sys, 0);
  m->unregister = vat_thread_unregister();
}

START_TEST(host_calls_refused_inside_a_turn) {
  vat_system *sys = test_system(1);
  vat_ref *ref;
  misuse *m;
  ck_assert_vat_ok(vat_host_spawn(
      sys, &(vat_entity_def){.state_size = sizeof(misuse), .receive = NULL},
      &ref, (void **)&m));
  ck_assert_vat_ok(vat_host_send(ref, try_host_calls, sys));
  test_quiesce(sys);
  ck_assert_int_eq(m->host_send, VAT_EINTURN);
  ck_assert_int_eq(m->host_spawn, VAT_EINTURN);
  ck_assert_int_eq(m->shutdown, VAT_EINTURN);
  ck_assert_int_eq(m->unregister, VAT_EINTURN);
  ck_assert_ptr_eq(m->self, ref);
  ck_assert_ptr_eq(m->seen_system, sys);
  /* A turn pointer kept past its turn is refused, not trusted. */
  ck_assert_vat_err(vat_send(m->saved, ref, test_hit, NULL), VAT_ENOTINTURN);
  ck_assert_vat_err(vat_stop(m->saved), VAT_ENOTINTURN);
  ck_assert_ptr_null(vat_self(m->saved));
  ck_assert_ptr_null(vat_turn_system(m->saved));
}
END_TEST

START_TEST(turn_calls_refused_outside_a_turn) {
  vat_system *sys = test_system(1);
  test_counter *c;
  vat_ref *ref = test_spawn_counter(sys, &c);
  vat_ref *out;
  ck_assert_vat_err(vat_send(NULL, ref, test_hit, NULL), VAT_ENOTINTURN);
  ck_assert_vat_err(vat_send_msg(NULL, ref, vat_atom_intern("x"), vat_null()),
                    VAT_ENOTINTURN);
  ck_assert_vat_err(vat_spawn(NULL, &(vat_entity_def){0}, &out, NULL),
                    VAT_ENOTINTURN);
  ck_assert_vat_err(vat_entity_new(NULL, &(vat_entity_def){0}, &out, NULL),
                    VAT_ENOTINTURN);
  ck_assert_vat_err(vat_stop(NULL), VAT_ENOTINTURN);
  ck_assert_vat_err(vat_fail(NULL, vat_atom_named("x")), VAT_ENOTINTURN);
  ck_assert_ptr_null(vat_self(NULL));
  ck_assert_ptr_null(vat_turn_system(NULL));
  test_quiesce(sys);
}
END_TEST

/* --- Bad arguments inside a turn ----------------------------------------- */

typedef struct bad_args {
  int send_null_to, send_null_fn, msg_null_selector, spawn_null_def,
      spawn_null_out, entity_null_def;
} bad_args;

static void try_bad_args(vat_turn *turn, void *state, void *arg) {
  (void)arg;
  bad_args *b = state;
  vat_ref *out;
  b->send_null_to = vat_send(turn, NULL, test_hit, NULL);
  b->send_null_fn = vat_send(turn, vat_self(turn), NULL, NULL);
  b->msg_null_selector = vat_send_msg(turn, vat_self(turn), NULL, vat_null());
  b->spawn_null_def = vat_spawn(turn, NULL, &out, NULL);
  b->spawn_null_out = vat_spawn(turn, &(vat_entity_def){0}, NULL, NULL);
  b->entity_null_def = vat_entity_new(turn, NULL, &out, NULL);
}

START_TEST(bad_arguments_in_a_turn) {
  vat_system *sys = test_system(1);
  vat_ref *ref;
  bad_args *b;
  ck_assert_vat_ok(vat_host_spawn(
      sys, &(vat_entity_def){.state_size = sizeof(bad_args), .receive = NULL},
      &ref, (void **)&b));
  ck_assert_vat_ok(vat_host_send(ref, try_bad_args, NULL));
  test_quiesce(sys);
  ck_assert_int_eq(b->send_null_to, VAT_EINVAL);
  ck_assert_int_eq(b->send_null_fn, VAT_EINVAL);
  ck_assert_int_eq(b->msg_null_selector, VAT_EINVAL);
  ck_assert_int_eq(b->spawn_null_def, VAT_EINVAL);
  ck_assert_int_eq(b->spawn_null_out, VAT_EINVAL);
  ck_assert_int_eq(b->entity_null_def, VAT_EINVAL);
  ck_assert(!vat_ref_is_dead(ref));
}
END_TEST

/* --- Many entities in one vat --------------------------------------------- */

enum { ENTITIES = 1000, HITS_EACH = 20 / (TEST_SCALE > 1 ? 10 : 1) };

typedef struct owner {
  _Atomic uint64_t ready;
  vat_ref *entities[ENTITIES];
  test_counter *states[ENTITIES];
} owner;

static void make_entities(vat_turn *turn, void *state, void *arg) {
  (void)arg;
  owner *o = state;
  for (int i = 0; i < ENTITIES; i++)
    expect_vat_ok(vat_entity_new(
        turn, &(vat_entity_def){.state_size = sizeof(test_counter)},
        &o->entities[i], (void **)&o->states[i]));
  atomic_store_explicit(&o->ready, 1, memory_order_release);
}

START_TEST(many_entities_per_vat) {
  vat_system *sys = test_system(2);
  vat_ref *ref;
  owner *o;
  ck_assert_vat_ok(vat_host_spawn(
      sys, &(vat_entity_def){.state_size = sizeof(owner), .receive = NULL},
      &ref, (void **)&o));
  ck_assert_vat_ok(vat_host_send(ref, make_entities, NULL));
  ck_assert(test_wait_u64(&o->ready, 1, 30));
  for (int r = 0; r < HITS_EACH; r++)
    for (int i = 0; i < ENTITIES; i++)
      expect_vat_ok(vat_host_send(o->entities[i], test_hit, NULL));
  test_quiesce(sys);
  for (int i = 0; i < ENTITIES; i++) {
    ck_assert(vat_ref_same_vat(o->entities[i], ref));
    ck_assert_ptr_eq(vat_ref_system(o->entities[i]), sys);
    ck_assert_uint_eq(atomic_load(&o->states[i]->hits), HITS_EACH);
  }
  ck_assert_uint_eq(test_stats(sys).delivered, 1 + ENTITIES * HITS_EACH);
}
END_TEST

/* --- A failed turn gives its runs' headers back ------------------------- */

/* A turn's consecutive sends to one vat build a run header as they go
 * (core/send.c), taken from the worker's pool. A failed turn sends none of
 * it: the headers go back with the messages. Two turns that fail after
 * the same sends, one in runs and one not, must leave the pool the same. */
enum { RUN_FAIL_SENDS = 12 };

typedef struct run_failer {
  vat_ref *to[RUN_FAIL_SENDS];
} run_failer;

typedef enum { RUNS_FAIL, RUNS_TO_THE_DEAD } run_ending;

static void send_runs(vat_turn *turn, void *state, void *arg) {
  run_failer *f = state;
  bool in_runs = ((uintptr_t)arg & 1) != 0;
  for (int i = 0; i < RUN_FAIL_SENDS; i++)
    /* In runs: three runs of four to one vat each. */
    expect_vat_ok(vat_send(turn, f->to[in_runs ? i / 4 : i], test_hit, NULL));
  if (((uintptr_t)arg >> 1) == RUNS_FAIL)
    expect_vat_ok(vat_fail(turn, vat_atom_named("boom")));
}

/* How many nodes the worker's pool gained over one turn of send_runs. */
static long pool_change_of(vat_system *sys, run_ending ending, bool in_runs) {
  run_failer *f;
  vat_ref *ref = test_spawn(sys, sizeof *f, (void **)&f);
  for (int i = 0; i < RUN_FAIL_SENDS; i++)
    f->to[i] = test_spawn_counter(sys, NULL);
  vat_run_result r;
  ck_assert_vat_ok(vat_system_run(sys, 0, 0, &r)); /* settle the spawns */
  if (ending == RUNS_TO_THE_DEAD) {
    for (int i = 0; i < RUN_FAIL_SENDS; i++)
      ck_assert_vat_ok(
          vat_host_exit(f->to[i], vat_atom_value(vat_atom_killed())));
    ck_assert_vat_ok(vat_system_run(sys, 0, 0, &r));
  }
  vat__msgpool *pool = &sys->workers[0]->pool;
  size_t before = pool->count;
  uintptr_t arg = (uintptr_t)ending << 1 | (in_runs ? 1 : 0);
  ck_assert_vat_ok(vat_host_send(ref, send_runs, (void *)arg));
  ck_assert_vat_ok(vat_system_run(sys, 0, 0, &r));
  return (long)pool->count - (long)before;
}

/* A failed turn sends none of its runs; a run to a vat that ended is
 * dropped whole: either way, the headers go back with the messages. Two
 * turns with the same sends, one in runs and one not, must leave the
 * pool the same. */
static void headers_come_back(run_ending ending) {
  vat_system *sys = test_host_system(false, 0);
  /* The first fills the empty pool from the collector. */
  pool_change_of(sys, ending, false);
  long singles = pool_change_of(sys, ending, false);
  long runs = pool_change_of(sys, ending, true);
  ck_assert_msg(runs == singles,
                "the pool changed by %ld nodes after a turn of runs, by %ld "
                "after one of single sends",
                runs, singles);
  vat_stats st = test_stats(sys);
  ck_assert_uint_eq(st.dead_letters,
                    ending == RUNS_TO_THE_DEAD ? 3 * RUN_FAIL_SENDS : 0);
  test_quiesce(sys);
}

START_TEST(a_failed_turn_gives_back_its_run_headers) {
  headers_come_back(RUNS_FAIL);
}
END_TEST

START_TEST(a_run_to_an_ended_vat_gives_back_its_header) {
  headers_come_back(RUNS_TO_THE_DEAD);
}
END_TEST

/* --- Fairness: a vat that keeps sending to itself still hears others ---- */

typedef struct looper {
  uint64_t loops;
  bool told_to_stop;
} looper;

static void loop_forever(vat_turn *turn, void *state, void *arg) {
  looper *l = state;
  l->loops++;
  if (!l->told_to_stop)
    expect_vat_ok(vat_send(turn, vat_self(turn), loop_forever, arg));
}

static void tell_to_stop(vat_turn *turn, void *state, void *arg) {
  (void)turn;
  (void)arg;
  ((looper *)state)->told_to_stop = true;
}

START_TEST(self_sends_do_not_starve_other_senders) {
  vat_system *sys = test_system(1);
  vat_ref *ref;
  looper *l;
  ck_assert_vat_ok(vat_host_spawn(
      sys, &(vat_entity_def){.state_size = sizeof(looper)}, &ref, (void **)&l));
  ck_assert_vat_ok(vat_host_send(ref, loop_forever, NULL));
  test_sleep(0.02);
  ck_assert_vat_ok(vat_host_send(ref, tell_to_stop, NULL));
  /* Quiescence comes only if the stop message got in between the loop's
   * own messages. */
  test_quiesce(sys);
  ck_assert(l->told_to_stop);
  ck_assert_uint_gt(l->loops, 0);
}
END_TEST

/* --- vat_stop_with: arguments --------------------------------------------- */

typedef struct stop_with_args {
  int null_reason, after_fail;
} stop_with_args;

static void try_stop_with_null(vat_turn *turn, void *state, void *arg) {
  (void)arg;
  stop_with_args *a = state;
  a->null_reason = vat_stop_with(turn, vat_null());
}

static void try_stop_with_after_fail(vat_turn *turn, void *state, void *arg) {
  (void)arg;
  stop_with_args *a = state;
  expect_vat_ok(vat_fail(turn, vat_atom_named("first")));
  a->after_fail = vat_stop_with(turn, vat_atom_named("second"));
}

START_TEST(stop_with_checks_its_arguments) {
  vat_system *sys = test_system(1);
  ck_assert_vat_err(vat_stop_with(NULL, vat_atom_named("x")), VAT_ENOTINTURN);
  vat_ref *ref;
  stop_with_args *a;
  ck_assert_vat_ok(vat_host_spawn(
      sys, &(vat_entity_def){.state_size = sizeof(stop_with_args)}, &ref,
      (void **)&a));
  ck_assert_vat_ok(vat_host_send(ref, try_stop_with_null, NULL));
  test_quiesce(sys);
  ck_assert_int_eq(a->null_reason, VAT_EINVAL);
  ck_assert(!vat_ref_is_dead(ref)); /* a refused call ends nothing */

  sys = test_system(1);
  ck_assert_vat_ok(vat_host_spawn(
      sys, &(vat_entity_def){.state_size = sizeof(stop_with_args)}, &ref,
      (void **)&a));
  ck_assert_vat_ok(vat_host_send(ref, try_stop_with_after_fail, NULL));
  test_quiesce(sys);
  ck_assert_int_eq(a->after_fail, VAT_ETURNFAILED);
  ck_assert(vat_is_atom(vat_ref_exit_reason(ref), vat_atom_intern("first")));
}
END_TEST

/* The last call in a turn names the reason; vat_stop is vat_stop_with
 * `normal`. */
static void stop_twice(vat_turn *turn, void *state, void *arg) {
  (void)state;
  (void)arg;
  expect_vat_ok(vat_stop_with(turn, vat_atom_named("first")));
  expect_vat_ok(vat_stop_with(turn, vat_atom_named("second")));
}

START_TEST(stop_with_last_reason_wins) {
  vat_system *sys = test_system(1);
  vat_ref *ref = test_spawn(sys, 8, NULL);
  ck_assert_vat_ok(vat_host_send(ref, stop_twice, NULL));
  ck_assert_vat_ok(vat_host_send(ref, test_hit, NULL)); /* dead letter */
  test_quiesce(sys);
  ck_assert(vat_ref_is_dead(ref));
  ck_assert(vat_is_atom(vat_ref_exit_reason(ref), vat_atom_intern("second")));
  ck_assert_uint_eq(test_stats(sys).dead_letters, 1);
}
END_TEST

Suite *test_turn_suite(void) {
  Suite *s = suite_create("turn");
  TCase *tc = test_case("turn", 60);
  tcase_add_test(tc, failed_turn_commits_nothing);
  tcase_add_test(tc, stop_commits_then_ends_normally);
  tcase_add_test(tc, host_calls_refused_inside_a_turn);
  tcase_add_test(tc, turn_calls_refused_outside_a_turn);
  tcase_add_test(tc, bad_arguments_in_a_turn);
  tcase_add_test(tc, many_entities_per_vat);
  tcase_add_test(tc, a_failed_turn_gives_back_its_run_headers);
  tcase_add_test(tc, a_run_to_an_ended_vat_gives_back_its_header);
  tcase_add_test(tc, self_sends_do_not_starve_other_senders);
  tcase_add_test(tc, stop_with_checks_its_arguments);
  tcase_add_test(tc, stop_with_last_reason_wins);
  suite_add_tcase(s, tc);
  return s;
}
