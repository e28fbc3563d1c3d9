/* A system's shared queue of runnable vats: where host threads, other
 * systems and full run queues put vats. A mutex guards it; it is off the
 * hot path (workers look at it when their own queue is empty, and every so
 * often for fairness). `size` lets a worker skip the lock when it is empty.
 */
#ifndef VAT_SCHED_INJECT_H
#define VAT_SCHED_INJECT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "sched/task.h"

typedef struct vat__inject {
  pthread_mutex_t lock;
  vat__task *head, *tail; /* linked through next */
  _Atomic uint32_t size;
} vat__inject;

void vat__inject_init(vat__inject *q);
/** Appends the chain first..last (linked through next) of `n` vats. */
void vat__inject_push(vat__inject *q, vat__task *first, vat__task *last,
                      uint32_t n);
/** Takes the oldest vat, or NULL. */
vat__task *vat__inject_pop(vat__inject *q);
/** Takes up to `max` (at least 1) of the oldest vats, linked oldest first
 *  through next, the last link NULL; *count gets their number. NULL
 *  when empty. */
vat__task *vat__inject_pop_batch(vat__inject *q, uint32_t max, uint32_t *count);
static inline uint32_t vat__inject_size(vat__inject *q) {
  return atomic_load_explicit(&q->size, memory_order_relaxed);
}

#endif
