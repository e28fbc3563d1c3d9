/* What the suites of bug programs under simulation share (test_sim.c,
 * test_sim_bugs.c): the campaign every buggy program must fail and its
 * fixed version pass. */
#ifndef VAT_TEST_SIM_PROGRAMS_H
#define VAT_TEST_SIM_PROGRAMS_H

#include <stdint.h>

#include "vat/sim.h"

/** Seeds a fixed program must pass: 500, or 10,000 with VAT_SIM_LONG=1. */
uint64_t sim_fixed_seeds(void);
/** The options of these campaigns: strategy `s`, faults at `fault_rate`. */
vat_sim_options sim_options(vat_sim_strategy s, double fault_rate);
const char *sim_strategy_name(vat_sim_strategy s);
/** The campaign finds the bug within `bound` seeds, with a message holding
 *  `expect`; its replay fails the same way; the fixed version passes
 *  sim_fixed_seeds() seeds. Check assertions. */
void sim_find_replay_and_pass(const vat_sim_scenario *buggy,
                              const vat_sim_scenario *fixed, vat_sim_strategy s,
                              double fault_rate, uint64_t bound,
                              const char *expect);

#endif
