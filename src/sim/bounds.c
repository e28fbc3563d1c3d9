/* A seed's bounds on real time and memory (bounds.h). Neither is the
 * seed's to decide: they keep a campaign from looking hung on a seed that
 * grows slow or large, and report that seed as a livelock is reported. */
#include "sim/bounds.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/clock.h"
#include "util/gc.h"

enum { STEPS_PER_LOOK = 8 };

static const struct {
  const char *suffix;
  unsigned shift;
} units[] = {{"GiB", 30}, {"MiB", 20}, {"KiB", 10}, {"", 0}};

/* Bytes as the options' documentation writes them: "16 MiB", "1000". */
static void bytes_text(uint64_t n, char *buf, size_t size) {
  for (size_t u = 0; u < sizeof units / sizeof units[0]; u++)
    if (n != 0 && n % (UINT64_C(1) << units[u].shift) == 0) {
      snprintf(buf, size, "%" PRIu64 "%s%s", n >> units[u].shift,
               units[u].shift ? " " : " bytes", units[u].suffix);
      return;
    }
  snprintf(buf, size, "%" PRIu64 " bytes", n);
}

static bool parse_bytes(const char *text, uint64_t *out) {
  char *end;
  errno = 0;
  if (*text < '0' || *text > '9')
    return false;
  uint64_t n = strtoull(text, &end, 10);
  if (errno != 0)
    return false;
  for (size_t u = 0; u < sizeof units / sizeof units[0]; u++)
    if (strcmp(end, units[u].suffix) == 0) {
      if (n > (UINT64_MAX >> units[u].shift))
        return false;
      *out = n << units[u].shift;
      return true;
    }
  return false;
}

int vat__sim_bounds_from_env(vat_sim_options *o, char *why, size_t size) {
  const char *t = getenv("VAT_SIM_MAX_SEED_TIME");
  if (t != NULL && *t != '\0') {
    const char *end;
    uint64_t ns;
    if (strcmp(t, "0") == 0)
      ns = 0;
    else if (vat_sim_time_parse(t, &ns, &end) != VAT_OK || *end != '\0') {
      snprintf(why, size,
               "VAT_SIM_MAX_SEED_TIME=%.60s is not a time: a whole number "
               "and ns, us, ms or s (\"30s\"), or 0 for no bound",
               t);
      return VAT_EINVAL;
    }
    o->max_seed_time_ns = ns;
  }
  const char *m = getenv("VAT_SIM_MAX_SEED_MEMORY");
  if (m != NULL && *m != '\0') {
    uint64_t bytes;
    if (!parse_bytes(m, &bytes)) {
      snprintf(why, size,
               "VAT_SIM_MAX_SEED_MEMORY=%.60s is not a size: a whole number "
               "of bytes, or of KiB, MiB or GiB (\"512MiB\"), or 0 for no "
               "bound",
               m);
      return VAT_EINVAL;
    }
    o->max_seed_memory = bytes;
  }
  return VAT_OK;
}

void vat__sim_meter_start(vat__sim_meter *m) {
  m->started_ns = vat__monotonic_ns();
  m->memory_then = GC_get_memory_use();
  m->steps = 0;
}

vat_sim_verdict vat__sim_meter_check(vat__sim_meter *m,
                                     const vat_sim_options *o, char *why,
                                     size_t size) {
  if (++m->steps % STEPS_PER_LOOK != 0)
    return VAT_SIM_PASSED;
  char bound[48];
  if (o->max_seed_time_ns != 0 &&
      vat__monotonic_ns() - m->started_ns > o->max_seed_time_ns) {
    vat_sim_time_format(o->max_seed_time_ns, bound, sizeof bound);
    snprintf(why, size,
             "bound: the seed ran past %s of real time and is not quiescent "
             "(max_seed_time_ns, VAT_SIM_MAX_SEED_TIME)",
             bound);
    return VAT_SIM_OUT_OF_TIME;
  }
  size_t now = o->max_seed_memory != 0 ? GC_get_memory_use() : 0;
  if (o->max_seed_memory != 0 && now > m->memory_then &&
      now - m->memory_then > o->max_seed_memory) {
    bytes_text(o->max_seed_memory, bound, sizeof bound);
    snprintf(why, size,
             "bound: the seed grew the memory in use by %.1f MiB, past %s, "
             "and is not quiescent (max_seed_memory, VAT_SIM_MAX_SEED_MEMORY)",
             (double)(now - m->memory_then) / (1 << 20), bound);
    return VAT_SIM_OUT_OF_MEMORY;
  }
  return VAT_SIM_PASSED;
}
