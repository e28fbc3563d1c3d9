/* The scheduler: where runnable vats wait and which runs next. It knows
 * tasks (sched/task.h) and its own blocks (sched/queues.h), and nothing of
 * turns, messages or systems: the core above calls it when a vat becomes
 * runnable, and the loops on top (loop/) ask it what to run and park
 * their threads on it.
 */
#ifndef VAT_SCHED_SCHED_H
#define VAT_SCHED_SCHED_H

#include <stdbool.h>
#include <stdint.h>

#include "sched/queues.h"

/* --- Setting up (place.c) ------------------------------------------------ */

/** Initialises `s` for `n` runners (host-driven: one, no threads, the
 *  shared queue as its only way in from outside). VAT_ENOMEM when the
 *  host's wake-up descriptor cannot be made. */
int vat__sched_init(vat__sched *s, vat__runner **runners, unsigned n,
                    bool host_driven);
/** Initialises the index-th runner of `s` (its steal victims' seed). */
void vat__runner_init(vat__runner *r, vat__sched *s, unsigned index);

/* --- A vat became runnable (place.c) ------------------------------------ */

/** A vat whose mailbox went from idle to busy, made runnable by a turn or
 *  a send on runner `r`, of r's own system (the caller checks). It runs
 *  next on r; the vat it displaces goes where r takes it soon and others
 *  may steal it, owing a wake-up (vat__pay_wake). */
void vat__schedule(vat__runner *r, vat__task *t);
/** A vat to run on `r` or, sooner, on an idle runner that steals it from
 *  r's run queue (a muted sender released by the vat r runs: the two then
 *  run in parallel). From r's own thread, of r's system (the caller
 *  checks); in a host-driven system, as vat__schedule_external. */
void vat__schedule_stealable(vat__runner *r, vat__task *t);
/** The same from outside s's runners: host threads, other systems. */
void vat__schedule_external(vat__sched *s, vat__task *t);
/** Wakes a parked runner, if one is parked and none spins, for the vats
 *  `r` queued where others may take them since the last call (while
 *  r->wake_owed is set). The vat__schedule calls of a commit owe one
 *  wake-up together, paid once its sends are out. From r's own thread. */
void vat__pay_wake(vat__runner *r);
/** After a batch that used up its budget, `t` still has work. The loop
 *  says whether it is overloaded (core/overload.h): such a vat goes where an
 *  idle runner can steal it, unless it is alone here. */
void vat__requeue(vat__runner *r, vat__task *t, bool overloaded);

/* --- Which vat runs next (pick.h, pick.c) ------------------------------- */

/* vat__pick(r), the worker threads' choice, is inline in sched/pick.h. */
/** A host-driven system's choice: first in, first out (next slot, run
 *  queue, shared queue). NULL when none is ready. */
vat__task *vat__pick_fifo(vat__runner *r);
/** Deterministic mode's choice: drawn from every ready vat with the
 *  seeded generator (s->det_rng). NULL when none is ready. */
vat__task *vat__pick_seeded(vat__runner *r);
/** What vat__pick_seeded draws from, as it sees it: every ready vat
 *  moved to the run queue (up to its size), their count returned and,
 *  when `ready` is not NULL (VAT__RUNQ_SIZE slots), the vats stored
 *  oldest first. The queue is left as the pick would find it, so a
 *  simulated world (src/sim/) can see what each of its systems has ready
 *  before it chooses which one runs. */
uint32_t vat__pick_seeded_ready(vat__runner *r, vat__task **ready);
/** A host-driven system has a vat ready. */
bool vat__sched_ready(vat__runner *r);
/** After the runners stopped: takes any vat still queued anywhere (next
 *  slots, busy lists, deques, run queues, the shared queue), or NULL. */
vat__task *vat__sched_take_stranded(vat__sched *s);
/** Any queue where a runner could find work (a snapshot, any thread). */
bool vat__work_visible(vat__sched *s);

/* --- Parking and quiescence (park.c) ------------------------------------ */

void vat__wake_one(vat__sched *s);
void vat__wake_all(vat__sched *s);
/** Under s->lock: every runner parked, nothing queued, no sender mid-way. */
bool vat__quiescent_locked(vat__sched *s);
/** Waits until quiescent or `timeout_s` passed; returns whether quiet. */
bool vat__wait_quiescent(vat__sched *s, double timeout_s);
/** Waits until no sender from outside is mid-delivery. */
void vat__wait_senders(vat__sched *s);
/** Wakes whoever waits for s to go quiet (shutdown). */
void vat__notify_quiet(vat__sched *s);

/* --- Host-driven systems' wake-up descriptor (wake.c) ------------------- */

/** Makes the descriptor (place.c, vat__sched_init). */
int vat__host_open(vat__sched *s);
void vat__host_close(vat__sched *s);
/** Makes the wake-up descriptor readable (once per run call). Any thread. */
void vat__host_wake(vat__sched *s);
/** The run call, before it looks for work: drains the descriptor. */
void vat__host_clear_wake(vat__sched *s);

#endif
