/* One thread, one libuv loop for a host-driven system and its sockets: the
 * remote benchmark's -w 0, as examples/uv_remote.c does it. The loop polls
 * the system's descriptor (vat_system_fd) beside the connections' sockets,
 * times its next timer, and runs it again while work is left. */
#ifndef BENCH_HOST_LOOP_H
#define BENCH_HOST_LOOP_H

#include <semaphore.h>
#include <stdbool.h>
#include <stdint.h>

#include <uv.h>
#include <vat.h>

/* How long the loop polls before it sleeps (REMOTE_SPIN_US sets it). */
#define HOST_LOOP_SPIN_US 40.0
/* How long one run of the system may take before the loop goes round
 * (REMOTE_RUN_NS sets it): the sockets are read and written between runs,
 * so a burst of sends goes out while it is made, not once it is all made
 * (bench/README.md has the sweep). */
#define HOST_LOOP_RUN_NS 200000

typedef struct host_loop {
  vat_system *sys;
  uv_loop_t *loop;
  uv_poll_t ready;     /* the system's descriptor: work from outside */
  uv_timer_t timer;    /* the system's next timer */
  uv_idle_t again;     /* work left after a run */
  uv_timer_t deadline; /* of host_loop_settle */
  bool expired;
  uint64_t runs;  /* of the system, so far */
  double spin_us; /* polls this long before it sleeps */
  uint64_t run_ns; /* each run of the system at most this long */
} host_loop;

/** Puts the host-driven `sys` on the default loop (of the calling,
 *  registered thread). */
void host_loop_start(host_loop *h, vat_system *sys);
/** Runs the loop until `done` can be taken. */
void host_loop_wait(host_loop *h, sem_t *done);
/** Runs the loop until `p` settles or `timeout_s` passed (negative: no
 *  limit); returns as vat_promise_wait does (VAT_OK, VAT_EBROKEN or
 *  VAT_ETIMEDOUT), with the value or reason in *out. */
int host_loop_settle(host_loop *h, vat_promise *p, double timeout_s,
                     vat_value *out);
/** Closes the handles and runs the loop until nothing is left on it. */
void host_loop_stop(host_loop *h);

#endif
