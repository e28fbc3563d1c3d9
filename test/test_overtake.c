/* Overtaking: an exit signal that ends a vat takes effect at its next turn
 * boundary, not after its backlog; exits it traps, and exits that do not
 * end it, keep their place behind the sender's earlier messages.
 *
 * Each test parks the target in a turn (a gate the test opens), queues a
 * backlog behind it, sends the signal, then opens the gate: what the
 * target runs after that is exact, not a matter of timing. */
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>

#include "support.h"

enum { BACKLOG = 20000 / TEST_SCALE };

typedef struct target {
  _Atomic uint64_t entered; /* the gate turn started */
  _Atomic uint64_t open;    /* the test opened the gate */
  _Atomic uint64_t handled; /* backlog messages run */
  _Atomic uint64_t trapped; /* exits heard by the trap */
  uint64_t handled_at_trap; /* backlog messages run before the trap ran */
  _Atomic uint64_t gate_done;
  _Atomic uint64_t traps_set; /* trap_exits ran */
} target;

static void gate(vat_turn *turn, void *state, void *arg) {
  (void)turn;
  (void)arg;
  target *t = state;
  atomic_store(&t->entered, 1);
  while (atomic_load(&t->open) == 0)
    test_sleep(0.0005);
  atomic_store(&t->gate_done, 1);
}

static void backlog_msg(vat_turn *turn, void *state, void *arg) {
  (void)turn;
  (void)arg;
  target *t = state;
  atomic_fetch_add(&t->handled, 1);
}

static void on_exit_trapped(vat_turn *turn, void *state, vat_ref *from,
                            vat_value reason) {
  (void)turn;
  (void)from;
  (void)reason;
  target *t = state;
  t->handled_at_trap = atomic_load(&t->handled);
  atomic_fetch_add(&t->trapped, 1);
}

static void trap_exits(vat_turn *turn, void *state, void *arg) {
  (void)arg;
  target *t = state;
  ck_assert_vat_ok(vat_trap_exit(turn, vat_self(turn), on_exit_trapped));
  atomic_fetch_add(&t->traps_set, 1);
}

/* Parks `ref` in its gate turn and queues BACKLOG messages behind it. */
static void park_with_backlog(vat_ref *ref, target *t) {
  ck_assert_vat_ok(vat_host_send(ref, gate, NULL));
  ck_assert(test_wait_u64(&t->entered, 1, 30));
  for (int i = 0; i < BACKLOG; i++)
    expect_vat_ok(vat_host_send(ref, backlog_msg, NULL));
}

static void wait_dead(vat_ref *ref) {
  for (int i = 0; i < 30000 && !vat_ref_is_dead(ref); i++)
    test_sleep(0.001);
  ck_assert(vat_ref_is_dead(ref));
}

static bool reason_is(vat_ref *ref, const vat_atom *atom) {
  return vat_is_atom(vat_ref_exit_reason(ref), atom);
}

/* Parks a vat (trapping exits, or not) behind a backlog, sends it an exit
 * with `reason` from the host, and checks that it ended with `ends_with`
 * having run none of the backlog, which became dead letters. Before, the
 * exit waited behind all of it: handled == BACKLOG. */
static void exit_overtakes(bool trap, const vat_atom *reason,
                           const vat_atom *ends_with) {
  vat_system *sys = test_system(2);
  target *t;
  vat_ref *ref = test_spawn(sys, sizeof *t, (void **)&t);
  if (trap)
    ck_assert_vat_ok(vat_host_send(ref, trap_exits, NULL));
  park_with_backlog(ref, t);
  ck_assert_vat_ok(vat_host_exit(ref, vat_atom_value(reason)));
  atomic_store(&t->open, 1);
  wait_dead(ref);
  ck_assert(reason_is(ref, ends_with));
  test_quiesce(sys);
  uint64_t handled = atomic_load(&t->handled);
  ck_assert_uint_eq(handled, 0);
  ck_assert_uint_eq(test_stats(sys).dead_letters, BACKLOG);
  uint64_t trapped = atomic_load(&t->trapped);
  ck_assert_uint_eq(trapped, 0);
}

START_TEST(kill_overtakes_the_backlog) {
  exit_overtakes(false, vat_atom_killed(), vat_atom_killed());
}
END_TEST

START_TEST(untrapped_error_exit_overtakes_the_backlog) {
  const vat_atom *boom = vat_atom_intern("boom");
  exit_overtakes(false, boom, boom);
}
END_TEST

/* A trap does not stop a kill, and the kill does not wait either. */
START_TEST(kill_overtakes_a_vat_that_traps) {
  exit_overtakes(true, vat_atom_killed(), vat_atom_killed());
}
END_TEST

/* A vat that traps exits hears the exit as a message, after the messages
 * the sender sent before it, as in Erlang. */
START_TEST(trapped_exit_keeps_its_place) {
  vat_system *sys = test_system(2);
  target *t;
  vat_ref *ref = test_spawn(sys, sizeof *t, (void **)&t);
  ck_assert_vat_ok(vat_host_send(ref, trap_exits, NULL));
  park_with_backlog(ref, t);
  ck_assert_vat_ok(vat_host_exit(ref, vat_atom_value(vat_atom_intern("boom"))));
  atomic_store(&t->open, 1);
  ck_assert(test_wait_u64(&t->trapped, 1, 30));
  ck_assert_uint_eq(t->handled_at_trap, BACKLOG);
  ck_assert(!vat_ref_is_dead(ref));
  test_quiesce(sys);
}
END_TEST

/* `normal` from another vat ends nobody (rule 3): it neither overtakes nor
 * costs the backlog anything. */
START_TEST(normal_exit_overtakes_nothing) {
  vat_system *sys = test_system(2);
  target *t;
  vat_ref *ref = test_spawn(sys, sizeof *t, (void **)&t);
  park_with_backlog(ref, t);
  ck_assert_vat_ok(
      vat_host_exit(ref, vat_atom_value(vat_atom_intern("normal"))));
  atomic_store(&t->open, 1);
  ck_assert(test_wait_u64(&t->handled, BACKLOG, 30));
  ck_assert(!vat_ref_is_dead(ref));
  test_quiesce(sys);
}
END_TEST

/* --- Along a link ----------------------------------------------------------
 * The target links L, then L fails; a watcher W's down notification (L
 * sends it after its exit signals) says the exit is queued at the target.
 * Each setup turn ends with a message to L, after its link or monitor
 * (a turn's effects go out in order): when L has run both, L knows of
 * the link and the monitor. */

static _Atomic uint64_t setups_seen;

static void setup_seen(vat_turn *turn, void *state, void *arg) {
  (void)turn;
  (void)state;
  (void)arg;
  atomic_fetch_add(&setups_seen, 1);
}

static void link_to(vat_turn *turn, void *state, void *arg) {
  (void)state;
  vat_ref *peer = arg;
  ck_assert_vat_ok(vat_link(turn, peer));
  ck_assert_vat_ok(vat_send(turn, peer, setup_seen, NULL));
}

static void fail_now(vat_turn *turn, void *state, void *arg) {
  (void)state;
  (void)arg;
  ck_assert_vat_ok(vat_fail(turn, vat_atom_value(vat_atom_intern("boom"))));
}

static _Atomic uint64_t downs;

static void on_down(vat_turn *turn, void *state, uint64_t id, vat_ref *who,
                    vat_value reason) {
  (void)turn;
  (void)state;
  (void)id;
  (void)who;
  (void)reason;
  atomic_fetch_add(&downs, 1);
}

static void watch(vat_turn *turn, void *state, void *arg) {
  (void)state;
  vat_ref *who = arg;
  uint64_t id;
  ck_assert_vat_ok(vat_monitor(turn, who, on_down, &id));
  ck_assert_vat_ok(vat_send(turn, who, setup_seen, NULL));
}

static void link_exit_case(bool trap) {
  atomic_store(&setups_seen, 0);
  atomic_store(&downs, 0);
  vat_system *sys = test_system(2);
  target *t;
  vat_ref *ref = test_spawn(sys, sizeof *t, (void **)&t);
  vat_ref *l = test_spawn(sys, 0, NULL);
  vat_ref *w = test_spawn(sys, 0, NULL);
  if (trap)
    ck_assert_vat_ok(vat_host_send(ref, trap_exits, NULL));
  ck_assert_vat_ok(vat_host_send(ref, link_to, l));
  ck_assert_vat_ok(vat_host_send(w, watch, l));
  ck_assert(test_wait_u64(&setups_seen, 2, 30));
  park_with_backlog(ref, t);
  ck_assert_vat_ok(vat_host_send(l, fail_now, NULL));
  ck_assert(test_wait_u64(&downs, 1, 30));
  atomic_store(&t->open, 1);
  if (trap) {
    ck_assert(test_wait_u64(&t->trapped, 1, 30));
    /* The backlog was queued before L failed: it runs first. */
    ck_assert_uint_eq(t->handled_at_trap, BACKLOG);
    ck_assert(!vat_ref_is_dead(ref));
  } else {
    wait_dead(ref);
    ck_assert(reason_is(ref, vat_atom_intern("boom")));
  }
  test_quiesce(sys);
  uint64_t handled = atomic_load(&t->handled);
  ck_assert_uint_eq(handled, trap ? BACKLOG : 0);
}

START_TEST(link_exit_overtakes_the_backlog) {
  link_exit_case(false);
}
END_TEST

START_TEST(trapped_link_exit_keeps_its_place) {
  link_exit_case(true);
}
END_TEST

/* --- A supervisor's shutdown ---------------------------------------------
 * exit(shutdown) ends a child that does not trap exits at its next turn
 * boundary: the child's `shutdown_s` (long here) is not spent waiting for
 * its backlog. */

static _Atomic(vat_ref *) child;
static target *child_state;

static int start_child(vat_turn *turn, void *arg, vat_ref **out) {
  (void)arg;
  int rc = vat_spawn_link(turn, &(vat_entity_def){.state_size = sizeof(target)},
                          out, (void **)&child_state);
  if (rc == VAT_OK)
    atomic_store(&child, *out);
  return rc;
}

START_TEST(supervisor_shutdown_overtakes_a_childs_backlog) {
  vat_system *sys = test_system(2);
  atomic_store(&child, NULL);
  vat_child_spec spec = {.id = "worker",
                         .start = start_child,
                         .restart = VAT_PERMANENT,
                         .shutdown_s = 30};
  vat_sup_spec sup_spec = {.strategy = VAT_ONE_FOR_ONE,
                           .max_restarts = 1,
                           .max_seconds = 5,
                           .children = &spec,
                           .nchildren = 1};
  vat_ref *sup;
  ck_assert_vat_ok(vat_host_supervisor_start(sys, &sup_spec, &sup));
  for (int i = 0; i < 30000 && atomic_load(&child) == NULL; i++)
    test_sleep(0.001);
  vat_ref *ref = atomic_load(&child);
  ck_assert_ptr_nonnull(ref);
  target *t = child_state;
  park_with_backlog(ref, t);
  ck_assert_vat_ok(vat_host_supervisor_stop(sup));
  /* The supervisor answers this after the stop's turn, whose exit to the
   * child is then queued behind the backlog. */
  test_counter *answers;
  vat_ref *asker = test_spawn_counter(sys, &answers);
  ck_assert_vat_ok(vat_host_supervisor_which_children(sup, asker, test_hit));
  ck_assert(test_wait_u64(&answers->hits, 1, 30));
  atomic_store(&t->open, 1);
  wait_dead(ref);
  ck_assert(reason_is(ref, vat_atom_shutdown()));
  wait_dead(sup);
  test_quiesce(sys);
  uint64_t handled = atomic_load(&t->handled);
  ck_assert_uint_eq(handled, 0);
}
END_TEST

/* --- Stress: random backlogs, kinds of exit and traps, both workers busy --
 * No gate here: the exit races the backlog's handling. What must hold
 * whatever the interleaving: the vat ends exactly when the rules say, with
 * the right reason; every backlog message is run or counted as a dead
 * letter; a trapped exit comes after the whole backlog. */

typedef struct noise {
  vat_ref *peer;
  _Atomic uint64_t *stop;
} noise;

static void bounce(vat_turn *turn, void *state, void *arg) {
  (void)arg;
  noise *n = state;
  if (atomic_load_explicit(n->stop, memory_order_relaxed) == 0)
    expect_vat_ok(vat_send(turn, n->peer, bounce, NULL));
}

/* Waits until run + dead letters since `dead_before` account for `sent`. */
static uint64_t wait_accounted(vat_system *sys, target *t, uint64_t dead_before,
                               uint64_t sent) {
  uint64_t reached = 0;
  for (int i = 0; i < 30000 && reached < sent; i++) {
    reached =
        atomic_load(&t->handled) + (test_stats(sys).dead_letters - dead_before);
    if (reached < sent)
      test_sleep(0.001);
  }
  return reached;
}

/* ThreadSanitizer runs each of these rounds 5-15 times slower. */
#if defined(__SANITIZE_THREAD__)
enum { STRESS_ROUNDS = 60 };
#else
enum { STRESS_ROUNDS = 300 };
#endif

START_TEST(stress_exits_race_backlogs) {
  enum { ROUNDS = STRESS_ROUNDS / TEST_SCALE, MAX_BACKLOG = 3000 / TEST_SCALE };
  enum { KILL, ERROR, NORMAL, KINDS };
  uint64_t seed = test_seed("stress_exits_race_backlogs");
  vat_system *sys = test_system(2);
  /* Two vats bouncing a message keep a worker busy throughout. */
  static _Atomic uint64_t stop;
  atomic_store(&stop, 0);
  noise *a, *b;
  vat_ref *ra = test_spawn(sys, sizeof *a, (void **)&a);
  vat_ref *rb = test_spawn(sys, sizeof *b, (void **)&b);
  *a = (noise){.peer = rb, .stop = &stop};
  *b = (noise){.peer = ra, .stop = &stop};
  ck_assert_vat_ok(vat_host_send(ra, bounce, NULL));
  const vat_atom *boom = vat_atom_intern("boom");
  for (int round = 0; round < ROUNDS; round++) {
    int kind = (int)test_rand_between(&seed, 0, KINDS - 1);
    bool trap = test_rand_between(&seed, 0, 1) == 1;
    uint64_t backlog = test_rand_between(&seed, 0, MAX_BACKLOG);
    target *t;
    vat_ref *ref = test_spawn(sys, sizeof *t, (void **)&t);
    uint64_t dead_before = test_stats(sys).dead_letters;
    /* The trap must be set before the exit arrives: an exit that finds
     * the vat not trapping yet ends it, ahead of the trap's turn. */
    if (trap) {
      ck_assert_vat_ok(vat_host_send(ref, trap_exits, NULL));
      ck_assert(test_wait_u64(&t->traps_set, 1, 30));
    }
    for (uint64_t i = 0; i < backlog; i++)
      expect_vat_ok(vat_host_send(ref, backlog_msg, NULL));
    vat_value reason = kind == KILL    ? vat_atom_value(vat_atom_killed())
                       : kind == ERROR ? vat_atom_value(boom)
                                       : vat_atom_value(vat_atom_normal());
    ck_assert_vat_ok(vat_host_exit(ref, reason));
    bool ends = kind == KILL || (kind == ERROR && !trap);
    if (ends) {
      wait_dead(ref);
      ck_assert_msg(reason_is(ref, kind == KILL ? vat_atom_killed() : boom),
                    "round %d: wrong reason", round);
      uint64_t reached = wait_accounted(sys, t, dead_before, backlog);
      ck_assert_msg(reached == backlog,
                    "round %d: %" PRIu64 " of %" PRIu64 " accounted for", round,
                    reached, backlog);
      ck_assert_uint_eq(atomic_load(&t->trapped), 0);
    } else if (kind == ERROR) {
      ck_assert(test_wait_u64(&t->trapped, 1, 30));
      ck_assert_msg(t->handled_at_trap == backlog,
                    "round %d: trap after %" PRIu64 " of %" PRIu64, round,
                    t->handled_at_trap, backlog);
      ck_assert(!vat_ref_is_dead(ref));
    } else {
      ck_assert(test_wait_u64(&t->handled, backlog, 30));
      ck_assert(!vat_ref_is_dead(ref));
    }
  }
  atomic_store(&stop, 1);
  test_quiesce(sys);
}
END_TEST

/* A second gate, for a vat that must hold its backlog in the private
 * list (taken, not yet run) while the test sets up a race. */
typedef struct held {
  target t;
  _Atomic uint64_t entered2, open2;
} held;

static void gate2(vat_turn *turn, void *state, void *arg) {
  (void)turn;
  (void)arg;
  held *h = state;
  atomic_store(&h->entered2, 1);
  while (atomic_load(&h->open2) == 0)
    test_sleep(0.0005);
}

static void *send_backlog_msg(void *ref) {
  expect_vat_ok(vat_thread_register());
  expect_vat_ok(vat_host_send(ref, backlog_msg, NULL));
  expect_vat_ok(vat_thread_unregister());
  return NULL;
}

/* The kill lands above a producer paused between its exchange and its
 * link, so the first search for it cannot get past that producer's node.
 * The vat must keep asking (the alert stays raised) rather than clear the
 * alert and run its backlog: once the producer finishes, the kill still
 * overtakes everything. Before the re-alert, the backlog all ran. */
START_TEST(kill_hidden_by_a_paused_push_still_overtakes) {
  vat_system *sys = test_system(1);
  held *h;
  vat_ref *ref = test_spawn(sys, sizeof *h, (void **)&h);
  target *t = &h->t;
  /* Gate 1 holds the vat while gate 2 and the backlog queue behind it;
   * opening it lets the vat take them all into its private list, then
   * park again in gate 2. */
  ck_assert_vat_ok(vat_host_send(ref, gate, NULL));
  ck_assert(test_wait_u64(&t->entered, 1, 30));
  ck_assert_vat_ok(vat_host_send(ref, gate2, NULL));
  for (int i = 0; i < BACKLOG; i++)
    expect_vat_ok(vat_host_send(ref, backlog_msg, NULL));
  atomic_store(&t->open, 1);
  ck_assert(test_wait_u64(&h->entered2, 1, 30));

  vat__test_point_arm("mailbox.push.after_exchange");
  pthread_t producer;
  ck_assert_int_eq(pthread_create(&producer, NULL, send_backlog_msg, ref), 0);
  ck_assert_msg(vat__test_point_wait(10), "the producer never paused");
  ck_assert_vat_ok(vat_host_exit(ref, vat_atom_value(vat_atom_killed())));
  atomic_store(&h->open2, 1);
  /* While the producer is paused the kill cannot be found, and nothing
   * of the backlog may run either: give the vat time to (wrongly) run it. */
  ck_assert(!test_wait_u64(&t->handled, 1, 0.2));
  ck_assert(!vat_ref_is_dead(ref));

  vat__test_point_release();
  pthread_join(producer, NULL);
  wait_dead(ref);
  ck_assert(reason_is(ref, vat_atom_killed()));
  test_quiesce(sys);
  ck_assert_uint_eq(atomic_load(&t->handled), 0);
  ck_assert_uint_eq(test_stats(sys).dead_letters, BACKLOG + 1);
}
END_TEST

Suite *test_overtake_suite(void) {
  Suite *s = suite_create("overtake");
  TCase *tc = test_case("signals", 120);
  tcase_add_test(tc, kill_overtakes_the_backlog);
  tcase_add_test(tc, untrapped_error_exit_overtakes_the_backlog);
  tcase_add_test(tc, trapped_exit_keeps_its_place);
  tcase_add_test(tc, kill_overtakes_a_vat_that_traps);
  tcase_add_test(tc, normal_exit_overtakes_nothing);
  tcase_add_test(tc, link_exit_overtakes_the_backlog);
  tcase_add_test(tc, trapped_link_exit_keeps_its_place);
  tcase_add_test(tc, supervisor_shutdown_overtakes_a_childs_backlog);
  tcase_add_test(tc, stress_exits_race_backlogs);
  tcase_add_test(tc, kill_hidden_by_a_paused_push_still_overtakes);
  suite_add_tcase(s, tc);
  return s;
}
