/* Overload: how long a vat's queue is, what happens when it passes its
 * high mark, and the senders it mutes meanwhile.
 *
 * Measuring. The consumer counts its queue at the end of a batch that
 * left work waiting (a vat that is "behind", Pony's rule), never per
 * message. A vat with a short queue (a self-send or two) is left at that:
 * no record, no bit. Otherwise it keeps a cursor into its private list: a
 * node (`mark`) and how many nodes lie from the head to it (`ahead`). A
 * batch's end learns how many messages it popped from the vat's turn
 * counter, so `ahead` drops by that; then it takes what was pushed,
 * counting it as the take walks it (vat__mailbox_take_counted; a run
 * pushed whole counts by its header, core/mailbox.h). Only
 * nodes that came in another way (a pop's take when the list ran dry, a
 * self-send) need the cursor to walk over them, counting, up to the mark
 * that matters (high, or low while overloaded): a longer walk would only
 * pull into the cache nodes it evicts again before they are handled. The
 * cursor only moves forward, so each message is walked over once at
 * most. A batch whose rare paths moved messages (a search for an exit, a
 * put back, urgent messages moved to the front) counts from the head
 * again. A vat that goes idle has an empty queue: its count returns to 0
 * then. VAT__BEHIND says the record holds a count; VAT__OVERLOADED that
 * it passed the high mark and has not yet drained below the low one.
 * Both bits are set and cleared by the vat's own worker, between batches;
 * senders only read them.
 *
 * Counting at the sender. A consumer that measures only at its batches'
 * ends bounds nothing while its thread is preempted. So a vat with a
 * record is VAT__COUNTED (set when the record is made), which delivery
 * tests with the flags it loads anyway (the common path pays nothing):
 * a sender to it adds what it pushed to `pushed`, one atomic add per
 * delivery (a run by its header's length), after the push; the vat keeps
 * `base` = pushed less its queue, stored at each batch's end that counts
 * (pushed read before the take) and when it goes idle. pushed - base is
 * then the queue, over by what was popped since and under by self-sends
 * since (one batch each). A push that makes it reach the high mark marks
 * the receiver VAT__OVERLOADED from the sender (mark_overloaded, under
 * the receiver's lock), and the policy acts from there.
 *
 * A sender-set flag must not break the argument below, so: a vat goes
 * idle only under its record's lock (vat__overload_idle), and a sender sets
 * the flag, or parks, only under that lock on a vat that is busy, which
 * therefore comes back to clear it; and a vat about to park claims it
 * (`muted_on`) under its own lock, where senders refuse to mark a vat
 * that claimed: a muted vat is never overloaded.
 *
 * Muting (the default policy). A vat whose turn delivered to an
 * overloaded vat in its system is taken off the scheduler after that turn:
 * the delivery notes the receiver in the sender's own record and sets its
 * VAT__MUTING, which the turn loop tests with the flags it reads anyway;
 * the batch stops there and its worker parks the sender on the receiver's
 * muted list instead of queueing it, re-checking under the list's lock
 * that the receiver is still overloaded. A sender that went idle first is
 * muted at the start of its next batch.
 * Its mailbox stays busy, so pushes do not schedule it; the receiver
 * schedules every vat on its list when it clears VAT__OVERLOADED (below
 * the low mark, idle, or ended) and shutdown counts what they held.
 *
 * Bursts. A consumer measures only at its batches' ends, so a producer
 * whose batch runs before the consumer's first one (on one worker, the
 * pair takes turns) would send a whole batch of turns' worth unmeasured:
 * 64 turns of 1,000 sends in a flood, 8 MB of nodes. So a batch whose
 * turns sent VAT_SEND_BURST messages in runs to one vat ends at its next
 * turn (VAT__YIELD, set by the commit, tested by the turn loop with the
 * flags it reads anyway); the receiver runs and measures before more goes
 * out. The commit counts a run in a register and adds it once per run:
 * a turn that sends one message pays nothing.
 *
 * Where the pair runs. An overloaded vat alone on its worker stays in
 * that worker's busy list, and the senders it releases go to that
 * worker's run queue, where an idle worker steals them: the producer and
 * the consumer then run in parallel, each on its own core, the consumer's
 * queue staying in its core's cache (sched/place.c, vat__requeue).
 *
 * Why no set of mutes can deadlock: a vat is never muted on itself, and a
 * vat is never muted while it is overloaded (checked after its own count
 * is taken, in the same batch end, and claimed under its lock). A muted
 * vat cannot become overloaded: its own batches set the bit, and it runs
 * none; senders refuse once it claimed. So every muted vat
 * waits on an overloaded vat, which is not muted, and whose busy mailbox
 * keeps it scheduled: it runs, drains, and releases its list. A wait is
 * one edge long, never a chain, so never a cycle. (What it does not
 * bound: a muted vat's own queue, which grows while it waits, as in Pony.)
 *
 * Hot-path cost: the turn loop's per-turn flag test masks the bits that
 * need action (overloaded vats run at full speed); delivery tests the
 * target's flags, which it loaded for the dead check anyway, before its
 * push; going idle tests the flags once more, in a wrapper of try_idle.
 * callgrind, release builds, against the code before: ring +0.7%,
 * pingpong +0.6%, selfsend +0.6%, counter +1.9% instructions.
 */
#ifndef VAT_CORE_OVERLOAD_H
#define VAT_CORE_OVERLOAD_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/vat.h"

/* A vat's overload record: made by the vat's own worker on first need (a
 * batch that ends behind, a policy set at spawn or from a turn), published
 * in its extension. Others read it only after they saw VAT__OVERLOADED
 * (acquire), which is set after it is made. */
typedef struct vat__overload_state {
  /* Counting at the sender (see the top): messages pushed by senders that
   * saw VAT__COUNTED, added once per delivery (a run counts whole). On a
   * line of its own: every sender writes it, the vat's worker reads it
   * once per batch's end. */
  _Atomic uint64_t pushed;
  char pad[VAT__CACHE_LINE - sizeof(uint64_t)];
  /* `pushed` less the queue's length, as the vat's worker last knew it (a
   * batch's end, going idle): pushed - base is the queue now, give or take
   * one batch (see the top). Relaxed: an estimate; it orders nothing. */
  _Atomic uint64_t base;
  /* The vat's turn counter when base was last stored: a count that stops
   * at a mark moves base on by the turns run since instead (see
   * store_base). Its worker's. */
  uint32_t base_turns;
  /* While parked on another vat's muted list: that vat. Set by the vat's
   * worker under this record's lock, cleared by whoever releases it (the
   * receiver, or an exit's sender: vat__overload_unpark, which reads it as a
   * hint); while it is set no sender marks this vat overloaded (see the
   * top). */
  _Atomic(vat__vat *) muted_on;
  /* Written by the vat's worker with relaxed stores, so any thread may
   * read them (senders choosing the policy). */
  _Atomic size_t high, low;
  _Atomic uint8_t policy; /* vat_overload_policy, never DEFAULT */
  /* The count's cursor: the vat's worker's alone (see the top), with
   * the vat's turn counter when it was last moved. */
  vat__msg *mark;
  size_t ahead;
  uint32_t turns;
  /* While VAT__MUTING: the overloaded vat it sent to. Its worker's. */
  vat__vat *mute_on;
  /* Ordinary messages dropped by VAT_OVERLOAD_DROP: by senders, rarely. */
  _Atomic uint64_t dropped;
  /* Guards `muted` and `waiters`; taken once per mute and per release. */
  pthread_mutex_t lock;
  pthread_cond_t drained; /* host senders waiting (vat_host_send_wait) */
  vat__vat *muted;        /* linked through their `link` */
  unsigned waiters;
} vat__overload_state;

/** v's record, made if needed. v's worker only (its turns, its batch's
 *  end), or before v can run (spawn). */
vat__overload_state *vat__overload_of(vat__vat *v);
/** v's record or NULL, from any thread. */
vat__overload_state *vat__overload_peek(vat__vat *v);

/** VAT_OK when `ov` is valid as a system's defaults (vat_config.overload),
 *  else VAT_EINVAL. */
int vat__overload_check_defaults(const vat_overload *ov);
/** VAT_OK when `ov` (NULL: none) is valid settings for a vat of `sys`,
 *  else VAT_EINVAL. */
int vat__overload_check(vat_system *sys, const vat_overload *ov);
/** Sets v's policy and marks from `ov` (zeros: the system's). As
 *  vat__overload_of. Returns VAT_EINVAL for a bad policy or low > high. */
int vat__overload_configure(vat__vat *v, const vat_overload *ov);

/* What the turn loop (core/turn.c) tells the overload machinery, all of
 * it: a batch sent a burst (vat__overload_yield), a batch ended with work
 * left (vat__overload_batch_end), the queue emptied (vat__overload_idle),
 * the queue changed other than by pops (vat__overload_recount). */

/** The current batch of v sent a burst to one vat: the batch ends at the
 *  next turn (VAT__YIELD, a flag the turn loop tests anyway), so that the
 *  receiver runs and measures its queue before more goes out. At most
 *  once per batch. */
void vat__overload_yield(vat__vat *v);
/** The end of a batch of v that left work waiting: counts its queue, and
 *  sets or clears VAT__OVERLOADED, or ends v (VAT_OVERLOAD_FAIL); ends a
 *  burst, and parks v on its receiver's muted list when a turn of it sent
 *  to an overloaded vat and it should wait (see the top). Returns whether
 *  v still needs queueing. */
bool vat__overload_batch_end(vat__worker *w, vat__vat *v);
/** v's queue lost or regained messages other than by pops (a search for
 *  an exit, a put back): its next count starts from the head. */
void vat__overload_recount(vat__vat *v);
/** v's turn loop found its queue empty: v forgets its count and its
 *  burst (moot once the queue is empty), releases the vats muted on it,
 *  and tries to go idle (vat__mailbox_try_idle), under its record's lock
 *  (see the top). Returns whether it went idle. */
bool vat__overload_idle(vat__worker *w, vat__vat *v, vat__msgpool *pool);
/** v ended (or its system stops): releases its muted and host waiters. */
void vat__overload_release(vat__worker *w, vat__vat *v);

/** Delivery to `to` whose flags say overloaded: mutes the sender (the
 *  vat whose turn commits on `w`; w NULL: a host thread, never muted),
 *  or drops
 *  the chain's ordinary messages (VAT_OVERLOAD_DROP). Returns the chain
 *  left to push (first..*last), or NULL when nothing is. */
vat__msg *vat__overload_on_send(vat__worker *w, vat__vat *to, vat__msg *first,
                                vat__msg **last);

/** An exit that may end v was pushed to it and v flagged VAT__ALERTED:
 *  if v is parked on a muted list, takes it off. Returns whether it did
 *  (the caller then schedules v). Any thread. */
bool vat__overload_unpark(vat__vat *v);

/** Delivery pushed `n` messages to `to`, whose flags said VAT__COUNTED:
 *  adds them to its count and, when that passes its high mark, marks it
 *  overloaded and mutes the sender as vat__overload_on_send does (`ordinary`:
 *  the chain held an ordinary message; urgent ones never mute). */
void vat__overload_count(vat__worker *w, vat__vat *to, size_t n, bool ordinary);

/** `to`'s queue length from its count: pushed - base. Any thread. */
size_t vat__overload_queue_len(vat__vat *to);

/** The vat `v` is muted on, or NULL. Any thread (a snapshot). */
vat__vat *vat__overload_muted_on(vat__vat *v);

/** A stopped system's muted vats: removes and returns v's muted list
 *  (linked through their `link`). After the workers stopped. */
vat__vat *vat__overload_take_muted(vat__vat *v);

/** Host thread: waits until `v` is not overloaded or `deadline_ns` (on
 *  the monotonic clock) passes. Returns whether it is not overloaded. */
bool vat__overload_wait(vat__vat *v, uint64_t deadline_ns);

/** For the loop that ran v's batch, on v's worker: whether v is
 *  overloaded as the batch's end left it, for the scheduler's requeue
 *  (sched/place.c). Relaxed: this worker measured it. */
static inline bool vat__overload_hint(const vat__vat *v) {
  return atomic_load_explicit(&v->flags, memory_order_relaxed) &
         VAT__OVERLOADED;
}

static inline bool vat__is_overloaded(const vat__vat *v) {
  return atomic_load_explicit(&v->flags, memory_order_acquire) &
         VAT__OVERLOADED;
}

#endif
