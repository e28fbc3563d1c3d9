/* Exits between vats: links, monitors, trapping exits, exit signals, and
 * the entities' stop callbacks.
 *
 * Design. A vat's links and monitors are part of its module state
 * (vat__ext_of(v)->exits) and change only in that vat's own turns or in
 * its terminate hook, so nothing here takes a lock. Vats talk about links
 * and monitors with signals (vat__signal), which travel in the same
 * mailboxes as messages and so keep the per-pair commit order:
 *
 *   LINK(a)       sent by A to B when A links B; A records the link at
 *                 commit, B records it when LINK is delivered.
 *   UNLINK(a, n)  sent by A to B when A unlinks B; A forgets the link at
 *                 commit but remembers "unlinking B, n"; B forgets.
 *   ACK(b, n)     B's answer to UNLINK n (or its drop's, if B ended); A
 *                 then forgets "unlinking" if n is its latest unlink.
 *   EXIT(r)       sent along a link by a dying vat (link = true), or by
 *                 vat_exit (link = false).
 *   MONITOR(w)    sent by A to B; B records the watch.
 *   DEMONITOR(w)  sent by A to B; B forgets the watch.
 *   DOWN(w, r)    sent by a dying B to A for each watch it holds.
 *
 * Exactly-once. The core guarantees a signal gets either `deliver` (as a
 * turn of a live target) or `drop` (the target has ended, or its system
 * stopped), once. That splits every race in two:
 *  - LINK reaches B alive: B records it; when B ends, its terminate hook
 *    sends EXIT along it (one EXIT). LINK reaches B dead: its drop sends
 *    EXIT(noproc) back to A (one EXIT; B never recorded A, so B's hook sent
 *    none). There is no third case.
 *  - MONITOR: the same, with DOWN and DOWN(noproc).
 *  - A dies while its LINK is in flight: A's hook sends EXIT to B after the
 *    LINK (same sender, same target: ordered), so B records then removes.
 * Stale signals. A side that removed a link (unlink, or an EXIT received)
 * ignores later link EXITs from that vat: Erlang's rule 1. A watcher that
 * demonitored, or already got its DOWN, ignores a later DOWN with that id,
 * so a monitor fires at most once even if DEMONITOR crosses DOWN.
 * Both sides changing one link at once (OTP 23's link protocol, the same
 * idea): link and unlink send nothing when they would not change the
 * caller's own state, and a LINK that reaches A while A's UNLINK is not
 * yet acknowledged is ignored — B sent it before it saw the UNLINK, which
 * then removed it at B. So both sides end in the same state whatever the
 * interleaving of A's unlink and B's link; without the ACK, A could keep a
 * link B had dropped, and miss B's death.
 * Relinking. An EXIT removes the link; linking again to a vat that has
 * ended answers noproc again, as Erlang does: one exit per link made,
 * never two for one link.
 * Where drops run. A drop may run on another worker (the sender's, when it
 * saw the target dead), on the target's worker (draining the mailbox of a
 * dead vat), on a host thread, or after the system stopped (w NULL). It
 * only sends, through vat__deliver_now_*, which never needs a turn. Once the
 * system has stopped, a drop at a vat still alive answers `shutdown`, not
 * noproc: every vat of a stopped system has ended with `shutdown` as far
 * as anyone can tell. Links and monitors it recorded from other systems
 * fire with `shutdown` too, at shutdown (its stranded hook).
 * A dying vat. Its ended hook runs once, on the vat's worker, after
 * `dead` is set: it runs the stop callbacks, then sends EXIT along every
 * link, DOWN for every watch and DEMONITOR for every monitor it made.
 * Signals that reach the vat after that are dropped by the core, which is
 * where noproc replies come from.
 */
#include "exits/exits.h"

#include "core/reasons.h"
#include "core/system.h"
#include "exits/state.h"
#include "util/container.h"
#include "util/mem.h"

struct vat__exits *vat__exits_make(vat__vat *v) {
  vat__vat_ext *c = v->ext;
  if (c == NULL) {
    /* Both in one allocation when neither exists yet: a vat's end reads
     * one right after the other, and a separate object would be one more
     * cache miss per vat in a chain of exits. */
    struct ext_and_exits {
      vat__vat_ext ext;
      struct vat__exits exits;
    } *both = vat__gc_alloc(sizeof *both);
    both->ext.exits = &both->exits;
    vat__ext_publish(v, &both->ext);
    return &both->exits;
  }
  /* Release: a snapshot that acquire-loads it sees it zeroed, not older
   * bytes (vat_ref_inspect). */
  if (c->exits == NULL)
    __atomic_store_n(&c->exits, vat__gc_alloc(sizeof *c->exits),
                     __ATOMIC_RELEASE);
  return c->exits;
}

/* A new monitor or unlink id, never 0. */
static uint64_t new_id(vat__vat *v) {
  return ++vat__exits_of(v)->last_id;
}

const vat_atom *vat_atom_shutdown(void) {
  return vat__reason.shutdown;
}

vat_value vat_reason_error(const vat_atom *code, vat_value payload) {
  return vat_error(code, payload);
}

/* --- Effects: what a turn changes at commit ------------------------------- */

typedef struct table_effect {
  vat__effect base;
  enum { LINK, UNLINK, WATCH, UNWATCH, SPAWN_LINK } op;
  vat_ref *ref;
  watch *w;
  uint64_t id; /* UNLINK */
} table_effect;

static void table_commit(vat_turn *turn, vat__effect *e) {
  table_effect *te = (table_effect *)e;
  struct vat__exits *x = vat__exits_of(turn->vat);
  switch (te->op) {
  case LINK:
    vat__xmap_put(&x->links, (uintptr_t)te->ref->vat, te->ref);
    vat__xmap_remove(&x->unlinking, (uintptr_t)te->ref->vat);
    vat__exits_note_crossing(turn->vat, te->ref->vat);
    break;
  case SPAWN_LINK:
    /* The child cannot have run: only this turn holds its ref, and its
     * sends to it come after this effect (commit keeps program order). */
    vat__xmap_put(&x->links, (uintptr_t)te->ref->vat, te->ref);
    vat__xmap_put(&vat__exits_of(te->ref->vat)->links, (uintptr_t)turn->vat,
                  turn->self);
    break;
  case UNLINK:
    vat__xmap_remove(&x->links, (uintptr_t)te->ref->vat);
    vat__xmap_put(&x->unlinking, (uintptr_t)te->ref->vat,
                  (void *)(uintptr_t)te->id);
    break;
  case WATCH:
    vat__xmap_put(&x->held, te->w->id, te->w);
    break;
  case UNWATCH:
    vat__xmap_remove(&x->held, te->w->id);
    break;
  }
}

static table_effect *defer(vat_turn *turn, int op, vat_ref *ref, watch *w) {
  table_effect *te = vat__gc_alloc(sizeof *te);
  te->base.commit = table_commit;
  te->op = op;
  te->ref = ref;
  te->w = w;
  vat__turn_defer(turn, &te->base);
  return te;
}

/* --- Public API ----------------------------------------------------------- */

/* Whether the calling vat is linked to `peer` as of this point of the turn:
 * the committed table, then this turn's own link changes in order. */
static bool linked_now(vat_turn *turn, vat__vat *peer) {
  vat__vat *v = turn->vat;
  bool linked = v->ext && v->ext->exits &&
                vat__xmap_get(&v->ext->exits->links, (uintptr_t)peer);
  for (vat__effect *e = turn->effects_head; e != NULL; e = e->next) {
    if (e->commit != table_commit)
      continue;
    table_effect *te = (table_effect *)e;
    if (te->ref != NULL && te->ref->vat == peer && te->w == NULL)
      linked = te->op != UNLINK;
  }
  return linked;
}

/* A link or unlink that would not change this side's state sends nothing:
 * a second LINK or a stray UNLINK could otherwise undo, at the peer, a
 * change the peer made meanwhile. */
static int link_op(vat_turn *turn, vat_ref *peer, bool link) {
  int rc = vat__check_turn(turn);
  if (rc != VAT_OK)
    return rc;
  if (peer == NULL)
    return VAT_EINVAL;
  if (peer->vat == turn->vat || linked_now(turn, peer->vat) == link)
    return VAT_OK;
  link_sig *s = vat__gc_alloc(sizeof *s);
  *s = (link_sig){.base = {link ? &vat__link_class : &vat__unlink_class},
                  .from = turn->self};
  if (!link)
    s->id = new_id(turn->vat);
  rc = vat__send_signal(turn, peer, &s->base);
  if (rc == VAT_OK)
    defer(turn, link ? LINK : UNLINK, peer, NULL)->id = s->id;
  return rc;
}

int vat_link(vat_turn *turn, vat_ref *peer) {
  return link_op(turn, peer, true);
}

int vat_unlink(vat_turn *turn, vat_ref *peer) {
  return link_op(turn, peer, false);
}

int vat_spawn_link(vat_turn *turn, const vat_entity_def *def, vat_ref **out,
                   void **state_out) {
  int rc = vat_spawn(turn, def, out, state_out);
  if (rc == VAT_OK)
    defer(turn, SPAWN_LINK, *out, NULL);
  return rc;
}

int vat_monitor(vat_turn *turn, vat_ref *target, vat_down_fn on_down,
                uint64_t *id) {
  int rc = vat__check_turn(turn);
  if (rc != VAT_OK)
    return rc;
  if (target == NULL || on_down == NULL || id == NULL)
    return VAT_EINVAL;
  watch *w = vat__gc_alloc(sizeof *w);
  *w = (watch){
      .id = new_id(turn->vat),
      .watcher = turn->self,
      .who = target,
      .fn = on_down,
  };
  watch_sig *s = vat__gc_alloc(sizeof *s);
  *s = (watch_sig){.base = {&vat__monitor_class}, .w = w};
  /* Recorded before MONITOR leaves, so a DOWN can always find it. */
  defer(turn, WATCH, target, w);
  vat__send_signal(turn, target, &s->base);
  *id = w->id;
  return VAT_OK;
}

/* A monitor made in this very turn is not in `held` yet: look through the
 * turn's deferred effects too, newest last. */
static watch *find_held(vat_turn *turn, uint64_t id) {
  watch *found = NULL;
  vat__vat *v = turn->vat;
  if (v->ext && v->ext->exits)
    found = vat__xmap_get(&v->ext->exits->held, id);
  for (vat__effect *e = turn->effects_head; e != NULL; e = e->next) {
    if (e->commit != table_commit)
      continue;
    table_effect *te = (table_effect *)e;
    if (te->w != NULL && te->w->id == id)
      found = te->op == WATCH ? te->w : NULL;
  }
  return found;
}

int vat_demonitor(vat_turn *turn, uint64_t id) {
  int rc = vat__check_turn(turn);
  if (rc != VAT_OK)
    return rc;
  watch *w = find_held(turn, id);
  if (w == NULL)
    return VAT_ENOTFOUND;
  watch_sig *s = vat__gc_alloc(sizeof *s);
  *s = (watch_sig){.base = {&vat__demonitor_class}, .w = w};
  defer(turn, UNWATCH, w->who, w);
  vat__send_signal(turn, w->who, &s->base);
  return VAT_OK;
}

int vat_trap_exit(vat_turn *turn, vat_ref *receiver, vat_exit_fn on_exit) {
  int rc = vat__check_turn(turn);
  if (rc != VAT_OK)
    return rc;
  if (receiver != NULL && (receiver->vat != turn->vat || on_exit == NULL))
    return VAT_EINVAL;
  /* Immediate: a failed turn ends the vat, so no one sees the change. */
  struct vat__exits *x = vat__exits_of(turn->vat);
  x->trap_fn = receiver ? on_exit : NULL;
  atomic_store_explicit(&turn->vat->traps_hint, receiver != NULL,
                        memory_order_relaxed);
  vat__exits_set_trap(x, receiver);
  return VAT_OK;
}

static exit_sig *exit2(vat__vat *from_vat, vat_value reason) {
  exit_sig *s = vat__gc_alloc(sizeof *s);
  *s = (exit_sig){.base = {&vat__exit_class},
                  .from_vat = from_vat,
                  .from = from_vat ? &from_vat->first : NULL,
                  .reason = reason};
  return s;
}

/* Alerts the target once the exit buffered just before it is delivered:
 * a turn's effects take place in order among its sends. */
typedef struct alert_effect {
  vat__effect base;
  vat__vat *to;
} alert_effect;

static void alert_commit(vat_turn *turn, vat__effect *e) {
  (void)turn;
  vat__alert(vat__container_of(e, alert_effect, base)->to);
}

int vat_exit(vat_turn *turn, vat_ref *target, vat_value reason) {
  int rc = vat__check_turn(turn);
  if (rc != VAT_OK)
    return rc;
  if (target == NULL || vat_is_null(reason))
    return VAT_EINVAL;
  rc = vat__send_signal(turn, target, &exit2(turn->vat, reason)->base);
  if (rc == VAT_OK &&
      vat__exits_may_end(target->vat, turn->vat, reason, false)) {
    alert_effect *e = vat__gc_alloc(sizeof *e);
    e->base.commit = alert_commit;
    e->to = target->vat;
    vat__turn_defer(turn, &e->base);
  }
  return rc;
}

int vat_kill(vat_turn *turn, vat_ref *target) {
  return vat_exit(turn, target, vat_atom_value(vat__reason.killed));
}

int vat_host_exit(vat_ref *target, vat_value reason) {
  if (vat_is_null(reason))
    return VAT_EINVAL;
  int rc = vat__host_send_signal(target, &exit2(NULL, reason)->base);
  if (rc == VAT_OK && vat__exits_may_end(target->vat, NULL, reason, false))
    vat__alert(target->vat);
  return rc;
}

/* --- Host threads' monitors ----------------------------------------------- */

int vat__exits_host_watch(vat_ref *target,
                          void (*fn)(void *ctx, vat_value reason), void *ctx,
                          void **handle) {
  watch *w = vat__gc_alloc(sizeof *w);
  *w = (watch){.who = target, .host_fn = fn, .host_ctx = ctx};
  watch_sig *s = vat__gc_alloc(sizeof *s);
  *s = (watch_sig){.base = {&vat__monitor_class}, .w = w};
  /* MONITOR travels as a vat's does: recorded by the target if it is
   * alive when it arrives, else dropped, and its drop calls fn(noproc). */
  int rc = vat__host_send_signal(target, &s->base);
  if (rc == VAT_OK)
    *handle = w;
  return rc;
}

void vat__exits_host_unwatch(void *handle) {
  watch *w = handle;
  watch_sig *s = vat__gc_alloc(sizeof *s);
  *s = (watch_sig){.base = {&vat__demonitor_class}, .w = w};
  vat__deliver_now_signal(w->who, &s->base);
}

/* --- Core hooks ----------------------------------------------------------- */

/* Another entity than the first (whose callback the core keeps in
 * ext->first_stop; it runs first, as it was made first). */
static void track_stop(vat__vat *v, vat_ref *entity, vat_stop_fn fn) {
  struct vat__exits *x = vat__exits_of(v);
  stop_cb *cb = vat__gc_alloc(sizeof *cb);
  *cb = (stop_cb){.next = x->stops, .entity = entity, .fn = fn};
  x->stops = cb;
}

static void notify_link(void *ctx, uint64_t key, void *value) {
  (void)key;
  void **args = ctx;
  vat__vat *v = args[1];
  vat__exits_send_exit(args[0], value, v, v->ext->exit_reason);
}

static void notify_watch(void *ctx, uint64_t key, void *value) {
  (void)key;
  void **args = ctx;
  vat__vat *v = args[1];
  vat__exits_send_down(args[0], value, v->ext->exit_reason);
}

/* A monitor the dying vat made goes from its target, as Erlang's do: a
 * long-lived vat watched by many short-lived ones kept a watch, and with
 * it the dead watcher, for each one that ever watched it. */
static void release_held(void *ctx, uint64_t key, void *value) {
  (void)ctx, (void)key;
  watch *held = value;
  watch_sig *s = vat__gc_alloc(sizeof *s);
  *s = (watch_sig){.base = {&vat__demonitor_class}, .w = held};
  vat__deliver_now_signal(held->who, &s->base);
}

static void vat_ended(vat__worker *w, vat__vat *v, vat_value reason) {
  (void)reason; /* v->ext->exit_reason holds it */
  /* Stop callbacks first, in creation order: whoever learns of the end
   * (through an exit or a down) sees their work done, as in OTP, where
   * terminate runs before the links fire. */
  if (v->ext->first_stop)
    v->ext->first_stop(vat__state(&v->first), v->ext->exit_reason);
  struct vat__exits *x = v->ext->exits;
  if (x == NULL)
    return;
  stop_cb *rev = NULL;
  for (stop_cb *cb = x->stops, *next; cb != NULL; cb = next) {
    next = cb->next;
    cb->next = rev;
    rev = cb;
  }
  x->stops = NULL;
  for (stop_cb *cb = rev; cb != NULL; cb = cb->next)
    cb->fn(vat__state(cb->entity), v->ext->exit_reason);
  void *args[2] = {w, v};
  vat__xmap_each(&x->links, notify_link, args);
  vat__xmap_each(&x->watchers, notify_watch, args);
  vat__xmap_each(&x->held, release_held, NULL);
  vat__xmap_clear(&x->links);
  vat__xmap_clear(&x->unlinking);
  vat__xmap_clear(&x->watchers);
  vat__xmap_clear(&x->held);
  vat__exits_set_trap(x, NULL);
}

static bool vat_watched(vat__vat *v) {
  struct vat__exits *x = v->ext ? v->ext->exits : NULL;
  return x != NULL && (x->links.size != 0 || x->watchers.size != 0);
}

/* --- A stopped system's vats ---------------------------------------------- */

static void stopped_link(void *ctx, uint64_t key, void *value) {
  (void)key;
  void **args = ctx;
  vat__vat *v = args[0];
  vat_ref *peer = value;
  if (peer->vat->sys != v->sys)
    vat__exits_send_exit(NULL, peer, v, *(vat_value *)args[1]);
}

static void stopped_watch(void *ctx, uint64_t key, void *value) {
  (void)key;
  void **args = ctx;
  vat__vat *v = args[0];
  watch *wa = value;
  if (wa->watcher == NULL || wa->watcher->vat->sys != v->sys)
    vat__exits_send_down(NULL, wa, *(vat_value *)args[1]);
}

static void vat_stranded(vat__vat *v, vat_value reason) {
  struct vat__exits *x = v->ext ? v->ext->exits : NULL;
  if (x == NULL)
    return;
  /* The vat never runs again, so nothing else reads or changes its maps:
   * each of these fires once. */
  void *args[2] = {v, &reason};
  vat__xmap_each(&x->links, stopped_link, args);
  vat__xmap_each(&x->watchers, stopped_watch, args);
}

const vat__module vat__exits_module = {
    .name = "exits",
    .vat_ended = vat_ended,
    .vat_stranded = vat_stranded,
    .entity_stop = track_stop,
    .vat_watched = vat_watched,
};
