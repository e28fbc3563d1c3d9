/* See steal_gauge.h. */
#include "core/steal_gauge.h"

bool vat__steal_gauge_allows(const vat__steal_gauge *g, uint32_t waiting,
                             uint64_t now) {
  return g->tiny < VAT__TINY_STEALS_MAX || waiting >= VAT__FRESH_BEHIND ||
         now - g->last_at >= VAT__TINY_RETRY_NS;
}

void vat__steal_gauge_note(vat__steal_gauge *g, uint32_t taken, uint64_t now) {
  /* The time since the last steal is what its vats ran for here: this
   * worker had nothing else to run, or it would not be stealing. */
  bool tiny = g->last_taken != 0 &&
              now - g->last_at < (uint64_t)VAT__TINY_VAT_NS * g->last_taken;
  if (!tiny)
    g->tiny = 0;
  else if (g->tiny < VAT__TINY_STEALS_MAX)
    g->tiny++;
  g->last_at = now;
  g->last_taken = taken;
}
