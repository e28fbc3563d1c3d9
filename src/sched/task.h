/* What the scheduler knows of a vat: a link. A vat embeds one (core/vat.h)
 * and is queued by it; the queues below hold tasks and nothing of turns,
 * messages or systems, so that sched/ is the floor under the core.
 */
#ifndef VAT_SCHED_TASK_H
#define VAT_SCHED_TASK_H

#include <stddef.h>

typedef struct vat__task {
  /* The next task in a shared queue's chain, or in a batch taken from one;
   * NULL while the task is alone or in a ring's slot. */
  struct vat__task *next;
} vat__task;

#endif
