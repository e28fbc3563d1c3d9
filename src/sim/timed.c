/* Faults at a time (timed.h): a list by time, the faults that struck, and
 * their marks in the digest and the trace.
 *
 * Whether drawn from the seed or read from a plan, a fault at a time
 * strikes through the same call at the same place in the world's step
 * (machines.c, before the step looks at what is ready), and what struck
 * is recorded the same way: so a run's reported plan, pasted back, strikes
 * the same faults at the same times with the same digest. */
#include <stdio.h>
#include <string.h>

#include "core/system.h"
#include "core/trace.h"
#include "core/worker.h"
#include "sim/machines.h"
#include "sim/timed.h"
#include "util/gc.h"
#include "util/mem.h"

typedef struct vat__sim_due {
  struct vat__sim_due *next;
  uint64_t at, seq; /* due, and planned: ties go in the order planned */
  const char *text;
  const vat_sim_source *src; /* NULL: a crash, or a plan's (any source) */
  int plan_index;            /* -1: drawn */
} due;

static void wait_for(vat__sim_world *w, uint64_t at, const char *text,
                     const vat_sim_source *src, int plan_index) {
  due *d = vat__gc_alloc(sizeof *d);
  *d = (due){.at = at,
             .seq = w->due_seq++,
             .text = text,
             .src = src,
             .plan_index = plan_index};
  due **p = &w->due;
  while (*p != NULL && (*p)->at <= at)
    p = &(*p)->next;
  d->next = *p;
  *p = d;
}

void vat__sim_timed_begin(vat__sim_world *w) {
  for (unsigned j = 0; w->plan != NULL && j < w->plan->n; j++) {
    const vat__sim_planned *p = &w->plan->faults[j];
    if (p->text != NULL)
      wait_for(w, p->at, p->text, NULL, (int)j);
  }
}

void vat__sim_timed_drawn(vat__sim_world *w, uint64_t at, const char *text,
                          const vat_sim_source *src) {
  if (w->plan != NULL)
    return;
  size_t n = strlen(text);
  char *copy = vat__oom_check(GC_MALLOC_ATOMIC(n + 1), "a fault's text");
  memcpy(copy, text, n + 1);
  wait_for(w, at, copy, src, -1);
}

uint64_t vat__sim_timed_next(const vat__sim_world *w) {
  return w->due != NULL ? w->due->at : UINT64_MAX;
}

/* In the list, the digest and (when the world is traced) the trace, as an
 * instant on no vat's track. */
static void record(vat__sim_world *w, uint64_t now, const char *text,
                   uint64_t hash, const char *kind) {
  if (w->ntimed == w->timed_cap) {
    unsigned cap = w->timed_cap ? 2 * w->timed_cap : 8;
    vat__sim_timed *t = vat__gc_alloc(cap * sizeof *t);
    if (w->ntimed)
      memcpy(t, w->timed, w->ntimed * sizeof *t);
    w->timed = t;
    w->timed_cap = cap;
  }
  vat__sim_timed *t = &w->timed[w->ntimed++];
  *t = (vat__sim_timed){.at = now, .text = text, .after = w->nfaults};
  w->digest = vat__sim_mix(w->digest, 0x7143ED00ull);
  w->digest = vat__sim_mix(w->digest, now);
  for (const char *c = text; *c; c++)
    w->digest = vat__sim_mix(w->digest, (unsigned char)*c);
  w->digest = vat__sim_mix(w->digest, hash);
  vat__trace_ring *ring = w->sys->workers[0]->trace;
  if (ring != NULL && vat__system_state(w->sys) == VAT__RUNNING)
    vat__trace_fault(ring, NULL, kind, vat__sim_timed_text(t), w->steps);
}

static const char crash_word[] = "crash ";

/* A plan's fault that no source knows, or whose source finds nothing it
 * names at its time (a link not made), is a mistake in the plan, not a
 * fault that missed: the run stops with it (harness.c). */
static void refuse(vat__sim_world *w, const due *d, int rc, const char *kind) {
  char at[32];
  vat_sim_time_format(d->at, at, sizeof at);
  size_t n = VAT__SIM_TEXT_MAX + 200;
  char *why = vat__oom_check(GC_MALLOC_ATOMIC(n), "a plan's refusal");
  if (rc == VAT_EINVAL)
    snprintf(why, n,
             "plan: \"at %s: %s\": no fault of that form (the harness's "
             "\"crash M\", or one of a source of this world)",
             at, d->text);
  else
    snprintf(why, n,
             "plan: \"at %s: %s\": the %s knows this fault but has nothing "
             "it names at %s",
             at, d->text, kind, at);
  w->refused = why;
}

/* Strikes `d` now: a crash here, else in its source (a plan's: the first
 * source that knows it). */
static bool strike(vat__sim_world *w, const due *d, uint64_t *hash,
                   const char **kind) {
  *hash = 0;
  if (d->src == NULL &&
      strncmp(d->text, crash_word, sizeof crash_word - 1) == 0) {
    *kind = "crash";
    return vat__sim_machines_crash_named(w, d->text + sizeof crash_word - 1);
  }
  int rc = vat__sim_machines_source_strike(w, d->src, d->text, hash, kind);
  if (rc != VAT_OK && d->plan_index >= 0 && w->refused == NULL)
    refuse(w, d, rc, *kind);
  return rc == VAT_OK;
}

bool vat__sim_timed_fire(vat__sim_world *w, uint64_t now) {
  bool any = false;
  while (w->due != NULL && w->due->at <= now) {
    due *d = w->due;
    w->due = d->next;
    any = true;
    uint64_t hash;
    const char *kind;
    if (!strike(w, d, &hash, &kind))
      continue;
    if (d->plan_index >= 0)
      w->planned_done[d->plan_index] = 1;
    record(w, now, d->text, hash, kind);
  }
  return any;
}
