/* fanin P K: P producer vats each send K messages (the values 1..K) to one
 * consumer vat, which counts and sums them. P*K deliveries; verified: the
 * count, and the sum P*K*(K+1)/2.
 *
 * Flow control, as the peers' bounded mailboxes do it and as counter does:
 * after each window of items a producer asks the consumer to confirm (a
 * request) and sends the next window meanwhile; the window after that
 * waits for the answer. Without it the producers, which only send, would
 * queue all P*K messages before the consumer had taken a few. Four
 * producers then have at most 1,024 items in flight, the bound of the Go
 * peer's 1,024-slot channel. */
#include <inttypes.h>
#include <semaphore.h>
#include <stdio.h>

#include "bench_util.h"
#include "progress.h"

enum { PER_TURN = 64, WINDOW = 128 };

typedef struct consumer {
  uint64_t expect, count, sum;
  double finished_at;
  sem_t *done;
} consumer;

typedef struct producer {
  vat_ref *consumer;
  uint64_t k, sent, next_sync;
  vat_promise *pending_ack;
} producer;

static void item(vat_turn *turn, void *state, void *arg) {
  (void)turn;
  consumer *c = state;
  c->sum += (uintptr_t)arg;
  if (++c->count == c->expect) {
    c->finished_at = bench_now();
    sem_post(c->done);
  }
}

/* Answered in order with the items: by then the consumer took the window. */
static void sync_point(vat_turn *turn, void *state, void *arg,
                       vat_resolver *r) {
  (void)state;
  (void)arg;
  vat_resolve(turn, r, vat_null());
}

static void produce(vat_turn *turn, void *state, void *arg);

static void resume(vat_turn *turn, void *state, void *ctx, bool resolved,
                   vat_value value) {
  (void)ctx;
  (void)resolved;
  (void)value;
  produce(turn, state, NULL);
}

/* Sends in slices, re-sending itself between them, so one turn's buffer
 * stays small and the consumer starts working at once. */
static void produce(vat_turn *turn, void *state, void *arg) {
  (void)arg;
  producer *p = state;
  uint64_t stop = p->sent + PER_TURN;
  if (stop > p->next_sync)
    stop = p->next_sync;
  if (stop > p->k)
    stop = p->k;
  while (p->sent < stop) {
    p->sent++;
    vat_send(turn, p->consumer, item, (void *)(uintptr_t)p->sent);
  }
  if (p->sent == p->k)
    return;
  if (p->sent == p->next_sync) {
    p->next_sync += WINDOW;
    vat_promise *ack;
    bench_check(vat_call(turn, p->consumer, sync_point, NULL, 0, &ack),
                "call sync");
    vat_promise *previous = p->pending_ack;
    p->pending_ack = ack;
    if (previous) {
      bench_check(vat_when(turn, previous, resume, NULL), "when");
      return;
    }
  }
  vat_send(turn, vat_self(turn), produce, NULL);
}

int main(int argc, char **argv) {
  bench_args args;
  bench_parse(argc, argv, "[P [K]]  (default 4 1000000)", 2, &args);
  uint64_t np = args.nsizes > 0 ? args.sizes[0] : 4;
  uint64_t k = args.nsizes > 1 ? args.sizes[1] : 1000000;
  vat_system *sys = bench_system(&args);

  sem_t done;
  sem_init(&done, 0, 0);
  vat_ref *consumer_ref;
  consumer *c;
  c = bench_spawn(sys, sizeof(consumer), &consumer_ref);
  *c = (consumer){.expect = np * k, .done = &done};

  double start = bench_now();
  vat_entity_def def = {.state_size = sizeof(producer)};
  for (uint64_t i = 0; i < np; i++) {
    vat_ref *ref;
    producer *p;
    bench_check(vat_host_spawn(sys, &def, &ref, (void **)&p), "spawn");
    *p = (producer){.consumer = consumer_ref, .k = k, .next_sync = WINDOW};
    bench_check(vat_host_send(ref, produce, NULL), "start");
  }
  bench_wait(sys, &done, "fanin", np * k);
  double seconds = c->finished_at - start;
  bench_check(vat_system_shutdown(sys, 10), "shutdown");
  vat_stats st;
  vat_system_stats(sys, &st);

  uint64_t messages = np * k;
  uint64_t want = np * (k * (k + 1) / 2);
  bool ok = c->count == messages && c->sum == want && st.dead_letters == 0;
  printf("fanin: %" PRIu64 " producers x %" PRIu64 " messages, sum %" PRIu64
         " (expected %" PRIu64 "), %u workers, batch %u\n",
         np, k, c->sum, want, args.workers, args.batch);
  printf("%" PRIu64 " messages in %.3f s: %.2f M msg/s\n", messages, seconds,
         (double)messages / seconds / 1e6);
  if (!ok)
    printf("verification failed: %" PRIu64 " messages counted, %" PRIu64
           " dead letters\n",
           c->count, st.dead_letters);
  printf("RESULT workload=fanin workers=%u messages=%" PRIu64
         " seconds=%.6f rate=%.0f peak_rss_mb=%.0f%s\n",
         args.workers, messages, seconds, (double)messages / seconds,
         bench_peak_rss_mb(), ok ? "" : " ok=0");
  vat_system_destroy(sys);
  return ok ? 0 : 1;
}
