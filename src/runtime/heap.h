/* The runtime's heap policy (runtime/init.c), for the system life cycle. */
#ifndef VAT_RUNTIME_HEAP_H
#define VAT_RUNTIME_HEAP_H

/** Makes room in the collector's heap for a system of `workers` workers:
 *  4 MiB each, up to 64 MiB in all, unless GC_INITIAL_HEAP_SIZE is set.
 *  Host thread, after vat_init. */
void vat__heap_for_workers(unsigned workers);

#endif
