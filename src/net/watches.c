/* Watches: one monitor per ref the peer calls, for all its calls.
 *
 * A call from the peer must not wait for ever on a vat that ended: if the
 * vat of the ref it went to ends before answering, the call is answered
 * with that vat's exit reason. vat_request gets this with a monitor per
 * request, made and removed by a turn of its reply entity: ~1,750
 * instructions and five collector blocks a call, a fifth of what the
 * connection vat spent on a one-way call. Here each called ref gets one
 * watch, an entity of the connection vat that monitors the ref's vat
 * once and keeps a list of the answers still awaited from it.
 *
 * Order: the watch's first turn makes the monitor, and it is sent before
 * the first call to the ref goes, so it runs before any answer can come
 * back (the answer follows the call, and so that message, into the same
 * mailbox). An answer sent before its vat ended arrives before the down
 * notification, which comes from that vat after it: it wins.
 *
 * A watch lives while its ref can be called: while it is exported or is
 * the bootstrap, or calls to it wait. One left idle (the last answer in,
 * the ref dropped by the peer) is let go and its monitor removed, so a
 * peer cycling through refs does not pile watches up. Its vat's end lets
 * it go too: the next call makes a new one, whose monitor reports noproc
 * at once. */
#define GC_THREADS 1
#include <gc/gc.h>

#include "internal.h"
#include "vat/exits.h"

struct net_watch {
  net_conn *c;
  vat_ref *target;
  net_answer *waiting; /* answers awaited from the target's vat */
  uint64_t monitor;
  bool watching; /* the monitor is live */
  bool let_go;   /* no longer in c->watches: its first turn does nothing */
};

static uint64_t key_of(vat_ref *ref) {
  return (uint64_t)(uintptr_t)ref;
}

static void let_go(vat_turn *turn, net_watch *w) {
  if (w->let_go)
    return;
  w->let_go = true;
  net_table_take(&w->c->watches, key_of(w->target));
  if (w->watching)
    (void)vat_demonitor(turn, w->monitor);
  w->watching = false;
}

/* The ended vat's own reason: a monitor made after it ended reports
 * noproc, but the reason is known and tells the peer more. */
static vat_value end_reason(vat_ref *who, vat_value reason) {
  if (vat_is_atom(reason, vat_atom_noproc())) {
    vat_value known = vat_ref_exit_reason(who);
    if (!vat_is_null(known))
      return known;
  }
  return reason;
}

static void watch_down(vat_turn *turn, void *state, uint64_t monitor,
                       vat_ref *who, vat_value reason) {
  (void)monitor;
  net_watch *w = state;
  w->watching = false;
  let_go(turn, w);
  reason = end_reason(who, reason);
  while (w->waiting != NULL) {
    net_answer *a = w->waiting;
    w->waiting = a->watch_next;
    a->watch = NULL;
    a->watch_prev = a->watch_next = NULL;
    net_answer_target_ended(turn, a, reason);
  }
  net_take_waiting_frames(turn, w->c);
}

static void watch_start(vat_turn *turn, void *state, void *arg) {
  (void)arg;
  net_watch *w = state;
  if (!w->let_go)
    w->watching =
        vat_monitor(turn, w->target, watch_down, &w->monitor) == VAT_OK;
}

static const vat_entity_def watch_def = {.state_size = sizeof(net_watch)};

net_watch *net_watch_of(vat_turn *turn, net_conn *c, vat_ref *target) {
  net_watch *w = net_table_get(&c->watches, key_of(target));
  if (w != NULL || vat_ref_same_vat(target, c->self))
    return w;
  vat_ref *ref;
  if (vat_entity_new(turn, &watch_def, &ref, (void **)&w) != VAT_OK)
    return NULL;
  w->c = c;
  w->target = target;
  if (!net_table_put(&c->watches, key_of(target), w) ||
      vat_send(turn, ref, watch_start, NULL) != VAT_OK) {
    net_table_take(&c->watches, key_of(target));
    return NULL;
  }
  return w;
}

void net_watch_add(net_watch *w, net_answer *a) {
  a->watch = w;
  a->watch_prev = NULL;
  a->watch_next = w->waiting;
  if (w->waiting != NULL)
    w->waiting->watch_prev = a;
  w->waiting = a;
}

/* The peer may call it again: it is the bootstrap, or exported. */
static bool callable(const net_watch *w) {
  net_conn *c = w->c;
  return w->target == c->bootstrap ||
         net_table_get(&c->export_ids, key_of(w->target)) != NULL;
}

void net_watch_remove(vat_turn *turn, net_watch *w, net_answer *a) {
  if (a->watch_prev != NULL)
    a->watch_prev->watch_next = a->watch_next;
  else
    w->waiting = a->watch_next;
  if (a->watch_next != NULL)
    a->watch_next->watch_prev = a->watch_prev;
  a->watch = NULL;
  a->watch_prev = a->watch_next = NULL;
  if (w->waiting == NULL && !callable(w))
    let_go(turn, w);
}

void net_watch_drop(vat_turn *turn, net_conn *c, vat_ref *ref) {
  net_watch *w = net_table_get(&c->watches, key_of(ref));
  if (w != NULL && w->waiting == NULL && !callable(w))
    let_go(turn, w);
}

size_t net_watches_held(const net_conn *c) {
  return c->watches.len;
}
