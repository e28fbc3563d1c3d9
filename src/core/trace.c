/* Turn tracing, the recording half: see trace.h. Everything here runs only
 * in a traced system, on the worker that owns the ring. */
#include "core/trace.h"

#include <string.h>

#include "core/deliver.h"
#include "core/system.h"
#include "util/clock.h"
#include "util/gc.h"
#include "util/mem.h"

/* The clock's rate, measured over a few microseconds against the
 * monotonic clock: it decides which turns are slow enough to time alone
 * (trace.h), so a rough figure does. */
static uint64_t ticks_per_us(void) {
  uint64_t t0 = vat__trace_ticks(), n0 = vat__monotonic_ns(), n;
  while ((n = vat__monotonic_ns()) - n0 < 20000)
    ;
  uint64_t t = vat__trace_ticks() - t0;
  uint64_t rate = t * 1000 / (n - n0);
  return rate ? rate : 1;
}

vat__trace_ring *vat__trace_ring_new(vat_system *sys, unsigned index) {
  size_t slots = 2;
  while (slots < sys->trace_events)
    slots <<= 1;
  vat__trace_ring *r = vat__gc_alloc(sizeof *r);
  /* Not scanned: the events' pointers are names, not references. */
  r->events = vat__oom_check(GC_MALLOC_ATOMIC(slots * sizeof(vat__trace_event)),
                             "a trace ring");
  /* Touched now, so that recording never waits for the kernel to supply
   * a page. */
  memset(r->events, 0, slots * sizeof(vat__trace_event));
  r->names = vat__oom_check(GC_MALLOC(slots * sizeof *r->names), "a trace ring");
  r->mask = slots - 1;
  r->flow_base = vat__trace_flow_base(sys->trace_tag, index);
  r->next_flow = r->flow_base | VAT__FLOW_LOOSE;
  atomic_init(&r->head, 0);
  r->stride = VAT__TRACE_STRIDE;
  if (sys->virtual_clock)
    r->virtual_now = &sys->virtual_now_ns;
  else
    r->slow = ticks_per_us();
  return r;
}

/* The time of an event recorded now: the running turn's, else a reading
 * of its own, which ends the group of turns before it; the next turn
 * starts a group of its own, so that the time between (idle, parked) is
 * never spread over turns. */
static uint64_t event_time(vat__trace_ring *r) {
  if (r->turn_ts != 0)
    return r->turn_ts;
  if (r->virtual_now != NULL)
    return vat__trace_virtual_time(r);
  r->clock = vat__trace_ticks();
  r->left = 0;
  r->group = 0;
  return r->clock;
}

static vat__trace_event *record(vat__trace_ring *r, uint32_t kind,
                                const void *vat) {
  vat__trace_event *e = vat__trace_slot(r);
  e->ts = event_time(r);
  e->flow = 0;
  e->vat = vat;
  e->entity = NULL;
  e->what = NULL;
  e->kind = (uint16_t)kind;
  e->form = 0;
  e->sends = 0;
  return e;
}

/* A send with an id of its own and an event to say where it started. */
static void record_loose(vat__trace_ring *r, vat__msg *m, uint64_t ts) {
  vat__trace_event *e = vat__trace_slot(r);
  uint64_t flow = ++r->next_flow;
  vat__msg_set_flow(m, flow);
  e->ts = ts;
  e->flow = flow;
  e->vat = m->target->vat;
  e->entity = m->target;
  e->what = vat__trace_what(m, &e->form);
  e->kind = VAT__TR_SEND;
  e->sends = 0;
  vat__trace_publish(r);
}

void vat__trace_sends_loose(vat__trace_ring *r, vat__msg *m) {
  for (; m != NULL; m = atomic_load_explicit(&m->next, memory_order_relaxed))
    record_loose(r, m, r->turn_ts);
}

void vat__trace_send_now(vat__trace_ring *r, vat__msg *m) {
  if (r->turn_ts != 0) {
    vat__trace_sends(r, m); /* m->next is NULL */
  } else {
    record_loose(r, m, event_time(r));
  }
}

void vat__trace_drop(vat__trace_ring *r, const vat__msg *m) {
  vat__trace_event *e = record(r, VAT__TR_DROP, m->target->vat);
  e->flow = m->flow;
  e->entity = m->target;
  e->what = vat__trace_what(m, &e->form);
  vat__trace_publish(r);
}

void vat__trace_spawn(vat__trace_ring *r, const vat__vat *v,
                      const vat__vat *parent) {
  vat__trace_event *e = record(r, VAT__TR_SPAWN, v);
  e->entity = parent;
  vat__trace_publish(r);
}

void vat__trace_exit(vat__trace_ring *r, const vat__vat *v, vat_value reason) {
  vat__trace_event *e = record(r, VAT__TR_EXIT, v);
  /* Only atoms are kept by name: other values may be collected before
   * the file is written. An error is named by its code. */
  e->form = (uint16_t)reason.type;
  if (reason.type == VAT_T_ATOM)
    e->what = reason.as.atom;
  else if (reason.type == VAT_T_ERROR)
    e->what = vat_error_code(reason);
  else if (reason.type == VAT_T_RECORD)
    e->what = vat_record_label(reason);
  vat__trace_publish(r);
}

void vat__trace_mark(vat__trace_ring *r, enum vat__trace_kind kind) {
  record(r, kind, NULL);
  vat__trace_publish(r);
}

void vat__trace_fault(vat__trace_ring *r, const vat__vat *v, const char *kind,
                      const char *text, uint64_t step) {
  vat__trace_event *e = record(r, VAT__TR_FAULT, v);
  e->flow = step;
  e->entity = kind;
  e->what = text;
  vat__trace_publish(r);
}
