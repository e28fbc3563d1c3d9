/* A system's layout and its life-cycle state. The fields are grouped by
 * the subsystem that owns them.
 */
#ifndef VAT_CORE_SYSTEM_H
#define VAT_CORE_SYSTEM_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/msgpool.h"
#include "core/worker.h"
#include "sched/queues.h"
#include "util/clock.h"
#include "vat/core.h"

enum vat__system_state {
  VAT__RUNNING,
  VAT__CLOSING, /* host sends refused; waiting for quiescence */
  VAT__STOPPED, /* workers stopping or stopped */
  VAT__DESTROYED,
};

struct vat__timer_service;
struct vat__edge;

struct vat_system {
  vat_config cfg;
  struct vat__timer_service *timers; /* owned by timer/ */
  /* Threaded: one worker struct per thread. Host-driven: one worker struct
   * that whichever host thread is inside vat_system_run() acts as. */
  vat__worker **workers;
  unsigned nworkers;
  bool host_driven;
  _Atomic bool host_running; /* a thread is inside vat_system_run() */
  /* Where the workers' runnable vats wait, their parking and quiescence
   * (sched/): the system's lock is the scheduler's, and guards parking,
   * quiescence and shutdown, never the message path. */
  vat__sched sched;
  vat__msgdepot depot; /* free message nodes shared by the workers */
  _Atomic int state;

  /* Time as timers see it: the monotonic clock, or a virtual clock the
   * host advances (deterministic mode). See vat__clock_now(). */
  bool virtual_clock;
  _Atomic uint64_t virtual_now_ns;

  /* Vats that others outside the system wait on (core/boundary.c). */
  pthread_mutex_t boundary_lock;
  struct vat__edge *boundary;
  size_t boundary_len, boundary_prune_at;

  /* When vat_system_new made it and when its workers stopped (0: not
   * yet), on the monotonic clock, for snapshots (vat_system_inspect). */
  uint64_t started_ns;
  _Atomic uint64_t stopped_ns;

  /* Counts made outside the workers (host threads, other systems). */
  _Atomic uint64_t ext_dead_letters, ext_spawned, ext_terminated;
  /* Messages VAT_OVERLOAD_DROP dropped (core/overload.c), by any sender. */
  _Atomic uint64_t overload_dropped;
  uint64_t dropped_at_shutdown;

  /* A simulated world's watch on deliveries (sim/), set on a host-driven
   * system between run calls together with its worker's deliver_direct
   * NULL: each delivery its worker makes asks it first, and it returns
   * true when it took the chain (header, first..last, as vat__deliver
   * gets them) to hand to vat__deliver itself later. NULL: none. */
  bool (*det_hold)(void *ctx, vat__worker *w, vat__msg *header, vat__msg *first,
                   vat__msg *last);
  void *det_hold_ctx;

  /* Tracing (core/trace.h, trace/): on when trace_events is not 0. The
   * file's name (NULL: written only on request), and both clocks read
   * together at start, so ticks map to nanoseconds. */
  size_t trace_events;
  unsigned trace_tag; /* the process's n-th traced system: in flow ids */
  char *trace_path;
  uint64_t trace_tick0, trace_ns0;
  _Atomic bool trace_still; /* the workers are joined: no more events */
  /* A simulated world's tracks (sim/): the writer asks it for each vat's
   * track number (from 0) and name, -1 for one it does not know, and
   * draws a track per vat instead of one per worker. NULL: per worker. */
  int (*trace_vat_track)(void *ctx, const void *vat, char *name, size_t size);
  void *trace_vat_track_ctx;
};

static inline int vat__system_state(vat_system *sys) {
  return atomic_load_explicit(&sys->state, memory_order_acquire);
}

/** Nanoseconds on the system's clock (monotonic, or virtual). Any thread. */
static inline uint64_t vat__clock_now(vat_system *sys) {
  /* Acquire: pairs with vat_system_advance_clock's update. */
  if (sys->virtual_clock)
    return atomic_load_explicit(&sys->virtual_now_ns, memory_order_acquire);
  return vat__monotonic_ns();
}

#endif
