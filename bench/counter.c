/* counter K: the gen_server benchmark. A driver vat sends K add(100)
 * messages to a counter vat, then a get request, and waits for the answer
 * (a promise observed with `when`); it must be 100*K.
 *
 * Flow control, as the peers' bounded mailboxes do it: after each window of
 * adds the driver asks the counter to confirm (a request) and sends the
 * next window when the answer comes, so at most two windows (1,024 adds)
 * are in flight instead of all K messages: the bound of the Go peer's
 * 1,024-slot channel. */
#include <inttypes.h>
#include <semaphore.h>
#include <stdio.h>

#include "bench_util.h"
#include "progress.h"

enum { PER_TURN = 64, WINDOW = 512 };

typedef struct counter {
  int64_t value;
} counter;

typedef struct driver {
  vat_ref *counter;
  uint64_t total, sent;
  vat_promise *answer;
  vat_promise *pending_ack;
  uint64_t next_sync;
  vat_value result;
  bool settled, resolved;
  double finished_at;
  sem_t *done;
} driver;

static void add(vat_turn *turn, void *state, void *arg) {
  (void)turn;
  ((counter *)state)->value += (intptr_t)arg;
}

static void get(vat_turn *turn, void *state, void *arg, vat_resolver *r) {
  (void)arg;
  vat_resolve(turn, r, vat_int(((counter *)state)->value));
}

static void sync_point(vat_turn *turn, void *state, void *arg,
                       vat_resolver *r) {
  (void)state;
  (void)arg;
  vat_resolve(turn, r, vat_null());
}

static void drive(vat_turn *turn, void *state, void *arg);

static void resume(vat_turn *turn, void *state, void *ctx, bool resolved,
                   vat_value value) {
  (void)ctx;
  (void)resolved;
  (void)value;
  drive(turn, state, NULL);
}

static void got(vat_turn *turn, void *state, void *ctx, bool resolved,
                vat_value value) {
  (void)turn;
  (void)ctx;
  driver *d = state;
  d->finished_at = bench_now();
  d->settled = true;
  d->resolved = resolved;
  d->result = value;
  sem_post(d->done);
}

/* Sends in slices, re-sending itself between them, so one turn's buffer
 * stays small and the counter starts working at once. */
static void drive(vat_turn *turn, void *state, void *arg) {
  (void)arg;
  driver *d = state;
  for (int i = 0; i < PER_TURN && d->sent < d->total && d->sent < d->next_sync;
       i++, d->sent++)
    bench_check(vat_send(turn, d->counter, add, (void *)(intptr_t)100),
                "send add");
  if (d->sent == d->total) {
    bench_check(vat_call(turn, d->counter, get, NULL, 0, &d->answer),
                "call get");
    bench_check(vat_when(turn, d->answer, got, NULL), "when");
    return;
  }
  if (d->sent == d->next_sync) {
    /* Answered once the counter has taken every add sent so far. The next
     * window goes out meanwhile; the one after waits for this answer. */
    d->next_sync += WINDOW;
    vat_promise *ack;
    bench_check(vat_call(turn, d->counter, sync_point, NULL, 0, &ack),
                "call sync");
    vat_promise *previous = d->pending_ack;
    d->pending_ack = ack;
    if (previous) {
      bench_check(vat_when(turn, previous, resume, NULL), "when");
      return;
    }
  }
  bench_check(vat_send(turn, vat_self(turn), drive, NULL), "send drive");
}

int main(int argc, char **argv) {
  bench_args args;
  bench_parse(argc, argv, "[K]  (default 3000000)", 1, &args);
  uint64_t k = args.nsizes > 0 ? args.sizes[0] : 3000000;
  vat_system *sys = bench_system(&args);

  sem_t done;
  sem_init(&done, 0, 0);
  vat_ref *counter_ref, *driver_ref;
  driver *d;
  bench_check(vat_host_spawn(sys,
                             &(vat_entity_def){.state_size = sizeof(counter)},
                             &counter_ref, NULL),
              "spawn counter");
  d = bench_spawn(sys, sizeof(driver), &driver_ref);
  d->counter = counter_ref;
  d->total = k;
  d->next_sync = WINDOW;
  d->done = &done;

  double start = bench_now();
  bench_check(vat_host_send(driver_ref, drive, NULL), "start");
  bench_wait(sys, &done, "counter", k);
  double seconds = d->finished_at - start;
  bench_check(vat_system_shutdown(sys, 10), "shutdown");

  int64_t got_value = 0;
  bool ok = d->resolved && vat_get_int(d->result, &got_value) == VAT_OK &&
            got_value == (int64_t)(100 * k);
  uint64_t messages = k + 1;
  printf("counter: %" PRIu64 " adds then get = %" PRId64 " (expected %" PRIu64
         "), %u workers\n",
         k, got_value, 100 * k, args.workers);
  printf("%" PRIu64 " messages in %.3f s: %.2f M msg/s\n", messages, seconds,
         (double)messages / seconds / 1e6);
  if (!ok)
    printf("verification failed\n");
  printf("RESULT workload=counter workers=%u messages=%" PRIu64
         " seconds=%.3f rate=%.0f peak_rss_mb=%.0f%s\n",
         args.workers, messages, seconds, (double)messages / seconds,
         bench_peak_rss_mb(), ok ? "" : " ok=0");
  vat_system_destroy(sys);
  return ok ? 0 : 1;
}
