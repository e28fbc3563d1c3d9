/* A C object served to a Node program over CapTP, and a Node object
 * called back from C.
 *
 * The C side serves a kitchen on 127.0.0.1 (a port the kernel picks); the
 * Node side (examples/node_client.mjs, the real @endo/captp) gets it as
 * its bootstrap object and calls it with values of several kinds. It
 * hands the kitchen a listener of its own, which the kitchen calls back
 * when an order is ready, and waits on a promise the kitchen resolves
 * later.
 *
 *   node_client                  listen, print the port, serve one client
 *   node_client NODE SCRIPT      the same, with NODE SCRIPT PORT started
 *                                as the client (how the test runs it)
 *
 * Exits 77 (skipped) when NODE is missing or test/captp/endo has no
 * node_modules (`npm ci` there brings the pinned packages).
 *
 *   kitchen  hello(name)       a greeting
 *            add(a, b)         a + b (integers: Endo's bigints)
 *            describe(value)   the value as libvat prints it
 *            menu()            a record of several kinds of value
 *            subscribe(ref)    keep ref; call ref.notify(text) on news
 *            echo(value)       value itself (a ref comes back the same)
 *            order(dish)       {number, ready}: `ready` a promise resolved
 *                              once the dish is cooked; no unicorns
 *            self()            the kitchen itself
 */
#define GC_THREADS 1
#include <gc/gc.h>

#include <libgen.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "vat.h"
#include "vat/caps.h"
#include "vat/net.h"

#define WAIT_S 15.0

static const vat_atom *sel(const char *name) {
  return vat_atom_intern(name);
}

/* Both processes write to one stdout: each line is flushed before the
 * message that lets the other side print, so the transcript is exact. */
static void say(const char *fmt, const char *arg) {
  printf("server: ");
  printf(fmt, arg);
  putchar('\n');
  fflush(stdout);
}

/* A value as libvat prints it, less the addresses of refs and promises
 * ("<ref 0x...>" becomes "<ref>"), which change from run to run. */
static const char *show(vat_value v) {
  static _Thread_local char buf[512];
  vat_format(v, buf, sizeof buf);
  char *out = buf;
  bool in_string = false; /* a string's " 0x" is left alone */
  char prev = '\0';       /* buf is rewritten in place: keep in[-1] here */
  for (const char *in = buf; *in != '\0'; prev = *in++) {
    if (*in == '"' && prev != '\\')
      in_string = !in_string;
    if (!in_string && in[0] == ' ' && in[1] == '0' && in[2] == 'x')
      for (in += 3; in[1] != '>' && in[1] != '\0'; in++)
        ;
    else
      *out++ = *in;
  }
  *out = '\0';
  return buf;
}

/* --- The kitchen ---------------------------------------------------------- */

typedef struct kitchen {
  vat_ref *listener;     /* subscribe's ref, or NULL */
  int64_t orders;        /* tickets given */
  vat_resolver *cooking; /* the order on the stove, or NULL */
} kitchen;

static vat_value pair(const char *k1, vat_value v1, const char *k2,
                      vat_value v2) {
  vat_value keys[2] = {vat_atom_named(k1), vat_atom_named(k2)};
  vat_value vals[2] = {v1, v2};
  return vat_map(keys, vals, 2);
}

static vat_value menu(void) {
  vat_value tags[2] = {vat_string("soup"), vat_string("bread")};
  vat_value keys[5] = {vat_atom_named("name"), vat_atom_named("cooks"),
                       vat_atom_named("open"), vat_atom_named("rating"),
                       vat_atom_named("dishes")};
  vat_value vals[5] = {vat_string("libvat kitchen"), vat_int(2), vat_bool(true),
                       vat_float(4.5), vat_list(tags, 2)};
  return vat_map(keys, vals, 5);
}

/* The listener has heard the news: serve the dish. */
static void heard(vat_turn *turn, void *state, void *ctx, bool resolved,
                  vat_value value) {
  kitchen *k = state;
  (void)ctx;
  say(resolved ? "the listener answered %s" : "the listener failed: %s",
      show(value));
  vat_resolve(turn, k->cooking, vat_string("hot soup"));
  k->cooking = NULL;
}

/* The timer's turn: the dish is cooked; tell the listener first. */
static void cooked(vat_turn *turn, void *state, void *arg) {
  kitchen *k = state;
  (void)arg;
  say("the soup is ready; telling the listener%s", "");
  vat_value news = vat_string("your soup is ready");
  vat_promise *p;
  if (vat_request(turn, k->listener, sel("notify"), vat_list(&news, 1), WAIT_S,
                  &p) == VAT_OK)
    vat_when(turn, p, heard, NULL);
}

/* subscribe's call back has been answered: so is subscribe. */
static void subscribed(vat_turn *turn, void *state, void *ctx, bool resolved,
                       vat_value value) {
  (void)state;
  say("the listener answered %s", show(value));
  if (resolved)
    vat_reply(turn, ctx, vat_bool(true));
  else
    vat_reply_error(turn, ctx, value);
}

static void order(vat_turn *turn, kitchen *k, vat_value dish, vat_ref *reply) {
  const char *name = vat_string_data(dish);
  if (name == NULL || strcmp(name, "soup") != 0 || k->cooking != NULL ||
      k->listener == NULL) {
    char text[128];
    snprintf(text, sizeof text, "no %s on the menu", name ? name : "such dish");
    say("%s", text);
    vat_reply_error(turn, reply,
                    vat_error(sel("RangeError"), vat_string(text)));
    return;
  }
  vat_promise *ready;
  vat_promise_new(&ready, &k->cooking);
  k->orders++;
  /* Printed before the answer goes: the client prints nothing until the
   * promise settles, so the transcript's order does not depend on how
   * long the cooking takes. */
  printf("server: ticket %lld; the soup cooks for 50 ms\n",
         (long long)k->orders);
  fflush(stdout);
  /* Answered now; `ready` follows, settled by a later turn. */
  vat_reply(
      turn, reply,
      pair("number", vat_int(k->orders), "ready", vat_promise_value(ready)));
  vat_later(turn, 0.05, vat_self(turn), cooked, NULL, NULL);
}

static void kitchen_receive(vat_turn *turn, void *state,
                            const vat_atom *selector, vat_value value) {
  kitchen *k = state;
  vat_value args;
  vat_ref *reply;
  if (!vat_request_parse(value, &args, &reply))
    return;
  printf("server: %s %s\n", vat_atom_name(selector), show(args));
  fflush(stdout);
  if (selector == sel("hello")) {
    char text[128];
    snprintf(text, sizeof text, "hello, %s, from C",
             vat_string_data(vat_at(args, 0)) ? vat_string_data(vat_at(args, 0))
                                              : "stranger");
    vat_reply(turn, reply, vat_string(text));
  } else if (selector == sel("add")) {
    int64_t a = 0, b = 0;
    vat_get_int(vat_at(args, 0), &a);
    vat_get_int(vat_at(args, 1), &b);
    vat_reply(turn, reply, vat_int(a + b));
  } else if (selector == sel("describe")) {
    vat_reply(turn, reply, vat_string(show(vat_at(args, 0))));
  } else if (selector == sel("menu")) {
    vat_reply(turn, reply, menu());
  } else if (selector == sel("subscribe")) {
    k->listener = vat_value_ref(vat_at(args, 0));
    vat_value hi = vat_string("welcome to the kitchen");
    vat_promise *p;
    if (k->listener != NULL &&
        vat_request(turn, k->listener, sel("notify"), vat_list(&hi, 1), WAIT_S,
                    &p) == VAT_OK)
      vat_when(turn, p, subscribed, reply);
    else
      vat_reply_error(turn, reply,
                      vat_error(sel("TypeError"), vat_string("not a ref")));
  } else if (selector == sel("echo")) {
    vat_reply(turn, reply, vat_at(args, 0));
  } else if (selector == sel("order")) {
    order(turn, k, vat_at(args, 0), reply);
  } else if (selector == sel("self")) {
    vat_reply(turn, reply, vat_ref_value(vat_self(turn)));
  } else {
    vat_reply_error(turn, reply,
                    vat_error(sel("TypeError"), vat_string("no such method")));
  }
}

/* --- The client process --------------------------------------------------- */

/* Whether NODE can run SCRIPT: node itself, and the pinned packages. */
static bool can_run(const char *node, const char *script) {
  char copy[4096], modules[4096];
  snprintf(copy, sizeof copy, "%s", script);
  snprintf(modules, sizeof modules,
           "%s/../test/captp/endo/node_modules/@endo/captp", dirname(copy));
  return access(node, X_OK) == 0 && access(script, R_OK) == 0 &&
         access(modules, F_OK) == 0;
}

static pid_t start_client(const char *node, const char *script, int port) {
  char port_text[16];
  snprintf(port_text, sizeof port_text, "%d", port);
  fflush(stdout);
  pid_t pid = fork();
  if (pid == 0) {
    execl(node, node, script, port_text, (char *)NULL);
    _exit(127);
  }
  return pid;
}

/* Waits for the client's exit, on a deadline; kills it past that. */
static int client_status(pid_t pid) {
  struct timespec step = {0, 10000000};
  int status = 0;
  for (int i = 0; i < (int)(WAIT_S * 100); i++) {
    if (waitpid(pid, &status, WNOHANG) == pid)
      return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    nanosleep(&step, NULL);
  }
  kill(pid, SIGKILL);
  waitpid(pid, &status, 0);
  return -1;
}

int main(int argc, char **argv) {
  if (argc != 1 && argc != 3) {
    fprintf(stderr, "usage: node_client [NODE SCRIPT]\n");
    return 2;
  }
  if (argc == 3 && !can_run(argv[1], argv[2])) {
    fprintf(stderr, "node_client: skipped: no node, or no node_modules in "
                    "test/captp/endo (npm ci there)\n");
    return 77;
  }
  vat_init();
  vat_config cfg;
  vat_config_default(&cfg);
  cfg.workers = 2;
  vat_system *sys;
  vat_system_new(&cfg, &sys);
  vat_entity_def def = {.state_size = sizeof(kitchen),
                        .receive = kitchen_receive};
  vat_ref *kitchen_ref;
  vat_host_spawn(sys, &def, &kitchen_ref, NULL);
  vat_listener *l;
  int rc = vat_listen(sys, "tcp:127.0.0.1:0", kitchen_ref, NULL, &l);
  if (rc != VAT_OK) {
    fprintf(stderr, "node_client: listen: %s\n", vat_strerror(rc));
    return 1;
  }
  say("serving a kitchen on 127.0.0.1%s", "");
  pid_t pid = -1;
  if (argc == 3)
    pid = start_client(argv[1], argv[2], vat_listener_port(l));
  else
    printf("server: run `node examples/node_client.mjs %d`\n",
           vat_listener_port(l));
  fflush(stdout);
  vat_conn *conn;
  rc = vat_listener_accept(l, argc == 3 ? WAIT_S : -1, &conn);
  vat_listener_close(l);
  if (rc != VAT_OK) {
    fprintf(stderr, "node_client: accept: %s\n", vat_strerror(rc));
    return 1;
  }
  /* Serve until the client hangs up. */
  vat_value why = vat_null();
  rc = vat_promise_wait(vat_conn_closed(conn), argc == 3 ? WAIT_S : -1, &why);
  say("the connection ended: %s", rc == VAT_OK ? show(why) : vat_err_name(rc));
  if (pid > 0)
    printf("server: the client exited with %d\n", client_status(pid));
  vat_system_shutdown(sys, 5);
  vat_system_destroy(sys);
  return rc == VAT_OK ? 0 : 1;
}
