/* A vat's mailbox: an intrusive, lock-free, multi-producer single-consumer
 * queue whose state word also says whether the vat needs scheduling.
 *
 * Producers push with one atomic exchange on `top`, building a LIFO stack:
 * each pushed node links to the node that was on top before it. The
 * consumer (the worker running the vat) never writes `top` while it runs:
 * it remembers the newest node it has taken (`taken`), and takes what was
 * pushed since by walking from `top` down to `taken`, reversing that segment
 * into its private FIFO list. Producers only ever write their own nodes, so
 * taking needs no atomic read-modify-write.
 *
 * A run of messages one commit sends to one vat goes in as one node: a
 * run header (vat__mailbox_push_header) that says where the run starts and
 * ends and how long it is, the run itself linked in order. The consumer
 * splices the run into its list whole instead of walking it: a walk over
 * nodes written on another core is a chain of misses, and a flood's 1,000
 * sends a turn became one (bench/README.md, "Runs pushed whole"). Headers
 * live only in the stack; the take recycles each it passes, but the one
 * `top` holds, which stays `taken` (marked handled: it is in no list).
 *
 * `top` is IDLE (NULL) while the vat is neither scheduled nor running; the
 * producer whose exchange replaces IDLE must schedule the vat. The consumer
 * returns the vat to IDLE with one CAS from `taken`, which fails if a push
 * came in meanwhile. So a message costs its producer one exchange, and a
 * vat that handled everything it had costs its consumer one CAS.
 *
 * `taken` is not recycled while `top` may still point at it: a recycled node
 * pushed again would look like "nothing new". It is freed when a newer node
 * replaces it, or when the vat goes idle (then `top` no longer holds it).
 *
 * The private list is first in, first out, with one exception: when a
 * sender flags an urgent message, the turn loop moves the urgent messages
 * queued to its front (vat__mailbox_hoist_urgent), each kind keeping its
 * order.
 *
 * Invariant: top != IDLE implies the vat is in a run queue, in a worker's
 * next slot, running, or muted: on an overloaded vat's muted list, which
 * that vat schedules again when it drains, goes idle or ends, and which
 * shutdown counts (core/overload.h) — or a producer that saw IDLE is about to
 * put it in one of those places. So no message waits in an idle vat.
 *
 * A producer preempted between its exchange and its link store leaves the
 * consumer a segment it cannot walk. The consumer does not wait for it
 * beyond a short spin: it takes nothing of that segment, keeps `taken`, and
 * reports nothing new. `top` still differs from `taken`, so the vat cannot
 * go idle; its turn loop hands it back to the scheduler to run again later
 * (vat__run_batch), and the worker runs other vats meanwhile.
 */
#ifndef VAT_CORE_MAILBOX_H
#define VAT_CORE_MAILBOX_H

#include <stdbool.h>
#include <stddef.h>

#include "core/message.h"
#include "core/msgpool.h"

/* `head` and `taken` belong to the consumer, which reads them plainly and
 * writes them with relaxed atomic stores (the same plain moves, see
 * vat__mailbox_set_head/_taken), so that a snapshot on another thread may
 * read them too (vat__mailbox_peek_len) without a data race. */
typedef struct vat__mailbox {
  _Atomic(vat__msg *) top; /* producers: exchange; consumer: load, CAS */
  /* Consumer: the newest node taken from the stack, with bit 0 set once
   * it was handled (then it may be recycled when replaced). Nodes are
   * 8-aligned, so the bit is free; keeping it here keeps a vat's header in
   * one cache line. */
  uintptr_t taken;
  vat__msg *head; /* consumer: FIFO of taken messages */
  vat__msg *tail;
} vat__mailbox;

static inline void vat__mailbox_set_head(vat__mailbox *mb, vat__msg *m) {
  __atomic_store_n(&mb->head, m, __ATOMIC_RELAXED);
}

static inline void vat__mailbox_set_taken(vat__mailbox *mb, uintptr_t t) {
  __atomic_store_n(&mb->taken, t, __ATOMIC_RELAXED);
}

/* Transient value of a pushed node's link before its producer stores it. */
#define VAT__MAILBOX_UNLINKED ((vat__msg *)(uintptr_t)1)

void vat__mailbox_init(vat__mailbox *mb);

/** Pushes the chain first..last (already linked first->...->last through
 *  `next`, oldest first) from any thread. Returns true when the mailbox was
 *  idle: the caller must schedule the vat. */
bool vat__mailbox_push_chain(vat__mailbox *mb, vat__msg *first, vat__msg *last);

static inline bool vat__mailbox_push(vat__mailbox *mb, vat__msg *m) {
  atomic_store_explicit(&m->next, NULL, memory_order_relaxed);
  return vat__mailbox_push_chain(mb, m, m);
}

/** What a run header runs: never called (a header is never a message). */
void vat__mailbox_run_header(vat_turn *turn, void *state, void *arg);

static inline bool vat__mailbox_is_run_header(const vat__msg *m) {
  return m->fn == vat__mailbox_run_header;
}

/* A run built as it is sent (core/send.c): the header is made when the
 * run gets its second message and grows with each after, so the commit
 * knows the run's end and length without walking it. `fn` and `flow` are
 * stored as peek_len reads them (relaxed: a plain move), as everywhere. */

/** Makes `header` the header of a run of one message so far, `first`. */
static inline void vat__mailbox_run_start(vat__msg *header, vat__msg *first) {
  vat__msg_set_fn(header, vat__mailbox_run_header);
  header->arg = first;
  header->aux.run_last = first;
  vat__msg_set_flow(header, 1);
}

/** Adds `m` at the end of header's run. */
static inline void vat__mailbox_run_add(vat__msg *header, vat__msg *m) {
  header->aux.run_last = m;
  vat__msg_set_flow(header, header->flow + 1);
}

static inline vat__msg *vat__mailbox_run_last(const vat__msg *header) {
  return header->aux.run_last;
}

static inline size_t vat__mailbox_run_len(const vat__msg *header) {
  return (size_t)header->flow;
}

/** Pushes the run `header` (a node of the caller's, for the mailbox to
 *  recycle), made with vat__mailbox_run_start and _add, describes, its
 *  messages linked in order and the last one's link NULL. As
 *  vat__mailbox_push_chain otherwise. */
static inline bool vat__mailbox_push_header(vat__mailbox *mb,
                                            vat__msg *header) {
  return vat__mailbox_push(mb, header);
}

/** Consumer: appends a message to the private list without any atomic. Only
 *  for messages the running vat sends to itself (it is the only producer of
 *  that pair, so order is kept); call vat__mailbox_take_new first, so
 *  messages from others that arrived first are handled first: a vat that
 *  keeps sending to itself cannot starve its other senders. */
void vat__mailbox_append_local(vat__mailbox *mb, vat__msg *m);

/** Consumer: moves what producers pushed into the private list; false when
 *  nothing new was pushed, or when a producer is still mid-push under what
 *  is new (then nothing is taken, and the vat must stay scheduled). Nodes
 *  the mailbox no longer needs go back to `pool` (NULL: to the collector). */
bool vat__mailbox_take_new(vat__mailbox *mb, vat__msgpool *pool);

/** vat__mailbox_take_new returning how many messages it took (0: none).
 *  Not for the hot path: the overload count's (core/overload.h). */
size_t vat__mailbox_take_counted(vat__mailbox *mb, vat__msgpool *pool);

/** Consumer: the next message, or NULL when nothing is queued now or what
 *  is queued waits for a producer mid-push (try_idle then fails). Inline:
 *  one per turn, and mostly the private list has one ready. */
static inline vat__msg *vat__mailbox_pop(vat__mailbox *mb, vat__msgpool *pool) {
  if (mb->head == NULL && !vat__mailbox_take_new(mb, pool))
    return NULL;
  vat__msg *m = mb->head;
  vat__msg *next = atomic_load_explicit(&m->next, memory_order_relaxed);
  /* The next node is fetched while this one's turn runs, for writing (its
   * turn recycles it), so that a backlog written on another core does not
   * stall each turn on a miss. One instruction a message (+0.3% for ring
   * and pingpong under callgrind); on a flood over two workers the two
   * threads' CPU time fell about 5%, within the noise of the rate. */
  __builtin_prefetch(next, 1);
  vat__mailbox_set_head(mb, next);
  if (next == NULL)
    mb->tail = NULL;
  return m;
}

/* Searching the queue: for signals that overtake it (turn.c). Consumer
 * only, and not for the hot path: they walk the queue. */
typedef bool vat__msg_match(const vat__msg *m, void *ctx);

/** Takes what was pushed, then returns the oldest queued message `match`
 *  accepts, left in place, or NULL. Sets `*complete` false when a producer
 *  was mid-push: what lies under its node was not looked at. */
vat__msg *vat__mailbox_find(vat__mailbox *mb, vat__msgpool *pool,
                            vat__msg_match *match, void *ctx, bool *complete);

/** Removes the queued messages before `stop` (NULL: all) that `match`
 *  accepts, and returns them linked in queue order (last->next NULL). */
vat__msg *vat__mailbox_extract(vat__mailbox *mb, vat__msg_match *match,
                               void *ctx, const vat__msg *stop);

/** Consumer: takes what was pushed, then moves the urgent messages
 *  (core/message.h) ahead of the others, keeping the order within each
 *  kind. Walks the whole queue: for the turn loop when a sender flagged
 *  an urgent message (VAT__URGENT), never per message. */
void vat__mailbox_hoist_urgent(vat__mailbox *mb, vat__msgpool *pool);

/** Consumer: puts back the message vat__mailbox_pop just returned, so that
 *  it is the next again. */
static inline void vat__mailbox_unpop(vat__mailbox *mb, vat__msg *m) {
  /* pop left m's link as it was: it still points at the new head. */
  vat__mailbox_set_head(mb, m);
  if (mb->tail == NULL)
    mb->tail = m;
}

/** Consumer of a vat that will never run again (its system stopped and
 *  its workers are joined): the next message, or NULL when the mailbox is
 *  empty. Unlike vat__mailbox_pop it waits for a producer caught mid-push,
 *  so that nothing it pushed, nor anything pushed before it, is left
 *  behind uncounted. */
vat__msg *vat__mailbox_pop_stopped(vat__mailbox *mb);

/** Consumer: a popped message was handled; recycles its node unless the
 *  mailbox still needs it. */
#define VAT__TAKEN_DONE ((uintptr_t)1)

static inline vat__msg *vat__mailbox_taken(const vat__mailbox *mb) {
  return (vat__msg *)(mb->taken & ~VAT__TAKEN_DONE);
}

static inline void vat__mailbox_done(vat__mailbox *mb, vat__msgpool *pool,
                                     vat__msg *m) {
  if (m == vat__mailbox_taken(mb))
    vat__mailbox_set_taken(mb, mb->taken | VAT__TAKEN_DONE);
  else
    vat__msg_free(pool, m);
}

/** Consumer: marks the mailbox idle if nothing is queued. Returns false when
 *  a message arrived meanwhile (the vat stays scheduled). */
bool vat__mailbox_try_idle(vat__mailbox *mb, vat__msgpool *pool);

/** Consumer: takes what was pushed and counts the queued messages. */
size_t vat__mailbox_count(vat__mailbox *mb);

/** Any thread: the messages queued and not yet popped, counting at most
 *  `max`. Exact while the consumer does not run; while it does, a count
 *  the queue had or nearly had (see mailbox.c). */
size_t vat__mailbox_peek_len(vat__mailbox *mb, size_t max);

/** Consumer: true when a message is queued (a hint: a push may land just
 *  after it returns false). */
static inline bool vat__mailbox_has_work(vat__mailbox *mb) {
  return mb->head != NULL ||
         atomic_load_explicit(&mb->top, memory_order_relaxed) !=
             vat__mailbox_taken(mb);
}

#endif
