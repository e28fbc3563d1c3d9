/* See inject.h. */
#include "sched/inject.h"

#include "sched/task.h"

void vat__inject_init(vat__inject *q) {
  pthread_mutex_init(&q->lock, NULL);
  q->head = q->tail = NULL;
  atomic_init(&q->size, 0);
}

void vat__inject_push(vat__inject *q, vat__task *first, vat__task *last,
                      uint32_t n) {
  last->next = NULL;
  pthread_mutex_lock(&q->lock);
  if (q->tail)
    q->tail->next = first;
  else
    q->head = first;
  q->tail = last;
  atomic_fetch_add_explicit(&q->size, n, memory_order_relaxed);
  pthread_mutex_unlock(&q->lock);
}

vat__task *vat__inject_pop(vat__inject *q) {
  if (vat__inject_size(q) == 0)
    return NULL;
  pthread_mutex_lock(&q->lock);
  vat__task *v = q->head;
  if (v) {
    q->head = v->next;
    if (q->head == NULL)
      q->tail = NULL;
    v->next = NULL; /* a stale link would pin the rest of the chain */
    atomic_fetch_sub_explicit(&q->size, 1, memory_order_relaxed);
  }
  pthread_mutex_unlock(&q->lock);
  return v;
}

/* One lock for several vats: a worker whose run queue ran dry takes a
 * share of the queue, not one vat per lock (skynet's tree overflows the
 * run queues, so many of its vats pass through here; taken one at a time,
 * every worker contends for this lock per vat). The walk to the cut
 * touches each vat's first line, which the taker is about to run. */
vat__task *vat__inject_pop_batch(vat__inject *q, uint32_t max,
                                 uint32_t *count) {
  *count = 0;
  if (vat__inject_size(q) == 0)
    return NULL;
  pthread_mutex_lock(&q->lock);
  vat__task *first = q->head, *last = NULL;
  uint32_t n = 0;
  for (vat__task *v = first; v != NULL && n < max; v = v->next, n++)
    last = v;
  if (last != NULL) {
    q->head = last->next;
    if (q->head == NULL)
      q->tail = NULL;
    last->next = NULL;
    atomic_fetch_sub_explicit(&q->size, n, memory_order_relaxed);
  }
  pthread_mutex_unlock(&q->lock);
  *count = n;
  return n ? first : NULL;
}
