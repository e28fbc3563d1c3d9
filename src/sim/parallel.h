/* A campaign's seeds run in worker processes (vat/sim.h, "Parallel
 * campaigns"), merged into the result a serial campaign would give. */
#ifndef VAT_SIM_PARALLEL_H
#define VAT_SIM_PARALLEL_H

#include <stdint.h>

#include "sim/progress.h"
#include "vat/sim.h"

/* How a campaign runs its seeds. */
typedef struct vat__sim_seeds {
  /** Runs one seed alone into `out` (zeroed first), as a campaign of that
   *  one seed does but without shrinking or tracing a failure; returns
   *  its code. In a worker, for each seed; here, for the lowest failing
   *  one. */
  int (*run)(void *ctx, uint64_t seed, vat_sim_result *out);
  /** Finishes the report of the failing seed `run` ran last here, once
   *  that run failed as its worker's did (shrinks and traces it). */
  void (*settle)(void *ctx, vat_sim_result *out);
  void *ctx;
} vat__sim_seeds;

/** The worker processes `o` asks for: o->jobs, or the online cores for 0.
 *  At least 1. */
unsigned vat__sim_jobs(const vat_sim_options *o);

/** Runs seeds [first, first + count) in up to `jobs` worker processes,
 *  each seed by seeds->run, and fills `out` as a serial campaign would:
 *  the lowest failing seed run again here by seeds->run and, when it
 *  fails as it did in its worker, settled by seeds->settle; or the last
 *  seed's result from its worker; with seeds_run and the totals of a
 *  serial run. Draws `progress` meanwhile (may be NULL). Returns VAT_OK,
 *  the code of the lowest seed whose run returned an error (as a serial
 *  campaign stops there), or VAT_EIO when a pipe, the shared memory or a
 *  fork failed. The caller's thread only; it waits for every worker. */
int vat__sim_parallel(const vat__sim_seeds *seeds, uint64_t first,
                      uint64_t count, unsigned jobs,
                      vat__sim_progress *progress, vat_sim_result *out);

#endif
