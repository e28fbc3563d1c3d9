/* Process set-up: the collector, the well-known atoms, and the modules
 * built on the core. */
#include <stdlib.h>

#include "core/hooks.h"
#include "core/reasons.h"
#include "core/thread.h"
#include "exits/exits.h"
#include "promise/promise.h"
#include "runtime/collector.h"
#include "timer/timer.h"
#include "trace/trace.h"
#include "util/gc.h"

enum {
  INITIAL_HEAP_BYTES = 4 << 20,
  /* The most vat_system_new makes room for (see vat__collector_reserve). */
  WORKERS_HEAP_BYTES_MAX = 64 << 20,
};

/* Refs point inside objects: an entity's ref is the address of the entity
 * inside its vat (64 bytes in for the first, anywhere in a state for the
 * others), and the runtime keeps pointers into the middle of its own
 * objects too (a vat's exits inside its extension block, values inside
 * messages). With interior-pointer recognition off, a vat reached only
 * through refs is garbage to the collector. Registering displacements
 * (GC_register_displacement) would not save it: they must be known before
 * the first allocation and cover every offset ever used, and an entity's
 * offset depends on the states the program chooses. So the library
 * refuses to start rather than lose vats later. */
static bool interior_pointers_on(void) {
  return GC_get_all_interior_pointers() != 0;
}

/* Grows the heap to `bytes` unless it is that large already or the user
 * chose its first size (an explicit GC_INITIAL_HEAP_SIZE wins). */
static void heap_at_least(size_t bytes) {
  if (getenv("GC_INITIAL_HEAP_SIZE") == NULL && GC_get_heap_size() < bytes)
    GC_expand_hp(bytes - GC_get_heap_size());
}

/* The collector collects when the heap is used up (with a small live set,
 * that is every heap's worth of allocation), and each collection stops
 * every registered thread. Workers that allocate (spawning vats) fill a
 * heap made for one in 1/N of the time: with the first heap alone, N
 * workers would collect N times as often, each time stopping N threads,
 * and the stops would grow as N squared (two workers spawning a million
 * vats: 54 collections with 4 MiB, 26 with 8). So each system makes room
 * for INITIAL_HEAP_BYTES per worker, up to WORKERS_HEAP_BYTES_MAX: with
 * the cap, 64 workers collect no more often per vat than 16 do. The heap
 * grows as the collector likes after that; it never shrinks for this. */
void vat__collector_reserve(unsigned workers) {
  size_t bytes = (size_t)workers * INITIAL_HEAP_BYTES;
  heap_at_least(bytes < WORKERS_HEAP_BYTES_MAX ? bytes
                                               : WORKERS_HEAP_BYTES_MAX);
}

int vat_init(void) {
  if (vat__is_initialized())
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
  heap_at_least(INITIAL_HEAP_BYTES);
#if VAT_GC_NO_COLLECT
  GC_disable();
#endif
  vat__reasons_intern();
  /* The order their hooks run in: see core/hooks.h. */
  vat__module_register(&vat__timer_module);
  vat__module_register(&vat__promise_module);
  vat__module_register(&vat__exits_module);
  vat__module_register(&vat__trace_module); /* writes after the others stop */
  vat__mark_initialized();
  return VAT_OK;
}
