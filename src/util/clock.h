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

/** A caller's duration in seconds as nanoseconds, capped at 1e9 s.
 *  VAT_EINVAL for NaN or a negative value, and for 0 when `positive`.
 *  A positive duration shorter than a nanosecond counts as one. */
int vat__seconds_to_ns(double seconds, bool positive, uint64_t *out);

#endif
