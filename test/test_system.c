/* Systems: configuration, lifecycle, errors, shutdown with work in flight,
 * several systems at once, and an idle system that burns no CPU. */
#include <pthread.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

#include "support.h"

/* The collector's own thread calls, without pthread_create redirected to
 * them: the other tests' threads are made with plain pthread_create. */
#define GC_THREADS 1
#define GC_NO_THREAD_REDIRECTS 1
#include <gc/gc.h>

START_TEST(config_defaults) {
  vat_config cfg;
  vat_config_default(&cfg);
  ck_assert_uint_eq(cfg.workers, (unsigned)sysconf(_SC_NPROCESSORS_ONLN));
  ck_assert_uint_eq(cfg.batch, 64);
  ck_assert_uint_eq(cfg.spin, 512);
  ck_assert(cfg.on_dead_letter == NULL);
}
END_TEST

START_TEST(new_rejects_bad_config) {
  vat_config cfg;
  vat_config_default(&cfg);
  vat_system *sys;
  ck_assert_vat_err(vat_system_new(&cfg, NULL), VAT_EINVAL);
  cfg.deterministic = true; /* only for host-driven systems */
  ck_assert_vat_err(vat_system_new(&cfg, &sys), VAT_EINVAL);
  vat_config_default(&cfg);
  cfg.batch = 0;
  ck_assert_vat_err(vat_system_new(&cfg, &sys), VAT_EINVAL);
  ck_assert_vat_err(vat_system_shutdown(NULL, 1), VAT_EINVAL);
  ck_assert_vat_err(vat_system_destroy(NULL), VAT_EINVAL);
  ck_assert_vat_err(vat_system_stats(NULL, &(vat_stats){0}), VAT_EINVAL);
}
END_TEST

START_TEST(default_system_lifecycle) {
  vat_system *sys;
  ck_assert_vat_ok(vat_system_new(NULL, &sys));
  ck_assert_vat_err(vat_system_stats(sys, NULL), VAT_EINVAL);
  ck_assert_vat_ok(vat_system_shutdown(sys, 5));
  ck_assert_vat_err(vat_system_shutdown(sys, 5), VAT_ECLOSED);
  ck_assert_vat_ok(vat_system_destroy(sys));
  ck_assert_vat_err(vat_system_destroy(sys), VAT_ECLOSED);
  vat_ref *ref;
  ck_assert_vat_err(vat_host_spawn(sys, &(vat_entity_def){0}, &ref, NULL),
                    VAT_ECLOSED);
  ck_assert_uint_eq(test_stats(sys).delivered, 0);
}
END_TEST

static void noop(vat_turn *turn, void *state, void *arg) {
  (void)turn;
  (void)state;
  (void)arg;
}

START_TEST(calls_after_shutdown_are_refused) {
  vat_system *sys = test_system(2);
  vat_ref *ref;
  ck_assert_vat_ok(vat_host_spawn(sys, &(vat_entity_def){0}, &ref, NULL));
  ck_assert_vat_ok(vat_host_send(ref, noop, NULL));
  test_quiesce(sys);
  ck_assert_vat_err(vat_host_send(ref, noop, NULL), VAT_ECLOSED);
  ck_assert_vat_err(vat_host_send_msg(ref, vat_atom_intern("x"), vat_null()),
                    VAT_ECLOSED);
  ck_assert_uint_eq(test_stats(sys).delivered, 1);
}
END_TEST

/* A thread the collector made (GC_pthread_create) is registered from its
 * start, and the collector unregisters it when it returns; the header lets
 * it pair vat_thread_register with vat_thread_unregister all the same.
 * Unregistering it twice handed its free lists back twice, the second
 * time lists the first had poisoned: the process crashed at the thread's
 * end, or later in an allocation. */
typedef struct gc_made_job {
  vat_ref *to;
  int register_rc, send_rc, unregister_rc;
} gc_made_job;

static void *gc_made_thread(void *arg) {
  gc_made_job *job = arg;
  job->register_rc = vat_thread_register();
  job->send_rc = vat_host_send(job->to, test_hit, NULL);
  /* Objects of many sizes on this thread's free lists, which an
   * unregistration gives back to the collector's global lists. */
  for (size_t size = 8; size <= 512; size += 8)
    (void)GC_MALLOC(size);
  job->unregister_rc = vat_thread_unregister();
  return NULL;
}

START_TEST(collector_made_thread_pairs_register_and_unregister) {
  enum { THREADS = 8 };
  vat_system *sys = test_system(1);
  test_counter *counter;
  vat_ref *to = test_spawn_counter(sys, &counter);
  for (int i = 0; i < THREADS; i++) {
    gc_made_job job = {.to = to};
    pthread_t t;
    ck_assert_int_eq(GC_pthread_create(&t, NULL, gc_made_thread, &job), 0);
    ck_assert_int_eq(GC_pthread_join(t, NULL), 0);
    ck_assert_vat_ok(job.register_rc);
    ck_assert_vat_ok(job.send_rc);
    ck_assert_vat_ok(job.unregister_rc);
  }
  /* The global free lists those threads fed must be sound. */
  for (int round = 0; round < 64; round++)
    for (size_t size = 8; size <= 512; size += 8)
      ck_assert_ptr_nonnull(GC_MALLOC(size));
  ck_assert(test_wait_u64(&counter->hits, THREADS, 30));
  test_quiesce(sys);
}
END_TEST

START_TEST(calls_before_init_are_refused) {
  /* This test case has no init fixture: the library is uninitialised. */
  vat_system *sys;
  ck_assert_vat_err(vat_system_new(NULL, &sys), VAT_ENOTINIT);
  ck_assert_vat_err(vat_thread_register(), VAT_ENOTINIT);
  ck_assert_vat_err(vat_thread_unregister(), VAT_ENOTINIT);
  ck_assert_vat_ok(vat_init());
  ck_assert_vat_ok(vat_init());
  ck_assert_vat_ok(vat_thread_register());
}
END_TEST

/* --- Shutdown with work in flight ---------------------------------------- */

typedef struct bouncer {
  vat_ref *peer;
  uint64_t received;
} bouncer;

/* arg: bounces left. */
static void bounce(vat_turn *turn, void *state, void *arg) {
  bouncer *b = state;
  b->received++;
  uintptr_t left = (uintptr_t)arg;
  if (left > 0)
    expect_vat_ok(vat_send(turn, b->peer, bounce, (void *)(left - 1)));
}

START_TEST(shutdown_waits_for_work_in_flight) {
  enum { PAIRS = 100, BOUNCES = 2000 / TEST_SCALE };
  vat_system *sys = test_system(2);
  bouncer *states[2 * PAIRS];
  for (int i = 0; i < PAIRS; i++) {
    vat_ref *a, *b;
    ck_assert_vat_ok(
        vat_host_spawn(sys, &(vat_entity_def){.state_size = sizeof(bouncer)},
                       &a, (void **)&states[2 * i]));
    ck_assert_vat_ok(
        vat_host_spawn(sys, &(vat_entity_def){.state_size = sizeof(bouncer)},
                       &b, (void **)&states[2 * i + 1]));
    states[2 * i]->peer = b;
    states[2 * i + 1]->peer = a;
    ck_assert_vat_ok(vat_host_send(a, bounce, (void *)(uintptr_t)BOUNCES));
  }
  /* Shut down at once: every committed message must still be delivered. */
  test_quiesce(sys);
  uint64_t total = 0;
  for (int i = 0; i < 2 * PAIRS; i++)
    total += states[i]->received;
  ck_assert_uint_eq(total, (uint64_t)PAIRS * (BOUNCES + 1));
  ck_assert_uint_eq(test_stats(sys).delivered, total);
}
END_TEST

static void forever(vat_turn *turn, void *state, void *arg) {
  (void)state;
  expect_vat_ok(vat_send(turn, vat_self(turn), forever, arg));
}

START_TEST(shutdown_deadline_drops_and_counts) {
  vat_system *sys = test_system(2);
  vat_ref *ref;
  ck_assert_vat_ok(vat_host_spawn(sys, &(vat_entity_def){0}, &ref, NULL));
  ck_assert_vat_ok(vat_host_send(ref, forever, NULL));
  ck_assert_vat_err(vat_system_shutdown(sys, 0.2), VAT_ETIMEDOUT);
  vat_stats st = test_stats(sys);
  ck_assert_uint_eq(st.dropped_at_shutdown, 1);
  ck_assert_uint_gt(st.delivered, 0);
  ck_assert_vat_ok(vat_system_destroy(sys));
}
END_TEST

/* --- A sender caught between its state check and its push ------------------
 */

typedef struct mid_sender {
  vat_ref *to;
  vat_promise *promise;
  int rc;
} mid_sender;

static void never_answer(vat_turn *turn, void *state, void *arg,
                         vat_resolver *r) {
  (void)turn;
  (void)state;
  (void)r;
  if (arg)
    atomic_store_explicit((_Atomic uint64_t *)arg, 1, memory_order_release);
}

static void *call_from_host(void *arg) {
  mid_sender *s = arg;
  vat_thread_register();
  s->rc = vat_host_call(s->to, never_answer, NULL, 0, &s->promise);
  vat_thread_unregister();
  return NULL;
}

typedef struct shutdown_job {
  vat_system *sys;
  double timeout_s;
  int rc;
  _Atomic uint64_t returned;
} shutdown_job;

static void *shut_down(void *arg) {
  shutdown_job *j = arg;
  vat_thread_register();
  j->rc = vat_system_shutdown(j->sys, j->timeout_s);
  atomic_store_explicit(&j->returned, 1, memory_order_release);
  vat_thread_unregister();
  return NULL;
}

static bool system_stopped(vat_ref *any, double timeout_s) {
  double end = test_wall_seconds() + timeout_s;
  while (vat_is_null(vat_ref_exit_reason(any))) {
    if (test_wall_seconds() > end)
      return false;
    test_sleep(0.001);
  }
  return true;
}

/* A host call accepted (the system was running when the caller looked) and
 * not yet pushed when the system stops: it is dropped and counted, and its
 * promise breaks with `shutdown`. Before, shutdown counted first and the
 * late push left the message neither delivered nor dropped. */
START_TEST(shutdown_counts_a_send_caught_mid_push) {
  uint64_t seed = test_seed("shutdown_counts_a_send_caught_mid_push");
  unsigned workers = (unsigned)test_rand_between(&seed, 1, 2);
  uint64_t before = test_rand_between(&seed, 1, 200);
  vat_system *sys = test_system(workers);
  test_counter *c;
  vat_ref *ref = test_spawn_counter(sys, &c);
  for (uint64_t i = 0; i < before; i++)
    ck_assert_vat_ok(vat_host_send(ref, test_hit, NULL));
  /* All handled before the race: shutdown's short deadline then drops
   * only the message caught mid-push (a slow build may lag behind). */
  ck_assert(test_wait_u64(&c->hits, before, 30));
  vat__test_point_arm("send.external.after_state_check");
  mid_sender s = {.to = ref};
  pthread_t caller, closer;
  ck_assert_int_eq(pthread_create(&caller, NULL, call_from_host, &s), 0);
  ck_assert_msg(vat__test_point_wait(10), "the caller never reached the push");
  shutdown_job j = {.sys = sys, .timeout_s = 0.05};
  ck_assert_int_eq(pthread_create(&closer, NULL, shut_down, &j), 0);
  ck_assert_msg(system_stopped(ref, 30), "the system never stopped");
  /* The accepted message is still to be pushed: shutdown must not finish
   * counting before it lands. */
  ck_assert_msg(!test_wait_u64(&j.returned, 1, 0.5),
                "shutdown finished while an accepted send was mid-push");
  vat__test_point_release();
  pthread_join(caller, NULL);
  pthread_join(closer, NULL);
  ck_assert_vat_ok(s.rc);
  ck_assert_vat_err(j.rc, VAT_ETIMEDOUT);
  vat_stats st = test_stats(sys);
  ck_assert_uint_eq(atomic_load(&c->hits), before);
  ck_assert_uint_eq(st.delivered + st.dead_letters + st.dropped_at_shutdown,
                    before + 1);
  ck_assert_uint_eq(st.dropped_at_shutdown, 1);
  vat_value why;
  ck_assert_vat_err(vat_promise_wait(s.promise, 10, &why), VAT_EBROKEN);
  ck_assert(vat_is_atom(why, vat_atom_shutdown()));
  ck_assert_vat_ok(vat_system_destroy(sys));
}
END_TEST

/* The same race from a vat of another system: its commit passed the
 * state check while the target's system was closing. */
typedef struct forwarder {
  vat_ref *to;
} forwarder;

static void forward_hit(vat_turn *turn, void *state, void *arg) {
  (void)arg;
  expect_vat_ok(vat_send(turn, ((forwarder *)state)->to, test_hit, NULL));
}

static void *run_once(void *arg) {
  vat_thread_register();
  vat_system_run(arg, 0, 0, NULL);
  vat_thread_unregister();
  return NULL;
}

START_TEST(shutdown_counts_a_cross_system_send_caught_mid_push) {
  uint64_t seed =
      test_seed("shutdown_counts_a_cross_system_send_caught_mid_push");
  uint64_t before = test_rand_between(&seed, 1, 200);
  vat_system *sys = test_system((unsigned)test_rand_between(&seed, 1, 2));
  vat_system *from = test_host_system(false, 0);
  test_counter *c;
  vat_ref *ref = test_spawn_counter(sys, &c);
  for (uint64_t i = 0; i < before; i++)
    ck_assert_vat_ok(vat_host_send(ref, test_hit, NULL));
  ck_assert(test_wait_u64(&c->hits, before, 30)); /* as above */
  forwarder *f;
  vat_ref *fref = test_spawn(from, sizeof *f, (void **)&f);
  f->to = ref;
  ck_assert_vat_ok(vat_host_send(fref, forward_hit, NULL));
  /* Armed only now: the host send above passes the same point. */
  vat__test_point_arm("send.external.after_state_check");
  pthread_t runner, closer;
  ck_assert_int_eq(pthread_create(&runner, NULL, run_once, from), 0);
  ck_assert_msg(vat__test_point_wait(10), "the commit never reached the push");
  shutdown_job j = {.sys = sys, .timeout_s = 0.05};
  ck_assert_int_eq(pthread_create(&closer, NULL, shut_down, &j), 0);
  ck_assert_msg(system_stopped(ref, 30), "the system never stopped");
  ck_assert_msg(!test_wait_u64(&j.returned, 1, 0.5),
                "shutdown finished while an accepted send was mid-push");
  vat__test_point_release();
  pthread_join(runner, NULL);
  pthread_join(closer, NULL);
  vat_stats st = test_stats(sys);
  ck_assert_uint_eq(atomic_load(&c->hits), before);
  ck_assert_uint_eq(st.delivered + st.dead_letters + st.dropped_at_shutdown,
                    before + 1);
  ck_assert_uint_eq(st.dropped_at_shutdown, 1);
  ck_assert_vat_ok(vat_system_destroy(sys));
  test_quiesce(from);
}
END_TEST

/* A vat of another system sends after shutdown saw the system quiescent
 * and before the workers stop: its message is dropped at shutdown, so the
 * system did not stop quiescent and shutdown must not say it did. Before,
 * it returned VAT_OK with a message dropped (seen once in the soak). The
 * target is host-driven, so nothing runs the late message. */
START_TEST(shutdown_is_not_quiet_when_a_late_send_is_dropped) {
  vat_system *sys = test_host_system(false, 0);
  vat_system *from = test_host_system(false, 0);
  test_counter *c;
  vat_ref *ref = test_spawn_counter(sys, &c);
  forwarder *f;
  vat_ref *fref = test_spawn(from, sizeof *f, (void **)&f);
  f->to = ref;
  vat__test_point_arm("system.shutdown.quiet");
  shutdown_job j = {.sys = sys, .timeout_s = 5};
  pthread_t closer;
  ck_assert_int_eq(pthread_create(&closer, NULL, shut_down, &j), 0);
  ck_assert_msg(vat__test_point_wait(10), "shutdown never reached quiescence");
  ck_assert_vat_ok(vat_host_send(fref, forward_hit, NULL));
  ck_assert_vat_ok(vat_system_run_until_quiescent(from, 0, NULL));
  vat__test_point_release();
  pthread_join(closer, NULL);
  vat_stats st = test_stats(sys);
  ck_assert_uint_eq(atomic_load(&c->hits), 0);
  ck_assert_uint_eq(st.dropped_at_shutdown, 1);
  ck_assert_vat_err(j.rc, VAT_ETIMEDOUT);
  ck_assert_vat_ok(vat_system_destroy(sys));
  test_quiesce(from);
}
END_TEST

/* --- What a stopped system owes the outside -------------------------------
 */

/* A host call the callee never answers breaks with `shutdown`. */
START_TEST(shutdown_breaks_host_calls_left_unanswered) {
  vat_system *sys = test_system(2);
  vat_ref *ref = test_spawn(sys, 0, NULL);
  _Atomic uint64_t received = 0;
  vat_promise *p;
  ck_assert_vat_ok(vat_host_call(ref, never_answer, (void *)&received, 0, &p));
  ck_assert(test_wait_u64(&received, 1, 30));
  test_quiesce(sys);
  vat_value why = vat_null();
  ck_assert_vat_err(vat_promise_wait(p, 5, &why), VAT_EBROKEN);
  ck_assert(vat_is_atom(why, vat_atom_shutdown()));
}
END_TEST

/* A request from a vat of another system, never answered, breaks with
 * `shutdown`, and the caller's `when` sees it. */
typedef struct caller {
  vat_ref *callee;
  _Atomic uint64_t *received;
  _Atomic uint64_t settled;
  bool resolved;
  vat_value value;
} caller;

static void on_settled(vat_turn *turn, void *state, void *ctx, bool resolved,
                       vat_value value) {
  (void)turn;
  (void)ctx;
  caller *c = state;
  c->resolved = resolved;
  c->value = value;
  atomic_store_explicit(&c->settled, 1, memory_order_release);
}

static void call_across(vat_turn *turn, void *state, void *arg) {
  (void)arg;
  caller *c = state;
  vat_promise *p;
  expect_vat_ok(
      vat_call(turn, c->callee, never_answer, (void *)c->received, 0, &p));
  expect_vat_ok(vat_when(turn, p, on_settled, NULL));
}

START_TEST(shutdown_breaks_calls_from_other_systems) {
  vat_system *a = test_system(1), *b = test_system(2);
  vat_ref *callee = test_spawn(b, 0, NULL);
  _Atomic uint64_t received = 0;
  caller *c;
  vat_ref *cref = test_spawn(a, sizeof *c, (void **)&c);
  c->callee = callee;
  c->received = &received;
  ck_assert_vat_ok(vat_host_send(cref, call_across, NULL));
  ck_assert(test_wait_u64(&received, 1, 30));
  test_quiesce(b);
  ck_assert_msg(test_wait_u64(&c->settled, 1, 10),
                "a call into a stopped system never settled");
  ck_assert(!c->resolved);
  ck_assert(vat_is_atom(c->value, vat_atom_shutdown()));
  test_quiesce(a);
}
END_TEST

/* A watcher in system A and its target in system B. */
typedef struct watcher {
  vat_ref *target;
  _Atomic uint64_t armed, fired;
  vat_value reason;
  vat_ref *from;
} watcher;

typedef struct target {
  _Atomic uint64_t pings;
} target;

static void ping(vat_turn *turn, void *state, void *arg) {
  (void)turn;
  (void)arg;
  atomic_fetch_add_explicit(&((target *)state)->pings, 1, memory_order_release);
}

static void on_down(vat_turn *turn, void *state, uint64_t id, vat_ref *who,
                    vat_value reason) {
  (void)turn;
  (void)id;
  watcher *w = state;
  w->from = who;
  w->reason = reason;
  atomic_store_explicit(&w->fired, 1, memory_order_release);
}

static void on_exit(vat_turn *turn, void *state, vat_ref *from,
                    vat_value reason) {
  (void)turn;
  watcher *w = state;
  w->from = from;
  w->reason = reason;
  atomic_store_explicit(&w->fired, 1, memory_order_release);
}

/* Monitors (arg NULL) or links with exits trapped (arg non-NULL), then
 * pings: the ping arrives after the MONITOR or LINK, so when it is counted
 * the target has recorded the watch. */
static void watch_target(vat_turn *turn, void *state, void *arg) {
  watcher *w = state;
  uint64_t id;
  if (arg == NULL) {
    expect_vat_ok(vat_monitor(turn, w->target, on_down, &id));
  } else {
    expect_vat_ok(vat_trap_exit(turn, vat_self(turn), on_exit));
    expect_vat_ok(vat_link(turn, w->target));
  }
  expect_vat_ok(vat_send(turn, w->target, ping, NULL));
}

static void watch_across_systems(bool link) {
  vat_system *a = test_system(1), *b = test_system(2);
  target *t;
  vat_ref *tref = test_spawn(b, sizeof *t, (void **)&t);
  watcher *w;
  vat_ref *wref = test_spawn(a, sizeof *w, (void **)&w);
  w->target = tref;
  ck_assert_vat_ok(vat_host_send(wref, watch_target, link ? wref : NULL));
  ck_assert(test_wait_u64(&t->pings, 1, 30));
  test_quiesce(b);
  ck_assert_msg(test_wait_u64(&w->fired, 1, 10),
                "no %s from a vat of a stopped system", link ? "exit" : "down");
  ck_assert(w->from == tref);
  ck_assert_msg(vat_is_atom(w->reason, vat_atom_shutdown()),
                "the reason is not shutdown");
  test_quiesce(a);
}

/* The MONITOR or LINK still queued when the target's system stops: its
 * drop answers, and the answer must say `shutdown` too (the vat never
 * ended; noproc would claim it did not exist). */
typedef struct blocker {
  _Atomic uint64_t entered, release;
} blocker;

static void block_turn(vat_turn *turn, void *state, void *arg) {
  (void)turn;
  (void)arg;
  blocker *b = state;
  atomic_store_explicit(&b->entered, 1, memory_order_release);
  while (!test_wait_u64(&b->release, 1, 60))
    ;
}

static void mark_done(vat_turn *turn, void *state, void *arg) {
  (void)turn;
  (void)arg;
  atomic_store_explicit(&((watcher *)state)->armed, 1, memory_order_release);
}

/* Watches, then sends itself a message: when that runs, the first turn's
 * MONITOR or LINK has been delivered to the target's mailbox. */
static void watch_then_mark(vat_turn *turn, void *state, void *arg) {
  watch_target(turn, state, arg);
  expect_vat_ok(vat_send(turn, vat_self(turn), mark_done, NULL));
}

static void watch_queued_at_shutdown(bool link) {
  vat_config cfg;
  vat_config_default(&cfg);
  cfg.workers = 1;
  cfg.batch = 1; /* the worker looks at the state after each turn */
  vat_system *a = test_system(1), *b;
  ck_assert_vat_ok(vat_system_new(&cfg, &b));
  blocker *bl;
  vat_ref *tref = test_spawn(b, sizeof *bl, (void **)&bl);
  ck_assert_vat_ok(vat_host_send(tref, block_turn, NULL));
  ck_assert(test_wait_u64(&bl->entered, 1, 30));
  watcher *w;
  vat_ref *wref = test_spawn(a, sizeof *w, (void **)&w);
  w->target = tref;
  ck_assert_vat_ok(vat_host_send(wref, watch_then_mark, link ? wref : NULL));
  ck_assert(test_wait_u64(&w->armed, 1, 30));
  shutdown_job j = {.sys = b, .timeout_s = 0.05};
  pthread_t closer;
  ck_assert_int_eq(pthread_create(&closer, NULL, shut_down, &j), 0);
  ck_assert(system_stopped(tref, 30));
  atomic_store_explicit(&bl->release, 1, memory_order_release);
  pthread_join(closer, NULL);
  ck_assert_vat_err(j.rc, VAT_ETIMEDOUT);
  ck_assert_uint_eq(test_stats(b).dropped_at_shutdown, 2); /* and the ping */
  ck_assert_vat_ok(vat_system_destroy(b));
  ck_assert_msg(test_wait_u64(&w->fired, 1, 10), "no %s for a queued %s",
                link ? "exit" : "down", link ? "link" : "monitor");
  ck_assert_msg(vat_is_atom(w->reason, vat_atom_shutdown()),
                "the reason is not shutdown");
  test_quiesce(a);
}

START_TEST(shutdown_answers_a_queued_monitor_with_shutdown) {
  watch_queued_at_shutdown(false);
}
END_TEST

START_TEST(shutdown_answers_a_queued_link_with_shutdown) {
  watch_queued_at_shutdown(true);
}
END_TEST

START_TEST(shutdown_fires_monitors_from_other_systems) {
  watch_across_systems(false);
}
END_TEST

START_TEST(shutdown_fires_links_from_other_systems) {
  watch_across_systems(true);
}
END_TEST

/* --- Idle systems burn no CPU --------------------------------------------- */

START_TEST(idle_system_burns_no_cpu) {
  vat_system *sys = test_system(2);
  test_counter *counter;
  vat_ref *ref = test_spawn_counter(sys, &counter);
  for (int i = 0; i < 1000; i++)
    ck_assert_vat_ok(vat_host_send(ref, test_hit, NULL));
  /* Done (a collection per turn makes that slow in the hostile build),
   * then a moment for the workers to spin down and park. */
  ck_assert(test_wait_u64(&counter->hits, 1000, 30));
  ck_assert_msg(test_settled_to_idle(), "the workers never parked");
  vat_sys_info info;
  vat_worker_info before_w[2], after_w[2];
  ck_assert_int_eq(vat_system_inspect(sys, &info, before_w, 2), 2);
  double before = test_cpu_seconds();
  test_sleep(2);
  double used = test_cpu_seconds() - before;
  ck_assert_int_eq(vat_system_inspect(sys, &info, after_w, 2), 2);
  uint64_t wakes = after_w[0].parks - before_w[0].parks + after_w[1].parks -
                   before_w[1].parks;
  fprintf(stderr, "idle_system_burns_no_cpu: %.4f s CPU in 2 s idle, %llu "
          "parks\n", used, (unsigned long long)wakes);
  /* A worker that wakes and parks again while nothing happens is spinning
   * however cheaply, whatever the clock says. */
  ck_assert_msg(wakes <= 2, "idle workers parked %llu times in 2 s",
                (unsigned long long)wakes);
  /* The park count is what shows spinning. The CPU bound catches a busy
   * thread that does not park (a worker spinning without sleeping, the
   * timer thread), which would burn most of the 2 s; a virtual machine
   * charges up to a millisecond per wake-up of the collector's or
   * sanitizer's threads, and valgrind runs its scheduler tens of times
   * slower (0.0264 s seen there with the workers asleep). */
  ck_assert_msg(used < 0.25,
                "idle system used %.4f s CPU in 2 s", used);
  test_quiesce(sys);
}
END_TEST

/* --- Several systems at once ---------------------------------------------- */

START_TEST(several_systems_coexist) {
  enum { SYSTEMS = 4, PAIRS = 20, BOUNCES = 500 / TEST_SCALE };
  vat_system *systems[SYSTEMS];
  bouncer *states[SYSTEMS][2 * PAIRS];
  for (int s = 0; s < SYSTEMS; s++) {
    systems[s] = test_system(1 + s % 2);
    for (int i = 0; i < PAIRS; i++) {
      vat_ref *a, *b;
      ck_assert_vat_ok(vat_host_spawn(
          systems[s], &(vat_entity_def){.state_size = sizeof(bouncer)}, &a,
          (void **)&states[s][2 * i]));
      ck_assert_vat_ok(vat_host_spawn(
          systems[s], &(vat_entity_def){.state_size = sizeof(bouncer)}, &b,
          (void **)&states[s][2 * i + 1]));
      states[s][2 * i]->peer = b;
      states[s][2 * i + 1]->peer = a;
      ck_assert_vat_ok(vat_host_send(a, bounce, (void *)(uintptr_t)BOUNCES));
    }
  }
  for (int s = 0; s < SYSTEMS; s++) {
    test_quiesce(systems[s]);
    ck_assert_uint_eq(test_stats(systems[s]).delivered,
                      (uint64_t)PAIRS * (BOUNCES + 1));
  }
}
END_TEST

/* --- Promises of core.h -----------------------------------------------------
 */

/* vat_system_destroy shuts a running system down first. */
START_TEST(destroy_shuts_down_when_needed) {
  vat_system *sys = test_system(2);
  test_counter *c;
  vat_ref *ref = test_spawn_counter(sys, &c);
  ck_assert_vat_ok(vat_host_send(ref, test_hit, NULL));
  ck_assert(test_wait_u64(&c->hits, 1, 30));
  ck_assert_vat_ok(vat_system_destroy(sys));
  ck_assert_vat_err(vat_system_shutdown(sys, 1), VAT_ECLOSED);
  ck_assert_vat_err(vat_host_send(ref, test_hit, NULL), VAT_ECLOSED);
  ck_assert_uint_eq(test_stats(sys).delivered, 1);
  ck_assert_uint_eq(atomic_load(&c->hits), 1);
}
END_TEST

typedef struct hook_count {
  _Atomic uint64_t calls;
} hook_count;

static void count_hook(void *ctx, vat_ref *target, const vat_atom *selector) {
  (void)target;
  (void)selector;
  atomic_fetch_add(&((hook_count *)ctx)->calls, 1);
}

typedef struct late {
  vat_ref *to;
} late;

static void send_twice(vat_turn *turn, void *state, void *arg) {
  (void)arg;
  late *l = state;
  expect_vat_ok(vat_send(turn, l->to, test_hit, NULL));
  expect_vat_ok(vat_send_msg(turn, l->to, vat_atom_intern("x"), vat_null()));
}

/* core.h: the dead-letter hook runs for messages that reach "a dead vat or
 * a stopped system": here a live vat of a system that was shut down. */
START_TEST(dead_letter_hook_for_a_stopped_system) {
  hook_count hook = {0};
  vat_config cfg;
  vat_config_default(&cfg);
  cfg.workers = 1;
  cfg.on_dead_letter = count_hook;
  cfg.dead_letter_ctx = &hook;
  vat_system *stopped, *live = test_system(1);
  ck_assert_vat_ok(vat_system_new(&cfg, &stopped));
  test_counter *c;
  vat_ref *target = test_spawn_counter(stopped, &c);
  ck_assert_vat_ok(vat_system_shutdown(stopped, 10));
  late *l;
  vat_ref *sender = test_spawn(live, sizeof(late), (void **)&l);
  l->to = target;
  ck_assert_vat_ok(vat_host_send(sender, send_twice, NULL));
  test_quiesce(live);
  ck_assert_uint_eq(atomic_load(&hook.calls), 2);
  ck_assert_uint_eq(test_stats(stopped).dead_letters, 2);
  ck_assert_uint_eq(atomic_load(&c->hits), 0);
  ck_assert_vat_ok(vat_system_destroy(stopped));
}
END_TEST

/* cfg.spin: 0 parks an idle worker at once (every hand-over between the
 * two workers then goes through a wake-up), a large value spins long; both
 * run every message, and both park when idle. */
START_TEST(spin_setting_keeps_every_message) {
  static const unsigned spins[] = {0, 1, 100000};
  unsigned spin = spins[_i];
  vat_config cfg;
  vat_config_default(&cfg);
  cfg.workers = 2;
  cfg.spin = spin;
  vat_system *sys;
  ck_assert_vat_ok(vat_system_new(&cfg, &sys));
  static _Atomic uint64_t done;
  atomic_store(&done, 0);
  enum { PAIRS = 8, VOLLEYS = 2000 / TEST_SCALE };
  for (int i = 0; i < PAIRS; i++) {
    vat_ref *ends[2];
    test_spawn_volley_pair(sys, &done, ends);
    ck_assert_vat_ok(
        vat_host_send(ends[0], test_volley_back, (void *)(uintptr_t)VOLLEYS));
  }
  ck_assert_msg(test_wait_u64(&done, PAIRS, 60), "spin %u: %lu of %d done",
                spin, (unsigned long)atomic_load(&done), PAIRS);
  ck_assert_msg(test_settled_to_idle(), "spin %u: the workers never parked",
                spin);
  test_quiesce(sys);
  ck_assert_uint_eq(test_stats(sys).delivered, (uint64_t)PAIRS * (VOLLEYS + 1));
}
END_TEST

/* core.h, vat_system_destroy: "Later calls on sys return VAT_ECLOSED",
 * after their argument checks, except the snapshots, which keep the final
 * figures; for a system with workers and a host-driven one alike. (The
 * object stays readable: the collector keeps it while `sys` is held, its
 * state marked destroyed.) next_timer used to answer VAT_OK,
 * advance_clock and vat_system_fd VAT_ENOTSUP, run VAT_ENOTSUP for a
 * system with workers. */
static void expect_closed(vat_system *sys, unsigned workers) {
  vat_stats st;
  vat_sys_info info;
  int64_t ns;
  int fd;
  vat_ref *ref;
  ck_assert_vat_err(vat_system_stats(sys, NULL), VAT_EINVAL);
  ck_assert_vat_ok(vat_system_stats(sys, &st));
  ck_assert_uint_eq(st.delivered, 1);
  ck_assert_vat_err(vat_system_inspect(sys, NULL, NULL, 0), VAT_EINVAL);
  ck_assert_int_eq(vat_system_inspect(sys, &info, NULL, 0), (int)workers);
  ck_assert(!info.running);
  ck_assert_uint_eq(info.stats.delivered, 1);
  ck_assert_vat_err(vat_system_next_timer(sys, NULL), VAT_EINVAL);
  ck_assert_vat_err(vat_system_next_timer(sys, &ns), VAT_ECLOSED);
  ck_assert_vat_err(vat_system_advance_clock(sys, 1), VAT_ECLOSED);
  ck_assert_vat_err(vat_system_fd(sys, NULL), VAT_EINVAL);
  ck_assert_vat_err(vat_system_fd(sys, &fd), VAT_ECLOSED);
  ck_assert_vat_err(vat_system_run(sys, 0, 0, NULL), VAT_ECLOSED);
  ck_assert_vat_err(vat_system_run_until_quiescent(sys, 0, NULL), VAT_ECLOSED);
  ck_assert_vat_err(vat_system_trace_write(sys, "/nonexistent/t.json"),
                    VAT_ECLOSED);
  ck_assert_vat_err(vat_host_spawn(sys, &(vat_entity_def){0}, &ref, NULL),
                    VAT_ECLOSED);
  ck_assert_vat_err(vat_system_shutdown(sys, 1), VAT_ECLOSED);
  ck_assert_vat_err(vat_system_destroy(sys), VAT_ECLOSED);
}

START_TEST(destroyed_system_answers_closed) {
  vat_system *sys = test_system(1);
  test_counter *c;
  ck_assert_vat_ok(vat_host_send(test_spawn_counter(sys, &c), test_hit, NULL));
  ck_assert(test_wait_u64(&c->hits, 1, 30));
  ck_assert_vat_ok(vat_system_destroy(sys));
  expect_closed(sys, 1);
  sys = test_host_system(true, 1);
  ck_assert_vat_ok(vat_host_send(test_spawn_counter(sys, &c), test_hit, NULL));
  ck_assert_vat_ok(vat_system_shutdown(sys, 1));
  ck_assert_vat_ok(vat_system_destroy(sys));
  expect_closed(sys, 1);
}
END_TEST

/* Errors in the order the headers list them. vat_spawn with a NULL turn
 * is VAT_ENOTINTURN, as every turn-only call (core.h's rule for "inside
 * a turn"); vat_system_trace_write on an untraced system is VAT_ENOTSUP
 * whatever the path, NULL included: no path could make it succeed. */
START_TEST(errors_in_the_order_the_headers_list) {
  vat_ref *ref;
  vat_entity_def def = {0};
  ck_assert_vat_err(vat_spawn(NULL, &def, &ref, NULL), VAT_ENOTINTURN);
  ck_assert_vat_err(vat_spawn(NULL, NULL, NULL, NULL), VAT_ENOTINTURN);
  ck_assert_vat_err(vat_entity_new(NULL, &def, &ref, NULL), VAT_ENOTINTURN);
  vat_system *sys = test_system(1);
  ck_assert_vat_err(vat_system_trace_write(NULL, NULL), VAT_EINVAL);
  ck_assert_vat_err(vat_system_trace_write(sys, NULL), VAT_ENOTSUP);
  ck_assert_vat_err(vat_system_trace_write(sys, ""), VAT_ENOTSUP);
  ck_assert_vat_err(vat_system_trace_write(sys, "/nonexistent/t.json"),
                    VAT_ENOTSUP);
  /* Before destroy, the calls expect_closed checks answer. */
  vat_stats st;
  vat_sys_info info;
  int64_t ns;
  int fd;
  ck_assert_vat_ok(vat_system_stats(sys, &st));
  ck_assert_int_eq(vat_system_inspect(sys, &info, NULL, 0), 1);
  ck_assert_vat_ok(vat_system_next_timer(sys, &ns));
  ck_assert_vat_err(vat_system_advance_clock(sys, 1), VAT_ENOTSUP);
  ck_assert_vat_err(vat_system_fd(sys, &fd), VAT_ENOTSUP);
  test_quiesce(sys);
}
END_TEST

Suite *test_system_suite(void) {
  Suite *s = suite_create("system");
  TCase *tc = test_case("system", 60);
  tcase_add_test(tc, config_defaults);
  tcase_add_test(tc, new_rejects_bad_config);
  tcase_add_test(tc, default_system_lifecycle);
  tcase_add_test(tc, calls_after_shutdown_are_refused);
  tcase_add_test(tc, shutdown_waits_for_work_in_flight);
  tcase_add_test(tc, shutdown_deadline_drops_and_counts);
  tcase_add_test(tc, idle_system_burns_no_cpu);
  tcase_add_test(tc, several_systems_coexist);
  tcase_add_test(tc, collector_made_thread_pairs_register_and_unregister);
  tcase_add_test(tc, shutdown_counts_a_send_caught_mid_push);
  tcase_add_test(tc, shutdown_counts_a_cross_system_send_caught_mid_push);
  tcase_add_test(tc, shutdown_is_not_quiet_when_a_late_send_is_dropped);
  tcase_add_test(tc, shutdown_breaks_host_calls_left_unanswered);
  tcase_add_test(tc, shutdown_breaks_calls_from_other_systems);
  tcase_add_test(tc, shutdown_fires_monitors_from_other_systems);
  tcase_add_test(tc, shutdown_fires_links_from_other_systems);
  tcase_add_test(tc, shutdown_answers_a_queued_monitor_with_shutdown);
  tcase_add_test(tc, shutdown_answers_a_queued_link_with_shutdown);
  tcase_add_test(tc, destroy_shuts_down_when_needed);
  tcase_add_test(tc, destroyed_system_answers_closed);
  tcase_add_test(tc, errors_in_the_order_the_headers_list);
  tcase_add_test(tc, dead_letter_hook_for_a_stopped_system);
  tcase_add_loop_test(tc, spin_setting_keeps_every_message, 0, 3);
  suite_add_tcase(s, tc);
  TCase *uninit = tcase_create("uninitialised");
  tcase_add_test(uninit, calls_before_init_are_refused);
  suite_add_tcase(s, uninit);
  return s;
}
