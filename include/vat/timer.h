/* libvat — timers: delayed messages, periodic messages, idle timeouts.
 *
 * A timer delivers a message to an entity after a delay (vat_later, like
 * libcppa's delayed_send), or every period (vat_every). It belongs to the vat
 * that armed it: it is armed when the arming turn commits (never if it
 * fails) and cancelled when that vat ends, after which its message is never
 * delivered. An idle timeout (vat_idle_timeout, like libcppa's
 * `receive ... after`) sends a message when the vat has run no turn for a
 * period.
 *
 * Accuracy: a timer never fires before its deadline on the system's clock.
 * It is delivered by a timer thread that sleeps until the next deadline, so
 * on an idle machine the message is queued typically within 0.1 ms after
 * it (a few ms on a loaded one) and then waits its turn in the mailbox like
 * any message. Periodic timers keep their phase (deadline + period), so
 * they do not drift; a period missed entirely is skipped, not repeated.
 * Timers with the same deadline fire in the order they were armed.
 *
 * Shutdown: pending timers do not keep a system from being quiescent. Once
 * vat_system_shutdown starts, timers stop firing; they are cancelled when
 * the system stops.
 *
 * Cost: the timers of a system sit in one 4-ary heap; arming and cancelling
 * are O(log n), under one lock per system. A pending timer costs about
 * 104 bytes (96 for the timer, 8 for its heap slot): a million, ~100 MB.
 * Figures for a million timers are in src/timer/timer.c.
 */
#ifndef VAT_TIMER_H
#define VAT_TIMER_H

#include "vat/core.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct vat_timer vat_timer;

/** Sends `fn(arg)` to `to` after `delay_s` seconds (>= 0). Stores the timer
 *  in *out when `out` is not NULL. Inside a turn; armed when it commits.
 *  Errors: VAT_EINVAL (NULL to/fn, negative or NaN delay), VAT_ENOTINTURN,
 *  VAT_ETURNFAILED. */
int vat_later(vat_turn *turn, double delay_s, vat_ref *to, vat_fn fn, void *arg,
              vat_timer **out);

/** vat_later with a dynamic message. Errors as vat_later (VAT_EINVAL for a
 *  NULL selector). */
int vat_later_msg(vat_turn *turn, double delay_s, vat_ref *to,
                  const vat_atom *selector, vat_value value, vat_timer **out);

/** Sends `fn(arg)` to `to` every `period_s` seconds (> 0), the first time
 *  one period after the commit, until cancelled or the vat ends. Errors as
 *  vat_later (VAT_EINVAL for a period that is not positive). */
int vat_every(vat_turn *turn, double period_s, vat_ref *to, vat_fn fn,
              void *arg, vat_timer **out);

/** Cancels a timer: it will deliver nothing more (a message it delivered
 *  already may still be queued). Also cancels a timer armed earlier in the
 *  same turn. Any thread. Returns VAT_OK, or VAT_ENOTFOUND when it had
 *  already fired (one-shot) or been cancelled; VAT_EINVAL for NULL. */
int vat_timer_cancel(vat_timer *timer);

/** Sets the calling vat's idle timeout: `fn(arg)` is sent to `to` once the
 *  vat has run no turn for `idle_s` seconds, and again after each further
 *  period of silence (the idle message itself counts as a turn when it goes
 *  to this vat). It fires no earlier than `idle_s` after the last turn and
 *  typically within idle_s / 4 after that. `idle_s` 0 clears it; a new
 *  call replaces the old one. Inside a turn; takes effect at commit.
 *  Errors: VAT_EINVAL (negative or NaN idle_s; NULL to/fn with idle_s > 0),
 *  VAT_ENOTINTURN, VAT_ETURNFAILED. */
int vat_idle_timeout(vat_turn *turn, double idle_s, vat_ref *to, vat_fn fn,
                     void *arg);

#ifdef __cplusplus
}
#endif

#endif
