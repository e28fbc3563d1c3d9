/* The simulation's scheduler: which ready vat runs the next step (uniform
 * or PCT); then the faults due at that step strike (faults.c). Called by
 * the deterministic picker (sched/pick.c) on the host thread, inside the
 * run call, between turns: no turn is current, the chosen vat is ready
 * and not running. */
#include <stdio.h>
#include <string.h>

#include "core/vat.h"
#include "sched/queues.h"
#include "sim/world.h"
#include "util/gc.h"
#include "util/mem.h"

static void grow(vat__sim_world *w);

static void sort_steps(uint64_t *steps, unsigned n) {
  for (unsigned i = 1; i < n; i++)
    for (unsigned j = i; j > 0 && steps[j - 1] > steps[j]; j--) {
      uint64_t t = steps[j];
      steps[j] = steps[j - 1];
      steps[j - 1] = t;
    }
}

void vat__sim_world_init(vat__sim_world *w, const vat_sim_options *o,
                         const vat__sim_plan *plan, uint64_t seed) {
  memset(w, 0, sizeof *w);
  w->opt = *o;
  w->plan = plan;
  if (plan != NULL) {
    w->planned_done =
        vat__oom_check(GC_MALLOC_ATOMIC(plan->n + 1), "a world's plan");
    memset(w->planned_done, 0, plan->n + 1);
  }
  w->pick_rng = seed ^ 0x5EED5EED5EED5EEDull;
  w->fault_rng = seed ^ 0xFA017FA017FA017Full;
  w->digest = 0xCBF29CE484222325ull;
  grow(w);
  if (o->strategy == VAT_SIM_PCT) {
    w->nchange = o->pct_depth - 1;
    if (w->nchange > VAT__SIM_MAX_DEPTH)
      w->nchange = VAT__SIM_MAX_DEPTH;
    for (unsigned i = 0; i < w->nchange; i++)
      w->change[i] = 1 + vat__sim_draw(&w->pick_rng) % o->pct_steps;
    /* pick_pct lowers the vat of the i-th change point to d - i: in step
     * order, so that each goes below those lowered at earlier steps. */
    sort_steps(w->change, w->nchange);
  }
}

static uint32_t hash_slot(const vat__sim_world *w, const vat__vat *v) {
  uint64_t h = (uint64_t)(uintptr_t)v * 0x9E3779B97F4A7C15ull;
  return (uint32_t)(h >> 32) & (w->cap - 1);
}

static void insert(vat__sim_world *w, vat__vat *v, uint32_t index) {
  uint32_t s = hash_slot(w, v);
  while (w->keys[s] != NULL)
    s = (s + 1) & (w->cap - 1);
  w->keys[s] = v;
  w->slot_of[s] = index;
}

/* Doubles the table (the first call makes it), keeping load under half. */
static void grow(vat__sim_world *w) {
  uint32_t cap = w->cap ? w->cap * 2 : 64;
  w->keys = vat__gc_alloc(cap * sizeof *w->keys);
  w->slot_of =
      vat__oom_check(GC_MALLOC_ATOMIC(cap * sizeof *w->slot_of), "sim table");
  vat__vat **vats = vat__gc_alloc(cap / 2 * sizeof *vats);
  uint64_t *prio =
      vat__oom_check(GC_MALLOC_ATOMIC(cap / 2 * sizeof *prio), "sim table");
  if (w->nvats) {
    memcpy(vats, w->vats, w->nvats * sizeof *vats);
    memcpy(prio, w->prio, w->nvats * sizeof *prio);
  }
  w->vats = vats;
  w->prio = prio;
  w->cap = cap;
  for (uint32_t i = 0; i < w->nvats; i++)
    insert(w, w->vats[i], i);
}

static bool find(const vat__sim_world *w, const vat__vat *v, uint32_t *index) {
  for (uint32_t s = hash_slot(w, v); w->keys[s] != NULL;
       s = (s + 1) & (w->cap - 1))
    if (w->keys[s] == v) {
      *index = w->slot_of[s];
      return true;
    }
  return false;
}

int vat__sim_track(void *ctx, const void *vat, char *name, size_t size) {
  const vat__sim_world *w = ctx;
  uint32_t i;
  if (!find(w, vat, &i))
    return -1;
  if (name != NULL) {
    const char *label = vat__sim_plain_label(w, i);
    if (label != NULL)
      snprintf(name, size, "%s", label);
    else
      snprintf(name, size, "vat#%u", i);
  }
  return (int)i;
}

/* The vat's index, giving a vat seen for the first time the next one and
 * its PCT priority: above every change point's (at least d). */
static uint32_t index_of(vat__sim_world *w, vat__vat *v) {
  uint32_t i;
  if (find(w, v, &i))
    return i;
  if (2 * (w->nvats + 1) > w->cap)
    grow(w);
  i = w->nvats++;
  w->vats[i] = v;
  w->prio[i] = VAT__SIM_MAX_DEPTH + 1 + (vat__sim_draw(&w->pick_rng) >> 1);
  insert(w, v, i);
  return i;
}

static uint32_t highest(const vat__sim_world *w, const uint32_t *idx,
                        uint32_t n) {
  uint32_t best = 0;
  for (uint32_t k = 1; k < n; k++)
    if (w->prio[idx[k]] > w->prio[idx[best]] ||
        (w->prio[idx[k]] == w->prio[idx[best]] && idx[k] < idx[best]))
      best = k;
  return best;
}

static uint32_t pick_pct(vat__sim_world *w, const uint32_t *idx, uint32_t n) {
  uint32_t k = highest(w, idx, n);
  for (unsigned i = 0; i < w->nchange; i++)
    if (w->change[i] == w->steps) {
      w->prio[idx[k]] = VAT__SIM_MAX_DEPTH - i; /* below every vat's */
      k = highest(w, idx, n);
    }
  return k;
}

uint32_t vat__sim_decide(vat__sim_world *w, vat__task *const *ready, uint32_t n,
                         uint32_t *index) {
  uint32_t idx[VAT__SIM_READY_MAX];
  for (uint32_t k = 0; k < n; k++)
    idx[k] = index_of(w, vat__vat_of(ready[k]));
  w->steps++;
  uint32_t k = w->opt.strategy == VAT_SIM_PCT
                   ? pick_pct(w, idx, n)
                   : (uint32_t)(vat__sim_draw(&w->pick_rng) % n);
  w->digest = vat__sim_mix(w->digest, idx[k]);
  *index = idx[k];
  return k;
}

uint32_t vat__sim_choose(void *ctx, vat__task *const *ready, uint32_t n) {
  vat__sim_world *w = ctx;
  uint32_t i, k = vat__sim_decide(w, ready, n, &i);
  vat__sim_faults_step(w, vat__vat_of(ready[k]), i);
  return k;
}
