/* Host-driven systems: no threads of their own; the host runs them inside
 * vat_system_run() and waits on an eventfd between calls. The calling
 * thread acts as the system's one worker for the duration of the call.
 *
 * Deterministic mode picks the next vat to run at random from all ready
 * vats with a seeded generator, one message per pick, so the interleaving
 * depends only on the seed and the inputs; its timers read a virtual clock.
 */
#include <errno.h>
#include <sched.h>
#include <stdint.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"
#include "testpoint.h"
#include "vat/host.h"
#include "vat_gc.h"

/* Weak fall-backs until a timer service defines them. */
__attribute__((weak)) uint64_t vat__timers_next_deadline(vat_system *sys) {
  (void)sys;
  return UINT64_MAX;
}
__attribute__((weak)) void vat__timers_fire_due(vat_system *sys,
                                                uint64_t now_ns) {
  (void)sys;
  (void)now_ns;
}

int vat__host_open(vat_system *sys) {
  sys->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  return sys->wake_fd < 0 ? VAT_ENOMEM : VAT_OK;
}

void vat__host_close(vat_system *sys) {
  if (sys->wake_fd >= 0)
    close(sys->wake_fd);
  sys->wake_fd = -1;
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
void vat__host_wake(vat_system *sys) {
  /* acq_rel: release orders our push before the raise, for the run call
   * that takes it down and then looks for work. */
  if (atomic_exchange_explicit(&sys->wake_pending, true, memory_order_acq_rel))
    return;
  VAT__TEST_POINT("host.wake.after_flag");
  /* seq_cst: counted before the write can land, so a run call woken by
   * the write sees the count. */
  atomic_fetch_add_explicit(&sys->wake_begun, 1, memory_order_seq_cst);
  uint64_t one = 1;
  ssize_t n;
  do
    n = write(sys->wake_fd, &one, sizeof one);
  while (n < 0 && errno == EINTR);
  /* release: a run call that sees this count sees the write landed. */
  atomic_fetch_add_explicit(&sys->wake_done, 1, memory_order_release);
}

static void clear_wake(vat_system *sys) {
  /* wake_done first, with acquire: the writes it counts have landed, and
   * their wake_begun counts are visible, so begun >= done below. */
  uint64_t done = atomic_load_explicit(&sys->wake_done, memory_order_acquire);
  uint64_t begun = atomic_load_explicit(&sys->wake_begun, memory_order_seq_cst);
  if (begun != sys->wake_seen) {
    uint64_t count;
    ssize_t n;
    do
      n = read(sys->wake_fd, &count, sizeof count);
    while (n < 0 && errno == EINTR);
    /* Writes not finished yet may land after this read: the next call
     * drains again until they are all counted done. */
    sys->wake_seen = done;
  }
  /* acq_rel: acquire makes visible the pushes made before every raise we
   * take down; this comes before the look for work in run_ready. */
  atomic_exchange_explicit(&sys->wake_pending, false, memory_order_acq_rel);
}

static uint64_t monotonic_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int enter(vat_system *sys) {
  if (sys == NULL)
    return VAT_EINVAL;
  int rc = vat__check_host();
  if (rc != VAT_OK)
    return rc;
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

/* --- Picking the next vat ------------------------------------------------ */

static vat__vat *next_fifo(vat__worker *w) {
  vat__vat *v = w->next;
  if (v != NULL) {
    w->next = NULL;
    return v;
  }
  if ((v = vat__runq_pop(&w->runq)) != NULL)
    return v;
  return vat__inject_pop(&w->sys->inject);
}

/* Deterministic: every ready vat is in the run queue or the shared queue
 * (its `next` slot is flushed), and one is drawn from the union. The run
 * queue holds at most its size, so the draw needs no extra memory: drawn
 * vats are swapped to the head and popped. */
static uint64_t det_random(vat_system *sys) {
  uint64_t x = sys->det_rng;
  x ^= x >> 12;
  x ^= x << 25;
  x ^= x >> 27;
  sys->det_rng = x;
  return x * 0x2545F4914F6CDD1Dull;
}

static vat__vat *next_seeded(vat__worker *w) {
  vat_system *sys = w->sys;
  vat__runq *q = &w->runq;
  if (w->next) {
    vat__vat *v = w->next;
    w->next = NULL;
    if (!vat__runq_push(q, v))
      vat__schedule_external(sys, v);
  }
  /* Top the run queue up from the shared queue, in arrival order, so the
   * draw covers everything that is ready (up to the queue's size). */
  for (vat__vat *v; vat__runq_size(q) < VAT__RUNQ_SIZE &&
                    (v = vat__inject_pop(&sys->inject)) != NULL;)
    vat__runq_push(q, v);
  uint32_t n = vat__runq_size(q);
  if (n == 0)
    return NULL;
  uint32_t head = atomic_load_explicit(&q->head, memory_order_relaxed);
  uint32_t pick = head + (uint32_t)(det_random(sys) % n);
  _Atomic(vat__vat *) *a = &q->slots[head % VAT__RUNQ_SIZE];
  _Atomic(vat__vat *) *b = &q->slots[pick % VAT__RUNQ_SIZE];
  vat__vat *chosen = atomic_load_explicit(b, memory_order_relaxed);
  atomic_store_explicit(b, atomic_load_explicit(a, memory_order_relaxed),
                        memory_order_relaxed);
  atomic_store_explicit(a, chosen, memory_order_relaxed);
  return vat__runq_pop(q);
}

static bool ready(vat__worker *w) {
  return w->next != NULL || vat__runq_size(&w->runq) != 0 ||
         vat__inject_size(&w->sys->inject) != 0;
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
  clear_wake(sys);
  vat__timers_fire_due(sys, vat__clock_now(sys));
  uint64_t start = max_ns ? monotonic_ns() : 0;
  uint64_t before = atomic_load_explicit(&w->delivered, memory_order_relaxed);
  bool seeded = sys->cfg.deterministic;
  for (;;) {
    uint64_t done =
        atomic_load_explicit(&w->delivered, memory_order_relaxed) - before;
    if (max_turns && done >= max_turns)
      break;
    if (max_ns && monotonic_ns() - start >= max_ns)
      break;
    if (closing(sys, draining))
      break;
    vat__vat *v = seeded ? next_seeded(w) : next_fifo(w);
    if (v == NULL)
      break;
    unsigned budget = seeded ? 1 : sys->cfg.batch;
    if (max_turns && max_turns - done < budget)
      budget = (unsigned)(max_turns - done);
    if (vat__run_batch(w, v, budget) && !vat__runq_push(&w->runq, v))
      vat__schedule_external(sys, v);
  }
  res->turns +=
      atomic_load_explicit(&w->delivered, memory_order_relaxed) - before;
  res->more = ready(w);
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
      monotonic_ns() + (uint64_t)(timeout_s > 0 ? timeout_s * 1e9 : 0);
  vat_run_result res = {0};
  for (;;) {
    /* In slices of at most 1 ms, never past the deadline. */
    uint64_t now = monotonic_ns();
    uint64_t slice = deadline > now ? deadline - now : 1;
    run_ready(sys, 0, slice < 1000000 ? slice : 1000000, true, &res);
    if (!(res.more ||
          atomic_load_explicit(&sys->host_inflight, memory_order_seq_cst)) ||
        monotonic_ns() >= deadline)
      break;
  }
  bool quiet =
      !res.more &&
      atomic_load_explicit(&sys->host_inflight, memory_order_seq_cst) == 0 &&
      !ready(sys->workers[0]);
  leave(sys);
  return quiet;
}

/* --- Waiting ------------------------------------------------------------ */

int vat_system_fd(vat_system *sys, int *fd) {
  if (sys == NULL || fd == NULL)
    return VAT_EINVAL;
  if (!sys->host_driven)
    return VAT_ENOTSUP;
  if (vat__system_state(sys) == VAT__DESTROYED)
    return VAT_ECLOSED;
  *fd = sys->wake_fd;
  return VAT_OK;
}

int vat_system_next_timer(vat_system *sys, int64_t *ns) {
  if (sys == NULL || ns == NULL)
    return VAT_EINVAL;
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
  if (!sys->virtual_clock)
    return VAT_ENOTSUP;
  atomic_fetch_add_explicit(&sys->virtual_now_ns, ns, memory_order_acq_rel);
  return VAT_OK;
}

uint64_t vat_system_now(vat_system *sys) {
  return sys ? vat__clock_now(sys) : 0;
}
