/* spawn N: a spawner vat spawns N vats, each sent one message whose turn
 * stops the vat normally. The clock stops when the last of them has ended:
 * each one's stop callback counts it down (the way a wait group sees
 * goroutines gone). Verified: N vats ended, none with a message left. */
#include <inttypes.h>
#include <semaphore.h>
#include <stdatomic.h>
#include <stdio.h>

#include "bench_util.h"
#include "progress.h"

/* A few per turn: the spawner's self-sends run back to back for a whole
 * batch, so many per turn would make vats faster than the worker runs and
 * ends them, and the surplus would wait, alive, in the shared queue. */
enum { SPAWN_PER_TURN = 4 };

/* Shared by every stop callback: they run on whichever worker ended the
 * vat, so the count is atomic. */
static _Atomic uint64_t alive;
static double finished_at;
static sem_t done;

typedef struct spawner {
  uint64_t left;
} spawner;

static void gone(void *state, vat_value reason) {
  (void)state;
  (void)reason;
  /* acq_rel: whoever takes the count to zero sees every earlier end. */
  if (atomic_fetch_sub_explicit(&alive, 1, memory_order_acq_rel) == 1) {
    finished_at = bench_now();
    sem_post(&done);
  }
}

static const vat_entity_def short_lived = {.on_stop = gone};

static void once(vat_turn *turn, void *state, void *arg) {
  (void)state;
  (void)arg;
  vat_stop(turn);
}

/* Spawns in slices so that the first vats run and end while the rest are
 * still being made, and other workers can steal them. */
static void spawn_some(vat_turn *turn, void *state, void *arg) {
  (void)arg;
  spawner *s = state;
  for (int i = 0; i < SPAWN_PER_TURN && s->left > 0; i++, s->left--) {
    vat_ref *ref;
    bench_check(vat_spawn(turn, &short_lived, &ref, NULL), "spawn");
    vat_send(turn, ref, once, NULL);
  }
  if (s->left > 0)
    vat_send(turn, vat_self(turn), spawn_some, NULL);
  else
    vat_stop(turn);
}

int main(int argc, char **argv) {
  bench_args args;
  bench_parse(argc, argv, "[N]  (default 1000000)", 1, &args);
  uint64_t n = args.nsizes > 0 ? args.sizes[0] : 1000000;
  vat_system *sys = bench_system(&args);

  sem_init(&done, 0, 0);
  atomic_store(&alive, n);
  vat_ref *spawner_ref;
  spawner *s;
  s = bench_spawn(sys, sizeof(spawner), &spawner_ref);
  s->left = n;

  double start = bench_now();
  bench_check(vat_host_send(spawner_ref, spawn_some, NULL), "start");
  bench_wait(sys, &done, "spawn", n);
  double seconds = finished_at - start;
  bench_check(vat_system_shutdown(sys, 30), "shutdown");
  vat_stats st;
  vat_system_stats(sys, &st);

  /* The spawner itself ends too. */
  bool ok = st.terminated == n + 1 && st.spawned == n + 1 &&
            st.dead_letters == 0 && atomic_load(&alive) == 0;
  printf("spawn: %" PRIu64 " vats spawned and gone in %.3f s: %.2f M vats/s, "
         "%u workers, batch %u\n",
         n, seconds, (double)n / seconds / 1e6, args.workers, args.batch);
  if (!ok)
    printf("verification failed: %" PRIu64 " spawned, %" PRIu64
           " ended, %" PRIu64 " dead letters\n",
           st.spawned, st.terminated, st.dead_letters);
  printf("RESULT workload=spawn workers=%u messages=%" PRIu64
         " seconds=%.6f rate=%.0f peak_rss_mb=%.0f%s\n",
         args.workers, n, seconds, (double)n / seconds, bench_peak_rss_mb(),
         ok ? "" : " ok=0");
  vat_system_destroy(sys);
  return ok ? 0 : 1;
}
