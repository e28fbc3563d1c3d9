/* The simulation harness (vat/sim.h): one fresh deterministic world per
 * seed, run a step at a time, checked after every turn and at the end. */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/system.h"
#include "sim/bounds.h"
#include "sim/hold.h"
#include "sim/machines.h"
#include "sim/parallel.h"
#include "sim/progress.h"
#include "sim/run.h"
#include "sim/world.h"
#include "trace/trace.h"
#include "util/mem.h"
#include "vat/host.h"
#include "vat/sim.h"
#include "vat/trace.h"

void vat_sim_options_default(vat_sim_options *o) {
  if (o == NULL)
    return;
  *o = (vat_sim_options){.strategy = VAT_SIM_RANDOM,
                         .pct_depth = 3,
                         .pct_steps = 1000,
                         .max_faults = 1,
                         .max_delay_steps = 8,
                         .max_jitter_ns = 1000000000ull,
                         .shrink_runs = 200,
                         .max_turns = 1000000,
                         .deadline_ns = 60000000000ull,
                         .jobs = 1,
                         .max_seed_time_ns = 60000000000ull,
                         .max_seed_memory = 1ull << 30};
}

/* Writes why the call is refused into `why`; VAT_EINVAL. */
static int refuse(char *why, size_t size, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int refuse(char *why, size_t size, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(why, size, fmt, ap);
  va_end(ap);
  return VAT_EINVAL;
}

/* The scenario and options, checked: VAT_OK, or VAT_EINVAL and why. */
static int valid(const vat_sim_scenario *sc, const vat_sim_options *o,
                 char *why, size_t size) {
  if (sc == NULL || sc->setup == NULL)
    return refuse(why, size, "the scenario%s is NULL",
                  sc == NULL ? "" : "'s setup");
  if (!(o->fault_rate >= 0 && o->fault_rate <= 1))
    return refuse(why, size, "fault_rate %g is outside [0, 1]", o->fault_rate);
  if (o->strategy != VAT_SIM_RANDOM && o->strategy != VAT_SIM_PCT)
    return refuse(why, size,
                  "strategy %d is neither VAT_SIM_RANDOM nor "
                  "VAT_SIM_PCT",
                  (int)o->strategy);
  if (o->pct_depth == 0 || o->pct_steps == 0)
    return refuse(why, size, "%s is 0: it must be at least 1",
                  o->pct_depth == 0 ? "pct_depth" : "pct_steps");
  if (o->max_turns == 0)
    return refuse(why, size, "max_turns is 0: a seed runs at least one turn");
  if (o->jobs > VAT_SIM_MAX_JOBS)
    return refuse(why, size, "jobs %u is above VAT_SIM_MAX_JOBS (%d)", o->jobs,
                  VAT_SIM_MAX_JOBS);
  unsigned kinds = o->fault_kinds ? o->fault_kinds : VAT_SIM_FAULTS_DEFAULT;
  if (kinds & ~VAT_SIM_FAULTS_ALL)
    return refuse(why, size,
                  "fault_kinds %#x holds no fault kind's bit "
                  "%#x (VAT_SIM_FAULT(kind) each)",
                  kinds, kinds & ~VAT_SIM_FAULTS_ALL);
  if ((kinds & VAT_SIM_FAULT(VAT_SIM_DELAY)) && o->max_delay_steps == 0)
    return refuse(why, size,
                  "max_delay_steps is 0 and delays are drawn: it "
                  "must be at least 1");
  if ((kinds & VAT_SIM_FAULT(VAT_SIM_JITTER)) && o->max_jitter_ns == 0)
    return refuse(why, size,
                  "max_jitter_ns is 0 and jitters are drawn: it "
                  "must be at least 1");
  return VAT_OK;
}

/* --- The report ----------------------------------------------------------- */

static void strategy_text(const vat_sim_options *o, char *buf, size_t size) {
  if (o->strategy == VAT_SIM_PCT)
    snprintf(buf, size, "pct d=%u k=%" PRIu64, o->pct_depth, o->pct_steps);
  else
    snprintf(buf, size, "random");
}

/* The drawn faults' settings, as the replay's comment recalls them: the
 * options' rate at a step, and the faults at a time the seed drew (a
 * machine's crash, a source's), which no rate says. */
static void faults_text(const vat_sim_options *o, unsigned timed, char *buf,
                        size_t size) {
  size_t at = 0;
  buf[0] = '\0';
  if (o->fault_rate > 0) {
    at = (size_t)snprintf(buf, size, "faults drawn at rate %g a step, max %u",
                          o->fault_rate, o->max_faults);
    unsigned kinds = o->fault_kinds ? o->fault_kinds : VAT_SIM_FAULTS_DEFAULT;
    for (int k = 0; vat__sim_fault_name(k) != NULL && at < size; k++)
      if (kinds != VAT_SIM_FAULTS_DEFAULT && (kinds & VAT_SIM_FAULT(k)))
        at +=
            (size_t)snprintf(buf + at, size - at, "%s%s",
                             kinds & (VAT_SIM_FAULT(k) - 1) ? "|" : ", kinds ",
                             vat__sim_fault_name(k));
  }
  if (timed > 0 && at < size)
    at += (size_t)snprintf(buf + at, size - at,
                           "%s%u fault%s at a time drawn from the seed",
                           at ? ", " : "", timed, timed == 1 ? "" : "s");
  if (at == 0)
    snprintf(buf, size, "no faults drawn");
}

/* The scenario's name as a shell comment may hold it. */
static void name_text(const vat_sim_scenario *sc, char *buf, size_t size) {
  snprintf(buf, size, "%s", sc->name ? sc->name : "?");
  for (char *c = buf; *c; c++)
    if ((unsigned char)*c < ' ' || *c == 0x7f)
      *c = '?';
}

void vat__sim_replay_line(const vat_sim_scenario *sc, const vat_sim_options *o,
                          uint64_t seed, const char *plan, unsigned timed,
                          char *buf, size_t size) {
  char strategy[64], faults[160], name[64];
  strategy_text(o, strategy, sizeof strategy);
  name_text(sc, name, sizeof name);
  if (plan == NULL) {
    faults_text(o, timed, faults, sizeof faults);
    snprintf(buf, size,
             "VAT_SIM_SEED=%" PRIu64 "\n# scenario %s, %s, %s; in code: "
             "vat_sim_replay(scenario, options, %" PRIu64 ", out)",
             seed, name, strategy, faults, seed);
  } else {
    snprintf(buf, size,
             "VAT_SIM_SEED=%" PRIu64 " VAT_SIM_PLAN='%s'\n# scenario %s, "
             "%s, the plan's faults; in code: vat_sim_replay(scenario, "
             "options, %" PRIu64 ", out) with options.plan that plan",
             seed, plan, name, strategy, seed);
  }
}

/* The seed's figures, its plan and its replay line, from its world. */
static void report(const vat__sim_world *w, uint64_t seed,
                   const vat_sim_scenario *sc, vat_sim_result *r) {
  r->seed = seed;
  r->steps = w->steps;
  r->digest = w->digest;
  r->nfaults = w->nfaults;
  r->timed_faults = w->ntimed;
  r->total_faults += w->nfaults + w->ntimed;
  memset(r->faults, 0, sizeof r->faults);
  unsigned shown = w->nfaults < VAT_SIM_MAX_REPORTED_FAULTS
                       ? w->nfaults
                       : VAT_SIM_MAX_REPORTED_FAULTS;
  if (shown)
    memcpy(r->faults, w->faults, shown * sizeof *r->faults);
  r->plan_missed = 0;
  for (unsigned j = 0; w->plan != NULL && j < w->plan->n; j++)
    r->plan_missed += !w->planned_done[j];
  vat__sim_plan_format(w, r->plan, sizeof r->plan);
  vat__sim_machines_notes(w, r->notes, sizeof r->notes);
  vat__sim_replay_line(sc, &w->opt, seed, w->plan ? r->plan : NULL, w->ntimed,
                       r->replay, sizeof r->replay);
}

/* The seed's figures when its world's system could not be made: none
 * but the seed, and why. */
static void no_world(const vat__sim_world *w, uint64_t seed,
                     const vat_sim_scenario *sc, int err, vat_sim_result *r) {
  r->turns = r->now_ns = 0;
  r->verdict = VAT_SIM_PASSED;
  snprintf(r->message, sizeof r->message,
           "the world's system could not be made: vat_system_new returned "
           "%s (%s)",
           vat_err_name(err), vat_strerror(err));
  report(w, seed, sc, r);
}

/* --- One seed ------------------------------------------------------------- */

static vat_sim_verdict fail(vat_sim_result *r, vat_sim_verdict v,
                            const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static vat_sim_verdict fail(vat_sim_result *r, vat_sim_verdict v,
                            const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(r->message, sizeof r->message, fmt, ap);
  va_end(ap);
  return v;
}

/* A stop fault struck at this step: the system stops now, as a machine
 * of a larger world stops (so the check can tell), and the check has the
 * last word. */
static vat_sim_verdict stop(const vat_sim_scenario *sc, vat__sim_world *w,
                            void *world, vat_sim_result *r) {
  vat__sim_machines_stop(w, w->sys);
  char why[200] = "";
  if (sc->check && !sc->check(world, true, why, sizeof why))
    return fail(r, VAT_SIM_BROKE_INVARIANT,
                "invariant after the stop at step %" PRIu64 ": %s", w->steps,
                why);
  return VAT_SIM_PASSED;
}

/* Runs the world's steps until it ends; the verdict, with r->message. */
static vat_sim_verdict run_steps(const vat_sim_scenario *sc, vat__sim_world *w,
                                 void *world, uint64_t start,
                                 vat__sim_meter *meter, uint64_t *turns,
                                 vat_sim_result *r) {
  const vat_sim_options *o = &w->opt;
  vat_system *sys = w->sys;
  char why[200] = "";
  for (;;) {
    vat_sim_verdict over = vat__sim_meter_check(meter, o, why, sizeof why);
    if (over != VAT_SIM_PASSED)
      return fail(r, over, "%s, after %" PRIu64 " turns", why, *turns);
    vat__sim_hold_release(w, false);
    vat_run_result rr;
    int rc = vat__sim_machines_run(w, &rr);
    if (w->refused != NULL)
      return fail(r, VAT_SIM_RUN_FAILED, "%s", w->refused);
    if (rc != VAT_OK)
      return fail(r, VAT_SIM_RUN_FAILED, "run call failed: %d", rc);
    *turns += rr.turns;
    if (w->stop != NULL) /* even when the step ran no turn (a drop) */
      return stop(sc, w, world, r);
    if (rr.turns > 0) {
      if (sc->check && !sc->check(world, false, why, sizeof why))
        return fail(r, VAT_SIM_BROKE_INVARIANT,
                    "invariant after turn %" PRIu64 ": %s", *turns, why);
      if (*turns >= o->max_turns)
        return fail(r, VAT_SIM_TOO_MANY_TURNS,
                    "liveness: %" PRIu64 " turns and not quiescent", *turns);
      continue;
    }
    if (rr.more)
      continue;
    if (vat__sim_holding(w)) { /* nothing runs until they arrive */
      vat__sim_hold_release(w, true);
      continue;
    }
    int64_t ns;
    vat__sim_machines_next(w, &ns);
    uint64_t now = vat_system_now(sys) - start;
    if (ns < 0)
      break; /* quiescent */
    if (now + (uint64_t)ns > o->deadline_ns)
      return fail(r, VAT_SIM_MISSED_DEADLINE,
                  "liveness: deadline %.3f s passed (virtual) and not "
                  "quiescent",
                  o->deadline_ns * 1e-9);
    if (ns > 0)
      vat__sim_machines_advance(w, (uint64_t)ns);
  }
  if (sc->check && !sc->check(world, true, why, sizeof why))
    return fail(r, VAT_SIM_BROKE_INVARIANT, "invariant at quiescence: %s", why);
  if (sc->done && !sc->done(world))
    return fail(r, VAT_SIM_STUCK,
                "liveness: quiescent at %.3f s (virtual) and not done: stuck "
                "before the deadline %.3f s",
                (vat_system_now(sys) - start) * 1e-9, o->deadline_ns * 1e-9);
  return VAT_SIM_PASSED;
}

static bool may_delay(const vat_sim_options *o, const vat__sim_plan *plan) {
  if (plan != NULL) {
    for (unsigned j = 0; j < plan->n; j++)
      if (plan->faults[j].text == NULL && plan->faults[j].kind == VAT_SIM_DELAY)
        return true;
    return false;
  }
  unsigned kinds = o->fault_kinds ? o->fault_kinds : VAT_SIM_FAULTS_DEFAULT;
  return o->fault_rate > 0 && (kinds & VAT_SIM_FAULT(VAT_SIM_DELAY));
}

const char vat__sim_trace_env[] = "";

/* What a world's system is told to trace into (vat_config.trace_path). */
static const char *trace_config(const char *trace_path) {
  if (trace_path == vat__sim_trace_env) {
    const char *env = getenv("VAT_TRACE");
    return env != NULL && *env != '\0' ? env : vat__trace_off;
  }
  return trace_path != NULL ? "" : vat__trace_off; /* "": written below */
}

vat__sim_world *vat__sim_run_seed(const vat_sim_scenario *sc,
                                  const vat_sim_options *o,
                                  const vat__sim_plan *plan, uint64_t seed,
                                  const char *trace_path, vat_sim_result *r,
                                  int *err) {
  vat__sim_meter meter;
  vat__sim_meter_start(&meter);
  vat__sim_world *w = vat__gc_alloc(sizeof *w);
  vat__sim_world_init(w, o, plan, seed);
  vat_config cfg;
  vat_config_default(&cfg);
  cfg.workers = 0;
  cfg.deterministic = true;
  cfg.seed = seed;
  cfg.on_crash = NULL;
  cfg.trace_path = trace_config(trace_path);
  r->message[0] = '\0';
  if ((*err = vat_system_new(&cfg, &w->sys)) != VAT_OK) {
    no_world(w, seed, sc, *err, r);
    return NULL;
  }
  vat_system *sys = w->sys;
  sys->sched.det_choose = vat__sim_choose;
  sys->sched.det_choose_ctx = w;
  sys->trace_vat_track = vat__sim_track;
  sys->trace_vat_track_ctx = w;
  if (may_delay(o, plan))
    vat__sim_hold_watch(w, sys);
  vat__sim_machines_begin(w, sys, seed);
  uint64_t start = vat_system_now(sys), turns = 0;
  void *world = sc->setup(sys, sc->ctx);
  r->verdict = world == NULL
                   ? fail(r, VAT_SIM_SETUP_FAILED, "setup failed")
                   : run_steps(sc, w, world, start, &meter, &turns, r);
  r->turns = turns;
  r->total_turns += turns;
  r->now_ns = vat_system_now(sys) - start;
  report(w, seed, sc, r);
  vat__sim_hold_release(w, true); /* accepted: dropped at shutdown if queued */
  vat__sim_machines_end(w);
  sys->sched.det_choose = NULL; /* shutdown's drain is not a step */
  vat_system_shutdown(sys, 0);
  r->trace_written = trace_path != NULL && trace_path != vat__sim_trace_env &&
                     vat_system_trace_write(sys, trace_path) == VAT_OK;
  vat_system_destroy(sys);
  if (w->refused != NULL) { /* the plan's mistake: no seed's failure */
    *err = VAT_EINVAL;
    return NULL;
  }
  return w;
}

/* --- Campaigns ------------------------------------------------------------ */

/* The plan the campaign follows: VAT_SIM_PLAN's (`env`), else the
 * options'; none: drawn. Why it does not parse goes to `why`. */
static int read_plan(const char *env, const vat_sim_options *o,
                     vat__sim_plan **plan, char *why, size_t size) {
  const char *text = env != NULL && *env != '\0' ? env : o->plan;
  *plan = NULL;
  if (text == NULL)
    return VAT_OK;
  *plan = vat__gc_alloc(sizeof **plan);
  return vat__sim_plan_parse(text, *plan, why, size);
}

/* What a campaign runs its seeds with. */
typedef struct campaign_of {
  const vat_sim_scenario *sc;
  const vat_sim_options *o;
  const vat__sim_plan *plan; /* NULL: drawn */
  vat__sim_world *last;      /* the last seed's world run here */
} campaign_of;

/* One seed alone, as a campaign of that seed would run it, but neither
 * shrunk nor traced: a worker's seed, or the failing one run again here
 * (which settle() then shrinks and traces, once it is known to fail as
 * it failed in its worker). */
static int one_seed(void *ctx, uint64_t seed, vat_sim_result *out) {
  campaign_of *c = ctx;
  int rc = VAT_OK;
  memset(out, 0, sizeof *out);
  out->seeds_run = 1;
  c->last = vat__sim_run_seed(c->sc, c->o, c->plan, seed, vat__sim_trace_env,
                              out, &rc);
  if (c->last != NULL && out->verdict != VAT_SIM_PASSED)
    out->failed = true;
  return rc;
}

/* What the campaign reports of its failing seed, `out`, whose world,
 * run here, is c->last: the failure shrunk, and its run traced. */
static void settle(void *ctx, vat_sim_result *out) {
  campaign_of *c = ctx;
  if (vat__sim_over_bound(out->verdict))
    return; /* every run of it would cost as much again */
  vat__sim_shrink(c->sc, c->o, c->last, out);
  vat__sim_trace_failure(c->sc, c->o, c->plan, out);
}

/* The seeds one after another, here. */
static int serially(campaign_of *c, uint64_t first, uint64_t count,
                    vat__sim_progress *progress, vat_sim_result *out) {
  int rc = VAT_OK;
  for (uint64_t i = 0; i < count; i++) {
    out->seeds_run++;
    c->last = vat__sim_run_seed(c->sc, c->o, c->plan, first + i,
                                vat__sim_trace_env, out, &rc);
    if (c->last == NULL)
      return rc;
    if (out->verdict != VAT_SIM_PASSED) {
      out->failed = true;
      settle(c, out);
      return VAT_OK;
    }
    vat__sim_progress_update(progress, out->seeds_run, out->total_turns, 0);
  }
  out->message[0] = '\0';
  return VAT_OK;
}

static int campaign(const vat_sim_scenario *sc, const vat_sim_options *o,
                    const char *env_plan, uint64_t first, uint64_t count,
                    vat_sim_result *out) {
  if (out == NULL)
    return VAT_EINVAL;
  vat_sim_options bounded;
  if (o == NULL)
    vat_sim_options_default(&bounded);
  else
    bounded = *o;
  o = &bounded;
  char why[sizeof out->message] = "";
  int rc = vat__sim_bounds_from_env(&bounded, why, sizeof why);
  if (rc == VAT_OK)
    rc = valid(sc, o, why, sizeof why);
  if (rc == VAT_OK && count == 0)
    rc = refuse(why, sizeof why, "count is 0: a campaign runs a seed or more");
  /* The plan is read before `out` is cleared: its text may be out's. */
  vat__sim_plan *plan = NULL;
  if (rc == VAT_OK)
    rc = read_plan(env_plan, o, &plan, why, sizeof why);
  memset(out, 0, sizeof *out);
  if (rc != VAT_OK) {
    memcpy(out->message, why, sizeof why);
    return rc;
  }
  campaign_of c = {.sc = sc, .o = o, .plan = plan};
  vat__sim_progress progress;
  vat__sim_progress_begin(&progress, STDERR_FILENO, sc->name, count);
  unsigned jobs = count > 1 ? vat__sim_jobs(o) : 1;
  if (jobs > 1)
    rc = vat__sim_parallel(&(vat__sim_seeds){one_seed, settle, &c}, first,
                           count, jobs, &progress, out);
  else
    rc = serially(&c, first, count, &progress, out);
  vat__sim_progress_end(&progress);
  return rc;
}

int vat_sim_run(const vat_sim_scenario *sc, const vat_sim_options *o,
                uint64_t first, uint64_t count, vat_sim_result *out) {
  const char *plan = getenv("VAT_SIM_PLAN");
  const char *env = getenv("VAT_SIM_SEED");
  if (env != NULL && *env != '\0') {
    char *end;
    errno = 0;
    /* Decimal, as the replay line prints it: base 0 would read a leading
     * 0 as octal. */
    bool hex = env[0] == '0' && (env[1] == 'x' || env[1] == 'X');
    unsigned long long seed = strtoull(env, &end, hex ? 16 : 10);
    if (errno != 0 || *end != '\0' || *env < '0' || *env > '9') {
      if (out != NULL) {
        memset(out, 0, sizeof *out);
        snprintf(out->message, sizeof out->message,
                 "VAT_SIM_SEED=%.60s is not a seed: a whole number from 0 to "
                 "2^64 - 1 is expected (decimal, or hexadecimal after 0x)",
                 env);
      }
      return VAT_EINVAL;
    }
    return campaign(sc, o, plan, seed, 1, out);
  }
  return campaign(sc, o, plan, first, count, out);
}

int vat_sim_replay(const vat_sim_scenario *sc, const vat_sim_options *o,
                   uint64_t seed, vat_sim_result *out) {
  return campaign(sc, o, NULL, seed, 1, out);
}
