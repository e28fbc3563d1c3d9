/* Idle timeouts: the vat's turn counter is sampled by a check turn every
 * quarter of the period (re-armed from that turn, so checks are at least
 * a quarter apart); four silent checks in a row make a full period of
 * silence. */
#include "core/system.h"
#include "timer/service.h"
#include "util/clock.h"
#include "util/container.h"
#include "util/mem.h"

static void idle_arm_locked(service *s, struct vat__timers *own, uint64_t now) {
  vat_timer *t = own->idle_check;
  t->deadline = own->idle_ns / 4 ? own->idle_ns / 4 : 1;
  vat__timer_arm_locked(s, t, now);
}

static void idle_deliver(vat_turn *turn, void *state, vat__signal *sig) {
  (void)state;
  struct vat__timers *own =
      vat__container_of(sig, struct vat__timers, idle_sig);
  vat__vat *v = turn->vat;
  if (own->idle_ns == 0 || own->idle_check == NULL ||
      own->idle_check->cancelled)
    return;
  /* v->turns counts the turns before this one. */
  own->silent = v->turns == own->snap ? own->silent + 1 : 0;
  own->snap = v->turns + 1;
  if (own->silent >= 4) {
    own->silent = 0;
    vat_send(turn, own->idle_to, own->idle_fn, own->idle_arg);
  }
  vat_system *sys = v->sys;
  service *s = sys->timers;
  uint64_t now = vat__clock_now(sys);
  pthread_mutex_lock(&s->lock);
  if (!own->idle_check->cancelled && own->idle_check->slot == NOT_ARMED)
    idle_arm_locked(s, own, now);
  pthread_mutex_unlock(&s->lock);
}

/* A dropped check needs no answer: its vat has ended. */
static const vat__signal_class idle_class = {
    .deliver = idle_deliver,
    .drop = vat__signal_drop_nothing,
    .name = "idle",
};

typedef struct idle_effect {
  vat__effect effect;
  uint64_t idle_ns;
  vat_ref *to;
  vat_fn fn;
  void *arg;
} idle_effect;

static void idle_commit(vat_turn *turn, vat__effect *e) {
  idle_effect *ie = (idle_effect *)e;
  vat__vat *v = turn->vat;
  struct vat__timers *own = vat__timers_of(v);
  vat_system *sys = v->sys;
  service *s = sys->timers;
  uint64_t now = vat__clock_now(sys);
  pthread_mutex_lock(&s->lock);
  vat_timer *old = own->idle_check;
  if (old) {
    vat__timer_cancel_locked(s, old);
    own->idle_check = NULL;
  }
  own->idle_ns = ie->idle_ns;
  if (ie->idle_ns > 0) {
    own->idle_to = ie->to;
    own->idle_fn = ie->fn;
    own->idle_arg = ie->arg;
    own->idle_sig.cls = &idle_class;
    /* This turn counts: silence starts after it. */
    own->snap = v->turns;
    own->silent = 0;
    vat_timer *t = vat__gc_alloc(sizeof *t);
    *t = (vat_timer){.slot = NOT_ARMED, .kind = T_IDLE, .owner = v};
    own->idle_check = t;
    idle_arm_locked(s, own, now);
  }
  pthread_mutex_unlock(&s->lock);
}

int vat_idle_timeout(vat_turn *turn, double idle_s, vat_ref *to, vat_fn fn,
                     void *arg) {
  int rc = vat__check_turn(turn);
  if (rc != VAT_OK)
    return rc;
  uint64_t ns;
  if (vat__seconds_to_ns(idle_s, 0, &ns) != VAT_OK)
    return VAT_EINVAL;
  if (ns > 0 && (to == NULL || fn == NULL))
    return VAT_EINVAL;
  vat__timers_of(turn->vat);
  idle_effect *e = vat__gc_alloc(sizeof *e);
  *e = (idle_effect){.effect.commit = idle_commit,
                     .idle_ns = ns,
                     .to = to,
                     .fn = fn,
                     .arg = arg};
  vat__turn_defer(turn, &e->effect);
  return VAT_OK;
}
