/* Testing a program in simulation (vat/sim.h): the bank of
 * bank_accounts.c, whose transfer loses money when an account dies in
 * the middle of it.
 *
 * A campaign runs the scenario under many seeds, one fresh deterministic
 * world each: the seed decides which ready vat runs at every step, and
 * which faults strike (here a kill or a failed turn, at 2% of the steps).
 * It stops at the first seed whose check fails, and reports it: the seed,
 * the strategy, the faults that struck (the plan) and a line that runs
 * that seed again; then the plan shrunk (the faults moved as early as the
 * run still fails so) and the line that runs that. Run again, the seed fails
 * the same way: same turns, same digest. The fixed version then passes every
 * seed of a longer campaign, run in worker processes on every core.
 *
 * usage: bank [SEEDS]   (the fixed version's; default 10000)
 * Set VAT_SIM_SEED=N to run only seed N of each campaign. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bank_accounts.h"

/* A replay's two lines (vat/sim.h): what to paste, and what it assumes. */
static void print_replay(const char *replay) {
  const char *nl = strchr(replay, '\n');
  printf("  replay:   %.*s\n", nl ? (int)(nl - replay) : (int)strlen(replay),
         replay);
  if (nl != NULL)
    printf("            %s\n", nl + 1);
}

static void report(const vat_sim_options *o, const vat_sim_result *r) {
  printf("  seed:     %" PRIu64 " (the campaign ran %" PRIu64 " seeds)\n",
         r->seed, r->seeds_run);
  if (o->strategy == VAT_SIM_PCT)
    printf("  strategy: pct (depth %u, %" PRIu64 " steps)\n", o->pct_depth,
           o->pct_steps);
  else
    printf("  strategy: random\n");
  printf("  failure:  %s\n", r->message);
  printf("  faults:   %s\n", r->plan);
  print_replay(r->replay);
  printf("  shrunk:   %s (in %" PRIu64 " runs)\n", r->shrunk.plan,
         r->shrunk.runs);
  printf("            %s\n", r->shrunk.message);
  print_replay(r->shrunk.replay);
}

/* Finds the bug with `strategy`, shows the report, and replays it. */
static bool find_and_replay(vat_sim_strategy strategy) {
  vat_sim_options o;
  vat_sim_options_default(&o);
  o.strategy = strategy;
  o.pct_steps = 50;    /* PCT's k: these worlds run a few dozen steps */
  o.fault_rate = 0.02; /* a kill or a failed turn at 2% of the steps */
  vat_sim_result r;
  if (vat_sim_run(&bank_buggy, &o, 1, 1000, &r) != VAT_OK || !r.failed) {
    printf("bank: no seed of 1000 failed\n");
    return false;
  }
  printf("bank: a seed fails\n");
  report(&o, &r);
  vat_sim_result again;
  if (vat_sim_replay(&bank_buggy, &o, r.seed, &again) != VAT_OK)
    return false;
  bool same =
      again.failed && again.turns == r.turns && again.digest == r.digest;
  printf("  replayed: %s (%" PRIu64 " turns)\n",
         same ? "the same run, the same failure" : "NOT THE SAME", again.turns);
  return same;
}

int main(int argc, char **argv) {
  uint64_t seeds = argc > 1 ? strtoull(argv[1], NULL, 10) : 10000;
  if (vat_init() != VAT_OK || seeds == 0) {
    fprintf(stderr, "usage: bank [SEEDS]\n");
    return 2;
  }
  if (!find_and_replay(VAT_SIM_RANDOM) || !find_and_replay(VAT_SIM_PCT))
    return 1;

  vat_sim_options o;
  vat_sim_options_default(&o);
  o.fault_rate = 0.02;
  o.jobs = 0; /* one worker process per core */
  vat_sim_result r;
  if (vat_sim_run(&bank_fixed, &o, 1, seeds, &r) != VAT_OK)
    return 1;
  if (r.failed) {
    printf("bank-fixed: seed %" PRIu64 " fails: %s\n  %s\n", r.seed, r.message,
           r.replay);
    return 1;
  }
  printf("bank-fixed: all %" PRIu64 " seeds pass (%" PRIu64 " faults struck)\n",
         r.seeds_run, r.total_faults);
  return 0;
}
