/* Simulation testing (vat/sim.h): explicit fault plans (the text a failure
 * reports, pasted back, replays it exactly; bad text is refused with a
 * clear message), shrinking a failure, and the failing run's trace with
 * its faults marked. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <gc/gc.h>

#include "json.h"
#include "sim/world.h"
#include "sim_programs.h"
#include "support.h"
#include "trace_check.h"
#include "vat/exits.h"
#include "vat/host.h"
#include "vat/sim.h"

/* --- A ledger: a vault pays another, with chatter around them -------------
 * The host asks vault-a for transfers; vault-a debits itself and sends a
 * credit to vault-b. Money in flight to a vault that died is lost: the
 * check sees it after the turn that loses it. Two vats, noise-1 and
 * noise-2, ping each other meanwhile, so most faults a seed draws strike
 * where they harm nothing, and shrinking has faults to drop. */

enum { TRANSFERS = 6, AMOUNT = 5, OPENING = 100, PINGS = 24 };

typedef struct ledger {
  vat_ref *a, *b, *noise[2];
  int64_t balance_a, balance_b, in_flight; /* durable: kept when vats die */
} ledger;

static void credit(vat_turn *turn, void *state, void *arg) {
  (void)turn, (void)arg;
  ledger *l = *(ledger **)state;
  l->balance_b += AMOUNT;
  l->in_flight -= AMOUNT;
}

static void debit(vat_turn *turn, void *state, void *arg) {
  (void)arg;
  ledger *l = *(ledger **)state;
  l->balance_a -= AMOUNT;
  l->in_flight += AMOUNT;
  expect_vat_ok(vat_send(turn, l->b, credit, NULL));
}

static void ping(vat_turn *turn, void *state, void *arg) {
  ledger *l = *(ledger **)state;
  uintptr_t left = (uintptr_t)arg;
  vat_ref *other =
      vat_ref_same_vat(vat_self(turn), l->noise[0]) ? l->noise[1] : l->noise[0];
  if (left > 0)
    expect_vat_ok(vat_send(turn, other, ping, (void *)(left - 1)));
}

static vat_ref *spawn_labelled(vat_system *sys, const char *label, ledger *l) {
  vat_ref *v;
  ledger **st;
  vat_entity_def def = {.state_size = sizeof *st, .label = label};
  if (vat_host_spawn(sys, &def, &v, (void **)&st) != VAT_OK)
    return NULL;
  *st = l;
  return v;
}

static void *ledger_setup(vat_system *sys, void *ctx) {
  (void)ctx;
  ledger *l = GC_MALLOC(sizeof *l);
  l->balance_a = l->balance_b = OPENING;
  l->a = spawn_labelled(sys, "vault-a", l);
  l->b = spawn_labelled(sys, "vault-b", l);
  l->noise[0] = spawn_labelled(sys, "noise-1", l);
  l->noise[1] = spawn_labelled(sys, "noise-2", l);
  if (!l->a || !l->b || !l->noise[0] || !l->noise[1])
    return NULL;
  vat_host_send(l->noise[0], ping, (void *)(uintptr_t)PINGS);
  for (int i = 0; i < TRANSFERS; i++)
    vat_host_send(l->a, debit, NULL);
  return l;
}

static bool ledger_check(void *world, bool quiescent, char *why, size_t n) {
  (void)quiescent;
  ledger *l = world;
  int64_t counted = l->balance_a + l->balance_b;
  if (!vat_ref_is_dead(l->b))
    counted += l->in_flight;
  if (counted != 2 * OPENING) {
    snprintf(why, n, "money lost: %lld in flight to a dead vault",
             (long long)(2 * OPENING - counted));
    return false;
  }
  return true;
}

static const vat_sim_scenario ledger_sc = {
    .name = "ledger", .setup = ledger_setup, .check = ledger_check};

static vat_sim_options noisy(vat_sim_strategy s) {
  vat_sim_options o = sim_options(s, 0.2);
  o.max_faults = 6;
  return o;
}

/* --- Plans ---------------------------------------------------------------- */

/* What a run reports, pasted back as its plan with its seed, runs it again
 * exactly: failing or not, drawn faults that struck at once or waited. */
START_TEST(a_reported_plan_replays_its_run_exactly) {
  unsigned with_faults = 0, failing = 0;
  for (uint64_t seed = 1; seed <= 120; seed++) {
    vat_sim_options o = noisy(seed % 2 ? VAT_SIM_RANDOM : VAT_SIM_PCT);
    o.shrink_runs = 0;
    vat_sim_result drawn, planned;
    ck_assert_vat_ok(vat_sim_replay(&ledger_sc, &o, seed, &drawn));
    o.plan = drawn.plan;
    ck_assert_vat_ok(vat_sim_replay(&ledger_sc, &o, seed, &planned));
    ck_assert_msg(planned.digest == drawn.digest, "seed %llu: %s",
                  (unsigned long long)seed, drawn.plan);
    ck_assert_uint_eq(planned.turns, drawn.turns);
    ck_assert_uint_eq(planned.steps, drawn.steps);
    ck_assert_uint_eq(planned.failed, drawn.failed);
    ck_assert_uint_eq(planned.verdict, drawn.verdict);
    ck_assert_str_eq(planned.message, drawn.message);
    ck_assert_str_eq(planned.plan, drawn.plan);
    ck_assert_uint_eq(planned.plan_missed, 0);
    with_faults += drawn.nfaults > 1;
    failing += drawn.failed;
    if (drawn.nfaults > 0) /* the faults name the vats by their labels */
      ck_assert_msg(strstr(drawn.plan, "vat#") == NULL, "%s", drawn.plan);
  }
  ck_assert_uint_ge(with_faults, 30);
  ck_assert_uint_ge(failing, 10);
}
END_TEST

/* The plan may be the text of the very result the call fills (a run
 * replayed into the result that reported it): it is read before the
 * result is cleared, and the run replays. */
START_TEST(a_plan_may_be_read_from_the_result_it_fills) {
  vat_sim_options o = noisy(VAT_SIM_RANDOM);
  o.shrink_runs = 0;
  vat_sim_result r;
  ck_assert_vat_ok(vat_sim_run(&ledger_sc, &o, 1, 200, &r));
  ck_assert(r.failed && r.nfaults > 0);
  uint64_t digest = r.digest, turns = r.turns;
  char plan[VAT_SIM_PLAN_SIZE];
  memcpy(plan, r.plan, sizeof plan);
  o.plan = r.plan;
  ck_assert_vat_ok(vat_sim_replay(&ledger_sc, &o, r.seed, &r));
  ck_assert(r.failed);
  ck_assert_str_eq(r.plan, plan);
  ck_assert_uint_eq(r.digest, digest);
  ck_assert_uint_eq(r.turns, turns);
  /* And a bad one in it is still refused with why. */
  snprintf(r.plan, sizeof r.plan, "step 0: kill x");
  ck_assert_vat_err(vat_sim_replay(&ledger_sc, &o, 1, &r), VAT_EINVAL);
  ck_assert_msg(strstr(r.message, "step") != NULL, "%s", r.message);
}
END_TEST

/* VAT_SIM_PLAN is read as VAT_SIM_SEED is, and wins over the options. */
START_TEST(vat_sim_plan_is_read_from_the_environment) {
  vat_sim_options o = sim_options(VAT_SIM_RANDOM, 0);
  o.plan = "none";
  vat_sim_result r, again;
  setenv("VAT_SIM_PLAN", "step 1: kill vault-b", 1);
  ck_assert_vat_ok(vat_sim_run(&ledger_sc, &o, 1, 50, &r));
  ck_assert(r.failed);
  ck_assert_msg(strncmp(r.plan, "step ", 5) == 0 &&
                    strstr(r.plan, ": kill vault-b") != NULL &&
                    strchr(r.plan, ';') == NULL,
                "%s", r.plan);
  char want[VAT_SIM_PLAN_SIZE + 32];
  snprintf(want, sizeof want, "VAT_SIM_PLAN='%s'", r.plan);
  ck_assert_msg(strstr(r.replay, want), "%s", r.replay);
  setenv("VAT_SIM_SEED", "3", 1);
  vat_sim_result r3;
  ck_assert_vat_ok(vat_sim_run(&ledger_sc, &o, 1, 50, &r3));
  ck_assert_uint_eq(r3.seed, 3);
  ck_assert_uint_eq(r3.seeds_run, 1);
  unsetenv("VAT_SIM_SEED");
  /* vat_sim_replay reads neither. */
  ck_assert_vat_ok(vat_sim_replay(&ledger_sc, &o, 3, &again));
  ck_assert_str_eq(again.plan, "none");
  setenv("VAT_SIM_PLAN", "step 1 kill vault-b", 1);
  ck_assert_vat_err(vat_sim_run(&ledger_sc, &o, 1, 50, &r), VAT_EINVAL);
  ck_assert_msg(strstr(r.message, "expected \":\" after the step"), "%s",
                r.message);
  unsetenv("VAT_SIM_PLAN");
  o.plan = "step 1: kill vault-b";
  ck_assert_vat_ok(vat_sim_replay(&ledger_sc, &o, 3, &again));
  ck_assert_uint_eq(again.digest, r3.digest);
  ck_assert_str_eq(again.plan, r3.plan);
}
END_TEST

/* A planned fault strikes its vat at its step, or waits for the first
 * step after it where it can: vault-b is first ready only when the first
 * credit reaches it. One whose vat never shows up never strikes. The seed
 * drives the schedule still, and a plan replaces the drawn faults. */
START_TEST(a_planned_fault_waits_until_it_can_strike) {
  vat_sim_options o = sim_options(VAT_SIM_RANDOM, 1.0);
  o.plan = "step 1: kill vault-b";
  vat_sim_result r;
  unsigned waited = 0;
  for (uint64_t seed = 1; seed <= 30; seed++) {
    ck_assert_vat_ok(vat_sim_replay(&ledger_sc, &o, seed, &r));
    ck_assert_uint_eq(r.nfaults, 1);
    ck_assert_uint_eq(r.faults[0].kind, VAT_SIM_KILL);
    ck_assert_uint_ge(r.faults[0].step, 2);
    waited += r.faults[0].step > 2;
    char want[64];
    snprintf(want, sizeof want, "step %llu: kill vault-b",
             (unsigned long long)r.faults[0].step);
    ck_assert_str_eq(r.plan, want);
    ck_assert_uint_eq(r.plan_missed, 0);
  }
  ck_assert_uint_ge(waited, 5);
  o.plan = "step 2: kill vat#7; step 3: fail nobody";
  ck_assert_vat_ok(vat_sim_replay(&ledger_sc, &o, 1, &r));
  ck_assert(!r.failed);
  ck_assert_uint_eq(r.nfaults, 0);
  ck_assert_uint_eq(r.plan_missed, 2);
  ck_assert_str_eq(r.plan, "none");
  /* "none": no fault at all, whatever the rate; seeds still differ. */
  o.plan = "none";
  uint64_t first = 0;
  unsigned other = 0;
  for (uint64_t seed = 1; seed <= 10; seed++) {
    ck_assert_vat_ok(vat_sim_replay(&ledger_sc, &o, seed, &r));
    ck_assert_uint_eq(r.nfaults, 0);
    if (seed == 1)
      first = r.digest;
    other += r.digest != first;
  }
  ck_assert_uint_ge(other, 8);
}
END_TEST

/* Bad text is refused with VAT_EINVAL and a line that says where and
 * what was expected; nothing runs. */
/* Every VAT_EINVAL a campaign returns says, in the result's message,
 * which option or variable, and why. */
static void assert_refused(const vat_sim_options *o, uint64_t count,
                           const char *says) {
  vat_sim_result r;
  memset(&r, 0, sizeof r);
  ck_assert_vat_err(vat_sim_run(&ledger_sc, o, 1, count, &r), VAT_EINVAL);
  ck_assert_msg(strstr(r.message, says) != NULL, "\"%s\" does not say %s",
                r.message, says);
}

START_TEST(every_refusal_says_which_option_and_why) {
  vat_sim_options good = sim_options(VAT_SIM_RANDOM, 0.1), o;
  o = good, o.fault_rate = 2;
  assert_refused(&o, 1, "fault_rate 2 is outside [0, 1]");
  o = good, o.pct_depth = 0;
  assert_refused(&o, 1, "pct_depth is 0");
  o = good, o.pct_steps = 0;
  assert_refused(&o, 1, "pct_steps is 0");
  o = good, o.max_turns = 0;
  assert_refused(&o, 1, "max_turns is 0");
  o = good, o.strategy = (vat_sim_strategy)7;
  assert_refused(&o, 1, "strategy 7");
  o = good, o.jobs = VAT_SIM_MAX_JOBS + 1;
  assert_refused(&o, 1, "jobs 1025");
  o = good, o.fault_kinds = VAT_SIM_FAULTS_ALL + 1;
  assert_refused(&o, 1, "fault_kinds");
  o = good, o.fault_kinds = VAT_SIM_FAULT(VAT_SIM_DELAY), o.max_delay_steps = 0;
  assert_refused(&o, 1, "max_delay_steps is 0");
  o = good, o.fault_kinds = VAT_SIM_FAULT(VAT_SIM_JITTER), o.max_jitter_ns = 0;
  assert_refused(&o, 1, "max_jitter_ns is 0");
  assert_refused(&good, 0, "count is 0");
  setenv("VAT_SIM_SEED", "two", 1);
  assert_refused(&good, 1, "VAT_SIM_SEED=two is not a seed");
  unsetenv("VAT_SIM_SEED");
  vat_sim_scenario no_setup = ledger_sc;
  no_setup.setup = NULL;
  vat_sim_result r;
  ck_assert_vat_err(vat_sim_run(&no_setup, &good, 1, 1, &r), VAT_EINVAL);
  ck_assert_str_eq(r.message, "the scenario's setup is NULL");
}
END_TEST

/* An empty VAT_SIM_PLAN or VAT_SIM_SEED counts as unset (vat/sim.h): the
 * options' plan, the campaign's seeds; "none" is the plan of no faults. */
START_TEST(an_empty_variable_counts_as_unset) {
  vat_sim_options o = sim_options(VAT_SIM_RANDOM, 0);
  o.plan = "step 1: kill vault-b";
  vat_sim_result set, empty;
  ck_assert_vat_ok(vat_sim_run(&ledger_sc, &o, 1, 50, &set));
  ck_assert(set.failed);
  setenv("VAT_SIM_PLAN", "", 1);
  setenv("VAT_SIM_SEED", "", 1);
  ck_assert_vat_ok(vat_sim_run(&ledger_sc, &o, 1, 50, &empty));
  ck_assert_uint_eq(empty.seed, set.seed);
  ck_assert_uint_eq(empty.seeds_run, set.seeds_run);
  ck_assert_str_eq(empty.plan, set.plan);
  ck_assert_uint_eq(empty.digest, set.digest);
  setenv("VAT_SIM_PLAN", "none", 1);
  ck_assert_vat_ok(vat_sim_run(&ledger_sc, &o, 1, 50, &empty));
  ck_assert(!empty.failed);
  ck_assert_uint_eq(empty.total_faults, 0);
  unsetenv("VAT_SIM_PLAN");
  unsetenv("VAT_SIM_SEED");
}
END_TEST

START_TEST(a_bad_plan_is_refused_with_a_clear_message) {
  static const struct {
    const char *text, *says;
  } bad[] = {
      {"", "at its end: expected \"step\""},
      {"   ", "at its end: expected \"step\""},
      {"kill vault-a", "at character 1 (\"kill vault-a\"): expected \"step\""},
      {"step", "at its end: expected the step's number"},
      {"step x: kill a", "expected the step's number"},
      {"step 0: kill a", "expected a step from 1"},
      {"step -1: kill a", "expected the step's number"},
      {"step 99999999999999999999: kill a", "expected a smaller number"},
      {"step 3 kill a", "at character 8 (\"kill a\"): expected \":\" after "
                        "the step"},
      {"step 3: smite a", "expected a fault kind (kill, fail, delay, jitter, "
                          "timeout, stop)"},
      {"step 3: killer a", "expected a fault kind"},
      {"step 3: kill", "at its end: expected a vat: its label, or vat#N"},
      {"step 3: kill ;", "expected a vat"},
      {"step 3: kill vat#", "expected a vat"},
      {"step 3: kill vat#x", "expected a vat"},
      {"step 3: kill vat#99999999999", "expected a smaller vat number"},
      {"step 3: kill a b", "expected \";\" or the plan's end"},
      {"step 3: kill a step 4: kill b", "expected \";\" or the plan's end"},
      {"step 3: kill a;", "at its end: expected \"step\""},
      {"step 3: kill a; ...", "expected \"step\""},
      {"...", "expected \"step\""},
      {"none; step 3: kill a", "expected nothing after \"none\""},
      {"step 3: delay a", "at its end: expected the delay in steps"},
      {"step 3: delay a 0 steps", "expected a delay of 1 step or more"},
      {"step 3: delay a 2 step", "expected \"steps\""},
      {"step 3: delay a 1 steps", "expected \"step\""},
      {"step 3: delay a 2steps", "expected \"steps\""},
      {"step 3: jitter a", "expected the jitter, as \"+250ms\""},
      {"step 3: jitter a 250ms", "expected the jitter"},
      {"step 3: jitter a + 250ms", "expected the jitter"},
      {"step 3: jitter a +250", "expected a unit: ns, us, ms or s"},
      {"step 3: jitter a +250m", "expected a unit"},
      {"step 3: jitter a +250mss", "expected a unit"},
      {"step 3: jitter a +0ms", "expected a jitter of 1 ns or more"},
      {"step 3: jitter a +99999999999s", "expected a shorter jitter"},
      {"step 3: kill a\001", "expected \";\" or the plan's end"},
      {"at", "at its end: expected the time, as \"1500us\""},
      {"at5ms: crash m1", "expected \"step\" or \"at\""},
      {"at x: crash m1", "expected the time"},
      {"at 5: crash m1", "expected a unit: ns, us, ms or s"},
      {"at 5 ms: crash m1", "expected a unit"},
      {"at 99999999999s: crash m1", "expected a shorter time"},
      {"at 5ms crash m1", "expected \":\" after the time"},
      {"at 5ms:", "at its end: expected what strikes then"},
      {"at 5ms: ;", "expected what strikes then"},
      {"at 5ms: it's", "expected what strikes then"},
      {"at 5ms: crash m1\001", "expected what strikes then"},
      {"at 5ms: xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
       "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx",
       "expected a shorter text"},
  };
  vat_sim_options o = sim_options(VAT_SIM_RANDOM, 0);
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    vat_sim_result r;
    o.plan = bad[i].text;
    ck_assert_vat_err(vat_sim_replay(&ledger_sc, &o, 1, &r), VAT_EINVAL);
    ck_assert_msg(strncmp(r.message, "plan: ", 6) == 0, "%s", r.message);
    ck_assert_msg(strstr(r.message, bad[i].says) != NULL,
                  "\"%s\": says \"%s\", not \"%s\"", bad[i].text, r.message,
                  bad[i].says);
    ck_assert_uint_eq(r.seeds_run, 0);
  }
  /* And what it accepts: blanks anywhere between tokens, every kind. */
  o.plan = "  step 1 :kill vault-a ;step 2: fail vat#1;"
           "step 3: delay noise-1 1 step; step 4: delay noise-2 12 steps;"
           "step 5: jitter vault-a +1500ns; step 6: jitter vault-b +2s;"
           "step 7: timeout vault-b;\tstep 8: stop vault-a  ";
  vat_sim_result r;
  ck_assert_vat_ok(vat_sim_replay(&ledger_sc, &o, 1, &r));
  /* Faults at a time too, their text up to the next ';' (what it says is
   * for its machine or source to read: here, nothing knows them). */
  o.plan = "at 0s: crash m0;at 1500us :  partition a-b for 3s ; step 2: kill "
           "vat#1; at 7ns: anything (words of a source)";
  ck_assert_vat_ok(vat_sim_replay(&ledger_sc, &o, 1, &r));
  vat__sim_plan plan;
  char why[256];
  ck_assert_vat_ok(vat__sim_plan_parse(o.plan, &plan, why, sizeof why));
  ck_assert_uint_eq(plan.n, 4);
  ck_assert_str_eq(plan.faults[0].text, "crash m0");
  ck_assert_uint_eq(plan.faults[0].at, 0);
  ck_assert_str_eq(plan.faults[1].text, "partition a-b for 3s");
  ck_assert_uint_eq(plan.faults[1].at, 1500000);
  ck_assert_ptr_null(plan.faults[2].text);
  ck_assert_str_eq(plan.faults[3].text, "anything (words of a source)");
  ck_assert_uint_eq(plan.faults[3].at, 7);
}
END_TEST

/* A reported plan lists the faults in the order they struck, both kinds
 * interleaved: a fault at a time goes before the faults at a step that
 * struck after it, and after those that struck before it. */
START_TEST(a_plan_lists_both_kinds_in_the_order_they_struck) {
  vat_sim_fault faults[3] = {
      {.kind = VAT_SIM_KILL, .step = 2, .vat = 1},
      {.kind = VAT_SIM_FAIL, .step = 9, .vat = 2},
      {.kind = VAT_SIM_KILL, .step = 12, .vat = 0},
  };
  const char *labels[3] = {"a", "b", NULL};
  vat__sim_timed timed[3] = {
      {.at = 0, .text = "crash m1", .after = 0},
      {.at = 5000000, .text = "disconnect m0-m1", .after = 1},
      {.at = 7000000, .text = "crash m2", .after = 3},
  };
  vat__sim_world w = {0};
  w.faults = faults;
  w.fault_labels = labels;
  w.nfaults = 3;
  w.timed = timed;
  w.ntimed = 3;
  char buf[VAT_SIM_PLAN_SIZE];
  ck_assert(vat__sim_plan_format(&w, buf, sizeof buf));
  ck_assert_str_eq(buf, "at 0s: crash m1; step 2: kill a; at 5ms: disconnect "
                        "m0-m1; step 9: fail b; step 12: kill vat#0; at 7ms: "
                        "crash m2");
  /* Read back, the same faults, each kind in its order. */
  vat__sim_plan plan;
  char why[256];
  ck_assert_vat_ok(vat__sim_plan_parse(buf, &plan, why, sizeof why));
  ck_assert_uint_eq(plan.n, 6);
  ck_assert_str_eq(plan.faults[0].text, "crash m1");
  ck_assert_uint_eq(plan.faults[1].step, 2);
  ck_assert_uint_eq(plan.faults[2].at, 5000000);
  ck_assert_uint_eq(plan.faults[3].kind, VAT_SIM_FAIL);
  ck_assert_uint_eq(plan.faults[4].index, 0);
  ck_assert_str_eq(plan.faults[5].text, "crash m2");
  /* Too long for the buffer: cut with "...", and said so. */
  char small[40];
  ck_assert(!vat__sim_plan_format(&w, small, sizeof small));
  ck_assert_str_eq(small, "at 0s: crash m1; step 2: kill a; ...");
}
END_TEST

/* A time, as plans write and read it: exact, in the largest unit. */
START_TEST(times_are_written_and_read_exactly) {
  static const struct {
    uint64_t ns;
    const char *text;
  } times[] = {{0, "0s"},
               {7, "7ns"},
               {1500, "1500ns"},
               {250000, "250us"},
               {1500000, "1500us"},
               {3000000000ull, "3s"},
               {3223613, "3223613ns"},
               {UINT64_MAX, "18446744073709551615ns"}};
  for (size_t i = 0; i < sizeof times / sizeof times[0]; i++) {
    char buf[32];
    vat_sim_time_format(times[i].ns, buf, sizeof buf);
    ck_assert_str_eq(buf, times[i].text);
    uint64_t ns;
    const char *end;
    ck_assert_vat_ok(vat_sim_time_parse(buf, &ns, &end));
    ck_assert_uint_eq(ns, times[i].ns);
    ck_assert_str_eq(end, "");
  }
  uint64_t ns;
  const char *end;
  ck_assert_vat_ok(vat_sim_time_parse("12ms: rest", &ns, &end));
  ck_assert_uint_eq(ns, 12000000);
  ck_assert_str_eq(end, ": rest");
  static const char *const bad[] = {"",
                                    "ms",
                                    " 5ms",
                                    "5",
                                    "5 ms",
                                    "5m",
                                    "5mss",
                                    "-5ms",
                                    "20000000000s",
                                    "18446744073709551616ns"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
    ck_assert_msg(vat_sim_time_parse(bad[i], &ns, &end) == VAT_EINVAL, "%s",
                  bad[i]);
  ck_assert_vat_err(vat_sim_time_parse(NULL, &ns, &end), VAT_EINVAL);
  ck_assert_vat_err(vat_sim_time_parse("5ms", NULL, &end), VAT_EINVAL);
  ck_assert_vat_ok(vat_sim_time_parse("5ms", &ns, NULL));
}
END_TEST

/* Text mangled at random is either a plan or refused: never a crash, and
 * a refusal always says why. */
START_TEST(mangled_plans_parse_or_are_refused) {
  static const char *good = "step 12: kill acct-b; step 30: delay vat#2 3 "
                            "steps; step 41: jitter ticker +250ms; step 50: "
                            "timeout server; step 70: stop acct-a";
  uint64_t rng = test_seed("mangled_plans");
  unsigned refused = 0;
  for (int i = 0; i < 20000; i++) {
    char text[256];
    snprintf(text, sizeof text, "%s", good);
    size_t n = strlen(text);
    for (int k = (int)test_rand_between(&rng, 1, 4); k > 0; k--) {
      size_t at = test_rand(&rng) % n;
      switch (test_rand(&rng) % 3) {
      case 0: /* replace */
        text[at] = (char)(test_rand(&rng) % 255 + 1);
        break;
      case 1: /* delete */
        memmove(text + at, text + at + 1, n - at);
        n--;
        break;
      default: /* cut */
        text[at] = '\0';
        n = at ? at : 1;
      }
      if (n <= 1)
        break;
    }
    vat__sim_plan plan;
    char why[256] = "";
    int rc = vat__sim_plan_parse(text, &plan, why, sizeof why);
    if (rc != VAT_OK) {
      ck_assert_int_eq(rc, VAT_EINVAL);
      ck_assert_msg(strncmp(why, "plan: ", 6) == 0 && strlen(why) > 20, "%s",
                    why);
      refused++;
    }
  }
  ck_assert_uint_ge(refused, 10000);
}
END_TEST

/* --- Shrinking ------------------------------------------------------------ */

/* A failing seed with several faults shrinks to the one that matters (the
 * kill or failed turn of vault-b while money is in flight to it), and its
 * one-line replay (seed and plan, through the environment) runs the
 * shrunk run again exactly. Most shrunk runs are shorter too (with fewer
 * faults, some are longer: fewer faults come first). */
START_TEST(a_failure_shrinks_to_the_fault_that_matters) {
  unsigned shrunk_some = 0;
  for (int s = VAT_SIM_RANDOM; s <= VAT_SIM_PCT; s++) {
    vat_sim_options o = noisy(s);
    vat_sim_result r;
    for (uint64_t next = 1, found = 0; found < 4; next = r.seed + 1) {
      ck_assert_vat_ok(vat_sim_run(&ledger_sc, &o, next, 500, &r));
      ck_assert(r.failed);
      if (r.nfaults < 2)
        continue;
      found++;
      const vat_sim_shrunk *sh = &r.shrunk;
      fprintf(stderr,
              "sim: ledger/%s seed %llu: %s\n  shrunk in %llu runs: "
              "%s -> %s\n  %s\n",
              sim_strategy_name(s), (unsigned long long)r.seed, r.plan,
              (unsigned long long)sh->runs, r.message, sh->message, sh->replay);
      ck_assert(sh->done);
      ck_assert_uint_ge(sh->runs, 1);
      ck_assert_uint_le(sh->runs, o.shrink_runs);
      ck_assert_uint_eq(sh->nfaults, 1);
      ck_assert_msg(strstr(sh->plan, "vault-b") != NULL, "%s", sh->plan);
      ck_assert_msg(strncmp(sh->message, "invariant after turn", 20) == 0, "%s",
                    sh->message);
      shrunk_some += sh->turns < r.turns;
      /* The replay line: VAT_SIM_SEED=N VAT_SIM_PLAN='...' */
      char seed_text[32], plan_text[VAT_SIM_PLAN_SIZE];
      ck_assert_int_eq(sscanf(sh->replay, "VAT_SIM_SEED=%31s", seed_text), 1);
      const char *p = strstr(sh->replay, "VAT_SIM_PLAN='");
      ck_assert_ptr_nonnull(p);
      p += strlen("VAT_SIM_PLAN='");
      size_t len = (size_t)(strchr(p, '\'') - p);
      memcpy(plan_text, p, len);
      plan_text[len] = '\0';
      ck_assert_str_eq(plan_text, sh->plan);
      setenv("VAT_SIM_SEED", seed_text, 1);
      setenv("VAT_SIM_PLAN", plan_text, 1);
      vat_sim_result again;
      ck_assert_vat_ok(vat_sim_run(&ledger_sc, &o, 1, 1000, &again));
      unsetenv("VAT_SIM_SEED");
      unsetenv("VAT_SIM_PLAN");
      ck_assert(again.failed);
      ck_assert_uint_eq(again.seed, r.seed);
      ck_assert_uint_eq(again.digest, sh->digest);
      ck_assert_uint_eq(again.turns, sh->turns);
      ck_assert_uint_eq(again.steps, sh->steps);
      ck_assert_str_eq(again.message, sh->message);
      ck_assert_str_eq(again.plan, sh->plan);
      /* Already as small as it gets. */
      ck_assert_uint_eq(again.shrunk.nfaults, 1);
      ck_assert_uint_eq(again.shrunk.digest, sh->digest);
    }
  }
  ck_assert_uint_ge(shrunk_some, 1);
}
END_TEST

/* A fault planned late moves to an earlier step where the run still fails
 * so, in fewer turns: killing vault-b breaks the ledger as soon as money
 * is in flight to it. */
START_TEST(a_late_fault_moves_earlier) {
  vat_sim_options o = sim_options(VAT_SIM_RANDOM, 0);
  o.plan = "step 10: kill vault-b";
  unsigned moved = 0;
  for (uint64_t seed = 1; seed <= 40; seed++) {
    vat_sim_result r;
    ck_assert_vat_ok(vat_sim_replay(&ledger_sc, &o, seed, &r));
    if (!r.failed)
      continue; /* nothing in flight to vault-b at that step */
    ck_assert(r.shrunk.done);
    ck_assert_uint_eq(r.shrunk.nfaults, 1);
    unsigned long long at;
    ck_assert_int_eq(sscanf(r.shrunk.plan, "step %llu: kill vault-b", &at), 1);
    ck_assert_uint_le(at, r.faults[0].step);
    ck_assert_uint_le(r.shrunk.turns, r.turns);
    moved += at < r.faults[0].step && r.shrunk.turns < r.turns;
  }
  ck_assert_uint_ge(moved, 5);
}
END_TEST

/* A failure without faults has nothing to drop: shrinking takes no run,
 * and its shrunk run is the run. With shrink_runs 0 it does not run. */
START_TEST(a_failure_without_faults_stays_as_it_is) {
  vat_sim_options o = sim_options(VAT_SIM_RANDOM, 0);
  o.plan = "step 1: kill vault-b";
  vat_sim_result r;
  ck_assert_vat_ok(vat_sim_run(&ledger_sc, &o, 1, 50, &r));
  ck_assert(r.failed);
  ck_assert(r.shrunk.done);
  ck_assert_str_eq(r.shrunk.plan, r.plan);
  o.plan = "none";
  o.max_turns = 5; /* fails as a livelock: no fault to drop */
  ck_assert_vat_ok(vat_sim_run(&ledger_sc, &o, 1, 50, &r));
  ck_assert(r.failed);
  ck_assert_uint_eq(r.verdict, VAT_SIM_TOO_MANY_TURNS);
  ck_assert(r.shrunk.done);
  ck_assert_uint_eq(r.shrunk.runs, 0);
  ck_assert_str_eq(r.shrunk.plan, "none");
  ck_assert_uint_eq(r.shrunk.digest, r.digest);
  ck_assert_str_eq(r.shrunk.message, r.message);
  o = noisy(VAT_SIM_RANDOM);
  o.shrink_runs = 0;
  ck_assert_vat_ok(vat_sim_run(&ledger_sc, &o, 1, 500, &r));
  ck_assert(r.failed);
  ck_assert(!r.shrunk.done);
}
END_TEST

/* --- The failing run's trace ---------------------------------------------- */

/* The name of the track `tid` (its thread_name metadata), or NULL. */
static const char *track_name(const json *ev, double tid) {
  for (size_t i = 0; i < ev->len; i++) {
    const json *e = &ev->items[i];
    if (strcmp(json_str(e, "ph"), "M") == 0 &&
        strcmp(json_str(e, "name"), "thread_name") == 0 &&
        json_num(e, "tid", -1) == tid)
      return json_str(json_get(e, "args"), "name");
  }
  return NULL;
}

/* Checks the trace at `path`: a sound trace (trace_check.h: named tracks,
 * slices in order, flows within turns), and, against the plan it ran,
 * each fault an instant named by its kind on its vat's track (named as
 * the plan names the vat, and holding that vat's turns), with its step
 * and its text. */
static void check_fault_markers(const char *path, const char *plan,
                                unsigned nfaults) {
  char err[256];
  json *doc = json_parse_file(path, err, sizeof err);
  ck_assert_msg(doc != NULL, "%s", err);
  trace_summary sum;
  ck_assert_msg(trace_check(doc, &sum, err, sizeof err), "%s: %s", path, err);
  ck_assert_uint_ge(sum.tracks, 3); /* the host's, and the vats' */
  ck_assert_uint_ge(sum.slices, 1);
  const json *ev = json_get(doc, "traceEvents");
  unsigned markers = 0;
  for (size_t i = 0; i < ev->len; i++) {
    const json *e = &ev->items[i];
    if (strcmp(json_str(e, "ph"), "i") != 0 ||
        strcmp(json_str(e, "cat"), "fault") != 0)
      continue;
    markers++;
    const json *args = json_get(e, "args");
    const char *text = json_str(args, "fault");
    ck_assert_msg(strstr(plan, text) != NULL, "%s is not in %s", text, plan);
    char kind[16], vat[64];
    unsigned long long step;
    ck_assert_int_eq(sscanf(text, "step %llu: %15s %63s", &step, kind, vat), 3);
    ck_assert_str_eq(json_str(e, "name"), kind);
    ck_assert(json_num(args, "step", -1) == (double)step);
    double tid = json_num(e, "tid", -1);
    const char *track = track_name(ev, tid);
    ck_assert_ptr_nonnull(track);
    ck_assert_str_eq(track, vat);
    /* The vat's turns are on that track, and on no other. */
    const char *addr = json_str(args, "vat");
    unsigned turns = 0;
    for (size_t j = 0; j < ev->len; j++) {
      const json *t = &ev->items[j];
      if (strcmp(json_str(t, "ph"), "X") != 0)
        continue;
      const char *by = json_str(json_get(t, "args"), "vat");
      if (by != NULL && strcmp(by, addr) == 0) {
        ck_assert(json_num(t, "tid", -1) == tid);
        turns++;
      }
    }
    ck_assert_uint_ge(turns, 1);
  }
  ck_assert_uint_eq(markers, nfaults);
  json_free(doc);
}

START_TEST(the_failing_run_is_traced_with_its_faults_marked) {
  char path[] = "/tmp/vat-sim-trace-XXXXXX";
  int fd = mkstemp(path);
  ck_assert_int_ge(fd, 0);
  close(fd);
  /* Unshrunk: a run with faults on several vats. */
  vat_sim_options o = noisy(VAT_SIM_RANDOM);
  o.shrink_runs = 0;
  o.trace_path = path;
  vat_sim_result r;
  unsigned several = 0;
  for (uint64_t next = 1; several == 0; next = r.seed + 1) {
    ck_assert_vat_ok(vat_sim_run(&ledger_sc, &o, next, 500, &r));
    ck_assert(r.failed);
    ck_assert(r.trace_written);
    check_fault_markers(path, r.plan, r.nfaults);
    for (unsigned i = 1; i < r.nfaults; i++)
      several += r.faults[i].vat != r.faults[0].vat;
  }
  /* Shrunk, and named by VAT_SIM_TRACE: the shrunk run's one fault. */
  o.shrink_runs = 200;
  o.trace_path = NULL;
  setenv("VAT_SIM_TRACE", path, 1);
  ck_assert_vat_ok(vat_sim_run(&ledger_sc, &o, r.seed, 1, &r));
  unsetenv("VAT_SIM_TRACE");
  ck_assert(r.failed && r.shrunk.done && r.trace_written);
  check_fault_markers(path, r.shrunk.plan, r.shrunk.nfaults);
  /* A path that cannot be written: no trace claimed. */
  o.trace_path = "/nonexistent/dir/trace.json";
  ck_assert_vat_ok(vat_sim_run(&ledger_sc, &o, r.seed, 1, &r));
  ck_assert(r.failed && !r.trace_written);
  unlink(path);
}
END_TEST

Suite *test_sim_plan_suite(void) {
  Suite *s = suite_create("sim_plan");
  TCase *plans = test_case("plans", 120);
  tcase_add_test(plans, a_reported_plan_replays_its_run_exactly);
  tcase_add_test(plans, a_plan_may_be_read_from_the_result_it_fills);
  tcase_add_test(plans, vat_sim_plan_is_read_from_the_environment);
  tcase_add_test(plans, a_planned_fault_waits_until_it_can_strike);
  tcase_add_test(plans, a_bad_plan_is_refused_with_a_clear_message);
  tcase_add_test(plans, every_refusal_says_which_option_and_why);
  tcase_add_test(plans, an_empty_variable_counts_as_unset);
  tcase_add_test(plans, mangled_plans_parse_or_are_refused);
  tcase_add_test(plans, times_are_written_and_read_exactly);
  tcase_add_test(plans, a_plan_lists_both_kinds_in_the_order_they_struck);
  suite_add_tcase(s, plans);
  TCase *shrink = test_case("shrink", 120);
  tcase_add_test(shrink, a_failure_shrinks_to_the_fault_that_matters);
  tcase_add_test(shrink, a_late_fault_moves_earlier);
  tcase_add_test(shrink, a_failure_without_faults_stays_as_it_is);
  suite_add_tcase(s, shrink);
  TCase *trace = test_case("trace", 120);
  tcase_add_test(trace, the_failing_run_is_traced_with_its_faults_marked);
  suite_add_tcase(s, trace);
  return s;
}
