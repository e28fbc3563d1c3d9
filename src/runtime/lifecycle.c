/* Systems: configuration, start, quiescent shutdown, destroy, statistics.
 * The life cycle ties the subsystems together: it starts the modules
 * (core/hooks.h) and the workers (loop/), and shutdown drains, stops,
 * counts what was left and settles the boundary, in that order. */
#include <sched.h>
#include <unistd.h>

#include "core/boundary.h"
#include "core/deliver.h"
#include "core/hooks.h"
#include "core/overload.h"
#include "core/system.h"
#include "core/thread.h"
#include "loop/loop.h"
#include "runtime/collector.h"
#include "sched/sched.h"
#include "trace/trace.h"
#include "util/clock.h"
#include "util/gc.h"
#include "util/testpoint.h"
#include "vat/observe.h"

void vat_config_default(vat_config *cfg) {
  long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  *cfg = (vat_config){
      .workers = cpus > 0 ? (unsigned)cpus : 1,
      .batch = 64,
      .spin = 512,
      .on_crash = vat_crash_print,
  };
}

int vat_system_new(const vat_config *cfg, vat_system **out) {
  int rc = vat__check_host();
  if (rc != VAT_OK)
    return rc;
  vat_config defaults;
  if (cfg == NULL) {
    vat_config_default(&defaults);
    cfg = &defaults;
  }
  if (out == NULL || cfg->batch == 0 ||
      (cfg->deterministic && cfg->workers != 0) ||
      vat__overload_check_defaults(&cfg->overload) != VAT_OK)
    return VAT_EINVAL;
  bool host_driven = cfg->workers == 0;
  unsigned nworkers = host_driven ? 1 : cfg->workers;
  vat__collector_reserve(nworkers);
  /* Collector memory: the system lives as long as anything refers to it, so
   * a ref into a destroyed system never dangles. */
  vat_system *sys = GC_MALLOC(sizeof *sys);
  vat__worker **workers = GC_MALLOC(nworkers * sizeof *workers);
  vat__runner **runners = GC_MALLOC(nworkers * sizeof *runners);
  if (sys == NULL || workers == NULL || runners == NULL)
    return VAT_ENOMEM;
  sys->cfg = *cfg;
#if VAT_HOSTILE
  sys->cfg.batch = 1;
#endif
  sys->workers = workers;
  sys->nworkers = nworkers;
  sys->started_ns = vat__monotonic_ns();
  sys->host_driven = host_driven;
  sys->virtual_clock = cfg->deterministic;
  sys->sched.det_rng = cfg->seed ? cfg->seed : 0x9E3779B97F4A7C15ull;
  if ((rc = vat__trace_configure(sys)) != VAT_OK)
    return rc;
  if ((rc = vat__sched_init(&sys->sched, runners, nworkers, host_driven)) !=
      VAT_OK)
    return rc;
  vat__msgdepot_init(&sys->depot);
  atomic_init(&sys->state, VAT__RUNNING);
  pthread_mutex_init(&sys->boundary_lock, NULL);
  rc = vat__hooks_system_start(sys);
  if (rc != VAT_OK)
    return rc;
  rc = vat__workers_start(sys);
  if (rc != VAT_OK) {
    vat__hooks_system_stop(sys);
    return rc;
  }
  *out = sys;
  return VAT_OK;
}

int vat_system_shutdown(vat_system *sys, double timeout_s) {
  if (sys == NULL)
    return VAT_EINVAL;
  int rc = vat__check_host();
  if (rc != VAT_OK)
    return rc;
  int expected = VAT__RUNNING;
  if (!atomic_compare_exchange_strong(&sys->state, &expected, VAT__CLOSING))
    return VAT_ECLOSED;
  bool quiet = sys->host_driven ? vat__host_drain(sys, timeout_s)
                                : vat__wait_quiescent(&sys->sched, timeout_s);
  VAT__TEST_POINT("system.shutdown.quiet");
  /* seq_cst: a sender from outside that increments host_inflight after
   * this sees STOPPED (core/deliver.c). */
  atomic_store_explicit(&sys->state, VAT__STOPPED, memory_order_seq_cst);
  vat__wake_all(&sys->sched);
  vat__workers_join(sys);
  /* Relaxed: a snapshot needs the time, not what came before it. */
  atomic_store_explicit(&sys->stopped_ns, vat__monotonic_ns(),
                        memory_order_relaxed);
  vat__hooks_system_stop(sys);
  /* Accepted messages still on their way in land before the count, so
   * each is delivered, a dead letter, or dropped here: never lost. */
  vat__wait_senders(&sys->sched);
  sys->dropped_at_shutdown = vat__drop_stranded(sys);
  vat__boundary_settle(sys);
  /* Quiescent at the check is not enough: a vat of another system may send
   * between it and the stop, and what it sent was just dropped. */
  return quiet && sys->dropped_at_shutdown == 0 ? VAT_OK : VAT_ETIMEDOUT;
}

int vat_system_destroy(vat_system *sys) {
  if (sys == NULL)
    return VAT_EINVAL;
  int rc = vat__check_host();
  if (rc != VAT_OK)
    return rc;
  int state = vat__system_state(sys);
  if (state == VAT__DESTROYED)
    return VAT_ECLOSED;
  if (state == VAT__RUNNING)
    vat_system_shutdown(sys, 0);
  atomic_store_explicit(&sys->state, VAT__DESTROYED, memory_order_release);
  /* A sender from outside that saw the system running may still be about
   * to write to the wake-up descriptor; its number must not be reused
   * under it. Such a sender has only a few stores left to do. */
  while (atomic_load_explicit(&sys->sched.host_inflight,
                              memory_order_seq_cst) != 0)
    sched_yield();
  if (sys->host_driven)
    vat__host_close(&sys->sched);
  /* Each worker's pool, queue and counters stay readable (the snapshots:
   * vat_system_stats, vat_system_inspect) and are reclaimed with the
   * system, which the collector keeps while anyone holds it. */
  return VAT_OK;
}

int vat_system_stats(vat_system *sys, vat_stats *out) {
  if (sys == NULL || out == NULL)
    return VAT_EINVAL;
  vat_stats s = {
      .dead_letters = atomic_load(&sys->ext_dead_letters),
      .spawned = atomic_load(&sys->ext_spawned),
      .terminated = atomic_load(&sys->ext_terminated),
      .dropped_at_shutdown = sys->dropped_at_shutdown,
      .overload_dropped =
          atomic_load_explicit(&sys->overload_dropped, memory_order_relaxed),
  };
  for (unsigned i = 0; i < sys->nworkers; i++) {
    vat__worker *w = sys->workers[i];
    s.delivered += atomic_load_explicit(&w->delivered, memory_order_relaxed);
    s.dead_letters +=
        atomic_load_explicit(&w->dead_letters, memory_order_relaxed);
    s.spawned += atomic_load_explicit(&w->spawned, memory_order_relaxed);
    s.terminated += atomic_load_explicit(&w->terminated, memory_order_relaxed);
  }
  *out = s;
  return VAT_OK;
}
