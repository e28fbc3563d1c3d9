#include "progress.h"

#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bench_util.h"

/* Seconds between refreshes: often enough to see it move, rarely enough
 * that the line is readable and the sampling costs nothing. */
#define REFRESH_S 0.25

static bool progress_wanted(void) {
  const char *env = getenv("BENCH_PROGRESS");
  if (env != NULL && strcmp(env, "0") == 0)
    return false;
  return isatty(STDERR_FILENO) == 1;
}

/* The collector stops threads with signals, which interrupt the wait. */
static void wait_quietly(sem_t *done) {
  while (sem_wait(done) != 0 && errno == EINTR) {
  }
}

/* True once `done` is posted; false when REFRESH_S passed first. */
static bool wait_a_while(sem_t *done) {
  struct timespec deadline; /* sem_timedwait's clock is CLOCK_REALTIME */
  clock_gettime(CLOCK_REALTIME, &deadline);
  long ns = deadline.tv_nsec + (long)(REFRESH_S * 1e9);
  deadline.tv_sec += ns / 1000000000L;
  deadline.tv_nsec = ns % 1000000000L;
  for (;;) {
    if (sem_timedwait(done, &deadline) == 0)
      return true;
    if (errno != EINTR)
      return false; /* ETIMEDOUT */
  }
}

static uint64_t turns_run(vat_system *sys) {
  vat_stats st;
  return vat_system_stats(sys, &st) == VAT_OK ? st.delivered : 0;
}

/* 1234567 as "1.23 M": the line stays short and steady. */
static void scaled(char *buf, size_t size, double v) {
  if (v >= 1e9)
    snprintf(buf, size, "%.2f G", v / 1e9);
  else if (v >= 1e6)
    snprintf(buf, size, "%.2f M", v / 1e6);
  else if (v >= 1e3)
    snprintf(buf, size, "%.1f k", v / 1e3);
  else
    snprintf(buf, size, "%.0f", v);
}

/* One line, from its start; ESC [K erases what a longer line left. */
static void show(const char *name, uint64_t done, uint64_t total, double rate) {
  char d[32], t[32] = "", r[32];
  scaled(d, sizeof d, (double)done);
  scaled(r, sizeof r, rate);
  if (total > 0) {
    /* Totals are the benchmark's estimate: never claim 100 % early. */
    unsigned pct = done >= total ? 99 : (unsigned)(done * 100 / total);
    scaled(t, sizeof t, (double)total);
    fprintf(stderr, "\r%s: %s of %s turns (%u%%), %s turns/s\033[K", name, d, t,
            pct, r);
  } else {
    fprintf(stderr, "\r%s: %s turns, %s turns/s\033[K", name, d, r);
  }
}

void bench_wait(vat_system *sys, sem_t *done, const char *name,
                uint64_t turns) {
  if (!progress_wanted()) {
    wait_quietly(done);
    return;
  }
  double last_at = bench_now();
  uint64_t last = turns_run(sys);
  show(name, last, turns, 0); /* at once: a short run shows a line too */
  while (!wait_a_while(done)) {
    double now = bench_now();
    uint64_t now_turns = turns_run(sys);
    show(name, now_turns, turns, (double)(now_turns - last) / (now - last_at));
    last = now_turns;
    last_at = now;
  }
  fputs("\r\033[K", stderr); /* the results print on a clean line */
}
