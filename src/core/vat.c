/* Vats and entities: making them, ending them, and what a ref can tell. */
#include "core/crash.h"
#include "core/hooks.h"
#include "core/overload.h"
#include "core/reasons.h"
#include "core/system.h"
#include "core/trace.h"
#include "core/turn.h"
#include "core/worker.h"
#include "util/mem.h"
#include "util/objcache.h"

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

/* What to ask the collector for a vat of `bytes`. With interior pointers
 * on (vat_init insists), the collector adds one byte to every request
 * before rounding it up to its 16-byte granules, so that a pointer just
 * past an object is not taken for one into the next: a 128-byte request
 * costs 144 bytes, and objects of 144 bytes straddle cache lines, two vats
 * sharing each line they meet on (false sharing made 80,000 self-sending
 * vats slower on two workers than on one). Asking one byte less than a
 * whole number of lines gives an object of exactly those lines; the
 * thread-local free lists that serve such sizes carve each 4 KiB block
 * into objects of that size from its start, so each such vat begins on a
 * line and shares none. A vat with a small state costs 128 bytes, not 144.
 * A vat that fills its lines exactly (skynet's: 128 bytes) would need a
 * whole line more for that byte: it gets the next granule instead, 16
 * bytes more, as before, and shares a line with its neighbours. */
static size_t vat_request_size(size_t bytes) {
  if (bytes % VAT__CACHE_LINE == 0)
    return bytes;
  return (bytes + VAT__CACHE_LINE - 1) / VAT__CACHE_LINE * VAT__CACHE_LINE -
         VAT__GC_EXTRA;
}

/* Where a vat's extension goes when it is made with the vat: after the
 * state, 16-byte aligned. */
static size_t ext_offset(const vat_entity_def *def) {
  return (sizeof(vat__vat) + def->state_size + 15) & ~(size_t)15;
}

int vat__vat_new(vat_system *sys, vat__objcache *cache,
                 const vat_entity_def *def, vat__vat **out, void **state_out) {
  /* One allocation for the vat, its first entity and that entity's state;
   * the collector zeroes it. A vat with a stop callback needs its
   * extension from the start (the callback is kept there, see
   * vat__vat_ext): it comes in the same allocation, one object and one
   * allocation instead of two per such vat (spawn's million), and one
   * pointer less to chase from another core when the vat ends there. */
  size_t bytes = def->on_stop ? ext_offset(def) + sizeof(vat__vat_ext)
                              : sizeof(vat__vat) + def->state_size;
  size_t size = vat_request_size(bytes);
  vat__vat *v =
      cache != NULL ? vat__objcache_alloc(cache, size) : vat__gc_alloc(size);
  vat__mailbox_init(&v->mailbox);
  v->sys = sys;
  atomic_init(&v->flags, 0);
  entity_init(&v->first, v, def, state_out);
  /* The first entity's stop callback is the core's to keep (see
   * vat__vat_ext): a vat that only wants its end seen costs no module
   * state. */
  if (def->on_stop) {
    vat__vat_ext *x = (vat__vat_ext *)((char *)v + ext_offset(def));
    x->first_stop = def->on_stop;
    vat__ext_publish(v, x);
  }
  if (def->label)
    vat__label_set(v, def->label);
  if (def->overload)
    vat__overload_configure(v, def->overload); /* checked by the callers */
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
  /* A vat without an extension that ends `normal` (most short-lived vats:
   * skynet's million) gets none just to hold the reason: `dead` with no
   * reason reads as `normal` (vat__exit_reason), and no module keeps state
   * for it, so its hooks have nothing to do. One allocation less per vat. */
  vat__vat_ext *x = v->ext;
  if (x != NULL || !vat_is_atom(reason, vat__reason.normal)) {
    x = vat__ext_of(v);
    x->exit_reason = reason;
  }
  /* Release: readers that see `dead` see the reason. Messages still queued
   * are dropped by the turn loop as it drains the mailbox. */
  uint8_t was =
      atomic_fetch_or_explicit(&v->flags, VAT__DEAD, memory_order_release);
  /* Its muted senders and waiting hosts must not wait on a dead vat. */
  if (was & VAT__OVERLOADED)
    vat__overload_release(w, v);
  vat__count(&w->terminated, 1);
  if (w->trace != NULL)
    vat__trace_exit(w->trace, v, reason);
  /* Made before the hooks run: they forget the links and monitors that
   * say whether anyone watched. */
  vat_crash_report report;
  /* Most vats end `normal`: they skip the call. */
  bool crashed = cause != NULL && !vat_is_atom(reason, vat__reason.normal) &&
                 vat__crash_begin(v, reason, cause, &report);
  if (x != NULL && has_module_state(x))
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
  return vat__overload_check(turn->vat->sys, def->overload);
}

int vat_spawn(vat_turn *turn, const vat_entity_def *def, vat_ref **out,
              void **state_out) {
  int rc = check_make(turn, def, out);
  if (rc != VAT_OK)
    return rc;
  vat__vat *v;
  vat__vat_new(turn->vat->sys, &turn->worker->objects, def, &v, state_out);
  /* Remembered so a failed turn can end it; nothing can send to it before
   * this turn commits, as the only ref is the one returned here. */
  vat__count(&turn->worker->spawned, 1);
  if (turn->worker->trace != NULL)
    vat__trace_spawn(turn->worker->trace, v, turn->vat);
  v->link = turn->spawned;
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
      vat__overload_check(sys, def->overload) != VAT_OK)
    return VAT_EINVAL;
  if (vat__system_state(sys) != VAT__RUNNING)
    return VAT_ECLOSED;
  vat__vat *v;
  vat__vat_new(sys, NULL, def, &v, state_out);
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

vat_value vat__exit_reason(vat__vat *v) {
  vat__vat_ext *x = vat__ext_peek(v);
  if (x == NULL || vat_is_null(x->exit_reason))
    return vat_atom_value(vat__reason.normal);
  return x->exit_reason;
}

vat_value vat_ref_exit_reason(vat_ref *ref) {
  if (ref == NULL)
    return vat_null();
  if (vat__is_dead(ref->vat))
    return vat__exit_reason(ref->vat);
  /* The core does not end each vat of a stopped system one by one; to its
   * refs they ended with the system. */
  if (vat__system_state(ref->vat->sys) >= VAT__STOPPED)
    return vat_atom_value(vat__reason.shutdown);
  return vat_null();
}
