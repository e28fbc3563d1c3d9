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

void vat__host_wake(vat_system *sys) {
  /* One write per run call at most: the flag is cleared by the run call
   * before it looks for work, so a push after that look writes again. */
  if (atomic_exchange_explicit(&sys->wake_pending, true, memory_order_acq_rel))
    return;
  uint64_t one = 1;
  ssize_t n;
  do
    n = write(sys->wake_fd, &one, sizeof one);
  while (n < 0 && errno == EINTR);
}

static void clear_wake(vat_system *sys) {
  if (!atomic_exchange_explicit(&sys->wake_pending, false,
                                memory_order_acq_rel))
    return;
  uint64_t count;
  ssize_t n;
  do
    n = read(sys->wake_fd, &count, sizeof count);
  while (n < 0 && errno == EINTR);
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
  if (vat__system_state(sys) >= VAT__STOPPED)
    return VAT_ECLOSED;
  if (atomic_exchange_explicit(&sys->host_running, true, memory_order_acquire))
    return VAT_EBUSY;
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

static void run_ready(vat_system *sys, uint64_t max_turns, uint64_t max_ns,
                      vat_run_result *res) {
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
  run_ready(sys, max_turns, max_ns, &res);
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
    run_ready(sys, left, 0, &res);
  } while ((res.more || timer_due(sys)) &&
           (!max_turns || res.turns < max_turns));
  leave(sys);
  if (out)
    *out = res;
  return VAT_OK;
}

bool vat__host_drain(vat_system *sys, double timeout_s) {
  /* Wait out a run call on another thread: it sees CLOSING and returns. */
  while (
      atomic_exchange_explicit(&sys->host_running, true, memory_order_acquire))
    sched_yield();
  uint64_t deadline =
      monotonic_ns() + (uint64_t)(timeout_s > 0 ? timeout_s * 1e9 : 0);
  vat_run_result res = {0};
  do {
    run_ready(sys, 0, 1000000, &res);
  } while ((res.more ||
            atomic_load_explicit(&sys->host_inflight, memory_order_seq_cst)) &&
           monotonic_ns() < deadline);
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
