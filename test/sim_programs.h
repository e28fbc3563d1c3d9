/* What the suites of bug programs under simulation share (test_sim.c,
 * test_sim_bugs.c): the programs themselves, each buggy with a fixed
 * version, in one table with the campaign that must find each bug, and
 * the measurement of how fast the campaigns find them. */
#ifndef VAT_TEST_SIM_PROGRAMS_H
#define VAT_TEST_SIM_PROGRAMS_H

#include <stdint.h>

#include "vat/sim.h"

/* The programs with classic bugs. */
typedef enum sim_program_id {
  SIM_BANK,     /* a transfer that loses money (examples/bank_accounts.c) */
  SIM_LOCKS,    /* two workers taking two locks in opposite orders */
  SIM_CALLS,    /* two servers deadlocked on each other's requests */
  SIM_2PC,      /* a two-phase commit that blocks when its coordinator dies */
  SIM_ELECTION, /* two leaders elected across a partition */
  SIM_CACHE,    /* a cache left stale by two writers' crossed updates */
  SIM_PROGRAMS
} sim_program_id;

typedef struct sim_program {
  const vat_sim_scenario *buggy, *fixed;
  double fault_rate;  /* the campaigns' */
  uint64_t bound;     /* the bug is found within this many seeds */
  const char *expect; /* in the failure's message */
} sim_program;

/* Defined where each program is (test_sim.c, test_sim_bugs.c,
 * examples/bank_accounts.c); sim_programs.c lists them. */
extern const vat_sim_scenario sim_locks_buggy, sim_locks_fixed;
extern const vat_sim_scenario sim_calls_buggy, sim_calls_fixed;
extern const vat_sim_scenario sim_2pc_buggy, sim_2pc_fixed;
extern const vat_sim_scenario sim_election_buggy, sim_election_fixed;
extern const vat_sim_scenario sim_cache_buggy, sim_cache_fixed;

/** The table, by sim_program_id. */
const sim_program *sim_program_get(sim_program_id id);

/** Seeds a fixed program must pass: 500, or 10,000 with VAT_SIM_LONG=1. */
uint64_t sim_fixed_seeds(void);
/** The options of these campaigns: strategy `s`, faults at `fault_rate`. */
vat_sim_options sim_options(vat_sim_strategy s, double fault_rate);
const char *sim_strategy_name(vat_sim_strategy s);
/** Program `id` under strategy `s`: the campaign finds the bug within its
 *  bound, with a message holding its expect; its replay fails the same
 *  way; the fixed version passes sim_fixed_seeds() seeds. Check
 *  assertions. */
void sim_program_test(sim_program_id id, vat_sim_strategy s);
/** The same for a program outside the table (test_sim_net.c's): `buggy`
 *  fails within `bound` seeds with a message holding `expect`, its replay
 *  fails the same way, `fixed` passes sim_fixed_seeds() seeds. */
void sim_find_replay_and_pass(const vat_sim_scenario *buggy,
                              const vat_sim_scenario *fixed, vat_sim_strategy s,
                              double fault_rate, uint64_t bound,
                              const char *expect);
/** With VAT_SIM_SEEDS=1: for every program and strategy, 20 campaigns
 *  from different base seeds; prints the median seeds to the first
 *  failure, and seeds and turns per second. Without it, nothing. */
void sim_seeds_to_first_failure(void);

#endif
