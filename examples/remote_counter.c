/* Two processes, one counter: refs across a CapTP connection.
 *
 * The parent serves a counter on a Unix socket; the child connects, gets
 * the counter as its bootstrap ref and uses it as a local one. It also
 * hands the counter a ref to a watcher of its own, which the counter
 * calls back, across the connection, on every change.
 *
 *   counter  "watch"(ref)  keep ref, and call ref."changed"(n) on changes
 *            "incr"(by)    add `by`; answer the new value once the
 *                          watcher has seen it
 */
#define GC_THREADS 1
#include <gc/gc.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "vat.h"
#include "vat/caps.h"
#include "vat/net.h"

static const vat_atom *sel(const char *name) {
  return vat_atom_intern(name);
}

/* --- The parent: the counter ---------------------------------------------- */

typedef struct counter {
  int64_t n;
  vat_ref *watcher;
} counter;

static void seen(vat_turn *turn, void *state, void *ctx, bool resolved,
                 vat_value value) {
  counter *c = state;
  (void)resolved;
  (void)value;
  vat_reply(turn, ctx, vat_int(c->n)); /* the watcher has seen it */
}

static void counter_receive(vat_turn *turn, void *state,
                            const vat_atom *selector, vat_value value) {
  counter *c = state;
  vat_value args;
  vat_ref *reply;
  if (!vat_request_parse(value, &args, &reply))
    return;
  if (selector == sel("watch")) {
    c->watcher = vat_value_ref(vat_at(args, 0));
    vat_reply(turn, reply, vat_bool(true));
  } else if (selector == sel("incr")) {
    int64_t by = 0;
    vat_get_int(vat_at(args, 0), &by);
    c->n += by;
    if (c->watcher == NULL) {
      vat_reply(turn, reply, vat_int(c->n));
      return;
    }
    vat_value n = vat_int(c->n);
    vat_promise *p;
    vat_request(turn, c->watcher, sel("changed"), vat_list(&n, 1), 5, &p);
    vat_when(turn, p, seen, reply);
  }
}

static int serve(const char *address, int ready_fd) {
  vat_config cfg;
  vat_config_default(&cfg);
  cfg.workers = 2;
  vat_system *sys;
  vat_system_new(&cfg, &sys);
  vat_entity_def def = {.state_size = sizeof(counter),
                        .receive = counter_receive};
  vat_ref *counter_ref;
  vat_host_spawn(sys, &def, &counter_ref, NULL);
  vat_listener *l;
  if (vat_listen(sys, address, counter_ref, NULL, &l) != VAT_OK)
    return 1;
  if (write(ready_fd, "!", 1) != 1) /* the child may connect now */
    return 1;
  vat_conn *conn;
  if (vat_listener_accept(l, 10, &conn) != VAT_OK)
    return 1;
  vat_listener_close(l);
  /* Serve until the child hangs up. */
  vat_value why;
  vat_promise_wait(vat_conn_closed(conn), 30, &why);
  vat_system_shutdown(sys, 5);
  vat_system_destroy(sys);
  return 0;
}

/* --- The child: a client with a watcher ----------------------------------- */

static void watcher_receive(vat_turn *turn, void *state,
                            const vat_atom *selector, vat_value value) {
  (void)state;
  vat_value args;
  vat_ref *reply;
  if (!vat_request_parse(value, &args, &reply) || selector != sel("changed"))
    return;
  int64_t n = 0;
  vat_get_int(vat_at(args, 0), &n);
  printf("  watcher: the counter is now %lld\n", (long long)n);
  fflush(stdout);
  vat_reply(turn, reply, vat_null());
}

static vat_value call(vat_ref *to, const char *method, vat_value arg) {
  vat_promise *p;
  vat_value v = vat_null();
  vat_host_request(to, sel(method), vat_list(&arg, 1), 5, &p);
  if (vat_promise_wait(p, 10, &v) != VAT_OK) {
    char buf[128];
    vat_format(v, buf, sizeof buf);
    printf("%s failed: %s\n", method, buf);
    exit(1);
  }
  return v;
}

static int use(const char *address) {
  vat_config cfg;
  vat_config_default(&cfg);
  cfg.workers = 2;
  vat_system *sys;
  vat_system_new(&cfg, &sys);
  vat_entity_def def = {.receive = watcher_receive};
  vat_ref *watcher;
  vat_host_spawn(sys, &def, &watcher, NULL);
  vat_conn *conn;
  if (vat_connect(sys, address, NULL, NULL, &conn) != VAT_OK)
    return 1;
  vat_value v;
  if (vat_promise_wait(vat_conn_bootstrap(conn), 10, &v) != VAT_OK)
    return 1;
  vat_ref *remote = vat_value_ref(v); /* a ref like any other */
  printf("child: got the counter\n");
  call(remote, "watch", vat_ref_value(watcher));
  int64_t steps[] = {1, 2, 39};
  for (size_t i = 0; i < 3; i++) {
    int64_t n = 0;
    vat_get_int(call(remote, "incr", vat_int(steps[i])), &n);
    printf("child: incr(%lld) -> %lld\n", (long long)steps[i], (long long)n);
    fflush(stdout);
  }
  vat_conn_close(conn);
  vat_promise_wait(vat_conn_closed(conn), 10, &v);
  char buf[128];
  vat_format(v, buf, sizeof buf);
  printf("child: connection ended: %s\n", buf);
  vat_system_shutdown(sys, 5);
  vat_system_destroy(sys);
  return 0;
}

int main(void) {
  char address[96];
  snprintf(address, sizeof address, "unix:/tmp/vat-remote-counter-%d.sock",
           (int)getpid());
  int ready[2];
  if (pipe(ready) != 0)
    return 1;
  fflush(stdout);
  /* Fork first: each process starts the library (and its threads) on its
   * own. */
  pid_t pid = fork();
  if (pid == 0) {
    char c;
    close(ready[1]);
    if (read(ready[0], &c, 1) != 1)
      _exit(1);
    vat_init();
    int code = use(address);
    fflush(stdout);
    _exit(code);
  }
  close(ready[0]);
  vat_init();
  int rc = serve(address, ready[1]);
  int status;
  waitpid(pid, &status, 0);
  printf("parent: the child exited with %d\n",
         WIFEXITED(status) ? WEXITSTATUS(status) : -1);
  return rc || !WIFEXITED(status) || WEXITSTATUS(status);
}
