/* Faults at a time on a world's clock (vat/sim.h): machine crashes and
 * event sources' faults, drawn from the seed or read from an explicit
 * plan, each waiting for its time. The world's step (machines.c) asks
 * when the next is due and fires those due; a crash strikes there, a
 * source's fault in its source. Host thread, between steps. */
#ifndef VAT_SIM_TIMED_H
#define VAT_SIM_TIMED_H

#include <stdbool.h>
#include <stdint.h>

#include "sim/world.h"
#include "vat/sim.h"

/** The explicit plan's faults at a time (if it has any) wait for their
 *  times. As the world begins. */
void vat__sim_timed_begin(vat__sim_world *w);

/** A fault drawn from the seed: `text` (a plan's, copied) at `at`, to be
 *  struck by `src` (NULL: a crash, the harness's own). Nothing under an
 *  explicit plan, whose faults replace the seed's. */
void vat__sim_timed_drawn(vat__sim_world *w, uint64_t at, const char *text,
                          const vat_sim_source *src);

/** When the first fault waiting is due; UINT64_MAX: none waits. */
uint64_t vat__sim_timed_next(const vat__sim_world *w);

/** Strikes the faults due by `now`, in the order of their times, then of
 *  their planning (one that cannot strike is dropped: plan_missed counts
 *  a plan's); true when one was due. */
bool vat__sim_timed_fire(vat__sim_world *w, uint64_t now);

#endif
