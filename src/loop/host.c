/* Host-driven systems: no threads of their own; the host runs them inside
 * vat_system_run() and waits on an eventfd (sched/wake.c) between calls.
 * The calling thread acts as the system's one worker for the duration of
 * the call.
 *
 * Deterministic mode picks the next vat with a seeded generator
 * (sched/pick.c); its timers read a virtual clock the host advances.
 */
#include <sched.h>
#include <stdint.h>

#include "core/system.h"
#include "core/trace.h"
#include "core/turn.h"
#include "loop/loop.h"
#include "sched/sched.h"
#include "timer/timer.h"
#include "util/clock.h"
#include "vat/host.h"

static int enter(vat_system *sys) {
  if (sys == NULL)
    return VAT_EINVAL;
  int rc = vat__check_host();
  if (rc != VAT_OK)
    return rc;
  /* Destroyed: VAT_ECLOSED, whatever the kind (core.h). */
  if (vat__system_state(sys) == VAT__DESTROYED)
    return VAT_ECLOSED;
  if (!sys->host_driven)
    return VAT_ENOTSUP;
  if (vat__system_state(sys) != VAT__RUNNING)
    return VAT_ECLOSED;
  if (atomic_exchange_explicit(&sys->host_running, true, memory_order_acquire))
    return VAT_EBUSY;
  /* Again, inside: shutdown may have closed the system and run it dry
   * between the first look and the exchange; from here on it waits for
   * us, and we stop at the next batch once it closes (run_ready). */
  if (vat__system_state(sys) != VAT__RUNNING) {
    atomic_store_explicit(&sys->host_running, false, memory_order_release);
    return VAT_ECLOSED;
  }
  return VAT_OK;
}

static void leave(vat_system *sys) {
  atomic_store_explicit(&sys->host_running, false, memory_order_release);
}

/* --- Running ------------------------------------------------------------ */

/* Whether a run call should hand the system over: it is closing and this
 * is not shutdown's own drain. */
static bool closing(vat_system *sys, bool draining) {
  return !draining && vat__system_state(sys) != VAT__RUNNING;
}

static void run_ready(vat_system *sys, uint64_t max_turns, uint64_t max_ns,
                      bool draining, vat_run_result *res) {
  vat__worker *w = sys->workers[0];
  vat__worker *outer = vat__current_worker;
  vat__current_worker = w;
  vat__host_clear_wake(&sys->sched);
  vat__timers_fire_due(sys, vat__clock_now(sys));
  uint64_t start = max_ns ? vat__monotonic_ns() : 0;
  uint64_t before = atomic_load_explicit(&w->delivered, memory_order_relaxed);
  bool seeded = sys->cfg.deterministic;
  for (;;) {
    uint64_t done =
        atomic_load_explicit(&w->delivered, memory_order_relaxed) - before;
    if (max_turns && done >= max_turns)
      break;
    if (max_ns && vat__monotonic_ns() - start >= max_ns)
      break;
    if (closing(sys, draining))
      break;
    vat__task *t = seeded ? vat__pick_seeded(&w->run) : vat__pick_fifo(&w->run);
    if (t == NULL)
      break;
    unsigned budget = seeded ? 1 : sys->cfg.batch;
    if (max_turns && max_turns - done < budget)
      budget = (unsigned)(max_turns - done);
    if (vat__run_batch(w, vat__vat_of(t), budget) &&
        !vat__runq_push(&w->run.runq, t))
      vat__schedule_external(&sys->sched, t);
  }
  if (w->trace != NULL) /* ends the last turn's slice */
    vat__trace_mark(w->trace, VAT__TR_IDLE);
  res->turns +=
      atomic_load_explicit(&w->delivered, memory_order_relaxed) - before;
  res->more = vat__sched_ready(&w->run);
  vat__current_worker = outer;
}

int vat_system_run(vat_system *sys, uint64_t max_turns, uint64_t max_ns,
                   vat_run_result *out) {
  int rc = enter(sys);
  if (rc != VAT_OK)
    return rc;
  vat_run_result res = {0};
  run_ready(sys, max_turns, max_ns, false, &res);
  leave(sys);
  if (out)
    *out = res;
  return VAT_OK;
}

static bool timer_due(vat_system *sys) {
  return vat__timers_next_deadline(sys) <= vat__clock_now(sys);
}

int vat_system_run_until_quiescent(vat_system *sys, uint64_t max_turns,
                                   vat_run_result *out) {
  int rc = enter(sys);
  if (rc != VAT_OK)
    return rc;
  vat_run_result res = {0};
  do {
    uint64_t left = max_turns ? max_turns - res.turns : 0;
    run_ready(sys, left, 0, false, &res);
  } while ((res.more || timer_due(sys)) &&
           (!max_turns || res.turns < max_turns) && !closing(sys, false));
  leave(sys);
  if (out)
    *out = res;
  return VAT_OK;
}

bool vat__host_drain(vat_system *sys, double timeout_s) {
  /* Wait out a run call on another thread: it sees CLOSING at its next
   * batch and returns; later ones are refused (enter). */
  while (
      atomic_exchange_explicit(&sys->host_running, true, memory_order_acquire))
    sched_yield();
  uint64_t deadline =
      vat__monotonic_ns() + (uint64_t)(timeout_s > 0 ? timeout_s * 1e9 : 0);
  vat_run_result res = {0};
  /* With no time to drain, no turn runs: what is queued is dropped, the
   * same whatever the clock reads (a simulated world's stop relies on it,
   * sim/). */
  while (timeout_s > 0) {
    /* In slices of at most 1 ms, never past the deadline. */
    uint64_t now = vat__monotonic_ns();
    uint64_t slice = deadline > now ? deadline - now : 1;
    run_ready(sys, 0, slice < 1000000 ? slice : 1000000, true, &res);
    if (!(res.more || atomic_load_explicit(&sys->sched.host_inflight,
                                           memory_order_seq_cst)) ||
        vat__monotonic_ns() >= deadline)
      break;
  }
  bool quiet = !res.more &&
               atomic_load_explicit(&sys->sched.host_inflight,
                                    memory_order_seq_cst) == 0 &&
               !vat__sched_ready(&sys->workers[0]->run);
  leave(sys);
  return quiet;
}

/* --- Waiting ------------------------------------------------------------ */

int vat_system_fd(vat_system *sys, int *fd) {
  if (sys == NULL || fd == NULL)
    return VAT_EINVAL;
  if (vat__system_state(sys) == VAT__DESTROYED)
    return VAT_ECLOSED;
  if (!sys->host_driven)
    return VAT_ENOTSUP;
  *fd = sys->sched.wake_fd;
  return VAT_OK;
}

int vat_system_next_timer(vat_system *sys, int64_t *ns) {
  if (sys == NULL || ns == NULL)
    return VAT_EINVAL;
  if (vat__system_state(sys) == VAT__DESTROYED)
    return VAT_ECLOSED;
  uint64_t deadline = vat__timers_next_deadline(sys);
  uint64_t now = vat__clock_now(sys);
  if (deadline == UINT64_MAX)
    *ns = -1;
  else
    *ns = deadline <= now ? 0 : (int64_t)(deadline - now);
  return VAT_OK;
}

int vat_system_advance_clock(vat_system *sys, uint64_t ns) {
  if (sys == NULL)
    return VAT_EINVAL;
  if (vat__system_state(sys) == VAT__DESTROYED)
    return VAT_ECLOSED;
  if (!sys->virtual_clock)
    return VAT_ENOTSUP;
  atomic_fetch_add_explicit(&sys->virtual_now_ns, ns, memory_order_acq_rel);
  return VAT_OK;
}

uint64_t vat_system_now(vat_system *sys) {
  return sys ? vat__clock_now(sys) : 0;
}
