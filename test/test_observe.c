/* Observing a running program: labels, crash reports, snapshots of vats and
 * systems, host monitors, and a supervisor's children as a promise. */
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "support.h"

static vat_value boom(void) {
  return vat_reason_error(vat_atom_intern("boom"), vat_int(42));
}

/* --- A crash hook that keeps what it hears -------------------------------- */

enum { MAX_REPORTS = 16 };
static pthread_mutex_t reports_lock = PTHREAD_MUTEX_INITIALIZER;
static vat_crash_report reports[MAX_REPORTS];
static _Atomic uint64_t nreports;

static void keep_report(void *ctx, const vat_crash_report *r) {
  (void)ctx;
  pthread_mutex_lock(&reports_lock);
  uint64_t n = atomic_load(&nreports);
  if (n < MAX_REPORTS)
    reports[n] = *r;
  atomic_store(&nreports, n + 1);
  pthread_mutex_unlock(&reports_lock);
}

static vat_system *system_with_hook(unsigned workers, vat_crash_fn fn,
                                    void *ctx) {
  vat_config cfg;
  vat_config_default(&cfg);
  cfg.workers = workers;
  cfg.on_crash = fn;
  cfg.crash_ctx = ctx;
  vat_system *sys;
  ck_assert_vat_ok(vat_system_new(&cfg, &sys));
  atomic_store(&nreports, 0);
  return sys;
}

/* Exported (the test runner links with -rdynamic) so that dladdr names it
 * in crash reports. */
void observe_fail_fn(vat_turn *turn, void *state, void *arg);
void observe_fail_fn(vat_turn *turn, void *state, void *arg) {
  (void)state;
  (void)arg;
  expect_vat_ok(vat_fail(turn, boom()));
}

static void stop_with_fn(vat_turn *turn, void *state, void *arg) {
  (void)state;
  expect_vat_ok(vat_stop_with(turn, *(vat_value *)arg));
}

static void receive_fail(vat_turn *turn, void *state, const vat_atom *sel,
                         vat_value value) {
  (void)state;
  (void)sel;
  expect_vat_ok(vat_fail(turn, value));
}

static const vat_entity_def plain_def = {.state_size = 8};
static vat_value normal_reason; /* set by the fixture: atoms need vat_init */

/* --- Labels -----------------------------------------------------------------
 */

START_TEST(label_from_spawn_is_a_bounded_copy) {
  vat_system *sys = test_system(2);
  char name[32];
  strcpy(name, "worker-7");
  vat_entity_def def = {.state_size = 8, .label = name};
  vat_ref *a;
  ck_assert_vat_ok(vat_host_spawn(sys, &def, &a, NULL));
  strcpy(name, "overwritten");
  ck_assert_str_eq(vat_ref_label(a), "worker-7");

  char longer[200];
  memset(longer, 'x', sizeof longer - 1);
  longer[sizeof longer - 1] = '\0';
  def.label = longer;
  vat_ref *b;
  ck_assert_vat_ok(vat_host_spawn(sys, &def, &b, NULL));
  ck_assert_uint_eq(strlen(vat_ref_label(b)), VAT_LABEL_MAX);

  /* 2-byte characters: the 32nd would straddle byte 63, so it is cut. */
  char utf8[200] = "";
  for (int i = 0; i < 40; i++)
    strcat(utf8, "\xc3\xa9");
  def.label = utf8;
  vat_ref *c;
  ck_assert_vat_ok(vat_host_spawn(sys, &def, &c, NULL));
  ck_assert_uint_eq(strlen(vat_ref_label(c)), 62);

  vat_ref *d = test_spawn(sys, 8, NULL);
  ck_assert_ptr_null(vat_ref_label(d));
  ck_assert_ptr_null(vat_ref_label(NULL));
  test_quiesce(sys);
}
END_TEST

static void relabel(vat_turn *turn, void *state, void *arg) {
  (void)state;
  expect_vat_ok(vat_set_label(turn, arg));
}

START_TEST(set_label_inside_a_turn) {
  vat_system *sys = test_system(2);
  vat_ref *a = test_spawn(sys, 8, NULL);
  char name[] = "renamed";
  ck_assert_vat_ok(vat_host_send(a, relabel, name));
  vat_info info;
  for (int i = 0; i < 30000 && vat_ref_label(a) == NULL; i++)
    test_sleep(0.001);
  name[0] = 'X'; /* copied: the vat's label does not change */
  ck_assert_str_eq(vat_ref_label(a), "renamed");
  ck_assert_vat_ok(vat_ref_inspect(a, &info));
  ck_assert_str_eq(info.label, "renamed");
  ck_assert_vat_ok(vat_host_send(a, relabel, NULL));
  for (int i = 0; i < 30000 && vat_ref_label(a) != NULL; i++)
    test_sleep(0.001);
  ck_assert_ptr_null(vat_ref_label(a));
  ck_assert_vat_err(vat_set_label(NULL, "x"), VAT_ENOTINTURN);
  test_quiesce(sys);
}
END_TEST

/* --- Crash reports ---------------------------------------------------------
 */

START_TEST(unwatched_crash_reported_once_with_handler_name) {
  vat_system *sys = system_with_hook(2, keep_report, NULL);
  vat_entity_def def = {.state_size = 8, .label = "doomed"};
  vat_ref *a;
  ck_assert_vat_ok(vat_host_spawn(sys, &def, &a, NULL));
  ck_assert_vat_ok(vat_host_send(a, observe_fail_fn, NULL));
  ck_assert(test_wait_u64(&nreports, 1, 30));
  test_quiesce(sys);
  ck_assert_uint_eq(atomic_load(&nreports), 1);
  vat_crash_report *r = &reports[0];
  ck_assert_ptr_eq(r->vat, a);
  ck_assert_str_eq(r->label, "doomed");
  ck_assert(vat_equal(r->reason, boom()));
  ck_assert(r->handler == observe_fail_fn);
  ck_assert_ptr_nonnull(r->handler_name);
  ck_assert_str_eq(r->handler_name, "observe_fail_fn");
  ck_assert_ptr_null(r->selector);
  ck_assert_ptr_null(r->signal);
  ck_assert(!r->watched);
}
END_TEST

START_TEST(crash_names_the_selector) {
  vat_system *sys = system_with_hook(2, keep_report, NULL);
  vat_entity_def def = {.state_size = 8, .receive = receive_fail};
  vat_ref *a;
  ck_assert_vat_ok(vat_host_spawn(sys, &def, &a, NULL));
  ck_assert_vat_ok(
      vat_host_send_msg(a, vat_atom_intern("explode"), vat_string("why")));
  ck_assert(test_wait_u64(&nreports, 1, 30));
  test_quiesce(sys);
  ck_assert_uint_eq(atomic_load(&nreports), 1);
  ck_assert_ptr_eq(reports[0].selector, vat_atom_intern("explode"));
  ck_assert(reports[0].handler == NULL);
  ck_assert(vat_equal(reports[0].reason, vat_string("why")));
  char line[256];
  vat_crash_format(&reports[0], line, sizeof line);
  ck_assert_ptr_nonnull(strstr(line, "(handling message 'explode')\n"));
}
END_TEST

void observe_fail_request(vat_turn *turn, void *state, void *arg,
                          vat_resolver *r);
void observe_fail_request(vat_turn *turn, void *state, void *arg,
                          vat_resolver *r) {
  (void)state;
  (void)arg;
  (void)r;
  expect_vat_ok(vat_fail(turn, boom()));
}

START_TEST(crash_names_a_requests_handler) {
  vat_system *sys = system_with_hook(2, keep_report, NULL);
  vat_ref *a = test_spawn(sys, 8, NULL);
  vat_promise *p;
  ck_assert_vat_ok(vat_host_call(a, observe_fail_request, NULL, 0, &p));
  vat_value reason;
  ck_assert_vat_err(vat_promise_wait(p, 30, &reason), VAT_EBROKEN);
  ck_assert(vat_equal(reason, boom()));
  test_quiesce(sys);
  ck_assert_uint_eq(atomic_load(&nreports), 1);
  ck_assert(reports[0].handler == (vat_fn)(void (*)(void))observe_fail_request);
  ck_assert_str_eq(reports[0].handler_name, "observe_fail_request");
  ck_assert_ptr_null(reports[0].signal);
}
END_TEST

START_TEST(orderly_ends_are_not_reported) {
  vat_system *sys = system_with_hook(2, keep_report, NULL);
  static vat_value reasons[3];
  reasons[0] = vat_atom_value(vat_atom_normal());
  reasons[1] = vat_atom_value(vat_atom_shutdown());
  reasons[2] = vat_reason_error(vat_atom_shutdown(), vat_int(1));
  vat_ref *refs[3];
  for (int i = 0; i < 3; i++) {
    refs[i] = test_spawn(sys, 8, NULL);
    ck_assert_vat_ok(vat_host_send(refs[i], stop_with_fn, &reasons[i]));
  }
  test_quiesce(sys);
  for (int i = 0; i < 3; i++)
    ck_assert(vat_ref_is_dead(refs[i]));
  ck_assert_uint_eq(atomic_load(&nreports), 0);
}
END_TEST

START_TEST(killed_vat_reports_killed) {
  vat_system *sys = system_with_hook(2, keep_report, NULL);
  vat_ref *a = test_spawn(sys, 8, NULL);
  ck_assert_vat_ok(vat_host_exit(a, vat_atom_value(vat_atom_killed())));
  ck_assert(test_wait_u64(&nreports, 1, 30));
  test_quiesce(sys);
  ck_assert_uint_eq(atomic_load(&nreports), 1);
  ck_assert(vat_is_atom(reports[0].reason, vat_atom_killed()));
  ck_assert_ptr_nonnull(reports[0].signal);
  ck_assert_str_eq(reports[0].signal, "exit");
  char line[256];
  vat_crash_format(&reports[0], line, sizeof line);
  ck_assert_ptr_nonnull(
      strstr(line, "crashed: 'killed (handling exit signal)"));
}
END_TEST

/* Declared with the snapshot tests below. */
static _Atomic uint64_t blocked, release_block;
static void block_until_released(vat_turn *turn, void *state, void *arg);
static void nothing(vat_turn *turn, void *state, void *arg);

/* Killed with a backlog: the kill overtakes the queue; one report, and the
 * queued messages become dead letters. */
START_TEST(killed_with_a_backlog_reports_once) {
  enum { BACKLOG = 50 };
  vat_system *sys = system_with_hook(2, keep_report, NULL);
  atomic_store(&blocked, 0);
  atomic_store(&release_block, 0);
  vat_ref *a = test_spawn(sys, 8, NULL);
  ck_assert_vat_ok(vat_host_send(a, block_until_released, NULL));
  ck_assert(test_wait_u64(&blocked, 1, 30));
  for (int i = 0; i < BACKLOG; i++)
    ck_assert_vat_ok(vat_host_send(a, nothing, NULL));
  ck_assert_vat_ok(vat_host_exit(a, vat_atom_value(vat_atom_killed())));
  vat_info info;
  ck_assert_vat_ok(vat_ref_inspect(a, &info));
  ck_assert_uint_eq(info.queue_len, BACKLOG + 1);
  atomic_store(&release_block, 1);
  ck_assert(test_wait_u64(&nreports, 1, 30));
  test_quiesce(sys);
  ck_assert_uint_eq(atomic_load(&nreports), 1);
  ck_assert(vat_is_atom(reports[0].reason, vat_atom_killed()));
  ck_assert_str_eq(reports[0].signal, "exit");
  ck_assert_vat_ok(vat_ref_inspect(a, &info));
  ck_assert(!info.alive);
  ck_assert_uint_eq(info.queue_len, 0);
  ck_assert_uint_eq(info.turns, 2); /* the blocked one, then the exit */
  ck_assert_uint_eq(test_stats(sys).dead_letters, BACKLOG);
}
END_TEST

/* A vat that spawns a child, then fails in the same turn: the child never
 * runs, and only the parent is reported. */
static void spawn_then_fail(vat_turn *turn, void *state, void *arg) {
  (void)state;
  (void)arg;
  vat_ref *child;
  expect_vat_ok(vat_spawn(turn, &plain_def, &child, NULL));
  expect_vat_ok(vat_fail(turn, boom()));
}

START_TEST(vats_of_a_failed_turn_are_not_reported) {
  vat_system *sys = system_with_hook(2, keep_report, NULL);
  vat_ref *a = test_spawn(sys, 8, NULL);
  ck_assert_vat_ok(vat_host_send(a, spawn_then_fail, NULL));
  test_quiesce(sys);
  ck_assert_uint_eq(atomic_load(&nreports), 1);
  ck_assert_ptr_eq(reports[0].vat, a);
  ck_assert_uint_eq(test_stats(sys).terminated, 2);
}
END_TEST

/* A trapping parent linked to a child that fails: the child's report says
 * it was watched, and the default writer writes nothing for it. */
typedef struct parent {
  _Atomic uint64_t exits;
} parent;

static void on_exit_count(vat_turn *turn, void *state, vat_ref *from,
                          vat_value reason) {
  (void)turn;
  (void)from;
  (void)reason;
  atomic_fetch_add(&((parent *)state)->exits, 1);
}

static void link_and_crash_child(vat_turn *turn, void *state, void *arg) {
  (void)state;
  (void)arg;
  expect_vat_ok(vat_trap_exit(turn, vat_self(turn), on_exit_count));
  vat_ref *child;
  expect_vat_ok(vat_spawn_link(turn, &plain_def, &child, NULL));
  expect_vat_ok(vat_send(turn, child, observe_fail_fn, NULL));
}

START_TEST(watched_crash_is_flagged_and_not_printed) {
  vat_system *sys = system_with_hook(2, keep_report, NULL);
  parent *p;
  vat_ref *a = test_spawn(sys, sizeof *p, (void **)&p);
  ck_assert_vat_ok(vat_host_send(a, link_and_crash_child, NULL));
  ck_assert(test_wait_u64(&p->exits, 1, 30));
  test_quiesce(sys);
  ck_assert_uint_eq(atomic_load(&nreports), 1);
  ck_assert(reports[0].watched);
  char buf[256] = "";
  FILE *f = fmemopen(buf, sizeof buf, "w");
  vat_crash_print(f, &reports[0]);
  fclose(f);
  ck_assert_str_eq(buf, "");
}
END_TEST

START_TEST(default_writer_prints_one_line) {
  vat_config cfg;
  vat_config_default(&cfg);
  ck_assert(cfg.on_crash == vat_crash_print);
  ck_assert_ptr_null(cfg.crash_ctx);
  FILE *out = tmpfile();
  ck_assert_ptr_nonnull(out);
  vat_system *sys = system_with_hook(2, vat_crash_print, out);
  vat_entity_def def = {.state_size = 8, .label = "printer"};
  vat_ref *a, *b;
  normal_reason = vat_atom_value(vat_atom_normal());
  ck_assert_vat_ok(vat_host_spawn(sys, &def, &a, NULL));
  ck_assert_vat_ok(vat_host_spawn(sys, &plain_def, &b, NULL));
  ck_assert_vat_ok(vat_host_send(a, observe_fail_fn, NULL));
  ck_assert_vat_ok(vat_host_send(b, stop_with_fn, &normal_reason));
  test_quiesce(sys);
  rewind(out);
  char text[1024] = "";
  size_t n = fread(text, 1, sizeof text - 1, out);
  fclose(out);
  text[n] = '\0';
  ck_assert_str_eq(text, "libvat: vat \"printer\" crashed: error(boom, 42) "
                         "(handling observe_fail_fn)\n");
}
END_TEST

/* The writer to stderr: the line reaches file descriptor 2. */
START_TEST(default_writer_goes_to_stderr) {
  fflush(stderr);
  int saved = dup(2);
  int fds[2];
  ck_assert_int_eq(pipe(fds), 0);
  dup2(fds[1], 2);
  close(fds[1]);
  vat_system *sys = system_with_hook(2, vat_crash_print, NULL);
  vat_ref *a = test_spawn(sys, 8, NULL);
  ck_assert_vat_ok(vat_host_send(a, observe_fail_fn, NULL));
  test_quiesce(sys);
  fflush(stderr);
  dup2(saved, 2);
  close(saved);
  char text[1024];
  ssize_t n = read(fds[0], text, sizeof text - 1);
  close(fds[0]);
  ck_assert_int_gt(n, 0);
  text[n] = '\0';
  ck_assert_ptr_nonnull(strstr(text, "libvat: vat 0x"));
  ck_assert_ptr_nonnull(strstr(text, "crashed: error(boom, 42)"));
  ck_assert_ptr_eq(strchr(text, '\n'), text + n - 1); /* one line */
}
END_TEST

START_TEST(null_hook_reports_nothing) {
  vat_system *sys = system_with_hook(2, NULL, NULL);
  vat_ref *a = test_spawn(sys, 8, NULL);
  ck_assert_vat_ok(vat_host_send(a, observe_fail_fn, NULL));
  test_quiesce(sys);
  ck_assert(vat_ref_is_dead(a));
  ck_assert_uint_eq(atomic_load(&nreports), 0);
}
END_TEST

/* --- Snapshots of a vat ----------------------------------------------------
 */

static void block_until_released(vat_turn *turn, void *state, void *arg) {
  (void)turn;
  (void)state;
  (void)arg;
  atomic_store(&blocked, 1);
  test_wait_u64(&release_block, 1, 60);
}

static void nothing(vat_turn *turn, void *state, void *arg) {
  (void)turn;
  (void)state;
  (void)arg;
}

static void on_down_nothing(vat_turn *turn, void *state, uint64_t id,
                            vat_ref *who, vat_value reason) {
  (void)turn;
  (void)state;
  (void)id;
  (void)who;
  (void)reason;
}

static void on_exit_nothing(vat_turn *turn, void *state, vat_ref *from,
                            vat_value reason) {
  (void)turn;
  (void)state;
  (void)from;
  (void)reason;
}

/* The subject's first turn: links two vats, monitors a third, traps. */
typedef struct subject {
  vat_ref *peers[3];
} subject;

static void subject_setup(vat_turn *turn, void *state, void *arg) {
  (void)arg;
  subject *s = state;
  uint64_t id;
  expect_vat_ok(vat_link(turn, s->peers[0]));
  expect_vat_ok(vat_link(turn, s->peers[1]));
  expect_vat_ok(vat_monitor(turn, s->peers[2], on_down_nothing, &id));
  expect_vat_ok(vat_trap_exit(turn, vat_self(turn), on_exit_nothing));
}

static void monitor_arg(vat_turn *turn, void *state, void *arg) {
  (void)state;
  uint64_t id;
  expect_vat_ok(vat_monitor(turn, arg, on_down_nothing, &id));
}

static vat_info inspect(vat_ref *ref) {
  vat_info info;
  ck_assert_vat_ok(vat_ref_inspect(ref, &info));
  return info;
}

START_TEST(inspect_vat_with_links_monitors_trap_and_backlog) {
  enum { BACKLOG = 100 };
  vat_system *sys = test_system(2);
  atomic_store(&blocked, 0);
  atomic_store(&release_block, 0);
  subject *s;
  vat_entity_def def = {.state_size = sizeof *s, .label = "subject"};
  vat_ref *a;
  ck_assert_vat_ok(vat_host_spawn(sys, &def, &a, (void **)&s));
  for (int i = 0; i < 3; i++)
    s->peers[i] = test_spawn(sys, 8, NULL);
  vat_ref *watcher = test_spawn(sys, 8, NULL);
  ck_assert_vat_ok(vat_host_send(a, subject_setup, NULL));
  ck_assert_vat_ok(vat_host_send(watcher, monitor_arg, a));
  vat_promise *down;
  ck_assert_vat_ok(vat_host_monitor(a, NULL, &down));
  /* The watchers' signals are handled as turns of `a`: wait for them. */
  vat_info info = inspect(a);
  for (int i = 0; i < 30000 && info.monitored_by < 2; i++) {
    test_sleep(0.001);
    info = inspect(a);
  }
  ck_assert_uint_eq(info.monitored_by, 2);

  ck_assert_vat_ok(vat_host_send(a, block_until_released, NULL));
  ck_assert(test_wait_u64(&blocked, 1, 30));
  for (int i = 0; i < BACKLOG; i++)
    ck_assert_vat_ok(vat_host_send(a, nothing, NULL));
  info = inspect(a);
  ck_assert_ptr_eq(info.system, sys);
  ck_assert_str_eq(info.label, "subject");
  ck_assert(info.alive);
  ck_assert(vat_is_null(info.exit_reason));
  ck_assert_uint_eq(info.queue_len, BACKLOG);
  /* setup, the two monitor signals; the blocked turn is not done yet. */
  ck_assert_uint_eq(info.turns, 3);
  ck_assert_uint_eq(info.links, 2);
  ck_assert_uint_eq(info.monitors_held, 1);
  ck_assert_uint_eq(info.monitored_by, 2);
  ck_assert(info.traps_exits);

  /* The other side of each link and monitor, once their signals arrived
   * (each a turn of the peer). */
  for (int i = 0; i < 30000 && (inspect(s->peers[0]).links < 1 ||
                                inspect(s->peers[1]).links < 1 ||
                                inspect(s->peers[2]).monitored_by < 1);
       i++)
    test_sleep(0.001);
  ck_assert_uint_eq(inspect(s->peers[0]).links, 1);
  ck_assert_uint_eq(inspect(s->peers[1]).links, 1);
  ck_assert_uint_eq(inspect(s->peers[2]).monitored_by, 1);
  ck_assert_uint_eq(inspect(watcher).monitors_held, 1);
  ck_assert(!inspect(watcher).traps_exits);

  atomic_store(&release_block, 1);
  info = inspect(a);
  for (int i = 0; i < 30000 && info.turns < 4 + BACKLOG; i++) {
    test_sleep(0.001);
    info = inspect(a);
  }
  ck_assert_uint_eq(info.turns, 4 + BACKLOG);
  ck_assert_uint_eq(info.queue_len, 0);

  ck_assert_vat_ok(vat_host_exit(a, vat_atom_value(vat_atom_killed())));
  vat_value reason;
  ck_assert_vat_ok(vat_promise_wait(down, 30, &reason));
  ck_assert(vat_is_atom(reason, vat_atom_killed()));
  info = inspect(a);
  ck_assert(!info.alive);
  ck_assert(vat_is_atom(info.exit_reason, vat_atom_killed()));
  ck_assert_uint_eq(info.links, 0);
  ck_assert_uint_eq(info.monitors_held, 0);
  ck_assert_uint_eq(info.monitored_by, 0);
  ck_assert(!info.traps_exits);
  test_quiesce(sys);
}
END_TEST

START_TEST(inspect_bad_arguments) {
  vat_info info;
  ck_assert_vat_err(vat_ref_inspect(NULL, &info), VAT_EINVAL);
  vat_system *sys = test_system(1);
  vat_ref *a = test_spawn(sys, 8, NULL);
  ck_assert_vat_err(vat_ref_inspect(a, NULL), VAT_EINVAL);
  vat_sys_info si;
  vat_worker_info w;
  ck_assert_vat_err(vat_system_inspect(NULL, &si, NULL, 0), VAT_EINVAL);
  ck_assert_vat_err(vat_system_inspect(sys, NULL, NULL, 0), VAT_EINVAL);
  ck_assert_vat_err(vat_system_inspect(sys, &si, NULL, 1), VAT_EINVAL);
  ck_assert_int_eq(vat_system_inspect(sys, &si, &w, 1), 1);
  test_quiesce(sys);
}
END_TEST

/* --- Snapshots of a system ---------------------------------------------------
 */

typedef struct pinger {
  vat_ref *peer;
  uint64_t left;
  _Atomic uint64_t *done;
} pinger;

static void ping(vat_turn *turn, void *state, void *arg) {
  (void)arg;
  pinger *p = state;
  if (p->left == 0) {
    atomic_fetch_add(p->done, 1);
    return;
  }
  p->left--;
  expect_vat_ok(vat_send(turn, p->peer, ping, NULL));
}

START_TEST(inspect_system_workers) {
  enum { ROUNDS = 20000 / TEST_SCALE };
  vat_system *sys = test_system(2);
  static _Atomic uint64_t done;
  atomic_store(&done, 0);
  pinger *pa, *pb;
  vat_ref *a = test_spawn(sys, sizeof *pa, (void **)&pa);
  vat_ref *b = test_spawn(sys, sizeof *pb, (void **)&pb);
  *pa = (pinger){.peer = b, .left = ROUNDS, .done = &done};
  *pb = (pinger){.peer = a, .left = ROUNDS, .done = &done};
  ck_assert_vat_ok(vat_host_send(a, ping, NULL));
  ck_assert(test_wait_u64(&done, 1, 60));

  /* Idle now: each worker parks (it spins first, a while). */
  vat_sys_info si;
  vat_worker_info w[4];
  bool all_parked = false;
  for (int i = 0; i < 30000 && !all_parked; i++) {
    ck_assert_int_eq(vat_system_inspect(sys, &si, w, 4), 2);
    all_parked = w[0].parks > 0 && w[1].parks > 0;
    if (!all_parked)
      test_sleep(0.001);
  }
  ck_assert(all_parked);
  ck_assert_uint_eq(si.workers, 2);
  ck_assert(!si.host_driven);
  ck_assert(si.running);
  ck_assert_uint_eq(w[0].turns + w[1].turns, si.stats.delivered);
  ck_assert_uint_ge(si.stats.delivered, 2 * ROUNDS);
  for (int i = 0; i < 2; i++) {
    ck_assert_uint_le(w[i].busy_ns + w[i].idle_ns, si.uptime_ns);
    ck_assert_uint_ge(w[i].busy_ns + w[i].idle_ns + 50000000, si.uptime_ns);
    ck_assert_uint_le(w[i].steals, w[i].turns);
  }
  /* A parked worker's sleep counts while it lasts. */
  uint64_t idle_before = w[0].idle_ns;
  test_sleep(0.02);
  ck_assert_int_eq(vat_system_inspect(sys, &si, w, 1), 2);
  ck_assert_uint_ge(w[0].idle_ns, idle_before + 10000000);

  test_quiesce(sys);
}
END_TEST

START_TEST(inspect_host_driven_system) {
  vat_system *sys = test_host_system(true, 1);
  vat_ref *a = test_spawn(sys, 8, NULL);
  for (int i = 0; i < 5; i++)
    ck_assert_vat_ok(vat_host_send(a, nothing, NULL));
  ck_assert_vat_ok(vat_system_run_until_quiescent(sys, 0, NULL));
  vat_sys_info si;
  vat_worker_info w;
  ck_assert_int_eq(vat_system_inspect(sys, &si, &w, 1), 1);
  ck_assert(si.host_driven);
  ck_assert_uint_eq(w.turns, 5);
  ck_assert_uint_eq(w.parks, 0);
  ck_assert_uint_eq(w.busy_ns + w.idle_ns, 0);
  ck_assert_uint_eq(inspect(a).turns, 5);
  test_quiesce(sys);
  ck_assert_int_eq(vat_system_inspect(sys, &si, NULL, 0), 1);
  ck_assert(!si.running);
}
END_TEST

/* --- Host monitors -----------------------------------------------------------
 */

START_TEST(host_monitor_learns_the_reason) {
  vat_system *sys = system_with_hook(2, keep_report, NULL);
  vat_ref *a = test_spawn(sys, 8, NULL);
  vat_promise *down;
  ck_assert_vat_ok(vat_host_monitor(a, NULL, &down));
  ck_assert_vat_ok(vat_host_send(a, observe_fail_fn, NULL));
  vat_value reason;
  ck_assert_vat_ok(vat_promise_wait(down, 30, &reason));
  ck_assert(vat_equal(reason, boom()));
  test_quiesce(sys);
  ck_assert_uint_eq(atomic_load(&nreports), 1);
  ck_assert(reports[0].watched); /* the host watched it */
}
END_TEST

START_TEST(host_monitor_normal_and_noproc) {
  vat_system *sys = test_system(2);
  vat_ref *a = test_spawn(sys, 8, NULL);
  vat_promise *down;
  normal_reason = vat_atom_value(vat_atom_normal());
  ck_assert_vat_ok(vat_host_monitor(a, NULL, &down));
  ck_assert_vat_ok(vat_host_send(a, stop_with_fn, &normal_reason));
  vat_value reason;
  ck_assert_vat_ok(vat_promise_wait(down, 30, &reason));
  ck_assert(vat_is_atom(reason, vat_atom_normal()));
  /* Already dead: noproc, at once. */
  vat_promise *again;
  ck_assert_vat_ok(vat_host_monitor(a, NULL, &again));
  ck_assert_int_eq(vat_promise_peek(again, &reason), VAT_PROMISE_RESOLVED);
  ck_assert(vat_is_atom(reason, vat_atom_noproc()));
  ck_assert_vat_err(vat_host_monitor(NULL, NULL, &again), VAT_EINVAL);
  ck_assert_vat_err(vat_host_monitor(a, NULL, NULL), VAT_EINVAL);
  test_quiesce(sys);
}
END_TEST

START_TEST(host_demonitor) {
  vat_system *sys = test_system(2);
  vat_ref *a = test_spawn(sys, 8, NULL);
  vat_host_mon *mon;
  vat_promise *down;
  ck_assert_vat_ok(vat_host_monitor(a, &mon, &down));
  ck_assert_vat_ok(vat_host_demonitor(mon));
  vat_value reason;
  ck_assert_vat_err(vat_promise_wait(down, 0, &reason), VAT_EBROKEN);
  ck_assert(vat_is_atom(reason, vat_atom_demonitored()));
  ck_assert_vat_err(vat_host_demonitor(mon), VAT_ENOTFOUND);
  ck_assert_vat_err(vat_host_demonitor(NULL), VAT_EINVAL);
  /* The vat forgets the monitor: MONITOR then DEMONITOR, in order. */
  for (int i = 0; i < 30000 && inspect(a).turns < 2; i++)
    test_sleep(0.001);
  ck_assert_uint_eq(inspect(a).monitored_by, 0);
  ck_assert_vat_ok(vat_host_send(a, observe_fail_fn, NULL));
  test_quiesce(sys);
  ck_assert_int_eq(vat_promise_peek(down, &reason), VAT_PROMISE_BROKEN);
  ck_assert(vat_is_atom(reason, vat_atom_demonitored()));

  /* After it fired, demonitor finds nothing. */
  sys = test_system(2);
  a = test_spawn(sys, 8, NULL);
  ck_assert_vat_ok(vat_host_monitor(a, &mon, &down));
  ck_assert_vat_ok(vat_host_exit(a, vat_atom_value(vat_atom_killed())));
  ck_assert_vat_ok(vat_promise_wait(down, 30, &reason));
  ck_assert_vat_err(vat_host_demonitor(mon), VAT_ENOTFOUND);
  test_quiesce(sys);
}
END_TEST

START_TEST(host_monitor_settles_at_shutdown) {
  vat_system *sys = test_system(2);
  vat_ref *a = test_spawn(sys, 8, NULL);
  vat_promise *down;
  ck_assert_vat_ok(vat_host_monitor(a, NULL, &down));
  /* Wait until the vat recorded it: then shutdown must settle it. */
  for (int i = 0; i < 30000 && inspect(a).monitored_by < 1; i++)
    test_sleep(0.001);
  test_quiesce(sys);
  vat_value reason;
  ck_assert_vat_ok(vat_promise_wait(down, 0, &reason));
  ck_assert(vat_is_atom(reason, vat_atom_shutdown()));
  vat_info info = inspect(a);
  ck_assert(!info.alive);
  ck_assert(vat_is_atom(info.exit_reason, vat_atom_shutdown()));
}
END_TEST

static _Atomic uint64_t in_turn_rc;

static void host_monitor_in_turn(vat_turn *turn, void *state, void *arg) {
  (void)turn;
  (void)state;
  vat_promise *down;
  atomic_store(&in_turn_rc, (uint64_t)-vat_host_monitor(arg, NULL, &down));
}

START_TEST(host_monitor_not_from_a_turn) {
  vat_system *sys = test_system(2);
  atomic_store(&in_turn_rc, 0);
  vat_ref *a = test_spawn(sys, 8, NULL);
  ck_assert_vat_ok(vat_host_send(a, host_monitor_in_turn, a));
  ck_assert(test_wait_u64(&in_turn_rc, (uint64_t)-VAT_EINTURN, 30));
  test_quiesce(sys);
}
END_TEST

/* --- A supervisor's children as a promise ------------------------------------
 */

static int start_plain(vat_turn *turn, void *arg, vat_ref **out) {
  (void)arg;
  return vat_spawn_link(turn, &plain_def, out, NULL);
}

START_TEST(supervisor_children_promise) {
  vat_system *sys = test_system(2);
  vat_child_spec kids[2] = {
      {.id = "first", .start = start_plain, .restart = VAT_PERMANENT},
      {.id = NULL, .start = start_plain, .restart = VAT_PERMANENT},
  };
  vat_sup_spec spec = {.strategy = VAT_ONE_FOR_ONE,
                       .max_restarts = 3,
                       .max_seconds = 5,
                       .children = kids,
                       .nchildren = 2};
  vat_ref *sup;
  ck_assert_vat_ok(vat_host_supervisor_start(sys, &spec, &sup));
  vat_promise *p;
  ck_assert_vat_ok(vat_host_supervisor_children(sup, &p));
  vat_value list;
  ck_assert_vat_ok(vat_promise_wait(p, 30, &list));
  ck_assert_uint_eq(vat_len(list), 2);
  vat_value c0 = vat_at(list, 0), c1 = vat_at(list, 1);
  ck_assert_ptr_eq(vat_record_label(c0), vat_atom_intern("child"));
  ck_assert_str_eq(vat_string_data(vat_at(c0, 0)), "first");
  ck_assert(vat_is_null(vat_at(c1, 0)));
  vat_ref *r0 = vat_value_ref(vat_at(c0, 1)),
          *r1 = vat_value_ref(vat_at(c1, 1));
  ck_assert_ptr_nonnull(r0);
  ck_assert_ptr_nonnull(r1);
  ck_assert(!vat_ref_is_dead(r0));
  /* Each child is linked to its supervisor, which traps exits. */
  ck_assert_uint_eq(inspect(r0).links, 1);
  ck_assert(inspect(sup).traps_exits);
  ck_assert_uint_eq(inspect(sup).links, 2);

  ck_assert_vat_ok(vat_host_supervisor_stop(sup));
  vat_promise *down;
  ck_assert_vat_ok(vat_host_monitor(sup, NULL, &down));
  ck_assert_vat_ok(vat_promise_wait(down, 30, NULL));
  ck_assert_vat_ok(vat_host_supervisor_children(sup, &p));
  ck_assert_vat_err(vat_promise_wait(p, 30, NULL), VAT_EBROKEN);
  test_quiesce(sys);
}
END_TEST

/* --- Every message counted once ------------------------------------------ */

static void answer_one(vat_turn *turn, void *state, void *arg,
                       vat_resolver *r) {
  (void)state;
  (void)arg;
  expect_vat_ok(vat_resolve(turn, r, vat_int(1)));
}

enum { COUNTED = 10 };

typedef struct calls {
  vat_ref *to;
  vat_promise *p[COUNTED];
} calls;

/* COUNTED requests from a turn, to a vat that has ended. */
static void call_the_dead(vat_turn *turn, void *state, void *arg) {
  (void)state;
  calls *c = arg;
  for (int i = 0; i < COUNTED; i++)
    expect_vat_ok(vat_call(turn, c->to, answer_one, NULL, 0, &c->p[i]));
}

static void expect_broken(vat_promise *p, const char *reason) {
  vat_value why;
  ck_assert_int_eq(vat_promise_peek(p, &why), VAT_PROMISE_BROKEN);
  ck_assert_msg(vat_is_atom(why, vat_atom_intern(reason)), "not broken with %s",
                reason);
}

/* vat/core.h: delivered + dead_letters + dropped_at_shutdown +
 * overload_dropped counts every message accepted, a request as any other.
 * Sends and requests a kill overtakes, requests from a host thread and
 * from a turn to the vat once dead, and requests still queued at
 * shutdown: each counted once, the promises broken. Before: the requests
 * were counted nowhere (dead_letters 10 where 20 were skipped, and the
 * later requests added nothing). */
START_TEST(requests_that_die_are_counted) {
  vat_system *sys = test_host_system(false, 0);
  test_counter *c;
  vat_ref *t = test_spawn_counter(sys, &c);
  vat_promise *first[COUNTED], *later[COUNTED];
  calls from_turn = {.to = t};
  for (int i = 0; i < COUNTED; i++) {
    ck_assert_vat_ok(vat_host_send(t, test_hit, NULL));
    ck_assert_vat_ok(vat_host_call(t, answer_one, NULL, 0, &first[i]));
  }
  ck_assert_vat_ok(vat_host_exit(t, vat_atom_value(vat_atom_intern("killed"))));
  ck_assert_vat_ok(vat_system_run_until_quiescent(sys, 0, NULL));
  vat_stats st = test_stats(sys);
  ck_assert_uint_eq(atomic_load(&c->hits), 0);
  ck_assert_uint_eq(st.delivered, 1); /* the exit */
  ck_assert_uint_eq(st.dead_letters, 2 * COUNTED);
  for (int i = 0; i < COUNTED; i++) {
    expect_broken(first[i], "killed");
    ck_assert_vat_ok(vat_host_call(t, answer_one, NULL, 0, &later[i]));
    expect_broken(later[i], "killed");
  }
  ck_assert_uint_eq(test_stats(sys).dead_letters, 3 * COUNTED);
  vat_ref *caller = test_spawn(sys, 8, NULL);
  ck_assert_vat_ok(vat_host_send(caller, call_the_dead, &from_turn));
  ck_assert_vat_ok(vat_system_run_until_quiescent(sys, 0, NULL));
  for (int i = 0; i < COUNTED; i++)
    expect_broken(from_turn.p[i], "killed");
  st = test_stats(sys);
  ck_assert_uint_eq(st.delivered, 2);
  ck_assert_uint_eq(st.dead_letters, 4 * COUNTED);
  /* Queued at shutdown, in a vat that is never run again. */
  vat_ref *idle = test_spawn(sys, 8, NULL);
  vat_promise *queued[COUNTED];
  for (int i = 0; i < COUNTED; i++) {
    ck_assert_vat_ok(vat_host_send(idle, test_hit, NULL));
    ck_assert_vat_ok(vat_host_call(idle, answer_one, NULL, 0, &queued[i]));
  }
  ck_assert_vat_err(vat_system_shutdown(sys, 0), VAT_ETIMEDOUT);
  st = test_stats(sys);
  for (int i = 0; i < COUNTED; i++)
    expect_broken(queued[i], "shutdown");
  ck_assert_uint_eq(st.delivered + st.dead_letters + st.dropped_at_shutdown +
                        st.overload_dropped,
                    (2 * COUNTED + 1) + COUNTED + (1 + COUNTED) +
                        2 * COUNTED);
  ck_assert_uint_eq(st.dropped_at_shutdown, 2 * COUNTED);
  ck_assert_vat_ok(vat_system_destroy(sys));
}
END_TEST

Suite *test_observe_suite(void) {
  Suite *s = suite_create("observe");
  TCase *tc = test_case("labels", 0);
  tcase_add_test(tc, label_from_spawn_is_a_bounded_copy);
  tcase_add_test(tc, set_label_inside_a_turn);
  suite_add_tcase(s, tc);

  tc = test_case("crash", 0);
  tcase_add_test(tc, unwatched_crash_reported_once_with_handler_name);
  tcase_add_test(tc, crash_names_the_selector);
  tcase_add_test(tc, crash_names_a_requests_handler);
  tcase_add_test(tc, orderly_ends_are_not_reported);
  tcase_add_test(tc, killed_vat_reports_killed);
  tcase_add_test(tc, killed_with_a_backlog_reports_once);
  tcase_add_test(tc, vats_of_a_failed_turn_are_not_reported);
  tcase_add_test(tc, watched_crash_is_flagged_and_not_printed);
  tcase_add_test(tc, default_writer_prints_one_line);
  tcase_add_test(tc, default_writer_goes_to_stderr);
  tcase_add_test(tc, null_hook_reports_nothing);
  suite_add_tcase(s, tc);

  tc = test_case("inspect", 0);
  tcase_add_test(tc, inspect_vat_with_links_monitors_trap_and_backlog);
  tcase_add_test(tc, inspect_bad_arguments);
  tcase_add_test(tc, inspect_system_workers);
  tcase_add_test(tc, inspect_host_driven_system);
  suite_add_tcase(s, tc);

  tc = test_case("host_monitor", 0);
  tcase_add_test(tc, host_monitor_learns_the_reason);
  tcase_add_test(tc, host_monitor_normal_and_noproc);
  tcase_add_test(tc, host_demonitor);
  tcase_add_test(tc, host_monitor_settles_at_shutdown);
  tcase_add_test(tc, host_monitor_not_from_a_turn);
  tcase_add_test(tc, requests_that_die_are_counted);
  suite_add_tcase(s, tc);

  tc = test_case("supervisor", 0);
  tcase_add_test(tc, supervisor_children_promise);
  suite_add_tcase(s, tc);
  return s;
}
