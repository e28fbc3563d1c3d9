/* The simulated network's edges (vat/sim_net.h), as a program written from
 * the headers meets them: a worker that redials without closing what it
 * dialled before costs the network no more per step than the connections
 * that carry something. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <gc/gc.h>

#include "net/simnet.h"
#include "support.h"
#include "vat/host.h"
#include "vat/net.h"
#include "vat/sim.h"
#include "vat/sim_net.h"

static const vat_atom *sel(const char *name) {
  return vat_atom_intern(name);
}

/* --- A queue machine and a worker that dials it --------------------------- */

enum { REDIALS = 150 };

typedef struct queue_world {
  vat_system *worker_sys, *queue_sys;
  vat_ref *worker, *queue;
  unsigned jobs;      /* taken from the queue */
  unsigned dials;     /* the worker's */
  size_t most_walked; /* vat__sim_net_most_ends_walked, as it ended */
  bool close_old;     /* the worker's opened() closes the one it replaces */
  vat_conn *conns[REDIALS + 1]; /* the worker's, as they opened */
  unsigned opened;
  unsigned opened_first; /* of the queue's proxies, handed after opened() */
  unsigned closed_ends;  /* of the worker's: vat_conn_closed settled */
  bool finished;
} queue_world;

typedef struct worker_state {
  queue_world *world;
} worker_state;

/* The queue hands out job numbers: take() answers the next. */
static void queue_receive(vat_turn *turn, void *state, const vat_atom *s,
                          vat_value value) {
  queue_world *w = *(queue_world **)state;
  vat_ref *reply;
  if (vat_request_parse(value, NULL, &reply) && s == sel("take"))
    expect_vat_ok(vat_reply(turn, reply, vat_int(++w->jobs)));
}

static const vat_entity_def queue_def = {.state_size = sizeof(queue_world *),
                                         .receive = queue_receive,
                                         .label = "queue"};

static void redial(vat_turn *turn, queue_world *w);

/* A job taken: the worker dials again at once, leaving the connection it
 * took it over open, as careless reconnect code does. */
static void job_taken(vat_turn *turn, void *state, void *ctx, bool resolved,
                      vat_value value) {
  (void)ctx, (void)value;
  queue_world *w = ((worker_state *)state)->world;
  if (!resolved || w->dials == REDIALS) {
    w->finished = true;
    return;
  }
  redial(turn, w);
}

static void connected(vat_turn *turn, void *state, void *ctx, bool resolved,
                      vat_value value) {
  (void)ctx;
  queue_world *w = ((worker_state *)state)->world;
  w->opened_first += w->opened == w->dials;
  vat_ref *queue = vat_value_ref(value);
  if (!resolved || queue == NULL) {
    w->finished = true;
    return;
  }
  vat_promise *job;
  expect_vat_ok(
      vat_request(turn, queue, sel("take"), vat_list(NULL, 0), 0, &job));
  expect_vat_ok(vat_when(turn, job, job_taken, NULL));
}

/* The worker's side of each connection it dialled, as it opens (host
 * side): closing the one before it here is what its program forgot. */
static void worker_opened(void *ctx, vat_system *sys, vat_conn *conn) {
  queue_world *w = ctx;
  ck_assert_ptr_eq(sys, w->worker_sys);
  if (w->close_old && w->opened > 0)
    expect_vat_ok(vat_conn_close(w->conns[w->opened - 1]));
  w->conns[w->opened++] = conn;
}

static void redial(vat_turn *turn, queue_world *w) {
  vat_promise *queue;
  w->dials++;
  expect_vat_ok(vat_sim_dial(w->worker_sys, w->queue_sys, NULL, NULL,
                             worker_opened, w, &queue));
  expect_vat_ok(vat_when(turn, queue, connected, NULL));
}

static void worker_start(vat_turn *turn, void *state, void *arg) {
  (void)arg;
  redial(turn, ((worker_state *)state)->world);
}

static const vat_entity_def worker_def = {.state_size = sizeof(worker_state),
                                          .label = "worker"};

static queue_world *last_world;

static void *queue_setup(vat_system *sys, void *ctx) {
  queue_world *w = GC_MALLOC(sizeof *w);
  last_world = w;
  w->close_old = ctx != NULL;
  w->worker_sys = sys;
  vat_sim_system_options mo;
  vat_sim_system_options_default(&mo);
  mo.name = "wkr";
  queue_world **qs;
  worker_state *ws;
  if (vat_sim_system_new(sys, &mo, &w->queue_sys) != VAT_OK ||
      vat_host_spawn(w->queue_sys, &queue_def, &w->queue, (void **)&qs) !=
          VAT_OK ||
      vat_host_spawn(sys, &worker_def, &w->worker, (void **)&ws) != VAT_OK)
    return NULL;
  *qs = w;
  ws->world = w;
  if (vat_sim_serve(w->queue_sys, w->queue, NULL, NULL, NULL) != VAT_OK ||
      vat_host_send(w->worker, worker_start, NULL) != VAT_OK)
    return NULL;
  return w;
}

static bool queue_done(void *world) {
  queue_world *w = world;
  w->most_walked = vat__sim_net_most_ends_walked(w->worker_sys);
  w->closed_ends = 0;
  for (unsigned i = 0; i < w->opened; i++)
    w->closed_ends += vat_promise_peek(vat_conn_closed(w->conns[i]), NULL) !=
                      VAT_PROMISE_PENDING;
  return w->finished;
}

static int close_old_marker;

static vat_sim_result run_queue(uint64_t seed, bool close_old) {
  vat_sim_scenario sc = {.name = "queue",
                         .setup = queue_setup,
                         .done = queue_done,
                         .ctx = close_old ? &close_old_marker : NULL};
  vat_sim_options o;
  vat_sim_options_default(&o);
  vat_sim_result r;
  ck_assert_vat_ok(vat_sim_replay(&sc, &o, seed, &r));
  return r;
}

/* --- A step's cost -------------------------------------------------------- */

/* Each of the worker's connections is left open, idle once its job is
 * taken: a look for the network's next event, or a firing, goes through
 * the ends that have something on the way, not through every end ever
 * opened (which made a long run quadratic). */
START_TEST(dead_connections_left_open_cost_a_step_nothing) {
  vat_sim_result r = run_queue(1, false);
  ck_assert_msg(!r.failed, "%s", r.message);
  queue_world *w = last_world;
  ck_assert_uint_eq(w->jobs, REDIALS);
  size_t most = w->most_walked;
  /* The connection in use's two ends, at most; 2 * REDIALS before. */
  ck_assert_msg(most <= 2, "a step went through %zu connection ends", most);
}
END_TEST

/* --- What a dial made ------------------------------------------------------
 */

/* A dial hands its connection to the dialling program as it opens, before
 * the peer's bootstrap resolves: reconnect code can close the connection
 * it replaces (host side), inspect it or watch it end. */
START_TEST(a_dial_hands_over_its_connection_to_close_the_old_one) {
  vat_sim_result r = run_queue(1, true);
  ck_assert_msg(!r.failed, "%s", r.message);
  queue_world *w = last_world;
  ck_assert_uint_eq(w->jobs, REDIALS);
  ck_assert_uint_eq(w->opened, REDIALS);
  ck_assert_uint_eq(w->opened_first, REDIALS);
  /* Each one closed but the last, whose end nobody asked for. */
  ck_assert_uint_eq(w->closed_ends, REDIALS - 1);
  vat_conn_info info;
  ck_assert_vat_ok(vat_conn_inspect(w->conns[REDIALS - 1], &info));
  ck_assert_uint_ge(info.frames_out, 2); /* the bootstrap, the take */
  ck_assert_uint_eq(test_bad_calls(), 0);
}
END_TEST

/* --- Connection vats' names ----------------------------------------------- */

static bool queue_check_no_broken_job(void *world, bool quiescent, char *why,
                                      size_t n) {
  (void)quiescent;
  queue_world *w = world;
  if (w->finished && w->jobs < REDIALS) {
    snprintf(why, n, "a job broke after %u", w->jobs);
    return false;
  }
  return true;
}

static bool file_has(const char *path, const char *text) {
  FILE *f = fopen(path, "r");
  ck_assert_ptr_nonnull(f);
  static char buf[1 << 20];
  size_t len = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[len] = '\0';
  return strstr(buf, text) != NULL;
}

/* Each side's connection vat is named by its machine, its peer and the
 * connection's number on their link, in a plan and in a trace: a plan can
 * strike one side of one connection by name. */
START_TEST(connection_vats_are_named_by_machine_peer_and_number) {
  char path[] = "/tmp/vat-sim-net-edges-XXXXXX";
  int fd = mkstemp(path);
  ck_assert_int_ge(fd, 0);
  close(fd);
  vat_sim_scenario sc = {.name = "queue",
                         .setup = queue_setup,
                         .check = queue_check_no_broken_job,
                         .done = queue_done};
  vat_sim_options o;
  vat_sim_options_default(&o);
  o.plan = "step 1: kill wkr-m0.2";
  o.trace_path = path;
  o.shrink_runs = 0;
  vat_sim_result r;
  ck_assert_vat_ok(vat_sim_replay(&sc, &o, 1, &r));
  ck_assert_msg(r.failed, "the kill never struck: %s", r.plan);
  ck_assert_uint_eq(r.plan_missed, 0);
  ck_assert_uint_eq(r.nfaults, 1);
  ck_assert_str_eq(r.plan, "step 25: kill wkr-m0.2");
  ck_assert_uint_eq(last_world->jobs, 1);
  ck_assert(r.trace_written);
  ck_assert(file_has(path, "\"name\":\"m0-wkr.1\""));
  ck_assert(file_has(path, "\"name\":\"m0-wkr.2\""));
  ck_assert(file_has(path, "\"fault\":\"step 25: kill wkr-m0.2\""));
  unlink(path);
}
END_TEST

void test_sim_net_edges_tests(Suite *s) {
  TCase *tc = test_case("edges", 120);
  tcase_add_test(tc, dead_connections_left_open_cost_a_step_nothing);
  tcase_add_test(tc, connection_vats_are_named_by_machine_peer_and_number);
  tcase_add_test(tc, a_dial_hands_over_its_connection_to_close_the_old_one);
  suite_add_tcase(s, tc);
}
