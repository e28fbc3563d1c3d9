/* chain N: N vats, each linked to the next. The first fails; the failure
 * travels the links, killing each vat in turn; a watcher monitoring the
 * last one stops the clock when its down notification arrives. Spawning
 * and linking are timed apart. Verified: every vat ended with the first
 * one's reason, and the down notification carried it.
 */
#include <inttypes.h>
#include <semaphore.h>
#include <stdatomic.h>
#include <stdio.h>

#include "bench_util.h"
#include "progress.h"

#define GC_THREADS 1
#include <gc/gc.h>

typedef struct node {
  vat_ref *next;
  _Atomic uint64_t *linked;
  sem_t *ready;
  uint64_t expect;
} node;

typedef struct watcher {
  vat_ref *last;
  _Atomic uint64_t *linked;
  uint64_t expect;
  uint64_t monitor;
  vat_value reason;
  double finished_at;
  sem_t *ready, *done;
} watcher;

static void count_ready(_Atomic uint64_t *linked, uint64_t expect,
                        sem_t *ready) {
  if (atomic_fetch_add_explicit(linked, 1, memory_order_acq_rel) + 1 == expect)
    sem_post(ready);
}

static void link_next(vat_turn *turn, void *state, void *arg) {
  (void)arg;
  node *n = state;
  bench_check(vat_link(turn, n->next), "link");
  count_ready(n->linked, n->expect, n->ready);
}

static void fail_first(vat_turn *turn, void *state, void *arg) {
  (void)state;
  (void)arg;
  vat_fail(turn, vat_reason_error(vat_atom_intern("chain_broken"), vat_null()));
}

static void last_down(vat_turn *turn, void *state, uint64_t id, vat_ref *who,
                      vat_value reason) {
  (void)turn;
  (void)who;
  watcher *w = state;
  if (id != w->monitor)
    return;
  w->finished_at = bench_now();
  w->reason = reason;
  sem_post(w->done);
}

static void watch_last(vat_turn *turn, void *state, void *arg) {
  (void)arg;
  watcher *w = state;
  bench_check(vat_monitor(turn, w->last, last_down, &w->monitor), "monitor");
  count_ready(w->linked, w->expect, w->ready);
}

int main(int argc, char **argv) {
  bench_args args;
  bench_parse(argc, argv, "[N]  (default 1000000)", 1, &args);
  uint64_t n = args.nsizes > 0 ? args.sizes[0] : 1000000;
  if (n < 2) {
    fprintf(stderr, "chain: N must be at least 2\n");
    return 2;
  }
  vat_system *sys = bench_system(&args);

  sem_t ready, done;
  sem_init(&ready, 0, 0);
  sem_init(&done, 0, 0);
  static _Atomic uint64_t linked;
  uint64_t expect = n; /* n - 1 links and the watcher's monitor */

  double t0 = bench_now();
  /* Refs must sit where the collector looks: collector memory. */
  vat_ref **chain = GC_MALLOC(n * sizeof *chain);
  node **states = GC_MALLOC(n * sizeof *states);
  if (chain == NULL || states == NULL) {
    fputs("chain: out of memory\n", stderr);
    return 1;
  }
  vat_entity_def def = {.state_size = sizeof(node)};
  for (uint64_t i = 0; i < n; i++)
    bench_check(vat_host_spawn(sys, &def, &chain[i], (void **)&states[i]),
                "spawn");
  for (uint64_t i = 0; i + 1 < n; i++)
    *states[i] = (node){.next = chain[i + 1],
                        .linked = &linked,
                        .ready = &ready,
                        .expect = expect};
  states = NULL;
  vat_ref *wref;
  watcher *w;
  w = bench_spawn(sys, sizeof(watcher), &wref);
  *w = (watcher){.last = chain[n - 1],
                 .linked = &linked,
                 .expect = expect,
                 .ready = &ready,
                 .done = &done};
  bench_check(vat_host_send(wref, watch_last, NULL), "send");
  for (uint64_t i = 0; i + 1 < n; i++)
    bench_check(vat_host_send(chain[i], link_next, NULL), "send");
  /* Each vat has recorded its link to the next; the next records it before
   * anything else that vat sends it, the failure included. */
  sem_wait(&ready);
  double setup = bench_now() - t0;

  double start = bench_now();
  bench_check(vat_host_send(chain[0], fail_first, NULL), "send");
  bench_wait(sys, &done, "chain", 0);
  double seconds = w->finished_at - start;

  bench_check(vat_system_shutdown(sys, 30), "shutdown");
  vat_value why = vat_reason_error(vat_atom_intern("chain_broken"), vat_null());
  uint64_t wrong = 0;
  for (uint64_t i = 0; i < n; i++)
    if (!vat_ref_is_dead(chain[i]) ||
        !vat_equal(vat_ref_exit_reason(chain[i]), why))
      wrong++;
  bool ok = wrong == 0 && vat_equal(w->reason, why);
  printf("chain: %" PRIu64 " vats, %u workers, batch %u\n", n, args.workers,
         args.batch);
  printf("setup %.3f s, failure through %" PRIu64 " links in %.3f s: "
         "%.2f M exits/s, peak RSS %.0f MiB\n",
         setup, n - 1, seconds, (double)(n - 1) / seconds / 1e6,
         bench_peak_rss_mb());
  if (!ok)
    printf("verification failed: %" PRIu64 " vats alive or with another "
           "reason; down reason %s\n",
           wrong, vat_equal(w->reason, why) ? "right" : "wrong");
  printf("RESULT workload=chain workers=%u messages=%" PRIu64
         " seconds=%.6f rate=%.0f setup_seconds=%.3f peak_rss_mb=%.0f%s\n",
         args.workers, n, seconds, (double)(n - 1) / seconds, setup,
         bench_peak_rss_mb(), ok ? "" : " ok=0");
  vat_system_destroy(sys);
  return ok ? 0 : 1;
}
