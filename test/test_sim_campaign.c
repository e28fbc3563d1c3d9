/* Simulation campaigns (vat/sim.h): the progress line shows on a
 * terminal only. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
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
  vat__sim_progress_format(line, sizeof line, "x", 10, 10, 5, 0, 2);
  ck_assert_str_eq(line, "sim x: 10 of 10 seeds (100%), 5 seeds/s, 2 turns/s,"
                         " 0 failed");
}
END_TEST

/* A pseudo-terminal, and stderr on it for the length of a campaign. */
typedef struct tty {
  int master, slave, saved_stderr;
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

/* What the terminal got, without blocking. */
static size_t tty_read(tty *t, char *buf, size_t size) {
  int flags = fcntl(t->master, F_GETFL);
  fcntl(t->master, F_SETFL, flags | O_NONBLOCK);
  size_t len = 0;
  ssize_t n;
  while (len + 1 < size && (n = read(t->master, buf + len, size - 1 - len)) > 0)
    len += (size_t)n;
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
  /* Off with VAT_SIM_PROGRESS=0, and for one seed. */
  setenv("VAT_SIM_PROGRESS", "0", 1);
  vat__sim_progress_begin(&p, t.slave, "ring", 100);
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

/* A whole campaign with stderr on a terminal: a line, erased at the end;
 * with stderr on a pipe: nothing at all. */
static size_t campaign_on_stderr(int fd, char *got, size_t size, int read_fd) {
  seeded_ctx *c = seeded_new();
  vat_sim_scenario sc = seeded(c);
  vat_sim_options o = sim_options(VAT_SIM_RANDOM, 0);
  fflush(stderr);
  int saved = dup(STDERR_FILENO);
  ck_assert_int_ge(saved, 0);
  ck_assert_int_ge(dup2(fd, STDERR_FILENO), 0);
  vat_sim_result r;
  int rc = vat_sim_run(&sc, &o, 1, 200, &r);
  dup2(saved, STDERR_FILENO);
  close(saved);
  ck_assert_vat_ok(rc);
  ck_assert(!r.failed);
  int flags = fcntl(read_fd, F_GETFL);
  fcntl(read_fd, F_SETFL, flags | O_NONBLOCK);
  size_t len = 0;
  ssize_t n;
  while (len + 1 < size && (n = read(read_fd, got + len, size - 1 - len)) > 0)
    len += (size_t)n;
  got[len] = '\0';
  return len;
}

START_TEST(a_campaign_draws_progress_on_a_terminal_only) {
  setenv("VAT_SIM_PROGRESS", "1", 1);
  char got[4096];
  int fds[2];
  ck_assert_int_eq(pipe(fds), 0);
  ck_assert_uint_eq(campaign_on_stderr(fds[1], got, sizeof got, fds[0]), 0);
  close(fds[0]);
  close(fds[1]);
  tty t;
  if (tty_open(&t)) {
    size_t len = campaign_on_stderr(t.slave, got, sizeof got, t.master);
    ck_assert_msg(strncmp(got, "\rsim seeded: ", 13) == 0, "%s", got);
    ck_assert_msg(len >= 4 && strcmp(got + len - 4, "\r\033[K") == 0, "%s",
                  got);
    tty_close(&t);
  }
  unsetenv("VAT_SIM_PROGRESS");
}
END_TEST

Suite *test_sim_campaign_suite(void) {
  Suite *s = suite_create("sim_campaign");
  TCase *progress = test_case("progress", 60);
  tcase_add_test(progress, the_progress_line_says_seeds_rates_and_failures);
  tcase_add_test(progress, progress_shows_on_a_terminal_and_is_erased);
  tcase_add_test(progress, a_campaign_draws_progress_on_a_terminal_only);
  suite_add_tcase(s, progress);
  return s;
}
