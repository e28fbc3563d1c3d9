/* remote N P: calls across a CapTP connection between two processes.
 *
 * The process forks: the child serves a counter as its bootstrap ref on
 * 127.0.0.1 (TCP, a port the kernel picks), the parent connects and calls
 * it, "incr"(1) answering the new count, from a client vat:
 *
 *   sequential  N calls, one at a time: each answer sends the next call;
 *               round trips/s, and p50/p99 latency of one call;
 *   pipelined   P calls with up to 1,000 outstanding (each answer sends one
 *               more); calls/s;
 *   one-way     P one-way sends of incr(1) (vat_send_msg to the proxy: no
 *               answer wanted, 1,000 a turn), then one call incr(0) whose
 *               answer must be the count after all of them; sends/s up to
 *               that answer. Erlang's gen_server:cast is the like of it:
 *               between two libvat sides a one-way send is a send-only
 *               call, and nothing comes back (to Endo it would be a
 *               question, its answer ignored). Past PACE_BYTES queued for the
 *               server the sender waits a little before its next 1,000,
 *               as a streaming sender must (vat_conn_inspect), and as
 *               Erlang suspends a process whose distribution channel is
 *               busy: a burst the server cannot keep up with otherwise
 *               ends the connection at out_max_bytes (64 MiB), which a
 *               million sends reached once the client no longer decoded
 *               the answers it drops.
 *
 * Every answer is checked: in the sequential phase the count it carries is
 * the one expected, in the pipelined phase the answers sum to the counts
 * the server went through. Three RESULT lines, workloads remote_seq,
 * remote_pipe and remote_cast; -w sets the workers of both processes.
 * -w 0 gives each process one thread: a host-driven system and its
 * sockets on one libuv loop, run by the main thread (host_loop.h), as
 * examples/uv_remote.c runs them. A call then costs no hand-off between
 * threads, which on a virtual machine is the most of a round trip.
 * REMOTE_PHASES (e.g. "pipe,cast") runs only the phases it names, for a
 * profile of one pattern; the others print nothing. */
#include <inttypes.h>
#include <semaphore.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench_util.h"
#include "host_loop.h"
#include "vat/caps.h"
#include "vat/net.h"
#include "vat/timer.h"

enum { WINDOW = 1000 };

/* -w 0: each process runs its system and its sockets on one loop, on its
 * main thread (host_loop.h); NULL with workers. */
static host_loop *one_loop;

static void wait_done(sem_t *done) {
  if (one_loop != NULL)
    host_loop_wait(one_loop, done);
  else
    while (sem_wait(done) != 0) /* the collector's signals interrupt it */
      ;
}

static int settle(vat_promise *p, double timeout_s, vat_value *out) {
  if (one_loop != NULL)
    return host_loop_settle(one_loop, p, timeout_s, out);
  return vat_promise_wait(p, timeout_s, out);
}

/* The options of every connection: on the one loop, with -w 0. */
static const vat_conn_options *conn_options(void) {
  static vat_conn_options opt;
  vat_conn_options_default(&opt);
  if (one_loop != NULL)
    opt.loop = one_loop->loop;
  return &opt;
}

static void on_accept(void *ctx, vat_listener *l, int rc, vat_conn *conn) {
  (void)l;
  bench_check(rc, "accept");
  *(vat_conn **)ctx = conn;
}

/* --- The server: a counter ------------------------------------------------ */

typedef struct counter {
  int64_t n;
} counter;

static void counter_receive(vat_turn *turn, void *state,
                            const vat_atom *selector, vat_value value) {
  counter *c = state;
  vat_value args;
  vat_ref *reply;
  (void)selector; /* one method: incr */
  if (!vat_request_parse(value, &args, &reply))
    return;
  int64_t by = 0;
  vat_get_int(vat_at(args, 0), &by);
  c->n += by;
  vat_reply(turn, reply, vat_int(c->n));
}

static int serve(const bench_args *args, int port_fd) {
  vat_system *sys = bench_system(args);
  host_loop loop;
  if (args->workers == 0)
    host_loop_start(one_loop = &loop, sys);
  vat_ref *counter_ref;
  bench_check(vat_host_spawn(sys,
                             &(vat_entity_def){.state_size = sizeof(counter),
                                               .receive = counter_receive},
                             &counter_ref, NULL),
              "spawn counter");
  vat_listener *l;
  bench_check(
      vat_listen(sys, "tcp:127.0.0.1:0", counter_ref, conn_options(), &l),
      "listen");
  int port = vat_listener_port(l);
  if (write(port_fd, &port, sizeof port) != sizeof port)
    return 1;
  vat_conn *conn = NULL;
  if (one_loop != NULL) { /* accepted on the loop, which blocks meanwhile */
    bench_check(vat_listener_serve(l, on_accept, &conn), "serve");
    while (conn == NULL)
      uv_run(one_loop->loop, UV_RUN_ONCE);
  } else {
    bench_check(vat_listener_accept(l, 30, &conn), "accept");
  }
  vat_listener_close(l);
  vat_value why; /* serve until the client hangs up */
  settle(vat_conn_closed(conn), -1, &why);
  if (one_loop != NULL)
    host_loop_stop(one_loop);
  vat_system_shutdown(sys, 10);
  vat_system_destroy(sys);
  return 0;
}

/* --- The client: a vat calling the counter -------------------------------- */

typedef struct client {
  vat_ref *remote;
  const vat_atom *incr;
  uint64_t total, window, sent, answered, wrong;
  int64_t base;    /* the count before this phase */
  int64_t sum;     /* of the answers (pipelined phase) */
  double *started; /* per call, for its latency (pointer-free, malloc) */
  double *latency;
  double finished_at;
  sem_t *done;
} client;

static void send_one(vat_turn *turn, client *c);

static void answered(vat_turn *turn, void *state, void *ctx, bool resolved,
                     vat_value value) {
  client *c = state;
  uint64_t i = (uint64_t)(uintptr_t)ctx;
  int64_t v;
  c->latency[i] = bench_now() - c->started[i];
  if (!resolved || vat_get_int(value, &v) != VAT_OK)
    c->wrong++;
  else if (c->window == 1 && v != c->base + (int64_t)i + 1)
    c->wrong++;
  else
    c->sum += v;
  if (++c->answered == c->total) {
    c->finished_at = bench_now();
    sem_post(c->done);
    return;
  }
  if (c->sent < c->total)
    send_one(turn, c);
}

static void send_one(vat_turn *turn, client *c) {
  uint64_t i = c->sent++;
  vat_value one = vat_int(1);
  vat_promise *p;
  c->started[i] = bench_now();
  bench_check(vat_request(turn, c->remote, c->incr, vat_list(&one, 1), 0, &p),
              "request");
  bench_check(vat_when(turn, p, answered, (void *)(uintptr_t)i), "when");
}

static void start(vat_turn *turn, void *state, void *arg) {
  client *c = state;
  (void)arg;
  while (c->sent < c->window && c->sent < c->total)
    send_one(turn, c);
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

typedef struct phase {
  double seconds, p50_us, p99_us;
  bool ok;
} phase;

/* Runs one phase of `total` calls with `window` outstanding. */
static phase run_phase(vat_system *sys, vat_ref *remote, uint64_t total,
                       uint64_t window, int64_t base) {
  sem_t done;
  sem_init(&done, 0, 0);
  vat_ref *ref;
  client *c = bench_spawn(sys, sizeof(client), &ref);
  c->remote = remote;
  c->incr = vat_atom_intern("incr");
  c->total = total;
  c->window = window;
  c->base = base;
  c->started = malloc(total * sizeof(double));
  c->latency = malloc(total * sizeof(double));
  c->done = &done;
  if (c->started == NULL || c->latency == NULL)
    bench_check(VAT_ENOMEM, "latency arrays");
  double t0 = bench_now();
  bench_check(vat_host_send(ref, start, NULL), "start");
  wait_done(&done);
  phase ph = {.seconds = c->finished_at - t0};
  /* The counts base+1 .. base+total, each answered once. */
  int64_t want = (int64_t)total * (2 * base + (int64_t)total + 1) / 2;
  ph.ok = c->answered == total && c->wrong == 0 && c->sum == want;
  qsort(c->latency, total, sizeof(double), cmp_double);
  ph.p50_us = c->latency[total / 2] * 1e6;
  ph.p99_us = c->latency[total * 99 / 100] * 1e6;
  free(c->started);
  free(c->latency);
  sem_destroy(&done);
  return ph;
}

/* --- One-way sends ----------------------------------------------------------
 */

/* Well below out_max_bytes, and above what P = 100,000 queues (2-3 MB):
 * the table's runs never wait. */
#define PACE_BYTES ((size_t)8 << 20)
#define PACE_WAIT_S 0.0002

typedef struct caster {
  vat_ref *remote;
  vat_conn *conn;
  uint64_t paused; /* times it waited for the queue */
  const vat_atom *incr;
  uint64_t total, sent;
  int64_t want; /* the count after all of them */
  bool ok;
  double finished_at;
  sem_t *done;
} caster;

static void casts_counted(vat_turn *turn, void *state, void *ctx, bool resolved,
                          vat_value value) {
  caster *c = state;
  int64_t v;
  (void)turn;
  (void)ctx;
  c->ok = resolved && vat_get_int(value, &v) == VAT_OK && v == c->want;
  if (!c->ok) {
    char why[256];
    vat_format(value, why, sizeof why);
    fprintf(stderr, "remote: the one-way phase's call: %s %s\n",
            resolved ? "answered" : "broken", why);
  }
  c->finished_at = bench_now();
  sem_post(c->done);
}

/* A turn sends WINDOW of them and continues in the next, so the client
 * vat does not hold its worker for all P. */
static void cast_some(vat_turn *turn, void *state, void *arg) {
  caster *c = state;
  (void)arg;
  vat_conn_info info;
  if (vat_conn_inspect(c->conn, &info) == VAT_OK &&
      info.out_queued > PACE_BYTES) {
    c->paused++;
    bench_check(
        vat_later(turn, PACE_WAIT_S, vat_self(turn), cast_some, NULL, NULL),
        "pace");
    return;
  }
  vat_value one = vat_int(1);
  vat_value args = vat_list(&one, 1);
  for (int k = 0; k < WINDOW && c->sent < c->total; k++, c->sent++)
    bench_check(vat_send_msg(turn, c->remote, c->incr, args), "send");
  if (c->sent < c->total) {
    bench_check(vat_send(turn, vat_self(turn), cast_some, NULL), "continue");
    return;
  }
  /* Sent after them from the same vat to the same proxy: counted last. */
  vat_value zero = vat_int(0);
  vat_promise *p;
  bench_check(vat_request(turn, c->remote, c->incr, vat_list(&zero, 1), 0, &p),
              "request");
  bench_check(vat_when(turn, p, casts_counted, NULL), "when");
}

static phase run_casts(vat_system *sys, vat_conn *conn, vat_ref *remote,
                       uint64_t total, int64_t base) {
  sem_t done;
  sem_init(&done, 0, 0);
  vat_ref *ref;
  caster *c = bench_spawn(sys, sizeof(caster), &ref);
  c->remote = remote;
  c->conn = conn;
  c->incr = vat_atom_intern("incr");
  c->total = total;
  c->want = base + (int64_t)total;
  c->done = &done;
  double t0 = bench_now();
  bench_check(vat_host_send(ref, cast_some, NULL), "start");
  wait_done(&done);
  sem_destroy(&done);
  if (c->paused > 0)
    printf("remote: the one-way sender waited %" PRIu64 " times for the "
           "queue to drain below %zu MiB\n",
           c->paused, PACE_BYTES >> 20);
  return (phase){.seconds = c->finished_at - t0, .ok = c->ok};
}

static void report(const char *workload, const bench_args *args, uint64_t n,
                   const phase *ph) {
  printf("RESULT workload=%s workers=%u messages=%" PRIu64
         " seconds=%.3f rate=%.0f p50_us=%.1f p99_us=%.1f"
         " peak_rss_mb=%.0f%s\n",
         workload, args->workers, n, ph->seconds, (double)n / ph->seconds,
         ph->p50_us, ph->p99_us, bench_peak_rss_mb(), ph->ok ? "" : " ok=0");
}

/* Whether REMOTE_PHASES, when set, names `phase`. */
static bool wanted(const char *phase) {
  const char *list = getenv("REMOTE_PHASES");
  return list == NULL || strstr(list, phase) != NULL;
}

static int call(const bench_args *args, int port, uint64_t n, uint64_t p) {
  vat_system *sys = bench_system(args);
  host_loop loop;
  if (args->workers == 0)
    host_loop_start(one_loop = &loop, sys);
  char address[64];
  snprintf(address, sizeof address, "tcp:127.0.0.1:%d", port);
  vat_conn *conn;
  bench_check(vat_connect(sys, address, NULL, conn_options(), &conn),
              "connect");
  vat_value v;
  bench_check(settle(vat_conn_bootstrap(conn), 30, &v), "bootstrap");
  vat_ref *remote = vat_value_ref(v);

  bool do_seq = wanted("seq"), do_pipe = wanted("pipe"),
       do_cast = wanted("cast");
  phase seq = {.ok = true}, pipe = {.ok = true}, cast = {.ok = true};
  int64_t base = 0; /* the count before each phase */
  if (do_seq) {
    seq = run_phase(sys, remote, n, 1, base);
    base += (int64_t)n;
    printf("remote: %" PRIu64 " sequential calls in %.3f s: %.0f round "
           "trips/s, p50 %.1f us, p99 %.1f us\n",
           n, seq.seconds, (double)n / seq.seconds, seq.p50_us, seq.p99_us);
  }
  if (do_pipe) {
    pipe = run_phase(sys, remote, p, WINDOW, base);
    base += (int64_t)p;
    printf("remote: %" PRIu64 " pipelined calls (%d outstanding) in %.3f s:"
           " %.0f calls/s, %u workers\n",
           p, WINDOW, pipe.seconds, (double)p / pipe.seconds, args->workers);
  }
  if (do_cast) {
    cast = run_casts(sys, conn, remote, p, base);
    printf("remote: %" PRIu64 " one-way sends, then a call, in %.3f s:"
           " %.0f sends/s\n",
           p, cast.seconds, (double)p / cast.seconds);
  }
  if (!seq.ok || !pipe.ok || !cast.ok) {
    printf("verification failed\n");
    vat_value why;
    if (vat_promise_peek(vat_conn_closed(conn), &why) != VAT_PROMISE_PENDING) {
      char text[256];
      vat_format(why, text, sizeof text);
      printf("the connection ended: %s\n", text);
    }
  }
  if (do_seq)
    report("remote_seq", args, n, &seq);
  if (do_pipe)
    report("remote_pipe", args, p, &pipe);
  if (do_cast)
    report("remote_cast", args, p, &cast);
  vat_conn_close(conn);
  settle(vat_conn_closed(conn), 10, &v);
  if (one_loop != NULL)
    host_loop_stop(one_loop);
  vat_system_shutdown(sys, 10);
  vat_system_destroy(sys);
  return seq.ok && pipe.ok && cast.ok ? 0 : 1;
}

int main(int argc, char **argv) {
  bench_args args = {.zero_workers = true};
  bench_parse(argc, argv,
              "[N] [P]  (sequential calls, default 20000; pipelined calls "
              "and one-way sends, default 200000)",
              2, &args);
  uint64_t n = args.nsizes > 0 ? args.sizes[0] : 20000;
  uint64_t p = args.nsizes > 1 ? args.sizes[1] : 200000;
  /* On the host's loop the library leaves SIGPIPE to the host. */
  if (args.workers == 0) /* on the host's loop it is the host's */
    signal(SIGPIPE, SIG_IGN);
  int ports[2];
  if (pipe(ports) != 0)
    return 1;
  fflush(stdout);
  /* Fork first: each process starts the library and its threads itself. */
  pid_t pid = fork();
  if (pid < 0)
    return 1;
  if (pid == 0) {
    close(ports[0]);
    vat_init();
    int code = serve(&args, ports[1]);
    fflush(stdout);
    _exit(code);
  }
  close(ports[1]);
  int port;
  if (read(ports[0], &port, sizeof port) != sizeof port) {
    fprintf(stderr, "remote: the server did not start\n");
    return 1;
  }
  vat_init();
  int rc = call(&args, port, n, p);
  int status;
  waitpid(pid, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    fprintf(stderr, "remote: the server failed\n");
    rc = 1;
  }
  return rc;
}
