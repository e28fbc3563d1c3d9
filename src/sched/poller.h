/* The process's idle poller (vat/host.h, vat_idle_poller_set): the host's
 * I/O that idle workers poll themselves. The workers' loop polls it
 * (loop/threads.c); the scheduler wakes a worker blocked in it through its
 * `wake` when no other parked worker is left to signal (park.c).
 */
#ifndef VAT_SCHED_POLLER_H
#define VAT_SCHED_POLLER_H

#include "sched/queues.h"
#include "vat/host.h"

/** The poller, or NULL when none is set. Any thread. */
const vat_idle_poller *vat__idle_poller(void);

/** The scheduler a worker of which this thread is, while it polls: a
 *  send it makes to that scheduler's vats wakes no one, as the worker
 *  looks for work right after the poll (park.c). NULL otherwise. */
extern _Thread_local const vat__sched *vat__polling_for;

#endif
