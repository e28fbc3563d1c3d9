/* The turn loop: a vat takes messages from its mailbox and runs each as one
 * turn. A turn's effects are buffered in the vat_turn and take place only
 * when it commits; a failed turn is converted into the vat's death here and
 * nowhere else.
 */
#include <assert.h>

#include "core/deliver.h"
#include "core/overload.h"
#include "core/reasons.h"
#include "core/trace.h"
#include "core/turn.h"
#include "core/worker.h"
#include "sched/sched.h"
#include "util/cpu.h"
#include "util/gc.h"
#include "util/testpoint.h"

void vat__turn_defer(vat_turn *t, vat__effect *e) {
  assert(!t->committing);
  /* commit_in_order cuts the sends here: no run may span the cut, so the
   * open run ends and none may start from the last send (core/send.c). */
  t->worker->run_header = NULL;
  t->worker->run_cut = t->out_tail;
  e->next = NULL;
  e->after = t->out_tail; /* its place among the sends: see commit() */
  if (t->effects_tail)
    t->effects_tail->next = e;
  else
    t->effects_head = e;
  t->effects_tail = e;
}

/* Pushes the run that starts at `first` whole, behind the header the
 * turn's sends built (core/send.c), and returns the send after it. Counts
 * the run toward the batch's burst. Out of line, and reached only by a
 * turn that sent a second message to one vat: a turn that sends one (most
 * do) pays nothing for the burst bound (inlined, the count cost a ring 3%
 * more instructions, in registers spilled). */
static __attribute__((noinline)) vat__msg *
deliver_run(vat_turn *t, vat__msg *header, vat__msg *first) {
  vat__worker *w = t->worker;
  if (w->run_header == header) /* pushed: no send may extend it now */
    w->run_header = NULL;
  first->aux.run_header = NULL;
  vat__msg *last = vat__mailbox_run_last(header);
  size_t n = vat__mailbox_run_len(header);
  vat__msg *next = atomic_load_explicit(&last->next, memory_order_relaxed);
  atomic_store_explicit(&last->next, NULL, memory_order_relaxed);
  if ((w->burst += n - 1) >= VAT_SEND_BURST) {
    w->burst = 0;
    vat__overload_yield(t->vat);
  }
  vat__deliver(w, header, first, last);
  return next;
}

/* Delivers the chain of buffered sends from `m` on; `took` says whether
 * this vat's mailbox was taken since anything else could push to it, and
 * is returned updated. The common turn's whole commit: keep it lean. */
static inline bool deliver_chain(vat_turn *t, vat__msg *m, bool took) {
  vat__worker *w = t->worker;
  while (m != NULL) {
    vat__vat *to = m->target->vat;
    vat__msg *next = atomic_load_explicit(&m->next, memory_order_relaxed);
    if (to == t->vat) { /* never in a run (core/send.c) */
      if (!took) /* others' messages that came first go first */
        vat__mailbox_take_new(&to->mailbox, &w->pool);
      took = true;
      vat__mailbox_append_local(&to->mailbox, m);
      m = next;
      continue;
    }
    /* The first send of a run of two or more points at its header. */
    vat__msg *header = m->aux.run_header;
    if (header != NULL) {
      m = deliver_run(t, header, m);
      continue;
    }
    atomic_store_explicit(&m->next, NULL, memory_order_relaxed);
    vat__deliver(w, NULL, m, m);
    m = next;
  }
  return took;
}

/* A turn with effects: each takes place where it was deferred among the
 * sends, and what it sends goes out right after it. Out of line: most
 * turns have none. */
static __attribute__((noinline)) void commit_in_order(vat_turn *t) {
  bool took = false;
  vat__msg *pending = t->out_head, *delivered_to = NULL;
  t->out_head = t->out_tail = NULL; /* from here on: the effects' sends */
  t->committing = true;
  for (vat__effect *e = t->effects_head; e != NULL; e = e->next) {
    /* Marks only move forward; two effects with no send between share
     * one. Once delivered, a mark is only compared, never read. */
    vat__msg *mark = e->after;
    if (mark != NULL && mark != delivered_to) {
      vat__msg *rest = atomic_load_explicit(&mark->next, memory_order_relaxed);
      atomic_store_explicit(&mark->next, NULL, memory_order_relaxed);
      took = deliver_chain(t, pending, took);
      pending = rest;
      delivered_to = mark;
    }
    e->commit(t, e);
    took = false; /* it may have pushed to this vat's own mailbox */
    vat__msg *own = t->out_head;
    t->out_head = t->out_tail = NULL;
    if (t->worker->trace != NULL && own != NULL)
      vat__trace_sends(t->worker->trace, own);
    took = deliver_chain(t, own, took);
  }
  t->committing = false;
  deliver_chain(t, pending, took);
}

static void commit(vat_turn *t) {
  /* The spawned vats' links become the scheduler's once they get mail;
   * none can get any before this. */
  for (vat__vat *v = t->spawned, *next; v != NULL; v = next) {
    next = v->link;
    v->link = NULL;
  }
  if (t->effects_head == NULL)
    deliver_chain(t, t->out_head, false); /* most turns: sends only */
  else
    commit_in_order(t);
  /* One wake-up for the vats the sends displaced (sched/place.c). */
  if (t->worker->run.wake_owed)
    vat__pay_wake(&t->worker->run);
  if (t->stop) {
    /* Stop callbacks run outside any turn (vat/core.h). */
    vat__current_turn = NULL;
    vat__terminate(t->worker, t->vat, t->reason, t->msg);
  }
}

static void discard(vat_turn *t) {
  vat__worker *w = t->worker;
  w->run_header = NULL; /* its run is freed below */
  for (vat__msg *m = t->out_head, *next; m != NULL; m = next) {
    next = atomic_load_explicit(&m->next, memory_order_relaxed);
    if (m->aux.run_header != NULL) /* core/send.c */
      vat__msg_free(&w->pool, m->aux.run_header);
    vat__msg_free(&w->pool, m);
  }
  /* Stop callbacks run outside any turn (vat/core.h). */
  vat__current_turn = NULL;
  for (vat__vat *v = t->spawned, *next; v != NULL; v = next) {
    next = v->link;
    v->link = NULL;
    vat__terminate(w, v, t->reason, NULL); /* never ran: not reported */
  }
  vat__terminate(w, t->vat, t->reason, t->msg);
}

/* One turn. Always inline: its one call on the hot path is in the turn
 * loop, and the rare paths call run_turn_cold. `traced` is a constant
 * where it is inlined: the untraced copy has no trace of tracing in it. */
static inline __attribute__((always_inline)) void
run_turn(vat__worker *w, vat__vat *v, vat__msg *m, const bool traced) {
  vat_turn t = {.worker = w, .vat = v, .self = m->target, .msg = m};
  if (traced)
    vat__trace_turn(w->trace, v, m);
  vat__current_turn = &t;
  m->fn(&t, vat__state(m->target), m->arg);
  vat__count(&w->delivered, 1);
  /* Relaxed store: a plain increment, readable by a snapshot. */
  __atomic_store_n(&v->turns, v->turns + 1, __ATOMIC_RELAXED);
  /* Still the current turn while it commits: deferred effects send through
   * it. Ending the vat, if it ends, comes after. */
  if (t.failed) {
    discard(&t);
  } else if (t.out_head || t.effects_head || t.spawned || t.stop) {
    if (traced && t.out_head) /* flow ids before the first goes out */
      vat__trace_sends(w->trace, t.out_head);
    commit(&t); /* most turns of a receiving vat send nothing */
  }
  vat__current_turn = NULL;
  if (traced)
    vat__trace_turn_end(w->trace);
#if VAT_HOSTILE
  GC_gcollect();
#endif
}

static __attribute__((noinline, cold)) void
run_turn_cold(vat__worker *w, vat__vat *v, vat__msg *m) {
  if (w->trace != NULL)
    run_turn(w, v, m, true);
  else
    run_turn(w, v, m, false);
}

static const vat__signal_class *class_of(const vat__msg *m) {
  return m->fn == vat__dispatch_signal ? ((const vat__signal *)m->arg)->cls
                                       : NULL;
}

static bool overtakes_now(const vat__msg *m, void *v) {
  const vat__signal_class *cls = class_of(m);
  return cls != NULL && cls->overtakes != NULL && cls->overtakes(v, m);
}

static bool is_control(const vat__msg *m, void *ctx) {
  (void)ctx;
  const vat__signal_class *cls = class_of(m);
  return cls != NULL && cls->control;
}

static bool is_this(const vat__msg *m, void *ctx) {
  return m == ctx;
}

/* Runs the messages of the chain `m`, unless the vat ends first (then the
 * rest are dead letters). */
static void run_chain(vat__worker *w, vat__vat *v, vat__msg *m) {
  while (m != NULL) {
    vat__msg *next = atomic_load_explicit(&m->next, memory_order_relaxed);
    if (vat__is_dead(v))
      vat__dead_letter(w, m);
    else
      run_turn_cold(w, v, m);
    vat__mailbox_done(&v->mailbox, &w->pool, m);
    m = next;
  }
}

/* A signal that would end the vat runs now, ahead of the messages queued
 * before it, after the control signals queued before it (deliver.h); what
 * the vat leaves queued then becomes dead letters. Out of line: the flag is
 * rarely set. */
static __attribute__((noinline, cold)) void run_overtaking(vat__worker *w,
                                                           vat__vat *v) {
  /* Acquire pairs with vat__alert's release: the search finds the push. */
  uint8_t was = atomic_fetch_and_explicit(&v->flags, (uint8_t)~VAT__ALERTED,
                                          memory_order_acquire);
  if (was & VAT__DEAD)
    return;
  vat__mailbox *mb = &v->mailbox;
  bool complete;
  vat__msg *fatal =
      vat__mailbox_find(mb, &w->pool, overtakes_now, v, &complete);
  if (fatal == NULL) {
    if (!complete) /* a push not finished yet may hide the signal */
      vat__alert(v);
    return;
  }
  run_chain(w, v, vat__mailbox_extract(mb, is_control, NULL, fatal));
  /* An unlink among them may have taken the exit's link away. */
  if (!vat__is_dead(v) && overtakes_now(fatal, v))
    run_chain(w, v, vat__mailbox_extract(mb, is_this, fatal, NULL));
}

/* The turn loop's rare case: `m`, just popped, goes to a vat that has
 * ended or was alerted. Returns whether `m` was dealt with; if not, it is
 * back in the queue. */
static __attribute__((noinline, cold)) bool
run_flagged(vat__worker *w, vat__vat *v, vat__msg *m, uint8_t flags) {
  if (flags & VAT__DEAD) {
    vat__dead_letter(w, m);
    return true;
  }
  /* The oldest message may be the exit itself (a chain of links, mostly):
   * it runs in its place, overtaking nothing, and no search is needed
   * unless the vat outlives it (then the flag, still set, asks again). */
  const vat__signal_class *cls = class_of(m);
  if (cls != NULL && cls->overtakes != NULL) {
    run_turn_cold(w, v, m);
    return true;
  }
  vat__mailbox_unpop(&v->mailbox, m); /* it may be what the search is after */
  run_overtaking(w, v);
  return false;
}

/* vat__mailbox_try_idle for the turn loop: a vat that was behind or
 * overloaded, or is counted, settles that first (core/overload.h), while it
 * is still this worker's. Out of line, as try_idle is, and shaped like it (the mailbox
 * is the vat's first member), so that the common case is a test and a
 * jump: a test in the loop itself cost ping-pong 4% of its instructions,
 * in spilled registers. */
_Static_assert(offsetof(vat__vat, mailbox) == 0,
               "a vat starts with its mailbox");
static __attribute__((noinline)) bool try_idle(vat__vat *v, vat__msgpool *p) {
  /* Relaxed: bits this worker alone sets and clears, while it runs v. */
  if (__builtin_expect(atomic_load_explicit(&v->flags, memory_order_relaxed) &
                           (VAT__BEHIND | VAT__OVERLOADED | VAT__YIELD |
                            VAT__COUNTED),
                       0))
    return vat__overload_idle(vat__current_worker, v, p);
  return vat__mailbox_try_idle(&v->mailbox, p);
}

/* The end of a batch that did not go idle: out of budget, stopped after a
 * burst or to be muted, or waiting for a producer mid-push. Out of line:
 * once per batch, and the loop stays small. */
static __attribute__((noinline)) bool batch_end(vat__worker *w, vat__vat *v) {
  vat__mailbox *mb = &v->mailbox;
  if (!vat__mailbox_has_work(mb) && try_idle(v, &w->pool))
    return false; /* v may run elsewhere now: not touched again */
  return vat__overload_batch_end(w, v);
}

/* A sender flagged an urgent message: clear the flag, then move the
 * urgent messages queued (wherever a take put them) to the front. The
 * acquire pairs with vat__flag_urgent's release: the push is seen. It
 * walks the queue once per flagging, not per message; muting keeps the
 * queue short. */
static __attribute__((noinline, cold)) void hoist_urgent(vat__worker *w,
                                                         vat__vat *v) {
  atomic_fetch_and_explicit(&v->flags, (uint8_t)~VAT__URGENT,
                            memory_order_acquire);
  vat__mailbox_hoist_urgent(&v->mailbox, &w->pool);
  vat__overload_recount(v); /* the order changed under the count's cursor */
}

/* Up to `budget` turns of `v`; see vat__run_batch. The overload count
 * (core/overload.h) costs the loop nothing per message: the batch's end
 * learns how many turns ran from the vat's turn counter, and a vat to be
 * muted is told by the flag the loop tests anyway. */
static inline __attribute__((always_inline)) bool
run_batch(vat__worker *w, vat__vat *v, unsigned budget, const bool traced) {
  vat__mailbox *mb = &v->mailbox;
  while (budget > 0) {
    vat__msg *m = vat__mailbox_pop(mb, &w->pool);
    if (m == NULL) {
      if (try_idle(v, &w->pool))
        return false;
      /* A push raced with us: take it. Still nothing means its producer
       * is mid-push; run again later rather than wait for it. */
      if ((m = vat__mailbox_pop(mb, &w->pool)) == NULL)
        return batch_end(w, v);
    }
    /* One test on the common path: alive, nothing overtakes, not muted. */
    uint8_t flags = atomic_load_explicit(&v->flags, memory_order_acquire);
    if (__builtin_expect((flags & VAT__ATTENTION) == 0, 1)) {
      run_turn(w, v, m, traced);
    } else if ((flags & (VAT__DEAD | VAT__ALERTED)) == 0) {
      vat__mailbox_unpop(mb, m);
      if (!(flags & VAT__URGENT))
        return batch_end(w, v); /* MUTING or YIELD: the batch stops here */
      hoist_urgent(w, v);
      continue; /* the flag is clear: this happens once per flagging */
    } else {
      vat__overload_recount(v); /* messages move other than by pops */
      if (!run_flagged(w, v, m, flags)) {
        budget--; /* bounds the searches while a producer is mid-push */
        continue;
      }
    }
    vat__mailbox_done(mb, &w->pool, m);
    budget--;
  }
  return batch_end(w, v);
}

/* A traced system's batches: the same loop, each turn timed and recorded.
 * Out of line and not hot: a system that does not trace never calls it. */
static __attribute__((noinline)) bool
run_batch_traced(vat__worker *w, vat__vat *v, unsigned budget) {
  return run_batch(w, v, budget, true);
}

VAT__HOT bool vat__run_batch(vat__worker *w, vat__vat *v, unsigned budget) {
  w->burst = 0;
  /* The one test tracing costs the turn loop: per batch, not per turn. */
  if (__builtin_expect(w->trace != NULL, 0))
    return run_batch_traced(w, v, budget);
  return run_batch(w, v, budget, false);
}

/* --- The turn's public API ---------------------------------------------- */

VAT__HOT vat_ref *vat_self(vat_turn *turn) {
  return turn != NULL && turn == vat__current_turn ? turn->self : NULL;
}

vat_system *vat_turn_system(vat_turn *turn) {
  return turn != NULL && turn == vat__current_turn ? turn->vat->sys : NULL;
}

int vat_stop(vat_turn *turn) {
  return vat_stop_with(turn, vat_atom_value(vat__reason.normal));
}

int vat_stop_with(vat_turn *turn, vat_value reason) {
  int rc = vat__check_turn(turn);
  if (rc != VAT_OK)
    return rc;
  if (vat_is_null(reason))
    return VAT_EINVAL;
  turn->stop = true;
  turn->reason = reason; /* the last call names it */
  return VAT_OK;
}

int vat_fail(vat_turn *turn, vat_value reason) {
  int rc = vat__check_turn(turn);
  if (rc != VAT_OK)
    return rc;
  if (vat_is_null(reason))
    return VAT_EINVAL;
  turn->failed = true;
  turn->reason = reason;
  return VAT_OK;
}
