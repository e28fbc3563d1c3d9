/* The mailbox on its own: queue order, the idle/scheduled handshake, and a
 * multi-producer stress run that plays the scheduler's part with a token. */
#include "util/gc.h"

#include <inttypes.h>
#include <sched.h>
#include <semaphore.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/mailbox.h"
#include "suites.h"
#include "support.h"

static vat__msg *msg_new(uintptr_t tag) {
  vat__msg *m = GC_MALLOC(sizeof *m);
  ck_assert_ptr_nonnull(m);
  m->arg = (void *)tag;
  return m;
}

static uintptr_t tag_of(const vat__msg *m) {
  ck_assert_ptr_nonnull(m);
  return (uintptr_t)m->arg;
}

/* Links ms[0..n) oldest first, as a turn builds its outbox. */
static void link_chain(vat__msg **ms, size_t n) {
  for (size_t i = 0; i < n; i++)
    atomic_store_explicit(&ms[i]->next, i + 1 < n ? ms[i + 1] : NULL,
                          memory_order_relaxed);
}

static vat__msg *top_of(vat__mailbox *mb) {
  return atomic_load_explicit(&mb->top, memory_order_relaxed);
}

START_TEST(push_to_idle_schedules_once) {
  vat__mailbox mb;
  vat__mailbox_init(&mb);
  ck_assert_ptr_null(top_of(&mb));
  ck_assert(!vat__mailbox_has_work(&mb));

  ck_assert(vat__mailbox_push(&mb, msg_new(1)));
  /* Scheduled now: later pushes must not schedule the vat a second time,
   * whether or not the consumer has taken anything yet. */
  for (uintptr_t i = 2; i <= 5; i++)
    ck_assert(!vat__mailbox_push(&mb, msg_new(i)));
  ck_assert_uint_eq(tag_of(vat__mailbox_pop(&mb, NULL)), 1);
  ck_assert(!vat__mailbox_push(&mb, msg_new(6)));
  for (uintptr_t i = 2; i <= 6; i++)
    ck_assert_uint_eq(tag_of(vat__mailbox_pop(&mb, NULL)), i);
  ck_assert_ptr_null(vat__mailbox_pop(&mb, NULL));
  /* Drained but not idle yet: still no second scheduling. */
  ck_assert(!vat__mailbox_push(&mb, msg_new(7)));
  ck_assert_uint_eq(tag_of(vat__mailbox_pop(&mb, NULL)), 7);
  ck_assert_ptr_null(vat__mailbox_pop(&mb, NULL));

  ck_assert(vat__mailbox_try_idle(&mb, NULL));
  ck_assert_ptr_null(top_of(&mb));
  ck_assert(vat__mailbox_push(&mb, msg_new(8)));
  ck_assert(!vat__mailbox_push(&mb, msg_new(9)));
  ck_assert_uint_eq(tag_of(vat__mailbox_pop(&mb, NULL)), 8);
  ck_assert_uint_eq(tag_of(vat__mailbox_pop(&mb, NULL)), 9);
  ck_assert(vat__mailbox_try_idle(&mb, NULL));
}
END_TEST

START_TEST(fifo_order) {
  enum { N = 1000 };
  vat__mailbox mb;
  vat__mailbox_init(&mb);
  ck_assert(vat__mailbox_push(&mb, msg_new(0)));
  for (uintptr_t i = 1; i < N; i++)
    ck_assert(!vat__mailbox_push(&mb, msg_new(i)));
  /* Take some, then push more behind the private list: order holds across
   * several takes of the stack. */
  for (uintptr_t i = 0; i < N / 2; i++)
    ck_assert_uint_eq(tag_of(vat__mailbox_pop(&mb, NULL)), i);
  for (uintptr_t i = N; i < 2 * N; i++)
    ck_assert(!vat__mailbox_push(&mb, msg_new(i)));
  for (uintptr_t i = N / 2; i < 2 * N; i++)
    ck_assert_uint_eq(tag_of(vat__mailbox_pop(&mb, NULL)), i);
  ck_assert_ptr_null(vat__mailbox_pop(&mb, NULL));
  ck_assert(vat__mailbox_try_idle(&mb, NULL));
}
END_TEST

START_TEST(push_chain_keeps_chain_order) {
  vat__mailbox mb;
  vat__mailbox_init(&mb);
  vat__msg *chain[5];
  for (size_t i = 0; i < 5; i++)
    chain[i] = msg_new(10 + i);
  link_chain(chain, 5);

  ck_assert(vat__mailbox_push(&mb, msg_new(1)));
  ck_assert(!vat__mailbox_push_chain(&mb, chain[0], chain[4]));
  ck_assert(!vat__mailbox_push(&mb, msg_new(2)));
  ck_assert_uint_eq(vat__mailbox_count(&mb), 7);

  const uintptr_t want[] = {1, 10, 11, 12, 13, 14, 2};
  for (size_t i = 0; i < 7; i++)
    ck_assert_uint_eq(tag_of(vat__mailbox_pop(&mb, NULL)), want[i]);
  ck_assert_ptr_null(vat__mailbox_pop(&mb, NULL));
  ck_assert(vat__mailbox_try_idle(&mb, NULL));
}
END_TEST

START_TEST(push_chain_to_idle_schedules) {
  vat__mailbox mb;
  vat__mailbox_init(&mb);
  vat__msg *one[1] = {msg_new(1)};
  link_chain(one, 1);
  ck_assert(vat__mailbox_push_chain(&mb, one[0], one[0]));

  vat__msg *two[2] = {msg_new(2), msg_new(3)};
  link_chain(two, 2);
  ck_assert(!vat__mailbox_push_chain(&mb, two[0], two[1]));
  for (uintptr_t i = 1; i <= 3; i++)
    ck_assert_uint_eq(tag_of(vat__mailbox_pop(&mb, NULL)), i);
  ck_assert(vat__mailbox_try_idle(&mb, NULL));

  vat__msg *three[3] = {msg_new(4), msg_new(5), msg_new(6)};
  link_chain(three, 3);
  ck_assert(vat__mailbox_push_chain(&mb, three[0], three[2]));
  for (uintptr_t i = 4; i <= 6; i++)
    ck_assert_uint_eq(tag_of(vat__mailbox_pop(&mb, NULL)), i);
  ck_assert_ptr_null(vat__mailbox_pop(&mb, NULL));
  ck_assert(vat__mailbox_try_idle(&mb, NULL));
}
END_TEST

START_TEST(append_local_joins_private_list) {
  vat__mailbox mb;
  vat__mailbox_init(&mb);
  ck_assert(vat__mailbox_push(&mb, msg_new(1)));
  ck_assert(!vat__mailbox_push(&mb, msg_new(2)));
  ck_assert_uint_eq(tag_of(vat__mailbox_pop(&mb, NULL)), 1);
  /* The stack was taken whole, so 2 is private already and the local send
   * queues behind it; 3 is still on the stack and comes after both. */
  vat__mailbox_append_local(&mb, msg_new(100));
  ck_assert(!vat__mailbox_push(&mb, msg_new(3)));
  ck_assert(vat__mailbox_has_work(&mb));
  ck_assert_uint_eq(tag_of(vat__mailbox_pop(&mb, NULL)), 2);
  ck_assert_uint_eq(tag_of(vat__mailbox_pop(&mb, NULL)), 100);
  ck_assert_uint_eq(tag_of(vat__mailbox_pop(&mb, NULL)), 3);
  ck_assert_ptr_null(vat__mailbox_pop(&mb, NULL));

  /* On an empty private list, and it blocks going idle until popped. */
  vat__mailbox_append_local(&mb, msg_new(101));
  vat__mailbox_append_local(&mb, msg_new(102));
  ck_assert(vat__mailbox_has_work(&mb));
  ck_assert(!vat__mailbox_try_idle(&mb, NULL));
  ck_assert_uint_eq(vat__mailbox_count(&mb), 2);
  ck_assert_uint_eq(tag_of(vat__mailbox_pop(&mb, NULL)), 101);
  ck_assert(!vat__mailbox_try_idle(&mb, NULL));
  ck_assert_uint_eq(tag_of(vat__mailbox_pop(&mb, NULL)), 102);
  ck_assert_ptr_null(vat__mailbox_pop(&mb, NULL));
  ck_assert(vat__mailbox_try_idle(&mb, NULL));
}
END_TEST

START_TEST(try_idle_fails_after_push) {
  vat__mailbox mb;
  vat__mailbox_init(&mb);
  ck_assert(vat__mailbox_push(&mb, msg_new(1)));
  ck_assert_uint_eq(tag_of(vat__mailbox_pop(&mb, NULL)), 1);
  ck_assert_ptr_null(vat__mailbox_pop(&mb, NULL));
  ck_assert(!vat__mailbox_has_work(&mb));

  /* A push between the last pop and try_idle: the vat must stay scheduled,
   * and that push must not have asked to schedule it again. */
  ck_assert(!vat__mailbox_push(&mb, msg_new(2)));
  ck_assert(vat__mailbox_has_work(&mb));
  ck_assert(!vat__mailbox_try_idle(&mb, NULL));
  ck_assert_ptr_nonnull(top_of(&mb));
  ck_assert_uint_eq(tag_of(vat__mailbox_pop(&mb, NULL)), 2);
  ck_assert(vat__mailbox_try_idle(&mb, NULL));
  ck_assert_ptr_null(top_of(&mb));
}
END_TEST

START_TEST(count_sees_stack_and_private_list) {
  vat__mailbox mb;
  vat__mailbox_init(&mb);
  ck_assert(vat__mailbox_push(&mb, msg_new(0)));
  ck_assert_uint_eq(vat__mailbox_count(&mb), 1);
  for (uintptr_t i = 1; i < 10; i++)
    vat__mailbox_push(&mb, msg_new(i));
  ck_assert_uint_eq(vat__mailbox_count(&mb), 10);
  ck_assert_uint_eq(tag_of(vat__mailbox_pop(&mb, NULL)), 0);
  ck_assert_uint_eq(tag_of(vat__mailbox_pop(&mb, NULL)), 1);
  vat__mailbox_append_local(&mb, msg_new(10));
  vat__mailbox_push(&mb, msg_new(11));
  ck_assert_uint_eq(vat__mailbox_count(&mb), 10);
  /* Counting took the stack into the private list without reordering. */
  for (uintptr_t i = 2; i < 12; i++)
    ck_assert_uint_eq(tag_of(vat__mailbox_pop(&mb, NULL)), i);
  ck_assert_uint_eq(vat__mailbox_count(&mb), 0);
  ck_assert(vat__mailbox_try_idle(&mb, NULL));
}
END_TEST

/* Makes `header` the header of the run ms[0..n), linked, as a turn's
 * sends build it (core/send.c). */
static vat__msg *run_header_of(vat__msg *header, vat__msg **ms, size_t n) {
  vat__mailbox_run_start(header, ms[0]);
  for (size_t i = 1; i < n; i++)
    vat__mailbox_run_add(header, ms[i]);
  return header;
}

/* Pushes ms[0..n) as one run behind a header of its own. */
static bool push_run(vat__mailbox *mb, vat__msg **ms, size_t n) {
  link_chain(ms, n);
  return vat__mailbox_push_header(mb, run_header_of(msg_new(0), ms, n));
}

/* Runs and single nodes in one stack come out in push order, counted by
 * what they hold, from the consumer's take and from a snapshot alike. */
START_TEST(runs_keep_order_and_count) {
  vat__mailbox mb;
  vat__mailbox_init(&mb);
  vat__msg *a[] = {msg_new(2), msg_new(3), msg_new(4)};
  vat__msg *b[] = {msg_new(6), msg_new(7)};
  ck_assert(vat__mailbox_push(&mb, msg_new(1)));
  ck_assert(!push_run(&mb, a, 3));
  ck_assert(!vat__mailbox_push(&mb, msg_new(5)));
  ck_assert(!push_run(&mb, b, 2));
  ck_assert_uint_eq(vat__mailbox_peek_len(&mb, 100), 7);
  ck_assert_uint_eq(vat__mailbox_peek_len(&mb, 5), 5);
  ck_assert_uint_eq(vat__mailbox_take_counted(&mb, NULL), 7);
  ck_assert_uint_eq(vat__mailbox_peek_len(&mb, 100), 7);
  /* A run on top: what is pushed next goes after its last node. */
  ck_assert(!vat__mailbox_push(&mb, msg_new(8)));
  ck_assert_uint_eq(vat__mailbox_peek_len(&mb, 100), 8);
  for (uintptr_t i = 1; i <= 8; i++)
    ck_assert_uint_eq(tag_of(vat__mailbox_pop(&mb, NULL)), i);
  ck_assert_ptr_null(vat__mailbox_pop(&mb, NULL));
  ck_assert(vat__mailbox_try_idle(&mb, NULL));
}
END_TEST

/* A header is recycled once the take has passed it, and the one on top
 * once a later take or going idle replaces it; the run's own nodes only
 * when their messages are done. */
START_TEST(run_headers_are_recycled) {
  vat__msgpool pool = {0};
  vat__mailbox mb;
  vat__mailbox_init(&mb);
  vat__msg *a[] = {msg_new(1), msg_new(2)};
  vat__msg *b[] = {msg_new(3), msg_new(4)};
  ck_assert(push_run(&mb, a, 2));
  ck_assert(!push_run(&mb, b, 2));
  ck_assert(vat__mailbox_take_new(&mb, &pool));
  ck_assert_uint_eq(pool.count, 1); /* a's header; b's stays on top */
  for (uintptr_t i = 1; i <= 4; i++) {
    vat__msg *m = vat__mailbox_pop(&mb, &pool);
    ck_assert_uint_eq(tag_of(m), i);
    vat__mailbox_done(&mb, &pool, m);
  }
  ck_assert_uint_eq(pool.count, 5);
  ck_assert(vat__mailbox_try_idle(&mb, &pool));
  ck_assert_uint_eq(pool.count, 6); /* and b's, no longer on top */
}
END_TEST

/* --- A producer caught between its exchange and its link ---------------
 *
 * push_chain publishes a node with its exchange and links it to the older
 * part of the stack with a second store. A producer preempted between the
 * two leaves the consumer a node it cannot see past. The consumer must not
 * wait for it: it leaves the whole unlinked segment where it is (the nodes
 * above it were pushed later, possibly by a producer whose earlier ones are
 * below it, so taking them alone would reorder that producer) and stays
 * scheduled, so the segment is taken on a later run.
 */

typedef struct {
  vat__msg *node;
  vat__msg *below;
} half_push;

/* The first half of push_chain for one node: exchanged, not linked. */
static half_push push_exchange_only(vat__mailbox *mb, vat__msg *m) {
  atomic_store_explicit(&m->next, VAT__MAILBOX_UNLINKED, memory_order_relaxed);
  return (half_push){m, atomic_exchange(&mb->top, m)};
}

static void push_complete(half_push h) {
  atomic_store_explicit(&h.node->next, h.below, memory_order_release);
}

typedef struct {
  vat__mailbox *mb;
  vat__msg *popped;
  _Atomic uint64_t returned;
} pop_call;

static void *pop_in_thread(void *p) {
  pop_call *c = p;
  c->popped = vat__mailbox_pop(c->mb, NULL);
  atomic_store_explicit(&c->returned, 1, memory_order_release);
  return NULL;
}

/* Pops on another thread, so a consumer that waits for the producer fails
 * the test instead of hanging it. */
static vat__msg *pop_or_fail(vat__mailbox *mb) {
  pop_call c = {.mb = mb};
  pthread_t t;
  ck_assert_int_eq(pthread_create(&t, NULL, pop_in_thread, &c), 0);
  ck_assert_msg(test_wait_u64(&c.returned, 1, 2.0),
                "pop still waits for a producer caught mid-push after 2 s");
  pthread_join(t, NULL);
  return c.popped;
}

START_TEST(take_leaves_half_pushed_segment) {
  vat__mailbox mb;
  vat__mailbox_init(&mb);
  ck_assert(vat__mailbox_push(&mb, msg_new(1)));
  ck_assert(!vat__mailbox_push(&mb, msg_new(2)));
  ck_assert_uint_eq(tag_of(vat__mailbox_pop(&mb, NULL)), 1);
  /* 2 is in the private list now; 3 is caught mid-push, 4 and 5 (a chain)
   * land on top of it. */
  ck_assert(!vat__mailbox_push(&mb, msg_new(3)));
  ck_assert_uint_eq(tag_of(vat__mailbox_pop(&mb, NULL)), 2);
  ck_assert_uint_eq(tag_of(vat__mailbox_pop(&mb, NULL)), 3);
  half_push h = push_exchange_only(&mb, msg_new(4));
  ck_assert(h.below != NULL); /* the vat was scheduled: no new scheduling */
  vat__msg *chain[] = {msg_new(5), msg_new(6)};
  link_chain(chain, 2);
  ck_assert(!vat__mailbox_push_chain(&mb, chain[0], chain[1]));

  ck_assert_ptr_null(pop_or_fail(&mb));
  ck_assert_uint_eq(vat__mailbox_count(&mb), 0);
  /* Pending work: the vat must neither go idle nor look idle. */
  ck_assert(vat__mailbox_has_work(&mb));
  ck_assert(!vat__mailbox_try_idle(&mb, NULL));
  ck_assert_ptr_null(pop_or_fail(&mb));
  ck_assert(!vat__mailbox_try_idle(&mb, NULL));

  push_complete(h);
  for (uintptr_t i = 4; i <= 6; i++)
    ck_assert_uint_eq(tag_of(vat__mailbox_pop(&mb, NULL)), i);
  ck_assert_ptr_null(vat__mailbox_pop(&mb, NULL));
  ck_assert(vat__mailbox_try_idle(&mb, NULL));
}
END_TEST

/* A take that passed a run before it met the stall puts the run back as
 * it was: nothing of the segment is taken, and the run comes out whole,
 * in order, once the producer links its node. */
START_TEST(run_above_half_push_is_put_back) {
  vat__mailbox mb;
  vat__mailbox_init(&mb);
  ck_assert(vat__mailbox_push(&mb, msg_new(1)));
  ck_assert_uint_eq(tag_of(vat__mailbox_pop(&mb, NULL)), 1);
  half_push h = push_exchange_only(&mb, msg_new(2));
  vat__msg *run[] = {msg_new(3), msg_new(4), msg_new(5)};
  ck_assert(!push_run(&mb, run, 3));
  ck_assert(!vat__mailbox_push(&mb, msg_new(6)));
  ck_assert_ptr_null(pop_or_fail(&mb));
  ck_assert_uint_eq(vat__mailbox_take_counted(&mb, NULL), 0);
  ck_assert(!vat__mailbox_try_idle(&mb, NULL));
  push_complete(h);
  for (uintptr_t i = 2; i <= 6; i++)
    ck_assert_uint_eq(tag_of(vat__mailbox_pop(&mb, NULL)), i);
  ck_assert_ptr_null(vat__mailbox_pop(&mb, NULL));
  ck_assert(vat__mailbox_try_idle(&mb, NULL));
}
END_TEST

/* The stall below nodes already taken: those stay poppable. */
START_TEST(taken_messages_pop_past_half_push) {
  vat__mailbox mb;
  vat__mailbox_init(&mb);
  ck_assert(vat__mailbox_push(&mb, msg_new(1)));
  ck_assert(!vat__mailbox_push(&mb, msg_new(2)));
  ck_assert_uint_eq(vat__mailbox_count(&mb), 2);
  half_push h = push_exchange_only(&mb, msg_new(3));
  ck_assert_uint_eq(tag_of(pop_or_fail(&mb)), 1);
  ck_assert_uint_eq(tag_of(pop_or_fail(&mb)), 2);
  ck_assert_ptr_null(pop_or_fail(&mb));
  ck_assert(!vat__mailbox_try_idle(&mb, NULL));
  push_complete(h);
  ck_assert_uint_eq(tag_of(vat__mailbox_pop(&mb, NULL)), 3);
  ck_assert(vat__mailbox_try_idle(&mb, NULL));
}
END_TEST

typedef struct {
  vat__mailbox *mb;
  uint64_t drained;
  _Atomic uint64_t done;
} drain_call;

static void *drain_in_thread(void *p) {
  drain_call *d = p;
  while (vat__mailbox_pop_stopped(d->mb) != NULL)
    d->drained++;
  atomic_store_explicit(&d->done, 1, memory_order_release);
  return NULL;
}

/* Emptying the mailbox of a vat that will not run again (at shutdown) must
 * wait for a producer mid-push: what lies under its node was pushed before
 * it and would be lost uncounted. */
START_TEST(drain_of_stopped_vat_waits_for_half_push) {
  vat__mailbox mb;
  vat__mailbox_init(&mb);
  ck_assert(vat__mailbox_push(&mb, msg_new(1)));
  ck_assert(!vat__mailbox_push(&mb, msg_new(2)));
  half_push h = push_exchange_only(&mb, msg_new(3));
  ck_assert(!vat__mailbox_push(&mb, msg_new(4)));

  vat__test_point_arm("mailbox.drain.wait_for_link");
  drain_call d = {.mb = &mb};
  pthread_t t;
  ck_assert_int_eq(pthread_create(&t, NULL, drain_in_thread, &d), 0);
  /* The drain found the unlinked node before the push completes. */
  bool parked = vat__test_point_wait(2);
  vat__test_point_release();
  push_complete(h);
  ck_assert_msg(test_wait_u64(&d.done, 1, 10), "the drain did not finish");
  pthread_join(t, NULL);
  ck_assert_msg(d.drained == 4, "drained %" PRIu64 " of 4 messages", d.drained);
  ck_assert_msg(parked, "the drain never met the half-pushed node");
}
END_TEST

/* --- Stress: producers against one consumer ------------------------------
 *
 * The consumer stands for the worker running the vat: it pops only while it
 * holds the schedule token. It gives the token up by a successful try_idle;
 * the producer whose push returns true creates the next one and hands it
 * over through a semaphore. `tokens` counts tokens in existence and must
 * never exceed one. The consumer lends its token back before try_idle and
 * takes it again if try_idle fails: no push can return true in between
 * (the mailbox is not idle), so a push that finds a token outstanding is a
 * double scheduling.
 */

enum { MAX_PRODUCERS = 4, MAX_CHAIN = 8 };

typedef struct {
  unsigned id;
  uint64_t seed;
  uint32_t count;
} producer_arg;

static struct {
  /* Static, so the collector scans the mailbox and the messages in it. */
  vat__mailbox mb;
  sem_t scheduled;
  _Atomic int tokens;
  _Atomic uint64_t handovers;
  test_failure failure;
  unsigned producers;
  uint32_t expected[MAX_PRODUCERS];
  uint64_t seed;
} st;

static uint64_t splitmix(uint64_t *s) {
  uint64_t z = (*s += 0x9e3779b97f4a7c15u);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
  return z ^ (z >> 31);
}

static uint32_t below(uint64_t *s, uint32_t n) {
  return (uint32_t)(splitmix(s) % n);
}

/* (producer, sequence number), so order per producer can be checked. */
static uintptr_t stress_tag(unsigned producer, uint32_t seq) {
  return (uintptr_t)seq << 3 | producer;
}

/* push_chain's protocol with a pause between the exchange and the link
 * store, as when the producer is preempted there: the consumer meets an
 * unlinked node and must neither wait for it nor lose what is under it. */
static bool slow_push_chain(vat__msg *first, vat__msg *last, uint64_t *rng) {
  vat__msg *before = VAT__MAILBOX_UNLINKED;
  for (vat__msg *m = first;;) {
    vat__msg *after = atomic_load_explicit(&m->next, memory_order_relaxed);
    atomic_store_explicit(&m->next, before, memory_order_relaxed);
    if (m == last)
      break;
    before = m;
    m = after;
  }
  vat__msg *prev = atomic_exchange(&st.mb.top, last);
  if (below(rng, 4) == 0)
    sched_yield();
  else
    for (uint32_t i = below(rng, 2000); i > 0; i--)
      atomic_signal_fence(memory_order_seq_cst);
  atomic_store_explicit(&first->next, prev, memory_order_release);
  return prev == NULL;
}

static void *produce(void *p) {
  producer_arg *a = p;
  uint64_t rng = a->seed;
  vat__msg *chain[MAX_CHAIN];
  for (uint32_t seq = 0; seq < a->count;) {
    /* Chains as a turn's buffered sends; they publish several nodes with one
     * exchange, and their oldest link is the one the consumer waits for. */
    uint32_t n = below(&rng, 4) == 0 ? 1 + below(&rng, MAX_CHAIN) : 1;
    if (n > a->count - seq)
      n = a->count - seq;
    for (uint32_t i = 0; i < n; i++) {
      chain[i] = GC_MALLOC(sizeof *chain[i]);
      if (chain[i] == NULL) {
        test_fail_first(&st.failure, "out of memory");
        return NULL;
      }
      chain[i]->arg = (void *)stress_tag(a->id, seq + i);
    }
    link_chain(chain, n);
    /* A chain of several goes in as a run now and then, as a commit's do,
     * behind a header whose link is the one the consumer waits for. */
    vat__msg *first = chain[0], *last = chain[n - 1];
    if (n > 1 && below(&rng, 2) == 0) {
      vat__msg *header = GC_MALLOC(sizeof *header);
      if (header == NULL) {
        test_fail_first(&st.failure, "out of memory");
        return NULL;
      }
      first = last = run_header_of(header, chain, n);
    }
    bool was_idle = below(&rng, 16) == 0
                        ? slow_push_chain(first, last, &rng)
                        : vat__mailbox_push_chain(&st.mb, first, last);
    if (was_idle) {
      if (atomic_fetch_add(&st.tokens, 1) != 0)
        test_fail_first(&st.failure,
                        "vat scheduled twice: producer %u at seq %" PRIu32,
                        a->id, seq);
      atomic_fetch_add_explicit(&st.handovers, 1, memory_order_relaxed);
      sem_post(&st.scheduled);
    }
    seq += n;
    if (below(&rng, 64) == 0)
      sched_yield();
  }
  return NULL;
}

typedef struct {
  uint64_t idle_periods;
  uint64_t received;
  uint64_t stalls; /* batches ended by a producer caught mid-push */
} consumer_result;

static void take_token(void) {
  if (atomic_fetch_add(&st.tokens, 1) != 0)
    test_fail_first(&st.failure,
                    "a push scheduled the vat while the consumer ran it");
}

static void give_token(void) {
  if (atomic_fetch_sub(&st.tokens, 1) != 1)
    test_fail_first(&st.failure, "the consumer ran without the token");
}

/* Like vat__run_batch: pops up to a batch; runs dry means try_idle, and a
 * failed try_idle means take again, or, if a producer is still mid-push,
 * end the batch scheduled. Returns true when it went idle. */
static bool consume_batch(uint32_t batch, uint32_t *next_seq,
                          consumer_result *r) {
  for (uint32_t budget = batch; budget > 0;) {
    vat__msg *m = vat__mailbox_pop(&st.mb, NULL);
    if (m == NULL) {
      give_token();
      if (vat__mailbox_try_idle(&st.mb, NULL))
        return true;
      take_token();
      if ((m = vat__mailbox_pop(&st.mb, NULL)) == NULL) {
        r->stalls++;
        return false;
      }
    }
    uintptr_t tag = (uintptr_t)m->arg;
    unsigned producer = tag & 7;
    uint32_t seq = (uint32_t)(tag >> 3);
    if (producer >= st.producers || seq != next_seq[producer]) {
      test_fail_first(
          &st.failure, "producer %u: got seq %" PRIu32 ", expected %" PRIu32,
          producer, seq, producer < st.producers ? next_seq[producer] : 0);
      return false;
    }
    next_seq[producer]++;
    r->received++;
    budget--;
  }
  if (vat__mailbox_has_work(&st.mb))
    return false;
  give_token();
  if (vat__mailbox_try_idle(&st.mb, NULL))
    return true;
  take_token();
  return false;
}

static void *consume(void *p) {
  consumer_result *r = p;
  uint32_t next_seq[MAX_PRODUCERS] = {0};
  uint64_t total = 0;
  for (unsigned i = 0; i < st.producers; i++)
    total += st.expected[i];
  uint64_t rng = st.seed ^ 0x5bd1e995u;
  r->idle_periods = 1; /* it starts idle */
  bool idle = true;
  while (!atomic_load(&st.failure.failed)) {
    if (idle) {
      if (r->received == total)
        break;
      sem_wait(&st.scheduled);
    }
    uint32_t batch = 1 + below(&rng, below(&rng, 4) == 0 ? 4 : 64);
    idle = consume_batch(batch, next_seq, r);
    if (idle)
      r->idle_periods++;
    else if (below(&rng, 32) == 0)
      sched_yield(); /* rescheduled behind other vats */
  }
  return NULL;
}

static uint64_t stress_seed(void) {
  const char *env = getenv("VAT_TEST_SEED");
  if (env != NULL && *env != '\0')
    return strtoull(env, NULL, 0);
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (uint64_t)ts.tv_sec * 1000000007u ^ (uint64_t)ts.tv_nsec;
}

/* `seed` is the test's, printed on failure so VAT_TEST_SEED replays it. */
static void stress_round(uint64_t seed, unsigned round) {
  uint64_t rng = seed + round * 0x2545f4914f6cdd1du;
  memset(&st, 0, sizeof st);
  vat__mailbox_init(&st.mb);
  ck_assert_int_eq(sem_init(&st.scheduled, 0, 0), 0);
  st.seed = splitmix(&rng);
  st.producers = 2 + below(&rng, MAX_PRODUCERS - 1);

  producer_arg args[MAX_PRODUCERS];
  pthread_t producers[MAX_PRODUCERS], consumer;
  consumer_result result = {0};
  for (unsigned i = 0; i < st.producers; i++) {
    args[i] = (producer_arg){.id = i,
                             .seed = splitmix(&rng),
                             .count = test_stress_size(&rng, 20000, 100000)};
    st.expected[i] = args[i].count;
  }
  ck_assert_int_eq(pthread_create(&consumer, NULL, consume, &result), 0);
  for (unsigned i = 0; i < st.producers; i++)
    ck_assert_int_eq(pthread_create(&producers[i], NULL, produce, &args[i]), 0);
  for (unsigned i = 0; i < st.producers; i++)
    pthread_join(producers[i], NULL);
  if (atomic_load(&st.failure.failed))
    sem_post(&st.scheduled); /* the consumer may wait for a push */
  pthread_join(consumer, NULL);

  ck_assert_msg(!atomic_load(&st.failure.failed),
                "VAT_TEST_SEED=%" PRIu64 " round %u: %s", seed, round,
                st.failure.text);
  uint64_t total = 0;
  for (unsigned i = 0; i < st.producers; i++)
    total += st.expected[i];
  ck_assert_msg(result.received == total,
                "VAT_TEST_SEED=%" PRIu64 " round %u: received %" PRIu64
                " of %" PRIu64,
                seed, round, result.received, total);
  /* Each idle period but the last ended with exactly one handover. */
  uint64_t handovers = atomic_load(&st.handovers);
  ck_assert_msg(handovers + 1 == result.idle_periods,
                "VAT_TEST_SEED=%" PRIu64 " round %u: %" PRIu64
                " handovers for %" PRIu64 " idle periods",
                seed, round, handovers, result.idle_periods);
  ck_assert_msg(top_of(&st.mb) == NULL && st.mb.head == NULL &&
                    atomic_load(&st.tokens) == 0,
                "VAT_TEST_SEED=%" PRIu64
                " round %u: mailbox not idle at the end",
                seed, round);
  int left;
  sem_getvalue(&st.scheduled, &left);
  ck_assert_msg(left == 0,
                "VAT_TEST_SEED=%" PRIu64 " round %u: %d stray handovers", seed,
                round, left);
  sem_destroy(&st.scheduled);
}

START_TEST(stress_producers_and_scheduled_consumer) {
  uint64_t seed = stress_seed();
  for (unsigned round = 0; round < 4; round++)
    stress_round(seed, round);
}
END_TEST

Suite *test_mailbox_suite(void) {
  Suite *s = suite_create("mailbox");
  TCase *tc = test_case("unit", 0);
  tcase_add_test(tc, push_to_idle_schedules_once);
  tcase_add_test(tc, fifo_order);
  tcase_add_test(tc, push_chain_keeps_chain_order);
  tcase_add_test(tc, push_chain_to_idle_schedules);
  tcase_add_test(tc, append_local_joins_private_list);
  tcase_add_test(tc, try_idle_fails_after_push);
  tcase_add_test(tc, count_sees_stack_and_private_list);
  tcase_add_test(tc, runs_keep_order_and_count);
  tcase_add_test(tc, run_headers_are_recycled);
  tcase_add_test(tc, take_leaves_half_pushed_segment);
  tcase_add_test(tc, taken_messages_pop_past_half_push);
  tcase_add_test(tc, run_above_half_push_is_put_back);
  tcase_add_test(tc, drain_of_stopped_vat_waits_for_half_push);
  suite_add_tcase(s, tc);

  TCase *stress = test_case("stress", 240);
  tcase_add_test(stress, stress_producers_and_scheduled_consumer);
  suite_add_tcase(s, stress);
  return s;
}
