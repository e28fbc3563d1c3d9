/* See sim_programs.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bank_accounts.h"
#include "sim_programs.h"
#include "support.h"

/* Each program's campaign: the fault rate it needs (the bank, 2pc and the
 * election need a vat to die; the others are schedules alone), the seeds
 * within which a campaign from seed 1 must find the bug, and what the
 * failure says. */
static const sim_program programs[SIM_PROGRAMS] = {
    [SIM_BANK] = {&bank_buggy, &bank_fixed, 0.05, 200, "money not conserved"},
    [SIM_LOCKS] = {&sim_locks_buggy, &sim_locks_fixed, 0, 200,
                   "liveness: quiescent"},
    [SIM_CALLS] = {&sim_calls_buggy, &sim_calls_fixed, 0, 200,
                   "liveness: quiescent"},
    [SIM_2PC] = {&sim_2pc_buggy, &sim_2pc_fixed, 0.05, 300,
                 "liveness: quiescent"},
    [SIM_ELECTION] = {&sim_election_buggy, &sim_election_fixed, 0.1, 300,
                      "leaders in term 1"},
    [SIM_CACHE] = {&sim_cache_buggy, &sim_cache_fixed, 0, 300, "stale cache"},
};

const sim_program *sim_program_get(sim_program_id id) {
  return &programs[id];
}

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

void sim_program_test(sim_program_id id, vat_sim_strategy s) {
  const sim_program *p = &programs[id];
  sim_find_replay_and_pass(p->buggy, p->fixed, s, p->fault_rate, p->bound,
                           p->expect);
}

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
  vat_sim_options count = o;
  count.shrink_runs = 0; /* only counted: not shrunk */
  for (uint64_t next = 1; next <= bound;) {
    vat_sim_result f;
    ck_assert_vat_ok(vat_sim_run(buggy, &count, next, bound - next + 1, &f));
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
          "sim: %s/%s: %llu seeds pass, %llu turns, %llu faults in %.2f s; "
          "%.0f seeds/s, %.0f turns/s\n",
          fixed->name, sim_strategy_name(s), (unsigned long long)n,
          (unsigned long long)r.total_turns, (unsigned long long)r.total_faults,
          secs, n / secs, r.total_turns / secs);
}

static int compare_u64(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return (x > y) - (x < y);
}

enum { CAMPAIGNS = 20 };

void sim_seeds_to_first_failure(void) {
  const char *e = getenv("VAT_SIM_SEEDS");
  if (e == NULL || strcmp(e, "1") != 0)
    return;
  printf("sim-seeds: | program | RANDOM | PCT |\n");
  for (int id = 0; id < SIM_PROGRAMS; id++) {
    const sim_program *p = &programs[id];
    uint64_t median[2];
    for (int s = VAT_SIM_RANDOM; s <= VAT_SIM_PCT; s++) {
      vat_sim_options o = sim_options(s, p->fault_rate);
      o.shrink_runs = 0; /* the campaigns' rates, without shrinking's runs */
      uint64_t found[CAMPAIGNS], seeds = 0, turns = 0;
      double t0 = test_wall_seconds();
      for (unsigned c = 0; c < CAMPAIGNS; c++) {
        vat_sim_result r;
        ck_assert_vat_ok(
            vat_sim_run(p->buggy, &o, 1 + c * 1000000ull, 100000, &r));
        ck_assert(r.failed);
        found[c] = r.seeds_run;
        seeds += r.seeds_run;
        turns += r.total_turns;
      }
      double secs = test_wall_seconds() - t0;
      qsort(found, CAMPAIGNS, sizeof found[0], compare_u64);
      median[s] = (found[CAMPAIGNS / 2 - 1] + found[CAMPAIGNS / 2]) / 2;
      printf("sim-seeds: %-9s %-6s median %3llu seeds to first failure "
             "(min %llu, max %llu); %.0f seeds/s, %.0f turns/s\n",
             p->buggy->name, sim_strategy_name(s),
             (unsigned long long)median[s], (unsigned long long)found[0],
             (unsigned long long)found[CAMPAIGNS - 1], seeds / secs,
             turns / secs);
    }
    printf("sim-seeds: | %s | %llu | %llu |\n", p->buggy->name,
           (unsigned long long)median[0], (unsigned long long)median[1]);
  }
}
