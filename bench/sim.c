/* sim SEEDS ROUNDS: simulation testing's throughput (vat/sim.h) on the
 * bank of examples/bank_accounts.c (two account vats, six transfers, the
 * fixed version: 16 turns a world without faults).
 *
 * Each round runs, one after another, SEEDS worlds of it:
 *  - direct:   the deterministic mode without the harness: a fresh
 *              host-driven deterministic system per seed, the scenario's
 *              setup, then vat_system_run_until_quiescent;
 *  - random:   a campaign (vat_sim_run), RANDOM, no faults, here;
 *  - pct:      the same with PCT;
 *  - faults:   RANDOM with a fault at 2% of the steps (kills, failed turns);
 *  - parallel: the random campaign with jobs = -w (default every core).
 * A campaign steps one turn at a time, asks the chooser at every step and
 * the check after every turn: the gap between direct and random is the
 * harness's cost. Figures are medians over the rounds (one core for all
 * but parallel); the speed-up is parallel's seeds/s over random's. Every
 * campaign must pass every seed, and the direct and campaign worlds must
 * run the same turns, or it prints ok=0 and exits 1. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "bank_accounts.h"
#include "bench_util.h"

enum { PHASES = 5, MAX_ROUNDS = 64 };
enum { DIRECT, RANDOM, PCT, FAULTS, PARALLEL };
static const char *phase_name[PHASES] = {"direct", "random", "pct", "faults",
                                         "parallel"};

typedef struct figures {
  double seconds;
  uint64_t turns;
  bool ok;
} figures;

/* The worlds of seeds [1, seeds] run to quiescence in the deterministic
 * mode, without the harness. */
static figures direct(uint64_t seeds) {
  figures f = {.ok = true};
  double start = bench_now();
  for (uint64_t seed = 1; seed <= seeds; seed++) {
    vat_config cfg;
    vat_config_default(&cfg);
    cfg.workers = 0;
    cfg.deterministic = true;
    cfg.seed = seed;
    cfg.on_crash = NULL;
    vat_system *sys;
    bench_check(vat_system_new(&cfg, &sys), "system");
    void *world = bank_fixed.setup(sys, bank_fixed.ctx);
    vat_run_result rr;
    bench_check(vat_system_run_until_quiescent(sys, 0, &rr), "run");
    f.turns += rr.turns;
    char why[200];
    f.ok &= world != NULL && bank_fixed.check(world, true, why, sizeof why) &&
            bank_fixed.done(world);
    vat_system_shutdown(sys, 0);
    vat_system_destroy(sys);
  }
  f.seconds = bench_now() - start;
  return f;
}

static figures campaign(uint64_t seeds, vat_sim_strategy strategy,
                        double fault_rate, unsigned jobs) {
  vat_sim_options o;
  vat_sim_options_default(&o);
  o.strategy = strategy;
  o.pct_steps = 50;
  o.fault_rate = fault_rate;
  o.jobs = jobs;
  vat_sim_result r;
  double start = bench_now();
  int rc = vat_sim_run(&bank_fixed, &o, 1, seeds, &r);
  figures f = {.seconds = bench_now() - start, .turns = r.total_turns};
  f.ok = rc == VAT_OK && !r.failed && r.seeds_run == seeds;
  if (!f.ok)
    printf("campaign failed: %s: seed %" PRIu64 ": %s\n", vat_err_name(rc),
           r.seed, r.message);
  return f;
}

static int compare_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static double median(double *v, unsigned n) {
  qsort(v, n, sizeof *v, compare_double);
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

int main(int argc, char **argv) {
  bench_args args;
  bench_parse(argc, argv, "[SEEDS [ROUNDS]]  (default 20000 5)", 2, &args);
  uint64_t seeds = args.nsizes > 0 ? args.sizes[0] : 20000;
  uint64_t rounds = args.nsizes > 1 ? args.sizes[1] : 5;
  if (rounds > MAX_ROUNDS || seeds < 2) {
    fprintf(stderr, "sim: at most %d rounds, at least 2 seeds\n", MAX_ROUNDS);
    return 2;
  }
  if (vat_init() != VAT_OK)
    return 1;
  double seed_rate[PHASES][MAX_ROUNDS], turn_rate[PHASES][MAX_ROUNDS];
  uint64_t turns[PHASES] = {0};
  bool ok = true;
  for (unsigned k = 0; k < rounds; k++) {
    for (int p = 0; p < PHASES; p++) {
      figures f = p == DIRECT   ? direct(seeds)
                  : p == PCT    ? campaign(seeds, VAT_SIM_PCT, 0, 1)
                  : p == FAULTS ? campaign(seeds, VAT_SIM_RANDOM, 0.02, 1)
                                : campaign(seeds, VAT_SIM_RANDOM, 0,
                                           p == PARALLEL ? args.workers : 1);
      ok &= f.ok;
      turns[p] = f.turns;
      seed_rate[p][k] = (double)seeds / f.seconds;
      turn_rate[p][k] = (double)f.turns / f.seconds;
    }
  }
  /* Without faults every world runs the same turns, however scheduled. */
  ok &= turns[DIRECT] == turns[RANDOM] && turns[RANDOM] == turns[PCT] &&
        turns[RANDOM] == turns[PARALLEL];
  double seeds_s[PHASES], turns_s[PHASES];
  for (int p = 0; p < PHASES; p++) {
    seeds_s[p] = median(seed_rate[p], (unsigned)rounds);
    turns_s[p] = median(turn_rate[p], (unsigned)rounds);
    printf("sim %-8s %9.0f seeds/s %11.0f turns/s (%" PRIu64
           " turns a round; median of %" PRIu64 ")\n",
           phase_name[p], seeds_s[p], turns_s[p], turns[p], rounds);
  }
  double speedup = seeds_s[PARALLEL] / seeds_s[RANDOM];
  printf("sim: a campaign runs %.2fx the direct deterministic mode's turns/s;"
         " %u jobs: %.2fx one\n",
         turns_s[RANDOM] / turns_s[DIRECT], args.workers, speedup);
  if (!ok)
    printf("verification failed: turns direct %" PRIu64 " random %" PRIu64
           " pct %" PRIu64 " parallel %" PRIu64 "\n",
           turns[DIRECT], turns[RANDOM], turns[PCT], turns[PARALLEL]);
  printf("RESULT workload=sim workers=%u seeds=%" PRIu64 " rounds=%" PRIu64
         " rate=%.0f turns_rate=%.0f direct_rate=%.0f direct_turns_rate=%.0f"
         " pct_rate=%.0f faults_rate=%.0f parallel_rate=%.0f speedup=%.2f%s\n",
         args.workers, seeds, rounds, seeds_s[RANDOM], turns_s[RANDOM],
         seeds_s[DIRECT], turns_s[DIRECT], seeds_s[PCT], seeds_s[FAULTS],
         seeds_s[PARALLEL], speedup, ok ? "" : " ok=0");
  return ok ? 0 : 1;
}
