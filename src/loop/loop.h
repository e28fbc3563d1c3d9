/* What the system's life cycle (runtime/) asks of the loops that drive
 * turns: the worker threads (threads.c) and the host's run calls
 * (host.c), side by side on top of the core and the scheduler.
 */
#ifndef VAT_LOOP_LOOP_H
#define VAT_LOOP_LOOP_H

#include <stdbool.h>

#include "core/system.h"

/* threads.c */
/** Makes sys's worker structs and, unless host-driven, starts their
 *  threads. VAT_ENOMEM when a thread cannot start (none is left running). */
int vat__workers_start(vat_system *sys);
/** Joins the worker threads (after the state is STOPPED and all woken). */
void vat__workers_join(vat_system *sys);

/* host.c */
/** Host-driven shutdown: runs the system until quiescent or the deadline.
 *  Returns whether it went quiet. */
bool vat__host_drain(vat_system *sys, double timeout_s);

#endif
