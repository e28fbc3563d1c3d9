/* flood N: one producer vat sends the values 1..N to one consumer vat as
 * fast as it can; the consumer does a fixed small amount of work on each
 * value (flood_work, about 50 ns) and counts and sums them. N deliveries;
 * verified: the count, the sum N(N+1)/2, and no dead letters. The digest
 * (the xor of flood_work over all values) is printed so that the peers,
 * which do the same work, can be checked against this program.
 *
 * The producer sends the way a libvat program sends: a slice of PER_TURN
 * messages per turn, then a message to itself to continue, so that other
 * vats can run between slices. There is no flow control here (unlike
 * counter and fanin, which wait for acknowledgements): the runtime's
 * backpressure (vat/core.h, vat_overload_policy) is what bounds the
 * consumer's queue. The producer is muted when the consumer's queue passes
 * its high mark and runs again when it drains below its low mark.
 *
 * Before backpressure (2-core VM, N = 10,000,000, release build,
 * `bash bench/run.sh -r 3 flood`), nearly the whole flood sat in the
 * mailbox at once (9.34-9.99 M of the 10 M queued when the producer
 * finished): peak RSS 741-779 MB, a median of 2.4 M msg/s. With muting
 * alone, 17.1 M and 7.34 M msg/s on 1 and 2 workers, peak RSS 8 MB: the
 * producer's first batch (64 turns of 1,000 sends) went out before the
 * consumer had run once to measure its queue, and on 2 workers both
 * vats were traded between the workers batch by batch.
 *
 * Now (`bash bench/run.sh -r 5 flood libvat go`, medians, load under 1):
 * 17.8 M msg/s and 4 MB on 1 worker, 10 M msg/s and 6 MB on 2 (Go's
 * 4,096-slot channel in the same run: 15.2 M and 9.8 M, 2 MB). A batch
 * ends after VAT_SEND_BURST sends to one vat, so on one worker the
 * largest backlog (`max_backlog`) is 5,808: the high mark, one burst and
 * one turn. On 2 workers the pair runs on two cores, the consumer's queue
 * in its own; the backlog stays near that while the consumer's thread
 * runs, and grows by what the producer sends while the system preempts
 * it (20,000-40,000 here; 100,000-200,000 on a loaded machine). Later
 * figures, and what changed: bench/README.md ("Runs built as they are
 * sent").
 * On 2 workers each message crosses cores in its own 64-byte node (Go's
 * channel moves 8 values a line), and each worker parked some 400 times
 * a run, off its core for about half the run's time, so the pair runs
 * slower than on one core: 9-14 M msg/s over the day's runs. */
#include <inttypes.h>
#include <semaphore.h>
#include <stdatomic.h>
#include <stdio.h>

#include "bench_util.h"
#include "progress.h"

/* As in the repro of the overload issue: a slice of 1,000 per turn. */
enum { PER_TURN = 1000 };

/* The consumer's work per message: FLOOD_ROUNDS rounds of xorshift32
 * (13, 17, 5) over the value's low 32 bits, a dependent chain the compiler
 * cannot shorten. 28 rounds took 82-100 ns on the project's 2-core VM
 * when written (a whole message takes 56 ns on one worker now); the peers
 * do exactly the same rounds (and print the same digest). */
enum { FLOOD_ROUNDS = 28 };

static inline uint32_t flood_work(uint64_t value) {
  uint32_t x = (uint32_t)value;
  for (int i = 0; i < FLOOD_ROUNDS; i++) {
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
  }
  return x;
}

typedef struct consumer {
  uint64_t expect, count, sum;
  uint32_t digest;
  /* The count, for the producer to read when it has sent everything: a
   * relaxed store per message (a plain store on x86), read once. Relaxed
   * is enough: the figure is informative, nothing is ordered by it. */
  _Atomic uint64_t handled;
  double finished_at;
  sem_t *done;
} consumer;

typedef struct producer {
  vat_ref *consumer;
  consumer *watched; /* only for the backlog figure */
  uint64_t n, sent, backlog;
  uint64_t worst; /* the most sent and not yet handled at a turn's start */
  double sent_at;
} producer;

static void item(vat_turn *turn, void *state, void *arg) {
  (void)turn;
  consumer *c = state;
  uint64_t value = (uintptr_t)arg;
  c->digest ^= flood_work(value);
  c->sum += value;
  atomic_store_explicit(&c->handled, ++c->count, memory_order_relaxed);
  if (c->count == c->expect) {
    c->finished_at = bench_now();
    sem_post(c->done);
  }
}

static void produce(vat_turn *turn, void *state, void *arg) {
  (void)arg;
  producer *p = state;
  /* Once a turn, a thousand sends apart: the backlog the mute bounds. */
  uint64_t handled =
      atomic_load_explicit(&p->watched->handled, memory_order_relaxed);
  if (p->sent - handled > p->worst)
    p->worst = p->sent - handled;
  uint64_t stop = p->sent + PER_TURN < p->n ? p->sent + PER_TURN : p->n;
  while (p->sent < stop) {
    p->sent++;
    vat_send(turn, p->consumer, item, (void *)(uintptr_t)p->sent);
  }
  if (p->sent < p->n) {
    vat_send(turn, vat_self(turn), produce, NULL);
    return;
  }
  p->sent_at = bench_now();
  /* This turn's sends are not committed yet: all of them still count. */
  p->backlog =
      p->n - atomic_load_explicit(&p->watched->handled, memory_order_relaxed);
}

int main(int argc, char **argv) {
  bench_args args;
  bench_parse(argc, argv, "[N]  (default 10000000)", 1, &args);
  uint64_t n = args.nsizes > 0 ? args.sizes[0] : 10000000;
  vat_system *sys = bench_system(&args);

  sem_t done;
  sem_init(&done, 0, 0);
  vat_ref *consumer_ref, *producer_ref;
  consumer *c = bench_spawn(sys, sizeof(consumer), &consumer_ref);
  *c = (consumer){.expect = n, .done = &done};
  producer *p = bench_spawn(sys, sizeof(producer), &producer_ref);
  *p = (producer){.consumer = consumer_ref, .watched = c, .n = n};

  double start = bench_now();
  bench_check(vat_host_send(producer_ref, produce, NULL), "start");
  /* N item turns and one producer turn per slice. */
  bench_wait(sys, &done, "flood", n + (n + PER_TURN - 1) / PER_TURN);
  double seconds = c->finished_at - start;
  bench_check(vat_system_shutdown(sys, 10), "shutdown");
  vat_stats st;
  vat_system_stats(sys, &st);

  uint64_t want = n * (n + 1) / 2;
  bool ok = c->count == n && c->sum == want && st.dead_letters == 0;
  printf("flood: %" PRIu64 " messages, sum %" PRIu64 " (expected %" PRIu64
         "), digest %08" PRIx32 ", %u workers, batch %u\n",
         c->count, c->sum, want, c->digest, args.workers, args.batch);
  printf("producer done after %.3f s with %" PRIu64
         " messages queued (at most %" PRIu64
         " before); consumer done after %.3f s\n",
         p->sent_at - start, p->backlog, p->worst, seconds);
  printf("%" PRIu64 " messages in %.3f s: %.2f M msg/s\n", n, seconds,
         (double)n / seconds / 1e6);
  if (!ok)
    printf("verification failed: %" PRIu64 " messages counted, %" PRIu64
           " dead letters\n",
           c->count, st.dead_letters);
  printf("RESULT workload=flood workers=%u messages=%" PRIu64
         " seconds=%.6f rate=%.0f backlog=%" PRIu64 " max_backlog=%" PRIu64
         " peak_rss_mb=%.0f%s\n",
         args.workers, n, seconds, (double)n / seconds, p->backlog, p->worst,
         bench_peak_rss_mb(), ok ? "" : " ok=0");
  vat_system_destroy(sys);
  return ok ? 0 : 1;
}
