/* A message node: one delivery to one entity.
 *
 * Nodes are recycled through per-worker free lists (msgpool.c), so the hot
 * path allocates nothing from the collector. They live in collector memory
 * and are reachable while in use (from a mailbox, a turn's outbox or a free
 * list), so the argument and value they carry stay alive in flight.
 */
#ifndef VAT_CORE_MESSAGE_H
#define VAT_CORE_MESSAGE_H

#include <stdatomic.h>
#include <stdint.h>

#include "vat/core.h"

typedef struct vat__msg vat__msg;

struct vat__msg {
  /* Mailbox link. Atomic because the consumer may read it while the
   * producer that pushed this node is still storing it (see mailbox.c). */
  _Atomic(vat__msg *) next;
  vat_ref *target;
  /* Every message is a function run on the target's state; dynamic messages
   * use vat__dispatch_dynamic, which reads the selector in `arg` and the
   * `value`. */
  vat_fn fn;
  void *arg;
  vat_value value;
  /* One word, a use for each kind of node, each named. */
  union {
    /* A buffered send that begins a run of two or more to one vat: the
     * run's header (core/send.c) until its commit pushes the run; NULL on
     * every other buffered send (a node is cleared as it is recycled). */
    vat__msg *run_header;
    /* A run header: the run's last node (core/mailbox.h). */
    vat__msg *run_last;
    /* A signal's data carried inline (vat__deliver_now_inline). */
    void *signal_data;
    /* An urgent message: the function it runs for its sender. */
    vat_fn urgent_fn;
  } aux;
  /* A traced send's flow id (core/trace.h), read by the turn that runs
   * it. Only a traced system reads it, and every message it runs carries
   * a fresh one or 0: its own sends set one, and a message from a sender
   * that does not trace has it cleared on the way in (deliver.c). So
   * nothing clears it as a node is recycled. It fills what was padding. */
  uint64_t flow;
};

/* An urgent message's `fn` (core/deliver.c): it runs the sender's
 * function, kept in `aux.urgent_fn`. The turn loop finds urgent messages by it
 * when their sender flags the vat (vat__mailbox_hoist_urgent). */
void vat__run_urgent(vat_turn *turn, void *state, void *arg);

/** The function `m` runs for its sender: its `fn`, or an urgent one's. */
static inline vat_fn vat__msg_fn(const vat__msg *m) {
  return m->fn != vat__run_urgent ? m->fn : m->aux.urgent_fn;
}

/** Sets what `m` runs. A relaxed atomic store, a plain move: a snapshot
 *  of a queue on another thread reads `fn` of nodes that may be reused
 *  under it (core/mailbox.c, peek_len). */
static inline void vat__msg_set_fn(vat__msg *m, vat_fn fn) {
  __atomic_store_n(&m->fn, fn, __ATOMIC_RELAXED);
}

/** Sets `m`'s flow id, for the same reason as vat__msg_set_fn. */
static inline void vat__msg_set_flow(vat__msg *m, uint64_t flow) {
  __atomic_store_n(&m->flow, flow, __ATOMIC_RELAXED);
}

/** Makes `m` an urgent message that runs `fn`. */
static inline void vat__msg_set_urgent(vat__msg *m, vat_fn fn) {
  vat__msg_set_fn(m, vat__run_urgent);
  m->aux.urgent_fn = fn;
}

/* A node fills a cache line and slabs are line-aligned, so nodes in use on
 * two cores never share a line: two workers each reusing a node from one
 * line made every send ping-pong that line between the cores. */
_Static_assert(sizeof(struct vat__msg) == 64, "a message node is one line");

#endif
