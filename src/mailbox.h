/* A vat's mailbox: an intrusive, lock-free, multi-producer single-consumer
 * queue whose state word also says whether the vat needs scheduling.
 *
 * Producers push with one atomic exchange on `top`, building a LIFO stack.
 * The consumer (the worker running the vat) takes the whole stack with one
 * exchange, reverses it into its private FIFO list, and works from that.
 *
 * `top` is IDLE (NULL) while the vat is neither scheduled nor running; the
 * producer whose exchange replaces IDLE must schedule the vat. While the vat
 * is scheduled or running, an empty stack is RUNNING, so pushes that find it
 * do not schedule again. The consumer returns the vat to IDLE with one CAS
 * from RUNNING, which fails if a push came in meanwhile.
 *
 * Invariant: top != IDLE implies the vat is in a run queue, in a worker's
 * next slot, or running — or a producer that saw IDLE is about to put it
 * there. So no message waits in an idle vat.
 */
#ifndef VAT_MAILBOX_H
#define VAT_MAILBOX_H

#include <stdbool.h>
#include <stddef.h>

#include "message.h"

typedef struct vat__mailbox {
  _Atomic(vat__msg *) top; /* producers: exchange; consumer: exchange/CAS */
  vat__msg *head;          /* consumer only: FIFO of taken messages */
  vat__msg *tail;
} vat__mailbox;

/* Stack terminator and "scheduled, nothing pushed" marker. */
#define VAT__MAILBOX_RUNNING ((vat__msg *)(uintptr_t)1)
/* Transient value of a pushed node's link before its producer stores it. */
#define VAT__MAILBOX_UNLINKED ((vat__msg *)(uintptr_t)3)

void vat__mailbox_init(vat__mailbox *mb);

/** Pushes the chain first..last (already linked first->...->last through
 *  `next`, oldest first) from any thread. Returns true when the mailbox was
 *  idle: the caller must schedule the vat. */
bool vat__mailbox_push_chain(vat__mailbox *mb, vat__msg *first, vat__msg *last);

static inline bool vat__mailbox_push(vat__mailbox *mb, vat__msg *m) {
  atomic_store_explicit(&m->next, NULL, memory_order_relaxed);
  return vat__mailbox_push_chain(mb, m, m);
}

/** Consumer: appends a message to the private list without any atomic. Only
 *  for messages the running vat sends to itself (it is the only producer of
 *  that pair, so order is kept). */
void vat__mailbox_append_local(vat__mailbox *mb, vat__msg *m);

/** Consumer: the next message, or NULL when nothing is queued now. */
vat__msg *vat__mailbox_pop(vat__mailbox *mb);

/** Consumer: marks the mailbox idle if nothing is queued. Returns false when
 *  a message arrived meanwhile (the vat stays scheduled). */
bool vat__mailbox_try_idle(vat__mailbox *mb);

/** Consumer: true when a message is queued (a hint: a push may land just
 *  after it returns false). */
bool vat__mailbox_has_work(vat__mailbox *mb);

/** Consumer, with no producer left (system stopped): counts what is queued. */
size_t vat__mailbox_count(vat__mailbox *mb);

#endif
