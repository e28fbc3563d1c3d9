/* Delay faults (vat/sim.h): messages a turn sends to other vats held back
 * for some steps, so that others' messages to the same vat overtake them.
 * The world watches its system's deliveries (core/system.h, det_hold) only
 * while delay faults may strike. */
#ifndef VAT_SIM_HOLD_H
#define VAT_SIM_HOLD_H

#include <stdint.h>

#include "core/vat.h"
#include "sim/world.h"

/** Starts watching the deliveries of w's system. Host thread, between run
 *  calls, before the first. */
void vat__sim_hold_watch(vat__sim_world *w);

/** A delay fault on `v`, the vat this step runs: what its turn now sends
 *  to other vats, and may keep its place in their queues, is held for
 *  `steps` steps. From the chooser. */
void vat__sim_hold_sends(vat__sim_world *w, vat__vat *v, uint64_t steps);

/** Whether anything is held. */
bool vat__sim_holding(const vat__sim_world *w);

/** Delivers what is held: all of it, or (all false) what is due by the
 *  world's step count. Host thread, between run calls. */
void vat__sim_hold_release(vat__sim_world *w, bool all);

#endif
