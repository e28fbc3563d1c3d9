/* skynet [L]: a 10-ary tree of vats with L leaves (default 1,000,000, so
 * 1,111,111 vats). Each inner vat spawns its ten children from its own
 * turn; a leaf replies its ordinal, a parent replies the sum of its
 * children's replies; every vat stops once it has replied. Verified: the
 * root's sum is L*(L-1)/2 (499,999,500,000 by default) and every vat ended.
 * The figure is the time from spawning the root to its answer. */
#include <inttypes.h>
#include <semaphore.h>
#include <stdio.h>

#include "bench_util.h"
#include "progress.h"

typedef struct node {
  vat_ref *parent;
  vat_fn parent_takes; /* the root's parent, the driver, takes it apart */
  uint64_t num, size;  /* first ordinal below it, leaves below it */
  uint64_t sum;
  int replies_left;
} node;

typedef struct driver {
  uint64_t sum;
  double finished_at;
  sem_t *done;
} driver;

static const vat_entity_def node_def = {.state_size = sizeof(node)};

static void reply(vat_turn *turn, node *n, uint64_t value) {
  vat_send(turn, n->parent, n->parent_takes, (void *)(uintptr_t)value);
  vat_stop(turn);
}

static void child_sum(vat_turn *turn, void *state, void *arg) {
  node *n = state;
  n->sum += (uintptr_t)arg;
  if (--n->replies_left == 0)
    reply(turn, n, n->sum);
}

static void run(vat_turn *turn, void *state, void *arg) {
  (void)arg;
  node *n = state;
  if (n->size == 1) {
    reply(turn, n, n->num);
    return;
  }
  uint64_t step = n->size / 10;
  vat_ref *self = vat_self(turn);
  for (uint64_t i = 0; i < 10; i++) {
    vat_ref *ref;
    node *child;
    bench_check(vat_spawn(turn, &node_def, &ref, (void **)&child), "spawn");
    *child = (node){.parent = self,
                    .parent_takes = child_sum,
                    .num = n->num + i * step,
                    .size = step};
    vat_send(turn, ref, run, NULL);
  }
  n->replies_left = 10;
}

static void root_answer(vat_turn *turn, void *state, void *arg) {
  (void)turn;
  driver *d = state;
  d->sum = (uintptr_t)arg;
  d->finished_at = bench_now();
  sem_post(d->done);
}

int main(int argc, char **argv) {
  static const char usage[] = "[LEAVES]  (default 1000000; a power of 10)";
  bench_args args;
  bench_parse(argc, argv, usage, 1, &args);
  uint64_t leaves = args.nsizes > 0 ? args.sizes[0] : 1000000;
  uint64_t vats = 0;
  for (uint64_t level = 1; level <= leaves; level *= 10)
    vats += level;
  uint64_t p = 1;
  while (p < leaves)
    p *= 10;
  if (p != leaves) {
    fprintf(stderr,
            "skynet: LEAVES must be a power of 10\n"
            "usage: %s [-w WORKERS] [-b BATCH] %s\n",
            argv[0], usage);
    return 2;
  }
  vat_system *sys = bench_system(&args);

  sem_t done;
  sem_init(&done, 0, 0);
  vat_ref *driver_ref;
  driver *d;
  d = bench_spawn(sys, sizeof(driver), &driver_ref);
  d->done = &done;

  double start = bench_now();
  vat_ref *root;
  node *r;
  bench_check(vat_host_spawn(sys, &node_def, &root, (void **)&r), "spawn root");
  *r =
      (node){.parent = driver_ref, .parent_takes = root_answer, .size = leaves};
  bench_check(vat_host_send(root, run, NULL), "start");
  bench_wait(sys, &done, "skynet", 0);
  double seconds = d->finished_at - start;
  bench_check(vat_system_shutdown(sys, 30), "shutdown");
  vat_stats st;
  vat_system_stats(sys, &st);

  uint64_t want = leaves * (leaves - 1) / 2;
  bool ok = d->sum == want && st.terminated == vats && st.dead_letters == 0;
  printf("skynet: %" PRIu64 " leaves, %" PRIu64 " vats, sum %" PRIu64
         " (expected %" PRIu64 "), %u workers, batch %u\n",
         leaves, vats, d->sum, want, args.workers, args.batch);
  printf("%.3f s: %.2f M vats/s, peak RSS %.0f MiB\n", seconds,
         (double)vats / seconds / 1e6, bench_peak_rss_mb());
  if (!ok)
    printf("verification failed: %" PRIu64 " vats ended, %" PRIu64
           " dead letters\n",
           st.terminated, st.dead_letters);
  printf("RESULT workload=skynet workers=%u messages=%" PRIu64
         " seconds=%.6f rate=%.0f peak_rss_mb=%.0f%s\n",
         args.workers, vats, seconds, (double)vats / seconds,
         bench_peak_rss_mb(), ok ? "" : " ok=0");
  vat_system_destroy(sys);
  return ok ? 0 : 1;
}
