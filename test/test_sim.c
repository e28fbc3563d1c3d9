/* Simulation testing (vat/sim.h): the harness itself (every seed passes
 * when nothing is wrong, a failure names its seed, replay is exact, the
 * strategies and faults do what they say), and two programs with classic
 * bugs that the campaigns must find, with fixed versions that must pass:
 * the bank (its program is examples/bank_accounts.c) and the locks. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <gc/gc.h>

#include "sim_programs.h"
#include "support.h"
#include "vat/exits.h"
#include "vat/host.h"
#include "vat/observe.h"
#include "vat/sim.h"
#include "vat/timer.h"

/* --- A ring: vats pass a token around, and log who had it ----------------- */

enum { RING_VATS = 3, RING_HOPS = 30 };

typedef struct ring_world {
  vat_ref *vats[RING_VATS];
  uint64_t log_digest; /* of the order in which vats handled the token */
  uint64_t hops;
  uint64_t setups;
} ring_world;

typedef struct ring_vat {
  ring_world *world;
  unsigned index;
  vat_ref *next;
} ring_vat;

static void ring_hop(vat_turn *turn, void *state, void *arg) {
  ring_vat *v = state;
  uint64_t left = (uint64_t)(uintptr_t)arg;
  v->world->log_digest = (v->world->log_digest ^ v->index) * 0x100000001B3ull;
  v->world->hops++;
  if (left > 0)
    expect_vat_ok(
        vat_send(turn, v->next, ring_hop, (void *)(uintptr_t)(left - 1)));
}

/* Two tokens, so that the schedule matters: two vats are often ready. */
static void *ring_setup(vat_system *sys, void *ctx) {
  (void)ctx;
  ring_world *w = GC_MALLOC(sizeof *w);
  w->log_digest = 0xCBF29CE484222325ull;
  ring_vat *st[RING_VATS];
  for (unsigned i = 0; i < RING_VATS; i++) {
    vat_entity_def def = {.state_size = sizeof(ring_vat)};
    if (vat_host_spawn(sys, &def, &w->vats[i], (void **)&st[i]) != VAT_OK)
      return NULL;
    st[i]->world = w;
    st[i]->index = i;
  }
  for (unsigned i = 0; i < RING_VATS; i++)
    st[i]->next = w->vats[(i + 1) % RING_VATS];
  vat_host_send(w->vats[0], ring_hop, (void *)(uintptr_t)RING_HOPS);
  vat_host_send(w->vats[1], ring_hop, (void *)(uintptr_t)RING_HOPS);
  return w;
}

static bool ring_check(void *world, bool quiescent, char *why, size_t n) {
  ring_world *w = world;
  if (w->hops > 2 * (RING_HOPS + 1)) {
    snprintf(why, n, "%llu hops", (unsigned long long)w->hops);
    return false;
  }
  (void)quiescent;
  return true;
}

static bool ring_done(void *world) {
  return ((ring_world *)world)->hops == 2 * (RING_HOPS + 1);
}

static const vat_sim_scenario ring = {.name = "ring",
                                      .setup = ring_setup,
                                      .check = ring_check,
                                      .done = ring_done};

START_TEST(a_program_that_holds_passes_every_seed) {
  for (int s = VAT_SIM_RANDOM; s <= VAT_SIM_PCT; s++) {
    vat_sim_options o = sim_options(s, 0);
    vat_sim_result r;
    ck_assert_vat_ok(vat_sim_run(&ring, &o, 1, 300, &r));
    ck_assert_msg(!r.failed, "%s: seed %llu: %s", sim_strategy_name(s),
                  (unsigned long long)r.seed, r.message);
    ck_assert_uint_eq(r.seeds_run, 300);
    ck_assert_uint_eq(r.seed, 300);
    ck_assert_uint_eq(r.total_turns, 300 * 2 * (RING_HOPS + 1));
    ck_assert_str_eq(r.message, "");
  }
}
END_TEST

/* Fails on its fifth world: the campaign from seed 10 must report 14. */
static void *fifth_fails_setup(vat_system *sys, void *ctx) {
  uint64_t *setups = ctx;
  ring_world *w = ring_setup(sys, NULL);
  w->setups = ++*setups;
  return w;
}

static bool fifth_fails_check(void *world, bool quiescent, char *why,
                              size_t n) {
  ring_world *w = world;
  if (w->setups == 5 && w->hops == 7) {
    snprintf(why, n, "seven hops in world %llu", (unsigned long long)w->setups);
    return false;
  }
  return ring_check(world, quiescent, why, n);
}

START_TEST(a_failure_is_reported_with_its_seed_and_replay) {
  uint64_t setups = 0;
  vat_sim_scenario sc = {.name = "fifth",
                         .setup = fifth_fails_setup,
                         .check = fifth_fails_check,
                         .done = ring_done,
                         .ctx = &setups};
  vat_sim_options o = sim_options(VAT_SIM_RANDOM, 0);
  vat_sim_result r;
  ck_assert_vat_ok(vat_sim_run(&sc, &o, 10, 100, &r));
  ck_assert(r.failed);
  ck_assert_uint_eq(r.seed, 14);
  ck_assert_uint_eq(r.seeds_run, 5);
  ck_assert_uint_eq(r.turns, 7);
  ck_assert_str_eq(r.message, "invariant after turn 7: seven hops in world 5");
  ck_assert_str_eq(r.plan, "none");
  const char *first = "VAT_SIM_SEED=14\n# scenario fifth, random, ";
  ck_assert_msg(strncmp(r.replay, first, strlen(first)) == 0, "%s", r.replay);
  ck_assert_msg(strstr(r.replay, "vat_sim_replay(scenario, options, 14, out)"),
                "%s", r.replay);
}
END_TEST

START_TEST(vat_sim_seed_runs_that_seed_alone) {
  setenv("VAT_SIM_SEED", "42", 1);
  vat_sim_options o = sim_options(VAT_SIM_PCT, 0);
  vat_sim_result r, again;
  ck_assert_vat_ok(vat_sim_run(&ring, &o, 1, 100, &r));
  ck_assert_uint_eq(r.seeds_run, 1);
  ck_assert_uint_eq(r.seed, 42);
  unsetenv("VAT_SIM_SEED");
  ck_assert_vat_ok(vat_sim_replay(&ring, &o, 42, &again));
  ck_assert_uint_eq(again.digest, r.digest);
  /* Decimal as the replay line prints it, even after a 0 (not octal);
   * hexadecimal only after 0x. */
  setenv("VAT_SIM_SEED", "042", 1);
  ck_assert_vat_ok(vat_sim_run(&ring, &o, 1, 100, &r));
  ck_assert_uint_eq(r.seed, 42);
  setenv("VAT_SIM_SEED", "0x2a", 1);
  ck_assert_vat_ok(vat_sim_run(&ring, &o, 1, 100, &r));
  ck_assert_uint_eq(r.seed, 42);
  setenv("VAT_SIM_SEED", "4x", 1);
  ck_assert_vat_err(vat_sim_run(&ring, &o, 1, 100, &r), VAT_EINVAL);
  unsetenv("VAT_SIM_SEED");
}
END_TEST

/* A world whose system cannot be made (here: the campaign is started
 * from inside a turn, where vat_system_new refuses) ends the campaign
 * with that error, and the result names the seed and says why, with no
 * figures left over from another seed. */
static vat_sim_result in_turn_result;
static int in_turn_rc;
static void campaign_in_a_turn(vat_turn *turn, void *state, void *arg) {
  (void)turn, (void)state, (void)arg;
  memset(&in_turn_result, 0x5a, sizeof in_turn_result);
  in_turn_rc = vat_sim_run(&ring, NULL, 7, 3, &in_turn_result);
}

START_TEST(a_world_that_cannot_be_made_is_reported) {
  vat_system *sys = test_host_system(true, 1);
  vat_ref *v = test_spawn(sys, 8, NULL);
  ck_assert_vat_ok(vat_host_send(v, campaign_in_a_turn, NULL));
  vat_run_result rr;
  ck_assert_vat_ok(vat_system_run_until_quiescent(sys, 0, &rr));
  ck_assert_vat_err(in_turn_rc, VAT_EINTURN);
  const vat_sim_result *r = &in_turn_result;
  ck_assert(!r->failed);
  ck_assert_uint_eq(r->seed, 7);
  ck_assert_uint_eq(r->seeds_run, 1);
  ck_assert_uint_eq(r->turns, 0);
  ck_assert_uint_eq(r->steps, 0);
  ck_assert_uint_eq(r->nfaults, 0);
  ck_assert_uint_eq(r->total_turns, 0);
  ck_assert_str_eq(r->plan, "none");
  ck_assert_msg(strstr(r->message, "VAT_EINTURN") != NULL, "%s", r->message);
  ck_assert_msg(strncmp(r->replay, "VAT_SIM_SEED=7\n", 15) == 0, "%s",
                r->replay);
  test_quiesce(sys);
}
END_TEST

/* The same seed runs the same turns in the same order: the harness's
 * digest of its choices and the program's own log of who ran agree run
 * after run, faults included, and other seeds run other orders. */
static uint64_t last_log;
static void *logging_setup(vat_system *sys, void *ctx) {
  (void)ctx;
  return ring_setup(sys, NULL);
}
static bool logging_done(void *world) {
  last_log = ((ring_world *)world)->log_digest;
  return true; /* faults may stop the ring early */
}

START_TEST(replay_is_exact) {
  vat_sim_scenario sc = {
      .name = "log", .setup = logging_setup, .done = logging_done};
  for (int run = 0; run < 4; run++) {
    vat_sim_strategy s = run % 2 ? VAT_SIM_PCT : VAT_SIM_RANDOM;
    vat_sim_options o = sim_options(s, run < 2 ? 0 : 0.02);
    uint64_t distinct = 0, prev = 0;
    for (uint64_t seed = 1; seed <= 40; seed++) {
      vat_sim_result a, b;
      ck_assert_vat_ok(vat_sim_replay(&sc, &o, seed, &a));
      uint64_t log_a = last_log;
      ck_assert_vat_ok(vat_sim_replay(&sc, &o, seed, &b));
      ck_assert_uint_eq(last_log, log_a);
      ck_assert_uint_eq(a.digest, b.digest);
      ck_assert_uint_eq(a.turns, b.turns);
      ck_assert_uint_eq(a.steps, b.steps);
      ck_assert_str_eq(a.plan, b.plan);
      distinct += log_a != prev;
      prev = log_a;
    }
    ck_assert_uint_ge(distinct, 30);
  }
}
END_TEST

START_TEST(bad_arguments_are_refused) {
  vat_sim_result r;
  vat_sim_options o = sim_options(VAT_SIM_RANDOM, 0);
  vat_sim_scenario no_setup = {.name = "x"};
  ck_assert_vat_err(vat_sim_run(NULL, &o, 1, 1, &r), VAT_EINVAL);
  ck_assert_vat_err(vat_sim_run(&no_setup, &o, 1, 1, &r), VAT_EINVAL);
  ck_assert_vat_err(vat_sim_run(&ring, &o, 1, 1, NULL), VAT_EINVAL);
  ck_assert_vat_err(vat_sim_run(&ring, &o, 1, 0, &r), VAT_EINVAL);
  o.fault_rate = 1.5;
  ck_assert_vat_err(vat_sim_run(&ring, &o, 1, 1, &r), VAT_EINVAL);
  o = sim_options(VAT_SIM_PCT, 0);
  o.pct_depth = 0;
  ck_assert_vat_err(vat_sim_run(&ring, &o, 1, 1, &r), VAT_EINVAL);
  o = sim_options((vat_sim_strategy)7, 0);
  ck_assert_vat_err(vat_sim_replay(&ring, &o, 1, &r), VAT_EINVAL);
  ck_assert_vat_ok(vat_sim_run(&ring, NULL, 1, 2, &r)); /* defaults */
  ck_assert(!r.failed);
}
END_TEST

/* PCT with depth 1 has no change point: the vat of highest priority runs
 * whenever it is ready, so two vats each sent a burst never interleave;
 * uniform choices interleave them. */
typedef struct burst_world {
  char log[64];
  unsigned n;
} burst_world;

static void burst_note(vat_turn *turn, void *state, void *arg) {
  (void)turn;
  burst_world *w = *(burst_world **)state;
  w->log[w->n++] = (char)(uintptr_t)arg;
}

static void *burst_setup(vat_system *sys, void *ctx) {
  (void)ctx;
  burst_world *w = GC_MALLOC(sizeof *w);
  for (char c = 'a'; c <= 'b'; c++) {
    vat_ref *v;
    burst_world **st;
    vat_entity_def def = {.state_size = sizeof *st};
    if (vat_host_spawn(sys, &def, &v, (void **)&st) != VAT_OK)
      return NULL;
    *st = w;
    for (int i = 0; i < 20; i++)
      vat_host_send(v, burst_note, (void *)(uintptr_t)c);
  }
  return w;
}

static unsigned switches(const burst_world *w) {
  unsigned n = 0;
  for (unsigned i = 1; i < w->n; i++)
    n += w->log[i] != w->log[i - 1];
  return n;
}

static unsigned last_switches;
static void *last_burst;
static bool burst_done(void *world) {
  last_burst = world;
  last_switches = switches(world);
  return ((burst_world *)world)->n == 40;
}

START_TEST(pct_runs_the_highest_priority_vat) {
  vat_sim_scenario sc = {
      .name = "burst", .setup = burst_setup, .done = burst_done};
  vat_sim_options pct = sim_options(VAT_SIM_PCT, 0);
  pct.pct_depth = 1;
  vat_sim_options uniform = sim_options(VAT_SIM_RANDOM, 0);
  vat_sim_options pct2 = sim_options(VAT_SIM_PCT, 0);
  pct2.pct_depth = 2;
  pct2.pct_steps = 40;
  unsigned interleaved = 0, changed = 0, a_first = 0;
  for (uint64_t seed = 1; seed <= 50; seed++) {
    vat_sim_result r;
    ck_assert_vat_ok(vat_sim_replay(&sc, &pct, seed, &r));
    ck_assert(!r.failed);
    ck_assert_uint_eq(last_switches, 1);
    ck_assert_vat_ok(vat_sim_replay(&sc, &uniform, seed, &r));
    interleaved += last_switches > 5;
    a_first += ((burst_world *)last_burst)->log[0] == 'a';
    /* One change point: at most one more switch, and some seeds have it. */
    ck_assert_vat_ok(vat_sim_replay(&sc, &pct2, seed, &r));
    ck_assert_uint_le(last_switches, 2);
    changed += last_switches == 2;
  }
  ck_assert_uint_ge(interleaved, 45);
  /* Uniform: either vat first, about as often (binomial(50, 1/2)). */
  ck_assert_uint_ge(a_first, 12);
  ck_assert_uint_le(a_first, 38);
  ck_assert_uint_ge(changed, 5);
}
END_TEST

/* Three vats, each sent a burst of BURST3_EACH: all three are ready from
 * the first step until their burst is done. */
enum { BURST3_VATS = 3, BURST3_EACH = 20, BURST3_TURNS = 60 };

static void *burst3_setup(vat_system *sys, void *ctx) {
  (void)ctx;
  burst_world *w = GC_MALLOC(sizeof *w);
  for (char c = 'a'; c < 'a' + BURST3_VATS; c++) {
    vat_ref *v;
    burst_world **st;
    vat_entity_def def = {.state_size = sizeof *st};
    if (vat_host_spawn(sys, &def, &v, (void **)&st) != VAT_OK)
      return NULL;
    *st = w;
    for (int i = 0; i < BURST3_EACH; i++)
      vat_host_send(v, burst_note, (void *)(uintptr_t)c);
  }
  return w;
}

static bool burst3_done(void *world) {
  last_burst = world;
  return ((burst_world *)world)->n == BURST3_TURNS;
}

/* Reads the PCT order of a run of burst3 from its log. Every vat is ready
 * until it is done, so the one that runs is the one of highest priority:
 * a vat that stops running before it is done was lowered at that step.
 * Of two vats lowered, the one lowered later must be below: while both
 * have turns left, it must not run. Returns whether the log held such a
 * pair (the check had something to check); on a violation, writes why. */
static bool check_lowered_order(const burst_world *w, char *why, size_t size,
                                bool *held_a_pair) {
  unsigned left[BURST3_VATS];
  char lowered[BURST3_VATS]; /* in the order of their last lowering */
  unsigned nlowered = 0;
  for (unsigned v = 0; v < BURST3_VATS; v++)
    left[v] = BURST3_EACH;
  *held_a_pair = false;
  for (unsigned i = 0; i < w->n; i++) {
    char cur = w->log[i], prev = i ? w->log[i - 1] : 0;
    if (prev && prev != cur && left[prev - 'a'] > 0) {
      unsigned k = 0;
      while (k < nlowered && lowered[k] != prev)
        k++;
      if (k < nlowered)
        memmove(lowered + k, lowered + k + 1, nlowered - k - 1);
      else
        nlowered++;
      lowered[nlowered - 1] = prev;
    }
    bool cur_lowered = false;
    for (unsigned k = 0; k < nlowered && !cur_lowered; k++) {
      if (lowered[k] == cur) {
        cur_lowered = true;
        break;
      }
      if (left[lowered[k] - 'a'] > 0) {
        for (unsigned j = k + 1; j < nlowered; j++)
          if (lowered[j] == cur) {
            snprintf(why, size,
                     "turn %u: %c ran with %u turns of %c left, though %c "
                     "was lowered first (log %.*s)",
                     i + 1, cur, left[lowered[k] - 'a'], lowered[k], lowered[k],
                     (int)w->n, w->log);
            return false;
          }
      }
    }
    if (cur_lowered)
      for (unsigned k = 0; k < nlowered; k++)
        if (lowered[k] != cur && left[lowered[k] - 'a'] > 0)
          *held_a_pair = true;
    left[cur - 'a']--;
  }
  return true;
}

/* vat/sim.h: "the vat chosen for that step is lowered below every vat not
 * lowered yet, and below those lowered at earlier change points". */
START_TEST(pct_lowers_each_change_point_below_the_earlier_ones) {
  vat_sim_scenario sc = {
      .name = "burst3", .setup = burst3_setup, .done = burst3_done};
  vat_sim_options o = sim_options(VAT_SIM_PCT, 0);
  o.pct_depth = 3;
  o.pct_steps = BURST3_TURNS;
  unsigned pairs = 0;
  for (uint64_t seed = 1; seed <= 200; seed++) {
    vat_sim_result r;
    ck_assert_vat_ok(vat_sim_replay(&sc, &o, seed, &r));
    ck_assert_msg(!r.failed, "%s", r.message);
    char why[256];
    bool pair;
    ck_assert_msg(check_lowered_order(last_burst, why, sizeof why, &pair),
                  "seed %" PRIu64 ": %s", seed, why);
    pairs += pair;
  }
  ck_assert_uint_ge(pairs, 10);
}
END_TEST

/* vat/sim.h: change points are "steps drawn uniformly from [1, k]". With
 * one change point and k = 2, the vat of highest priority is lowered
 * before its first turn (step 1: it runs last) or after it (step 2): the
 * log is x^20 y^20 or x y^20 x^19, both seen, nothing else. */
START_TEST(pct_change_points_fall_on_steps_1_to_k) {
  vat_sim_scenario sc = {
      .name = "burst", .setup = burst_setup, .done = burst_done};
  vat_sim_options o = sim_options(VAT_SIM_PCT, 0);
  o.pct_depth = 2;
  o.pct_steps = 2;
  unsigned at_step[3] = {0};
  for (uint64_t seed = 1; seed <= 60; seed++) {
    vat_sim_result r;
    ck_assert_vat_ok(vat_sim_replay(&sc, &o, seed, &r));
    const burst_world *w = last_burst;
    unsigned first_switch = 1;
    while (first_switch < w->n && w->log[first_switch] == w->log[0])
      first_switch++;
    ck_assert_msg((last_switches == 1 && first_switch == 20) ||
                      (last_switches == 2 && first_switch == 1),
                  "seed %" PRIu64 ": %.*s", seed, (int)w->n, w->log);
    at_step[last_switches]++;
  }
  ck_assert_msg(at_step[1] >= 15 && at_step[2] >= 15,
                "change point at step 1 (or none) in %u seeds, at step 2 in "
                "%u, of 60",
                at_step[1], at_step[2]);
}
END_TEST

/* The exact order of burst3's turns under PCT (d 3, k 60) for three
 * seeds: any change in how PCT draws its priorities or change points, or
 * applies them, changes these, which a campaign would not notice (its
 * seeds still pass, others find the bugs). A deliberate change re-records
 * them: run this test, and paste the logs its failure message prints. */
START_TEST(pct_schedules_of_three_seeds_are_pinned) {
  static const char *const pinned[3] = {
      "ccccccccccccccccccccbbbbbbbbbbbbbbbbbbaaabbaaaaaaaaaaaaaaaaa",
      "aaaaaaaaaaaaaabbbbbbbbbbbbbbbbbbbbccccaaaaaacccccccccccccccc",
      "cccccccccccccbbbbbbbbbbbbbbbbbbbbaaaaaaaaaaaaaaaaaaaaccccccc",
  };
  vat_sim_scenario sc = {
      .name = "burst3", .setup = burst3_setup, .done = burst3_done};
  vat_sim_options o = sim_options(VAT_SIM_PCT, 0);
  o.pct_depth = 3;
  o.pct_steps = BURST3_TURNS;
  for (uint64_t seed = 1; seed <= 3; seed++) {
    vat_sim_result r;
    ck_assert_vat_ok(vat_sim_replay(&sc, &o, seed, &r));
    const burst_world *w = last_burst;
    ck_assert_uint_eq(w->n, BURST3_TURNS);
    ck_assert_msg(strncmp(w->log, pinned[seed - 1], BURST3_TURNS) == 0,
                  "seed %" PRIu64 ": \"%.*s\", pinned \"%s\"", seed, (int)w->n,
                  w->log, pinned[seed - 1]);
  }
}
END_TEST

/* The digest tells faults apart by their vat, not only their kind: two
 * plans failing a different vat's turn at the same step, in a world where
 * either leaves the same vats ready at every step (a dead vat still takes
 * a step per message it drops), so that the choices are the same. */
static bool always_done(void *world) {
  (void)world;
  return true;
}

START_TEST(the_digest_tells_the_victims_apart) {
  vat_sim_scenario sc = {
      .name = "burst", .setup = burst_setup, .done = always_done};
  for (uint64_t seed = 1; seed <= 20; seed++) {
    vat_sim_options o = sim_options(seed % 2 ? VAT_SIM_RANDOM : VAT_SIM_PCT, 0);
    vat_sim_result a, b;
    o.plan = "step 1: fail vat#0";
    ck_assert_vat_ok(vat_sim_replay(&sc, &o, seed, &a));
    o.plan = "step 1: fail vat#1";
    ck_assert_vat_ok(vat_sim_replay(&sc, &o, seed, &b));
    ck_assert_str_eq(a.plan, "step 1: fail vat#0");
    ck_assert_str_eq(b.plan, "step 1: fail vat#1");
    ck_assert_uint_eq(a.steps, b.steps); /* 40: the same choices */
    ck_assert_uint_eq(a.steps, 40);
    ck_assert_msg(a.digest != b.digest, "seed %llu: both %llx",
                  (unsigned long long)seed, (unsigned long long)a.digest);
  }
}
END_TEST

/* Faults: rate 1, at most one: the first step's vat is struck, killed or
 * failed (each kind on some seed), and nothing else is; rate 0: none. */
static vat_value struck_reason[RING_VATS];
static bool ring_record_done(void *world) {
  ring_world *w = world;
  for (unsigned i = 0; i < RING_VATS; i++)
    struck_reason[i] = vat_ref_exit_reason(w->vats[i]);
  return true;
}

START_TEST(faults_strike_as_planned) {
  vat_sim_scenario sc = {
      .name = "faults", .setup = logging_setup, .done = ring_record_done};
  unsigned kills = 0, fails = 0;
  for (uint64_t seed = 1; seed <= 40; seed++) {
    vat_sim_options o = sim_options(seed % 2 ? VAT_SIM_RANDOM : VAT_SIM_PCT, 1);
    vat_sim_result r;
    ck_assert_vat_ok(vat_sim_replay(&sc, &o, seed, &r));
    ck_assert(!r.failed);
    ck_assert_uint_eq(r.nfaults, 1);
    const vat_sim_fault *f = &r.faults[0];
    ck_assert_uint_eq(f->step, 1);
    unsigned dead = 0;
    for (unsigned i = 0; i < RING_VATS; i++) {
      if (vat_is_null(struck_reason[i]))
        continue;
      dead++;
      ck_assert_uint_eq(i, f->vat); /* spawn order is first-ready order here */
      const vat_atom *want = f->kind == VAT_SIM_KILL
                                 ? vat_atom_killed()
                                 : vat_atom_intern("sim_fault");
      ck_assert(vat_is_atom(struck_reason[i], want));
    }
    ck_assert_uint_eq(dead, 1);
    kills += f->kind == VAT_SIM_KILL;
    fails += f->kind == VAT_SIM_FAIL;
    char want[64];
    snprintf(want, sizeof want, "step 1: %s vat#%u",
             f->kind == VAT_SIM_KILL ? "kill" : "fail", f->vat);
    ck_assert_str_eq(r.plan, want);
  }
  ck_assert_uint_ge(kills, 5);
  ck_assert_uint_ge(fails, 5);
  /* Two faults strike two vats: a dead one, still dropping what it was
   * sent, is no victim. */
  for (uint64_t seed = 1; seed <= 40; seed++) {
    vat_sim_options o = sim_options(seed % 2 ? VAT_SIM_RANDOM : VAT_SIM_PCT, 1);
    o.max_faults = 2;
    vat_sim_result r;
    ck_assert_vat_ok(vat_sim_replay(&sc, &o, seed, &r));
    unsigned dead = 0;
    for (unsigned i = 0; i < RING_VATS; i++)
      dead += !vat_is_null(struck_reason[i]);
    ck_assert_uint_eq(r.nfaults, 2);
    ck_assert_msg(dead == 2, "seed %llu: %s", (unsigned long long)seed, r.plan);
  }
  vat_sim_options none = sim_options(VAT_SIM_RANDOM, 0);
  vat_sim_result r;
  ck_assert_vat_ok(vat_sim_run(&sc, &none, 1, 20, &r));
  ck_assert_uint_eq(r.nfaults, 0);
}
END_TEST

/* A program that never goes quiet: a timer every virtual second, or a
 * vat that keeps sending to itself. The first misses the deadline on the
 * virtual clock, the second the turn limit. */
static void tick_noop(vat_turn *turn, void *state, void *arg);
static void tick(vat_turn *turn, void *state, void *arg) {
  (void)state, (void)arg;
  vat_timer *t;
  expect_vat_ok(vat_every(turn, 1.0, vat_self(turn), tick_noop, NULL, &t));
}
static void tick_noop(vat_turn *turn, void *state, void *arg) {
  (void)turn, (void)state, (void)arg;
}
static void spin(vat_turn *turn, void *state, void *arg) {
  (void)state;
  expect_vat_ok(vat_send(turn, vat_self(turn), spin, arg));
}
static void *forever_setup(vat_system *sys, void *ctx) {
  vat_ref *v = test_spawn(sys, 8, NULL);
  vat_host_send(v, ctx != NULL ? spin : tick, NULL);
  return v;
}

START_TEST(the_deadline_and_the_turn_limit_fire) {
  vat_sim_scenario ticking = {.name = "ticking", .setup = forever_setup};
  vat_sim_options o = sim_options(VAT_SIM_RANDOM, 0);
  o.deadline_ns = 10 * 1000000000ull;
  vat_sim_result r;
  ck_assert_vat_ok(vat_sim_run(&ticking, &o, 1, 3, &r));
  ck_assert(r.failed);
  ck_assert_uint_eq(r.seed, 1);
  ck_assert_str_eq(r.message, "liveness: deadline 10.000 s passed (virtual) "
                              "and not quiescent");
  ck_assert_uint_eq(r.now_ns, 10 * 1000000000ull);
  ck_assert_uint_eq(r.turns, 11); /* the first turn and ten ticks */
  static int spinning;
  vat_sim_scenario spinner = {
      .name = "spin", .setup = forever_setup, .ctx = &spinning};
  o.max_turns = 500;
  ck_assert_vat_ok(vat_sim_run(&spinner, &o, 1, 3, &r));
  ck_assert(r.failed);
  ck_assert_uint_eq(r.turns, 500);
  ck_assert_str_eq(r.message, "liveness: 500 turns and not quiescent");
}
END_TEST

/* --- The bug programs ------------------------------------------------------
 * Bank: a transfer between two accounts that loses money when one dies
 * mid-protocol, fixed with a monitor and a refund. Its program and
 * scenario are an example's (examples/bank_accounts.c). */

static int fixed_marker;

START_TEST(bank_loses_money_random) {
  sim_program_test(SIM_BANK, VAT_SIM_RANDOM);
}
END_TEST

START_TEST(bank_loses_money_pct) {
  sim_program_test(SIM_BANK, VAT_SIM_PCT);
}
END_TEST

/* --- Locks: two workers, two locks, taken in opposite orders -------------
 * Each worker asks one lock vat for its lock, then, once granted, the
 * other; a lock vat grants to one worker at a time and queues the rest.
 * W1 takes L1 then L2, W2 takes L2 then L1: if each gets its first, each
 * waits for the other's forever and the world goes quiet undone. The
 * fixed version takes them in one order. */

enum { LOCKS = 2, WORKERS = 2 };

typedef struct lock_world {
  vat_ref *locks[LOCKS];
  vat_ref *workers[WORKERS];
  unsigned done;
} lock_world;

typedef struct lock_vat {
  unsigned index;
  vat_ref *holder;
  vat_ref *waiting[WORKERS];
  unsigned nwaiting;
} lock_vat;

typedef struct worker_vat {
  lock_world *world;
  unsigned order[LOCKS];
  unsigned held;
} worker_vat;

static void granted(vat_turn *turn, void *state, void *arg);

static void acquire(vat_turn *turn, void *state, void *arg) {
  lock_vat *l = state;
  vat_ref *who = arg;
  if (l->holder == NULL) {
    l->holder = who;
    expect_vat_ok(vat_send(turn, who, granted, NULL));
  } else {
    l->waiting[l->nwaiting++] = who;
  }
}

static void release(vat_turn *turn, void *state, void *arg) {
  (void)arg;
  lock_vat *l = state;
  l->holder = NULL;
  if (l->nwaiting > 0) {
    l->holder = l->waiting[0];
    memmove(l->waiting, l->waiting + 1, --l->nwaiting * sizeof l->waiting[0]);
    expect_vat_ok(vat_send(turn, l->holder, granted, NULL));
  }
}

static void granted(vat_turn *turn, void *state, void *arg) {
  (void)arg;
  worker_vat *w = state;
  lock_world *lw = w->world;
  if (++w->held < LOCKS) {
    expect_vat_ok(
        vat_send(turn, lw->locks[w->order[w->held]], acquire, vat_self(turn)));
    return;
  }
  lw->done++;
  for (unsigned i = LOCKS; i-- > 0;)
    expect_vat_ok(vat_send(turn, lw->locks[w->order[i]], release, NULL));
}

static void start_work(vat_turn *turn, void *state, void *arg) {
  (void)arg;
  worker_vat *w = state;
  expect_vat_ok(
      vat_send(turn, w->world->locks[w->order[0]], acquire, vat_self(turn)));
}

static void *locks_setup(vat_system *sys, void *ctx) {
  bool ordered = ctx != NULL;
  lock_world *w = GC_MALLOC(sizeof *w);
  for (unsigned i = 0; i < LOCKS; i++) {
    lock_vat *l;
    vat_entity_def def = {.state_size = sizeof *l, .label = i ? "L2" : "L1"};
    if (vat_host_spawn(sys, &def, &w->locks[i], (void **)&l) != VAT_OK)
      return NULL;
    l->index = i;
  }
  for (unsigned i = 0; i < WORKERS; i++) {
    worker_vat *k;
    vat_entity_def def = {.state_size = sizeof *k, .label = i ? "W2" : "W1"};
    if (vat_host_spawn(sys, &def, &w->workers[i], (void **)&k) != VAT_OK)
      return NULL;
    k->world = w;
    bool reverse = i == 1 && !ordered;
    k->order[0] = reverse ? 1 : 0;
    k->order[1] = reverse ? 0 : 1;
    vat_host_send(w->workers[i], start_work, NULL);
  }
  return w;
}

static bool locks_done(void *world) {
  return ((lock_world *)world)->done == WORKERS;
}

const vat_sim_scenario sim_locks_buggy = {
    .name = "locks", .setup = locks_setup, .done = locks_done};
const vat_sim_scenario sim_locks_fixed = {.name = "locks-ordered",
                                          .setup = locks_setup,
                                          .done = locks_done,
                                          .ctx = &fixed_marker};

START_TEST(locks_deadlock_random) {
  sim_program_test(SIM_LOCKS, VAT_SIM_RANDOM);
}
END_TEST

START_TEST(locks_deadlock_pct) {
  sim_program_test(SIM_LOCKS, VAT_SIM_PCT);
}
END_TEST

Suite *test_sim_suite(void) {
  Suite *s = suite_create("sim");
  TCase *tc = test_case("harness", 120);
  tcase_add_test(tc, a_program_that_holds_passes_every_seed);
  tcase_add_test(tc, a_failure_is_reported_with_its_seed_and_replay);
  tcase_add_test(tc, vat_sim_seed_runs_that_seed_alone);
  tcase_add_test(tc, a_world_that_cannot_be_made_is_reported);
  tcase_add_test(tc, replay_is_exact);
  tcase_add_test(tc, bad_arguments_are_refused);
  tcase_add_test(tc, pct_runs_the_highest_priority_vat);
  tcase_add_test(tc, pct_lowers_each_change_point_below_the_earlier_ones);
  tcase_add_test(tc, pct_change_points_fall_on_steps_1_to_k);
  tcase_add_test(tc, pct_schedules_of_three_seeds_are_pinned);
  tcase_add_test(tc, faults_strike_as_planned);
  tcase_add_test(tc, the_digest_tells_the_victims_apart);
  tcase_add_test(tc, the_deadline_and_the_turn_limit_fire);
  suite_add_tcase(s, tc);
  TCase *bugs = test_case("bugs", 300);
  tcase_add_test(bugs, bank_loses_money_random);
  tcase_add_test(bugs, bank_loses_money_pct);
  tcase_add_test(bugs, locks_deadlock_random);
  tcase_add_test(bugs, locks_deadlock_pct);
  suite_add_tcase(s, bugs);
  return s;
}
