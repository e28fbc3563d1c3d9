/* What a thread is to the runtime: the turn it runs, the worker it is, and
 * whether it may call the host API (initialised library, registered with
 * the collector, not inside a turn).
 */
#ifndef VAT_CORE_THREAD_H
#define VAT_CORE_THREAD_H

#include <stdbool.h>

#include "vat/core.h"

typedef struct vat__worker vat__worker;

/* The turn running on this thread, and the worker this thread is. Read on
 * every send: the initial-exec model makes that one load, not a call into
 * the dynamic linker (libvat is linked at start-up, not dlopen()ed). */
#define VAT__TLS _Thread_local __attribute__((tls_model("initial-exec")))
extern VAT__TLS vat_turn *vat__current_turn;
extern VAT__TLS vat__worker *vat__current_worker;

/** VAT_OK when the calling thread may use the host API; else the error
 *  (VAT_ENOTINIT, VAT_EINTURN, VAT_ENOTREGISTERED). */
int vat__check_host(void);
/** The calling thread was registered with the collector by its creator. */
void vat__mark_thread_registered(void);
/** vat_init is done: host calls are allowed from here on. */
void vat__mark_initialized(void);
bool vat__is_initialized(void);

#endif
