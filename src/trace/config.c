/* Whether a system is traced, into which file, with how large rings. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/system.h"
#include "core/trace.h"
#include "trace/trace.h"
#include "util/gc.h"
#include "util/mem.h"

enum {
  DEFAULT_EVENTS = 1 << 16, /* 3 MiB of 48-byte events per worker */
  MAX_EVENTS = 1 << 26,     /* 3 GiB per worker: surely a mistake past it */
};

static char *copy_string(const char *s, const char *suffix) {
  size_t n = strlen(s), m = strlen(suffix);
  char *c = vat__oom_check(GC_MALLOC_ATOMIC(n + m + 1), "a trace path");
  memcpy(c, s, n);
  memcpy(c + n, suffix, m + 1);
  return c;
}

/* The path VAT_TRACE names, for the process's n-th system traced through
 * it: FILE for the first, FILE.2, FILE.3... for the next, so that a
 * program with several systems does not write one file over another. */
static char *env_path(const char *path) {
  static _Atomic unsigned systems; /* relaxed: only a count */
  unsigned n = atomic_fetch_add_explicit(&systems, 1, memory_order_relaxed);
  char suffix[16] = "";
  if (n > 0)
    snprintf(suffix, sizeof suffix, ".%u", n + 1);
  return copy_string(path, suffix);
}

static size_t env_events(void) {
  const char *s = getenv("VAT_TRACE_EVENTS");
  if (s == NULL || *s == '\0')
    return DEFAULT_EVENTS;
  char *end;
  unsigned long long n = strtoull(s, &end, 10);
  if (*end != '\0' || n == 0 || n > MAX_EVENTS) {
    fprintf(stderr, "libvat: VAT_TRACE_EVENTS=%s ignored (1..%d)\n", s,
            MAX_EVENTS);
    return DEFAULT_EVENTS;
  }
  return (size_t)n;
}

/* Tells the process's traced systems apart in flow ids. */
static unsigned next_tag(void) {
  static _Atomic unsigned tags; /* relaxed: only a count */
  return atomic_fetch_add_explicit(&tags, 1, memory_order_relaxed) + 1;
}

const char vat__trace_off[] = "";

int vat__trace_configure(vat_system *sys) {
  const vat_config *cfg = &sys->cfg;
  if (cfg->trace_events > MAX_EVENTS)
    return VAT_EINVAL;
  const char *path = cfg->trace_path;
  if (path == vat__trace_off)
    return VAT_OK;
  if (path != NULL) {
    sys->trace_path = *path ? copy_string(path, "") : NULL;
  } else {
    path = getenv("VAT_TRACE");
    if (path == NULL || *path == '\0')
      return VAT_OK;
    sys->trace_path = env_path(path);
  }
  sys->trace_events = cfg->trace_events ? cfg->trace_events : env_events();
  sys->trace_tag = next_tag();
  /* A deterministic system's time is its virtual clock, plus one
   * (core/trace.h: vat__trace_virtual_time). */
  sys->trace_tick0 =
      sys->virtual_clock
          ? atomic_load_explicit(&sys->virtual_now_ns, memory_order_relaxed) + 1
          : vat__trace_ticks();
  sys->trace_ns0 = vat__monotonic_ns();
  return VAT_OK;
}
