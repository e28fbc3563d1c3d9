/* Checks a trace file as Perfetto and chrome://tracing would need it, and
 * that it keeps the library's promises: every event well-formed, every
 * track named, every flow's start with its end (each inside a turn's
 * slice on its track) or reported lost, slices on a track in order and
 * not overlapping, and the counts in "otherData" agreeing with the
 * events. Used by the trace suite and by the traced
 * example's test (trace_check_main.c). */
#ifndef VAT_TEST_TRACE_CHECK_H
#define VAT_TEST_TRACE_CHECK_H

#include <stddef.h>

#include "json.h"

typedef struct trace_summary {
  size_t events;       /* in traceEvents, metadata included */
  size_t slices;       /* "X" turns (not parked slices) */
  size_t flows;        /* matched s/f pairs */
  size_t lost_sends;   /* sends reported lost ("send (lost)") */
  size_t lost_turns;   /* turns whose flow's start is lost */
  size_t instants;     /* spawn, exit, dead letter, park, wake */
  size_t tracks;       /* named tracks */
  double events_lost;  /* otherData.events_lost */
  double recorded;     /* otherData.events_recorded */
  double dead_letters; /* otherData.flows_dead_letters */
} trace_summary;

/** Whether `doc` is a well-formed, consistent trace; if not, why in err. */
int trace_check(const json *doc, trace_summary *out, char *err, size_t size);

#endif
