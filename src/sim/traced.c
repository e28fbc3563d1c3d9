/* The failing run's trace (vat/sim.h): the run a campaign reports (its
 * shrunk form, when shrinking found one) run once more, traced. A world
 * replays exactly, so it is the same run: the digests must agree, or no
 * trace is claimed. */
#include <stdlib.h>
#include <string.h>

#include "sim/run.h"
#include "sim/world.h"
#include "util/gc.h"
#include "util/mem.h"

void vat__sim_trace_failure(const vat_sim_scenario *sc,
                            const vat_sim_options *o, const vat__sim_plan *plan,
                            vat_sim_result *out) {
  const char *path = o->trace_path ? o->trace_path : getenv("VAT_SIM_TRACE");
  out->trace_written = false;
  if (path == NULL || *path == '\0')
    return;
  uint64_t digest = out->digest;
  vat__sim_plan shrunk;
  char why[256];
  if (out->shrunk.done && vat__sim_plan_parse(out->shrunk.plan, &shrunk, why,
                                              sizeof why) == VAT_OK) {
    plan = &shrunk;
    digest = out->shrunk.digest;
  }
  vat_sim_result *again = vat__gc_alloc(sizeof *again);
  int err;
  if (vat__sim_run_seed(sc, o, plan, out->seed, path, again, &err) != NULL)
    out->trace_written = again->trace_written && again->digest == digest;
}
