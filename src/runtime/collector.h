/* The collector's heap, as the runtime sizes it (runtime/init.c), for the
 * system life cycle. (Not timer/heap.c, the timers' deadline heap.) */
#ifndef VAT_RUNTIME_COLLECTOR_H
#define VAT_RUNTIME_COLLECTOR_H

/** Makes room in the collector's heap for a system of `workers` workers:
 *  4 MiB each, up to 64 MiB in all, unless GC_INITIAL_HEAP_SIZE is set.
 *  Host thread, after vat_init. */
void vat__collector_reserve(unsigned workers);

#endif
