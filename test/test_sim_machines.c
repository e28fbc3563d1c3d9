/* Simulation testing (vat/sim.h), worlds of several systems: the harness
 * steps them all on one virtual clock, chooses among the ready vats of all
 * of them, crashes machines, fires event sources, and replays all of it
 * exactly. */
#include <dirent.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <gc/gc.h>

#include "json.h"
#include "support.h"
#include "vat/host.h"
#include "vat/sim.h"
#include "vat/timer.h"

/* What a scenario leaves for the test to read after the run: its ctx. */
typedef struct outcome {
  void *world;
} outcome;

static vat_sim_options options(vat_sim_strategy s) {
  vat_sim_options o;
  vat_sim_options_default(&o);
  o.strategy = s;
  o.pct_steps = 50;
  return o;
}

static vat_system *machine(vat_system *sys, const char *name) {
  vat_sim_system_options mo;
  vat_sim_system_options_default(&mo);
  mo.name = name;
  vat_system *m = NULL;
  expect_vat_ok(vat_sim_system_new(sys, &mo, &m));
  return m;
}

/* --- A log of turns: which system's vat ran, in order --------------------- */

enum { LOG_MAX = 256, CHAIN = 12 };

typedef struct log_world {
  char log[LOG_MAX]; /* 'A' or 'B' per turn, or the vat's letter */
  unsigned n;
  unsigned first; /* the vat that ran first, from 1 */
  vat_system *b;
} log_world;

typedef struct logger {
  log_world *world;
  char letter;
  unsigned id;
} logger;

static void log_turn(logger *l) {
  log_world *w = l->world;
  if (w->n < LOG_MAX - 1)
    w->log[w->n++] = l->letter;
  if (w->first == 0)
    w->first = l->id;
}

/* A chain: each turn sends the vat its next message, `arg` left. */
static void chain_step(vat_turn *turn, void *state, void *arg) {
  log_turn(state);
  uintptr_t left = (uintptr_t)arg;
  if (left > 1)
    expect_vat_ok(
        vat_send(turn, vat_self(turn), chain_step, (void *)(left - 1)));
}

static vat_ref *spawn_logger(vat_system *sys, log_world *w, char letter,
                             unsigned id) {
  logger *l;
  vat_ref *r;
  vat_entity_def def = {.state_size = sizeof *l};
  if (vat_host_spawn(sys, &def, &r, (void **)&l) != VAT_OK)
    return NULL;
  l->world = w;
  l->letter = letter;
  l->id = id;
  return r;
}

/* Two vats on each of two systems, each running a chain of CHAIN turns. */
static void *two_chains_setup(vat_system *sys, void *ctx) {
  outcome *out = ctx;
  log_world *w = GC_MALLOC(sizeof *w);
  out->world = w;
  if ((w->b = machine(sys, "b")) == NULL)
    return NULL;
  vat_system *on[2] = {sys, w->b};
  for (unsigned i = 0; i < 4; i++) {
    vat_ref *r = spawn_logger(on[i / 2], w, i < 2 ? 'A' : 'B', i + 1);
    if (r == NULL || vat_host_send(r, chain_step, (void *)CHAIN) != VAT_OK)
      return NULL;
  }
  return w;
}

static bool two_chains_done(void *world) {
  return ((log_world *)world)->n == 4 * CHAIN;
}

static bool interleaved(const log_world *w) {
  unsigned changes = 0;
  for (unsigned i = 1; i < w->n; i++)
    changes += w->log[i] != w->log[i - 1];
  return changes > 1;
}

START_TEST(two_systems_run_as_one_world) {
  outcome out = {0};
  vat_sim_scenario sc = {.name = "two-chains",
                         .setup = two_chains_setup,
                         .done = two_chains_done,
                         .ctx = &out};
  vat_sim_options o = options(VAT_SIM_RANDOM);
  unsigned mixed = 0;
  for (uint64_t seed = 1; seed <= 50; seed++) {
    vat_sim_result r, again;
    ck_assert_vat_ok(vat_sim_replay(&sc, &o, seed, &r));
    ck_assert_msg(!r.failed, "seed %llu: %s", (unsigned long long)seed,
                  r.message);
    /* Every vat of both systems ran its whole chain: the harness ran both. */
    ck_assert_uint_eq(r.turns, 4 * CHAIN);
    ck_assert_uint_eq(r.steps, 4 * CHAIN);
    log_world *w = out.world;
    char log[LOG_MAX];
    memcpy(log, w->log, sizeof log);
    mixed += interleaved(w);
    ck_assert_vat_ok(vat_sim_replay(&sc, &o, seed, &again));
    ck_assert_uint_eq(again.digest, r.digest);
    ck_assert_str_eq(((log_world *)out.world)->log, log);
  }
  /* A choice among all the ready vats mixes the systems' turns; one
   * system run to its end, then the other, would never. */
  ck_assert_uint_ge(mixed, 45);
}
END_TEST

/* One vat ready on the first system, three on the second: RANDOM is
 * uniform over the four, not over the systems (which would run the
 * first system's vat first half of the time). */
static void *one_and_three_setup(vat_system *sys, void *ctx) {
  outcome *out = ctx;
  log_world *w = GC_MALLOC(sizeof *w);
  out->world = w;
  if ((w->b = machine(sys, NULL)) == NULL)
    return NULL;
  for (unsigned i = 0; i < 4; i++) {
    vat_ref *r =
        spawn_logger(i == 0 ? sys : w->b, w, i == 0 ? 'A' : 'B', i + 1);
    if (r == NULL || vat_host_send(r, chain_step, (void *)1) != VAT_OK)
      return NULL;
  }
  return w;
}

START_TEST(random_is_uniform_over_the_vats_of_every_system) {
  outcome out = {0};
  vat_sim_scenario sc = {
      .name = "one-and-three", .setup = one_and_three_setup, .ctx = &out};
  vat_sim_options o = options(VAT_SIM_RANDOM);
  unsigned first[5] = {0};
  enum { SEEDS = 2000 };
  for (uint64_t seed = 1; seed <= SEEDS; seed++) {
    vat_sim_result r;
    ck_assert_vat_ok(vat_sim_replay(&sc, &o, seed, &r));
    ck_assert(!r.failed);
    first[((log_world *)out.world)->first]++;
  }
  fprintf(stderr, "sim_machines: first of 4 vats over %d seeds: %u %u %u %u\n",
          SEEDS, first[1], first[2], first[3], first[4]);
  /* 500 each expected; a choice of system first gives the lone vat 1000. */
  for (unsigned i = 1; i <= 4; i++)
    ck_assert_msg(first[i] > 400 && first[i] < 600, "vat %u first %u times", i,
                  first[i]);
}
END_TEST

/* PCT with no change point runs the vat of highest priority whenever it
 * is ready: with priorities shared by the systems, one chain runs whole
 * before the other starts, whichever system each is on. */
static void *pct_chains_setup(vat_system *sys, void *ctx) {
  outcome *out = ctx;
  log_world *w = GC_MALLOC(sizeof *w);
  out->world = w;
  if ((w->b = machine(sys, NULL)) == NULL)
    return NULL;
  vat_ref *a = spawn_logger(sys, w, 'A', 1);
  vat_ref *b = spawn_logger(w->b, w, 'B', 2);
  if (a == NULL || b == NULL ||
      vat_host_send(a, chain_step, (void *)CHAIN) != VAT_OK ||
      vat_host_send(b, chain_step, (void *)CHAIN) != VAT_OK)
    return NULL;
  return w;
}

START_TEST(pct_priorities_span_the_systems) {
  outcome out = {0};
  vat_sim_scenario sc = {
      .name = "pct-chains", .setup = pct_chains_setup, .ctx = &out};
  vat_sim_options o = options(VAT_SIM_PCT);
  o.pct_depth = 1;
  unsigned a_first = 0;
  for (uint64_t seed = 1; seed <= 100; seed++) {
    vat_sim_result r;
    ck_assert_vat_ok(vat_sim_replay(&sc, &o, seed, &r));
    log_world *w = out.world;
    ck_assert_uint_eq(w->n, 2 * CHAIN);
    ck_assert_msg(!interleaved(w), "seed %llu: %s", (unsigned long long)seed,
                  w->log);
    a_first += w->log[0] == 'A';
  }
  ck_assert_uint_gt(a_first, 20);
  ck_assert_uint_lt(a_first, 80);
}
END_TEST

/* --- One clock ----------------------------------------------------------- */

typedef struct clock_world {
  vat_system *b;
  uint64_t fired[4]; /* the times the timers fired, in order */
  char who[4];
  unsigned n;
} clock_world;

typedef struct timed {
  clock_world *world;
  vat_system *sys;
  char letter;
  unsigned again; /* arms one more, 4 ms later, the first time */
} timed;

static void timed_fire(vat_turn *turn, void *state, void *arg) {
  (void)arg;
  timed *t = state;
  clock_world *w = t->world;
  if (w->n < 4) {
    w->fired[w->n] = vat_system_now(t->sys);
    w->who[w->n++] = t->letter;
  }
  if (t->again > 0) {
    t->again--;
    expect_vat_ok(
        vat_later(turn, 0.004, vat_self(turn), timed_fire, NULL, NULL));
  }
}

static void timed_arm(vat_turn *turn, void *state, void *arg) {
  double s = *(double *)arg;
  (void)state;
  expect_vat_ok(vat_later(turn, s, vat_self(turn), timed_fire, NULL, NULL));
}

static vat_ref *spawn_timed(vat_system *sys, clock_world *w, char letter,
                            unsigned again) {
  timed *t;
  vat_ref *r;
  vat_entity_def def = {.state_size = sizeof *t};
  if (vat_host_spawn(sys, &def, &r, (void **)&t) != VAT_OK)
    return NULL;
  *t = (timed){w, sys, letter, again};
  return r;
}

static double five_ms = 0.005, three_ms = 0.003;

static void *clock_setup(vat_system *sys, void *ctx) {
  outcome *out = ctx;
  clock_world *w = GC_MALLOC(sizeof *w);
  out->world = w;
  if ((w->b = machine(sys, NULL)) == NULL)
    return NULL;
  vat_ref *a = spawn_timed(sys, w, 'A', 0);
  vat_ref *b = spawn_timed(w->b, w, 'B', 1);
  if (a == NULL || b == NULL ||
      vat_host_send(a, timed_arm, &five_ms) != VAT_OK ||
      vat_host_send(b, timed_arm, &three_ms) != VAT_OK)
    return NULL;
  return w;
}

START_TEST(the_systems_share_one_virtual_clock) {
  outcome out = {0};
  vat_sim_scenario sc = {.name = "clock", .setup = clock_setup, .ctx = &out};
  vat_sim_options o = options(VAT_SIM_RANDOM);
  vat_sim_result r;
  ck_assert_vat_ok(vat_sim_run(&sc, &o, 1, 20, &r));
  ck_assert_msg(!r.failed, "%s", r.message);
  clock_world *w = out.world;
  ck_assert_uint_eq(w->n, 3);
  /* B's at 3 ms, A's at 5 ms on A's clock, B's second at 7 ms on B's. */
  ck_assert_int_eq(w->who[0], 'B');
  ck_assert_uint_eq(w->fired[0], 3000000);
  ck_assert_int_eq(w->who[1], 'A');
  ck_assert_uint_eq(w->fired[1], 5000000);
  ck_assert_int_eq(w->who[2], 'B');
  ck_assert_uint_eq(w->fired[2], 7000000);
  ck_assert_uint_eq(r.now_ns, 7000000);
  ck_assert_str_eq(r.notes, "none");
}
END_TEST

/* --- Crashes ------------------------------------------------------------- */

typedef struct crash_world {
  vat_system *b;
  unsigned ticks;      /* the crashing machine's ticker */
  unsigned seen_ticks; /* what the other machine saw at 20 ms */
  bool seen_crashed;
  bool looked;
} crash_world;

static void tick(vat_turn *turn, void *state, void *arg) {
  (void)turn;
  (void)arg;
  (*(crash_world **)state)->ticks++;
}

static void start_ticking(vat_turn *turn, void *state, void *arg) {
  (void)arg;
  (void)state;
  expect_vat_ok(vat_every(turn, 0.001, vat_self(turn), tick, NULL, NULL));
}

static void look(vat_turn *turn, void *state, void *arg) {
  (void)turn;
  (void)arg;
  crash_world *w = *(crash_world **)state;
  w->seen_ticks = w->ticks;
  w->seen_crashed = vat_sim_system_crashed(w->b);
  w->looked = true;
}

static void look_later(vat_turn *turn, void *state, void *arg) {
  (void)arg;
  (void)state;
  expect_vat_ok(vat_later(turn, 0.020, vat_self(turn), look, NULL, NULL));
}

static vat_ref *spawn_with_world(vat_system *sys, void *w) {
  void **st;
  vat_ref *r;
  vat_entity_def def = {.state_size = sizeof(void *)};
  if (vat_host_spawn(sys, &def, &r, (void **)&st) != VAT_OK)
    return NULL;
  *st = w;
  return r;
}

static void *crash_setup(vat_system *sys, void *ctx) {
  outcome *out = ctx;
  crash_world *w = GC_MALLOC(sizeof *w);
  out->world = w;
  if ((w->b = machine(sys, "ticker")) == NULL)
    return NULL;
  vat_ref *ticker = spawn_with_world(w->b, w);
  vat_ref *looker = spawn_with_world(sys, w);
  if (ticker == NULL || looker == NULL ||
      vat_host_send(ticker, start_ticking, NULL) != VAT_OK ||
      vat_host_send(looker, look_later, NULL) != VAT_OK ||
      vat_sim_system_crash(w->b, 10000000) != VAT_OK)
    return NULL;
  return w;
}

static bool crash_done(void *world) {
  return ((crash_world *)world)->looked;
}

START_TEST(a_crashed_machine_stands_still) {
  outcome out = {0};
  vat_sim_scenario sc = {
      .name = "crash", .setup = crash_setup, .done = crash_done, .ctx = &out};
  vat_sim_options o = options(VAT_SIM_RANDOM);
  vat_sim_result r;
  /* Quiescent, though the ticker's timer is periodic: its machine is
   * down, and its timers count no more. */
  ck_assert_vat_ok(vat_sim_run(&sc, &o, 1, 20, &r));
  ck_assert_msg(!r.failed, "%s", r.message);
  crash_world *w = out.world;
  /* Ticks at 1..9 ms; the one due at 10 ms with the crash never fires. */
  ck_assert_uint_eq(w->ticks, 9);
  ck_assert_uint_eq(w->seen_ticks, 9);
  ck_assert(w->seen_crashed);
  ck_assert_str_eq(r.notes, "10.000 ms: crash ticker");
  ck_assert_uint_eq(r.now_ns, 20000000);
}
END_TEST

/* A crash drawn from the seed, at a time drawn from its window. */
static void *drawn_crash_setup(vat_system *sys, void *ctx) {
  outcome *out = ctx;
  crash_world *w = GC_MALLOC(sizeof *w);
  out->world = w;
  vat_sim_system_options mo;
  vat_sim_system_options_default(&mo);
  mo.crash_chance = 0.5;
  mo.crash_window_ns = 15000000;
  if (vat_sim_system_new(sys, &mo, &w->b) != VAT_OK)
    return NULL;
  vat_ref *ticker = spawn_with_world(w->b, w);
  vat_ref *looker = spawn_with_world(sys, w);
  if (ticker == NULL || looker == NULL ||
      vat_host_send(ticker, start_ticking, NULL) != VAT_OK ||
      vat_host_send(looker, look_later, NULL) != VAT_OK)
    return NULL;
  return w;
}

/* The ticker ticks until 20 ms unless it crashed: then the world is not
 * quiescent by the deadline, but a crash makes it so. */
START_TEST(crashes_drawn_from_the_seed_replay) {
  outcome out = {0};
  vat_sim_scenario sc = {.name = "drawn-crash",
                         .setup = drawn_crash_setup,
                         .done = crash_done,
                         .ctx = &out};
  vat_sim_options o = options(VAT_SIM_RANDOM);
  o.deadline_ns = 100000000;
  unsigned crashed = 0, times = 0;
  uint64_t last_time = 0;
  for (uint64_t seed = 1; seed <= 40; seed++) {
    vat_sim_result r, again;
    ck_assert_vat_ok(vat_sim_replay(&sc, &o, seed, &r));
    crash_world *w = out.world;
    if (w->seen_crashed) {
      crashed++;
      ck_assert(!r.failed);
      ck_assert_ptr_nonnull(strstr(r.notes, ": crash m1"));
      ck_assert_uint_lt(w->ticks, 15);
      /* The crash's time, "N.NNN ms", from the notes. */
      uint64_t t = (uint64_t)(strtod(r.notes, NULL) * 1e6);
      ck_assert_uint_lt(t, 15000000);
      times += t != last_time;
      last_time = t;
      /* The crash is a fault at a time of the run's plan, to the ns. */
      ck_assert_uint_eq(r.timed_faults, 1);
      ck_assert_ptr_nonnull(strstr(r.plan, ": crash m1"));
      uint64_t at;
      const char *end;
      ck_assert_int_eq(strncmp(r.plan, "at ", 3), 0);
      ck_assert_vat_ok(vat_sim_time_parse(r.plan + 3, &at, &end));
      ck_assert_uint_eq(at / 1000000, t / 1000000);
      ck_assert_str_eq(end, ": crash m1");
      /* Pasted back it crashes m1 again; without it m1 never crashes. */
      vat_sim_options planned = o;
      planned.plan = r.plan;
      ck_assert_vat_ok(vat_sim_replay(&sc, &planned, seed, &again));
      ck_assert_uint_eq(again.digest, r.digest);
      ck_assert_str_eq(again.notes, r.notes);
      planned.plan = "none";
      ck_assert_vat_ok(vat_sim_replay(&sc, &planned, seed, &again));
      ck_assert(again.failed); /* ticking past the deadline */
      ck_assert_str_eq(again.notes, "none");
    } else {
      ck_assert(r.failed); /* ticking past the deadline */
      ck_assert_ptr_nonnull(strstr(r.message, "deadline"));
      ck_assert_str_eq(r.notes, "none");
      ck_assert_str_eq(r.plan, "none");
    }
    ck_assert_vat_ok(vat_sim_replay(&sc, &o, seed, &again));
    ck_assert_str_eq(again.notes, r.notes);
    ck_assert_uint_eq(again.digest, r.digest);
    ck_assert_uint_eq(again.turns, r.turns);
  }
  ck_assert_uint_gt(crashed, 8);
  ck_assert_uint_lt(crashed, 32);
  ck_assert_uint_gt(times, 4);
}
END_TEST

/* --- Event sources ------------------------------------------------------- */

typedef struct source_world {
  vat_ref *target;
  uint64_t at[3]; /* the source's events */
  unsigned next;
  uint64_t seen[3]; /* when the target got each */
  unsigned n;
  uint64_t salt; /* mixed into what fire returns */
  uint64_t drawn;
  bool ended; /* told the world ended */
} source_world;

static void record_now(vat_turn *turn, void *state, void *arg) {
  (void)turn;
  source_world *w = *(source_world **)state;
  if (w->n < 3)
    w->seen[w->n++] = (uint64_t)(uintptr_t)arg;
}

static uint64_t src_next(void *ctx) {
  source_world *w = ctx;
  return w->next < 3 ? w->at[w->next] : UINT64_MAX;
}

static uint64_t src_fire(void *ctx, uint64_t now) {
  source_world *w = ctx;
  uint64_t h = w->salt;
  while (w->next < 3 && w->at[w->next] <= now) {
    vat_host_send(w->target, record_now, (void *)(uintptr_t)now);
    h = h * 31 + now;
    w->next++;
  }
  return h;
}

static void src_ended(void *ctx) {
  ((source_world *)ctx)->ended = true;
}

static const vat_sim_source test_source = {
    .next_event = src_next, .fire = src_fire, .ended = src_ended};

typedef struct source_ctx {
  source_world *world;
  uint64_t salt;
} source_ctx;

static void *source_setup(vat_system *sys, void *ctx) {
  source_world *w = GC_MALLOC(sizeof *w);
  source_ctx *c = ctx;
  c->world = w;
  w->salt = c->salt;
  w->at[0] = 2000000;
  w->at[1] = 2000000;
  w->at[2] = 9000000;
  if ((w->target = spawn_with_world(sys, w)) == NULL ||
      vat_sim_source_add(sys, &test_source, w) != VAT_OK)
    return NULL;
  w->drawn = vat_sim_draw(sys);
  if (vat_sim_note(sys, "a source's own fault") != VAT_OK)
    return NULL;
  return w;
}

static bool source_done(void *world) {
  return ((source_world *)world)->n == 3;
}

START_TEST(sources_drive_the_clock_and_the_digest) {
  source_ctx ctx = {NULL, 1};
  vat_sim_scenario sc = {.name = "source",
                         .setup = source_setup,
                         .done = source_done,
                         .ctx = &ctx};
  vat_sim_options o = options(VAT_SIM_RANDOM);
  vat_sim_result r, again, salted;
  /* One system: the source's events are still what moves the clock. */
  ck_assert_vat_ok(vat_sim_replay(&sc, &o, 7, &r));
  ck_assert_msg(!r.failed, "%s", r.message);
  ck_assert_uint_eq(ctx.world->seen[0], 2000000);
  ck_assert_uint_eq(ctx.world->seen[1], 2000000);
  ck_assert_uint_eq(ctx.world->seen[2], 9000000);
  ck_assert_uint_eq(r.now_ns, 9000000);
  ck_assert_str_eq(r.notes, "0.000 ms: a source's own fault");
  ck_assert(ctx.world->ended);
  uint64_t drawn = ctx.world->drawn;
  ck_assert_vat_ok(vat_sim_replay(&sc, &o, 7, &again));
  ck_assert_uint_eq(again.digest, r.digest);
  ck_assert_uint_eq(ctx.world->drawn, drawn);
  ck_assert_vat_ok(vat_sim_replay(&sc, &o, 8, &again));
  ck_assert_uint_ne(ctx.world->drawn, drawn);
  /* What the firings did is in the digest: the same turns, another hash. */
  ctx.salt = 2;
  ck_assert_vat_ok(vat_sim_replay(&sc, &o, 7, &salted));
  ck_assert_uint_eq(salted.turns, r.turns);
  ck_assert_uint_ne(salted.digest, r.digest);
}
END_TEST

/* --- Faults strike every system's vats ------------------------------------ */

static void *faulty_setup(vat_system *sys, void *ctx) {
  (void)ctx;
  log_world *w = GC_MALLOC(sizeof *w);
  if ((w->b = machine(sys, NULL)) == NULL)
    return NULL;
  /* Each label its own: a plan names a vat by a label no other has. */
  static const char *const labels[] = {"on-a0", "on-a1", "on-b2", "on-b3"};
  for (unsigned i = 0; i < 4; i++) {
    vat_entity_def def = {.state_size = sizeof(logger), .label = labels[i]};
    vat_ref *r;
    logger *l;
    if (vat_host_spawn(i < 2 ? sys : w->b, &def, &r, (void **)&l) != VAT_OK)
      return NULL;
    *l = (logger){w, 'x', i + 1};
    if (vat_host_send(r, chain_step, (void *)CHAIN) != VAT_OK)
      return NULL;
  }
  return w;
}

START_TEST(faults_strike_the_vats_of_every_system) {
  vat_sim_scenario sc = {.name = "faulty", .setup = faulty_setup};
  vat_sim_options o = options(VAT_SIM_RANDOM);
  o.fault_rate = 0.2;
  o.max_faults = 2;
  unsigned on_a = 0, on_b = 0;
  for (uint64_t seed = 1; seed <= 100; seed++) {
    vat_sim_result r;
    ck_assert_vat_ok(vat_sim_replay(&sc, &o, seed, &r));
    ck_assert(!r.failed);
    for (const char *p = r.plan; (p = strstr(p, "on-")) != NULL; p += 3)
      p[3] == 'a' ? on_a++ : on_b++;
  }
  ck_assert_uint_gt(on_a, 20);
  ck_assert_uint_gt(on_b, 20);
}
END_TEST

/* --- Bad calls ------------------------------------------------------------ */

typedef struct bad_world {
  int in_turn_rc;
  bool ran;
} bad_world;

static void new_system_in_a_turn(vat_turn *turn, void *state, void *arg) {
  (void)turn;
  bad_world *w = *(bad_world **)state;
  vat_system *out;
  w->in_turn_rc = vat_sim_system_new(arg, NULL, &out);
  w->ran = true;
}

static int setup_errors[32];

static int src_strike(void *ctx, const char *text, uint64_t *hash) {
  (void)ctx, (void)text, (void)hash;
  return VAT_EINVAL;
}

static void *bad_setup(vat_system *sys, void *ctx) {
  (void)ctx;
  bad_world *w = GC_MALLOC(sizeof *w);
  vat_system *out = NULL;
  int *e = setup_errors;
  vat_sim_system_options mo;
  vat_sim_system_options_default(&mo);
  e[0] = vat_sim_system_new(sys, NULL, NULL);
  mo.crash_chance = 1.5;
  e[1] = vat_sim_system_new(sys, &mo, &out);
  mo.crash_chance = 0.5;
  mo.crash_window_ns = 0;
  e[2] = vat_sim_system_new(sys, &mo, &out);
  /* Names a plan can write, each once. */
  vat_sim_system_options_default(&mo);
  static const char *const bad_names[] = {"a-b", "", "m3", "a name",
                                          "0123456789012345678901234567890123"};
  for (unsigned i = 0; i < 5; i++) {
    mo.name = bad_names[i];
    e[12 + i] = vat_sim_system_new(sys, &mo, &out);
  }
  mo.name = "far.away_1";
  e[17] = vat_sim_system_new(sys, &mo, &out);
  e[18] = vat_sim_system_new(sys, &mo, &out);
  /* Faults at a time a source draws. */
  static vat_sim_source striking; /* kept by address: static */
  striking = test_source;
  striking.strike = src_strike;
  source_world *fw = GC_MALLOC(sizeof *fw);
  e[19] = vat_sim_source_fault(sys, &striking, 0, "x"); /* not added */
  e[20] = vat_sim_source_add(sys, &striking, fw);
  e[21] = vat_sim_source_fault(sys, &striking, 0, "partition a-b for 1ms");
  static const char *const bad_texts[] = {"",     " x",       "x ",       "a;b",
                                          "it's", "crash m0", "tab\there"};
  for (unsigned i = 0; i < 7; i++)
    if (vat_sim_source_fault(sys, &striking, 5, bad_texts[i]) != VAT_EINVAL)
      e[22] = -99 - (int)i;
  char longer[122];
  memset(longer, 'x', sizeof longer - 1);
  longer[sizeof longer - 1] = '\0';
  e[23] = vat_sim_source_fault(sys, &striking, 5, longer);
  e[24] = vat_sim_source_fault(sys, &test_source, 5, "x"); /* no strike */
  e[25] = vat_sim_source_fault(sys, NULL, 5, "x");
  e[26] = vat_sim_source_fault(sys, &striking, 5, NULL);
  for (unsigned i = 1; i < VAT_SIM_MAX_SYSTEMS - 1; i++)
    if (vat_sim_system_new(sys, NULL, &out) != VAT_OK)
      return NULL;
  e[3] = vat_sim_system_new(sys, NULL, &out);
  e[4] = vat_sim_source_add(sys, &test_source, NULL);
  e[5] = vat_sim_source_add(sys, NULL, w);
  vat_sim_source no_fire = {.next_event = src_next};
  e[6] = vat_sim_source_add(sys, &no_fire, w);
  source_world *sw = GC_MALLOC(sizeof *sw);
  e[7] = vat_sim_source_add(sys, &test_source, sw);
  e[8] = vat_sim_source_add(sys, &test_source, sw);
  e[9] = vat_sim_source_find(sys, &test_source) == sw ? VAT_OK : -99;
  e[10] = vat_sim_note(sys, NULL);
  e[11] = strcmp(vat_sim_system_name(out), "m15") == 0 ? VAT_OK : -99;
  return w;
}

START_TEST(bad_calls_are_refused) {
  /* Outside a world. */
  vat_system *sys = test_host_system(true, 1), *out;
  ck_assert_vat_err(vat_sim_system_new(sys, NULL, &out), VAT_EINVAL);
  ck_assert_vat_err(vat_sim_system_new(NULL, NULL, &out), VAT_EINVAL);
  ck_assert_vat_err(vat_sim_system_crash(sys, 0), VAT_EINVAL);
  ck_assert(!vat_sim_system_crashed(sys));
  ck_assert_ptr_null(vat_sim_system_name(sys));
  ck_assert_vat_err(vat_sim_source_add(sys, &test_source, sys), VAT_EINVAL);
  ck_assert_ptr_null(vat_sim_source_find(sys, &test_source));
  ck_assert_uint_eq(vat_sim_draw(sys), 0);
  ck_assert_vat_err(vat_sim_note(sys, "x"), VAT_EINVAL);
  ck_assert_vat_err(vat_sim_source_fault(sys, &test_source, 0, "x"),
                    VAT_EINVAL);
  test_quiesce(sys);
  /* Inside one. */
  vat_sim_scenario sc = {.name = "bad", .setup = bad_setup};
  vat_sim_options o = options(VAT_SIM_RANDOM);
  vat_sim_result r;
  ck_assert_vat_ok(vat_sim_replay(&sc, &o, 1, &r));
  ck_assert_msg(!r.failed, "%s", r.message);
  int *e = setup_errors;
  ck_assert_vat_err(e[0], VAT_EINVAL);
  ck_assert_vat_err(e[1], VAT_EINVAL);
  ck_assert_vat_err(e[2], VAT_EINVAL);
  ck_assert_vat_err(e[3], VAT_EBUSY);
  ck_assert_vat_err(e[4], VAT_EINVAL);
  ck_assert_vat_err(e[5], VAT_EINVAL);
  ck_assert_vat_err(e[6], VAT_EINVAL);
  ck_assert_vat_ok(e[7]);
  ck_assert_vat_err(e[8], VAT_EBUSY);
  ck_assert_vat_ok(e[9]);
  ck_assert_vat_err(e[10], VAT_EINVAL);
  ck_assert_vat_ok(e[11]);
  for (unsigned i = 12; i < 17; i++)
    ck_assert_vat_err(e[i], VAT_EINVAL);
  ck_assert_vat_ok(e[17]);
  ck_assert_vat_err(e[18], VAT_EBUSY);
  ck_assert_vat_err(e[19], VAT_EINVAL);
  ck_assert_vat_ok(e[20]);
  ck_assert_vat_ok(e[21]);
  ck_assert_vat_ok(e[22]);
  ck_assert_vat_err(e[23], VAT_EINVAL);
  ck_assert_vat_err(e[24], VAT_EINVAL);
  ck_assert_vat_err(e[25], VAT_EINVAL);
  ck_assert_vat_err(e[26], VAT_EINVAL);
  /* The source knew no fault it drew: none struck. */
  ck_assert_uint_eq(r.timed_faults, 0);
  ck_assert_str_eq(r.plan, "none");
}
END_TEST

static void *in_turn_setup(vat_system *sys, void *ctx) {
  bad_world *w = GC_MALLOC(sizeof *w);
  *(bad_world **)ctx = w;
  vat_ref *r = spawn_with_world(sys, w);
  if (r == NULL || vat_host_send(r, new_system_in_a_turn, sys) != VAT_OK)
    return NULL;
  return w;
}

START_TEST(no_system_is_made_inside_a_turn) {
  bad_world *w = NULL;
  vat_sim_scenario sc = {.name = "in-turn", .setup = in_turn_setup, .ctx = &w};
  vat_sim_options o = options(VAT_SIM_RANDOM);
  vat_sim_result r;
  ck_assert_vat_ok(vat_sim_replay(&sc, &o, 1, &r));
  ck_assert(w->ran);
  ck_assert_vat_err(w->in_turn_rc, VAT_EINTURN);
}
END_TEST

/* A fault at a time struck no vat: its mark in the failing run's trace
 * names none (no "vat" argument, never a null pointer's "(nil)"), and
 * says what struck. */
static bool never_done(void *world) {
  (void)world;
  return false;
}

START_TEST(a_fault_at_a_time_is_marked_on_no_vat) {
  char path[] = "/tmp/vat-sim-timed-trace-XXXXXX";
  int fd = mkstemp(path);
  ck_assert_int_ge(fd, 0);
  close(fd);
  outcome out = {0};
  vat_sim_scenario sc = {.name = "timed-mark",
                         .setup = drawn_crash_setup,
                         .done = never_done,
                         .ctx = &out};
  vat_sim_options o = options(VAT_SIM_RANDOM);
  o.plan = "at 5ms: crash m1";
  o.shrink_runs = 0;
  o.trace_path = path;
  vat_sim_result r;
  ck_assert_vat_ok(vat_sim_replay(&sc, &o, 1, &r));
  ck_assert(r.failed);
  ck_assert_uint_eq(r.timed_faults, 1);
  ck_assert(r.trace_written);
  char err[256];
  json *doc = json_parse_file(path, err, sizeof err);
  ck_assert_msg(doc != NULL, "%s", err);
  const json *ev = json_get(doc, "traceEvents");
  unsigned marks = 0;
  for (size_t i = 0; i < ev->len; i++) {
    const json *e = &ev->items[i];
    if (strcmp(json_str(e, "ph"), "i") != 0 ||
        strcmp(json_str(e, "cat"), "fault") != 0)
      continue;
    marks++;
    const json *args = json_get(e, "args");
    ck_assert_str_eq(json_str(e, "name"), "crash");
    ck_assert_str_eq(json_str(args, "fault"), "at 5ms: crash m1");
    const char *vat = json_str(args, "vat");
    ck_assert_msg(vat == NULL, "a fault at a time on vat \"%s\"", vat);
  }
  ck_assert_uint_eq(marks, 1);
  json_free(doc);
  unlink(path);
}
END_TEST

/* A run whose only faults were drawn at a time (fault_rate 0): its
 * replay's comment counts them, and claims no "fault rate 0". */
START_TEST(a_replay_line_owns_to_the_faults_drawn_at_a_time) {
  outcome out = {0};
  vat_sim_scenario sc = {.name = "drawn-crash",
                         .setup = drawn_crash_setup,
                         .done = crash_done,
                         .ctx = &out};
  vat_sim_options o = options(VAT_SIM_RANDOM);
  o.deadline_ns = 100000000;
  vat_sim_result r;
  uint64_t seed = 1;
  for (; seed <= 40; seed++) {
    ck_assert_vat_ok(vat_sim_replay(&sc, &o, seed, &r));
    if (r.timed_faults == 1)
      break;
  }
  ck_assert_uint_le(seed, 40);
  char want[64];
  snprintf(want, sizeof want, "VAT_SIM_SEED=%llu\n# scenario drawn-crash, ",
           (unsigned long long)seed);
  ck_assert_msg(strncmp(r.replay, want, strlen(want)) == 0, "%s", r.replay);
  ck_assert_msg(strstr(r.replay, "1 fault at a time drawn from the seed"), "%s",
                r.replay);
  ck_assert_msg(strstr(r.replay, "rate 0") == NULL, "%s", r.replay);
}
END_TEST

/* The files in directory `dir` (its only file's name into `name`). */
static unsigned files_in(const char *dir, char *name, size_t size) {
  DIR *d = opendir(dir);
  ck_assert_ptr_nonnull(d);
  unsigned n = 0;
  for (struct dirent *e; (e = readdir(d)) != NULL;)
    if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0) {
      snprintf(name, size, "%s", e->d_name);
      n++;
    }
  closedir(d);
  return n;
}

/* VAT_TRACE=FILE: one file, FILE, whatever the worlds run (a campaign's
 * seeds, a failure's shrinking runs, a world's other machines), holding
 * the last world's trace; never FILE.2, FILE.3, ... */
START_TEST(vat_trace_names_one_file_for_every_world) {
  char dir[] = "/tmp/vat-sim-env-trace-XXXXXX";
  ck_assert_ptr_nonnull(mkdtemp(dir));
  char path[sizeof dir + 16], name[256] = "";
  snprintf(path, sizeof path, "%s/t.json", dir);
  outcome out = {0};
  vat_sim_scenario sc = {.name = "env-trace",
                         .setup = drawn_crash_setup,
                         .done = never_done,
                         .ctx = &out};
  vat_sim_options o = options(VAT_SIM_RANDOM);
  o.plan = "at 5ms: crash m1; at 6ms: crash m1";
  setenv("VAT_TRACE", path, 1);
  vat_sim_result r;
  ck_assert_vat_ok(vat_sim_replay(&sc, &o, 1, &r)); /* fails, and shrinks */
  ck_assert(r.failed && r.shrunk.done && r.shrunk.runs > 0);
  ck_assert_uint_eq(files_in(dir, name, sizeof name), 1);
  ck_assert_str_eq(name, "t.json");
  o.plan = NULL;
  o.shrink_runs = 0;
  sc.done = crash_done;
  ck_assert_vat_ok(vat_sim_run(&sc, &o, 1, 5, &r));
  unsetenv("VAT_TRACE");
  ck_assert_uint_eq(files_in(dir, name, sizeof name), 1);
  char err[256];
  json *doc = json_parse_file(path, err, sizeof err);
  ck_assert_msg(doc != NULL, "%s", err);
  json_free(doc);
  unlink(path);
  rmdir(dir);
}
END_TEST

/* vat/sim.h: vat_sim_system_crash does nothing when a crash of that
 * machine is due before the time it asks for: whichever of two crashes
 * is asked first, the earlier one strikes, once. */
typedef struct crash_twice {
  outcome out;
  uint64_t first_ns, second_ns;
} crash_twice;

static void *crash_twice_setup(vat_system *sys, void *ctx) {
  crash_twice *c = ctx;
  crash_world *w = GC_MALLOC(sizeof *w);
  c->out.world = w;
  if ((w->b = machine(sys, "ticker")) == NULL)
    return NULL;
  vat_ref *ticker = spawn_with_world(w->b, w);
  vat_ref *looker = spawn_with_world(sys, w);
  if (ticker == NULL || looker == NULL ||
      vat_host_send(ticker, start_ticking, NULL) != VAT_OK ||
      vat_host_send(looker, look_later, NULL) != VAT_OK ||
      vat_sim_system_crash(w->b, c->first_ns) != VAT_OK ||
      vat_sim_system_crash(w->b, c->second_ns) != VAT_OK)
    return NULL;
  return w;
}

START_TEST(the_earlier_of_two_crashes_strikes) {
  static const uint64_t orders[2][2] = {{10000000, 15000000},
                                        {15000000, 10000000}};
  for (unsigned k = 0; k < 2; k++) {
    crash_twice c = {.first_ns = orders[k][0], .second_ns = orders[k][1]};
    vat_sim_scenario sc = {.name = "crash-twice",
                           .setup = crash_twice_setup,
                           .done = crash_done,
                           .ctx = &c};
    vat_sim_options o = options(VAT_SIM_RANDOM);
    vat_sim_result r;
    ck_assert_vat_ok(vat_sim_replay(&sc, &o, 1, &r));
    ck_assert_msg(!r.failed, "%s", r.message);
    crash_world *w = c.out.world;
    ck_assert_msg(strcmp(r.notes, "10.000 ms: crash ticker") == 0,
                  "crash asked at %" PRIu64 " then %" PRIu64 " ns: %s",
                  c.first_ns, c.second_ns, r.notes);
    ck_assert_uint_eq(w->ticks, 9);
    ck_assert(w->seen_crashed);
  }
}
END_TEST

/* vat/sim.h: a machine's name is "at most 31 bytes": 31 is taken and
 * reported whole, 32 is refused. */
static int name_rc[2];
static char name_seen[64];

static void *long_names_setup(vat_system *sys, void *ctx) {
  (void)ctx;
  bad_world *w = GC_MALLOC(sizeof *w);
  char name[33];
  vat_sim_system_options mo;
  vat_sim_system_options_default(&mo);
  mo.name = name;
  vat_system *out = NULL;
  memset(name, 'n', 32);
  name[32] = '\0';
  name_rc[1] = vat_sim_system_new(sys, &mo, &out);
  name[31] = '\0';
  name_rc[0] = vat_sim_system_new(sys, &mo, &out);
  const char *seen = name_rc[0] == VAT_OK ? vat_sim_system_name(out) : NULL;
  snprintf(name_seen, sizeof name_seen, "%s", seen ? seen : "(none)");
  return w;
}

START_TEST(a_machine_name_of_31_bytes_is_taken_and_32_refused) {
  vat_sim_scenario sc = {.name = "long-names", .setup = long_names_setup};
  vat_sim_options o = options(VAT_SIM_RANDOM);
  vat_sim_result r;
  ck_assert_vat_ok(vat_sim_replay(&sc, &o, 1, &r));
  ck_assert_msg(!r.failed, "%s", r.message);
  ck_assert_msg(name_rc[1] == VAT_EINVAL,
                "a name of 32 bytes: %s, expected VAT_EINVAL",
                vat_err_name(name_rc[1]));
  ck_assert_msg(name_rc[0] == VAT_OK, "a name of 31 bytes: %s",
                vat_err_name(name_rc[0]));
  ck_assert_uint_eq(strlen(name_seen), 31);
  ck_assert_int_eq(strspn(name_seen, "n"), 31);
}
END_TEST

Suite *test_sim_machines_suite(void) {
  Suite *s = suite_create("sim_machines");
  TCase *tc = test_case("worlds", 120);
  tcase_add_test(tc, two_systems_run_as_one_world);
  tcase_add_test(tc, random_is_uniform_over_the_vats_of_every_system);
  tcase_add_test(tc, pct_priorities_span_the_systems);
  tcase_add_test(tc, the_systems_share_one_virtual_clock);
  tcase_add_test(tc, a_crashed_machine_stands_still);
  tcase_add_test(tc, crashes_drawn_from_the_seed_replay);
  tcase_add_test(tc, a_fault_at_a_time_is_marked_on_no_vat);
  tcase_add_test(tc, vat_trace_names_one_file_for_every_world);
  tcase_add_test(tc, a_replay_line_owns_to_the_faults_drawn_at_a_time);
  tcase_add_test(tc, sources_drive_the_clock_and_the_digest);
  tcase_add_test(tc, faults_strike_the_vats_of_every_system);
  tcase_add_test(tc, bad_calls_are_refused);
  tcase_add_test(tc, no_system_is_made_inside_a_turn);
  tcase_add_test(tc, the_earlier_of_two_crashes_strikes);
  tcase_add_test(tc, a_machine_name_of_31_bytes_is_taken_and_32_refused);
  suite_add_tcase(s, tc);
  return s;
}
