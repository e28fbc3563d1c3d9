/* Simulation testing (vat/sim.h): more programs with classic bugs that a
 * short campaign must find under both strategies, each with a fixed
 * version that must pass the same campaign, and the figures of how fast
 * the campaigns find the bugs of every program (sim_programs.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <gc/gc.h>

#include "sim_programs.h"
#include "support.h"
#include "vat/exits.h"
#include "vat/host.h"
#include "vat/sim.h"
#include "vat/timer.h"

/* --- Two-phase commit that blocks when its coordinator dies ---------------
 * The coordinator asks every participant to prepare; each votes yes and
 * waits, prepared, for the decision. If the coordinator dies between the
 * votes and the decision, the participants wait forever (the world goes
 * quiet with some prepared and undecided). The fixed version monitors:
 * a participant whose coordinator is down reads the coordinator's log (its
 * durable state, kept when the vat dies) and commits if a commit was
 * logged, else aborts; the coordinator aborts when a participant dies
 * before its vote. Atomicity (never one committed and one aborted) must
 * hold in both. */

enum { P_INIT, P_PREPARED, P_COMMITTED, P_ABORTED };
enum { D_NONE, D_COMMIT, D_ABORT };
enum { PARTICIPANTS = 3 };

typedef struct tpc_world {
  bool fixed;
  vat_ref *coord;
  vat_ref *part[PARTICIPANTS];
  int pstate[PARTICIPANTS];
  int log; /* the coordinator's decision, logged before it is sent */
} tpc_world;

typedef struct tpc_vat {
  tpc_world *world;
  unsigned index;
  unsigned votes;
} tpc_vat;

static void decide(vat_turn *turn, void *state, void *arg) {
  (void)turn;
  tpc_vat *p = state;
  tpc_world *w = arg;
  int *s = &w->pstate[p->index];
  if (*s == P_PREPARED || *s == P_INIT)
    *s = w->log == D_COMMIT ? P_COMMITTED : P_ABORTED;
}

static void coord_decide(vat_turn *turn, tpc_world *w, int decision) {
  if (w->log != D_NONE)
    return;
  w->log = decision;
  for (unsigned i = 0; i < PARTICIPANTS; i++)
    expect_vat_ok(vat_send(turn, w->part[i], decide, w));
}

static void vote_yes(vat_turn *turn, void *state, void *arg) {
  (void)arg;
  tpc_vat *c = state;
  if (++c->votes == PARTICIPANTS)
    coord_decide(turn, c->world, D_COMMIT);
}

static void participant_down(vat_turn *turn, void *state, uint64_t id,
                             vat_ref *who, vat_value reason) {
  (void)turn, (void)id, (void)who, (void)reason;
  tpc_vat *c = state;
  coord_decide(turn, c->world, D_ABORT);
}

static void coordinator_down(vat_turn *turn, void *state, uint64_t id,
                             vat_ref *who, vat_value reason) {
  (void)turn, (void)id, (void)who, (void)reason;
  tpc_vat *p = state;
  tpc_world *w = p->world;
  int *s = &w->pstate[p->index];
  if (*s == P_PREPARED || *s == P_INIT)
    *s = w->log == D_COMMIT ? P_COMMITTED : P_ABORTED;
}

static void prepare(vat_turn *turn, void *state, void *arg) {
  (void)arg;
  tpc_vat *p = state;
  tpc_world *w = p->world;
  if (w->fixed) {
    uint64_t id;
    expect_vat_ok(vat_monitor(turn, w->coord, coordinator_down, &id));
  }
  if (w->pstate[p->index] != P_INIT)
    return;
  w->pstate[p->index] = P_PREPARED;
  expect_vat_ok(vat_send(turn, w->coord, vote_yes, NULL));
}

static void begin(vat_turn *turn, void *state, void *arg) {
  (void)arg;
  tpc_vat *c = state;
  tpc_world *w = c->world;
  for (unsigned i = 0; i < PARTICIPANTS; i++) {
    if (w->fixed) {
      uint64_t id;
      expect_vat_ok(vat_monitor(turn, w->part[i], participant_down, &id));
    }
    expect_vat_ok(vat_send(turn, w->part[i], prepare, NULL));
  }
}

static void *tpc_setup(vat_system *sys, void *ctx) {
  tpc_world *w = GC_MALLOC(sizeof *w);
  w->fixed = ctx != NULL;
  tpc_vat *c;
  vat_entity_def cdef = {.state_size = sizeof *c, .label = "coord"};
  if (vat_host_spawn(sys, &cdef, &w->coord, (void **)&c) != VAT_OK)
    return NULL;
  c->world = w;
  static const char *labels[PARTICIPANTS] = {"p1", "p2", "p3"};
  for (unsigned i = 0; i < PARTICIPANTS; i++) {
    tpc_vat *p;
    vat_entity_def def = {.state_size = sizeof *p, .label = labels[i]};
    if (vat_host_spawn(sys, &def, &w->part[i], (void **)&p) != VAT_OK)
      return NULL;
    p->world = w;
    p->index = i;
  }
  vat_host_send(w->coord, begin, NULL);
  return w;
}

static bool tpc_check(void *world, bool quiescent, char *why, size_t n) {
  (void)quiescent;
  tpc_world *w = world;
  unsigned committed = 0, aborted = 0;
  for (unsigned i = 0; i < PARTICIPANTS; i++) {
    committed += w->pstate[i] == P_COMMITTED;
    aborted += w->pstate[i] == P_ABORTED;
  }
  if (committed > 0 && aborted > 0) {
    snprintf(why, n, "not atomic: %u committed, %u aborted", committed,
             aborted);
    return false;
  }
  return true;
}

/* No live participant is left prepared and undecided. */
static bool tpc_done(void *world) {
  tpc_world *w = world;
  for (unsigned i = 0; i < PARTICIPANTS; i++)
    if (w->pstate[i] == P_PREPARED && !vat_ref_is_dead(w->part[i]))
      return false;
  return true;
}

static int fixed_marker;
const vat_sim_scenario sim_2pc_buggy = {
    .name = "2pc", .setup = tpc_setup, .check = tpc_check, .done = tpc_done};
const vat_sim_scenario sim_2pc_fixed = {.name = "2pc-monitored",
                                        .setup = tpc_setup,
                                        .check = tpc_check,
                                        .done = tpc_done,
                                        .ctx = &fixed_marker};

START_TEST(two_phase_commit_blocks_random) {
  sim_program_test(SIM_2PC, VAT_SIM_RANDOM);
}
END_TEST

START_TEST(two_phase_commit_blocks_pct) {
  sim_program_test(SIM_2PC, VAT_SIM_PCT);
}
END_TEST

/* --- Leader election that elects two leaders across a partition ----------
 * Five nodes in two groups, {n0 n1 n2} and {n3 n4}; what goes from one
 * group to the other goes through a relay vat, so a fault that kills the
 * relay partitions them (what it holds or is sent becomes dead letters).
 * Buggy: each node says hello to all, and one virtual second later a node
 * that heard from no higher id declares itself leader: across a partition
 * each group elects its own. Fixed: a majority quorum: each node asks all
 * for their vote, a node grants its one vote to the first that asks, and
 * a node with votes from a majority is leader; two majorities share a
 * voter, so there is at most one. The invariant: at most one leader in the
 * term (there is one term here). */

enum { NODES = 5, GROUP_A = 3, MAJORITY = NODES / 2 + 1 };
enum { M_HELLO, M_REQUEST, M_GRANT };

typedef struct elect_world {
  bool quorum;
  vat_ref *relay;
  vat_ref *node[NODES];
  struct elect_node *state[NODES];
  unsigned leaders;
} elect_world;

typedef struct elect_node {
  elect_world *world;
  int index;
  int heard_max;
  int voted; /* -1: not yet */
  unsigned votes;
  bool leader;
} elect_node;

typedef struct envelope {
  int kind, from, to;
} envelope;

static void node_msg(vat_turn *turn, void *state, void *arg);

static bool same_group(int a, int b) {
  return (a < GROUP_A) == (b < GROUP_A);
}

static void relay_forward(vat_turn *turn, void *state, void *arg) {
  elect_world *w = *(elect_world **)state;
  envelope *e = arg;
  expect_vat_ok(vat_send(turn, w->node[e->to], node_msg, e));
}

static void post(vat_turn *turn, elect_world *w, int kind, int from, int to) {
  envelope *e = GC_MALLOC(sizeof *e);
  *e = (envelope){.kind = kind, .from = from, .to = to};
  if (same_group(from, to))
    expect_vat_ok(vat_send(turn, w->node[to], node_msg, e));
  else
    expect_vat_ok(vat_send(turn, w->relay, relay_forward, e));
}

static void become_leader(elect_node *n) {
  if (!n->leader) {
    n->leader = true;
    n->world->leaders++;
  }
}

static void node_msg(vat_turn *turn, void *state, void *arg) {
  elect_node *n = state;
  envelope *e = arg;
  switch (e->kind) {
  case M_HELLO:
    if (e->from > n->heard_max)
      n->heard_max = e->from;
    break;
  case M_REQUEST:
    if (n->voted < 0) {
      n->voted = e->from;
      post(turn, n->world, M_GRANT, n->index, e->from);
    }
    break;
  case M_GRANT:
    if (++n->votes >= MAJORITY)
      become_leader(n);
    break;
  }
}

static void election_timeout(vat_turn *turn, void *state, void *arg) {
  (void)turn, (void)arg;
  elect_node *n = state;
  if (n->heard_max < n->index) /* heard from nobody above it */
    become_leader(n);
}

static void node_start(vat_turn *turn, void *state, void *arg) {
  (void)arg;
  elect_node *n = state;
  elect_world *w = n->world;
  for (int j = 0; j < NODES; j++) {
    if (w->quorum)
      post(turn, w, M_REQUEST, n->index, j); /* itself too */
    else if (j != n->index)
      post(turn, w, M_HELLO, n->index, j);
  }
  if (!w->quorum)
    expect_vat_ok(
        vat_later(turn, 1.0, vat_self(turn), election_timeout, NULL, NULL));
}

static void *elect_setup(vat_system *sys, void *ctx) {
  elect_world *w = GC_MALLOC(sizeof *w);
  w->quorum = ctx != NULL;
  elect_world **r;
  vat_entity_def rdef = {.state_size = sizeof *r, .label = "relay"};
  if (vat_host_spawn(sys, &rdef, &w->relay, (void **)&r) != VAT_OK)
    return NULL;
  *r = w;
  static const char *labels[NODES] = {"n0", "n1", "n2", "n3", "n4"};
  for (int i = 0; i < NODES; i++) {
    vat_entity_def def = {.state_size = sizeof(elect_node), .label = labels[i]};
    if (vat_host_spawn(sys, &def, &w->node[i], (void **)&w->state[i]) != VAT_OK)
      return NULL;
    *w->state[i] =
        (elect_node){.world = w, .index = i, .heard_max = -1, .voted = -1};
  }
  for (int i = 0; i < NODES; i++)
    vat_host_send(w->node[i], node_start, NULL);
  return w;
}

static bool elect_check(void *world, bool quiescent, char *why, size_t n) {
  (void)quiescent;
  elect_world *w = world;
  if (w->leaders > 1) {
    char names[32] = "";
    for (int i = 0; i < NODES; i++)
      if (w->state[i]->leader)
        snprintf(names + strlen(names), sizeof names - strlen(names), " n%d",
                 i);
    snprintf(why, n, "%u leaders in term 1:%s", w->leaders, names);
    return false;
  }
  return true;
}

const vat_sim_scenario sim_election_buggy = {
    .name = "election", .setup = elect_setup, .check = elect_check};
const vat_sim_scenario sim_election_fixed = {.name = "election-quorum",
                                             .setup = elect_setup,
                                             .check = elect_check,
                                             .ctx = &fixed_marker};

START_TEST(election_splits_random) {
  sim_program_test(SIM_ELECTION, VAT_SIM_RANDOM);
}
END_TEST

START_TEST(election_splits_pct) {
  sim_program_test(SIM_ELECTION, VAT_SIM_PCT);
}
END_TEST

/* --- A cache left stale by two writers' interleaved updates ---------------
 * Two writers each write to the store, and on the store's ack write the
 * value through to a cache vat. The store applies the writes in one order;
 * the two writers' updates reach the cache in either order (they come
 * from different senders), so the cache may end with the older value and
 * serve it forever. Fixed: the store numbers its writes, the ack carries
 * the number, and the cache keeps an update only when its number is above
 * the one it holds. At quiescence the cache must serve what the store
 * holds. */

enum { WRITERS = 2, WRITES_EACH = 2 };

typedef struct cache_world {
  bool versioned;
  vat_ref *store, *cache;
  vat_ref *writer[WRITERS];
  int64_t store_value, cache_value;
  uint64_t store_version, cache_version;
  unsigned acked;
} cache_world;

typedef struct cache_write {
  vat_ref *from;
  int64_t value;
  uint64_t version; /* the store's number for it, set when applied */
} cache_write;

typedef struct writer_vat {
  cache_world *world;
  unsigned index, written;
} writer_vat;

static void cache_update(vat_turn *turn, void *state, void *arg) {
  (void)turn;
  cache_world *w = *(cache_world **)state;
  cache_write *c = arg;
  if (w->versioned && c->version <= w->cache_version)
    return; /* older than what it holds */
  w->cache_value = c->value;
  w->cache_version = c->version;
}

static void write_next(vat_turn *turn, writer_vat *k);

static void write_acked(vat_turn *turn, void *state, void *arg) {
  writer_vat *k = state;
  k->world->acked++;
  expect_vat_ok(vat_send(turn, k->world->cache, cache_update, arg));
  write_next(turn, k);
}

static void store_write(vat_turn *turn, void *state, void *arg) {
  cache_world *w = *(cache_world **)state;
  cache_write *c = arg;
  w->store_value = c->value;
  c->version = ++w->store_version;
  expect_vat_ok(vat_send(turn, c->from, write_acked, c));
}

static void write_next(vat_turn *turn, writer_vat *k) {
  if (k->written == WRITES_EACH)
    return;
  cache_write *c = GC_MALLOC(sizeof *c);
  *c = (cache_write){.from = vat_self(turn),
                     .value = 10 * (k->index + 1) + k->written++};
  expect_vat_ok(vat_send(turn, k->world->store, store_write, c));
}

static void writer_start(vat_turn *turn, void *state, void *arg) {
  (void)arg;
  write_next(turn, state);
}

static void *cache_setup(vat_system *sys, void *ctx) {
  cache_world *w = GC_MALLOC(sizeof *w);
  w->versioned = ctx != NULL;
  cache_world **st;
  vat_entity_def sdef = {.state_size = sizeof *st, .label = "store"};
  if (vat_host_spawn(sys, &sdef, &w->store, (void **)&st) != VAT_OK)
    return NULL;
  *st = w;
  vat_entity_def cdef = {.state_size = sizeof *st, .label = "cache"};
  if (vat_host_spawn(sys, &cdef, &w->cache, (void **)&st) != VAT_OK)
    return NULL;
  *st = w;
  for (unsigned i = 0; i < WRITERS; i++) {
    writer_vat *k;
    vat_entity_def def = {.state_size = sizeof *k, .label = i ? "w2" : "w1"};
    if (vat_host_spawn(sys, &def, &w->writer[i], (void **)&k) != VAT_OK)
      return NULL;
    *k = (writer_vat){.world = w, .index = i};
    vat_host_send(w->writer[i], writer_start, NULL);
  }
  return w;
}

static bool cache_check(void *world, bool quiescent, char *why, size_t n) {
  cache_world *w = world;
  if (quiescent && w->cache_value != w->store_value) {
    snprintf(why, n, "stale cache: serves %lld, the store holds %lld",
             (long long)w->cache_value, (long long)w->store_value);
    return false;
  }
  return true;
}

static bool cache_done(void *world) {
  return ((cache_world *)world)->acked == WRITERS * WRITES_EACH;
}

const vat_sim_scenario sim_cache_buggy = {.name = "cache",
                                          .setup = cache_setup,
                                          .check = cache_check,
                                          .done = cache_done};
const vat_sim_scenario sim_cache_fixed = {.name = "cache-versioned",
                                          .setup = cache_setup,
                                          .check = cache_check,
                                          .done = cache_done,
                                          .ctx = &fixed_marker};

START_TEST(cache_goes_stale_random) {
  sim_program_test(SIM_CACHE, VAT_SIM_RANDOM);
}
END_TEST

START_TEST(cache_goes_stale_pct) {
  sim_program_test(SIM_CACHE, VAT_SIM_PCT);
}
END_TEST

/* --- Two servers deadlocked on each other's requests ----------------------
 * Each server holds a value and answers two requests: get (its value) and
 * sum (its value plus its peer's, which it gets by a request to the peer).
 * A server serves one request at a time: while its sum waits for the
 * peer's answer it is busy, and a request that comes meanwhile waits in
 * its queue until the answer came. Three clients ask for the sum, two of
 * them the first server, one the second (so a sum may wait in a queue
 * too, and be served once the sum before it is answered). If both
 * servers start a sum before either has answered the other's get, each
 * get waits behind a sum that waits for it: the world goes quiet with
 * clients unanswered (the deadlock of two non-reentrant actors calling
 * each other). Fixed: a busy server still answers a get at once (it
 * reads only its own value); only sums wait. */

enum { SERVERS = 2, CLIENTS = 3, QUEUE_MAX = 4 };
enum { R_GET, R_SUM };

typedef struct calls_world {
  bool reentrant;
  vat_ref *server[SERVERS];
  int64_t value[SERVERS];
  int64_t answer[CLIENTS]; /* client i's sum; 0: none yet */
  unsigned answered;
} calls_world;

typedef struct waiting {
  int kind;
  vat_resolver *reply;
} waiting;

typedef struct server_vat {
  calls_world *world;
  unsigned index;
  bool busy;                /* its sum waits for the peer's value */
  vat_resolver *sum_reply;  /* that sum's client */
  waiting queue[QUEUE_MAX]; /* requests that came while busy */
  unsigned queued;
} server_vat;

static void serve(vat_turn *turn, server_vat *v, int kind, vat_resolver *r);

static void on_request(vat_turn *turn, void *state, void *arg,
                       vat_resolver *reply) {
  server_vat *v = state;
  int kind = (int)(intptr_t)arg;
  if (v->busy && (kind == R_SUM || !v->world->reentrant)) {
    ck_assert_uint_lt(v->queued, QUEUE_MAX);
    v->queue[v->queued++] = (waiting){kind, reply};
    return;
  }
  serve(turn, v, kind, reply);
}

static void peer_answered(vat_turn *turn, void *state, void *ctx, bool resolved,
                          vat_value value) {
  (void)ctx;
  server_vat *v = state;
  calls_world *w = v->world;
  int64_t peer = 0;
  ck_assert(resolved && vat_get_int(value, &peer) == VAT_OK);
  expect_vat_ok(
      vat_resolve(turn, v->sum_reply, vat_int(w->value[v->index] + peer)));
  v->busy = false;
  while (!v->busy && v->queued > 0) { /* a sum makes it busy again */
    waiting next = v->queue[0];
    memmove(v->queue, v->queue + 1, --v->queued * sizeof v->queue[0]);
    serve(turn, v, next.kind, next.reply);
  }
}

static void serve(vat_turn *turn, server_vat *v, int kind, vat_resolver *r) {
  calls_world *w = v->world;
  if (kind == R_GET) {
    expect_vat_ok(vat_resolve(turn, r, vat_int(w->value[v->index])));
    return;
  }
  v->busy = true;
  v->sum_reply = r;
  vat_promise *p;
  expect_vat_ok(vat_call(turn, w->server[1 - v->index], on_request,
                         (void *)(intptr_t)R_GET, 0, &p));
  expect_vat_ok(vat_when(turn, p, peer_answered, NULL));
}

typedef struct client_vat {
  calls_world *world;
  unsigned index;
} client_vat;

static void sum_answered(vat_turn *turn, void *state, void *ctx, bool resolved,
                         vat_value value) {
  (void)turn, (void)ctx;
  client_vat *c = state;
  ck_assert(resolved &&
            vat_get_int(value, &c->world->answer[c->index]) == VAT_OK);
  c->world->answered++;
}

static void client_start(vat_turn *turn, void *state, void *arg) {
  (void)arg;
  client_vat *c = state;
  vat_promise *p;
  expect_vat_ok(vat_call(turn, c->world->server[c->index % SERVERS], on_request,
                         (void *)(intptr_t)R_SUM, 0, &p));
  expect_vat_ok(vat_when(turn, p, sum_answered, NULL));
}

static void *calls_setup(vat_system *sys, void *ctx) {
  calls_world *w = GC_MALLOC(sizeof *w);
  w->reentrant = ctx != NULL;
  for (unsigned i = 0; i < SERVERS; i++) {
    server_vat *v;
    vat_entity_def def = {.state_size = sizeof *v, .label = i ? "s2" : "s1"};
    if (vat_host_spawn(sys, &def, &w->server[i], (void **)&v) != VAT_OK)
      return NULL;
    *v = (server_vat){.world = w, .index = i};
    w->value[i] = 10 * (i + 1);
  }
  static const char *clients[CLIENTS] = {"c1", "c2", "c3"};
  for (unsigned i = 0; i < CLIENTS; i++) {
    vat_ref *client;
    client_vat *c;
    vat_entity_def def = {.state_size = sizeof *c, .label = clients[i]};
    if (vat_host_spawn(sys, &def, &client, (void **)&c) != VAT_OK)
      return NULL;
    *c = (client_vat){.world = w, .index = i};
    vat_host_send(client, client_start, NULL);
  }
  return w;
}

static bool calls_check(void *world, bool quiescent, char *why, size_t n) {
  (void)quiescent;
  calls_world *w = world;
  for (unsigned i = 0; i < CLIENTS; i++)
    if (w->answer[i] != 0 && w->answer[i] != w->value[0] + w->value[1]) {
      snprintf(why, n, "client %u was told the sum is %lld", i + 1,
               (long long)w->answer[i]);
      return false;
    }
  return true;
}

static bool calls_done(void *world) {
  return ((calls_world *)world)->answered == CLIENTS;
}

const vat_sim_scenario sim_calls_buggy = {.name = "calls",
                                          .setup = calls_setup,
                                          .check = calls_check,
                                          .done = calls_done};
const vat_sim_scenario sim_calls_fixed = {.name = "calls-reentrant",
                                          .setup = calls_setup,
                                          .check = calls_check,
                                          .done = calls_done,
                                          .ctx = &fixed_marker};

START_TEST(calls_deadlock_random) {
  sim_program_test(SIM_CALLS, VAT_SIM_RANDOM);
}
END_TEST

START_TEST(calls_deadlock_pct) {
  sim_program_test(SIM_CALLS, VAT_SIM_PCT);
}
END_TEST

/* --- How fast the campaigns find them -------------------------------------
 * With VAT_SIM_SEEDS=1, the figures of every program of both suites, in
 * one table (sim_programs.c). Without it, nothing: a measurement, not a
 * check. */

START_TEST(seeds_to_first_failure) {
  sim_seeds_to_first_failure();
}
END_TEST

Suite *test_sim_bugs_suite(void) {
  Suite *s = suite_create("sim_bugs");
  TCase *bugs = test_case("bugs", 300);
  tcase_add_test(bugs, two_phase_commit_blocks_random);
  tcase_add_test(bugs, two_phase_commit_blocks_pct);
  tcase_add_test(bugs, election_splits_random);
  tcase_add_test(bugs, election_splits_pct);
  tcase_add_test(bugs, cache_goes_stale_random);
  tcase_add_test(bugs, cache_goes_stale_pct);
  tcase_add_test(bugs, calls_deadlock_random);
  tcase_add_test(bugs, calls_deadlock_pct);
  tcase_add_test(bugs, seeds_to_first_failure);
  suite_add_tcase(s, bugs);
  return s;
}
