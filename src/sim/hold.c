/* Delay faults: held messages (hold.h).
 *
 * The runtime promises that what one vat (or host thread) sends another
 * arrives in the order it was committed, signals with the messages; it
 * promises nothing between different senders. A delay fault takes what
 * one turn sends to other vats off the way for some steps, so messages
 * other senders commit meanwhile arrive first. To keep the promises:
 *  - only a turn's own plain and dynamic messages are held, from a turn
 *    that commits no effects; never signals (requests among them) nor
 *    urgent messages;
 *  - what a sender later sends the same vat comes after what is held
 *    from it for that vat: such a message, not held, first releases them,
 *    and what a later delay fault holds is released no earlier than what
 *    is held before it;
 *  - anything else that reaches a vat (a signal, an urgent message, a
 *    message an effect delivers, anything sent outside a turn: a vat's
 *    exit signals and down notifications as it ends, a timer, a promise's
 *    timeout) may be on behalf of any sender (a down for a vat that ended
 *    before it was watched is sent in the watcher's turn; a promise
 *    forwards what others sent it): it first releases everything held
 *    for its receiver.
 * A held message is in flight: delivered (or dropped at a dead vat) when
 * released, in the order held, through vat__deliver as its commit would
 * have. Nothing stays held past the world's end, nor while the world
 * would otherwise go quiet (harness.c).
 */
#include "sim/hold.h"

#include "core/deliver.h"
#include "core/message.h"
#include "core/system.h"
#include "core/thread.h"
#include "core/turn.h"
#include "core/worker.h"
#include "sched/sched.h"
#include "util/gc.h"

typedef struct vat__sim_held {
  struct vat__sim_held *next;
  vat__vat *from, *to;
  vat__msg *header, *first, *last; /* as vat__deliver takes them */
  uint64_t until;                  /* released once steps reach it */
} held;

/* A plain or dynamic message: not a signal, not urgent. */
static bool plain(vat__msg *first, vat__msg *last) {
  for (vat__msg *m = first;;
       m = atomic_load_explicit(&m->next, memory_order_relaxed)) {
    if (m->fn == vat__dispatch_signal || m->fn == vat__run_urgent)
      return false;
    if (m == last)
      return true;
  }
}

/* Releases what is held for `to` from `from` (NULL: from anyone), or,
 * with `to` NULL, what is due (everything, with `all`): taken off the list
 * first, then delivered in the order held. A delivery may deliver more on
 * its way (a message dropped at a dead vat breaks a promise, which
 * notifies its observers): those come through hold() again and may
 * release more, from a list that is whole. */
static void release(vat__sim_world *w, vat__worker *wk, vat__vat *from,
                    vat__vat *to, bool all) {
  held *go = NULL, **go_tail = &go, **at = &w->held;
  w->held_tail = NULL;
  while (*at != NULL) {
    held *h = *at;
    bool due = to != NULL ? h->to == to && (from == NULL || h->from == from)
                          : all || h->until <= w->steps;
    if (!due) {
      w->held_tail = h;
      at = &h->next;
      continue;
    }
    *at = h->next;
    h->next = NULL;
    *go_tail = h;
    go_tail = &h->next;
  }
  for (held *h = go; h != NULL; h = h->next) {
    w->passing = h->first; /* hold() lets it through as it is */
    vat__deliver(wk, h->header, h->first, h->last);
  }
  w->passing = NULL;
}

static bool hold(void *ctx, vat__worker *wk, vat__msg *header, vat__msg *first,
                 vat__msg *last) {
  vat__sim_world *w = ctx;
  if (first == w->passing)
    return false;
  vat__vat *to = first->target->vat;
  /* Whose message it is: the turn's own send, when the turn commits no
   * effects (an effect may deliver for someone else: a promise forwards
   * what others sent to it) and it is plain (a signal may come of a drop
   * and speak for the dead). Else anyone's. */
  vat_turn *turn = vat__current_turn;
  vat__vat *from =
      turn != NULL && turn->effects_head == NULL && plain(first, last)
          ? turn->vat
          : NULL;
  if (from == NULL || from != w->hold_from || w->hold_step != w->steps ||
      to == from || to->sys != wk->sys) {
    /* Not held: after what is held from its sender (anyone's: all). */
    if (w->held != NULL)
      release(w, wk, from, to, false);
    return false;
  }
  held *h = vat__gc_alloc(sizeof *h);
  *h = (held){.from = from,
              .to = to,
              .header = header,
              .first = first,
              .last = last,
              .until = w->steps + w->hold_steps};
  /* Never before what this sender held for this vat earlier. */
  for (held *e = w->held; e != NULL; e = e->next)
    if (e->from == from && e->to == to && e->until > h->until)
      h->until = e->until;
  if (w->held_tail != NULL)
    w->held_tail->next = h;
  else
    w->held = h;
  w->held_tail = h;
  return true;
}

void vat__sim_hold_watch(vat__sim_world *w) {
  vat_system *sys = w->sys;
  sys->det_hold = hold;
  sys->det_hold_ctx = w;
  sys->workers[0]->deliver_direct = NULL;
}

void vat__sim_hold_sends(vat__sim_world *w, vat__vat *v, uint64_t steps) {
  w->hold_from = v;
  w->hold_step = w->steps;
  w->hold_steps = steps;
}

bool vat__sim_holding(const vat__sim_world *w) {
  return w->held != NULL;
}

void vat__sim_hold_release(vat__sim_world *w, bool all) {
  if (w->held == NULL)
    return;
  /* Delivered as the world's worker would, as inside a run call. */
  vat__worker *wk = w->sys->workers[0];
  vat__worker *outer = vat__current_worker;
  vat__current_worker = wk;
  release(w, wk, NULL, NULL, all);
  if (wk->run.wake_owed)
    vat__pay_wake(&wk->run);
  vat__current_worker = outer;
}
