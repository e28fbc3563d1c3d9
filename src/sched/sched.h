/* The scheduler: worker threads, their queues' policy (next slot, busy list,
 * run queue, shared queue, stealing), parking and quiescence, and the
 * host-driven systems' wake-up descriptor. It implements core/schedule.h;
 * this header is for the system's life cycle (runtime/) and the host
 * loop (embed/).
 */
#ifndef VAT_SCHED_SCHED_H
#define VAT_SCHED_SCHED_H

#include <stdbool.h>
#include <stdint.h>

#include "core/system.h"

/* worker.c */
/** Makes sys's worker structs and, unless host-driven, starts their
 *  threads. VAT_ENOMEM when a thread cannot start (none is left running). */
int vat__workers_start(vat_system *sys);
/** Joins the worker threads (after the state is STOPPED and all woken). */
void vat__workers_join(vat_system *sys);

/* park.c */
void vat__wake_one(vat_system *sys);
void vat__wake_all(vat_system *sys);
/** Under sys->lock: every worker parked, nothing queued, no sender mid-way. */
bool vat__quiescent_locked(vat_system *sys);
/** Waits until quiescent or `timeout_s` passed; returns whether quiet. */
bool vat__wait_quiescent(vat_system *sys, double timeout_s);
/** Waits until no sender from outside is mid-delivery (after STOPPED). */
void vat__wait_senders(vat_system *sys);
/** After the workers stopped: drops what every queued vat still holds
 *  (signals get their drop) and returns how many messages that was. */
uint64_t vat__drop_stranded(vat_system *sys);

/* wake.c: host-driven systems. */
int vat__host_open(vat_system *sys);
void vat__host_close(vat_system *sys);
/** Makes the wake-up descriptor readable (once per run call). Any thread. */
void vat__host_wake(vat_system *sys);
/** The run call, before it looks for work: drains the descriptor. */
void vat__host_clear_wake(vat_system *sys);

#endif
