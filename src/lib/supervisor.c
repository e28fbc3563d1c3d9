/* Supervisors, built on the public API only (see vat/supervisor.h).
 *
 * A supervisor is one vat that traps exits. OTP's supervisor shuts children
 * down synchronously; a turn must not block, so here shutting children down
 * is an operation that spans turns: a list of children to end, newest
 * first; each in turn is monitored, unlinked (so its end arrives once, as
 * a down notification) and sent exit(shutdown), and the next waits for its
 * DOWN. When the last is down, the operation's follow-up runs: restart the
 * marked children, or end the supervisor. Exits that arrive meanwhile (from
 * children still linked) wait in a queue and are handled after it, against
 * the children as they are then: an exit from a child that was replaced or
 * shut down meanwhile is stale and ignored.
 */
#include <stdlib.h>

#define GC_THREADS 1
#include <gc/gc.h>

#include "vat/host.h"
#include "vat/supervisor.h"
#include "vat/timer.h"

typedef struct kid {
  vat_child_spec spec;
  vat_ref *ref;     /* NULL: not running */
  uint64_t mon;     /* monitor while being shut down; 0 otherwise */
  bool removed;     /* a temporary child that ended */
  bool restart;     /* to be started by the current operation's follow-up */
  bool exit_sent;   /* exit(shutdown) or kill sent */
  bool killed;      /* kill sent */
  uint32_t attempt; /* which shutdown a deadline belongs to; each
                       shutdown and each DOWN moves it on */
  vat_timer *timer; /* the shutdown deadline, while it runs */
} kid;

typedef struct pending_exit {
  struct pending_exit *next;
  vat_ref *from;
  vat_value reason;
} pending_exit;

typedef struct sup {
  vat_sup_strategy strategy;
  unsigned max_restarts;
  double max_seconds;
  kid *kids;
  size_t n;
  vat_ref *parent; /* NULL when started from a host thread */
  double *stamps;  /* restart times, oldest first; max_restarts + 1 slots */
  size_t nstamps;
  /* The shutdown operation in progress. */
  bool busy;
  size_t *order; /* kid indices, newest first */
  size_t norder, pos;
  bool end_after; /* follow-up: end (else restart the marked kids) */
  vat_value end_reason;
  bool stop_asked; /* a stop arrived while busy */
  vat_value stop_reason;
  pending_exit *pending, *pending_tail;
} sup;

static void *gc_new(size_t size) {
  void *p = GC_MALLOC(size);
  if (p == NULL)
    abort();
  return p;
}

/* Seconds on the system's clock, never the real one: in deterministic
 * mode it is virtual, so the intensity counts the time the host made pass
 * and a replay restarts (or gives up) exactly as the first run did. */
static double now_s(vat_turn *turn) {
  return (double)vat_system_now(vat_turn_system(turn)) * 1e-9;
}

static void begin_shutdown(vat_turn *turn, sup *s, vat_value reason);
static void step(vat_turn *turn, sup *s);

/* --- Restarts ------------------------------------------------------------- */

/* Records a restart; false when it exceeds the intensity. */
static bool add_restart(vat_turn *turn, sup *s) {
  double now = now_s(turn);
  size_t keep = 0;
  for (size_t i = 0; i < s->nstamps; i++)
    if (now - s->stamps[i] <= s->max_seconds)
      s->stamps[keep++] = s->stamps[i];
  s->nstamps = keep;
  if (s->nstamps >= s->max_restarts)
    return false;
  s->stamps[s->nstamps++] = now;
  return true;
}

static bool start_kid(vat_turn *turn, kid *k) {
  vat_ref *ref = NULL;
  if (k->spec.start(turn, k->spec.arg, &ref) != VAT_OK || ref == NULL)
    return false;
  k->ref = ref;
  return true;
}

/* Starts the marked children in start order. A failed start counts as a
 * restart and is retried while the intensity allows. */
static void run_restarts(vat_turn *turn, sup *s) {
  for (size_t i = 0; i < s->n; i++) {
    kid *k = &s->kids[i];
    if (!k->restart)
      continue;
    k->restart = false;
    while (!start_kid(turn, k)) {
      if (k->spec.restart == VAT_TEMPORARY) {
        k->removed = true;
        break;
      }
      if (!add_restart(turn, s)) {
        begin_shutdown(turn, s, vat_atom_value(vat_atom_shutdown()));
        return;
      }
    }
  }
}

static bool should_restart(const kid *k, vat_value reason) {
  switch (k->spec.restart) {
  case VAT_PERMANENT:
    return true;
  case VAT_TRANSIENT:
    return !vat_reason_is_orderly(reason);
  case VAT_TEMPORARY:
    break;
  }
  return false;
}

static kid *find_kid(sup *s, vat_ref *ref) {
  if (ref == NULL)
    return NULL;
  for (size_t i = 0; i < s->n; i++)
    if (s->kids[i].ref != NULL && vat_ref_same_vat(s->kids[i].ref, ref))
      return &s->kids[i];
  return NULL;
}

/* --- Shutting children down ----------------------------------------------- */

static void on_down(vat_turn *turn, void *state, uint64_t id, vat_ref *who,
                    vat_value reason);

/* Shuts down, newest first, every running kid with index >= `from` except
 * `skip` (SIZE_MAX: none); then the follow-up. */
static void begin_terminate(vat_turn *turn, sup *s, size_t from, size_t skip) {
  s->busy = true;
  s->norder = s->pos = 0;
  for (size_t i = s->n; i-- > from;) {
    kid *k = &s->kids[i];
    if (i == skip || k->ref == NULL)
      continue;
    k->exit_sent = k->killed = false;
    s->order[s->norder++] = i;
  }
  step(turn, s);
}

static void finish(vat_turn *turn, sup *s) {
  s->busy = false;
  if (s->end_after) {
    if (vat_reason_is_normal(s->end_reason))
      vat_stop(turn);
    else
      vat_fail(turn, s->end_reason);
    return;
  }
  if (s->stop_asked) {
    s->stop_asked = false;
    begin_shutdown(turn, s, s->stop_reason);
    return;
  }
  run_restarts(turn, s);
}

static void deadline(vat_turn *turn, void *state, void *arg);

/* Which kid, and which of its shutdowns, a deadline is for. */
typedef struct deadline_arg {
  size_t kid;
  uint32_t attempt;
} deadline_arg;

static void *new_deadline_arg(size_t kid, uint32_t attempt) {
  deadline_arg *d = gc_new(sizeof *d);
  *d = (deadline_arg){.kid = kid, .attempt = attempt};
  return d;
}

/* Sends the current kid its exit, or finishes when none is left. */
static void step(vat_turn *turn, sup *s) {
  while (s->pos < s->norder) {
    kid *k = &s->kids[s->order[s->pos]];
    if (k->ref == NULL) {
      s->pos++;
      continue;
    }
    if (k->exit_sent)
      return; /* waiting for its DOWN */
    k->exit_sent = true;
    /* One child at a time, as OTP does: monitor, then unlink, so its end
     * arrives once, as DOWN; the others stay linked, so none outlives a
     * supervisor killed meanwhile. */
    if (vat_monitor(turn, k->ref, on_down, &k->mon) != VAT_OK ||
        vat_unlink(turn, k->ref) != VAT_OK)
      return; /* the turn failed: the supervisor is ending anyway */
    if (k->spec.shutdown_s == 0) {
      k->killed = true;
      vat_kill(turn, k->ref);
      return;
    }
    vat_exit(turn, k->ref, vat_atom_value(vat_atom_shutdown()));
    if (k->spec.shutdown_s > 0)
      vat_later(turn, k->spec.shutdown_s, vat_self(turn), deadline,
                new_deadline_arg(s->order[s->pos], ++k->attempt), &k->timer);
    return;
  }
  finish(turn, s);
}

/* A kid's shutdown deadline: kill it if that shutdown is still waiting. */
static void deadline(vat_turn *turn, void *state, void *arg) {
  sup *s = state;
  const deadline_arg *d = arg;
  kid *k = &s->kids[d->kid];
  if (k->attempt != d->attempt)
    return; /* an earlier shutdown's deadline, not cancelled in time */
  k->timer = NULL;
  if (!s->busy || k->ref == NULL || k->killed)
    return;
  k->killed = true;
  vat_kill(turn, k->ref);
}

static void handle_exit(vat_turn *turn, sup *s, vat_ref *from,
                        vat_value reason);

static void drain_pending(vat_turn *turn, sup *s) {
  while (!s->busy && s->pending != NULL && !s->end_after) {
    pending_exit *p = s->pending;
    s->pending = p->next;
    if (s->pending == NULL)
      s->pending_tail = NULL;
    handle_exit(turn, s, p->from, p->reason);
  }
}

static void on_down(vat_turn *turn, void *state, uint64_t id, vat_ref *who,
                    vat_value reason) {
  (void)who;
  (void)reason;
  sup *s = state;
  for (size_t i = 0; i < s->n; i++) {
    kid *k = &s->kids[i];
    if (k->mon != id)
      continue;
    k->mon = 0;
    k->ref = NULL;
    /* Its shutdown is over: a deadline already fired for it, queued too
     * late to be cancelled, must not match a later shutdown's kid (the
     * restarted one), which may be waiting its turn to be shut down. */
    k->attempt++;
    if (k->timer != NULL) {
      vat_timer_cancel(k->timer);
      k->timer = NULL;
    }
    if (k->spec.restart == VAT_TEMPORARY)
      k->removed = true;
    if (s->busy && s->pos < s->norder && s->order[s->pos] == i) {
      s->pos++;
      step(turn, s);
      drain_pending(turn, s);
    }
    return;
  }
}

static void begin_shutdown(vat_turn *turn, sup *s, vat_value reason) {
  if (s->busy) {
    if (!s->end_after && !s->stop_asked) {
      s->stop_asked = true;
      s->stop_reason = reason;
    }
    return;
  }
  for (size_t i = 0; i < s->n; i++)
    s->kids[i].restart = false;
  s->end_after = true;
  s->end_reason = reason;
  begin_terminate(turn, s, 0, SIZE_MAX);
}

/* --- Exits ---------------------------------------------------------------- */

static void handle_exit(vat_turn *turn, sup *s, vat_ref *from,
                        vat_value reason) {
  kid *k = find_kid(s, from);
  if (k == NULL)
    return; /* stale: that child was replaced or shut down */
  size_t i = (size_t)(k - s->kids);
  k->ref = NULL;
  if (!should_restart(k, reason)) {
    if (k->spec.restart == VAT_TEMPORARY)
      k->removed = true;
    return;
  }
  if (!add_restart(turn, s)) {
    begin_shutdown(turn, s, vat_atom_value(vat_atom_shutdown()));
    return;
  }
  switch (s->strategy) {
  case VAT_ONE_FOR_ONE:
    k->restart = true;
    run_restarts(turn, s);
    return;
  case VAT_ONE_FOR_ALL:
  case VAT_REST_FOR_ONE: {
    size_t from_i = s->strategy == VAT_ONE_FOR_ALL ? 0 : i;
    for (size_t j = from_i; j < s->n; j++)
      if (!s->kids[j].removed && s->kids[j].spec.restart != VAT_TEMPORARY)
        s->kids[j].restart = true;
    k->restart = true;
    begin_terminate(turn, s, from_i, i);
    return;
  }
  }
}

static void child_exit(vat_turn *turn, void *state, vat_ref *from,
                       vat_value reason) {
  sup *s = state;
  if (s->parent != NULL && from != NULL && vat_ref_same_vat(from, s->parent)) {
    begin_shutdown(turn, s, reason);
    return;
  }
  if (s->busy) {
    pending_exit *p = gc_new(sizeof *p);
    *p = (pending_exit){.from = from, .reason = reason};
    if (s->pending_tail)
      s->pending_tail->next = p;
    else
      s->pending = p;
    s->pending_tail = p;
    return;
  }
  handle_exit(turn, s, from, reason);
}

/* --- Messages ------------------------------------------------------------- */

static void init(vat_turn *turn, void *state, void *arg) {
  (void)arg;
  sup *s = state;
  if (vat_trap_exit(turn, vat_self(turn), child_exit) != VAT_OK)
    return;
  for (size_t i = 0; i < s->n; i++) {
    if (!start_kid(turn, &s->kids[i])) {
      begin_shutdown(turn, s, vat_atom_value(vat_atom_shutdown()));
      return;
    }
  }
}

static void stop_msg(vat_turn *turn, void *state, void *arg) {
  (void)arg;
  begin_shutdown(turn, state, vat_atom_value(vat_atom_normal()));
}

typedef struct which_req {
  vat_ref *reply_to;
  vat_fn fn;
} which_req;

static void which_msg(vat_turn *turn, void *state, void *arg) {
  sup *s = state;
  which_req *req = arg;
  vat_sup_children *c = gc_new(sizeof *c);
  c->n = s->n;
  c->refs = gc_new((s->n ? s->n : 1) * sizeof *c->refs);
  c->ids = gc_new((s->n ? s->n : 1) * sizeof *c->ids);
  for (size_t i = 0; i < s->n; i++) {
    c->refs[i] = s->kids[i].ref;
    c->ids[i] = s->kids[i].spec.id;
  }
  vat_send(turn, req->reply_to, req->fn, c);
}

/* The children as a value: a list, in start order, of records
 * child(id, ref), id a string or null, ref null for a child not running. */
static void children_req(vat_turn *turn, void *state, void *arg,
                         vat_resolver *r) {
  (void)arg;
  sup *s = state;
  vat_value *items = gc_new((s->n ? s->n : 1) * sizeof *items);
  const vat_atom *child = vat_atom_intern("child");
  for (size_t i = 0; i < s->n; i++) {
    const char *id = s->kids[i].spec.id;
    vat_ref *ref = s->kids[i].ref;
    vat_value fields[2] = {id ? vat_string(id) : vat_null(),
                           ref ? vat_ref_value(ref) : vat_null()};
    items[i] = vat_record(child, fields, 2);
  }
  vat_resolve(turn, r, vat_list(items, s->n));
}

/* --- Public API ----------------------------------------------------------- */

static const vat_entity_def sup_def = {.state_size = sizeof(sup)};

static bool spec_ok(const vat_sup_spec *spec) {
  if (spec == NULL || !(spec->max_seconds > 0) ||
      (spec->nchildren > 0 && spec->children == NULL))
    return false;
  for (size_t i = 0; i < spec->nchildren; i++)
    if (spec->children[i].start == NULL)
      return false;
  return true;
}

static void setup(sup *s, const vat_sup_spec *spec, vat_ref *parent) {
  s->strategy = spec->strategy;
  s->max_restarts = spec->max_restarts;
  s->max_seconds = spec->max_seconds;
  s->n = spec->nchildren;
  s->kids = gc_new((s->n ? s->n : 1) * sizeof *s->kids);
  s->order = gc_new((s->n ? s->n : 1) * sizeof *s->order);
  s->stamps = gc_new(((size_t)s->max_restarts + 1) * sizeof *s->stamps);
  for (size_t i = 0; i < s->n; i++)
    s->kids[i].spec = spec->children[i];
  s->parent = parent;
}

int vat_supervisor_start_link(vat_turn *turn, const vat_sup_spec *spec,
                              vat_ref **out) {
  if (!spec_ok(spec) || out == NULL)
    return VAT_EINVAL;
  vat_ref *self = vat_self(turn);
  sup *s;
  vat_ref *ref;
  int rc = vat_spawn_link(turn, &sup_def, &ref, (void **)&s);
  if (rc != VAT_OK)
    return rc;
  setup(s, spec, self);
  rc = vat_send(turn, ref, init, NULL);
  if (rc == VAT_OK)
    *out = ref;
  return rc;
}

int vat_host_supervisor_start(vat_system *sys, const vat_sup_spec *spec,
                              vat_ref **out) {
  if (!spec_ok(spec) || out == NULL)
    return VAT_EINVAL;
  sup *s;
  vat_ref *ref;
  int rc = vat_host_spawn(sys, &sup_def, &ref, (void **)&s);
  if (rc != VAT_OK)
    return rc;
  setup(s, spec, NULL);
  rc = vat_host_send(ref, init, NULL);
  if (rc == VAT_OK)
    *out = ref;
  return rc;
}

int vat_supervisor_stop(vat_turn *turn, vat_ref *sup_ref) {
  return vat_send(turn, sup_ref, stop_msg, NULL);
}

int vat_host_supervisor_stop(vat_ref *sup_ref) {
  return vat_host_send(sup_ref, stop_msg, NULL);
}

static which_req *which(vat_ref *reply_to, vat_fn fn) {
  which_req *req = gc_new(sizeof *req);
  *req = (which_req){.reply_to = reply_to, .fn = fn};
  return req;
}

int vat_supervisor_which_children(vat_turn *turn, vat_ref *sup_ref,
                                  vat_ref *reply_to, vat_fn fn) {
  if (reply_to == NULL || fn == NULL)
    return VAT_EINVAL;
  return vat_send(turn, sup_ref, which_msg, which(reply_to, fn));
}

int vat_host_supervisor_which_children(vat_ref *sup_ref, vat_ref *reply_to,
                                       vat_fn fn) {
  if (reply_to == NULL || fn == NULL)
    return VAT_EINVAL;
  return vat_host_send(sup_ref, which_msg, which(reply_to, fn));
}

int vat_supervisor_children(vat_turn *turn, vat_ref *sup_ref,
                            vat_promise **out) {
  return vat_call(turn, sup_ref, children_req, NULL, 0, out);
}

int vat_host_supervisor_children(vat_ref *sup_ref, vat_promise **out) {
  return vat_host_call(sup_ref, children_req, NULL, 0, out);
}
