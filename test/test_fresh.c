/* Vats just woken (a worker's fresh deque, sched/place.c and sched/pick.h): a tree of vats
 * runs depth first, with few vats alive at once; a spawner's vats run
 * before it makes more; a vat at the bottom of the deque still runs while
 * newer ones keep coming; and an idle worker takes fresh vats from a busy
 * one. */
#include <stdatomic.h>
#include <stdint.h>

#include "support.h"

/* --- A tree runs depth first ---------------------------------------------- */

enum { TREE_FANOUT = 10, TREE_LEAVES = 10000 };

typedef struct tree_node {
  vat_ref *parent; /* NULL for the root */
  uint64_t size;   /* leaves below */
  uint64_t sum;
  unsigned replies_left;
} tree_node;

static _Atomic uint64_t tree_alive, tree_peak, tree_result;

static void tree_child_done(vat_turn *turn, void *state, void *arg);

static void tree_reply(vat_turn *turn, tree_node *n, uint64_t value) {
  if (n->parent != NULL)
    expect_vat_ok(
        vat_send(turn, n->parent, tree_child_done, (void *)(uintptr_t)value));
  else
    atomic_store(&tree_result, value);
  atomic_fetch_sub(&tree_alive, 1);
  vat_stop(turn);
}

static void tree_child_done(vat_turn *turn, void *state, void *arg) {
  tree_node *n = state;
  n->sum += (uintptr_t)arg;
  if (--n->replies_left == 0)
    tree_reply(turn, n, n->sum);
}

static void tree_note_spawned(void) {
  uint64_t alive = atomic_fetch_add(&tree_alive, 1) + 1;
  uint64_t peak = atomic_load(&tree_peak);
  while (alive > peak &&
         !atomic_compare_exchange_weak(&tree_peak, &peak, alive))
    ;
}

static const vat_entity_def tree_def = {.state_size = sizeof(tree_node)};

static void tree_grow(vat_turn *turn, void *state, void *arg) {
  (void)arg;
  tree_node *n = state;
  if (n->size == 1) {
    tree_reply(turn, n, 1);
    return;
  }
  for (unsigned i = 0; i < TREE_FANOUT; i++) {
    vat_ref *ref;
    tree_node *child;
    expect_vat_ok(vat_spawn(turn, &tree_def, &ref, (void **)&child));
    tree_note_spawned();
    *child =
        (tree_node){.parent = vat_self(turn), .size = n->size / TREE_FANOUT};
    expect_vat_ok(vat_send(turn, ref, tree_grow, NULL));
  }
  n->replies_left = TREE_FANOUT;
}

/* Breadth first, every leaf would be alive before the first one ran (more
 * than TREE_LEAVES vats at once, as it was while the run queue was the
 * only queue). Depth first, a path from the root and the siblings waiting
 * beside it: about FANOUT per level. */
START_TEST(a_tree_of_vats_runs_depth_first) {
  vat_system *sys = test_system(1);
  atomic_store(&tree_alive, 1);
  atomic_store(&tree_peak, 1);
  atomic_store(&tree_result, 0);
  vat_ref *root;
  tree_node *r;
  ck_assert_vat_ok(vat_host_spawn(sys, &tree_def, &root, (void **)&r));
  *r = (tree_node){.size = TREE_LEAVES};
  ck_assert_vat_ok(vat_host_send(root, tree_grow, NULL));
  test_quiesce(sys);
  ck_assert_uint_eq(atomic_load(&tree_result), TREE_LEAVES);
  ck_assert_uint_eq(atomic_load(&tree_alive), 0);
  ck_assert_msg(atomic_load(&tree_peak) < 200, "%llu vats alive at once, of %d",
                (unsigned long long)atomic_load(&tree_peak),
                TREE_LEAVES + TREE_LEAVES / 9);
}
END_TEST

/* --- A spawner lets each batch of its vats run before its next ---------
 *
 * On one worker a vat spawns a few vats a turn, each sent one message,
 * and sends itself the next turn: a batch of turns (64) makes 256 vats.
 * They wait in the fresh deque, the spawner behind them in the run queue;
 * were the spawner let in early, each early batch would pile 256 more on
 * the deque (with the run queue's turn every 61st tick, 4,000 alive). */

/* A hundredth in the hostile build, which collects at every turn: the
 * bound does not depend on the total. */
enum { SPAWNS_PER_TURN = 4, SPAWN_TOTAL = 200000 / TEST_SCALE };

static _Atomic uint64_t spawn_alive, spawn_peak;

static void spawned_runs_once(vat_turn *turn, void *state, void *arg) {
  (void)state;
  (void)arg;
  atomic_fetch_sub(&spawn_alive, 1);
  vat_stop(turn);
}

static void spawn_some(vat_turn *turn, void *state, void *arg) {
  (void)arg;
  uint64_t *left = state;
  for (int i = 0; i<SPAWNS_PER_TURN && * left> 0; i++, --*left) {
    vat_ref *ref;
    expect_vat_ok(vat_spawn(turn, &(vat_entity_def){0}, &ref, NULL));
    uint64_t alive = atomic_fetch_add(&spawn_alive, 1) + 1;
    if (alive > atomic_load(&spawn_peak))
      atomic_store(&spawn_peak, alive); /* only this vat writes it */
    expect_vat_ok(vat_send(turn, ref, spawned_runs_once, NULL));
  }
  if (*left > 0)
    expect_vat_ok(vat_send(turn, vat_self(turn), spawn_some, NULL));
}

START_TEST(a_spawner_lets_each_batch_run_before_its_next) {
  vat_system *sys = test_system(1);
  atomic_store(&spawn_alive, 0);
  atomic_store(&spawn_peak, 0);
  uint64_t *left;
  vat_ref *spawner = test_spawn(sys, sizeof *left, (void **)&left);
  *left = SPAWN_TOTAL;
  ck_assert_vat_ok(vat_host_send(spawner, spawn_some, NULL));
  test_quiesce(sys);
  ck_assert_uint_eq(*left, 0);
  ck_assert_uint_eq(atomic_load(&spawn_alive), 0);
  /* A batch's vats, and the next batch's as it is made. */
  ck_assert_msg(atomic_load(&spawn_peak) <= 2 * 64 * SPAWNS_PER_TURN,
                "%llu spawned vats alive at once",
                (unsigned long long)atomic_load(&spawn_peak));
}
END_TEST

/* --- A vat under a stream of newer ones still runs ------------------------
 *
 * On one worker, X is woken and at once displaced to the bottom of the
 * fresh deque. Then two vats hand a token back and forth, each turn also
 * waking a sink, which displaces the token's next holder onto the deque
 * above X: the deque never empties down to X, and without the deque's
 * fairness tick X would wait for the whole stream. */

enum { STREAM_TURNS = 1000000 };

typedef struct streamer {
  vat_ref *other, *sink;
} streamer;

static _Atomic uint64_t stream_turns, turns_before_x;
static _Atomic bool x_ran;

static void stream(vat_turn *turn, void *state, void *arg) {
  streamer *s = state;
  if (atomic_load(&x_ran) || atomic_fetch_add(&stream_turns, 1) >= STREAM_TURNS)
    return;
  expect_vat_ok(vat_send(turn, s->other, stream, arg));
  expect_vat_ok(vat_send(turn, s->sink, test_hit, NULL));
}

static void x_runs(vat_turn *turn, void *state, void *arg) {
  (void)turn;
  (void)state;
  (void)arg;
  atomic_store(&turns_before_x, atomic_load(&stream_turns));
  atomic_store(&x_ran, true);
}

typedef struct starter {
  vat_ref *x, *first;
} starter;

static void start_stream(vat_turn *turn, void *state, void *arg) {
  starter *st = state;
  expect_vat_ok(vat_send(turn, st->x, x_runs, NULL));
  expect_vat_ok(vat_send(turn, st->first, stream, arg));
}

START_TEST(a_vat_under_a_stream_of_newer_ones_still_runs) {
  vat_system *sys = test_system(1);
  atomic_store(&stream_turns, 0);
  atomic_store(&x_ran, false);
  streamer *a, *b;
  vat_ref *ra = test_spawn(sys, sizeof *a, (void **)&a);
  vat_ref *rb = test_spawn(sys, sizeof *b, (void **)&b);
  test_counter *sink_state;
  vat_ref *sink = test_spawn_counter(sys, &sink_state);
  *a = (streamer){.other = rb, .sink = sink};
  *b = (streamer){.other = ra, .sink = sink};
  starter *st;
  vat_ref *rs = test_spawn(sys, sizeof *st, (void **)&st);
  *st = (starter){.x = test_spawn(sys, 0, NULL), .first = ra};
  ck_assert_vat_ok(vat_host_send(rs, start_stream, NULL));
  test_quiesce(sys);
  ck_assert(atomic_load(&x_ran));
  /* The bound is the deque's fairness period (FAIR_FRESH_EVERY batches,
   * two per stream turn here): far below the stream's length. */
  ck_assert_msg(atomic_load(&turns_before_x) < STREAM_TURNS / 10,
                "X waited for %llu stream turns",
                (unsigned long long)atomic_load(&turns_before_x));
}
END_TEST

/* --- An idle worker takes fresh vats from a busy one ----------------------
 *
 * On two workers, one turn wakes three vats: the last stays in its
 * worker's next slot, the first two go to the fresh deque. The vat's next
 * turn, on the same worker, holds it until one of the two has run: only
 * the other worker, taking from the deque, can run it meanwhile. */

static _Atomic bool fresh_ran, seen_while_held;

static void mark_fresh_ran(vat_turn *turn, void *state, void *arg) {
  (void)turn;
  (void)state;
  (void)arg;
  atomic_store(&fresh_ran, true);
}

static void hold_until_taken(vat_turn *turn, void *state, void *arg) {
  (void)turn;
  (void)state;
  (void)arg;
  /* The wait sleeps: under valgrind, which runs one thread at a time, a
   * turn that spins on the clock kept the lock that the thief, counted
   * spinning with both vats in sight, needed to run (a CI run waited out
   * all 10 s). */
  double deadline = test_wall_seconds() + 10;
  while (!atomic_load(&fresh_ran) && test_wall_seconds() < deadline)
    test_sleep(0.0002);
  atomic_store(&seen_while_held, atomic_load(&fresh_ran));
}

typedef struct fanner {
  vat_ref *woken[3];
} fanner;

static void fan_then_hold(vat_turn *turn, void *state, void *arg) {
  fanner *f = state;
  expect_vat_ok(vat_send(turn, f->woken[0], mark_fresh_ran, arg));
  expect_vat_ok(vat_send(turn, f->woken[1], mark_fresh_ran, arg));
  expect_vat_ok(vat_send(turn, f->woken[2], test_hit, arg));
  expect_vat_ok(vat_send(turn, vat_self(turn), hold_until_taken, arg));
}

START_TEST(an_idle_worker_takes_fresh_vats_from_a_busy_one) {
  vat_system *sys = test_system(2);
  atomic_store(&fresh_ran, false);
  atomic_store(&seen_while_held, false);
  fanner *f;
  vat_ref *ref = test_spawn(sys, sizeof *f, (void **)&f);
  test_counter *last;
  for (int i = 0; i < 2; i++)
    f->woken[i] = test_spawn(sys, 0, NULL);
  f->woken[2] = test_spawn_counter(sys, &last);
  ck_assert_vat_ok(vat_host_send(ref, fan_then_hold, NULL));
  test_quiesce(sys);
  ck_assert_msg(atomic_load(&seen_while_held),
                "no fresh vat ran while their worker was busy");
  ck_assert_uint_eq(atomic_load(&last->hits), 1);
}
END_TEST

Suite *test_fresh_suite(void) {
  Suite *s = suite_create("fresh");
  TCase *tc = test_case("order", 120);
  tcase_add_test(tc, a_tree_of_vats_runs_depth_first);
  tcase_add_test(tc, a_spawner_lets_each_batch_run_before_its_next);
  tcase_add_test(tc, a_vat_under_a_stream_of_newer_ones_still_runs);
  tcase_add_test(tc, an_idle_worker_takes_fresh_vats_from_a_busy_one);
  suite_add_tcase(s, tc);
  return s;
}
