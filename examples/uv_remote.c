/* A libuv program serves a C object over CapTP and calls it from a second
 * connection, all on one loop and one thread: the loop runs the sockets
 * (vat_conn_options.loop) and a host-driven system's turns, as the
 * uv_host example does.
 *
 *   counter  "add"(n)  adds n; answers the new total
 *
 * A "caller" vat gets the counter through the client connection's
 * bootstrap promise and adds 1, 2 and 3, one call after the other. Then
 * the host closes the connection, the listener and its own handles, and
 * uv_run returns: nothing is left on the loop.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>

#include <uv.h>
#include <vat.h>
#include <vat/caps.h>
#include <vat/net.h>

static const vat_atom *sel(const char *name) {
  return vat_atom_intern(name);
}

/* --- The vats ------------------------------------------------------------- */

typedef struct counter {
  int64_t total;
} counter;

static void counter_receive(vat_turn *turn, void *state,
                            const vat_atom *selector, vat_value value) {
  counter *c = state;
  vat_value args;
  vat_ref *reply;
  if (!vat_request_parse(value, &args, &reply) || selector != sel("add"))
    return;
  int64_t n = 0;
  vat_get_int(vat_at(args, 0), &n);
  c->total += n;
  vat_reply(turn, reply, vat_int(c->total));
}

typedef struct caller {
  vat_promise *counter; /* the client connection's bootstrap */
  int64_t next;         /* the next number to add */
  bool done;            /* read by the host between runs: same thread */
} caller;

static void add_next(vat_turn *turn, vat_ref *counter_ref, caller *c);

static void added(vat_turn *turn, void *state, void *ctx, bool resolved,
                  vat_value value) {
  caller *c = state;
  char text[128];
  vat_format(value, text, sizeof text);
  printf("add(%lld) -> %s%s\n", (long long)c->next,
         resolved ? "" : "broken: ", text);
  c->next++;
  if (resolved && c->next <= 3)
    add_next(turn, ctx, c);
  else
    c->done = true;
}

static void add_next(vat_turn *turn, vat_ref *counter_ref, caller *c) {
  vat_value n = vat_int(c->next);
  vat_promise *p;
  vat_request(turn, counter_ref, sel("add"), vat_list(&n, 1), 5, &p);
  vat_when(turn, p, added, counter_ref);
}

static void got_counter(vat_turn *turn, void *state, void *ctx, bool resolved,
                        vat_value value) {
  (void)ctx;
  caller *c = state;
  if (!resolved) {
    c->done = true;
    return;
  }
  printf("the client got the counter\n");
  add_next(turn, vat_value_ref(value), c);
}

static void start_calling(vat_turn *turn, void *state, void *arg) {
  (void)arg;
  caller *c = state;
  vat_when(turn, c->counter, got_counter, NULL);
}

/* --- The host: one loop for the system and the sockets -------------------- */

typedef struct host {
  vat_system *sys;
  uv_loop_t *loop;
  uv_poll_t ready;  /* the system's descriptor: work from outside */
  uv_timer_t timer; /* the system's next timer */
  uv_idle_t again;  /* runs the system once more when work was left */
  uv_check_t step;  /* after each loop iteration: the program's steps */
  vat_listener *listener;
  vat_conn *client, *served;
  caller *caller;
  bool closing;
} host;

static void run_system(host *h);

static void on_ready(uv_poll_t *p, int status, int events) {
  (void)status;
  (void)events;
  run_system(p->data);
}
static void on_timer(uv_timer_t *t) {
  run_system(t->data);
}
static void on_again(uv_idle_t *i) {
  run_system(i->data);
}

/* Runs what is ready, then tells libuv when to call again. */
static void run_system(host *h) {
  vat_run_result r;
  /* At most 200 µs a run, so that libuv reads and writes the sockets
   * between runs: a burst of sends then goes out while it is made. */
  vat_system_run(h->sys, 0, 200000, &r);
  int64_t ns;
  vat_system_next_timer(h->sys, &ns);
  if (r.more)
    uv_idle_start(&h->again, on_again);
  else
    uv_idle_stop(&h->again);
  if (ns >= 0)
    uv_timer_start(&h->timer, on_timer, (uint64_t)((ns + 999999) / 1000000), 0);
  else
    uv_timer_stop(&h->timer);
}

static void on_accept(void *ctx, vat_listener *l, int rc, vat_conn *conn) {
  (void)l;
  host *h = ctx;
  if (rc != VAT_OK) {
    fprintf(stderr, "accept: %s\n", vat_strerror(rc));
    return;
  }
  printf("the server accepted a connection\n");
  h->served = conn;
}

static bool settled(vat_conn *c) {
  return c == NULL ||
         vat_promise_peek(vat_conn_closed(c), NULL) != VAT_PROMISE_PENDING;
}

static void print_closed(const char *who, vat_conn *c) {
  vat_value why;
  char text[128] = "never opened";
  if (c != NULL &&
      vat_promise_peek(vat_conn_closed(c), &why) != VAT_PROMISE_PENDING)
    vat_format(why, text, sizeof text);
  printf("%s: %s\n", who, text);
}

/* Once the calls are done: close the client's connection; once both ends
 * have seen it, close the listener and our own handles, and uv_run
 * returns when the connections' handles have closed too. */
static void on_step(uv_check_t *s) {
  host *h = s->data;
  if (!h->caller->done)
    return;
  if (!h->closing) {
    h->closing = true;
    vat_conn_close(h->client);
    return;
  }
  if (!settled(h->client) || !settled(h->served))
    return;
  print_closed("the client's end", h->client);
  print_closed("the server's end", h->served);
  vat_listener_close(h->listener);
  uv_close((uv_handle_t *)&h->ready, NULL);
  uv_close((uv_handle_t *)&h->timer, NULL);
  uv_close((uv_handle_t *)&h->again, NULL);
  uv_close((uv_handle_t *)&h->step, NULL);
}

int main(void) {
  if (vat_init() != VAT_OK)
    return 1;
  /* A write to a socket the peer closed must not kill the program: the
   * library leaves SIGPIPE to the host on the host's loop. */
  signal(SIGPIPE, SIG_IGN);
  vat_config cfg;
  vat_config_default(&cfg);
  cfg.workers = 0;
  host h = {.loop = uv_default_loop()};
  int fd;
  if (vat_system_new(&cfg, &h.sys) != VAT_OK ||
      vat_system_fd(h.sys, &fd) != VAT_OK)
    return 1;

  vat_entity_def counter_def = {.state_size = sizeof(counter),
                                .receive = counter_receive};
  vat_ref *counter_ref;
  vat_conn_options opt;
  vat_conn_options_default(&opt);
  opt.loop = h.loop;
  if (vat_host_spawn(h.sys, &counter_def, &counter_ref, NULL) != VAT_OK ||
      vat_listen(h.sys, "tcp:127.0.0.1:0", counter_ref, &opt, &h.listener) !=
          VAT_OK ||
      vat_listener_serve(h.listener, on_accept, &h) != VAT_OK)
    return 1;
  char address[64];
  snprintf(address, sizeof address, "tcp:127.0.0.1:%d",
           vat_listener_port(h.listener));
  printf("serving a counter on 127.0.0.1\n");

  /* connect() completes against the listening socket's backlog; the loop
   * accepts it once it runs. */
  vat_ref *caller_ref;
  if (vat_connect(h.sys, address, NULL, &opt, &h.client) != VAT_OK ||
      vat_host_spawn(h.sys, &(vat_entity_def){.state_size = sizeof(caller)},
                     &caller_ref, (void **)&h.caller) != VAT_OK)
    return 1;
  h.caller->counter = vat_conn_bootstrap(h.client);
  h.caller->next = 1;
  if (vat_host_send(caller_ref, start_calling, NULL) != VAT_OK)
    return 1;

  uv_poll_init(h.loop, &h.ready, fd);
  uv_timer_init(h.loop, &h.timer);
  uv_idle_init(h.loop, &h.again);
  uv_check_init(h.loop, &h.step);
  h.ready.data = h.timer.data = h.again.data = h.step.data = &h;
  uv_poll_start(&h.ready, UV_READABLE, on_ready);
  uv_check_start(&h.step, on_step);
  run_system(&h);
  uv_run(h.loop, UV_RUN_DEFAULT);
  printf("the loop closed %s\n",
         uv_loop_close(h.loop) == 0 ? "clean" : "with handles open");

  vat_system_shutdown(h.sys, 1);
  vat_system_destroy(h.sys);
  return 0;
}
