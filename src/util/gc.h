/* The one place that includes the collector. GC_THREADS before gc.h makes
 * pthread_create register the threads it makes, so their stacks are
 * scanned. */
#ifndef VAT_UTIL_GC_H
#define VAT_UTIL_GC_H

#ifndef GC_THREADS
#define GC_THREADS 1
#endif
#include <gc/gc.h>

#endif
