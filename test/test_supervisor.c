/* Supervisors: each strategy restarts the right children, restart types,
 * intensity, orderly shutdown in reverse start order with timeouts. */
#include <stdio.h>
#include <string.h>
#include <time.h>

#define GC_THREADS 1
#include <gc/gc.h>

#include "support.h"

/* --- A log of child starts and ends, in the order they happened ----------- */

enum { MAX_KIDS = 8, MAX_EVENTS = 256 };

typedef struct event {
  char what; /* 'S' started, 'E' ended */
  int kid;
  vat_value reason;
} event;

static event events[MAX_EVENTS];
static _Atomic uint64_t nevents;
static _Atomic uint64_t starts[MAX_KIDS];
static _Atomic uint64_t total_starts, total_ends;
static _Atomic(vat_ref *) current[MAX_KIDS];

static void log_event(char what, int kid, vat_value reason) {
  uint64_t i = atomic_fetch_add(&nevents, 1);
  if (i < MAX_EVENTS)
    events[i] = (event){what, kid, reason};
}

typedef struct kid_state {
  int kid;
} kid_state;

typedef struct kid_arg {
  int kid;
  bool trap; /* ignores exit(shutdown): only a kill ends it */
} kid_arg;

static void kid_stopped(void *state, vat_value reason) {
  kid_state *k = state;
  log_event('E', k->kid, reason);
  atomic_fetch_add(&total_ends, 1);
}

static _Atomic uint64_t ignored_exits;
/* Kids that trap exits by now: an exit(shutdown) that reached a kid before
 * its trap turn ran would end it there, ahead of that turn (vat/exits.h). */
static _Atomic uint64_t traps_set;

static void ignore_exit(vat_turn *turn, void *state, vat_ref *from,
                        vat_value reason) {
  (void)turn;
  (void)state;
  (void)from;
  (void)reason;
  atomic_fetch_add(&ignored_exits, 1);
}

static void kid_trap(vat_turn *turn, void *state, void *arg) {
  (void)state;
  (void)arg;
  expect_vat_ok(vat_trap_exit(turn, vat_self(turn), ignore_exit));
  atomic_fetch_add(&traps_set, 1);
}

static bool fail_start[MAX_KIDS];
static int fail_next[MAX_KIDS]; /* fail this many starts, then succeed */

static void kid_hello(vat_turn *turn, void *state, void *arg) {
  (void)arg;
  kid_state *k = state;
  atomic_store(&current[k->kid], vat_self(turn));
  atomic_fetch_add(&starts[k->kid], 1);
  atomic_fetch_add(&total_starts, 1);
}

static int start_kid(vat_turn *turn, void *arg, vat_ref **out) {
  kid_arg *a = arg;
  kid_state *k;
  if (fail_start[a->kid])
    return VAT_EINVAL;
  if (fail_next[a->kid] > 0) {
    fail_next[a->kid]--; /* only the supervisor's turns start kids */
    return VAT_EINVAL;
  }
  int rc = vat_spawn_link(turn,
                          &(vat_entity_def){.state_size = sizeof(kid_state),
                                            .on_stop = kid_stopped},
                          out, (void **)&k);
  if (rc != VAT_OK)
    return rc;
  k->kid = a->kid;
  /* The ref is published from the child's own first turn: nothing may
   * send to a vat before the turn that spawned it commits. */
  expect_vat_ok(vat_send(turn, *out, kid_hello, NULL));
  if (a->trap)
    expect_vat_ok(vat_send(turn, *out, kid_trap, NULL));
  log_event('S', a->kid, vat_null());
  return VAT_OK;
}

static void kid_crash(vat_turn *turn, void *state, void *arg) {
  (void)state;
  (void)arg;
  expect_vat_ok(
      vat_fail(turn, vat_reason_error(vat_atom_intern("crash"), vat_null())));
}

static void kid_stop(vat_turn *turn, void *state, void *arg) {
  (void)state;
  (void)arg;
  expect_vat_ok(vat_stop(turn));
}

static kid_arg kid_args[MAX_KIDS];
static vat_child_spec specs[MAX_KIDS];

static vat_sup_spec make_spec(vat_sup_strategy strategy, int n,
                              unsigned max_restarts) {
  for (int i = 0; i < n; i++) {
    kid_args[i] = (kid_arg){.kid = i};
    specs[i] = (vat_child_spec){.id = "kid",
                                .start = start_kid,
                                .arg = &kid_args[i],
                                .restart = VAT_PERMANENT,
                                .shutdown_s = 5};
  }
  return (vat_sup_spec){.strategy = strategy,
                        .max_restarts = max_restarts,
                        .max_seconds = 10,
                        .children = specs,
                        .nchildren = (size_t)n};
}

static vat_ref *kid_ref(int i) {
  return atomic_load(&current[i]);
}

static void send_kid(int i, vat_fn fn) {
  ck_assert_vat_ok(vat_host_send(kid_ref(i), fn, NULL));
}

static vat_ref *start_sup(vat_system *sys, const vat_sup_spec *spec,
                          int nkids) {
  vat_ref *sup;
  ck_assert_vat_ok(vat_host_supervisor_start(sys, spec, &sup));
  ck_assert(test_wait_u64(&total_starts, (uint64_t)nkids, 30));
  return sup;
}

/* Stops the supervisor, waits for it, and shuts the system down. */
static void stop_and_quiesce(vat_system *sys, vat_ref *sup, uint64_t ends) {
  ck_assert_vat_ok(vat_host_supervisor_stop(sup));
  ck_assert(test_wait_u64(&total_ends, ends, 30));
  test_quiesce(sys);
  ck_assert(vat_ref_is_dead(sup));
  ck_assert(vat_reason_is_normal(vat_ref_exit_reason(sup)));
}

/* Events from index `from`, as a string like "E1 E2 E0 S0 S1 S2". */
static const char *trace(uint64_t from) {
  static char buf[1024];
  size_t len = 0;
  buf[0] = 0;
  uint64_t n = atomic_load(&nevents);
  for (uint64_t i = from; i < n && i < MAX_EVENTS; i++)
    len += (size_t)snprintf(buf + len, sizeof buf - len, "%s%c%d",
                            len ? " " : "", events[i].what, events[i].kid);
  return buf;
}

static bool is_crash(vat_value v) {
  return v.type == VAT_T_ERROR && vat_error_code(v) == vat_atom_intern("crash");
}

/* --- Strategies ----------------------------------------------------------- */

START_TEST(one_for_one_restarts_only_the_child) {
  vat_system *sys = test_system(2);
  vat_sup_spec spec = make_spec(VAT_ONE_FOR_ONE, 3, 5);
  vat_ref *sup = start_sup(sys, &spec, 3);
  vat_ref *before0 = kid_ref(0), *before2 = kid_ref(2);
  uint64_t mark = atomic_load(&nevents);
  send_kid(1, kid_crash);
  ck_assert(test_wait_u64(&total_starts, 4, 30));
  ck_assert_str_eq(trace(mark), "E1 S1");
  ck_assert(is_crash(events[mark].reason));
  ck_assert(kid_ref(0) == before0 && kid_ref(2) == before2);
  mark = atomic_load(&nevents);
  stop_and_quiesce(sys, sup, 4);
  ck_assert_str_eq(trace(mark), "E2 E1 E0");
  for (uint64_t i = mark; i < mark + 3; i++)
    ck_assert(vat_is_atom(events[i].reason, vat_atom_shutdown()));
}
END_TEST

START_TEST(one_for_all_restarts_everyone) {
  vat_system *sys = test_system(2);
  vat_sup_spec spec = make_spec(VAT_ONE_FOR_ALL, 3, 5);
  vat_ref *sup = start_sup(sys, &spec, 3);
  uint64_t mark = atomic_load(&nevents);
  send_kid(1, kid_crash);
  ck_assert(test_wait_u64(&total_starts, 6, 30));
  /* The others end newest first, then all start in order. */
  ck_assert_str_eq(trace(mark), "E1 E2 E0 S0 S1 S2");
  ck_assert(vat_is_atom(events[mark + 1].reason, vat_atom_shutdown()));
  stop_and_quiesce(sys, sup, 6);
}
END_TEST

START_TEST(rest_for_one_restarts_the_rest) {
  vat_system *sys = test_system(2);
  vat_sup_spec spec = make_spec(VAT_REST_FOR_ONE, 4, 5);
  vat_ref *sup = start_sup(sys, &spec, 4);
  vat_ref *before0 = kid_ref(0);
  uint64_t mark = atomic_load(&nevents);
  send_kid(1, kid_crash);
  ck_assert(test_wait_u64(&total_starts, 7, 30));
  ck_assert_str_eq(trace(mark), "E1 E3 E2 S1 S2 S3");
  ck_assert(kid_ref(0) == before0);
  ck_assert_uint_eq(atomic_load(&starts[0]), 1);
  stop_and_quiesce(sys, sup, 7);
}
END_TEST

/* --- Restart types -------------------------------------------------------- */

START_TEST(restart_types) {
  vat_system *sys = test_system(2);
  vat_sup_spec spec = make_spec(VAT_ONE_FOR_ONE, 5, 10);
  specs[0].restart = VAT_TRANSIENT; /* normal: stays down */
  specs[1].restart = VAT_TRANSIENT; /* crash: restarted */
  specs[2].restart = VAT_TEMPORARY; /* crash: stays down */
  specs[3].restart = VAT_PERMANENT; /* normal: restarted */
  specs[4].restart = VAT_TEMPORARY; /* shut down at the end */
  vat_ref *sup = start_sup(sys, &spec, 5);
  send_kid(0, kid_stop);
  send_kid(1, kid_crash);
  send_kid(2, kid_crash);
  send_kid(3, kid_stop);
  ck_assert(test_wait_u64(&total_ends, 4, 30));
  ck_assert(test_wait_u64(&total_starts, 7, 30));
  /* Ends so far: 4; the supervisor then ends kids 4, 3 and 1. */
  stop_and_quiesce(sys, sup, 7);
  ck_assert_uint_eq(atomic_load(&starts[0]), 1);
  ck_assert_uint_eq(atomic_load(&starts[1]), 2);
  ck_assert_uint_eq(atomic_load(&starts[2]), 1);
  ck_assert_uint_eq(atomic_load(&starts[3]), 2);
  ck_assert_uint_eq(atomic_load(&starts[4]), 1);
  ck_assert_uint_eq(atomic_load(&total_ends), 7);
}
END_TEST

/* --- Intensity ------------------------------------------------------------ */

START_TEST(intensity_ends_the_supervisor) {
  vat_system *sys = test_system(2);
  vat_sup_spec spec = make_spec(VAT_ONE_FOR_ONE, 3, 2);
  vat_ref *sup = start_sup(sys, &spec, 3);
  send_kid(0, kid_crash);
  ck_assert(test_wait_u64(&total_starts, 4, 30));
  send_kid(0, kid_crash);
  ck_assert(test_wait_u64(&total_starts, 5, 30));
  uint64_t mark = atomic_load(&nevents);
  /* The third restart within 10 s is one too many. */
  send_kid(0, kid_crash);
  ck_assert(test_wait_u64(&total_ends, 5, 30));
  test_quiesce(sys);
  ck_assert_str_eq(trace(mark), "E0 E2 E1");
  ck_assert(vat_ref_is_dead(sup));
  ck_assert(vat_is_atom(vat_ref_exit_reason(sup), vat_atom_shutdown()));
  ck_assert_uint_eq(atomic_load(&total_starts), 5);
}
END_TEST

START_TEST(intensity_window_slides) {
  vat_system *sys = test_system(2);
  vat_sup_spec spec = make_spec(VAT_ONE_FOR_ONE, 1, 1);
  spec.max_seconds = 0.2;
  vat_ref *sup = start_sup(sys, &spec, 1);
  /* One restart per 0.2 s is allowed: three crashes spaced out are fine. */
  for (uint64_t i = 0; i < 3; i++) {
    send_kid(0, kid_crash);
    ck_assert(test_wait_u64(&total_starts, 2 + i, 30));
    test_sleep(0.3);
  }
  ck_assert(!vat_ref_is_dead(sup));
  stop_and_quiesce(sys, sup, 4);
}
END_TEST

/* --- Shutdown ------------------------------------------------------------- */

START_TEST(shutdown_timeout_then_kill) {
  vat_system *sys = test_system(2);
  vat_sup_spec spec = make_spec(VAT_ONE_FOR_ONE, 3, 5);
  kid_args[1].trap = true; /* ignores exit(shutdown) */
  atomic_store(&traps_set, 0);
  specs[1].shutdown_s = 0.2;
  specs[0].shutdown_s = 0; /* brutal kill */
  vat_ref *sup = start_sup(sys, &spec, 3);
  ck_assert(test_wait_u64(&traps_set, 1, 30));
  uint64_t mark = atomic_load(&nevents);
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  ck_assert_vat_ok(vat_host_supervisor_stop(sup));
  ck_assert(test_wait_u64(&total_ends, 3, 30));
  clock_gettime(CLOCK_MONOTONIC, &t1);
  test_quiesce(sys);
  double waited = (double)(t1.tv_sec - t0.tv_sec) +
                  (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9;
  ck_assert_str_eq(trace(mark), "E2 E1 E0");
  ck_assert(vat_is_atom(events[mark].reason, vat_atom_shutdown()));
  ck_assert(vat_is_atom(events[mark + 1].reason, vat_atom_killed()));
  ck_assert(vat_is_atom(events[mark + 2].reason, vat_atom_killed()));
  ck_assert_msg(waited >= 0.2, "killed after %.3f s", waited);
  ck_assert(vat_reason_is_normal(vat_ref_exit_reason(sup)));
}
END_TEST

/* Killed while it waits for a child: the children it has not reached are
 * still linked, so they die with it. */
START_TEST(killed_while_shutting_down) {
  vat_system *sys = test_system(2);
  vat_sup_spec spec = make_spec(VAT_ONE_FOR_ONE, 3, 5);
  kid_args[2].trap = true;
  specs[2].shutdown_s = 30;
  atomic_store(&traps_set, 0);
  vat_ref *sup = start_sup(sys, &spec, 3);
  ck_assert(test_wait_u64(&traps_set, 1, 30));
  ck_assert_vat_ok(vat_host_supervisor_stop(sup));
  ck_assert(test_wait_u64(&ignored_exits, 1, 30));
  ck_assert_vat_ok(vat_host_exit(sup, vat_atom_value(vat_atom_killed())));
  ck_assert(test_wait_u64(&total_ends, 2, 30));
  vat_ref *kid2 = kid_ref(2);
  test_quiesce(sys);
  ck_assert(vat_is_atom(vat_ref_exit_reason(sup), vat_atom_killed()));
  for (int i = 0; i < 2; i++)
    ck_assert(vat_is_atom(vat_ref_exit_reason(kid_ref(i)), vat_atom_killed()));
  /* The one it had unlinked traps exits and outlives it, as in OTP. */
  ck_assert(!vat_ref_is_dead(kid2));
}
END_TEST

typedef struct owner {
  vat_ref *sup;
  const vat_sup_spec *spec;
} owner;

static void owner_start(vat_turn *turn, void *state, void *arg) {
  (void)arg;
  owner *o = state;
  expect_vat_ok(vat_supervisor_start_link(turn, o->spec, &o->sup));
}

static void owner_fail(vat_turn *turn, void *state, void *arg) {
  (void)state;
  (void)arg;
  expect_vat_ok(vat_fail(turn, vat_atom_value(vat_atom_intern("owner_gone"))));
}

START_TEST(parent_exit_shuts_down) {
  vat_system *sys = test_system(2);
  vat_sup_spec spec = make_spec(VAT_ONE_FOR_ALL, 3, 5);
  vat_ref *oref;
  owner *o;
  ck_assert_vat_ok(vat_host_spawn(
      sys, &(vat_entity_def){.state_size = sizeof(owner)}, &oref, (void **)&o));
  o->spec = &spec;
  ck_assert_vat_ok(vat_host_send(oref, owner_start, NULL));
  ck_assert(test_wait_u64(&total_starts, 3, 30));
  uint64_t mark = atomic_load(&nevents);
  ck_assert_vat_ok(vat_host_send(oref, owner_fail, NULL));
  ck_assert(test_wait_u64(&total_ends, 3, 30));
  test_quiesce(sys);
  ck_assert_str_eq(trace(mark), "E2 E1 E0");
  ck_assert(
      vat_is_atom(vat_ref_exit_reason(o->sup), vat_atom_intern("owner_gone")));
}
END_TEST

START_TEST(failed_start_at_init) {
  vat_system *sys = test_system(2);
  vat_sup_spec spec = make_spec(VAT_ONE_FOR_ONE, 3, 5);
  fail_start[2] = true;
  vat_ref *sup;
  ck_assert_vat_ok(vat_host_supervisor_start(sys, &spec, &sup));
  ck_assert(test_wait_u64(&total_ends, 2, 30));
  test_quiesce(sys);
  /* The children started so far are shut down, newest first. */
  ck_assert_str_eq(trace(0), "S0 S1 E1 E0");
  ck_assert(vat_is_atom(vat_ref_exit_reason(sup), vat_atom_shutdown()));
}
END_TEST

/* A supervisor as a child: given for ever to shut down, it shuts its own
 * children down first. */
static vat_child_spec inner_specs[2];
static vat_sup_spec inner_spec;
static _Atomic(vat_ref *) inner_ref;

static int start_inner(vat_turn *turn, void *arg, vat_ref **out) {
  (void)arg;
  int rc = vat_supervisor_start_link(turn, &inner_spec, out);
  if (rc == VAT_OK)
    atomic_store(&inner_ref, *out);
  return rc;
}

START_TEST(nested_supervisors_shut_down_in_order) {
  vat_system *sys = test_system(2);
  inner_spec = make_spec(VAT_ONE_FOR_ONE, 3, 5);
  for (int i = 0; i < 2; i++)
    inner_specs[i] = specs[i + 1]; /* kids 1 and 2 */
  inner_spec.children = inner_specs;
  inner_spec.nchildren = 2;
  vat_child_spec top_specs[2] = {
      specs[0], /* kid 0 */
      {.id = "inner",
       .start = start_inner,
       .restart = VAT_PERMANENT,
       .shutdown_s = -1},
  };
  vat_sup_spec top = {.strategy = VAT_ONE_FOR_ONE,
                      .max_restarts = 5,
                      .max_seconds = 10,
                      .children = top_specs,
                      .nchildren = 2};
  vat_ref *sup = start_sup(sys, &top, 3);
  ck_assert_str_eq(trace(0), "S0 S1 S2");
  /* A crash inside is handled inside. */
  send_kid(2, kid_crash);
  ck_assert(test_wait_u64(&total_starts, 4, 30));
  uint64_t mark = atomic_load(&nevents);
  stop_and_quiesce(sys, sup, 4);
  ck_assert_str_eq(trace(mark), "E2 E1 E0");
  vat_ref *inner = atomic_load(&inner_ref);
  ck_assert(vat_is_atom(vat_ref_exit_reason(inner), vat_atom_shutdown()));
}
END_TEST

/* --- which_children ------------------------------------------------------- */

typedef struct asker {
  _Atomic uint64_t answered;
  size_t n;
  vat_ref *refs[MAX_KIDS];
} asker;

static void got_children(vat_turn *turn, void *state, void *arg) {
  (void)turn;
  asker *a = state;
  vat_sup_children *c = arg;
  a->n = c->n;
  for (size_t i = 0; i < c->n && i < MAX_KIDS; i++)
    a->refs[i] = c->refs[i];
  atomic_store(&a->answered, 1);
}

START_TEST(which_children) {
  vat_system *sys = test_system(2);
  vat_sup_spec spec = make_spec(VAT_ONE_FOR_ONE, 3, 5);
  vat_ref *sup = start_sup(sys, &spec, 3);
  vat_ref *aref;
  asker *a;
  ck_assert_vat_ok(vat_host_spawn(
      sys, &(vat_entity_def){.state_size = sizeof(asker)}, &aref, (void **)&a));
  ck_assert_vat_ok(vat_host_supervisor_which_children(sup, aref, got_children));
  ck_assert(test_wait_u64(&a->answered, 1, 30));
  ck_assert_uint_eq(a->n, 3);
  for (int i = 0; i < 3; i++)
    ck_assert(a->refs[i] == kid_ref(i));
  ck_assert_vat_err(vat_host_supervisor_start(sys, NULL, &sup), VAT_EINVAL);
  stop_and_quiesce(sys, sup, 3);
}
END_TEST

/* --- Intensity on the system's clock -------------------------------------- */

static void run_dry(vat_system *sys) {
  vat_run_result r;
  ck_assert_vat_ok(vat_system_run_until_quiescent(sys, 0, &r));
  ck_assert(!r.more);
}

/* Crashes the current kid 0 and runs the system until all is handled. */
static void crash_and_run(vat_system *sys) {
  send_kid(0, kid_crash);
  run_dry(sys);
}

/* The intensity window is measured on the system's clock, which in
 * deterministic mode is virtual: crashes spaced by advancing it past the
 * window are fine however little real time passes, and crashes within it
 * trip the limit however much real time passes. No real sleeping. */
START_TEST(intensity_uses_the_virtual_clock) {
  const uint64_t second = 1000 * 1000 * 1000;
  vat_system *sys = test_host_system(true, 1);
  vat_sup_spec spec = make_spec(VAT_ONE_FOR_ONE, 1, 2);
  spec.max_seconds = 10;
  uint64_t base = atomic_load(&total_starts);
  vat_ref *sup;
  ck_assert_vat_ok(vat_host_supervisor_start(sys, &spec, &sup));
  run_dry(sys);
  ck_assert_uint_eq(atomic_load(&total_starts), base + 1);
  /* Eight crashes, each 11 virtual seconds after the last: never more
   * than one restart in any 10 s. */
  for (uint64_t i = 1; i <= 8; i++) {
    crash_and_run(sys);
    ck_assert_msg(!vat_ref_is_dead(sup),
                  "the supervisor gave up at spaced crash %llu",
                  (unsigned long long)i);
    ck_assert_uint_eq(atomic_load(&total_starts), base + 1 + i);
    ck_assert_vat_ok(vat_system_advance_clock(sys, 11 * second));
  }
  /* Within one window (8 virtual seconds): two restarts are allowed, the
   * third is not. */
  crash_and_run(sys);
  ck_assert_vat_ok(vat_system_advance_clock(sys, 4 * second));
  crash_and_run(sys);
  ck_assert(!vat_ref_is_dead(sup));
  ck_assert_vat_ok(vat_system_advance_clock(sys, 4 * second));
  crash_and_run(sys);
  ck_assert(vat_ref_is_dead(sup));
  ck_assert(vat_is_atom(vat_ref_exit_reason(sup), vat_atom_shutdown()));
  ck_assert_uint_eq(atomic_load(&total_starts), base + 11);
  test_quiesce(sys);
}
END_TEST

/* --- Promises of supervisor.h nobody tested ------------------------------ */

/* "max_restarts 0 means no restart at all is allowed." */
START_TEST(max_restarts_zero_allows_none) {
  vat_system *sys = test_system(2);
  vat_sup_spec spec = make_spec(VAT_ONE_FOR_ONE, 2, 0);
  vat_ref *sup = start_sup(sys, &spec, 2);
  send_kid(0, kid_crash);
  ck_assert(test_wait_u64(&total_ends, 2, 30));
  test_quiesce(sys);
  ck_assert_uint_eq(atomic_load(&total_starts), 2);
  ck_assert(vat_is_atom(vat_ref_exit_reason(sup), vat_atom_shutdown()));
}
END_TEST

/* "A non-zero return is a failed start: counted as a restart, and tried
 * again while the intensity allows." Two failed tries, then it starts. */
START_TEST(failed_restart_is_retried) {
  vat_system *sys = test_system(2);
  vat_sup_spec spec = make_spec(VAT_ONE_FOR_ONE, 2, 3);
  vat_ref *sup = start_sup(sys, &spec, 2);
  fail_next[0] = 2;
  send_kid(0, kid_crash);
  ck_assert(test_wait_u64(&starts[0], 2, 30));
  ck_assert_int_eq(fail_next[0], 0);
  ck_assert(!vat_ref_is_dead(sup));
  stop_and_quiesce(sys, sup, 3);
}
END_TEST

/* The same with a budget too small: the retries count as restarts. */
START_TEST(failed_restarts_count_toward_intensity) {
  vat_system *sys = test_system(2);
  vat_sup_spec spec = make_spec(VAT_ONE_FOR_ONE, 2, 2);
  vat_ref *sup = start_sup(sys, &spec, 2);
  fail_next[0] = 2; /* crash + 2 failed tries: 3 restarts in 10 s */
  send_kid(0, kid_crash);
  ck_assert(test_wait_u64(&total_ends, 2, 30));
  test_quiesce(sys);
  ck_assert_uint_eq(atomic_load(&starts[0]), 1);
  ck_assert(vat_is_atom(vat_ref_exit_reason(sup), vat_atom_shutdown()));
}
END_TEST

/* Temporary children are forgotten once they end or are shut down: a
 * one_for_all restart starts neither the one that ended nor the one it
 * shut down. */
START_TEST(temporary_children_are_forgotten) {
  vat_system *sys = test_system(2);
  vat_sup_spec spec = make_spec(VAT_ONE_FOR_ALL, 3, 5);
  specs[1].restart = VAT_TEMPORARY; /* crashes first */
  specs[2].restart = VAT_TEMPORARY; /* shut down by the restart */
  vat_ref *sup = start_sup(sys, &spec, 3);
  send_kid(1, kid_crash);
  ck_assert(test_wait_u64(&total_ends, 1, 30));
  send_kid(0, kid_crash);
  ck_assert(test_wait_u64(&starts[0], 2, 30));
  ck_assert(test_wait_u64(&total_ends, 3, 30)); /* kid 0, and kid 2 */
  /* A which_children round trip orders this after the restart. */
  vat_ref *aref;
  asker *a;
  ck_assert_vat_ok(vat_host_spawn(
      sys, &(vat_entity_def){.state_size = sizeof(asker)}, &aref, (void **)&a));
  ck_assert_vat_ok(vat_host_supervisor_which_children(sup, aref, got_children));
  ck_assert(test_wait_u64(&a->answered, 1, 30));
  ck_assert(a->refs[0] != NULL && a->refs[1] == NULL && a->refs[2] == NULL);
  stop_and_quiesce(sys, sup, 4);
  ck_assert_uint_eq(atomic_load(&starts[1]), 1);
  ck_assert_uint_eq(atomic_load(&starts[2]), 1);
}
END_TEST

START_TEST(bad_specs_are_refused) {
  vat_system *sys = test_system(1);
  vat_sup_spec spec = make_spec(VAT_ONE_FOR_ONE, 2, 3);
  vat_ref *sup = NULL;
  ck_assert_vat_err(vat_host_supervisor_start(sys, &spec, NULL), VAT_EINVAL);
  spec.max_seconds = 0;
  ck_assert_vat_err(vat_host_supervisor_start(sys, &spec, &sup), VAT_EINVAL);
  spec.max_seconds = -1;
  ck_assert_vat_err(vat_host_supervisor_start(sys, &spec, &sup), VAT_EINVAL);
  spec.max_seconds = 10;
  specs[1].start = NULL;
  ck_assert_vat_err(vat_host_supervisor_start(sys, &spec, &sup), VAT_EINVAL);
  ck_assert_ptr_null(sup);
  ck_assert_vat_err(vat_host_supervisor_stop(NULL), VAT_EINVAL);
  ck_assert_vat_err(vat_supervisor_stop(NULL, sup), VAT_ENOTINTURN);
  test_quiesce(sys);
  ck_assert_uint_eq(atomic_load(&total_starts), 0);
}
END_TEST

/* From a turn: which_children, then stop. */
typedef struct sup_user {
  vat_ref *sup;
  int which_null_rc;
} sup_user;

static void user_asks_and_stops(vat_turn *turn, void *state, void *arg) {
  sup_user *u = state;
  u->which_null_rc =
      vat_supervisor_which_children(turn, NULL, vat_self(turn), got_children);
  expect_vat_ok(vat_supervisor_which_children(turn, u->sup, arg, got_children));
  expect_vat_ok(vat_supervisor_stop(turn, u->sup));
}

START_TEST(stop_and_which_children_from_a_turn) {
  vat_system *sys = test_system(2);
  vat_sup_spec spec = make_spec(VAT_REST_FOR_ONE, 2, 5);
  vat_ref *sup = start_sup(sys, &spec, 2);
  vat_ref *aref;
  asker *a;
  ck_assert_vat_ok(vat_host_spawn(
      sys, &(vat_entity_def){.state_size = sizeof(asker)}, &aref, (void **)&a));
  sup_user *u;
  vat_ref *uref = test_spawn(sys, sizeof(sup_user), (void **)&u);
  u->sup = sup;
  ck_assert_vat_ok(vat_host_send(uref, user_asks_and_stops, aref));
  ck_assert(test_wait_u64(&a->answered, 1, 30));
  ck_assert(test_wait_u64(&total_ends, 2, 30));
  test_quiesce(sys);
  ck_assert_int_eq(u->which_null_rc, VAT_EINVAL);
  ck_assert_uint_eq(a->n, 2);
  ck_assert(a->refs[0] == kid_ref(0) && a->refs[1] == kid_ref(1));
  ck_assert_str_eq(trace(2), "E1 E0");
  ck_assert(vat_ref_is_dead(sup));
  ck_assert(vat_reason_is_normal(vat_ref_exit_reason(sup)));
}
END_TEST

/* supervisor.h: vat_supervisor_children and vat_host_supervisor_children
 * refuse a NULL out with VAT_EINVAL and send nothing (they used to send
 * the request and then store through NULL). */
typedef struct null_out_asker {
  vat_ref *sup;
  const vat_sup_spec *spec;
  int rc, start_rc;
} null_out_asker;

static void ask_children_into_null(vat_turn *turn, void *state, void *arg) {
  (void)arg;
  null_out_asker *a = state;
  a->rc = vat_supervisor_children(turn, a->sup, NULL);
  /* The family's other out: refused too, and no supervisor starts. */
  a->start_rc = vat_supervisor_start_link(turn, a->spec, NULL);
}

static uint32_t turns_of(vat_ref *ref) {
  vat_info info;
  ck_assert_vat_ok(vat_ref_inspect(ref, &info));
  return info.turns;
}

START_TEST(children_into_a_null_out_are_refused_unsent) {
  vat_system *sys = test_host_system(true, 1);
  vat_sup_spec spec = make_spec(VAT_ONE_FOR_ONE, 1, 5);
  vat_ref *sup;
  ck_assert_vat_ok(vat_host_supervisor_start(sys, &spec, &sup));
  run_dry(sys);
  uint32_t turns = turns_of(sup);
  ck_assert_vat_err(vat_host_supervisor_children(sup, NULL), VAT_EINVAL);
  null_out_asker *a;
  vat_ref *aref = test_spawn(sys, sizeof(null_out_asker), (void **)&a);
  a->sup = sup;
  a->spec = &spec;
  uint64_t started = atomic_load(&total_starts);
  ck_assert_vat_ok(vat_host_send(aref, ask_children_into_null, NULL));
  run_dry(sys);
  ck_assert_int_eq(a->rc, VAT_EINVAL);
  ck_assert_int_eq(a->start_rc, VAT_EINVAL);
  ck_assert_uint_eq(atomic_load(&total_starts), started);
  ck_assert_uint_eq(turns_of(sup), turns);
  /* A request that is sent shows in the count. */
  vat_promise *p;
  ck_assert_vat_ok(vat_host_supervisor_children(sup, &p));
  run_dry(sys);
  ck_assert_uint_eq(turns_of(sup), turns + 1);
  ck_assert_int_eq(vat_promise_peek(p, NULL), VAT_PROMISE_RESOLVED);
  ck_assert_vat_ok(vat_host_supervisor_stop(sup));
  test_quiesce(sys);
}
END_TEST

/* supervisor.h: a child gets shutdown_s to end after exit(shutdown), and
 * a deadline is for one shutdown of one child. Here kid 0's deadline from
 * a first shutdown fires after its DOWN was handled (too late to be
 * cancelled) and reaches the supervisor while a second shutdown is busy
 * with kid 1: the restarted kid 0 must still end with `shutdown`, after
 * kid 1, never be killed by the stale deadline. Deterministic: a
 * host-driven system on the virtual clock, one turn at a time. */
START_TEST(stale_shutdown_deadline_never_kills_a_restarted_child) {
  const uint64_t second = 1000 * 1000 * 1000;
  vat_system *sys = test_host_system(true, 1);
  vat_sup_spec spec = make_spec(VAT_ONE_FOR_ALL, 2, 5);
  specs[0].shutdown_s = 1;
  vat_ref *sup;
  ck_assert_vat_ok(vat_host_supervisor_start(sys, &spec, &sup));
  run_dry(sys);
  vat_ref *first0 = kid_ref(0);
  /* Kid 1 crashes: the supervisor sends kid 0 exit(shutdown) with a 1 s
   * deadline; run until kid 0 ended, its DOWN queued at the supervisor. */
  send_kid(1, kid_crash);
  for (int i = 0; i < 100 && !vat_ref_is_dead(first0); i++)
    ck_assert_vat_ok(vat_system_run(sys, 1, 0, NULL));
  ck_assert(vat_ref_is_dead(first0));
  ck_assert_uint_eq(atomic_load(&starts[0]), 1); /* DOWN not handled yet */
  /* Behind the DOWN: a stop, then (the clock past it) kid 0's deadline. */
  ck_assert_vat_ok(vat_host_supervisor_stop(sup));
  ck_assert_vat_ok(vat_system_advance_clock(sys, 2 * second));
  uint64_t mark = atomic_load(&nevents);
  run_dry(sys);
  ck_assert_str_eq(trace(mark), "S0 S1 E1 E0");
  ck_assert(vat_is_atom(events[mark + 2].reason, vat_atom_shutdown()));
  ck_assert_msg(vat_is_atom(events[mark + 3].reason, vat_atom_shutdown()),
                "the restarted kid 0 did not end with shutdown");
  ck_assert(vat_ref_is_dead(sup));
  test_quiesce(sys);
}
END_TEST

Suite *test_supervisor_suite(void) {
  Suite *s = suite_create("supervisor");
  TCase *tc = test_case("supervisor", 60);
  tcase_add_test(tc, one_for_one_restarts_only_the_child);
  tcase_add_test(tc, one_for_all_restarts_everyone);
  tcase_add_test(tc, rest_for_one_restarts_the_rest);
  tcase_add_test(tc, restart_types);
  tcase_add_test(tc, intensity_ends_the_supervisor);
  tcase_add_test(tc, intensity_window_slides);
  tcase_add_test(tc, shutdown_timeout_then_kill);
  tcase_add_test(tc, parent_exit_shuts_down);
  tcase_add_test(tc, killed_while_shutting_down);
  tcase_add_test(tc, failed_start_at_init);
  tcase_add_test(tc, nested_supervisors_shut_down_in_order);
  tcase_add_test(tc, which_children);
  tcase_add_test(tc, max_restarts_zero_allows_none);
  tcase_add_test(tc, failed_restart_is_retried);
  tcase_add_test(tc, failed_restarts_count_toward_intensity);
  tcase_add_test(tc, temporary_children_are_forgotten);
  tcase_add_test(tc, bad_specs_are_refused);
  tcase_add_test(tc, stop_and_which_children_from_a_turn);
  suite_add_tcase(s, tc);
  TCase *clock = test_case("clock", 30);
  tcase_add_test(clock, intensity_uses_the_virtual_clock);
  tcase_add_test(clock, children_into_a_null_out_are_refused_unsent);
  tcase_add_test(clock, stale_shutdown_deadline_never_kills_a_restarted_child);
  suite_add_tcase(s, clock);
  return s;
}
