/* The faults a world injects (vat/sim.h): which strike at a step, drawn
 * from the seed or read from an explicit plan, and what each kind does to
 * its vat. Called from the chooser (choose.c) on the host thread, inside
 * the run call, between turns: no turn is current, and no vat runs. */
#include <stdio.h>
#include <string.h>

#include "core/deliver.h"
#include "core/mailbox.h"
#include "core/message.h"
#include "core/system.h"
#include "core/thread.h"
#include "core/trace.h"
#include "core/worker.h"
#include "promise/promise.h"
#include "sim/hold.h"
#include "sim/world.h"
#include "timer/timer.h"
#include "util/gc.h"
#include "util/mem.h"
#include "vat/exits.h"
#include "vat/observe.h"

static const char *const names[] = {
    [VAT_SIM_KILL] = "kill",       [VAT_SIM_FAIL] = "fail",
    [VAT_SIM_DELAY] = "delay",     [VAT_SIM_JITTER] = "jitter",
    [VAT_SIM_TIMEOUT] = "timeout", [VAT_SIM_STOP] = "stop",
};

const char *vat__sim_fault_name(vat_sim_fault_kind kind) {
  return (unsigned)kind < sizeof names / sizeof names[0] ? names[kind] : NULL;
}

/* --- What each kind does -------------------------------------------------- */

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

/* Strikes v (index i; the step chose index `chosen`) with `f`'s kind and
 * amount, if it can now. */
static bool strike(vat__sim_world *w, vat__vat *v, uint32_t i, uint32_t chosen,
                   const vat_sim_fault *f) {
  /* A dead vat still runs, to drop what it was sent: not a victim. */
  if (atomic_load_explicit(&v->flags, memory_order_acquire) & VAT__DEAD)
    return false;
  switch (f->kind) {
  case VAT_SIM_KILL:
    return vat_host_exit(&v->first, vat_atom_value(vat_atom_killed())) ==
           VAT_OK;
  case VAT_SIM_FAIL:
    return fail_next(v);
  case VAT_SIM_DELAY:
    if (i != chosen)
      return false; /* what it holds is what this step's turn sends */
    vat__sim_hold_sends(w, v, f->amount);
    return true;
  case VAT_SIM_JITTER:
    return vat__timers_postpone(v, f->amount);
  case VAT_SIM_TIMEOUT:
    return vat__promises_time_out(v);
  case VAT_SIM_STOP:
    if (w->stop || vat__system_state(v->sys) != VAT__RUNNING)
      return false;
    w->stop = true;
    return true;
  }
  return false;
}

/* Notes a fault that struck: in the list, the digest and the trace. */
static void record(vat__sim_world *w, vat_sim_fault f) {
  if (w->nfaults == w->faults_cap) {
    unsigned cap = w->faults_cap ? 2 * w->faults_cap : 8;
    vat_sim_fault *faults = vat__gc_alloc(cap * sizeof *faults);
    const char **labels = vat__gc_alloc(cap * sizeof *labels);
    if (w->nfaults) {
      memcpy(faults, w->faults, w->nfaults * sizeof *faults);
      memcpy(labels, w->fault_labels, w->nfaults * sizeof *labels);
    }
    w->faults = faults;
    w->fault_labels = labels;
    w->faults_cap = cap;
  }
  w->faults[w->nfaults] = f;
  w->fault_labels[w->nfaults] = vat__sim_plain_label(w, f.vat);
  vat__trace_ring *ring = w->sys->workers[0]->trace;
  if (ring != NULL)
    vat__trace_fault(ring, w->vats[f.vat], vat__sim_fault_name(f.kind),
                     vat__sim_fault_text(w, w->nfaults), f.step);
  w->nfaults++;
  w->digest = vat__sim_mix(w->digest, 0xFA000000ull | (uint64_t)f.kind);
  w->digest = vat__sim_mix(w->digest, f.vat);
  w->digest = vat__sim_mix(w->digest, f.step);
  w->digest = vat__sim_mix(w->digest, f.amount);
}

/* --- Which strike --------------------------------------------------------- */

static void planned(vat__sim_world *w, uint32_t chosen) {
  for (unsigned j = 0; j < w->plan->n; j++) {
    const vat__sim_planned *p = &w->plan->faults[j];
    uint32_t i;
    if (w->planned_done[j] || p->step > w->steps ||
        !vat__sim_planned_vat(w, p, &i))
      continue;
    vat_sim_fault f = {w->steps, p->kind, i, p->amount};
    if (strike(w, w->vats[i], i, chosen, &f)) {
      w->planned_done[j] = 1;
      record(w, f);
    }
  }
}

static double unit(uint64_t *x) {
  return (double)(vat__sim_draw(x) >> 11) * 0x1p-53;
}

/* One kind among the enabled ones, uniformly: with kill and fail alone,
 * the draw the harness always made (kill on an even draw). */
static vat_sim_fault_kind draw_kind(vat__sim_world *w) {
  unsigned mask =
      w->opt.fault_kinds ? w->opt.fault_kinds : VAT_SIM_FAULTS_DEFAULT;
  unsigned k = (unsigned)(vat__sim_draw(&w->fault_rng) %
                          (unsigned)__builtin_popcount(mask));
  for (int kind = 0;; kind++)
    if ((mask & (1u << kind)) && k-- == 0)
      return (vat_sim_fault_kind)kind;
}

/* Only the kinds with an amount draw one, so the others' draws stay as
 * they were. */
static uint64_t draw_amount(vat__sim_world *w, vat_sim_fault_kind kind) {
  if (kind == VAT_SIM_DELAY)
    return 1 + vat__sim_draw(&w->fault_rng) % w->opt.max_delay_steps;
  if (kind == VAT_SIM_JITTER)
    return 1 + vat__sim_draw(&w->fault_rng) % w->opt.max_jitter_ns;
  return 0;
}

static void drawn(vat__sim_world *w, vat__vat *v, uint32_t i) {
  const vat_sim_options *o = &w->opt;
  if (o->fault_rate <= 0 || (o->max_faults && w->nfaults >= o->max_faults))
    return;
  if (!w->fault_pending) {
    if (unit(&w->fault_rng) >= o->fault_rate)
      return;
    w->fault_pending = true;
    w->pending.kind = draw_kind(w);
    w->pending.amount = draw_amount(w, w->pending.kind);
  }
  vat_sim_fault f = {w->steps, w->pending.kind, i, w->pending.amount};
  bool struck = strike(w, v, i, i, &f);
  /* A timer or an answer is owed by vats that wait, seldom by the one
   * that runs: these look on, through the vats in the order seen. */
  if (f.kind == VAT_SIM_JITTER || f.kind == VAT_SIM_TIMEOUT)
    for (uint32_t k = 1; !struck && k < w->nvats; k++) {
      f.vat = (i + k) % w->nvats;
      struck = strike(w, w->vats[f.vat], f.vat, i, &f);
    }
  if (!struck)
    return;
  w->fault_pending = false;
  record(w, f);
}

void vat__sim_faults_step(vat__sim_world *w, vat__vat *v, uint32_t i) {
  if (w->plan != NULL)
    planned(w, i);
  else
    drawn(w, v, i);
}
