/* sim_redial [SECONDS]: one seed of a simulated world (vat/sim_net.h)
 * where a worker takes jobs from a queue on another machine and, after
 * each job, dials the queue again at once without closing the connection
 * it used, until SECONDS (default 60) of virtual time have passed. Every
 * connection stays open: what a step of the network costs must not grow
 * with them. Prints the jobs taken, the real time the seed took and the
 * process's peak resident memory. */
#include <stdio.h>
#include <stdlib.h>

#include "bench_util.h"
#include "vat/host.h"
#include "vat/sim.h"
#include "vat/sim_net.h"

typedef struct world {
  vat_system *worker_sys, *queue_sys;
  unsigned jobs;
} world;

static uint64_t deadline_ns;
static world *last;

static void queue_receive(vat_turn *turn, void *state, const vat_atom *s,
                          vat_value value) {
  world *w = *(world **)state;
  vat_ref *reply;
  if (vat_request_parse(value, NULL, &reply) && s == vat_atom_intern("take"))
    vat_reply(turn, reply, vat_int(++w->jobs));
}

static const vat_entity_def queue_def = {.state_size = sizeof(world *),
                                         .receive = queue_receive};

static void dial(vat_turn *turn, world *w);

static void taken(vat_turn *turn, void *state, void *ctx, bool resolved,
                  vat_value value) {
  (void)ctx, (void)value;
  if (resolved)
    dial(turn, *(world **)state); /* the old connection stays open */
}

static void connected(vat_turn *turn, void *state, void *ctx, bool resolved,
                      vat_value value) {
  (void)ctx;
  vat_promise *job;
  if (resolved && vat_value_ref(value) != NULL &&
      vat_request(turn, vat_value_ref(value), vat_atom_intern("take"),
                  vat_list(NULL, 0), 0, &job) == VAT_OK)
    vat_when(turn, job, taken, NULL);
  (void)state;
}

static void dial(vat_turn *turn, world *w) {
  vat_promise *queue;
  if (vat_sim_dial(w->worker_sys, w->queue_sys, NULL, NULL, NULL, NULL,
                   &queue) == VAT_OK)
    vat_when(turn, queue, connected, NULL);
}

static void start(vat_turn *turn, void *state, void *arg) {
  (void)arg;
  dial(turn, *(world **)state);
}

static const vat_entity_def worker_def = {.state_size = sizeof(world *)};

static void *setup(vat_system *sys, void *ctx) {
  (void)ctx;
  world *w = calloc(1, sizeof *w);
  last = w;
  w->worker_sys = sys;
  world **qs, **ws;
  vat_ref *queue, *worker;
  if (vat_sim_system_new(sys, NULL, &w->queue_sys) != VAT_OK ||
      vat_host_spawn(w->queue_sys, &queue_def, &queue, (void **)&qs) !=
          VAT_OK ||
      vat_host_spawn(sys, &worker_def, &worker, (void **)&ws) != VAT_OK)
    return NULL;
  *qs = *ws = w;
  if (vat_sim_serve(w->queue_sys, queue, NULL, NULL, NULL) != VAT_OK ||
      vat_host_send(worker, start, NULL) != VAT_OK)
    return NULL;
  return w;
}

int main(int argc, char **argv) {
  double seconds = argc > 1 ? atof(argv[1]) : 60;
  deadline_ns = (uint64_t)(seconds * 1e9);
  vat_init();
  /* Never done: the world runs to the harness's deadline, which fails the
   * seed (liveness), as the program that found this did. */
  vat_sim_scenario sc = {.name = "redial", .setup = setup};
  vat_sim_options o;
  vat_sim_options_default(&o);
  o.shrink_runs = 0;
  o.deadline_ns = deadline_ns;
  vat_sim_result r;
  double t0 = bench_now();
  int rc = vat_sim_replay(&sc, &o, 1, &r);
  double t = bench_now() - t0;
  printf("redial-without-close to %.0f s virtual: %u jobs, %.2f s real, "
         "peak RSS %.0f MB, %s\n",
         seconds, last != NULL ? last->jobs : 0, t, bench_peak_rss_mb(),
         r.message);
  return rc == VAT_OK ? 0 : 1;
}
