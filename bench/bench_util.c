#include "bench_util.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

static void usage_exit(const char *prog, const char *usage, int code) {
  fprintf(code ? stderr : stdout, "usage: %s [-w WORKERS] [-b BATCH] %s\n",
          prog, usage);
  exit(code);
}

static bool parse_u64(const char *s, uint64_t *out) {
  char *end;
  errno = 0;
  unsigned long long v = strtoull(s, &end, 10);
  if (errno || end == s || *end || s[0] == '-' || v == 0)
    return false;
  *out = v;
  return true;
}

void bench_parse(int argc, char **argv, const char *usage, int max_sizes,
                 bench_args *out) {
  vat_config cfg;
  vat_config_default(&cfg);
  out->workers = cfg.workers;
  out->batch = cfg.batch;
  out->nsizes = 0;
  int opt;
  uint64_t v;
  while ((opt = getopt(argc, argv, "hw:b:")) != -1) {
    switch (opt) {
    case 'h':
      usage_exit(argv[0], usage, 0);
      break;
    case 'w':
    case 'b':
      if (opt == 'w' && out->zero_workers && strcmp(optarg, "0") == 0) {
        out->workers = 0;
        break;
      }
      if (!parse_u64(optarg, &v) || v > 4096) {
        fprintf(stderr, "%s: -%c wants a number from %d to 4096\n", argv[0],
                opt, opt == 'w' && out->zero_workers ? 0 : 1);
        usage_exit(argv[0], usage, 2);
      }
      *(opt == 'w' ? &out->workers : &out->batch) = (unsigned)v;
      break;
    default:
      usage_exit(argv[0], usage, 2);
    }
  }
  for (int i = optind; i < argc; i++) {
    if (out->nsizes == max_sizes || !parse_u64(argv[i], &v)) {
      fprintf(stderr, "%s: bad size '%s'\n", argv[0], argv[i]);
      usage_exit(argv[0], usage, 2);
    }
    out->sizes[out->nsizes++] = v;
  }
}

void bench_check(int rc, const char *what) {
  if (rc != VAT_OK) {
    fprintf(stderr, "%s: %s (%s)\n", what, vat_strerror(rc), vat_err_name(rc));
    exit(1);
  }
}

vat_system *bench_system(const bench_args *args) {
  bench_check(vat_init(), "vat_init");
  vat_config cfg;
  vat_config_default(&cfg);
  cfg.workers = args->workers;
  cfg.batch = args->batch;
  vat_system *sys;
  bench_check(vat_system_new(&cfg, &sys), "vat_system_new");
  return sys;
}

void *bench_spawn(vat_system *sys, size_t state_size, vat_ref **ref) {
  void *state;
  bench_check(vat_host_spawn(sys, &(vat_entity_def){.state_size = state_size},
                             ref, &state),
              "vat_host_spawn");
  return state;
}

double bench_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

double bench_peak_rss_mb(void) {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return (double)ru.ru_maxrss / 1024.0; /* Linux reports KiB */
}
