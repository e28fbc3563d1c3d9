/* The exits module's signals: LINK, UNLINK, ACK, EXIT, MONITOR,
 * DEMONITOR and DOWN, each with its deliver and its drop (see exits.c for
 * the protocol). */
#include "core/boundary.h"
#include "core/system.h"
#include "exits/state.h"
#include "util/mem.h"

static void exit_deliver(vat_turn *turn, void *state, vat__signal *sig);
static bool exit_overtakes(vat__vat *v, const vat__msg *m);
const vat__signal_class vat__exit_class = {
    .deliver = exit_deliver,
    .drop = vat__signal_drop_nothing,
    .overtakes = exit_overtakes,
    .name = "exit",
};

/* An exit along a link travels inline: the reason in the node's value, the
 * ref of the vat that ended in its aux. A vat's end sends one per link, so
 * a failure crossing a million linked vats allocates nothing. */
static void link_exit_deliver(vat_turn *turn, void *state, vat__signal *sig) {
  (void)sig;
  vat_ref *from = turn->msg->aux.signal_data;
  exit_sig s = {.base = {&vat__exit_class},
                .from_vat = from->vat,
                .from = from,
                .reason = turn->msg->value,
                .link = true};
  exit_deliver(turn, state, &s.base);
}
static bool link_exit_overtakes(vat__vat *v, const vat__msg *m);
static const vat__signal_class link_exit_class = {
    .deliver = link_exit_deliver,
    .drop = vat__signal_drop_nothing,
    .overtakes = link_exit_overtakes,
    .name = "exit",
};
static const vat__signal link_exit = {&link_exit_class};

bool vat__exits_may_end(vat__vat *to, vat__vat *from_vat, vat_value reason,
                        bool link) {
  if (!link && vat__exits_is_kill(reason))
    return true;
  if (vat_reason_is_normal(reason) && from_vat != to)
    return false;
  return !atomic_load_explicit(&to->traps_hint, memory_order_relaxed);
}

void vat__exits_send_exit(vat__worker *w, vat_ref *to, vat__vat *from_vat,
                          vat_value reason) {
  (void)w;
  /* Delivery would drop it without a trace; in a chain of links every
   * vat's exit goes back to the one that just killed it. */
  if (vat__is_dead(to->vat))
    return;
  vat__deliver_now_inline(to, &link_exit, reason, &from_vat->first);
  if (vat__exits_may_end(to->vat, from_vat, reason, true))
    vat__alert(to->vat);
}

/* What exit_deliver will do, read without doing it: whether the exit
 * ends `v` (rules 1 to 4 of vat/exits.h). Such an exit overtakes the queue;
 * one that a trap turns into a message keeps its place, after what its
 * sender sent before it. */
static bool exit_ends(vat__vat *v, vat__vat *from_vat, vat_value reason,
                      bool link) {
  struct vat__exits *x = v->ext ? v->ext->exits : NULL;
  if (link &&
      (x == NULL || vat__xmap_get(&x->links, (uintptr_t)from_vat) == NULL))
    return false;
  bool kill = !link && vat__exits_is_kill(reason);
  if (x != NULL && x->trap != NULL && !kill)
    return false;
  return !vat_reason_is_normal(reason) || from_vat == v;
}

static bool exit_overtakes(vat__vat *v, const vat__msg *m) {
  const exit_sig *s = m->arg;
  return exit_ends(v, s->from_vat, s->reason, s->link);
}

static bool link_exit_overtakes(vat__vat *v, const vat__msg *m) {
  const vat_ref *from = m->aux.signal_data;
  return exit_ends(v, from->vat, m->value, true);
}

static void exit_deliver(vat_turn *turn, void *state, vat__signal *sig) {
  (void)state;
  exit_sig *s = (exit_sig *)sig;
  vat__vat *v = turn->vat;
  struct vat__exits *x = v->ext ? v->ext->exits : NULL;
  if (s->link) {
    if (x == NULL || !vat__xmap_remove(&x->links, (uintptr_t)s->from_vat))
      return; /* rule 1: the link no longer exists */
  }
  bool kill = !s->link && vat__exits_is_kill(s->reason);
  if (x != NULL && x->trap != NULL && !kill) {
    turn->self = x->trap;
    x->trap_fn(turn, vat__state(x->trap), s->from, s->reason);
    return;
  }
  if (vat_reason_is_normal(s->reason) && s->from_vat != v)
    return;
  vat_fail(turn, s->reason);
}

/* A link or monitor with a vat of another system: that vat must hear of
 * this one's end even if it ends only with its system. */
void vat__exits_note_crossing(vat__vat *v, vat__vat *peer) {
  if (peer->sys != v->sys)
    vat__boundary_note(v);
}

static void link_deliver(vat_turn *turn, void *state, vat__signal *sig) {
  (void)state;
  link_sig *s = (link_sig *)sig;
  struct vat__exits *x = vat__exits_of(turn->vat);
  /* While our UNLINK is unacknowledged, the peer sent this LINK before it
   * saw the UNLINK, which will undo it there: ignore it here too. */
  if (vat__xmap_get(&x->unlinking, (uintptr_t)s->from->vat) == NULL) {
    vat__xmap_put(&x->links, (uintptr_t)s->from->vat, s->from);
    vat__exits_note_crossing(turn->vat, s->from->vat);
  }
}

/* Why a LINK or MONITOR found no one: noproc for a vat that had ended, as
 * in Erlang; `shutdown` for one whose system stopped with it alive, which
 * is how it ended for everyone outside. */
static vat_value gone_reason(vat_ref *target) {
  if (!vat__is_dead(target->vat) &&
      vat__system_state(target->vat->sys) >= VAT__STOPPED)
    return vat_atom_value(vat__reason.shutdown);
  return vat_atom_value(vat__reason.noproc);
}

/* The target has ended (or its system stopped): answer through the link A
 * recorded, so A's rule 1 still applies if A unlinked meanwhile. */
static void link_drop(vat__worker *w, vat_ref *target, vat__signal *sig) {
  link_sig *s = (link_sig *)sig;
  vat__exits_send_exit(w, s->from, target->vat, gone_reason(target));
}

static void ack_deliver(vat_turn *turn, void *state, vat__signal *sig) {
  (void)state;
  link_sig *s = (link_sig *)sig;
  vat__vat *v = turn->vat;
  struct vat__exits *x = v->ext ? v->ext->exits : NULL;
  uintptr_t peer = (uintptr_t)s->from->vat;
  /* Only the latest unlink's answer ends the unlinking state. */
  if (x && (uintptr_t)vat__xmap_get(&x->unlinking, peer) == s->id)
    vat__xmap_remove(&x->unlinking, peer);
}

static const vat__signal_class ack_class = {
    .deliver = ack_deliver,
    .drop = vat__signal_drop_nothing,
    .control = true,
    .name = "unlink ack",
};

static link_sig *new_ack(vat_ref *from, uint64_t id) {
  link_sig *ack = vat__gc_alloc(sizeof *ack);
  *ack = (link_sig){.base = {&ack_class}, .from = from, .id = id};
  return ack;
}

static void unlink_deliver(vat_turn *turn, void *state, vat__signal *sig) {
  (void)state;
  link_sig *s = (link_sig *)sig;
  vat__vat *v = turn->vat;
  if (v->ext && v->ext->exits)
    vat__xmap_remove(&v->ext->exits->links, (uintptr_t)s->from->vat);
  vat__send_signal(turn, s->from, &new_ack(turn->self, s->id)->base);
}

static void unlink_drop(vat__worker *w, vat_ref *target, vat__signal *sig) {
  (void)w;
  link_sig *s = (link_sig *)sig;
  vat__deliver_now_signal(s->from, &new_ack(target, s->id)->base);
}

const vat__signal_class vat__link_class = {
    .deliver = link_deliver,
    .drop = link_drop,
    .control = true,
    .name = "link",
};
const vat__signal_class vat__unlink_class = {
    .deliver = unlink_deliver,
    .drop = unlink_drop,
    .control = true,
    .name = "unlink",
};

static void down_deliver(vat_turn *turn, void *state, vat__signal *sig) {
  watch_sig *s = (watch_sig *)sig;
  vat__vat *v = turn->vat;
  struct vat__exits *x = v->ext ? v->ext->exits : NULL;
  if (x == NULL || !vat__xmap_remove(&x->held, s->w->id))
    return; /* demonitored: never fires */
  s->w->fn(turn, state, s->w->id, s->w->who, s->reason);
}

static const vat__signal_class down_class = {
    .deliver = down_deliver,
    .drop = vat__signal_drop_nothing,
    .name = "down",
};

void vat__exits_send_down(vat__worker *w, watch *wa, vat_value reason) {
  if (wa->watcher == NULL) {
    /* A host thread's monitor: told here, outside any turn (the ended
     * hook, a drop, or shutdown's settling). */
    wa->host_fn(wa->host_ctx, reason);
    return;
  }
  watch_sig *s = vat__gc_alloc(sizeof *s);
  *s = (watch_sig){.base = {&down_class}, .w = wa, .reason = reason};
  (void)w;
  vat__deliver_now_signal(wa->watcher, &s->base);
}

static void monitor_deliver(vat_turn *turn, void *state, vat__signal *sig) {
  (void)state;
  watch_sig *s = (watch_sig *)sig;
  vat__xmap_put(&vat__exits_of(turn->vat)->watchers, (uintptr_t)s->w, s->w);
  if (s->w->watcher == NULL)
    vat__boundary_note(turn->vat); /* a host waits: settle at shutdown */
  else
    vat__exits_note_crossing(turn->vat, s->w->watcher->vat);
}

static void monitor_drop(vat__worker *w, vat_ref *target, vat__signal *sig) {
  vat__exits_send_down(w, ((watch_sig *)sig)->w, gone_reason(target));
}

static void demonitor_deliver(vat_turn *turn, void *state, vat__signal *sig) {
  (void)state;
  watch_sig *s = (watch_sig *)sig;
  vat__vat *v = turn->vat;
  if (v->ext && v->ext->exits)
    vat__xmap_remove(&v->ext->exits->watchers, (uintptr_t)s->w);
}

const vat__signal_class vat__monitor_class = {
    .deliver = monitor_deliver,
    .drop = monitor_drop,
    .control = true,
    .name = "monitor",
};
const vat__signal_class vat__demonitor_class = {
    .deliver = demonitor_deliver,
    .drop = vat__signal_drop_nothing,
    .control = true,
    .name = "demonitor",
};
