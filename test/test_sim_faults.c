/* Simulation testing (vat/sim.h): the fault kinds beyond kill and fail.
 * Each strikes as planned (delayed messages overtaken by other senders',
 * a timer late by its jitter, a request timed out, a system stopped), the
 * runtime's rules still hold under it (per-sender order and a down after
 * its sender's messages, under heavy delay), and each is in the plan's
 * text and the digest, replays from its plan, and shrinks. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <gc/gc.h>

#include "sim_programs.h"
#include "support.h"
#include "vat/exits.h"
#include "vat/host.h"
#include "vat/promise.h"
#include "vat/sim.h"
#include "vat/timer.h"

static vat_ref *spawn_with(vat_system *sys, const char *label, void *world) {
  vat_ref *v;
  void **st;
  vat_entity_def def = {.state_size = sizeof *st, .label = label};
  if (vat_host_spawn(sys, &def, &v, (void **)&st) != VAT_OK)
    return NULL;
  *st = world;
  return v;
}

#define WORLD(type, state) ((type *)*(void **)(state))

/* --- Senders: per-sender order under delay faults --------------------------
 * Four senders each send the receiver PER_SENDER numbered messages, three
 * a turn, and the sink one a turn, then stop. The receiver monitors them
 * all. It checks that each sender's messages arrive in order, and that a
 * sender's down comes after all its messages; and it counts arrivals that
 * overtook a message another sender committed before them. */

enum { SENDERS = 4, PER_SENDER = 12, PER_TURN = 3 };

typedef struct note {
  unsigned from, n;
  uint64_t committed; /* the send's place among all sends, in commit order */
} note;

typedef struct senders {
  vat_ref *recv, *sink, *s[SENDERS];
  unsigned sent[SENDERS], next[SENDERS], downs, got;
  uint64_t committed, newest, overtaken;
  char broken[160];
} senders;

static void take(vat_turn *turn, void *state, void *arg) {
  (void)turn;
  senders *w = WORLD(senders, state);
  note *m = arg;
  if (m->n != w->next[m->from] && !w->broken[0])
    snprintf(w->broken, sizeof w->broken, "s%u's message %u came as %u",
             m->from, m->n, w->next[m->from]);
  w->next[m->from]++;
  w->got++;
  if (m->committed < w->newest)
    w->overtaken++;
  else
    w->newest = m->committed;
}

static void sink_note(vat_turn *turn, void *state, void *arg) {
  (void)turn, (void)state, (void)arg;
}

static void burst(vat_turn *turn, void *state, void *arg) {
  senders *w = WORLD(senders, state);
  unsigned i = (unsigned)(uintptr_t)arg;
  for (int k = 0; k < PER_TURN && w->sent[i] < PER_SENDER; k++) {
    note *m = GC_MALLOC(sizeof *m);
    *m = (note){i, w->sent[i]++, ++w->committed};
    expect_vat_ok(vat_send(turn, w->recv, take, m));
  }
  expect_vat_ok(vat_send(turn, w->sink, sink_note, NULL));
  if (w->sent[i] < PER_SENDER)
    expect_vat_ok(vat_send(turn, vat_self(turn), burst, arg));
  else
    expect_vat_ok(vat_stop(turn));
}

static void sender_down(vat_turn *turn, void *state, uint64_t id, vat_ref *who,
                        vat_value reason) {
  (void)turn, (void)id, (void)reason;
  senders *w = WORLD(senders, state);
  for (unsigned i = 0; i < SENDERS; i++)
    if (vat_ref_same_vat(who, w->s[i]) && w->next[i] != PER_SENDER &&
        !w->broken[0])
      snprintf(w->broken, sizeof w->broken,
               "s%u's down came after %u of its %d messages", i, w->next[i],
               PER_SENDER);
  w->downs++;
}

static void watch(vat_turn *turn, void *state, void *arg) {
  (void)arg;
  senders *w = WORLD(senders, state);
  for (unsigned i = 0; i < SENDERS; i++) {
    uint64_t id;
    expect_vat_ok(vat_monitor(turn, w->s[i], sender_down, &id));
  }
}

static void *senders_setup(vat_system *sys, void *ctx) {
  (void)ctx;
  senders *w = GC_MALLOC(sizeof *w);
  static const char *labels[SENDERS] = {"s0", "s1", "s2", "s3"};
  if (!(w->recv = spawn_with(sys, "recv", w)) ||
      !(w->sink = spawn_with(sys, "sink", w)))
    return NULL;
  for (unsigned i = 0; i < SENDERS; i++)
    if (!(w->s[i] = spawn_with(sys, labels[i], w)))
      return NULL;
  vat_host_send(w->recv, watch, NULL);
  for (unsigned i = 0; i < SENDERS; i++)
    vat_host_send(w->s[i], burst, (void *)(uintptr_t)i);
  return w;
}

static senders *last_senders;
static bool senders_check(void *world, bool quiescent, char *why, size_t n) {
  (void)quiescent;
  senders *w = last_senders = world;
  if (w->broken[0]) {
    snprintf(why, n, "%s", w->broken);
    return false;
  }
  return true;
}

static bool senders_done(void *world) {
  senders *w = world;
  return w->got == SENDERS * PER_SENDER && w->downs == SENDERS;
}

static const vat_sim_scenario senders_sc = {.name = "senders",
                                            .setup = senders_setup,
                                            .check = senders_check,
                                            .done = senders_done};

static vat_sim_options with_kinds(vat_sim_strategy s, unsigned kinds,
                                  double rate) {
  vat_sim_options o = sim_options(s, rate);
  o.fault_kinds = kinds;
  o.max_faults = 0;
  return o;
}

/* Under many delay faults, messages from different senders arrive out of
 * the order they were committed in, often; one sender's never do, and a
 * sender's down never comes before its messages. Without faults, nothing
 * is overtaken. */
START_TEST(per_sender_order_holds_under_heavy_delay) {
  for (int s = VAT_SIM_RANDOM; s <= VAT_SIM_PCT; s++) {
    vat_sim_options calm = sim_options(s, 0);
    vat_sim_result r;
    uint64_t overtaken = 0, faults = 0;
    for (uint64_t seed = 1; seed <= 100; seed++) {
      ck_assert_vat_ok(vat_sim_replay(&senders_sc, &calm, seed, &r));
      ck_assert_msg(!r.failed, "%s", r.message);
      ck_assert_uint_eq(last_senders->overtaken, 0);
    }
    vat_sim_options o = with_kinds(s, VAT_SIM_FAULT(VAT_SIM_DELAY), 0.5);
    for (uint64_t seed = 1; seed <= 300; seed++) {
      ck_assert_vat_ok(vat_sim_replay(&senders_sc, &o, seed, &r));
      ck_assert_msg(!r.failed, "%s seed %llu: %s; %s", sim_strategy_name(s),
                    (unsigned long long)seed, r.message, r.plan);
      overtaken += last_senders->overtaken;
      faults += r.nfaults;
    }
    fprintf(stderr,
            "sim: senders/%s: 300 seeds, %llu delays, %llu messages "
            "overtaken\n",
            sim_strategy_name(s), (unsigned long long)faults,
            (unsigned long long)overtaken);
    ck_assert_uint_ge(faults, 300 * 5);
    ck_assert_uint_ge(overtaken, 300);
  }
}
END_TEST

/* --- Two senders, one message each ---------------------------------------- */

typedef struct pair {
  vat_ref *recv, *first, *second;
  char log[4];
  unsigned n;
} pair;

static void arrive(vat_turn *turn, void *state, void *arg) {
  (void)turn;
  pair *w = WORLD(pair, state);
  w->log[w->n++] = (char)(uintptr_t)arg;
}

static void say(vat_turn *turn, void *state, void *arg) {
  pair *w = WORLD(pair, state);
  expect_vat_ok(vat_send(turn, w->recv, arrive, arg));
}

static void arrive_asked(vat_turn *turn, void *state, void *arg,
                         vat_resolver *resolver) {
  arrive(turn, state, arg);
  expect_vat_ok(vat_resolve(turn, resolver, vat_null()));
}

/* The same with a request (no timeout: its turn commits no effect). */
static void ask(vat_turn *turn, void *state, void *arg) {
  pair *w = WORLD(pair, state);
  vat_promise *p;
  expect_vat_ok(vat_call(turn, w->recv, arrive_asked, arg, 0, &p));
}

static void *pair_setup(vat_system *sys, void *ctx) {
  pair *w = GC_MALLOC(sizeof *w);
  if (!(w->recv = spawn_with(sys, "recv", w)) ||
      !(w->first = spawn_with(sys, "first", w)) ||
      !(w->second = spawn_with(sys, "second", w)))
    return NULL;
  vat_host_send(w->first, ctx ? ask : say, (void *)(uintptr_t)'1');
  vat_host_send(w->second, say, (void *)(uintptr_t)'2');
  return w;
}

static pair *last_pair;
static bool pair_done(void *world) {
  last_pair = world;
  return ((pair *)world)->n == 2;
}

/* A delay on `first` holds its message until `second`'s has arrived,
 * whichever ran first: the receiver always hears `second` first. The
 * fault is in the plan's text, with its steps, and in the digest. */
START_TEST(a_delay_strikes_as_planned) {
  vat_sim_scenario sc = {
      .name = "pair", .setup = pair_setup, .done = pair_done};
  unsigned first_first = 0;
  for (uint64_t seed = 1; seed <= 40; seed++) {
    vat_sim_options o = sim_options(seed % 2 ? VAT_SIM_RANDOM : VAT_SIM_PCT, 0);
    vat_sim_result calm, r;
    ck_assert_vat_ok(vat_sim_replay(&sc, &o, seed, &calm));
    first_first += last_pair->log[0] == '1';
    for (unsigned steps = 1; steps <= 3; steps++) {
      char plan[64], want[64];
      snprintf(plan, sizeof plan, "step 1: delay first %u step%s", steps,
               steps == 1 ? "" : "s");
      o.plan = plan;
      ck_assert_vat_ok(vat_sim_replay(&sc, &o, seed, &r));
      ck_assert_msg(!r.failed, "%s", r.message);
      ck_assert_uint_eq(r.nfaults, 1);
      ck_assert_uint_eq(r.faults[0].kind, VAT_SIM_DELAY);
      ck_assert_uint_eq(r.faults[0].amount, steps);
      snprintf(want, sizeof want, "step %llu: delay first %u step%s",
               (unsigned long long)r.faults[0].step, steps,
               steps == 1 ? "" : "s");
      ck_assert_str_eq(r.plan, want);
      ck_assert_msg(memcmp(last_pair->log, "21", 2) == 0, "%s: %.2s", r.plan,
                    last_pair->log);
      ck_assert(r.digest != calm.digest);
    }
  }
  ck_assert_uint_ge(first_first, 10); /* which the delay reversed */
  /* A request is a signal: never held, so never overtaken. */
  static int asking;
  sc.ctx = &asking;
  for (uint64_t seed = 1; seed <= 40; seed++) {
    vat_sim_options o = sim_options(seed % 2 ? VAT_SIM_RANDOM : VAT_SIM_PCT, 0);
    vat_sim_result calm, r;
    ck_assert_vat_ok(vat_sim_replay(&sc, &o, seed, &calm));
    char order[2] = {last_pair->log[0], last_pair->log[1]};
    o.plan = "step 1: delay first 3 steps";
    ck_assert_vat_ok(vat_sim_replay(&sc, &o, seed, &r));
    ck_assert_uint_eq(r.nfaults, 1);
    ck_assert_msg(memcmp(last_pair->log, order, 2) == 0, "%s: %.2s, not %.2s",
                  r.plan, last_pair->log, order);
  }
}
END_TEST

/* --- A ticker: timers late by their jitter -------------------------------- */

enum { BUSY_TURNS = 30 };

typedef struct ticker {
  vat_system *sys;
  uint64_t start;
  vat_ref *ticker, *busy;
  vat_timer *every;
  uint64_t fired[4];
  unsigned nfired;
} ticker;

static void tick(vat_turn *turn, void *state, void *arg) {
  (void)turn, (void)arg;
  ticker *w = WORLD(ticker, state);
  w->fired[w->nfired++] = vat_system_now(w->sys) - w->start;
  if (w->every != NULL && w->nfired == 3)
    vat_timer_cancel(w->every);
}

static void busy_spin(vat_turn *turn, void *state, void *arg);

/* Arms the timer, and sets `busy` going: steps run while it is pending. */
static void arm(vat_turn *turn, void *state, void *arg) {
  ticker *w = WORLD(ticker, state);
  expect_vat_ok(
      vat_send(turn, w->busy, busy_spin, (void *)(uintptr_t)BUSY_TURNS));
  if (arg != NULL)
    expect_vat_ok(vat_every(turn, 1.0, vat_self(turn), tick, NULL, &w->every));
  else
    expect_vat_ok(vat_later(turn, 1.0, vat_self(turn), tick, NULL, NULL));
}

static void busy_spin(vat_turn *turn, void *state, void *arg) {
  (void)state;
  uintptr_t left = (uintptr_t)arg;
  if (left > 0)
    expect_vat_ok(
        vat_send(turn, vat_self(turn), busy_spin, (void *)(left - 1)));
}

static void *ticker_setup(vat_system *sys, void *ctx) {
  ticker *w = GC_MALLOC(sizeof *w);
  w->sys = sys;
  w->start = vat_system_now(sys);
  if (!(w->ticker = spawn_with(sys, "ticker", w)) ||
      !(w->busy = spawn_with(sys, "busy", w)))
    return NULL;
  vat_host_send(w->ticker, arm, ctx);
  return w;
}

static ticker *last_ticker;
static bool ticker_done(void *world) {
  last_ticker = world;
  return true;
}

/* A jitter on the ticker makes its timer fire that much later on the
 * virtual clock, a periodic one's later firings too; drawn, never early
 * and never by more than max_jitter_ns. Two amounts, two digests. */
START_TEST(a_jitter_strikes_as_planned) {
  static int periodic;
  vat_sim_scenario once = {
      .name = "ticker", .setup = ticker_setup, .done = ticker_done};
  vat_sim_scenario every = once;
  every.ctx = &periodic;
  for (uint64_t seed = 1; seed <= 20; seed++) {
    vat_sim_options o = sim_options(seed % 2 ? VAT_SIM_RANDOM : VAT_SIM_PCT, 0);
    vat_sim_result calm, r, other;
    ck_assert_vat_ok(vat_sim_replay(&once, &o, seed, &calm));
    ck_assert_uint_eq(last_ticker->fired[0], 1000000000ull);
    o.plan = "step 1: jitter ticker +250ms";
    ck_assert_vat_ok(vat_sim_replay(&once, &o, seed, &r));
    ck_assert_uint_eq(r.nfaults, 1);
    ck_assert_uint_eq(r.faults[0].kind, VAT_SIM_JITTER);
    ck_assert_uint_eq(r.faults[0].amount, 250000000ull);
    ck_assert_msg(strstr(r.plan, ": jitter ticker +250ms") != NULL, "%s",
                  r.plan);
    ck_assert_uint_eq(last_ticker->fired[0], 1250000000ull);
    o.plan = "step 1: jitter ticker +1500ns";
    ck_assert_vat_ok(vat_sim_replay(&once, &o, seed, &other));
    ck_assert_uint_eq(last_ticker->fired[0], 1000001500ull);
    ck_assert_msg(strstr(other.plan, ": jitter ticker +1500ns") != NULL, "%s",
                  other.plan);
    ck_assert_uint_eq(other.steps, r.steps);
    ck_assert(other.digest != r.digest);
    o.plan = "step 1: jitter ticker +250ms";
    ck_assert_vat_ok(vat_sim_replay(&every, &o, seed, &r));
    ck_assert_uint_eq(last_ticker->nfired, 3);
    ck_assert_uint_eq(last_ticker->fired[0], 1250000000ull);
    ck_assert_uint_eq(last_ticker->fired[1], 2250000000ull);
    ck_assert_uint_eq(last_ticker->fired[2], 3250000000ull);
  }
  vat_sim_options o =
      with_kinds(VAT_SIM_RANDOM, VAT_SIM_FAULT(VAT_SIM_JITTER), 1.0);
  o.max_faults = 1;
  o.max_jitter_ns = 400000000ull;
  unsigned differ = 0;
  for (uint64_t seed = 1; seed <= 40; seed++) {
    vat_sim_result r;
    ck_assert_vat_ok(vat_sim_replay(&once, &o, seed, &r));
    ck_assert_uint_eq(r.nfaults, 1);
    ck_assert_uint_eq(last_ticker->fired[0],
                      1000000000ull + r.faults[0].amount);
    ck_assert_uint_ge(r.faults[0].amount, 1);
    ck_assert_uint_le(r.faults[0].amount, 400000000ull);
    differ += r.faults[0].amount != 0 && seed > 1;
  }
  ck_assert_uint_ge(differ, 30);
}
END_TEST

/* --- Payments: a request that times out --------------------------------------
 * The client asks the payment service to charge once, with a 5 s timeout;
 * the service charges at once and answers a second later. The buggy
 * client charges again when its call times out; the fixed one asks
 * whether the first charge went through. */

typedef struct payments {
  vat_system *sys;
  uint64_t start;
  bool retry; /* the buggy client */
  vat_ref *client, *service;
  unsigned charged, answered, timed_out;
  uint64_t settled_at;
  vat_promise *host_call;
} payments;

static void answer(vat_turn *turn, void *state, void *arg) {
  payments *w = WORLD(payments, state);
  expect_vat_ok(vat_resolve(turn, arg, vat_int(w->charged)));
}

static void charge(vat_turn *turn, void *state, void *arg,
                   vat_resolver *resolver) {
  payments *w = WORLD(payments, state);
  w->charged += arg == NULL;
  expect_vat_ok(vat_later(turn, 1.0, vat_self(turn), answer, resolver, NULL));
}

static void pay(vat_turn *turn, void *state, void *arg);

static void on_answer(vat_turn *turn, void *state, void *ctx, bool resolved,
                      vat_value value) {
  (void)value;
  payments *w = WORLD(payments, state);
  w->settled_at = vat_system_now(w->sys) - w->start;
  if (resolved) {
    w->answered++;
    return;
  }
  w->timed_out += vat_is_atom(value, vat_atom_timeout());
  if (ctx == NULL) /* the first call: try again, or ask */
    pay(turn, state, w->retry ? (void *)1 : (void *)2);
}

static void pay(vat_turn *turn, void *state, void *arg) {
  payments *w = WORLD(payments, state);
  vat_promise *p;
  /* arg 2: a status query, which charges nothing */
  expect_vat_ok(vat_call(turn, w->service, charge,
                         arg == (void *)2 ? (void *)1 : NULL, 5.0, &p));
  expect_vat_ok(vat_when(turn, p, on_answer, arg));
}

static void *payments_setup(vat_system *sys, void *ctx) {
  payments *w = GC_MALLOC(sizeof *w);
  w->sys = sys;
  w->start = vat_system_now(sys);
  w->retry = ctx != NULL;
  if (!(w->client = spawn_with(sys, "client", w)) ||
      !(w->service = spawn_with(sys, "payments", w)))
    return NULL;
  vat_host_send(w->client, pay, NULL);
  return w;
}

static void *host_call_setup(vat_system *sys, void *ctx) {
  (void)ctx;
  payments *w = GC_MALLOC(sizeof *w);
  if (!(w->service = spawn_with(sys, "payments", w)) ||
      vat_host_call(w->service, charge, NULL, 5.0, &w->host_call) != VAT_OK)
    return NULL;
  return w;
}

static vat_promise *last_host_call;
static bool host_call_done(void *world) {
  last_host_call = ((payments *)world)->host_call;
  return true;
}

static payments *last_payments;
static bool payments_check(void *world, bool quiescent, char *why, size_t n) {
  (void)quiescent;
  payments *w = last_payments = world;
  if (w->charged > 1) {
    snprintf(why, n, "charged %u times", w->charged);
    return false;
  }
  return true;
}

static int retrying;
static const vat_sim_scenario payments_buggy = {.name = "payments-retry",
                                                .setup = payments_setup,
                                                .check = payments_check,
                                                .ctx = &retrying};
static const vat_sim_scenario payments_fixed = {
    .name = "payments", .setup = payments_setup, .check = payments_check};

/* A timeout fault breaks the call the service owes at once (not after 5
 * s), as its deadline would; the service's late answer is dropped. The
 * buggy client then charges twice; the fixed one does not. A host call
 * times out the same way. */
START_TEST(a_timeout_strikes_as_planned) {
  for (uint64_t seed = 1; seed <= 20; seed++) {
    vat_sim_options o = sim_options(seed % 2 ? VAT_SIM_RANDOM : VAT_SIM_PCT, 0);
    vat_sim_result r;
    ck_assert_vat_ok(vat_sim_replay(&payments_fixed, &o, seed, &r));
    ck_assert(!r.failed);
    ck_assert_uint_eq(last_payments->answered, 1);
    ck_assert_uint_eq(last_payments->settled_at, 1000000000ull);
    o.plan = "step 1: timeout payments";
    ck_assert_vat_ok(vat_sim_replay(&payments_fixed, &o, seed, &r));
    ck_assert_msg(!r.failed, "%s", r.message);
    ck_assert_uint_eq(r.nfaults, 1);
    ck_assert_uint_eq(r.faults[0].kind, VAT_SIM_TIMEOUT);
    ck_assert_msg(strstr(r.plan, ": timeout payments") != NULL, "%s", r.plan);
    ck_assert_uint_eq(last_payments->timed_out, 1);
    ck_assert_uint_eq(last_payments->charged, 1);
    ck_assert_uint_eq(last_payments->answered, 1); /* the status query */
    ck_assert_vat_ok(vat_sim_replay(&payments_buggy, &o, seed, &r));
    ck_assert(r.failed);
    ck_assert_uint_eq(r.verdict, VAT_SIM_BROKE_INVARIANT);
    ck_assert_msg(strstr(r.message, "charged 2 times") != NULL, "%s",
                  r.message);
  }
  vat_sim_scenario host = {
      .name = "host-call", .setup = host_call_setup, .done = host_call_done};
  vat_sim_options o = sim_options(VAT_SIM_RANDOM, 0);
  o.plan = "step 1: timeout payments";
  vat_sim_result r;
  ck_assert_vat_ok(vat_sim_replay(&host, &o, 1, &r));
  ck_assert_uint_eq(r.nfaults, 1);
  ck_assert_uint_eq(r.now_ns, 1000000000ull); /* the answer's timer, not 5 s */
  /* The world is gone; its promise is not: broken with `timeout`. */
  vat_value why;
  ck_assert_int_eq(vat_promise_peek(last_host_call, &why), VAT_PROMISE_BROKEN);
  ck_assert(vat_is_atom(why, vat_atom_timeout()));
}
END_TEST

/* --- A stop --------------------------------------------------------------- */

typedef struct stop_seen {
  unsigned checks_at_end;
  bool recv_shutdown, recv_dead;
  unsigned got;
} stop_seen;
static stop_seen seen;

static bool stopped_check(void *world, bool quiescent, char *why, size_t n) {
  senders *w = world;
  if (quiescent) {
    seen.checks_at_end++;
    seen.recv_shutdown =
        vat_is_atom(vat_ref_exit_reason(w->recv), vat_atom_shutdown());
    seen.recv_dead = vat_ref_is_dead(w->recv);
    seen.got = w->got;
  }
  return senders_check(world, quiescent, why, n);
}

static bool all_arrived(void *world, bool quiescent, char *why, size_t n) {
  senders *w = world;
  if (quiescent && w->got != SENDERS * PER_SENDER) {
    snprintf(why, n, "%u of %d messages arrived", w->got, SENDERS * PER_SENDER);
    return false;
  }
  return true;
}

/* A stop ends the world right after the step's turn: nothing runs after
 * it, what was queued is dropped, the vats alive read `shutdown`; the
 * check runs once at the end (and may fail then), `done` is not asked. */
START_TEST(a_stop_strikes_as_planned) {
  vat_sim_scenario sc = senders_sc;
  sc.check = stopped_check;
  for (uint64_t seed = 1; seed <= 20; seed++) {
    vat_sim_options o = sim_options(seed % 2 ? VAT_SIM_RANDOM : VAT_SIM_PCT, 0);
    o.plan = "step 5: stop recv";
    vat_sim_result r;
    memset(&seen, 0, sizeof seen);
    ck_assert_vat_ok(vat_sim_replay(&sc, &o, seed, &r));
    ck_assert_msg(!r.failed, "%s", r.message); /* not done, not asked */
    ck_assert_uint_eq(r.nfaults, 1);
    ck_assert_uint_eq(r.faults[0].kind, VAT_SIM_STOP);
    uint64_t at = r.faults[0].step;
    ck_assert_uint_ge(at, 5);
    char want[64];
    snprintf(want, sizeof want, "step %llu: stop recv", (unsigned long long)at);
    ck_assert_str_eq(r.plan, want);
    ck_assert_uint_eq(r.steps, at);
    ck_assert_uint_le(r.turns, at);
    ck_assert_uint_eq(seen.checks_at_end, 1);
    ck_assert(seen.recv_shutdown);
    ck_assert(!seen.recv_dead);
    ck_assert_uint_lt(seen.got, SENDERS * PER_SENDER);
    vat_sim_scenario strict = senders_sc;
    strict.check = all_arrived;
    ck_assert_vat_ok(vat_sim_replay(&strict, &o, seed, &r));
    ck_assert(r.failed);
    ck_assert_uint_eq(r.verdict, VAT_SIM_BROKE_INVARIANT);
    char says[64];
    snprintf(says, sizeof says,
             "invariant after the stop at step %llu: ", (unsigned long long)at);
    ck_assert_msg(strncmp(r.message, says, strlen(says)) == 0, "%s", r.message);
  }
}
END_TEST

/* A world of one system tells its end-state check that a stop ended it,
 * as a world of two does: vat_sim_system_stopped and the notes say so. */
static vat_system *alone_sys;
static bool alone_stopped_at_end;

static void *alone_setup(vat_system *sys, void *ctx) {
  alone_sys = sys;
  return senders_setup(sys, ctx);
}

static bool alone_check(void *world, bool quiescent, char *why, size_t n) {
  if (quiescent)
    alone_stopped_at_end = vat_sim_system_stopped(alone_sys);
  return senders_check(world, quiescent, why, n);
}

START_TEST(a_stop_in_a_world_of_one_is_seen_by_the_check) {
  vat_sim_scenario sc = {.name = "alone",
                         .setup = alone_setup,
                         .check = alone_check,
                         .done = senders_done};
  vat_sim_options o = sim_options(VAT_SIM_RANDOM, 0);
  o.plan = "step 5: stop recv";
  vat_sim_result r;
  alone_stopped_at_end = false;
  ck_assert_vat_ok(vat_sim_replay(&sc, &o, 1, &r));
  ck_assert_msg(!r.failed, "%s", r.message);
  ck_assert_uint_eq(r.nfaults, 1);
  ck_assert_msg(alone_stopped_at_end,
                "vat_sim_system_stopped was false at the end; notes: %s",
                r.notes);
  ck_assert_msg(strstr(r.notes, ": stop m0") != NULL, "%s", r.notes);
  ck_assert(!vat_sim_system_stopped(alone_sys)); /* no world runs now */
  vat_sim_result again;
  o.plan = r.plan;
  ck_assert_vat_ok(vat_sim_replay(&sc, &o, 1, &again));
  ck_assert_uint_eq(again.digest, r.digest);
  ck_assert_str_eq(again.notes, r.notes);
}
END_TEST

/* --- Every kind together -------------------------------------------------- */

/* One world with timers, requests and messages between senders. */
typedef struct mixed {
  senders *s;
  ticker *t;
  payments *p;
} mixed;

static void *mixed_setup(vat_system *sys, void *ctx) {
  mixed *m = GC_MALLOC(sizeof *m);
  static int periodic;
  m->s = senders_setup(sys, NULL);
  m->t = ticker_setup(sys, &periodic);
  m->p = payments_setup(sys, ctx);
  return m->s && m->t && m->p ? m : NULL;
}

static bool mixed_check(void *world, bool quiescent, char *why, size_t n) {
  mixed *m = world;
  return senders_check(m->s, quiescent, why, n) &&
         payments_check(m->p, quiescent, why, n);
}

/* Every kind drawn together: each one shows in the plans' text, and each
 * run's plan, pasted back, replays it exactly. */
START_TEST(every_kind_replays_from_its_plan) {
  vat_sim_scenario sc = {
      .name = "mixed", .setup = mixed_setup, .check = mixed_check};
  unsigned seen_kind[VAT_SIM_STOP + 1] = {0};
  for (uint64_t seed = 1; seed <= 150; seed++) {
    vat_sim_options o = with_kinds(seed % 2 ? VAT_SIM_RANDOM : VAT_SIM_PCT,
                                   VAT_SIM_FAULTS_ALL, 0.1);
    o.max_faults = 8;
    o.shrink_runs = 0;
    vat_sim_result drawn, planned;
    ck_assert_vat_ok(vat_sim_replay(&sc, &o, seed, &drawn));
    for (unsigned i = 0; i < drawn.nfaults; i++)
      seen_kind[drawn.faults[i].kind]++;
    o.plan = drawn.plan;
    ck_assert_vat_ok(vat_sim_replay(&sc, &o, seed, &planned));
    ck_assert_msg(planned.digest == drawn.digest, "seed %llu: %s / %s",
                  (unsigned long long)seed, drawn.plan, planned.plan);
    ck_assert_uint_eq(planned.turns, drawn.turns);
    ck_assert_str_eq(planned.message, drawn.message);
    ck_assert_str_eq(planned.plan, drawn.plan);
    ck_assert_uint_eq(planned.plan_missed, 0);
  }
  for (int k = 0; k <= VAT_SIM_STOP; k++)
    ck_assert_msg(seen_kind[k] >= 3, "kind %d struck %u times", k,
                  seen_kind[k]);
}
END_TEST

/* The buggy client's double charge, found among faults of every kind,
 * shrinks to the one timeout that causes it. */
START_TEST(a_timeout_failure_shrinks_to_the_timeout) {
  vat_sim_scenario sc = {.name = "mixed-retry",
                         .setup = mixed_setup,
                         .check = mixed_check,
                         .ctx = &retrying};
  vat_sim_options o = with_kinds(VAT_SIM_RANDOM, VAT_SIM_FAULTS_ALL, 0.15);
  o.max_faults = 8;
  vat_sim_result r;
  unsigned found = 0;
  for (uint64_t next = 1; found < 3; next = r.seed + 1) {
    ck_assert_vat_ok(vat_sim_run(&sc, &o, next, 2000, &r));
    ck_assert_msg(r.failed, "no failure from seed %llu",
                  (unsigned long long)next);
    if (strstr(r.message, "charged") == NULL || r.nfaults < 2)
      continue;
    found++;
    fprintf(stderr,
            "sim: mixed-retry seed %llu: %s\n  shrunk in %llu runs "
            "to %s\n",
            (unsigned long long)r.seed, r.plan,
            (unsigned long long)r.shrunk.runs, r.shrunk.plan);
    ck_assert(r.shrunk.done);
    ck_assert_uint_eq(r.shrunk.nfaults, 1);
    ck_assert_msg(strstr(r.shrunk.plan, ": timeout payments") != NULL, "%s",
                  r.shrunk.plan);
    ck_assert_msg(strstr(r.shrunk.message, "charged 2 times") != NULL, "%s",
                  r.shrunk.message);
    vat_sim_options again = o;
    again.plan = r.shrunk.plan;
    vat_sim_result a;
    ck_assert_vat_ok(vat_sim_replay(&sc, &again, r.seed, &a));
    ck_assert_uint_eq(a.digest, r.shrunk.digest);
  }
}
END_TEST

START_TEST(bad_fault_options_are_refused) {
  vat_sim_options o = sim_options(VAT_SIM_RANDOM, 0.1);
  vat_sim_result r;
  o.fault_kinds = VAT_SIM_FAULTS_ALL + 1;
  ck_assert_vat_err(vat_sim_replay(&senders_sc, &o, 1, &r), VAT_EINVAL);
  o.fault_kinds = VAT_SIM_FAULT(VAT_SIM_DELAY);
  o.max_delay_steps = 0;
  ck_assert_vat_err(vat_sim_replay(&senders_sc, &o, 1, &r), VAT_EINVAL);
  o.fault_kinds = VAT_SIM_FAULT(VAT_SIM_JITTER);
  o.max_jitter_ns = 0;
  ck_assert_vat_err(vat_sim_replay(&senders_sc, &o, 1, &r), VAT_EINVAL);
  o.fault_kinds = VAT_SIM_FAULT(VAT_SIM_KILL); /* the zero maxima unread */
  ck_assert_vat_ok(vat_sim_replay(&senders_sc, &o, 1, &r));
}
END_TEST

Suite *test_sim_faults_suite(void) {
  Suite *s = suite_create("sim_faults");
  TCase *kinds = test_case("kinds", 120);
  tcase_add_test(kinds, a_delay_strikes_as_planned);
  tcase_add_test(kinds, per_sender_order_holds_under_heavy_delay);
  tcase_add_test(kinds, a_jitter_strikes_as_planned);
  tcase_add_test(kinds, a_timeout_strikes_as_planned);
  tcase_add_test(kinds, a_stop_strikes_as_planned);
  tcase_add_test(kinds, a_stop_in_a_world_of_one_is_seen_by_the_check);
  tcase_add_test(kinds, every_kind_replays_from_its_plan);
  tcase_add_test(kinds, a_timeout_failure_shrinks_to_the_timeout);
  tcase_add_test(kinds, bad_fault_options_are_refused);
  suite_add_tcase(s, kinds);
  return s;
}
