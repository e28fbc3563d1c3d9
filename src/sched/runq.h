/* A worker's run queue: a bounded ring of runnable vats. The owner pushes
 * at the tail and pops at the head; idle workers steal half from the head.
 *
 * Only the owner writes `tail`; `head` moves by CAS, by the owner (pop) or a
 * thief (steal). A slot is written only by the owner and only while it is
 * outside [head, tail), so a thief that read slots and then wins its CAS on
 * `head` read values nobody overwrote.
 */
#ifndef VAT_SCHED_RUNQ_H
#define VAT_SCHED_RUNQ_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "sched/task.h"

#define VAT__RUNQ_SIZE 256u

typedef struct vat__runq {
  _Atomic uint32_t head; /* owner and thieves: CAS */
  _Atomic uint32_t tail; /* owner: store */
  _Atomic(vat__task *) slots[VAT__RUNQ_SIZE];
} vat__runq;

void vat__runq_init(vat__runq *q);

/** Owner: appends `v`. Returns false when the queue is full. */
bool vat__runq_push(vat__runq *q, vat__task *v);

/** Owner: takes the oldest vat, or NULL. */
vat__task *vat__runq_pop(vat__runq *q);

/** Owner of `q`, when full: takes the older half out of the queue, linked
 *  through `next` oldest first; *count gets their number. NULL when
 *  thieves emptied it meanwhile. */
vat__task *vat__runq_take_half(vat__runq *q, uint32_t *count);

/** A thief (owner of `into`): moves about half of `from` into `into` and
 *  returns one of them to run, or NULL when there was nothing to steal. */
vat__task *vat__runq_steal(vat__runq *into, vat__runq *from);

/** Owner: takes the vat `k` places behind the oldest (k below the size),
 *  the oldest taking its place: the deterministic mode's draw. */
vat__task *vat__runq_draw(vat__runq *q, uint32_t k);

/** Any thread: how many vats are queued (a snapshot). */
uint32_t vat__runq_size(vat__runq *q);

#endif
