/* A campaign's progress line on a terminal (vat/sim.h, "Progress"): the
 * seeds run of the count, seeds and turns per second, the seeds that
 * failed; redrawn a few times a second in place and erased at the end. */
#ifndef VAT_SIM_PROGRESS_H
#define VAT_SIM_PROGRESS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct vat__sim_progress {
  int fd;        /* where the line goes; -1: nowhere */
  bool shown;    /* a line is on the screen, to be erased */
  char name[48]; /* the scenario's */
  uint64_t total;
  uint64_t start_ns, next_ns; /* monotonic: the campaign's start, next draw */
} vat__sim_progress;

/** Starts `p` for a campaign of `total` seeds of scenario `name` (may be
 *  NULL): the line goes to `fd` if it is a terminal and VAT_SIM_PROGRESS
 *  is not "0", first after a second (at once with VAT_SIM_PROGRESS=1).
 *  A campaign of one seed shows none. */
void vat__sim_progress_begin(vat__sim_progress *p, int fd, const char *name,
                             uint64_t total);

/** Whether a draw is due; cheap (one clock read). `p` may be NULL. */
bool vat__sim_progress_due(const vat__sim_progress *p);

/** Draws the line when one is due: `seeds` run, `turns` over them,
 *  `failed` seeds. `p` may be NULL. */
void vat__sim_progress_update(vat__sim_progress *p, uint64_t seeds,
                              uint64_t turns, uint64_t failed);

/** Erases the line, if one was drawn. `p` may be NULL. */
void vat__sim_progress_end(vat__sim_progress *p);

/** The line's text, without the terminal's controls, for `seconds` of
 *  campaign: "sim bank: 1234 of 10000 seeds (12%), 5.1 k seeds/s,
 *  410.2 k turns/s, 0 failed". Returns what snprintf does. */
int vat__sim_progress_format(char *buf, size_t size, const char *name,
                             uint64_t seeds, uint64_t total, uint64_t turns,
                             uint64_t failed, double seconds);

#endif
