/* A thief's gauge of what its steals from fresh deques were worth.
 *
 * Moving a vat to another core costs its lines, its message node and
 * the memory the collector later recycles on the core that made it: a
 * few cache misses, paid mostly by the victim. A vat that then runs for
 * microseconds repays that; one that runs a turn of a hundred
 * nanoseconds and ends does not (spawn on two workers: 0.166 s with
 * every such steal, 0.113 s with none, 0.097 s on one worker). So a
 * thief times its steals: the time from one steal to the next, over the
 * vats the first one took, is what each of those vats (and what they
 * woke) ran for on the thief. After TINY_STEALS_MAX tiny steals in a
 * row it leaves a victim's fresh vats alone unless the victim is falling
 * behind (FRESH_BEHIND vats waiting), and tries again TINY_RETRY_NS
 * after its last steal, so that work that grew heavier is taken again
 * within that time: the delay a long turn's waiting vats may see once
 * tiny work came before. A steal whose vats ran longer resets the gauge.
 * Retry periods tried on spawn, two workers, medians of 3: 20 us, 0.17 s
 * (no gain); 200 us, 0.13 s; 2 ms, 0.12 s. Skynet, whose stolen vats
 * are whole subtrees, never trips it.
 * Owner only: each worker has its own, written from its thread alone.
 */
#ifndef VAT_CORE_STEAL_GAUGE_H
#define VAT_CORE_STEAL_GAUGE_H

#include <stdbool.h>
#include <stdint.h>

enum {
  /* Under this a stolen vat ran too briefly to repay its move. */
  VAT__TINY_VAT_NS = 1000,
  VAT__TINY_STEALS_MAX = 8,
  /* A victim with this many fresh vats waiting is behind: worth it. */
  VAT__FRESH_BEHIND = 256,
  VAT__TINY_RETRY_NS = 200000,
};

typedef struct vat__steal_gauge {
  uint64_t last_at;    /* monotonic ns of the last steal */
  uint32_t last_taken; /* vats it took; 0 before the first */
  uint32_t tiny;       /* tiny steals in a row, at most TINY_STEALS_MAX */
} vat__steal_gauge;

/** Whether to take fresh vats from a victim holding `waiting`, at `now`. */
bool vat__steal_gauge_allows(const vat__steal_gauge *g, uint32_t waiting,
                             uint64_t now);

/** A steal at `now` took `taken` vats (at least one). */
void vat__steal_gauge_note(vat__steal_gauge *g, uint32_t taken, uint64_t now);

#endif
