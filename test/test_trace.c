/* Turn traces: the file parses and keeps its promises (trace_check.h),
 * the turns of a deterministic program appear in the order they ran,
 * overwriting is counted exactly, lost flows are reported, handlers are
 * named, and the switches (config, environment, explicit write) work. */
#include <gc/gc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/trace.h"
#include "json.h"
#include "support.h"
#include "trace_check.h"

/* A fresh file name under the temporary directory, removed by the test. */
static void temp_path(char *buf, size_t size, const char *tag) {
  const char *dir = getenv("TMPDIR");
  snprintf(buf, size, "%s/vat-trace-%s-%d.json", dir ? dir : "/tmp", tag,
           (int)getpid());
  unlink(buf);
}

static vat_system *traced_system(unsigned workers, bool deterministic,
                                 const char *path, size_t events) {
  vat_config cfg;
  vat_config_default(&cfg);
  cfg.workers = workers;
  cfg.deterministic = deterministic;
  cfg.trace_path = path;
  cfg.trace_events = events;
  vat_system *sys = NULL;
  ck_assert_vat_ok(vat_system_new(&cfg, &sys));
  return sys;
}

/* Parses and checks `path`, failing the test with the reason. */
static json *load(const char *path, trace_summary *s) {
  char err[256];
  json *doc = json_parse_file(path, err, sizeof err);
  ck_assert_msg(doc != NULL, "%s: %s", path, err);
  ck_assert_msg(trace_check(doc, s, err, sizeof err), "%s: %s", path, err);
  return doc;
}

static const json *events_of(const json *doc) {
  return json_get(doc, "traceEvents");
}

static size_t count_named(const json *doc, const char *ph, const char *name) {
  const json *ev = events_of(doc);
  size_t n = 0;
  for (size_t i = 0; i < ev->len; i++)
    if (strcmp(json_str(&ev->items[i], "ph"), ph) == 0 &&
        strcmp(json_str(&ev->items[i], "name"), name) == 0)
      n++;
  return n;
}

/* --- A ping-pong across workers, with spawns, a failure and a monitor --- */

typedef struct player {
  vat_ref *peer;
  uint64_t left;
  _Atomic uint64_t *done;
} player;

/* Exported, so the trace names it (the runner links with -rdynamic). */
void trace_test_ball(vat_turn *turn, void *state, void *arg) {
  player *p = state;
  (void)arg;
  if (p->left == 0) {
    atomic_fetch_add_explicit(p->done, 1, memory_order_release);
    return;
  }
  p->left--;
  expect_vat_ok(vat_send(turn, p->peer, trace_test_ball, NULL));
}

static void crash(vat_turn *turn, void *state, void *arg) {
  (void)state;
  (void)arg;
  expect_vat_ok(vat_fail(turn, vat_atom_named("boom")));
}

static void on_down(vat_turn *turn, void *state, uint64_t id, vat_ref *who,
                    vat_value reason) {
  (void)turn;
  (void)id;
  (void)who;
  (void)reason;
  atomic_fetch_add_explicit(((player *)state)->done, 1, memory_order_release);
}

/* Spawns a child, watches it, and makes it fail. */
static void start_doomed(vat_turn *turn, void *state, void *arg) {
  (void)arg;
  (void)state;
  vat_ref *child;
  uint64_t id;
  expect_vat_ok(vat_spawn(turn, &(vat_entity_def){0}, &child, NULL));
  expect_vat_ok(vat_monitor(turn, child, on_down, &id));
  expect_vat_ok(vat_send(turn, child, crash, NULL));
}

START_TEST(threaded_trace_parses_and_flows_pair) {
  char path[256];
  temp_path(path, sizeof path, "threaded");
  vat_system *sys = traced_system(2, false, path, 0);
  _Atomic uint64_t done = 0;
  player *a, *b, *w;
  vat_ref *ra = test_spawn(sys, sizeof *a, (void **)&a);
  vat_ref *rb = test_spawn(sys, sizeof *b, (void **)&b);
  vat_ref *rw = test_spawn(sys, sizeof *w, (void **)&w);
  *a = (player){.peer = rb, .left = 500, .done = &done};
  *b = (player){.peer = ra, .left = 500, .done = &done};
  *w = (player){.done = &done};
  ck_assert_vat_ok(vat_host_send(ra, trace_test_ball, NULL));
  ck_assert_vat_ok(vat_host_send(rw, start_doomed, NULL));
  ck_assert(test_wait_u64(&done, 2, 30));
  test_quiesce(sys);

  trace_summary s;
  json *doc = load(path, &s);
  ck_assert_uint_eq(s.tracks, 2);
  ck_assert(s.events_lost == 0);
  /* 1001 ball turns, 1000 of them sent by a turn; start_doomed, crash and
   * the down notification; the monitor request. */
  ck_assert_uint_eq(count_named(doc, "X", "trace_test_ball"), 1001);
  ck_assert_uint_ge(s.flows, 1000 + 3);
  ck_assert_uint_eq(s.lost_sends, 0);
  ck_assert_uint_eq(s.lost_turns, 0);
  ck_assert_uint_eq(count_named(doc, "X", "down"), 1);
  ck_assert_uint_eq(count_named(doc, "i", "spawn"), 1);
  ck_assert_uint_ge(count_named(doc, "i", "exit"), 1);
  /* The failed vat's reason is named. */
  const json *ev = events_of(doc);
  bool boom = false;
  for (size_t i = 0; i < ev->len; i++) {
    const char *r = json_str(json_get(&ev->items[i], "args"), "reason");
    boom |= r != NULL && strcmp(r, "boom") == 0;
  }
  ck_assert(boom);
  json_free(doc);
  unlink(path);
}
END_TEST

/* --- Order: a deterministic program's turns, as they ran ---------------- */

enum { ORDER_VATS = 4, ORDER_HOPS = 40, LOG_MAX = 256 };

typedef struct order_log {
  const char *names[LOG_MAX];
  size_t n;
} order_log;

typedef struct hopper {
  vat_ref *peers[ORDER_VATS];
  order_log *log;
  uint64_t rng;
} hopper;

static const vat_atom *sel[ORDER_VATS];

/* Each message names the selector it came with; it forwards `value - 1`
 * hops to a peer and selector drawn from the vat's own generator. */
static void hop(vat_turn *turn, void *state, const vat_atom *selector,
                vat_value value) {
  hopper *h = state;
  if (h->log->n < LOG_MAX)
    h->log->names[h->log->n++] = vat_atom_name(selector);
  int64_t left = value.as.i;
  if (left == 0)
    return;
  unsigned to = (unsigned)(test_rand(&h->rng) % ORDER_VATS);
  unsigned s = (unsigned)(test_rand(&h->rng) % ORDER_VATS);
  expect_vat_ok(vat_send_msg(turn, h->peers[to], sel[s], vat_int(left - 1)));
  if (left % 7 == 0) /* now and then two at once */
    expect_vat_ok(vat_send_msg(turn, h->peers[(to + 1) % ORDER_VATS], sel[0],
                               vat_int(0)));
}

START_TEST(deterministic_turns_appear_in_order) {
  char path[256];
  temp_path(path, sizeof path, "order");
  uint64_t seed = test_seed("deterministic_turns_appear_in_order");
  const char *names[ORDER_VATS] = {"alpha", "beta", "gamma", "delta"};
  for (int i = 0; i < ORDER_VATS; i++)
    sel[i] = vat_atom_intern(names[i]);
  /* "": traced, written only on request. */
  vat_system *sys = traced_system(0, true, "", 0);
  order_log log = {0};
  vat_ref *refs[ORDER_VATS];
  hopper *hs[ORDER_VATS];
  for (int i = 0; i < ORDER_VATS; i++) {
    ck_assert_vat_ok(vat_host_spawn(
        sys, &(vat_entity_def){.state_size = sizeof(hopper), .receive = hop},
        &refs[i], (void **)&hs[i]));
  }
  for (int i = 0; i < ORDER_VATS; i++) {
    memcpy(hs[i]->peers, refs, sizeof refs);
    hs[i]->log = &log;
    hs[i]->rng = seed + (uint64_t)i + 1;
  }
  ck_assert_vat_ok(vat_host_send_msg(refs[0], sel[1], vat_int(ORDER_HOPS)));
  ck_assert_vat_ok(vat_host_send_msg(refs[2], sel[3], vat_int(ORDER_HOPS)));
  ck_assert_vat_ok(vat_system_run_until_quiescent(sys, 0, NULL));
  ck_assert_vat_ok(vat_system_trace_write(sys, path));

  trace_summary s;
  json *doc = load(path, &s);
  const json *ev = events_of(doc);
  size_t k = 0;
  double last_ts = 0;
  for (size_t i = 0; i < ev->len; i++) {
    const json *e = &ev->items[i];
    if (strcmp(json_str(e, "ph"), "X") != 0)
      continue;
    ck_assert_str_eq(json_str(e, "cat"), "message");
    ck_assert_uint_lt(k, log.n);
    ck_assert_msg(strcmp(json_str(e, "name"), log.names[k]) == 0,
                  "turn %zu: the trace has %s, the program ran %s", k,
                  json_str(e, "name"), log.names[k]);
    ck_assert(json_num(e, "ts", -1) >= last_ts);
    last_ts = json_num(e, "ts", -1);
    k++;
  }
  ck_assert_uint_eq(k, log.n);
  ck_assert_uint_eq(s.slices, log.n);
  /* All but the two host sends are flows from one turn to another. */
  ck_assert_uint_eq(s.flows, log.n - 2);
  json_free(doc);
  unlink(path);
  test_quiesce(sys);
}
END_TEST

/* --- A deterministic system's time: its virtual clock -------------------- */

void trace_test_nudge(vat_turn *turn, void *state, void *arg) {
  (void)turn, (void)state, (void)arg;
}

void trace_test_wake(vat_turn *turn, void *state, void *arg) {
  (void)turn, (void)state, (void)arg;
}

/* Nudges `arg` now and wakes it 5 ms later. */
void trace_test_alarm(vat_turn *turn, void *state, void *arg) {
  (void)state;
  expect_vat_ok(vat_send(turn, arg, trace_test_nudge, NULL));
  expect_vat_ok(vat_later(turn, 0.005, arg, trace_test_wake, NULL, NULL));
}

/* Runs the alarm in a deterministic system traced to `path`, moving the
 * virtual clock 5 ms (the wake) and then 2 ms more (nothing). */
static void run_alarm(const char *path) {
  vat_system *sys = traced_system(0, true, path, 0);
  vat_ref *a = test_spawn(sys, 0, NULL), *b = test_spawn(sys, 0, NULL);
  ck_assert_vat_ok(vat_host_send(a, trace_test_alarm, b));
  ck_assert_vat_ok(vat_system_run_until_quiescent(sys, 0, NULL));
  ck_assert_vat_ok(vat_system_advance_clock(sys, 5000000));
  ck_assert_vat_ok(vat_system_run_until_quiescent(sys, 0, NULL));
  ck_assert_vat_ok(vat_system_advance_clock(sys, 2000000));
  ck_assert_vat_ok(vat_system_run_until_quiescent(sys, 0, NULL));
  test_quiesce(sys); /* writes the file */
}

/* A deterministic system's trace is stamped with its virtual clock: the
 * turns at one virtual instant 1 ns apart, in order, the timer's turn at
 * the instant it was due; its vats are named by number, not address. So
 * one program run twice writes the same file, byte for byte. */
START_TEST(a_deterministic_trace_is_in_virtual_time) {
  char path[256], again[256];
  temp_path(path, sizeof path, "virtual");
  temp_path(again, sizeof again, "virtual-again");
  run_alarm(path);
  run_alarm(again);
  trace_summary s;
  json *doc = load(path, &s);
  const json *ev = events_of(doc);
  static const struct {
    const char *name;
    double ts, dur;
  } want[] = {{"trace_test_alarm", 0, 0.001},
              {"trace_test_nudge", 0.001, 0.001},
              {"trace_test_wake", 5000, 0.001}};
  size_t k = 0;
  for (size_t i = 0; i < ev->len; i++) {
    const json *e = &ev->items[i];
    if (strcmp(json_str(e, "ph"), "X") != 0 ||
        strcmp(json_str(e, "cat"), "send") == 0) /* the timer's send */
      continue;
    ck_assert_uint_lt(k, 3);
    ck_assert_str_eq(json_str(e, "name"), want[k].name);
    ck_assert_msg(json_num(e, "ts", -1) == want[k].ts &&
                      json_num(e, "dur", -1) == want[k].dur,
                  "%s at %g for %g us, not at %g for %g", want[k].name,
                  json_num(e, "ts", -1), json_num(e, "dur", -1), want[k].ts,
                  want[k].dur);
    const char *vat = json_str(json_get(e, "args"), "vat");
    ck_assert_msg(vat != NULL && vat[0] == '@', "vat %s", vat);
    k++;
  }
  ck_assert_uint_eq(k, 3);
  ck_assert_str_eq(json_str(json_get(doc, "otherData"), "clock"), "virtual");
  json_free(doc);
  size_t n1, n2;
  char *one = test_read_file(path, &n1), *two = test_read_file(again, &n2);
  ck_assert_msg(n1 == n2 && memcmp(one, two, n1) == 0,
                "two runs wrote different traces: %s, %s", path, again);
  free(one);
  free(two);
  unlink(path);
  unlink(again);
}
END_TEST

/* --- Overwriting: a tiny ring, exact accounting -------------------------- */

typedef struct countdown {
  unsigned left;
} countdown;

static void tick(vat_turn *turn, void *state, void *arg) {
  countdown *c = state;
  (void)arg;
  if (--c->left == 0)
    expect_vat_ok(vat_stop(turn));
  else
    expect_vat_ok(vat_send(turn, vat_self(turn), tick, NULL));
}

START_TEST(overwrite_is_counted_exactly) {
  enum { TURNS = 20, RING = 16 };
  char path[256];
  temp_path(path, sizeof path, "ring");
  vat_system *sys = traced_system(0, true, path, RING);
  countdown *c;
  vat_ref *ref = test_spawn(sys, sizeof *c, (void **)&c);
  c->left = TURNS;
  ck_assert_vat_ok(vat_host_send(ref, tick, NULL));
  ck_assert_vat_ok(vat_system_run_until_quiescent(sys, 0, NULL));
  test_quiesce(sys); /* writes the file */

  /* Recorded: turns 1..20, each of the first 19 counting its one send in
   * its own event (T1 .. T19), the last stopping its vat (T20 EXIT), and
   * each of the two run calls (the one above and shutdown's) ending with
   * the worker idle (IDLE IDLE): 23 events. The ring keeps the last 16:
   * T8 .. T20 EXIT IDLE IDLE. T8's flow started at T7, overwritten. */
  enum { RECORDED = TURNS + 3, LOST = RECORDED - RING };
  trace_summary s;
  json *doc = load(path, &s);
  const json *other = json_get(doc, "otherData");
  ck_assert(json_num(other, "ring_events", -1) == RING);
  ck_assert(s.recorded == RECORDED);
  ck_assert(s.events_lost == LOST);
  const json *per = json_get(other, "events_lost_per_track");
  ck_assert(per->type == JSON_ARRAY && per->len == 1 &&
            per->items[0].number == LOST);
  ck_assert_uint_eq(s.slices, 13);
  /* `tick` is static: named from the program's symbol table. */
  ck_assert_uint_eq(count_named(doc, "X", "tick"), 13);
  ck_assert_uint_eq(s.flows, 12); /* T8..T19 to T9..T20 */
  ck_assert_uint_eq(s.lost_turns, 1);
  ck_assert_uint_eq(s.lost_sends, 0);
  ck_assert_uint_eq(count_named(doc, "i", "exit"), 1);
  /* The track says so too. */
  char lost[64];
  snprintf(lost, sizeof lost, "%d earlier events lost", LOST);
  ck_assert_uint_eq(count_named(doc, "i", lost), 1);
  json_free(doc);
  unlink(path);
}
END_TEST

/* --- A send that is never run is reported, not left dangling ------------- */

static void send_to_dead(vat_turn *turn, void *state, void *arg) {
  (void)state;
  expect_vat_ok(vat_send(turn, arg, tick, NULL));
}

START_TEST(dead_letter_flows_are_reported_lost) {
  char path[256];
  temp_path(path, sizeof path, "dead");
  vat_system *sys = traced_system(0, true, path, 0);
  countdown *c;
  vat_ref *victim = test_spawn(sys, sizeof *c, (void **)&c);
  c->left = 1; /* stops at its first message */
  vat_ref *sender = test_spawn(sys, 0, NULL);
  ck_assert_vat_ok(vat_host_send(victim, tick, NULL));
  ck_assert_vat_ok(vat_system_run_until_quiescent(sys, 0, NULL));
  ck_assert(vat_ref_is_dead(victim));
  ck_assert_vat_ok(vat_host_send(sender, send_to_dead, victim));
  ck_assert_vat_ok(vat_host_send(sender, send_to_dead, victim));
  ck_assert_vat_ok(vat_system_run_until_quiescent(sys, 0, NULL));
  test_quiesce(sys);

  trace_summary s;
  json *doc = load(path, &s);
  ck_assert_uint_eq(s.lost_sends, 2);
  ck_assert(s.dead_letters == 2);
  ck_assert_uint_eq(s.flows, 0);
  ck_assert_uint_eq(count_named(doc, "i", "dead letter"), 2);
  json_free(doc);
  unlink(path);
}
END_TEST

/* --- A flow that starts outside any turn -------------------------------- */

static void never_answered(vat_turn *turn, void *state, void *arg,
                           vat_resolver *r) {
  (void)turn;
  (void)state;
  (void)arg;
  (void)r;
}

static void on_broken(vat_turn *turn, void *state, void *ctx, bool resolved,
                      vat_value value) {
  (void)turn;
  (void)state;
  (void)value;
  if (!resolved)
    atomic_fetch_add_explicit((_Atomic uint64_t *)ctx, 1, memory_order_release);
}

static void call_victim(vat_turn *turn, void *state, void *arg) {
  (void)state;
  void **args = arg;
  vat_promise *p;
  expect_vat_ok(vat_call(turn, args[0], never_answered, NULL, 0, &p));
  expect_vat_ok(vat_when(turn, p, on_broken, args[1]));
}

START_TEST(flow_from_outside_a_turn_starts_in_a_slice) {
  char path[256];
  temp_path(path, sizeof path, "outside");
  vat_system *sys = traced_system(0, false, path, 0);
  _Atomic uint64_t broken = 0;
  countdown *c;
  vat_ref *victim = test_spawn(sys, sizeof *c, (void **)&c);
  c->left = 1; /* stops at its first message */
  vat_ref *caller = test_spawn(sys, 0, NULL);
  void *args[2] = {victim, &broken};
  /* The caller's request lands behind the victim's last message, so the
   * victim's batch drops it after the victim ended, between turns, and the
   * drop breaks the caller's promise from there. */
  ck_assert_vat_ok(vat_host_send(caller, call_victim, args));
  ck_assert_vat_ok(vat_host_send(victim, tick, NULL));
  ck_assert_vat_ok(vat_system_run_until_quiescent(sys, 0, NULL));
  ck_assert_uint_eq(atomic_load(&broken), 1);
  test_quiesce(sys);

  trace_summary s;
  json *doc = load(path, &s); /* every flow starts inside a slice */
  ck_assert_uint_eq(count_named(doc, "X", "outside a turn"), 1);
  ck_assert_uint_eq(count_named(doc, "X", "when"), 1);
  ck_assert_uint_eq(count_named(doc, "i", "dead letter"), 1);
  json_free(doc);
  unlink(path);
}
END_TEST

/* --- Between a traced and an untraced system ----------------------------- */

typedef struct across {
  vat_ref *peer;
  unsigned left;
} across;

/* Bounces between a vat of each system; the untraced side reuses the
 * nodes that arrived from the traced one, flow ids and all. */
static void bounce(vat_turn *turn, void *state, void *arg) {
  across *a = state;
  (void)arg;
  if (a->left-- > 0)
    expect_vat_ok(vat_send(turn, a->peer, bounce, NULL));
}

START_TEST(untraced_sender_brings_no_stale_flow) {
  enum { ROUNDS = 20 };
  char path[256];
  temp_path(path, sizeof path, "across");
  vat_system *traced = traced_system(0, false, path, 0);
  vat_system *plain = test_host_system(false, 0);
  across *x, *y;
  vat_ref *rx = test_spawn(traced, sizeof *x, (void **)&x);
  vat_ref *ry = test_spawn(plain, sizeof *y, (void **)&y);
  *x = (across){.peer = ry, .left = ROUNDS};
  *y = (across){.peer = rx, .left = ROUNDS};
  ck_assert_vat_ok(vat_host_send(rx, bounce, NULL));
  for (int i = 0; i <= ROUNDS; i++) {
    ck_assert_vat_ok(vat_system_run_until_quiescent(traced, 0, NULL));
    ck_assert_vat_ok(vat_system_run_until_quiescent(plain, 0, NULL));
  }
  ck_assert_uint_eq(x->left + 1, 0); /* wrapped: it ran ROUNDS + 1 times */
  test_quiesce(plain);
  test_quiesce(traced);

  /* Each send to the untraced system has its turn outside this trace:
   * lost. No turn here came from a send in this trace: no arrows, and no
   * flow reported lost on a turn either (their senders did not trace). */
  trace_summary s;
  json *doc = load(path, &s);
  ck_assert_uint_eq(s.slices, ROUNDS + 1);
  ck_assert_uint_eq(s.lost_sends, ROUNDS);
  ck_assert_uint_eq(s.flows, 0);
  ck_assert_uint_eq(s.lost_turns, 0);
  json_free(doc);
  unlink(path);
}
END_TEST

/* --- Writing on request while the workers run ---------------------------- */

START_TEST(write_while_running) {
  char path[256];
  temp_path(path, sizeof path, "live");
  /* A small ring, so the writer copies while the owners overwrite it. */
  vat_system *sys = traced_system(2, false, "", 256);
  _Atomic uint64_t done = 0;
  player *a, *b;
  vat_ref *ra = test_spawn(sys, sizeof *a, (void **)&a);
  vat_ref *rb = test_spawn(sys, sizeof *b, (void **)&b);
  uint64_t hops = 200000 / TEST_SCALE;
  *a = (player){.peer = rb, .left = hops, .done = &done};
  *b = (player){.peer = ra, .left = hops, .done = &done};
  ck_assert_vat_ok(vat_host_send(ra, trace_test_ball, NULL));
  for (int i = 0; i < 20 && atomic_load(&done) == 0; i++) {
    ck_assert_vat_ok(vat_system_trace_write(sys, path));
    trace_summary s;
    json_free(load(path, &s));
    ck_assert(s.recorded >= s.events_lost);
  }
  ck_assert(test_wait_u64(&done, 1, 60));
  test_quiesce(sys);
  unlink(path);
}
END_TEST

/* --- Switches and errors ------------------------------------------------- */

START_TEST(write_errors) {
  vat_system *plain = test_system(1);
  ck_assert_vat_err(vat_system_trace_write(plain, "/tmp/x.json"), VAT_ENOTSUP);
  ck_assert_vat_err(vat_system_trace_write(NULL, "/tmp/x.json"), VAT_EINVAL);
  test_quiesce(plain);
  vat_system *sys = traced_system(1, false, "", 0);
  ck_assert_vat_err(vat_system_trace_write(sys, NULL), VAT_EINVAL);
  ck_assert_vat_err(vat_system_trace_write(sys, "/nonexistent/dir/t.json"),
                    VAT_EIO);
  ck_assert_str_eq(vat_err_name(VAT_EIO), "VAT_EIO");
  test_quiesce(sys);
  ck_assert_vat_err(vat_system_trace_write(sys, "/tmp/x.json"), VAT_ECLOSED);
  vat_config cfg;
  vat_config_default(&cfg);
  cfg.trace_path = "/tmp/x.json";
  cfg.trace_events = (size_t)1 << 40;
  vat_system *bad = NULL;
  ck_assert_vat_err(vat_system_new(&cfg, &bad), VAT_EINVAL);
}
END_TEST

START_TEST(environment_turns_it_on) {
  char path[256], second[300];
  temp_path(path, sizeof path, "env");
  snprintf(second, sizeof second, "%s.2", path);
  unlink(second);
  setenv("VAT_TRACE", path, 1);
  setenv("VAT_TRACE_EVENTS", "8", 1);
  vat_system *sys = test_system(1);
  vat_system *other = test_system(1);
  test_counter *c;
  vat_ref *ref = test_spawn_counter(sys, &c);
  ck_assert_vat_ok(vat_host_send(ref, test_hit, NULL));
  ck_assert(test_wait_u64(&c->hits, 1, 30));
  test_quiesce(sys);
  test_quiesce(other);
  unsetenv("VAT_TRACE");
  unsetenv("VAT_TRACE_EVENTS");
  trace_summary s;
  json *doc = load(path, &s);
  ck_assert(json_num(json_get(doc, "otherData"), "ring_events", -1) == 8);
  ck_assert_uint_eq(count_named(doc, "X", "test_hit"), 1);
  json_free(doc);
  doc = load(second, &s); /* the second system's file */
  ck_assert_uint_eq(s.slices, 0);
  json_free(doc);
  unlink(path);
  unlink(second);
}
END_TEST

/* --- Time: one clock reading per group of fast turns, one per slow turn - */

enum { TIMED_TURNS = 64, SLOW_US = 300 };

static uint64_t now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

typedef struct alternator {
  unsigned left, n;
} alternator;

/* Every other turn is slow: a group of them averages far over a
 * microsecond a turn, so the clock is read at each turn from then on. */
static void alternate(vat_turn *turn, void *state, void *arg) {
  alternator *a = state;
  (void)arg;
  if (a->n++ % 2 == 1) {
    uint64_t until = now_ns() + SLOW_US * 1000ull;
    while (now_ns() < until)
      ;
  }
  if (--a->left == 0)
    expect_vat_ok(vat_stop(turn));
  else
    expect_vat_ok(vat_send(turn, vat_self(turn), alternate, NULL));
}

/* The slices named `name`, in the order of the file (one track). */
static size_t slices_named(const json *doc, const char *name, const json **out,
                           size_t max) {
  const json *ev = events_of(doc);
  size_t n = 0;
  for (size_t i = 0; i < ev->len && n < max; i++)
    if (strcmp(json_str(&ev->items[i], "ph"), "X") == 0 &&
        strcmp(json_str(&ev->items[i], "name"), name) == 0)
      out[n++] = &ev->items[i];
  return n;
}

/* Runs `turns` of `fn` traced on the real clock: host-driven, not
 * deterministic (a deterministic system's trace is in virtual time). */
static json *run_timed(vat_fn fn, unsigned turns, trace_summary *s) {
  char path[256];
  temp_path(path, sizeof path, "timed");
  vat_system *sys = traced_system(0, false, path, 0);
  alternator *a;
  vat_ref *ref = test_spawn(sys, sizeof *a, (void **)&a);
  a->left = turns;
  ck_assert_vat_ok(vat_host_send(ref, fn, NULL));
  ck_assert_vat_ok(vat_system_run_until_quiescent(sys, 0, NULL));
  test_quiesce(sys); /* writes the file */
  json *doc = load(path, s);
  unlink(path);
  return doc;
}

START_TEST(slow_turns_keep_their_durations) {
  trace_summary s;
  json *doc = run_timed(alternate, TIMED_TURNS, &s);
  const json *x[TIMED_TURNS];
  ck_assert_uint_eq(slices_named(doc, "alternate", x, TIMED_TURNS),
                    TIMED_TURNS);
  /* Past the first group (its turns share one reading, evenly), each
   * slow turn's slice lasts at least as long as the turn did, to within
   * the two clocks' disagreement: the turn timed itself on the monotonic
   * clock, the trace on ticks scaled by one reading of both clocks at
   * each end, and the monotonic clock may be slewed by up to 500 ppm
   * (a run here saw 299.969 us for 300). */
  const double least = SLOW_US * (1 - 1e-3);
  for (size_t i = 2 * VAT__TRACE_STRIDE + 1; i < TIMED_TURNS; i += 2)
    ck_assert_msg(json_num(x[i], "dur", 0) >= least,
                  "slow turn %zu lasted %g us in the trace", i,
                  json_num(x[i], "dur", 0));
  json_free(doc);
}
END_TEST

static void quick(vat_turn *turn, void *state, void *arg) {
  alternator *a = state;
  (void)arg;
  if (--a->left == 0)
    expect_vat_ok(vat_stop(turn));
  else
    expect_vat_ok(vat_send(turn, vat_self(turn), quick, NULL));
}

START_TEST(fast_turns_are_spread_between_readings) {
  trace_summary s;
  json *doc = run_timed(quick, TIMED_TURNS, &s);
  const json *x[TIMED_TURNS];
  ck_assert_uint_eq(slices_named(doc, "quick", x, TIMED_TURNS), TIMED_TURNS);
  /* Turns that share a reading still get a start and a length of their
   * own, one after the other (the checker saw that none overlap). */
  for (size_t i = 0; i < TIMED_TURNS; i++) {
    ck_assert(json_num(x[i], "dur", 0) > 0);
    if (i > 0)
      ck_assert(json_num(x[i], "ts", 0) > json_num(x[i - 1], "ts", 0));
  }
  ck_assert_uint_eq(s.flows, TIMED_TURNS - 1);
  json_free(doc);
}
END_TEST

/* --- A turn's sends are counted in its event, up to a limit ----------- */

enum { BROADCAST = VAT__TRACE_MAX_SENDS + 8 };

static void broadcast(vat_turn *turn, void *state, void *arg) {
  (void)state;
  for (int i = 0; i < BROADCAST; i++)
    expect_vat_ok(vat_send(turn, arg, test_hit, NULL));
}

START_TEST(a_broadcast_past_the_limit_pairs_every_flow) {
  char path[256];
  temp_path(path, sizeof path, "broadcast");
  vat_system *sys = traced_system(0, true, path, 4 * BROADCAST);
  test_counter *sink;
  vat_ref *to = test_spawn_counter(sys, &sink);
  vat_ref *from = test_spawn(sys, 0, NULL);
  ck_assert_vat_ok(vat_host_send(from, broadcast, to));
  ck_assert_vat_ok(vat_system_run_until_quiescent(sys, 0, NULL));
  test_quiesce(sys); /* writes the file */
  trace_summary s;
  json *doc = load(path, &s);
  /* The first VAT__TRACE_MAX_SENDS name the turn's event; the rest have
   * events of their own. Every one is an arrow. */
  ck_assert_uint_eq(s.flows, BROADCAST);
  ck_assert_uint_eq(s.lost_sends, 0);
  ck_assert_uint_eq(s.lost_turns, 0);
  ck_assert_uint_eq(count_named(doc, "X", "test_hit"), BROADCAST);
  json_free(doc);
  unlink(path);
}
END_TEST

/* --- Names from outside: weak atoms in the ring -------------------------- */

static void ignore_msg(vat_turn *turn, void *state, const vat_atom *selector,
                       vat_value value) {
  (void)turn, (void)state, (void)selector, (void)value;
}

/* A selector interned weakly (a method name from a peer) is gone once its
 * messages are: the ring must keep it until the file is written, or the
 * file names a turn after whatever reused its memory. */
START_TEST(weak_selectors_keep_their_names) {
#ifdef VAT_GC_NO_COLLECT
  return; /* nothing is ever collected, so nothing can go stale */
#endif
  enum { N = 200 };
  char path[256], name[32];
  temp_path(path, sizeof path, "weak");
  vat_system *sys = traced_system(0, true, "", 4096);
  vat_ref *ref;
  ck_assert_vat_ok(vat_host_spawn(sys, &(vat_entity_def){.receive = ignore_msg},
                                  &ref, NULL));
  for (int i = 0; i < N; i++) {
    int len = snprintf(name, sizeof name, "wire_method_%03d", i);
    ck_assert_vat_ok(vat_host_send_msg(
        ref, vat_atom_intern_weak_n(name, (size_t)len), vat_null()));
  }
  ck_assert_vat_ok(vat_system_run_until_quiescent(sys, 0, NULL));
  /* The messages are gone; collect their selectors, then fill the freed
   * memory with other text. */
  for (int round = 0; round < 4; round++) {
    GC_gcollect();
    for (int i = 0; i < 20000; i++)
      memset(GC_MALLOC_ATOMIC(48), 'Z', 48);
  }
  ck_assert_vat_ok(vat_system_trace_write(sys, path));

  trace_summary s;
  json *doc = load(path, &s);
  for (int i = 0; i < N; i++) {
    snprintf(name, sizeof name, "wire_method_%03d", i);
    ck_assert_msg(count_named(doc, "X", name) == 1,
                  "the trace has %zu turns named %s",
                  count_named(doc, "X", name), name);
  }
  json_free(doc);
  unlink(path);
  test_quiesce(sys);
}
END_TEST

Suite *test_trace_suite(void) {
  Suite *s = suite_create("trace");
  TCase *tc = test_case("trace", 120);
  tcase_add_test(tc, threaded_trace_parses_and_flows_pair);
  tcase_add_test(tc, deterministic_turns_appear_in_order);
  tcase_add_test(tc, a_deterministic_trace_is_in_virtual_time);
  tcase_add_test(tc, weak_selectors_keep_their_names);
  tcase_add_test(tc, overwrite_is_counted_exactly);
  tcase_add_test(tc, dead_letter_flows_are_reported_lost);
  tcase_add_test(tc, flow_from_outside_a_turn_starts_in_a_slice);
  tcase_add_test(tc, untraced_sender_brings_no_stale_flow);
  tcase_add_test(tc, write_while_running);
  tcase_add_test(tc, write_errors);
  tcase_add_test(tc, environment_turns_it_on);
  tcase_add_test(tc, slow_turns_keep_their_durations);
  tcase_add_test(tc, a_broadcast_past_the_limit_pairs_every_flow);
  tcase_add_test(tc, fast_turns_are_spread_between_readings);
  suite_add_tcase(s, tc);
  return s;
}
