/* See progress.h. Written with write(2), one call per draw: the line is
 * whole on the screen whatever else writes to stderr between draws. */
#include "sim/progress.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util/clock.h"

enum {
  /* A campaign shorter than this shows nothing: the short ones a test
   * suite runs by the hundred would only flicker. */
  FIRST_DRAW_NS = 1000000000,
  /* Often enough to see it move, rarely enough to read it. */
  REDRAW_NS = 250000000,
};

void vat__sim_progress_begin(vat__sim_progress *p, int fd, const char *name,
                             uint64_t total) {
  memset(p, 0, sizeof *p);
  p->fd = -1;
  const char *env = getenv("VAT_SIM_PROGRESS");
  bool off = env != NULL && strcmp(env, "0") == 0;
  if (total < 2 || off || fd < 0 || isatty(fd) != 1)
    return;
  p->fd = fd;
  p->total = total;
  snprintf(p->name, sizeof p->name, "%s", name != NULL ? name : "?");
  p->start_ns = vat__monotonic_ns();
  bool at_once = env != NULL && strcmp(env, "1") == 0;
  p->next_ns = p->start_ns + (at_once ? 0 : FIRST_DRAW_NS);
}

bool vat__sim_progress_due(const vat__sim_progress *p) {
  return p != NULL && p->fd >= 0 && vat__monotonic_ns() >= p->next_ns;
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

int vat__sim_progress_format(char *buf, size_t size, const char *name,
                             uint64_t seeds, uint64_t total, uint64_t turns,
                             uint64_t failed, double seconds) {
  char seed_rate[32], turn_rate[32];
  double s = seconds > 0 ? seconds : 0;
  scaled(seed_rate, sizeof seed_rate, s > 0 ? (double)seeds / s : 0);
  scaled(turn_rate, sizeof turn_rate, s > 0 ? (double)turns / s : 0);
  /* Whole percent, rounded down: 100% only once every seed ran. */
  unsigned pct =
      total > 0 ? (unsigned)((double)seeds * 100 / (double)total) : 0;
  if (pct >= 100 && seeds < total)
    pct = 99;
  return snprintf(buf, size,
                  "sim %s: %" PRIu64 " of %" PRIu64 " seeds (%u%%), %s seeds/s,"
                  " %s turns/s, %" PRIu64 " failed",
                  name, seeds, total, pct, seed_rate, turn_rate, failed);
}

/* The whole of `len` bytes, or as much as the terminal takes: progress is
 * never worth failing a campaign for. */
static void put(int fd, const char *s, size_t len) {
  while (len > 0) {
    ssize_t n = write(fd, s, len);
    if (n <= 0)
      return;
    s += n;
    len -= (size_t)n;
  }
}

void vat__sim_progress_update(vat__sim_progress *p, uint64_t seeds,
                              uint64_t turns, uint64_t failed) {
  if (!vat__sim_progress_due(p))
    return;
  uint64_t now = vat__monotonic_ns();
  char line[256];
  /* CR goes back to the line's start; ESC [K erases what a longer line
   * left after this one. */
  int n = vat__sim_progress_format(line + 1, sizeof line - 4, p->name, seeds,
                                   p->total, turns, failed,
                                   (double)(now - p->start_ns) * 1e-9);
  if (n < 0)
    return;
  size_t len = 1 + ((size_t)n < sizeof line - 5 ? (size_t)n : sizeof line - 5);
  line[0] = '\r';
  memcpy(line + len, "\033[K", 3);
  put(p->fd, line, len + 3);
  p->shown = true;
  p->next_ns = now + REDRAW_NS;
}

void vat__sim_progress_end(vat__sim_progress *p) {
  if (p == NULL || !p->shown)
    return;
  put(p->fd, "\r\033[K", 4);
  p->shown = false;
}
