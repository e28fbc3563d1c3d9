/* libvat — exits between vats: links, monitors, trapping exits and exit
 * signals, with Erlang's rules.
 *
 * Links and monitors join vats, not entities: a ref names its vat. A vat
 * that ends sends its exit reason to every vat linked to it (an exit
 * signal) and a down notification to every monitor held on it.
 *
 * A vat receiving an exit signal, in order (as Erlang does):
 *  1. a signal that travelled along a link that no longer exists (the
 *     receiver unlinked meanwhile) is dropped; otherwise the link is removed;
 *  2. if the vat traps exits and the signal is not a deliberate kill (see
 *     vat_exit), it becomes a call of the vat's exit handler with the
 *     sender and the reason;
 *  3. else a `normal` reason is dropped, unless a vat sent it to itself;
 *  4. else the vat ends with that reason; a deliberate kill ends it with
 *     `killed`, which is what its own links then receive (and may trap).
 * Linking to or monitoring a vat that has ended yields an exit or a down
 * notification with reason `noproc`. Each link and each monitor fires at
 * most once, and a monitor that was not removed fires exactly once.
 * A vat that ends sends its exit signals in the order its links were made,
 * then its down notifications in the order its monitors were made, so a
 * deterministic system (vat_config.deterministic) replays them the same
 * way every time, in one process or another.
 *
 * Stop callbacks (vat_entity_def.on_stop) run when their vat ends, outside
 * any turn (see vat/core.h), before its links and monitors fire, so
 * whoever hears of the end sees their work done. They do not run for vats
 * still alive when their system stops.
 *
 * Every change to a vat's links and monitors made in a turn takes effect
 * when that turn commits, in call order with its sends; a failed turn
 * changes nothing. (vat_trap_exit applies at once: a failed turn ends the
 * vat anyway.) Signals from one vat to another arrive in the order they
 * were committed, with its messages.
 *
 * An exit signal that ends its receiver (rule 4) takes effect at the
 * receiver's next turn boundary, whatever its backlog, as in Erlang: it
 * overtakes the messages queued before it, which become dead letters
 * (vat_stats.dead_letters; a request among them breaks with the vat's
 * reason, as for any message to a vat that has ended). The links and
 * monitors made or removed before it still take effect first. So a kill
 * ends a flooded vat after at most the turn it is running, whether or not
 * backpressure muted it (vat/core.h: a muted vat is taken off its
 * receiver's list and run, while the receiver stays overloaded), and a
 * supervisor's `shutdown_s` bounds a child's end whatever it has queued.
 * An exit that a trap turns into a call (rule 2), and a down notification,
 * keep their place after the messages their sender sent before them.
 *
 * Who may call: the functions taking a vat_turn are "inside a turn" (see
 * vat/core.h): VAT_ENOTINTURN outside one, VAT_ETURNFAILED once the turn
 * has failed. vat_host_exit is "host thread".
 */
#ifndef VAT_EXITS_H
#define VAT_EXITS_H

#include <stdbool.h>
#include <stdint.h>

#include "vat/core.h"
#include "vat/value.h"

#ifdef __cplusplus
extern "C" {
#endif

/* --- Exit reasons --------------------------------------------------------
 * An exit reason is any non-null vat_value. The well-known ones are atoms:
 *  normal   the vat stopped (vat_stop); does not kill linked vats.
 *  killed   the vat was killed deliberately (vat_exit with `killed`);
 *           untrappable only as the deliberate kill itself.
 *  noproc   the vat was already dead when linked or monitored.
 *  shutdown an orderly stop asked by a supervisor or the system: what
 *           vat_ref_exit_reason reports for a vat still alive when its
 *           system stopped.
 * Any other value is an error reason; vat_reason_error makes the usual
 * shape (an atom code and an optional payload). A vat ends itself with any
 * reason, after its turn's effects, with vat_stop_with (vat/core.h). */

/** The atom "shutdown". Any thread. */
const vat_atom *vat_atom_shutdown(void);

/** An error reason with `code` and `payload` (null for none): vat_error.
 *  Read it back with vat_error_code / vat_error_payload. Any thread. */
vat_value vat_reason_error(const vat_atom *code, vat_value payload);

/** True for the reason `normal`. Any thread. */
bool vat_reason_is_normal(vat_value reason);

/** True for `normal`, `shutdown` and an error whose code is `shutdown`:
 *  the reasons after which a transient child is not restarted (OTP's
 *  rule). Any thread. */
bool vat_reason_is_orderly(vat_value reason);

/* --- Handlers ------------------------------------------------------------ */

/** A trapped exit: runs as a turn of the trapping vat, on the entity given
 *  to vat_trap_exit (`state` is its state; vat_self returns it). `from` is
 *  the sending vat's first entity (the ref vat_spawn returned for it), or
 *  NULL for a signal sent from a host thread. */
typedef void (*vat_exit_fn)(vat_turn *turn, void *state, vat_ref *from,
                            vat_value reason);

/** A down notification: runs as a turn of the monitoring vat, on the entity
 *  that called vat_monitor. `who` is the ref given to vat_monitor. */
typedef void (*vat_down_fn)(vat_turn *turn, void *state, uint64_t monitor,
                            vat_ref *who, vat_value reason);

/* --- Links ---------------------------------------------------------------- */

/** Links the calling vat with `peer`'s vat, both ways; at most one link per
 *  pair (linking again does nothing), linking to one's own vat does
 *  nothing. If the peer has ended, the caller receives an exit signal with
 *  reason `noproc` through the new link. Inside a turn.
 *  Errors: VAT_EINVAL (NULL peer), VAT_ENOTINTURN, VAT_ETURNFAILED. */
int vat_link(vat_turn *turn, vat_ref *peer);

/** Removes the link with `peer`'s vat, if any, on both sides (nothing
 *  happens if the caller is not linked to it). No exit signal travelling
 *  along the removed link is acted on afterwards, and when both sides
 *  change the link at once they still end up agreeing.
 *  Inside a turn. Errors: as vat_link. */
int vat_unlink(vat_turn *turn, vat_ref *peer);

/** vat_spawn and vat_link as one step: the new vat is linked from birth,
 *  so it cannot end unseen. If the turn fails, the new vat dies with the
 *  turn's reason and no link exists. Inside a turn. Errors: as vat_spawn. */
int vat_spawn_link(vat_turn *turn, const vat_entity_def *def, vat_ref **out,
                   void **state_out);

/* --- Monitors ------------------------------------------------------------- */

/** Monitors `target`'s vat on behalf of the calling entity: when that vat
 *  ends (or if it has already ended: reason `noproc`), `on_down` runs once
 *  on the caller. Each call makes a new monitor; its id (never 0, unique
 *  among the monitors the calling vat made, and the same in every run of a
 *  deterministic system) is stored in *id. Several monitors on one vat fire
 *  in the order they were made. A monitor ends with the vat that made it:
 *  the target forgets it then, as if demonitored. Inside a turn.
 *  Errors: VAT_EINVAL (NULL target, on_down or id), VAT_ENOTINTURN,
 *  VAT_ETURNFAILED. */
int vat_monitor(vat_turn *turn, vat_ref *target, vat_down_fn on_down,
                uint64_t *id);

/** Removes monitor `id` made by this vat: once this turn commits, its
 *  down notification never runs, even if already on its way. Inside a turn.
 *  Errors: VAT_ENOTFOUND (no live monitor with that id made by this vat;
 *  e.g. it already fired), VAT_ENOTINTURN, VAT_ETURNFAILED. */
int vat_demonitor(vat_turn *turn, uint64_t id);

/* --- Trapping exits and exit signals ------------------------------------- */

/** Makes the calling vat trap exits: exit signals (but a deliberate kill)
 *  become calls of `on_exit` on `receiver`, an entity of the calling vat.
 *  `receiver` NULL stops trapping. Takes effect for signals handled after
 *  this turn. Inside a turn. Errors: VAT_EINVAL (receiver of another vat,
 *  or on_exit NULL with a receiver), VAT_ENOTINTURN, VAT_ETURNFAILED. */
int vat_trap_exit(vat_turn *turn, vat_ref *receiver, vat_exit_fn on_exit);

/** Sends an exit signal with `reason` to `target`'s vat (Erlang's exit/2):
 *  handled by the rules at the top of this file, except rule 1 (it did not
 *  travel along a link). The reason `killed` makes it a deliberate kill:
 *  the target ends with `killed` even if it traps exits. A vat may send
 *  one to itself (`normal` then ends it, or becomes a trapped exit). A
 *  signal to an ended vat is dropped. Inside a turn.
 *  Errors: VAT_EINVAL (NULL target, null reason), VAT_ENOTINTURN,
 *  VAT_ETURNFAILED. */
int vat_exit(vat_turn *turn, vat_ref *target, vat_value reason);

/** vat_exit with `killed`. */
int vat_kill(vat_turn *turn, vat_ref *target);

/** vat_exit from a host thread, at once; the trapped exit's `from` is NULL.
 *  Thread-safe. Errors: VAT_EINVAL, VAT_EINTURN, VAT_ENOTINIT,
 *  VAT_ENOTREGISTERED, VAT_ECLOSED (the target's system is closing). */
int vat_host_exit(vat_ref *target, vat_value reason);

#ifdef __cplusplus
}
#endif

#endif
