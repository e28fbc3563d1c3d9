/* Worlds of several systems (vat/sim.h): simulated machines run as one,
 * a step at a time, on one virtual clock, and the event sources that
 * join them (libvat-net's network).
 *
 * A step looks at what each live system has ready (the deterministic
 * picker's own view, sched/pick.c), chooses among all of them with the
 * world's strategy (vat__sim_decide), and runs that vat's system for one
 * turn, its chooser (`follow`) picking the vat decided and striking the
 * step's faults there, inside that system's run call as in a world of one.
 * The systems' timers, due crashes and the sources' due events fire before
 * the look, so a step sees what the clock made ready. When nothing is
 * ready the harness moves every clock to the earliest of all of those. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/system.h"
#include "core/thread.h"
#include "core/worker.h"
#include "sched/sched.h"
#include "sim/hold.h"
#include "sim/machines.h"
#include "sim/timed.h"
#include "timer/timer.h"
#include "trace/trace.h"
#include "util/gc.h"
#include "util/mem.h"

typedef struct source_entry {
  const vat_sim_source *src;
  void *ctx;
} source_entry;

enum { NAME_SIZE = 32, NOTE_MAX = 120 };

struct vat__sim_machines {
  vat__sim_world *w;
  vat__sim_world *outer; /* the world this one's begin found running */
  vat_system *sys[VAT_SIM_MAX_SYSTEMS];
  char name[VAT_SIM_MAX_SYSTEMS][NAME_SIZE];
  uint64_t crash_at[VAT_SIM_MAX_SYSTEMS]; /* UINT64_MAX: none planned */
  bool crashed[VAT_SIM_MAX_SYSTEMS];
  bool stopped[VAT_SIM_MAX_SYSTEMS]; /* by a stop fault */
  unsigned n;
  uint64_t machine_rng; /* new systems' seeds and crashes */
  uint64_t source_rng;  /* vat_sim_draw */
  source_entry *sources;
  unsigned nsources, sources_cap;
  /* A step among several systems: every ready vat (VAT__SIM_READY_MAX),
   * and the one decided, which its system's run call picks. */
  vat__task **ready;
  vat__task *follow;
  uint32_t follow_index;
  char notes[VAT_SIM_NOTES_SIZE];
  size_t notes_len;
};

/* The world that runs on this thread: its scenario's calls and its
 * sources name it by one of its systems. */
static VAT__TLS vat__sim_world *running;

static struct vat__sim_machines *machines_of(vat_system *sys, unsigned *index) {
  vat__sim_world *w = running;
  if (sys == NULL || w == NULL || w->machines == NULL)
    return NULL;
  struct vat__sim_machines *m = w->machines;
  for (unsigned i = 0; i < m->n; i++)
    if (m->sys[i] == sys) {
      if (index != NULL)
        *index = i;
      return m;
    }
  return NULL;
}

static uint64_t world_now(const struct vat__sim_machines *m) {
  return vat_system_now(m->sys[0]);
}

/* --- Notes ---------------------------------------------------------------- */

static void note(struct vat__sim_machines *m, const char *text) {
  uint64_t now = world_now(m);
  char line[NOTE_MAX + 48];
  if (now < 1000000000ull)
    snprintf(line, sizeof line, "%.3f ms: %.*s", (double)now * 1e-6,
             (int)NOTE_MAX, text);
  else
    snprintf(line, sizeof line, "%.6f s: %.*s", (double)now * 1e-9,
             (int)NOTE_MAX, text);
  for (const char *p = line; *p; p++)
    m->w->digest = vat__sim_mix(m->w->digest, (unsigned char)*p);
  size_t left = sizeof m->notes - m->notes_len;
  size_t need = strlen(line) + (m->notes_len ? 2 : 0);
  if (left <= 4) /* full: "..." is there */
    return;
  if (need >= left - 4) {
    snprintf(m->notes + m->notes_len, left, "%s...", m->notes_len ? "; " : "");
    m->notes_len = sizeof m->notes - 1;
    return;
  }
  m->notes_len += (size_t)snprintf(m->notes + m->notes_len, left, "%s%s",
                                   m->notes_len ? "; " : "", line);
}

void vat__sim_machines_notes(const vat__sim_world *w, char *buf, size_t size) {
  const struct vat__sim_machines *m = w->machines;
  snprintf(buf, size, "%s", m == NULL || m->notes_len == 0 ? "none" : m->notes);
}

/* --- The world's life ----------------------------------------------------- */

static void add(struct vat__sim_machines *m, vat_system *sys,
                const char *name) {
  unsigned i = m->n++;
  m->sys[i] = sys;
  m->crash_at[i] = UINT64_MAX;
  if (name != NULL)
    snprintf(m->name[i], NAME_SIZE, "%s", name);
  else
    snprintf(m->name[i], NAME_SIZE, "m%u", i);
}

void vat__sim_machines_begin(vat__sim_world *w, vat_system *sys,
                             uint64_t seed) {
  struct vat__sim_machines *m = vat__gc_alloc(sizeof *m);
  m->w = w;
  m->machine_rng = seed ^ 0x3AC41E5EED000001ull;
  m->source_rng = seed ^ 0x50C0CE5EED000002ull;
  w->machines = m;
  m->outer = running;
  running = w;
  add(m, sys, NULL);
  vat__sim_timed_begin(w);
}

void vat__sim_machines_end(vat__sim_world *w) {
  struct vat__sim_machines *m = w->machines;
  for (unsigned j = 0; j < m->nsources; j++)
    if (m->sources[j].src->ended != NULL)
      m->sources[j].src->ended(m->sources[j].ctx);
  for (unsigned i = 1; i < m->n; i++) {
    m->sys[i]->sched.det_choose = NULL; /* shutdown's drain is not a step */
    vat_system_shutdown(m->sys[i], 0);
    vat_system_destroy(m->sys[i]);
  }
  running = m->outer;
}

/* --- A step --------------------------------------------------------------- */

/* A machine that crashed or stopped runs no more. */
static bool down(const struct vat__sim_machines *m, unsigned i) {
  return m->crashed[i] || m->stopped[i];
}

/* Machine i went down: noted as `what` ("crash", "stop"), and the sources
 * told. */
static void went_down(struct vat__sim_machines *m, unsigned i,
                      const char *what) {
  char text[NAME_SIZE + 8];
  snprintf(text, sizeof text, "%s %s", what, m->name[i]);
  note(m, text);
  for (unsigned j = 0; j < m->nsources; j++)
    if (m->sources[j].src->down != NULL)
      m->sources[j].src->down(m->sources[j].ctx, m->sys[i]);
}

static void crash_now(struct vat__sim_machines *m, unsigned i) {
  m->crashed[i] = true;
  m->crash_at[i] = UINT64_MAX;
  went_down(m, i, "crash");
}

void vat__sim_machines_stop(vat__sim_world *w, vat_system *sys) {
  struct vat__sim_machines *m = w->machines;
  unsigned i = 0;
  while (m->sys[i] != sys)
    i++;
  vat__sim_hold_release_to(m->w, sys);
  sys->sched.det_choose = NULL; /* shutdown's drain is not a step */
  vat_system_shutdown(sys, 0);  /* not quiet: VAT_ETIMEDOUT, as meant */
  m->stopped[i] = true;
  went_down(m, i, "stop");
}

static uint64_t next_fault(const source_entry *e) {
  return e->src->next_fault != NULL ? e->src->next_fault(e->ctx) : UINT64_MAX;
}

/* What is due now, faults at a time first (the seed's or a plan's), then
 * crashes the scenario planned, then the sources' events: each may make
 * more due (a source's event at once), so until nothing is. */
static void fire_due(struct vat__sim_machines *m) {
  uint64_t now = world_now(m);
  for (bool again = true; again;) {
    again = vat__sim_timed_fire(m->w, now);
    for (unsigned i = 0; i < m->n; i++)
      if (!down(m, i) && m->crash_at[i] <= now) {
        crash_now(m, i);
        again = true;
      }
    for (unsigned j = 0; j < m->nsources; j++) {
      source_entry *e = &m->sources[j];
      if (e->src->next_event(e->ctx) > now && next_fault(e) > now)
        continue;
      uint64_t h = e->src->fire(e->ctx, now);
      m->w->digest = vat__sim_mix(vat__sim_mix(m->w->digest, now), h);
      again = true;
    }
  }
}

/* The system's due timers, as its run call fires them (on its worker). */
static void fire_timers(vat_system *sys) {
  vat__worker *outer = vat__current_worker;
  vat__current_worker = sys->workers[0];
  vat__timers_fire_due(sys, vat__clock_now(sys));
  vat__current_worker = outer;
}

/* The chooser of every system of a world of several: the vat the step
 * decided, which is ready here (nothing ran between the look and this
 * run call), and the step's faults on it. A pick that ran no turn (a
 * dead vat dropping what it was sent, a vat muted) leaves the run call
 * picking again: that is a step too, among this system's ready vats (the
 * others' are as they were, but this call can run none of them). */
static uint32_t follow(void *ctx, vat__task *const *ready, uint32_t n) {
  vat__sim_world *w = ctx;
  struct vat__sim_machines *m = w->machines;
  uint32_t index, k = 0;
  if (m->follow == NULL) {
    k = vat__sim_decide(w, ready, n, &index);
  } else {
    while (k < n && ready[k] != m->follow)
      k++;
    if (k == n) {
      fprintf(stderr, "libvat: sim: the step's vat is not ready\n");
      abort();
    }
    index = m->follow_index;
    m->follow = NULL;
  }
  vat__sim_faults_step(w, vat__vat_of(ready[k]), index);
  return k;
}

static bool alone(const struct vat__sim_machines *m) {
  return m->n == 1 && !down(m, 0);
}

int vat__sim_machines_run(vat__sim_world *w, vat_run_result *rr) {
  struct vat__sim_machines *m = w->machines;
  fire_due(m);
  if (alone(m))
    return vat_system_run(m->sys[0], 1, 0, rr);
  *rr = (vat_run_result){0};
  if (m->ready == NULL)
    m->ready = vat__gc_alloc(VAT__SIM_READY_MAX * sizeof *m->ready);
  uint32_t n = 0, end[VAT_SIM_MAX_SYSTEMS];
  for (unsigned i = 0; i < m->n; i++) {
    if (!down(m, i)) {
      fire_timers(m->sys[i]);
      n += vat__pick_seeded_ready(&m->sys[i]->workers[0]->run, m->ready + n);
    }
    end[i] = n;
  }
  if (n == 0)
    return VAT_OK;
  uint32_t k = vat__sim_decide(w, m->ready, n, &m->follow_index);
  unsigned i = 0;
  while (end[i] <= k)
    i++;
  m->follow = m->ready[k];
  int rc = vat_system_run(m->sys[i], 1, 0, rr);
  m->follow = NULL;
  if (w->stop != NULL) { /* even when the step ran no turn (a drop) */
    vat__sim_machines_stop(w, w->stop);
    w->stop = NULL;
  }
  rr->more = true; /* the next step looks again */
  return rc;
}

/* The next thing due: a timer or a source's event, which keep the world
 * going, or, while one of those is pending, a crash or a source's fault. */
void vat__sim_machines_next(vat__sim_world *w, int64_t *ns) {
  struct vat__sim_machines *m = w->machines;
  uint64_t now = world_now(m), next = UINT64_MAX, fault = UINT64_MAX;
  for (unsigned i = 0; i < m->n; i++) {
    int64_t t;
    if (down(m, i))
      continue;
    if (vat_system_next_timer(m->sys[i], &t) == VAT_OK && t >= 0 &&
        now + (uint64_t)t < next)
      next = now + (uint64_t)t;
    if (m->crash_at[i] < fault)
      fault = m->crash_at[i];
  }
  for (unsigned j = 0; j < m->nsources; j++) {
    uint64_t t = m->sources[j].src->next_event(m->sources[j].ctx);
    if (t < next)
      next = t;
    if ((t = next_fault(&m->sources[j])) < fault)
      fault = t;
  }
  if (vat__sim_timed_next(w) < fault)
    fault = vat__sim_timed_next(w);
  if (next != UINT64_MAX && fault < next)
    next = fault;
  *ns = next == UINT64_MAX ? -1 : next <= now ? 0 : (int64_t)(next - now);
}

void vat__sim_machines_advance(vat__sim_world *w, uint64_t ns) {
  struct vat__sim_machines *m = w->machines;
  for (unsigned i = 0; i < m->n; i++)
    vat_system_advance_clock(m->sys[i], ns);
}

/* --- The public calls ----------------------------------------------------- */

/* A name a plan can write: a word of [A-Za-z0-9_.] (a link's name joins
 * two with '-'), up to NAME_SIZE - 1 bytes, and not m and a number, which
 * are the names of machines not given one. */
static bool good_name(const char *name) {
  size_t n = strlen(name);
  if (n == 0 || n >= NAME_SIZE)
    return false;
  bool digits = n > 1 && name[0] == 'm';
  for (size_t k = 0; k < n; k++) {
    char c = name[k];
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
          (c >= '0' && c <= '9') || c == '_' || c == '.'))
      return false;
    if (k > 0 && !(c >= '0' && c <= '9'))
      digits = false;
  }
  return !digits;
}

/* The index of the machine named `name`; -1: none. */
static int named(const struct vat__sim_machines *m, const char *name) {
  for (unsigned i = 0; i < m->n; i++)
    if (strcmp(m->name[i], name) == 0)
      return (int)i;
  return -1;
}

bool vat__sim_machines_crash_named(vat__sim_world *w, const char *name) {
  struct vat__sim_machines *m = w->machines;
  int i = named(m, name);
  if (i < 0 || down(m, (unsigned)i))
    return false;
  crash_now(m, (unsigned)i);
  return true;
}

int vat__sim_machines_source_strike(vat__sim_world *w,
                                    const vat_sim_source *src, const char *text,
                                    uint64_t *hash, const char **kind) {
  struct vat__sim_machines *m = w->machines;
  for (unsigned j = 0; j < m->nsources; j++) {
    const source_entry *e = &m->sources[j];
    if ((src != NULL && e->src != src) || e->src->strike == NULL)
      continue;
    int rc = e->src->strike(e->ctx, text, hash);
    *kind = e->src->name != NULL ? e->src->name : "source";
    if (rc != VAT_EINVAL) /* its fault: struck, or what it names is not there */
      return rc == VAT_OK ? VAT_OK : VAT_ENOTFOUND;
  }
  return VAT_EINVAL;
}

void vat_sim_system_options_default(vat_sim_system_options *o) {
  if (o != NULL)
    *o = (vat_sim_system_options){.crash_window_ns = 1000000000ull};
}

int vat_sim_system_new(vat_system *sys, const vat_sim_system_options *o,
                       vat_system **out) {
  vat_sim_system_options dflt;
  if (o == NULL) {
    vat_sim_system_options_default(&dflt);
    o = &dflt;
  }
  struct vat__sim_machines *m = machines_of(sys, NULL);
  if (m == NULL || out == NULL ||
      !(o->crash_chance >= 0 && o->crash_chance <= 1) ||
      (o->crash_chance > 0 && o->crash_window_ns == 0) ||
      (o->name != NULL && !good_name(o->name)))
    return VAT_EINVAL;
  int rc = vat__check_host();
  if (rc != VAT_OK)
    return rc;
  if (m->n == VAT_SIM_MAX_SYSTEMS ||
      (o->name != NULL && named(m, o->name) >= 0))
    return VAT_EBUSY;
  vat_config cfg;
  vat_config_default(&cfg);
  cfg.workers = 0;
  cfg.deterministic = true;
  cfg.seed = vat__sim_draw(&m->machine_rng);
  cfg.on_crash = NULL;
  cfg.trace_path = vat__trace_off; /* the world's trace is its first system's */
  vat_system *made;
  if ((rc = vat_system_new(&cfg, &made)) != VAT_OK)
    return rc;
  vat_system_advance_clock(made, world_now(m));
  if (m->w->watching) /* delay faults may strike its vats too */
    vat__sim_hold_watch(m->w, made);
  add(m, made, o->name);
  /* From now on every step is the world's, among all its systems. */
  for (unsigned i = 0; i < m->n; i++) {
    m->sys[i]->sched.det_choose = follow;
    m->sys[i]->sched.det_choose_ctx = m->w;
  }
  /* Drawn under an explicit plan too, which then drops it: the draws
   * after it stay as they were. */
  if (o->crash_chance > 0 &&
      (double)(vat__sim_draw(&m->machine_rng) >> 11) * 0x1p-53 <
          o->crash_chance) {
    uint64_t window = vat__sim_draw(&m->machine_rng) % o->crash_window_ns;
    char text[NAME_SIZE + 8];
    snprintf(text, sizeof text, "crash %s", m->name[m->n - 1]);
    vat__sim_timed_drawn(m->w, world_now(m) + window, text, NULL);
  }
  *out = made;
  return VAT_OK;
}

int vat_sim_system_crash(vat_system *sys, uint64_t at_ns) {
  unsigned i;
  struct vat__sim_machines *m = machines_of(sys, &i);
  if (m == NULL)
    return VAT_EINVAL;
  if (!down(m, i) && at_ns < m->crash_at[i])
    m->crash_at[i] = at_ns;
  return VAT_OK;
}

bool vat_sim_system_crashed(vat_system *sys) {
  unsigned i;
  struct vat__sim_machines *m = machines_of(sys, &i);
  return m != NULL && m->crashed[i];
}

bool vat_sim_system_stopped(vat_system *sys) {
  unsigned i;
  struct vat__sim_machines *m = machines_of(sys, &i);
  return m != NULL && m->stopped[i];
}

const char *vat_sim_system_name(vat_system *sys) {
  unsigned i;
  struct vat__sim_machines *m = machines_of(sys, &i);
  return m != NULL ? m->name[i] : NULL;
}

int vat_sim_source_add(vat_system *sys, const vat_sim_source *src, void *ctx) {
  struct vat__sim_machines *m = machines_of(sys, NULL);
  if (m == NULL || src == NULL || ctx == NULL || src->next_event == NULL ||
      src->fire == NULL)
    return VAT_EINVAL;
  if (vat_sim_source_find(sys, src) != NULL)
    return VAT_EBUSY;
  if (m->nsources == m->sources_cap) {
    unsigned cap = m->sources_cap ? 2 * m->sources_cap : 4;
    source_entry *s = vat__gc_alloc(cap * sizeof *s);
    if (m->nsources)
      memcpy(s, m->sources, m->nsources * sizeof *s);
    m->sources = s;
    m->sources_cap = cap;
  }
  m->sources[m->nsources++] = (source_entry){src, ctx};
  return VAT_OK;
}

void *vat_sim_source_find(vat_system *sys, const vat_sim_source *src) {
  struct vat__sim_machines *m = machines_of(sys, NULL);
  for (unsigned j = 0; m != NULL && j < m->nsources; j++)
    if (m->sources[j].src == src)
      return m->sources[j].ctx;
  return NULL;
}

uint64_t vat_sim_draw(vat_system *sys) {
  struct vat__sim_machines *m = machines_of(sys, NULL);
  return m != NULL ? vat__sim_draw(&m->source_rng) : 0;
}

int vat_sim_source_fault(vat_system *sys, const vat_sim_source *src,
                         uint64_t at_ns, const char *text) {
  struct vat__sim_machines *m = machines_of(sys, NULL);
  if (m == NULL || src == NULL || src->strike == NULL || text == NULL ||
      strlen(text) > VAT__SIM_TEXT_MAX || !vat__sim_fault_text_ok(text) ||
      strncmp(text, "crash ", 6) == 0 || vat_sim_source_find(sys, src) == NULL)
    return VAT_EINVAL;
  vat__sim_timed_drawn(m->w, at_ns, text, src);
  return VAT_OK;
}

int vat_sim_note(vat_system *sys, const char *text) {
  struct vat__sim_machines *m = machines_of(sys, NULL);
  if (m == NULL || text == NULL)
    return VAT_EINVAL;
  note(m, text);
  return VAT_OK;
}
