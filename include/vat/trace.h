/* libvat — turn traces, for Perfetto (ui.perfetto.dev) and chrome://tracing.
 *
 * A traced system records, per worker (in a host-driven system: for the
 * one context its run calls act as), into a ring buffer allocated when
 * the system starts: each turn (its vat, entity, and the handler
 * function's symbol or the message's selector or signal), each send with a
 * flow id linking it to the turn that runs it, spawns, vat exits (down
 * notifications and exit signals are turns of their own, named "down" and
 * "exit"), and when a worker parks and wakes. Recording takes no lock,
 * allocates nothing and formats nothing; when a ring is full the oldest
 * events are overwritten.
 *
 * Turning it on: vat_config.trace_path names the file (or "" to write
 * only on request), or, with trace_path NULL, the environment variable
 * VAT_TRACE=FILE does (a process's second and later systems traced that
 * way write FILE.2, FILE.3, ...). vat_config.trace_events, or
 * VAT_TRACE_EVENTS, sets the ring's size in events (48 bytes each;
 * default 65536 per worker).
 *
 * The file is Trace Event Format JSON, written when the system shuts down
 * and on request: one track per worker ("worker N", or "host"), a slice
 * per turn, an arrow from each send to the turn it caused. A simulated
 * world's system (vat/sim.h) draws one track per vat instead, named as
 * its fault plans name the vat, and each fault injected into a vat is an
 * instant on the vat's track ("cat": "fault", named by its kind, the vat,
 * its step and its plan's text in "args"); a fault at a time (a machine's
 * crash, a network's fault) strikes no vat, and is an instant on the host's
 * track with no "vat" in its "args". Its
 * "otherData" says how many events were overwritten (in all, and per
 * track, also in each track's thread_name metadata) and how many flows
 * lost an end: a flow whose send or turn was overwritten, or whose message
 * was never run (a dead letter, or still queued), is drawn as no arrow,
 * and its surviving end carries "flow_lost". Vats and entities are named
 * by address (a deterministic system's: see below); a collected vat's
 * address may later be another's. Handler
 * functions are named by symbol: an exported one through dladdr, a static
 * one from its object file's symbol table (unless stripped), else as
 * "program+0xOFFSET" (addr2line resolves it).
 *
 * Time: the clock is read once per group of up to 16 consecutive turns
 * on a worker (and whenever the worker goes idle, parks or wakes); the
 * turns of a group get equal shares of the time from that reading to the
 * next. So a single turn's start and length are exact only to within its
 * group's span (typically well under a microsecond for fast turns), while
 * their order, and the group's total, are exact. Once a group averaged
 * more than about a microsecond per turn, every turn reads the clock
 * until 16 in a row are fast again: slow turns get their true durations.
 * A turn's slice lasts until the worker's next turn or until it goes
 * idle, so it includes the few nanoseconds of scheduling after the
 * handler returns. "otherData" says "clock": "monotonic".
 *
 * A deterministic system (vat_config.deterministic; every simulated
 * world, vat/sim.h) is stamped with its virtual clock instead
 * (vat_system_now, from the time it was made), and "otherData" says
 * "clock": "virtual". A turn starts at the virtual time, or 1 ns after
 * the previous turn's start when the clock has not moved past that: the
 * clock stands still while turns run, so each turn takes one nanosecond
 * of the trace, in the order the turns ran, never overlapping. Whatever
 * is recorded between two turns (a timer's send, a simulated fault, the
 * run call ending) is at the time the next turn starts. So a turn after
 * the clock moved starts at exactly the virtual time (a timer's turn at
 * the instant it was due), and the trace runs ahead of the virtual clock
 * by at most one nanosecond per turn since the clock last moved past it.
 * Its vats and entities are named "@1", "@2", ... in the order the file
 * first names them, and its flow ids in "flow_lost" without the bits
 * that tell the process's systems apart: everything in the file follows
 * from what ran, so one program run twice the same way (a seed replayed,
 * in this process or another) writes the same file, byte for byte, as
 * long as no vat or entity the rings name is collected and its memory
 * reused for another in between.
 *
 * Cost: off, one test per batch of turns; on, one 48-byte ring write per
 * turn (a send records nothing of its own: its turn counts it), and a
 * clock read per group of turns (README.md, "Looking at a trace", has the
 * measured figures); a deterministic system reads its virtual clock, an
 * atomic load, at every turn.
 */
#ifndef VAT_TRACE_H
#define VAT_TRACE_H

#include "vat/core.h"

#ifdef __cplusplus
extern "C" {
#endif

/** Writes what `sys`'s trace rings hold now to `path` (NULL: the file the
 *  system was configured with), leaving them as they are. While the
 *  system runs, events recorded during the call may count as lost. Host
 *  thread; also after vat_system_shutdown, until vat_system_destroy.
 *  Errors: VAT_EINVAL (NULL sys; NULL path and none configured on a
 *  traced system), VAT_ENOTSUP (the system is not traced, whatever the
 *  path: no path could make it succeed), VAT_EIO (the file could not be
 *  written: errno says why), VAT_ENOMEM, VAT_ECLOSED (destroyed),
 *  VAT_EINTURN, VAT_ENOTREGISTERED, VAT_ENOTINIT. */
int vat_system_trace_write(vat_system *sys, const char *path);

#ifdef __cplusplus
}
#endif

#endif
