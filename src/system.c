/* Systems: configuration, start, quiescent shutdown, destroy, statistics. */
#include <errno.h>
#include <math.h>
#include <sched.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"
#include "vat/exits.h"
#include "vat_gc.h"

void vat_config_default(vat_config *cfg) {
  long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  *cfg = (vat_config){
      .workers = cpus > 0 ? (unsigned)cpus : 1,
      .batch = 64,
      .spin = 64,
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
      (cfg->deterministic && cfg->workers != 0))
    return VAT_EINVAL;
  bool host_driven = cfg->workers == 0;
  unsigned nworkers = host_driven ? 1 : cfg->workers;
  /* Collector memory: the system lives as long as anything refers to it, so
   * a ref into a destroyed system never dangles. */
  vat_system *sys = GC_MALLOC(sizeof *sys);
  vat__worker **workers = GC_MALLOC(nworkers * sizeof *workers);
  if (sys == NULL || workers == NULL)
    return VAT_ENOMEM;
  sys->cfg = *cfg;
#if VAT_HOSTILE
  sys->cfg.batch = 1;
#endif
  sys->workers = workers;
  sys->nworkers = nworkers;
  sys->host_driven = host_driven;
  sys->wake_fd = -1;
  sys->virtual_clock = cfg->deterministic;
  sys->det_rng = cfg->seed ? cfg->seed : 0x9E3779B97F4A7C15ull;
  if (host_driven && (rc = vat__host_open(sys)) != VAT_OK)
    return rc;
  vat__inject_init(&sys->inject);
  vat__msgdepot_init(&sys->depot);
  atomic_init(&sys->state, VAT__RUNNING);
  pthread_mutex_init(&sys->lock, NULL);
  pthread_mutex_init(&sys->boundary_lock, NULL);
  pthread_cond_init(&sys->park_cond, NULL);
  pthread_condattr_t attr;
  pthread_condattr_init(&attr);
  pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
  pthread_cond_init(&sys->quiet_cond, &attr);
  pthread_condattr_destroy(&attr);
  rc = vat__timers_start(sys);
  if (rc != VAT_OK)
    return rc;
  rc = vat__workers_start(sys);
  if (rc != VAT_OK) {
    vat__timers_stop(sys);
    return rc;
  }
  *out = sys;
  return VAT_OK;
}

bool vat__quiescent_locked(vat_system *sys) {
  return atomic_load_explicit(&sys->parked, memory_order_seq_cst) ==
             sys->nworkers &&
         atomic_load_explicit(&sys->host_inflight, memory_order_seq_cst) == 0 &&
         vat__inject_size(&sys->inject) == 0;
}

uint64_t vat__clock_now(vat_system *sys) {
  if (sys->virtual_clock)
    return atomic_load_explicit(&sys->virtual_now_ns, memory_order_acquire);
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

void vat__notify_quiet(vat_system *sys) {
  pthread_mutex_lock(&sys->lock);
  pthread_cond_broadcast(&sys->quiet_cond);
  pthread_mutex_unlock(&sys->lock);
}

struct timespec vat__deadline_after(double seconds) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  if (!(seconds > 0))
    return ts;
  if (seconds > 1e9)
    seconds = 1e9;
  double whole = floor(seconds);
  ts.tv_sec += (time_t)whole;
  ts.tv_nsec += (long)((seconds - whole) * 1e9);
  if (ts.tv_nsec >= 1000000000L) {
    ts.tv_sec++;
    ts.tv_nsec -= 1000000000L;
  }
  return ts;
}

/* Waits until every worker is parked with nothing queued, or the deadline. */
static bool wait_quiescent(vat_system *sys, double timeout_s) {
  struct timespec deadline = vat__deadline_after(timeout_s);
  pthread_mutex_lock(&sys->lock);
  bool quiet;
  while (!(quiet = vat__quiescent_locked(sys))) {
    if (pthread_cond_timedwait(&sys->quiet_cond, &sys->lock, &deadline) ==
        ETIMEDOUT) {
      quiet = vat__quiescent_locked(sys);
      break;
    }
  }
  pthread_mutex_unlock(&sys->lock);
  return quiet;
}

/* Empties a vat's mailbox after the workers stopped; returns how many
 * messages it held. Signals get their drop, so no promise waits for ever. */
static uint64_t count_queued(vat__vat *v) {
  uint64_t n = 0;
  for (vat__msg *m; (m = vat__mailbox_pop_stopped(&v->mailbox)) != NULL; n++)
    vat__drop_at_shutdown(m);
  return n;
}

/* After the workers stopped: what was still queued is dropped, and said. */
static uint64_t count_dropped(vat_system *sys) {
  uint64_t n = 0;
  for (unsigned i = 0; i < sys->nworkers; i++) {
    vat__worker *w = sys->workers[i];
    if (w->next)
      n += count_queued(w->next);
    for (unsigned j = 0; j < w->lane_len; j++)
      n += count_queued(w->lane[j]);
    for (vat__vat *v; (v = vat__runq_pop(&w->runq)) != NULL;)
      n += count_queued(v);
  }
  for (vat__vat *v; (v = vat__inject_pop(&sys->inject)) != NULL;)
    n += count_queued(v);
  return n;
}

/* Waits until no sender from outside is between its state check and its
 * push. Called after STOPPED is published: a sender that comes later sees
 * it and drops its message itself, so the wait is for the few stores of
 * those already past the check, however long they were preempted. */
static void wait_senders(vat_system *sys) {
  pthread_mutex_lock(&sys->lock);
  while (atomic_load_explicit(&sys->host_inflight, memory_order_seq_cst) != 0)
    pthread_cond_wait(&sys->quiet_cond, &sys->lock);
  pthread_mutex_unlock(&sys->lock);
}

/* --- The boundary ---------------------------------------------------------
 *
 * The system keeps no list of its vats (a vat nobody refers to must stay
 * collectable), but it must end, for those outside, the vats they wait on.
 * So it keeps those only: a vat is noted once, the first time it takes on
 * such state, and the note is a weak reference (a disappearing link): a
 * vat that is collected was waited on by nobody, and its note empties. */

typedef struct vat__edge {
  struct vat__edge *next;
  GC_hidden_pointer vat; /* 0 once the collector reclaimed it */
} vat__edge;

/* Drops the notes of collected vats; under boundary_lock. Reading `vat`
 * without the allocator's lock is enough to see whether it is 0. */
static void prune_edges(vat_system *sys) {
  size_t live = 0;
  for (vat__edge **e = &sys->boundary; *e != NULL;) {
    if ((*e)->vat == 0) {
      vat__edge *gone = *e;
      *e = gone->next;
      gone->next = NULL; /* a stale link would retain the chain */
    } else {
      e = &(*e)->next;
      live++;
    }
  }
  sys->boundary_len = live;
  sys->boundary_prune_at = 2 * live + 64;
}

void vat__boundary_note(vat__vat *v) {
  vat__cold *cold = vat__cold_of(v);
  if (cold->on_boundary)
    return;
  cold->on_boundary = true;
  vat__edge *e = vat__gc_alloc(sizeof *e);
  e->vat = GC_HIDE_POINTER(v);
  if (GC_general_register_disappearing_link((void **)&e->vat, v) ==
      GC_NO_MEMORY)
    abort();
  vat_system *sys = v->sys;
  pthread_mutex_lock(&sys->boundary_lock);
  e->next = sys->boundary;
  sys->boundary = e;
  if (++sys->boundary_len >= sys->boundary_prune_at)
    prune_edges(sys);
  pthread_mutex_unlock(&sys->boundary_lock);
}

typedef struct reveal_ctx {
  vat__edge *head;
  vat__vat **out;
} reveal_ctx;

/* Under the allocator's lock, so no collection clears a link between the
 * read and the store into `out`, where the collector sees it. */
static void *reveal_edges(void *arg) {
  reveal_ctx *ctx = arg;
  size_t i = 0;
  for (vat__edge *e = ctx->head; e != NULL; e = e->next)
    if (e->vat != 0)
      ctx->out[i++] = GC_REVEAL_POINTER(e->vat);
  return NULL;
}

/* After the workers stopped: the vats noted on the boundary break what
 * they owe and fire their links and monitors to other systems, all with
 * `shutdown`. Their own system's vats are stopped too, so nothing there
 * is told. */
static void settle_boundary(vat_system *sys) {
  pthread_mutex_lock(&sys->boundary_lock);
  reveal_ctx ctx = {.head = sys->boundary};
  size_t n = sys->boundary_len;
  sys->boundary = NULL;
  sys->boundary_len = 0;
  pthread_mutex_unlock(&sys->boundary_lock);
  if (n == 0)
    return;
  ctx.out = vat__gc_alloc(n * sizeof *ctx.out);
  GC_call_with_alloc_lock(reveal_edges, &ctx);
  vat_value reason = vat_atom_value(vat_atom_shutdown());
  for (size_t i = 0; i < n; i++) {
    vat__vat *v = ctx.out[i];
    if (v == NULL || vat__is_dead(v))
      continue; /* collected, or ended and told everyone then */
    vat__promises_terminated(NULL, v, reason);
    vat__exits_system_stopped(v, reason);
  }
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
                                : wait_quiescent(sys, timeout_s);
  /* seq_cst: a sender from outside that increments host_inflight after
   * this sees STOPPED (deliver_external). */
  atomic_store_explicit(&sys->state, VAT__STOPPED, memory_order_seq_cst);
  vat__wake_all(sys);
  vat__workers_join(sys);
  vat__timers_stop(sys);
  /* Accepted messages still on their way in land before the count, so
   * each is delivered, a dead letter, or dropped here: never lost. */
  wait_senders(sys);
  sys->dropped_at_shutdown = count_dropped(sys);
  settle_boundary(sys);
  return quiet ? VAT_OK : VAT_ETIMEDOUT;
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
  while (atomic_load_explicit(&sys->host_inflight, memory_order_seq_cst) != 0)
    sched_yield();
  if (sys->host_driven)
    vat__host_close(sys);
  /* Each worker's pool, queue and counters stay readable (stats) and are
   * reclaimed with the system. */
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
