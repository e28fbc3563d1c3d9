/* Process set-up: the collector, thread registration, and the checks every
 * public entry point makes on its caller. */
#include <stdatomic.h>
#include <stdlib.h>

#include "internal.h"
#include "vat_gc.h"

enum { INITIAL_HEAP_BYTES = 4 << 20 };

VAT__TLS vat_turn *vat__current_turn;
VAT__TLS vat__worker *vat__current_worker;

/* Whether this thread is known to be registered with the collector; asking
 * the collector takes its global lock, so the answer is cached. */
static VAT__TLS bool thread_registered;
static atomic_bool initialized;

const vat_atom *vat__atom_normal, *vat__atom_killed, *vat__atom_noproc;

/* Refs point inside objects: an entity's ref is the address of the entity
 * inside its vat (64 bytes in for the first, anywhere in a state for the
 * others), and the runtime keeps pointers into the middle of its own
 * objects too (a vat's exits inside its cold block, values inside
 * messages). With interior-pointer recognition off, a vat reached only
 * through refs is garbage to the collector. Registering displacements
 * (GC_register_displacement) would not save it: they must be known before
 * the first allocation and cover every offset ever used, and an entity's
 * offset depends on the states the program chooses. So the library
 * refuses to start rather than lose vats later. */
static bool interior_pointers_on(void) {
  return GC_get_all_interior_pointers() != 0;
}

int vat_init(void) {
  if (atomic_load_explicit(&initialized, memory_order_acquire))
    return VAT_OK;
  GC_INIT();
  if (!interior_pointers_on())
    return VAT_EGCCONFIG;
  /* Lets host threads register themselves; also starts parallel markers. */
  GC_allow_register_threads();
  /* A roomier first heap than the collector's few hundred kilobytes: it
   * collects when a fraction of the heap was allocated since the last
   * time, so a program that makes and ends many short-lived vats would
   * collect every few hundred kilobytes (a million vats: 930 collections
   * and 0.6 s; with 4 MiB, 52 collections and 0.04 s). Larger is not
   * better: a turn's allocations then spread over more memory and fall out
   * of the cache. An explicit GC_INITIAL_HEAP_SIZE wins. */
  if (getenv("GC_INITIAL_HEAP_SIZE") == NULL &&
      GC_get_heap_size() < INITIAL_HEAP_BYTES)
    GC_expand_hp(INITIAL_HEAP_BYTES - GC_get_heap_size());
#if VAT_GC_NO_COLLECT
  GC_disable();
#endif
  vat__atom_normal = vat_atom_intern("normal");
  vat__atom_killed = vat_atom_intern("killed");
  vat__atom_noproc = vat_atom_intern("noproc");
  thread_registered = true;
  /* Release: the atoms above are visible to any thread that sees it. */
  atomic_store_explicit(&initialized, true, memory_order_release);
  return VAT_OK;
}

void vat__mark_thread_registered(void) {
  thread_registered = true;
}

static bool initialised(void) {
  return atomic_load_explicit(&initialized, memory_order_acquire);
}

static bool registered(void) {
  if (!thread_registered && GC_thread_is_registered())
    thread_registered = true;
  return thread_registered;
}

int vat_thread_register(void) {
  if (!initialised())
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
  return VAT_OK;
}

int vat_thread_unregister(void) {
  if (!initialised())
    return VAT_ENOTINIT;
  if (vat__current_turn != NULL)
    return VAT_EINTURN;
  if (!registered())
    return VAT_ENOTREGISTERED;
  GC_unregister_my_thread();
  thread_registered = false;
  return VAT_OK;
}

int vat__check_host(void) {
  if (!initialised())
    return VAT_ENOTINIT;
  if (vat__current_turn != NULL)
    return VAT_EINTURN;
  if (!registered())
    return VAT_ENOTREGISTERED;
  return VAT_OK;
}

const vat_atom *vat_atom_normal(void) {
  return vat__atom_normal;
}
const vat_atom *vat_atom_killed(void) {
  return vat__atom_killed;
}
const vat_atom *vat_atom_noproc(void) {
  return vat__atom_noproc;
}
