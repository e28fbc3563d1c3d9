/* Simulation testing (vat/sim.h): a failure replays exactly in another
 * process. A campaign fails here; its replay line, split as a shell splits
 * it and run by /bin/sh, starts this test program again (the replay-child
 * case, below) with VAT_SIM_SEED and VAT_SIM_PLAN as the line sets them;
 * the child runs the same scenario and options and reports what it got,
 * which must be what the campaign reported: the message, turns, steps,
 * digest and plan. For the seed's drawn faults, for the shrunk run, for a
 * plan of each fault kind, and for vats whose labels a plan cannot name. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gc/gc.h>

#include "json.h"
#include "sim_programs.h"
#include "support.h"
#include "trace_check.h"
#include "vat/exits.h"
#include "vat/host.h"
#include "vat/promise.h"
#include "vat/sim.h"
#include "vat/timer.h"

extern char **environ;

static vat_ref *spawn_with(vat_system *sys, const char *label, void *world) {
  vat_ref *v;
  void **st;
  vat_entity_def def = {.state_size = sizeof *st, .label = label};
  if (vat_host_spawn(sys, &def, &v, (void **)&st) != VAT_OK)
    return NULL;
  *st = world;
  return v;
}

#define WORLD(type, state) ((type *)*(void **)(state))

/* --- An office: one program that each fault kind breaks its own way -------
 * vault-a pays vault-b (money in flight to a dead vault is lost); a
 * ticker must tick on time; a client pays once through a service that
 * answers after a second, and (the bug) pays again when its call breaks;
 * two senders send notes to a desk, which sees one overtake another
 * committed before it. So a kill or failed turn of a vault loses money or
 * credits, a jitter makes a tick late, a timeout charges twice, a delay
 * reorders notes, and a stop leaves credits unpaid. */

enum { TRANSFERS = 6, AMOUNT = 5, OPENING = 100, TICKS = 3, NOTES = 6 };
#define TICK_S 0.25
#define TICK_NS 250000000ull

typedef struct office {
  vat_system *sys;
  uint64_t start;
  vat_ref *vault_a, *vault_b, *ticker, *client, *service, *desk, *sender[2];
  int64_t balance_a, balance_b, in_flight;
  unsigned credits, charged, nfired;
  vat_timer *every;
  uint64_t committed, newest;
  char broken[128];
} office;

static void office_broke(office *w, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void office_broke(office *w, const char *fmt, ...) {
  if (w->broken[0])
    return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(w->broken, sizeof w->broken, fmt, ap);
  va_end(ap);
}

static void credit(vat_turn *turn, void *state, void *arg) {
  (void)turn, (void)arg;
  office *w = WORLD(office, state);
  w->balance_b += AMOUNT;
  w->in_flight -= AMOUNT;
  w->credits++;
}

static void debit(vat_turn *turn, void *state, void *arg) {
  (void)arg;
  office *w = WORLD(office, state);
  w->balance_a -= AMOUNT;
  w->in_flight += AMOUNT;
  expect_vat_ok(vat_send(turn, w->vault_b, credit, NULL));
}

static void tick(vat_turn *turn, void *state, void *arg) {
  (void)turn, (void)arg;
  office *w = WORLD(office, state);
  uint64_t at = vat_system_now(w->sys) - w->start;
  w->nfired++;
  if (at != w->nfired * TICK_NS)
    office_broke(w, "tick %u late: at %.3f ms, due %.3f ms", w->nfired,
                 at * 1e-6, w->nfired * TICK_NS * 1e-6);
  if (w->nfired == TICKS)
    vat_timer_cancel(w->every);
}

static void start_ticking(vat_turn *turn, void *state, void *arg) {
  (void)arg;
  office *w = WORLD(office, state);
  expect_vat_ok(vat_every(turn, TICK_S, vat_self(turn), tick, NULL, &w->every));
}

static void answer(vat_turn *turn, void *state, void *arg) {
  office *w = WORLD(office, state);
  expect_vat_ok(vat_resolve(turn, arg, vat_int(w->charged)));
}

static void charge(vat_turn *turn, void *state, void *arg,
                   vat_resolver *resolver) {
  (void)arg;
  office *w = WORLD(office, state);
  w->charged++;
  expect_vat_ok(vat_later(turn, 1.0, vat_self(turn), answer, resolver, NULL));
}

static void pay(vat_turn *turn, void *state, void *arg);

static void paid(vat_turn *turn, void *state, void *ctx, bool resolved,
                 vat_value value) {
  (void)value;
  if (!resolved && ctx == NULL) /* the bug: pays again */
    pay(turn, state, (void *)1);
}

static void pay(vat_turn *turn, void *state, void *arg) {
  office *w = WORLD(office, state);
  vat_promise *p;
  expect_vat_ok(vat_call(turn, w->service, charge, NULL, 5.0, &p));
  expect_vat_ok(vat_when(turn, p, paid, arg));
}

typedef struct note {
  unsigned from, n;
  uint64_t committed; /* its place among all notes, in commit order */
} note;

static void take_note(vat_turn *turn, void *state, void *arg) {
  (void)turn;
  office *w = WORLD(office, state);
  const note *m = arg;
  if (m->committed < w->newest)
    office_broke(w, "note %u of s%u overtook one committed before it", m->n,
                 m->from);
  else
    w->newest = m->committed;
}

static void send_notes(vat_turn *turn, void *state, void *arg) {
  office *w = WORLD(office, state);
  unsigned from = (unsigned)((uintptr_t)arg & 1),
           n = (unsigned)((uintptr_t)arg >> 1);
  note *m = GC_MALLOC(sizeof *m);
  *m = (note){from, n, ++w->committed};
  expect_vat_ok(vat_send(turn, w->desk, take_note, m));
  if (n + 1 < NOTES)
    expect_vat_ok(vat_send(turn, vat_self(turn), send_notes,
                           (void *)(uintptr_t)((n + 1) << 1 | from)));
}

static void *office_setup(vat_system *sys, void *ctx) {
  (void)ctx;
  office *w = GC_MALLOC(sizeof *w);
  w->sys = sys;
  w->start = vat_system_now(sys);
  w->balance_a = w->balance_b = OPENING;
  if (!(w->vault_a = spawn_with(sys, "vault-a", w)) ||
      !(w->vault_b = spawn_with(sys, "vault-b", w)) ||
      !(w->ticker = spawn_with(sys, "ticker", w)) ||
      !(w->client = spawn_with(sys, "client", w)) ||
      !(w->service = spawn_with(sys, "payments", w)) ||
      !(w->desk = spawn_with(sys, "desk", w)) ||
      !(w->sender[0] = spawn_with(sys, "s0", w)) ||
      !(w->sender[1] = spawn_with(sys, "s1", w)))
    return NULL;
  for (int i = 0; i < TRANSFERS; i++)
    vat_host_send(w->vault_a, debit, NULL);
  vat_host_send(w->ticker, start_ticking, NULL);
  vat_host_send(w->client, pay, NULL);
  vat_host_send(w->sender[0], send_notes, (void *)0);
  vat_host_send(w->sender[1], send_notes, (void *)1);
  return w;
}

static bool office_check(void *world, bool quiescent, char *why, size_t n) {
  office *w = world;
  int64_t counted = w->balance_a + w->balance_b;
  if (!vat_ref_is_dead(w->vault_b))
    counted += w->in_flight;
  if (counted != 2 * OPENING)
    snprintf(why, n, "money lost: %lld in flight to a dead vault",
             (long long)(2 * OPENING - counted));
  else if (w->charged > 1)
    snprintf(why, n, "charged %u times", w->charged);
  else if (w->broken[0])
    snprintf(why, n, "%s", w->broken);
  else if (quiescent && w->credits != TRANSFERS)
    snprintf(why, n, "%u of %d credits paid", w->credits, TRANSFERS);
  else
    return true;
  return false;
}

static const vat_sim_scenario office_sc = {
    .name = "office", .setup = office_setup, .check = office_check};

/* --- Labels a plan cannot write -------------------------------------------
 * A token goes round a ring of vats LAPS times; a vat that dies stops it.
 * The vats' labels include quotes, blanks, shell and plan punctuation,
 * non-ASCII text, none, and duplicates: a plan names those vat#I. */

enum { RING = 13, LAPS = 4 };
static const char *const ring_labels[RING] = {
    "it's",  "two words",         "semi;colon", "dq\"uote", "back\\slash",
    "$HOME", "\xc3\xbcn\xc3\xaf", NULL,         "",         "dup",
    "dup",   "plain-1.x_y",       "none"};

typedef struct ring {
  vat_ref *v[RING];
  unsigned hops;
  /* The ring's places in the order their vats first had a message, which
   * is the order the harness numbers vats in (vat#I). */
  unsigned order[RING], seen;
  bool sent[RING];
} ring;

static void pass_token(vat_turn *turn, void *state, void *arg);

static void ring_send(ring *w, vat_turn *turn, unsigned to) {
  if (!w->sent[to]) {
    w->sent[to] = true;
    w->order[w->seen++] = to;
  }
  if (turn)
    expect_vat_ok(vat_send(turn, w->v[to], pass_token, (void *)(uintptr_t)to));
  else
    vat_host_send(w->v[to], pass_token, (void *)(uintptr_t)to);
}

static void pass_token(vat_turn *turn, void *state, void *arg) {
  ring *w = WORLD(ring, state);
  unsigned at = (unsigned)(uintptr_t)arg;
  w->hops++;
  if (w->hops < RING * LAPS)
    ring_send(w, turn, (at + 1) % RING);
}

static ring *last_ring; /* the world built last */
static void *ring_setup(vat_system *sys, void *ctx) {
  (void)ctx;
  ring *w = GC_MALLOC(sizeof *w);
  for (int i = 0; i < RING; i++)
    if (!(w->v[i] = spawn_with(sys, ring_labels[i], w)))
      return NULL;
  ring_send(w, NULL, 0);
  ring_send(w, NULL, RING / 2);
  return last_ring = w;
}

static bool ring_done(void *world) {
  return ((ring *)world)->hops >= RING * LAPS;
}

static const vat_sim_scenario ring_sc = {
    .name = "ring", .setup = ring_setup, .done = ring_done};

/* --- The configurations both processes run -------------------------------- */

typedef struct replay_config {
  const char *name;
  const vat_sim_scenario *sc;
  vat_sim_strategy strategy;
  double fault_rate; /* drawn faults, default kinds, up to 6 */
} replay_config;

static const replay_config configs[] = {
    {"office-random", &office_sc, VAT_SIM_RANDOM, 0.2},
    {"office-pct", &office_sc, VAT_SIM_PCT, 0.2},
    {"office-planned", &office_sc, VAT_SIM_RANDOM, 0},
    {"ring-random", &ring_sc, VAT_SIM_RANDOM, 0.15},
};

static vat_sim_options config_options(const replay_config *c) {
  vat_sim_options o = sim_options(c->strategy, c->fault_rate);
  o.max_faults = 6;
  return o;
}

static const replay_config *config_named(const char *name) {
  for (size_t i = 0; name && i < sizeof configs / sizeof configs[0]; i++)
    if (strcmp(configs[i].name, name) == 0)
      return &configs[i];
  return NULL;
}

/* --- The child ------------------------------------------------------------ */

/* What the child says, one "sim-replay: key=value" line each (the rest of
 * its output is Check's). */
static void say_text(const char *key, const char *value) {
  printf("sim-replay: %s=%s\n", key, value ? value : "(unset)");
}

static void say_number(const char *key, uint64_t value) {
  printf("sim-replay: %s=%" PRIu64 "\n", key, value);
}

/* Runs in the child only (the suite has it when VAT_SIM_REPLAY_CHILD names
 * a configuration): the campaign the line asks for, as a user's program
 * would run it, VAT_SIM_SEED and VAT_SIM_PLAN from the environment. */
START_TEST(replay_child) {
  const replay_config *c = config_named(getenv("VAT_SIM_REPLAY_CHILD"));
  ck_assert_ptr_nonnull(c);
  vat_sim_options o = config_options(c);
  vat_sim_result r;
  ck_assert_vat_ok(vat_sim_run(c->sc, &o, 1, 1000, &r));
  say_text("env-seed", getenv("VAT_SIM_SEED"));
  say_text("env-plan", getenv("VAT_SIM_PLAN"));
  say_number("seed", r.seed);
  say_number("seeds-run", r.seeds_run);
  say_number("failed", r.failed);
  say_number("verdict", r.verdict);
  say_number("turns", r.turns);
  say_number("steps", r.steps);
  say_number("digest", r.digest);
  say_number("now", r.now_ns);
  say_number("trace-written", r.trace_written);
  say_text("plan", r.plan);
  say_text("message", r.message);
  fflush(stdout);
}
END_TEST

/* --- The parent ----------------------------------------------------------- */

typedef struct child_report {
  char env_seed[32], env_plan[VAT_SIM_PLAN_SIZE];
  uint64_t seed, seeds_run, failed, verdict, turns, steps, digest, now;
  uint64_t trace_written;
  char plan[VAT_SIM_PLAN_SIZE], message[256];
} child_report;

/* A shell word's assignment NAME=VALUE, VALUE unquoted. */
typedef struct assignment {
  char name[32];
  char value[VAT_SIM_PLAN_SIZE];
} assignment;

static bool name_char(char c, bool first) {
  return c == '_' || (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
         (!first && c >= '0' && c <= '9');
}

/* Splits the start of `text` as a POSIX shell splits words (blanks; single
 * quotes; double quotes with \ before $ ` " \; a backslash elsewhere),
 * taking the words that are assignments, up to the first word that is not
 * or an operator; their number, and in *end where they end in `text`. -1
 * on a quote not closed. */
static int shell_assignments(const char *text, assignment *out, int max,
                             size_t *end) {
  const char *at = text;
  int n = 0;
  *end = 0;
  for (;;) {
    while (*at == ' ' || *at == '\t')
      at++;
    const char *word = at;
    size_t k = 0;
    for (; name_char(*at, at == word); at++)
      if (k + 1 < sizeof out[n].name)
        out[n].name[k++] = *at;
    if (n == max || at == word || *at != '=')
      return n; /* not an assignment: a command word, an operator, the end */
    out[n].name[k] = '\0';
    at++;
    char *v = out[n].value;
    size_t len = 0, cap = sizeof out[n].value;
    while (*at && *at != ' ' && *at != '\t' && !strchr("()|&;<>", *at)) {
      if (*at == '\'') {
        const char *close = strchr(at + 1, '\'');
        if (close == NULL)
          return -1;
        for (at++; at < close; at++)
          if (len + 1 < cap)
            v[len++] = *at;
        at++;
      } else if (*at == '"') {
        for (at++; *at && *at != '"'; at++) {
          if (*at == '\\' && strchr("$`\"\\", at[1]))
            at++;
          if (len + 1 < cap)
            v[len++] = *at;
        }
        if (*at != '"')
          return -1;
        at++;
      } else {
        if (*at == '\\' && at[1])
          at++;
        if (len + 1 < cap)
          v[len++] = *at;
        at++;
      }
    }
    v[len] = '\0';
    n++;
    *end = (size_t)(at - text);
  }
}

static const char *value_of(const char *line, const char *key) {
  static char buf[VAT_SIM_PLAN_SIZE];
  char want[64];
  snprintf(want, sizeof want, "sim-replay: %s=", key);
  const char *at = strstr(line, want);
  if (at == NULL)
    return NULL;
  at += strlen(want);
  size_t n = strcspn(at, "\n");
  if (n >= sizeof buf)
    n = sizeof buf - 1;
  memcpy(buf, at, n);
  buf[n] = '\0';
  return buf;
}

static uint64_t number_of(const char *out, const char *key) {
  const char *v = value_of(out, key);
  ck_assert_msg(v != NULL, "the child did not say %s:\n%s", key, out);
  return strtoull(v, NULL, 10);
}

static void text_of(const char *out, const char *key, char *buf, size_t size) {
  const char *v = value_of(out, key);
  ck_assert_msg(v != NULL, "the child did not say %s:\n%s", key, out);
  snprintf(buf, size, "%s", v);
}

/* The environment the child starts with: this one without the variables
 * the replay line sets (or the child's case reads), and with those it
 * needs. */
static char **child_environment(const char *config, const char *trace_path) {
  static const char *drop[] = {
      "VAT_SIM_SEED=",         "VAT_SIM_PLAN=", "VAT_SIM_TRACE=",
      "VAT_SIM_REPLAY_CHILD=", "CK_RUN_CASE=",  "CK_RUN_SUITE="};
  size_t n = 0;
  while (environ[n])
    n++;
  char **env = GC_MALLOC((n + 4) * sizeof *env);
  size_t k = 0;
  for (size_t i = 0; i < n; i++) {
    bool keep = true;
    for (size_t d = 0; d < sizeof drop / sizeof drop[0]; d++)
      keep = keep && strncmp(environ[i], drop[d], strlen(drop[d])) != 0;
    if (keep)
      env[k++] = environ[i];
  }
  env[k++] = "CK_RUN_CASE=replay-child";
  char *c = GC_MALLOC(64);
  snprintf(c, 64, "VAT_SIM_REPLAY_CHILD=%s", config);
  env[k++] = c;
  if (trace_path != NULL) {
    size_t len = strlen(trace_path) + 32;
    char *t = GC_MALLOC(len);
    snprintf(t, len, "VAT_SIM_TRACE=%s", trace_path);
    env[k++] = t;
  }
  env[k] = NULL;
  return env;
}

/* Runs `replay` (a result's replay line) in a new process of this program
 * under /bin/sh, as a person would paste its assignments before the
 * program's command, with configuration `config`; the child's report. The
 * line's assignments, split here as a shell splits them, must be exactly
 * VAT_SIM_SEED=`seed` and, when `plan` is not NULL, VAT_SIM_PLAN=`plan`;
 * the child reads them back from its environment. With `trace_path`, the
 * child writes its failing run's trace there (VAT_SIM_TRACE). */
static void replay_in_child(const char *config, const char *replay,
                            uint64_t seed, const char *plan,
                            const char *trace_path, child_report *out) {
  /* Its first line, the assignments and nothing else; its second, a
   * shell comment. */
  const char *nl = strchr(replay, '\n');
  ck_assert_msg(nl != NULL && nl[1] == '#' && strchr(nl + 1, '\n') == NULL,
                "%s", replay);
  char line[VAT_SIM_PLAN_SIZE + 256];
  snprintf(line, sizeof line, "%.*s", (int)(nl - replay), replay);
  assignment as[4];
  size_t end;
  int n = shell_assignments(line, as, 4, &end);
  ck_assert_msg(n == (plan ? 2 : 1), "%d assignments in: %s", n, replay);
  ck_assert_msg(end == strlen(line), "more than assignments in: %s", replay);
  char seed_text[32];
  snprintf(seed_text, sizeof seed_text, "%" PRIu64, seed);
  ck_assert_str_eq(as[0].name, "VAT_SIM_SEED");
  ck_assert_str_eq(as[0].value, seed_text);
  if (plan) {
    ck_assert_str_eq(as[1].name, "VAT_SIM_PLAN");
    ck_assert_str_eq(as[1].value, plan);
  }
  /* The script: the line's own text for the assignments, then this
   * program, run for the child's case. */
  char script[VAT_SIM_PLAN_SIZE + 512];
  ck_assert_uint_lt(end + 64, sizeof script);
  snprintf(script, sizeof script, "%.*s exec \"$0\" sim_replay", (int)end,
           line);
  char self[4096];
  ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
  ck_assert_int_gt(len, 0);
  self[len] = '\0';
  char **env = child_environment(config, trace_path);
  int fds[2];
  ck_assert_int_eq(pipe(fds), 0);
  pid_t pid = fork();
  ck_assert_int_ge(pid, 0);
  if (pid == 0) {
    dup2(fds[1], 1);
    close(fds[0]);
    close(fds[1]);
    execle("/bin/sh", "sh", "-c", script, self, (char *)NULL, env);
    _exit(127);
  }
  close(fds[1]);
  size_t cap = 1 << 16, got = 0;
  char *text = malloc(cap);
  ck_assert_ptr_nonnull(text);
  for (;;) {
    if (got + 1 == cap)
      text = realloc(text, cap *= 2);
    ssize_t r = read(fds[0], text + got, cap - got - 1);
    if (r < 0 && errno == EINTR)
      continue;
    if (r <= 0)
      break;
    got += (size_t)r;
  }
  text[got] = '\0';
  close(fds[0]);
  int status;
  ck_assert_int_eq(waitpid(pid, &status, 0), pid);
  ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0,
                "the child (%s) failed:\n%s", script, text);
  memset(out, 0, sizeof *out);
  text_of(text, "env-seed", out->env_seed, sizeof out->env_seed);
  text_of(text, "env-plan", out->env_plan, sizeof out->env_plan);
  out->seed = number_of(text, "seed");
  out->seeds_run = number_of(text, "seeds-run");
  out->failed = number_of(text, "failed");
  out->verdict = number_of(text, "verdict");
  out->turns = number_of(text, "turns");
  out->steps = number_of(text, "steps");
  out->digest = number_of(text, "digest");
  out->now = number_of(text, "now");
  out->trace_written = number_of(text, "trace-written");
  text_of(text, "plan", out->plan, sizeof out->plan);
  text_of(text, "message", out->message, sizeof out->message);
  free(text);
  /* What the shell gave the child is what the line says. */
  ck_assert_str_eq(out->env_seed, seed_text);
  ck_assert_str_eq(out->env_plan, plan ? plan : "(unset)");
  ck_assert_uint_eq(out->seed, seed);
  ck_assert_uint_eq(out->seeds_run, 1);
}

/* The child's run is the one the parent reported. */
#define ck_assert_same_run(c, failed_, verdict_, message_, plan_, turns_,      \
                           steps_, digest_)                                    \
  do {                                                                         \
    ck_assert_uint_eq((c)->failed, (failed_));                                 \
    ck_assert_uint_eq((c)->verdict, (verdict_));                               \
    ck_assert_str_eq((c)->message, (message_));                                \
    ck_assert_str_eq((c)->plan, (plan_));                                      \
    ck_assert_uint_eq((c)->turns, (turns_));                                   \
    ck_assert_uint_eq((c)->steps, (steps_));                                   \
    ck_assert_uint_eq((c)->digest, (digest_));                                 \
  } while (0)

/* A failing campaign's seed, with its drawn faults, and its shrunk run,
 * each replayed in another process from the result's replay lines: the
 * same message, turns, steps, digest and plan. */
static void drawn_and_shrunk(const char *config) {
  const replay_config *c = config_named(config);
  vat_sim_options o = config_options(c);
  vat_sim_result r;
  /* A failure with several faults, so shrinking has something to do. */
  for (uint64_t next = 1;; next = r.seed + 1) {
    ck_assert_vat_ok(vat_sim_run(c->sc, &o, next, 500, &r));
    ck_assert_msg(r.failed, "%s: no failure from seed %llu", config,
                  (unsigned long long)next);
    if (r.nfaults >= 2 && r.shrunk.nfaults < r.nfaults)
      break;
  }
  fprintf(stderr, "sim: %s seed %llu: %s; %s\n  %s\n  shrunk: %s; %s\n  %s\n",
          config, (unsigned long long)r.seed, r.message, r.plan, r.replay,
          r.shrunk.message, r.shrunk.plan, r.shrunk.replay);
  /* The drawn run: its line sets the seed alone. */
  ck_assert_msg(strstr(r.replay, "VAT_SIM_PLAN") == NULL, "%s", r.replay);
  child_report child;
  replay_in_child(config, r.replay, r.seed, NULL, NULL, &child);
  ck_assert_same_run(&child, true, r.verdict, r.message, r.plan, r.turns,
                     r.steps, r.digest);
  ck_assert_uint_eq(child.now, r.now_ns);
  /* The shrunk run: the seed and its plan. */
  const vat_sim_shrunk *sh = &r.shrunk;
  ck_assert(sh->done);
  replay_in_child(config, sh->replay, r.seed, sh->plan, NULL, &child);
  ck_assert_same_run(&child, true, r.verdict, sh->message, sh->plan, sh->turns,
                     sh->steps, sh->digest);
}

START_TEST(a_drawn_failure_and_its_shrunk_run_replay_in_another_process) {
  drawn_and_shrunk("office-random");
  drawn_and_shrunk("office-pct");
}
END_TEST

/* A plan of each fault kind, failing the office its own way, replays in
 * another process from the line its result reports. */
START_TEST(a_plan_of_each_kind_replays_in_another_process) {
  static const struct {
    vat_sim_fault_kind kind;
    const char *plan, *says;
  } kinds[] = {
      {VAT_SIM_KILL, "step 1: kill vault-b", "money lost"},
      {VAT_SIM_FAIL, "step 1: fail vault-b", "money lost"},
      {VAT_SIM_DELAY, "step 1: delay s0 8 steps", "overtook"},
      {VAT_SIM_JITTER, "step 1: jitter ticker +3ms", "tick 1 late"},
      {VAT_SIM_TIMEOUT, "step 1: timeout payments", "charged 2 times"},
      {VAT_SIM_STOP, "step 12: stop vault-a", "credits paid"},
  };
  const replay_config *c = config_named("office-planned");
  for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
    vat_sim_options o = config_options(c);
    o.plan = kinds[k].plan;
    vat_sim_result r;
    uint64_t seed = 1;
    for (;; seed++) {
      ck_assert_msg(seed <= 50, "%s never fails with \"%s\"", kinds[k].plan,
                    kinds[k].says);
      ck_assert_vat_ok(vat_sim_replay(c->sc, &o, seed, &r));
      if (r.failed && strstr(r.message, kinds[k].says) != NULL)
        break;
    }
    ck_assert_uint_eq(r.nfaults, 1);
    ck_assert_uint_eq(r.faults[0].kind, kinds[k].kind);
    fprintf(stderr, "sim: office seed %llu: %s: %s\n  %s\n",
            (unsigned long long)seed, r.plan, r.message, r.replay);
    child_report child;
    replay_in_child(c->name, r.replay, seed, r.plan, NULL, &child);
    ck_assert_same_run(&child, true, r.verdict, r.message, r.plan, r.turns,
                       r.steps, r.digest);
    ck_assert_uint_eq(child.now, r.now_ns);
  }
}
END_TEST

/* Whether `s` is a plain word, as a plan may name a vat by it. */
static bool plain_word(const char *s) {
  if (s == NULL || *s == '\0')
    return false;
  for (; *s; s++)
    if (!name_char(*s, false) && *s != '.' && *s != '-')
      return false;
  return true;
}

/* The sim index of the vat at ring place `place` in `w`, or RING. */
static unsigned index_of_place(const ring *w, unsigned place) {
  for (unsigned k = 0; k < w->seen; k++)
    if (w->order[k] == place)
      return k;
  return RING;
}

/* A vat whose label is not a plain word is named vat#I in the plan; one
 * whose label is plain and no other vat's (among those seen as the fault
 * struck) by its label; so of two vats labelled "dup", the one seen
 * second is vat#I. The plan's text needs no quoting beyond the replay
 * line's single quotes; pasted back, it replays the run; and the run, its
 * plan and its shrunk run replay in another process. */
START_TEST(labels_a_plan_cannot_write_are_named_by_index) {
  enum { DUP_1 = 9, DUP_2 = 10 }; /* the places labelled "dup" */
  const replay_config *c = config_named("ring-random");
  vat_sim_options o = config_options(c);
  unsigned by_index = 0, by_label = 0, shared = 0, runs = 0;
  vat_sim_result r, again;
  for (uint64_t next = 1; by_index < 4 || by_label < 2 || shared < 1;
       next = r.seed + 1, runs++) {
    ck_assert_msg(next <= 2000,
                  "in %u failures: %u by index, %u by label, "
                  "%u second of two labels",
                  runs, by_index, by_label, shared);
    ck_assert_vat_ok(vat_sim_run(c->sc, &o, next, 500, &r));
    ck_assert_msg(r.failed, "no failure from seed %llu",
                  (unsigned long long)next);
    /* Its plan, pasted back, replays it; and the world shows which vat
     * each index is. */
    vat_sim_options as_planned = o;
    as_planned.shrink_runs = 0;
    as_planned.plan = r.plan;
    ck_assert_vat_ok(vat_sim_replay(c->sc, &as_planned, r.seed, &again));
    ck_assert_msg(again.digest == r.digest, "seed %llu: %s",
                  (unsigned long long)r.seed, r.plan);
    ck_assert_str_eq(again.plan, r.plan);
    const ring *w = last_ring;
    const char *at = r.plan;
    bool new_shared = false;
    for (unsigned i = 0; i < r.nfaults && i < VAT_SIM_MAX_REPORTED_FAULTS;
         i++) {
      const vat_sim_fault *f = &r.faults[i];
      ck_assert_uint_lt(f->vat, w->seen);
      unsigned place = w->order[f->vat];
      const char *label = ring_labels[place];
      char want[96], named[96], index[32];
      snprintf(want, sizeof want, "step %llu: %s ", (unsigned long long)f->step,
               f->kind == VAT_SIM_KILL ? "kill" : "fail");
      at = strstr(at, want);
      ck_assert_msg(at != NULL, "%s not in %s", want, r.plan);
      at += strlen(want);
      snprintf(named, sizeof named, "%.*s", (int)strcspn(at, ";"), at);
      snprintf(index, sizeof index, "vat#%u", f->vat);
      if (!plain_word(label)) {
        ck_assert_str_eq(named, index);
        by_index++;
      } else if (place != DUP_1 && place != DUP_2) {
        ck_assert_str_eq(named, label);
        by_label++;
      } else if (index_of_place(w, place == DUP_1 ? DUP_2 : DUP_1) < f->vat) {
        ck_assert_str_eq(named, index); /* the other one was seen first */
        shared++;
        new_shared = true;
      } else { /* by label unless the other one was seen by then */
        ck_assert_msg(strcmp(named, index) == 0 || strcmp(named, "dup") == 0,
                      "%s in %s", named, r.plan);
      }
    }
    if (runs >= 2 && !new_shared)
      continue; /* the processes cost: the first two, and the rare ones */
    child_report child;
    replay_in_child(c->name, r.replay, r.seed, NULL, NULL, &child);
    ck_assert_same_run(&child, true, r.verdict, r.message, r.plan, r.turns,
                       r.steps, r.digest);
    replay_in_child(c->name, again.replay, r.seed, r.plan, NULL, &child);
    ck_assert_same_run(&child, true, r.verdict, r.message, r.plan, r.turns,
                       r.steps, r.digest);
    replay_in_child(c->name, r.shrunk.replay, r.seed, r.shrunk.plan, NULL,
                    &child);
    ck_assert_same_run(&child, true, r.verdict, r.shrunk.message, r.shrunk.plan,
                       r.shrunk.turns, r.shrunk.steps, r.shrunk.digest);
  }
  fprintf(stderr,
          "sim: ring: %u failures: %u faults named by index, %u by label, "
          "%u second of two labels\n",
          runs, by_index, by_label, shared);
}
END_TEST

/* --- The failing run's trace, on the virtual clock ------------------------ */

/* A fresh file name under the temporary directory. */
static void temp_path(char *buf, size_t size, const char *tag) {
  const char *dir = getenv("TMPDIR");
  snprintf(buf, size, "%s/vat-sim-replay-%s-%d.json", dir ? dir : "/tmp", tag,
           (int)getpid());
  unlink(buf);
}

static void ck_assert_same_file(const char *a, const char *b) {
  size_t na, nb;
  char *x = test_read_file(a, &na), *y = test_read_file(b, &nb);
  size_t at = 0;
  while (at < na && at < nb && x[at] == y[at])
    at++;
  ck_assert_msg(na == nb && at == na,
                "%s and %s differ at byte %zu: \"%.60s\" / \"%.60s\"", a, b, at,
                x + (at > 20 ? at - 20 : 0), y + (at > 20 ? at - 20 : 0));
  free(x);
  free(y);
}

/* Loads a trace that trace_check accepts, and checks what a host-driven
 * world's turns promise: in the file's order, each turn starts after the
 * one before it ended, on whichever vat's track. */
static json *load_trace(const char *path) {
  char err[256];
  json *doc = json_parse_file(path, err, sizeof err);
  ck_assert_msg(doc != NULL, "%s: %s", path, err);
  trace_summary sum;
  ck_assert_msg(trace_check(doc, &sum, err, sizeof err), "%s: %s", path, err);
  const json *ev = json_get(doc, "traceEvents");
  double end = -1, last = -1;
  for (size_t i = 0; i < ev->len; i++) {
    const json *e = &ev->items[i];
    /* Turns; not the slices of no length that sends outside a turn (a
     * timer's) start from. */
    if (strcmp(json_str(e, "ph"), "X") != 0 ||
        strcmp(json_str(e, "cat"), "send") == 0)
      continue;
    double ts = json_num(e, "ts", -1), dur = json_num(e, "dur", -1);
    ck_assert_msg(ts > last && ts >= end - 0.0005 && dur > 0,
                  "%s: a turn at %.3f for %.3f us after one at %.3f ending "
                  "at %.3f",
                  path, ts, dur, last, end);
    last = ts;
    end = ts + dur;
  }
  return doc;
}

/* A failing run traced twice in this process, and once in another from
 * its replay line: three files, byte for byte the same. */
START_TEST(the_failing_run_traces_the_same_in_every_replay) {
  static const char *plans[] = {
      NULL, /* the seed's drawn faults */
      "step 2: delay s0 1 step; step 3: jitter ticker +1500us; step 40: "
      "fail vault-b",
      "step 9: timeout payments",
  };
  for (size_t k = 0; k < sizeof plans / sizeof plans[0]; k++) {
    const replay_config *c =
        config_named(plans[k] ? "office-planned" : "office-random");
    vat_sim_options o = config_options(c);
    o.plan = plans[k];
    o.shrink_runs = 0; /* the run traced is the run found */
    char first[256], second[256], child_path[256];
    temp_path(first, sizeof first, "first");
    temp_path(second, sizeof second, "second");
    temp_path(child_path, sizeof child_path, "child");
    o.trace_path = first;
    vat_sim_result r, again;
    ck_assert_vat_ok(vat_sim_run(c->sc, &o, 1, 500, &r));
    ck_assert_msg(r.failed && r.trace_written, "%s", r.message);
    ck_assert_uint_ge(r.nfaults, 1);
    o.trace_path = second;
    ck_assert_vat_ok(vat_sim_replay(c->sc, &o, r.seed, &again));
    ck_assert(again.trace_written);
    ck_assert_same_file(first, second);
    json_free(load_trace(first));
    child_report child;
    replay_in_child(c->name, r.replay, r.seed, plans[k] ? r.plan : NULL,
                    child_path, &child);
    ck_assert_uint_eq(child.digest, r.digest);
    ck_assert(child.trace_written);
    /* The child's configuration shrinks, and traces the shrunk run, which
     * may be another: traced here the same way, the same file. */
    vat_sim_options as_child = config_options(c);
    as_child.plan = plans[k] ? r.plan : NULL;
    as_child.trace_path = second;
    ck_assert_vat_ok(vat_sim_replay(c->sc, &as_child, r.seed, &again));
    ck_assert(again.trace_written);
    ck_assert_same_file(child_path, second);
    unlink(first);
    unlink(second);
    unlink(child_path);
  }
}
END_TEST

/* --- A sleeper: one vat that wakes every 5 ms on the virtual clock -------- */

enum { WAKES = 6 };
#define NAP_S 0.005
#define NAP_NS 5000000ull

typedef struct sleeper {
  vat_ref *sleeper, *chatter;
  unsigned wakes, chats;
} sleeper;

static void chat(vat_turn *turn, void *state, void *arg) {
  WORLD(sleeper, state)->chats++;
  if ((uintptr_t)arg > 0)
    expect_vat_ok(
        vat_send(turn, vat_self(turn), chat, (void *)((uintptr_t)arg - 1)));
}

/* Each wake sets the next, and sets the chatter talking for three turns
 * at the same virtual instant. */
static void wake(vat_turn *turn, void *state, void *arg) {
  (void)arg;
  sleeper *w = WORLD(sleeper, state);
  if (w->wakes++ < WAKES)
    expect_vat_ok(vat_later(turn, NAP_S, vat_self(turn), wake, NULL, NULL));
  expect_vat_ok(vat_send(turn, w->chatter, chat, (void *)2));
}

static void *sleeper_setup(vat_system *sys, void *ctx) {
  (void)ctx;
  sleeper *w = GC_MALLOC(sizeof *w);
  if (!(w->sleeper = spawn_with(sys, "sleeper", w)) ||
      !(w->chatter = spawn_with(sys, "chatter", w)))
    return NULL;
  vat_host_send(w->sleeper, wake, NULL);
  return w;
}

static bool sleeper_done(void *world) {
  sleeper *w = world;
  return w->wakes > WAKES && w->chats == 3 * (WAKES + 1);
}

static const vat_sim_scenario sleeper_sc = {
    .name = "sleeper", .setup = sleeper_setup, .done = sleeper_done};

/* In the sleeper's world a step's virtual time is known: a wake's step
 * starts a nap's length after the wake before it, and the chatter's
 * three turns follow, at that instant. A fault's marker is at its step's
 * virtual time: a step that wakes the sleeper at 5 ms n starts at 5n ms on
 * the trace, and a step at the instant but later starts 1 ns after the
 * step before it. Each world's steps: the first wake at 0 (step 1), the
 * chatter's three turns (steps 2-4), the next wake (step 5, at 5 ms), ... */
START_TEST(a_fault_is_marked_at_its_steps_virtual_time) {
  static const struct {
    const char *plan;
    double ts; /* microseconds */
  } cases[] = {
      {"step 9: fail sleeper", 10000.000},  /* the third wake */
      {"step 13: kill sleeper", 15000.000}, /* the fourth */
      {"step 11: fail chatter", 10000.002}, /* its second turn at 10 ms */
  };
  for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
    char path[256];
    temp_path(path, sizeof path, "sleeper");
    vat_sim_options o = sim_options(VAT_SIM_RANDOM, 0);
    o.plan = cases[k].plan;
    o.shrink_runs = 0;
    o.trace_path = path;
    vat_sim_result r;
    ck_assert_vat_ok(vat_sim_replay(&sleeper_sc, &o, 1, &r));
    ck_assert_msg(r.failed && r.trace_written, "%s: %s", cases[k].plan,
                  r.message);
    ck_assert_str_eq(r.plan, cases[k].plan);
    json *doc = load_trace(path);
    const json *ev = json_get(doc, "traceEvents");
    unsigned markers = 0;
    for (size_t i = 0; i < ev->len; i++) {
      const json *e = &ev->items[i];
      if (strcmp(json_str(e, "ph"), "i") != 0 ||
          strcmp(json_str(e, "cat"), "fault") != 0)
        continue;
      markers++;
      double ts = json_num(e, "ts", -1);
      ck_assert_msg(ts == cases[k].ts, "%s: marked at %.3f us, not %.3f",
                    cases[k].plan, ts, cases[k].ts);
      /* The step's turn (or what the kill left of it) starts there too:
       * the next turn in the file. */
      for (size_t j = i + 1; j < ev->len; j++)
        if (strcmp(json_str(&ev->items[j], "ph"), "X") == 0) {
          ck_assert(json_num(&ev->items[j], "ts", -1) >= ts);
          break;
        }
    }
    ck_assert_uint_eq(markers, 1);
    json_free(doc);
    unlink(path);
  }
}
END_TEST

/* The splitter the tests above trust, on the forms a shell gives meaning
 * to: quotes of both kinds, backslashes, and where assignments end. */
START_TEST(the_shell_split_reads_words_as_a_shell_does) {
  assignment as[4];
  size_t end;
  const char *line = "A=1 B='x; y' C=\"q\\\"r\"s\\ t D (rest)";
  ck_assert_int_eq(shell_assignments(line, as, 4, &end), 3);
  ck_assert_str_eq(as[0].value, "1");
  ck_assert_str_eq(as[1].value, "x; y");
  ck_assert_str_eq(as[2].value, "q\"rs t");
  ck_assert_str_eq(line + end, " D (rest)");
  ck_assert_int_eq(shell_assignments("A='open", as, 4, &end), -1);
  ck_assert_int_eq(shell_assignments("(scenario x)", as, 4, &end), 0);
}
END_TEST

Suite *test_sim_replay_suite(void) {
  Suite *s = suite_create("sim_replay");
  /* The child's case, only in a child this suite started. */
  if (getenv("VAT_SIM_REPLAY_CHILD") != NULL) {
    TCase *child = test_case("replay-child", 120);
    tcase_add_test(child, replay_child);
    suite_add_tcase(s, child);
    return s;
  }
  TCase *across = test_case("across-processes", 300);
  tcase_add_test(across, the_shell_split_reads_words_as_a_shell_does);
  tcase_add_test(across,
                 a_drawn_failure_and_its_shrunk_run_replay_in_another_process);
  tcase_add_test(across, a_plan_of_each_kind_replays_in_another_process);
  tcase_add_test(across, labels_a_plan_cannot_write_are_named_by_index);
  suite_add_tcase(s, across);
  TCase *trace = test_case("trace", 300);
  tcase_add_test(trace, the_failing_run_traces_the_same_in_every_replay);
  tcase_add_test(trace, a_fault_is_marked_at_its_steps_virtual_time);
  suite_add_tcase(s, trace);
  return s;
}
