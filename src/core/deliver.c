/* Delivery: every message reaches its mailbox through this file.
 *
 * The contract, stated once: a message accepted for delivery (buffered by
 * a turn that commits, or sent by a host thread while the system runs) is
 * either run as a turn of its target, or dropped — counted as a dead
 * letter (the target had ended), or counted at shutdown (its system
 * stopped with it queued) — exactly once. A signal's drop runs in place of
 * its deliver, so whoever waits on it (a promise, a link) is answered.
 *
 * The shutdown admission gate: a sender from outside a system's workers (a
 * host thread, the timer thread, another system) is counted in
 * `host_inflight` from before its look at the system's state until its
 * push is done. Shutdown flips the state first and then waits for that
 * count to reach zero, so either the sender saw the new state (and drops,
 * or is refused), or shutdown sees the push before it counts what is left.
 */
#include "core/deliver.h"

#include "core/overload.h"
#include "core/system.h"
#include "core/trace.h"
#include "core/worker.h"
#include "sched/sched.h"
#include "util/cpu.h"
#include "util/testpoint.h"

void vat__dispatch_dynamic(vat_turn *turn, void *state, void *arg) {
  vat_ref *self = turn->self;
  if (self->receive == NULL) {
    vat__dead_letter(turn->worker, turn->msg);
    return;
  }
  self->receive(turn, state, (const vat_atom *)arg, turn->msg->value);
}

void vat__dispatch_signal(vat_turn *turn, void *state, void *arg) {
  vat__signal *sig = arg;
  sig->cls->deliver(turn, state, sig);
}

void vat__run_urgent(vat_turn *turn, void *state, void *arg) {
  vat__msg_fn(turn->msg)(turn, state, arg);
}

void vat__signal_drop_nothing(vat__worker *w, vat_ref *target,
                              vat__signal *sig) {
  (void)w;
  (void)target;
  (void)sig;
}

/* --- Dropping ------------------------------------------------------------ */

static const vat_atom *selector_of(const vat__msg *m) {
  return vat__msg_fn(m) == vat__dispatch_dynamic ? (const vat_atom *)m->arg
                                                 : NULL;
}

static void call_hook(vat_system *sys, vat__msg *m) {
  if (sys->cfg.on_dead_letter)
    sys->cfg.on_dead_letter(sys->cfg.dead_letter_ctx, m->target,
                            selector_of(m));
}

/* Counts on the target's system: a worker's own counter when the worker
 * belongs to it, the shared one otherwise. A signal (a request, an exit,
 * a link's bookkeeping) counts as the message it is: it would have been
 * counted as a turn had it run, so a drop uncounted breaks the sum
 * vat/core.h promises. Its drop runs, and answers whoever waits. */
void vat__dead_letter(vat__worker *w, vat__msg *m) {
  if (w != NULL && w->trace != NULL && m->flow != 0)
    vat__trace_drop(w->trace, m);
  vat_system *sys = m->target->vat->sys;
  if (w != NULL && w->sys == sys)
    vat__count(&w->dead_letters, 1);
  else
    atomic_fetch_add_explicit(&sys->ext_dead_letters, 1, memory_order_relaxed);
  if (m->fn == vat__dispatch_signal) {
    vat__signal *sig = m->arg;
    sig->cls->drop(w, m->target, sig);
  }
  call_hook(sys, m);
}

void vat__drop_at_shutdown(vat__msg *m) {
  if (m->fn == vat__dispatch_signal) {
    vat__signal *sig = m->arg;
    sig->cls->drop(NULL, m->target, sig);
  }
}

static void drop_chain(vat__worker *w, vat__msg *m, vat__msg *last) {
  for (;;) {
    vat__msg *next = atomic_load_explicit(&m->next, memory_order_relaxed);
    vat__dead_letter(w, m);
    if (w)
      vat__msg_free(&w->pool, m);
    if (m == last)
      return;
    m = next;
  }
}

/* --- Delivering ---------------------------------------------------------- */

/* A sender that does not trace leaves whatever flow id its recycled nodes
 * held (core/message.h): a traced receiver must not read one. */
static void clear_flows(vat__msg *m, vat__msg *last) {
  for (;; m = atomic_load_explicit(&m->next, memory_order_relaxed)) {
    vat__msg_set_flow(m, 0);
    if (m == last)
      return;
  }
}

static size_t chain_len(const vat__msg *m, const vat__msg *last) {
  size_t n = 1;
  for (; m != last; m = atomic_load_explicit(&m->next, memory_order_relaxed))
    n++;
  return n;
}

/* Delivery into a system from outside its workers: a host thread (w NULL)
 * or a turn of another system, through the admission gate (see the top).
 * A host send is refused once the system closes; a committed message from
 * another system is still delivered until the workers stop. */
static int deliver_external(vat__worker *w, vat__msg *first, vat__msg *last) {
  vat__vat *to = first->target->vat;
  vat_system *sys = to->sys;
  if (sys->trace_events != 0 && (w == NULL || w->trace == NULL))
    clear_flows(first, last);
  /* seq_cst: shutdown reads host_inflight after it sets CLOSING; either it
   * sees us in flight, or we see CLOSING below. */
  atomic_fetch_add_explicit(&sys->sched.host_inflight, 1, memory_order_seq_cst);
  int rc = VAT_OK;
  int state = vat__system_state(sys);
  VAT__TEST_POINT("send.external.after_state_check");
  uint8_t flags = atomic_load_explicit(&to->flags, memory_order_acquire);
  if (w == NULL && state != VAT__RUNNING)
    rc = VAT_ECLOSED;
  else if (state >= VAT__STOPPED || (flags & VAT__DEAD))
    drop_chain(w, first, last);
  else if ((flags & VAT__OVERLOADED) &&
           (first = vat__overload_on_send(w, to, first, &last)) == NULL)
    ; /* all dropped (VAT_OVERLOAD_DROP) */
  else {
    size_t n = (flags & VAT__COUNTED) ? chain_len(first, last) : 0;
    bool ordinary = first->fn != vat__run_urgent; /* before it may run */
    if (vat__mailbox_push_chain(&to->mailbox, first, last))
      vat__schedule_external(&sys->sched, &to->task);
    if (n != 0)
      vat__overload_count(w, to, n, ordinary);
  }
  /* Shutdown waits for the last one out, both while closing (quiescence)
   * and once stopped (before it counts what was left queued). */
  if (atomic_fetch_sub_explicit(&sys->sched.host_inflight, 1,
                                memory_order_seq_cst) == 1 &&
      vat__system_state(sys) != VAT__RUNNING)
    vat__notify_quiet(&sys->sched);
  return rc;
}

int vat__deliver_from_host(vat__msg *m) {
  atomic_store_explicit(&m->next, NULL, memory_order_relaxed);
  return deliver_external(NULL, m, m);
}

/* vat__deliver's rare cases: a vat of another system, or one that ended,
 * is overloaded or is counted (core/overload.h), or a simulated world that
 * watches its deliveries (core/system.h). A counted vat's run goes in
 * whole, behind its header; otherwise a header not pushed is recycled:
 * what is left after the overload's policy goes in as a plain chain. Out
 * of line, so that the common path saves no registers for them. */
static __attribute__((noinline, cold)) void
deliver_rare(vat__worker *w, vat__msg *header, vat__msg *first, vat__msg *last,
             vat__vat *to, uint8_t flags) {
  vat_system *sys = w->sys;
  if (w->deliver_direct == NULL && sys->det_hold != NULL) {
    if (sys->det_hold(sys->det_hold_ctx, w, header, first, last))
      return;
    /* It may have delivered to `to` what it held before. */
    flags = atomic_load_explicit(&to->flags, memory_order_acquire);
    if (to->sys == sys &&
        !(flags & (VAT__DEAD | VAT__OVERLOADED | VAT__COUNTED))) {
      if (header ? vat__mailbox_push_header(&to->mailbox, header)
                 : vat__mailbox_push_chain(&to->mailbox, first, last))
        vat__schedule(&w->run, &to->task);
      return;
    }
  }
  bool ordinary = first->fn != vat__run_urgent; /* before it may run */
  if (to->sys == w->sys && !(flags & (VAT__DEAD | VAT__OVERLOADED))) {
    size_t n = header ? vat__mailbox_run_len(header) : chain_len(first, last);
    if (header ? vat__mailbox_push_header(&to->mailbox, header)
               : vat__mailbox_push_chain(&to->mailbox, first, last))
      vat__schedule(&w->run, &to->task);
    vat__overload_count(w, to, n, ordinary);
    return;
  }
  if (header != NULL)
    vat__msg_free(&w->pool, header);
  if (to->sys != w->sys)
    deliver_external(w, first, last);
  else if (flags & VAT__DEAD)
    drop_chain(w, first, last);
  else if ((first = vat__overload_on_send(w, to, first, &last)) != NULL) {
    size_t n = chain_len(first, last);
    if (vat__mailbox_push_chain(&to->mailbox, first, last))
      vat__schedule(&w->run, &to->task);
    if (flags & VAT__COUNTED)
      vat__overload_count(w, to, n, ordinary);
  }
}

VAT__HOT void vat__deliver(vat__worker *w, vat__msg *header, vat__msg *first,
                           vat__msg *last) {
  vat__vat *to = first->target->vat;
  /* One load, one test for the rare cases. The dead check is a shortcut:
   * a vat that dies after it still drops the message, when its turn loop
   * drains the mailbox. The overload check reads the flag as the target
   * last measured it (core/overload.h): a hint, as the policy allows. */
  uint8_t flags = atomic_load_explicit(&to->flags, memory_order_acquire);
  if (__builtin_expect(
          to->sys != w->deliver_direct ||
              (flags & (VAT__DEAD | VAT__OVERLOADED | VAT__COUNTED)),
          0)) {
    deliver_rare(w, header, first, last, to, flags);
    return;
  }
  bool was_idle = header != NULL
                      ? vat__mailbox_push_header(&to->mailbox, header)
                      : vat__mailbox_push_chain(&to->mailbox, first, last);
  if (was_idle)
    vat__schedule(&w->run, &to->task);
}

/* Empties a vat's mailbox after the workers stopped; returns how many
 * messages it held. Signals get their drop, so no promise waits for ever.
 * The vats muted on it (core/overload.h) are in no queue: counted with it. */
static uint64_t drop_queued(vat__vat *v) {
  uint64_t n = 0;
  for (vat__msg *m; (m = vat__mailbox_pop_stopped(&v->mailbox)) != NULL; n++)
    vat__drop_at_shutdown(m);
  for (vat__vat *muted = vat__overload_take_muted(v), *next; muted != NULL;
       muted = next) {
    next = muted->link;
    muted->link = NULL;
    n += drop_queued(muted); /* a muted vat mutes nobody: one level */
  }
  return n;
}

uint64_t vat__drop_stranded(vat_system *sys) {
  uint64_t n = 0;
  for (vat__task *t; (t = vat__sched_take_stranded(&sys->sched)) != NULL;)
    n += drop_queued(vat__vat_of(t));
  return n;
}

/* --- Now, from anywhere -------------------------------------------------- */

/* A node for `to`, from the calling worker's pool or, on a host thread,
 * from the collector; the caller fills in what it runs. */
static vat__msg *new_node(vat__worker *w, vat_ref *to, void *arg,
                          vat_value value) {
  vat__msg *m = w ? vat__msg_alloc(&w->pool) : vat__msg_alloc_unpooled();
  m->target = to;
  m->arg = arg;
  m->value = value;
  atomic_store_explicit(&m->next, NULL, memory_order_relaxed);
  return m;
}

static void send_node(vat__worker *w, vat__msg *m) {
  if (w != NULL && w->trace != NULL)
    vat__trace_send_now(w->trace, m);
  if (w != NULL) {
    vat__deliver(w, NULL, m, m);
    /* Sent now, from a hook or a signal, maybe outside any turn: no
     * commit follows to pay the wake-up the push may owe. */
    if (w->run.wake_owed)
      vat__pay_wake(&w->run);
  } else if (deliver_external(NULL, m, m) == VAT_ECLOSED)
    vat__dead_letter(NULL, m);
}

static void deliver_node(vat_ref *to, vat_fn fn, void *arg, vat_value value,
                         void *aux) {
  vat__worker *w = vat__current_worker;
  vat__msg *m = new_node(w, to, arg, value);
  vat__msg_set_fn(m, fn);
  m->aux.signal_data = aux;
  send_node(w, m);
}

/* The unpark goes through the admission gate (see the top) when the
 * caller is not one of v's system's workers: a vat taken off a muted
 * list once its system stopped would be in no list shutdown counts. A
 * worker of the system runs before the workers stop. */
void vat__alert(vat__vat *v) {
  /* Release: the loop's acquire exchange then sees the push. */
  atomic_fetch_or_explicit(&v->flags, VAT__ALERTED, memory_order_release);
  vat_system *sys = v->sys;
  vat__worker *w = vat__current_worker;
  bool outside = w == NULL || w->sys != sys;
  if (outside)
    atomic_fetch_add_explicit(&sys->sched.host_inflight, 1,
                              memory_order_seq_cst);
  if (vat__system_state(sys) < VAT__STOPPED && vat__overload_unpark(v))
    vat__schedule_external(&sys->sched, &v->task);
  if (outside &&
      atomic_fetch_sub_explicit(&sys->sched.host_inflight, 1,
                                memory_order_seq_cst) == 1 &&
      vat__system_state(sys) != VAT__RUNNING)
    vat__notify_quiet(&sys->sched);
}

void vat__flag_urgent(vat__vat *v) {
  /* Release: the turn loop's acquire load of the flags then finds the
   * push, wherever the message is now (stack or private list). */
  atomic_fetch_or_explicit(&v->flags, VAT__URGENT, memory_order_release);
}

void vat__deliver_now_urgent(vat_ref *to, vat_fn fn, void *arg,
                             vat_value value) {
  vat__worker *w = vat__current_worker;
  vat__msg *m = new_node(w, to, arg, value);
  vat__msg_set_urgent(m, fn);
  send_node(w, m);
  vat__flag_urgent(to->vat);
}

void vat__deliver_now_msg(vat_ref *to, vat_fn fn, void *arg, vat_value value) {
  deliver_node(to, fn, arg, value, NULL);
}

void vat__deliver_now_signal(vat_ref *to, vat__signal *sig) {
  deliver_node(to, vat__dispatch_signal, sig, vat_null(), NULL);
}

void vat__deliver_now_inline(vat_ref *to, const vat__signal *sig,
                             vat_value value, void *aux) {
  deliver_node(to, vat__dispatch_signal, (void *)sig, value, aux);
}
