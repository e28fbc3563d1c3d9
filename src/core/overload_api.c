/* The overload API (vat/core.h, "Overload"): a vat's settings, its queue
 * length, and host sends that wait while the target is overloaded. The
 * mechanism is overload.c's. */
#include <math.h>

#include "core/deliver.h"
#include "core/overload.h"
#include "core/reasons.h"
#include "core/system.h"
#include "core/thread.h"
#include "core/turn.h"
#include "util/clock.h"

int vat_overload_set(vat_turn *turn, const vat_overload *ov) {
  int rc = vat__check_turn(turn);
  if (rc != VAT_OK)
    return rc;
  if (ov == NULL)
    return VAT_EINVAL;
  /* From the vat's own turn: its worker's, as the record wants. */
  return vat__overload_configure(turn->vat, ov);
}

size_t vat_ref_queue_len_max(vat_ref *ref, size_t max) {
  if (ref == NULL)
    return 0;
  vat__vat *v = ref->vat;
  uint8_t flags = atomic_load_explicit(&v->flags, memory_order_acquire);
  if (flags & VAT__DEAD)
    return 0;
  /* A counted vat's count (core/overload.h), in constant time; a vat never
   * counted had short queues, and its queue is walked. */
  if (flags & VAT__COUNTED) {
    size_t n = vat__overload_queue_len(v);
    return n < max ? n : max;
  }
  return vat__mailbox_peek_len(&v->mailbox, max);
}

size_t vat_ref_queue_len(vat_ref *ref) {
  return vat_ref_queue_len_max(ref, SIZE_MAX);
}

bool vat_ref_overloaded(vat_ref *ref) {
  return ref != NULL && vat__is_overloaded(ref->vat);
}

const vat_atom *vat_atom_overloaded(void) {
  return vat__reason.overloaded;
}

int vat_host_send_wait(vat_ref *to, vat_fn fn, void *arg, double timeout_s) {
  int rc = vat__check_host();
  if (rc != VAT_OK)
    return rc;
  if (to == NULL || fn == NULL || !(timeout_s >= 0))
    return VAT_EINVAL;
  if (vat__is_overloaded(to->vat)) {
    if (timeout_s == 0)
      return VAT_EAGAIN;
    /* Capped at a day: the arithmetic stays in range for any timeout. */
    double ns = fmin(timeout_s, 86400.0) * 1e9;
    if (!vat__overload_wait(to->vat, vat__monotonic_ns() + (uint64_t)ns))
      return VAT_ETIMEDOUT;
  }
  return vat_host_send(to, fn, arg);
}
