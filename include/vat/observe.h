/* libvat — observing a running program: vat labels, crash reports,
 * snapshots of vats and systems, and monitors held by host threads.
 *
 * Everything here reads what the runtime keeps anyway; none of it costs
 * the message path anything. Snapshots are taken without stopping the vat
 * or its system: each field is read once, so a snapshot of a vat that runs
 * meanwhile mixes moments (see each field).
 */
#ifndef VAT_OBSERVE_H
#define VAT_OBSERVE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "vat/core.h"
#include "vat/promise.h"
#include "vat/value.h"

#ifdef __cplusplus
extern "C" {
#endif

/* --- Labels ---------------------------------------------------------------
 * A label is a name for humans: it shows in crash reports and snapshots.
 * It is not an authority: nothing looks a vat up by its label, and two
 * vats may share one. At most VAT_LABEL_MAX bytes are kept (a longer label
 * is cut at the last whole UTF-8 character that fits); the library keeps
 * its own copy, so the caller's buffer may go away. A vat gets its label
 * from vat_entity_def.label when it is spawned, or from vat_set_label. */

#define VAT_LABEL_MAX 63

/** Sets (or, with NULL, clears) the calling vat's label, at once.
 *  Inside a turn. Errors: VAT_ENOTINTURN, VAT_ETURNFAILED. */
int vat_set_label(vat_turn *turn, const char *label);

/** The label of ref's vat, or NULL when it has none. The string is the
 *  library's and never changes: a later vat_set_label makes a new one.
 *  Keep it where the collector looks to use it later. Any thread. */
const char *vat_ref_label(vat_ref *ref);

/* --- Crash reports --------------------------------------------------------
 * Every vat that ends with a reason other than `normal`, `shutdown` or an
 * error coded `shutdown` (see vat_reason_is_orderly) is reported once to
 * its system's vat_config.on_crash, after its stop callbacks ran and its
 * links and monitors fired, on the thread that ran its last turn, outside
 * any turn and holding no lock of the library: the hook may send from the
 * host API (vat_host_send...), but must not block. Vats spawned by a turn
 * that failed, which never ran, are not reported: the report of the vat
 * whose turn failed covers them. Vats still alive when their system stops
 * are not reported either.
 *
 * The hook hears of every such end, watched or not (`watched` says). The
 * default, vat_crash_print, writes a line only for a vat that nobody
 * watched: a vat whose end reaches a link or a monitor is the watcher's
 * to report (a supervisor restarting a child, a linked vat going down
 * with it), and writing those too would repeat each restart and every
 * step of a chain of links; a vat that died with nobody watching would
 * otherwise leave no trace at all. */

struct vat_crash_report {
  vat_ref *vat;      /* the vat's first entity */
  const char *label; /* NULL when it has none */
  vat_value reason;  /* why it ended */
  /* What it was handling when it ended, at most one of these set:
   *  - `selector`: a dynamic message (vat_send_msg); a method name from
   *    a peer is a weak atom (vat_atom_intern_weak_n), alive while
   *    collector-visible memory refers to it: keep it there, or copy
   *    its name, to read it after the callback;
   *  - `handler`: the function a message ran: vat_send's fn, or a
   *    request's vat_request_fn (vat_call) cast to vat_fn, to compare
   *    and never to call; and its symbol name where the platform can
   *    tell (dladdr: exported symbols only; make the handler non-static
   *    and link the program with -rdynamic), else `handler_name` NULL;
   *  - `signal`: a runtime signal, by name ("exit" for an exit signal,
   *    which is how a kill or a link ends a vat), or "signal".  */
  const vat_atom *selector;
  vat_fn handler;
  const char *handler_name;
  const char *signal;
  /* A link or a monitor was watching the vat when it ended. */
  bool watched;
};

/** The default crash hook: writes one line for an unwatched vat, none for
 *  a watched one, to `ctx` (a FILE *), or to stderr when `ctx` is NULL:
 *    libvat: vat "label" crashed: REASON (handling WHAT)
 *  (a vat without a label shows as "vat 0x..."; REASON as vat_format
 *  writes it, cut at 200 bytes). One write per line, so lines from
 *  several threads do not interleave. Any thread. */
void vat_crash_print(void *ctx, const vat_crash_report *report);

/** Formats the crash report's line as vat_crash_print writes it (with its
 *  newline) into buf (size bytes, NUL-terminated when size > 0); returns
 *  the length the whole line needs, like snprintf. Any thread. */
size_t vat_crash_format(const vat_crash_report *report, char *buf, size_t size);

/* --- Snapshots -------------------------------------------------------- */

/** One vat, as vat_ref_inspect sees it. */
typedef struct vat_info {
  vat_system *system;
  const char *label; /* NULL: none (see vat_ref_label) */
  /* As vat_ref_exit_reason: null while alive; once it ended, its reason;
   * `shutdown` once its system stopped with it alive (then not alive). */
  bool alive;
  vat_value exit_reason;
  /* Messages queued and not yet handled: the one being handled is not
   * counted. Exact while the vat is idle or blocked in a turn; while it
   * runs, an approximation (the queue changes as it is counted). */
  size_t queue_len;
  /* Turns run, counted modulo 2^32. */
  uint32_t turns;
  /* As of the vat's last change to them (a vat changes its links and
   * monitors in its own turns; a link or monitor made by another vat
   * counts once that vat's signal reached this one). 0 once it ended. */
  size_t links;
  size_t monitors_held; /* monitors this vat made, not yet fired */
  size_t monitored_by;  /* monitors on this vat, vats' and hosts' */
  bool traps_exits;
  /* Muted (vat_overload_policy, VAT_OVERLOAD_MUTE): taken off the
   * scheduler until the vat it sent to drains; `muted_on_label` is that
   * vat's label (NULL: none, or not muted). A label, not a ref: a
   * snapshot hands out no capability. vat_ref_is_muted_on asks about a
   * vat the caller holds. */
  bool muted;
  const char *muted_on_label;
} vat_info;

/** Whether ref's vat is muted on `on`'s vat now (a snapshot). Any
 *  thread. False for NULL refs. */
bool vat_ref_is_muted_on(vat_ref *ref, vat_ref *on);

/** A snapshot of ref's vat. Any thread; it does not stop the vat.
 *  Errors: VAT_EINVAL (NULL ref or out). */
int vat_ref_inspect(vat_ref *ref, vat_info *out);

/** One worker thread of a system, as vat_system_inspect sees it. Each
 *  field is written by its worker alone; a snapshot reads each once. */
typedef struct vat_worker_info {
  uint64_t turns;  /* turns it ran */
  uint64_t steals; /* vats it took from another worker's queues */
  uint64_t parks;  /* times it went to sleep for want of work */
  /* Since it started: time asleep (parked) and the rest (running turns,
   * looking for work, spinning). 0 in a host-driven system. */
  uint64_t idle_ns;
  uint64_t busy_ns;
} vat_worker_info;

typedef struct vat_sys_info {
  vat_stats stats;    /* as vat_system_stats */
  unsigned workers;   /* worker threads; 1 for a host-driven system */
  bool host_driven;   /* workers 0 in its config: the host runs it */
  bool running;       /* not shutting down, shut down or destroyed */
  uint64_t uptime_ns; /* since vat_system_new (monotonic clock) */
} vat_sys_info;

/** A snapshot of `sys`: fills *out, and the first `cap` entries of
 *  `workers` (NULL with cap 0: none) with one per worker. Returns the
 *  number of workers (which may exceed cap), or an error. Any thread;
 *  also after vat_system_destroy, with the final figures.
 *  Errors: VAT_EINVAL (NULL sys or out, NULL workers with cap > 0). */
int vat_system_inspect(vat_system *sys, vat_sys_info *out,
                       vat_worker_info *workers, size_t cap);

/* --- Watching a vat from a host thread ------------------------------------
 * A host thread monitors a vat as a vat does (vat_monitor), but the down
 * notification settles a promise, so a plain main() can wait for a vat's
 * end with vat_promise_wait and learn why:
 *
 *   vat_promise *down;
 *   vat_host_monitor(worker, NULL, &down);
 *   vat_value reason;
 *   vat_promise_wait(down, -1, &reason);   // VAT_OK: it ended; why
 */

typedef struct vat_host_mon vat_host_mon;

/** Monitors target's vat: once it ends, *down resolves with its exit
 *  reason; if it has already ended, with `noproc`; if its system stops
 *  with it alive, with `shutdown`. The monitor fires once. `mon` (may be
 *  NULL) receives a handle for vat_host_demonitor. Counts as a watcher
 *  (vat_crash_report.watched). Host thread. Errors: VAT_EINVAL (NULL
 *  target or down), VAT_EINTURN, VAT_ENOTINIT, VAT_ENOTREGISTERED,
 *  VAT_ECLOSED (target's system is shutting down, target alive). */
int vat_host_monitor(vat_ref *target, vat_host_mon **mon, vat_promise **down);

/** Removes the monitor: unless it fired already, its promise breaks with
 *  the atom `demonitored` and never resolves. Returns VAT_OK when it was
 *  removed, VAT_ENOTFOUND when it had fired (or was removed) before.
 *  Any thread. Errors also: VAT_EINVAL (NULL mon). */
int vat_host_demonitor(vat_host_mon *mon);

/** The atom "demonitored". Any thread. */
const vat_atom *vat_atom_demonitored(void);

#ifdef __cplusplus
}
#endif

#endif
