/* A job queue across two simulated machines (vat/sim.h, vat/sim_net.h):
 * machine "queue" serves a queue of JOBS jobs; a worker on machine m0
 * dials it, takes a job, reports it done, and takes the next. Each seed
 * draws a disconnect or a partition on the link; the worker watches the
 * queue's proxy and, when its connection ends, dials again, closing the
 * connection it replaces. A job whose report was lost is taken again
 * (the queue hands out the first job not done), so every seed ends with
 * every job done. The parts between the "in vat/sim_net.h" marks are the
 * worked example in that header (test/sim_net_example_sync.sh keeps them
 * the same). */
#include <inttypes.h>
#include <stdio.h>

#include <vat.h>
#include <vat/net.h>
#include <vat/sim.h>
#include <vat/sim_net.h>

enum { JOBS = 20 };

/* The served object: a vat whose receive function gets each call from the
 * peer as a request (vat/caps.h): the method's name is the selector, and
 * the value holds the arguments (a list) and the ref to reply to. Its
 * answer goes back over the connection when it replies. A one-way message
 * is no request: this queue takes none. `take` answers the first job not
 * done (0: none is left). */
/* --- in vat/sim_net.h: begin --- */
typedef struct queue {
  bool done[JOBS + 1];
  unsigned ndone;
} queue;

static void queue_receive(vat_turn *turn, void *state, const vat_atom *method,
                          vat_value request) {
  queue *q = state;
  vat_value args;
  vat_ref *reply;
  if (!vat_request_parse(request, &args, &reply))
    return;
  if (method == vat_atom_intern("take")) {
    int64_t job = 1;
    while (job <= JOBS && q->done[job])
      job++;
    vat_reply(turn, reply, vat_int(job <= JOBS ? job : 0));
  } else if (method == vat_atom_intern("finished")) {
    int64_t job = 0;
    if (vat_get_int(vat_at(args, 0), &job) == VAT_OK && job >= 1 &&
        job <= JOBS && !q->done[job]) {
      q->done[job] = true;
      q->ndone++;
    }
    vat_reply(turn, reply, vat_int(q->ndone));
  } else {
    vat_reply_error(
        turn, reply,
        vat_error(vat_atom_intern("TypeError"), vat_string("no such method")));
  }
}

static const vat_entity_def queue_def = {
    .state_size = sizeof(queue), .receive = queue_receive, .label = "queue"};
/* --- in vat/sim_net.h: end --- */

/* The worker, on the other machine, calls it through a proxy, and
 * watches the proxy: a monitor fires with `noconnection` when the
 * connection it came over ends (a disconnect, a timeout), which is the
 * worker's cue to dial again. */
typedef struct worker {
  vat_system *self, *queue_machine;
  vat_ref *queue; /* the proxy in use */
  vat_conn *conn; /* its connection: closed when replaced */
  bool finished;
} worker;

static void dial(vat_turn *turn, worker *w);
static void take(vat_turn *turn, worker *w, vat_ref *q);

static void reported(vat_turn *turn, void *state, void *ctx, bool resolved,
                     vat_value value) {
  (void)value;
  if (resolved)
    take(turn, state, ctx); /* else: the monitor dials again */
}

static void taken(vat_turn *turn, void *state, void *ctx, bool resolved,
                  vat_value value) {
  worker *w = state;
  int64_t job = 0;
  if (!resolved || vat_get_int(value, &job) != VAT_OK)
    return; /* the connection ended: the monitor dials again */
  if (job == 0) {
    w->finished = true;
    return;
  }
  vat_value args = vat_int(job);
  vat_promise *p;
  if (vat_request(turn, ctx, vat_atom_intern("finished"), vat_list(&args, 1), 0,
                  &p) == VAT_OK)
    vat_when(turn, p, reported, ctx);
}

static void take(vat_turn *turn, worker *w, vat_ref *q) {
  (void)w;
  vat_promise *p;
  if (vat_request(turn, q, vat_atom_intern("take"), vat_list(NULL, 0), 0, &p) ==
      VAT_OK)
    vat_when(turn, p, taken, q);
}

/* A monitor on the queue's proxy fires when the connection it came over
 * ends (`noconnection`), but also when the worker closed that connection
 * itself as it replaced it: only the proxy in use is a cue to dial. */
/* --- in vat/sim_net.h: begin --- */
static void connection_lost(vat_turn *turn, void *state, uint64_t monitor,
                            vat_ref *who, vat_value reason) {
  (void)monitor, (void)reason;
  worker *w = state;
  if (who == w->queue)
    dial(turn, w);
}

static void connected(vat_turn *turn, void *state, void *ctx, bool resolved,
                      vat_value value) {
  (void)ctx;
  worker *w = state;
  vat_ref *q = vat_value_ref(value);
  uint64_t id;
  if (!resolved || q == NULL) {
    dial(turn, w);
    return;
  }
  w->queue = q;
  vat_monitor(turn, q, connection_lost, &id);
  take(turn, w, q);
}
/* --- in vat/sim_net.h: end --- */

/* The worker's side of each connection it dials, as it opens (host side,
 * between steps): the one it replaces is closed here. */
static void opened(void *ctx, vat_system *sys, vat_conn *conn) {
  (void)sys;
  worker *w = ctx;
  if (w->conn != NULL)
    vat_conn_close(w->conn);
  w->conn = conn;
}

static void dial(vat_turn *turn, worker *w) {
  vat_promise *q;
  if (vat_sim_dial(w->self, w->queue_machine, NULL, NULL, opened, w, &q) ==
      VAT_OK)
    vat_when(turn, q, connected, NULL);
}

static void start(vat_turn *turn, void *state, void *arg) {
  (void)arg;
  dial(turn, state);
}

/* --- The scenario ----------------------------------------------------------
 */

typedef struct world {
  queue *q;
  worker *w;
} world;

static void *setup(vat_system *sys, void *ctx) {
  (void)ctx;
  static world wd;
  vat_sim_system_options mo;
  vat_sim_system_options_default(&mo);
  mo.name = "queue";
  vat_system *qsys;
  vat_ref *q, *wref;
  static const vat_entity_def worker_def = {.state_size = sizeof(worker),
                                            .label = "worker"};
  if (vat_sim_system_new(sys, &mo, &qsys) != VAT_OK ||
      vat_host_spawn(qsys, &queue_def, &q, (void **)&wd.q) != VAT_OK ||
      vat_host_spawn(sys, &worker_def, &wref, (void **)&wd.w) != VAT_OK)
    return NULL;
  *wd.w = (worker){.self = sys, .queue_machine = qsys};
  vat_sim_link_options lo;
  vat_sim_link_options_default(&lo);
  lo.latency_ns = 2000000;       /* 2 ms each way */
  lo.fault_rate = 1;             /* a fault on every seed: */
  lo.fault_window_ns = 50000000; /* in its first 50 ms */
  lo.partition_max_ns = 200000000;
  if (vat_sim_serve(qsys, q, NULL, NULL, NULL) != VAT_OK ||
      vat_sim_link(sys, qsys, &lo) != VAT_OK ||
      vat_host_send(wref, start, NULL) != VAT_OK)
    return NULL;
  return &wd;
}

static bool done(void *ctx) {
  world *wd = ctx;
  return wd->w->finished && wd->q->ndone == JOBS;
}

int main(void) {
  vat_init();
  vat_sim_scenario sc = {.name = "job-queue", .setup = setup, .done = done};
  vat_sim_options o;
  vat_sim_options_default(&o);
  vat_sim_result r;
  int rc = vat_sim_run(&sc, &o, 1, 50, &r);
  if (rc != VAT_OK || r.failed) {
    printf("failed: %s\n%s\n%s\n", vat_err_name(rc), r.message, r.replay);
    return 1;
  }
  printf("%" PRIu64 " seeds: every job done\n", r.seeds_run);
  return 0;
}
