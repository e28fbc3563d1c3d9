/* Delivery: the one path from a sender to a mailbox. See deliver.c for
 * the deliver-or-drop contract and the shutdown admission gate.
 *
 * Entry points, by where the sender is:
 *   in a turn, buffered until commit   vat_send*, vat__send_signal (send.c)
 *   a committing turn's chain          vat__deliver (turn.c's commit)
 *   now, from anywhere                 vat__deliver_now_msg,
 *                                      vat__deliver_now_signal,
 *                                      vat__deliver_now_inline
 *   a host thread, refused once closed vat_host_send*, vat__host_send_signal
 */
#ifndef VAT_CORE_DELIVER_H
#define VAT_CORE_DELIVER_H

#include "core/message.h"
#include "core/turn.h"
#include "core/vat.h"

/* A system-level message with its own delivery and drop behaviour: exit
 * signals, link requests, requests that carry a promise. Modules embed it
 * in their own struct (vat__container_of gets back). `deliver` runs as a
 * turn of the target vat (so it may use the turn API); `drop` runs instead
 * when the target is dead or its system stopped — never both, exactly one
 * of them, once. `w` is NULL when the drop happens off the workers.
 * `overtakes` (optional) says whether the queued signal `m` would end the
 * vat `v` if it ran now; if so, once its sender alerted the vat
 * (vat__alert), it runs at the vat's next turn boundary, ahead of the
 * messages queued before it: an exit signal, as in Erlang, takes effect on
 * arrival, whatever the backlog. It only reads the vat's state: it runs on
 * the vat's worker, between turns. A `control` signal (link and monitor
 * bookkeeping) is never overtaken: Erlang handles every signal in the
 * order it arrived, and only messages wait in the queue. */
typedef struct vat__signal vat__signal;
typedef struct vat__signal_class {
  void (*deliver)(vat_turn *turn, void *state, vat__signal *sig);
  void (*drop)(vat__worker *w, vat_ref *target, vat__signal *sig);
  bool (*overtakes)(vat__vat *v, const vat__msg *m);
  bool control;
  /* What a crash report says the vat was handling (NULL: "signal"). */
  const char *name;
  /* Optional: the user's function the signal runs (a request's handler),
   * for crash reports to name instead of the signal. */
  void (*(*handler)(const vat__signal *sig))(void);
} vat__signal_class;
struct vat__signal {
  const vat__signal_class *cls;
};

/** A signal class's drop for signals whose loss needs no answer. */
void vat__signal_drop_nothing(vat__worker *w, vat_ref *target,
                              vat__signal *sig);

/** Buffers a signal in the turn, like vat_send. */
int vat__send_signal(vat_turn *turn, vat_ref *to, vat__signal *sig);
/** Sends a signal from a host thread, at once; VAT_ECLOSED once the
 *  system closes. */
int vat__host_send_signal(vat_ref *to, vat__signal *sig);

/** A committing turn's chain first..last (linked, last->next NULL) of
 *  messages, all to one vat, from worker `w`. A chain of more than one
 *  comes with `header`, its run header (core/send.c builds it; NULL for
 *  one message), and goes in as one run behind it (core/mailbox.h); a
 *  header not pushed is recycled. */
void vat__deliver(vat__worker *w, vat__msg *header, vat__msg *first,
                  vat__msg *last);

/* Delivery now, bypassing any turn's buffer: for a turn's commit effects,
 * the modules' hooks, the timer thread and host threads. On a worker it
 * takes the worker's path; elsewhere the path from outside, except that a
 * message refused because its system is closing is dropped (a signal's
 * drop runs) instead: it was accepted earlier, by whoever deferred it. */
void vat__deliver_now_msg(vat_ref *to, vat_fn fn, void *arg, vat_value value);
void vat__deliver_now_signal(vat_ref *to, vat__signal *sig);
/** A signal whose data travels in the message node (its `value` and
 *  `aux.signal_data`, read back from turn->msg) rather than in an
 *  allocation of its own:
 *  `sig` is then shared, usually static. For the signals a vat's end sends
 *  by the thousand. */
void vat__deliver_now_inline(vat_ref *to, const vat__signal *sig,
                             vat_value value, void *aux);

/** Tells `v`'s turn loop that a signal that may overtake its queue was
 *  pushed to it: it looks through the queue at its next turn boundary.
 *  A vat muted by an overloaded receiver (core/overload.h) is taken
 *  off the receiver's list and scheduled, so that the signal reaches it
 *  while the receiver stays overloaded. After the push, from any thread; the sender alerts
 *  only when the signal is likely to end the vat, so that a vat is not
 *  searched once per signal it will only queue. */
void vat__alert(vat__vat *v);

/** An urgent message (core/message.h) of `fn` to `to`, delivered now as
 *  vat__deliver_now_msg does, then the target flagged (vat__flag_urgent):
 *  an urgent send's commit. */
void vat__deliver_now_urgent(vat_ref *to, vat_fn fn, void *arg,
                             vat_value value);
/** Tells v's turn loop that an urgent message was pushed to it. After the
 *  push, from any thread. */
void vat__flag_urgent(vat__vat *v);

/** Runs a signal (in `arg`): its class's deliver. */
void vat__dispatch_signal(vat_turn *turn, void *state, void *arg);

/** A host thread's message `m` (unlinked): delivered now, or VAT_ECLOSED
 *  (then not sent, and not counted) once the system closes. */
int vat__deliver_from_host(vat__msg *m);

/** Runs a dynamic message: the entity's receive with the selector in
 *  `arg` and the value in the message node. */
void vat__dispatch_dynamic(vat_turn *turn, void *state, void *arg);

/** A message that will not run: counted as a dead letter (or a signal's
 *  drop runs). Does not free the node. */
void vat__dead_letter(vat__worker *w, vat__msg *m);
/** A message still queued when its system stopped: a signal's drop runs. */
void vat__drop_at_shutdown(vat__msg *m);
/** After the workers stopped: drops what every vat still queued holds
 *  (signals get their drop) and returns how many messages that was. */
uint64_t vat__drop_stranded(vat_system *sys);

#endif
