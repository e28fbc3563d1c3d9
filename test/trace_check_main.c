/* trace-check FILE: exits 0 when FILE is a well-formed, consistent libvat
 * trace (trace_check.h) with at least one turn and one flow, printing a
 * summary; 1 with the reason otherwise. */
#include <stdio.h>

#include "trace_check.h"

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: trace-check FILE\n");
    return 2;
  }
  char err[256];
  json *doc = json_parse_file(argv[1], err, sizeof err);
  trace_summary s;
  if (doc == NULL || !trace_check(doc, &s, err, sizeof err)) {
    fprintf(stderr, "trace-check: %s: %s\n", argv[1], err);
    return 1;
  }
  json_free(doc);
  if (s.slices == 0 || s.flows == 0) {
    fprintf(stderr, "trace-check: %s: no turns or no flows\n", argv[1]);
    return 1;
  }
  printf("%zu tracks, %zu turns, %zu flows, %zu lost sends, %.0f events "
         "lost\n",
         s.tracks, s.slices, s.flows, s.lost_sends, s.events_lost);
  return 0;
}
