/* Requests, resolvers and pipelining: how a promise comes to be and who
 * settles it (see promise.c for the state machine). */
#include "core/boundary.h"
#include "core/reasons.h"
#include "core/system.h"
#include "promise/state.h"
#include "timer/timer.h"
#include "util/clock.h"
#include "util/container.h"
#include "util/mem.h"
#include "util/testpoint.h"

/* --- Requests ------------------------------------------------------------- */

static void request_deliver(vat_turn *turn, void *state, vat__signal *sig) {
  vat_promise *p = vat__container_of(sig, vat_promise, req.sig);
  request *rq = &p->req;
  p->owner = turn->vat;
  vat__promise_track(turn->vat, p);
  /* Owed outside the system: if the system stops first, it breaks then. */
  if (p->from_host || p->sys != turn->vat->sys)
    vat__boundary_note(turn->vat);
  rq->fn(turn, state, rq->arg, &p->resolver);
}

static void request_drop(vat__worker *w, vat_ref *target, vat__signal *sig) {
  (void)w;
  vat_promise *p = vat__container_of(sig, vat_promise, req.sig);
  vat_value reason = vat_ref_exit_reason(target);
  if (vat_is_null(reason))
    reason = vat_atom_value(vat__reason.noproc);
  vat__promise_settle(p, ST_BROKEN, reason, NULL, false);
}

/* For crash reports: a vat that fails handling a request was running
 * its handler. */
static void (*request_handler(const vat__signal *sig))(void) {
  const vat_promise *p = vat__container_of(sig, vat_promise, req.sig);
  return (void (*)(void))p->req.fn;
}

static const vat__signal_class request_class = {
    .deliver = request_deliver,
    .drop = request_drop,
    .name = "request",
    .handler = request_handler,
};

static void timeout_fire(void *arg) {
  vat__promise_settle(arg, ST_BROKEN, vat_atom_value(vat__reason.timeout), NULL,
                      true);
}

static void arm_timeout(vat_promise *p) {
  uint64_t deadline = vat__clock_now(p->sys) + p->timeout_ns;
  vat_timer *t = vat__timer_call_at(p->sys, deadline, timeout_fire, p);
  pthread_mutex_lock(&p->lock);
  bool settled = vat__promise_is_settled(
      atomic_load_explicit(&p->state, memory_order_relaxed));
  if (!settled)
    p->timeout = t;
  pthread_mutex_unlock(&p->lock);
  if (settled)
    vat_timer_cancel(t);
}

static void arm_commit(vat_turn *turn, vat__effect *e) {
  (void)turn;
  arm_timeout(vat__container_of(e, vat_promise, effect.arm));
}

/* A promise carrying the request fn(arg), its timeout asked for. The
 * callers check their own out first: nothing may be sent for a call that
 * cannot hand its promise back. */
static int make_request(vat_system *sys, vat_request_fn fn, void *arg,
                        double timeout_s, vat_promise **out) {
  uint64_t ns;
  if (fn == NULL ||
      vat__seconds_to_ns(timeout_s, VAT__NS_KEEP_NONZERO, &ns) != VAT_OK)
    return VAT_EINVAL;
  vat_promise *p = vat__promise_alloc(sys);
  p->req = (request){.sig.cls = &request_class, .fn = fn, .arg = arg};
  p->timeout_ns = ns;
  *out = p;
  return VAT_OK;
}

int vat_call(vat_turn *turn, vat_ref *to, vat_request_fn fn, void *arg,
             double timeout_s, vat_promise **out) {
  int rc = vat__check_turn(turn);
  if (rc != VAT_OK)
    return rc;
  if (to == NULL || out == NULL)
    return VAT_EINVAL;
  vat_promise *p;
  if ((rc = make_request(turn->vat->sys, fn, arg, timeout_s, &p)) != VAT_OK)
    return rc;
  if (p->timeout_ns) {
    p->effect.arm.commit = arm_commit;
    vat__turn_defer(turn, &p->effect.arm);
  }
  vat__send_signal(turn, to, &p->req.sig);
  *out = p;
  return VAT_OK;
}

int vat_host_call(vat_ref *to, vat_request_fn fn, void *arg, double timeout_s,
                  vat_promise **out) {
  int rc = vat__check_host();
  if (rc != VAT_OK)
    return rc;
  if (to == NULL || out == NULL)
    return VAT_EINVAL;
  vat_promise *p;
  if ((rc = make_request(vat_ref_system(to), fn, arg, timeout_s, &p)) != VAT_OK)
    return rc;
  p->from_host = true;
  if (p->timeout_ns)
    arm_timeout(p);
  rc = vat__host_send_signal(to, &p->req.sig);
  if (rc != VAT_OK) {
    /* Never sent: nobody will settle it; the caller gets no promise. */
    if (p->timeout)
      vat_timer_cancel(p->timeout);
    return rc;
  }
  *out = p;
  return VAT_OK;
}

/* --- Resolvers ------------------------------------------------------------ */

static void resolve_commit(vat_turn *turn, vat__effect *e) {
  vat_promise *p = vat__container_of(e, vat_promise, effect.answer);
  vat__promise_settle(p, p->answer_state, p->answer, turn, false);
  /* Whoever waits on p may act now: tests stop here to check that the
   * turn's earlier effects are out. */
  VAT__TEST_POINT("promise.resolve_commit.after_settle");
}

static int answer(vat_turn *turn, vat_resolver *r, int state, vat_value value) {
  if (r == NULL)
    return VAT_EINVAL;
  if (turn != NULL) {
    int rc = vat__check_turn(turn);
    if (rc != VAT_OK)
      return rc;
  } else if (vat__current_turn != NULL) {
    return VAT_EINTURN;
  }
  if (atomic_exchange_explicit(&r->used, true, memory_order_acq_rel))
    return VAT_EBUSY;
  vat_promise *p = r->promise;
  if (turn == NULL) {
    vat__promise_settle(p, state, value, NULL, false);
    return VAT_OK;
  }
  /* This vat now owes the answer: if the turn fails, it breaks. */
  if (p->owner != turn->vat)
    vat__promise_track(turn->vat, p);
  p->answer_state = state;
  p->answer = value;
  p->effect.answer.commit = resolve_commit;
  vat__turn_defer(turn, &p->effect.answer);
  return VAT_OK;
}

int vat_resolve(vat_turn *turn, vat_resolver *resolver, vat_value value) {
  return answer(turn, resolver, ST_RESOLVED, value);
}

int vat_break(vat_turn *turn, vat_resolver *resolver, vat_value reason) {
  if (vat_is_null(reason))
    return VAT_EINVAL;
  return answer(turn, resolver, ST_BROKEN, reason);
}

vat_promise *vat_resolver_promise(vat_resolver *resolver) {
  return resolver ? resolver->promise : NULL;
}

int vat_promise_new(vat_promise **promise_out, vat_resolver **resolver_out) {
  if (promise_out == NULL || resolver_out == NULL)
    return VAT_EINVAL;
  vat_promise *p = vat__promise_alloc(NULL);
  *promise_out = p;
  *resolver_out = &p->resolver;
  return VAT_OK;
}

/* --- Pipelining ----------------------------------------------------------- */

typedef struct pipe_effect {
  vat__effect effect;
  vat_promise *on;
  observer *obs;
} pipe_effect;

static void pipe_commit(vat_turn *turn, vat__effect *e) {
  pipe_effect *pe = (pipe_effect *)e;
  observer *o = pe->obs;
  if (o->kind == OBS_CALL && o->promise->timeout_ns)
    arm_timeout(o->promise);
  vat__promise_observe(pe->on, o, turn);
}

static int enqueue_pipelined(vat_turn *turn, vat_promise *p, observer *o) {
  pipe_effect *e = vat__gc_alloc(sizeof *e);
  *e = (pipe_effect){.effect.commit = pipe_commit, .on = p, .obs = o};
  vat__turn_defer(turn, &e->effect);
  return VAT_OK;
}

int vat_promise_send(vat_turn *turn, vat_promise *p, vat_fn fn, void *arg) {
  int rc = vat__check_turn(turn);
  if (rc != VAT_OK)
    return rc;
  if (p == NULL || fn == NULL)
    return VAT_EINVAL;
  /* Resolved already: an ordinary send, in order with this turn's others. */
  if (vat__promise_state_of(p) == ST_RESOLVED &&
      vat_value_ref(p->value) != NULL)
    return vat_send(turn, vat_value_ref(p->value), fn, arg);
  observer *o = vat__gc_alloc(sizeof *o);
  *o = (observer){.kind = OBS_SEND, .fn = fn, .arg = arg};
  return enqueue_pipelined(turn, p, o);
}

int vat_promise_call(vat_turn *turn, vat_promise *p, vat_request_fn fn,
                     void *arg, double timeout_s, vat_promise **out) {
  int rc = vat__check_turn(turn);
  if (rc != VAT_OK)
    return rc;
  if (p == NULL || out == NULL)
    return VAT_EINVAL;
  if (vat__promise_state_of(p) == ST_RESOLVED &&
      vat_value_ref(p->value) != NULL)
    return vat_call(turn, vat_value_ref(p->value), fn, arg, timeout_s, out);
  vat_promise *child;
  if ((rc = make_request(turn->vat->sys, fn, arg, timeout_s, &child)) != VAT_OK)
    return rc;
  observer *o = vat__gc_alloc(sizeof *o);
  *o = (observer){.kind = OBS_CALL, .promise = child};
  enqueue_pipelined(turn, p, o);
  *out = child;
  return VAT_OK;
}
