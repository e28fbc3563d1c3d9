/* Simulation testing (vat/sim.h): the harness's faults in worlds of
 * several systems. A delay holds what a turn on any machine sends; a stop
 * stops the machine of the vat it strikes, and the world goes on. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <gc/gc.h>

#include "sim_programs.h"
#include "support.h"
#include "vat/exits.h"
#include "vat/host.h"
#include "vat/sim.h"
#include "vat/timer.h"

static vat_system *machine(vat_system *sys, const char *name) {
  vat_sim_system_options mo;
  vat_sim_system_options_default(&mo);
  mo.name = name;
  vat_system *m = NULL;
  expect_vat_ok(vat_sim_system_new(sys, &mo, &m));
  return m;
}

/* --- Two senders on another machine, one message each --------------------- */

typedef struct pair {
  vat_ref *recv, *first, *second;
  char log[4];
  unsigned n;
} pair;

typedef struct pair_state {
  pair *w;
} pair_state;

static void arrive(vat_turn *turn, void *state, void *arg) {
  (void)turn;
  pair *w = ((pair_state *)state)->w;
  w->log[w->n++] = (char)(uintptr_t)arg;
}

static void say(vat_turn *turn, void *state, void *arg) {
  pair *w = ((pair_state *)state)->w;
  expect_vat_ok(vat_send(turn, w->recv, arrive, arg));
}

static vat_ref *spawn_in(vat_system *sys, const char *label, pair *w) {
  vat_ref *v;
  pair_state *st;
  vat_entity_def def = {.state_size = sizeof *st, .label = label};
  if (vat_host_spawn(sys, &def, &v, (void **)&st) != VAT_OK)
    return NULL;
  st->w = w;
  return v;
}

/* The pair lives on machine "far"; the scenario's own system has none of
 * its vats. */
static void *far_pair_setup(vat_system *sys, void *ctx) {
  (void)ctx;
  pair *w = GC_MALLOC(sizeof *w);
  vat_system *far = machine(sys, "far");
  if (far == NULL || !(w->recv = spawn_in(far, "recv", w)) ||
      !(w->first = spawn_in(far, "first", w)) ||
      !(w->second = spawn_in(far, "second", w)))
    return NULL;
  vat_host_send(w->first, say, (void *)(uintptr_t)'1');
  vat_host_send(w->second, say, (void *)(uintptr_t)'2');
  return w;
}

static pair *last_pair;
static bool pair_done(void *world) {
  last_pair = world;
  return ((pair *)world)->n == 2;
}

/* A delay on `first`, a vat of the second machine, holds its message
 * until `second`'s has arrived, whichever ran first, as it does on the
 * first machine (sim_faults: a_delay_strikes_as_planned). */
START_TEST(a_delay_holds_sends_on_any_machine) {
  vat_sim_scenario sc = {
      .name = "far-pair", .setup = far_pair_setup, .done = pair_done};
  unsigned first_first = 0;
  for (uint64_t seed = 1; seed <= 40; seed++) {
    vat_sim_options o = sim_options(seed % 2 ? VAT_SIM_RANDOM : VAT_SIM_PCT, 0);
    vat_sim_result calm, r, again;
    ck_assert_vat_ok(vat_sim_replay(&sc, &o, seed, &calm));
    ck_assert_msg(!calm.failed, "%s", calm.message);
    first_first += last_pair->log[0] == '1';
    o.plan = "step 1: delay first 3 steps";
    ck_assert_vat_ok(vat_sim_replay(&sc, &o, seed, &r));
    ck_assert_msg(!r.failed, "%s", r.message);
    ck_assert_uint_eq(r.nfaults, 1);
    ck_assert_uint_eq(r.faults[0].kind, VAT_SIM_DELAY);
    ck_assert_msg(memcmp(last_pair->log, "21", 2) == 0, "seed %llu: %s: %.2s",
                  (unsigned long long)seed, r.plan, last_pair->log);
    ck_assert(r.digest != calm.digest);
    o.plan = r.plan;
    ck_assert_vat_ok(vat_sim_replay(&sc, &o, seed, &again));
    ck_assert_uint_eq(again.digest, r.digest);
  }
  ck_assert_uint_ge(first_first, 10); /* which the delay reversed */
}
END_TEST

/* --- A stop in a world of two machines ------------------------------------
 * "near" (the scenario's own system) runs a chain of CHAIN turns; on
 * "far", a sender sends the receiver one message a turn, SENT in all. A
 * stop fault on a vat stops that vat's machine alone: the other one runs
 * on to its end. */

enum { CHAIN = 20, SENT = 10 };

typedef struct two {
  vat_system *near, *far;
  vat_ref *chain, *recv, *sender;
  unsigned chained, got;
  unsigned far_turns;         /* turns run on far */
  unsigned far_turns_stopped; /* ...when it was first seen stopped */
  bool seen_stopped, seen_crashed, recv_shutdown, near_shutdown;
  unsigned checks_at_end;
} two;

typedef struct two_state {
  two *w;
} two_state;

static void late(vat_turn *turn, void *state, void *arg) {
  (void)turn, (void)arg;
  ((two_state *)state)->w->chained++;
}

/* The chain's last link comes 10 ms later, past the crash planned for
 * "far" at 5 ms. */
static void link_step(vat_turn *turn, void *state, void *arg) {
  two *w = ((two_state *)state)->w;
  w->chained++;
  uintptr_t left = (uintptr_t)arg;
  if (left > 2)
    expect_vat_ok(
        vat_send(turn, vat_self(turn), link_step, (void *)(left - 1)));
  else if (left == 2)
    expect_vat_ok(vat_later(turn, 0.010, vat_self(turn), late, NULL, NULL));
}

static void got(vat_turn *turn, void *state, void *arg) {
  (void)turn, (void)arg;
  two *w = ((two_state *)state)->w;
  w->got++;
  w->far_turns++;
}

static void send_one(vat_turn *turn, void *state, void *arg) {
  two *w = ((two_state *)state)->w;
  w->far_turns++;
  expect_vat_ok(vat_send(turn, w->recv, got, NULL));
  uintptr_t left = (uintptr_t)arg;
  if (left > 1)
    expect_vat_ok(vat_send(turn, vat_self(turn), send_one, (void *)(left - 1)));
}

static vat_ref *spawn_two(vat_system *sys, const char *label, two *w) {
  vat_ref *v;
  two_state *st;
  vat_entity_def def = {.state_size = sizeof *st, .label = label};
  if (vat_host_spawn(sys, &def, &v, (void **)&st) != VAT_OK)
    return NULL;
  st->w = w;
  return v;
}

static two *last_two;

static void *two_setup(vat_system *sys, void *ctx) {
  (void)ctx;
  two *w = last_two = GC_MALLOC(sizeof *w);
  w->near = sys;
  if ((w->far = machine(sys, "far")) == NULL ||
      !(w->chain = spawn_two(sys, "chain", w)) ||
      !(w->recv = spawn_two(w->far, "recv", w)) ||
      !(w->sender = spawn_two(w->far, "sender", w)) ||
      vat_sim_system_crash(w->far, 5000000) != VAT_OK)
    return NULL;
  vat_host_send(w->chain, link_step, (void *)(uintptr_t)CHAIN);
  vat_host_send(w->sender, send_one, (void *)(uintptr_t)SENT);
  return w;
}

static bool two_check(void *world, bool quiescent, char *why, size_t n) {
  (void)why, (void)n;
  two *w = world;
  if (!w->seen_stopped && vat_sim_system_stopped(w->far)) {
    w->seen_stopped = true;
    w->far_turns_stopped = w->far_turns;
  }
  w->seen_crashed |= vat_sim_system_crashed(w->far);
  if (quiescent) {
    w->checks_at_end++;
    w->recv_shutdown =
        vat_is_atom(vat_ref_exit_reason(w->recv), vat_atom_shutdown());
    w->near_shutdown =
        vat_is_atom(vat_ref_exit_reason(w->chain), vat_atom_shutdown());
  }
  return true;
}

static bool two_done(void *world) {
  return ((two *)world)->chained == CHAIN;
}

/* A stop on `recv` stops "far" after that step: none of its vats runs
 * again, its vats read `shutdown` (and are not ended), a crash planned
 * for it later never comes, and "near" runs its chain to the end; the
 * world ends as any does, `done` asked. The stop is in the plan, the
 * machine's stop in the notes, and both replay. */
START_TEST(a_stop_stops_the_struck_vats_machine) {
  vat_sim_scenario sc = {
      .name = "two", .setup = two_setup, .check = two_check, .done = two_done};
  for (uint64_t seed = 1; seed <= 20; seed++) {
    vat_sim_options o = sim_options(seed % 2 ? VAT_SIM_RANDOM : VAT_SIM_PCT, 0);
    o.plan = "step 3: stop recv";
    vat_sim_result r, again;
    ck_assert_vat_ok(vat_sim_replay(&sc, &o, seed, &r));
    two *w = last_two;
    ck_assert_msg(!r.failed, "seed %llu: %s", (unsigned long long)seed,
                  r.message);
    ck_assert_uint_eq(r.nfaults, 1);
    ck_assert_uint_eq(r.faults[0].kind, VAT_SIM_STOP);
    ck_assert_uint_eq(w->chained, CHAIN);
    ck_assert(w->seen_stopped);
    ck_assert(!w->seen_crashed);
    ck_assert_uint_eq(w->far_turns, w->far_turns_stopped);
    ck_assert_uint_lt(w->got, SENT);
    ck_assert(w->recv_shutdown);
    ck_assert(!vat_ref_is_dead(w->recv));
    ck_assert(!w->near_shutdown);
    ck_assert_uint_eq(w->checks_at_end, 1);
    ck_assert_msg(strstr(r.notes, "ms: stop far") != NULL, "%s", r.notes);
    ck_assert_msg(strstr(r.notes, "crash") == NULL, "%s", r.notes);
    ck_assert_uint_eq(r.now_ns, 10000000);
    o.plan = r.plan;
    ck_assert_vat_ok(vat_sim_replay(&sc, &o, seed, &again));
    ck_assert_uint_eq(again.digest, r.digest);
    ck_assert_str_eq(again.notes, r.notes);
  }
  /* The scenario's own machine stops the same way: "far" runs on. */
  vat_sim_options o = sim_options(VAT_SIM_RANDOM, 0);
  o.plan = "step 3: stop chain";
  o.shrink_runs = 0; /* its runs would be the last world seen */
  vat_sim_result r;
  ck_assert_vat_ok(vat_sim_replay(&sc, &o, 1, &r));
  ck_assert_uint_eq(r.nfaults, 1);
  ck_assert(r.failed); /* its chain was cut: not done */
  ck_assert_uint_eq(r.verdict, VAT_SIM_STUCK);
  ck_assert_uint_lt(last_two->chained, CHAIN);
  ck_assert_uint_eq(last_two->got, SENT);
  ck_assert(last_two->near_shutdown);
  ck_assert(!last_two->seen_stopped);
  ck_assert_msg(strstr(r.notes, "ms: stop m0") != NULL, "%s", r.notes);
}
END_TEST

Suite *test_sim_world_faults_suite(void) {
  Suite *s = suite_create("sim_world_faults");
  TCase *tc = test_case("faults", 120);
  tcase_add_test(tc, a_delay_holds_sends_on_any_machine);
  tcase_add_test(tc, a_stop_stops_the_struck_vats_machine);
  suite_add_tcase(s, tc);
  return s;
}
