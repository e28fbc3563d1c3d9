#include <stdio.h>
#include <vat.h>

typedef struct { long total; } counter;

static void add(vat_turn *turn, void *state, void *arg) {
  (void)turn;
  ((counter *)state)->total += (long)(intptr_t)arg;
}

int main(void) {
  vat_init();                             /* once, before any thread */
  vat_system *sys;
  vat_system_new(NULL, &sys);             /* one worker per core */

  vat_entity_def def = {.state_size = sizeof(counter)};
  vat_ref *ref;
  counter *c;                             /* ours to set up until we send */
  vat_host_spawn(sys, &def, &ref, (void **)&c);
  for (int i = 1; i <= 100; i++)
    vat_host_send(ref, add, (void *)(intptr_t)i);

  vat_system_shutdown(sys, 5);            /* waits until nothing is queued */
  printf("%ld\n", c->total);              /* 5050 */
  vat_system_destroy(sys);
}
