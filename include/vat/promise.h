/* libvat — requests, promises and resolvers.
 *
 * A request (vat_call) sends a message whose handler produces a result; the
 * caller gets a promise at once. A promise settles exactly once: resolved
 * with a value, or broken with a reason (a value: an atom or an error).
 * Whoever holds the promise observes it with vat_when, whose callback runs
 * as a separate turn of the observer's vat; a host thread may block on it
 * with vat_promise_wait.
 *
 * The handler answers through its resolver, in the same turn or later (keep
 * the resolver, even hand it to another vat). Resolving with a promise value
 * makes the promise follow that one. A request whose callee dies before it
 * answers breaks with the callee's exit reason (noproc when none is known):
 * a failed turn ends its vat, so it breaks the request it was handling.
 * Late answers (after a timeout or a break) are dropped silently.
 *
 * Messages sent to an unresolved promise (vat_promise_send, vat_promise_call)
 * wait inside it and, when it resolves to a ref, go to that ref in the order
 * they were sent; if it breaks or resolves to something else, they are
 * dropped and pipelined requests break with the reason (or `not_a_ref`).
 *
 * Promises and resolvers are collector objects; a promise can travel in a
 * message, alone or inside a value (vat_promise_value). Every function here
 * is thread-safe.
 *
 * Well-known reasons (atoms): "timeout" (a request's deadline passed),
 * "noproc" (the callee was gone and its reason unknown), "not_a_ref" (a
 * pipelined message's promise resolved to a value that is not a ref),
 * "promise_cycle" (the promise was resolved with itself: vat_resolve(r,
 * vat_promise_value(vat_resolver_promise(r))); only that one-step cycle
 * is caught, a longer one, p following q following p, stays pending).
 *
 * A request (vat_call, vat_host_call, vat_promise_call) whose call returns
 * an error is never sent, and no promise is stored in *out.
 */
#ifndef VAT_PROMISE_H
#define VAT_PROMISE_H

#include <stdbool.h>

#include "vat/core.h"

#ifdef __cplusplus
extern "C" {
#endif

/* vat_promise is declared in vat/value.h. */
typedef struct vat_resolver vat_resolver;

/** Handles a request: runs as a turn of the callee with its entity's state,
 *  the request's argument and the resolver of the caller's promise. */
typedef void (*vat_request_fn)(vat_turn *turn, void *state, void *arg,
                               vat_resolver *resolver);

/** Observes a settled promise: runs as a turn of the observer with its
 *  state, the context given to vat_when, `resolved` (false: broken) and the
 *  value or reason. */
typedef void (*vat_when_fn)(vat_turn *turn, void *state, void *ctx,
                            bool resolved, vat_value value);

typedef enum vat_promise_state {
  VAT_PROMISE_PENDING,
  VAT_PROMISE_RESOLVED,
  VAT_PROMISE_BROKEN,
} vat_promise_state;

/* --- Requests ------------------------------------------------------------ */

/** Sends the request `fn(arg)` to `to` and stores the caller's promise in
 *  *out. Inside a turn: sent when the turn commits, in order with its other
 *  sends (never if it fails). `timeout_s` > 0 breaks the promise with
 *  "timeout" unless it settled within that many seconds of the commit;
 *  0 means no deadline. Errors: VAT_EINVAL (NULL to/fn/out, negative or
 *  NaN timeout), VAT_ENOTINTURN, VAT_ETURNFAILED. */
int vat_call(vat_turn *turn, vat_ref *to, vat_request_fn fn, void *arg,
             double timeout_s, vat_promise **out);

/** vat_call from a host thread: sent at once. Wait for the answer with
 *  vat_promise_wait. Errors: VAT_EINVAL (as vat_call), VAT_EINTURN,
 *  VAT_ENOTINIT, VAT_ENOTREGISTERED, VAT_ECLOSED (the target's system is
 *  closing). */
int vat_host_call(vat_ref *to, vat_request_fn fn, void *arg, double timeout_s,
                  vat_promise **out);

/* --- Resolvers ----------------------------------------------------------- */

/** Resolves the resolver's promise with `value` (a promise value: follow
 *  that promise). Inside a turn (`turn` is the caller's turn): takes effect
 *  when the turn commits; if the turn fails its vat ends and the promise
 *  breaks with the failure. The turn's effects take place in the order it
 *  made them, so whoever sees the promise settle finds the sends, signals
 *  and spawns the turn made before this call already on their way.
 *  Outside any turn (`turn` NULL, any registered
 *  thread): at once. A resolver answers once; a promise that settled
 *  already (timeout, break) drops the answer and this still returns VAT_OK.
 *  Errors: VAT_EINVAL (NULL resolver), VAT_EBUSY (this resolver was used),
 *  VAT_ENOTINTURN (a turn that is not current), VAT_EINTURN (NULL inside a
 *  turn), VAT_ETURNFAILED. */
int vat_resolve(vat_turn *turn, vat_resolver *resolver, vat_value value);

/** Breaks the promise with `reason` (not null: VAT_EINVAL); otherwise as
 *  vat_resolve. */
int vat_break(vat_turn *turn, vat_resolver *resolver, vat_value reason);

/** The promise a resolver settles. Any thread. */
vat_promise *vat_resolver_promise(vat_resolver *resolver);

/** Makes an unresolved promise and its resolver, for answers that do not
 *  come from a request. Any thread. Errors: VAT_EINVAL (NULL out). */
int vat_promise_new(vat_promise **promise_out, vat_resolver **resolver_out);

/* --- Observing ----------------------------------------------------------- */

/** Runs `fn(ctx, ...)` as a turn of the calling entity (vat_self) once `p`
 *  settles — also when it settled already: never inside the current turn.
 *  Inside a turn. Errors: VAT_EINVAL (NULL p/fn), VAT_ENOTINTURN,
 *  VAT_ETURNFAILED. */
int vat_when(vat_turn *turn, vat_promise *p, vat_when_fn fn, void *ctx);

/** A snapshot of p's state; stores the value or reason in *value when
 *  settled and `value` is not NULL. Any thread. Returns
 *  VAT_PROMISE_PENDING for a NULL promise. */
vat_promise_state vat_promise_peek(vat_promise *p, vat_value *value);

/** Blocks until `p` settles or `timeout_s` seconds pass (a negative
 *  timeout waits for ever; 0 only looks). Returns VAT_OK with the value in
 *  *out when resolved, VAT_EBROKEN with the reason in *out when broken,
 *  VAT_ETIMEDOUT when it is still pending. `out` may be NULL. The timeout
 *  is real time, even in deterministic mode. Host thread only: from a turn
 *  it returns VAT_EINTURN (a turn must never block). A host-driven system
 *  must be run by another thread meanwhile, or nothing answers.
 *  Errors also: VAT_EINVAL, VAT_ENOTINIT, VAT_ENOTREGISTERED. */
int vat_promise_wait(vat_promise *p, double timeout_s, vat_value *out);

/* --- Pipelining ---------------------------------------------------------- */

/** Sends `fn(arg)` to whatever `p` resolves to. If p resolved already,
 *  this is vat_send to that ref. Messages sent to one promise arrive in the
 *  order they were sent, also when p resolves while the turn runs. Dropped if p
 * breaks or resolves to a non-ref. Inside a turn; takes effect when it commits.
 * Errors: VAT_EINVAL, VAT_ENOTINTURN, VAT_ETURNFAILED. */
int vat_promise_send(vat_turn *turn, vat_promise *p, vat_fn fn, void *arg);

/** vat_call to whatever `p` resolves to; *out breaks with p's reason if p
 *  breaks, with "not_a_ref" if p resolves to anything but a ref. The
 *  timeout counts from this turn's commit. Errors as vat_call. */
int vat_promise_call(vat_turn *turn, vat_promise *p, vat_request_fn fn,
                     void *arg, double timeout_s, vat_promise **out);

/** The reasons above, as atoms. Any thread. */
const vat_atom *vat_atom_timeout(void);
const vat_atom *vat_atom_not_a_ref(void);

#ifdef __cplusplus
}
#endif

#endif
