/* Sending: a turn buffers its sends until it commits (turn.c delivers
 * them); a host thread's send is delivered at once (deliver.c). */
#include "core/deliver.h"
#include "core/system.h"
#include "core/worker.h"
#include "util/cpu.h"

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
 * thread's: an unregistered thread hears so first. */
static inline int host_send(vat_ref *to, bool check, vat_fn fn, void *arg,
                            vat_value value) {
  int rc = vat__check_host();
  if (rc != VAT_OK)
    return rc;
  if (to == NULL || !check)
    return VAT_EINVAL;
  vat__msg *m = vat__msg_alloc_unpooled();
  m->target = to;
  m->fn = fn;
  m->arg = arg;
  m->value = value;
  return vat__deliver_from_host(m);
}

int vat_host_send(vat_ref *to, vat_fn fn, void *arg) {
  return host_send(to, fn != NULL, fn, arg, vat_null());
}

int vat_host_send_msg(vat_ref *to, const vat_atom *selector, vat_value value) {
  return host_send(to, selector != NULL, vat__dispatch_dynamic,
                   (void *)selector, value);
}

int vat__host_send_signal(vat_ref *to, vat__signal *sig) {
  return host_send(to, sig != NULL, vat__dispatch_signal, sig, vat_null());
}
