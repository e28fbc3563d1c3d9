/* Threads: the turn and worker each thread is running, registration with
 * the collector, and the check every host entry point makes on its
 * caller. */
#include "core/thread.h"

#include <stdatomic.h>

#include "core/worker.h"
#include "util/gc.h"

VAT__TLS vat_turn *vat__current_turn;
VAT__TLS vat__worker *vat__current_worker;

/* Whether this thread is known to be registered with the collector; asking
 * the collector takes its global lock, so the answer is cached. */
static VAT__TLS bool thread_registered;
/* Whether vat_thread_register made the registration, so that
 * vat_thread_unregister is the one to undo it. A thread the collector
 * registered itself (GC_pthread_create) is unregistered by the collector
 * when it returns; doing it before as well would hand its free lists back
 * twice, the second time lists the first had poisoned. */
static VAT__TLS bool registered_here;
static atomic_bool initialized;

void vat__mark_initialized(void) {
  thread_registered = true;
  /* Release: what vat_init set up (atoms, modules) is visible to any
   * thread that sees it. */
  atomic_store_explicit(&initialized, true, memory_order_release);
}

bool vat__is_initialized(void) {
  return atomic_load_explicit(&initialized, memory_order_acquire);
}

void vat__mark_thread_registered(void) {
  thread_registered = true;
}

static bool registered(void) {
  if (!thread_registered && GC_thread_is_registered())
    thread_registered = true;
  return thread_registered;
}

int vat_thread_register(void) {
  if (!vat__is_initialized())
    return VAT_ENOTINIT;
  if (registered())
    return VAT_OK;
  struct GC_stack_base base;
  if (GC_get_stack_base(&base) != GC_SUCCESS)
    return VAT_ENOTSUP;
  int rc = GC_register_my_thread(&base);
  if (rc != GC_SUCCESS && rc != GC_DUPLICATE)
    return VAT_ENOTSUP;
  thread_registered = true;
  registered_here = rc == GC_SUCCESS;
  return VAT_OK;
}

int vat_thread_unregister(void) {
  int rc = vat__check_host();
  if (rc != VAT_OK)
    return rc;
  if (!registered_here)
    return VAT_OK; /* the collector's to undo */
  GC_unregister_my_thread();
  registered_here = false;
  thread_registered = false;
  return VAT_OK;
}

int vat__check_host(void) {
  if (!vat__is_initialized())
    return VAT_ENOTINIT;
  if (vat__current_turn != NULL)
    return VAT_EINTURN;
  if (!registered())
    return VAT_ENOTREGISTERED;
  return VAT_OK;
}
