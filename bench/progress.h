/* Progress on stderr while a benchmark runs, for the person watching it:
 * the turns run so far and the current rate, on one line overwritten a few
 * times a second, cleared before the benchmark prints its results. Only
 * when stderr is a terminal: in a log or a pipe nothing is written, and
 * the RESULT line stays last. */
#ifndef VAT_BENCH_PROGRESS_H
#define VAT_BENCH_PROGRESS_H

#include <semaphore.h>
#include <stdint.h>

#include "vat.h"

/** Waits until `done` is posted (the benchmark's end), showing progress
 *  meanwhile when stderr is a terminal and BENCH_PROGRESS is not "0".
 *  `name` labels the line; `turns` is how many turns the run makes in all,
 *  for a percentage (0: unknown, none shown).
 *  The main thread samples the counters the system keeps anyway
 *  (vat_system_stats) between waits of a quarter second; the workers do
 *  nothing more, so a timed run is unchanged. */
void bench_wait(vat_system *sys, sem_t *done, const char *name, uint64_t turns);

#endif
