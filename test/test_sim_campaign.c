/* Simulation campaigns (vat/sim.h): seeds run in parallel worker
 * processes give the result the same campaign gives run serially (the
 * lowest failing seed, run again here, its figures and totals), a seed
 * that fails only in a worker or kills its worker is reported as such,
 * a failed pipe is an error, and the progress line shows on a terminal
 * only. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include <gc/gc.h>

#include "core/system.h"
#include "sim/progress.h"
#include "sim_programs.h"
#include "support.h"
#include "vat/host.h"
#include "vat/sim.h"

/* --- A program whose verdict each seed decides ----------------------------
 * A vat sends itself `turns` messages, then stops. The seeds listed in the
 * context fail (the check, at the last turn), each after its own number of
 * turns, so a low failing seed can take far longer than a higher one. */

enum { MAX_LISTED = 4 };

typedef struct listed_seed {
  uint64_t seed, turns;
} listed_seed;

typedef struct seeded_ctx {
  listed_seed failing[MAX_LISTED];
  unsigned nfailing;
  uint64_t turns; /* of every other seed */
  /* Behaviours that need the process told apart: the parent's pid. */
  pid_t parent;
  uint64_t fail_in_workers; /* this seed fails, in a worker only */
  uint64_t exit_in_workers; /* this seed's worker exits, with status 7 */
  uint64_t kill_in_workers; /* this seed's worker is killed */
  uint64_t setups;          /* in this process */
} seeded_ctx;

typedef struct seeded_world {
  uint64_t left, ran, fail_at;
} seeded_world;

static void count_down(vat_turn *turn, void *state, void *arg) {
  seeded_world *w = *(seeded_world **)state;
  w->ran++;
  if (--w->left > 0)
    expect_vat_ok(vat_send(turn, vat_self(turn), count_down, arg));
}

static void *seeded_setup(vat_system *sys, void *ctx) {
  seeded_ctx *c = ctx;
  c->setups++;
  uint64_t seed = sys->cfg.seed;
  bool worker = getpid() != c->parent;
  if (worker && seed == c->exit_in_workers)
    _exit(7);
  if (worker && seed == c->kill_in_workers)
    raise(SIGKILL);
  seeded_world *w = GC_MALLOC(sizeof *w);
  w->left = c->turns;
  for (unsigned i = 0; i < c->nfailing; i++)
    if (c->failing[i].seed == seed)
      w->left = w->fail_at = c->failing[i].turns;
  if (worker && seed == c->fail_in_workers)
    w->fail_at = w->left;
  seeded_world **st;
  vat_ref *v = test_spawn(sys, sizeof *st, (void **)&st);
  *st = w;
  vat_host_send(v, count_down, NULL);
  return w;
}

static bool seeded_check(void *world, bool quiescent, char *why, size_t n) {
  (void)quiescent;
  seeded_world *w = world;
  if (w->fail_at != 0 && w->ran == w->fail_at) {
    snprintf(why, n, "failed after %llu turns", (unsigned long long)w->ran);
    return false;
  }
  return true;
}

static seeded_ctx *seeded_new(void) {
  seeded_ctx *c = GC_MALLOC_UNCOLLECTABLE(sizeof *c);
  memset(c, 0, sizeof *c);
  c->turns = 3;
  c->parent = getpid();
  return c;
}

static vat_sim_scenario seeded(seeded_ctx *c) {
  return (vat_sim_scenario){
      .name = "seeded", .setup = seeded_setup, .check = seeded_check, .ctx = c};
}

/* Every field of two results. */
static void assert_same_result(const vat_sim_result *a,
                               const vat_sim_result *b) {
  ck_assert_int_eq(a->failed, b->failed);
  ck_assert_uint_eq(a->seed, b->seed);
  ck_assert_uint_eq(a->seeds_run, b->seeds_run);
  ck_assert_uint_eq(a->turns, b->turns);
  ck_assert_uint_eq(a->steps, b->steps);
  ck_assert_uint_eq(a->digest, b->digest);
  ck_assert_uint_eq(a->now_ns, b->now_ns);
  ck_assert_uint_eq(a->total_turns, b->total_turns);
  ck_assert_uint_eq(a->total_faults, b->total_faults);
  ck_assert_uint_eq(a->nfaults, b->nfaults);
  for (unsigned i = 0; i < a->nfaults && i < VAT_SIM_MAX_REPORTED_FAULTS; i++) {
    ck_assert_uint_eq(a->faults[i].step, b->faults[i].step);
    ck_assert_int_eq(a->faults[i].kind, b->faults[i].kind);
    ck_assert_uint_eq(a->faults[i].vat, b->faults[i].vat);
  }
  ck_assert_str_eq(a->message, b->message);
  ck_assert_str_eq(a->plan, b->plan);
  ck_assert_str_eq(a->replay, b->replay);
  ck_assert_int_eq(a->verdict, b->verdict);
  ck_assert_uint_eq(a->plan_missed, b->plan_missed);
  ck_assert_int_eq(a->shrunk.done, b->shrunk.done);
  ck_assert_uint_eq(a->shrunk.runs, b->shrunk.runs);
  ck_assert_uint_eq(a->shrunk.turns, b->shrunk.turns);
  ck_assert_uint_eq(a->shrunk.steps, b->shrunk.steps);
  ck_assert_uint_eq(a->shrunk.digest, b->shrunk.digest);
  ck_assert_uint_eq(a->shrunk.nfaults, b->shrunk.nfaults);
  ck_assert_str_eq(a->shrunk.message, b->shrunk.message);
  ck_assert_str_eq(a->shrunk.plan, b->shrunk.plan);
  ck_assert_str_eq(a->shrunk.replay, b->shrunk.replay);
  ck_assert_int_eq(a->trace_written, b->trace_written);
}

/* The campaign run serially and with `jobs` workers gives one result. */
static void assert_parallel_is_serial(const vat_sim_scenario *sc,
                                      vat_sim_options o, uint64_t first,
                                      uint64_t count, unsigned jobs,
                                      vat_sim_result *out) {
  vat_sim_result serial;
  o.jobs = 1;
  ck_assert_vat_ok(vat_sim_run(sc, &o, first, count, &serial));
  o.jobs = jobs;
  ck_assert_vat_ok(vat_sim_run(sc, &o, first, count, out));
  assert_same_result(out, &serial);
}

/* A low failing seed that runs long, and higher ones that fail at once:
 * a worker finds a higher one first, yet the report is the lowest's, with
 * the totals of the seeds up to it alone. */
START_TEST(parallel_reports_the_lowest_failing_seed) {
  seeded_ctx *c = seeded_new();
  c->failing[0] = (listed_seed){13, 20000 / TEST_SCALE};
  c->failing[1] = (listed_seed){40, 2};
  c->failing[2] = (listed_seed){41, 2};
  c->nfailing = 3;
  vat_sim_scenario sc = seeded(c);
  vat_sim_options o = sim_options(VAT_SIM_RANDOM, 0);
  unsigned jobs[] = {2, 3, 0};
  for (unsigned j = 0; j < sizeof jobs / sizeof jobs[0]; j++) {
    vat_sim_result r;
    assert_parallel_is_serial(&sc, o, 1, 64, jobs[j], &r);
    ck_assert(r.failed);
    ck_assert_uint_eq(r.seed, 13);
    ck_assert_uint_eq(r.seeds_run, 13);
    ck_assert_uint_eq(r.total_turns, 12 * 3 + 20000 / TEST_SCALE);
  }
  /* The failing seed ran again here, after the workers: this process
   * made its world (and the serial campaigns' 13 each). */
  ck_assert_uint_eq(c->setups, 3 * 13 + 3);
}
END_TEST

/* The campaign where nothing fails: the last seed's figures, as its worker
 * found them, and totals over all; with faults too. */
START_TEST(parallel_is_serial_when_every_seed_passes) {
  seeded_ctx *c = seeded_new();
  vat_sim_scenario sc = seeded(c);
  uint64_t n = 300 / TEST_SCALE;
  for (int s = VAT_SIM_RANDOM; s <= VAT_SIM_PCT; s++) {
    vat_sim_result r;
    assert_parallel_is_serial(&sc, sim_options(s, 0), 5, n, 2, &r);
    ck_assert(!r.failed);
    ck_assert_uint_eq(r.seed, 5 + n - 1);
    ck_assert_uint_eq(r.seeds_run, n);
    ck_assert_uint_eq(r.total_turns, 3 * n);
    ck_assert_str_eq(r.message, "");
    /* The bank's fixed version, killed and failed by faults on its way. */
    vat_sim_options o = sim_options(s, sim_program_get(SIM_BANK)->fault_rate);
    assert_parallel_is_serial(sim_program_get(SIM_BANK)->fixed, o, 1, 4 * n / 3,
                              0, &r);
    ck_assert(!r.failed);
    ck_assert_uint_ge(r.total_faults, n / 3);
  }
}
END_TEST

/* The bug programs' campaigns, in parallel: the same first failure, its
 * plan and digest, as the serial campaign that the bugs tests check. */
START_TEST(parallel_finds_the_bug_programs_failures_as_serial_does) {
  for (int id = 0; id < SIM_PROGRAMS; id++) {
    const sim_program *p = sim_program_get((sim_program_id)id);
    for (int s = VAT_SIM_RANDOM; s <= VAT_SIM_PCT; s++) {
      vat_sim_options o = sim_options(s, p->fault_rate);
      for (uint64_t first = 1; first < 1 + 400 / TEST_SCALE; first += 100) {
        vat_sim_result r;
        assert_parallel_is_serial(p->buggy, o, first, 200, 2, &r);
        ck_assert(r.failed);
      }
    }
  }
}
END_TEST

/* A failure found in parallel is shrunk and traced in the caller as a
 * serial campaign shrinks and traces it: the same shrunk plan and replay,
 * and the same trace file, byte for byte, under each strategy. */
START_TEST(a_failure_found_in_parallel_is_shrunk_and_traced_as_serially) {
  char serial_path[] = "/tmp/vat-sim-trace-XXXXXX";
  char parallel_path[] = "/tmp/vat-sim-trace-XXXXXX";
  int fd = mkstemp(serial_path);
  ck_assert_int_ge(fd, 0);
  close(fd);
  ck_assert_int_ge(fd = mkstemp(parallel_path), 0);
  close(fd);
  const sim_program *p = sim_program_get(SIM_BANK);
  for (int s = VAT_SIM_RANDOM; s <= VAT_SIM_PCT; s++) {
    vat_sim_options o = sim_options(s, p->fault_rate);
    vat_sim_result serial, parallel;
    o.trace_path = serial_path;
    ck_assert_vat_ok(vat_sim_run(p->buggy, &o, 1, 100, &serial));
    o.trace_path = parallel_path;
    o.jobs = 2;
    ck_assert_vat_ok(vat_sim_run(p->buggy, &o, 1, 100, &parallel));
    ck_assert(serial.failed && serial.shrunk.done && serial.trace_written);
    ck_assert_uint_ge(serial.shrunk.runs, 1);
    assert_same_result(&parallel, &serial);
    size_t a_len, b_len;
    char *a = test_read_file(serial_path, &a_len);
    char *b = test_read_file(parallel_path, &b_len);
    ck_assert(a != NULL && b != NULL);
    ck_assert_uint_gt(a_len, 0);
    ck_assert_uint_eq(a_len, b_len);
    ck_assert(memcmp(a, b, a_len) == 0);
    free(a);
    free(b);
    /* The shrunk plan, given to a parallel campaign, is followed there as
     * here (each worker parses none: the caller's plan is theirs). */
    o.trace_path = NULL;
    o.plan = serial.shrunk.plan;
    o.jobs = 1;
    ck_assert_vat_ok(vat_sim_run(p->buggy, &o, 1, 50, &serial));
    o.jobs = 2;
    ck_assert_vat_ok(vat_sim_run(p->buggy, &o, 1, 50, &parallel));
    assert_same_result(&parallel, &serial);
    ck_assert(serial.failed);
  }
  unlink(serial_path);
  unlink(parallel_path);
}
END_TEST

/* A world whose system cannot be made (the campaign started inside a
 * turn, where vat_system_new refuses, in the workers as here) ends a
 * parallel campaign as it ends a serial one: that error, the seed, why. */
static vat_sim_result in_turn_result[2];
static int in_turn_rc[2];
static void campaigns_in_a_turn(vat_turn *turn, void *state, void *arg) {
  (void)turn, (void)state, (void)arg;
  seeded_ctx *c = seeded_new();
  vat_sim_scenario sc = seeded(c);
  vat_sim_options o = sim_options(VAT_SIM_RANDOM, 0);
  for (unsigned j = 0; j < 2; j++) {
    o.jobs = j + 1;
    in_turn_rc[j] = vat_sim_run(&sc, &o, 7, 20, &in_turn_result[j]);
  }
}

START_TEST(a_world_that_cannot_be_made_ends_a_parallel_campaign_so_too) {
  vat_system *sys = test_host_system(true, 1);
  vat_ref *v = test_spawn(sys, 8, NULL);
  ck_assert_vat_ok(vat_host_send(v, campaigns_in_a_turn, NULL));
  vat_run_result rr;
  ck_assert_vat_ok(vat_system_run_until_quiescent(sys, 0, &rr));
  ck_assert_vat_err(in_turn_rc[0], VAT_EINTURN);
  ck_assert_vat_err(in_turn_rc[1], VAT_EINTURN);
  assert_same_result(&in_turn_result[1], &in_turn_result[0]);
  ck_assert(!in_turn_result[1].failed);
  ck_assert_uint_eq(in_turn_result[1].seed, 7);
  ck_assert_uint_eq(in_turn_result[1].seeds_run, 1);
  ck_assert_msg(strstr(in_turn_result[1].message, "VAT_EINTURN") != NULL, "%s",
                in_turn_result[1].message);
  test_quiesce(sys);
}
END_TEST

/* A campaign of more seeds than the workers take one at a time (1,024):
 * they take them in chunks (here of 3), and the last chunk is shorter. A
 * failure in the middle of a chunk, another in a later chunk. */
START_TEST(a_long_campaign_takes_its_seeds_in_chunks) {
#if VAT_HOSTILE
  return; /* thousands of seeds: too slow with a collection every turn */
#endif
  seeded_ctx *c = seeded_new();
  vat_sim_scenario sc = seeded(c);
  vat_sim_options o = sim_options(VAT_SIM_RANDOM, 0);
  vat_sim_result r;
  assert_parallel_is_serial(&sc, o, 10, 2101, 2, &r);
  ck_assert(!r.failed);
  ck_assert_uint_eq(r.seed, 2110);
  ck_assert_uint_eq(r.total_turns, 2101 * 3);
  c->failing[0] = (listed_seed){1511, 5}; /* the second of its chunk */
  c->failing[1] = (listed_seed){1900, 5};
  c->nfailing = 2;
  assert_parallel_is_serial(&sc, o, 10, 2101, 3, &r);
  ck_assert(r.failed);
  ck_assert_uint_eq(r.seed, 1511);
  ck_assert_uint_eq(r.seeds_run, 1502);
  ck_assert_uint_eq(r.total_turns, 1501 * 3 + 5);
}
END_TEST

/* A seed that fails in a worker and passes here: not deterministic. */
START_TEST(a_seed_that_fails_only_in_a_worker_is_not_deterministic) {
  seeded_ctx *c = seeded_new();
  c->fail_in_workers = 6;
  vat_sim_scenario sc = seeded(c);
  vat_sim_options o = sim_options(VAT_SIM_RANDOM, 0);
  o.jobs = 2;
  vat_sim_result r;
  ck_assert_vat_ok(vat_sim_run(&sc, &o, 1, 50, &r));
  ck_assert(r.failed);
  ck_assert_uint_eq(r.seed, 6);
  ck_assert_uint_eq(r.seeds_run, 6);
  ck_assert_uint_eq(r.turns, 3);
  ck_assert_int_eq(r.verdict, VAT_SIM_NOT_DETERMINISTIC);
  ck_assert(!r.shrunk.done);
  ck_assert_msg(strstr(r.message, "not deterministic: in a worker process 3 "
                                  "turns") == r.message,
                "%s", r.message);
  ck_assert_msg(strstr(r.message, ": failed after 3 turns; run again here: "
                                  "it passed") != NULL,
                "%s", r.message);
}
END_TEST

/* A worker that dies inside a seed fails that seed, by exit or signal; the
 * others stop above it, and what ran below it counts. */
START_TEST(a_worker_that_dies_fails_its_seed) {
  for (int how = 0; how < 2; how++) {
    seeded_ctx *c = seeded_new();
    if (how == 0)
      c->exit_in_workers = 9;
    else
      c->kill_in_workers = 9;
    vat_sim_scenario sc = seeded(c);
    vat_sim_options o = sim_options(VAT_SIM_PCT, 0);
    o.jobs = 3;
    vat_sim_result r;
    ck_assert_vat_ok(vat_sim_run(&sc, &o, 1, 200, &r));
    ck_assert(r.failed);
    ck_assert_uint_eq(r.seed, 9);
    ck_assert_uint_eq(r.seeds_run, 9);
    ck_assert_uint_eq(r.total_turns, 8 * 3);
    ck_assert_uint_eq(r.turns, 0);
    ck_assert_int_eq(r.verdict, VAT_SIM_WORKER_DIED);
    ck_assert_str_eq(r.plan, "unknown");
    const char *want = how == 0 ? "its worker process died running it: it "
                                  "exited with status 7"
                                : "its worker process died running it: it "
                                  "was killed by signal 9";
    ck_assert_msg(strstr(r.message, want) == r.message, "%s", r.message);
    ck_assert_msg(strncmp(r.replay, "VAT_SIM_SEED=9\n# it crashed", 27) == 0,
                  "%s", r.replay);
  }
}
END_TEST

/* A pipe that cannot be made: VAT_EIO with errno, and nothing runs. With
 * room for the first worker's pipe only, the first worker started is
 * stopped and waited for. */
static int lowest_free_fd(void) {
  int fd = dup(0);
  ck_assert_int_ge(fd, 0);
  close(fd);
  return fd;
}

START_TEST(a_pipe_that_cannot_be_made_is_an_error) {
  seeded_ctx *c = seeded_new();
  vat_sim_scenario sc = seeded(c);
  vat_sim_options o = sim_options(VAT_SIM_RANDOM, 0);
  o.jobs = 2;
  struct rlimit old;
  ck_assert_int_eq(getrlimit(RLIMIT_NOFILE, &old), 0);
  for (int room = 0; room <= 2; room += 2) {
    /* Every descriptor below the lowest free one is taken: a limit there
     * leaves `room` descriptors. */
    int fd = lowest_free_fd();
    for (int k = fd + 1; k < fd + 2 + room; k++)
      ck_assert_int_eq(fcntl(k, F_GETFD), -1); /* free too */
    struct rlimit low = {.rlim_cur = (rlim_t)(fd + room),
                         .rlim_max = old.rlim_max};
    ck_assert_int_eq(setrlimit(RLIMIT_NOFILE, &low), 0);
    vat_sim_result r;
    errno = 0;
    int rc = vat_sim_run(&sc, &o, 1, 100, &r);
    int err = errno;
    ck_assert_int_eq(setrlimit(RLIMIT_NOFILE, &old), 0);
    ck_assert_vat_err(rc, VAT_EIO);
    ck_assert_int_eq(err, EMFILE);
    ck_assert_int_eq(lowest_free_fd(), fd); /* nothing left open */
  }
  ck_assert_uint_eq(c->setups, 0);
}
END_TEST

START_TEST(jobs_are_checked_and_one_seed_runs_here) {
  seeded_ctx *c = seeded_new();
  vat_sim_scenario sc = seeded(c);
  vat_sim_options o = sim_options(VAT_SIM_RANDOM, 0);
  vat_sim_result r;
  o.jobs = VAT_SIM_MAX_JOBS + 1;
  ck_assert_vat_err(vat_sim_run(&sc, &o, 1, 10, &r), VAT_EINVAL);
  o.jobs = VAT_SIM_MAX_JOBS;
  ck_assert_vat_ok(vat_sim_replay(&sc, &o, 3, &r)); /* here, not forked */
  ck_assert_uint_eq(c->setups, 1);
  setenv("VAT_SIM_SEED", "4", 1);
  ck_assert_vat_ok(vat_sim_run(&sc, &o, 1, 10, &r));
  unsetenv("VAT_SIM_SEED");
  ck_assert_uint_eq(r.seed, 4);
  ck_assert_uint_eq(c->setups, 2);
  /* More jobs than seeds: a worker per seed at most. */
  ck_assert_vat_ok(vat_sim_run(&sc, &o, 1, 5, &r));
  ck_assert(!r.failed);
  ck_assert_uint_eq(r.seeds_run, 5);
  ck_assert_uint_eq(c->setups, 2);
}
END_TEST

/* --- The progress line ---------------------------------------------------- */

START_TEST(the_progress_line_says_seeds_rates_and_failures) {
  char line[256];
  vat__sim_progress_format(line, sizeof line, "bank", 1234, 10000, 512000, 0,
                           0.5);
  ck_assert_str_eq(line, "sim bank: 1234 of 10000 seeds (12%), 2.5 k seeds/s,"
                         " 1.02 M turns/s, 0 failed");
  vat__sim_progress_format(line, sizeof line, "x", 9999, 10000, 999, 2, 0);
  ck_assert_str_eq(line, "sim x: 9999 of 10000 seeds (99%), 0 seeds/s, 0 "
                         "turns/s, 2 failed");
  /* 100% only once every seed ran, even where a double cannot tell the
   * seeds run from the count. */
  vat__sim_progress_format(line, sizeof line, "x", UINT64_MAX - 1, UINT64_MAX,
                           0, 0, 1);
  ck_assert_msg(strstr(line, " seeds (99%), ") != NULL, "%s", line);
  vat__sim_progress_format(line, sizeof line, "x", 10, 10, 5, 0, 2);
  ck_assert_str_eq(line, "sim x: 10 of 10 seeds (100%), 5 seeds/s, 2 turns/s,"
                         " 0 failed");
}
END_TEST

/* A pseudo-terminal: what is written to its slave side is read from its
 * master side. */
typedef struct tty {
  int master, slave;
} tty;

static bool tty_open(tty *t) {
  t->master = posix_openpt(O_RDWR | O_NOCTTY);
  if (t->master < 0)
    return false;
  ck_assert_int_eq(grantpt(t->master), 0);
  ck_assert_int_eq(unlockpt(t->master), 0);
  t->slave = open(ptsname(t->master), O_RDWR | O_NOCTTY);
  ck_assert_int_ge(t->slave, 0);
  ck_assert(isatty(t->slave));
  return true;
}

/* Everything written to the terminal so far. A pseudo-terminal passes
 * what its slave side was written to the master side later, not at once:
 * a mark written after it comes after it, so read until the mark. */
static size_t tty_read(tty *t, char *buf, size_t size) {
  static const char mark[] = "<end of test output>";
  ck_assert_int_eq(write(t->slave, mark, sizeof mark - 1),
                   (ssize_t)sizeof mark - 1);
  size_t len = 0;
  double give_up = test_wall_seconds() + 10;
  while (len < sizeof mark - 1 ||
         memcmp(buf + len - (sizeof mark - 1), mark, sizeof mark - 1) != 0) {
    ck_assert_msg(len + 1 < size && test_wall_seconds() < give_up,
                  "no mark from the terminal: %zu bytes", len);
    struct pollfd p = {.fd = t->master, .events = POLLIN};
    if (poll(&p, 1, 100) <= 0)
      continue;
    ssize_t n = read(t->master, buf + len, size - 1 - len);
    ck_assert_int_gt(n, 0);
    len += (size_t)n;
  }
  len -= sizeof mark - 1;
  buf[len] = '\0';
  return len;
}

static void tty_close(tty *t) {
  close(t->slave);
  close(t->master);
}

START_TEST(progress_shows_on_a_terminal_and_is_erased) {
  tty t;
  if (!tty_open(&t)) {
    fprintf(stderr, "no pseudo-terminal here: %s; skipped\n", strerror(errno));
    return;
  }
  /* A campaign shorter than a second shows nothing: the first draw is
   * due a second after it began. */
  unsetenv("VAT_SIM_PROGRESS");
  vat__sim_progress p;
  vat__sim_progress_begin(&p, t.slave, "ring", 100);
  ck_assert(!vat__sim_progress_due(&p));
  setenv("VAT_SIM_PROGRESS", "1", 1); /* at once, not after a second */
  vat__sim_progress_begin(&p, t.slave, "ring", 100);
  ck_assert(vat__sim_progress_due(&p));
  vat__sim_progress_update(&p, 40, 400, 1);
  ck_assert(!vat__sim_progress_due(&p)); /* the next in a quarter second */
  vat__sim_progress_update(&p, 41, 410, 1);
  vat__sim_progress_end(&p);
  char got[512];
  tty_read(&t, got, sizeof got);
  ck_assert_msg(strncmp(got, "\rsim ring: 40 of 100 seeds (40%), ", 34) == 0,
                "%s", got);
  ck_assert_msg(strstr(got, " turns/s, 1 failed\033[K\r\033[K") != NULL &&
                    strstr(got, "41 of") == NULL,
                "%s", got);
  /* Off with VAT_SIM_PROGRESS=0, and for one seed: no line, ever (not
   * even after the first second: the line has no terminal). */
  setenv("VAT_SIM_PROGRESS", "0", 1);
  vat__sim_progress_begin(&p, t.slave, "ring", 100);
  ck_assert_int_eq(p.fd, -1);
  vat__sim_progress_update(&p, 40, 400, 1);
  vat__sim_progress_end(&p);
  setenv("VAT_SIM_PROGRESS", "1", 1);
  vat__sim_progress_begin(&p, t.slave, "ring", 1);
  vat__sim_progress_update(&p, 1, 400, 1);
  vat__sim_progress_end(&p);
  ck_assert_uint_eq(tty_read(&t, got, sizeof got), 0);
  unsetenv("VAT_SIM_PROGRESS");
  tty_close(&t);
}
END_TEST

/* A whole campaign with stderr on `fd`. */
static void campaign_on_stderr(int fd, unsigned jobs) {
  seeded_ctx *c = seeded_new();
  vat_sim_scenario sc = seeded(c);
  vat_sim_options o = sim_options(VAT_SIM_RANDOM, 0);
  o.jobs = jobs;
  fflush(stderr);
  int saved = dup(STDERR_FILENO);
  ck_assert_int_ge(saved, 0);
  ck_assert_int_ge(dup2(fd, STDERR_FILENO), 0);
  vat_sim_result r;
  int rc = vat_sim_run(&sc, &o, 1, 200 / TEST_SCALE, &r);
  dup2(saved, STDERR_FILENO);
  close(saved);
  ck_assert_vat_ok(rc);
  ck_assert(!r.failed);
}

/* The same, serial and parallel, with stderr on a terminal: a line,
 * erased at the end; with stderr on a pipe: nothing at all. */

START_TEST(a_campaign_draws_progress_on_a_terminal_only) {
  setenv("VAT_SIM_PROGRESS", "1", 1);
  char got[4096];
  for (unsigned jobs = 1; jobs <= 2; jobs++) {
    int fds[2];
    ck_assert_int_eq(pipe(fds), 0);
    campaign_on_stderr(fds[1], jobs);
    close(fds[1]); /* a pipe passes what it was written at once */
    ck_assert_int_eq(read(fds[0], got, sizeof got), 0);
    close(fds[0]);
    tty t;
    if (!tty_open(&t))
      continue;
    campaign_on_stderr(t.slave, jobs);
    size_t len = tty_read(&t, got, sizeof got);
    ck_assert_msg(strncmp(got, "\rsim seeded: ", 13) == 0, "%s", got);
    ck_assert_msg(len >= 4 && strcmp(got + len - 4, "\r\033[K") == 0, "%s",
                  got);
    tty_close(&t);
  }
  unsetenv("VAT_SIM_PROGRESS");
}
END_TEST

/* --- Bounds on a seed's real time and memory ------------------------------
 * A vat that sends itself a message forever, each turn burning real time
 * (`spin_ns` of it) or keeping memory (`keep` bytes), and never done: a
 * seed bounded only by max_turns would take long and grow large. */

typedef struct hog_ctx {
  uint64_t spin_ns;
  size_t keep;
} hog_ctx;

typedef struct hog {
  const hog_ctx *how;
  void **kept; /* a list: each node's first word is the next */
} hog;

static uint64_t real_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void hog_turn(vat_turn *turn, void *state, void *arg) {
  hog *w = *(hog **)state;
  if (w->how->spin_ns)
    for (uint64_t t0 = real_now(); real_now() - t0 < w->how->spin_ns;)
      ;
  if (w->how->keep) {
    void **node = GC_MALLOC(2 * sizeof *node);
    node[0] = w->kept;
    node[1] = GC_MALLOC_ATOMIC(w->how->keep);
    memset(node[1], 1, w->how->keep);
    w->kept = node;
  }
  expect_vat_ok(vat_send(turn, vat_self(turn), hog_turn, arg));
}

static void *hog_setup(vat_system *sys, void *ctx) {
  hog *w = GC_MALLOC(sizeof *w);
  w->how = ctx;
  hog **st;
  vat_ref *v;
  vat_entity_def def = {.state_size = sizeof *st, .label = "hog"};
  if (vat_host_spawn(sys, &def, &v, (void **)&st) != VAT_OK)
    return NULL;
  *st = w;
  vat_host_send(v, hog_turn, NULL);
  return w;
}

static bool hog_done(void *world) {
  (void)world;
  return false;
}

/* The first line of a replay: the assignments to paste, alone. */
static void assert_replay_of(const vat_sim_result *r) {
  char want[64];
  snprintf(want, sizeof want, "VAT_SIM_SEED=%llu\n",
           (unsigned long long)r->seed);
  ck_assert_msg(strncmp(r->replay, want, strlen(want)) == 0, "%s", r->replay);
}

START_TEST(a_seed_past_its_real_time_bound_is_reported) {
  hog_ctx how = {.spin_ns = 2000000};
  vat_sim_scenario sc = {
      .name = "spinner", .setup = hog_setup, .done = hog_done, .ctx = &how};
  vat_sim_options o = sim_options(VAT_SIM_RANDOM, 0);
  o.max_turns = 2000; /* 4 s: the bound must come first */
  o.max_seed_time_ns = 60000000;
  vat_sim_result r;
  uint64_t t0 = real_now();
  ck_assert_vat_ok(vat_sim_run(&sc, &o, 5, 3, &r));
  ck_assert_uint_lt(real_now() - t0, 2000000000); /* slow builds too */
  ck_assert(r.failed);
  ck_assert_uint_eq(r.seed, 5);
  ck_assert_uint_eq(r.verdict, VAT_SIM_OUT_OF_TIME);
  ck_assert_uint_lt(r.turns, 1000);
  ck_assert_msg(strstr(r.message, "real time") != NULL &&
                    strstr(r.message, "60ms") != NULL,
                "%s", r.message);
  ck_assert(!r.shrunk.done); /* each run would cost the bound again */
  assert_replay_of(&r);
  /* In parallel too: the worker's report, not a run here again. */
  o.jobs = 2;
  ck_assert_vat_ok(vat_sim_run(&sc, &o, 5, 4, &r));
  ck_assert(r.failed);
  ck_assert_uint_eq(r.seed, 5);
  ck_assert_uint_eq(r.verdict, VAT_SIM_OUT_OF_TIME);
  assert_replay_of(&r);
  /* VAT_SIM_MAX_SEED_TIME, a time as plans write one, wins. */
  o.jobs = 1;
  o.max_seed_time_ns = 0; /* no bound */
  setenv("VAT_SIM_MAX_SEED_TIME", "40ms", 1);
  ck_assert_vat_ok(vat_sim_run(&sc, &o, 5, 1, &r));
  ck_assert_uint_eq(r.verdict, VAT_SIM_OUT_OF_TIME);
  ck_assert_msg(strstr(r.message, "40ms") != NULL, "%s", r.message);
  setenv("VAT_SIM_MAX_SEED_TIME", "soon", 1);
  ck_assert_vat_err(vat_sim_run(&sc, &o, 5, 1, &r), VAT_EINVAL);
  ck_assert_msg(strstr(r.message, "VAT_SIM_MAX_SEED_TIME") != NULL, "%s",
                r.message);
  unsetenv("VAT_SIM_MAX_SEED_TIME");
}
END_TEST

START_TEST(a_seed_past_its_memory_bound_is_reported) {
  hog_ctx how = {.keep = 1u << 20};
  vat_sim_scenario sc = {
      .name = "hoarder", .setup = hog_setup, .done = hog_done, .ctx = &how};
  vat_sim_options o = sim_options(VAT_SIM_RANDOM, 0);
  o.max_turns = 96; /* 96 MiB: the bound must come first */
  o.max_seed_memory = 16u << 20;
  vat_sim_result r;
  ck_assert_vat_ok(vat_sim_run(&sc, &o, 9, 3, &r));
  ck_assert(r.failed);
  ck_assert_uint_eq(r.seed, 9);
  ck_assert_uint_eq(r.verdict, VAT_SIM_OUT_OF_MEMORY);
  ck_assert_uint_lt(r.turns, 96);
  ck_assert_msg(strstr(r.message, "memory") != NULL &&
                    strstr(r.message, "16 MiB") != NULL,
                "%s", r.message);
  ck_assert(!r.shrunk.done);
  assert_replay_of(&r);
  o.max_seed_memory = 0;
  setenv("VAT_SIM_MAX_SEED_MEMORY", "8MiB", 1);
  ck_assert_vat_ok(vat_sim_run(&sc, &o, 9, 1, &r));
  ck_assert_uint_eq(r.verdict, VAT_SIM_OUT_OF_MEMORY);
  ck_assert_msg(strstr(r.message, "8 MiB") != NULL, "%s", r.message);
  setenv("VAT_SIM_MAX_SEED_MEMORY", "lots", 1);
  ck_assert_vat_err(vat_sim_run(&sc, &o, 9, 1, &r), VAT_EINVAL);
  ck_assert_msg(strstr(r.message, "VAT_SIM_MAX_SEED_MEMORY") != NULL, "%s",
                r.message);
  unsetenv("VAT_SIM_MAX_SEED_MEMORY");
}
END_TEST

Suite *test_sim_campaign_suite(void) {
  Suite *s = suite_create("sim_campaign");
  TCase *par = test_case("parallel", 300);
  tcase_add_test(par, parallel_reports_the_lowest_failing_seed);
  tcase_add_test(par, parallel_is_serial_when_every_seed_passes);
  tcase_add_test(par, parallel_finds_the_bug_programs_failures_as_serial_does);
  tcase_add_test(par,
                 a_failure_found_in_parallel_is_shrunk_and_traced_as_serially);
  tcase_add_test(par,
                 a_world_that_cannot_be_made_ends_a_parallel_campaign_so_too);
  tcase_add_test(par, a_long_campaign_takes_its_seeds_in_chunks);
  tcase_add_test(par, a_seed_that_fails_only_in_a_worker_is_not_deterministic);
  tcase_add_test(par, a_worker_that_dies_fails_its_seed);
  tcase_add_test(par, a_pipe_that_cannot_be_made_is_an_error);
  tcase_add_test(par, jobs_are_checked_and_one_seed_runs_here);
  suite_add_tcase(s, par);
  TCase *bounds = test_case("bounds", 120);
  tcase_add_test(bounds, a_seed_past_its_real_time_bound_is_reported);
  tcase_add_test(bounds, a_seed_past_its_memory_bound_is_reported);
  suite_add_tcase(s, bounds);
  TCase *progress = test_case("progress", 60);
  tcase_add_test(progress, the_progress_line_says_seeds_rates_and_failures);
  tcase_add_test(progress, progress_shows_on_a_terminal_and_is_erased);
  tcase_add_test(progress, a_campaign_draws_progress_on_a_terminal_only);
  suite_add_tcase(s, progress);
  return s;
}
