/* Vats and entities: making them, ending them, and what a ref can tell. */
#include "core/atoms.h"
#include "core/crash.h"
#include "core/flow.h"
#include "core/hooks.h"
#include "core/system.h"
#include "core/trace.h"
#include "core/turn.h"
#include "core/worker.h"
#include "util/mem.h"

static void entity_init(struct vat_entity *e, vat__vat *v,
                        const vat_entity_def *def, void **state_out) {
  e->vat = v;
  e->receive = def->receive;
  if (state_out)
    *state_out = vat__state(e);
}

vat__vat_ext *vat__ext_of(vat__vat *v) {
  if (v->ext == NULL)
    vat__ext_publish(v, vat__gc_alloc(sizeof *v->ext));
  return v->ext;
}

int vat__vat_new(vat_system *sys, const vat_entity_def *def, vat__vat **out,
                 void **state_out) {
  /* One allocation for the vat, its first entity and that entity's state;
   * the collector zeroes it. The size is rounded up to whole cache lines:
   * the collector places such objects on line boundaries, so two vats
   * running on two cores never share a line (false sharing made 80,000
   * self-sending vats slower on two workers than on one). */
  size_t size = sizeof(vat__vat) + def->state_size;
  size = (size + VAT__CACHE_LINE - 1) & ~(size_t)(VAT__CACHE_LINE - 1);
  vat__vat *v = vat__gc_alloc(size);
  vat__mailbox_init(&v->mailbox);
  v->sys = sys;
  atomic_init(&v->flags, 0);
  entity_init(&v->first, v, def, state_out);
  /* The first entity's stop callback is the core's to keep (see
   * vat__vat_ext): a vat that only wants its end seen costs no module
   * state. */
  if (def->on_stop)
    vat__ext_of(v)->first_stop = def->on_stop;
  if (def->label)
    vat__label_set(v, def->label);
  if (def->overload)
    vat__flow_configure(v, def->overload); /* checked by the callers */
  *out = v;
  return VAT_OK;
}

/* Whether a module keeps state for the vat: the ended hooks act on
 * nothing else (core/hooks.h), so most vats skip them. */
static bool has_module_state(const vat__vat_ext *x) {
  return x->exits || x->promises || x->timers || x->first_stop;
}

void vat__terminate(vat__worker *w, vat__vat *v, vat_value reason,
                    const vat__msg *cause) {
  if (vat__is_dead(v))
    return;
  vat__vat_ext *x = vat__ext_of(v);
  x->exit_reason = reason;
  /* Release: readers that see `dead` see the reason. Messages still queued
   * are dropped by the turn loop as it drains the mailbox. */
  uint8_t was =
      atomic_fetch_or_explicit(&v->flags, VAT__DEAD, memory_order_release);
  /* Its muted senders and waiting hosts must not wait on a dead vat. */
  if (was & VAT__OVERLOADED)
    vat__flow_release(w, v);
  vat__count(&w->terminated, 1);
  if (w->trace != NULL)
    vat__trace_exit(w->trace, v, reason);
  /* Made before the hooks run: they forget the links and monitors that
   * say whether anyone watched. */
  vat_crash_report report;
  /* Most vats end `normal`: they skip the call. */
  bool crashed = cause != NULL && !vat_is_atom(reason, vat__atom.normal) &&
                 vat__crash_begin(v, reason, cause, &report);
  if (has_module_state(x))
    vat__hooks_vat_ended(w, v, reason);
  if (crashed)
    vat__crash_end(v, &report);
}

/* The checks vat_spawn and vat_entity_new make on their caller. */
static int check_make(vat_turn *turn, const vat_entity_def *def,
                      vat_ref **out) {
  int rc = vat__check_turn(turn);
  if (rc != VAT_OK)
    return rc;
  if (def == NULL || out == NULL)
    return VAT_EINVAL;
  return vat__flow_check(turn->vat->sys, def->overload);
}

int vat_spawn(vat_turn *turn, const vat_entity_def *def, vat_ref **out,
              void **state_out) {
  int rc = check_make(turn, def, out);
  if (rc != VAT_OK)
    return rc;
  vat__vat *v;
  vat__vat_new(turn->vat->sys, def, &v, state_out);
  /* Remembered so a failed turn can end it; nothing can send to it before
   * this turn commits, as the only ref is the one returned here. */
  vat__count(&turn->worker->spawned, 1);
  if (turn->worker->trace != NULL)
    vat__trace_spawn(turn->worker->trace, v, turn->vat);
  v->rq_next = turn->spawned;
  turn->spawned = v;
  *out = &v->first;
  return VAT_OK;
}

int vat_host_spawn(vat_system *sys, const vat_entity_def *def, vat_ref **out,
                   void **state_out) {
  int rc = vat__check_host();
  if (rc != VAT_OK)
    return rc;
  if (sys == NULL || def == NULL || out == NULL ||
      vat__flow_check(sys, def->overload) != VAT_OK)
    return VAT_EINVAL;
  if (vat__system_state(sys) != VAT__RUNNING)
    return VAT_ECLOSED;
  vat__vat *v;
  vat__vat_new(sys, def, &v, state_out);
  atomic_fetch_add_explicit(&sys->ext_spawned, 1, memory_order_relaxed);
  *out = &v->first;
  return VAT_OK;
}

int vat_entity_new(vat_turn *turn, const vat_entity_def *def, vat_ref **out,
                   void **state_out) {
  int rc = check_make(turn, def, out);
  if (rc != VAT_OK)
    return rc;
  struct vat_entity *e = vat__gc_alloc(sizeof *e + def->state_size);
  entity_init(e, turn->vat, def, state_out);
  if (def->on_stop)
    vat__hooks_entity_stop(turn->vat, e, def->on_stop);
  *out = e;
  return VAT_OK;
}

bool vat_ref_same_vat(vat_ref *a, vat_ref *b) {
  return a != NULL && b != NULL && a->vat == b->vat;
}

vat_system *vat_ref_system(vat_ref *ref) {
  return ref ? ref->vat->sys : NULL;
}

bool vat_ref_is_dead(vat_ref *ref) {
  return ref != NULL && vat__is_dead(ref->vat);
}

vat_value vat_ref_exit_reason(vat_ref *ref) {
  if (ref == NULL)
    return vat_null();
  if (vat__is_dead(ref->vat))
    return ref->vat->ext->exit_reason;
  /* The core does not end each vat of a stopped system one by one; to its
   * refs they ended with the system. */
  if (vat__system_state(ref->vat->sys) >= VAT__STOPPED)
    return vat_atom_value(vat__atom.shutdown);
  return vat_null();
}
