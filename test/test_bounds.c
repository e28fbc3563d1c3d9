/* Bounds against a peer that says nothing (vat/net.h): the handshake and
 * idle timeouts, and a listener's cap on its connections; and against one
 * that asks more than max_questions at once. A raw peer, the test's own
 * end of a socket, writes what a case asks, or nothing. */
#define GC_THREADS 1
#include <gc/gc.h>

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>
#include <uv.h>

#include "support.h"
#include "vat/caps.h"
#include "vat/net.h"

#define WAIT_S 20.0
#define SHORT_S 0.2 /* the handshake timeout under test */
#define IDLE_S 0.4  /* the idle timeout under test */

static const vat_atom *sel(const char *name) {
  return vat_atom_intern(name);
}


static vat_conn_options timeouts(double handshake_s, double idle_s) {
  vat_conn_options opt;
  vat_conn_options_default(&opt);
  opt.handshake_timeout_s = handshake_s;
  opt.idle_timeout_s = idle_s;
  return opt;
}

static void raw_write(int fd, const char *s) {
  size_t n = strlen(s);
  while (n > 0) {
    ssize_t w = send(fd, s, n, MSG_NOSIGNAL);
    if (w < 0 && errno == EINTR)
      continue;
    if (w < 0)
      return; /* the connection closed its end */
    s += w;
    n -= (size_t)w;
  }
}

static void raw_frame(int fd, const char *json) {
  char head[24];
  snprintf(head, sizeof head, "%zu:", strlen(json));
  raw_write(fd, head);
  raw_write(fd, json);
  raw_write(fd, ",");
}

/* A valid start: the answer to the connection's bootstrap question. */
static void raw_answer_bootstrap(int fd) {
  raw_frame(fd, "{\"type\":\"CTP_RETURN\",\"answerID\":\"q-1\",\"result\":"
                "{\"body\":\"1\",\"slots\":[]}}");
}

/* Reads until `want` has arrived (asserted, within WAIT_S). */
static void raw_read_until(int fd, const char *want) {
  char buf[8192];
  size_t got = 0;
  double deadline = test_wall_seconds() + WAIT_S;
  buf[0] = '\0';
  while (strstr(buf, want) == NULL) {
    double left = deadline - test_wall_seconds();
    ck_assert_msg(left > 0 && got + 1 < sizeof buf, "no %s in %s", want, buf);
    struct pollfd p = {.fd = fd, .events = POLLIN};
    if (poll(&p, 1, (int)(left * 1000) + 1) <= 0)
      continue;
    ssize_t r = read(fd, buf + got, sizeof buf - 1 - got);
    if (r < 0 && errno == EINTR)
      continue;
    ck_assert_msg(r > 0, "end of stream before %s", want);
    got += (size_t)r;
    buf[got] = '\0';
  }
}

/* True once the raw end reads end of stream (within `wait_s`). */
static bool raw_sees_end(int fd, double wait_s) {
  double deadline = test_wall_seconds() + wait_s;
  char buf[4096];
  for (;;) {
    double left = deadline - test_wall_seconds();
    if (left <= 0)
      return false;
    struct pollfd p = {.fd = fd, .events = POLLIN};
    if (poll(&p, 1, (int)(left * 1000) + 1) <= 0)
      continue;
    ssize_t r = read(fd, buf, sizeof buf);
    if (r < 0 && errno == EINTR)
      continue;
    if (r <= 0)
      return true;
  }
}

/* `reason` is timeout(cause) with a cause starting with `prefix`. */
static void assert_timed_out(vat_value reason, const char *prefix) {
  char buf[256];
  vat_format(reason, buf, sizeof buf);
  ck_assert_msg(vat_type_of(reason) == VAT_T_ERROR &&
                    vat_error_code(reason) == vat_atom_timeout(),
                "not timeout(...): %s", buf);
  const char *cause = vat_string_data(vat_error_payload(reason));
  ck_assert_msg(cause != NULL && strncmp(cause, prefix, strlen(prefix)) == 0,
                "cause: %s, expected %s...", buf, prefix);
}

static vat_value wait_closed(vat_conn *c) {
  vat_value reason;
  ck_assert_vat_ok(vat_promise_wait(vat_conn_closed(c), WAIT_S, &reason));
  return reason;
}

static bool still_open(vat_conn *c, double wait_s) {
  return vat_promise_wait(vat_conn_closed(c), wait_s, NULL) == VAT_ETIMEDOUT;
}

/* Two libvat sides with the timeouts of `opt`: b's proxy for a's adder. */
typedef struct pair {
  vat_conn *a, *b;
  vat_ref *remote;
} pair;

static void open_pair(vat_system *sys, const vat_conn_options *opt, pair *p) {
  int sv[2];
  ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
  vat_ref *adder;
  ck_assert_vat_ok(vat_host_spawn(sys, &test_adder_def, &adder, NULL));
  ck_assert_vat_ok(vat_conn_open(sys, sv[0], adder, opt, &p->a));
  ck_assert_vat_ok(vat_conn_open(sys, sv[1], NULL, opt, &p->b));
  vat_value v;
  ck_assert_vat_ok(vat_promise_wait(vat_conn_bootstrap(p->b), WAIT_S, &v));
  p->remote = vat_value_ref(v);
}

static void assert_adds(pair *p) {
  vat_value xy[2] = {vat_int(40), vat_int(2)}, v;
  vat_promise *pr;
  ck_assert_vat_ok(
      vat_host_request(p->remote, sel("add"), vat_list(xy, 2), 0, &pr));
  ck_assert_vat_ok(vat_promise_wait(pr, WAIT_S, &v));
  ck_assert(vat_equal(v, vat_int(42)));
}

static void close_pair(pair *p) {
  vat_conn_close(p->b);
  wait_closed(p->b);
  wait_closed(p->a);
}

/* --- The handshake ------------------------------------------------------ */

/* What the raw peer does instead of a first message. */
enum { SAYS_NOTHING, SENDS_A_FRAME_THAT_NEVER_ENDS, DRIBBLES_A_FRAME };

static void misbehave(int fd, int how, double for_s) {
  const char *frame = "44:{\"type\":\"CTP_BOOTSTRAP\",\"questionID\":\"q-1\"},";
  double end = test_wall_seconds() + for_s;
  for (size_t i = 0; test_wall_seconds() < end; i++) {
    if (how == SENDS_A_FRAME_THAT_NEVER_ENDS)
      raw_write(fd, i == 0 ? "100000:{" : " ");
    else if (how == DRIBBLES_A_FRAME && frame[i] != '\0')
      raw_write(fd, (char[]){frame[i], '\0'});
    test_sleep(0.02);
  }
}

START_TEST(a_silent_peer_is_ended_by_the_handshake_timeout) {
  vat_system *sys = test_system(2);
  vat_conn_options opt = timeouts(SHORT_S, 0);
  /* A connection that started keeps going past the handshake's time. */
  pair good;
  open_pair(sys, &opt, &good);
  int sv[2];
  ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
  vat_conn *bad;
  double t0 = test_wall_seconds();
  ck_assert_vat_ok(vat_conn_open(sys, sv[0], NULL, &opt, &bad));
  if (_i != SAYS_NOTHING)
    misbehave(sv[1], _i, SHORT_S * 2);
  vat_value why = wait_closed(bad);
  ck_assert(test_wall_seconds() - t0 >= SHORT_S);
  assert_timed_out(why, "handshake: no message from the peer within 0.2 s");
  /* The questions waiting on it broke with the same reason. */
  vat_value v;
  ck_assert_vat_err(vat_promise_wait(vat_conn_bootstrap(bad), 0, &v),
                    VAT_EBROKEN);
  ck_assert(vat_equal(v, why));
  ck_assert(raw_sees_end(sv[1], WAIT_S));
  ck_assert(still_open(good.a, 0) && still_open(good.b, 0));
  assert_adds(&good);
  close(sv[1]);
  close_pair(&good);
  test_quiesce(sys);
}
END_TEST

/* The default is 10 s, and negative turns it off: neither ends a silent
 * peer within a few handshake times. */
START_TEST(the_handshake_timeout_off_and_by_default) {
  vat_system *sys = test_system(2);
  vat_conn_options off = timeouts(-1, 0), dflt = timeouts(0, 0);
  int sv[2], sw[2];
  ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
  ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sw), 0);
  vat_conn *c, *d;
  ck_assert_vat_ok(vat_conn_open(sys, sv[0], NULL, &off, &c));
  ck_assert_vat_ok(vat_conn_open(sys, sw[0], NULL, &dflt, &d));
  ck_assert(still_open(c, SHORT_S * 3));
  ck_assert(still_open(d, 0));
  vat_conn_close(c);
  vat_conn_close(d);
  wait_closed(c);
  wait_closed(d);
  close(sv[1]);
  close(sw[1]);
  test_quiesce(sys);
}
END_TEST

/* On the host's loop, with a host-driven system the same loop runs
 * (iteration 0), and on a deterministic system's virtual clock (1): the
 * timeout counts the system's time, which there only the host moves. */
typedef struct host_loop {
  uv_loop_t loop;
  uv_timer_t tick;
  vat_system *sys;
} host_loop;

static void on_tick(uv_timer_t *t) {
  host_loop *h = t->data;
  vat_system_run(h->sys, 0, 0, NULL);
}

/* Runs the loop for `for_s` seconds or until `p` settles. */
static void run_loop(host_loop *h, vat_promise *p, double for_s) {
  double end = test_wall_seconds() + for_s;
  while (vat_promise_peek(p, NULL) == VAT_PROMISE_PENDING &&
         test_wall_seconds() < end)
    uv_run(&h->loop, UV_RUN_ONCE);
}

/* Iteration 2: the default, 10 s, on the virtual clock. */
START_TEST(the_handshake_timeout_on_the_hosts_loop) {
  bool virtual_clock = _i >= 1, by_default = _i == 2;
  signal(SIGPIPE, SIG_IGN); /* the host's affair on its loop (vat/net.h) */
  host_loop h;
  h.sys = test_host_system(virtual_clock, 0);
  ck_assert_int_eq(uv_loop_init(&h.loop), 0);
  ck_assert_int_eq(uv_timer_init(&h.loop, &h.tick), 0);
  h.tick.data = &h;
  ck_assert_int_eq(uv_timer_start(&h.tick, on_tick, 1, 1), 0);
  vat_conn_options opt = timeouts(by_default ? 0 : SHORT_S, 0);
  opt.loop = &h.loop;
  int sv[2];
  ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
  vat_conn *c;
  ck_assert_vat_ok(vat_conn_open(h.sys, sv[0], NULL, &opt, &c));
  vat_promise *closed = vat_conn_closed(c);
  if (virtual_clock) {
    run_loop(&h, closed, SHORT_S * 3); /* the virtual clock stands still */
    ck_assert_int_eq(vat_promise_peek(closed, NULL), VAT_PROMISE_PENDING);
    if (by_default) { /* not yet at 9.9 s */
      ck_assert_vat_ok(vat_system_advance_clock(h.sys, 9900000000ull));
      run_loop(&h, closed, SHORT_S);
      ck_assert_int_eq(vat_promise_peek(closed, NULL), VAT_PROMISE_PENDING);
    }
    ck_assert_vat_ok(vat_system_advance_clock(h.sys, 1000000000ull));
  }
  run_loop(&h, closed, WAIT_S);
  vat_value why;
  ck_assert_int_eq(vat_promise_peek(closed, &why), VAT_PROMISE_RESOLVED);
  assert_timed_out(
      why, by_default ? "handshake: no message from the peer within 10 s"
                      : "handshake: no message from the peer within 0.2 s");
  uv_close((uv_handle_t *)&h.tick, NULL);
  double deadline = test_wall_seconds() + WAIT_S;
  while (uv_run(&h.loop, UV_RUN_NOWAIT) != 0 && test_wall_seconds() < deadline)
    test_sleep(0.001);
  ck_assert_int_eq(uv_loop_close(&h.loop), 0);
  close(sv[1]);
  test_quiesce(h.sys);
}
END_TEST

/* --- Idle --------------------------------------------------------------- */

START_TEST(a_quiet_peer_is_ended_by_the_idle_timeout_when_set) {
  vat_system *sys = test_system(2);
  bool set = _i == 1;
  vat_conn_options opt = timeouts(SHORT_S, set ? IDLE_S : 0);
  int sv[2];
  ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
  vat_conn *c;
  ck_assert_vat_ok(vat_conn_open(sys, sv[0], NULL, &opt, &c));
  /* A valid start, then a message now and then: not idle. */
  raw_answer_bootstrap(sv[1]);
  ck_assert_vat_ok(vat_promise_wait(vat_conn_bootstrap(c), WAIT_S, NULL));
  for (int i = 0; i < 12; i++) {
    test_sleep(IDLE_S / 8);
    raw_frame(sv[1], "{\"type\":\"CTP_NEWER\"}"); /* ignored, but heard */
  }
  ck_assert(still_open(c, 0));
  /* Then nothing. */
  double t0 = test_wall_seconds();
  if (set) {
    assert_timed_out(wait_closed(c),
                     "idle: no message from the peer for 0.4 s");
    ck_assert(test_wall_seconds() - t0 >= IDLE_S);
    ck_assert(raw_sees_end(sv[1], WAIT_S));
  } else {
    ck_assert(still_open(c, IDLE_S * 3));
    vat_conn_close(c);
    wait_closed(c);
  }
  close(sv[1]);
  test_quiesce(sys);
}
END_TEST

/* A peer waiting for this side's answer is not idle. */
static void slow_receive(vat_turn *turn, void *state, const vat_atom *selector,
                         vat_value value) {
  (void)turn;
  (void)state;
  (void)selector;
  (void)value; /* never answers */
}

static const vat_entity_def slow_def = {.receive = slow_receive};

START_TEST(a_peer_waiting_on_an_answer_is_not_idle) {
  vat_system *sys = test_system(2);
  vat_conn_options opt = timeouts(SHORT_S, IDLE_S);
  vat_ref *slow;
  ck_assert_vat_ok(vat_host_spawn(sys, &slow_def, &slow, NULL));
  int sv[2];
  ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
  vat_conn *c;
  ck_assert_vat_ok(vat_conn_open(sys, sv[0], slow, &opt, &c));
  raw_answer_bootstrap(sv[1]);
  raw_frame(sv[1], "{\"type\":\"CTP_BOOTSTRAP\",\"questionID\":\"q-1\"}");
  raw_read_until(sv[1], "o+1"); /* exported: it may be called */
  raw_frame(sv[1], "{\"type\":\"CTP_CALL\",\"questionID\":\"q-2\",\"target\":"
                   "\"o-1\",\"method\":{\"body\":\"[\\\"wait\\\",[]]\","
                   "\"slots\":[]}}");
  if (!still_open(c, IDLE_S * 3)) {
    char buf[256];
    vat_format(wait_closed(c), buf, sizeof buf);
    ck_abort_msg("ended: %s", buf);
  }
  vat_conn_close(c);
  wait_closed(c);
  close(sv[1]);
  test_quiesce(sys);
}
END_TEST

/* --- A peer that asks more than max_questions at once ------------------ */

/* Holds the replies of its "hold" calls until the host releases them;
 * answers "count" at once with how many "hold" calls it has had. */
enum { GATE_MAX = VAT_CONN_MAX_CALLS_TAKEN + 64 };
typedef struct gate {
  vat_ref *held[GATE_MAX];
  size_t nheld;
  int64_t holds;
  _Atomic uint64_t holding;  /* nheld, for the test's thread */
  _Atomic uint64_t releases; /* gate_release's turns so far */
} gate;

static void gate_receive(vat_turn *turn, void *state, const vat_atom *selector,
                         vat_value value) {
  gate *g = state;
  vat_value args;
  vat_ref *reply;
  if (!vat_request_parse(value, &args, &reply))
    return;
  if (selector == sel("count")) {
    expect_vat_ok(vat_reply(turn, reply, vat_int(g->holds)));
    return;
  }
  g->holds++;
  if (g->nheld == GATE_MAX) {
    expect_vat_ok(vat_reply_error(turn, reply, vat_atom_value(sel("full"))));
    return;
  }
  g->held[g->nheld++] = reply;
  atomic_store(&g->holding, g->nheld);
}

static void gate_release(vat_turn *turn, void *state, void *arg) {
  gate *g = state;
  (void)arg;
  for (size_t i = 0; i < g->nheld; i++)
    expect_vat_ok(vat_reply(turn, g->held[i], vat_int((int64_t)i)));
  g->nheld = 0;
  atomic_store(&g->holding, 0);
  atomic_fetch_add(&g->releases, 1);
}

static const vat_entity_def gate_def = {.state_size = sizeof(gate),
                                        .receive = gate_receive};

/* The peer's questions past the calls this side takes at once (options
 * max_calls_taken, at most max_questions) wait for answers to go back:
 * they are not taken, and nothing ends. A libvat client streaming one-way
 * messages (each a question on the wire) to a slow server ended its
 * connection once it was max_questions ahead. The served gate holds
 * every "hold": `limit` are held at once, round after round, never more. */
static void calls_past_the_limit_wait(size_t max_questions,
                                      size_t max_calls_taken, int limit,
                                      int rounds) {
  vat_system *sys = test_system(2);
  gate *g;
  vat_ref *gate_ref;
  ck_assert_vat_ok(vat_host_spawn(sys, &gate_def, &gate_ref, (void **)&g));
  int sv[2];
  ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
  vat_conn_options opt;
  vat_conn_options_default(&opt);
  opt.max_questions = max_questions;
  opt.max_calls_taken = max_calls_taken;
  vat_conn *served, *client;
  ck_assert_vat_ok(vat_conn_open(sys, sv[0], gate_ref, &opt, &served));
  ck_assert_vat_ok(vat_conn_open(sys, sv[1], NULL, NULL, &client));
  vat_value v;
  ck_assert_vat_ok(vat_promise_wait(vat_conn_bootstrap(client), WAIT_S, &v));
  vat_ref *remote = vat_value_ref(v);
  for (int i = 0; i < limit * rounds; i++)
    ck_assert_vat_ok(vat_host_send_msg(remote, sel("hold"), vat_list(NULL, 0)));
  vat_promise *count;
  ck_assert_vat_ok(
      vat_host_request(remote, sel("count"), vat_list(NULL, 0), 0, &count));
  for (int round = 0; round < rounds; round++) {
    ck_assert_msg(test_wait_u64(&g->holding, (uint64_t)limit, WAIT_S),
                  "round %d: %d held", round, (int)atomic_load(&g->holding));
    test_sleep(0.02); /* a question past the limit would show meanwhile */
    uint64_t held = atomic_load(&g->holding);
    ck_assert_msg(held == (uint64_t)limit, "round %d: %d held, not %d", round,
                  (int)held, limit);
    ck_assert(still_open(served, 0));
    ck_assert_vat_ok(vat_host_send(gate_ref, gate_release, NULL));
    /* Released before the next round looks: else it could see this
     * round's `limit` still held, and the release land in its pause. */
    ck_assert(test_wait_u64(&g->releases, (uint64_t)round + 1, WAIT_S));
  }
  ck_assert_vat_ok(vat_promise_wait(count, WAIT_S, &v));
  ck_assert(vat_equal(v, vat_int(limit * rounds)));
  vat_conn_close(client);
  wait_closed(client);
  wait_closed(served);
  test_quiesce(sys);
}

START_TEST(a_peer_past_max_questions_waits_for_answers) {
  calls_past_the_limit_wait(4, 0, 4, 10);
}
END_TEST

START_TEST(a_peer_past_max_calls_taken_waits_for_answers) {
  calls_past_the_limit_wait(0, 4, 4, 10);
}
END_TEST

/* The lower of the two holds. */
START_TEST(max_calls_taken_above_max_questions_is_max_questions) {
  calls_past_the_limit_wait(4, 100, 4, 3);
}
END_TEST

START_TEST(by_default_1024_calls_are_taken_at_once) {
  calls_past_the_limit_wait(0, 0, VAT_CONN_MAX_CALLS_TAKEN, 3);
}
END_TEST

static vat_conn_info conn_info(vat_conn *c) {
  vat_conn_info info;
  ck_assert_vat_ok(vat_conn_inspect(c, &info));
  return info;
}

/* Counts its "bump" calls, answering each at once; "count" answers how
 * many it has had. */
static void tally_receive(vat_turn *turn, void *state, const vat_atom *selector,
                          vat_value value) {
  int64_t *bumps = state;
  vat_value args;
  vat_ref *reply;
  if (!vat_request_parse(value, &args, &reply))
    return;
  if (selector == sel("bump"))
    ++*bumps;
  expect_vat_ok(vat_reply(turn, reply, vat_int(*bumps)));
}

static const vat_entity_def tally_def = {.state_size = sizeof(int64_t),
                                         .receive = tally_receive};

static void small_buffers(int fd) {
  int size = 4096;
  ck_assert_int_eq(setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &size, sizeof size), 0);
  ck_assert_int_eq(setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size, sizeof size), 0);
}

/* A client streaming one-way messages, far past out_pause_bytes, to a
 * server that takes them max_questions at a time: the client's own
 * queued calls must not stop it reading the answers, or the server's
 * answers queue, it stops reading too, and both wait for ever. */
START_TEST(a_side_streaming_calls_still_reads_the_answers) {
  /* The hostile build collects at every turn: 3,000 sends took it 8 to 19
   * s of the 20 s wait; 300 still pass the pause many times over. */
  enum { SENDS = TEST_SCALE > 1 ? 300 : 3000, PAUSE = 4096 };
  vat_system *sys = test_system(2);
  vat_ref *tally;
  ck_assert_vat_ok(vat_host_spawn(sys, &tally_def, &tally, NULL));
  int sv[2];
  ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
  small_buffers(sv[0]);
  small_buffers(sv[1]);
  vat_conn_options server_opt, client_opt;
  vat_conn_options_default(&server_opt);
  server_opt.max_questions = 4;
  server_opt.out_pause_bytes = PAUSE;
  vat_conn_options_default(&client_opt);
  client_opt.out_pause_bytes = PAUSE;
  vat_conn *served, *client;
  ck_assert_vat_ok(vat_conn_open(sys, sv[0], tally, &server_opt, &served));
  ck_assert_vat_ok(vat_conn_open(sys, sv[1], NULL, &client_opt, &client));
  vat_value v;
  ck_assert_vat_ok(vat_promise_wait(vat_conn_bootstrap(client), WAIT_S, &v));
  vat_ref *remote = vat_value_ref(v);
  for (int i = 0; i < SENDS; i++)
    ck_assert_vat_ok(vat_host_send_msg(remote, sel("bump"), vat_list(NULL, 0)));
  vat_promise *count;
  ck_assert_vat_ok(
      vat_host_request(remote, sel("count"), vat_list(NULL, 0), 0, &count));
  int rc = vat_promise_wait(count, WAIT_S, &v);
  vat_conn_info mine = conn_info(client), theirs = conn_info(served);
  ck_assert_msg(rc == VAT_OK,
                "no count (%d): client %zu queued, %zu pending, paused %d; "
                "server %zu queued, %zu pending, paused %d",
                rc, mine.out_queued, mine.in_pending, (int)mine.reading_paused,
                theirs.out_queued, theirs.in_pending,
                (int)theirs.reading_paused);
  ck_assert(vat_equal(v, vat_int(SENDS)));
  vat_conn_close(client);
  wait_closed(client);
  wait_closed(served);
  test_quiesce(sys);
}
END_TEST

/* Reads until `want` has arrived, into buf (asserted, within WAIT_S). */
static void raw_collect(int fd, char *buf, size_t size, const char *want) {
  size_t got = 0;
  double deadline = test_wall_seconds() + WAIT_S;
  buf[0] = '\0';
  while (strstr(buf, want) == NULL) {
    double left = deadline - test_wall_seconds();
    ck_assert_msg(left > 0 && got + 1 < size, "no %s in %.300s", want, buf);
    struct pollfd p = {.fd = fd, .events = POLLIN};
    if (poll(&p, 1, (int)(left * 1000) + 1) <= 0)
      continue;
    ssize_t r = read(fd, buf + got, size - 1 - got);
    if (r < 0 && errno == EINTR)
      continue;
    ck_assert_msg(r > 0, "end of stream before %s", want);
    got += (size_t)r;
    buf[got] = '\0';
  }
}

/* Frames read while the peer is at the limit wait in order, and count as
 * held for it: past out_pause_bytes of them reading pauses, so a peer
 * that goes on asking waits in its own socket. */
START_TEST(frames_past_max_questions_wait_in_order_and_pause_reading) {
  enum { HELD = 2, CALLS = 200, PAUSE = 4096 };
  vat_system *sys = test_system(2);
  gate *g;
  vat_ref *gate_ref;
  ck_assert_vat_ok(vat_host_spawn(sys, &gate_def, &gate_ref, (void **)&g));
  int sv[2];
  ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
  vat_conn_options opt;
  vat_conn_options_default(&opt);
  opt.max_questions = HELD;
  opt.out_pause_bytes = PAUSE;
  vat_conn *c;
  ck_assert_vat_ok(vat_conn_open(sys, sv[0], gate_ref, &opt, &c));
  raw_answer_bootstrap(sv[1]);
  raw_frame(sv[1], "{\"type\":\"CTP_BOOTSTRAP\",\"questionID\":\"q-1\"}");
  raw_read_until(sv[1], "o+1");
  /* In one write: reading pauses, and frame by frame the raw peer would
   * block on its full socket. */
  static char calls[(2 + HELD + CALLS) * 160];
  size_t used = 0;
  for (int q = 2; q < 2 + HELD + CALLS; q++) {
    char call[256];
    int n = snprintf(call, sizeof call,
                     "{\"type\":\"CTP_CALL\",\"questionID\":\"q-%d\","
                     "\"target\":\"o-1\",\"method\":{\"body\":"
                     "\"[\\\"%s\\\",[]]\",\"slots\":[]}}",
                     q, q < 2 + HELD ? "hold" : "count");
    used += (size_t)snprintf(calls + used, sizeof calls - used, "%d:%s,", n,
                             call);
  }
  ck_assert_uint_lt(used, sizeof calls);
  raw_write(sv[1], calls);
  ck_assert(test_wait_u64(&g->holding, HELD, WAIT_S));
  double deadline = test_wall_seconds() + WAIT_S;
  while (!conn_info(c).reading_paused && test_wall_seconds() < deadline)
    test_sleep(0.001);
  vat_conn_info info = conn_info(c);
  ck_assert_msg(info.reading_paused, "%zu bytes held", info.in_pending);
  ck_assert_uint_gt(info.in_pending, PAUSE);
  ck_assert(still_open(c, 0));
  ck_assert_uint_eq(atomic_load(&g->holding), HELD);
  ck_assert_vat_ok(vat_host_send(gate_ref, gate_release, NULL));
  static char buf[1 << 16];
  char last[32];
  snprintf(last, sizeof last, "\"answerID\":\"q-%d\"", 1 + HELD + CALLS);
  raw_collect(sv[1], buf, sizeof buf, last);
  const char *at = buf;
  for (int q = 2; q < 2 + HELD + CALLS; q++) {
    char want[32];
    snprintf(want, sizeof want, "\"answerID\":\"q-%d\"", q);
    const char *found = strstr(at, want);
    ck_assert_msg(found != NULL, "q-%d answered out of order", q);
    at = found;
  }
  /* Every "count" was taken after both holds were answered: it saw 2. */
  int twos = 0;
  for (const char *p = buf; (p = strstr(p, "\"#\\\"+2\\\"\"")); p++)
    twos++;
  ck_assert_int_eq(twos, CALLS);
  while (conn_info(c).reading_paused && test_wall_seconds() < deadline)
    test_sleep(0.001);
  ck_assert(!conn_info(c).reading_paused);
  vat_conn_close(c);
  wait_closed(c);
  close(sv[1]);
  test_quiesce(sys);
}
END_TEST

/* vat/net.h, out_pause_bytes: "Reading resumes once that is down to half
 * of this." The gate takes one call at a time (max_questions 1) and the
 * peer's further calls, PAUSE_FRAME bytes each, wait as held: past
 * PAUSE_BYTES reading pauses; each release answers one call and lets
 * one more in, so what is held goes down a frame at a time. Reading stays
 * paused down to one frame above half, and resumes at half exactly. */
enum { PAUSE_FRAME = 200, PAUSE_BYTES = 2000, PAUSE_WAITING = 14 };

/* A "hold" call of exactly PAUSE_FRAME bytes, padded with an argument. */
static size_t hold_call(char *out, size_t size, int q, size_t pad) {
  char padding[PAUSE_FRAME + 1];
  memset(padding, 'x', pad);
  padding[pad] = '\0';
  return (size_t)snprintf(out, size,
                          "{\"type\":\"CTP_CALL\",\"questionID\":\"q-%d\","
                          "\"target\":\"o-1\",\"method\":{\"body\":"
                          "\"[\\\"hold\\\",[\\\"%s\\\"]]\",\"slots\":[]}}",
                          q, padding);
}

static bool held_reaches(vat_conn *c, size_t bytes) {
  double deadline = test_wall_seconds() + WAIT_S;
  while (conn_info(c).in_pending != bytes && test_wall_seconds() < deadline)
    test_sleep(0.001);
  return conn_info(c).in_pending == bytes;
}

START_TEST(reading_resumes_once_held_is_down_to_half_of_the_pause) {
  vat_system *sys = test_system(2);
  gate *g;
  vat_ref *gate_ref;
  ck_assert_vat_ok(vat_host_spawn(sys, &gate_def, &gate_ref, (void **)&g));
  int sv[2];
  ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
  vat_conn_options opt;
  vat_conn_options_default(&opt);
  opt.max_questions = 1;
  opt.out_pause_bytes = PAUSE_BYTES;
  vat_conn *c;
  ck_assert_vat_ok(vat_conn_open(sys, sv[0], gate_ref, &opt, &c));
  raw_answer_bootstrap(sv[1]);
  raw_frame(sv[1], "{\"type\":\"CTP_BOOTSTRAP\",\"questionID\":\"q-1\"}");
  raw_read_until(sv[1], "o+1");
  /* q-10 is taken, q-11.. wait; in one write, so one read takes all. */
  char one[PAUSE_FRAME + 1];
  size_t pad = PAUSE_FRAME - hold_call(one, sizeof one, 10, 0);
  static char calls[(PAUSE_WAITING + 1) * (PAUSE_FRAME + 8) + 1];
  size_t used = 0;
  for (int q = 10; q <= 10 + PAUSE_WAITING; q++) {
    ck_assert_uint_eq(hold_call(one, sizeof one, q, pad), PAUSE_FRAME);
    used += (size_t)snprintf(calls + used, sizeof calls - used, "%d:%s,",
                             PAUSE_FRAME, one);
  }
  raw_write(sv[1], calls);
  ck_assert(test_wait_u64(&g->holding, 1, WAIT_S));
  double paused_by = test_wall_seconds() + WAIT_S;
  while (!conn_info(c).reading_paused && test_wall_seconds() < paused_by)
    test_sleep(0.001);
  /* All waiting, unless a read ended mid-way and reading paused with the
   * last few still in the socket: counted from what is held. */
  size_t start = conn_info(c).in_pending;
  ck_assert_msg(conn_info(c).reading_paused && start > PAUSE_BYTES &&
                    start % PAUSE_FRAME == 0,
                "%zu bytes held, paused %d", start,
                (int)conn_info(c).reading_paused);
  for (int i = 1; i <= PAUSE_WAITING; i++) {
    size_t held = start - (size_t)i * PAUSE_FRAME;
    ck_assert_vat_ok(vat_host_send(gate_ref, gate_release, NULL));
    char answer[40];
    snprintf(answer, sizeof answer, "\"answerID\":\"q-%d\"", 9 + i);
    raw_read_until(sv[1], answer);
    ck_assert(test_wait_u64(&g->releases, (uint64_t)i, WAIT_S));
    ck_assert(test_wait_u64(&g->holding, 1, WAIT_S));
    ck_assert_msg(held_reaches(c, held), "%zu bytes held, not %zu",
                  conn_info(c).in_pending, held);
    if (held > PAUSE_BYTES / 2) {
      /* Each answer is written, and reading paced after it, by the loop
       * in turn: a resume after an earlier release has happened by now. */
      ck_assert_msg(conn_info(c).reading_paused,
                    "reading resumed with %zu bytes held (pause %d)", held,
                    PAUSE_BYTES);
      continue;
    }
    double deadline = test_wall_seconds() + WAIT_S;
    while (conn_info(c).reading_paused && test_wall_seconds() < deadline)
      test_sleep(0.001);
    ck_assert_msg(!conn_info(c).reading_paused,
                  "reading still paused with %zu bytes held (pause %d)", held,
                  PAUSE_BYTES);
    break;
  }
  vat_conn_close(c);
  wait_closed(c);
  close(sv[1]);
  test_quiesce(sys);
}
END_TEST

/* --- Bad options -------------------------------------------------------- */

START_TEST(bad_timeouts_are_refused) {
  vat_system *sys = test_system(1);
  for (int which = 0; which < 2; which++) {
    vat_conn_options opt =
        which == 0 ? timeouts(NAN, 0) : timeouts(0, (double)NAN);
    int sv[2];
    ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    vat_conn *c;
    ck_assert_vat_err(vat_conn_open(sys, sv[0], NULL, &opt, &c), VAT_EINVAL);
    ck_assert_int_eq(fcntl(sv[0], F_GETFD), 0); /* left open */
    close(sv[0]);
    close(sv[1]);
    vat_listener *l;
    ck_assert_vat_err(vat_listen(sys, "tcp:127.0.0.1:0", NULL, &opt, &l),
                      VAT_EINVAL);
    ck_assert_vat_err(vat_connect(sys, "tcp:127.0.0.1:1", NULL, &opt, &c),
                      VAT_EINVAL);
  }
  vat_listener_info info;
  ck_assert_vat_err(vat_listener_inspect(NULL, &info), VAT_EINVAL);
  test_quiesce(sys);
}
END_TEST

/* --- A listener's cap --------------------------------------------------- */

static int raw_connect(int port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  ck_assert_int_ge(fd, 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};
  a.sin_addr.s_addr = htonl(0x7F000001);
  ck_assert_int_eq(connect(fd, (struct sockaddr *)&a, sizeof a), 0);
  return fd;
}

static vat_listener_info inspect(vat_listener *l) {
  vat_listener_info info;
  ck_assert_vat_ok(vat_listener_inspect(l, &info));
  return info;
}

enum { CAP = 2 };

START_TEST(a_listener_takes_at_most_its_cap) {
  vat_system *sys = test_system(2);
  vat_conn_options opt;
  vat_conn_options_default(&opt);
  opt.max_connections = CAP;
  vat_listener *l;
  ck_assert_vat_ok(vat_listen(sys, "tcp:127.0.0.1:0", NULL, &opt, &l));
  int port = vat_listener_port(l);
  int raw[CAP];
  vat_conn *conns[CAP], *c;
  for (int i = 0; i < CAP; i++) {
    raw[i] = raw_connect(port);
    ck_assert_vat_ok(vat_listener_accept(l, WAIT_S, &conns[i]));
    raw_answer_bootstrap(raw[i]);
  }
  ck_assert_uint_eq(inspect(l).open, CAP);
  ck_assert_uint_eq(inspect(l).max_connections, CAP);
  /* One more: accepted and closed at once, and counted. */
  int extra = raw_connect(port);
  ck_assert_vat_err(vat_listener_accept(l, WAIT_S, &c), VAT_EAGAIN);
  ck_assert(raw_sees_end(extra, WAIT_S));
  close(extra);
  ck_assert_uint_eq(inspect(l).open, CAP);
  ck_assert_uint_eq(inspect(l).refused, 1);
  /* A connection that ends frees its place, once it is closed. */
  vat_conn_close(conns[0]);
  wait_closed(conns[0]);
  ck_assert_uint_eq(inspect(l).open, CAP - 1);
  raw[0] = raw_connect(port);
  ck_assert_vat_ok(vat_listener_accept(l, WAIT_S, &conns[0]));
  ck_assert_uint_eq(inspect(l).open, CAP);
  /* The place is taken: the peer is talked to. */
  raw_answer_bootstrap(raw[0]);
  ck_assert(still_open(conns[0], SHORT_S));
  /* Its peer's end of stream frees one too. */
  shutdown(raw[1], SHUT_WR);
  wait_closed(conns[1]);
  ck_assert_uint_eq(inspect(l).open, CAP - 1);
  ck_assert_uint_eq(inspect(l).refused, 1);
  ck_assert_vat_ok(vat_listener_close(l));
  for (int i = 0; i < CAP; i++) {
    vat_conn_close(conns[i]);
    wait_closed(conns[i]);
    close(raw[i]);
  }
  ck_assert_uint_eq(inspect(l).open, 0);
  test_quiesce(sys);
}
END_TEST

/* Served on the host's loop: the callback is told of the refusal. */
typedef struct served {
  int rcs[4];
  vat_conn *conns[4];
  int n;
} served;

static void on_accept(void *ctx, vat_listener *l, int rc, vat_conn *conn) {
  served *sv = ctx;
  (void)l;
  if (sv->n < 4) {
    sv->rcs[sv->n] = rc;
    sv->conns[sv->n++] = conn;
  }
}

START_TEST(a_served_listener_is_told_of_a_refusal) {
  signal(SIGPIPE, SIG_IGN);
  host_loop h;
  h.sys = test_system(2);
  ck_assert_int_eq(uv_loop_init(&h.loop), 0);
  vat_conn_options opt;
  vat_conn_options_default(&opt);
  opt.loop = &h.loop;
  opt.max_connections = 1;
  vat_listener *l;
  ck_assert_vat_ok(vat_listen(h.sys, "tcp:127.0.0.1:0", NULL, &opt, &l));
  served got = {0};
  ck_assert_vat_ok(vat_listener_serve(l, on_accept, &got));
  int one = raw_connect(vat_listener_port(l));
  int two = raw_connect(vat_listener_port(l));
  double deadline = test_wall_seconds() + WAIT_S;
  while (got.n < 2 && test_wall_seconds() < deadline)
    uv_run(&h.loop, UV_RUN_NOWAIT);
  ck_assert_int_eq(got.n, 2);
  ck_assert_vat_ok(got.rcs[0]);
  ck_assert_vat_err(got.rcs[1], VAT_EAGAIN);
  ck_assert_ptr_null(got.conns[1]);
  ck_assert(raw_sees_end(two, WAIT_S));
  ck_assert_uint_eq(inspect(l).open, 1);
  ck_assert_uint_eq(inspect(l).refused, 1);
  ck_assert_vat_ok(vat_listener_close(l));
  ck_assert_vat_ok(vat_conn_close(got.conns[0]));
  run_loop(&h, vat_conn_closed(got.conns[0]), WAIT_S);
  ck_assert_uint_eq(inspect(l).open, 0);
  deadline = test_wall_seconds() + WAIT_S;
  while (uv_run(&h.loop, UV_RUN_NOWAIT) != 0 && test_wall_seconds() < deadline)
    test_sleep(0.001);
  ck_assert_int_eq(uv_loop_close(&h.loop), 0);
  close(one);
  close(two);
  test_quiesce(h.sys);
}
END_TEST

Suite *test_bounds_suite(void) {
  Suite *s = suite_create("bounds");
  TCase *tc = test_case("bounds", 60);
  tcase_add_loop_test(tc, a_silent_peer_is_ended_by_the_handshake_timeout,
                      SAYS_NOTHING, DRIBBLES_A_FRAME + 1);
  tcase_add_test(tc, the_handshake_timeout_off_and_by_default);
  tcase_add_loop_test(tc, the_handshake_timeout_on_the_hosts_loop, 0, 3);
  tcase_add_loop_test(tc, a_quiet_peer_is_ended_by_the_idle_timeout_when_set, 0,
                      2);
  tcase_add_test(tc, a_peer_waiting_on_an_answer_is_not_idle);
  tcase_add_test(tc, a_peer_past_max_questions_waits_for_answers);
  tcase_add_test(tc, a_peer_past_max_calls_taken_waits_for_answers);
  tcase_add_test(tc, max_calls_taken_above_max_questions_is_max_questions);
  tcase_add_test(tc, by_default_1024_calls_are_taken_at_once);
  tcase_add_test(tc, frames_past_max_questions_wait_in_order_and_pause_reading);
  tcase_add_test(tc, reading_resumes_once_held_is_down_to_half_of_the_pause);
  tcase_add_test(tc, a_side_streaming_calls_still_reads_the_answers);
  tcase_add_test(tc, bad_timeouts_are_refused);
  tcase_add_test(tc, a_listener_takes_at_most_its_cap);
  tcase_add_test(tc, a_served_listener_is_told_of_a_refusal);
  suite_add_tcase(s, tc);
  return s;
}
