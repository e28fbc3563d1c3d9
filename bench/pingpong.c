/* pingpong R: two vats bounce one message R times (R round trips: ping
 * there, pong back). The figure is round trips per second. */
#include <inttypes.h>
#include <semaphore.h>
#include <stdio.h>

#include "bench_util.h"
#include "progress.h"

typedef struct player {
  vat_ref *peer;
  uint64_t rounds_left; /* the pinger's */
  uint64_t pongs;
  double finished_at;
  sem_t *done;
} player;

static void ping(vat_turn *turn, void *state, void *arg);

static void pong(vat_turn *turn, void *state, void *arg) {
  player *p = state;
  p->pongs++;
  if (--p->rounds_left == 0) {
    p->finished_at = bench_now();
    sem_post(p->done);
    return;
  }
  vat_send(turn, p->peer, ping, arg);
}

static void ping(vat_turn *turn, void *state, void *arg) {
  player *p = state;
  vat_send(turn, p->peer, pong, arg);
}

int main(int argc, char **argv) {
  bench_args args;
  bench_parse(argc, argv, "[R]  (default 1000000)", 1, &args);
  uint64_t r = args.nsizes > 0 ? args.sizes[0] : 1000000;
  vat_system *sys = bench_system(&args);

  sem_t done;
  sem_init(&done, 0, 0);
  vat_entity_def def = {.state_size = sizeof(player)};
  vat_ref *a, *b;
  player *pa, *pb;
  bench_check(vat_host_spawn(sys, &def, &a, (void **)&pa), "spawn");
  bench_check(vat_host_spawn(sys, &def, &b, (void **)&pb), "spawn");
  pa->peer = b;
  pa->rounds_left = r;
  pa->done = &done;
  pb->peer = a;

  double start = bench_now();
  bench_check(vat_host_send(b, ping, NULL), "start");
  bench_wait(sys, &done, "pingpong", 2 * r);
  double seconds = pa->finished_at - start;
  bench_check(vat_system_shutdown(sys, 10), "shutdown");
  vat_stats st;
  vat_system_stats(sys, &st);
  bool ok = pa->pongs == r && st.delivered == 2 * r;
  printf("pingpong: %" PRIu64 " round trips in %.3f s: %.2f M/s, "
         "%u workers\n",
         r, seconds, (double)r / seconds / 1e6, args.workers);
  if (!ok)
    printf("verification failed: %" PRIu64 " pongs, %" PRIu64 " turns\n",
           pa->pongs, st.delivered);
  printf("RESULT workload=pingpong workers=%u messages=%" PRIu64
         " seconds=%.3f rate=%.0f peak_rss_mb=%.0f%s\n",
         args.workers, 2 * r, seconds, (double)r / seconds, bench_peak_rss_mb(),
         ok ? "" : " ok=0");
  vat_system_destroy(sys);
  return ok ? 0 : 1;
}
