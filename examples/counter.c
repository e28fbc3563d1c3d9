/* The gen_server counter: a counter vat takes 3,000,000 add(100) messages
 * from a driver vat, then answers a get request; main asks the driver to
 * run and blocks on the answer.
 *
 * The driver answers main's request with the promise of its own get
 * request: main's promise follows it, and resolves with the count.
 *
 * It compiles as C++ too (.ci/install-check builds it both ways): hence
 * the casts from void * and no compound literals. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "vat.h"

typedef struct counter {
  int64_t value;
} counter;

static void add(vat_turn *turn, void *state, void *arg) {
  (void)turn;
  ((counter *)state)->value += (intptr_t)arg;
}

static void get(vat_turn *turn, void *state, void *arg, vat_resolver *r) {
  (void)arg;
  vat_resolve(turn, r, vat_int(((counter *)state)->value));
}

typedef struct driver {
  vat_ref *counter;
  uint64_t left;
  vat_resolver *reply;
} driver;

/* Sends in slices of 1000, so the counter starts at once and one turn's
 * buffer stays small; messages from one vat arrive in order, so the get
 * comes after every add. */
static void drive(vat_turn *turn, void *state, void *arg) {
  (void)arg;
  driver *d = (driver *)state;
  for (int i = 0; i < 1000 && d->left > 0; i++, d->left--)
    vat_send(turn, d->counter, add, (void *)(intptr_t)100);
  if (d->left > 0) {
    vat_send(turn, vat_self(turn), drive, NULL);
    return;
  }
  vat_promise *total;
  vat_call(turn, d->counter, get, NULL, 0, &total);
  vat_resolve(turn, d->reply, vat_promise_value(total));
}

static void run(vat_turn *turn, void *state, void *arg, vat_resolver *r) {
  driver *d = (driver *)state;
  d->left = (uint64_t)(uintptr_t)arg;
  d->reply = r;
  drive(turn, state, NULL);
}

int main(int argc, char **argv) {
  uint64_t n = argc > 1 ? strtoull(argv[1], NULL, 10) : 3000000;
  vat_system *sys;
  vat_ref *counter_ref, *driver_ref;
  driver *d;
  if (vat_init() != VAT_OK || vat_system_new(NULL, &sys) != VAT_OK)
    return 1;
  vat_entity_def counter_def = {.state_size = sizeof(counter)};
  vat_entity_def driver_def = {.state_size = sizeof(driver)};
  vat_host_spawn(sys, &counter_def, &counter_ref, NULL);
  vat_host_spawn(sys, &driver_def, &driver_ref, (void **)&d);
  d->counter = counter_ref;

  vat_promise *answer;
  vat_value total;
  int rc = vat_host_call(driver_ref, run, (void *)(uintptr_t)n, 0, &answer);
  if (rc == VAT_OK)
    rc = vat_promise_wait(answer, 60, &total);
  int64_t value = 0;
  if (rc != VAT_OK || vat_get_int(total, &value) != VAT_OK) {
    fprintf(stderr, "counter: %s\n", vat_strerror(rc));
    return 1;
  }
  printf("%" PRId64 "\n", value);
  vat_system_shutdown(sys, 10);
  vat_system_destroy(sys);
  return 0;
}
