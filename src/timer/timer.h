/* Timers: a module on the core's hooks (core/hooks.h), with what the
 * promise module and the host loop ask of it. */
#ifndef VAT_TIMER_TIMER_H
#define VAT_TIMER_TIMER_H

#include <stdbool.h>
#include <stdint.h>

#include "core/hooks.h"
#include "core/vat.h"
#include "vat/timer.h"

extern const vat__module vat__timer_module;

/** Arms a one-shot timer that runs `fn(arg)` on the timer thread (outside
 *  any turn, no timer lock held) at `deadline_ns`. Cancel with
 *  vat_timer_cancel. For promise/'s request timeouts. */
vat_timer *vat__timer_call_at(vat_system *sys, uint64_t deadline_ns,
                              void (*fn)(void *arg), void *arg);

/** A timer fault of a simulated world (sim/): the armed timer `v` set
 *  (vat_later, vat_every) that is due first fires `ns` later, never
 *  earlier; a periodic one keeps its period from there. False when `v`
 *  has no armed timer. Host thread of a host-driven system. */
bool vat__timers_postpone(vat__vat *v, uint64_t ns);

/* For host-driven systems (loop/host.c): the next deadline on the system's
 * clock (UINT64_MAX: none), and firing what is due at `now_ns`. */
uint64_t vat__timers_next_deadline(vat_system *sys);
void vat__timers_fire_due(vat_system *sys, uint64_t now_ns);

#endif
