/* Simulation testing (vat/sim.h): the harness's faults in worlds of
 * several systems. A delay holds what a turn on any machine sends; a stop
 * stops the machine of the vat it strikes, and the world goes on. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <gc/gc.h>

#include "sim_programs.h"
#include "support.h"
#include "vat/host.h"
#include "vat/sim.h"

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

Suite *test_sim_world_faults_suite(void) {
  Suite *s = suite_create("sim_world_faults");
  TCase *tc = test_case("faults", 120);
  tcase_add_test(tc, a_delay_holds_sends_on_any_machine);
  suite_add_tcase(s, tc);
  return s;
}
