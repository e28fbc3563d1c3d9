/* ring N M: N vats in a ring, each holding a ref to its successor. M tokens
 * start at vats spaced N/M apart; each is delivered N times (one lap), then
 * reported to a driver vat. N*M deliveries in all. Spawning is timed apart.
 */
#include <inttypes.h>
#include <semaphore.h>
#include <stdio.h>

#include "bench_util.h"
#include "progress.h"

#define GC_THREADS 1
#include <gc/gc.h>

typedef struct node {
  vat_ref *next;
  vat_ref *driver;
} node;

typedef struct driver {
  uint64_t tokens_left;
  uint64_t bad_tokens;
  double finished_at;
  sem_t *done;
} driver;

static void token_home(vat_turn *turn, void *state, void *arg) {
  (void)turn;
  driver *d = state;
  if ((uintptr_t)arg != 0)
    d->bad_tokens++;
  if (--d->tokens_left == 0) {
    d->finished_at = bench_now();
    sem_post(d->done);
  }
}

/* arg: deliveries this token still has to make, this one included. */
static void token(vat_turn *turn, void *state, void *arg) {
  node *n = state;
  uintptr_t left = (uintptr_t)arg - 1;
  if (left == 0)
    vat_send(turn, n->driver, token_home, (void *)left);
  else
    vat_send(turn, n->next, token, (void *)left);
}

int main(int argc, char **argv) {
  bench_args args;
  bench_parse(argc, argv, "[N [M]]  (default 1000000 200)", 2, &args);
  uint64_t n = args.nsizes > 0 ? args.sizes[0] : 1000000;
  uint64_t m = args.nsizes > 1 ? args.sizes[1] : 200;
  if (m > n) {
    fprintf(stderr, "ring: M (%" PRIu64 ") must not exceed N (%" PRIu64 ")\n",
            m, n);
    return 2;
  }
  vat_system *sys = bench_system(&args);

  sem_t done;
  sem_init(&done, 0, 0);
  vat_ref *driver_ref;
  driver *d;
  d = bench_spawn(sys, sizeof(driver), &driver_ref);
  d->tokens_left = m;
  d->done = &done;

  double t0 = bench_now();
  /* Refs must sit where the collector looks: collector memory. */
  vat_ref **ring = GC_MALLOC(n * sizeof *ring);
  node **states = GC_MALLOC(n * sizeof *states);
  if (!ring || !states) {
    fputs("ring: out of memory\n", stderr);
    return 1;
  }
  vat_entity_def def = {.state_size = sizeof(node)};
  for (uint64_t i = 0; i < n; i++)
    bench_check(vat_host_spawn(sys, &def, &ring[i], (void **)&states[i]),
                "spawn");
  for (uint64_t i = 0; i < n; i++) {
    states[i]->next = ring[(i + 1) % n];
    states[i]->driver = driver_ref;
  }
  double setup = bench_now() - t0;
  states = NULL;

  double start = bench_now();
  for (uint64_t k = 0; k < m; k++)
    bench_check(vat_host_send(ring[k * (n / m)], token, (void *)(uintptr_t)n),
                "inject");
  ring = NULL; /* the ring now holds itself: each vat refers to the next */
  bench_wait(sys, &done, "ring", n * m + m);
  double seconds = d->finished_at - start;

  bench_check(vat_system_shutdown(sys, 10), "shutdown");
  vat_stats st;
  vat_system_stats(sys, &st);
  uint64_t messages = n * m;
  bool ok = d->bad_tokens == 0 && st.delivered == messages + m + 0 &&
            st.dead_letters == 0;
  printf("ring: %" PRIu64 " vats, %" PRIu64 " tokens, %u workers, batch %u\n",
         n, m, args.workers, args.batch);
  printf("setup %.3f s, %" PRIu64 " messages in %.3f s: %.2f M msg/s, "
         "peak RSS %.0f MiB\n",
         setup, messages, seconds, (double)messages / seconds / 1e6,
         bench_peak_rss_mb());
  if (!ok)
    printf("verification failed: %" PRIu64 " turns (expected %" PRIu64
           "), %" PRIu64 " bad tokens, %" PRIu64 " dead letters\n",
           st.delivered, messages + m, d->bad_tokens, st.dead_letters);
  printf("RESULT workload=ring workers=%u messages=%" PRIu64
         " seconds=%.3f rate=%.0f setup_seconds=%.3f peak_rss_mb=%.0f%s\n",
         args.workers, messages, seconds, (double)messages / seconds, setup,
         bench_peak_rss_mb(), ok ? "" : " ok=0");
  vat_system_destroy(sys);
  return ok ? 0 : 1;
}
