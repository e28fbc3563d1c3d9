/* See mailbox.h for the protocol. */
#include "mailbox.h"

#include <stdint.h>

#include "cpu.h"

void vat__mailbox_init(vat__mailbox *mb) {
  atomic_init(&mb->top, NULL);
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
  /* acq_rel: release publishes the message contents (and the links just
   * written) to the consumer that takes them; acquire orders this push
   * after the previous owner of `top`, so the vat is scheduled at most once
   * per IDLE. */
  vat__msg *below = atomic_exchange_explicit(&mb->top, last,
                                             memory_order_acq_rel);
  /* The oldest node of the chain now points below it. Release pairs with
   * the consumer's acquire load while it waits for the link. */
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

/* Takes the whole stack and appends it, oldest first, to the private list. */
static bool take_stack(vat__mailbox *mb) {
  vat__msg *top = atomic_load_explicit(&mb->top, memory_order_relaxed);
  if (top == VAT__MAILBOX_RUNNING || top == NULL)
    return false;
  /* Acquire pairs with the producers' release exchange: their messages'
   * contents are visible from here on. */
  top = atomic_exchange_explicit(&mb->top, VAT__MAILBOX_RUNNING,
                                 memory_order_acquire);
  vat__msg *fifo = NULL, *last = top;
  for (vat__msg *m = top; m != NULL && m != VAT__MAILBOX_RUNNING;) {
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
  if (mb->tail)
    atomic_store_explicit(&mb->tail->next, fifo, memory_order_relaxed);
  else
    mb->head = fifo;
  mb->tail = last;
  return true;
}

vat__msg *vat__mailbox_pop(vat__mailbox *mb) {
  if (mb->head == NULL && !take_stack(mb))
    return NULL;
  vat__msg *m = mb->head;
  mb->head = atomic_load_explicit(&m->next, memory_order_relaxed);
  if (mb->head == NULL)
    mb->tail = NULL;
  return m;
}

bool vat__mailbox_try_idle(vat__mailbox *mb) {
  if (mb->head != NULL)
    return false;
  vat__msg *expected = VAT__MAILBOX_RUNNING;
  /* Release: everything this vat's turns wrote happens-before the next
   * scheduling, which starts with a producer's acquire exchange that finds
   * IDLE — so the next worker to run the vat sees its state. */
  return atomic_compare_exchange_strong_explicit(
      &mb->top, &expected, NULL, memory_order_release, memory_order_relaxed);
}

bool vat__mailbox_has_work(vat__mailbox *mb) {
  if (mb->head != NULL)
    return true;
  vat__msg *top = atomic_load_explicit(&mb->top, memory_order_relaxed);
  return top != VAT__MAILBOX_RUNNING && top != NULL;
}

size_t vat__mailbox_count(vat__mailbox *mb) {
  size_t n = 0;
  while (take_stack(mb))
    ;
  for (vat__msg *m = mb->head; m != NULL;
       m = atomic_load_explicit(&m->next, memory_order_relaxed))
    n++;
  return n;
}
