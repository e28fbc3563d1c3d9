/* See trace_check.h. */
#include "trace_check.h"

#include <stdio.h>
#include <string.h>

#define FAIL(...)                                                              \
  do {                                                                         \
    snprintf(err, size, __VA_ARGS__);                                          \
    return 0;                                                                  \
  } while (0)

static const char *ph_of(const json *e) {
  const char *ph = json_str(e, "ph");
  return ph ? ph : "";
}

static int is_turn(const json *e) {
  const char *cat = json_str(e, "cat");
  return strcmp(ph_of(e), "X") == 0 && cat && strcmp(cat, "sched") != 0;
}

/* Whether a turn slice on `tid` contains `ts` (at its start, for "f"). */
static int in_turn(const json *events, double tid, double ts, int at_start) {
  for (size_t i = 0; i < events->len; i++) {
    const json *x = &events->items[i];
    if (!is_turn(x) || json_num(x, "tid", -1) != tid)
      continue;
    double b = json_num(x, "ts", -1), d = json_num(x, "dur", -1);
    if (at_start ? b == ts : b <= ts && ts <= b + d + 0.0005)
      return 1;
  }
  return 0;
}

static size_t count_id(const json *events, const char *ph, double id) {
  size_t n = 0;
  for (size_t i = 0; i < events->len; i++) {
    const json *e = &events->items[i];
    if (strcmp(ph_of(e), ph) == 0 && json_num(e, "id", -1) == id)
      n++;
  }
  return n;
}

static int check_event(const json *e, char *err, size_t size) {
  if (e->type != JSON_OBJECT)
    FAIL("an event is not an object");
  const char *ph = json_str(e, "ph");
  if (ph == NULL || json_num(e, "pid", -1) < 0 || json_num(e, "tid", -1) < 0 ||
      json_num(e, "ts", -1) < 0 || json_str(e, "name") == NULL)
    FAIL("an event lacks ph, pid, tid, ts or name");
  if (strcmp(ph, "X") == 0 && json_num(e, "dur", -1) < 0)
    FAIL("a slice has no duration");
  if ((strcmp(ph, "s") == 0 || strcmp(ph, "f") == 0) &&
      (json_num(e, "id", -1) <= 0 || json_str(e, "cat") == NULL))
    FAIL("a flow event has no id or cat");
  if (strcmp(ph, "f") == 0 &&
      (json_str(e, "bp") == NULL || strcmp(json_str(e, "bp"), "e") != 0))
    FAIL("a flow end does not bind to its enclosing slice (bp:e)");
  if (strchr("XsfiM", ph[0]) == NULL || ph[1] != '\0')
    FAIL("unexpected phase %s", ph);
  return 1;
}

static int named(const json *events, double tid) {
  for (size_t i = 0; i < events->len; i++) {
    const json *e = &events->items[i];
    if (strcmp(ph_of(e), "M") == 0 && json_num(e, "tid", -1) == tid &&
        strcmp(json_str(e, "name"), "thread_name") == 0)
      return 1;
  }
  return 0;
}

/* Slices on one track, in the file's order, neither overlap nor go back
 * in time: a worker runs one turn at a time. */
static int slices_in_order(const json *events, char *err, size_t size) {
  for (size_t i = 0; i < events->len; i++) {
    const json *a = &events->items[i];
    if (strcmp(ph_of(a), "X") != 0)
      continue;
    double tid = json_num(a, "tid", -1);
    for (size_t j = i + 1; j < events->len; j++) {
      const json *b = &events->items[j];
      if (strcmp(ph_of(b), "X") != 0 || json_num(b, "tid", -1) != tid)
        continue;
      if (json_num(a, "ts", 0) + json_num(a, "dur", 0) >
          json_num(b, "ts", 0) + 0.0005)
        FAIL("slices overlap on track %g at %g", tid, json_num(b, "ts", 0));
      break;
    }
  }
  return 1;
}

int trace_check(const json *doc, trace_summary *out, char *err, size_t size) {
  trace_summary s = {0};
  const json *events = json_get(doc, "traceEvents");
  const json *other = json_get(doc, "otherData");
  if (events == NULL || events->type != JSON_ARRAY)
    FAIL("no traceEvents array");
  if (other == NULL || other->type != JSON_OBJECT)
    FAIL("no otherData object");
  s.events = events->len;
  if (!slices_in_order(events, err, size))
    return 0;
  for (size_t i = 0; i < events->len; i++) {
    const json *e = &events->items[i];
    if (!check_event(e, err, size))
      return 0;
    const char *ph = ph_of(e);
    double tid = json_num(e, "tid", -1), ts = json_num(e, "ts", -1);
    if (strcmp(ph, "M") == 0) {
      s.tracks += strcmp(json_str(e, "name"), "thread_name") == 0;
      continue;
    }
    if (!named(events, tid))
      FAIL("track %g has no thread_name", tid);
    const json *args = json_get(e, "args");
    if (is_turn(e)) {
      s.slices++;
      s.lost_turns += json_get(args, "flow_lost") != NULL;
    } else if (strcmp(ph, "s") == 0) {
      double id = json_num(e, "id", -1);
      if (count_id(events, "s", id) != 1 || count_id(events, "f", id) != 1)
        FAIL("flow %.0f: not one start and one end", id);
      if (!in_turn(events, tid, ts, 0))
        FAIL("flow %.0f starts outside a turn", id);
      s.flows++;
    } else if (strcmp(ph, "f") == 0) {
      double id = json_num(e, "id", -1);
      if (count_id(events, "s", id) != 1)
        FAIL("flow %.0f ends with no start", id);
      if (!in_turn(events, tid, ts, 1))
        FAIL("flow %.0f ends where no turn begins", id);
    } else if (strcmp(ph, "i") == 0) {
      if (strcmp(json_str(e, "name"), "send (lost)") == 0) {
        if (json_get(args, "flow_lost") == NULL)
          FAIL("a lost send does not say which flow");
        s.lost_sends++;
      } else {
        s.instants++;
      }
    }
  }
  if (json_num(other, "flows_lost_start", -1) != (double)s.lost_turns ||
      json_num(other, "flows_lost_end", -1) != (double)s.lost_sends ||
      json_num(other, "flows", -1) != (double)s.flows)
    FAIL("otherData's flow counts (%g, %g, %g) are not the file's (%zu, "
         "%zu, %zu)",
         json_num(other, "flows", -1), json_num(other, "flows_lost_start", -1),
         json_num(other, "flows_lost_end", -1), s.flows, s.lost_turns,
         s.lost_sends);
  s.events_lost = json_num(other, "events_lost", -1);
  s.recorded = json_num(other, "events_recorded", -1);
  s.dead_letters = json_num(other, "flows_dead_letters", -1);
  if (s.events_lost < 0 || s.recorded < s.events_lost)
    FAIL("otherData's event counts are missing or wrong");
  *out = s;
  return 1;
}
