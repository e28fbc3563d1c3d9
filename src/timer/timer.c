/* Timers: one service per system.
 *
 * Pending timers sit in a deadline heap (heap.c). One mutex per system
 * guards the heap and every timer's links.
 *
 * Measured on the 2-core development machine (test_timer.c's stress test
 * prints its figures): 1,000,000 timers armed from turns cost 0.5-1.3 us
 * each in vat_later, nearly all of it the first touch of fresh collector
 * memory for the timer, plus about 0.2 us each for the heap insertion at
 * commit; cancelling half of them costs 0.15-0.25 us each. A hierarchical
 * wheel would make insertion O(1), but it would save a fraction of the
 * 0.2 us while the allocation stays, and it fires at a tick, not at the
 * deadline.
 *
 * Systems with workers get a timer thread that sleeps on a condition
 * variable until the earliest deadline (no CPU when idle) and delivers due
 * messages like a host send. Host-driven systems call
 * vat__timers_fire_due themselves. A timer's message is delivered under the
 * service lock after a check that its owner is alive; the terminate hook
 * cancels the owner's timers under the same lock, so a dead vat's timer
 * never delivers once its death is published.
 *
 * Idle timeouts are in idle.c.
 */
#include "timer/timer.h"

#include "core/deliver.h"
#include "core/system.h"
#include "timer/service.h"
#include "util/clock.h"
#include "util/container.h"
#include "util/gc.h" /* pthread_create registers the timer thread */
#include "util/mem.h"

/* --- Owners ----------------------------------------------------------------
 */

struct vat__timers *vat__timers_of(vat__vat *v) {
  vat__vat_ext *ext = vat__ext_of(v);
  if (ext->timers == NULL)
    ext->timers = vat__gc_alloc(sizeof *ext->timers);
  return ext->timers;
}

static void own_link(vat_timer *t) {
  struct vat__timers *own = t->owner->ext->timers;
  t->own_prev = NULL;
  t->own_next = own->owned;
  if (own->owned)
    own->owned->own_prev = t;
  own->owned = t;
}

static void own_unlink(vat_timer *t) {
  struct vat__timers *own = t->owner->ext->timers;
  if (t->own_prev)
    t->own_prev->own_next = t->own_next;
  else if (own->owned == t)
    own->owned = t->own_next;
  if (t->own_next)
    t->own_next->own_prev = t->own_prev;
  t->own_prev = t->own_next = NULL;
}

/* Cancels t under the lock: it leaves the heap if it is armed there. */
void vat__timer_cancel_locked(service *s, vat_timer *t) {
  t->cancelled = true;
  if (t->slot != NOT_ARMED)
    vat__timer_heap_remove(s, t);
}

/* Arms t (its `deadline` holding the delay) under the lock. */
void vat__timer_arm_locked(service *s, vat_timer *t, uint64_t now) {
  if (t->cancelled || s->stop)
    return;
  t->deadline = now + t->deadline;
  t->armed = true;
  vat__timer_heap_insert(s, t);
  if (t->owner && t->kind != T_IDLE)
    own_link(t);
  /* A new earliest deadline: the sleeping thread must recompute. */
  if (t->slot == 0 && s->has_thread)
    pthread_cond_signal(&s->cond);
}

/* --- Firing -----------------------------------------------------------------
 */

static void deliver(vat_timer *t) {
  if (t->kind == T_IDLE) {
    struct vat__timers *own = t->owner->ext->timers;
    vat__deliver_now_signal(&t->owner->first, &own->idle_sig);
  } else if (t->dynamic) {
    vat__deliver_now_msg(t->u.to, vat__dispatch_dynamic, t->arg, *t->value);
  } else {
    vat__deliver_now_msg(t->u.to, t->f.fn, t->arg, vat_null());
  }
}

void vat__timers_fire_due(vat_system *sys, uint64_t now) {
  service *s = sys->timers;
  if (s == NULL || vat__system_state(sys) != VAT__RUNNING)
    return;
  vat_timer *calls = NULL;
  pthread_mutex_lock(&s->lock);
  while (s->n > 0 && s->heap[0]->deadline <= now && !s->stop) {
    vat_timer *t = s->heap[0];
    vat__timer_heap_remove(s, t);
    if (t->kind == T_CALL) {
      t->fired = true;
      t->batch_next = calls;
      calls = t;
      continue;
    }
    if (vat__is_dead(t->owner)) {
      t->cancelled = true;
      if (t->kind != T_IDLE)
        own_unlink(t);
      continue;
    }
    if (t->period) {
      /* Keep the phase; skip periods missed entirely. */
      t->deadline += t->period;
      if (t->deadline <= now)
        t->deadline = now + t->period;
      vat__timer_heap_insert(s, t);
    } else if (t->kind == T_MSG) {
      t->fired = true;
      own_unlink(t);
    }
    deliver(t);
  }
  pthread_mutex_unlock(&s->lock);
  /* Callbacks (request timeouts) run without the lock: they cancel. */
  for (vat_timer *t = calls, *next; t != NULL; t = next) {
    next = t->batch_next;
    t->batch_next = NULL;
    t->f.call(t->arg);
  }
}

bool vat__timers_postpone(vat__vat *v, uint64_t ns) {
  vat__vat_ext *ext = vat__ext_peek(v);
  struct vat__timers *own = ext ? ext->timers : NULL;
  service *s = v->sys->timers;
  if (own == NULL || s == NULL)
    return false;
  pthread_mutex_lock(&s->lock);
  vat_timer *first = NULL;
  for (vat_timer *t = own->owned; t != NULL; t = t->own_next)
    if (t->slot != NOT_ARMED &&
        (first == NULL || t->deadline < first->deadline ||
         (t->deadline == first->deadline && t->seq < first->seq)))
      first = t;
  if (first != NULL) {
    vat__timer_heap_remove(s, first);
    first->deadline =
        first->deadline > UINT64_MAX - ns ? UINT64_MAX : first->deadline + ns;
    vat__timer_heap_insert(s, first);
  }
  pthread_mutex_unlock(&s->lock);
  return first != NULL;
}

uint64_t vat__timers_next_deadline(vat_system *sys) {
  service *s = sys->timers;
  if (s == NULL)
    return UINT64_MAX;
  pthread_mutex_lock(&s->lock);
  uint64_t d = s->n > 0 ? s->heap[0]->deadline : UINT64_MAX;
  pthread_mutex_unlock(&s->lock);
  return d;
}

static void *timer_main(void *arg) {
  vat_system *sys = arg;
  service *s = sys->timers;
  pthread_mutex_lock(&s->lock);
  while (!s->stop) {
    bool running = vat__system_state(sys) == VAT__RUNNING;
    uint64_t next = s->n > 0 && running ? s->heap[0]->deadline : UINT64_MAX;
    uint64_t now = vat__clock_now(sys);
    if (next <= now) {
      pthread_mutex_unlock(&s->lock);
      vat__timers_fire_due(sys, now);
      pthread_mutex_lock(&s->lock);
      continue;
    }
    if (next == UINT64_MAX) {
      pthread_cond_wait(&s->cond, &s->lock);
    } else {
      /* The system's clock is the monotonic one here, as is the condition
       * variable's: a virtual clock exists only in host-driven systems,
       * which have no timer thread. */
      struct timespec ts = vat__timespec_of(next);
      pthread_cond_timedwait(&s->cond, &s->lock, &ts);
    }
  }
  pthread_mutex_unlock(&s->lock);
  return NULL;
}

static int system_start(vat_system *sys) {
  service *s = vat__gc_alloc(sizeof *s);
  pthread_mutex_init(&s->lock, NULL);
  vat__cond_init_monotonic(&s->cond);
  sys->timers = s;
  /* A host-driven system fires its timers in vat_system_run. */
  if (sys->host_driven)
    return VAT_OK;
  /* The collector's pthread_create (util/gc.h): the thread is registered. */
  if (pthread_create(&s->thread, NULL, timer_main, sys) != 0)
    return VAT_ENOMEM;
  s->has_thread = true;
  return VAT_OK;
}

static void system_stop(vat_system *sys) {
  service *s = sys->timers;
  if (s == NULL)
    return;
  pthread_mutex_lock(&s->lock);
  s->stop = true;
  pthread_cond_signal(&s->cond);
  pthread_mutex_unlock(&s->lock);
  if (s->has_thread) {
    pthread_join(s->thread, NULL);
    s->has_thread = false;
  }
  /* Pending timers are cancelled with their system. */
  pthread_mutex_lock(&s->lock);
  for (size_t i = 0; i < s->n; i++) {
    vat_timer *t = s->heap[i];
    t->slot = NOT_ARMED;
    t->cancelled = true;
    if (t->owner && t->kind != T_IDLE)
      own_unlink(t);
    s->heap[i] = NULL;
  }
  s->n = 0;
  pthread_mutex_unlock(&s->lock);
}

static void vat_ended(vat__worker *w, vat__vat *v, vat_value reason) {
  (void)w;
  (void)reason;
  struct vat__timers *own = v->ext->timers;
  service *s = v->sys->timers;
  if (own == NULL || s == NULL)
    return;
  pthread_mutex_lock(&s->lock);
  for (vat_timer *t = own->owned, *next; t != NULL; t = next) {
    next = t->own_next;
    vat__timer_cancel_locked(s, t);
    t->own_prev = t->own_next = NULL;
  }
  own->owned = NULL;
  vat_timer *idle = own->idle_check;
  if (idle) {
    vat__timer_cancel_locked(s, idle);
  }
  pthread_mutex_unlock(&s->lock);
}

/* --- Arming from turns ------------------------------------------------------
 */

static void arm_commit(vat_turn *turn, vat__effect *e) {
  struct vat__timers *own =
      vat__container_of(e, struct vat__timers, arm_effect);
  vat_system *sys = turn->vat->sys;
  service *s = sys->timers;
  vat_timer *t = own->to_arm;
  own->to_arm = own->to_arm_tail = NULL;
  uint64_t now = vat__clock_now(sys);
  pthread_mutex_lock(&s->lock);
  for (vat_timer *next; t != NULL; t = next) {
    next = t->batch_next;
    t->batch_next = NULL;
    vat__timer_arm_locked(s, t, now);
  }
  pthread_mutex_unlock(&s->lock);
}

/* Queues t to be armed when the turn commits: one effect per turn however
 * many timers it arms. A failed turn ends the vat, so a queue left behind
 * by one is never looked at again. */
static int arm_at_commit(vat_turn *turn, vat_timer *t, vat_timer **out) {
  struct vat__timers *own = vat__timers_of(turn->vat);
  t->owner = turn->vat;
  t->slot = NOT_ARMED;
  if (own->to_arm == NULL) {
    own->to_arm = t;
    own->arm_effect.commit = arm_commit;
    vat__turn_defer(turn, &own->arm_effect);
  } else {
    own->to_arm_tail->batch_next = t;
  }
  own->to_arm_tail = t;
  if (out)
    *out = t;
  return VAT_OK;
}

static int later(vat_turn *turn, double delay_s, double period_s, vat_ref *to,
                 vat_fn fn, void *arg, vat_value *value, vat_timer **out) {
  int rc = vat__check_turn(turn);
  if (rc != VAT_OK)
    return rc;
  uint64_t delay, period = 0;
  if (to == NULL || fn == NULL)
    return VAT_EINVAL;
  if (period_s > 0) {
    if ((rc = vat__seconds_to_ns(period_s,
                                 VAT__NS_POSITIVE | VAT__NS_KEEP_NONZERO,
                                 &period)) != VAT_OK)
      return rc;
    delay = period;
  } else if ((rc = vat__seconds_to_ns(delay_s, 0, &delay)) != VAT_OK) {
    return rc;
  }
  vat_timer *t = vat__gc_alloc(sizeof *t);
  *t = (vat_timer){.deadline = delay,
                   .period = period,
                   .kind = T_MSG,
                   .dynamic = value != NULL,
                   .u.to = to,
                   .f.fn = fn,
                   .arg = arg,
                   .value = value};
  return arm_at_commit(turn, t, out);
}

int vat_later(vat_turn *turn, double delay_s, vat_ref *to, vat_fn fn, void *arg,
              vat_timer **out) {
  return later(turn, delay_s, 0, to, fn, arg, NULL, out);
}

int vat_later_msg(vat_turn *turn, double delay_s, vat_ref *to,
                  const vat_atom *selector, vat_value value, vat_timer **out) {
  if (selector == NULL)
    return vat__check_turn(turn) != VAT_OK ? vat__check_turn(turn) : VAT_EINVAL;
  vat_value *boxed = vat__gc_alloc(sizeof *boxed);
  *boxed = value;
  return later(turn, delay_s, 0, to, vat__dispatch_dynamic, (void *)selector,
               boxed, out);
}

int vat_every(vat_turn *turn, double period_s, vat_ref *to, vat_fn fn,
              void *arg, vat_timer **out) {
  if (!(period_s > 0))
    return vat__check_turn(turn) != VAT_OK ? vat__check_turn(turn) : VAT_EINVAL;
  return later(turn, 0, period_s, to, fn, arg, NULL, out);
}

int vat_timer_cancel(vat_timer *t) {
  if (t == NULL)
    return VAT_EINVAL;
  vat_system *sys = t->kind == T_CALL ? t->u.sys : t->owner->sys;
  service *s = sys->timers;
  pthread_mutex_lock(&s->lock);
  int rc = VAT_OK;
  if (t->cancelled || t->fired) {
    rc = VAT_ENOTFOUND;
  } else {
    vat__timer_cancel_locked(s, t);
    if (t->armed && t->owner && t->kind != T_IDLE)
      own_unlink(t);
  }
  pthread_mutex_unlock(&s->lock);
  return rc;
}

vat_timer *vat__timer_call_at(vat_system *sys, uint64_t deadline_ns,
                              void (*fn)(void *arg), void *arg) {
  service *s = sys->timers;
  vat_timer *t = vat__gc_alloc(sizeof *t);
  *t = (vat_timer){.slot = NOT_ARMED,
                   .kind = T_CALL,
                   .u.sys = sys,
                   .f.call = fn,
                   .arg = arg};
  pthread_mutex_lock(&s->lock);
  t->deadline = 0;
  vat__timer_arm_locked(s, t, deadline_ns);
  pthread_mutex_unlock(&s->lock);
  return t;
}

const vat__module vat__timer_module = {
    .name = "timer",
    .system_start = system_start,
    .system_stop = system_stop,
    .vat_ended = vat_ended,
};
