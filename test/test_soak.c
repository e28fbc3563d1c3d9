/* Fault-injection soak: several systems with two workers each, vats that
 * forward messages across systems while they are killed, fail their turns,
 * stop, call each other, arm timers and link, host threads that send, kill
 * and call into them, and shutdowns that catch traffic in flight. After
 * each run it checks what the headers promise:
 *
 *  - conservation: every application message a send accepted (VAT_OK, in
 *    a turn that committed) was delivered, dead-lettered or dropped at
 *    shutdown, once. Application messages are dynamic messages with the
 *    selector `soak.app`: the receive handler counts deliveries and the
 *    dead-letter hook counts dead letters; what neither saw must fit in
 *    the system's dropped_at_shutdown (which also counts the runtime's
 *    own messages), and must be zero when the shutdown reached quiescence;
 *    requests count too: each request accepted (from a committed turn or
 *    a host thread) ran its handler or was dropped, so the requests whose
 *    handler never ran fit, with the app messages unseen, in the system's
 *    dead letters not of app messages plus its dropped_at_shutdown (the
 *    counters count a request as any message: vat/core.h). Part of the
 *    app traffic travels as requests for it;
 *  - every monitor and every link of the observers (vats of the system
 *    stopped last, trapping exits) fired at most once, and exactly once
 *    for a vat that ended before that system stopped;
 *  - every request the observers made settled at most once (its vat_when
 *    ran at most once), and exactly once where the headers promise an
 *    end: a request with a timeout settles while the observers' system
 *    runs (checked before it stops, as a stopped system's timers stop
 *    with it), and one to a vat that ended or whose system stopped
 *    first breaks. A request without a timeout to a vat of the observers'
 *    own system that keeps its resolver and lives on is owed for ever:
 *    no check applies. Every request a vat made settled at most once; every
 * host request's promise is settled once everything stopped, and stays as it
 * was first seen;
 *  - a one-shot timer fires at most once and never before its delay;
 *  - stop callbacks run at most once.
 *
 * Seeded (VAT_TEST_SEED replays the choices, not the thread interleaving).
 * A few seconds by default, less under TEST_SCALE or VAT_TEST_QUICK;
 * VAT_SOAK_SECONDS=600 runs for ten minutes (run build/test/vat-tests soak
 * directly: meson stops a suite after 600 s); VAT_SOAK_VERBOSE=1 prints
 * each run's figures and each vat's end. The last line printed gives runs,
 * messages, faults injected and violations, after a count per check.
 */
#include "util/gc.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "suites.h"
#include "support.h"
#include "vat/exits.h"
#include "vat/promise.h"
#include "vat/timer.h"

enum {
  MAX_SYSTEMS = 3,
  MAX_PER_SYSTEM = 8,
  MAX_WORKERS = MAX_SYSTEMS * MAX_PER_SYSTEM,
  OBSERVERS = 2,
  HOST_THREADS = 2,
  MAX_HOST_CALLS = 2048,
  MAX_OBS_CALLS = 1024,
};

/* --- Violations ------------------------------------------------------- */

#define SOAK_CHECKS(X)                                                         \
  X(app_duplicated, "app messages handled or dead-lettered more often than "   \
                    "accepted")                                                \
  X(app_lost, "accepted app messages neither delivered, dead-lettered nor "    \
              "dropped at shutdown")                                           \
  X(request_lost, "accepted requests neither run nor counted as dead letters " \
                  "or dropped at shutdown")                                    \
  X(dropped_when_quiet, "messages dropped by a shutdown that reached "         \
                        "quiescence")                                          \
  X(stop_twice, "a stop callback ran twice")                                   \
  X(down_twice, "a monitor fired twice")                                       \
  X(down_missing, "a monitor on a vat that ended never fired")                 \
  X(down_unknown, "a down notification for a monitor never made")              \
  X(exit_twice, "a link delivered two exits")                                  \
  X(exit_missing, "a link to a vat that ended delivered no exit")              \
  X(when_twice, "a promise's vat_when ran twice")                              \
  X(when_missing, "an observer's request never settled")                       \
  X(host_promise_pending, "a host request's promise never settled")            \
  X(host_promise_changed, "a host request's promise settled twice")            \
  X(timer_early, "a timer fired before its delay")                             \
  X(timer_twice, "a one-shot timer fired twice")                               \
  X(shutdown_rc, "an unexpected result from vat_system_shutdown")              \
  X(last_not_quiet, "the last system did not reach quiescence")                \
  X(api_error, "an unexpected error code from the API")

enum {
#define SOAK_ENUM(name, text) V_##name,
  SOAK_CHECKS(SOAK_ENUM)
#undef SOAK_ENUM
      V_COUNT
};

static const char *const check_name[] = {
#define SOAK_NAME(name, text) #name,
    SOAK_CHECKS(SOAK_NAME)
#undef SOAK_NAME
};

static const char *const check_text[] = {
#define SOAK_TEXT(name, text) text,
    SOAK_CHECKS(SOAK_TEXT)
#undef SOAK_TEXT
};

static _Atomic uint64_t violations[V_COUNT];
static _Atomic uint64_t reported;

/* Counts a violation; prints the first few. Any thread. */
static void violation(int check, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void violation(int check, const char *fmt, ...) {
  atomic_fetch_add(&violations[check], 1);
  if (atomic_fetch_add(&reported, 1) >= 20)
    return;
  char buf[256];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  fprintf(stderr, "soak: %s: %s\n", check_name[check], buf);
}

/* An API call whose result must be VAT_OK, in a handler or host thread. */
#define soak_ok(expr)                                                          \
  do {                                                                         \
    int soak__rc = (expr);                                                     \
    if (soak__rc != VAT_OK)                                                    \
      violation(V_api_error, "%s returned %s", #expr, vat_err_name(soak__rc)); \
  } while (0)

/* --- The run's state (static: the collector scans it) ----------------- */

typedef struct soak_system {
  vat_system *sys;
  _Atomic uint64_t accepted;  /* app messages accepted for its vats */
  _Atomic uint64_t delivered; /* app messages its vats handled */
  _Atomic uint64_t dead;      /* app messages its dead-letter hook saw */
  _Atomic uint64_t req_accepted, req_delivered; /* requests to its vats */
  int shutdown_rc;
  vat_stats stats;
} soak_system;

/* A worker vat's state. */
typedef struct worker {
  unsigned id;
  unsigned sys;
  uint64_t rng;
  vat_timer *every;
  unsigned ticks, tick_limit;
  vat_resolver *owed; /* a request answered in a later turn, or never */
} worker;

/* What the checks know of a worker vat, outside it. */
typedef struct worker_rec {
  vat_ref *ref;
  unsigned sys;
  _Atomic uint64_t stopped; /* its stop callback ran */
  uint64_t monitor_id[OBSERVERS];
  _Atomic uint64_t downs[OBSERVERS];
  _Atomic uint64_t exits[OBSERVERS];
} worker_rec;

/* A request and the vat_when on its promise. */
typedef struct call_rec {
  _Atomic uint64_t issued;
  _Atomic uint64_t settled;
  unsigned target;
  double timeout_s;
} call_rec;

/* A one-shot timer: never early, never twice. */
typedef struct timer_rec {
  double armed_at, delay_s;
  _Atomic uint64_t fired;
} timer_rec;

typedef struct host_call {
  vat_promise *promise;
  vat_promise_state seen; /* what vat_promise_wait found, if settled */
} host_call;

static struct {
  uint64_t seed;
  unsigned nsys, nworkers;
  soak_system systems[MAX_SYSTEMS];
  worker_rec workers[MAX_WORKERS];
  vat_ref *observers[OBSERVERS];
  _Atomic uint64_t observers_ready;
  call_rec *obs_calls[MAX_OBS_CALLS];
  _Atomic uint64_t obs_calls_n;
  host_call host_calls[HOST_THREADS][MAX_HOST_CALLS];
  unsigned host_calls_n[HOST_THREADS];
  _Atomic uint64_t host_stop;
  const vat_atom *app, *fault;
  double fault_scale;
} run;

/* Totals over all runs. */
static _Atomic uint64_t total_messages, total_faults;

static void fault(void) {
  atomic_fetch_add_explicit(&total_faults, 1, memory_order_relaxed);
}

static uint64_t rand_below(uint64_t *rng, uint64_t n) {
  return test_rand(rng) % n;
}

static bool chance(uint64_t *rng, unsigned per_mille) {
  return rand_below(rng, 1000) < per_mille;
}

/* A fault's chance, in 1/100000, scaled by the run's fault intensity:
 * some runs end most vats early, others keep most alive until their
 * system stops. */
static bool faulty(uint64_t *rng, unsigned per_100k) {
  return (double)rand_below(rng, 100000) < per_100k * run.fault_scale;
}

static int worker_of(vat_ref *ref) {
  for (unsigned i = 0; i < run.nworkers; i++)
    if (run.workers[i].ref == ref)
      return (int)i;
  return -1;
}

static vat_value fault_reason(uint64_t *rng) {
  return vat_reason_error(run.fault, vat_int((int64_t)rand_below(rng, 1000)));
}

/* --- Worker vats ------------------------------------------------------ */

static void count_accepted(unsigned target, uint64_t n) {
  atomic_fetch_add_explicit(&run.systems[run.workers[target].sys].accepted, n,
                            memory_order_relaxed);
}

static void count_request(unsigned target, uint64_t n) {
  atomic_fetch_add_explicit(&run.systems[run.workers[target].sys].req_accepted,
                            n, memory_order_relaxed);
}

/* What one turn sent, counted only if it commits. */
typedef struct turn_sent {
  uint64_t msgs[MAX_WORKERS], reqs[MAX_WORKERS];
} turn_sent;

static void count_sent(const turn_sent *ts) {
  for (unsigned i = 0; i < run.nworkers; i++) {
    if (ts->msgs[i])
      count_accepted(i, ts->msgs[i]);
    if (ts->reqs[i])
      count_request(i, ts->reqs[i]);
  }
}

static void worker_stopped(void *state, vat_value reason) {
  worker *w = state;
  if (getenv("VAT_SOAK_VERBOSE")) {
    char buf[96];
    vat_format(reason, buf, sizeof buf);
    fprintf(stderr, "soak: worker %u of system %u ended: %s\n", w->id, w->sys,
            buf);
  }
  if (atomic_fetch_add(&run.workers[w->id].stopped, 1) != 0)
    violation(V_stop_twice, "worker %u", w->id);
}

static void request(vat_turn *turn, void *state, void *arg,
                    vat_resolver *resolver) {
  (void)arg;
  worker *w = state;
  atomic_fetch_add_explicit(&run.systems[w->sys].req_delivered, 1,
                            memory_order_relaxed);
  if (faulty(&w->rng, 15)) {
    fault();
    soak_ok(vat_fail(turn, fault_reason(&w->rng))); /* breaks the request */
    return;
  }
  if (w->owed == NULL && chance(&w->rng, 100)) {
    w->owed = resolver; /* the vat owes it; its end must break it */
    return;
  }
  if (faulty(&w->rng, 3))
    soak_ok(vat_stop(turn));
  soak_ok(vat_resolve(turn, resolver, vat_int(w->id)));
}

static void worker_when(vat_turn *turn, void *state, void *ctx, bool resolved,
                        vat_value value) {
  (void)turn, (void)state, (void)resolved, (void)value;
  call_rec *c = ctx;
  if (atomic_fetch_add(&c->settled, 1) != 0)
    violation(V_when_twice, "a worker's request to worker %u", c->target);
}

static void one_shot(vat_turn *turn, void *state, void *arg) {
  (void)turn, (void)state;
  timer_rec *t = arg;
  double late = test_wall_seconds() - t->armed_at - t->delay_s;
  if (late < 0)
    violation(V_timer_early, "fired %.6f s before its delay of %.3f s", -late,
              t->delay_s);
  if (atomic_fetch_add(&t->fired, 1) != 0)
    violation(V_timer_twice, "delay %.3f s", t->delay_s);
}

static void periodic(vat_turn *turn, void *state, void *arg) {
  (void)turn, (void)arg;
  worker *w = state;
  if (w->every != NULL && ++w->ticks >= w->tick_limit) {
    int rc = vat_timer_cancel(w->every);
    if (rc != VAT_OK)
      violation(V_api_error, "vat_timer_cancel of a live periodic timer: %s",
                vat_err_name(rc));
    w->every = NULL;
  }
}

static unsigned random_worker(uint64_t *rng) {
  return (unsigned)rand_below(rng, run.nworkers);
}

static void app_request(vat_turn *turn, void *state, void *arg,
                        vat_resolver *resolver);

/* Sends app messages on, one in four as a request; notes how many went
 * to each worker, counted only if the turn commits. */
static void forward(vat_turn *turn, worker *w, int64_t hops, turn_sent *ts) {
  /* Two or none as often: the traffic neither dies out nor explodes. A
   * circulating message (hops < 0) goes on alone until the run ends. */
  uint64_t r = rand_below(&w->rng, 100);
  unsigned n = hops < 0 ? 1 : r < 15 ? 2 : r < 30 ? 0 : 1;
  for (unsigned i = 0; i < n; i++) {
    unsigned to = random_worker(&w->rng);
    /* Circulating messages look for a live vat, so that they outlive the
     * faults and keep the systems busy until they stop. */
    for (unsigned tries = 0;
         hops < 0 && tries < 8 && vat_ref_is_dead(run.workers[to].ref); tries++)
      to = random_worker(&w->rng);
    if (chance(&w->rng, 250)) {
      vat_promise *p;
      soak_ok(vat_call(turn, run.workers[to].ref, app_request,
                       (void *)(intptr_t)hops, 0, &p));
      ts->reqs[to]++;
    } else {
      soak_ok(
          vat_send_msg(turn, run.workers[to].ref, run.app, vat_int(hops)));
      ts->msgs[to]++;
    }
  }
}

/* The other effects a turn may have: requests, timers, links, kills. */
static void act(vat_turn *turn, worker *w, turn_sent *ts) {
  uint64_t *rng = &w->rng;
  if (chance(rng, 30)) {
    call_rec *c = GC_MALLOC(sizeof *c);
    c->target = random_worker(rng);
    c->timeout_s = chance(rng, 500) ? 0 : 0.01 + 0.001 * rand_below(rng, 100);
    vat_promise *p;
    soak_ok(vat_call(turn, run.workers[c->target].ref, request, NULL,
                     c->timeout_s, &p));
    soak_ok(vat_when(turn, p, worker_when, c));
    ts->reqs[c->target]++;
  }
  if (chance(rng, 20)) {
    timer_rec *t = GC_MALLOC(sizeof *t);
    t->delay_s = 0.001 * (double)(1 + rand_below(rng, 20));
    t->armed_at = test_wall_seconds();
    soak_ok(vat_later(turn, t->delay_s, vat_self(turn), one_shot, t, NULL));
  }
  if (w->every == NULL && chance(rng, 10)) {
    w->ticks = 0;
    w->tick_limit = 2 + (unsigned)rand_below(rng, 8);
    soak_ok(vat_every(turn, 0.001 * (double)(2 + rand_below(rng, 10)),
                      vat_self(turn), periodic, NULL, &w->every));
  }
  if (faulty(rng, 15))
    soak_ok(vat_link(turn, run.workers[random_worker(rng)].ref));
  if (faulty(rng, 7)) {
    fault();
    soak_ok(vat_kill(turn, run.workers[random_worker(rng)].ref));
  }
  if (faulty(rng, 7)) {
    fault();
    soak_ok(
        vat_exit(turn, run.workers[random_worker(rng)].ref, fault_reason(rng)));
  }
}

/* An app message (or request): forwarded while it has hops left; now and
 * then the turn fails (after its sends, which must then be discarded) or
 * the vat stops. */
static void handle_app(vat_turn *turn, worker *w, int64_t hops) {
  atomic_fetch_add_explicit(&total_messages, 1, memory_order_relaxed);
  turn_sent ts = {0};
  if (hops > 0)
    forward(turn, w, hops - 1, &ts);
  else if (hops < 0 &&
           !atomic_load_explicit(&run.host_stop, memory_order_relaxed))
    forward(turn, w, hops, &ts);
  act(turn, w, &ts);
  if (w->owed != NULL && chance(&w->rng, 100)) {
    soak_ok(vat_resolve(turn, w->owed, vat_int(w->id)));
    w->owed = NULL;
  }
  if (faulty(&w->rng, 20)) {
    fault();
    soak_ok(vat_fail(turn, fault_reason(&w->rng)));
    return; /* nothing of this turn was sent */
  }
  if (faulty(&w->rng, 7))
    soak_ok(vat_stop(turn));
  count_sent(&ts);
}

static void worker_receive(vat_turn *turn, void *state,
                           const vat_atom *selector, vat_value value) {
  worker *w = state;
  if (selector != run.app) {
    violation(V_api_error, "unexpected selector %s", vat_atom_name(selector));
    return;
  }
  atomic_fetch_add_explicit(&run.systems[w->sys].delivered, 1,
                            memory_order_relaxed);
  int64_t hops = 0;
  soak_ok(vat_get_int(value, &hops));
  handle_app(turn, w, hops);
}

/* An app request: answered, then handled as an app message. */
static void app_request(vat_turn *turn, void *state, void *arg,
                        vat_resolver *resolver) {
  worker *w = state;
  atomic_fetch_add_explicit(&run.systems[w->sys].req_delivered, 1,
                            memory_order_relaxed);
  soak_ok(vat_resolve(turn, resolver, vat_int(w->id)));
  handle_app(turn, w, (int64_t)(intptr_t)arg);
}

static const vat_entity_def worker_def = {
    .state_size = sizeof(worker),
    .receive = worker_receive,
    .on_stop = worker_stopped,
};

/* --- Observers: in the system stopped last; trap exits, never die ------ */

typedef struct observer {
  unsigned index;
} observer;

static void observer_exit(vat_turn *turn, void *state, vat_ref *from,
                          vat_value reason) {
  (void)turn, (void)reason;
  observer *o = state;
  int i = worker_of(from);
  if (i < 0) {
    violation(V_api_error, "observer %u: exit from an unknown vat", o->index);
    return;
  }
  if (atomic_fetch_add(&run.workers[i].exits[o->index], 1) != 0)
    violation(V_exit_twice, "observer %u, worker %d", o->index, i);
}

static void observer_down(vat_turn *turn, void *state, uint64_t monitor,
                          vat_ref *who, vat_value reason) {
  (void)turn, (void)reason;
  observer *o = state;
  int i = worker_of(who);
  if (i < 0 || run.workers[i].monitor_id[o->index] != monitor) {
    violation(V_down_unknown, "observer %u, monitor %" PRIu64, o->index,
              monitor);
    return;
  }
  if (atomic_fetch_add(&run.workers[i].downs[o->index], 1) != 0)
    violation(V_down_twice, "observer %u, worker %d", o->index, i);
}

static void observer_setup(vat_turn *turn, void *state, void *arg) {
  (void)arg;
  observer *o = state;
  soak_ok(vat_trap_exit(turn, vat_self(turn), observer_exit));
  for (unsigned i = 0; i < run.nworkers; i++) {
    soak_ok(vat_link(turn, run.workers[i].ref));
    soak_ok(vat_monitor(turn, run.workers[i].ref, observer_down,
                        &run.workers[i].monitor_id[o->index]));
  }
  atomic_fetch_add(&run.observers_ready, 1);
}

static void observer_when(vat_turn *turn, void *state, void *ctx, bool resolved,
                          vat_value value) {
  (void)turn, (void)state, (void)resolved, (void)value;
  call_rec *c = ctx;
  if (atomic_fetch_add(&c->settled, 1) != 0)
    violation(V_when_twice, "an observer's request to worker %u", c->target);
}

/* A host thread asks an observer to make a request (observers' turns
 * never fail, so it is issued for sure). */
static void observer_call(vat_turn *turn, void *state, void *arg) {
  (void)state;
  call_rec *c = arg;
  vat_promise *p;
  soak_ok(vat_call(turn, run.workers[c->target].ref, request, NULL,
                   c->timeout_s, &p));
  soak_ok(vat_when(turn, p, observer_when, c));
  count_request(c->target, 1);
  atomic_store(&c->issued, 1);
}

/* --- Host threads ----------------------------------------------------- */

typedef struct host_arg {
  unsigned index;
  uint64_t rng;
} host_arg;

static bool host_rc_ok(int rc) {
  return rc == VAT_OK || rc == VAT_ECLOSED;
}

static void host_send(uint64_t *rng) {
  unsigned to = random_worker(rng);
  int rc = vat_host_send_msg(
      run.workers[to].ref, run.app,
      vat_int(chance(rng, 20) ? -1 : (int64_t)rand_below(rng, 64)));
  if (rc == VAT_OK)
    count_accepted(to, 1);
  else if (!host_rc_ok(rc))
    violation(V_api_error, "vat_host_send_msg: %s", vat_err_name(rc));
}

static void host_kill(uint64_t *rng) {
  vat_value reason =
      chance(rng, 500) ? vat_atom_value(vat_atom_killed()) : fault_reason(rng);
  int rc = vat_host_exit(run.workers[random_worker(rng)].ref, reason);
  if (rc == VAT_OK)
    fault();
  else if (!host_rc_ok(rc))
    violation(V_api_error, "vat_host_exit: %s", vat_err_name(rc));
}

static void host_request(host_arg *h) {
  uint64_t *rng = &h->rng;
  if (run.host_calls_n[h->index] == MAX_HOST_CALLS)
    return;
  double timeout_s = chance(rng, 500) ? 0 : 0.005 + 0.001 * rand_below(rng, 50);
  vat_promise *p;
  unsigned to = random_worker(rng);
  int rc = vat_host_call(run.workers[to].ref, request, NULL, timeout_s, &p);
  if (rc != VAT_OK) {
    if (!host_rc_ok(rc))
      violation(V_api_error, "vat_host_call: %s", vat_err_name(rc));
    return;
  }
  count_request(to, 1);
  host_call *hc = &run.host_calls[h->index][run.host_calls_n[h->index]++];
  hc->promise = p;
  rc = vat_promise_wait(p, 0.001 * (double)rand_below(rng, 20), NULL);
  if (rc == VAT_OK)
    hc->seen = VAT_PROMISE_RESOLVED;
  else if (rc == VAT_EBROKEN)
    hc->seen = VAT_PROMISE_BROKEN;
  else if (rc == VAT_ETIMEDOUT)
    hc->seen = VAT_PROMISE_PENDING;
  else
    violation(V_api_error, "vat_promise_wait: %s", vat_err_name(rc));
}

static void host_observer_call(uint64_t *rng) {
  uint64_t slot = atomic_fetch_add(&run.obs_calls_n, 1);
  if (slot >= MAX_OBS_CALLS)
    return;
  call_rec *c = GC_MALLOC(sizeof *c);
  c->target = random_worker(rng);
  c->timeout_s = chance(rng, 500) ? 0 : 0.01 + 0.001 * rand_below(rng, 100);
  run.obs_calls[slot] = c;
  /* The observers' system runs until the host threads are done. */
  soak_ok(vat_host_send(run.observers[rand_below(rng, OBSERVERS)],
                        observer_call, c));
}

static void *host_main(void *p) {
  /* Made by the collector's pthread_create (vat_gc.h): registered. */
  host_arg *h = p;
  for (unsigned i = 0; !atomic_load(&run.host_stop); i++) {
    uint64_t r = rand_below(&h->rng, 100);
    if (faulty(&h->rng, 1))
      host_kill(&h->rng);
    if (r < 76)
      host_send(&h->rng);
    else if (r < 80)
      host_request(h);
    else if (r < 84)
      host_observer_call(&h->rng);
    if (i % 32 == 31)
      test_sleep(0.0005); /* let the workers keep up */
  }
  return NULL;
}

/* --- A run ------------------------------------------------------------ */

static void on_dead_letter(void *ctx, vat_ref *target,
                           const vat_atom *selector) {
  (void)target;
  soak_system *s = ctx;
  if (selector == run.app)
    atomic_fetch_add_explicit(&s->dead, 1, memory_order_relaxed);
}

static void start_systems(uint64_t *rng) {
  run.nsys = 2 + (unsigned)rand_below(rng, MAX_SYSTEMS - 1);
  for (unsigned s = 0; s < run.nsys; s++) {
    vat_config cfg;
    vat_config_default(&cfg);
    cfg.workers = 2;
    cfg.batch = chance(rng, 300) ? 1 + (unsigned)rand_below(rng, 4) : 64;
    cfg.on_dead_letter = on_dead_letter;
    cfg.dead_letter_ctx = &run.systems[s];
    ck_assert_vat_ok(vat_system_new(&cfg, &run.systems[s].sys));
  }
}

static void spawn_workers(uint64_t *rng) {
  for (unsigned s = 0; s < run.nsys; s++) {
    unsigned n = 3 + (unsigned)rand_below(rng, MAX_PER_SYSTEM - 2);
    for (unsigned i = 0; i < n; i++) {
      worker *w;
      unsigned id = run.nworkers++;
      ck_assert_vat_ok(vat_host_spawn(run.systems[s].sys, &worker_def,
                                      &run.workers[id].ref, (void **)&w));
      w->id = id;
      w->sys = s;
      w->rng = test_rand(rng) | 1;
      run.workers[id].sys = s;
    }
  }
}

/* Observers live in system 0, which is stopped last. */
static void spawn_observers(void) {
  for (unsigned i = 0; i < OBSERVERS; i++) {
    observer *o;
    ck_assert_vat_ok(vat_host_spawn(run.systems[0].sys,
                                    &(vat_entity_def){.state_size = sizeof *o},
                                    &run.observers[i], (void **)&o));
    o->index = i;
    ck_assert_vat_ok(vat_host_send(run.observers[i], observer_setup, NULL));
  }
  ck_assert_msg(test_wait_u64(&run.observers_ready, OBSERVERS, 30),
                "the observers did not set up");
}

static void seed_traffic(uint64_t *rng) {
  for (unsigned i = 0; i < run.nworkers; i++) {
    int rc = vat_host_send_msg(
        run.workers[i].ref, run.app,
        vat_int(i % 2 ? -1 : 16 + (int64_t)rand_below(rng, 48)));
    if (rc == VAT_OK)
      count_accepted(i, 1);
  }
}

/* Systems 1.. stop while traffic is in flight, with short deadlines that
 * often pass: messages are then dropped at shutdown. */
static void stop_others_in_flight(uint64_t *rng) {
  for (unsigned s = run.nsys - 1; s >= 1; s--) {
    double timeout_s =
        chance(rng, 300) ? 0 : 0.001 * (double)rand_below(rng, 20);
    int rc = vat_system_shutdown(run.systems[s].sys, timeout_s);
    run.systems[s].shutdown_rc = rc;
    if (rc != VAT_OK && rc != VAT_ETIMEDOUT)
      violation(V_shutdown_rc, "system %u: %s", s, vat_err_name(rc));
  }
}

static void check_conservation(unsigned s) {
  soak_system *ss = &run.systems[s];
  uint64_t accepted = atomic_load(&ss->accepted);
  uint64_t handled = atomic_load(&ss->delivered) + atomic_load(&ss->dead);
  if (handled > accepted) {
    violation(V_app_duplicated,
              "system %u: accepted %" PRIu64 ", delivered %" PRIu64
              " + dead letters %" PRIu64,
              s, accepted, atomic_load(&ss->delivered), atomic_load(&ss->dead));
    return;
  }
  uint64_t unseen = accepted - handled;
  if (unseen > ss->stats.dropped_at_shutdown)
    violation(V_app_lost,
              "system %u: accepted %" PRIu64 ", delivered %" PRIu64
              ", dead letters %" PRIu64 ", dropped at shutdown %" PRIu64
              " (all kinds): %" PRIu64 " unaccounted for",
              s, accepted, atomic_load(&ss->delivered), atomic_load(&ss->dead),
              ss->stats.dropped_at_shutdown,
              unseen - ss->stats.dropped_at_shutdown);
  if (ss->shutdown_rc == VAT_OK && (ss->stats.dropped_at_shutdown || unseen))
    violation(V_dropped_when_quiet,
              "system %u: %" PRIu64 " dropped, %" PRIu64 " app unseen", s,
              ss->stats.dropped_at_shutdown, unseen);
  /* A request never run was dropped: a dead letter (not an app message's)
   * or a drop at shutdown, as the app messages unseen. */
  uint64_t req_accepted = atomic_load(&ss->req_accepted);
  uint64_t req_ran = atomic_load(&ss->req_delivered);
  uint64_t dead = atomic_load(&ss->dead);
  uint64_t other_dead =
      ss->stats.dead_letters > dead ? ss->stats.dead_letters - dead : 0;
  if (req_ran > req_accepted)
    violation(V_app_duplicated, "system %u: %" PRIu64 " requests ran of %" PRIu64,
              s, req_ran, req_accepted);
  else if (req_accepted - req_ran + unseen >
           other_dead + ss->stats.dropped_at_shutdown)
    violation(V_request_lost,
              "system %u: requests accepted %" PRIu64 ", ran %" PRIu64
              "; app messages unseen %" PRIu64 "; dead letters not app %" PRIu64
              ", dropped at shutdown %" PRIu64 ": %" PRIu64 " unaccounted for",
              s, req_accepted, req_ran, unseen, other_dead,
              ss->stats.dropped_at_shutdown,
              req_accepted - req_ran + unseen - other_dead -
                  ss->stats.dropped_at_shutdown);
}

/* Once the observers' system quiesced, each monitor and link of a vat that
 * ended has fired: every worker of the other systems ended (by a fault or
 * with its system), a worker of system 0 if its stop callback ran. */
static void check_links_and_monitors(bool last_quiet) {
  for (unsigned i = 0; i < run.nworkers; i++) {
    worker_rec *w = &run.workers[i];
    bool ended = w->sys != 0 || atomic_load(&w->stopped) != 0;
    for (unsigned o = 0; o < OBSERVERS; o++) {
      uint64_t downs = atomic_load(&w->downs[o]);
      uint64_t exits = atomic_load(&w->exits[o]);
      if (!last_quiet || !ended)
        continue;
      if (downs == 0)
        violation(V_down_missing, "observer %u, worker %u of system %u%s", o, i,
                  w->sys, atomic_load(&w->stopped) ? " (it failed)" : "");
      if (exits == 0)
        violation(V_exit_missing, "observer %u, worker %u of system %u%s", o, i,
                  w->sys, atomic_load(&w->stopped) ? " (it failed)" : "");
    }
  }
}

static uint64_t observer_calls(void) {
  uint64_t n = atomic_load(&run.obs_calls_n);
  return n > MAX_OBS_CALLS ? MAX_OBS_CALLS : n;
}

/* Whether the observers' request must have settled by now: see the
 * comment at the top. `before_stop`: the observers' system still runs. */
static bool must_settle(call_rec *c, bool before_stop) {
  if (!atomic_load(&c->issued))
    return false;
  if (c->timeout_s > 0)
    return true;
  return !before_stop && (run.workers[c->target].sys != 0 ||
                          atomic_load(&run.workers[c->target].stopped));
}

/* Before the observers' system stops: each request is issued (the host
 * threads asked for it), and each with a timeout has settled once its
 * timeout passed (a generous bound, for loaded hosts). */
static void wait_timed_requests(void) {
  double deadline = test_wall_seconds() + 30;
  for (uint64_t i = 0; i < observer_calls(); i++) {
    call_rec *c = run.obs_calls[i];
    while ((!atomic_load(&c->issued) ||
            (must_settle(c, true) && atomic_load(&c->settled) == 0)) &&
           test_wall_seconds() < deadline)
      test_sleep(0.001);
  }
}

static void check_requests(bool last_quiet) {
  uint64_t n = observer_calls();
  for (uint64_t i = 0; i < n && last_quiet; i++) {
    call_rec *c = run.obs_calls[i];
    if (must_settle(c, false) && atomic_load(&c->settled) == 0)
      violation(V_when_missing,
                "to worker %u of system %u (timeout %.3f s, it %s)", c->target,
                run.workers[c->target].sys, c->timeout_s,
                atomic_load(&run.workers[c->target].stopped) ? "failed"
                                                             : "did not fail");
  }
  for (unsigned h = 0; h < HOST_THREADS; h++)
    for (unsigned i = 0; i < run.host_calls_n[h]; i++) {
      host_call *hc = &run.host_calls[h][i];
      vat_promise_state now = vat_promise_peek(hc->promise, NULL);
      if (now == VAT_PROMISE_PENDING)
        violation(V_host_promise_pending, "host thread %u, request %u", h, i);
      else if (hc->seen != VAT_PROMISE_PENDING && hc->seen != now)
        violation(V_host_promise_changed, "host thread %u, request %u", h, i);
    }
}

static void print_run(void) {
  unsigned alive = 0;
  for (unsigned i = 0; i < run.nworkers; i++)
    alive += atomic_load(&run.workers[i].stopped) == 0;
  unsigned host_calls = 0, host_pending_seen = 0;
  for (unsigned h = 0; h < HOST_THREADS; h++) {
    host_calls += run.host_calls_n[h];
    for (unsigned i = 0; i < run.host_calls_n[h]; i++)
      host_pending_seen += run.host_calls[h][i].seen == VAT_PROMISE_PENDING;
  }
  fprintf(stderr,
          "soak: run: fault scale %.1f, %u workers, %u never failed, %u host "
          "requests (%u still pending when waited on), %" PRIu64
          " observer requests\n",
          run.fault_scale, run.nworkers, alive, host_calls, host_pending_seen,
          atomic_load(&run.obs_calls_n));
  for (unsigned s = 0; s < run.nsys; s++) {
    soak_system *ss = &run.systems[s];
    fprintf(stderr,
            "soak:   system %u: shutdown %s, app accepted %" PRIu64
            " delivered %" PRIu64 " dead %" PRIu64 "; stats delivered %" PRIu64
            " dead %" PRIu64 " dropped %" PRIu64 "\n",
            s, vat_err_name(ss->shutdown_rc), atomic_load(&ss->accepted),
            atomic_load(&ss->delivered), atomic_load(&ss->dead),
            ss->stats.delivered, ss->stats.dead_letters,
            ss->stats.dropped_at_shutdown);
  }
}

static void soak_run(uint64_t seed, double seconds) {
  memset(&run, 0, sizeof run);
  run.app = vat_atom_intern("soak.app");
  run.fault = vat_atom_intern("soak.fault");
  uint64_t rng = seed;
  static const double scales[] = {0.1, 0.5, 3};
  run.fault_scale = scales[rand_below(&rng, 3)];
  start_systems(&rng);
  spawn_workers(&rng);
  spawn_observers();
  seed_traffic(&rng);

  pthread_t threads[HOST_THREADS];
  host_arg args[HOST_THREADS];
  for (unsigned i = 0; i < HOST_THREADS; i++) {
    args[i] = (host_arg){.index = i, .rng = test_rand(&rng) | 1};
    ck_assert_int_eq(pthread_create(&threads[i], NULL, host_main, &args[i]), 0);
  }
  test_sleep(seconds); /* the run's length: traffic flows meanwhile */
  stop_others_in_flight(&rng);
  atomic_store(&run.host_stop, 1);
  for (unsigned i = 0; i < HOST_THREADS; i++)
    pthread_join(threads[i], NULL);
  wait_timed_requests();

  int rc = vat_system_shutdown(run.systems[0].sys, 60);
  run.systems[0].shutdown_rc = rc;
  if (rc != VAT_OK)
    violation(V_last_not_quiet, "%s", vat_err_name(rc));
  for (unsigned s = 0; s < run.nsys; s++)
    run.systems[s].stats = test_stats(run.systems[s].sys);
  for (unsigned s = 0; s < run.nsys; s++)
    check_conservation(s);
  if (getenv("VAT_SOAK_VERBOSE"))
    print_run();
  check_links_and_monitors(rc == VAT_OK);
  check_requests(rc == VAT_OK);
  for (unsigned s = 0; s < run.nsys; s++)
    ck_assert_vat_ok(vat_system_destroy(run.systems[s].sys));
}

static double env_seconds(const char *name) {
  const char *v = getenv(name);
  return v != NULL && *v != '\0' ? strtod(v, NULL) : 0;
}

static bool quick(void) {
  return TEST_SCALE > 1 || test_quick();
}

START_TEST(faults_keep_the_promises) {
  uint64_t seed = test_seed("soak");
  uint64_t rng = seed;
  double total = env_seconds("VAT_SOAK_SECONDS");
  unsigned min_runs = quick() ? 2 : 6;
  double run_s = quick() ? 0.15 : 0.3;
  double start = test_wall_seconds();
  unsigned runs = 0;
  while (runs < min_runs ||
         (total > 0 && test_wall_seconds() - start < total)) {
    uint64_t run_seed = test_rand(&rng) | 1;
    soak_run(run_seed, run_s * (0.5 + (double)rand_below(&rng, 100) / 100));
    runs++;
  }
  uint64_t bad = 0;
  for (int i = 0; i < V_COUNT; i++) {
    uint64_t n = atomic_load(&violations[i]);
    if (n)
      fprintf(stderr, "soak: %" PRIu64 " x %s (%s)\n", n, check_name[i],
              check_text[i]);
    bad += n;
  }
  fprintf(stderr,
          "soak: seed %" PRIu64 ": runs %u, messages %" PRIu64
          ", faults injected %" PRIu64 ", violations %" PRIu64 "\n",
          seed, runs, atomic_load(&total_messages), atomic_load(&total_faults),
          bad);
  ck_assert_msg(bad == 0,
                "%" PRIu64 " violations (replay: VAT_TEST_SEED=%" PRIu64 ")",
                bad, seed);
  ck_assert_uint_eq(test_bad_calls(), 0);
}
END_TEST

Suite *test_soak_suite(void) {
  Suite *s = suite_create("soak");
  TCase *tc = test_case("soak", 240 + 2 * env_seconds("VAT_SOAK_SECONDS"));
  tcase_add_test(tc, faults_keep_the_promises);
  suite_add_tcase(s, tc);
  return s;
}
