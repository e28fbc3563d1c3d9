/* The simulation harness (vat/sim.h): one fresh deterministic world per
 * seed, run a step at a time, checked after every turn and at the end. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/system.h"
#include "sim/parallel.h"
#include "sim/progress.h"
#include "sim/world.h"
#include "util/mem.h"
#include "vat/host.h"
#include "vat/sim.h"

void vat_sim_options_default(vat_sim_options *o) {
  if (o == NULL)
    return;
  *o = (vat_sim_options){.strategy = VAT_SIM_RANDOM,
                         .pct_depth = 3,
                         .pct_steps = 1000,
                         .max_faults = 1,
                         .max_turns = 1000000,
                         .deadline_ns = 60000000000ull,
                         .jobs = 1};
}

static int valid(const vat_sim_scenario *sc, const vat_sim_options *o,
                 const vat_sim_result *out) {
  if (sc == NULL || sc->setup == NULL || out == NULL)
    return VAT_EINVAL;
  if (!(o->fault_rate >= 0 && o->fault_rate <= 1) || o->pct_depth == 0 ||
      o->pct_steps == 0 || o->max_turns == 0 ||
      (o->strategy != VAT_SIM_RANDOM && o->strategy != VAT_SIM_PCT) ||
      o->jobs > VAT_SIM_MAX_JOBS)
    return VAT_EINVAL;
  return VAT_OK;
}

static const char *strategy_name(vat_sim_strategy s) {
  return s == VAT_SIM_PCT ? "pct" : "random";
}

static void describe(const vat__sim_world *w, uint64_t seed,
                     const vat_sim_scenario *sc, vat_sim_result *r) {
  const vat_sim_options *o = &w->opt;
  size_t at = 0;
  r->plan[0] = '\0';
  unsigned shown = w->nfaults < VAT_SIM_MAX_REPORTED_FAULTS
                       ? w->nfaults
                       : VAT_SIM_MAX_REPORTED_FAULTS;
  for (unsigned i = 0; i < shown && at < sizeof r->plan; i++) {
    char buf[32];
    const vat_sim_fault *f = &w->faults[i];
    int n = snprintf(r->plan + at, sizeof r->plan - at,
                     "%sstep %" PRIu64 ": %s %s", i ? "; " : "", f->step,
                     f->kind == VAT_SIM_KILL ? "kill" : "fail",
                     vat__sim_vat_name(w, f->vat, buf, sizeof buf));
    at += n > 0 ? (size_t)n : 0;
  }
  if (w->nfaults == 0)
    snprintf(r->plan, sizeof r->plan, "none");
  char strategy[64];
  if (o->strategy == VAT_SIM_PCT)
    snprintf(strategy, sizeof strategy, "pct d=%u k=%" PRIu64, o->pct_depth,
             o->pct_steps);
  else
    snprintf(strategy, sizeof strategy, "%s", strategy_name(o->strategy));
  snprintf(r->replay, sizeof r->replay,
           "replay: VAT_SIM_SEED=%" PRIu64 " (scenario %s, %s, fault rate %g"
           " max %u), or vat_sim_replay(scenario, options, %" PRIu64 ", out)",
           seed, sc->name ? sc->name : "?", strategy, o->fault_rate,
           o->max_faults, seed);
}

/* Runs one seed's world to its end; false when it failed (r->message). */
static bool run_seed(const vat_sim_scenario *sc, const vat_sim_options *o,
                     uint64_t seed, vat_sim_result *r, int *err) {
  vat__sim_world *w = vat__gc_alloc(sizeof *w);
  vat__sim_world_init(w, o, seed);
  vat_config cfg;
  vat_config_default(&cfg);
  cfg.workers = 0;
  cfg.deterministic = true;
  cfg.seed = seed;
  cfg.on_crash = NULL;
  vat_system *sys;
  if ((*err = vat_system_new(&cfg, &sys)) != VAT_OK)
    return true;
  sys->sched.det_choose = vat__sim_choose;
  sys->sched.det_choose_ctx = w;
  uint64_t start = vat_system_now(sys), turns = 0;
  bool ok = false;
  char why[200] = "";
  void *world = sc->setup(sys, sc->ctx);
  if (world == NULL) {
    snprintf(r->message, sizeof r->message, "setup failed");
    goto end;
  }
  for (;;) {
    vat_run_result rr;
    int rc = vat_system_run(sys, 1, 0, &rr);
    if (rc != VAT_OK) {
      snprintf(r->message, sizeof r->message, "run call failed: %d", rc);
      goto end;
    }
    if (rr.turns > 0) {
      turns += rr.turns;
      if (sc->check && !sc->check(world, false, why, sizeof why)) {
        snprintf(r->message, sizeof r->message,
                 "invariant after turn %" PRIu64 ": %s", turns, why);
        goto end;
      }
      if (turns >= o->max_turns) {
        snprintf(r->message, sizeof r->message,
                 "liveness: %" PRIu64 " turns and not quiescent", turns);
        goto end;
      }
      continue;
    }
    if (rr.more)
      continue;
    int64_t ns;
    vat_system_next_timer(sys, &ns);
    uint64_t now = vat_system_now(sys) - start;
    if (ns < 0)
      break; /* quiescent */
    if (now + (uint64_t)ns > o->deadline_ns) {
      snprintf(r->message, sizeof r->message,
               "liveness: deadline %.3f s passed (virtual) and not quiescent",
               o->deadline_ns * 1e-9);
      goto end;
    }
    if (ns > 0)
      vat_system_advance_clock(sys, (uint64_t)ns);
  }
  if (sc->check && !sc->check(world, true, why, sizeof why)) {
    snprintf(r->message, sizeof r->message, "invariant at quiescence: %s", why);
    goto end;
  }
  if (sc->done && !sc->done(world)) {
    snprintf(r->message, sizeof r->message,
             "liveness: quiescent at %.3f s (virtual) and not done: stuck "
             "before the deadline %.3f s",
             (vat_system_now(sys) - start) * 1e-9, o->deadline_ns * 1e-9);
    goto end;
  }
  ok = true;
end:
  r->seed = seed;
  r->turns = turns;
  r->steps = w->steps;
  r->digest = w->digest;
  r->now_ns = vat_system_now(sys) - start;
  r->total_turns += turns;
  r->total_faults += w->nfaults;
  r->nfaults = w->nfaults;
  memcpy(r->faults, w->faults, sizeof r->faults);
  describe(w, seed, sc, r);
  sys->sched.det_choose = NULL; /* shutdown's drain is not a step */
  vat_system_shutdown(sys, 0);
  vat_system_destroy(sys);
  return ok;
}

static int campaign(const vat_sim_scenario *sc, const vat_sim_options *o,
                    uint64_t first, uint64_t count, vat_sim_result *out);

/* What a worker process runs each seed of a parallel campaign with. */
typedef struct campaign_of {
  const vat_sim_scenario *sc;
  const vat_sim_options *o;
} campaign_of;

static int one_seed(void *ctx, uint64_t seed, vat_sim_result *out) {
  const campaign_of *c = ctx;
  return campaign(c->sc, c->o, seed, 1, out);
}

/* The seeds one after another, here. */
static int serially(const vat_sim_scenario *sc, const vat_sim_options *o,
                    uint64_t first, uint64_t count, vat__sim_progress *progress,
                    vat_sim_result *out) {
  int rc = VAT_OK;
  for (uint64_t i = 0; i < count; i++) {
    out->message[0] = '\0';
    out->seeds_run++;
    bool ok = run_seed(sc, o, first + i, out, &rc);
    if (rc != VAT_OK)
      return rc;
    if (!ok) {
      out->failed = true;
      return VAT_OK;
    }
    vat__sim_progress_update(progress, out->seeds_run, out->total_turns, 0);
  }
  out->message[0] = '\0';
  return VAT_OK;
}

static int campaign(const vat_sim_scenario *sc, const vat_sim_options *o,
                    uint64_t first, uint64_t count, vat_sim_result *out) {
  vat_sim_options dflt;
  if (o == NULL) {
    vat_sim_options_default(&dflt);
    o = &dflt;
  }
  int rc = valid(sc, o, out);
  if (rc != VAT_OK)
    return rc;
  if (count == 0)
    return VAT_EINVAL;
  memset(out, 0, sizeof *out);
  vat__sim_progress progress;
  vat__sim_progress_begin(&progress, STDERR_FILENO, sc->name, count);
  unsigned jobs = count > 1 ? vat__sim_jobs(o) : 1;
  if (jobs > 1)
    rc = vat__sim_parallel(one_seed, &(campaign_of){sc, o}, first, count, jobs,
                           &progress, out);
  else
    rc = serially(sc, o, first, count, &progress, out);
  vat__sim_progress_end(&progress);
  return rc;
}

int vat_sim_run(const vat_sim_scenario *sc, const vat_sim_options *o,
                uint64_t first, uint64_t count, vat_sim_result *out) {
  const char *env = getenv("VAT_SIM_SEED");
  if (env != NULL && *env != '\0') {
    char *end;
    errno = 0;
    unsigned long long seed = strtoull(env, &end, 0);
    if (errno != 0 || *end != '\0')
      return VAT_EINVAL;
    return campaign(sc, o, seed, 1, out);
  }
  return campaign(sc, o, first, count, out);
}

int vat_sim_replay(const vat_sim_scenario *sc, const vat_sim_options *o,
                   uint64_t seed, vat_sim_result *out) {
  return campaign(sc, o, seed, 1, out);
}
