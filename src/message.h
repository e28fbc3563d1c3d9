/* A message node: one delivery to one entity.
 *
 * Nodes are recycled through per-worker free lists (msgpool.c), so the hot
 * path allocates nothing from the collector. They live in collector memory
 * and are reachable while in use (from a mailbox, a turn's outbox or a free
 * list), so the argument and value they carry stay alive in flight.
 */
#ifndef VAT_MESSAGE_H
#define VAT_MESSAGE_H

#include <stdatomic.h>

#include "vat/core.h"

typedef struct vat__msg vat__msg;

struct vat__msg {
  /* Mailbox link. Atomic because the consumer may read it while the
   * producer that pushed this node is still storing it (see mailbox.c). */
  _Atomic(vat__msg *) next;
  vat_ref *target;
  /* Every message is a function run on the target's state; dynamic messages
   * use vat__dispatch_dynamic, which reads `selector` and `value`. */
  vat_fn fn;
  void *arg;
  vat_value value;
};

#define VAT__MSG_SELECTOR(m) ((const vat_atom *)(m)->arg)

#endif
