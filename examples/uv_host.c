/* A libuv program drives a host-driven system: libuv polls the system's
 * descriptor and sleeps until the system's next timer, and every turn runs
 * inside the loop's callbacks, on the loop's thread.
 *
 * A "metronome" vat ticks five times, 20 ms apart, with vat_later, then
 * stops; when nothing is left the loop has no handles and uv_run returns.
 */
#include <stdio.h>
#include <stdlib.h>

#include <uv.h>
#include <vat.h>

typedef struct metronome {
  int ticks;
} metronome;

static void tick(vat_turn *turn, void *state, void *arg) {
  (void)arg;
  metronome *m = state;
  printf("tick %d\n", ++m->ticks);
  if (m->ticks < 5)
    vat_later(turn, 0.020, vat_self(turn), tick, NULL, NULL);
  else
    vat_stop(turn);
}

typedef struct driver {
  vat_system *sys;
  uv_poll_t poll;
  uv_timer_t timer;
  uv_idle_t again; /* runs the system once more when work was left */
} driver;

static void drive(driver *d);

static void on_readable(uv_poll_t *h, int status, int events) {
  (void)status;
  (void)events;
  drive(h->data);
}
static void on_timer(uv_timer_t *h) {
  drive(h->data);
}
static void on_again(uv_idle_t *h) {
  drive(h->data);
}

/* Runs what is ready, then tells libuv when to call again. */
static void drive(driver *d) {
  vat_run_result r;
  /* At most 200 µs a run: the program's other handles (sockets, say) get
   * their turn between runs, however much work the vats have. */
  vat_system_run(d->sys, 0, 200000, &r);
  int64_t ns;
  vat_system_next_timer(d->sys, &ns);
  if (r.more)
    uv_idle_start(&d->again, on_again);
  else
    uv_idle_stop(&d->again);
  if (ns >= 0)
    uv_timer_start(&d->timer, on_timer, (uint64_t)((ns + 999999) / 1000000), 0);
  else
    uv_timer_stop(&d->timer);
  if (!r.more && ns < 0) { /* nothing left to do: let uv_run return */
    uv_poll_stop(&d->poll);
    uv_close((uv_handle_t *)&d->poll, NULL);
    uv_close((uv_handle_t *)&d->timer, NULL);
    uv_close((uv_handle_t *)&d->again, NULL);
  }
}

int main(void) {
  if (vat_init() != VAT_OK)
    return 1;
  vat_config cfg;
  vat_config_default(&cfg);
  cfg.workers = 0;
  driver d = {0};
  vat_ref *ref;
  int fd;
  if (vat_system_new(&cfg, &d.sys) != VAT_OK ||
      vat_host_spawn(d.sys, &(vat_entity_def){.state_size = sizeof(metronome)},
                     &ref, NULL) != VAT_OK ||
      vat_host_send(ref, tick, NULL) != VAT_OK ||
      vat_system_fd(d.sys, &fd) != VAT_OK)
    return 1;

  uv_loop_t *loop = uv_default_loop();
  uv_poll_init(loop, &d.poll, fd);
  uv_timer_init(loop, &d.timer);
  uv_idle_init(loop, &d.again);
  d.poll.data = d.timer.data = d.again.data = &d;
  uv_poll_start(&d.poll, UV_READABLE, on_readable);
  drive(&d);
  uv_run(loop, UV_RUN_DEFAULT);
  uv_loop_close(loop);

  vat_system_shutdown(d.sys, 1);
  vat_system_destroy(d.sys);
  printf("done\n");
  return 0;
}
