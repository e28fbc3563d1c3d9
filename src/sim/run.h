/* Running one seed, and what a campaign does with a failure: the
 * harness's entry points for shrinking (shrink.c) and for tracing the
 * failing run (traced.c). */
#ifndef VAT_SIM_RUN_H
#define VAT_SIM_RUN_H

#include <stdbool.h>
#include <stdint.h>

#include "sim/world.h"
#include "vat/sim.h"

/** A trace_path for vat__sim_run_seed: a campaign's own seed, whose world
 *  writes its trace to VAT_TRACE's file, when set, as it ends (vat/sim.h);
 *  no other world of the harness reads VAT_TRACE. */
extern const char vat__sim_trace_env[];

/** Runs `seed`'s world to its end under `o`, with `plan` (NULL: the seed
 *  draws the faults), traced into `trace_path` if not NULL (nor
 *  vat__sim_trace_env), and r->trace_written set if it was. Sets r's
 *  figures for the seed (seed, turns, steps, digest, now_ns, verdict,
 *  nfaults, faults, plan_missed, message, plan, replay) and adds to its
 *  totals. Returns its world (what struck), or NULL with *err set when
 *  the world's system could not be made. Host thread. */
vat__sim_world *vat__sim_run_seed(const vat_sim_scenario *sc,
                                  const vat_sim_options *o,
                                  const vat__sim_plan *plan, uint64_t seed,
                                  const char *trace_path, vat_sim_result *r,
                                  int *err);

/** Whether `v` is a verdict of a bound on the process's resources
 *  (VAT_SIM_OUT_OF_TIME, VAT_SIM_OUT_OF_MEMORY): a cost of this machine,
 *  which a run again would pay again, neither shrunk nor traced. */
static inline bool vat__sim_over_bound(vat_sim_verdict v) {
  return v == VAT_SIM_OUT_OF_TIME || v == VAT_SIM_OUT_OF_MEMORY;
}

/** What runs `seed` again (vat_sim_result.replay): the assignments to
 *  paste, with `plan` (a plan's text) when the run followed an explicit
 *  one, else the seed alone; then a comment line on the scenario and
 *  options they assume (`timed`: the faults at a time the seed drew). */
void vat__sim_replay_line(const vat_sim_scenario *sc, const vat_sim_options *o,
                          uint64_t seed, const char *plan, unsigned timed,
                          char *buf, size_t size);

/** Shrinks the failure `out` reports, whose world was `w`, into
 *  out->shrunk (vat/sim.h), unless o->shrink_runs is 0. */
void vat__sim_shrink(const vat_sim_scenario *sc, const vat_sim_options *o,
                     const vat__sim_world *w, vat_sim_result *out);

/** Runs the failure `out` reports again (its shrunk run, if there is
 *  one) with tracing on, into o->trace_path or VAT_SIM_TRACE; sets
 *  out->trace_written. `plan` is the campaign's (NULL: drawn). */
void vat__sim_trace_failure(const vat_sim_scenario *sc,
                            const vat_sim_options *o, const vat__sim_plan *plan,
                            vat_sim_result *out);

#endif
