/* Counters one thread writes and others read. */
#ifndef VAT_UTIL_COUNTER_H
#define VAT_UTIL_COUNTER_H

#include <stdatomic.h>
#include <stdint.h>

/* Relaxed atomics, so that an increment needs no locked instruction: the
 * one writer loads and stores, readers see some recent value. */
typedef _Atomic uint64_t vat__counter;

static inline void vat__count(vat__counter *c, uint64_t n) {
  atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + n,
                        memory_order_relaxed);
}

#endif
