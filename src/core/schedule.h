/* What the core asks of the scheduler: to run a vat that became runnable,
 * and to hear that a sender from outside finished. Declared here, defined
 * in sched/, so that the core includes nothing of sched/ while its hot
 * path keeps a direct call (sched/ depends on core/, never the reverse).
 */
#ifndef VAT_CORE_SCHEDULE_H
#define VAT_CORE_SCHEDULE_H

#include "core/vat.h"

/** A vat whose mailbox went from idle to busy, on worker `w` (any
 *  system's). It runs next on `w` when it is w's system's. */
void vat__schedule(vat__worker *w, vat__vat *v);
/** A vat to run on `w` or, sooner, on an idle worker that takes it from
 *  w's run queue (a muted sender released by the vat w runs: the two
 *  then run in parallel). From w's own thread; otherwise, or with w NULL
 *  or of another system, as vat__schedule_external. */
void vat__schedule_stealable(vat__worker *w, vat__vat *v);
/** The same from outside sys's workers: host threads, other systems. */
void vat__schedule_external(vat_system *sys, vat__vat *v);
/** Wakes a parked worker, if one is parked and none spins, for the vats
 *  `w` queued where others may take them since the last call (while
 *  w->wake_owed is set). The vat__schedule calls of a commit owe one
 *  wake-up together, paid once its sends are out (core/turn.c), or at
 *  once for a send made now (core/deliver.c). From w's own thread. */
void vat__pay_wake(vat__worker *w);
/** Wakes whoever waits for sys to go quiet (shutdown). */
void vat__notify_quiet(vat_system *sys);

#endif
