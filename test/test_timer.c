/* Timers: delays never early, order, cancellation, periodic timers, timers
 * of dead vats, idle timeouts, and a million pending timers. Timing checks
 * assert "not before" and leave generous room after, for loaded machines. */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "support.h"

#define GC_THREADS 1
#include <gc/gc.h>

/* A sink that records what arrived, and when. */
typedef struct sink {
  uintptr_t got[64];
  double at[64];
  _Atomic uint64_t n;
} sink;

static void sink_take(vat_turn *turn, void *state, void *arg) {
  (void)turn;
  sink *s = state;
  uint64_t n = atomic_load_explicit(&s->n, memory_order_relaxed);
  if (n < 64) {
    s->got[n] = (uintptr_t)arg;
    s->at[n] = test_wall_seconds();
  }
  atomic_store_explicit(&s->n, n + 1, memory_order_release);
}

typedef struct armer {
  vat_ref *sink;
  double armed_at;
  vat_timer *timers[8];
  int rc[8];
} armer;

static void arm_one(vat_turn *turn, void *state, void *arg) {
  (void)arg;
  armer *a = state;
  a->armed_at = test_wall_seconds();
  expect_vat_ok(
      vat_later(turn, 0.05, a->sink, sink_take, (void *)1, &a->timers[0]));
}

START_TEST(later_never_fires_early) {
  vat_system *sys = test_system(2);
  sink *s;
  armer *a;
  vat_ref *sref = test_spawn(sys, sizeof(sink), (void **)&s);
  vat_ref *aref = test_spawn(sys, sizeof(armer), (void **)&a);
  a->sink = sref;
  ck_assert_vat_ok(vat_host_send(aref, arm_one, NULL));
  ck_assert(test_wait_u64(&s->n, 1, 10));
  double late = s->at[0] - a->armed_at;
  ck_assert_msg(late >= 0.05, "fired after %.4f s", late);
  ck_assert_msg(late < 5, "fired after %.4f s", late);
  fprintf(stderr, "timer: 50 ms delay fired after %.2f ms\n", late * 1e3);
  ck_assert_vat_err(vat_timer_cancel(a->timers[0]), VAT_ENOTFOUND);
  test_quiesce(sys);
}
END_TEST

/* Delays 30, 10, 20, 20, 0 ms: fire by deadline, ties in arming order. */
static void arm_several(vat_turn *turn, void *state, void *arg) {
  (void)arg;
  armer *a = state;
  static const double delays[] = {0.03, 0.01, 0.02, 0.02, 0};
  for (uintptr_t i = 0; i < 5; i++)
    expect_vat_ok(
        vat_later(turn, delays[i], a->sink, sink_take, (void *)i, NULL));
}

START_TEST(timers_fire_in_deadline_order) {
  vat_system *sys = test_system(2);
  sink *s;
  armer *a;
  vat_ref *sref = test_spawn(sys, sizeof(sink), (void **)&s);
  vat_ref *aref = test_spawn(sys, sizeof(armer), (void **)&a);
  a->sink = sref;
  ck_assert_vat_ok(vat_host_send(aref, arm_several, NULL));
  ck_assert(test_wait_u64(&s->n, 5, 10));
  static const uintptr_t order[] = {4, 1, 2, 3, 0};
  for (int i = 0; i < 5; i++)
    ck_assert_uint_eq(s->got[i], order[i]);
  test_quiesce(sys);
}
END_TEST

static void arm_and_cancel(vat_turn *turn, void *state, void *arg) {
  (void)arg;
  armer *a = state;
  for (uintptr_t i = 0; i < 4; i++)
    /* The third one is cancelled by a later turn: give it time. */
    expect_vat_ok(vat_later(turn, i == 2 ? 0.5 : 0.03 + 0.01 * (double)i,
                            a->sink, sink_take, (void *)i, &a->timers[i]));
  /* Cancelled before this turn even armed it. */
  a->rc[0] = vat_timer_cancel(a->timers[0]);
}

static void cancel_later(vat_turn *turn, void *state, void *arg) {
  (void)turn;
  (void)arg;
  armer *a = state;
  a->rc[2] = vat_timer_cancel(a->timers[2]);
  a->rc[3] = vat_timer_cancel(a->timers[2]);
}

START_TEST(cancelled_timers_never_fire) {
  vat_system *sys = test_system(2);
  sink *s;
  armer *a;
  vat_ref *sref = test_spawn(sys, sizeof(sink), (void **)&s);
  vat_ref *aref = test_spawn(sys, sizeof(armer), (void **)&a);
  a->sink = sref;
  ck_assert_vat_ok(vat_host_send(aref, arm_and_cancel, NULL));
  ck_assert_vat_ok(vat_host_send(aref, cancel_later, NULL));
  ck_assert(test_wait_u64(&s->n, 2, 10));
  test_sleep(0.6); /* past the last deadline */
  ck_assert_uint_eq(atomic_load(&s->n), 2);
  ck_assert_uint_eq(s->got[0], 1);
  ck_assert_uint_eq(s->got[1], 3);
  ck_assert_vat_ok(a->rc[0]);
  ck_assert_vat_ok(a->rc[2]);
  ck_assert_int_eq(a->rc[3], VAT_ENOTFOUND);
  test_quiesce(sys);
}
END_TEST

/* --- Periodic ----------------------------------------------------------------
 */

typedef struct ticker {
  vat_timer *timer;
  _Atomic uint64_t ticks;
  double first, last;
  double armed_at;
} ticker;

static void tick(vat_turn *turn, void *state, void *arg) {
  (void)turn;
  (void)arg;
  ticker *t = state;
  uint64_t n = atomic_load(&t->ticks) + 1;
  if (n == 1)
    t->first = test_wall_seconds();
  t->last = test_wall_seconds();
  if (n == 5)
    expect_vat_ok(vat_timer_cancel(t->timer));
  atomic_store(&t->ticks, n);
}

static void start_ticking(vat_turn *turn, void *state, void *arg) {
  (void)arg;
  ticker *t = state;
  t->armed_at = test_wall_seconds();
  expect_vat_ok(vat_every(turn, 0.02, vat_self(turn), tick, NULL, &t->timer));
}

START_TEST(every_repeats_until_cancelled) {
  vat_system *sys = test_system(2);
  ticker *t;
  vat_ref *ref = test_spawn(sys, sizeof(ticker), (void **)&t);
  ck_assert_vat_ok(vat_host_send(ref, start_ticking, NULL));
  ck_assert(test_wait_u64(&t->ticks, 5, 10));
  test_sleep(0.1);
  /* A tick already queued when the fifth cancelled may still come
   * (timer.h: "a message it delivered already may still be queued"); no
   * more than that one. */
  ck_assert_uint_le(atomic_load(&t->ticks), 6);
  ck_assert(t->first - t->armed_at >= 0.02);
  ck_assert(t->last - t->armed_at >= 0.1);
  test_quiesce(sys);
}
END_TEST

START_TEST(bad_arguments) {
  ck_assert_vat_err(vat_later(NULL, 1, NULL, sink_take, NULL, NULL),
                    VAT_ENOTINTURN);
  ck_assert_vat_err(vat_timer_cancel(NULL), VAT_EINVAL);
  ck_assert_vat_err(vat_idle_timeout(NULL, 1, NULL, NULL, NULL),
                    VAT_ENOTINTURN);
}
END_TEST

/* --- Timers of dead vats
 * ------------------------------------------------------ */

static void arm_then_stop(vat_turn *turn, void *state, void *arg) {
  (void)arg;
  armer *a = state;
  expect_vat_ok(vat_later(turn, 0.02, a->sink, sink_take, (void *)1, NULL));
  expect_vat_ok(vat_every(turn, 0.01, a->sink, sink_take, (void *)2, NULL));
  expect_vat_ok(vat_stop(turn));
}

static void arm_then_fail(vat_turn *turn, void *state, void *arg) {
  (void)arg;
  armer *a = state;
  expect_vat_ok(vat_later(turn, 0, a->sink, sink_take, (void *)3, NULL));
  expect_vat_ok(vat_fail(turn, vat_atom_named("boom")));
}

static void arm_long(vat_turn *turn, void *state, void *arg) {
  (void)arg;
  armer *a = state;
  expect_vat_ok(vat_later(turn, 0.3, a->sink, sink_take, (void *)4, NULL));
}

START_TEST(timers_of_dead_vats_never_fire) {
  vat_system *sys = test_system(2);
  sink *s;
  vat_ref *sref = test_spawn(sys, sizeof(sink), (void **)&s);
  armer *a1, *a2, *a3;
  vat_ref *r1 = test_spawn(sys, sizeof(armer), (void **)&a1);
  vat_ref *r2 = test_spawn(sys, sizeof(armer), (void **)&a2);
  vat_ref *r3 = test_spawn(sys, sizeof(armer), (void **)&a3);
  a1->sink = a2->sink = a3->sink = sref;
  ck_assert_vat_ok(vat_host_send(r1, arm_then_stop, NULL));
  ck_assert_vat_ok(vat_host_send(r2, arm_then_fail, NULL));
  /* Armed, then its vat dies before the deadline. */
  ck_assert_vat_ok(vat_host_send(r3, arm_long, NULL));
  ck_assert_vat_ok(vat_host_send(r3, arm_then_stop, NULL));
  for (int i = 0; i < 10000 && !(vat_ref_is_dead(r1) && vat_ref_is_dead(r2) &&
                                 vat_ref_is_dead(r3));
       i++)
    test_sleep(0.001);
  ck_assert(vat_ref_is_dead(r1) && vat_ref_is_dead(r2) && vat_ref_is_dead(r3));
  /* Well past every deadline. */
  test_sleep(0.4);
  ck_assert_uint_eq(atomic_load(&s->n), 0);
  test_quiesce(sys);
}
END_TEST

/* The window the owner check in vat__timers_fire_due guards: the owner is
 * dead (its flag published) while its terminate hook, which cancels its
 * timers, waits for the service lock that a firing batch holds. A timer of
 * that owner later in the same batch must not deliver. The timer thread is
 * paused inside the batch, at the first timer's delivery (past its owner
 * check), while the owner ends; then the batch goes on. */
typedef struct doomed {
  vat_ref *sink;
} doomed;

static void arm_two(vat_turn *turn, void *state, void *arg) {
  (void)arg;
  doomed *d = state;
  /* One turn, one commit: both get the same deadline, so one batch. */
  expect_vat_ok(vat_later(turn, 0.5, d->sink, sink_take, (void *)1, NULL));
  expect_vat_ok(vat_later(turn, 0.5, d->sink, sink_take, (void *)2, NULL));
}

static void stop_now(vat_turn *turn, void *state, void *arg) {
  (void)state;
  (void)arg;
  expect_vat_ok(vat_stop(turn));
}

START_TEST(dead_owners_timer_later_in_a_batch_never_fires) {
  vat_system *sys = test_system(2);
  sink *s;
  vat_ref *sref = test_spawn(sys, sizeof(sink), (void **)&s);
  doomed *d;
  vat_ref *owner = test_spawn(sys, sizeof(doomed), (void **)&d);
  d->sink = sref;
  ck_assert_vat_ok(vat_host_send(owner, arm_two, NULL));
  /* The timer thread delivers like a host send: it stops at the first. */
  vat__test_point_arm("send.external.after_state_check");
  ck_assert_msg(vat__test_point_wait(10),
                "the timer thread never reached its first delivery");
  /* The point is spent: this send goes through. */
  ck_assert_vat_ok(vat_host_send(owner, stop_now, NULL));
  for (int i = 0; i < 10000 && !vat_ref_is_dead(owner); i++)
    test_sleep(0.001);
  ck_assert(vat_ref_is_dead(owner));
  vat__test_point_release();
  ck_assert(test_wait_u64(&s->n, 1, 10));
  test_sleep(0.2);
  uint64_t got = atomic_load(&s->n);
  ck_assert_uint_eq(got, 1);
  test_quiesce(sys);
}
END_TEST

typedef struct dyn {
  _Atomic uint64_t got;
  int64_t value;
  const vat_atom *selector;
} dyn;

static void dyn_receive(vat_turn *turn, void *state, const vat_atom *sel,
                        vat_value value) {
  (void)turn;
  dyn *d = state;
  d->selector = sel;
  expect_vat_ok(vat_get_int(value, &d->value));
  atomic_store(&d->got, 1);
}

static void arm_dynamic(vat_turn *turn, void *state, void *arg) {
  (void)state;
  (void)arg;
  expect_vat_ok(vat_later_msg(turn, 0.01, vat_self(turn),
                              vat_atom_intern("ping"), vat_int(5), NULL));
}

START_TEST(dynamic_message_timer) {
  vat_system *sys = test_system(1);
  dyn *d;
  vat_ref *ref;
  ck_assert_vat_ok(vat_host_spawn(
      sys, &(vat_entity_def){.state_size = sizeof(dyn), .receive = dyn_receive},
      &ref, (void **)&d));
  ck_assert_vat_ok(vat_host_send(ref, arm_dynamic, NULL));
  ck_assert(test_wait_u64(&d->got, 1, 10));
  ck_assert_ptr_eq(d->selector, vat_atom_intern("ping"));
  ck_assert_int_eq(d->value, 5);
  test_quiesce(sys);
}
END_TEST

/* --- Idle timeouts
 * ------------------------------------------------------------ */

typedef struct idler {
  _Atomic uint64_t idle;
  _Atomic uint64_t pokes;
  double last_poke;
  double idle_at;
} idler;

static void on_idle(vat_turn *turn, void *state, void *arg) {
  (void)arg;
  idler *d = state;
  d->idle_at = test_wall_seconds();
  atomic_fetch_add(&d->idle, 1);
  /* Once is enough for this test. */
  expect_vat_ok(vat_idle_timeout(turn, 0, NULL, NULL, NULL));
}

static void poke(vat_turn *turn, void *state, void *arg) {
  (void)turn;
  (void)arg;
  idler *d = state;
  d->last_poke = test_wall_seconds();
  atomic_fetch_add(&d->pokes, 1);
}

static void set_idle(vat_turn *turn, void *state, void *arg) {
  (void)arg;
  idler *d = state;
  d->last_poke = test_wall_seconds();
  expect_vat_ok(vat_idle_timeout(turn, 0.4, vat_self(turn), on_idle, NULL));
}

START_TEST(idle_timeout_fires_only_after_silence) {
  vat_system *sys = test_system(2);
  idler *d;
  vat_ref *ref = test_spawn(sys, sizeof(idler), (void **)&d);
  ck_assert_vat_ok(vat_host_send(ref, set_idle, NULL));
  /* Busy for 0.8 s: a message every 40 ms keeps it from going idle. */
  for (int i = 0; i < 20; i++) {
    test_sleep(0.04);
    ck_assert_vat_ok(vat_host_send(ref, poke, NULL));
  }
  ck_assert(test_wait_u64(&d->pokes, 20, 10));
  uint64_t during = atomic_load(&d->idle);
  ck_assert(test_wait_u64(&d->idle, 1, 10));
  double silence = d->idle_at - d->last_poke;
  fprintf(stderr,
          "timer: 400 ms idle timeout fired after %.1f ms of "
          "silence\n",
          silence * 1e3);
  /* Only a scheduling hiccup of 400 ms could have let it fire in between. */
  ck_assert_uint_eq(during, 0);
  ck_assert_msg(silence >= 0.4, "fired after %.4f s of silence", silence);
  ck_assert_msg(silence < 5, "fired after %.4f s of silence", silence);
  /* Two and a half periods: long enough that a timeout still set would
   * have fired again (the virtual-clock test checks the same exactly). */
  test_sleep(1.0);
  ck_assert_uint_eq(atomic_load(&d->idle), 1);
  test_quiesce(sys);
}
END_TEST

/* --- Host-driven, on a virtual clock ---------------------------------------
 */

typedef struct virt {
  vat_ref *keeper;
  vat_resolver *kept;
  vat_promise *p;
  _Atomic uint64_t fired, broken, idle;
} virt;

static void virt_fire(vat_turn *turn, void *state, void *arg) {
  (void)turn;
  (void)arg;
  atomic_fetch_add(&((virt *)state)->fired, 1);
}

static void virt_idle(vat_turn *turn, void *state, void *arg) {
  (void)turn;
  (void)arg;
  atomic_fetch_add(&((virt *)state)->idle, 1);
}

static void virt_keep(vat_turn *turn, void *state, void *arg, vat_resolver *r) {
  (void)turn;
  (void)arg;
  ((virt *)state)->kept = r;
}

static void virt_settled(vat_turn *turn, void *state, void *ctx, bool ok,
                         vat_value v) {
  (void)turn;
  (void)ctx;
  if (!ok && vat_is_atom(v, vat_atom_timeout()))
    atomic_fetch_add(&((virt *)state)->broken, 1);
}

static void virt_start(vat_turn *turn, void *state, void *arg) {
  (void)arg;
  virt *v = state;
  expect_vat_ok(vat_later(turn, 1.0, vat_self(turn), virt_fire, NULL, NULL));
  expect_vat_ok(vat_call(turn, v->keeper, virt_keep, NULL, 0.5, &v->p));
  expect_vat_ok(vat_when(turn, v->p, virt_settled, NULL));
  expect_vat_ok(vat_idle_timeout(turn, 2.0, vat_self(turn), virt_idle, NULL));
}

START_TEST(virtual_clock_drives_timers) {
  vat_system *sys = test_host_system(true, 7);
  virt *v;
  vat_ref *ref = test_spawn(sys, sizeof(virt), (void **)&v);
  v->keeper = test_spawn(sys, sizeof(virt), NULL);
  ck_assert_vat_ok(vat_host_send(ref, virt_start, NULL));
  ck_assert_vat_ok(vat_system_run_until_quiescent(sys, 0, NULL));
  int64_t ns;
  ck_assert_vat_ok(vat_system_next_timer(sys, &ns));
  ck_assert_int_eq(ns, 500000000); /* the request's timeout */
  ck_assert_vat_ok(vat_system_advance_clock(sys, 499999999));
  ck_assert_vat_ok(vat_system_run_until_quiescent(sys, 0, NULL));
  ck_assert_uint_eq(atomic_load(&v->broken), 0);
  ck_assert_vat_ok(vat_system_advance_clock(sys, 1));
  ck_assert_vat_ok(vat_system_run_until_quiescent(sys, 0, NULL));
  ck_assert_uint_eq(atomic_load(&v->broken), 1);
  ck_assert_uint_eq(atomic_load(&v->fired), 0);
  ck_assert_vat_ok(vat_system_advance_clock(sys, 500000000));
  ck_assert_vat_ok(vat_system_run_until_quiescent(sys, 0, NULL));
  ck_assert_uint_eq(atomic_load(&v->fired), 1);
  /* The idle timeout: 2 s after the last turn (the timer's, at 1 s), in
   * steps of a quarter. */
  for (int i = 0; i < 12 && atomic_load(&v->idle) == 0; i++) {
    ck_assert_vat_ok(vat_system_advance_clock(sys, 250000000));
    ck_assert_vat_ok(vat_system_run_until_quiescent(sys, 0, NULL));
  }
  ck_assert_uint_eq(atomic_load(&v->idle), 1);
  ck_assert_uint_ge(vat_system_now(sys), 3000000000u);
  test_quiesce(sys);
}
END_TEST

/* --- On the virtual clock: periods, shutdown, idle, bad arguments --------- */

enum { MS = 1000000 };

static void advance_and_run(vat_system *sys, uint64_t ns) {
  ck_assert_vat_ok(vat_system_advance_clock(sys, ns));
  ck_assert_vat_ok(vat_system_run_until_quiescent(sys, 0, NULL));
}

static void every_10ms(vat_turn *turn, void *state, void *arg) {
  (void)state;
  expect_vat_ok(vat_every(turn, 0.01, arg, test_hit, NULL, NULL));
}

/* timer.h: "a period missed entirely is skipped, not repeated". */
START_TEST(every_skips_missed_periods) {
  vat_system *sys = test_host_system(true, 11);
  test_counter *c;
  vat_ref *cref = test_spawn_counter(sys, &c);
  vat_ref *armer = test_spawn(sys, 8, NULL);
  ck_assert_vat_ok(vat_host_send(armer, every_10ms, cref));
  ck_assert_vat_ok(vat_system_run_until_quiescent(sys, 0, NULL));
  advance_and_run(sys, 10 * MS);
  ck_assert_uint_eq(atomic_load(&c->hits), 1);
  /* Ten and a half periods at once: one late tick, not ten. */
  advance_and_run(sys, 105 * MS);
  ck_assert_uint_eq(atomic_load(&c->hits), 2);
  /* And it goes on ticking after the gap. */
  advance_and_run(sys, 20 * MS);
  uint64_t after = atomic_load(&c->hits);
  ck_assert_msg(after == 3 || after == 4, "%lu ticks", (unsigned long)after);
  test_quiesce(sys);
}
END_TEST

/* timer.h: "Once vat_system_shutdown starts, timers stop firing". Due
 * timers of a host-driven system would fire inside shutdown's drain. */
START_TEST(timers_stop_firing_once_shutdown_begins) {
  vat_system *sys = test_host_system(true, 11);
  test_counter *c;
  vat_ref *cref = test_spawn_counter(sys, &c);
  vat_ref *armer = test_spawn(sys, 8, NULL);
  ck_assert_vat_ok(vat_host_send(armer, every_10ms, cref));
  ck_assert_vat_ok(vat_system_run_until_quiescent(sys, 0, NULL));
  ck_assert_vat_ok(vat_system_advance_clock(sys, 50 * MS)); /* due, unrun */
  ck_assert_vat_ok(vat_system_shutdown(sys, 10));
  ck_assert_uint_eq(atomic_load(&c->hits), 0);
  ck_assert_uint_eq(test_bad_calls(), 0);
  ck_assert_uint_eq(test_stats(sys).dropped_at_shutdown, 0);
  ck_assert_vat_ok(vat_system_destroy(sys));
}
END_TEST

typedef struct idle_setter {
  vat_ref *to;
  double idle_s;
} idle_setter;

static void set_idle_to(vat_turn *turn, void *state, void *arg) {
  (void)arg;
  idle_setter *d = state;
  expect_vat_ok(vat_idle_timeout(turn, d->idle_s, d->to, test_hit, NULL));
}

static uint64_t run_quarters(vat_system *sys, test_counter *c, int quarters) {
  for (int i = 0; i < quarters; i++)
    advance_and_run(sys, 250 * MS);
  return atomic_load(&c->hits);
}

/* timer.h: the idle message is sent "once the vat has run no turn for
 * `idle_s` seconds, and again after each further period of silence"; 0
 * clears it. It goes to another vat here, so nothing breaks the silence. */
START_TEST(idle_timeout_fires_every_idle_period_until_cleared) {
  vat_system *sys = test_host_system(true, 11);
  test_counter *c;
  idle_setter *d;
  vat_ref *cref = test_spawn_counter(sys, &c);
  vat_ref *ref = test_spawn(sys, sizeof(idle_setter), (void **)&d);
  d->to = cref;
  d->idle_s = 1.0;
  ck_assert_vat_ok(vat_host_send(ref, set_idle_to, NULL));
  ck_assert_vat_ok(vat_system_run_until_quiescent(sys, 0, NULL));
  ck_assert_uint_eq(run_quarters(sys, c, 3), 0); /* 0.75 s: too early */
  /* Ten seconds of silence: once per second (the checks are a quarter
   * apart, so the first may come a quarter late). */
  uint64_t n = run_quarters(sys, c, 37);
  ck_assert_msg(n >= 9 && n <= 10, "%lu idle messages in 10 s",
                (unsigned long)n);
  d->idle_s = 0;
  ck_assert_vat_ok(vat_host_send(ref, set_idle_to, NULL));
  ck_assert_vat_ok(vat_system_run_until_quiescent(sys, 0, NULL));
  ck_assert_uint_eq(run_quarters(sys, c, 20), n);
  test_quiesce(sys);
}
END_TEST

/* A new call replaces the old timeout: its period, target and message. */
START_TEST(new_idle_timeout_replaces_the_old) {
  vat_system *sys = test_host_system(true, 11);
  test_counter *c1, *c2;
  idle_setter *d;
  vat_ref *r1 = test_spawn_counter(sys, &c1);
  vat_ref *r2 = test_spawn_counter(sys, &c2);
  vat_ref *ref = test_spawn(sys, sizeof(idle_setter), (void **)&d);
  d->to = r1;
  d->idle_s = 1.0;
  ck_assert_vat_ok(vat_host_send(ref, set_idle_to, NULL));
  ck_assert_vat_ok(vat_system_run_until_quiescent(sys, 0, NULL));
  d->to = r2;
  d->idle_s = 3.0;
  ck_assert_vat_ok(vat_host_send(ref, set_idle_to, NULL));
  ck_assert_vat_ok(vat_system_run_until_quiescent(sys, 0, NULL));
  ck_assert_uint_eq(run_quarters(sys, c2, 8), 0); /* 2 s: neither */
  ck_assert_uint_eq(atomic_load(&c1->hits), 0);
  ck_assert_uint_ge(run_quarters(sys, c2, 6), 1); /* 3.5 s: the new one */
  ck_assert_uint_eq(atomic_load(&c1->hits), 0);
  test_quiesce(sys);
}
END_TEST

enum { BAD_TIMER_CALLS = 12 };

typedef struct bad_timers {
  int rc[BAD_TIMER_CALLS];
} bad_timers;

static void try_bad_timers(vat_turn *turn, void *state, void *arg) {
  (void)arg;
  bad_timers *b = state;
  vat_ref *me = vat_self(turn);
  int i = 0;
  b->rc[i++] = vat_later(turn, -1, me, test_hit, NULL, NULL);
  b->rc[i++] = vat_later(turn, NAN, me, test_hit, NULL, NULL);
  b->rc[i++] = vat_later(turn, 1, NULL, test_hit, NULL, NULL);
  b->rc[i++] = vat_later(turn, 1, me, NULL, NULL, NULL);
  b->rc[i++] = vat_later_msg(turn, 1, me, NULL, vat_null(), NULL);
  b->rc[i++] = vat_every(turn, 0, me, test_hit, NULL, NULL);
  b->rc[i++] = vat_every(turn, -0.5, me, test_hit, NULL, NULL);
  b->rc[i++] = vat_every(turn, NAN, me, test_hit, NULL, NULL);
  b->rc[i++] = vat_every(turn, 1, NULL, test_hit, NULL, NULL);
  b->rc[i++] = vat_idle_timeout(turn, -1, me, test_hit, NULL);
  b->rc[i++] = vat_idle_timeout(turn, NAN, me, test_hit, NULL);
  b->rc[i++] = vat_idle_timeout(turn, 1, me, NULL, NULL);
}

/* timer.h's EINVAL cases; a refused call arms nothing. */
START_TEST(bad_arguments_in_a_turn) {
  vat_system *sys = test_host_system(true, 11);
  bad_timers *b;
  vat_ref *ref = test_spawn(sys, sizeof(bad_timers), (void **)&b);
  ck_assert_vat_ok(vat_host_send(ref, try_bad_timers, NULL));
  ck_assert_vat_ok(vat_system_run_until_quiescent(sys, 0, NULL));
  for (int i = 0; i < BAD_TIMER_CALLS; i++)
    ck_assert_msg(b->rc[i] == VAT_EINVAL, "call %d returned %s", i,
                  vat_err_name(b->rc[i]));
  int64_t ns;
  ck_assert_vat_ok(vat_system_next_timer(sys, &ns));
  ck_assert_int_eq(ns, -1);
  test_quiesce(sys);
}
END_TEST

/* --- A million timers
 * --------------------------------------------------------- */

enum { MANY = 1000000 / TEST_SCALE, CHUNK = 50000 / TEST_SCALE };

/* The verdict is exact whatever the machine's speed: a timer whose cancel
 * succeeded must never fire, every other one must fire once. On a machine
 * fast enough every cancel succeeds, and half the timers fire. */
typedef struct many {
  vat_timer **timers;
  unsigned char *cancel_ok; /* per timer, written by the arming vat */
  vat_ref *counter;
  uint64_t armed, cancelled, cancel_ok_n;
  double arm_s, cancel_s;
  _Atomic uint64_t done;
} many;

typedef struct counter {
  unsigned char *fired; /* per timer */
  _Atomic uint64_t n;
} counter;

static void count_fire(vat_turn *turn, void *state, void *arg) {
  (void)turn;
  counter *c = state;
  c->fired[(uintptr_t)arg]++;
  atomic_fetch_add_explicit(&c->n, 1, memory_order_release);
}

static void cancel_chunk(vat_turn *turn, void *state, void *arg) {
  (void)arg;
  many *m = state;
  double t0 = test_wall_seconds();
  for (int i = 0; i < CHUNK && m->cancelled < MANY; i++, m->cancelled += 2) {
    int rc = vat_timer_cancel(m->timers[m->cancelled]);
    if (rc == VAT_OK) {
      m->cancel_ok[m->cancelled] = 1;
      m->cancel_ok_n++;
    } else if (rc != VAT_ENOTFOUND) {
      expect_vat_ok(rc);
    }
  }
  m->cancel_s += test_wall_seconds() - t0;
  if (m->cancelled < MANY)
    expect_vat_ok(vat_send(turn, vat_self(turn), cancel_chunk, NULL));
  else
    atomic_store(&m->done, 1);
}

static void arm_chunk(vat_turn *turn, void *state, void *arg) {
  (void)arg;
  many *m = state;
  double t0 = test_wall_seconds();
  for (int i = 0; i < CHUNK && m->armed < MANY; i++, m->armed++)
    /* 4 s, spread over a second: pending while the cancels run. */
    expect_vat_ok(vat_later(turn, 4.0 + (double)(m->armed % 1000) * 1e-3,
                            m->counter, count_fire, (void *)m->armed,
                            &m->timers[m->armed]));
  m->arm_s += test_wall_seconds() - t0;
  expect_vat_ok(vat_send(turn, vat_self(turn),
                         m->armed < MANY ? arm_chunk : cancel_chunk, NULL));
}

START_TEST(million_timers_half_cancelled) {
  vat_system *sys = test_system(2);
  many *m;
  counter *c;
  vat_ref *cref = test_spawn(sys, sizeof(counter), (void **)&c);
  vat_ref *mref = test_spawn(sys, sizeof(many), (void **)&m);
  m->timers = GC_MALLOC(MANY * sizeof *m->timers);
  m->cancel_ok = GC_MALLOC_ATOMIC(MANY);
  c->fired = GC_MALLOC_ATOMIC(MANY);
  ck_assert(m->timers && m->cancel_ok && c->fired);
  memset(m->cancel_ok, 0, MANY);
  memset(c->fired, 0, MANY);
  m->counter = cref;
  double t0 = test_wall_seconds();
  ck_assert_vat_ok(vat_host_send(mref, arm_chunk, NULL));
  ck_assert(test_wait_u64(&m->done, 1, 60));
  double armed_and_cancelled = test_wall_seconds() - t0;
  fprintf(stderr,
          "timer: armed %d in %.3f s (%.0f ns each, commit excluded), "
          "cancelled half in %.3f s (%.0f ns each); %.3f s in all\n",
          MANY, m->arm_s, m->arm_s / MANY * 1e9, m->cancel_s,
          m->cancel_s / (MANY / 2) * 1e9, armed_and_cancelled);
  uint64_t expected = MANY - m->cancel_ok_n;
  ck_assert_msg(test_wait_u64(&c->n, expected, 60), "fired %lu of %lu",
                (unsigned long)atomic_load(&c->n), (unsigned long)expected);
  fprintf(stderr, "timer: %lu fired by %.2f s (%lu cancels came too late)\n",
          (unsigned long)expected, test_wall_seconds() - t0,
          (unsigned long)(MANY / 2 - m->cancel_ok_n));
  test_sleep(0.1);
  ck_assert_uint_eq(atomic_load(&c->n), expected);
  /* How many cancels came in time is a matter of speed, which the
   * benchmarks measure; here only the exact verdict per timer counts. */
  for (uint64_t i = 0; i < MANY; i++)
    ck_assert_uint_eq(c->fired[i], m->cancel_ok[i] ? 0 : 1);
  test_quiesce(sys);
}
END_TEST

/* timer.h: "Timers with the same deadline fire in the order they were
 * armed", and in deadline order otherwise, with many pending: thousands of
 * timers at random deadlines (multiples of 1/128 s, so many share one, and
 * exact in nanoseconds), armed in several turns while the clock moves in
 * random steps and a random few are cancelled, so the 4-ary heap is deep
 * and every child slot of a node takes part. On the virtual clock of a
 * host-driven system: deterministic for a seed. */
enum { ORDERED = 3000, ORDERED_TICK = 7812500 /* ns: 1/128 s */ };

typedef struct ordered {
  uint64_t rng;
  uint32_t armed, fired;
  uint64_t deadline[ORDERED];
  vat_timer *timer[ORDERED];
  bool cancelled[ORDERED];
  uint32_t order[ORDERED];
  uint64_t fired_at[ORDERED];
} ordered;

static void ordered_fire(vat_turn *turn, void *state, void *arg) {
  ordered *o = state;
  if (o->fired < ORDERED) {
    o->order[o->fired] = (uint32_t)(uintptr_t)arg;
    o->fired_at[o->fired] = vat_system_now(vat_turn_system(turn));
  }
  o->fired++;
}

static void ordered_arm(vat_turn *turn, void *state, void *arg) {
  ordered *o = state;
  uint64_t now = vat_system_now(vat_turn_system(turn));
  for (uintptr_t k = 0; k < (uintptr_t)arg && o->armed < ORDERED; k++) {
    uint32_t i = o->armed++;
    uint64_t ticks = test_rand_between(&o->rng, 0, 255);
    o->deadline[i] = now + ticks * ORDERED_TICK;
    expect_vat_ok(vat_later(turn, (double)ticks / 128, vat_self(turn),
                            ordered_fire, (void *)(uintptr_t)i, &o->timer[i]));
  }
}

static void ordered_cancel(vat_turn *turn, void *state, void *arg) {
  (void)turn;
  ordered *o = state;
  for (uintptr_t k = 0; k < (uintptr_t)arg && o->armed > 0; k++) {
    uint32_t i = (uint32_t)test_rand_between(&o->rng, 0, o->armed - 1);
    if (vat_timer_cancel(o->timer[i]) == VAT_OK)
      o->cancelled[i] = true;
  }
}

static int ordered_cmp(const void *a, const void *b, void *ctx) {
  const ordered *o = ctx;
  uint32_t i = *(const uint32_t *)a, j = *(const uint32_t *)b;
  if (o->deadline[i] != o->deadline[j])
    return o->deadline[i] < o->deadline[j] ? -1 : 1;
  return i < j ? -1 : i > j; /* arming order */
}

START_TEST(many_timers_fire_in_deadline_order) {
  uint64_t seed = test_seed("many_timers_fire_in_deadline_order");
  vat_system *sys = test_host_system(true, seed);
  ordered *o;
  vat_ref *ref = test_spawn(sys, sizeof(ordered), (void **)&o);
  o->rng = seed | 1;
  uint64_t rng = seed ^ 0x9e3779b97f4a7c15ULL;
  const uint64_t max_step = 5 * ORDERED_TICK;
  /* Half armed at once, so the heap holds 1,500 before anything fires. */
  ck_assert_vat_ok(
      vat_host_send(ref, ordered_arm, (void *)(uintptr_t)(ORDERED / 2)));
  /* Each step (about 45 of them arm the rest) moves at most 5 ticks; the
   * last deadline is at most 255 ticks after the last arming. */
  for (int step = 0;; step++) {
    ck_assert_int_lt(step, 10000);
    ck_assert_vat_ok(vat_system_run_until_quiescent(sys, 0, NULL));
    if (o->armed < ORDERED)
      ck_assert_vat_ok(
          vat_host_send(ref, ordered_arm,
                        (void *)(uintptr_t)test_rand_between(&rng, 1, 200)));
    if (test_rand_between(&rng, 0, 3) == 0)
      ck_assert_vat_ok(
          vat_host_send(ref, ordered_cancel,
                        (void *)(uintptr_t)test_rand_between(&rng, 1, 20)));
    ck_assert_vat_ok(
        vat_system_advance_clock(sys, test_rand_between(&rng, 1, max_step)));
    ck_assert_vat_ok(vat_system_run_until_quiescent(sys, 0, NULL));
    uint32_t live = 0;
    for (uint32_t i = 0; i < o->armed; i++)
      live += !o->cancelled[i];
    if (o->armed == ORDERED && o->fired == live)
      break;
    ck_assert_uint_le(o->fired, live);
  }
  /* Each fired in the step that passed its deadline, never before. */
  uint32_t expected[ORDERED], n = 0;
  for (uint32_t i = 0; i < ORDERED; i++)
    if (!o->cancelled[i])
      expected[n++] = i;
  ck_assert_uint_eq(o->fired, n);
  qsort_r(expected, n, sizeof *expected, ordered_cmp, o);
  for (uint32_t k = 0; k < n; k++) {
    uint32_t i = o->order[k];
    ck_assert_msg(i == expected[k],
                  "fired #%u: timer %u (deadline %llu), expected %u "
                  "(deadline %llu)",
                  k, i, (unsigned long long)o->deadline[i], expected[k],
                  (unsigned long long)o->deadline[expected[k]]);
    ck_assert_uint_ge(o->fired_at[k], o->deadline[i]);
    ck_assert_uint_lt(o->fired_at[k], o->deadline[i] + max_step);
  }
  ck_assert_uint_lt(n, ORDERED); /* some were cancelled in time */
  test_quiesce(sys);
}
END_TEST

Suite *test_timer_suite(void) {
  Suite *s = suite_create("timer");
  TCase *tc = test_case("timer", 60);
  tcase_add_test(tc, later_never_fires_early);
  tcase_add_test(tc, timers_fire_in_deadline_order);
  tcase_add_test(tc, cancelled_timers_never_fire);
  tcase_add_test(tc, every_repeats_until_cancelled);
  tcase_add_test(tc, bad_arguments);
  tcase_add_test(tc, timers_of_dead_vats_never_fire);
  tcase_add_test(tc, dead_owners_timer_later_in_a_batch_never_fires);
  tcase_add_test(tc, dynamic_message_timer);
  tcase_add_test(tc, idle_timeout_fires_only_after_silence);
  tcase_add_test(tc, virtual_clock_drives_timers);
  tcase_add_test(tc, every_skips_missed_periods);
  tcase_add_test(tc, timers_stop_firing_once_shutdown_begins);
  tcase_add_test(tc, idle_timeout_fires_every_idle_period_until_cleared);
  tcase_add_test(tc, new_idle_timeout_replaces_the_old);
  tcase_add_test(tc, bad_arguments_in_a_turn);
  tcase_add_test(tc, many_timers_fire_in_deadline_order);
  suite_add_tcase(s, tc);
  TCase *stress = test_case("timer_stress", 120);
  tcase_add_test(stress, million_timers_half_cancelled);
  suite_add_tcase(s, stress);
  return s;
}
