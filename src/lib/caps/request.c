/* Requests in message form, and revokers (see vat/caps.h).
 *
 * A request carries a ref to a reply entity instead of a resolver, because
 * a ref is a value: wrappers can forward it, a membrane can wrap it, and
 * whoever refuses a request can answer it. The reply entity holds the
 * resolver and turns the first answer it gets into a settlement.
 *
 * Nothing waits for ever on a dead peer. The reply entity monitors the vat
 * the request went to, and each wrapper that forwards a request puts a
 * relay (a guard) of its own in front of the reply ref, which monitors the
 * next hop: whichever vat on the way ends before the answer breaks the
 * request with its exit reason, as vat_call does. The monitor is made by
 * a message the entity sends itself before the request leaves, so it is
 * in place before any answer can arrive (an answer comes only after the
 * request, and so after that message, into the same mailbox); an answer
 * sent before its sender ended arrives before the down notification
 * (both come from that vat, in order), so it wins. */
#define GC_THREADS 1
#include <gc/gc.h>
#include <stdatomic.h>

#include "caps_internal.h"
#include "vat/caps.h"

/* A program's atoms live for ever, so each is interned once: a lookup in
 * the process-wide table (hash, lock, compare) cost ~250 instructions, and
 * a request looked up four of them. Two threads may both intern it the
 * first time; they get the same atom. NULL (no memory) is not kept. */
static const vat_atom *once(_Atomic(const vat_atom *) *kept, const char *name) {
  const vat_atom *a = atomic_load_explicit(kept, memory_order_acquire);
  if (a == NULL) {
    a = vat_atom_intern(name);
    atomic_store_explicit(kept, a, memory_order_release);
  }
  return a;
}

#define KEPT_ATOM(fn, name)                                                    \
  static const vat_atom *fn(void) {                                            \
    static _Atomic(const vat_atom *) kept;                                     \
    return once(&kept, name);                                                  \
  }
KEPT_ATOM(atom_revoked, "revoked")
KEPT_ATOM(atom_refused, "refused")
KEPT_ATOM(request_label, "vat.request")
KEPT_ATOM(atom_resolve, "resolve")
KEPT_ATOM(atom_break, "break")
KEPT_ATOM(atom_revoke, "revoke")

const vat_atom *vat_atom_revoked(void) {
  return atom_revoked();
}
const vat_atom *vat_atom_refused(void) {
  return atom_refused();
}

int caps__entity(vat_turn *turn, vat_system *sys, const vat_entity_def *def,
                 vat_ref **out, void **state) {
  if (turn != NULL)
    return vat_entity_new(turn, def, out, state);
  return vat_host_spawn(sys, def, out, state);
}

/* --- Watching the callee --------------------------------------------------
 * Shared by the reply entity and the guards: both begin with this. */

typedef struct watch {
  vat_ref *callee; /* the vat the request went to */
  uint64_t monitor;
  bool watching; /* the monitor is live */
  bool settled;  /* the first answer (or the callee's end) came */
} watch;

/* The callee's exit reason; a vat already dead when the monitor was made
 * reports noproc, but its own reason is known and more useful, as
 * vat_call breaks with it. */
static vat_value end_reason(vat_ref *who, vat_value reason) {
  if (vat_is_atom(reason, vat_atom_noproc())) {
    vat_value known = vat_ref_exit_reason(who);
    if (!vat_is_null(known))
      return known;
  }
  return reason;
}

/* The first answer came: the callee's end no longer matters. */
static void stop_watching(vat_turn *turn, watch *w) {
  w->settled = true;
  if (w->watching)
    (void)vat_demonitor(turn, w->monitor);
  w->watching = false;
}

static void start_watching(vat_turn *turn, watch *w, vat_down_fn on_down) {
  /* Settled already (a wrapper refused the request at once), or the
   * callee is in this very vat, whose end nobody here would see. */
  if (w->settled || vat_ref_same_vat(w->callee, vat_self(turn)))
    return;
  w->watching = vat_monitor(turn, w->callee, on_down, &w->monitor) == VAT_OK;
}

/* --- The reply entity ----------------------------------------------------- */

typedef struct reply_state {
  watch w;
  vat_resolver *resolver;
  double timeout_s; /* host form: armed by its first turn */
} reply_state;

/* Answers after the first are refused by the resolver (VAT_EBUSY) and
 * ignored: only the first counts. */
static void reply_receive(vat_turn *turn, void *state, const vat_atom *selector,
                          vat_value value) {
  reply_state *r = state;
  if (selector == atom_resolve())
    (void)vat_resolve(turn, r->resolver, value);
  else if (selector == atom_break())
    (void)vat_break(turn, r->resolver,
                    vat_is_null(value) ? vat_atom_value(vat_atom_refused())
                                       : value);
  else
    return;
  stop_watching(turn, &r->w);
}

static void reply_down(vat_turn *turn, void *state, uint64_t monitor,
                       vat_ref *who, vat_value reason) {
  (void)monitor;
  reply_state *r = state;
  r->w.watching = false;
  if (r->w.settled)
    return;
  r->w.settled = true;
  (void)vat_break(turn, r->resolver, end_reason(who, reason));
}

static void reply_watch(vat_turn *turn, void *state, void *arg) {
  (void)arg;
  start_watching(turn, &((reply_state *)state)->w, reply_down);
}

static const vat_entity_def reply_def = {.state_size = sizeof(reply_state),
                                         .receive = reply_receive};

static int arm_timeout(vat_turn *turn, vat_ref *reply, double timeout_s) {
  if (timeout_s <= 0)
    return VAT_OK;
  return vat_later_msg(turn, timeout_s, reply, atom_break(),
                       vat_atom_value(vat_atom_timeout()), NULL);
}

static void host_arm_timeout(vat_turn *turn, void *state, void *arg) {
  (void)arg;
  (void)arm_timeout(turn, vat_self(turn), ((reply_state *)state)->timeout_s);
}

static bool bad_timeout(double t) {
  return !(t >= 0);
}

static int make_request(vat_turn *turn, vat_ref *to, const vat_atom *selector,
                        vat_value payload, double timeout_s,
                        vat_promise **out) {
  if (to == NULL || selector == NULL || out == NULL || bad_timeout(timeout_s))
    return VAT_EINVAL;
  vat_promise *promise;
  vat_resolver *resolver;
  int rc = vat_promise_new(&promise, &resolver);
  if (rc != VAT_OK)
    return rc;
  vat_ref *reply;
  reply_state *r;
  rc = caps__entity(turn, vat_ref_system(to), &reply_def, &reply, (void **)&r);
  if (rc != VAT_OK)
    return rc;
  r->resolver = resolver;
  r->timeout_s = timeout_s;
  r->w.callee = to;
  vat_value fields[2] = {payload, vat_ref_value(reply)};
  vat_value msg = vat_record(request_label(), fields, 2);
  if (vat_is_null(msg))
    return VAT_ENOMEM;
  /* The watch goes first: see the top of this file. */
  if (turn != NULL) {
    rc = vat_send(turn, reply, reply_watch, NULL);
    if (rc == VAT_OK)
      rc = arm_timeout(turn, reply, timeout_s);
    if (rc == VAT_OK)
      rc = vat_send_msg(turn, to, selector, msg);
  } else {
    rc = vat_host_send(reply, reply_watch, NULL);
    if (rc == VAT_OK && timeout_s > 0)
      rc = vat_host_send(reply, host_arm_timeout, NULL);
    if (rc == VAT_OK)
      rc = vat_host_send_msg(to, selector, msg);
  }
  if (rc == VAT_OK)
    *out = promise;
  return rc;
}

int vat_request(vat_turn *turn, vat_ref *to, const vat_atom *selector,
                vat_value payload, double timeout_s, vat_promise **out) {
  if (turn == NULL)
    return VAT_ENOTINTURN;
  return make_request(turn, to, selector, payload, timeout_s, out);
}

int vat_host_request(vat_ref *to, const vat_atom *selector, vat_value payload,
                     double timeout_s, vat_promise **out) {
  return make_request(NULL, to, selector, payload, timeout_s, out);
}

bool vat_request_parse(vat_value value, vat_value *payload, vat_ref **reply) {
  if (vat_record_label(value) != request_label() || vat_len(value) != 2)
    return false;
  vat_ref *r = vat_value_ref(vat_at(value, 1));
  if (r == NULL)
    return false;
  if (payload != NULL)
    *payload = vat_at(value, 0);
  if (reply != NULL)
    *reply = r;
  return true;
}

int vat_reply(vat_turn *turn, vat_ref *reply, vat_value result) {
  return vat_send_msg(turn, reply, atom_resolve(), result);
}

int vat_reply_error(vat_turn *turn, vat_ref *reply, vat_value reason) {
  if (vat_is_null(reason))
    return VAT_EINVAL;
  return vat_send_msg(turn, reply, atom_break(), reason);
}

/* --- Guards: forwarding a request without losing its callee ------------- */

typedef struct guard_state {
  watch w;
  vat_ref *reply; /* the reply ref the request came with */
} guard_state;

/* Passes the first answer on; later ones are dropped, as the reply entity
 * would drop them. */
static void guard_receive(vat_turn *turn, void *state, const vat_atom *selector,
                          vat_value value) {
  guard_state *g = state;
  if (g->w.settled || (selector != atom_resolve() && selector != atom_break()))
    return;
  (void)vat_send_msg(turn, g->reply, selector, value);
  stop_watching(turn, &g->w);
}

static void guard_down(vat_turn *turn, void *state, uint64_t monitor,
                       vat_ref *who, vat_value reason) {
  (void)monitor;
  guard_state *g = state;
  g->w.watching = false;
  if (g->w.settled)
    return;
  g->w.settled = true;
  (void)vat_reply_error(turn, g->reply, end_reason(who, reason));
}

static void guard_watch(vat_turn *turn, void *state, void *arg) {
  (void)arg;
  start_watching(turn, &((guard_state *)state)->w, guard_down);
}

static const vat_entity_def guard_def = {.state_size = sizeof(guard_state),
                                         .receive = guard_receive};

int caps__forward(vat_turn *turn, vat_ref *to, const vat_atom *selector,
                  vat_value value) {
  vat_value payload;
  vat_ref *reply;
  if (!vat_request_parse(value, &payload, &reply))
    return vat_send_msg(turn, to, selector, value);
  vat_ref *guard;
  guard_state *g;
  int rc = vat_entity_new(turn, &guard_def, &guard, (void **)&g);
  if (rc != VAT_OK)
    return rc;
  *g = (guard_state){.w = {.callee = to}, .reply = reply};
  vat_value fields[2] = {payload, vat_ref_value(guard)};
  vat_value msg = vat_record(request_label(), fields, 2);
  if (vat_is_null(msg))
    return VAT_ENOMEM;
  rc = vat_send(turn, guard, guard_watch, NULL);
  if (rc == VAT_OK)
    rc = vat_send_msg(turn, to, selector, msg);
  return rc;
}

void caps__refuse(vat_turn *turn, vat_value msg, const vat_atom *code,
                  vat_value payload) {
  vat_ref *reply;
  if (vat_request_parse(msg, NULL, &reply))
    (void)vat_reply_error(turn, reply, vat_error(code, payload));
}

/* --- Revokers ------------------------------------------------------------- */

bool caps__is_revoked(caps__cell *cell) {
  /* Acquire pairs with the revoker's release: a turn that runs after the
   * revocation sees it. */
  return atomic_load_explicit(&cell->revoked, memory_order_acquire);
}

typedef struct revoker_state {
  caps__cell *cell;
} revoker_state;

static void revoker_receive(vat_turn *turn, void *state,
                            const vat_atom *selector, vat_value value) {
  revoker_state *r = state;
  if (selector != atom_revoke()) {
    caps__refuse(turn, value, vat_atom_refused(), vat_atom_value(selector));
    return;
  }
  atomic_store_explicit(&r->cell->revoked, true, memory_order_release);
  vat_ref *reply;
  if (vat_request_parse(value, NULL, &reply))
    (void)vat_reply(turn, reply, vat_bool(true));
}

static const vat_entity_def revoker_def = {.state_size = sizeof(revoker_state),
                                           .receive = revoker_receive};

int caps__revoker_new(vat_turn *turn, vat_system *sys, caps__cell *cell,
                      vat_ref **out) {
  revoker_state *r;
  int rc = caps__entity(turn, sys, &revoker_def, out, (void **)&r);
  if (rc == VAT_OK)
    r->cell = cell;
  return rc;
}

int vat_revoke(vat_turn *turn, vat_ref *revoker) {
  return vat_send_msg(turn, revoker, atom_revoke(), vat_null());
}
