/* A world's systems and event sources (vat/sim.h, "Worlds of several
 * systems"): what the harness's run loop asks instead of its one
 * system's run, timer and clock calls. A world of one system and no
 * source runs as before, through that system's own run call. */
#ifndef VAT_SIM_MACHINES_H
#define VAT_SIM_MACHINES_H

#include <stdint.h>

#include "sim/world.h"
#include "vat/host.h"

/** The world `w` begins with its first system `sys` (made by the
 *  harness, its chooser set): it is the running world on this thread
 *  until vat__sim_machines_end. */
void vat__sim_machines_begin(vat__sim_world *w, vat_system *sys, uint64_t seed);
/** One step: the sources' and the systems' events due now fire, then one
 *  vat chosen among the ready vats of every system that has not crashed
 *  runs one turn. As vat_system_run(sys, 1, 0, rr) for one system. */
int vat__sim_machines_run(vat__sim_world *w, vat_run_result *rr);
/** Nanoseconds until the next timer of a live system, crash or source
 *  event (0: due now), or -1: none. */
void vat__sim_machines_next(vat__sim_world *w, int64_t *ns);
/** A stop fault struck a vat of `sys` in this step: the machine stops as
 *  vat_system_shutdown(sys, 0) stops it (what is held for it of delayed
 *  messages delivered first, to be dropped with the rest), is noted
 *  ("stop NAME") and reads stopped (vat_sim_system_stopped), and the
 *  sources are told; in a world of one, before its check's last word. */
void vat__sim_machines_stop(vat__sim_world *w, vat_system *sys);
/** Moves every system's clock `ns` on. */
void vat__sim_machines_advance(vat__sim_world *w, uint64_t ns);
/** The faults noted in the run (vat_sim_note, crashes) into `buf`; "none"
 *  when there were none. */
void vat__sim_machines_notes(const vat__sim_world *w, char *buf, size_t size);
/** The world ends: every system but the first (the harness's) is shut
 *  down and destroyed, and no world runs on this thread any more. */
void vat__sim_machines_end(vat__sim_world *w);

/** A fault at a time (sim/timed.c) strikes: the machine named `name`
 *  crashes now; false when there is none of that name, or it is down. */
bool vat__sim_machines_crash_named(vat__sim_world *w, const char *name);
/** ...or a source's fault: `src` (NULL: each source in turn, until one
 *  knows `text`) strikes `text` now. VAT_OK when it struck, with its hash
 *  for the digest and its source's name (its kind in the trace);
 *  VAT_EINVAL when no source knows `text`; VAT_ENOTFOUND when the source
 *  that knows it finds nothing it names now (*kind: that source's name). */
int vat__sim_machines_source_strike(vat__sim_world *w,
                                    const vat_sim_source *src, const char *text,
                                    uint64_t *hash, const char **kind);

#endif
