/* What every libvat benchmark program shares: the command line contract
 * (-w workers, -b batch, -h; sizes as positional arguments), a monotonic
 * clock, peak RSS, and the closing RESULT record. */
#ifndef VAT_BENCH_UTIL_H
#define VAT_BENCH_UTIL_H

#include <stdbool.h>
#include <stdint.h>

#include "vat.h"

typedef struct bench_args {
  unsigned workers;  /* -w: default all cores */
  unsigned batch;    /* -b: default the library's */
  uint64_t sizes[4]; /* positional sizes, defaults filled by the caller */
  int nsizes;        /* how many positional sizes were given */
  /* Set by the caller before bench_parse: -w 0 is allowed (a host-driven
   * system, which the program runs itself). */
  bool zero_workers;
} bench_args;

/** Parses argv; on -h prints `usage` and exits 0, on a bad argument prints
 *  it and exits 2. `max_sizes` positional integers are accepted. */
void bench_parse(int argc, char **argv, const char *usage, int max_sizes,
                 bench_args *out);

/** Starts a system with the parsed workers and batch; exits 1 on error. */
vat_system *bench_system(const bench_args *args);

/** Spawns a vat whose first entity has `state_size` bytes of state, stores
 *  its ref in *ref and returns the state, for the caller to set up before
 *  its first send. Exits 1 on error. */
void *bench_spawn(vat_system *sys, size_t state_size, vat_ref **ref);

double bench_now(void);
/** Peak resident set size of this process, in MiB. */
double bench_peak_rss_mb(void);

/** Dies with a message when a libvat call fails. */
void bench_check(int rc, const char *what);

#endif
