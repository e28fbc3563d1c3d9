/* See sim_programs.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim_programs.h"
#include "support.h"

uint64_t sim_fixed_seeds(void) {
  const char *e = getenv("VAT_SIM_LONG");
  return e != NULL && strcmp(e, "1") == 0 ? 10000 : 500;
}

vat_sim_options sim_options(vat_sim_strategy s, double fault_rate) {
  vat_sim_options o;
  vat_sim_options_default(&o);
  o.strategy = s;
  o.fault_rate = fault_rate;
  o.pct_steps = 50; /* these programs run a few dozen steps */
  return o;
}

const char *sim_strategy_name(vat_sim_strategy s) {
  return s == VAT_SIM_PCT ? "pct" : "random";
}

/* The campaign finds the bug within `bound` seeds; its replay fails the
 * same way; the fixed version passes sim_fixed_seeds() seeds. */
void sim_find_replay_and_pass(const vat_sim_scenario *buggy,
                              const vat_sim_scenario *fixed, vat_sim_strategy s,
                              double fault_rate, uint64_t bound,
                              const char *expect) {
  vat_sim_options o = sim_options(s, fault_rate);
  vat_sim_result r, again;
  ck_assert_vat_ok(vat_sim_run(buggy, &o, 1, bound, &r));
  ck_assert_msg(r.failed, "%s/%s: no failure in %llu seeds", buggy->name,
                sim_strategy_name(s), (unsigned long long)bound);
  ck_assert_msg(strstr(r.message, expect) != NULL, "%s", r.message);
  fprintf(stderr,
          "sim: %s/%s: first failure at seed %llu (%llu seeds): %s;"
          " faults: %s; notes: %s; %s\n",
          buggy->name, sim_strategy_name(s), (unsigned long long)r.seed,
          (unsigned long long)r.seeds_run, r.message, r.plan, r.notes,
          r.replay);
  /* How often it fails: the campaign restarted after each failing seed. */
  unsigned failing = 0;
  for (uint64_t next = 1; next <= bound;) {
    vat_sim_result f;
    ck_assert_vat_ok(vat_sim_run(buggy, &o, next, bound - next + 1, &f));
    failing += f.failed;
    next = f.seed + 1;
  }
  fprintf(stderr, "sim: %s/%s: %u of seeds 1..%llu fail\n", buggy->name,
          sim_strategy_name(s), failing, (unsigned long long)bound);
  ck_assert(r.shrunk.done);
  fprintf(stderr, "sim: %s/%s: shrunk in %llu runs: %s; %s\n", buggy->name,
          sim_strategy_name(s), (unsigned long long)r.shrunk.runs,
          r.shrunk.message, r.shrunk.replay);
  ck_assert_vat_ok(vat_sim_replay(buggy, &o, r.seed, &again));
  ck_assert(again.failed);
  ck_assert_str_eq(again.message, r.message);
  ck_assert_str_eq(again.plan, r.plan);
  ck_assert_str_eq(again.notes, r.notes);
  ck_assert_uint_eq(again.turns, r.turns);
  ck_assert_uint_eq(again.digest, r.digest);
  uint64_t n = sim_fixed_seeds();
  double t0 = test_wall_seconds();
  ck_assert_vat_ok(vat_sim_run(fixed, &o, 1, n, &r));
  double secs = test_wall_seconds() - t0;
  ck_assert_msg(!r.failed, "%s/%s: seed %llu: %s; faults: %s; %s", fixed->name,
                sim_strategy_name(s), (unsigned long long)r.seed, r.message,
                r.plan, r.replay);
  ck_assert_uint_eq(r.seeds_run, n);
  if (fault_rate > 0) /* the fixed version passed because it survived some */
    ck_assert_uint_ge(r.total_faults, n / 4);
  fprintf(stderr,
          "sim: %s/%s: %llu seeds pass, %llu turns, %llu faults; %.0f seeds/s,"
          " %.0f turns/s\n",
          fixed->name, sim_strategy_name(s), (unsigned long long)n,
          (unsigned long long)r.total_turns, (unsigned long long)r.total_faults,
          n / secs, r.total_turns / secs);
}
