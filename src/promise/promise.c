/* Requests and promises.
 *
 * A promise is a collector object with a mutex, a state and a FIFO list of
 * observers: `when` callbacks (sent as signals to the observer's vat),
 * pipelined messages and requests, promises that follow this one, and host
 * threads blocked in vat_promise_wait. Settling takes the lock, detaches
 * the list, forwards the pipelined messages and only then publishes the
 * state: so a message sent to the promise after it resolved (which looks at
 * the state under the same lock, or after it is published) can never
 * overtake one that waited in it. Everything else runs after the lock.
 *
 * A request is a signal carried in the caller's promise (one allocation per
 * call). Delivered, it records the promise in the callee's list of
 * obligations (vat__ext_of(v)->promises), which the terminate hook breaks
 * with the vat's reason; dropped (dead callee, stopped system), it breaks
 * the promise at once. Inside a turn, resolving is an effect of the turn:
 * it happens at commit, and a failed turn's answer never escapes (its vat
 * dies and the obligation breaks with the failure instead).
 *
 * Lock order: a promise before the promises it settles in turn (pipelined
 * requests' promises), and before the timer service (cancelling a timeout
 * happens after the unlock, so never the reverse).
 */
#include "promise/promise.h"

#include <errno.h>
#include <math.h>

#include "core/boundary.h"
#include "core/reasons.h"
#include "core/system.h"
#include "promise/state.h"
#include "timer/timer.h"
#include "util/clock.h"
#include "util/container.h"
#include "util/mem.h"
#include "util/testpoint.h"

const vat_atom *vat_atom_timeout(void) {
  return vat__reason.timeout;
}

const vat_atom *vat_atom_not_a_ref(void) {
  return vat__reason.not_a_ref;
}

vat_promise *vat__promise_alloc(vat_system *sys) {
  vat_promise *p = vat__gc_alloc(sizeof *p);
  pthread_mutex_init(&p->lock, NULL);
  atomic_init(&p->state, ST_PENDING);
  p->sys = sys;
  p->resolver.promise = p;
  atomic_init(&p->resolver.used, false);
  return p;
}

/* --- Settling ------------------------------------------------------------- */

static void when_deliver(vat_turn *turn, void *state, vat__signal *sig) {
  observer *o = vat__container_of(sig, observer, sig);
  vat_promise *p = o->promise;
  o->when(turn, state, o->arg, vat__promise_state_of(p) == ST_RESOLVED,
          p->value);
}

/* A dropped notification needs no answer: the observer is gone; so is its
 * interest. */
static const vat__signal_class when_class = {
    .deliver = when_deliver,
    .drop = vat__signal_drop_nothing,
    .name = "when",
};

/* Sends through the committing turn when there is one, so a notification
 * keeps its place among that turn's sends; otherwise at once. */
static void send_signal(vat_turn *turn, vat_ref *to, vat__signal *sig) {
  if (turn == NULL || vat__send_signal(turn, to, sig) != VAT_OK)
    vat__deliver_now_signal(to, sig);
}

/* What an observer does once p has settled, pipelined messages apart when
 * `forwarded` (settle sent them under the lock). */
static void run_observer(observer *o, vat_promise *p, vat_turn *turn,
                         bool forwarded) {
  int state = vat__promise_state_of(p);
  vat_ref *target = state == ST_RESOLVED ? vat_value_ref(p->value) : NULL;
  vat_value reason =
      state == ST_BROKEN ? p->value : vat_atom_value(vat__reason.not_a_ref);
  switch (o->kind) {
  case OBS_WHEN:
    send_signal(turn, o->ref, &o->sig);
    break;
  case OBS_SEND:
    if (target && !forwarded) {
      if (turn == NULL || vat_send(turn, target, o->fn, o->arg) != VAT_OK)
        vat__deliver_now_msg(target, o->fn, o->arg, vat_null());
    }
    break;
  case OBS_CALL:
    if (target == NULL)
      vat__promise_settle(o->promise, ST_BROKEN, reason, turn, true);
    else if (!forwarded)
      send_signal(turn, target, &o->promise->req.sig);
    break;
  case OBS_FOLLOW:
    vat__promise_settle(o->promise, state, p->value, turn, true);
    break;
  case OBS_WAIT:
    break; /* woken under the lock */
  }
}

void vat__promise_settle(vat_promise *p, int state, vat_value v, vat_turn *turn,
                         bool override_follow) {
  vat_promise *follow = vat_value_promise(v);
  if (state == ST_RESOLVED && follow == p) {
    state = ST_BROKEN;
    v = vat_atom_value(vat__reason.promise_cycle);
    follow = NULL;
  }
  if (state != ST_RESOLVED)
    follow = NULL;
  pthread_mutex_lock(&p->lock);
  int s = atomic_load_explicit(&p->state, memory_order_relaxed);
  if (vat__promise_is_settled(s) || (s == ST_FOLLOWING && !override_follow)) {
    pthread_mutex_unlock(&p->lock);
    return;
  }
  if (follow) {
    atomic_store_explicit(&p->state, ST_FOLLOWING, memory_order_release);
    pthread_mutex_unlock(&p->lock);
    observer *o = vat__gc_alloc(sizeof *o);
    *o = (observer){.kind = OBS_FOLLOW, .promise = p};
    vat__promise_observe(follow, o, turn);
    return;
  }
  p->value = v;
  vat_ref *target = state == ST_RESOLVED ? vat_value_ref(v) : NULL;
  /* Forward pipelined messages in order, and wake waiters, while later
   * senders are held at the lock; keep the rest for after it. */
  observer *rest = NULL, **rest_tail = &rest;
  for (observer *o = p->head, *next; o != NULL; o = next) {
    next = o->next;
    if (o->kind == OBS_WAIT) {
      pthread_cond_signal(o->cond);
      continue; /* the waiter's node lives on its stack: drop it now */
    }
    if (target && o->kind == OBS_SEND)
      vat__deliver_now_msg(target, o->fn, o->arg, vat_null());
    else if (target && o->kind == OBS_CALL)
      vat__deliver_now_signal(target, &o->promise->req.sig);
    o->next = NULL;
    *rest_tail = o;
    rest_tail = &o->next;
  }
  p->head = p->tail = NULL;
  /* Published only now: a sender that sees it without the lock (the fast
   * path of vat_promise_send) comes after every forwarded message. */
  atomic_store_explicit(&p->state, state, memory_order_release);
  vat_timer *timeout = p->timeout;
  p->timeout = NULL;
  pthread_mutex_unlock(&p->lock);
  if (timeout)
    vat_timer_cancel(timeout);
  for (observer *o = rest, *next; o != NULL; o = next) {
    next = o->next;
    o->next = NULL; /* a stale link would retain the chain */
    run_observer(o, p, turn, true);
  }
}

/* Adds `o` to p's list, or runs it now if p has settled. */
void vat__promise_observe(vat_promise *p, observer *o, vat_turn *turn) {
  pthread_mutex_lock(&p->lock);
  if (!vat__promise_is_settled(
          atomic_load_explicit(&p->state, memory_order_relaxed))) {
    o->next = NULL;
    if (p->tail)
      p->tail->next = o;
    else
      p->head = o;
    p->tail = o;
    pthread_mutex_unlock(&p->lock);
    return;
  }
  pthread_mutex_unlock(&p->lock);
  run_observer(o, p, turn, false);
}

/* --- Obligations of a vat ------------------------------------------------- */

void vat__promise_track(vat__vat *v, vat_promise *p) {
  vat__vat_ext *ext = vat__ext_of(v);
  struct vat__promises *ps = ext->promises;
  if (ps == NULL)
    ps = ext->promises = vat__gc_alloc(sizeof *ps);
  if (ps->n == ps->cap) {
    /* Sweep the settled ones; grow only if most are still pending, so the
     * cost per request stays constant. */
    size_t kept = 0;
    for (size_t i = 0; i < ps->n; i++)
      if (vat__promise_state_of(ps->items[i]) == ST_PENDING)
        ps->items[kept++] = ps->items[i];
    for (size_t i = kept; i < ps->n; i++)
      ps->items[i] = NULL;
    ps->n = kept;
    if (kept * 2 >= ps->cap) {
      size_t cap = ps->cap ? ps->cap * 2 : 8;
      vat_promise **items = vat__gc_alloc(cap * sizeof *items);
      for (size_t i = 0; i < ps->n; i++)
        items[i] = ps->items[i];
      ps->items = items;
      ps->cap = cap;
    }
  }
  ps->items[ps->n++] = p;
}

bool vat__promises_time_out(vat__vat *v) {
  vat__vat_ext *ext = vat__ext_peek(v);
  struct vat__promises *ps = ext ? ext->promises : NULL;
  for (size_t i = 0; ps != NULL && i < ps->n; i++) {
    vat_promise *p = ps->items[i];
    pthread_mutex_lock(&p->lock);
    bool due = p->timeout != NULL &&
               !vat__promise_is_settled(
                   atomic_load_explicit(&p->state, memory_order_relaxed));
    pthread_mutex_unlock(&p->lock);
    if (due) {
      /* What the timeout's timer runs when it fires (request.c). */
      vat__promise_settle(p, ST_BROKEN, vat_atom_value(vat__reason.timeout),
                          NULL, true);
      return true;
    }
  }
  return false;
}

static void vat_ended(vat__worker *w, vat__vat *v, vat_value reason) {
  (void)w;
  struct vat__promises *ps = v->ext->promises;
  if (ps == NULL)
    return;
  vat_promise **items = ps->items;
  size_t n = ps->n;
  ps->items = NULL;
  ps->n = ps->cap = 0;
  /* No turn is current here: this vat's last turn has committed (or was
   * discarded), so the notifications go out at once. */
  for (size_t i = 0; i < n; i++)
    vat__promise_settle(items[i], ST_BROKEN, reason, NULL, false);
}

/* --- Observing ------------------------------------------------------------ */

int vat_when(vat_turn *turn, vat_promise *p, vat_when_fn fn, void *ctx) {
  int rc = vat__check_turn(turn);
  if (rc != VAT_OK)
    return rc;
  if (p == NULL || fn == NULL)
    return VAT_EINVAL;
  observer *o = vat__gc_alloc(sizeof *o);
  *o = (observer){.kind = OBS_WHEN,
                  .sig.cls = &when_class,
                  .promise = p,
                  .ref = turn->self,
                  .when = fn,
                  .arg = ctx};
  /* Registered at once: if this turn fails its vat dies, and the
   * notification is dropped at the dead vat. */
  vat__promise_observe(p, o, turn);
  return VAT_OK;
}

vat_promise_state vat_promise_peek(vat_promise *p, vat_value *value) {
  if (p == NULL)
    return VAT_PROMISE_PENDING;
  int s = vat__promise_state_of(p);
  if (!vat__promise_is_settled(s))
    return VAT_PROMISE_PENDING;
  if (value)
    *value = p->value;
  return (vat_promise_state)s;
}

static void unlink_waiter(vat_promise *p, observer *o) {
  observer *prev = NULL;
  for (observer *x = p->head; x != NULL; prev = x, x = x->next) {
    if (x != o)
      continue;
    if (prev)
      prev->next = x->next;
    else
      p->head = x->next;
    if (p->tail == x)
      p->tail = prev;
    return;
  }
}

int vat_promise_wait(vat_promise *p, double timeout_s, vat_value *out) {
  int rc = vat__check_host();
  if (rc != VAT_OK)
    return rc;
  if (p == NULL || isnan(timeout_s))
    return VAT_EINVAL;
  pthread_mutex_lock(&p->lock);
  if (!vat__promise_is_settled(
          atomic_load_explicit(&p->state, memory_order_relaxed)) &&
      timeout_s != 0) {
    /* Waits on the promise's own lock, so settle can wake it under that
     * lock and never touch this frame after. */
    pthread_cond_t cond;
    vat__cond_init_monotonic(&cond);
    observer o = {.kind = OBS_WAIT, .cond = &cond};
    if (p->tail)
      p->tail->next = &o;
    else
      p->head = &o;
    p->tail = &o;
    struct timespec deadline = vat__deadline_after(timeout_s);
    while (!vat__promise_is_settled(
        atomic_load_explicit(&p->state, memory_order_relaxed))) {
      if (timeout_s < 0)
        pthread_cond_wait(&cond, &p->lock);
      else if (pthread_cond_timedwait(&cond, &p->lock, &deadline) == ETIMEDOUT)
        break;
    }
    if (!vat__promise_is_settled(
            atomic_load_explicit(&p->state, memory_order_relaxed)))
      unlink_waiter(p, &o);
    pthread_cond_destroy(&cond);
  }
  int s = atomic_load_explicit(&p->state, memory_order_relaxed);
  if (vat__promise_is_settled(s) && out)
    *out = p->value;
  pthread_mutex_unlock(&p->lock);
  if (!vat__promise_is_settled(s))
    return VAT_ETIMEDOUT;
  return s == ST_RESOLVED ? VAT_OK : VAT_EBROKEN;
}

static void vat_stranded(vat__vat *v, vat_value reason) {
  vat_ended(NULL, v, reason);
}

const vat__module vat__promise_module = {
    .name = "promise",
    .vat_ended = vat_ended,
    .vat_stranded = vat_stranded,
};
