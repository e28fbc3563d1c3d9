/* A worker: a thread that runs vats (or, in a host-driven system, the one
 * context whichever host thread is inside vat_system_run() acts as). This
 * is the engine's half of it, which the turn loop and delivery use on
 * every message (its pool, its counters, the current run of sends); the
 * scheduler's half, its queues, is the runner block it begins with
 * (sched/queues.h).
 *
 * Everything here is the worker's own; other threads only steal from its
 * runner's queues and read the counters.
 */
#ifndef VAT_CORE_WORKER_H
#define VAT_CORE_WORKER_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "core/msgpool.h"
#include "core/vat.h"
#include "sched/queues.h"
#include "util/counter.h"
#include "util/objcache.h"

struct vat__worker {
  /* First: a runner's address is its worker's (vat__worker_of). */
  vat__runner run;
  /* Messages the current batch's turns sent in runs to one vat, past the
   * first of each run (core/overload.h, bursts). */
  unsigned burst;
  vat__msgpool pool;
  /* The header of the current turn's last run of sends to one vat, once
   * it has two messages, until its commit pushes it (core/send.c); and
   * the send an effect was deferred after, which no run may extend (a
   * stale one only makes a run start later). Here, beside the pool every
   * send touches, not in the turn, which every turn would have to clear. */
  vat__msg *run_header;
  vat__msg *run_cut;
  /* This worker's trace ring (core/trace.h); NULL unless the system is
   * traced, which the hot path tests once per turn and per commit. */
  struct vat__trace_ring *trace;
  vat_system *sys;
  /* The system whose vats vat__deliver reaches on its fast path: `sys`,
   * or NULL while a simulated world watches every delivery (det_hold in
   * core/system.h), which sends them all down the rare path at no cost
   * to the fast one's test. */
  vat_system *deliver_direct;
  vat__counter delivered, dead_letters, spawned, terminated;
  /* For snapshots (vat_system_inspect), off the message path: parks, and
   * nanoseconds spent parked; `park_since` is when the current park began
   * (0: not parked), so a snapshot counts a park still going on. Written
   * by the worker alone (loop/threads.c). */
  vat__counter parks, idle_ns, park_since;
  /* The vats this worker's turns spawn come from here (util/objcache.h). */
  vat__objcache objects;
  pthread_t thread;
};

_Static_assert(offsetof(struct vat__worker, run) == 0,
               "a runner's address is its worker's");

/** The worker whose runner `r` is. */
static inline vat__worker *vat__worker_of(vat__runner *r) {
  return (vat__worker *)(void *)r;
}

#endif
