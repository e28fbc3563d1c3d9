/* Sending: a turn buffers its sends until it commits (turn.c delivers
 * them); a host thread's send is delivered at once (deliver.c). */
#include "core/deliver.h"
#include "core/system.h"
#include "core/worker.h"
#include "util/container.h"
#include "util/cpu.h"
#include "util/mem.h"

/* `m` is the turn's second send in a row to one vat (not its own): its
 * run gets a header, and its first message (the turn's last send so far)
 * points at it, where the commit looks (turn.c). Not after a deferred
 * effect: the commit cuts the sends there, and a run must not span a cut.
 * Out of line: a turn that sends one message to each vat never comes
 * here. */
static __attribute__((noinline)) void start_run(vat_turn *t, vat__msg *m) {
  vat__worker *w = t->worker;
  vat__msg *first = t->out_tail;
  if (first == w->run_cut)
    return;
  vat__msg *header = vat__msg_alloc(&w->pool);
  vat__mailbox_run_start(header, first);
  vat__mailbox_run_add(header, m);
  first->aux.run_header = header;
  w->run_header = header;
}

/* Keeps the turn's runs: consecutive sends to one vat are one run, which
 * its commit pushes whole (core/mailbox.h), so the commit never walks a
 * run to find where it ends. Sends to the turn's own vat make none: they
 * are appended one by one. The run is found from the turn's last send,
 * in lines just written, so a turn that sends once pays a test for it
 * and no store; the header is the last run's while its last message is
 * the turn's last send (turn.c clears it as each run is pushed). */
static inline void note_run(vat_turn *t, vat__msg *m, vat__vat *to) {
  vat__msg *tail = t->out_tail;
  if (tail == NULL || tail->target->vat != to || to == t->vat)
    return;
  vat__msg *header = t->worker->run_header;
  if (header != NULL && vat__mailbox_run_last(header) == tail)
    vat__mailbox_run_add(header, m);
  else
    start_run(t, m);
}

static vat__msg *buffer(vat_turn *t, vat_ref *to, vat_fn fn, void *arg) {
  vat__msg *m = vat__msg_alloc(&t->worker->pool);
  m->target = to;
  vat__msg_set_fn(m, fn);
  m->arg = arg;
  note_run(t, m, to->vat);
  if (t->out_tail)
    atomic_store_explicit(&t->out_tail->next, m, memory_order_relaxed);
  else
    t->out_head = m;
  t->out_tail = m;
  return m;
}

VAT__HOT int vat_send(vat_turn *turn, vat_ref *to, vat_fn fn, void *arg) {
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

/* An urgent send is an effect of its turn, not a buffered send: its
 * commit pushes it and then flags the target, in its place among the
 * turn's other sends. Urgent messages are control traffic: the effect's
 * allocation is not on the message hot path. */
typedef struct urgent_send {
  vat__effect base;
  vat_ref *to;
  vat_fn fn;
  void *arg;
  vat_value value;
} urgent_send;

static void urgent_commit(vat_turn *turn, vat__effect *e) {
  (void)turn;
  urgent_send *u = vat__container_of(e, urgent_send, base);
  vat__deliver_now_urgent(u->to, u->fn, u->arg, u->value);
}

/* One to the turn's own vat is an ordinary self-send (vat/core.h): the
 * commit appends it to the vat's own list in its place, and no flag moves
 * it ahead of the self-sends before it. */
static int send_urgent(vat_turn *turn, vat_ref *to, vat_fn fn, void *arg,
                       vat_value value) {
  if (to->vat == turn->vat) {
    buffer(turn, to, fn, arg)->value = value;
    return VAT_OK;
  }
  urgent_send *u = vat__gc_alloc(sizeof *u);
  *u = (urgent_send){.base.commit = urgent_commit,
                     .to = to,
                     .fn = fn,
                     .arg = arg,
                     .value = value};
  vat__turn_defer(turn, &u->base);
  return VAT_OK;
}

int vat_send_urgent(vat_turn *turn, vat_ref *to, vat_fn fn, void *arg) {
  int rc = vat__check_turn(turn);
  if (rc != VAT_OK)
    return rc;
  if (to == NULL || fn == NULL)
    return VAT_EINVAL;
  return send_urgent(turn, to, fn, arg, vat_null());
}

int vat_send_msg_urgent(vat_turn *turn, vat_ref *to, const vat_atom *selector,
                        vat_value value) {
  int rc = vat__check_turn(turn);
  if (rc != VAT_OK)
    return rc;
  if (to == NULL || selector == NULL)
    return VAT_EINVAL;
  return send_urgent(turn, to, vat__dispatch_dynamic, (void *)selector, value);
}

int vat__send_signal(vat_turn *turn, vat_ref *to, vat__signal *sig) {
  int rc = vat__check_turn(turn);
  if (rc != VAT_OK)
    return rc;
  if (to == NULL || sig == NULL)
    return VAT_EINVAL;
  buffer(turn, to, vat__dispatch_signal, sig);
  return VAT_OK;
}

/* --- From host threads --------------------------------------------------- */

/* `check` is the caller's check of its own arguments, made after the
 * thread's: an unregistered thread hears so first. `urgent`: the
 * function `fn` runs as an urgent message. */
static inline int host_send(vat_ref *to, bool check, vat_fn fn, void *arg,
                            vat_value value, bool urgent) {
  int rc = vat__check_host();
  if (rc != VAT_OK)
    return rc;
  if (to == NULL || !check)
    return VAT_EINVAL;
  vat__msg *m = vat__msg_alloc_unpooled();
  m->target = to;
  vat__msg_set_fn(m, fn);
  if (urgent)
    vat__msg_set_urgent(m, fn);
  m->arg = arg;
  m->value = value;
  rc = vat__deliver_from_host(m);
  if (urgent && rc == VAT_OK)
    vat__flag_urgent(to->vat);
  return rc;
}

int vat_host_send(vat_ref *to, vat_fn fn, void *arg) {
  return host_send(to, fn != NULL, fn, arg, vat_null(), false);
}

int vat_host_send_urgent(vat_ref *to, vat_fn fn, void *arg) {
  return host_send(to, fn != NULL, fn, arg, vat_null(), true);
}

int vat_host_send_msg(vat_ref *to, const vat_atom *selector, vat_value value) {
  return host_send(to, selector != NULL, vat__dispatch_dynamic,
                   (void *)selector, value, false);
}

int vat__host_send_signal(vat_ref *to, vat__signal *sig) {
  return host_send(to, sig != NULL, vat__dispatch_signal, sig, vat_null(),
                   false);
}
