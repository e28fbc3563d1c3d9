/* Overload: overloaded vats mute their senders (the default), drop the
 * newest messages or fail, as their policy says; their queue length is
 * readable from any thread; host senders may wait for them; cyclic
 * senders muted by each other never deadlock; urgent messages go ahead.
 *
 * Bounds are checked by counts, never by durations: a producer reads the
 * consumer's handled count at each of its turns, and a gate (a turn that
 * waits for the test) holds a consumer where a test wants it. */
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>

#include "support.h"

/* --- A flood ------------------------------------------------------------- */

typedef struct sink {
  _Atomic uint64_t handled, sum;
  _Atomic uint64_t gate_at; /* 0: none; else the message that waits */
  _Atomic uint64_t entered, open;
  _Atomic uint64_t over; /* items handled while the sink was overloaded */
} sink;

static void sink_item(vat_turn *turn, void *state, void *arg) {
  sink *s = state;
  if (vat_ref_overloaded(vat_self(turn)))
    atomic_fetch_add(&s->over, 1);
  uint64_t n = atomic_load_explicit(&s->handled, memory_order_relaxed) + 1;
  atomic_fetch_add(&s->sum, (uintptr_t)arg);
  atomic_store(&s->handled, n);
  if (n == atomic_load(&s->gate_at)) {
    atomic_store(&s->entered, 1);
    while (atomic_load(&s->open) == 0)
      test_sleep(0.0002);
  }
}

typedef struct flooder {
  vat_ref *to;
  sink *watched;
  uint64_t n, sent, per_turn;
  uint64_t worst;       /* the most sent and not yet handled at a turn */
  uint64_t overloaded;  /* turns that found the sink overloaded */
  uint64_t handled_end; /* the sink's count when everything was sent */
  _Atomic uint64_t done;
} flooder;

static void flood(vat_turn *turn, void *state, void *arg) {
  (void)arg;
  flooder *p = state;
  uint64_t handled = atomic_load(&p->watched->handled);
  if (p->sent - handled > p->worst)
    p->worst = p->sent - handled;
  p->overloaded += vat_ref_overloaded(p->to);
  for (uint64_t i = 0; i < p->per_turn && p->sent < p->n; i++) {
    p->sent++;
    expect_vat_ok(vat_send(turn, p->to, sink_item, (void *)(uintptr_t)p->sent));
  }
  if (p->sent < p->n) {
    expect_vat_ok(vat_send(turn, vat_self(turn), flood, NULL));
    return;
  }
  p->handled_end = handled;
  atomic_store(&p->done, 1);
}

static vat_ref *spawn_sink(vat_system *sys, const vat_overload *ov,
                           sink **out) {
  vat_entity_def def = {.state_size = sizeof(sink), .overload = ov};
  vat_ref *ref;
  ck_assert_vat_ok(vat_host_spawn(sys, &def, &ref, (void **)out));
  return ref;
}

/* One producer floods one sink of high mark HIGH on `workers` workers:
 * every message arrives, and the producer is muted. On one worker the
 * sink's backlog stays within the mark plus what one batch of the
 * producer sends before the sink measures again: exact, as the two take
 * turns. On two, the sink measures while the producer runs, so the bound
 * is as tight unless the system preempts the sink's thread: the producer
 * then sends until the sink runs again, which vat/core.h does not bound
 * ("what senders on other cores send meanwhile"). With other tests
 * running beside it, that was 80,000-103,000 messages in about one run
 * of the whole suite in seven, against a tenth of the flood the test once
 * allowed; it allows half now. Without backpressure the backlog reached
 * nearly the whole flood. */
static void check_flood(unsigned workers) {
  enum { PER_TURN = 200, HIGH = 2048 / TEST_SCALE };
  /* Two workers: ten times as long, about 0.1 s, so that the idle worker
   * gets a core to steal on when another process holds the other one (at
   * 400,000 the flood was over in 12 ms, within one time slice of the
   * other process, in 4 runs of 15 with a busy loop beside it: steals 0). */
  const int N = (workers > 1 ? 4000000 : 400000) / TEST_SCALE;
  vat_config cfg;
  vat_config_default(&cfg);
  cfg.workers = workers;
  vat_system *sys = NULL;
  ck_assert_vat_ok(vat_system_new(&cfg, &sys));
  sink *s;
  vat_ref *to = spawn_sink(sys, &(vat_overload){.high = HIGH}, &s);
  flooder *p;
  vat_ref *pr = test_spawn(sys, sizeof *p, (void **)&p);
  *p = (flooder){.to = to, .watched = s, .n = N, .per_turn = PER_TURN};
  ck_assert_vat_ok(vat_host_send(pr, flood, NULL));
  ck_assert(test_wait_u64(&s->handled, N, 60));
  ck_assert_uint_eq(atomic_load(&s->sum), (uint64_t)N * (N + 1) / 2);
  ck_assert_uint_eq(atomic_load(&p->done), 1);
  uint64_t bound = HIGH + (uint64_t)(cfg.batch + 1) * PER_TURN;
  if (workers > 1)
    bound += N / 2;
  ck_assert_msg(p->worst <= bound,
                "%u workers: backlog reached %" PRIu64 " (bound %" PRIu64 ")",
                workers, p->worst, bound);
  /* Fair draining: when the producer has sent everything, the consumer
   * is within that bound of it. */
  ck_assert_msg(p->handled_end + bound >= (uint64_t)N,
                "%u workers: %" PRIu64 " of %d handled when all were sent",
                workers, p->handled_end, N);
  ck_assert_uint_gt(atomic_load(&s->over), 0);
  ck_assert(!vat_ref_overloaded(to));
  /* The backlogged pair spread over both workers: the overloaded sink
   * went where the idle worker could steal it (on a quiet machine the
   * smaller share was 23,000-107,000 of the 402,000 turns). */
  vat_sys_info info;
  vat_worker_info w[2];
  ck_assert_int_eq(vat_system_inspect(sys, &info, w, 2), (int)workers);
  if (workers == 2 && TEST_SCALE == 1)
    ck_assert_msg(w[0].turns > 0 && w[1].turns > 0,
                  "one worker ran everything: %" PRIu64 " and %" PRIu64,
                  w[0].turns, w[1].turns);
  test_quiesce(sys);
}

START_TEST(muting_bounds_a_flood_one_worker) {
  check_flood(1);
}
END_TEST

START_TEST(muting_bounds_a_flood_two_workers) {
  check_flood(2);
}
END_TEST

/* The producer's burst is bounded before the sink first measures its
 * queue: a batch whose turns sent VAT_SEND_BURST messages to one vat ends
 * there, so the sink runs, counts, and mutes the producer within one turn
 * of sends of that. On one worker the two take turns, so the bound is
 * exact. Before: the producer's first batch (64 turns of sends) went out
 * before the sink had run once, 12,800 queued against a mark of 2,048. */
START_TEST(a_batch_ends_after_a_burst_of_sends) {
  enum { N = 100000 / TEST_SCALE, PER_TURN = 200, HIGH = 2048 / TEST_SCALE };
  vat_system *sys = test_system(1);
  sink *s;
  vat_ref *to = spawn_sink(sys, &(vat_overload){.high = HIGH}, &s);
  flooder *p;
  vat_ref *pr = test_spawn(sys, sizeof *p, (void **)&p);
  *p = (flooder){.to = to, .watched = s, .n = N, .per_turn = PER_TURN};
  ck_assert_vat_ok(vat_host_send(pr, flood, NULL));
  ck_assert(test_wait_u64(&p->done, 1, 60));
  ck_assert(test_wait_u64(&s->handled, N, 60));
  ck_assert_uint_gt(atomic_load(&s->over), 0);
  uint64_t bound = HIGH + VAT_SEND_BURST + 2 * PER_TURN;
  ck_assert_msg(p->worst <= bound, "backlog reached %" PRIu64 " (bound %" PRIu64 ")",
                p->worst, bound);
  test_quiesce(sys);
}
END_TEST

/* A host-driven system mutes too, and run-until-quiescent releases the
 * muted producer: all arrive. */
START_TEST(muting_in_a_host_driven_system) {
  enum { N = 50000 / TEST_SCALE, PER_TURN = 100, HIGH = 512 / TEST_SCALE };
  vat_system *sys = test_host_system(false, 0);
  sink *s;
  vat_ref *to = spawn_sink(sys, &(vat_overload){.high = HIGH}, &s);
  flooder *p;
  vat_ref *pr = test_spawn(sys, sizeof *p, (void **)&p);
  *p = (flooder){.to = to, .watched = s, .n = N, .per_turn = PER_TURN};
  ck_assert_vat_ok(vat_host_send(pr, flood, NULL));
  vat_run_result res;
  ck_assert_vat_ok(vat_system_run_until_quiescent(sys, 0, &res));
  ck_assert_uint_eq(atomic_load(&s->handled), N);
  ck_assert_uint_gt(atomic_load(&s->over), 0);
  ck_assert_uint_le(p->worst, HIGH + 65 * PER_TURN);
  test_quiesce(sys);
}
END_TEST

/* Shutdown with a producer muted: what the muted vat held is counted,
 * so every message is accounted for. */
START_TEST(shutdown_counts_a_muted_vat) {
  enum { N = 100000, PER_TURN = 100, HIGH = 256 };
  vat_system *sys = test_host_system(false, 0);
  sink *s;
  vat_ref *to = spawn_sink(sys, &(vat_overload){.high = HIGH}, &s);
  flooder *p;
  vat_ref *pr = test_spawn(sys, sizeof *p, (void **)&p);
  *p = (flooder){.to = to, .watched = s, .n = N, .per_turn = PER_TURN};
  ck_assert_vat_ok(vat_host_send(pr, flood, NULL));
  /* Until the producer has been muted at least once and is muted now. */
  vat_run_result res;
  for (int i = 0; i < 100000 && !(p->overloaded > 0 && vat_ref_overloaded(to));
       i++)
    ck_assert_vat_ok(vat_system_run(sys, 1, 0, &res));
  ck_assert(vat_ref_overloaded(to));
  /* It may run a few turns before its deadline; the counts come after. */
  int rc = vat_system_shutdown(sys, 0);
  ck_assert(rc == VAT_OK || rc == VAT_ETIMEDOUT);
  vat_stats st = test_stats(sys);
  /* The items, the host's first message, and one continuation per
   * slice sent (the last slice's, unless it ended the flood). */
  uint64_t accepted = p->sent + 1 + p->sent / PER_TURN - (p->sent == N);
  ck_assert_msg(
      st.delivered + st.dropped_at_shutdown + st.dead_letters == accepted,
      "delivered %" PRIu64 " + dropped %" PRIu64 " + dead %" PRIu64
      " != accepted %" PRIu64,
      st.delivered, st.dropped_at_shutdown, st.dead_letters, accepted);
  vat_system_destroy(sys);
}
END_TEST

/* A kill sent to the consumer mid-flood ends it within one batch of
 * turns: counted, not timed. The consumer's handled count is read after
 * the kill was queued and alerted (vat_host_exit returned); it may run
 * at most the rest of its current batch before its turn loop sees it. */
START_TEST(kill_mid_flood_ends_within_a_batch) {
  enum { N = 2000000 / TEST_SCALE, PER_TURN = 1000 };
  vat_config cfg;
  vat_config_default(&cfg);
  cfg.workers = 2;
  cfg.on_crash = NULL;
  vat_system *sys = NULL;
  ck_assert_vat_ok(vat_system_new(&cfg, &sys));
  sink *s;
  vat_ref *to = spawn_sink(sys, NULL, &s);
  flooder *p;
  vat_ref *pr = test_spawn(sys, sizeof *p, (void **)&p);
  *p = (flooder){.to = to, .watched = s, .n = N, .per_turn = PER_TURN};
  ck_assert_vat_ok(vat_host_send(pr, flood, NULL));
  ck_assert(test_wait_u64(&s->handled, N / 20, 60));
  ck_assert_vat_ok(vat_host_exit(to, vat_atom_value(vat_atom_killed())));
  uint64_t at_kill = atomic_load(&s->handled);
  for (int i = 0; i < 30000 && !vat_ref_is_dead(to); i++)
    test_sleep(0.001);
  ck_assert(vat_ref_is_dead(to));
  uint64_t after = atomic_load(&s->handled) - at_kill;
  ck_assert_msg(after <= cfg.batch, "%" PRIu64 " turns after the kill", after);
  ck_assert_uint_lt(atomic_load(&s->handled), N);
  /* The producer, muted on it or not, finishes: its sends are dead
   * letters now. */
  ck_assert(test_wait_u64(&p->done, 1, 60));
  test_quiesce(sys);
}
END_TEST

/* --- Gated sinks: the queue held where the test wants it ----------------- */

static void gate_msg(vat_turn *turn, void *state, void *arg) {
  (void)turn;
  (void)arg;
  sink *s = state;
  atomic_store(&s->entered, atomic_load(&s->entered) + 1);
  while (atomic_load(&s->open) < atomic_load(&s->entered))
    test_sleep(0.0002);
}

/* Queues gate, `before` items, gate, `after` items; lets the first gate
 * go and waits for the second: the batch that ran in between measured
 * the queue. Returns the sink's state. */
/* The sink runs the first gate's batch on, past the mark, to the second
 * gate: a batch of 1 (the hostile build) measures between its turns and
 * may find it below its low mark by then. */
static void hold_second_gate(vat_ref *ref, sink *s, int before, int after) {
  ck_assert_vat_ok(vat_host_send(ref, gate_msg, NULL));
  ck_assert(test_wait_u64(&s->entered, 1, 30));
  for (int i = 1; i <= before; i++)
    ck_assert_vat_ok(vat_host_send(ref, sink_item, (void *)(uintptr_t)i));
  ck_assert_vat_ok(vat_host_send(ref, gate_msg, NULL));
  for (int i = 1; i <= after; i++)
    ck_assert_vat_ok(
        vat_host_send(ref, sink_item, (void *)(uintptr_t)(before + i)));
  atomic_store(&s->open, 1);
  ck_assert(test_wait_u64(&s->entered, 2, 30));
}

START_TEST(queue_len_is_readable_from_any_thread) {
  vat_system *sys = test_system(2);
  sink *s;
  vat_ref *ref = spawn_sink(sys, &(vat_overload){.high = 1000000}, &s);
  ck_assert_uint_eq(vat_ref_queue_len(ref), 0);
  ck_assert_uint_eq(vat_ref_queue_len(NULL), 0);
  ck_assert_vat_ok(vat_host_send(ref, gate_msg, NULL));
  ck_assert(test_wait_u64(&s->entered, 1, 30));
  for (int i = 1; i <= 500; i++)
    ck_assert_vat_ok(vat_host_send(ref, sink_item, (void *)(uintptr_t)i));
  /* The count, in constant time: the 500 and the gate running, popped
   * since the vat last counted (vat/core.h: one batch's turns at most). */
  ck_assert_uint_eq(vat_ref_queue_len(ref), 501);
  vat_info info;
  ck_assert_vat_ok(vat_ref_inspect(ref, &info));
  ck_assert_uint_eq(info.queue_len, 500); /* walked: exact, as observe.h says */
  /* Behind: the count the vat took at its batch's end. */
  ck_assert_vat_ok(vat_host_send(ref, gate_msg, NULL));
  for (int i = 501; i <= 1000; i++)
    ck_assert_vat_ok(vat_host_send(ref, sink_item, (void *)(uintptr_t)i));
  atomic_store(&s->open, 1);
  ck_assert(test_wait_u64(&s->entered, 2, 30));
  /* As of the end of the batch before the one the gate stopped. */
  size_t len = vat_ref_queue_len(ref);
  ck_assert_uint_ge(len, 500);
  ck_assert_uint_le(len, 501 + 64);
  atomic_store(&s->open, 2);
  ck_assert(test_wait_u64(&s->handled, 1000, 30));
  for (int i = 0; i < 30000 && vat_ref_queue_len(ref) != 0; i++)
    test_sleep(0.001);
  ck_assert_uint_eq(vat_ref_queue_len(ref), 0);
  test_quiesce(sys);
}
END_TEST

/* vat_ref_queue_len reads a counted vat's count: exact at known points,
 * and a million reads of a queue of 200,000 take no longer than a
 * million reads of an empty one would (each walk of the old code, once
 * past the mark, visited the whole queue: 2 * 10^11 steps, past any
 * test's timeout). Host-driven, so nothing runs unless the test says. */
START_TEST(queue_len_is_constant_time) {
  enum { N = 200000 / TEST_SCALE, READS = 1000000 / TEST_SCALE };
  vat_system *sys = test_host_system(false, 0);
  sink *s;
  vat_ref *ref = spawn_sink(
      sys, &(vat_overload){.policy = VAT_OVERLOAD_NONE, .high = 1000}, &s);
  for (int i = 1; i <= N; i++)
    ck_assert_vat_ok(vat_host_send(ref, sink_item, (void *)(uintptr_t)i));
  uint64_t sum = 0;
  for (int i = 0; i < READS; i++)
    sum += vat_ref_queue_len(ref);
  ck_assert_uint_eq(sum, (uint64_t)N * READS);
  vat_run_result res;
  ck_assert_vat_ok(vat_system_run_until_quiescent(sys, 0, &res));
  ck_assert_uint_eq(atomic_load(&s->handled), N);
  ck_assert_uint_eq(vat_ref_queue_len(ref), 0); /* idle: exact */
  for (int i = 1; i <= 10; i++)
    ck_assert_vat_ok(vat_host_send(ref, sink_item, (void *)(uintptr_t)i));
  ck_assert_uint_eq(vat_ref_queue_len(ref), 10);
  test_quiesce(sys);
}
END_TEST

/* vat_ref_queue_len_max walks a queue no further than its bound: a
 * million reads of "more than one?" of an uncounted queue of 100,000 cost
 * what reads of a short one would (a walk of the whole queue each time:
 * 10^11 steps, past any test's timeout). A counted vat's count is capped
 * the same. Host-driven, so nothing runs unless the test says. */
START_TEST(queue_len_max_counts_no_further_than_its_bound) {
  enum { N = 100000 / TEST_SCALE, READS = 1000000 / TEST_SCALE };
  vat_system *sys = test_host_system(false, 0);
  sink *s, *cs;
  vat_ref *ref = spawn_sink(sys, NULL, &s); /* never ran: not counted */
  vat_ref *counted = spawn_sink(
      sys, &(vat_overload){.policy = VAT_OVERLOAD_NONE, .high = 1000}, &cs);
  for (int i = 1; i <= N; i++) {
    ck_assert_vat_ok(vat_host_send(ref, sink_item, (void *)(uintptr_t)i));
    ck_assert_vat_ok(vat_host_send(counted, sink_item, (void *)(uintptr_t)i));
  }
  ck_assert_uint_eq(vat_ref_queue_len_max(ref, 2), 2);
  uint64_t sum = 0;
  for (int i = 0; i < READS; i++)
    sum += vat_ref_queue_len_max(ref, 2);
  ck_assert_uint_eq(sum, 2ull * READS);
  ck_assert_uint_eq(vat_ref_queue_len_max(ref, 7), 7);
  ck_assert_uint_eq(vat_ref_queue_len_max(ref, N + 5), N);
  ck_assert_uint_eq(vat_ref_queue_len(ref), N);
  ck_assert_uint_eq(vat_ref_queue_len_max(counted, 3), 3);
  ck_assert_uint_eq(vat_ref_queue_len_max(counted, N + 5), N);
  ck_assert_uint_eq(vat_ref_queue_len_max(ref, 0), 0);
  ck_assert_uint_eq(vat_ref_queue_len_max(NULL, 5), 0);
  vat_run_result res;
  ck_assert_vat_ok(vat_system_run_until_quiescent(sys, 0, &res));
  ck_assert_uint_eq(atomic_load(&s->handled), N);
  ck_assert_uint_eq(vat_ref_queue_len_max(ref, 2), 0); /* idle: exact */
  ck_assert_uint_eq(vat_ref_queue_len_max(counted, 2), 0);
  test_quiesce(sys);
}
END_TEST

static void nothing(vat_turn *turn, void *state, void *arg) {
  (void)turn;
  (void)state;
  (void)arg;
}

START_TEST(host_send_wait_waits_for_the_low_mark) {
  enum { HIGH = 50, LOW = 10 };
  vat_system *sys = test_system(2);
  sink *s;
  vat_ref *ref = spawn_sink(sys, &(vat_overload){.high = HIGH, .low = LOW}, &s);
  ck_assert_vat_err(vat_host_send_wait(ref, nothing, NULL, -1), VAT_EINVAL);
  ck_assert_vat_err(vat_host_send_wait(ref, nothing, NULL, NAN), VAT_EINVAL);
  ck_assert_vat_err(vat_host_send_wait(ref, NULL, NULL, 1), VAT_EINVAL);
  ck_assert_vat_err(vat_host_send_wait(NULL, nothing, NULL, 1), VAT_EINVAL);
  /* The first batch leaves 200 queued behind the second gate. */
  hold_second_gate(ref, s, 100, 200);
  ck_assert(vat_ref_overloaded(ref));
  ck_assert_vat_err(vat_host_send_wait(ref, nothing, NULL, 0), VAT_EAGAIN);
  ck_assert_vat_err(vat_host_send_wait(ref, nothing, NULL, 0.01),
                    VAT_ETIMEDOUT);
  /* The plain send never waits. */
  ck_assert_vat_ok(vat_host_send(ref, sink_item, (void *)(uintptr_t)301));
  atomic_store(&s->open, 2);
  ck_assert_vat_ok(
      vat_host_send_wait(ref, sink_item, (void *)(uintptr_t)302, 30));
  /* It sent once the sink was measured below its low mark. */
  ck_assert_uint_ge(atomic_load(&s->handled) + LOW, 301);
  ck_assert(test_wait_u64(&s->handled, 302, 30));
  ck_assert_uint_eq(atomic_load(&s->sum), 302 * 303 / 2);
  test_quiesce(sys);
}
END_TEST

START_TEST(drop_policy_drops_the_newest_counted) {
  vat_system *sys = test_system(2);
  sink *s;
  vat_ref *ref = spawn_sink(
      sys, &(vat_overload){.policy = VAT_OVERLOAD_DROP, .high = 50}, &s);
  /* The 50th message pushed (the gates among them) passes the mark, as
   * the sender's count finds it: the sink is overloaded from there,
   * although it has not measured its queue. */
  hold_second_gate(ref, s, 40, 8);
  ck_assert(vat_ref_overloaded(ref));
  for (int i = 0; i < 500; i++) /* dropped: the sink is over its mark */
    ck_assert_vat_ok(vat_host_send(ref, sink_item, (void *)(uintptr_t)1000));
  ck_assert_uint_eq(test_stats(sys).overload_dropped, 500);
  atomic_store(&s->open, 2);
  ck_assert(test_wait_u64(&s->handled, 48, 30));
  ck_assert(!vat_ref_is_dead(ref));
  /* Below the mark again: queued as usual. */
  for (int i = 0; i < 30000 && vat_ref_overloaded(ref); i++)
    test_sleep(0.001);
  ck_assert_vat_ok(vat_host_send(ref, sink_item, (void *)(uintptr_t)49));
  ck_assert(test_wait_u64(&s->handled, 49, 30));
  ck_assert_uint_eq(atomic_load(&s->sum), 49 * 50 / 2);
  ck_assert_vat_ok(vat_system_shutdown(sys, 30));
  vat_stats st = test_stats(sys);
  ck_assert_uint_eq(st.overload_dropped, 500);
  ck_assert_uint_eq(st.dead_letters, 0);
  vat_system_destroy(sys);
}
END_TEST

START_TEST(fail_policy_ends_the_vat_overloaded) {
  vat_system *sys = test_system(2);
  sink *s;
  vat_ref *ref = spawn_sink(
      sys, &(vat_overload){.policy = VAT_OVERLOAD_FAIL, .high = 50}, &s);
  ck_assert_vat_ok(vat_host_send(ref, gate_msg, NULL));
  ck_assert(test_wait_u64(&s->entered, 1, 30));
  for (int i = 1; i <= 1000; i++)
    ck_assert_vat_ok(vat_host_send(ref, sink_item, (void *)(uintptr_t)i));
  atomic_store(&s->open, 1);
  for (int i = 0; i < 30000 && !vat_ref_is_dead(ref); i++)
    test_sleep(0.001);
  ck_assert(vat_ref_is_dead(ref));
  ck_assert(vat_is_atom(vat_ref_exit_reason(ref), vat_atom_overloaded()));
  ck_assert_vat_ok(vat_system_shutdown(sys, 30));
  vat_stats st = test_stats(sys);
  /* The sender's count passed the mark at the 50th message pushed (the
   * gate first): the items queued by then ran as far as the gate's batch
   * reached (49 of them; none with the hostile build's batch of 1), the
   * rest died as they were sent. */
  vat_config cfg;
  vat_config_default(&cfg);
  uint64_t batch = TEST_SCALE > 1 ? 1 : cfg.batch; /* hostile: 1 */
  ck_assert_uint_eq(atomic_load(&s->handled), batch - 1 < 49 ? batch - 1 : 49);
  ck_assert_uint_eq(atomic_load(&s->handled) + st.dead_letters, 1000);
  vat_system_destroy(sys);
}
END_TEST

static void become_failing(vat_turn *turn, void *state, void *arg) {
  (void)state;
  (void)arg;
  expect_vat_ok(vat_overload_set(
      turn, &(vat_overload){.policy = VAT_OVERLOAD_FAIL, .high = 20}));
  vat_overload bad = {.policy = (vat_overload_policy)99};
  if (vat_overload_set(turn, &bad) != VAT_EINVAL ||
      vat_overload_set(turn, NULL) != VAT_EINVAL ||
      vat_overload_set(turn, &(vat_overload){.high = 5, .low = 6}) !=
          VAT_EINVAL)
    test_record_bad_call("vat_overload_set(bad)", VAT_OK, __FILE__, __LINE__);
}

START_TEST(policy_set_from_inside_the_vat) {
  vat_system *sys = test_system(2);
  sink *s;
  vat_ref *ref = spawn_sink(sys, NULL, &s);
  ck_assert_vat_ok(vat_host_send(ref, become_failing, NULL));
  ck_assert_vat_ok(vat_host_send(ref, gate_msg, NULL));
  ck_assert(test_wait_u64(&s->entered, 1, 30));
  for (int i = 1; i <= 500; i++)
    ck_assert_vat_ok(vat_host_send(ref, sink_item, (void *)(uintptr_t)i));
  atomic_store(&s->open, 1);
  for (int i = 0; i < 30000 && !vat_ref_is_dead(ref); i++)
    test_sleep(0.001);
  ck_assert(vat_is_atom(vat_ref_exit_reason(ref), vat_atom_overloaded()));
  ck_assert_vat_ok(vat_system_shutdown(sys, 30));
  ck_assert_uint_eq(test_bad_calls(), 0);
  vat_system_destroy(sys);
}
END_TEST

START_TEST(bad_settings_are_refused) {
  vat_config cfg;
  vat_config_default(&cfg);
  vat_system *sys = NULL;
  cfg.overload.policy = (vat_overload_policy)42;
  ck_assert_vat_err(vat_system_new(&cfg, &sys), VAT_EINVAL);
  cfg.overload = (vat_overload){.high = 10, .low = 11};
  ck_assert_vat_err(vat_system_new(&cfg, &sys), VAT_EINVAL);
  sys = test_system(1);
  vat_entity_def def = {.overload = &(vat_overload){.high = 3, .low = 4}};
  vat_ref *ref;
  ck_assert_vat_err(vat_host_spawn(sys, &def, &ref, NULL), VAT_EINVAL);
  def.overload = &(vat_overload){.policy = (vat_overload_policy)-1};
  ck_assert_vat_err(vat_host_spawn(sys, &def, &ref, NULL), VAT_EINVAL);
  ck_assert_str_eq(vat_err_name(VAT_EAGAIN), "VAT_EAGAIN");
  ck_assert_str_ne(vat_strerror(VAT_EAGAIN), "unknown error");
  test_quiesce(sys);
}
END_TEST

/* --- Urgent messages ----------------------------------------------------- */

enum { LOG_MAX = 512 };

typedef struct recorder {
  _Atomic uint64_t entered, open, count;
  uint64_t log[LOG_MAX];
} recorder;

static void rec_gate(vat_turn *turn, void *state, void *arg) {
  (void)turn;
  (void)arg;
  recorder *r = state;
  atomic_store(&r->entered, 1);
  while (atomic_load(&r->open) == 0)
    test_sleep(0.0002);
}

static void rec(vat_turn *turn, void *state, void *arg) {
  (void)turn;
  recorder *r = state;
  uint64_t n = atomic_load(&r->count);
  if (n < LOG_MAX)
    r->log[n] = (uintptr_t)arg;
  atomic_store(&r->count, n + 1);
}

static void rec_msg(vat_turn *turn, void *state, const vat_atom *selector,
                    vat_value value) {
  (void)selector;
  int64_t i = 0;
  expect_vat_ok(vat_get_int(value, &i));
  rec(turn, state, (void *)(uintptr_t)i);
}

typedef struct urgent_sender {
  vat_ref *to;
} urgent_sender;

/* Two ordinary messages, two urgent ones (a function and a dynamic one)
 * and one more ordinary, in one turn. */
static void send_mixed(vat_turn *turn, void *state, void *arg) {
  (void)arg;
  urgent_sender *u = state;
  expect_vat_ok(vat_send(turn, u->to, rec, (void *)(uintptr_t)201));
  expect_vat_ok(vat_send(turn, u->to, rec, (void *)(uintptr_t)202));
  expect_vat_ok(vat_send_urgent(turn, u->to, rec, (void *)(uintptr_t)2001));
  expect_vat_ok(
      vat_send_msg_urgent(turn, u->to, vat_atom_intern("rec"), vat_int(2002)));
  expect_vat_ok(vat_send(turn, u->to, rec, (void *)(uintptr_t)203));
  if (vat_send_urgent(turn, NULL, rec, NULL) != VAT_EINVAL ||
      vat_send_urgent(turn, u->to, NULL, NULL) != VAT_EINVAL ||
      vat_send_msg_urgent(turn, u->to, NULL, vat_null()) != VAT_EINVAL)
    test_record_bad_call("vat_send_urgent(bad)", VAT_OK, __FILE__, __LINE__);
}

/* Urgent messages go ahead of the ordinary ones queued, in the order they
 * were sent; the ordinary ones keep theirs. Before: strictly FIFO. */
START_TEST(urgent_messages_go_ahead) {
  vat_system *sys = test_system(2);
  vat_entity_def def = {.state_size = sizeof(recorder), .receive = rec_msg};
  vat_ref *to;
  recorder *r;
  ck_assert_vat_ok(vat_host_spawn(sys, &def, &to, (void **)&r));
  ck_assert_vat_ok(vat_host_send(to, rec_gate, NULL));
  ck_assert(test_wait_u64(&r->entered, 1, 30));
  for (uintptr_t i = 1; i <= 100; i++)
    ck_assert_vat_ok(vat_host_send(to, rec, (void *)i));
  for (uintptr_t i = 1001; i <= 1003; i++)
    ck_assert_vat_ok(vat_host_send_urgent(to, rec, (void *)i));
  ck_assert_vat_err(vat_host_send_urgent(to, NULL, NULL), VAT_EINVAL);
  urgent_sender *u;
  vat_ref *from = test_spawn(sys, sizeof *u, (void **)&u);
  u->to = to;
  ck_assert_vat_ok(vat_host_send(from, send_mixed, NULL));
  /* The sender's turn committed: its five messages are queued. */
  for (int i = 0; i < 30000 && vat_ref_queue_len(to) < 108; i++)
    test_sleep(0.001);
  ck_assert_uint_eq(vat_ref_queue_len(to), 108);
  atomic_store(&r->open, 1);
  ck_assert(test_wait_u64(&r->count, 108, 30));
  static const uint64_t first[] = {1001, 1002, 1003, 2001, 2002};
  for (int i = 0; i < 5; i++)
    ck_assert_uint_eq(r->log[i], first[i]);
  for (int i = 0; i < 100; i++)
    ck_assert_uint_eq(r->log[5 + i], (uint64_t)i + 1);
  ck_assert_uint_eq(r->log[105], 201);
  ck_assert_uint_eq(r->log[106], 202);
  ck_assert_uint_eq(r->log[107], 203);
  test_quiesce(sys);
}
END_TEST

/* An urgent message to a vat that drops the newest is not dropped. */
START_TEST(urgent_messages_are_never_dropped) {
  vat_system *sys = test_system(2);
  sink *s;
  vat_ref *ref = spawn_sink(
      sys, &(vat_overload){.policy = VAT_OVERLOAD_DROP, .high = 50}, &s);
  hold_second_gate(ref, s, 40, 8); /* the 50th pushed passes the mark */
  ck_assert(vat_ref_overloaded(ref));
  ck_assert_vat_ok(vat_host_send(ref, sink_item, (void *)(uintptr_t)7));
  ck_assert_vat_ok(vat_host_send_urgent(ref, sink_item, (void *)(uintptr_t)1));
  atomic_store(&s->open, 2);
  ck_assert(test_wait_u64(&s->handled, 49, 30));
  ck_assert_uint_eq(atomic_load(&s->sum), 48 * 49 / 2 + 1);
  ck_assert_vat_ok(vat_system_shutdown(sys, 30));
  ck_assert_uint_eq(test_stats(sys).overload_dropped, 1);
  vat_system_destroy(sys);
}
END_TEST

/* --- The bound, whatever the scheduling ---------------------------------- */

/* A consumer stalled in a turn (a gate) on two workers: its batch never
 * ends, so it never measures; the producer's own count of what it pushed
 * mutes it at the high mark. The queue then holds at most the mark, the
 * rest of the turn that crossed it, and the gate's message (vat/core.h,
 * "the bound"). Before: nothing muted the producer, which sent all N. */
START_TEST(a_stalled_consumer_bounds_its_queue_two_workers) {
  enum { N = 200000, PER_TURN = 100, HIGH = 256 };
  vat_system *sys = test_system(2);
  sink *s;
  vat_entity_def def = {.state_size = sizeof(sink),
                        .overload = &(vat_overload){.high = HIGH},
                        .label = "stalled-sink"};
  vat_ref *to;
  ck_assert_vat_ok(vat_host_spawn(sys, &def, &to, (void **)&s));
  atomic_store(&s->gate_at, 1); /* before it ever measured */
  flooder *p;
  vat_ref *pr = test_spawn(sys, sizeof *p, (void **)&p);
  *p = (flooder){.to = to, .watched = s, .n = N, .per_turn = PER_TURN};
  ck_assert_vat_ok(vat_host_send(pr, flood, NULL));
  ck_assert(test_wait_u64(&s->entered, 1, 30));
  /* The producer is muted, and says so. */
  vat_info info = {0};
  for (int i = 0; i < 30000; i++) {
    ck_assert_vat_ok(vat_ref_inspect(pr, &info));
    if (info.muted)
      break;
    test_sleep(0.001);
  }
  ck_assert_msg(info.muted, "the producer was never muted");
  ck_assert_str_eq(info.muted_on_label, "stalled-sink");
  ck_assert(vat_ref_is_muted_on(pr, to));
  ck_assert(!vat_ref_is_muted_on(to, pr));
  ck_assert(!vat_ref_is_muted_on(NULL, to));
  ck_assert_vat_ok(vat_ref_inspect(to, &info));
  ck_assert(!info.muted);
  ck_assert_ptr_null(info.muted_on_label);
  /* Stalled at its first message. */
  uint64_t queued = atomic_load(&p->watched->handled);
  ck_assert_uint_eq(queued, 1);
  ck_assert_vat_ok(vat_ref_inspect(to, &info));
  ck_assert_msg(info.queue_len <= HIGH + PER_TURN,
                "queue %zu, bound %d", info.queue_len, HIGH + PER_TURN);
  /* Not much below it either: the count overstates by what the sink
   * popped since it last counted, one batch at most. */
  ck_assert_uint_ge(info.queue_len, HIGH / 2);
  atomic_store(&s->open, 1);
  ck_assert(test_wait_u64(&s->handled, N, 60));
  ck_assert_uint_eq(atomic_load(&s->sum), (uint64_t)N * (N + 1) / 2);
  ck_assert_vat_ok(vat_ref_inspect(pr, &info));
  ck_assert(!info.muted);
  test_quiesce(sys);
}
END_TEST

/* Several producers flood several consumers of mixed policies (mute,
 * drop, fail) and random marks on two workers; each consumer stalls in a
 * turn at a random point, and while it is stalled its queue, counted
 * exactly (vat_ref_inspect walks it), stays within its mark plus one
 * turn's sends per producer plus the gate. Every message is accounted
 * for at the end. */
enum { SP = 3, SC = 3 };

typedef struct sproducer {
  vat_ref *to[SC];
  uint64_t rng, turns_left, max_turn;
  _Atomic uint64_t *sent;
  _Atomic uint64_t *done;
} sproducer;

static void sflood(vat_turn *turn, void *state, void *arg) {
  (void)arg;
  sproducer *p = state;
  unsigned c = (unsigned)test_rand_between(&p->rng, 0, SC - 1);
  uint64_t k = test_rand_between(&p->rng, 1, p->max_turn);
  for (uint64_t i = 0; i < k; i++)
    expect_vat_ok(vat_send(turn, p->to[c], sink_item, (void *)(uintptr_t)1));
  atomic_fetch_add(p->sent, k);
  if (--p->turns_left > 0)
    expect_vat_ok(vat_send(turn, vat_self(turn), sflood, NULL));
  else
    atomic_fetch_add(p->done, 1);
}

START_TEST(stress_the_bound_holds_with_stalled_consumers) {
  uint64_t rng = test_seed("stress_the_bound_holds_with_stalled_consumers");
  enum { ROUNDS = 6, MAX_TURN = 150 };
  for (int round = 0; round < ROUNDS; round++) {
    vat_system *sys = test_system(2);
    sink *c[SC];
    vat_ref *cr[SC];
    size_t high[SC];
    for (int i = 0; i < SC; i++) {
      vat_overload_policy pol = (vat_overload_policy)(
          VAT_OVERLOAD_MUTE + test_rand_between(&rng, 0, 2));
      high[i] = test_rand_between(&rng, 16, 2048);
      vat_overload ov = {.policy = pol, .high = high[i]};
      cr[i] = spawn_sink(sys, &ov, &c[i]);
      atomic_store(&c[i]->gate_at, test_rand_between(&rng, 1, 3000));
    }
    _Atomic uint64_t sent = 0, done = 0;
    for (int i = 0; i < SP; i++) {
      sproducer *p;
      vat_ref *pr = test_spawn(sys, sizeof *p, (void **)&p);
      *p = (sproducer){.rng = test_rand(&rng) | 1,
                       .turns_left = test_rand_between(&rng, 50, 400) /
                                         (TEST_SCALE > 1 ? 10 : 1) +
                                     1,
                       .max_turn = MAX_TURN,
                       .sent = &sent,
                       .done = &done};
      for (int j = 0; j < SC; j++)
        p->to[j] = cr[j];
      ck_assert_vat_ok(vat_host_send(pr, sflood, NULL));
    }
    bool open[SC] = {false};
    while (atomic_load(&done) < SP) {
      for (int i = 0; i < SC; i++) {
        if (open[i] || atomic_load(&c[i]->entered) == 0)
          continue;
        /* Stalled: sample the queue while the producers go on. */
        for (int k = 0; k < 40; k++) {
          vat_info info;
          ck_assert_vat_ok(vat_ref_inspect(cr[i], &info));
          size_t bound = high[i] + SP * MAX_TURN + 1;
          ck_assert_msg(info.queue_len <= bound,
                        "round %d consumer %d: queue %zu, bound %zu", round,
                        i, info.queue_len, bound);
          test_sleep(0.0005);
        }
        open[i] = true;
        atomic_store(&c[i]->open, 1);
      }
      test_sleep(0.0005);
    }
    for (int i = 0; i < SC; i++)
      atomic_store(&c[i]->open, 1);
    ck_assert_vat_ok(vat_system_shutdown(sys, 60));
    vat_stats st = test_stats(sys);
    uint64_t handled = 0;
    for (int i = 0; i < SC; i++)
      handled += atomic_load(&c[i]->handled);
    ck_assert_uint_eq(handled + st.dead_letters + st.overload_dropped +
                          st.dropped_at_shutdown,
                      atomic_load(&sent));
    vat_system_destroy(sys);
  }
}
END_TEST

/* --- Cyclic senders: no deadlock ----------------------------------------- */

#ifdef __SANITIZE_THREAD__
enum { CYCLE_ROUNDS = 8 };
#else
enum { CYCLE_ROUNDS = 40 };
#endif
enum { MAX_PEERS = 6 };

typedef struct cycle_shared {
  _Atomic uint64_t received, expected_done;
} cycle_shared;

typedef struct peer {
  vat_ref *peers[MAX_PEERS];
  unsigned npeers;
  uint64_t rng, left, per_turn, hops;
  cycle_shared *shared;
} peer;

static void hop(vat_turn *turn, void *state, void *arg) {
  peer *p = state;
  uint64_t hops = (uintptr_t)arg;
  atomic_fetch_add_explicit(&p->shared->received, 1, memory_order_relaxed);
  if (hops > 0) {
    vat_ref *to = p->peers[test_rand(&p->rng) % p->npeers];
    expect_vat_ok(vat_send(turn, to, hop, (void *)(uintptr_t)(hops - 1)));
  }
}

/* Floods random peers (itself included) with messages that hop on. */
static void burst(vat_turn *turn, void *state, void *arg) {
  (void)arg;
  peer *p = state;
  for (uint64_t i = 0; i < p->per_turn && p->left > 0; i++, p->left--) {
    vat_ref *to = p->peers[test_rand(&p->rng) % p->npeers];
    expect_vat_ok(vat_send(turn, to, hop, (void *)(uintptr_t)p->hops));
  }
  if (p->left > 0)
    expect_vat_ok(vat_send(turn, vat_self(turn), burst, NULL));
}

START_TEST(stress_cyclic_senders_never_deadlock) {
  uint64_t seed = test_seed("stress_cyclic_senders_never_deadlock");
  for (int round = 0; round < CYCLE_ROUNDS; round++) {
    vat_config cfg;
    vat_config_default(&cfg);
    cfg.workers = 2;
    cfg.overload.high = test_rand_between(&seed, 4, 300);
    cfg.overload.low = test_rand_between(&seed, 1, cfg.overload.high);
    vat_system *sys = NULL;
    ck_assert_vat_ok(vat_system_new(&cfg, &sys));
    cycle_shared shared = {0};
    unsigned n = (unsigned)test_rand_between(&seed, 2, MAX_PEERS);
    peer *peers[MAX_PEERS];
    vat_ref *refs[MAX_PEERS];
    for (unsigned i = 0; i < n; i++)
      refs[i] = test_spawn(sys, sizeof(peer), (void **)&peers[i]);
    uint64_t expected = 0;
    for (unsigned i = 0; i < n; i++) {
      peer *p = peers[i];
      p->npeers = n;
      for (unsigned j = 0; j < n; j++)
        p->peers[j] = refs[j];
      p->rng = test_rand(&seed) | 1;
      p->left = test_rand_between(&seed, 0, 20000 / TEST_SCALE);
      p->per_turn = test_rand_between(&seed, 1, 400);
      p->hops = test_rand_between(&seed, 0, 3);
      p->shared = &shared;
      expected += p->left * (p->hops + 1);
    }
    for (unsigned i = 0; i < n; i++)
      ck_assert_vat_ok(vat_host_send(refs[i], burst, NULL));
    ck_assert_msg(test_wait_u64(&shared.received, expected, 120),
                  "round %d: %" PRIu64 " of %" PRIu64 " arrived (%u peers, "
                  "high %zu, low %zu)",
                  round, atomic_load(&shared.received), expected, n,
                  cfg.overload.high, cfg.overload.low);
    test_quiesce(sys);
    ck_assert_uint_eq(atomic_load(&shared.received), expected);
  }
}
END_TEST

/* --- Promises of vat/core.h, each checked so that it can fail ----------- */

/* A producer that sends `n` items in its first turn and then ticks:
 * each tick is a turn of its own (a self-send), so it has work queued
 * whenever its batch ends, and is parked when it is muted. */
typedef struct ticker {
  vat_ref *to;
  uint64_t n, ticks_left;
  _Atomic uint64_t ticks, done;
  bool urgent; /* its items go urgent */
} ticker;

static void tick(vat_turn *turn, void *state, void *arg) {
  ticker *t = state;
  for (uint64_t i = 0; i < (uintptr_t)arg; i++) {
    if (t->urgent)
      expect_vat_ok(vat_send_urgent(turn, t->to, sink_item, NULL));
    else
      expect_vat_ok(vat_send(turn, t->to, sink_item, (void *)(uintptr_t)1));
  }
  atomic_store(&t->ticks, atomic_load(&t->ticks) + 1);
  if (t->ticks_left > 0) {
    t->ticks_left--;
    expect_vat_ok(vat_send(turn, vat_self(turn), tick,
                           (void *)(uintptr_t)(t->urgent ? 1 : 0)));
  } else {
    atomic_store(&t->done, 1);
  }
}

static bool is_muted(vat_ref *ref) {
  vat_info info;
  ck_assert_vat_ok(vat_ref_inspect(ref, &info));
  return info.muted;
}

/* vat/core.h: muted "until the overloaded vat drains below its low
 * mark". A host-driven system with batches of one turn measures the
 * sink's queue after every turn, and the test runs one turn at a time:
 * the producer stays muted while LOW or more are queued and is released
 * at the first measure that finds LOW - 1. (host_send_wait_waits_for_
 * the_low_mark accepts a release at exactly LOW.) */
/* Spawns a sink with `ov` and a producer that sends it N items in one
 * turn, then runs the sink one turn at a time: the producer must stay
 * muted while `low` or more are queued, and be released at the first
 * measure that finds low - 1. */
static void check_muted_until_below(const vat_overload *ov, uint64_t low) {
  enum { N = 30 };
  vat_config cfg;
  vat_config_default(&cfg);
  cfg.workers = 0;
  cfg.batch = 1;
  vat_system *sys = NULL;
  ck_assert_vat_ok(vat_system_new(&cfg, &sys));
  sink *s;
  vat_ref *to = spawn_sink(sys, ov, &s);
  ticker *t;
  vat_ref *pr = test_spawn(sys, sizeof *t, (void **)&t);
  *t = (ticker){.to = to, .ticks_left = 1};
  ck_assert_vat_ok(vat_host_send(pr, tick, (void *)(uintptr_t)N));
  vat_run_result res;
  ck_assert_vat_ok(vat_system_run(sys, 1, 0, &res)); /* the producer's */
  ck_assert_uint_eq(atomic_load(&t->ticks), 1);
  ck_assert(vat_ref_overloaded(to));
  ck_assert_msg(is_muted(pr), "the producer was not muted");
  /* Only the sink is ready now: each run is one of its turns. */
  for (uint64_t queued = N - 1; queued >= low; queued--) {
    ck_assert_vat_ok(vat_system_run(sys, 1, 0, &res));
    ck_assert_uint_eq(atomic_load(&s->handled), N - queued);
    ck_assert_msg(is_muted(pr),
                  "released with %" PRIu64 " queued (low %" PRIu64 ")", queued,
                  low);
    ck_assert_uint_eq(atomic_load(&t->ticks), 1);
  }
  ck_assert_vat_ok(vat_system_run(sys, 1, 0, &res)); /* low - 1 left */
  ck_assert_uint_eq(atomic_load(&s->handled), N - low + 1);
  ck_assert_msg(!is_muted(pr),
                "still muted with %" PRIu64 " queued (low %" PRIu64 ")",
                low - 1, low);
  ck_assert(!vat_ref_overloaded(to));
  ck_assert_vat_ok(vat_system_run_until_quiescent(sys, 0, &res));
  ck_assert_uint_eq(atomic_load(&t->done), 1);
  ck_assert_uint_eq(atomic_load(&s->handled), N);
  test_quiesce(sys);
}

START_TEST(muted_until_below_the_low_mark) {
  check_muted_until_below(&(vat_overload){.high = 20, .low = 5}, 5);
}
END_TEST

/* vat/core.h: a vat's own low mark "Default high / 4". */
START_TEST(a_vats_own_low_mark_defaults_to_a_quarter_of_high) {
  check_muted_until_below(&(vat_overload){.high = 20}, 5);
}
END_TEST

/* vat/core.h: low "must not exceed high": equal is a vat's own setting
 * like any other, at spawn and from inside the vat. */
static _Atomic uint64_t set_equal_rc;
static void set_low_equal_to_high(vat_turn *turn, void *state, void *arg) {
  (void)state;
  (void)arg;
  int rc = vat_overload_set(turn, &(vat_overload){.high = 8, .low = 8});
  atomic_store(&set_equal_rc, (uint64_t)(rc == VAT_OK ? 1 : 2));
}

START_TEST(low_equal_to_high_is_accepted) {
  check_muted_until_below(&(vat_overload){.high = 8, .low = 8}, 8);
  vat_system *sys = test_system(1);
  vat_ref *v = test_spawn(sys, 0, NULL);
  ck_assert_vat_ok(vat_host_send(v, set_low_equal_to_high, NULL));
  ck_assert(test_wait_u64(&set_equal_rc, 1, 10));
  test_quiesce(sys);
}
END_TEST

typedef struct waiter {
  vat_ref *to;
  double timeout, returned;
  int rc;
  _Atomic uint64_t done;
} waiter;

static void *send_wait_thread(void *arg) {
  waiter *w = arg;
  int rc = vat_thread_register();
  if (rc == VAT_OK)
    rc = vat_host_send_wait(w->to, sink_item, (void *)(uintptr_t)301,
                            w->timeout);
  w->returned = test_wall_seconds();
  w->rc = rc;
  atomic_store(&w->done, 1);
  vat_thread_unregister();
  return NULL;
}

/* A host thread blocked in vat_host_send_wait is woken when the vat
 * drains, not at its deadline: with a 10 s timeout it returns within
 * 1 s of the gate opening (5 s in the hostile build, which collects at
 * every turn). Seen: a few milliseconds. */
START_TEST(host_send_wait_wakes_when_the_vat_drains) {
  enum { HIGH = 50, LOW = 10 };
  const double bound = TEST_SCALE > 1 ? 5.0 : 1.0;
  vat_system *sys = test_system(2);
  sink *s;
  vat_ref *ref = spawn_sink(sys, &(vat_overload){.high = HIGH, .low = LOW}, &s);
  hold_second_gate(ref, s, 100, 200);
  ck_assert(vat_ref_overloaded(ref));
  waiter w = {.to = ref, .timeout = 10};
  pthread_t th;
  ck_assert_int_eq(pthread_create(&th, NULL, send_wait_thread, &w), 0);
  /* It waits while the sink is held overloaded (and is in its wait when
   * the gate opens, unless this thread ran 0.2 s before it did). */
  ck_assert(!test_wait_u64(&w.done, 1, 0.2));
  double opened = test_wall_seconds();
  atomic_store(&s->open, 2);
  pthread_join(th, NULL);
  ck_assert_vat_ok(w.rc);
  double took = w.returned - opened;
  fprintf(stderr, "host_send_wait_wakes_when_the_vat_drains: %.4f s\n", took);
  ck_assert_msg(took < bound, "woken %.3f s after the drain (timeout %.0f s)",
                took, w.timeout);
  ck_assert(test_wait_u64(&s->handled, 301, 30));
  ck_assert_uint_eq(atomic_load(&s->sum), 301 * 302 / 2);
  test_quiesce(sys);
}
END_TEST

/* Urgent messages "bypass backpressure: sending one does not mute the
 * sender". A vat whose turns each send one urgent message to a sink held
 * overloaded (stalled in a gate) runs all its turns while the gate is
 * shut, and is never muted. */
START_TEST(urgent_sends_never_mute_the_sender) {
  enum { HIGH = 50, TICKS = 500 };
  vat_system *sys = test_system(2);
  sink *s;
  vat_ref *to = spawn_sink(sys, &(vat_overload){.high = HIGH}, &s);
  hold_second_gate(to, s, 100, 100);
  ck_assert(vat_ref_overloaded(to));
  ticker *t;
  vat_ref *pr = test_spawn(sys, sizeof *t, (void **)&t);
  *t = (ticker){.to = to, .ticks_left = TICKS, .urgent = true};
  ck_assert_vat_ok(vat_host_send(pr, tick, (void *)(uintptr_t)1));
  bool muted = false;
  for (int i = 0; i < 10000 && !atomic_load(&t->done); i++) {
    muted |= is_muted(pr);
    test_sleep(0.001);
  }
  ck_assert_msg(atomic_load(&t->done) == 1,
                "the urgent sender stopped at %" PRIu64 " of %d turns%s",
                atomic_load(&t->ticks), TICKS + 1,
                is_muted(pr) ? " (muted)" : "");
  ck_assert(!muted);
  ck_assert(vat_ref_overloaded(to)); /* still held: the bypass was tested */
  ck_assert_uint_eq(atomic_load(&s->handled), 100); /* held at gate 2 */
  atomic_store(&s->open, 2);
  ck_assert(test_wait_u64(&s->handled, 200 + TICKS + 1, 30));
  test_quiesce(sys);
}
END_TEST

/* A sender is not left muted on a vat that ended: a producer muted on a
 * sink held overloaded goes on once the sink is killed, and its sends to
 * the dead sink (dead letters) never mute it again; nor do a new
 * producer's. */
START_TEST(no_sender_stays_muted_on_an_ended_vat) {
  enum { HIGH = 50, TICKS = 200, PER_TICK = 10 };
  vat_config cfg;
  vat_config_default(&cfg);
  cfg.workers = 2;
  cfg.on_crash = NULL;
  vat_system *sys = NULL;
  ck_assert_vat_ok(vat_system_new(&cfg, &sys));
  sink *s;
  vat_ref *to = spawn_sink(sys, &(vat_overload){.high = HIGH}, &s);
  hold_second_gate(to, s, 100, 100);
  ck_assert(vat_ref_overloaded(to));
  ticker *t;
  vat_ref *pr = test_spawn(sys, sizeof *t, (void **)&t);
  *t = (ticker){.to = to, .ticks_left = TICKS};
  ck_assert_vat_ok(vat_host_send(pr, tick, (void *)(uintptr_t)PER_TICK));
  for (int i = 0; i < 30000 && !is_muted(pr); i++)
    test_sleep(0.001);
  ck_assert_msg(is_muted(pr), "the producer was never muted");
  ck_assert(vat_ref_is_muted_on(pr, to));
  ck_assert_vat_ok(vat_host_exit(to, vat_atom_value(vat_atom_killed())));
  atomic_store(&s->open, 2); /* the gate returns; the kill ends the sink */
  for (int i = 0; i < 30000 && !vat_ref_is_dead(to); i++)
    test_sleep(0.001);
  ck_assert(vat_ref_is_dead(to));
  ck_assert_msg(test_wait_u64(&t->done, 1, 30),
                "the producer stopped at %" PRIu64 " of %d turns%s",
                atomic_load(&t->ticks), TICKS + 1,
                is_muted(pr) ? ", muted" : "");
  ck_assert(!is_muted(pr));
  ck_assert(!vat_ref_is_muted_on(pr, to));
  ticker *t2;
  vat_ref *pr2 = test_spawn(sys, sizeof *t2, (void **)&t2);
  *t2 = (ticker){.to = to, .ticks_left = TICKS};
  ck_assert_vat_ok(vat_host_send(pr2, tick, (void *)(uintptr_t)PER_TICK));
  ck_assert(test_wait_u64(&t2->done, 1, 30));
  ck_assert(!is_muted(pr2));
  test_quiesce(sys);
}
END_TEST

static void rec_hold(vat_turn *turn, void *state, void *arg) {
  (void)turn;
  (void)arg;
  recorder *r = state;
  atomic_store(&r->entered, atomic_load(&r->entered) + 1);
  while (atomic_load(&r->open) < atomic_load(&r->entered))
    test_sleep(0.0002);
}

/* Urgent messages hoisted to the front of a queue leave it whole: the
 * ordinary messages sent after the hoist come behind those already
 * queued, in order, and an urgent one sent then still goes ahead. The
 * recorder holds in an urgent gate right after the hoist. */
START_TEST(sends_after_a_hoist_keep_their_order) {
  vat_system *sys = test_system(2);
  vat_entity_def def = {.state_size = sizeof(recorder)};
  vat_ref *to;
  recorder *r;
  ck_assert_vat_ok(vat_host_spawn(sys, &def, &to, (void **)&r));
  ck_assert_vat_ok(vat_host_send(to, rec_hold, NULL));
  ck_assert(test_wait_u64(&r->entered, 1, 30));
  for (uintptr_t i = 1; i <= 50; i++)
    ck_assert_vat_ok(vat_host_send(to, rec, (void *)i));
  ck_assert_vat_ok(vat_host_send_urgent(to, rec, (void *)(uintptr_t)1001));
  ck_assert_vat_ok(vat_host_send_urgent(to, rec_hold, NULL));
  atomic_store(&r->open, 1);
  ck_assert(test_wait_u64(&r->entered, 2, 30)); /* hoisted, held */
  ck_assert_uint_eq(atomic_load(&r->count), 1);
  for (uintptr_t i = 51; i <= 100; i++)
    ck_assert_vat_ok(vat_host_send(to, rec, (void *)i));
  ck_assert_vat_ok(vat_host_send_urgent(to, rec, (void *)(uintptr_t)1002));
  atomic_store(&r->open, 2);
  ck_assert(test_wait_u64(&r->count, 102, 30));
  uint64_t want[102] = {1001, 1002};
  for (int i = 0; i < 100; i++)
    want[2 + i] = (uint64_t)i + 1;
  for (int i = 0; i < 102; i++)
    ck_assert_msg(r->log[i] == want[i],
                  "message %d was %" PRIu64 ", expected %" PRIu64, i, r->log[i],
                  want[i]);
  test_quiesce(sys);
  ck_assert_uint_eq(atomic_load(&r->count), 102);
}
END_TEST

typedef struct stamp {
  _Atomic uint64_t ns; /* when the turn began, test_wall_seconds in ns */
} stamp;

static void stamp_now(vat_turn *turn, void *state, void *arg) {
  (void)turn;
  (void)arg;
  atomic_store(&((stamp *)state)->ns,
               (uint64_t)(test_wall_seconds() * 1e9) + 1);
}

static uint64_t parks_of(vat_system *sys) {
  vat_sys_info info;
  vat_worker_info w[2];
  ck_assert_int_eq(vat_system_inspect(sys, &info, w, 2), 2);
  return w[0].parks + w[1].parks;
}

/* A host send wakes a parked worker: with both workers parked (their
 * park counts moved and the process is idle), the send's turn begins
 * within 50 ms, the worst of TRIES (x TEST_SCALE in the hostile build).
 * Seen: at most about 0.2 ms on a quiet machine. */
START_TEST(a_host_send_wakes_a_parked_worker) {
  enum { TRIES = 10 };
  const double bound = 0.05 * TEST_SCALE;
  vat_system *sys = test_system(2);
  stamp *st;
  vat_ref *ref = test_spawn(sys, sizeof *st, (void **)&st);
  /* Both workers parked: each did once at least, and nothing runs. */
  ck_assert_msg(test_settled_to_idle(), "the workers never settled");
  for (int k = 0; k < 10000 && parks_of(sys) < 2; k++)
    test_sleep(0.001);
  ck_assert_uint_ge(parks_of(sys), 2);
  double worst = 0;
  for (int i = 0; i < TRIES; i++) {
    uint64_t parks = parks_of(sys);
    atomic_store(&st->ns, 0);
    double sent = test_wall_seconds();
    ck_assert_vat_ok(vat_host_send(ref, stamp_now, NULL));
    while (atomic_load(&st->ns) == 0 && test_wall_seconds() - sent < 10)
      test_sleep(0.00001);
    ck_assert_msg(atomic_load(&st->ns) != 0,
                  "try %d: the host send's turn had not begun after 10 s", i);
    double took = (double)(atomic_load(&st->ns) - 1) / 1e9 - sent;
    if (took > worst)
      worst = took;
    /* The worker that woke parks again, and the process settles: both
     * are parked for the next try. */
    for (int k = 0; k < 10000 && parks_of(sys) <= parks; k++)
      test_sleep(0.001);
    ck_assert_uint_gt(parks_of(sys), parks);
    ck_assert_msg(test_settled_to_idle(), "the workers never settled");
  }
  fprintf(stderr, "a_host_send_wakes_a_parked_worker: worst %.6f s\n", worst);
  ck_assert_msg(worst < bound, "a host send's turn began %.4f s after it",
                worst);
  test_quiesce(sys);
}
END_TEST

Suite *test_overload_suite(void) {
  Suite *s = suite_create("overload");
  TCase *tc = test_case("muting", 300);
  tcase_add_test(tc, muting_bounds_a_flood_one_worker);
  tcase_add_test(tc, muting_bounds_a_flood_two_workers);
  tcase_add_test(tc, a_batch_ends_after_a_burst_of_sends);
  tcase_add_test(tc, muting_in_a_host_driven_system);
  tcase_add_test(tc, shutdown_counts_a_muted_vat);
  tcase_add_test(tc, kill_mid_flood_ends_within_a_batch);
  tcase_add_test(tc, stress_cyclic_senders_never_deadlock);
#if !VAT_HOSTILE
  /* Its producer must run while the consumer is stalled. With a batch of
   * 1 the consumer runs after the producer's first turn, on its worker,
   * and stalls with the producer queued behind it there, for the other
   * worker to steal: a wait the test does not bound. The stress below
   * checks the bound in this build. */
  tcase_add_test(tc, a_stalled_consumer_bounds_its_queue_two_workers);
#else
  (void)a_stalled_consumer_bounds_its_queue_two_workers;
#endif
  tcase_add_test(tc, stress_the_bound_holds_with_stalled_consumers);
  suite_add_tcase(s, tc);
  tc = test_case("policies", 120);
  tcase_add_test(tc, queue_len_is_readable_from_any_thread);
  tcase_add_test(tc, queue_len_is_constant_time);
  tcase_add_test(tc, queue_len_max_counts_no_further_than_its_bound);
  tcase_add_test(tc, host_send_wait_waits_for_the_low_mark);
#if !VAT_HOSTILE /* see hold_second_gate: one batch from the mark on */
  tcase_add_test(tc, drop_policy_drops_the_newest_counted);
#else
  (void)drop_policy_drops_the_newest_counted;
#endif
  tcase_add_test(tc, fail_policy_ends_the_vat_overloaded);
  tcase_add_test(tc, policy_set_from_inside_the_vat);
  tcase_add_test(tc, bad_settings_are_refused);
  suite_add_tcase(s, tc);
  tc = test_case("urgent", 60);
  tcase_add_test(tc, urgent_messages_go_ahead);
#if !VAT_HOSTILE /* see hold_second_gate: one batch from the mark on */
  tcase_add_test(tc, urgent_messages_are_never_dropped);
#else
  (void)urgent_messages_are_never_dropped;
#endif
  suite_add_tcase(s, tc);
  tc = test_case("promises", 60);
  tcase_add_test(tc, muted_until_below_the_low_mark);
  tcase_add_test(tc, a_vats_own_low_mark_defaults_to_a_quarter_of_high);
  tcase_add_test(tc, low_equal_to_high_is_accepted);
  tcase_add_test(tc, host_send_wait_wakes_when_the_vat_drains);
  tcase_add_test(tc, urgent_sends_never_mute_the_sender);
  tcase_add_test(tc, no_sender_stays_muted_on_an_ended_vat);
  tcase_add_test(tc, sends_after_a_hoist_keep_their_order);
  tcase_add_test(tc, a_host_send_wakes_a_parked_worker);
  suite_add_tcase(s, tc);
  return s;
}
