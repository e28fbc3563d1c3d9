/* Sending: buffering sends in a turn, sending from host threads, delivering
 * to mailboxes, and dropping messages to dead vats. */
#include "internal.h"
#include "testpoint.h"

static vat__msg *buffer(vat_turn *t, vat_ref *to, vat_fn fn, void *arg) {
  vat__msg *m = vat__msg_alloc(&t->worker->pool);
  m->target = to;
  m->fn = fn;
  m->arg = arg;
  if (t->out_tail)
    atomic_store_explicit(&t->out_tail->next, m, memory_order_relaxed);
  else
    t->out_head = m;
  t->out_tail = m;
  return m;
}

int vat_send(vat_turn *turn, vat_ref *to, vat_fn fn, void *arg) {
  int rc = vat__check_turn(turn);
  if (rc != VAT_OK)
    return rc;
  if (to == NULL || fn == NULL)
    return VAT_EINVAL;
  buffer(turn, to, fn, arg);
  return VAT_OK;
}

int vat_send_msg(vat_turn *turn, vat_ref *to, const vat_atom *selector,
                 vat_value value) {
  int rc = vat__check_turn(turn);
  if (rc != VAT_OK)
    return rc;
  if (to == NULL || selector == NULL)
    return VAT_EINVAL;
  buffer(turn, to, vat__dispatch_dynamic, (void *)selector)->value = value;
  return VAT_OK;
}

void vat__dispatch_dynamic(vat_turn *turn, void *state, void *arg) {
  vat_ref *self = turn->self;
  if (self->receive == NULL) {
    vat__dead_letter(turn->worker, turn->msg);
    return;
  }
  self->receive(turn, state, (const vat_atom *)arg, turn->msg->value);
}

static const vat_atom *selector_of(const vat__msg *m) {
  return m->fn == vat__dispatch_dynamic ? (const vat_atom *)m->arg : NULL;
}

static void call_hook(vat_system *sys, vat__msg *m) {
  if (sys->cfg.on_dead_letter)
    sys->cfg.on_dead_letter(sys->cfg.dead_letter_ctx, m->target,
                            selector_of(m));
}

static void signal_dispatch(vat_turn *turn, void *state, void *arg) {
  vat__signal *sig = arg;
  sig->cls->deliver(turn, state, sig);
}

int vat__send_signal(vat_turn *turn, vat_ref *to, vat__signal *sig) {
  int rc = vat__check_turn(turn);
  if (rc != VAT_OK)
    return rc;
  if (to == NULL || sig == NULL)
    return VAT_EINVAL;
  buffer(turn, to, signal_dispatch, sig);
  return VAT_OK;
}

/* Counts on the target's system: a worker's own counter when the worker
 * belongs to it, the shared one otherwise. Does not free the node. */
void vat__dead_letter(vat__worker *w, vat__msg *m) {
  if (m->fn == signal_dispatch) {
    vat__signal *sig = m->arg;
    sig->cls->drop(w, m->target, sig);
    return;
  }
  vat_system *sys = m->target->vat->sys;
  if (w != NULL && w->sys == sys)
    vat__count(&w->dead_letters, 1);
  else
    atomic_fetch_add_explicit(&sys->ext_dead_letters, 1, memory_order_relaxed);
  call_hook(sys, m);
}

void vat__drop_at_shutdown(vat__msg *m) {
  if (m->fn == signal_dispatch) {
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

/* Delivery into a system from outside its workers: a host thread (w NULL)
 * or a turn of another system. Counted in host_inflight so that shutdown
 * can neither declare the system quiescent nor count what was left queued
 * while a push is half done: a sender that saw the system running or
 * closing pushes, and shutdown waits for it; one that saw it stopped drops
 * the message itself. A host send is refused once the system closes; a
 * committed message from another system is still delivered until the
 * workers stop. */
static int deliver_external(vat__worker *w, vat__msg *first, vat__msg *last) {
  vat__vat *to = first->target->vat;
  vat_system *sys = to->sys;
  /* seq_cst: shutdown reads host_inflight after it sets CLOSING; either it
   * sees us in flight, or we see CLOSING below. */
  atomic_fetch_add_explicit(&sys->host_inflight, 1, memory_order_seq_cst);
  int rc = VAT_OK;
  int state = vat__system_state(sys);
  VAT__TEST_POINT("send.external.after_state_check");
  if (w == NULL && state != VAT__RUNNING)
    rc = VAT_ECLOSED;
  else if (state >= VAT__STOPPED || vat__is_dead(to))
    drop_chain(w, first, last);
  else if (vat__mailbox_push_chain(&to->mailbox, first, last))
    vat__schedule_external(sys, to);
  /* Shutdown waits for the last one out, both while closing (quiescence)
   * and once stopped (before it counts what was left queued). */
  if (atomic_fetch_sub_explicit(&sys->host_inflight, 1, memory_order_seq_cst) ==
          1 &&
      vat__system_state(sys) != VAT__RUNNING)
    vat__notify_quiet(sys);
  return rc;
}

void vat__deliver(vat__worker *w, vat__msg *first, vat__msg *last) {
  vat__vat *to = first->target->vat;
  if (to->sys != w->sys) {
    deliver_external(w, first, last);
    return;
  }
  /* The dead check is a shortcut: a vat that dies after it still drops the
   * message, when its turn loop drains the mailbox. */
  if (vat__is_dead(to)) {
    drop_chain(w, first, last);
    return;
  }
  if (vat__mailbox_push_chain(&to->mailbox, first, last))
    vat__schedule(w, to);
}

/* --- From host threads --------------------------------------------------- */

static int host_deliver(vat__msg *m) {
  atomic_store_explicit(&m->next, NULL, memory_order_relaxed);
  return deliver_external(NULL, m, m);
}

static int host_check(vat_ref *to) {
  int rc = vat__check_host();
  if (rc != VAT_OK)
    return rc;
  return to == NULL ? VAT_EINVAL : VAT_OK;
}

int vat_host_send(vat_ref *to, vat_fn fn, void *arg) {
  int rc = host_check(to);
  if (rc != VAT_OK)
    return rc;
  if (fn == NULL)
    return VAT_EINVAL;
  vat__msg *m = vat__msg_alloc_unpooled();
  m->target = to;
  m->fn = fn;
  m->arg = arg;
  return host_deliver(m);
}

int vat__host_send_signal(vat_ref *to, vat__signal *sig) {
  int rc = host_check(to);
  if (rc != VAT_OK)
    return rc;
  if (sig == NULL)
    return VAT_EINVAL;
  vat__msg *m = vat__msg_alloc_unpooled();
  m->target = to;
  m->fn = signal_dispatch;
  m->arg = sig;
  return host_deliver(m);
}

static void deliver_node(vat_ref *to, vat_fn fn, void *arg, vat_value value,
                         void *aux) {
  vat__worker *w = vat__current_worker;
  vat__msg *m = w ? vat__msg_alloc(&w->pool) : vat__msg_alloc_unpooled();
  m->target = to;
  m->fn = fn;
  m->arg = arg;
  m->value = value;
  m->aux = aux;
  atomic_store_explicit(&m->next, NULL, memory_order_relaxed);
  if (w != NULL)
    vat__deliver(w, m, m);
  else if (deliver_external(NULL, m, m) == VAT_ECLOSED)
    vat__dead_letter(NULL, m);
}

void vat__deliver_now(vat_ref *to, vat_fn fn, void *arg, vat_value value,
                      vat__signal *sig) {
  if (sig)
    deliver_node(to, signal_dispatch, sig, vat_null(), NULL);
  else
    deliver_node(to, fn, arg, value, NULL);
}

void vat__deliver_signal_inline(vat_ref *to, const vat__signal *sig,
                                vat_value value, void *aux) {
  deliver_node(to, signal_dispatch, (void *)sig, value, aux);
}

int vat_host_send_msg(vat_ref *to, const vat_atom *selector, vat_value value) {
  int rc = host_check(to);
  if (rc != VAT_OK)
    return rc;
  if (selector == NULL)
    return VAT_EINVAL;
  vat__msg *m = vat__msg_alloc_unpooled();
  m->target = to;
  m->fn = vat__dispatch_dynamic;
  m->arg = (void *)selector;
  m->value = value;
  return host_deliver(m);
}
