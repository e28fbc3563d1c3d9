/* Two account vats and a transfer between them, a program with a classic
 * bug and its fix, and the scenario that tests it in simulation
 * (vat/sim.h): see bank_accounts.c. The test suite and the simulation
 * benchmark run the same scenarios. */
#ifndef VAT_EXAMPLE_BANK_ACCOUNTS_H
#define VAT_EXAMPLE_BANK_ACCOUNTS_H

#include "vat.h"

/** Loses money when an account dies in the middle of a transfer. */
extern const vat_sim_scenario bank_buggy;
/** The same, fixed: the sender watches its peer and refunds. */
extern const vat_sim_scenario bank_fixed;

#endif
