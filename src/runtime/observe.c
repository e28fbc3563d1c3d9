/* Introspection from any thread (vat/observe.h): snapshots of a vat and of
 * a system, and monitors held by host threads. It ties core, exits, sched
 * and promise together, so it lives here. Every read is of a field its
 * owner already keeps, stored with a relaxed or release atomic store
 * (plain moves): the message path pays nothing for it. */
#include "core/overload.h"
#include "core/reasons.h"
#include "core/system.h"
#include "core/thread.h"
#include "exits/exits.h"
#include "exits/state.h"
#include "promise/state.h"
#include "util/clock.h"
#include "util/mem.h"
#include "vat/observe.h"

/* A walk of a mailbox stops here: a queue longer than this reads as this. */
#define QUEUE_COUNT_MAX ((size_t)1 << 30)

/* --- One vat ------------------------------------------------------------- */

static void read_exits(vat__vat *v, vat_info *out) {
  vat__vat_ext *x = vat__ext_peek(v);
  /* Acquire: pairs with the release store that installed it. */
  struct vat__exits *e = x ? __atomic_load_n(&x->exits, __ATOMIC_ACQUIRE) : 0;
  if (e == NULL)
    return;
  out->links = vat__xmap_size_peek(&e->links);
  out->monitors_held = vat__xmap_size_peek(&e->held);
  out->monitored_by = vat__xmap_size_peek(&e->watchers);
  out->traps_exits = __atomic_load_n(&e->trap, __ATOMIC_RELAXED) != NULL;
}

int vat_ref_inspect(vat_ref *ref, vat_info *out) {
  if (ref == NULL || out == NULL)
    return VAT_EINVAL;
  vat__vat *v = ref->vat;
  /* Null while it runs; once it ended (the `dead` flag's release publishes
   * the reason), or its system stopped with it alive, the reason. */
  vat_value reason = vat_ref_exit_reason(ref);
  *out = (vat_info){
      .system = v->sys,
      .label = vat__label_of(v),
      .alive = vat_is_null(reason),
      .exit_reason = reason,
      .turns = __atomic_load_n(&v->turns, __ATOMIC_RELAXED),
      .queue_len = vat__mailbox_peek_len(&v->mailbox, QUEUE_COUNT_MAX),
  };
  vat__vat *on = vat__overload_muted_on(v);
  out->muted = on != NULL;
  out->muted_on_label = on != NULL ? vat__label_of(on) : NULL;
  /* A dead vat's tables were cleared: it holds no link or monitor. */
  if (!vat__is_dead(v))
    read_exits(v, out);
  return VAT_OK;
}

bool vat_ref_is_muted_on(vat_ref *ref, vat_ref *on) {
  return ref != NULL && on != NULL && vat__overload_muted_on(ref->vat) == on->vat;
}

/* --- A system --------------------------------------------------------------
 */

static uint64_t relaxed(vat__counter *c) {
  return atomic_load_explicit(c, memory_order_relaxed);
}

static void read_worker(vat_system *sys, vat__worker *w, uint64_t now,
                        vat_worker_info *out) {
  *out = (vat_worker_info){
      .turns = relaxed(&w->delivered),
      .steals = relaxed(&w->run.steals),
      .parks = relaxed(&w->parks),
  };
  if (sys->host_driven)
    return;
  uint64_t idle = relaxed(&w->idle_ns), since = relaxed(&w->park_since);
  if (since != 0 && now > since)
    idle += now - since; /* parked now: that sleep counts too */
  uint64_t alive = now > sys->started_ns ? now - sys->started_ns : 0;
  out->idle_ns = idle < alive ? idle : alive;
  out->busy_ns = alive - out->idle_ns;
}

int vat_system_inspect(vat_system *sys, vat_sys_info *out,
                       vat_worker_info *workers, size_t cap) {
  if (sys == NULL || out == NULL || (workers == NULL && cap > 0))
    return VAT_EINVAL;
  uint64_t now = vat__monotonic_ns();
  uint64_t stopped =
      atomic_load_explicit(&sys->stopped_ns, memory_order_relaxed);
  if (stopped != 0)
    now = stopped; /* its workers' clocks stopped with them */
  *out = (vat_sys_info){
      .workers = sys->nworkers,
      .host_driven = sys->host_driven,
      .running = vat__system_state(sys) == VAT__RUNNING,
      .uptime_ns = now - sys->started_ns,
  };
  vat_system_stats(sys, &out->stats);
  for (size_t i = 0; i < sys->nworkers && i < cap; i++)
    read_worker(sys, sys->workers[i], now, &workers[i]);
  return (int)sys->nworkers;
}

/* --- Host threads' monitors ------------------------------------------------
 */

struct vat_host_mon {
  vat_promise *down;
  void *watch;        /* exits' handle; NULL when it never reached the vat */
  _Atomic bool fired; /* the down or the demonitor: whichever came first */
};

/* Exactly one of the down and the demonitor settles the promise: the one
 * that flips `fired`. acq_rel: the winner's settling is ordered after
 * everything the loser did before it tried. */
static bool claim(vat_host_mon *m) {
  return !atomic_exchange_explicit(&m->fired, true, memory_order_acq_rel);
}

static void host_down(void *ctx, vat_value reason) {
  vat_host_mon *m = ctx;
  if (claim(m))
    vat__promise_settle(m->down, ST_RESOLVED, reason, NULL, false);
}

int vat_host_monitor(vat_ref *target, vat_host_mon **mon, vat_promise **down) {
  int rc = vat__check_host();
  if (rc != VAT_OK)
    return rc;
  if (target == NULL || down == NULL)
    return VAT_EINVAL;
  vat_host_mon *m = vat__gc_alloc(sizeof *m);
  vat_resolver *unused;
  vat_promise_new(&m->down, &unused);
  atomic_init(&m->fired, false);
  if (vat__is_dead(target->vat)) {
    host_down(m, vat_atom_value(vat__reason.noproc));
  } else {
    rc = vat__exits_host_watch(target, host_down, m, &m->watch);
    if (rc != VAT_OK)
      return rc; /* the callback never runs: the signal was not sent */
  }
  *down = m->down;
  if (mon)
    *mon = m;
  return VAT_OK;
}

int vat_host_demonitor(vat_host_mon *mon) {
  if (mon == NULL)
    return VAT_EINVAL;
  if (!claim(mon))
    return VAT_ENOTFOUND;
  vat__promise_settle(mon->down, ST_BROKEN,
                      vat_atom_value(vat__reason.demonitored), NULL, false);
  if (mon->watch)
    vat__exits_host_unwatch(mon->watch);
  return VAT_OK;
}

const vat_atom *vat_atom_demonitored(void) {
  return vat__reason.demonitored;
}
