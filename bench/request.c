/* request R: the request/response round trip. A client vat makes R
 * requests to a server vat, one at a time: each answer (observed with
 * `when`) sends the next request. The server answers n+1; the client checks
 * every answer. The figure is requests per second. */
#include <inttypes.h>
#include <semaphore.h>
#include <stdio.h>

#include "bench_util.h"
#include "progress.h"

typedef struct client {
  vat_ref *server;
  uint64_t total, answered, wrong;
  double finished_at;
  sem_t *done;
} client;

static void serve(vat_turn *turn, void *state, void *arg, vat_resolver *r) {
  (void)state;
  vat_resolve(turn, r, vat_int((int64_t)(intptr_t)arg + 1));
}

static void ask(vat_turn *turn, client *c);

static void answered(vat_turn *turn, void *state, void *ctx, bool resolved,
                     vat_value value) {
  client *c = state;
  int64_t v;
  if (!resolved || vat_get_int(value, &v) != VAT_OK ||
      v != (int64_t)(intptr_t)ctx + 1)
    c->wrong++;
  if (++c->answered == c->total) {
    c->finished_at = bench_now();
    sem_post(c->done);
    return;
  }
  ask(turn, c);
}

static void ask(vat_turn *turn, client *c) {
  vat_promise *p;
  void *n = (void *)(intptr_t)c->answered;
  bench_check(vat_call(turn, c->server, serve, n, 0, &p), "call");
  bench_check(vat_when(turn, p, answered, n), "when");
}

static void start(vat_turn *turn, void *state, void *arg) {
  (void)arg;
  ask(turn, state);
}

int main(int argc, char **argv) {
  bench_args args;
  bench_parse(argc, argv, "[R]  (default 1000000)", 1, &args);
  uint64_t r = args.nsizes > 0 ? args.sizes[0] : 1000000;
  vat_system *sys = bench_system(&args);

  sem_t done;
  sem_init(&done, 0, 0);
  vat_ref *server, *client_ref;
  client *c;
  bench_check(
      vat_host_spawn(sys, &(vat_entity_def){.state_size = 8}, &server, NULL),
      "spawn server");
  c = bench_spawn(sys, sizeof(client), &client_ref);
  c->server = server;
  c->total = r;
  c->done = &done;

  double t0 = bench_now();
  bench_check(vat_host_send(client_ref, start, NULL), "start");
  bench_wait(sys, &done, "request", 0);
  double seconds = c->finished_at - t0;
  bench_check(vat_system_shutdown(sys, 10), "shutdown");
  bool ok = c->answered == r && c->wrong == 0;
  printf("request: %" PRIu64 " request/response round trips in %.3f s: "
         "%.2f M/s, %u workers\n",
         r, seconds, (double)r / seconds / 1e6, args.workers);
  if (!ok)
    printf("verification failed: %" PRIu64 " answered, %" PRIu64 " wrong\n",
           c->answered, c->wrong);
  printf("RESULT workload=request workers=%u messages=%" PRIu64
         " seconds=%.3f rate=%.0f peak_rss_mb=%.0f%s\n",
         args.workers, 2 * r, seconds, (double)r / seconds, bench_peak_rss_mb(),
         ok ? "" : " ok=0");
  vat_system_destroy(sys);
  return ok ? 0 : 1;
}
