/* selfsend A K: A vats each start with one message to themselves and send
 * another on every receipt until they have received K; then each reports
 * its count to a driver and stops. A*K deliveries, spawning included (as
 * the peers time it). Verified: every vat reported K. */
#include <inttypes.h>
#include <semaphore.h>
#include <stdio.h>

#include "bench_util.h"
#include "progress.h"

enum { SPAWN_PER_TURN = 1024 };

typedef struct actor {
  vat_ref *driver;
  uint64_t k, received;
} actor;

typedef struct driver {
  uint64_t a, k, spawned, reported, total;
  double finished_at;
  sem_t *done;
} driver;

static void report(vat_turn *turn, void *state, void *arg) {
  (void)turn;
  driver *d = state;
  d->total += (uintptr_t)arg;
  if (++d->reported == d->a) {
    d->finished_at = bench_now();
    sem_post(d->done);
  }
}

static void self_msg(vat_turn *turn, void *state, void *arg) {
  actor *a = state;
  if (++a->received < a->k) {
    vat_send(turn, vat_self(turn), self_msg, arg);
    return;
  }
  vat_send(turn, a->driver, report, (void *)(uintptr_t)a->received);
  vat_stop(turn);
}

/* Spawns in slices so the first vats run while the rest are being made. */
static void spawn_some(vat_turn *turn, void *state, void *arg) {
  (void)arg;
  driver *d = state;
  vat_entity_def def = {.state_size = sizeof(actor)};
  for (int i = 0; i < SPAWN_PER_TURN && d->spawned < d->a; i++, d->spawned++) {
    vat_ref *ref;
    actor *a;
    bench_check(vat_spawn(turn, &def, &ref, (void **)&a), "spawn");
    *a = (actor){.driver = vat_self(turn), .k = d->k};
    /* The vat's first message to itself, sent on its behalf: a vat has
     * no turn to send from before it receives something. */
    vat_send(turn, ref, self_msg, NULL);
  }
  if (d->spawned < d->a)
    vat_send(turn, vat_self(turn), spawn_some, NULL);
}

int main(int argc, char **argv) {
  bench_args args;
  bench_parse(argc, argv, "[A [K]]  (default 8 10000000)", 2, &args);
  uint64_t na = args.nsizes > 0 ? args.sizes[0] : 8;
  uint64_t k = args.nsizes > 1 ? args.sizes[1] : 10000000;
  vat_system *sys = bench_system(&args);

  sem_t done;
  sem_init(&done, 0, 0);
  vat_ref *driver_ref;
  driver *d;
  d = bench_spawn(sys, sizeof(driver), &driver_ref);
  *d = (driver){.a = na, .k = k, .done = &done};

  double start = bench_now();
  bench_check(vat_host_send(driver_ref, spawn_some, NULL), "start");
  bench_wait(sys, &done, "selfsend", na * k);
  double seconds = d->finished_at - start;
  bench_check(vat_system_shutdown(sys, 10), "shutdown");
  vat_stats st;
  vat_system_stats(sys, &st);

  uint64_t messages = na * k;
  bool ok = d->total == messages && st.terminated == na && st.dead_letters == 0;
  printf("selfsend: %" PRIu64 " vats x %" PRIu64 " messages, %u workers, "
         "batch %u\n",
         na, k, args.workers, args.batch);
  printf("%" PRIu64 " messages in %.3f s: %.2f M msg/s\n", messages, seconds,
         (double)messages / seconds / 1e6);
  if (!ok)
    printf("verification failed: %" PRIu64 " received, %" PRIu64
           " vats ended, %" PRIu64 " dead letters\n",
           d->total, st.terminated, st.dead_letters);
  printf("RESULT workload=selfsend workers=%u messages=%" PRIu64
         " seconds=%.6f rate=%.0f peak_rss_mb=%.0f%s\n",
         args.workers, messages, seconds, (double)messages / seconds,
         bench_peak_rss_mb(), ok ? "" : " ok=0");
  vat_system_destroy(sys);
  return ok ? 0 : 1;
}
