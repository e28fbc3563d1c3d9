/* See poller.h. Set once: a worker reads the pointer where it idles, with
 * no lock, and would have to be waited for if it could change. */
#include <stdatomic.h>

#include "sched/poller.h"

static vat_idle_poller the_poller;
static _Atomic(const vat_idle_poller *) current;
static atomic_flag claimed = ATOMIC_FLAG_INIT;

_Thread_local const vat__sched *vat__polling_for;

const vat_idle_poller *vat__idle_poller(void) {
  return atomic_load_explicit(&current, memory_order_acquire);
}

int vat_idle_poller_set(const vat_idle_poller *p) {
  if (p == NULL || p->acquire == NULL || p->poll == NULL ||
      p->release == NULL || p->wake == NULL)
    return VAT_EINVAL;
  if (atomic_flag_test_and_set(&claimed))
    return VAT_EBUSY;
  the_poller = *p;
  /* release: a worker that sees the pointer sees the copy. */
  atomic_store_explicit(&current, &the_poller, memory_order_release);
  return VAT_OK;
}
