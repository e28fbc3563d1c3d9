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

/* Where fault `j` of `p` strikes: its step, or its time for a fault at a
 * time. */
static uint64_t place(const vat__sim_plan *p, unsigned j) {
  return p->faults[j].text != NULL ? p->faults[j].at : p->faults[j].step;
}

/* The earliest place fault `j` may move to: where the fault of its kind
 * before it strikes (a plan lists the faults at a step first, then those
 * at a time, each in the order they struck), or the first step, or 0 ns. */
static uint64_t earliest(const vat__sim_plan *p, unsigned j) {
  bool timed = p->faults[j].text != NULL;
  if (j > 0 && (p->faults[j - 1].text != NULL) == timed)
    return place(p, j - 1);
  return timed ? 0 : 1;
}

/* The best plan with fault `j` planned at `where`. */
static vat__sim_plan moved(const vat__sim_plan *p, unsigned j, uint64_t where) {
  vat__sim_plan c = without(p, p->n, 0);
  if (c.faults[j].text != NULL)
    c.faults[j].at = where;
  else
    c.faults[j].step = where;
  return c;
}

static void move_earlier(shrinker *s) {
  for (unsigned j = 0; j < s->best.n && s->runs < s->budget; j++) {
    uint64_t lo = earliest(&s->best, j);
    while (lo < place(&s->best, j) && s->runs < s->budget) {
      uint64_t hi = place(&s->best, j); /* it fails with the fault here */
      uint64_t mid = lo + (hi - lo) / 2;
      unsigned n = s->best.n;
      vat__sim_plan c = moved(&s->best, j, mid);
      if (!attempt(s, &c, s->best_result->turns)) {
        lo = mid + 1;
        continue;
      }
      if (s->best.n != n)
        break; /* a fault fell away: the plan is another one now */
      if (place(&s->best, j) >= hi)
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
  sh->timed_faults = b->timed_faults;
  memcpy(sh->message, b->message, sizeof sh->message);
  memcpy(sh->plan, b->plan, sizeof sh->plan);
  vat__sim_replay_line(sc, o, out->seed, sh->plan, sh->timed_faults, sh->replay,
                       sizeof sh->replay);
}
