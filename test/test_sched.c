/* Scheduling policy: the vats a worker keeps to itself (its next slot and
 * its busy list, see sched/place.c and sched/pick.h) do not starve the
 * ones queued behind them. That it keeps a producer with its consumer is
 * a matter of speed, measured by the benchmarks (bench/counter with two
 * workers), not asserted here. */
#include <pthread.h>
#include <stdint.h>
#include <string.h>

#include "core/system.h"
#include "sched/pick.h"
#include "sched/sched.h"
#include "support.h"

/* Workers that park as soon as they find nothing (spin 0), so that
 * every hand-over between them goes through a wake-up. */
static vat_system *parking_system(unsigned workers) {
  vat_config cfg;
  vat_config_default(&cfg);
  cfg.workers = workers;
  cfg.spin = 0;
  vat_system *sys;
  ck_assert_vat_ok(vat_system_new(&cfg, &sys));
  return sys;
}

/* --- Vats kept private do not starve queued ones ------------------------- */

typedef struct chatter {
  vat_ref *partner;
  vat_ref *late[2];
  test_counter *late_state[2];
  uint64_t turns;
} chatter;

static bool late_ones_ran(chatter *ch) {
  return atomic_load(&ch->late_state[0]->hits) > 0 &&
         atomic_load(&ch->late_state[1]->hits) > 0;
}

/* Talks with its partner until the two vats it woke late have both run.
 * Woken in one turn, the first of them waits in the run queue while the
 * pair keeps one worker busy. */
static void chat(vat_turn *turn, void *state, void *arg) {
  chatter *ch = state;
  expect_vat_ok(vat_send(turn, ch->partner, test_hit, NULL));
  if (++ch->turns == 1000)
    for (int i = 0; i < 2; i++)
      expect_vat_ok(vat_send(turn, ch->late[i], test_hit, NULL));
  if (ch->turns < 1000 || !late_ones_ran(ch))
    expect_vat_ok(vat_send(turn, vat_self(turn), chat, arg));
}

START_TEST(busy_pair_does_not_starve_queued_vats) {
  vat_system *sys = test_system(1);
  vat_ref *ref;
  chatter *ch;
  ck_assert_vat_ok(
      vat_host_spawn(sys, &(vat_entity_def){.state_size = sizeof(chatter)},
                     &ref, (void **)&ch));
  test_counter *partner_state;
  ch->partner = test_spawn_counter(sys, &partner_state);
  for (int i = 0; i < 2; i++)
    ch->late[i] = test_spawn_counter(sys, &ch->late_state[i]);
  ck_assert_vat_ok(vat_host_send(ref, chat, NULL));
  /* Quiescence comes only once both late vats ran. */
  test_quiesce(sys);
  ck_assert(late_ones_ran(ch));
  ck_assert_uint_eq(atomic_load(&partner_state->hits), ch->turns);
}
END_TEST

/* --- A producer caught mid-push does not stall the worker ---------------
 *
 * A host thread pushing to a running vat is paused between its exchange
 * and its link store (the pause point in push_chain). The worker must not
 * wait for it: another vat on the only worker still runs, and the paused
 * message is delivered once its producer finishes the push. */

typedef struct holder {
  _Atomic uint64_t started;
  _Atomic uint64_t gate;
  _Atomic uint64_t later;
} holder;

/* Keeps the vat running (its mailbox not idle) until the test opens the
 * gate, so the paused push lands on a scheduled vat. */
static void hold(vat_turn *turn, void *state, void *arg) {
  (void)turn;
  (void)arg;
  holder *h = state;
  atomic_store_explicit(&h->started, 1, memory_order_release);
  if (!test_wait_u64(&h->gate, 1, 30))
    test_record_bad_call("gate never opened", VAT_ETIMEDOUT, __FILE__,
                         __LINE__);
}

static void count_later(vat_turn *turn, void *state, void *arg) {
  (void)turn;
  (void)arg;
  holder *h = state;
  atomic_fetch_add_explicit(&h->later, 1, memory_order_release);
}

static void *send_later(void *arg) {
  vat_ref *to = arg;
  expect_vat_ok(vat_thread_register());
  expect_vat_ok(vat_host_send(to, count_later, NULL));
  expect_vat_ok(vat_thread_unregister());
  return NULL;
}

START_TEST(producer_paused_mid_push_does_not_stall_worker) {
  vat_system *sys = test_system(1);
  holder *h;
  vat_ref *a = test_spawn(sys, sizeof *h, (void **)&h);
  test_counter *other;
  vat_ref *b = test_spawn_counter(sys, &other);

  ck_assert_vat_ok(vat_host_send(a, hold, NULL));
  ck_assert(test_wait_u64(&h->started, 1, 10));
  vat__test_point_arm("mailbox.push.after_exchange");
  pthread_t producer;
  ck_assert_int_eq(pthread_create(&producer, NULL, send_later, a), 0);
  ck_assert_msg(vat__test_point_wait(10), "the producer never reached the "
                                          "pause point");
  atomic_store_explicit(&h->gate, 1, memory_order_release);

  ck_assert_vat_ok(vat_host_send(b, test_hit, NULL));
  ck_assert_msg(test_wait_u64(&other->hits, 1, 2.0),
                "another vat did not run within 2 s while a producer to a "
                "vat on the same worker was paused mid-push");
  ck_assert_uint_eq(atomic_load(&h->later), 0); /* not linked yet */

  vat__test_point_release();
  pthread_join(producer, NULL);
  ck_assert_msg(test_wait_u64(&h->later, 1, 10),
                "the paused message was not delivered once its push ended");
  test_quiesce(sys);
  ck_assert_uint_eq(atomic_load(&h->later), 1);
}
END_TEST

/* --- A burst wakes one worker at a time, and enough of them -------------
 *
 * Host sends to idle vats wake parked workers. While a woken worker has
 * not yet started looking for work (held at the pause point), the senders
 * after the first signal nobody: the woken worker will see their vats.
 * Once it runs, wake-ups pass on from worker to worker: the vats of the
 * burst, which each wait until all of them are running at once, all get a
 * worker. */

enum { BURST_WORKERS = 3 };

static _Atomic uint64_t burst_arrived;

static void meet_the_others(vat_turn *turn, void *state, void *arg) {
  (void)turn;
  (void)state;
  (void)arg;
  atomic_fetch_add_explicit(&burst_arrived, 1, memory_order_acq_rel);
  if (!test_wait_u64(&burst_arrived, BURST_WORKERS, 30))
    test_record_bad_call("the burst's vats never all ran at once",
                         VAT_ETIMEDOUT, __FILE__, __LINE__);
}

START_TEST(a_burst_wakes_one_worker_at_a_time_and_enough_of_them) {
  vat_system *sys = test_system(BURST_WORKERS);
  atomic_store(&burst_arrived, 0);
  vat_ref *vats[BURST_WORKERS];
  for (int i = 0; i < BURST_WORKERS; i++)
    vats[i] = test_spawn(sys, 0, NULL);
  ck_assert(vat__wait_quiescent(&sys->sched, 30)); /* every worker parked */
  uint64_t before = atomic_load(&sys->sched.wakes);

  vat__test_point_arm("sched.idle.woken");
  ck_assert_vat_ok(vat_host_send(vats[0], meet_the_others, NULL));
  ck_assert_msg(vat__test_point_wait(10), "no worker woke for the first vat");
  for (int i = 1; i < BURST_WORKERS; i++)
    ck_assert_vat_ok(vat_host_send(vats[i], meet_the_others, NULL));
  uint64_t signals = atomic_load(&sys->sched.wakes) - before;
  ck_assert_msg(signals == 1,
                "%llu parked workers were signalled for the burst while the "
                "first one woken had not started looking for work",
                (unsigned long long)signals);

  vat__test_point_release();
  ck_assert_msg(test_wait_u64(&burst_arrived, BURST_WORKERS, 30),
                "only %llu of the burst's vats got a worker",
                (unsigned long long)atomic_load(&burst_arrived));
  test_quiesce(sys);
}
END_TEST

/* --- No wake-up is lost ---------------------------------------------------
 *
 * Rounds that start from a parked system (spin 0, so every hand-over goes
 * through park and wake): a host burst to a few vats, each of which fans
 * out to others from its turn. A wake-up lost between a sender leaving
 * its vat to a worker in flight and that worker parking again would leave
 * a round's vats queued with every worker asleep: the round never ends. */

enum { FAN_VATS = 24, FAN_OUT = 4, FAN_ROUNDS = 200 / TEST_SCALE };

typedef struct fan {
  vat_ref **all;
  _Atomic uint64_t *turns;
  unsigned index;
} fan;

static void fan_leaf(vat_turn *turn, void *state, void *arg) {
  (void)turn;
  (void)arg;
  fan *f = state;
  atomic_fetch_add_explicit(f->turns, 1, memory_order_release);
}

static void fan_root(vat_turn *turn, void *state, void *arg) {
  (void)arg;
  fan *f = state;
  for (unsigned i = 1; i <= FAN_OUT; i++)
    expect_vat_ok(
        vat_send(turn, f->all[(f->index + i) % FAN_VATS], fan_leaf, NULL));
  atomic_fetch_add_explicit(f->turns, 1, memory_order_release);
}

START_TEST(no_wake_up_is_lost_between_parked_rounds) {
  vat_system *sys = parking_system(4);
  static _Atomic uint64_t turns;
  atomic_store(&turns, 0);
  static vat_ref *all[FAN_VATS]; /* a global: the collector scans it */
  for (unsigned i = 0; i < FAN_VATS; i++) {
    fan *f;
    all[i] = test_spawn(sys, sizeof *f, (void **)&f);
    *f = (fan){.all = all, .turns = &turns, .index = i};
  }
  uint64_t seed = test_seed("no_wake_up_is_lost_between_parked_rounds");
  uint64_t expected = 0;
  for (unsigned round = 0; round < FAN_ROUNDS; round++) {
    ck_assert(vat__wait_quiescent(&sys->sched, 30)); /* every worker parked */
    unsigned roots = (unsigned)test_rand_between(&seed, 1, 6);
    for (unsigned r = 0; r < roots; r++)
      ck_assert_vat_ok(vat_host_send(
          all[test_rand_between(&seed, 0, FAN_VATS - 1)], fan_root, NULL));
    expected += roots * (1 + FAN_OUT);
    ck_assert_msg(test_wait_u64(&turns, expected, 30),
                  "round %u: %llu of %llu turns ran", round,
                  (unsigned long long)atomic_load(&turns),
                  (unsigned long long)expected);
  }
  test_quiesce(sys);
}
END_TEST

/* The placement policy on its own: sched/ knows a vat only as its task
 * link, so these drive a scheduler of two runners and bare tasks, no
 * system and no threads. */
typedef struct {
  vat__sched sched;
  vat__runner runner[2];
  vat__runner *runners[2];
} two_runners;

static void two_runners_init(two_runners *t) {
  memset(t, 0, sizeof *t);
  for (unsigned i = 0; i < 2; i++)
    t->runners[i] = &t->runner[i];
  ck_assert_int_eq(vat__sched_init(&t->sched, t->runners, 2, false), VAT_OK);
  for (unsigned i = 0; i < 2; i++)
    vat__runner_init(&t->runner[i], &t->sched, i);
}

/* A vat that used up its budget stays on its runner (the busy list) while
 * it is alone there or not overloaded; an overloaded one beside other
 * work goes where the idle runner steals it. */
START_TEST(an_overloaded_vat_beside_other_work_is_left_to_thieves) {
  static two_runners t;
  vat__task a = {0}, b = {0};

  two_runners_init(&t);
  t.runner[0].next = &a;
  vat__requeue(&t.runner[0], &b, false);
  ck_assert_uint_eq(t.runner[0].busy_len, 1);
  ck_assert_uint_eq(vat__runq_size(&t.runner[0].runq), 0);

  two_runners_init(&t);
  vat__requeue(&t.runner[0], &b, true); /* alone: it stays */
  ck_assert_uint_eq(t.runner[0].busy_len, 1);

  two_runners_init(&t);
  t.runner[0].next = &a;
  vat__requeue(&t.runner[0], &b, true);
  ck_assert_uint_eq(t.runner[0].busy_len, 0);
  ck_assert_ptr_eq(vat__steal(&t.runner[1]), &b);
}
END_TEST

/* Past a full run queue, half of it and the new vat go to the shared queue
 * as one chain: every vat is somewhere exactly once, and the shared
 * queue's count (which parking and quiescence read) is its length. */
START_TEST(a_full_run_queue_spills_every_vat_to_the_shared_queue) {
  static two_runners t;
  enum { N = 3 * VAT__RUNQ_SIZE + 7 };
  static vat__task task[N];
  static bool seen[N];

  two_runners_init(&t);
  for (unsigned i = 0; i < N; i++)
    vat__schedule_stealable(&t.runner[0], &task[i]);
  ck_assert_uint_eq(vat__runq_size(&t.runner[0].runq) +
                        vat__inject_size(&t.sched.inject),
                    N);
  unsigned taken = 0;
  for (vat__task *v; (v = vat__runq_pop(&t.runner[0].runq)) != NULL ||
                     (v = vat__inject_pop(&t.sched.inject)) != NULL;) {
    ptrdiff_t i = v - task;
    ck_assert(i >= 0 && i < N);
    ck_assert_msg(!seen[i], "vat %td taken twice", i);
    seen[i] = true;
    taken++;
  }
  ck_assert_uint_eq(taken, N);
  ck_assert_uint_eq(vat__inject_size(&t.sched.inject), 0);
}
END_TEST

/* A runner that takes more than one vat from the shared queue holds some
 * anyone could have run: it wakes a parked runner to steal them. One vat
 * taken wakes nobody. */
START_TEST(a_share_of_the_shared_queue_wakes_a_parked_runner) {
  static two_runners t;
  vat__task task[3] = {{0}};

  two_runners_init(&t);
  atomic_store(&t.sched.parked, 1); /* as if runner 1 were parked */
  vat__inject_push(&t.sched.inject, &task[0], &task[0], 1);
  ck_assert_ptr_eq(vat__take_injected(&t.runner[0]), &task[0]);
  uint64_t wakes = atomic_load(&t.sched.wakes);
  ck_assert_uint_eq(wakes, 0);

  task[0].next = &task[1];
  task[1].next = &task[2];
  vat__inject_push(&t.sched.inject, &task[0], &task[2], 3);
  ck_assert_ptr_eq(vat__take_injected(&t.runner[0]), &task[0]);
  wakes = atomic_load(&t.sched.wakes);
  ck_assert_uint_eq(wakes, 1);
  ck_assert_uint_eq(vat__runq_size(&t.runner[0].runq), 1);
}
END_TEST

/* A private vat sent behind after a long private streak (pick.h) may be
 * stolen before its own runner pops it back. The runner must then run
 * the vat left in its busy list, not report nothing to do: with spin 0
 * it parked at once, and nobody else can see a busy list, so the vat
 * (a connection's, under pipelined calls) waited for ever. The thief
 * steals at a pause point, in that very window. */
static two_runners stranding;

static void *pick_on_runner0(void *arg) {
  (void)arg;
  return vat__pick(&stranding.runner[0]);
}

START_TEST(a_busy_vat_is_not_stranded_when_its_partner_is_stolen) {
  vat__task a = {0}, b = {0};
  two_runners_init(&stranding);
  vat__runner *r = &stranding.runner[0];
  r->busy[0] = &a;
  r->busy[1] = &b;
  r->busy_len = 2;
  r->private_streak = VAT__PRIVATE_STREAK_MAX - 1;

  vat__test_point_arm("sched.pick.private_behind");
  pthread_t picker;
  ck_assert_int_eq(pthread_create(&picker, NULL, pick_on_runner0, NULL), 0);
  ck_assert(vat__test_point_wait(10));
  ck_assert_ptr_eq(vat__steal(&stranding.runner[1]), &a);
  vat__test_point_release();
  void *picked;
  ck_assert_int_eq(pthread_join(picker, &picked), 0);
  ck_assert_ptr_eq(picked, &b);
  ck_assert_uint_eq(r->busy_len, 0);
}
END_TEST

/* Pairs of vats bouncing many balls each use up their budgets, so a
 * runner keeps two of them in its busy list, sends one behind at each
 * private streak's end, and another worker, woken for it, may steal it:
 * the window the test above pins. With spin 0 every idle worker parks at
 * once, and a vat stranded in a parked runner's busy list stopped its
 * balls for good: before the fix, this test stopped in 6 runs of 10
 * (2,000 of 2,400 balls at rest, say). Four workers, so that thieves
 * are often awake. */
START_TEST(busy_pairs_on_parking_workers_bounce_every_ball) {
  enum { PAIRS = 6, ROUNDS = 4 };
  const unsigned balls = 200 / TEST_SCALE;
  const uintptr_t hops = 4000 / TEST_SCALE;
  vat_system *sys = parking_system(4);
  static _Atomic uint64_t done;
  atomic_store(&done, 0);
  static vat_ref *ends[PAIRS][2]; /* a global: the collector scans it */
  for (int i = 0; i < PAIRS; i++)
    test_spawn_volley_pair(sys, &done, ends[i]);
  uint64_t expected = 0;
  for (int round = 0; round < ROUNDS; round++) {
    for (int i = 0; i < PAIRS; i++)
      for (int k = 0; k < 2; k++)
        for (unsigned n = 0; n < balls; n++)
          ck_assert_vat_ok(
              vat_host_send(ends[i][k], test_volley_back, (void *)hops));
    expected += PAIRS * 2 * balls;
    ck_assert_msg(test_wait_u64(&done, expected, 30),
                  "round %d: %llu of %llu balls came to rest", round,
                  (unsigned long long)atomic_load(&done),
                  (unsigned long long)expected);
  }
  test_quiesce(sys);
}
END_TEST

void test_idle_poller_tests(Suite *s); /* test_idle_poller.c */

Suite *test_sched_suite(void) {
  Suite *s = suite_create("sched");
  TCase *tc = test_case("policy", 120);
  tcase_add_test(tc, busy_pair_does_not_starve_queued_vats);
  tcase_add_test(tc, producer_paused_mid_push_does_not_stall_worker);
  tcase_add_test(tc, a_burst_wakes_one_worker_at_a_time_and_enough_of_them);
  tcase_add_test(tc, no_wake_up_is_lost_between_parked_rounds);
  tcase_add_test(tc, busy_pairs_on_parking_workers_bounce_every_ball);
  suite_add_tcase(s, tc);
  tc = test_case("placement", 30);
  tcase_add_test(tc, an_overloaded_vat_beside_other_work_is_left_to_thieves);
  tcase_add_test(tc, a_full_run_queue_spills_every_vat_to_the_shared_queue);
  tcase_add_test(tc, a_share_of_the_shared_queue_wakes_a_parked_runner);
  tcase_add_test(tc, a_busy_vat_is_not_stranded_when_its_partner_is_stolen);
  suite_add_tcase(s, tc);
  test_idle_poller_tests(s);
  return s;
}
