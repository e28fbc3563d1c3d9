/* Waiting for a vat to finish, from a plain main(): no helper vat.
 *
 * main spawns a worker vat that sums 1..n in slices (sending itself the
 * next slice, so it never holds its worker for long), then stops. A host
 * monitor (vat_host_monitor) turns the vat's end into a promise; main
 * blocks on it and learns why the vat ended. A second worker is given a
 * bad input and fails: main learns that too, and a snapshot
 * (vat_ref_inspect) tells what is left of it. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "vat.h"

typedef struct summer {
  int64_t next, last, sum;
} summer;

static void sum_slice(vat_turn *turn, void *state, void *arg) {
  (void)arg;
  summer *s = state;
  if (s->last < 0) {
    vat_fail(turn, vat_reason_error(vat_atom_intern("negative_input"),
                                    vat_int(s->last)));
    return;
  }
  for (int i = 0; i < 10000 && s->next <= s->last; i++)
    s->sum += s->next++;
  if (s->next <= s->last) {
    vat_send(turn, vat_self(turn), sum_slice, NULL);
    return;
  }
  printf("%s: sum is %" PRId64 "\n", vat_ref_label(vat_self(turn)), s->sum);
  vat_stop(turn);
}

static const vat_entity_def summer_def = {.state_size = sizeof(summer)};

/* Starts a summer of 1..last labelled `label`; returns the promise of its
 * end. */
static vat_promise *start(vat_system *sys, const char *label, int64_t last,
                          vat_ref **out) {
  vat_entity_def def = summer_def;
  def.label = label;
  summer *s;
  if (vat_host_spawn(sys, &def, out, (void **)&s) != VAT_OK)
    exit(1);
  *s = (summer){.next = 1, .last = last};
  vat_promise *down;
  /* Before the first send: the monitor reaches the vat ahead of the
   * work, so the vat cannot end unwatched (a monitor that finds a vat
   * already ended answers noproc, without the reason). It arrives as a
   * message, so the vat counts it as a turn. */
  if (vat_host_monitor(*out, NULL, &down) != VAT_OK ||
      vat_host_send(*out, sum_slice, NULL) != VAT_OK)
    exit(1);
  return down;
}

static void report(vat_promise *down) {
  vat_value reason;
  char text[128];
  if (vat_promise_wait(down, -1, &reason) != VAT_OK)
    exit(1);
  vat_format(reason, text, sizeof text);
  printf("it ended: %s\n", text);
}

int main(void) {
  vat_init();
  vat_system *sys;
  if (vat_system_new(NULL, &sys) != VAT_OK)
    return 1;

  vat_ref *good, *bad;
  report(start(sys, "summer", 1000000, &good));
  report(start(sys, "broken summer", -5, &bad));

  vat_info info;
  vat_ref_inspect(bad, &info);
  printf("%s: alive %s, %" PRIu32 " turn(s) run, %zu queued\n", info.label,
         info.alive ? "yes" : "no", info.turns, info.queue_len);

  vat_system_shutdown(sys, 10);
  vat_system_destroy(sys);
  return 0;
}
