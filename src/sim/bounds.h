/* A seed's bounds on this process's resources (vat_sim_options'
 * max_seed_time_ns and max_seed_memory, or the environment's): read once
 * per campaign, and metered between a world's steps. */
#ifndef VAT_SIM_BOUNDS_H
#define VAT_SIM_BOUNDS_H

#include <stddef.h>
#include <stdint.h>

#include "vat/sim.h"

/** Sets o's bounds from VAT_SIM_MAX_SEED_TIME and VAT_SIM_MAX_SEED_MEMORY
 *  where they are set (not empty). VAT_OK, or VAT_EINVAL with a line in
 *  `why` saying which variable and what it should be. */
int vat__sim_bounds_from_env(vat_sim_options *o, char *why, size_t size);

/** Where one seed's run began: the real time and the collector's memory
 *  in use then. */
typedef struct vat__sim_meter {
  uint64_t started_ns;
  size_t memory_then;
  unsigned steps; /* read every few steps only */
} vat__sim_meter;

void vat__sim_meter_start(vat__sim_meter *m);

/** VAT_SIM_PASSED while the run is within o's bounds; else the verdict,
 *  with why (a line naming the bound) in `why`. Cheap enough for every
 *  step: it reads the clocks on one step in a few. */
vat_sim_verdict vat__sim_meter_check(vat__sim_meter *m,
                                     const vat_sim_options *o, char *why,
                                     size_t size);

#endif
