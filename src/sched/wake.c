/* Host-driven systems' wake-up descriptor: an eventfd that is readable
 * while work is pending, so a host can poll it with its own descriptors.
 */
#include <errno.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "sched/sched.h"
#include "util/testpoint.h"
#include "vat/core.h" /* the error codes */

int vat__host_open(vat__sched *s) {
  s->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  return s->wake_fd < 0 ? VAT_ENOMEM : VAT_OK;
}

void vat__host_close(vat__sched *s) {
  if (s->wake_fd >= 0)
    close(s->wake_fd);
  s->wake_fd = -1;
}

/* The wake-up protocol, in the manner of libuv's async handles.
 *
 * Sender (after its push): raise wake_pending; if it was down, write to
 * the descriptor, counting the write in wake_begun before and in wake_done
 * after. Run call (before it looks for work): drain the descriptor if a
 * write began since the last drain, then take wake_pending down.
 *
 * No wake-up is lost: a sender that finds wake_pending up writes nothing,
 * but the sender that raised it writes; either a run call takes the flag
 * down after this sender's raise (and then looks for work, seeing the push
 * that came before the raise), or none does, and then no drain followed
 * that write, which the descriptor still holds.
 * None is left stale, and none makes a poll() loop spin: a write that
 * lands after a run call drained (a sender preempted between its raise
 * and its write) had not finished when that call read wake_done, so the
 * next call, which the readable descriptor brings, drains again. Run calls
 * that no write preceded make no read() at all. */
void vat__host_wake(vat__sched *s) {
  /* acq_rel: release orders our push before the raise, for the run call
   * that takes it down and then looks for work. */
  if (atomic_exchange_explicit(&s->wake_pending, true, memory_order_acq_rel))
    return;
  VAT__TEST_POINT("host.wake.after_flag");
  /* seq_cst: counted before the write can land, so a run call woken by
   * the write sees the count. */
  atomic_fetch_add_explicit(&s->wake_begun, 1, memory_order_seq_cst);
  uint64_t one = 1;
  ssize_t n;
  do
    n = write(s->wake_fd, &one, sizeof one);
  while (n < 0 && errno == EINTR);
  /* release: a run call that sees this count sees the write landed. */
  atomic_fetch_add_explicit(&s->wake_done, 1, memory_order_release);
}

void vat__host_clear_wake(vat__sched *s) {
  /* wake_done first, with acquire: the writes it counts have landed, and
   * their wake_begun counts are visible, so begun >= done below. */
  uint64_t done = atomic_load_explicit(&s->wake_done, memory_order_acquire);
  uint64_t begun = atomic_load_explicit(&s->wake_begun, memory_order_seq_cst);
  if (begun != s->wake_seen) {
    uint64_t count;
    ssize_t n;
    do
      n = read(s->wake_fd, &count, sizeof count);
    while (n < 0 && errno == EINTR);
    /* Writes not finished yet may land after this read: the next call
     * drains again until they are all counted done. */
    s->wake_seen = done;
  }
  /* acq_rel: acquire makes visible the pushes made before every raise we
   * take down; this comes before the look for work in run_ready. */
  atomic_exchange_explicit(&s->wake_pending, false, memory_order_acq_rel);
}
