/* See mailbox.h for the protocol. */
#include "mailbox.h"

#include <stdint.h>

#include "cpu.h"

void vat__mailbox_init(vat__mailbox *mb) {
  atomic_init(&mb->top, NULL);
  mb->seen = 0;
  mb->head = NULL;
  mb->tail = NULL;
}

bool vat__mailbox_push_chain(vat__mailbox *mb, vat__msg *first,
                             vat__msg *last) {
  /* The stack links each node to the one pushed before it, the reverse of
   * the chain's order. Mark the oldest node unlinked first: the consumer may
   * see the nodes the moment `top` holds them, before that node's link to
   * the older part of the stack is stored. */
  vat__msg *before = VAT__MAILBOX_UNLINKED;
  for (vat__msg *m = first;;) {
    vat__msg *after = atomic_load_explicit(&m->next, memory_order_relaxed);
    atomic_store_explicit(&m->next, before, memory_order_relaxed);
    if (m == last)
      break;
    before = m;
    m = after;
  }
  /* acq_rel: release publishes the messages (and the links just written)
   * to the consumer's acquire load of `top`; acquire orders this push after
   * the previous owner of `top` — the consumer's CAS to IDLE included — so
   * the vat is scheduled at most once per IDLE. */
  vat__msg *below =
      atomic_exchange_explicit(&mb->top, last, memory_order_acq_rel);
  /* Release pairs with the consumer's acquire load while it waits for this
   * link. */
  atomic_store_explicit(&first->next, below, memory_order_release);
  return below == NULL;
}

void vat__mailbox_append_local(vat__mailbox *mb, vat__msg *m) {
  atomic_store_explicit(&m->next, NULL, memory_order_relaxed);
  if (mb->tail)
    atomic_store_explicit(&mb->tail->next, m, memory_order_relaxed);
  else
    mb->head = m;
  mb->tail = m;
}

static void recycle(vat__msgpool *pool, vat__msg *m) {
  if (m != NULL && pool != NULL)
    vat__msg_free(pool, m);
}

/* Takes what was pushed since `seen` and appends it, oldest first, to the
 * private list. The old `seen` is recycled if it was handled; if it is
 * still queued, it is an ordinary node from now on, recycled when done. */
bool vat__mailbox_take_new(vat__mailbox *mb, vat__msgpool *pool) {
  /* Acquire pairs with the producers' release exchange: their messages'
   * contents are visible from here on. */
  vat__msg *top = atomic_load_explicit(&mb->top, memory_order_acquire);
  vat__msg *seen = vat__mailbox_seen(mb);
  if (top == seen)
    return false;
  vat__msg *fifo = NULL;
  for (vat__msg *m = top; m != seen;) {
    vat__msg *older;
    /* A producer between its exchange and its link store: wait for it. It
     * has one store left to do, so this wait is short. */
    while ((older = atomic_load_explicit(&m->next, memory_order_acquire)) ==
           VAT__MAILBOX_UNLINKED)
      vat__cpu_relax();
    atomic_store_explicit(&m->next, fifo, memory_order_relaxed);
    fifo = m;
    m = older;
  }
  if (mb->seen & VAT__SEEN_DONE)
    recycle(pool, seen);
  if (mb->head == NULL)
    mb->head = fifo;
  else
    atomic_store_explicit(&mb->tail->next, fifo, memory_order_relaxed);
  mb->seen = (uintptr_t)top;
  mb->tail = top;
  return true;
}

bool vat__mailbox_try_idle(vat__mailbox *mb, vat__msgpool *pool) {
  if (mb->head != NULL)
    return false;
  /* Clear `seen` before the CAS: once the vat is idle, a producer may
   * schedule it on another worker at once, and the mailbox is that
   * worker's. The CAS's release publishes the cleared field to it. */
  uintptr_t seen_bits = mb->seen;
  vat__msg *seen = vat__mailbox_seen(mb);
  mb->seen = 0;
  /* Release also makes everything this vat's turns wrote happen-before the
   * next scheduling, which starts with a producer's acquire exchange that
   * finds IDLE — so the next worker to run the vat sees its state. */
  if (!atomic_compare_exchange_strong_explicit(&mb->top, &(vat__msg *){seen},
                                               NULL, memory_order_release,
                                               memory_order_relaxed)) {
    mb->seen = seen_bits;
    return false;
  }
  /* Ours alone now: `top` and the mailbox no longer refer to it. */
  if (seen_bits & VAT__SEEN_DONE)
    recycle(pool, seen);
  return true;
}

size_t vat__mailbox_count(vat__mailbox *mb) {
  vat__mailbox_take_new(mb, NULL);
  size_t n = 0;
  for (vat__msg *m = mb->head; m != NULL;
       m = atomic_load_explicit(&m->next, memory_order_relaxed))
    n++;
  return n;
}
