/* The echo server: it answers every request with what it was sent, and
 * stops itself after a period with no message (10 s unless the first
 * argument says otherwise, in seconds). main makes a few requests, prints
 * the answers, and waits for the server to stop: a request the server
 * never answers breaks with its exit reason when it ends. */
#include <stdio.h>
#include <stdlib.h>

#include "vat.h"

typedef struct server {
  vat_resolver *watcher;
} server;

static void echo(vat_turn *turn, void *state, void *arg, vat_resolver *r) {
  (void)state;
  vat_resolve(turn, r, *(vat_value *)arg);
}

static void on_idle(vat_turn *turn, void *state, void *arg) {
  (void)state;
  (void)arg;
  vat_stop(turn);
}

static void start(vat_turn *turn, void *state, void *arg, vat_resolver *r) {
  ((server *)state)->watcher = r;
  vat_idle_timeout(turn, *(double *)arg, vat_self(turn), on_idle, NULL);
}

int main(int argc, char **argv) {
  double idle_s = argc > 1 ? atof(argv[1]) : 10;
  vat_system *sys;
  vat_ref *ref;
  if (vat_init() != VAT_OK || vat_system_new(NULL, &sys) != VAT_OK)
    return 1;
  vat_host_spawn(sys, &(vat_entity_def){.state_size = sizeof(server)}, &ref,
                 NULL);
  vat_promise *ended;
  if (vat_host_call(ref, start, &idle_s, 0, &ended) != VAT_OK)
    return 1;

  static const char *const words[] = {"hello", "vats", "goodbye"};
  for (int i = 0; i < 3; i++) {
    vat_value sent = vat_string(words[i]), got;
    vat_promise *p;
    if (vat_host_call(ref, echo, &sent, 5, &p) != VAT_OK ||
        vat_promise_wait(p, 10, &got) != VAT_OK)
      return 1;
    printf("echo: %s\n", vat_string_data(got));
  }

  vat_value reason;
  if (vat_promise_wait(ended, idle_s * 3 + 10, &reason) != VAT_EBROKEN)
    return 1;
  const char *why = vat_type_of(reason) == VAT_T_ATOM
                        ? vat_atom_name(reason.as.atom)
                        : "abnormal";
  printf("server stopped after its idle period: %s\n", why);
  vat_system_shutdown(sys, 10);
  vat_system_destroy(sys);
  return 0;
}
