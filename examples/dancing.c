/* The dancing figure: a vat draws a frame, then sends itself the next one
 * as a message delayed by 150 ms (vat_later), 28 frames in all, then
 * stops. main waits for the dancer to stop: a request the dancer never
 * answers breaks with its exit reason when it ends.
 *
 * On a terminal the figure dances on one line; otherwise (a pipe, a test)
 * each frame is a line of its own. An optional argument sets the frame
 * time in milliseconds. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "vat.h"

static const char *const figures[] = {"<(^.^<)", "<(^.^)>", "(>^.^)>"};

/* (figure, column) for each frame: a few steps left, a twirl, a few steps
 * right, and a bow. */
static const struct {
  int figure, column;
} steps[] = {
    {1, 6}, {0, 6}, {0, 5}, {0, 4}, {0, 3}, {0, 2}, {1, 2},
    {2, 2}, {1, 2}, {0, 2}, {1, 2}, {2, 2}, {2, 3}, {2, 4},
    {2, 5}, {2, 6}, {2, 7}, {2, 8}, {2, 9}, {1, 9}, {0, 9},
    {1, 9}, {2, 9}, {1, 9}, {0, 8}, {0, 7}, {0, 6}, {1, 6},
};

enum { FRAMES = sizeof steps / sizeof steps[0] };
_Static_assert(FRAMES == 28, "the dance has 28 frames");

typedef struct dancer {
  int frame;
  double frame_s;
  bool tty;
  vat_resolver *watcher;
} dancer;

static void draw(vat_turn *turn, void *state, void *arg) {
  (void)arg;
  dancer *d = state;
  int f = d->frame++;
  if (d->tty)
    printf("\r%*s%s%*s", steps[f].column, "", figures[steps[f].figure],
           12 - steps[f].column, "");
  else
    printf("%*s%s\n", steps[f].column, "", figures[steps[f].figure]);
  fflush(stdout);
  if (d->frame == FRAMES) {
    if (d->tty)
      putchar('\n');
    vat_stop(turn);
    return;
  }
  vat_later(turn, d->frame_s, vat_self(turn), draw, NULL, NULL);
}

/* Never answered: the promise breaks when the dancer ends. */
static void watch(vat_turn *turn, void *state, void *arg, vat_resolver *r) {
  (void)turn;
  (void)arg;
  ((dancer *)state)->watcher = r;
}

int main(int argc, char **argv) {
  double frame_ms = argc > 1 ? atof(argv[1]) : 150;
  vat_system *sys;
  vat_ref *ref;
  dancer *d;
  if (vat_init() != VAT_OK || vat_system_new(NULL, &sys) != VAT_OK)
    return 1;
  vat_host_spawn(sys, &(vat_entity_def){.state_size = sizeof(dancer)}, &ref,
                 (void **)&d);
  d->frame_s = frame_ms / 1000;
  d->tty = isatty(STDOUT_FILENO);
  vat_promise *ended;
  if (vat_host_call(ref, watch, NULL, 0, &ended) != VAT_OK ||
      vat_host_send(ref, draw, NULL) != VAT_OK)
    return 1;
  vat_value reason;
  int rc = vat_promise_wait(ended, 60, &reason);
  if (rc != VAT_EBROKEN || !vat_is_atom(reason, vat_atom_normal())) {
    fprintf(stderr, "dancing: the dancer did not finish\n");
    return 1;
  }
  vat_system_shutdown(sys, 10);
  vat_system_destroy(sys);
  return 0;
}
