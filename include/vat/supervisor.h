/* libvat — supervisors, as OTP has them: a vat that starts children, links
 * to them, traps their exits and restarts them by a strategy, within a
 * restart intensity. Built on the public API only (vat/core.h,
 * vat/exits.h).
 *
 * Strategies, when a child ends and must be restarted:
 *  - one_for_one:  that child alone is restarted;
 *  - one_for_all:  the other children are shut down (reverse start order),
 *                  then all are started again in start order;
 *  - rest_for_one: the children started after it are shut down (reverse
 *                  order), then it and they are started again in order.
 * Restart types: permanent children are always restarted; transient ones
 * only after an abnormal exit (not normal, shutdown, or an error coded
 * shutdown: vat_reason_is_orderly); temporary ones never, and they are
 * forgotten once they end or are shut down.
 * Intensity: more than `max_restarts` restarts within `max_seconds` makes
 * the supervisor shut every child down and end with reason `shutdown`.
 * Seconds are read on the system's clock (vat_system_now): in
 * deterministic mode the virtual clock, which only the host moves.
 * Shutting a child down: the supervisor monitors and unlinks it, sends it
 * exit(shutdown), waits for it to end up to the child's `shutdown_s`, then
 * kills it; children are shut down one at a time, newest first. Either
 * exit takes effect at the child's next turn boundary, whatever it has
 * queued (vat/exits.h), unless it traps exits and handles the shutdown
 * itself, in order.
 *
 * The supervisor ends: with `normal` after vat_supervisor_stop; with the
 * parent's reason when its parent (the vat that called
 * vat_supervisor_start_link) exits; with `shutdown` when the intensity is
 * exceeded or a child cannot be started at init — each time after shutting
 * its children down. A deliberate kill ends it at once; its children then
 * receive `killed` along their links.
 *
 * The shutdown timeout is a timer (vat/timer.h) armed by the supervisor;
 * it costs nothing while the supervisor waits. It belongs to one shutdown
 * of one child: once that child ended, a deadline of its shutdown that
 * fires late never kills the child started in its place.
 */
#ifndef VAT_SUPERVISOR_H
#define VAT_SUPERVISOR_H

#include <stddef.h>

#include "vat/core.h"
#include "vat/exits.h"
#include "vat/promise.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum vat_sup_strategy {
  VAT_ONE_FOR_ONE,
  VAT_ONE_FOR_ALL,
  VAT_REST_FOR_ONE,
} vat_sup_strategy;

typedef enum vat_restart {
  VAT_PERMANENT,
  VAT_TRANSIENT,
  VAT_TEMPORARY,
} vat_restart;

/** Starts one child. Runs in a turn of the supervisor (`turn`); it must
 *  make the child with vat_spawn_link (or vat_spawn then vat_link) and
 *  store its ref in *out. A non-zero return is a failed start: counted as
 *  a restart, and tried again while the intensity allows. */
typedef int (*vat_child_start_fn)(vat_turn *turn, void *arg, vat_ref **out);

typedef struct vat_child_spec {
  const char *id;           /* a name for the caller's use; may be NULL */
  vat_child_start_fn start; /* required */
  void *arg;                /* passed to start; kept alive by the spec */
  vat_restart restart;
  /** Seconds a child gets to end after exit(shutdown) before it is killed:
   *  0 kills it at once (OTP's brutal_kill), negative waits for ever
   *  (OTP's infinity, for children that are supervisors). */
  double shutdown_s;
} vat_child_spec;

typedef struct vat_sup_spec {
  vat_sup_strategy strategy;
  /** Restart intensity: at most `max_restarts` in any `max_seconds`.
   *  max_restarts 0 means no restart at all is allowed. */
  unsigned max_restarts;
  double max_seconds;
  const vat_child_spec *children; /* copied at start */
  size_t nchildren;
} vat_sup_spec;

/** Spawns a supervisor linked to the calling vat; it starts the children
 *  in order in its first turn. Inside a turn. Errors: VAT_EINVAL (NULL
 *  spec or out, a child without start, max_seconds not positive),
 *  VAT_ENOTINTURN, VAT_ETURNFAILED. */
int vat_supervisor_start_link(vat_turn *turn, const vat_sup_spec *spec,
                              vat_ref **out);

/** vat_supervisor_start_link from a host thread, unlinked, into `sys`.
 *  Errors: as vat_host_spawn, and VAT_EINVAL as above. */
int vat_host_supervisor_start(vat_system *sys, const vat_sup_spec *spec,
                              vat_ref **out);

/** Asks the supervisor to shut its children down and end with `normal`.
 *  Inside a turn. Errors: VAT_EINVAL, VAT_ENOTINTURN, VAT_ETURNFAILED. */
int vat_supervisor_stop(vat_turn *turn, vat_ref *sup);

/** vat_supervisor_stop from a host thread. Errors: as vat_host_send. */
int vat_host_supervisor_stop(vat_ref *sup);

/** What vat_supervisor_which_children reports: the children in start
 *  order, refs[i] NULL for a child not running now. */
typedef struct vat_sup_children {
  size_t n;
  vat_ref **refs;
  const char **ids;
} vat_sup_children;

/** Asks the supervisor for its children: it sends `fn(children)` to
 *  `reply_to`, with `arg` a vat_sup_children *. The answer reflects the
 *  supervisor's view when it handles the request (a restart in progress
 *  shows the children not yet restarted as NULL). Inside a turn (the host
 *  variant from a host thread). Errors: VAT_EINVAL, and those of
 *  vat_send / vat_host_send. */
int vat_supervisor_which_children(vat_turn *turn, vat_ref *sup,
                                  vat_ref *reply_to, vat_fn fn);
int vat_host_supervisor_which_children(vat_ref *sup, vat_ref *reply_to,
                                       vat_fn fn);

/** The supervisor's children as a promise, which a host thread can wait
 *  on (vat_promise_wait) and a vat can observe (vat_when). It resolves
 *  with a list, in start order, of records `child(id, ref)`: `id` the
 *  spec's id as a string (null when the spec has none), `ref` the child
 *  (null for a child not running now), as the supervisor sees them when
 *  it handles the request. It breaks with the supervisor's exit reason if
 *  that has ended (noproc when unknown). Inside a turn (the host variant
 *  from a host thread). Errors: those of vat_call / vat_host_call
 *  (VAT_EINVAL for a NULL out: then nothing is sent). */
int vat_supervisor_children(vat_turn *turn, vat_ref *sup, vat_promise **out);
int vat_host_supervisor_children(vat_ref *sup, vat_promise **out);

#ifdef __cplusplus
}
#endif

#endif
