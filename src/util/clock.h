/* Time, in one place: nanoseconds on the monotonic clock, deadlines for
 * condition variables made with that clock, and the checked conversion of
 * a caller's seconds into nanoseconds. */
#ifndef VAT_UTIL_CLOCK_H
#define VAT_UTIL_CLOCK_H

#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include <pthread.h>

/** CLOCK_MONOTONIC, in nanoseconds. Any thread. */
uint64_t vat__monotonic_ns(void);

/** `ns` on the monotonic clock as a timespec, for pthread_cond_timedwait
 *  on a condition variable made by vat__cond_init_monotonic. */
struct timespec vat__timespec_of(uint64_t ns);

/** CLOCK_MONOTONIC now plus `seconds` (now for seconds <= 0, capped at
 *  1e9 s), as a timespec for timed waits. */
struct timespec vat__deadline_after(double seconds);

/** Initialises `cond` to time its waits on CLOCK_MONOTONIC. */
void vat__cond_init_monotonic(pthread_cond_t *cond);

/* How vat__seconds_to_ns treats a duration near 0. */
enum {
  /** 0 is VAT_EINVAL (a period). */
  VAT__NS_POSITIVE = 1,
  /** A positive duration shorter than a nanosecond counts as one, where 0
   *  would mean something else (a timeout of 0: none; a period). */
  VAT__NS_KEEP_NONZERO = 2,
};

/** A caller's duration in seconds as nanoseconds (truncated), capped at
 *  1e9 s. VAT_EINVAL for NaN or a negative value; `flags` above. */
int vat__seconds_to_ns(double seconds, unsigned flags, uint64_t *out);

#endif
