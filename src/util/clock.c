/* See clock.h. */
#include "util/clock.h"

#include <math.h>

#include "vat/error.h"

enum { NS_PER_S = 1000000000 };

/* The longest duration the library accepts, in seconds (~31 years): past
 * it a double no longer converts into uint64_t nanoseconds safely. */
#define MAX_SECONDS 1e9

uint64_t vat__monotonic_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * NS_PER_S + (uint64_t)ts.tv_nsec;
}

struct timespec vat__timespec_of(uint64_t ns) {
  return (struct timespec){.tv_sec = (time_t)(ns / NS_PER_S),
                           .tv_nsec = (long)(ns % NS_PER_S)};
}

struct timespec vat__deadline_after(double seconds) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  if (!(seconds > 0))
    return ts;
  if (seconds > MAX_SECONDS)
    seconds = MAX_SECONDS;
  double whole = floor(seconds);
  ts.tv_sec += (time_t)whole;
  ts.tv_nsec += (long)((seconds - whole) * 1e9);
  if (ts.tv_nsec >= NS_PER_S) {
    ts.tv_sec++;
    ts.tv_nsec -= NS_PER_S;
  }
  return ts;
}

void vat__cond_init_monotonic(pthread_cond_t *cond) {
  pthread_condattr_t attr;
  pthread_condattr_init(&attr);
  pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
  pthread_cond_init(cond, &attr);
  pthread_condattr_destroy(&attr);
}

int vat__seconds_to_ns(double seconds, unsigned flags, uint64_t *out) {
  if (!(seconds >= 0) || ((flags & VAT__NS_POSITIVE) && !(seconds > 0)))
    return VAT_EINVAL;
  if (seconds > MAX_SECONDS)
    seconds = MAX_SECONDS;
  *out = (uint64_t)(seconds * 1e9);
  if ((flags & VAT__NS_KEEP_NONZERO) && seconds > 0 && *out == 0)
    *out = 1;
  return VAT_OK;
}
