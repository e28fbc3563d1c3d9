/* libvat — embedding: host-driven systems and the deterministic mode.
 *
 * A system made with `workers = 0` has no threads of its own. Its turns run
 * only inside vat_system_run(), on the thread that calls it, so a host fits
 * libvat into its own loop (poll/epoll, libuv, a frame loop):
 *
 *   int fd;
 *   vat_system_fd(sys, &fd);
 *   for (;;) {
 *     vat_run_result r;
 *     vat_system_run(sys, 0, 0, &r);   // run what is ready
 *     int64_t ns;
 *     vat_system_next_timer(sys, &ns); // -1: no timer pending
 *     int ms = r.more ? 0 : ns < 0 ? -1 : (int)((ns + 999999) / 1000000);
 *     poll(&(struct pollfd){.fd = fd, .events = POLLIN}, 1, ms);
 *   }
 *
 * The descriptor becomes readable when work arrives from outside a run
 * call: a host thread's send, another system's vat, a timer thread of
 * another system. Sends made by the system's own turns do not make it
 * readable: they are what `more` reports. A run call drains it. What is
 * promised: between run calls, while work from outside waits unrun, the
 * descriptor is readable (or becomes so as soon as the sender, between
 * its push and its write, goes on); and a wake-up that lands during or
 * after the run call that handled its work leaves it readable for at most
 * one more run call, so a loop like the one above wakes once more for
 * nothing, never spins. vat_system_run() returns VAT_ECLOSED once the
 * system is shutting down: the loop's cue to stop.
 *
 * Only one thread may be inside vat_system_run() at a time (VAT_EBUSY).
 */
#ifndef VAT_HOST_H
#define VAT_HOST_H

#include <stdbool.h>
#include <stdint.h>

#include "vat/core.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct vat_run_result {
  uint64_t turns; /* turns run by this call */
  bool more;      /* work is still ready: call again without waiting */
} vat_run_result;

/** Fires due timers, then runs ready turns of a host-driven system on the
 *  calling thread until nothing is ready, `max_turns` turns ran (0: no
 *  limit), `max_ns` nanoseconds passed (0: no limit; checked between
 *  batches of turns), or vat_system_shutdown() began (checked between
 *  batches too: the system is then the shutdown's to run). `out` may be
 *  NULL. Host thread.
 *  Errors: VAT_EINVAL (NULL sys), VAT_ECLOSED (destroyed, then whatever
 *  the kind; or shutting down or shut down), VAT_ENOTSUP (a system with
 *  workers), VAT_EBUSY (another thread is inside it), VAT_EINTURN,
 *  VAT_ENOTINIT, VAT_ENOTREGISTERED. */
int vat_system_run(vat_system *sys, uint64_t max_turns, uint64_t max_ns,
                   vat_run_result *out);

/** Runs until nothing is ready and no timer is due (in deterministic mode:
 *  due on the virtual clock, which this does not move), `max_turns` turns
 *  ran (0: no limit), or shutdown began. Errors as vat_system_run. */
int vat_system_run_until_quiescent(vat_system *sys, uint64_t max_turns,
                                   vat_run_result *out);

/** A file descriptor that polls readable when work arrived from outside a
 *  run call (see the top of this file for what is promised). Owned by the
 * system (closed by vat_system_destroy); do not read or close it. Any thread.
 * Errors: VAT_EINVAL, VAT_ECLOSED (destroyed), VAT_ENOTSUP (a system with
 * workers). */
int vat_system_fd(vat_system *sys, int *fd);

/** Nanoseconds until the next timer is due (0: due now), or -1 when none
 *  is pending. On the virtual clock in deterministic mode. Any thread.
 *  Errors: VAT_EINVAL (NULL sys or ns), VAT_ECLOSED (destroyed). */
int vat_system_next_timer(vat_system *sys, int64_t *ns);

/** Deterministic mode: moves the virtual clock forward by `ns`. Timers that
 *  become due fire at the next run call. Host thread.
 *  Errors: VAT_EINVAL, VAT_ECLOSED (destroyed), VAT_ENOTSUP (not
 *  deterministic). */
int vat_system_advance_clock(vat_system *sys, uint64_t ns);

/** The virtual clock's reading (deterministic mode) or the monotonic clock,
 *  in nanoseconds. Any thread. Returns 0 for a NULL system. */
uint64_t vat_system_now(vat_system *sys);

/* --- Idle workers polling the host's I/O -----------------------------------
 *
 * A worker with nothing to do can poll an I/O source itself, as a Tokio
 * worker runs its I/O driver and an Erlang scheduler polls: while it looks
 * for work it polls without blocking, and where it would sleep it blocks
 * in the poll instead, until an event or a wake-up; a busy worker polls
 * without blocking once in 64 batches of turns. An event's handler
 * that sends to a vat of the worker's own system then needs no other
 * thread woken: the worker runs that vat next. One call at a time over a
 * socket, that saves a thread's wake-up on each side of every call.
 *
 * The process has at most one idle poller, shared by every system with
 * workers; the CapTP connections (vat/net.h) set theirs when their shared
 * loop starts. One thread polls at a time (acquire/release). The poll's
 * handlers run on a worker thread outside any turn, as a host thread's
 * would: they may send (vat_host_send) but not wait on a promise. Workers
 * start with SIGPIPE blocked, so a write there to a socket the peer
 * closed fails with EPIPE instead of ending the process. */
typedef struct vat_idle_poller {
  /** Takes the right to poll, or returns false when another thread holds
   *  it. `wait`: the worker is about to sleep and may wait a little for a
   *  thread that holds the right to let it go (it then blocks in the
   *  poll). */
  bool (*acquire)(void *ctx, bool wait);
  /** Handles the events that are ready, with the right held; when
   *  `block`, waits first until there is one or `wake` was called since
   *  the right was taken. */
  void (*poll)(void *ctx, bool block);
  /** Lets the right go. */
  void (*release)(void *ctx);
  /** Makes a blocking poll return soon (or the next one, if none is
   *  blocked now). Any thread; must not block. */
  void (*wake)(void *ctx);
  void *ctx;
} vat_idle_poller;

/** Sets the process's idle poller, copied; it stays set for the life of
 *  the process. Any thread. Errors: VAT_EINVAL (NULL `p` or a NULL
 *  function), VAT_EBUSY (one is set already). */
int vat_idle_poller_set(const vat_idle_poller *p);

#ifdef __cplusplus
}
#endif

#endif
