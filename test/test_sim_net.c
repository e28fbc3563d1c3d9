/* Simulated machines joined by libvat's CapTP connections over the
 * in-memory network (vat/sim_net.h): the real connection code works over
 * a link (calls, pipelining, refs both ways), latency is kept on the
 * virtual clock, each fault does what it says, a seed replays exactly
 * (the bytes on the links included), and a classic distributed bug, a
 * retry that applies a request twice, is found and its fix passes. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <gc/gc.h>

#include "json.h"
#include "sim_programs.h"
#include "support.h"
#include "trace_check.h"
#include "vat/caps.h"
#include "vat/exits.h"
#include "vat/host.h"
#include "vat/net.h"
#include "vat/sim.h"
#include "vat/sim_net.h"
#include "vat/timer.h"

enum { MS = 1000000 };

static const vat_atom *sel(const char *name) {
  return vat_atom_intern(name);
}

static vat_value ints(int64_t a) {
  vat_value v = vat_int(a);
  return vat_list(&v, 1);
}

/* --- The world: a client machine, a server machine ------------------------ */

enum { SLOTS = 16 };

/* A promise's outcome, as a client's turn saw it settle. */
typedef struct slot {
  bool settled, resolved;
  vat_value value;
  uint64_t at;
} slot;

typedef struct net_world net_world;

/* What a test asks of the world it runs (the scenario's ctx). */
typedef struct net_params {
  vat_sim_link_options link;
  vat_conn_options client_opt, server_opt;
  vat_fn start;               /* the client vat's first message */
  void (*plan)(net_world *w); /* faults and the like, in setup */
  bool no_connect;            /* the client dials on its own */
  bool no_serve;              /* the server machine does not serve */
  const char *payload;        /* for the digest test */
  net_world *world;           /* the last world set up */
} net_params;

struct net_world {
  net_params *params;
  vat_system *client_sys, *server_sys;
  vat_conn *conn;        /* the client's side */
  vat_conn *server_conn; /* the server's side of the last one opened */
  unsigned accepted;
  vat_ref *client, *counter;
  int64_t total; /* the server's counter */
  vat_ref *held; /* a request the server keeps unanswered */
  slot s[SLOTS];
  int rc[SLOTS];
  vat_sim_link_info seen; /* a look at the link from a turn */
  bool finished;
};

typedef struct client_state {
  net_world *world;
  unsigned step;
} client_state;

static void settled(vat_turn *turn, void *state, void *ctx, bool resolved,
                    vat_value value) {
  (void)turn;
  client_state *c = state;
  slot *s = ctx;
  s->settled = true;
  s->resolved = resolved;
  s->value = value;
  s->at = vat_system_now(c->world->client_sys);
}

static void await(vat_turn *turn, net_world *w, vat_promise *p, unsigned i) {
  expect_vat_ok(vat_when(turn, p, settled, &w->s[i]));
}

static vat_promise *ask(vat_turn *turn, vat_ref *to, const char *method,
                        vat_value args, double timeout_s) {
  vat_promise *p = NULL;
  expect_vat_ok(vat_request(turn, to, sel(method), args, timeout_s, &p));
  return p;
}

/* --- The server: a counter -------------------------------------------------
 */

typedef struct counter_state {
  net_world *world;
} counter_state;

typedef struct child_state {
  vat_value value;
} child_state;

static void child_receive(vat_turn *turn, void *state, const vat_atom *s,
                          vat_value value) {
  vat_ref *reply;
  if (vat_request_parse(value, NULL, &reply) && s == sel("get"))
    expect_vat_ok(vat_reply(turn, reply, ((child_state *)state)->value));
}

static const vat_entity_def child_def = {.state_size = sizeof(child_state),
                                         .receive = child_receive};

/* call_me's answer: what the caller's callback answered, plus 100. */
static void called_back(vat_turn *turn, void *state, void *ctx, bool resolved,
                        vat_value value) {
  (void)state;
  int64_t v = -1;
  if (resolved)
    vat_get_int(value, &v);
  expect_vat_ok(vat_reply(turn, ctx, vat_int(v + 100)));
}

static void counter_receive(vat_turn *turn, void *state, const vat_atom *s,
                            vat_value value) {
  net_world *w = ((counter_state *)state)->world;
  vat_value args;
  vat_ref *reply;
  if (!vat_request_parse(value, &args, &reply))
    return;
  int64_t a = 0;
  vat_get_int(vat_at(args, 0), &a);
  if (s == sel("add")) {
    w->total += a;
    expect_vat_ok(vat_reply(turn, reply, vat_int(w->total)));
  } else if (s == sel("child")) {
    vat_ref *child;
    child_state *cs;
    expect_vat_ok(vat_entity_new(turn, &child_def, &child, (void **)&cs));
    cs->value = vat_at(args, 0);
    expect_vat_ok(vat_reply(turn, reply, vat_ref_value(child)));
  } else if (s == sel("call_me")) {
    vat_promise *p =
        ask(turn, vat_value_ref(vat_at(args, 0)), "ping", ints(w->total), 0);
    expect_vat_ok(vat_when(turn, p, called_back, reply));
  } else if (s == sel("hold")) {
    w->held = reply;
  } else if (s == sel("echo")) {
    expect_vat_ok(vat_reply(turn, reply, vat_at(args, 0)));
  }
}

static const vat_entity_def counter_def = {.state_size = sizeof(counter_state),
                                           .receive = counter_receive,
                                           .label = "counter"};

static void accepted(void *ctx, vat_system *sys, vat_conn *conn) {
  net_world *w = ctx;
  (void)sys;
  w->server_conn = conn;
  w->accepted++;
}

/* --- Setting it up -----------------------------------------------------------
 */

static const vat_entity_def client_def = {.state_size = sizeof(client_state),
                                          .label = "client"};

static void *net_setup(vat_system *sys, void *ctx) {
  net_params *p = ctx;
  net_world *w = GC_MALLOC(sizeof *w);
  p->world = w;
  w->params = p;
  w->client_sys = sys;
  vat_sim_system_options mo;
  vat_sim_system_options_default(&mo);
  mo.name = "server";
  counter_state *cs;
  client_state *cl;
  if (vat_sim_system_new(sys, &mo, &w->server_sys) != VAT_OK ||
      vat_host_spawn(w->server_sys, &counter_def, &w->counter, (void **)&cs) !=
          VAT_OK ||
      vat_host_spawn(sys, &client_def, &w->client, (void **)&cl) != VAT_OK)
    return NULL;
  cs->world = w;
  cl->world = w;
  if (!p->no_serve && vat_sim_serve(w->server_sys, w->counter, &p->server_opt,
                                    accepted, w) != VAT_OK)
    return NULL;
  if (vat_sim_link(sys, w->server_sys, &p->link) != VAT_OK)
    return NULL;
  if (!p->no_connect && vat_sim_connect(sys, w->server_sys, NULL,
                                        &p->client_opt, &w->conn) != VAT_OK)
    return NULL;
  if (p->plan != NULL)
    p->plan(w);
  if (p->start != NULL && vat_host_send(w->client, p->start, NULL) != VAT_OK)
    return NULL;
  return w;
}

static bool net_done(void *world) {
  return ((net_world *)world)->finished;
}

static net_params params(uint64_t latency_ns, vat_fn start) {
  net_params p = {.start = start};
  vat_sim_link_options_default(&p.link);
  p.link.latency_ns = latency_ns;
  vat_conn_options_default(&p.client_opt);
  vat_conn_options_default(&p.server_opt);
  return p;
}

static vat_sim_result run_one(net_params *p, uint64_t seed) {
  vat_sim_scenario sc = {
      .name = "net", .setup = net_setup, .done = net_done, .ctx = p};
  vat_sim_options o;
  vat_sim_options_default(&o);
  vat_sim_result r;
  ck_assert_vat_ok(vat_sim_replay(&sc, &o, seed, &r));
  return r;
}

static int64_t int_of(const slot *s) {
  int64_t v = -1;
  vat_get_int(s->value, &v);
  return v;
}

/* A promise settled with the error code(text): a question broken with
 * it, or vat_conn_closed resolved with it. */
static bool is_error(const slot *s, const char *code, const char *text) {
  vat_value p = vat_error_payload(s->value);
  return s->settled && vat_error_code(s->value) == sel(code) &&
         (text == NULL || (vat_string_data(p) != NULL &&
                           strcmp(vat_string_data(p), text) == 0));
}

/* --- Calls, pipelining, refs both ways ---------------------------------- */

static void ping_receive(vat_turn *turn, void *state, const vat_atom *s,
                         vat_value value) {
  (void)state;
  vat_value args;
  vat_ref *reply;
  int64_t x = 0;
  if (vat_request_parse(value, &args, &reply) && s == sel("ping") &&
      vat_get_int(vat_at(args, 0), &x) == VAT_OK)
    expect_vat_ok(vat_reply(turn, reply, vat_int(2 * x)));
}

static const vat_entity_def ping_def = {.receive = ping_receive};

static void check_done(net_world *w, unsigned n) {
  bool all = true;
  for (unsigned i = 0; i < n; i++)
    all = all && w->s[i].settled;
  w->finished = all;
}

static void after_any(vat_turn *turn, void *state, void *ctx, bool resolved,
                      vat_value value) {
  settled(turn, state, ctx, resolved, value);
  check_done(((client_state *)state)->world, 4);
}

static void calls_start(vat_turn *turn, void *state, void *arg) {
  (void)arg;
  net_world *w = ((client_state *)state)->world;
  vat_ref *boot = vat_conn_bootstrap_ref(w->conn);
  expect_vat_ok(
      vat_when(turn, ask(turn, boot, "add", ints(5), 0), after_any, &w->s[0]));
  vat_promise *made;
  vat_ref *answer;
  expect_vat_ok(
      vat_conn_pipeline(turn, boot, sel("child"), ints(7), 0, &made, &answer));
  expect_vat_ok(vat_when(turn, ask(turn, answer, "get", vat_list(NULL, 0), 0),
                         after_any, &w->s[1]));
  vat_ref *cb;
  expect_vat_ok(vat_entity_new(turn, &ping_def, &cb, NULL));
  vat_value arg1 = vat_ref_value(cb);
  expect_vat_ok(vat_when(turn,
                         ask(turn, boot, "call_me", vat_list(&arg1, 1), 0),
                         after_any, &w->s[2]));
  expect_vat_ok(
      vat_when(turn, vat_conn_bootstrap(w->conn), after_any, &w->s[3]));
}

START_TEST(calls_pipelining_and_refs_cross_the_link) {
  net_params p = params(5 * MS, calls_start);
  vat_sim_result r = run_one(&p, 1);
  ck_assert_msg(!r.failed, "%s", r.message);
  net_world *w = p.world;
  /* A call to the bootstrap, pipelined on the bootstrap question: one
   * round trip of 5 ms each way. */
  ck_assert(w->s[0].resolved);
  ck_assert_int_eq(int_of(&w->s[0]), 5);
  ck_assert_uint_eq(w->s[0].at, 10 * MS);
  /* A call on the answer of a call not yet answered: still one round
   * trip, the server's new child answering. */
  ck_assert(w->s[1].resolved);
  ck_assert_int_eq(int_of(&w->s[1]), 7);
  ck_assert_uint_eq(w->s[1].at, 10 * MS);
  /* The client's own ref went to the server, which called it back (two
   * more crossings): 2 * 5 + 100. */
  ck_assert(w->s[2].resolved);
  ck_assert_int_eq(int_of(&w->s[2]), 110);
  ck_assert_uint_eq(w->s[2].at, 20 * MS);
  /* The bootstrap promise: a proxy of the server's counter. */
  ck_assert(w->s[3].resolved);
  ck_assert_ptr_nonnull(vat_value_ref(w->s[3].value));
  ck_assert_uint_eq(w->accepted, 1);
  ck_assert_str_eq(r.notes, "none");
}
END_TEST

/* --- Latency and jitter ------------------------------------------------------
 */

enum { SEQ = 8, BURST = 20 };

static void next_call(vat_turn *turn, client_state *c);

static void seq_answered(vat_turn *turn, void *state, void *ctx, bool resolved,
                         vat_value value) {
  settled(turn, state, ctx, resolved, value);
  next_call(turn, state);
}

/* SEQ calls, each after the answer to the one before. */
static void next_call(vat_turn *turn, client_state *c) {
  net_world *w = c->world;
  vat_ref *boot = vat_conn_bootstrap_ref(w->conn);
  if (c->step == SEQ) {
    w->finished = true;
    return;
  }
  expect_vat_ok(vat_when(turn, ask(turn, boot, "echo", ints(c->step), 0),
                         seq_answered, &w->s[c->step]));
  c->step++;
}

static void seq_start(vat_turn *turn, void *state, void *arg) {
  (void)arg;
  next_call(turn, state);
}

typedef struct burst_log {
  int64_t last;
  bool in_order;
  unsigned n;
  uint64_t last_at;
} burst_log;

static burst_log blog;

static void burst_answer(vat_turn *turn, void *state, void *ctx, bool resolved,
                         vat_value value) {
  (void)turn, (void)state, (void)ctx;
  int64_t v = -1;
  if (resolved)
    vat_get_int(value, &v);
  blog.in_order = blog.in_order && v == blog.last + 1;
  blog.last = v;
  blog.n++;
}

static void burst_start(vat_turn *turn, void *state, void *arg) {
  (void)arg;
  net_world *w = ((client_state *)state)->world;
  vat_ref *boot = vat_conn_bootstrap_ref(w->conn);
  for (unsigned i = 0; i < BURST; i++)
    expect_vat_ok(
        vat_when(turn, ask(turn, boot, "add", ints(1), 0), burst_answer, NULL));
  w->finished = true;
}

START_TEST(latency_is_kept_on_the_virtual_clock) {
  /* No jitter: every round trip is exactly twice the latency. */
  net_params p = params(3 * MS, seq_start);
  vat_sim_result r = run_one(&p, 1);
  ck_assert_msg(!r.failed, "%s", r.message);
  for (unsigned i = 0; i < SEQ; i++) {
    ck_assert_int_eq(int_of(&p.world->s[i]), i);
    ck_assert_uint_eq(p.world->s[i].at, (i + 1) * 6 * MS);
  }
  /* Jitter: each way takes 3 to 5 ms, drawn from the seed. */
  unsigned differ = 0;
  for (uint64_t seed = 1; seed <= 20; seed++) {
    p.link.jitter_ns = 2 * MS;
    r = run_one(&p, seed);
    ck_assert_msg(!r.failed, "%s", r.message);
    uint64_t before = 0;
    for (unsigned i = 0; i < SEQ; i++) {
      uint64_t rtt = p.world->s[i].at - before;
      ck_assert_uint_ge(rtt, 6 * MS);
      ck_assert_uint_le(rtt, 10 * MS);
      differ += rtt != 6 * MS;
      before = p.world->s[i].at;
    }
  }
  ck_assert_uint_gt(differ, 20 * SEQ / 2);
}
END_TEST

START_TEST(jitter_keeps_the_order_of_a_stream) {
  for (uint64_t seed = 1; seed <= 20; seed++) {
    net_params p = params(1 * MS, burst_start);
    p.link.jitter_ns = 5 * MS;
    blog = (burst_log){.in_order = true};
    vat_sim_result r = run_one(&p, seed);
    ck_assert_msg(!r.failed, "%s", r.message);
    ck_assert_uint_eq(blog.n, BURST);
    ck_assert_msg(blog.in_order, "seed %llu: answers out of order",
                  (unsigned long long)seed);
    ck_assert_int_eq(p.world->total, BURST);
  }
}
END_TEST

/* --- Partitions -------------------------------------------------------------
 */

static void look_at_the_link(vat_turn *turn, void *state, void *arg) {
  (void)turn, (void)arg;
  net_world *w = ((client_state *)state)->world;
  w->rc[0] = vat_sim_link_inspect(w->client_sys, w->server_sys, &w->seen);
  w->finished = true;
}

/* A call at 10 ms, and a look at the link at 20 ms. */
static void call_at_10ms(vat_turn *turn, void *state, void *arg) {
  (void)arg;
  net_world *w = ((client_state *)state)->world;
  await(turn, w, ask(turn, vat_conn_bootstrap_ref(w->conn), "add", ints(2), 0),
        1);
  expect_vat_ok(
      vat_later(turn, 0.010, vat_self(turn), look_at_the_link, NULL, NULL));
}

static void partition_start(vat_turn *turn, void *state, void *arg) {
  (void)arg;
  net_world *w = ((client_state *)state)->world;
  await(turn, w, ask(turn, vat_conn_bootstrap_ref(w->conn), "add", ints(1), 0),
        0);
  expect_vat_ok(
      vat_later(turn, 0.010, vat_self(turn), call_at_10ms, NULL, NULL));
}

static void partition_5ms_for_50ms(net_world *w) {
  expect_vat_ok(vat_sim_net_fault(w->client_sys, w->server_sys,
                                  VAT_SIM_NET_PARTITION, 5 * MS, 50 * MS));
}

START_TEST(a_partition_holds_the_bytes_until_it_heals) {
  net_params p = params(1 * MS, partition_start);
  p.plan = partition_5ms_for_50ms;
  vat_sim_result r = run_one(&p, 3);
  ck_assert_msg(!r.failed, "%s", r.message);
  net_world *w = p.world;
  ck_assert_int_eq(int_of(&w->s[0]), 1);
  ck_assert_uint_eq(w->s[0].at, 2 * MS);
  /* Written at 10 ms, held until 55 ms, answered 1 ms later. */
  ck_assert_vat_ok(w->rc[0]);
  ck_assert(w->seen.partitioned);
  ck_assert_uint_eq(w->seen.healed_at_ns, 55 * MS);
  ck_assert_uint_gt(w->seen.bytes_on_the_way, 0);
  ck_assert(w->s[1].resolved);
  ck_assert_int_eq(int_of(&w->s[1]), 3);
  ck_assert_uint_eq(w->s[1].at, 56 * MS);
  ck_assert_str_eq(r.notes, "5.000 ms: partition m0-server for 0.050 s");
  vat_sim_link_info info;
  ck_assert_vat_err(vat_sim_link_inspect(w->client_sys, w->server_sys, &info),
                    VAT_EINVAL); /* the world is over */
}
END_TEST

/* A partition longer than the connection's own timeouts: the client's
 * question breaks with `timeout` on the virtual clock; the server, idle,
 * ends its side, and the client hears of it when the partition heals. */
static void watch_closed(vat_turn *turn, void *state, void *arg) {
  (void)arg;
  net_world *w = ((client_state *)state)->world;
  await(turn, w, vat_conn_closed(w->conn), 2);
  await(turn, w, vat_conn_closed(w->server_conn), 3);
  w->finished = true;
}

static void long_partition_start(vat_turn *turn, void *state, void *arg) {
  partition_start(turn, state, arg);
  watch_closed(turn, state, arg);
}

static void partition_5ms_for_1s(net_world *w) {
  expect_vat_ok(vat_sim_net_fault(w->client_sys, w->server_sys,
                                  VAT_SIM_NET_PARTITION, 5 * MS, 1000 * MS));
}

START_TEST(a_partition_past_the_timeouts_ends_the_connection) {
  net_params p = params(1 * MS, long_partition_start);
  p.plan = partition_5ms_for_1s;
  p.client_opt.question_timeout_s = 0.020;
  p.server_opt.idle_timeout_s = 0.100;
  vat_sim_result r = run_one(&p, 5);
  ck_assert_msg(!r.failed, "%s", r.message);
  net_world *w = p.world;
  /* The call at 10 ms broke at 30 ms, on the client's question timeout. */
  ck_assert(!w->s[1].resolved);
  ck_assert(vat_is_atom(w->s[1].value, vat_atom_timeout()));
  ck_assert_uint_eq(w->s[1].at, 30 * MS);
  /* The server heard nothing from 1 ms on: its idle timeout ended it
   * between 100 and 125 ms of silence. */
  ck_assert(w->s[3].resolved);
  ck_assert_ptr_eq(vat_error_code(w->s[3].value), vat_atom_timeout());
  ck_assert_uint_ge(w->s[3].at, 101 * MS);
  ck_assert_uint_le(w->s[3].at, 126 * MS);
  /* Its CTP_DISCONNECT was held, and crossed when the partition healed. */
  ck_assert(is_error(&w->s[2], "disconnected", "disconnected by the peer"));
  ck_assert_uint_eq(w->s[2].at, 1005 * MS);
}
END_TEST

/* --- Disconnects and reconnects ---------------------------------------------
 */

static void proxy_down(vat_turn *turn, void *state, uint64_t id, vat_ref *who,
                       vat_value reason);

static void redialled(vat_turn *turn, void *state, void *ctx, bool resolved,
                      vat_value value) {
  settled(turn, state, ctx, resolved, value);
  net_world *w = ((client_state *)state)->world;
  vat_ref *proxy = vat_value_ref(value);
  if (!resolved || proxy == NULL)
    return;
  await(turn, w, ask(turn, proxy, "add", ints(1), 0), 6);
  w->finished = true;
}

static void proxy_down(vat_turn *turn, void *state, uint64_t id, vat_ref *who,
                       vat_value reason) {
  (void)id, (void)who;
  net_world *w = ((client_state *)state)->world;
  w->s[4] = (slot){true, false, reason, vat_system_now(w->client_sys)};
  vat_promise *p;
  expect_vat_ok(
      vat_sim_dial(w->client_sys, w->server_sys, NULL, NULL, NULL, NULL, &p));
  expect_vat_ok(vat_when(turn, p, redialled, &w->s[5]));
}

static void got_proxy(vat_turn *turn, void *state, void *ctx, bool resolved,
                      vat_value value) {
  settled(turn, state, ctx, resolved, value);
  uint64_t id;
  if (resolved)
    expect_vat_ok(vat_monitor(turn, vat_value_ref(value), proxy_down, &id));
}

static void nothing(vat_turn *turn, void *state, void *arg) {
  (void)turn, (void)state, (void)arg;
}

/* A planned fault strikes only while the world has something to do
 * (vat/sim.h): a program that only waits on the network would be stuck
 * before it. A timer at 50 ms keeps these worlds going past 5 ms. */
static void keep_going(vat_turn *turn) {
  expect_vat_ok(vat_later(turn, 0.050, vat_self(turn), nothing, NULL, NULL));
}

static void disconnect_start(vat_turn *turn, void *state, void *arg) {
  (void)arg;
  net_world *w = ((client_state *)state)->world;
  keep_going(turn);
  await(turn, w, ask(turn, vat_conn_bootstrap_ref(w->conn), "hold", ints(0), 0),
        0);
  await(turn, w, vat_conn_closed(w->conn), 1);
  expect_vat_ok(
      vat_when(turn, vat_conn_bootstrap(w->conn), got_proxy, &w->s[3]));
}

static void disconnect_at_5ms(net_world *w) {
  expect_vat_ok(vat_sim_net_fault(w->client_sys, w->server_sys,
                                  VAT_SIM_NET_DISCONNECT, 5 * MS, 0));
}

START_TEST(a_disconnect_resets_both_sides_and_the_program_reconnects) {
  net_params p = params(1 * MS, disconnect_start);
  p.plan = disconnect_at_5ms;
  vat_sim_result r = run_one(&p, 2);
  ck_assert_msg(!r.failed, "%s", r.message);
  net_world *w = p.world;
  const char *reset = "read: connection reset by peer";
  /* The question the server held breaks at once with the reset. */
  ck_assert(!w->s[0].resolved);
  ck_assert(is_error(&w->s[0], "disconnected", reset));
  ck_assert_uint_eq(w->s[0].at, 5 * MS);
  /* Both sides' connections ended with it. */
  ck_assert(w->s[1].resolved);
  ck_assert_ptr_eq(vat_error_code(w->s[1].value), vat_atom_disconnected());
  ck_assert_str_eq(vat_string_data(vat_error_payload(w->s[1].value)), reset);
  /* The proxy ended with noconnection, and the program dialled again: the
   * dial crosses in 1 ms, the bootstrap's round trip 2 ms more. */
  ck_assert(vat_is_atom(w->s[4].value, vat_atom_noconnection()));
  ck_assert_uint_eq(w->s[4].at, 5 * MS);
  ck_assert(w->s[5].resolved);
  ck_assert_uint_eq(w->s[5].at, 8 * MS);
  ck_assert_int_eq(int_of(&w->s[6]), 1);
  ck_assert_uint_eq(w->s[6].at, 10 * MS);
  ck_assert_uint_eq(w->accepted, 2);
  ck_assert_ptr_nonnull(strstr(
      r.notes, "5.000 ms: disconnect m0-server: 2 connection ends reset"));
}
END_TEST

static void watch_server_start(vat_turn *turn, void *state, void *arg) {
  (void)arg;
  net_world *w = ((client_state *)state)->world;
  keep_going(turn);
  await(turn, w, vat_conn_closed(w->server_conn), 0);
  await(turn, w, vat_conn_closed(w->conn), 1);
  w->finished = true;
}

START_TEST(a_disconnect_ends_the_server_side_too) {
  net_params p = params(1 * MS, watch_server_start);
  p.plan = disconnect_at_5ms;
  vat_sim_result r = run_one(&p, 2);
  ck_assert_msg(!r.failed, "%s", r.message);
  net_world *w = p.world;
  for (unsigned i = 0; i < 2; i++) {
    ck_assert(w->s[i].resolved);
    ck_assert_str_eq(vat_string_data(vat_error_payload(w->s[i].value)),
                     "read: connection reset by peer");
    ck_assert_uint_eq(w->s[i].at, 5 * MS);
  }
}
END_TEST

/* Dials that cannot connect. */
static void dial_start(vat_turn *turn, void *state, void *arg) {
  (void)arg;
  net_world *w = ((client_state *)state)->world;
  vat_promise *p;
  w->rc[0] =
      vat_sim_dial(w->client_sys, w->server_sys, NULL, NULL, NULL, NULL, &p);
  if (w->rc[0] == VAT_OK)
    await(turn, w, p, 0);
  w->finished = true;
}

static void crash_server_at_0(net_world *w) {
  expect_vat_ok(vat_sim_system_crash(w->server_sys, 0));
}

static void partition_0_for_2s(net_world *w) {
  expect_vat_ok(vat_sim_net_fault(w->client_sys, w->server_sys,
                                  VAT_SIM_NET_PARTITION, 0, 2000 * MS));
}

static void partition_0_for_300ms(net_world *w) {
  expect_vat_ok(vat_sim_net_fault(w->client_sys, w->server_sys,
                                  VAT_SIM_NET_PARTITION, 0, 300 * MS));
}

START_TEST(a_dial_is_refused_times_out_or_waits_for_the_heal) {
  /* Nobody serves: refused after the dial's crossing. */
  net_params p = params(2 * MS, dial_start);
  p.no_connect = p.no_serve = true;
  vat_sim_result r = run_one(&p, 1);
  ck_assert_vat_ok(p.world->rc[0]);
  ck_assert(!p.world->s[0].resolved);
  ck_assert(
      is_error(&p.world->s[0], "disconnected", "connect: connection refused"));
  ck_assert_uint_eq(p.world->s[0].at, 2 * MS);
  /* The server crashed: timed out after connect_timeout_ns. */
  p = params(2 * MS, dial_start);
  p.no_connect = true;
  p.link.connect_timeout_ns = 700 * MS;
  p.plan = crash_server_at_0;
  r = run_one(&p, 1);
  ck_assert(!p.world->s[0].resolved);
  ck_assert(is_error(&p.world->s[0], "disconnected",
                     "connect: connection timed out"));
  ck_assert_uint_eq(p.world->s[0].at, 700 * MS);
  ck_assert_ptr_nonnull(strstr(r.notes, "crash server"));
  /* A partition past the timeout: timed out too. */
  p = params(2 * MS, dial_start);
  p.no_connect = true;
  p.plan = partition_0_for_2s;
  r = run_one(&p, 1);
  ck_assert(!p.world->s[0].resolved);
  ck_assert(is_error(&p.world->s[0], "disconnected",
                     "connect: connection timed out"));
  ck_assert_uint_eq(p.world->s[0].at, 1000 * MS);
  /* One that heals first: the dial waits for it, and connects. */
  p = params(2 * MS, dial_start);
  p.no_connect = true;
  p.plan = partition_0_for_300ms;
  r = run_one(&p, 1);
  ck_assert_msg(p.world->s[0].resolved, "%s", r.message);
  ck_assert_ptr_nonnull(vat_value_ref(p.world->s[0].value));
  /* Connected at 300 ms; the bootstrap's round trip, 4 ms. */
  ck_assert_uint_eq(p.world->s[0].at, 304 * MS);
}
END_TEST

/* --- A crashed machine is silence ----------------------------------------- */

static void crash_server_at_5ms(net_world *w) {
  expect_vat_ok(vat_sim_system_crash(w->server_sys, 5 * MS));
}

START_TEST(a_crashed_machine_is_silence) {
  net_params p = params(1 * MS, partition_start);
  p.plan = crash_server_at_5ms;
  p.client_opt.question_timeout_s = 0.050;
  vat_sim_result r = run_one(&p, 4);
  ck_assert_msg(!r.failed, "%s", r.message);
  net_world *w = p.world;
  ck_assert_int_eq(int_of(&w->s[0]), 1);
  /* The call at 10 ms is lost: only the question's timeout ends it. */
  ck_assert(vat_is_atom(w->s[1].value, vat_atom_timeout()));
  ck_assert_uint_eq(w->s[1].at, 60 * MS);
  ck_assert_int_eq(w->total, 1);
  /* What the client wrote from 5 ms on was dropped on the way. */
  ck_assert_vat_ok(w->rc[0]);
  ck_assert_uint_gt(w->seen.bytes_dropped, 0);
  ck_assert_uint_eq(w->seen.bytes_on_the_way, 0);
  ck_assert_str_eq(r.notes, "5.000 ms: crash server");
}
END_TEST

/* A machine a stop fault stopped is silence too: its connection vat
 * answers nothing more, and each question ends by its timeout. */
START_TEST(a_stopped_machine_is_silence) {
  net_params p = params(1 * MS, partition_start);
  p.client_opt.question_timeout_s = 0.050;
  vat_sim_scenario sc = {
      .name = "net", .setup = net_setup, .done = net_done, .ctx = &p};
  vat_sim_options o;
  vat_sim_options_default(&o);
  o.plan = "step 1: stop counter";
  vat_sim_result r;
  ck_assert_vat_ok(vat_sim_replay(&sc, &o, 4, &r));
  ck_assert_msg(!r.failed, "%s", r.message);
  ck_assert_uint_eq(r.nfaults, 1);
  net_world *w = p.world;
  ck_assert(vat_is_atom(w->s[0].value, vat_atom_timeout()));
  ck_assert_uint_eq(w->s[0].at, 50 * MS);
  ck_assert(vat_is_atom(w->s[1].value, vat_atom_timeout()));
  ck_assert_uint_eq(w->s[1].at, 60 * MS);
  ck_assert_vat_ok(w->rc[0]);
  ck_assert_uint_gt(w->seen.bytes_dropped, 0);
  ck_assert_msg(strstr(r.notes, " ms: stop server") != NULL, "%s", r.notes);
}
END_TEST

/* A fault or a crash planned for after the program is done neither keeps
 * the world going past its deadline nor strikes. */
static void faults_after_the_end(net_world *w) {
  expect_vat_ok(vat_sim_net_fault(w->client_sys, w->server_sys,
                                  VAT_SIM_NET_DISCONNECT, 100000ull * MS, 0));
  expect_vat_ok(vat_sim_system_crash(w->server_sys, 200000ull * MS));
}

START_TEST(faults_planned_for_later_do_not_keep_the_world_going) {
  net_params p = params(1 * MS, partition_start);
  p.plan = faults_after_the_end;
  vat_sim_result r = run_one(&p, 4);
  ck_assert_msg(!r.failed, "%s", r.message);
  ck_assert_int_eq(int_of(&p.world->s[1]), 3);
  ck_assert_uint_eq(r.now_ns, 20 * MS);
  ck_assert_str_eq(r.notes, "none");
}
END_TEST

/* --- Limits: a side with too much on its way ----------------------------- */

static void flood_start(vat_turn *turn, void *state, void *arg) {
  (void)arg;
  net_world *w = ((client_state *)state)->world;
  vat_ref *boot = vat_conn_bootstrap_ref(w->conn);
  for (unsigned i = 0; i < 100; i++)
    (void)ask(turn, boot, "add", ints(1), 0);
  await(turn, w, vat_conn_closed(w->conn), 0);
  w->finished = true;
}

/* A connection's end, in slot `s`: overloaded, its cause starting so. */
static void assert_overloaded(const slot *s, const char *cause) {
  ck_assert(s->resolved);
  ck_assert_ptr_eq(vat_error_code(s->value), vat_atom_overloaded());
  const char *text = vat_string_data(vat_error_payload(s->value));
  ck_assert_msg(strncmp(text, cause, strlen(cause)) == 0, "cause: %s", text);
}

START_TEST(too_much_on_the_way_ends_the_connection) {
  net_params p = params(1 * MS, flood_start);
  p.plan = partition_0_for_300ms;
  p.client_opt.out_pause_bytes = 1000;
  p.client_opt.out_max_bytes = 2000;
  vat_sim_result r = run_one(&p, 1);
  ck_assert_msg(!r.failed, "%s", r.message);
  net_world *w = p.world;
  /* Its own calls filled the queue, not answers the peer left unread. */
  assert_overloaded(&w->s[0], "sending faster than the peer reads");
  /* What went before the limit arrived when the partition healed. */
  ck_assert_int_gt(w->total, 0);
  ck_assert_int_lt(w->total, 100);
}
END_TEST

/* Calls answered with more than the link has on its way at once: the
 * server's queue fills with answers, and its end names the peer's not
 * reading them. */
static void echo_flood_start(vat_turn *turn, void *state, void *arg) {
  (void)arg;
  net_world *w = ((client_state *)state)->world;
  vat_ref *boot = vat_conn_bootstrap_ref(w->conn);
  char big[400];
  memset(big, 'x', sizeof big - 1);
  big[sizeof big - 1] = '\0';
  vat_value text = vat_string(big);
  for (unsigned i = 0; i < 20; i++)
    (void)ask(turn, boot, "echo", vat_list(&text, 1), 0);
  await(turn, w, vat_conn_closed(w->server_conn), 0);
  w->finished = true;
}

START_TEST(unread_answers_on_the_way_end_the_server_side) {
  net_params p = params(1 * MS, echo_flood_start);
  p.server_opt.out_pause_bytes = 1000;
  p.server_opt.out_max_bytes = 2000;
  vat_sim_result r = run_one(&p, 1);
  ck_assert_msg(!r.failed, "%s", r.message);
  assert_overloaded(&p.world->s[0], "peer does not read");
}
END_TEST

/* --- Replay -----------------------------------------------------------------
 */

/* A client that calls, and dials again whenever its connection goes,
 * over a link with jitter and drawn faults. */
enum { ROUNDS = 6 };

static void keep_calling(vat_turn *turn, client_state *c, vat_ref *to);

static void replay_answer(vat_turn *turn, void *state, void *ctx, bool resolved,
                          vat_value value) {
  client_state *c = state;
  (void)value;
  vat_ref *to = ctx;
  if (resolved)
    c->step++;
  keep_calling(turn, c, resolved ? to : NULL);
}

static void replay_connected(vat_turn *turn, void *state, void *ctx,
                             bool resolved, vat_value value) {
  (void)ctx;
  keep_calling(turn, state, resolved ? vat_value_ref(value) : NULL);
}

static void keep_calling(vat_turn *turn, client_state *c, vat_ref *to) {
  net_world *w = c->world;
  if (c->step >= ROUNDS) {
    w->finished = true;
    return;
  }
  if (to == NULL) { /* lost: dial again */
    vat_promise *p;
    expect_vat_ok(
        vat_sim_dial(w->client_sys, w->server_sys, NULL, NULL, NULL, NULL, &p));
    expect_vat_ok(vat_when(turn, p, replay_connected, NULL));
    return;
  }
  vat_value arg = vat_string(w->params->payload);
  expect_vat_ok(vat_when(turn, ask(turn, to, "echo", vat_list(&arg, 1), 0.5),
                         replay_answer, to));
}

static void replay_start(vat_turn *turn, void *state, void *arg) {
  (void)arg;
  keep_calling(turn, state,
               vat_conn_bootstrap_ref(((client_state *)state)->world->conn));
}

static net_params replay_params(void) {
  net_params p = params(2 * MS, replay_start);
  p.link.jitter_ns = 3 * MS;
  p.link.fault_rate = 0.5;
  p.link.max_faults = 3;
  p.link.fault_window_ns = 60 * MS;
  p.link.partition_min_ns = 5 * MS;
  p.link.partition_max_ns = 400 * MS;
  p.client_opt.question_timeout_s = 0.3;
  p.payload = "alpha";
  return p;
}

START_TEST(a_seed_replays_exactly_bytes_included) {
  net_params p = replay_params();
  vat_sim_scenario sc = {
      .name = "replay", .setup = net_setup, .done = net_done, .ctx = &p};
  vat_sim_options o;
  vat_sim_options_default(&o);
  unsigned partitions = 0, disconnects = 0, distinct = 0;
  uint64_t last = 0;
  for (uint64_t seed = 1; seed <= 40; seed++) {
    vat_sim_result r, again;
    ck_assert_vat_ok(vat_sim_replay(&sc, &o, seed, &r));
    ck_assert_msg(!r.failed, "seed %llu: %s; notes %s",
                  (unsigned long long)seed, r.message, r.notes);
    ck_assert_vat_ok(vat_sim_replay(&sc, &o, seed, &again));
    ck_assert_uint_eq(again.digest, r.digest);
    ck_assert_uint_eq(again.turns, r.turns);
    ck_assert_uint_eq(again.now_ns, r.now_ns);
    ck_assert_str_eq(again.notes, r.notes);
    partitions += strstr(r.notes, "partition") != NULL;
    disconnects += strstr(r.notes, "disconnect") != NULL;
    distinct += r.digest != last;
    last = r.digest;
  }
  ck_assert_uint_gt(partitions, 5);
  ck_assert_uint_gt(disconnects, 5);
  ck_assert_uint_eq(distinct, 40);
  /* Across processes: the same seed, run from the environment. */
  setenv("VAT_SIM_SEED", "17", 1);
  vat_sim_result env, direct;
  ck_assert_vat_ok(vat_sim_run(&sc, &o, 1, 5, &env));
  unsetenv("VAT_SIM_SEED");
  ck_assert_vat_ok(vat_sim_replay(&sc, &o, 17, &direct));
  ck_assert_uint_eq(env.digest, direct.digest);
  /* One byte more or less on the wire, nothing else: the same turns, and
   * another digest. */
  net_params q = replay_params();
  q.link.fault_rate = 0;
  q.link.jitter_ns = 0;
  sc.ctx = &q;
  vat_sim_result a, b;
  ck_assert_vat_ok(vat_sim_replay(&sc, &o, 3, &a));
  q.payload = "alphb";
  ck_assert_vat_ok(vat_sim_replay(&sc, &o, 3, &b));
  ck_assert_uint_eq(a.turns, b.turns);
  ck_assert_uint_eq(a.steps, b.steps);
  ck_assert_uint_ne(a.digest, b.digest);
}
END_TEST

/* --- Bad input -------------------------------------------------------------
 */

static int bad[24];
static vat_system *crashed_one, *other_one;

static void *bad_setup(vat_system *sys, void *ctx) {
  (void)ctx;
  vat_system *b, *c;
  if (vat_sim_system_new(sys, NULL, &b) != VAT_OK ||
      vat_sim_system_new(sys, NULL, &c) != VAT_OK)
    return NULL;
  vat_sim_link_options lo;
  vat_conn *conn;
  vat_promise *p;
  vat_sim_link_options_default(&lo);
  bad[0] = vat_sim_link(sys, sys, NULL);
  bad[1] = vat_sim_link(sys, NULL, NULL);
  lo.fault_rate = 2;
  bad[2] = vat_sim_link(sys, b, &lo);
  vat_sim_link_options_default(&lo);
  lo.partition_min_ns = 10;
  lo.partition_max_ns = 5;
  bad[3] = vat_sim_link(sys, b, &lo);
  vat_sim_link_options_default(&lo);
  lo.fault_kinds = 1u << 7;
  bad[4] = vat_sim_link(sys, b, &lo);
  vat_sim_link_options_default(&lo);
  lo.jitter_ns = UINT64_MAX;
  bad[23] = vat_sim_link(sys, b, &lo);
  bad[5] = vat_sim_link(sys, b, NULL);
  bad[6] = vat_sim_link(b, sys, NULL);
  bad[7] = vat_sim_connect(sys, b, NULL, NULL, &conn); /* b does not serve */
  vat_conn_options co;
  vat_conn_options_default(&co);
  co.out_pause_bytes = 100;
  co.out_max_bytes = 10;
  bad[8] = vat_sim_serve(b, NULL, &co, NULL, NULL);
  bad[9] = vat_sim_serve(NULL, NULL, NULL, NULL, NULL);
  bad[10] = vat_sim_serve(b, NULL, NULL, NULL, NULL);
  bad[11] = vat_sim_connect(sys, b, NULL, &co, &conn);
  bad[12] = vat_sim_connect(sys, b, NULL, NULL, NULL);
  bad[13] = vat_sim_dial(sys, b, NULL, NULL, NULL, NULL, NULL);
  bad[14] = vat_sim_dial(sys, sys, NULL, NULL, NULL, NULL, &p);
  bad[15] = vat_sim_net_fault(sys, b, (vat_sim_net_fault_kind)9, 0, 1);
  bad[16] = vat_sim_net_fault(sys, b, VAT_SIM_NET_PARTITION, 0, 0);
  vat_sim_link_info info;
  bad[17] = vat_sim_link_inspect(sys, c, &info);
  bad[18] = vat_sim_link_inspect(sys, b, NULL);
  expect_vat_ok(vat_sim_system_crash(c, 0));
  bad[19] = vat_sim_serve(c, NULL, NULL, NULL, NULL);
  crashed_one = c;
  other_one = b;
  return &bad;
}

/* At quiescence c has crashed: no connection from it. */
static bool bad_check_crashed(void *world, bool quiescent, char *why,
                              size_t n) {
  (void)world, (void)why, (void)n;
  vat_conn *conn;
  vat_promise *p;
  if (quiescent) {
    bad[20] = vat_sim_connect(crashed_one, other_one, NULL, NULL, &conn);
    bad[21] = vat_sim_dial(crashed_one, other_one, NULL, NULL, NULL, NULL, &p);
    bad[22] = vat_sim_connect(other_one, crashed_one, NULL, NULL, &conn);
  }
  return true;
}

START_TEST(bad_input_is_refused) {
  vat_system *sys = test_host_system(true, 1),
             *other = test_host_system(true, 2);
  vat_conn *conn;
  vat_promise *p;
  vat_sim_link_info info;
  ck_assert_vat_err(vat_sim_link(sys, other, NULL), VAT_EINVAL);
  ck_assert_vat_err(vat_sim_serve(sys, NULL, NULL, NULL, NULL), VAT_EINVAL);
  ck_assert_vat_err(vat_sim_connect(sys, other, NULL, NULL, &conn), VAT_EINVAL);
  ck_assert_vat_err(vat_sim_dial(sys, other, NULL, NULL, NULL, NULL, &p),
                    VAT_EINVAL);
  ck_assert_vat_err(vat_sim_net_fault(sys, other, VAT_SIM_NET_DISCONNECT, 0, 0),
                    VAT_EINVAL);
  ck_assert_vat_err(vat_sim_link_inspect(sys, other, &info), VAT_EINVAL);
  test_quiesce(sys);
  test_quiesce(other);
  vat_sim_scenario sc = {
      .name = "bad", .setup = bad_setup, .check = bad_check_crashed};
  vat_sim_options o;
  vat_sim_options_default(&o);
  vat_sim_result r;
  ck_assert_vat_ok(vat_sim_replay(&sc, &o, 1, &r));
  ck_assert_msg(!r.failed, "%s", r.message);
  int want[] = {VAT_EINVAL,  VAT_EINVAL,  VAT_EINVAL,    VAT_EINVAL, VAT_EINVAL,
                VAT_OK,      VAT_EBUSY,   VAT_ENOTFOUND, VAT_EINVAL, VAT_EINVAL,
                VAT_OK,      VAT_EINVAL,  VAT_EINVAL,    VAT_EINVAL, VAT_EINVAL,
                VAT_EINVAL,  VAT_EINVAL,  VAT_ENOTFOUND, VAT_EINVAL, VAT_OK,
                VAT_ECLOSED, VAT_ECLOSED, VAT_ECLOSED,   VAT_EINVAL};
  for (unsigned i = 0; i < sizeof want / sizeof *want; i++)
    ck_assert_msg(bad[i] == want[i], "call %u: %s, not %s", i,
                  vat_err_name(bad[i]), vat_err_name(want[i]));
}
END_TEST

/* --- A classic bug: a retry after a disconnect applies a deposit twice ----
 * The client deposits 10 into the server's account once. Its request
 * carries no identity: when the connection goes before the answer comes
 * back, the client cannot tell whether the server applied it, dials again
 * and sends it again. A disconnect that falls between the server applying
 * it and the answer arriving makes the balance 20. The fixed version sends
 * a request id, and the server answers an id it has seen with the answer
 * it gave, applying nothing (an idempotent server). */

typedef struct bank {
  int64_t balance;
  int64_t applied_id; /* the fixed server: the last id applied */
  bool asked;         /* the client has its answer */
  unsigned attempts;
  bool fixed;
  vat_system *client_sys, *server_sys;
  vat_conn *conn;
} bank;

typedef struct bank_state {
  bank *b;
} bank_state;

static void bank_receive(vat_turn *turn, void *state, const vat_atom *s,
                         vat_value value) {
  bank *b = ((bank_state *)state)->b;
  vat_value args;
  vat_ref *reply;
  if (!vat_request_parse(value, &args, &reply) || s != sel("deposit"))
    return;
  int64_t id = 0, amount = 0;
  vat_get_int(vat_at(args, 0), &id);
  vat_get_int(vat_at(args, 1), &amount);
  if (!(b->fixed && id == b->applied_id)) {
    b->balance += amount;
    b->applied_id = id;
  }
  expect_vat_ok(vat_reply(turn, reply, vat_int(b->balance)));
}

static const vat_entity_def bank_def = {
    .state_size = sizeof(bank_state), .receive = bank_receive, .label = "bank"};

static void deposit(vat_turn *turn, bank *b, vat_ref *to);

static void deposited(vat_turn *turn, void *state, void *ctx, bool resolved,
                      vat_value value) {
  (void)ctx, (void)value;
  bank *b = ((bank_state *)state)->b;
  if (resolved) {
    b->asked = true;
    return;
  }
  deposit(turn, b, NULL); /* lost on the way, or its answer was: again */
}

static void reconnected(vat_turn *turn, void *state, void *ctx, bool resolved,
                        vat_value value) {
  (void)ctx;
  bank *b = ((bank_state *)state)->b;
  deposit(turn, b, resolved ? vat_value_ref(value) : NULL);
}

static void deposit(vat_turn *turn, bank *b, vat_ref *to) {
  if (b->attempts >= 10)
    return; /* gives up: the check says so */
  if (to == NULL) {
    vat_promise *p;
    expect_vat_ok(
        vat_sim_dial(b->client_sys, b->server_sys, NULL, NULL, NULL, NULL, &p));
    expect_vat_ok(vat_when(turn, p, reconnected, NULL));
    return;
  }
  b->attempts++;
  vat_value args[2] = {vat_int(1), vat_int(10)};
  vat_promise *p = ask(turn, to, "deposit", vat_list(args, 2), 0.5);
  expect_vat_ok(vat_when(turn, p, deposited, NULL));
}

static void bank_client_start(vat_turn *turn, void *state, void *arg) {
  (void)arg;
  bank *b = ((bank_state *)state)->b;
  deposit(turn, b, vat_conn_bootstrap_ref(b->conn));
}

/* The bank's world; with `noisy`, more faults than the bug needs: a
 * machine that crashes and does nothing, and up to five faults of both
 * kinds on the link. */
static void *bank_world(vat_system *sys, bool fixed, bool noisy) {
  bank *b = GC_MALLOC(sizeof *b);
  b->fixed = fixed;
  b->client_sys = sys;
  vat_sim_system_options mo;
  vat_sim_system_options_default(&mo);
  mo.name = "bank";
  bank_state *server, *client;
  vat_ref *account, *c;
  vat_entity_def cdef = {.state_size = sizeof(bank_state), .label = "client"};
  if (vat_sim_system_new(sys, &mo, &b->server_sys) != VAT_OK ||
      vat_host_spawn(b->server_sys, &bank_def, &account, (void **)&server) !=
          VAT_OK ||
      vat_host_spawn(sys, &cdef, &c, (void **)&client) != VAT_OK)
    return NULL;
  server->b = client->b = b;
  vat_sim_link_options lo;
  vat_sim_link_options_default(&lo);
  lo.latency_ns = 1 * MS;
  lo.jitter_ns = 1 * MS;
  lo.fault_rate = 1;
  lo.fault_kinds = VAT_SIM_NET_FAULT(VAT_SIM_NET_DISCONNECT);
  lo.fault_window_ns = 10 * MS;
  if (noisy) {
    lo.fault_kinds = 0;
    lo.max_faults = 5;
    lo.partition_min_ns = 1 * MS;
    lo.partition_max_ns = 3 * MS;
    vat_sim_system_options spare;
    vat_sim_system_options_default(&spare);
    spare.name = "spare";
    spare.crash_chance = 1;
    spare.crash_window_ns = 10 * MS;
    vat_system *idle;
    if (vat_sim_system_new(sys, &spare, &idle) != VAT_OK)
      return NULL;
  }
  if (vat_sim_serve(b->server_sys, account, NULL, NULL, NULL) != VAT_OK ||
      vat_sim_link(sys, b->server_sys, &lo) != VAT_OK ||
      vat_sim_connect(sys, b->server_sys, NULL, NULL, &b->conn) != VAT_OK ||
      vat_host_send(c, bank_client_start, NULL) != VAT_OK)
    return NULL;
  return b;
}

static void *bank_setup(vat_system *sys, void *ctx) {
  return bank_world(sys, ctx != NULL, false);
}

static void *noisy_bank_setup(vat_system *sys, void *ctx) {
  (void)ctx;
  return bank_world(sys, false, true);
}

static bool bank_check(void *world, bool quiescent, char *why, size_t n) {
  bank *b = world;
  if (b->balance > 10) {
    snprintf(why, n, "one deposit of 10 asked, the balance is %" PRId64,
             b->balance);
    return false;
  }
  if (quiescent && b->asked && b->balance != 10) {
    snprintf(why, n, "the deposit was answered, the balance is %" PRId64,
             b->balance);
    return false;
  }
  return true;
}

static bool bank_done(void *world) {
  return ((bank *)world)->asked;
}

static int fixed_marker;

static const vat_sim_scenario retry_buggy = {.name = "retry",
                                             .setup = bank_setup,
                                             .check = bank_check,
                                             .done = bank_done};
static const vat_sim_scenario retry_fixed = {.name = "retry-idempotent",
                                             .setup = bank_setup,
                                             .check = bank_check,
                                             .done = bank_done,
                                             .ctx = &fixed_marker};

START_TEST(a_retry_after_a_disconnect_applies_twice_random) {
  sim_find_replay_and_pass(&retry_buggy, &retry_fixed, VAT_SIM_RANDOM, 0, 200,
                           "one deposit of 10 asked, the balance is 20");
}
END_TEST

START_TEST(a_retry_after_a_disconnect_applies_twice_pct) {
  sim_find_replay_and_pass(&retry_buggy, &retry_fixed, VAT_SIM_PCT, 0, 200,
                           "one deposit of 10 asked, the balance is 20");
}
END_TEST

/* --- The network's faults in the plan -------------------------------------
 * A fault the network draws from the seed is a fault at a time: in the
 * run's plan ("at 3224018ns: disconnect m0-bank"), struck again when the
 * plan is pasted back, gone under a plan without it, and shrunk like any
 * other fault. */

/* The instants of the trace at `path` that mark a fault of `kind`, each
 * on the host's track, with its text in `plan`. */
static unsigned marked(const char *path, const char *kind, const char *plan) {
  char err[256];
  json *doc = json_parse_file(path, err, sizeof err);
  ck_assert_msg(doc != NULL, "%s", err);
  trace_summary sum;
  ck_assert_msg(trace_check(doc, &sum, err, sizeof err), "%s", err);
  const json *ev = json_get(doc, "traceEvents");
  unsigned n = 0;
  for (size_t i = 0; i < ev->len; i++) {
    const json *e = &ev->items[i];
    if (strcmp(json_str(e, "ph"), "i") != 0 ||
        strcmp(json_str(e, "cat"), "fault") != 0 ||
        strcmp(json_str(e, "name"), kind) != 0)
      continue;
    const char *text = json_str(json_get(e, "args"), "fault");
    ck_assert_msg(strstr(plan, text) != NULL, "%s is not in %s", text, plan);
    ck_assert_int_eq(strncmp(text, "at ", 3), 0);
    bool on_host = false;
    for (size_t j = 0; j < ev->len; j++) {
      const json *m = &ev->items[j];
      on_host |= strcmp(json_str(m, "ph"), "M") == 0 &&
                 strcmp(json_str(m, "name"), "thread_name") == 0 &&
                 json_num(m, "tid", -1) == json_num(e, "tid", -2) &&
                 strcmp(json_str(json_get(m, "args"), "name"), "host") == 0;
    }
    ck_assert(on_host);
    n++;
  }
  json_free(doc);
  return n;
}

START_TEST(network_faults_are_in_the_plan_replayed_and_shrunk) {
  char path[] = "/tmp/vat-sim-net-trace-XXXXXX";
  int fd = mkstemp(path);
  ck_assert_int_ge(fd, 0);
  close(fd);
  vat_sim_options o = sim_options(VAT_SIM_RANDOM, 0);
  o.trace_path = path;
  vat_sim_result r, again;
  ck_assert_vat_ok(vat_sim_run(&retry_buggy, &o, 1, 200, &r));
  ck_assert(r.failed);
  ck_assert_uint_eq(r.nfaults, 0);
  ck_assert_uint_eq(r.timed_faults, 1);
  ck_assert_msg(strncmp(r.plan, "at ", 3) == 0 &&
                    strstr(r.plan, "ns: disconnect m0-bank") != NULL,
                "%s", r.plan);
  o.trace_path = NULL;
  /* Pasted back, the plan strikes the disconnect again: the same run. */
  o.plan = r.plan;
  ck_assert_vat_ok(vat_sim_replay(&retry_buggy, &o, r.seed, &again));
  ck_assert(again.failed);
  ck_assert_str_eq(again.message, r.message);
  ck_assert_str_eq(again.plan, r.plan);
  ck_assert_str_eq(again.notes, r.notes);
  ck_assert_uint_eq(again.digest, r.digest);
  ck_assert_uint_eq(again.plan_missed, 0);
  /* A plan without it: the seed's disconnect gives way to the plan, and
   * the deposit is made once. */
  o.plan = "none";
  ck_assert_vat_ok(vat_sim_replay(&retry_buggy, &o, r.seed, &again));
  ck_assert_msg(!again.failed, "%s", again.message);
  ck_assert_str_eq(again.notes, "none");
  /* Shrunk: the disconnect stays (the run passes without it), and the
   * shrunk run's line, seed and plan through the environment, replays it
   * exactly. */
  ck_assert(r.shrunk.done);
  ck_assert_uint_eq(r.shrunk.timed_faults, 1);
  ck_assert_msg(strstr(r.shrunk.plan, ": disconnect m0-bank") != NULL, "%s",
                r.shrunk.plan);
  ck_assert_ptr_nonnull(strstr(r.shrunk.replay, r.shrunk.plan));
  /* ...moved earlier on the clock: the run fails as soon as the deposit is
   * on its way, not only when the seed's disconnect came. */
  uint64_t drawn_at, shrunk_at;
  ck_assert_vat_ok(vat_sim_time_parse(r.plan + 3, &drawn_at, NULL));
  ck_assert_int_eq(strncmp(r.shrunk.plan, "at ", 3), 0);
  ck_assert_vat_ok(vat_sim_time_parse(r.shrunk.plan + 3, &shrunk_at, NULL));
  ck_assert_uint_lt(shrunk_at, drawn_at);
  char seed[32];
  snprintf(seed, sizeof seed, "%llu", (unsigned long long)r.seed);
  setenv("VAT_SIM_SEED", seed, 1);
  setenv("VAT_SIM_PLAN", r.shrunk.plan, 1);
  o.plan = NULL;
  o.shrink_runs = 0;
  ck_assert_vat_ok(vat_sim_run(&retry_buggy, &o, 1, 200, &again));
  unsetenv("VAT_SIM_SEED");
  unsetenv("VAT_SIM_PLAN");
  ck_assert(again.failed);
  ck_assert_str_eq(again.message, r.shrunk.message);
  ck_assert_uint_eq(again.digest, r.shrunk.digest);
  /* The failing run's trace (the shrunk one) marks the disconnect. */
  ck_assert(r.trace_written);
  ck_assert_uint_eq(marked(path, "network", r.shrunk.plan), 1);
  unlink(path);
}
END_TEST

/* A failure among many faults at a time (partitions, disconnects, a
 * machine's crash) shrinks to those it needs: a disconnect. */
START_TEST(network_faults_and_crashes_shrink) {
  vat_sim_scenario noisy = {.name = "retry-noisy",
                            .setup = noisy_bank_setup,
                            .check = bank_check,
                            .done = bank_done};
  vat_sim_options o = sim_options(VAT_SIM_RANDOM, 0);
  unsigned found = 0;
  for (uint64_t next = 1; found < 3; next++) {
    vat_sim_result r, again;
    ck_assert_vat_ok(vat_sim_run(&noisy, &o, next, 500, &r));
    ck_assert(r.failed);
    next = r.seed;
    if (r.verdict != VAT_SIM_BROKE_INVARIANT)
      continue;
    found++;
    ck_assert_ptr_nonnull(strstr(r.plan, ": crash spare"));
    ck_assert_uint_ge(r.timed_faults, 3);
    ck_assert(r.shrunk.done);
    fprintf(stderr,
            "sim: retry-noisy: seed %llu, %u faults: %s\n"
            "  shrunk in %llu runs to %u: %s\n",
            (unsigned long long)r.seed, r.timed_faults, r.plan,
            (unsigned long long)r.shrunk.runs, r.shrunk.timed_faults,
            r.shrunk.plan);
    ck_assert_uint_lt(r.shrunk.timed_faults, r.timed_faults);
    ck_assert_ptr_null(strstr(r.shrunk.plan, "crash"));
    ck_assert_ptr_nonnull(strstr(r.shrunk.plan, "disconnect m0-bank"));
    ck_assert_ptr_nonnull(strstr(r.shrunk.message, "balance is 20"));
    o.plan = r.shrunk.plan;
    ck_assert_vat_ok(vat_sim_replay(&noisy, &o, r.seed, &again));
    o.plan = NULL;
    ck_assert(again.failed);
    ck_assert_str_eq(again.message, r.shrunk.message);
    ck_assert_uint_eq(again.digest, r.shrunk.digest);
  }
}
END_TEST

/* Every seed's plan, partitions and disconnects drawn, and faults at a
 * step among them, replays its run. */
START_TEST(drawn_partitions_and_disconnects_replay_from_the_plan) {
  net_params p = replay_params();
  vat_sim_scenario sc = {
      .name = "replay", .setup = net_setup, .done = net_done, .ctx = &p};
  unsigned timed = 0, mixed = 0;
  for (uint64_t seed = 1; seed <= 40; seed++) {
    vat_sim_options o;
    vat_sim_options_default(&o);
    o.fault_rate = 0.02;
    o.max_faults = 2;
    o.shrink_runs = 0;
    /* Seeds 1, 7 and 14 run on to the deadline, a killed vat's peer
     * retrying (seed 1: 93,629 turns in 60 s of its clock, over two
     * minutes under TSan); cut at 2,000 turns they still replay exactly.
     * The others end within 200 turns. */
    o.max_turns = 2000;
    vat_sim_result r, again;
    ck_assert_vat_ok(vat_sim_replay(&sc, &o, seed, &r));
    timed += r.timed_faults;
    mixed += r.timed_faults > 0 && r.nfaults > 0;
    o.plan = r.plan;
    ck_assert_vat_ok(vat_sim_replay(&sc, &o, seed, &again));
    ck_assert_msg(again.digest == r.digest, "seed %llu: %s / %s",
                  (unsigned long long)seed, r.plan, again.plan);
    ck_assert_str_eq(again.notes, r.notes);
    ck_assert_str_eq(again.plan, r.plan);
    ck_assert_uint_eq(again.turns, r.turns);
    ck_assert_uint_eq(again.now_ns, r.now_ns);
    ck_assert_uint_eq(again.plan_missed, 0);
  }
  ck_assert_uint_gt(timed, 40); /* 58 struck in these 40 seeds */
  ck_assert_uint_gt(mixed, 20); /* 28 of them mixed both kinds */
}
END_TEST

/* Faults at a time written by hand: a partition, a disconnect and a
 * crash strike as the scenario's own would; one naming what is not there
 * (or nothing the world knows) never strikes. */
START_TEST(network_faults_written_in_a_plan_strike) {
  net_params p = params(1 * MS, partition_start);
  vat_sim_scenario sc = {
      .name = "net", .setup = net_setup, .done = net_done, .ctx = &p};
  vat_sim_options o;
  vat_sim_options_default(&o);
  vat_sim_result r;
  o.plan = "at 5ms: partition m0-server for 50ms";
  ck_assert_vat_ok(vat_sim_replay(&sc, &o, 3, &r));
  ck_assert_msg(!r.failed, "%s", r.message);
  ck_assert_uint_eq(r.timed_faults, 1);
  ck_assert_str_eq(r.plan, "at 5ms: partition m0-server for 50ms");
  ck_assert_str_eq(r.notes, "5.000 ms: partition m0-server for 0.050 s");
  ck_assert_uint_eq(p.world->s[1].at, 56 * MS);
  p = params(1 * MS, partition_start);
  p.client_opt.question_timeout_s = 0.050;
  o.plan = "at 5ms: crash server";
  ck_assert_vat_ok(vat_sim_replay(&sc, &o, 4, &r));
  ck_assert_str_eq(r.notes, "5.000 ms: crash server");
  ck_assert(vat_is_atom(p.world->s[1].value, vat_atom_timeout()));
  p = params(1 * MS, partition_start);
  o.plan = "at 3ms: disconnect m0-server";
  ck_assert_vat_ok(vat_sim_replay(&sc, &o, 3, &r));
  ck_assert_str_eq(r.notes,
                   "3.000 ms: disconnect m0-server: 2 connection ends reset");
  /* The call at 10 ms, on the connection reset at 3 ms. */
  ck_assert(p.world->s[1].settled && !p.world->s[1].resolved);
  ck_assert(vat_is_atom(p.world->s[1].value, vat_atom_noconnection()));
  /* Two at one time strike in the plan's order, and are so reported. */
  static const char *const tied[] = {
      "at 3ms: disconnect m0-server; at 3ms: partition m0-server for 50ms",
      "at 3ms: partition m0-server for 50ms; at 3ms: disconnect m0-server"};
  for (size_t i = 0; i < 2; i++) {
    p = params(1 * MS, partition_start);
    o.plan = tied[i];
    ck_assert_vat_ok(vat_sim_replay(&sc, &o, 3, &r));
    ck_assert_uint_eq(r.timed_faults, 2);
    ck_assert_str_eq(r.plan, tied[i]);
    const char *first = i ? "3.000 ms: partition" : "3.000 ms: disconnect";
    ck_assert_int_eq(strncmp(r.notes, first, strlen(first)), 0);
  }
  /* A link is named in either order. */
  p = params(1 * MS, partition_start);
  o.plan = "at 3ms: disconnect server-m0";
  ck_assert_vat_ok(vat_sim_replay(&sc, &o, 3, &r));
  ck_assert_str_eq(r.plan, "at 3ms: disconnect server-m0");
  ck_assert_str_eq(r.notes,
                   "3.000 ms: disconnect m0-server: 2 connection ends reset");
  /* A machine that is not there is a crash that never strikes. */
  p = params(1 * MS, partition_start);
  o.plan = "at 5ms: crash nobody";
  ck_assert_vat_ok(vat_sim_replay(&sc, &o, 3, &r));
  ck_assert_msg(!r.failed, "%s", r.message);
  ck_assert_uint_eq(r.timed_faults, 0);
  ck_assert_uint_eq(r.plan_missed, 1);
  ck_assert_str_eq(r.notes, "none");
  ck_assert_str_eq(r.plan, "none");
  /* A network fault naming no link, or no fault at all, is the plan's
   * mistake: refused as it falls due, the run stopped there. */
  static const char *const form =
      "no fault of that form (the harness's \"crash M\", or one of a "
      "source of this world)";
  static const char *const nothing =
      "the network knows this fault but has nothing it names at 5ms";
  static const struct {
    const char *plan;
    bool names_nothing; /* else: not a fault */
  } refused[] = {{"at 5ms: partition m0-nobody for 50ms", true},
                 {"at 5ms: partition m0-serv for 50ms", true},
                 {"at 5ms: disconnect m0-m0", true},
                 {"at 5ms: explode m0-server", false},
                 {"at 5ms: partition m0-server for ever", false},
                 {"at 5ms: partition m0-server for 50ms or so", false},
                 {"at 5ms: partition m0-server for 0s", false},
                 {"at 5ms: disconnect m0-server now", false}};
  for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
    p = params(1 * MS, partition_start);
    o.plan = refused[i].plan;
    ck_assert_vat_err(vat_sim_replay(&sc, &o, 3, &r), VAT_EINVAL);
    char want[256];
    snprintf(want, sizeof want, "plan: \"%s\": %s", refused[i].plan,
             refused[i].names_nothing ? nothing : form);
    ck_assert_str_eq(r.message, want);
    ck_assert(!r.failed);
  }
}
END_TEST

void test_sim_net_edges_tests(Suite *s); /* test_sim_net_edges.c */

Suite *test_sim_net_suite(void) {
  Suite *s = suite_create("sim_net");
  TCase *tc = test_case("link", 120);
  tcase_add_test(tc, calls_pipelining_and_refs_cross_the_link);
  tcase_add_test(tc, latency_is_kept_on_the_virtual_clock);
  tcase_add_test(tc, jitter_keeps_the_order_of_a_stream);
  tcase_add_test(tc, a_partition_holds_the_bytes_until_it_heals);
  tcase_add_test(tc, a_partition_past_the_timeouts_ends_the_connection);
  tcase_add_test(tc, a_disconnect_resets_both_sides_and_the_program_reconnects);
  tcase_add_test(tc, a_disconnect_ends_the_server_side_too);
  tcase_add_test(tc, a_dial_is_refused_times_out_or_waits_for_the_heal);
  tcase_add_test(tc, a_crashed_machine_is_silence);
  tcase_add_test(tc, a_stopped_machine_is_silence);
  tcase_add_test(tc, faults_planned_for_later_do_not_keep_the_world_going);
  tcase_add_test(tc, too_much_on_the_way_ends_the_connection);
  tcase_add_test(tc, unread_answers_on_the_way_end_the_server_side);
  tcase_add_test(tc, a_seed_replays_exactly_bytes_included);
  tcase_add_test(tc, drawn_partitions_and_disconnects_replay_from_the_plan);
  tcase_add_test(tc, network_faults_written_in_a_plan_strike);
  tcase_add_test(tc, bad_input_is_refused);
  suite_add_tcase(s, tc);
  TCase *bugs = test_case("bugs", 300);
  tcase_add_test(bugs, a_retry_after_a_disconnect_applies_twice_random);
  tcase_add_test(bugs, a_retry_after_a_disconnect_applies_twice_pct);
  tcase_add_test(bugs, network_faults_are_in_the_plan_replayed_and_shrunk);
  tcase_add_test(bugs, network_faults_and_crashes_shrink);
  suite_add_tcase(s, bugs);
  test_sim_net_edges_tests(s);
  return s;
}
