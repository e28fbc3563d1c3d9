/* The simulation's scheduler: which ready vat runs the next step (uniform
 * or PCT), and the faults the seed plans. Called by the deterministic
 * picker (sched/pick.c) on the host thread, inside the run call, between
 * turns: no turn is current, the chosen vat is ready and not running. */
#include <stdio.h>
#include <string.h>

#include "core/deliver.h"
#include "core/mailbox.h"
#include "core/message.h"
#include "core/thread.h"
#include "core/worker.h"
#include "sim/world.h"
#include "util/gc.h"
#include "util/mem.h"
#include "vat/exits.h"
#include "vat/observe.h"

static uint64_t splitmix(uint64_t *x) {
  uint64_t z = (*x += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

static double unit(uint64_t *x) {
  return (double)(splitmix(x) >> 11) * 0x1p-53;
}

static uint64_t mix(uint64_t h, uint64_t v) {
  h ^= v + 0x9E3779B97F4A7C15ull + (h << 6) + (h >> 2);
  return h * 0x100000001B3ull;
}

static void grow(vat__sim_world *w);

void vat__sim_world_init(vat__sim_world *w, const vat_sim_options *o,
                         uint64_t seed) {
  memset(w, 0, sizeof *w);
  w->opt = *o;
  w->pick_rng = seed ^ 0x5EED5EED5EED5EEDull;
  w->fault_rng = seed ^ 0xFA017FA017FA017Full;
  w->digest = 0xCBF29CE484222325ull;
  grow(w);
  if (o->strategy == VAT_SIM_PCT) {
    w->nchange = o->pct_depth - 1;
    if (w->nchange > VAT__SIM_MAX_DEPTH)
      w->nchange = VAT__SIM_MAX_DEPTH;
    for (unsigned i = 0; i < w->nchange; i++)
      w->change[i] = 1 + splitmix(&w->pick_rng) % o->pct_steps;
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

/* The vat's index, giving a vat seen for the first time the next one and
 * its PCT priority: above every change point's (at least d). */
static uint32_t index_of(vat__sim_world *w, vat__vat *v) {
  for (uint32_t s = hash_slot(w, v); w->keys[s] != NULL;
       s = (s + 1) & (w->cap - 1))
    if (w->keys[s] == v)
      return w->slot_of[s];
  if (2 * (w->nvats + 1) > w->cap)
    grow(w);
  uint32_t i = w->nvats++;
  w->vats[i] = v;
  w->prio[i] = VAT__SIM_MAX_DEPTH + 1 + (splitmix(&w->pick_rng) >> 1);
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

/* The failed turn's stand-in for the handler of the message it took. */
static void fail_turn(vat_turn *turn, void *state, void *arg) {
  (void)state;
  (void)arg;
  vat_fail(turn, vat_atom_named("sim_fault"));
}

/* Makes v's next message fail its turn, when it is an ordinary one that
 * runs next. */
static bool fail_next(vat__vat *v) {
  /* Not while the turn loop has something to do first, nor for a vat
   * whose overload count follows what its mailbox takes in. */
  if (atomic_load_explicit(&v->flags, memory_order_acquire) &
      (VAT__ATTENTION | VAT__COUNTED))
    return false;
  vat__msg *m = vat__mailbox_pop(&v->mailbox, &vat__current_worker->pool);
  if (m == NULL)
    return false;
  bool ordinary = m->fn != vat__dispatch_signal && m->fn != vat__run_urgent &&
                  !vat__mailbox_is_run_header(m);
  if (ordinary)
    vat__msg_set_fn(m, fail_turn);
  vat__mailbox_unpop(&v->mailbox, m);
  return ordinary;
}

static bool strike(vat__vat *v, vat_sim_fault_kind kind) {
  /* A dead vat still runs, to drop what it was sent: not a victim. */
  if (atomic_load_explicit(&v->flags, memory_order_acquire) & VAT__DEAD)
    return false;
  if (kind == VAT_SIM_KILL)
    return vat_host_exit(&v->first, vat_atom_value(vat_atom_killed())) ==
           VAT_OK;
  return fail_next(v);
}

static void maybe_fault(vat__sim_world *w, vat__vat *v, uint32_t index) {
  const vat_sim_options *o = &w->opt;
  if (o->fault_rate <= 0 || (o->max_faults && w->nfaults >= o->max_faults))
    return;
  if (!w->fault_pending) {
    if (unit(&w->fault_rng) >= o->fault_rate)
      return;
    w->fault_pending = true;
    w->pending_kind = splitmix(&w->fault_rng) & 1 ? VAT_SIM_FAIL : VAT_SIM_KILL;
  }
  if (!strike(v, w->pending_kind))
    return;
  w->fault_pending = false;
  if (w->nfaults < VAT_SIM_MAX_REPORTED_FAULTS)
    w->faults[w->nfaults] = (vat_sim_fault){w->steps, w->pending_kind, index};
  w->nfaults++;
  w->digest = mix(w->digest, 0xFA000000ull | (uint64_t)w->pending_kind);
}

uint32_t vat__sim_decide(vat__sim_world *w, vat__task *const *ready, uint32_t n,
                         uint32_t *index) {
  uint32_t idx[VAT__SIM_READY_MAX];
  for (uint32_t k = 0; k < n; k++)
    idx[k] = index_of(w, vat__vat_of(ready[k]));
  w->steps++;
  uint32_t k = w->opt.strategy == VAT_SIM_PCT
                   ? pick_pct(w, idx, n)
                   : (uint32_t)(splitmix(&w->pick_rng) % n);
  w->digest = mix(w->digest, idx[k]);
  *index = idx[k];
  return k;
}

void vat__sim_strike(vat__sim_world *w, vat__vat *v, uint32_t i) {
  maybe_fault(w, v, i);
}

uint32_t vat__sim_choose(void *ctx, vat__task *const *ready, uint32_t n) {
  vat__sim_world *w = ctx;
  uint32_t i, k = vat__sim_decide(w, ready, n, &i);
  vat__sim_strike(w, vat__vat_of(ready[k]), i);
  return k;
}

const char *vat__sim_vat_name(const vat__sim_world *w, unsigned i, char *buf,
                              size_t size) {
  const char *label = i < w->nvats ? vat_ref_label(&w->vats[i]->first) : NULL;
  if (label != NULL)
    return label;
  snprintf(buf, size, "vat#%u", i);
  return buf;
}
