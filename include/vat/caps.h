/* libvat — capability patterns, built on the public API only.
 *
 * In a capability system the authority to do something is holding a ref to
 * the entity that does it. These patterns shape that authority:
 *  - requests in message form: a dynamic message that carries a reply ref,
 *    so wrappers can forward, refuse or answer requests like any message;
 *  - caretaker: a forwarder that can be revoked;
 *  - sealer / unsealer: opaque boxes only the matching unsealer opens;
 *  - facet: a forwarder that lets through only chosen selectors;
 *  - membrane: a revocable forwarder that also wraps every ref passing
 *    through it, in both directions.
 *
 * Wrappers (caretakers, facets, membranes) work on dynamic messages
 * (vat_send_msg) and on message-form requests (vat_request). A function
 * message (vat_send, vat_call) sent to a wrapper runs its code on the
 * wrapper's own state: that is the creator's fast path, and code that
 * sends arbitrary functions is outside any capability discipline, as is
 * code that reads raw memory. Give untrusted parties refs they talk to
 * with selectors.
 *
 * Refusals: a wrapper that refuses a request answers it with an error
 * value whose code is "revoked" or "refused" (vat_atom_revoked,
 * vat_atom_refused); a refused one-way message is dropped.
 */
#ifndef VAT_CAPS_H
#define VAT_CAPS_H

#include <stdbool.h>
#include <stddef.h>

#include "vat/core.h"
#include "vat/promise.h"
#include "vat/value.h"

#ifdef __cplusplus
extern "C" {
#endif

/* --- Requests in message form --------------------------------------------
 * vat_request sends `selector` with the value request(payload, reply): a
 * record labelled "vat.request" whose second field is a ref to a reply
 * entity. Whoever handles it answers by sending "resolve" or "break" to
 * the reply ref (vat_reply, vat_reply_error); the first answer settles the
 * caller's promise, later ones are ignored.
 * Like vat_call, a request never waits for ever on a dead peer: if the vat
 * it was sent to has ended, or ends before answering, the caller's promise
 * breaks with that vat's exit reason (noproc when none is known). Wrappers
 * (caretakers, facets, membranes) keep that promise: each forwards a
 * request with a relay of its own in place of the reply ref, which passes
 * the answer on and breaks the request with the exit reason of the vat it
 * forwarded to if that one ends first. An answer sent before its sender
 * ended still wins. A request whose callee stays alive and never answers
 * settles only if it has a timeout. */

/** Sends a request in message form to `to` and stores the caller's promise
 *  in *out. The reply entity is made in the calling vat; it monitors
 *  `to`'s vat and breaks the promise with its exit reason if it ends
 *  before answering. `timeout_s` > 0 breaks the promise with "timeout"
 *  unless answered in time.
 *  Inside a turn; sent when it commits. Errors: VAT_EINVAL (NULL to,
 *  selector or out; negative timeout), VAT_ENOMEM, VAT_ENOTINTURN,
 *  VAT_ETURNFAILED. */
int vat_request(vat_turn *turn, vat_ref *to, const vat_atom *selector,
                vat_value payload, double timeout_s, vat_promise **out);

/** vat_request from a host thread: the reply entity gets a small vat of
 *  its own in `to`'s system. Wait with vat_promise_wait. Host thread.
 *  Errors as vat_host_spawn and vat_host_send_msg. */
int vat_host_request(vat_ref *to, const vat_atom *selector, vat_value payload,
                     double timeout_s, vat_promise **out);

/** True when `value` is a request; then stores its payload and reply ref
 *  (either out may be NULL). Any thread. */
bool vat_request_parse(vat_value value, vat_value *payload, vat_ref **reply);

/** Answers a request: resolves the caller's promise with `result`. Inside
 *  a turn. Errors: as vat_send_msg. */
int vat_reply(vat_turn *turn, vat_ref *reply, vat_value result);

/** Answers a request by breaking the caller's promise with `reason` (not
 *  null). Inside a turn. Errors: as vat_send_msg. */
int vat_reply_error(vat_turn *turn, vat_ref *reply, vat_value reason);

/** The error codes wrappers answer with, as atoms. Any thread. */
const vat_atom *vat_atom_revoked(void);
const vat_atom *vat_atom_refused(void);

/* --- Revokers ------------------------------------------------------------
 * A revoker is a ref: sending it "revoke" (one-way or as a request, which
 * is answered with true) cuts off what it guards, for good. Pass it around
 * like any ref: holding it is the authority to revoke. */

/** Sends "revoke" to `revoker`. Inside a turn. Errors: as vat_send_msg. */
int vat_revoke(vat_turn *turn, vat_ref *revoker);

/* --- Caretaker: the revocable forwarder ------------------------------- */

/** Makes a forwarder to `target` and its revoker, both entities of the
 *  calling vat. Until revoked the forwarder sends every dynamic message on
 *  to the target unchanged (requests with a relay for the answer, see
 *  "Requests in message form"). Once revoked it drops messages and answers
 * requests with a "revoked" error. Inside a turn. Errors: VAT_EINVAL (NULL
 * target or outs), VAT_ENOMEM, VAT_ENOTINTURN, VAT_ETURNFAILED. */
int vat_caretaker_new(vat_turn *turn, vat_ref *target, vat_ref **forwarder,
                      vat_ref **revoker);

/** vat_caretaker_new from a host thread, into `sys` (each entity gets a
 *  vat of its own). Host thread. Errors as vat_host_spawn. */
int vat_host_caretaker_new(vat_system *sys, vat_ref *target,
                           vat_ref **forwarder, vat_ref **revoker);

/* --- Sealer and unsealer -------------------------------------------------
 * A pair shares an identity no one else can obtain. vat_seal puts a value
 * in a box: an ordinary value (bytes whose content says nothing) that can
 * travel in any message, and that only the unsealer of the same pair opens.
 * A box is recognised by identity, not content: a copy of its bytes made
 * with vat_bytes is not a box. The pair remembers the content of each box
 * until the box is collected. */

typedef struct vat_sealer vat_sealer;
typedef struct vat_unsealer vat_unsealer;

/** Makes a sealer and its matching unsealer. Any thread.
 *  Errors: VAT_EINVAL (NULL out), VAT_ENOMEM. */
int vat_sealer_pair_new(vat_sealer **sealer, vat_unsealer **unsealer);

/** Seals `content` into a new box, stored in *box. Any thread.
 *  Errors: VAT_EINVAL (NULL sealer or box), VAT_ENOMEM. */
int vat_seal(vat_sealer *sealer, vat_value content, vat_value *box);

/** Opens `box`, storing its content in *content. Any thread. Errors:
 *  VAT_EINVAL (NULL unsealer or content), VAT_ENOTFOUND (not a box sealed
 *  by this pair's sealer: another pair's box, a copy, any other value). */
int vat_unseal(vat_unsealer *unsealer, vat_value box, vat_value *content);

/* --- Facet: attenuation by selector --------------------------------------- */

/** Makes, in the calling vat, a forwarder to `target` that lets through
 *  only the `n` selectors in `allowed` (copied). Other messages are
 *  dropped; other requests are answered with a "refused" error whose
 *  payload is the selector. Inside a turn. Errors: VAT_EINVAL (NULL
 *  target or out, NULL allowed with n > 0), VAT_ENOMEM, VAT_ENOTINTURN,
 *  VAT_ETURNFAILED. */
int vat_facet_new(vat_turn *turn, vat_ref *target,
                  const vat_atom *const *allowed, size_t n, vat_ref **out);

/** vat_facet_new from a host thread, into `sys` (a vat of its own).
 *  Host thread. Errors as vat_host_spawn. */
int vat_host_facet_new(vat_system *sys, vat_ref *target,
                       const vat_atom *const *allowed, size_t n, vat_ref **out);

/* --- Membrane ------------------------------------------------------------
 * A membrane separates the side of its target (inside) from the side that
 * holds the wrapped ref (outside). Every ref in a message crossing it, in
 * either direction, arrives wrapped in a proxy of the same membrane (inside
 * lists, records and error payloads too); a proxy sent back across comes
 * out as the ref it wraps. So all that the outside obtains through the
 * membrane is reached through proxies, and revoking the membrane cuts every
 * one of them: messages are dropped, requests answered with "revoked".
 * Replies to requests cross like any message, so a request unanswered
 * when the membrane is revoked never settles unless it has a timeout (or
 * its callee ends: its end reaches the caller like an answer would, and
 * is dropped the same way after revocation).
 * Messages carrying maps or promises cannot be searched for refs through the
 * public API: they are refused ("refused" error with payload "unwrappable").
 *
 * All proxies of a membrane live in the vat that made it (the membrane's
 * vat), which keeps its tables, so a busy membrane is one vat's work. The
 * tables hold every proxy made until the membrane is collected. */

/** Makes a membrane around `target`: stores the outside's ref to it in
 *  *wrapped and the membrane's revoker in *revoker. Inside a turn; the
 *  proxies and revoker are entities of the calling vat. Errors: VAT_EINVAL
 *  (NULL target or outs), VAT_ENOMEM, VAT_ENOTINTURN, VAT_ETURNFAILED. */
int vat_membrane_new(vat_turn *turn, vat_ref *target, vat_ref **wrapped,
                     vat_ref **revoker);

/** vat_membrane_new from a host thread, into `sys`: the membrane's vat and
 *  the revoker are new vats. Host thread. Errors as vat_host_spawn. */
int vat_host_membrane_new(vat_system *sys, vat_ref *target, vat_ref **wrapped,
                          vat_ref **revoker);

#ifdef __cplusplus
}
#endif

#endif
