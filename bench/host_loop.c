/* See host_loop.h. */
#include "host_loop.h"

#include <sched.h>
#include <stdlib.h>
#include <time.h>

#include <vat/host.h>

static void run_system(host_loop *h);

static void on_ready(uv_poll_t *p, int status, int events) {
  (void)status;
  (void)events;
  run_system(p->data);
}
static void on_timer(uv_timer_t *t) {
  run_system(t->data);
}
static void on_again(uv_idle_t *i) {
  run_system(i->data);
}

/* Runs what is ready, then tells libuv when to call again. */
static void run_system(host_loop *h) {
  vat_run_result r;
  h->runs++;
  vat_system_run(h->sys, 0, h->run_ns, &r);
  int64_t ns;
  vat_system_next_timer(h->sys, &ns);
  if (r.more)
    uv_idle_start(&h->again, on_again);
  else
    uv_idle_stop(&h->again);
  if (ns >= 0)
    uv_timer_start(&h->timer, on_timer, (uint64_t)((ns + 999999) / 1000000), 0);
  else
    uv_timer_stop(&h->timer);
}

void host_loop_start(host_loop *h, vat_system *sys) {
  int fd;
  h->sys = sys;
  h->runs = 0;
  const char *spin = getenv("REMOTE_SPIN_US");
  h->spin_us = spin != NULL ? atof(spin) : HOST_LOOP_SPIN_US;
  const char *run_ns = getenv("REMOTE_RUN_NS");
  h->run_ns = run_ns != NULL ? strtoull(run_ns, NULL, 10) : HOST_LOOP_RUN_NS;
  h->loop = uv_default_loop();
  if (vat_system_fd(sys, &fd) != VAT_OK)
    abort();
  uv_poll_init(h->loop, &h->ready, fd);
  uv_timer_init(h->loop, &h->timer);
  uv_idle_init(h->loop, &h->again);
  uv_timer_init(h->loop, &h->deadline);
  h->ready.data = h->timer.data = h->again.data = h->deadline.data = h;
  uv_poll_start(&h->ready, UV_READABLE, on_ready);
  run_system(h);
}

static double now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

/* One step of the loop: it polls without blocking for up to spin_us,
 * until the system runs, and only then blocks in the kernel. One call at
 * a time, the answer comes back within a round trip (tens of µs), and a
 * thread woken from epoll_wait takes longer than that to run again on a
 * virtual machine: the library's own loop thread polls the same way. */
static void step(host_loop *h) {
  double until = now_us() + h->spin_us;
  while (now_us() < until) {
    uint64_t before = h->runs;
    uv_run(h->loop, UV_RUN_NOWAIT);
    if (h->runs != before)
      return;
    sched_yield();
  }
  uv_run(h->loop, UV_RUN_ONCE);
}

void host_loop_wait(host_loop *h, sem_t *done) {
  while (sem_trywait(done) != 0)
    step(h);
}

static void on_deadline(uv_timer_t *t) {
  ((host_loop *)t->data)->expired = true;
}

int host_loop_settle(host_loop *h, vat_promise *p, double timeout_s,
                     vat_value *out) {
  h->expired = false;
  if (timeout_s >= 0)
    uv_timer_start(&h->deadline, on_deadline, (uint64_t)(timeout_s * 1e3), 0);
  vat_promise_state st;
  while ((st = vat_promise_peek(p, out)) == VAT_PROMISE_PENDING && !h->expired)
    step(h);
  uv_timer_stop(&h->deadline);
  return st == VAT_PROMISE_RESOLVED ? VAT_OK
         : st == VAT_PROMISE_BROKEN ? VAT_EBROKEN
                                    : VAT_ETIMEDOUT;
}

void host_loop_stop(host_loop *h) {
  uv_close((uv_handle_t *)&h->ready, NULL);
  uv_close((uv_handle_t *)&h->timer, NULL);
  uv_close((uv_handle_t *)&h->again, NULL);
  uv_close((uv_handle_t *)&h->deadline, NULL);
  uv_run(h->loop, UV_RUN_DEFAULT);
}
