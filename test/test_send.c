/* Sending: per-pair order, host threads, dynamic messages, dead letters,
 * and sends between systems. */
#include <pthread.h>
#include <stdio.h>

#include "support.h"

/* --- Per-pair order ------------------------------------------------------ */

enum { SENDERS = 8, PER_SENDER = 20000 / TEST_SCALE, BURST = 7 };

typedef struct receiver {
  uint64_t next_expected[SENDERS + 1];
  uint64_t out_of_order;
  uint64_t received;
} receiver;

/* arg: sender index in the high bits, sequence number in the low 32. */
static void receive_seq(vat_turn *turn, void *state, void *arg) {
  (void)turn;
  receiver *r = state;
  uint64_t v = (uintptr_t)arg;
  uint64_t sender = v >> 32, seq = v & 0xffffffffu;
  if (seq != r->next_expected[sender])
    r->out_of_order++;
  r->next_expected[sender] = seq + 1;
  r->received++;
}

typedef struct sender {
  vat_ref *to;
  uint64_t index;
  uint64_t sent;
} sender;

/* Sends a burst per turn and re-sends itself until done: sends from many
 * turns, interleaved with the other senders on both workers. */
static void send_burst(vat_turn *turn, void *state, void *arg) {
  (void)arg;
  sender *s = state;
  for (int i = 0; i < BURST && s->sent < PER_SENDER; i++, s->sent++)
    expect_vat_ok(vat_send(turn, s->to, receive_seq,
                           (void *)(uintptr_t)(s->index << 32 | s->sent)));
  if (s->sent < PER_SENDER)
    expect_vat_ok(vat_send(turn, vat_self(turn), send_burst, NULL));
}

START_TEST(per_pair_order_between_vats) {
  vat_system *sys = test_system(2);
  vat_ref *rref;
  receiver *r;
  ck_assert_vat_ok(vat_host_spawn(
      sys, &(vat_entity_def){.state_size = sizeof(receiver), .receive = NULL},
      &rref, (void **)&r));
  for (uint64_t i = 0; i < SENDERS; i++) {
    vat_ref *sref;
    sender *s;
    ck_assert_vat_ok(vat_host_spawn(
        sys, &(vat_entity_def){.state_size = sizeof(sender), .receive = NULL},
        &sref, (void **)&s));
    s->to = rref;
    s->index = i;
    ck_assert_vat_ok(vat_host_send(sref, send_burst, NULL));
  }
  test_quiesce(sys);
  ck_assert_uint_eq(r->received, SENDERS * PER_SENDER);
  ck_assert_uint_eq(r->out_of_order, 0);
  for (int i = 0; i < SENDERS; i++)
    ck_assert_uint_eq(r->next_expected[i], PER_SENDER);
}
END_TEST

/* --- Host threads --------------------------------------------------------- */

enum { HOST_THREADS = 4, PER_HOST = 50000 / TEST_SCALE };

typedef struct host_job {
  vat_ref *to;
  uint64_t index;
  int register_rc, unregister_rc;
  int failures;
} host_job;

/* Plain pthread_create (this file does not include the collector's
 * redirect), so the thread registers itself, as a host program's would. */
static void *host_sender(void *arg) {
  host_job *job = arg;
  job->register_rc = vat_thread_register();
  for (uint64_t seq = 0; seq < PER_HOST; seq++)
    if (vat_host_send(job->to, receive_seq,
                      (void *)(uintptr_t)(job->index << 32 | seq)) != VAT_OK)
      job->failures++;
  job->unregister_rc = vat_thread_unregister();
  return NULL;
}

START_TEST(host_threads_send_concurrently_in_order) {
  vat_system *sys = test_system(2);
  vat_ref *rref;
  receiver *r;
  ck_assert_vat_ok(vat_host_spawn(
      sys, &(vat_entity_def){.state_size = sizeof(receiver), .receive = NULL},
      &rref, (void **)&r));
  pthread_t threads[HOST_THREADS];
  host_job jobs[HOST_THREADS];
  for (uint64_t i = 0; i < HOST_THREADS; i++) {
    jobs[i] = (host_job){.to = rref, .index = i};
    ck_assert_int_eq(pthread_create(&threads[i], NULL, host_sender, &jobs[i]),
                     0);
  }
  for (int i = 0; i < HOST_THREADS; i++) {
    pthread_join(threads[i], NULL);
    ck_assert_vat_ok(jobs[i].register_rc);
    ck_assert_vat_ok(jobs[i].unregister_rc);
    ck_assert_int_eq(jobs[i].failures, 0);
  }
  test_quiesce(sys);
  ck_assert_uint_eq(r->received, HOST_THREADS * PER_HOST);
  ck_assert_uint_eq(r->out_of_order, 0);
}
END_TEST

static void *unregistered_send(void *arg) {
  host_job *job = arg;
  job->register_rc = vat_host_send(job->to, receive_seq, NULL);
  job->unregister_rc = vat_thread_unregister();
  return NULL;
}

START_TEST(unregistered_thread_is_refused) {
  vat_system *sys = test_system(1);
  vat_ref *rref;
  receiver *r;
  ck_assert_vat_ok(vat_host_spawn(
      sys, &(vat_entity_def){.state_size = sizeof(receiver), .receive = NULL},
      &rref, (void **)&r));
  host_job job = {.to = rref};
  pthread_t t;
  ck_assert_int_eq(pthread_create(&t, NULL, unregistered_send, &job), 0);
  pthread_join(t, NULL);
  ck_assert_int_eq(job.register_rc, VAT_ENOTREGISTERED);
  ck_assert_int_eq(job.unregister_rc, VAT_ENOTREGISTERED);
  test_quiesce(sys);
  ck_assert_uint_eq(r->received, 0);
}
END_TEST

START_TEST(host_send_bad_arguments) {
  vat_system *sys = test_system(1);
  vat_ref *rref;
  ck_assert_vat_ok(vat_host_spawn(
      sys, &(vat_entity_def){.state_size = sizeof(receiver), .receive = NULL},
      &rref, NULL));
  ck_assert_vat_err(vat_host_send(NULL, receive_seq, NULL), VAT_EINVAL);
  ck_assert_vat_err(vat_host_send(rref, NULL, NULL), VAT_EINVAL);
  ck_assert_vat_err(vat_host_send_msg(NULL, vat_atom_intern("x"), vat_null()),
                    VAT_EINVAL);
  ck_assert_vat_err(vat_host_send_msg(rref, NULL, vat_null()), VAT_EINVAL);
  test_quiesce(sys);
  ck_assert_uint_eq(test_stats(sys).delivered, 0);
}
END_TEST

/* --- Dynamic messages ----------------------------------------------------- */

typedef struct dyn {
  const vat_atom *add, *get;
  int64_t total;
  uint64_t unknown;
  vat_ref *reply_to;
} dyn;

static void on_total(vat_turn *turn, void *state, const vat_atom *selector,
                     vat_value value) {
  (void)turn;
  (void)selector;
  dyn *d = state;
  expect_vat_ok(vat_get_int(value, &d->total));
}

static void dyn_receive(vat_turn *turn, void *state, const vat_atom *selector,
                        vat_value value) {
  dyn *d = state;
  int64_t n;
  if (selector == d->add && vat_get_int(value, &n) == VAT_OK)
    d->total += n;
  else if (selector == d->get)
    expect_vat_ok(vat_send_msg(turn, vat_value_ref(value),
                               vat_atom_intern("total"), vat_int(d->total)));
  else
    d->unknown++;
}

START_TEST(dynamic_messages_dispatch_by_selector) {
  vat_system *sys = test_system(2);
  vat_ref *acc, *asker, *plain;
  dyn *a, *q;
  ck_assert_vat_ok(vat_host_spawn(
      sys, &(vat_entity_def){.state_size = sizeof(dyn), .receive = dyn_receive},
      &acc, (void **)&a));
  ck_assert_vat_ok(vat_host_spawn(
      sys, &(vat_entity_def){.state_size = sizeof(dyn), .receive = on_total},
      &asker, (void **)&q));
  ck_assert_vat_ok(vat_host_spawn(sys, &(vat_entity_def){0}, &plain, NULL));
  a->add = vat_atom_intern("add");
  a->get = vat_atom_intern("get");
  for (int i = 1; i <= 100; i++)
    ck_assert_vat_ok(vat_host_send_msg(acc, a->add, vat_int(i)));
  ck_assert_vat_ok(vat_host_send_msg(acc, vat_atom_intern("nope"), vat_null()));
  ck_assert_vat_ok(vat_host_send_msg(acc, a->get, vat_ref_value(asker)));
  /* An entity without a receive function drops dynamic messages. */
  ck_assert_vat_ok(vat_host_send_msg(plain, a->add, vat_int(1)));
  test_quiesce(sys);
  ck_assert_int_eq(a->total, 5050);
  ck_assert_int_eq(q->total, 5050);
  ck_assert_uint_eq(a->unknown, 1);
  ck_assert_uint_eq(test_stats(sys).dead_letters, 1);
}
END_TEST

/* --- Dead letters ----------------------------------------------------------
 */

typedef struct hook_log {
  _Atomic uint64_t calls;
  _Atomic uint64_t with_selector;
  vat_ref *_Atomic last_target;
} hook_log;

static void record_dead_letter(void *ctx, vat_ref *target,
                               const vat_atom *selector) {
  hook_log *log = ctx;
  atomic_fetch_add(&log->calls, 1);
  if (selector == vat_atom_intern("late"))
    atomic_fetch_add(&log->with_selector, 1);
  atomic_store(&log->last_target, target);
}

static void stop_now(vat_turn *turn, void *state, void *arg) {
  (void)state;
  (void)arg;
  expect_vat_ok(vat_stop(turn));
}

typedef struct poker {
  vat_ref *target;
} poker;

static void poke_from_turn(vat_turn *turn, void *state, void *arg) {
  (void)arg;
  poker *p = state;
  for (int i = 0; i < 10; i++)
    expect_vat_ok(vat_send(turn, p->target, stop_now, NULL));
}

START_TEST(dead_letters_counted_and_hooked) {
  hook_log log = {0};
  vat_config cfg;
  vat_config_default(&cfg);
  cfg.workers = 2;
  cfg.on_dead_letter = record_dead_letter;
  cfg.dead_letter_ctx = &log;
  vat_system *sys;
  ck_assert_vat_ok(vat_system_new(&cfg, &sys));
  vat_ref *victim, *pref;
  poker *p;
  ck_assert_vat_ok(vat_host_spawn(sys, &(vat_entity_def){0}, &victim, NULL));
  ck_assert_vat_ok(vat_host_spawn(
      sys, &(vat_entity_def){.state_size = sizeof(poker), .receive = NULL},
      &pref, (void **)&p));
  p->target = victim;
  ck_assert_vat_ok(vat_host_send(victim, stop_now, NULL));
  for (int i = 0; i < 30000 && !vat_ref_is_dead(victim); i++)
    test_sleep(0.001);
  ck_assert(vat_ref_is_dead(victim));
  vat_stats st;
  for (int i = 0; i < 5; i++)
    ck_assert_vat_ok(vat_host_send(victim, stop_now, NULL));
  ck_assert_vat_ok(
      vat_host_send_msg(victim, vat_atom_intern("late"), vat_int(1)));
  ck_assert_vat_ok(vat_host_send(pref, poke_from_turn, NULL));
  test_quiesce(sys);
  st = test_stats(sys);
  ck_assert_uint_eq(st.dead_letters, 16);
  ck_assert_uint_eq(atomic_load(&log.calls), 16);
  ck_assert_uint_eq(atomic_load(&log.with_selector), 1);
  ck_assert_ptr_eq(atomic_load(&log.last_target), victim);
}
END_TEST

/* A dead letter is counted on the target's system, also when a worker of
 * another system drops it (vat_stats: "messages dropped at a dead vat" of
 * this system), and only the target's hook hears of it. */
typedef struct xsender {
  vat_ref *target;
  _Atomic uint64_t sent;
} xsender;

static void send_to_dead(vat_turn *turn, void *state, void *arg) {
  (void)arg;
  xsender *x = state;
  for (int i = 0; i < 3; i++)
    expect_vat_ok(vat_send(turn, x->target, stop_now, NULL));
  atomic_store_explicit(&x->sent, 1, memory_order_release);
}

START_TEST(dead_letter_counted_on_the_targets_system) {
  hook_log log_a = {0}, log_b = {0};
  vat_config cfg;
  vat_config_default(&cfg);
  cfg.workers = 1;
  cfg.on_dead_letter = record_dead_letter;
  cfg.dead_letter_ctx = &log_a;
  vat_system *a, *b;
  ck_assert_vat_ok(vat_system_new(&cfg, &a));
  cfg.dead_letter_ctx = &log_b;
  ck_assert_vat_ok(vat_system_new(&cfg, &b));
  vat_ref *victim;
  ck_assert_vat_ok(vat_host_spawn(b, &(vat_entity_def){0}, &victim, NULL));
  ck_assert_vat_ok(vat_host_send(victim, stop_now, NULL));
  for (int i = 0; i < 30000 && !vat_ref_is_dead(victim); i++)
    test_sleep(0.001);
  ck_assert(vat_ref_is_dead(victim));
  xsender *x;
  vat_ref *xref = test_spawn(a, sizeof(xsender), (void **)&x);
  x->target = victim;
  ck_assert_vat_ok(vat_host_send(xref, send_to_dead, NULL));
  /* Shutting A down waits for the sending turn to commit. */
  ck_assert_vat_ok(vat_system_shutdown(a, 30));
  ck_assert_uint_eq(atomic_load(&x->sent), 1);
  ck_assert_vat_ok(vat_system_shutdown(b, 30));
  vat_stats sa = test_stats(a), sb = test_stats(b);
  ck_assert_uint_eq(sa.dead_letters, 0);
  ck_assert_uint_eq(sb.dead_letters, 3);
  ck_assert_uint_eq(atomic_load(&log_a.calls), 0);
  ck_assert_uint_eq(atomic_load(&log_b.calls), 3);
  ck_assert_uint_eq(test_bad_calls(), 0);
  ck_assert_uint_eq(sa.dropped_at_shutdown + sb.dropped_at_shutdown, 0);
  ck_assert_vat_ok(vat_system_destroy(a));
  ck_assert_vat_ok(vat_system_destroy(b));
}
END_TEST

/* --- Between systems -------------------------------------------------------
 */

typedef struct pinger {
  vat_ref *peer;
  uint64_t rounds_left;
  _Atomic uint64_t done;
} pinger;

static void ping(vat_turn *turn, void *state, void *arg);

static void pong(vat_turn *turn, void *state, void *arg) {
  (void)state;
  expect_vat_ok(vat_send(turn, arg, ping, vat_self(turn)));
}

static void ping(vat_turn *turn, void *state, void *arg) {
  pinger *p = state;
  (void)arg;
  if (p->rounds_left-- == 0) {
    atomic_store_explicit(&p->done, 1, memory_order_release);
    return;
  }
  expect_vat_ok(vat_send(turn, p->peer, pong, vat_self(turn)));
}

START_TEST(sends_between_systems) {
  vat_system *a = test_system(1), *b = test_system(2);
  vat_ref *pinger_ref, *ponger;
  pinger *p;
  ck_assert_vat_ok(vat_host_spawn(
      a, &(vat_entity_def){.state_size = sizeof(pinger), .receive = NULL},
      &pinger_ref, (void **)&p));
  ck_assert_vat_ok(vat_host_spawn(b, &(vat_entity_def){0}, &ponger, NULL));
  p->peer = ponger;
  p->rounds_left = 10000 / TEST_SCALE;
  ck_assert_vat_ok(vat_host_send(pinger_ref, ping, NULL));
  ck_assert(test_wait_u64(&p->done, 1, 60));
  test_quiesce(a);
  test_quiesce(b);
  ck_assert_uint_eq(test_stats(a).delivered, 10000 / TEST_SCALE + 1);
  ck_assert_uint_eq(test_stats(b).delivered, 10000 / TEST_SCALE);
  /* After destroy, refs into the system are still safe to send to. */
  ck_assert_vat_err(vat_host_send(ponger, pong, pinger_ref), VAT_ECLOSED);
}
END_TEST

/* --- Runs: a turn's consecutive sends to one vat ------------------------ */

/* A turn's sends in a row to one vat go in as one run, whose header the
 * sends build as they go (core/send.c). Each sink vat checks that what it
 * gets arrives in the order sent, through either of its two entities;
 * the sender's turns mix runs to each sink with sends to itself, urgent
 * sends (effects, which cut a turn's sends where they are deferred) and
 * sends to a vat of another system. */
enum { RUN_TURNS = 3000 / TEST_SCALE, RUN_SINKS = 3, RUN_OPS_MAX = 40 };

typedef struct run_order {
  uint64_t expect, out_of_order;
  _Atomic uint64_t got;
  _Atomic uint64_t second_made; /* publishes the second entity's ref */
} run_order;

typedef struct run_sink_entity {
  run_order *order; /* shared by the vat's two entities */
} run_sink_entity;

static void run_item(vat_turn *turn, void *state, void *arg) {
  (void)turn;
  run_order *o = ((run_sink_entity *)state)->order;
  if ((uintptr_t)arg != o->expect)
    o->out_of_order++;
  o->expect = (uintptr_t)arg + 1;
  atomic_fetch_add_explicit(&o->got, 1, memory_order_release);
}

static void run_second_entity(vat_turn *turn, void *state, void *arg) {
  run_sink_entity *first = state;
  vat_ref **out = arg;
  run_sink_entity *second;
  expect_vat_ok(vat_entity_new(
      turn, &(vat_entity_def){.state_size = sizeof(run_sink_entity)}, out,
      (void **)&second));
  second->order = first->order;
  atomic_store_explicit(&first->order->second_made, 1, memory_order_release);
}

typedef struct run_sender {
  uint64_t rng;
  vat_ref *sink[RUN_SINKS][2]; /* sink 2 is in another system */
  uint64_t sent[RUN_SINKS];
  vat_ref *urgent_to;
  uint64_t turns, self_sent;
  _Atomic uint64_t self_got, urgent_sent, done;
} run_sender;

static void run_self(vat_turn *turn, void *state, void *arg) {
  (void)turn;
  (void)arg;
  run_sender *s = state;
  atomic_fetch_add_explicit(&s->self_got, 1, memory_order_relaxed);
}

static void run_turn(vat_turn *turn, void *state, void *arg) {
  (void)arg;
  run_sender *s = state;
  unsigned ops = (unsigned)test_rand_between(&s->rng, 1, RUN_OPS_MAX);
  for (unsigned i = 0; i < ops; i++) {
    uint64_t r = test_rand(&s->rng);
    unsigned kind = (unsigned)(r % 16);
    /* Mostly runs: a sink kept for several sends in a row. */
    unsigned sink = kind < 6 ? 0 : kind < 10 ? 1 : kind < 12 ? 2 : 3;
    if (sink < RUN_SINKS) {
      unsigned len = (unsigned)(r >> 8) % 6 + 1;
      for (unsigned j = 0; j < len; j++) {
        vat_ref *to = s->sink[sink][(r >> (16 + j)) & 1];
        expect_vat_ok(
            vat_send(turn, to, run_item, (void *)(uintptr_t)s->sent[sink]++));
      }
    } else if (kind == 12 || kind == 13) {
      expect_vat_ok(vat_send(turn, vat_self(turn), run_self, NULL));
      s->self_sent++;
    } else {
      expect_vat_ok(vat_send_urgent(turn, s->urgent_to, test_hit, NULL));
      atomic_fetch_add_explicit(&s->urgent_sent, 1, memory_order_relaxed);
    }
  }
  if (++s->turns < RUN_TURNS)
    expect_vat_ok(vat_send(turn, vat_self(turn), run_turn, NULL));
  else
    atomic_store_explicit(&s->done, 1, memory_order_release);
}

START_TEST(runs_keep_order_among_entities_effects_and_systems) {
  vat_system *sys = test_system(2), *other = test_system(1);
  run_sender *s;
  vat_ref *sender = test_spawn(sys, sizeof(run_sender), (void **)&s);
  s->rng = test_seed("runs_keep_order_among_entities_effects_and_systems");
  run_order orders[RUN_SINKS] = {0};
  for (unsigned k = 0; k < RUN_SINKS; k++) {
    run_sink_entity *e;
    vat_ref *first = test_spawn(k == 2 ? other : sys, sizeof *e, (void **)&e);
    e->order = &orders[k];
    s->sink[k][0] = first;
    ck_assert_vat_ok(vat_host_send(first, run_second_entity, &s->sink[k][1]));
  }
  test_counter *urgent;
  s->urgent_to = test_spawn_counter(sys, &urgent);
  /* The second entities exist once each sink ran its first message. */
  for (unsigned k = 0; k < RUN_SINKS; k++) {
    ck_assert(test_wait_u64(&orders[k].second_made, 1, 30));
    ck_assert_ptr_nonnull(s->sink[k][1]);
  }
  ck_assert_vat_ok(vat_host_send(sender, run_turn, NULL));
  ck_assert(test_wait_u64(&s->done, 1, 60));
  for (unsigned k = 0; k < RUN_SINKS; k++)
    ck_assert_msg(test_wait_u64(&orders[k].got, s->sent[k], 30),
                  "sink %u got %llu of %llu", k,
                  (unsigned long long)atomic_load(&orders[k].got),
                  (unsigned long long)s->sent[k]);
  ck_assert(test_wait_u64(&s->self_got, s->self_sent, 30));
  ck_assert(test_wait_u64(&urgent->hits, atomic_load(&s->urgent_sent), 30));
  for (unsigned k = 0; k < RUN_SINKS; k++)
    ck_assert_msg(orders[k].out_of_order == 0,
                  "sink %u: %llu of %llu out of order", k,
                  (unsigned long long)orders[k].out_of_order,
                  (unsigned long long)s->sent[k]);
  test_quiesce(sys);
  test_quiesce(other);
  ck_assert_uint_eq(test_stats(sys).dead_letters, 0);
  ck_assert_uint_eq(test_stats(other).dead_letters, 0);
}
END_TEST

/* --- Urgent self-sends --------------------------------------------------- */

/* vat/core.h: an urgent message a vat sends to itself is queued as its
 * other self-sends, in order. One turn sends o1 u1 o2 u2 to itself (u2 a
 * dynamic message to its second entity). With workers, o1 waits at a gate
 * while a host thread sends an urgent message (9), which goes ahead of
 * what is still queued without moving the self-sends: 1 9 2 3 4. Before:
 * 2 4 1 3 host-driven, and 2 4 1 9 3 with workers. */
typedef struct self_log {
  uint64_t log[8];
  _Atomic uint64_t n, entered, open;
  bool gate;
  vat_ref *second;
} self_log;

static void self_note(vat_turn *turn, void *state, void *arg) {
  (void)turn;
  self_log *l = state;
  uint64_t i = atomic_load(&l->n);
  if (i < 8)
    l->log[i] = (uintptr_t)arg;
  atomic_store(&l->n, i + 1);
  if ((uintptr_t)arg == 1 && l->gate) {
    atomic_store(&l->entered, 1);
    while (atomic_load(&l->open) == 0)
      test_sleep(0.0002);
  }
}

/* The second entity's state points at the first's log. */
static void self_note_msg(vat_turn *turn, void *state,
                          const vat_atom *selector, vat_value value) {
  (void)selector;
  self_note(turn, *(self_log **)state, (void *)(uintptr_t)value.as.i);
}

static void self_mix(vat_turn *turn, void *state, void *arg) {
  (void)arg;
  self_log *l = state;
  vat_ref *me = vat_self(turn);
  self_log **link;
  expect_vat_ok(vat_entity_new(
      turn,
      &(vat_entity_def){.state_size = sizeof link, .receive = self_note_msg},
      &l->second, (void **)&link));
  *link = l;
  expect_vat_ok(vat_send(turn, me, self_note, (void *)(uintptr_t)1));
  expect_vat_ok(vat_send_urgent(turn, me, self_note, (void *)(uintptr_t)2));
  expect_vat_ok(vat_send(turn, me, self_note, (void *)(uintptr_t)3));
  expect_vat_ok(
      vat_send_msg_urgent(turn, l->second, vat_atom_intern("u"), vat_int(4)));
}

static void check_self_order(vat_system *sys, bool host_driven) {
  vat_ref *me;
  self_log *l;
  ck_assert_vat_ok(vat_host_spawn(
      sys, &(vat_entity_def){.state_size = sizeof *l}, &me, (void **)&l));
  l->gate = !host_driven;
  ck_assert_vat_ok(vat_host_send(me, self_mix, NULL));
  static const uint64_t plain[] = {1, 2, 3, 4}, gated[] = {1, 9, 2, 3, 4};
  const uint64_t *want = host_driven ? plain : gated;
  uint64_t n = host_driven ? 4 : 5;
  if (host_driven) {
    ck_assert_vat_ok(vat_system_run_until_quiescent(sys, 0, NULL));
  } else {
    ck_assert(test_wait_u64(&l->entered, 1, 30));
    ck_assert_vat_ok(vat_host_send_urgent(me, self_note, (void *)(uintptr_t)9));
    atomic_store(&l->open, 1);
  }
  ck_assert(test_wait_u64(&l->n, n, 30));
  test_quiesce(sys);
  char got[64] = "", *p = got;
  for (uint64_t i = 0; i < n; i++)
    p += sprintf(p, " %llu", (unsigned long long)l->log[i]);
  for (uint64_t i = 0; i < n; i++)
    ck_assert_msg(l->log[i] == want[i], "order:%s", got);
}

START_TEST(urgent_self_sends_keep_their_place) {
  check_self_order(test_system(2), false);
  check_self_order(test_host_system(false, 0), true);
  check_self_order(test_host_system(true, 7), true);
}
END_TEST

Suite *test_send_suite(void) {
  Suite *s = suite_create("send");
  TCase *tc = test_case("send", 120);
  tcase_add_test(tc, per_pair_order_between_vats);
  tcase_add_test(tc, host_threads_send_concurrently_in_order);
  tcase_add_test(tc, unregistered_thread_is_refused);
  tcase_add_test(tc, host_send_bad_arguments);
  tcase_add_test(tc, dynamic_messages_dispatch_by_selector);
  tcase_add_test(tc, dead_letters_counted_and_hooked);
  tcase_add_test(tc, dead_letter_counted_on_the_targets_system);
  tcase_add_test(tc, sends_between_systems);
  tcase_add_test(tc, runs_keep_order_among_entities_effects_and_systems);
  tcase_add_test(tc, urgent_self_sends_keep_their_place);
  suite_add_tcase(s, tc);
  return s;
}
