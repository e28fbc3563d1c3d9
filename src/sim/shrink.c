/* Shrinking a failure (vat/sim.h): smaller plans under the same seed and
 * options, kept while the run still fails the same way.
 *
 * Every candidate is an explicit plan made from the faults of the best
 * run so far, and what a candidate's run keeps is the plan that run
 * reports (the faults that struck, where they struck): pasted back, that
 * plan replays it exactly, so the shrunk result's replay line is exact by
 * construction. Two passes:
 *  1. drop faults: chunks of half the plan, then of a quarter, ... then
 *     one at a time (delta debugging's complements), kept when the run
 *     still fails with the same verdict;
 *  2. shorten the run: each fault in turn moves to the earliest step, at
 *     or after the fault before it, at which the run still fails so in no
 *     more turns (a binary search: failures need not be monotone in the
 *     step, so this finds an earlier step, not always the earliest).
 * Both again while they change the plan. Each candidate costs one run of
 * the seed; o->shrink_runs bounds them.
 */
#include <string.h>

#include "sim/run.h"
#include "sim/world.h"
#include "util/gc.h"
#include "util/mem.h"

typedef struct shrinker {
  const vat_sim_scenario *sc;
  const vat_sim_options *o;
  uint64_t seed;
  vat_sim_verdict verdict;
  uint64_t runs, budget;
  vat__sim_plan best; /* what the best run reported */
  vat_sim_result *best_result;
  vat_sim_result *trial;
} shrinker;

/* Runs `candidate`; true (and it becomes the best) when it fails with the
 * verdict sought, in no more than `max_turns` turns. */
static bool attempt(shrinker *s, const vat__sim_plan *candidate,
                    uint64_t max_turns) {
  if (s->runs >= s->budget)
    return false;
  s->runs++;
  int err;
  memset(s->trial, 0, sizeof *s->trial);
  const vat__sim_world *w =
      vat__sim_run_seed(s->sc, s->o, candidate, s->seed, NULL, s->trial, &err);
  if (w == NULL || s->trial->verdict != s->verdict ||
      s->trial->turns > max_turns)
    return false;
  vat__sim_plan_of(w, &s->best);
  vat_sim_result *t = s->best_result;
  s->best_result = s->trial;
  s->trial = t;
  return true;
}

/* The best plan without its faults [from, from + n). */
static vat__sim_plan without(const vat__sim_plan *p, unsigned from,
                             unsigned n) {
  vat__sim_plan c = {vat__gc_alloc((p->n + 1) * sizeof *c.faults), 0};
  for (unsigned i = 0; i < p->n; i++)
    if (i < from || i >= from + n)
      c.faults[c.n++] = p->faults[i];
  return c;
}

static void drop_faults(shrinker *s) {
  for (unsigned chunk = s->best.n / 2 ? s->best.n / 2 : 1; chunk >= 1;
       chunk /= 2) {
    for (unsigned from = 0; from < s->best.n && s->runs < s->budget;) {
      vat__sim_plan c = without(&s->best, from, chunk);
      if (!attempt(s, &c, UINT64_MAX))
        from += chunk; /* kept: the next chunk is at `from` now */
    }
    if (s->best.n == 0)
      return;
  }
}

/* The best plan with fault `j` planned at `step`. */
static vat__sim_plan moved(const vat__sim_plan *p, unsigned j, uint64_t step) {
  vat__sim_plan c = without(p, p->n, 0);
  c.faults[j].step = step;
  return c;
}

static void move_earlier(shrinker *s) {
  for (unsigned j = 0; j < s->best.n && s->runs < s->budget; j++) {
    uint64_t lo = j ? s->best.faults[j - 1].step : 1;
    while (lo < s->best.faults[j].step && s->runs < s->budget) {
      uint64_t hi = s->best.faults[j].step; /* it fails with the fault here */
      uint64_t mid = lo + (hi - lo) / 2;
      unsigned n = s->best.n;
      vat__sim_plan c = moved(&s->best, j, mid);
      if (!attempt(s, &c, s->best_result->turns)) {
        lo = mid + 1;
        continue;
      }
      if (s->best.n != n)
        break; /* a fault fell away: the plan is another one now */
      if (s->best.faults[j].step >= hi)
        lo = mid + 1; /* it waited until where it was: no earlier */
    }
  }
}

void vat__sim_shrink(const vat_sim_scenario *sc, const vat_sim_options *o,
                     const vat__sim_world *w, vat_sim_result *out) {
  vat_sim_shrunk *sh = &out->shrunk;
  memset(sh, 0, sizeof *sh);
  if (o->shrink_runs == 0)
    return;
  /* Two results, the best and the one being tried, swapped as the best
   * changes; `out` stays the failure as found. */
  vat_sim_result *scratch = vat__gc_alloc(2 * sizeof *scratch);
  memcpy(&scratch[1], out, sizeof *out);
  shrinker s = {.sc = sc,
                .o = o,
                .seed = out->seed,
                .verdict = out->verdict,
                .budget = o->shrink_runs,
                .best_result = &scratch[1],
                .trial = &scratch[0]};
  vat__sim_plan_of(w, &s.best);
  /* Moving a fault can make another one droppable: again while either
   * pass changed the plan. */
  for (uint64_t before = UINT64_MAX; s.best_result->digest != before;) {
    before = s.best_result->digest;
    drop_faults(&s);
    move_earlier(&s);
  }
  const vat_sim_result *b = s.best_result;
  sh->done = true;
  sh->runs = s.runs;
  sh->turns = b->turns;
  sh->steps = b->steps;
  sh->digest = b->digest;
  sh->nfaults = b->nfaults;
  memcpy(sh->message, b->message, sizeof sh->message);
  memcpy(sh->plan, b->plan, sizeof sh->plan);
  vat__sim_replay_line(sc, o, out->seed, sh->plan, sh->replay,
                       sizeof sh->replay);
}
