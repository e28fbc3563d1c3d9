/* Exits: links, monitors, trap_exit and exit signals, checked against what
 * Erlang/OTP does in the same scenario; stop callbacks; concurrent stress.
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#define GC_THREADS 1
#include <gc/gc.h>

#include "support.h"

static vat_value boom(void) {
  return vat_reason_error(vat_atom_intern("boom"), vat_int(42));
}

static vat_value atom_v(const vat_atom *a) {
  return vat_atom_value(a);
}

/* Waits (host side) until the ref's vat has ended. */
static void wait_dead(vat_ref *ref) {
  for (int i = 0; i < 30000 && !vat_ref_is_dead(ref); i++) {
    test_sleep(0.001);
  }
  ck_assert(vat_ref_is_dead(ref));
}

/* --- The matrix: how S ends x whether V traps x how V relates to S -------- */

enum kind { K_NORMAL, K_ERROR, K_KILL_SIGNAL, K_KILL_SELF, K_COUNT };
enum rel {
  R_LINKED,       /* V links S, then S ends */
  R_UNLINKED,     /* V links then unlinks S, then S ends */
  R_STALE,        /* S ends with the link, but V unlinked meanwhile */
  R_NONE,         /* no relation */
  R_MONITORED,    /* V monitors S, then S ends */
  R_DEAD_LINK,    /* S has ended; V links it */
  R_DEAD_MONITOR, /* S has ended; V monitors it */
  R_COUNT
};
static const char *kind_names[] = {"normal", "error", "kill-by-signal",
                                   "kill-by-self-exit"};
static const char *rel_names[] = {"linked",      "unlinked",  "stale",
                                  "none",        "monitored", "dead-link",
                                  "dead-monitor"};

typedef struct victim {
  vat_ref *s, *killer;
  int kind, rel;
  bool trap;
  int exits;
  vat_ref *exit_from;
  vat_value exit_reason;
  int downs;
  uint64_t mon, down_id;
  vat_ref *down_who;
  vat_value down_reason;
} victim;

static void s_die(vat_turn *turn, void *state, void *arg) {
  (void)state;
  switch ((int)(intptr_t)arg) {
  case K_NORMAL:
    expect_vat_ok(vat_stop(turn));
    break;
  case K_ERROR:
    expect_vat_ok(vat_fail(turn, boom()));
    break;
  case K_KILL_SELF:
    expect_vat_ok(vat_kill(turn, vat_self(turn)));
    break;
  }
}

static void k_kill(vat_turn *turn, void *state, void *arg) {
  (void)state;
  expect_vat_ok(vat_kill(turn, arg));
}

static void v_exit(vat_turn *turn, void *state, vat_ref *from,
                   vat_value reason) {
  (void)turn;
  victim *v = state;
  v->exits++;
  v->exit_from = from;
  v->exit_reason = reason;
}

static void v_down(vat_turn *turn, void *state, uint64_t id, vat_ref *who,
                   vat_value reason) {
  (void)turn;
  victim *v = state;
  v->downs++;
  v->down_id = id;
  v->down_who = who;
  v->down_reason = reason;
}

static void trigger(vat_turn *turn, victim *v) {
  if (v->kind == K_KILL_SIGNAL)
    expect_vat_ok(vat_send(turn, v->killer, k_kill, v->s));
  else
    expect_vat_ok(vat_send(turn, v->s, s_die, (void *)(intptr_t)v->kind));
}

static void v_stale2(vat_turn *turn, void *state, void *arg) {
  (void)arg;
  victim *v = state;
  /* S's death is queued at S before the UNLINK: S sends EXIT along a link
   * V no longer has. */
  trigger(turn, v);
  expect_vat_ok(vat_unlink(turn, v->s));
}

static void v_setup(vat_turn *turn, void *state, void *arg) {
  (void)arg;
  victim *v = state;
  if (v->trap)
    expect_vat_ok(vat_trap_exit(turn, vat_self(turn), v_exit));
  switch (v->rel) {
  case R_LINKED:
    expect_vat_ok(vat_link(turn, v->s));
    trigger(turn, v);
    break;
  case R_UNLINKED:
    expect_vat_ok(vat_link(turn, v->s));
    expect_vat_ok(vat_unlink(turn, v->s));
    trigger(turn, v);
    break;
  case R_STALE:
    expect_vat_ok(vat_link(turn, v->s));
    expect_vat_ok(vat_send(turn, vat_self(turn), v_stale2, NULL));
    break;
  case R_NONE:
    trigger(turn, v);
    break;
  case R_MONITORED:
    expect_vat_ok(vat_monitor(turn, v->s, v_down, &v->mon));
    trigger(turn, v);
    break;
  case R_DEAD_LINK:
    expect_vat_ok(vat_link(turn, v->s));
    break;
  case R_DEAD_MONITOR:
    expect_vat_ok(vat_monitor(turn, v->s, v_down, &v->mon));
    break;
  }
}

typedef struct outcome {
  bool v_dead;
  vat_value v_reason; /* when dead */
  int exits;
  vat_value exit_reason;
  int downs;
  vat_value down_reason;
} outcome;

/* What Erlang/OTP does in the same scenario. */
static outcome expected(int kind, int rel, bool trap) {
  vat_value s_reason = kind == K_NORMAL  ? atom_v(vat_atom_normal())
                       : kind == K_ERROR ? boom()
                                         : atom_v(vat_atom_killed());
  outcome o = {0};
  switch (rel) {
  case R_LINKED:
    if (trap) {
      o.exits = 1;
      o.exit_reason = s_reason;
    } else if (kind != K_NORMAL) {
      o.v_dead = true; /* `killed` from a link is an ordinary reason */
      o.v_reason = s_reason;
    }
    break;
  case R_MONITORED:
    o.downs = 1;
    o.down_reason = s_reason;
    break;
  case R_DEAD_LINK:
    if (trap) {
      o.exits = 1;
      o.exit_reason = atom_v(vat_atom_noproc());
    } else {
      o.v_dead = true;
      o.v_reason = atom_v(vat_atom_noproc());
    }
    break;
  case R_DEAD_MONITOR:
    o.downs = 1;
    o.down_reason = atom_v(vat_atom_noproc());
    break;
  default:
    break;
  }
  return o;
}

START_TEST(matrix) {
  int kind = _i % K_COUNT;
  int rel = (_i / K_COUNT) % R_COUNT;
  bool trap = _i / (K_COUNT * R_COUNT);
  char label[96];
  snprintf(label, sizeof label, "%s / %s / %s", kind_names[kind],
           rel_names[rel], trap ? "trapping" : "not trapping");

  vat_system *sys = test_system(2);
  vat_ref *s, *k, *vref;
  victim *v;
  ck_assert_vat_ok(
      vat_host_spawn(sys, &(vat_entity_def){.state_size = 8}, &s, NULL));
  ck_assert_vat_ok(
      vat_host_spawn(sys, &(vat_entity_def){.state_size = 8}, &k, NULL));
  ck_assert_vat_ok(
      vat_host_spawn(sys, &(vat_entity_def){.state_size = sizeof(victim)},
                     &vref, (void **)&v));
  v->s = s;
  v->killer = k;
  v->kind = kind;
  v->rel = rel;
  v->trap = trap;
  if (rel == R_DEAD_LINK || rel == R_DEAD_MONITOR) {
    if (kind == K_KILL_SIGNAL)
      ck_assert_vat_ok(vat_host_exit(s, atom_v(vat_atom_killed())));
    else
      ck_assert_vat_ok(vat_host_send(s, s_die, (void *)(intptr_t)kind));
    wait_dead(s);
  }
  ck_assert_vat_ok(vat_host_send(vref, v_setup, NULL));
  test_quiesce(sys);

  outcome o = expected(kind, rel, trap);
  /* S ended as asked, whatever V did. */
  vat_value s_reason = vat_ref_exit_reason(s);
  ck_assert_msg(vat_ref_is_dead(s), "%s: S alive", label);
  ck_assert_msg(kind == K_NORMAL  ? vat_reason_is_normal(s_reason)
                : kind == K_ERROR ? vat_equal(s_reason, boom())
                                  : vat_is_atom(s_reason, vat_atom_killed()),
                "%s: S's reason", label);
  ck_assert_msg(vat_ref_is_dead(vref) == o.v_dead, "%s: V %s", label,
                o.v_dead ? "should have died" : "should be alive");
  if (o.v_dead)
    ck_assert_msg(vat_equal(vat_ref_exit_reason(vref), o.v_reason),
                  "%s: V's reason", label);
  else
    ck_assert_msg(vat_is_atom(vat_ref_exit_reason(vref), vat_atom_shutdown()),
                  "%s: a vat alive at shutdown reports shutdown", label);
  ck_assert_msg(v->exits == o.exits, "%s: %d trapped exits, expected %d", label,
                v->exits, o.exits);
  if (o.exits) {
    ck_assert_msg(v->exit_from == s, "%s: exit from", label);
    ck_assert_msg(vat_equal(v->exit_reason, o.exit_reason), "%s: exit reason",
                  label);
  }
  ck_assert_msg(v->downs == o.downs, "%s: %d downs, expected %d", label,
                v->downs, o.downs);
  if (o.downs) {
    ck_assert_msg(v->down_id == v->mon && v->mon != 0, "%s: id", label);
    ck_assert_msg(v->down_who == s, "%s: who", label);
    ck_assert_msg(vat_equal(v->down_reason, o.down_reason), "%s: down reason",
                  label);
  }
}
END_TEST

/* --- exit/2: reason x sender x trapping, and what V's links then see ------ */

enum sender { FROM_OTHER, FROM_SELF, FROM_HOST, FROM_COUNT };
enum reason2 { E_NORMAL, E_ERROR, E_KILLED, E_COUNT };

typedef struct target {
  victim v; /* first: the trapped-exit record */
  vat_ref *x;
  int sender, reason;
  _Atomic uint64_t went;
} target;

static vat_value reason2(int r) {
  return r == E_NORMAL  ? atom_v(vat_atom_normal())
         : r == E_ERROR ? boom()
                        : atom_v(vat_atom_killed());
}

static void x_exit(vat_turn *turn, void *state, void *arg) {
  intptr_t r = *(intptr_t *)state;
  expect_vat_ok(vat_exit(turn, arg, reason2((int)r)));
}

static void t_go(vat_turn *turn, void *state, void *arg) {
  (void)arg;
  target *t = state;
  if (t->v.trap)
    expect_vat_ok(vat_trap_exit(turn, vat_self(turn), v_exit));
  if (t->sender == FROM_SELF)
    expect_vat_ok(vat_exit(turn, vat_self(turn), reason2(t->reason)));
  else if (t->sender == FROM_OTHER)
    expect_vat_ok(vat_send(turn, t->x, x_exit, vat_self(turn)));
  atomic_store_explicit(&t->went, 1, memory_order_release);
}

/* The watcher traps, links to the target, then starts it. */
static void l_setup(vat_turn *turn, void *state, void *arg) {
  expect_vat_ok(vat_trap_exit(turn, vat_self(turn), v_exit));
  expect_vat_ok(vat_link(turn, arg));
  expect_vat_ok(vat_send(turn, arg, t_go, NULL));
  (void)state;
}

START_TEST(exit_signal) {
  int r = _i % E_COUNT;
  int sender = (_i / E_COUNT) % FROM_COUNT;
  bool trap = _i / (E_COUNT * FROM_COUNT);
  static const char *rn[] = {"normal", "error", "killed"};
  static const char *sn[] = {"other", "self", "host"};
  char label[96];
  snprintf(label, sizeof label, "exit(%s) from %s, %s", rn[r], sn[sender],
           trap ? "trapping" : "not trapping");

  vat_system *sys = test_system(2);
  vat_ref *xref, *tref, *lref;
  intptr_t *xr;
  target *t;
  victim *l;
  ck_assert_vat_ok(
      vat_host_spawn(sys, &(vat_entity_def){.state_size = sizeof(intptr_t)},
                     &xref, (void **)&xr));
  *xr = r;
  ck_assert_vat_ok(
      vat_host_spawn(sys, &(vat_entity_def){.state_size = sizeof(target)},
                     &tref, (void **)&t));
  t->x = xref;
  t->sender = sender;
  t->reason = r;
  t->v.trap = trap;
  ck_assert_vat_ok(
      vat_host_spawn(sys, &(vat_entity_def){.state_size = sizeof(victim)},
                     &lref, (void **)&l));
  ck_assert_vat_ok(vat_host_send(lref, l_setup, tref));
  if (sender == FROM_HOST) {
    /* Once t_go ran, the trap is set and the watcher's link recorded. */
    ck_assert(test_wait_u64(&t->went, 1, 30));
    ck_assert_vat_ok(vat_host_exit(tref, reason2(r)));
  }
  test_quiesce(sys);

  vat_ref *from = sender == FROM_OTHER  ? xref
                  : sender == FROM_SELF ? tref
                                        : NULL;
  bool dies, trapped;
  if (r == E_KILLED) {
    dies = true, trapped = false;
  } else if (trap) {
    dies = false, trapped = true;
  } else {
    trapped = false;
    dies = r != E_NORMAL || sender == FROM_SELF;
  }
  ck_assert_msg(vat_ref_is_dead(tref) == dies, "%s: target %s", label,
                dies ? "should die" : "should live");
  ck_assert_msg(t->v.exits == (trapped ? 1 : 0), "%s: %d trapped", label,
                t->v.exits);
  if (trapped) {
    ck_assert_msg(t->v.exit_from == from, "%s: from", label);
    ck_assert_msg(vat_equal(t->v.exit_reason, reason2(r)), "%s: reason", label);
  }
  if (dies) {
    /* A deliberate kill ends it with `killed`, and its links see that. */
    vat_value why = reason2(r);
    ck_assert_msg(vat_equal(vat_ref_exit_reason(tref), why),
                  "%s: target's reason", label);
    ck_assert_msg(l->exits == 1 && l->exit_from == tref &&
                      vat_equal(l->exit_reason, why),
                  "%s: the link saw %d exits", label, l->exits);
  } else {
    ck_assert_msg(l->exits == 0, "%s: link fired", label);
  }
}
END_TEST

/* --- Monitors ------------------------------------------------------------- */

typedef struct watcher {
  vat_ref *s;
  uint64_t ids[4];
  int demon_rc[4];
  int downs;
  uint64_t seen[8];
  _Atomic uint64_t downs_seen; /* downs, for the host to wait on */
} watcher;

static void w_down(vat_turn *turn, void *state, uint64_t id, vat_ref *who,
                   vat_value reason) {
  (void)turn;
  (void)who;
  (void)reason;
  watcher *w = state;
  if (w->downs < 8)
    w->seen[w->downs] = id;
  w->downs++;
  atomic_fetch_add_explicit(&w->downs_seen, 1, memory_order_release);
}

static void w_later(vat_turn *turn, void *state, void *arg) {
  (void)arg;
  watcher *w = state;
  /* Monitor 2 is removed in a later turn, before S dies. */
  w->demon_rc[2] = vat_demonitor(turn, w->ids[2]);
  expect_vat_ok(vat_send(turn, w->s, s_die, (void *)(intptr_t)K_ERROR));
}

static void w_setup(vat_turn *turn, void *state, void *arg) {
  (void)arg;
  watcher *w = state;
  for (int i = 0; i < 4; i++)
    expect_vat_ok(vat_monitor(turn, w->s, w_down, &w->ids[i]));
  /* Monitor 1 is removed in the turn that made it. */
  w->demon_rc[1] = vat_demonitor(turn, w->ids[1]);
  w->demon_rc[3] = vat_demonitor(turn, 12345678901ull);
  expect_vat_ok(vat_send(turn, vat_self(turn), w_later, NULL));
}

static void w_after(vat_turn *turn, void *state, void *arg) {
  (void)arg;
  watcher *w = state;
  /* Fired already: nothing to remove. */
  w->demon_rc[0] = vat_demonitor(turn, w->ids[0]);
}

START_TEST(monitor_ids_and_demonitor) {
  vat_system *sys = test_system(2);
  vat_ref *s, *wref;
  watcher *w;
  ck_assert_vat_ok(
      vat_host_spawn(sys, &(vat_entity_def){.state_size = 8}, &s, NULL));
  ck_assert_vat_ok(
      vat_host_spawn(sys, &(vat_entity_def){.state_size = sizeof(watcher)},
                     &wref, (void **)&w));
  w->s = s;
  ck_assert_vat_ok(vat_host_send(wref, w_setup, NULL));
  wait_dead(s);
  /* Monitor 0 must have fired before w_after tries to remove it. */
  ck_assert(test_wait_u64(&w->downs_seen, 2, 30));
  ck_assert_vat_ok(vat_host_send(wref, w_after, NULL));
  test_quiesce(sys);
  for (int i = 0; i < 4; i++)
    for (int j = 0; j < i; j++)
      ck_assert(w->ids[i] != w->ids[j] && w->ids[i] != 0);
  ck_assert_int_eq(w->demon_rc[1], VAT_OK);
  ck_assert_int_eq(w->demon_rc[2], VAT_OK);
  ck_assert_int_eq(w->demon_rc[3], VAT_ENOTFOUND);
  ck_assert_int_eq(w->demon_rc[0], VAT_ENOTFOUND);
  /* Monitors 0 and 3 fire, once each. */
  ck_assert_int_eq(w->downs, 2);
  ck_assert(w->seen[0] != w->seen[1]);
  for (int i = 0; i < 2; i++)
    ck_assert(w->seen[i] == w->ids[0] || w->seen[i] == w->ids[3]);
}
END_TEST

/* --- Links: at most one per pair; spawn_link; self links ------------------ */

static void twice_setup(vat_turn *turn, void *state, void *arg) {
  (void)arg;
  victim *v = state;
  expect_vat_ok(vat_trap_exit(turn, vat_self(turn), v_exit));
  expect_vat_ok(vat_link(turn, v->s));
  expect_vat_ok(vat_link(turn, v->s));
  expect_vat_ok(vat_link(turn, vat_self(turn))); /* does nothing */
  expect_vat_ok(vat_send(turn, v->s, s_die, (void *)(intptr_t)K_ERROR));
}

START_TEST(one_link_per_pair) {
  vat_system *sys = test_system(2);
  vat_ref *s, *vref;
  victim *v;
  ck_assert_vat_ok(
      vat_host_spawn(sys, &(vat_entity_def){.state_size = 8}, &s, NULL));
  ck_assert_vat_ok(
      vat_host_spawn(sys, &(vat_entity_def){.state_size = sizeof(victim)},
                     &vref, (void **)&v));
  v->s = s;
  ck_assert_vat_ok(vat_host_send(vref, twice_setup, NULL));
  test_quiesce(sys);
  ck_assert_int_eq(v->exits, 1);
  ck_assert(vat_equal(v->exit_reason, boom()));
  ck_assert(!vat_ref_is_dead(vref));
}
END_TEST

typedef struct parent {
  victim v;
  vat_ref *child, *doomed_child;
  int fail_turn;
} parent;

static void child_crash(vat_turn *turn, void *state, void *arg) {
  (void)state;
  (void)arg;
  expect_vat_ok(vat_fail(turn, boom()));
}

static void p_spawn(vat_turn *turn, void *state, void *arg) {
  (void)arg;
  parent *p = state;
  expect_vat_ok(vat_trap_exit(turn, vat_self(turn), v_exit));
  expect_vat_ok(vat_spawn_link(turn, &(vat_entity_def){.state_size = 8},
                               &p->child, NULL));
  expect_vat_ok(vat_send(turn, p->child, child_crash, NULL));
}

static void p_spawn_fail(vat_turn *turn, void *state, void *arg) {
  (void)arg;
  parent *p = state;
  expect_vat_ok(vat_spawn_link(turn, &(vat_entity_def){.state_size = 8},
                               &p->doomed_child, NULL));
  expect_vat_ok(vat_fail(turn, atom_v(vat_atom_intern("parent_failed"))));
}

START_TEST(spawn_link_is_atomic) {
  vat_system *sys = test_system(2);
  vat_ref *pref, *p2ref;
  parent *p, *p2;
  ck_assert_vat_ok(
      vat_host_spawn(sys, &(vat_entity_def){.state_size = sizeof(parent)},
                     &pref, (void **)&p));
  ck_assert_vat_ok(
      vat_host_spawn(sys, &(vat_entity_def){.state_size = sizeof(parent)},
                     &p2ref, (void **)&p2));
  ck_assert_vat_ok(vat_host_send(pref, p_spawn, NULL));
  ck_assert_vat_ok(vat_host_send(p2ref, p_spawn_fail, NULL));
  test_quiesce(sys);
  ck_assert_int_eq(p->v.exits, 1);
  ck_assert(p->v.exit_from == p->child);
  ck_assert(vat_equal(p->v.exit_reason, boom()));
  /* A failed turn's child never ran and died with the turn's reason. */
  ck_assert(vat_ref_is_dead(p2->doomed_child));
  ck_assert(vat_is_atom(vat_ref_exit_reason(p2->doomed_child),
                        vat_atom_intern("parent_failed")));
}
END_TEST

/* --- One side unlinks while the other links -------------------------------
 * A links and unlinks B in one turn; B links A either before it sees that
 * (its link is undone by A's UNLINK: nobody stays linked) or after (both
 * end linked). Either way both sides agree, so a death is heard or not on
 * both sides alike. */

typedef struct crosser {
  victim v;
  vat_ref *peer;
  bool b_links_first;
  _Atomic uint64_t settled;
} crosser;

static void x_link_back(vat_turn *turn, void *state, void *arg) {
  (void)state;
  expect_vat_ok(vat_link(turn, arg));
}

static void x_done(vat_turn *turn, void *state, void *arg) {
  (void)turn;
  (void)arg;
  crosser *a = state;
  atomic_store_explicit(&a->settled, 1, memory_order_release);
}

/* At B: everything A sent is handled; what B sends A comes before this. */
static void x_sync(vat_turn *turn, void *state, void *arg) {
  (void)state;
  expect_vat_ok(vat_trap_exit(turn, vat_self(turn), v_exit));
  expect_vat_ok(vat_send(turn, arg, x_done, NULL));
}

/* Links again: A's own view decides whether a LINK goes out, so that view
 * must match B's. */
static void x_relink(vat_turn *turn, void *state, void *arg) {
  (void)arg;
  crosser *a = state;
  expect_vat_ok(vat_link(turn, a->peer));
  expect_vat_ok(vat_send(turn, a->peer, x_sync, vat_self(turn)));
}

static void x_setup(vat_turn *turn, void *state, void *arg) {
  (void)arg;
  crosser *a = state;
  vat_ref *self = vat_self(turn);
  expect_vat_ok(vat_trap_exit(turn, self, v_exit));
  if (a->b_links_first)
    expect_vat_ok(vat_send(turn, a->peer, x_link_back, self));
  expect_vat_ok(vat_link(turn, a->peer));
  expect_vat_ok(vat_unlink(turn, a->peer));
  if (!a->b_links_first)
    expect_vat_ok(vat_send(turn, a->peer, x_link_back, self));
  expect_vat_ok(vat_send(turn, a->peer, x_sync, self));
}

START_TEST(unlink_crossing_link) {
  bool b_first = _i & 1, crash_a = _i & 2, relink = _i & 4;
  vat_system *sys = test_system(2);
  vat_ref *aref, *bref;
  crosser *a;
  victim *b;
  ck_assert_vat_ok(
      vat_host_spawn(sys, &(vat_entity_def){.state_size = sizeof(crosser)},
                     &aref, (void **)&a));
  ck_assert_vat_ok(
      vat_host_spawn(sys, &(vat_entity_def){.state_size = sizeof(victim)},
                     &bref, (void **)&b));
  a->peer = bref;
  a->b_links_first = b_first;
  ck_assert_vat_ok(vat_host_send(aref, x_setup, NULL));
  ck_assert(test_wait_u64(&a->settled, 1, 30));
  if (relink) {
    atomic_store(&a->settled, 0);
    ck_assert_vat_ok(vat_host_send(aref, x_relink, NULL));
    ck_assert(test_wait_u64(&a->settled, 1, 30));
  }
  ck_assert_vat_ok(vat_host_send(crash_a ? aref : bref, child_crash, NULL));
  test_quiesce(sys);
  victim *survivor = crash_a ? b : &a->v;
  vat_ref *dead = crash_a ? aref : bref;
  ck_assert(vat_ref_is_dead(dead));
  int expect = b_first && !relink ? 0 : 1;
  ck_assert_msg(survivor->exits == expect,
                "%s links %s; %s crashed: %d exits heard, expected %d", "B",
                b_first ? "first" : "after", crash_a ? "A" : "B",
                survivor->exits, expect);
  if (expect)
    ck_assert(survivor->exit_from == dead &&
              vat_equal(survivor->exit_reason, boom()));
}
END_TEST

/* --- A chain of links carries one failure to the end ---------------------- */

typedef struct link_node {
  vat_ref *next;
} link_node;

static _Atomic uint64_t links_made;

static void ln_link(vat_turn *turn, void *state, void *arg) {
  (void)arg;
  link_node *n = state;
  expect_vat_ok(vat_link(turn, n->next));
  atomic_fetch_add_explicit(&links_made, 1, memory_order_release);
}

START_TEST(chain_of_links) {
  enum { N = 2000 };
  vat_system *sys = test_system(2);
  vat_ref **refs = GC_MALLOC(N * sizeof *refs);
  link_node *nodes[N];
  for (int i = 0; i < N; i++)
    ck_assert_vat_ok(
        vat_host_spawn(sys, &(vat_entity_def){.state_size = sizeof(link_node)},
                       &refs[i], (void **)&nodes[i]));
  for (int i = 0; i + 1 < N; i++) {
    nodes[i]->next = refs[i + 1];
    ck_assert_vat_ok(vat_host_send(refs[i], ln_link, NULL));
  }
  /* Every vat has sent its LINK before the failure starts; each LINK
   * reaches its target before the EXIT the same vat sends later. */
  ck_assert(test_wait_u64(&links_made, N - 1, 30));
  ck_assert_vat_ok(vat_host_send(refs[0], child_crash, NULL));
  wait_dead(refs[N - 1]);
  test_quiesce(sys);
  for (int i = 0; i < N; i++)
    ck_assert(vat_equal(vat_ref_exit_reason(refs[i]), boom()));
}
END_TEST

/* --- Stop callbacks ------------------------------------------------------- */

typedef struct stopped {
  int calls;
  vat_value reason;
} stopped;

static stopped stop_log[3];

static void on_stop_first(void *state, vat_value reason) {
  (void)state;
  stop_log[0].calls++;
  stop_log[0].reason = reason;
}

static void on_stop_extra(void *state, vat_value reason) {
  stopped *s = state;
  s->calls++;
  s->reason = reason;
  stop_log[1] = *s;
}

static void make_extra(vat_turn *turn, void *state, void *arg) {
  (void)state;
  (void)arg;
  vat_ref *e;
  expect_vat_ok(vat_entity_new(turn,
                               &(vat_entity_def){.state_size = sizeof(stopped),
                                                 .on_stop = on_stop_extra},
                               &e, NULL));
  expect_vat_ok(vat_send(turn, vat_self(turn), child_crash, NULL));
}

START_TEST(stop_callbacks_run_once) {
  vat_system *sys = test_system(2);
  vat_ref *ref;
  ck_assert_vat_ok(vat_host_spawn(
      sys, &(vat_entity_def){.state_size = 8, .on_stop = on_stop_first}, &ref,
      NULL));
  ck_assert_vat_ok(vat_host_send(ref, make_extra, NULL));
  ck_assert_vat_ok(vat_host_send(ref, make_extra, NULL)); /* dead letter */
  test_quiesce(sys);
  ck_assert_int_eq(stop_log[0].calls, 1);
  ck_assert(vat_equal(stop_log[0].reason, boom()));
  ck_assert_int_eq(stop_log[1].calls, 1);
  ck_assert(vat_equal(stop_log[1].reason, boom()));
}
END_TEST

/* --- Argument and context errors ------------------------------------------ */

typedef struct bad {
  int link_null, monitor_null, exit_null, trap_foreign, trap_nofn,
      host_exit_in_turn, monitor_null_target, monitor_null_id;
  vat_ref *foreign;
} bad;

static void try_bad(vat_turn *turn, void *state, void *arg) {
  (void)arg;
  bad *b = state;
  uint64_t id;
  b->link_null = vat_link(turn, NULL);
  b->monitor_null = vat_monitor(turn, b->foreign, NULL, &id);
  b->monitor_null_target = vat_monitor(turn, NULL, v_down, &id);
  b->monitor_null_id = vat_monitor(turn, b->foreign, v_down, NULL);
  b->exit_null = vat_exit(turn, b->foreign, vat_null());
  b->trap_foreign = vat_trap_exit(turn, b->foreign, v_exit);
  b->trap_nofn = vat_trap_exit(turn, vat_self(turn), NULL);
  b->host_exit_in_turn = vat_host_exit(b->foreign, boom());
}

START_TEST(bad_calls) {
  vat_system *sys = test_system(1);
  vat_ref *ref, *other;
  bad *b;
  ck_assert_vat_ok(
      vat_host_spawn(sys, &(vat_entity_def){.state_size = 8}, &other, NULL));
  ck_assert_vat_ok(vat_host_spawn(
      sys, &(vat_entity_def){.state_size = sizeof(bad)}, &ref, (void **)&b));
  b->foreign = other;
  ck_assert_vat_err(vat_link(NULL, other), VAT_ENOTINTURN);
  ck_assert_vat_err(vat_exit(NULL, other, boom()), VAT_ENOTINTURN);
  ck_assert_vat_err(vat_host_exit(other, vat_null()), VAT_EINVAL);
  ck_assert_vat_err(vat_host_exit(NULL, boom()), VAT_EINVAL);
  ck_assert_vat_ok(vat_host_send(ref, try_bad, NULL));
  test_quiesce(sys);
  ck_assert_int_eq(b->link_null, VAT_EINVAL);
  ck_assert_int_eq(b->monitor_null, VAT_EINVAL);
  ck_assert_int_eq(b->monitor_null_target, VAT_EINVAL);
  ck_assert_int_eq(b->monitor_null_id, VAT_EINVAL);
  /* Once the target's system is closing. */
  ck_assert_vat_err(vat_host_exit(other, boom()), VAT_ECLOSED);
  ck_assert_int_eq(b->exit_null, VAT_EINVAL);
  ck_assert_int_eq(b->trap_foreign, VAT_EINVAL);
  ck_assert_int_eq(b->trap_nofn, VAT_EINVAL);
  ck_assert_int_eq(b->host_exit_in_turn, VAT_EINTURN);
  ck_assert(vat_reason_is_orderly(atom_v(vat_atom_shutdown())));
  ck_assert(
      vat_reason_is_orderly(vat_reason_error(vat_atom_shutdown(), vat_int(1))));
  ck_assert(!vat_reason_is_orderly(boom()));
}
END_TEST

/* --- Stress: links, monitors and deaths racing on both workers ------------ */

enum { ST_LINKS = 2, ST_MONS = 3 };

typedef struct st_world {
  vat_ref **refs;
  size_t n;
  _Atomic uint64_t monitors_made, downs, bad_downs;
} st_world;

typedef struct st_vat {
  st_world *world;
  size_t index;
  uint64_t rng;
  size_t links[ST_LINKS];
  size_t nlinks;
  size_t mon_target[ST_MONS + 1];
  uint64_t mon_id[ST_MONS + 1];
  int mon_fired[ST_MONS + 1];
  vat_value mon_reason[ST_MONS + 1];
  size_t nmons;
  bool demonitored; /* the extra monitor was removed before it fired */
  bool trap;
  /* Trapping vats: exits received, by sender index; those with noproc. */
  uint16_t *exits_from, *noproc_from;
  uint64_t bad_exits; /* from a vat that is not a world vat */
} st_vat;

static void st_exit(vat_turn *turn, void *state, vat_ref *from,
                    vat_value reason) {
  (void)turn;
  st_vat *v = state;
  for (size_t i = 0; i < v->world->n; i++) {
    if (v->world->refs[i] == from) {
      v->exits_from[i]++;
      if (vat_is_atom(reason, vat_atom_noproc()))
        v->noproc_from[i]++;
      return;
    }
  }
  v->bad_exits++;
}

static void st_trap(vat_turn *turn, void *state, void *arg) {
  (void)arg;
  (void)state;
  expect_vat_ok(vat_trap_exit(turn, vat_self(turn), st_exit));
}

static void st_down(vat_turn *turn, void *state, uint64_t id, vat_ref *who,
                    vat_value reason) {
  (void)turn;
  (void)who;
  st_vat *v = state;
  atomic_fetch_add_explicit(&v->world->downs, 1, memory_order_relaxed);
  for (size_t i = 0; i < v->nmons; i++) {
    if (v->mon_id[i] != id)
      continue;
    if (i == ST_MONS && v->demonitored)
      atomic_fetch_add(&v->world->bad_downs, 1);
    v->mon_fired[i]++;
    v->mon_reason[i] = reason;
    return;
  }
  atomic_fetch_add(&v->world->bad_downs, 1);
}

static void st_demonitor(vat_turn *turn, void *state, void *arg) {
  (void)arg;
  st_vat *v = state;
  if (vat_demonitor(turn, v->mon_id[ST_MONS]) == VAT_OK)
    v->demonitored = true;
}

static void st_setup(vat_turn *turn, void *state, void *arg) {
  (void)arg;
  st_vat *v = state;
  st_world *w = v->world;
  for (int i = 0; i < ST_LINKS; i++) {
    size_t j = (size_t)test_rand(&v->rng) % w->n;
    v->links[v->nlinks++] = j;
    expect_vat_ok(vat_link(turn, w->refs[j]));
  }
  for (int i = 0; i <= ST_MONS; i++) {
    size_t j = (size_t)test_rand(&v->rng) % w->n;
    v->mon_target[v->nmons] = j;
    expect_vat_ok(vat_monitor(turn, w->refs[j], st_down, &v->mon_id[v->nmons]));
    v->nmons++;
    atomic_fetch_add_explicit(&w->monitors_made, 1, memory_order_relaxed);
  }
  expect_vat_ok(vat_send(turn, vat_self(turn), st_demonitor, NULL));
}

static void st_crash(vat_turn *turn, void *state, void *arg) {
  (void)arg;
  st_vat *v = state;
  expect_vat_ok(vat_fail(turn, vat_reason_error(vat_atom_intern("crash"),
                                                vat_int((int64_t)v->index))));
}

static void st_kill(vat_turn *turn, void *state, void *arg) {
  (void)state;
  expect_vat_ok(vat_kill(turn, arg));
}

/* A trapping vat `t` (index ti) linked with vat `o` (index oi): it hears
 * of o's death at least once; o's own reason at most once (o's links fire
 * once); and one noproc at most for each link t made after o died (as in
 * Erlang, linking again to a dead vat answers again). A vat that died of
 * a noproc itself sends noproc along its links: then only the total is
 * bounded. */
static void check_heard(const st_vat *t, size_t ti, size_t oi, bool odead,
                        vat_value oreason) {
  size_t own_links = 0;
  for (size_t k = 0; k < t->nlinks; k++)
    own_links += t->links[k] == oi;
  int all = t->exits_from[oi], noproc = t->noproc_from[oi];
  if (!odead) {
    ck_assert_msg(all == 0, "%zu heard %d exits from live %zu", ti, all, oi);
    return;
  }
  ck_assert_msg(all >= 1, "%zu never heard of %zu", ti, oi);
  if (vat_is_atom(oreason, vat_atom_noproc())) {
    /* o itself died of a noproc: both kinds look alike. */
    ck_assert_msg((size_t)all <= own_links + 1, "%zu heard %d from %zu", ti,
                  all, oi);
    return;
  }
  ck_assert_msg(all - noproc <= 1, "%zu heard %zu's reason %d times", ti, oi,
                all - noproc);
  ck_assert_msg((size_t)noproc <= own_links, "%zu heard %d noproc from %zu", ti,
                noproc, oi);
}

static void stress_round(uint64_t *rng, size_t n) {
  vat_system *sys = test_system(2);
  st_world *w = GC_MALLOC(sizeof *w);
  w->n = n;
  w->refs = GC_MALLOC(n * sizeof *w->refs);
  st_vat **vs = GC_MALLOC(n * sizeof *vs);
  for (size_t i = 0; i < n; i++) {
    ck_assert_vat_ok(
        vat_host_spawn(sys, &(vat_entity_def){.state_size = sizeof(st_vat)},
                       &w->refs[i], (void **)&vs[i]));
    vs[i]->world = w;
    vs[i]->index = i;
    vs[i]->rng = test_rand(rng) | 1;
    if (test_rand(rng) % 8 == 0) {
      vs[i]->trap = true;
      vs[i]->exits_from = GC_MALLOC_ATOMIC(n * sizeof(uint16_t));
      memset(vs[i]->exits_from, 0, n * sizeof(uint16_t));
      vs[i]->noproc_from = GC_MALLOC_ATOMIC(n * sizeof(uint16_t));
      memset(vs[i]->noproc_from, 0, n * sizeof(uint16_t));
      /* Before any set-up message: no peer's LINK can overtake it. */
      ck_assert_vat_ok(vat_host_send(w->refs[i], st_trap, NULL));
    }
  }
  /* Set-up and deaths interleave: some vats die before, during or after
   * others link to and monitor them. */
  size_t crashes = 1 + (size_t)test_rand(rng) % 8;
  for (size_t i = 0; i < n; i++) {
    ck_assert_vat_ok(vat_host_send(w->refs[i], st_setup, NULL));
    if (i % (n / crashes) == n / crashes / 2) {
      size_t victim = (size_t)test_rand(rng) % n;
      if (test_rand(rng) % 2)
        ck_assert_vat_ok(vat_host_send(w->refs[victim], st_crash, NULL));
      else
        ck_assert_vat_ok(
            vat_host_send(w->refs[(victim + 1) % n], st_kill, w->refs[victim]));
    }
  }
  test_quiesce(sys);

  ck_assert_uint_eq(atomic_load(&w->bad_downs), 0);
  uint64_t expected_downs = 0;
  for (size_t i = 0; i < n; i++) {
    st_vat *v = vs[i];
    bool dead = vat_ref_is_dead(w->refs[i]);
    vat_value why = vat_ref_exit_reason(w->refs[i]);
    /* Nobody ends normally: a vat that does not trap dies with any vat it
     * is linked to; one that traps hears of each linked death once. */
    for (size_t k = 0; k < v->nlinks; k++) {
      size_t j = v->links[k];
      if (j == i)
        continue;
      bool jdead = vat_ref_is_dead(w->refs[j]);
      if (!v->trap)
        ck_assert_msg(!jdead || dead, "link %zu-%zu not honoured", i, j);
      if (!vs[j]->trap)
        ck_assert_msg(!dead || jdead, "link %zu-%zu not honoured", j, i);
      if (v->trap && !dead)
        check_heard(v, i, j, jdead, vat_ref_exit_reason(w->refs[j]));
      if (vs[j]->trap && !jdead)
        check_heard(vs[j], j, i, dead, why);
    }
    ck_assert_uint_eq(v->bad_exits, 0);
    for (size_t k = 0; k < v->nmons; k++) {
      ck_assert_msg(v->mon_fired[k] <= 1, "monitor fired twice");
      bool target_dead = vat_ref_is_dead(w->refs[v->mon_target[k]]);
      bool removed = k == ST_MONS && v->demonitored;
      if (!dead && target_dead && !removed) {
        ck_assert_msg(v->mon_fired[k] == 1, "monitor %zu of %zu lost", k, i);
        vat_value tr = vat_ref_exit_reason(w->refs[v->mon_target[k]]);
        ck_assert(vat_equal(v->mon_reason[k], tr) ||
                  vat_is_atom(v->mon_reason[k], vat_atom_noproc()));
      }
      if (!target_dead)
        ck_assert_int_eq(v->mon_fired[k], 0);
      expected_downs += (uint64_t)v->mon_fired[k];
    }
    if (dead)
      ck_assert(why.type == VAT_T_ERROR ||
                vat_is_atom(why, vat_atom_killed()) ||
                vat_is_atom(why, vat_atom_noproc()));
  }
  ck_assert_uint_eq(atomic_load(&w->downs), expected_downs);
}

#if VAT_HOSTILE
/* A collection after every turn: smaller worlds, same races. */
enum { ST_ROUNDS = 3, ST_MIN = 200, ST_SPREAD = 200 };
#else
enum { ST_ROUNDS = 6, ST_MIN = 3000, ST_SPREAD = 2000 };
#endif

START_TEST(stress_links_and_monitors) {
  uint64_t rng = test_seed("exits stress");
  for (int round = 0; round < ST_ROUNDS; round++)
    stress_round(&rng, ST_MIN + (size_t)test_rand(&rng) % ST_SPREAD);
}
END_TEST

/* Every monitor of a dying vat fires exactly once, whoever is monitoring
 * it from whichever worker while it dies. */
typedef struct mw {
  vat_ref *target;
  uint64_t id;
  _Atomic int fired;
} mw;

static _Atomic uint64_t mw_total;

static void mw_down(vat_turn *turn, void *state, uint64_t id, vat_ref *who,
                    vat_value reason) {
  (void)turn;
  (void)who;
  (void)reason;
  mw *m = state;
  if (id == m->id)
    atomic_fetch_add(&m->fired, 1);
  atomic_fetch_add(&mw_total, 1);
}

static void mw_go(vat_turn *turn, void *state, void *arg) {
  (void)arg;
  mw *m = state;
  expect_vat_ok(vat_monitor(turn, m->target, mw_down, &m->id));
}

START_TEST(every_monitor_fires_once) {
#if VAT_HOSTILE
  enum { TARGETS = 10, WATCHERS = 30 };
#else
  enum { TARGETS = 50, WATCHERS = 100 };
#endif
  uint64_t rng = test_seed("every monitor fires once");
  for (int round = 0; round < 4; round++) {
    atomic_store(&mw_total, 0);
    vat_system *sys = test_system(2);
    vat_ref **targets = GC_MALLOC(TARGETS * sizeof *targets);
    mw **ms = GC_MALLOC(TARGETS * WATCHERS * sizeof *ms);
    vat_ref **wrefs = GC_MALLOC(TARGETS * WATCHERS * sizeof *wrefs);
    for (int t = 0; t < TARGETS; t++)
      ck_assert_vat_ok(vat_host_spawn(sys, &(vat_entity_def){.state_size = 8},
                                      &targets[t], NULL));
    for (int i = 0; i < TARGETS * WATCHERS; i++) {
      ck_assert_vat_ok(
          vat_host_spawn(sys, &(vat_entity_def){.state_size = sizeof(mw)},
                         &wrefs[i], (void **)&ms[i]));
      ms[i]->target = targets[test_rand(&rng) % TARGETS];
    }
    for (int i = 0; i < TARGETS * WATCHERS; i++) {
      ck_assert_vat_ok(vat_host_send(wrefs[i], mw_go, NULL));
      if (i % WATCHERS == 0)
        ck_assert_vat_ok(
            vat_host_send(targets[i / WATCHERS], child_crash, NULL));
    }
    test_quiesce(sys);
    for (int i = 0; i < TARGETS * WATCHERS; i++)
      ck_assert_int_eq(atomic_load(&ms[i]->fired), 1);
    ck_assert_uint_eq(atomic_load(&mw_total), TARGETS * WATCHERS);
  }
}
END_TEST

/* --- Order: monitors and links fire in the order they were made ---------- */

enum { ORD_MAX = 8 };

/* One watcher that monitors one target several times in one turn and, in
 * the same turn, links to several linkers; it records the order in which
 * its down notifications arrive. */
typedef struct ord_watcher {
  vat_ref *target;
  int n;
  uint64_t ids[ORD_MAX];
  uint64_t seen[ORD_MAX];
  int nseen;
} ord_watcher;

static void ord_down(vat_turn *turn, void *state, uint64_t id, vat_ref *who,
                     vat_value reason) {
  (void)turn;
  (void)who;
  (void)reason;
  ord_watcher *w = state;
  if (w->nseen < ORD_MAX)
    w->seen[w->nseen] = id;
  w->nseen++;
}

static void ord_watch(vat_turn *turn, void *state, void *arg) {
  (void)arg;
  ord_watcher *w = state;
  for (int i = 0; i < w->n; i++)
    expect_vat_ok(vat_monitor(turn, w->target, ord_down, &w->ids[i]));
}

/* The target ends; its linkers trap and log who told them, in order. */
typedef struct ord_log {
  int order[ORD_MAX];
  int n;
} ord_log;

typedef struct ord_linker {
  ord_log *log;
  int index;
} ord_linker;

static void ord_exit(vat_turn *turn, void *state, vat_ref *from,
                     vat_value reason) {
  (void)turn;
  (void)from;
  (void)reason;
  ord_linker *l = state;
  if (l->log->n < ORD_MAX)
    l->log->order[l->log->n] = l->index;
  l->log->n++;
}

static void ord_trap(vat_turn *turn, void *state, void *arg) {
  (void)state;
  (void)arg;
  expect_vat_ok(vat_trap_exit(turn, vat_self(turn), ord_exit));
}

/* The target links its linkers one by one, in index order. */
typedef struct ord_target {
  vat_ref *linkers[ORD_MAX];
  int n;
} ord_target;

static void ord_link_all(vat_turn *turn, void *state, void *arg) {
  (void)arg;
  ord_target *t = state;
  for (int i = 0; i < t->n; i++)
    expect_vat_ok(vat_link(turn, t->linkers[i]));
}

/* Several monitors by one vat on one target fire in creation order, and a
 * vat's links fire in the order they were made: every time, not only
 * when the process-wide ids or the vats' addresses happen to hash that
 * way. Many rounds in one process, as a deterministic replay would run. */
START_TEST(monitors_and_links_fire_in_creation_order) {
  uint64_t rng = test_seed("monitors and links fire in creation order");
  for (int round = 0; round < 200; round++) {
    vat_system *sys = test_host_system(false, 0);
    ord_target *t;
    vat_ref *target = test_spawn(sys, sizeof *t, (void **)&t);
    ord_watcher *w;
    vat_ref *watcher = test_spawn(sys, sizeof *w, (void **)&w);
    w->target = target;
    w->n = (int)test_rand_between(&rng, 2, ORD_MAX);
    ord_log *log = GC_MALLOC(sizeof *log);
    t->n = (int)test_rand_between(&rng, 2, ORD_MAX);
    for (int i = 0; i < t->n; i++) {
      ord_linker *l;
      t->linkers[i] = test_spawn(sys, sizeof *l, (void **)&l);
      *l = (ord_linker){.log = log, .index = i};
      ck_assert_vat_ok(vat_host_send(t->linkers[i], ord_trap, NULL));
    }
    ck_assert_vat_ok(vat_host_send(watcher, ord_watch, NULL));
    ck_assert_vat_ok(vat_host_send(target, ord_link_all, NULL));
    vat_run_result r;
    ck_assert_vat_ok(vat_system_run_until_quiescent(sys, 0, &r));
    ck_assert_vat_ok(vat_host_exit(target, boom()));
    ck_assert_vat_ok(vat_system_run_until_quiescent(sys, 0, &r));
    ck_assert_int_eq(w->nseen, w->n);
    for (int i = 0; i < w->n; i++)
      ck_assert_msg(w->seen[i] == w->ids[i],
                    "round %d: down %d of %d was monitor %llu, made as "
                    "monitor %llu",
                    round, i + 1, w->n, (unsigned long long)w->seen[i],
                    (unsigned long long)w->ids[i]);
    ck_assert_int_eq(log->n, t->n);
    for (int i = 0; i < t->n; i++)
      ck_assert_msg(log->order[i] == i,
                    "round %d: exit %d of %d reached linker %d", round, i + 1,
                    t->n, log->order[i]);
    test_quiesce(sys);
  }
}
END_TEST

/* --- A turn's link is out before its answer -------------------------------
 * The host, woken by an answer, acts on B; the link A made in the answering
 * turn must already be queued at B, or B's exit comes before it and A dies
 * of noproc. */

static void link_then_answer(vat_turn *turn, void *state, void *arg,
                             vat_resolver *r) {
  (void)state;
  expect_vat_ok(vat_link(turn, arg));
  expect_vat_ok(vat_resolve(turn, r, vat_int(1)));
}

static void stop_now(vat_turn *turn, void *state, void *arg) {
  (void)state;
  (void)arg;
  expect_vat_ok(vat_stop(turn));
}

static const char *reason_name(vat_ref *ref) {
  vat_value r = vat_ref_exit_reason(ref);
  return vat_is_atom(r, vat_atom_noproc())   ? "noproc"
         : vat_is_atom(r, vat_atom_normal()) ? "normal"
                                             : "another reason";
}

START_TEST(link_made_before_answer_is_in_place_when_host_acts) {
  enum { ITERATIONS = 200 / TEST_SCALE };
  for (int i = 0; i < ITERATIONS; i++) {
    /* One worker: held after the resolution, it runs nothing else. */
    vat_system *sys = test_system(1);
    vat_ref *a = test_spawn(sys, 8, NULL);
    vat_ref *b = test_spawn(sys, 8, NULL);
    vat__test_point_arm("promise.resolve_commit.after_settle");
    vat_promise *p;
    ck_assert_vat_ok(vat_host_call(a, link_then_answer, b, 0, &p));
    ck_assert(vat__test_point_wait(10));
    ck_assert_int_eq(vat_promise_peek(p, NULL), VAT_PROMISE_RESOLVED);
    ck_assert_vat_ok(vat_host_send(b, stop_now, NULL));
    vat__test_point_release();
    test_quiesce(sys);
    ck_assert(vat_ref_is_dead(b));
    ck_assert(vat_is_atom(vat_ref_exit_reason(b), vat_atom_normal()));
    ck_assert_msg(!vat_ref_is_dead(a), "iteration %d: A died with %s", i,
                  reason_name(a));
  }
}
END_TEST

START_TEST(stress_link_then_answer_then_peer_exits_normally) {
  enum { ITERATIONS = 4000 / TEST_SCALE };
  vat_system *sys = test_system(2);
  static vat_ref *as[ITERATIONS]; /* a global: the collector scans it */
  for (int i = 0; i < ITERATIONS; i++) {
    vat_ref *b = test_spawn(sys, 8, NULL);
    as[i] = test_spawn(sys, 8, NULL);
    vat_promise *p;
    ck_assert_vat_ok(vat_host_call(as[i], link_then_answer, b, 0, &p));
    ck_assert_vat_ok(vat_promise_wait(p, 10, NULL));
    ck_assert_vat_ok(vat_host_send(b, stop_now, NULL));
  }
  test_quiesce(sys);
  int dead = 0;
  for (int i = 0; i < ITERATIONS; i++)
    dead += vat_ref_is_dead(as[i]);
  ck_assert_msg(dead == 0, "%d of %d linkers died (e.g. with %s)", dead,
                ITERATIONS, dead ? reason_name(as[0]) : "-");
  for (int i = 0; i < ITERATIONS; i++)
    as[i] = NULL;
}
END_TEST

/* --- Stop callbacks run outside any turn ---------------------------------- */

enum end_how { END_STOP, END_FAIL, END_KILL, END_EXIT, END_CHILD, END_COUNT };

typedef struct stop_probe {
  vat_ref *log;    /* a counter the callback sends to from "outside" */
  vat_resolver *r; /* answered from the callback with its reason */
  int host_send_rc, resolve_rc, spawn_rc;
  _Atomic uint64_t ran;
} stop_probe;

static void probe_on_stop(void *state, vat_value reason) {
  stop_probe *sp = state;
  vat_ref *spawned;
  sp->host_send_rc = vat_host_send(sp->log, test_hit, NULL);
  sp->resolve_rc = vat_resolve(NULL, sp->r, reason);
  sp->spawn_rc = vat_host_spawn(vat_ref_system(sp->log), &(vat_entity_def){0},
                                &spawned, NULL);
  atomic_fetch_add_explicit(&sp->ran, 1, memory_order_release);
}

static const vat_entity_def probe_def = {.state_size = sizeof(stop_probe),
                                         .on_stop = probe_on_stop};

static void fail_now(vat_turn *turn, void *state, void *arg) {
  (void)state;
  (void)arg;
  expect_vat_ok(vat_fail(turn, boom()));
}

/* The parent's state is a stop_probe too: the child copies it, and hands
 * back its own through `child_out`. */
static void spawn_child_then_fail(vat_turn *turn, void *state, void *arg) {
  stop_probe **child_out = arg;
  vat_ref *child;
  stop_probe *cs;
  expect_vat_ok(vat_spawn(turn, &probe_def, &child, (void **)&cs));
  cs->log = ((stop_probe *)state)->log;
  cs->r = ((stop_probe *)state)->r;
  *child_out = cs;
  expect_vat_ok(vat_fail(turn, boom()));
}

START_TEST(stop_callbacks_run_outside_any_turn) {
  int how = _i;
  vat_system *sys = test_system(2);
  test_counter *log;
  vat_ref *log_ref = test_spawn_counter(sys, &log);
  vat_ref *v;
  stop_probe *sp;
  ck_assert_vat_ok(vat_host_spawn(sys, &probe_def, &v, (void **)&sp));
  vat_promise *p;
  ck_assert_vat_ok(vat_promise_new(&p, &sp->r));
  sp->log = log_ref;
  /* Written by the parent's turn, read after its callback ran. */
  static stop_probe *child;
  child = NULL;
  vat_value want = boom();
  switch (how) {
  case END_STOP:
    want = atom_v(vat_atom_normal());
    ck_assert_vat_ok(vat_host_send(v, stop_now, NULL));
    break;
  case END_FAIL:
    ck_assert_vat_ok(vat_host_send(v, fail_now, NULL));
    break;
  case END_KILL:
    want = atom_v(vat_atom_killed());
    ck_assert_vat_ok(vat_host_exit(v, want));
    break;
  case END_EXIT:
    ck_assert_vat_ok(vat_host_exit(v, want));
    break;
  case END_CHILD:
    /* The parent's own callback runs too; its promise is answered first. */
    ck_assert_vat_ok(vat_host_send(v, spawn_child_then_fail, (void *)&child));
    break;
  }
  ck_assert(test_wait_u64(&sp->ran, 1, 10));
  ck_assert_msg(sp->host_send_rc == VAT_OK,
                "vat_host_send from on_stop returned %s",
                vat_err_name(sp->host_send_rc));
  /* END_CHILD: the child's callback answered first; see below. */
  ck_assert_msg(sp->resolve_rc == VAT_OK ||
                    (how == END_CHILD && sp->resolve_rc == VAT_EBUSY),
                "vat_resolve(NULL, ...) from on_stop returned %s",
                vat_err_name(sp->resolve_rc));
  ck_assert_msg(sp->spawn_rc == VAT_OK,
                "vat_host_spawn from on_stop returned %s",
                vat_err_name(sp->spawn_rc));
  vat_value got;
  ck_assert_vat_ok(vat_promise_wait(p, 10, &got));
  ck_assert(vat_equal(got, want));
  uint64_t callbacks = 1;
  if (how == END_CHILD) {
    stop_probe *cs = child;
    ck_assert_ptr_nonnull(cs);
    ck_assert(test_wait_u64(&cs->ran, 1, 10));
    ck_assert_int_eq(cs->host_send_rc, VAT_OK);
    ck_assert_int_eq(cs->spawn_rc, VAT_OK);
    /* One resolver for both: exactly one answered, the other was refused. */
    ck_assert_int_eq((cs->resolve_rc == VAT_OK) + (sp->resolve_rc == VAT_OK),
                     1);
    ck_assert(cs->resolve_rc == VAT_EBUSY || sp->resolve_rc == VAT_EBUSY);
    callbacks = 2;
  }
  ck_assert(test_wait_u64(&log->hits, callbacks, 10));
  test_quiesce(sys);
  ck_assert_uint_eq(atomic_load(&log->hits), callbacks);
  ck_assert_uint_eq(atomic_load(&sp->ran), 1);
}
END_TEST

/* --- vat_stop_with: commit the turn, then end with a reason --------------- */

enum sw_rel { SW_LINKED, SW_TRAPPED, SW_MONITOR, SW_REL_COUNT };

typedef struct sw_watcher {
  test_counter c; /* messages from the ender */
  vat_ref *ender;
  int rel;
  uint64_t hits_at_signal; /* when the exit or down arrived */
  int signals;
  vat_value reason;
  _Atomic uint64_t done; /* the signal arrived */
} sw_watcher;

typedef struct sw_ender {
  vat_ref *watcher;
  int sends;
  vat_value reason;
} sw_ender;

static void sw_send_then_stop_with(vat_turn *turn, void *state, void *arg) {
  (void)arg;
  sw_ender *e = state;
  for (int i = 0; i < e->sends; i++)
    expect_vat_ok(vat_send(turn, e->watcher, test_hit, NULL));
  expect_vat_ok(vat_stop_with(turn, e->reason));
  /* Effects after it in the same turn still commit, before the end. */
  expect_vat_ok(vat_send(turn, e->watcher, test_hit, NULL));
}

static void sw_record(sw_watcher *w, vat_value reason) {
  w->hits_at_signal = atomic_load_explicit(&w->c.hits, memory_order_relaxed);
  w->signals++;
  w->reason = reason;
  atomic_store_explicit(&w->done, 1, memory_order_release);
}

static void sw_exit(vat_turn *turn, void *state, vat_ref *from,
                    vat_value reason) {
  (void)turn;
  (void)from;
  sw_record(state, reason);
}

static void sw_down(vat_turn *turn, void *state, uint64_t id, vat_ref *who,
                    vat_value reason) {
  (void)turn;
  (void)id;
  (void)who;
  sw_record(state, reason);
}

/* In one turn of the watcher: relate to the ender, then start it, so the
 * LINK or MONITOR reaches it first. */
static void sw_setup(vat_turn *turn, void *state, void *arg) {
  (void)arg;
  sw_watcher *w = state;
  uint64_t id;
  if (w->rel == SW_MONITOR) {
    expect_vat_ok(vat_monitor(turn, w->ender, sw_down, &id));
  } else {
    expect_vat_ok(vat_link(turn, w->ender));
    if (w->rel == SW_TRAPPED)
      expect_vat_ok(vat_trap_exit(turn, vat_self(turn), sw_exit));
  }
  expect_vat_ok(vat_send(turn, w->ender, sw_send_then_stop_with, NULL));
}

START_TEST(stop_with_commits_the_turn_then_ends) {
  int rel = _i % SW_REL_COUNT;
  bool normal = _i / SW_REL_COUNT == 1;
  enum { ITERATIONS = 200 / TEST_SCALE };
  uint64_t seed = test_seed("stop_with_commits_the_turn_then_ends");
  vat_system *sys = test_system(2);
  for (int i = 0; i < ITERATIONS; i++) {
    sw_watcher *w;
    vat_ref *wref = test_spawn(sys, sizeof(sw_watcher), (void **)&w);
    sw_ender *e;
    vat_ref *eref = test_spawn(sys, sizeof(sw_ender), (void **)&e);
    e->watcher = wref;
    e->sends = (int)test_rand_between(&seed, 0, 100);
    e->reason =
        normal ? atom_v(vat_atom_normal())
               : vat_reason_error(vat_atom_intern("quit"), vat_int((int64_t)i));
    w->ender = eref;
    w->rel = rel;
    uint64_t all = (uint64_t)e->sends + 1;
    uint64_t dead_before = test_stats(sys).dead_letters;
    ck_assert_vat_ok(vat_host_send(wref, sw_setup, NULL));
    if (rel == SW_LINKED && !normal) {
      /* Killed by the link. The exit overtakes the hits W had not run yet,
       * as in Erlang; every hit still reached W: run, or a dead letter. */
      wait_dead(wref);
      ck_assert(vat_equal(vat_ref_exit_reason(wref), e->reason));
      uint64_t reached = 0;
      for (int t = 0; t < 10000 && reached < all; t++) {
        reached = atomic_load(&w->c.hits) +
                  (test_stats(sys).dead_letters - dead_before);
        if (reached < all)
          test_sleep(0.001);
      }
      ck_assert_uint_eq(reached, all);
    } else if (rel == SW_LINKED) {
      wait_dead(eref); /* normal: no signal the watcher can see */
      ck_assert(test_wait_u64(&w->c.hits, all, 10));
    } else {
      ck_assert(test_wait_u64(&w->done, 1, 10));
      ck_assert_int_eq(w->signals, 1);
      ck_assert(vat_equal(w->reason, e->reason));
      ck_assert_uint_eq(w->hits_at_signal, all);
    }
    ck_assert(vat_ref_is_dead(eref));
    ck_assert(vat_equal(vat_ref_exit_reason(eref), e->reason));
  }
  test_quiesce(sys);
}
END_TEST

/* --- Orders the header promises ------------------------------------------ */

enum { ORDER_SENDS = 64 };

/* A trapping, monitoring vat that notes how many of S's messages it had
 * seen when S's exit signal and down notification came. */
typedef struct order_log {
  uint64_t msgs;
  int64_t exit_after, down_after; /* -1: not (yet) heard */
  _Atomic uint64_t heard;
} order_log;

static void ol_msg(vat_turn *turn, void *state, void *arg) {
  (void)turn;
  (void)arg;
  ((order_log *)state)->msgs++;
}

static void ol_exit(vat_turn *turn, void *state, vat_ref *from,
                    vat_value reason) {
  (void)turn;
  (void)from;
  (void)reason;
  order_log *o = state;
  o->exit_after = (int64_t)o->msgs;
  atomic_fetch_add_explicit(&o->heard, 1, memory_order_release);
}

static void ol_down(vat_turn *turn, void *state, uint64_t id, vat_ref *who,
                    vat_value reason) {
  (void)turn;
  (void)id;
  (void)who;
  (void)reason;
  order_log *o = state;
  o->down_after = (int64_t)o->msgs;
  atomic_fetch_add_explicit(&o->heard, 1, memory_order_release);
}

/* S's last turn: its sends, then the end of its vat, in one commit. */
static void s_send_then_stop(vat_turn *turn, void *state, void *arg) {
  (void)state;
  for (int i = 0; i < ORDER_SENDS; i++)
    expect_vat_ok(vat_send(turn, arg, ol_msg, NULL));
  expect_vat_ok(vat_stop(turn));
}

static void ol_setup(vat_turn *turn, void *state, void *arg) {
  (void)state;
  uint64_t id;
  expect_vat_ok(vat_trap_exit(turn, vat_self(turn), ol_exit));
  expect_vat_ok(vat_link(turn, arg));
  expect_vat_ok(vat_monitor(turn, arg, ol_down, &id));
  expect_vat_ok(vat_send(turn, arg, s_send_then_stop, vat_self(turn)));
}

/* exits.h: signals from one vat to another arrive in the order they were
 * committed, with its messages. A vat that sends and stops in one turn
 * must not have its exit overtake those sends. */
START_TEST(exit_and_down_follow_the_last_turns_sends) {
  vat_system *sys = test_system(_i % 2 + 1);
  order_log *o;
  vat_ref *v = test_spawn(sys, sizeof(order_log), (void **)&o);
  o->exit_after = o->down_after = -1;
  vat_ref *s = test_spawn(sys, 8, NULL);
  ck_assert_vat_ok(vat_host_send(v, ol_setup, s));
  ck_assert(test_wait_u64(&o->heard, 2, 30));
  test_quiesce(sys);
  ck_assert_uint_eq(o->msgs, ORDER_SENDS);
  ck_assert_int_eq(o->exit_after, ORDER_SENDS);
  ck_assert_int_eq(o->down_after, ORDER_SENDS);
}
END_TEST

/* Stop callbacks run before links and monitors fire. Two host-driven
 * systems make it observable without a race: S lives in A, its watcher in
 * B, so S's exit and down make B's descriptor readable the moment they are
 * sent; S's stop callback looks at that descriptor. */
static struct {
  int fd_b;
  int stops;
  bool b_woken_in_stop;
} sc;

/* The collector's signals may interrupt poll (EINTR): ask again. */
static bool readable_now(int fd) {
  for (;;) {
    struct pollfd p = {.fd = fd, .events = POLLIN};
    int n = poll(&p, 1, 0);
    if (n >= 0 || errno != EINTR)
      return n == 1 && (p.revents & POLLIN);
  }
}

static void sc_on_stop(void *state, vat_value reason) {
  (void)state;
  (void)reason;
  sc.stops++;
  sc.b_woken_in_stop = readable_now(sc.fd_b);
}

static void sc_setup(vat_turn *turn, void *state, void *arg) {
  (void)state;
  uint64_t id;
  expect_vat_ok(vat_trap_exit(turn, vat_self(turn), ol_exit));
  expect_vat_ok(vat_link(turn, arg));
  expect_vat_ok(vat_monitor(turn, arg, ol_down, &id));
}

START_TEST(stop_callbacks_run_before_links_and_monitors_fire) {
  vat_system *a = test_host_system(false, 0), *b = test_host_system(false, 0);
  ck_assert_vat_ok(vat_system_fd(b, &sc.fd_b));
  vat_ref *s;
  ck_assert_vat_ok(vat_host_spawn(
      a, &(vat_entity_def){.state_size = 8, .on_stop = sc_on_stop}, &s, NULL));
  order_log *o;
  vat_ref *w = test_spawn(b, sizeof(order_log), (void **)&o);
  o->exit_after = o->down_after = -1;
  ck_assert_vat_ok(vat_host_send(w, sc_setup, s));
  ck_assert_vat_ok(vat_system_run_until_quiescent(b, 0, NULL));
  ck_assert_vat_ok(vat_system_run_until_quiescent(a, 0, NULL));
  /* Linked and monitored; now S stops, and B hears nothing before. */
  ck_assert(!readable_now(sc.fd_b));
  ck_assert_vat_ok(vat_host_send(s, s_die, (void *)(intptr_t)K_NORMAL));
  ck_assert_vat_ok(vat_system_run_until_quiescent(a, 0, NULL));
  ck_assert_int_eq(sc.stops, 1);
  ck_assert_msg(!sc.b_woken_in_stop,
                "the exit or down reached the watcher before the stop "
                "callback ran");
  ck_assert(readable_now(sc.fd_b));
  ck_assert_vat_ok(vat_system_run_until_quiescent(b, 0, NULL));
  ck_assert_uint_eq(atomic_load(&o->heard), 2);
  test_quiesce(a);
  test_quiesce(b);
}
END_TEST

static void tn_trap(vat_turn *turn, void *state, void *arg) {
  (void)state;
  (void)arg;
  expect_vat_ok(vat_trap_exit(turn, vat_self(turn), v_exit));
}

static void tn_untrap_and_link(vat_turn *turn, void *state, void *arg) {
  (void)state;
  expect_vat_ok(vat_trap_exit(turn, NULL, NULL));
  expect_vat_ok(vat_link(turn, arg));
  expect_vat_ok(vat_send(turn, arg, s_die, (void *)(intptr_t)K_ERROR));
}

/* vat_trap_exit with a NULL receiver stops trapping: a linked vat's error
 * then ends the caller, as if it had never trapped. */
START_TEST(trap_exit_null_stops_trapping) {
  vat_system *sys = test_system(2);
  victim *v;
  vat_ref *vref = test_spawn(sys, sizeof(victim), (void **)&v);
  vat_ref *s = test_spawn(sys, 8, NULL);
  ck_assert_vat_ok(vat_host_send(vref, tn_trap, NULL));
  ck_assert_vat_ok(vat_host_send(vref, tn_untrap_and_link, s));
  wait_dead(vref);
  test_quiesce(sys);
  ck_assert_int_eq(v->exits, 0);
  ck_assert(vat_equal(vat_ref_exit_reason(vref), boom()));
}
END_TEST

/* A failed turn changes no links or monitors (exits.h), not only
 * spawn_link's: a link made in it does not exist, an unlink made in it did
 * not happen. V's end shows which: only a link carries its error to S. */
typedef struct fl {
  vat_ref *s, *probe_to;
  bool unlink; /* the failing turn unlinks a committed link */
} fl;

static void fl_link(vat_turn *turn, void *state, void *arg) {
  (void)arg;
  expect_vat_ok(vat_link(turn, ((fl *)state)->s));
}

static void fl_fail(vat_turn *turn, void *state, void *arg) {
  (void)arg;
  fl *f = state;
  uint64_t id;
  if (f->unlink)
    expect_vat_ok(vat_unlink(turn, f->s));
  else
    expect_vat_ok(vat_link(turn, f->s));
  expect_vat_ok(vat_monitor(turn, f->s, v_down, &id));
  expect_vat_ok(vat_fail(turn, boom()));
}

/* The watcher hears V's down after V's exits left: then probes S. */
static void fl_down(vat_turn *turn, void *state, uint64_t id, vat_ref *who,
                    vat_value reason) {
  (void)id;
  (void)who;
  (void)reason;
  expect_vat_ok(vat_send(turn, ((fl *)state)->probe_to, test_hit, NULL));
}

/* One commit of W's, in order at V: (link,) the watch, the failing turn. */
static void fl_watch(vat_turn *turn, void *state, void *arg) {
  fl *w = state;
  uint64_t id;
  if (w->unlink)
    expect_vat_ok(vat_send(turn, arg, fl_link, NULL));
  expect_vat_ok(vat_monitor(turn, arg, fl_down, &id));
  expect_vat_ok(vat_send(turn, arg, fl_fail, NULL));
}

START_TEST(failed_turn_discards_link_changes) {
  bool unlink = _i == 1;
  vat_system *sys = test_system(2);
  test_counter *c;
  vat_ref *s = test_spawn_counter(sys, &c);
  fl *f, *w;
  vat_ref *v = test_spawn(sys, sizeof(fl), (void **)&f);
  vat_ref *wref = test_spawn(sys, sizeof(fl), (void **)&w);
  f->s = s;
  f->unlink = w->unlink = unlink;
  w->probe_to = s;
  ck_assert_vat_ok(vat_host_send(wref, fl_watch, v));
  wait_dead(v);
  ck_assert(vat_equal(vat_ref_exit_reason(v), boom()));
  if (unlink) {
    /* The link survived the failed unlink and took S down. */
    wait_dead(s);
    ck_assert(vat_equal(vat_ref_exit_reason(s), boom()));
  } else {
    /* The probe came after any exit V sent S, and S was alive for it. */
    ck_assert(test_wait_u64(&c->hits, 1, 30));
    ck_assert(!vat_ref_is_dead(s));
  }
  test_quiesce(sys);
}
END_TEST

/* --- Exits reach muted vats ------------------------------------------------
 *
 * vat/exits.h: a kill ends a flooded vat after at most the turn it is
 * running, muted or not. A flooder muted on a receiver that stays
 * overloaded (blocked in a turn, its queue past the high mark) is parked
 * on the receiver's list, off the run queues; an exit that ends it must
 * take it off and run it. Before: it ended only once the receiver drained
 * below its low mark (here never, while the gate is shut). */

enum { MU_TICKS = 300 };

typedef struct mu_rx {
  _Atomic uint64_t entered[3], open[3];
} mu_rx;

/* arg 1 and 2: gates; others: ticks. */
static void mu_step(vat_turn *turn, void *state, void *arg) {
  (void)turn;
  mu_rx *r = state;
  uintptr_t g = (uintptr_t)arg;
  if (g != 1 && g != 2)
    return;
  atomic_store(&r->entered[g], 1);
  while (atomic_load(&r->open[g]) == 0)
    test_sleep(0.0002);
}

static const vat_overload mu_overload = {
    .policy = VAT_OVERLOAD_MUTE, .high = 64, .low = 16};

/* A receiver overloaded and blocked in a turn, MU_TICKS queued behind it:
 * it stays overloaded until gate 2 opens. With workers. */
static vat_ref *mu_blocked_receiver(vat_system *sys, mu_rx **out) {
  vat_ref *rx;
  ck_assert_vat_ok(vat_host_spawn(
      sys, &(vat_entity_def){.state_size = sizeof **out, .overload = &mu_overload},
      &rx, (void **)out));
  mu_rx *r = *out;
  ck_assert_vat_ok(vat_host_send(rx, mu_step, (void *)1));
  ck_assert(test_wait_u64(&r->entered[1], 1, 30));
  for (int i = 0; i < MU_TICKS; i++)
    ck_assert_vat_ok(vat_host_send(rx, mu_step, (void *)3));
  ck_assert_vat_ok(vat_host_send(rx, mu_step, (void *)2));
  for (int i = 0; i < MU_TICKS; i++)
    ck_assert_vat_ok(vat_host_send(rx, mu_step, (void *)3));
  atomic_store(&r->open[1], 1);
  ck_assert(test_wait_u64(&r->entered[2], 1, 30));
  return rx;
}

typedef struct mu_flooder {
  vat_ref *to, *link;
  _Atomic uint64_t turns;
} mu_flooder;

static void mu_flood(vat_turn *turn, void *state, void *arg) {
  (void)arg;
  mu_flooder *f = state;
  if (atomic_fetch_add(&f->turns, 1) == 0 && f->link != NULL)
    expect_vat_ok(vat_link(turn, f->link));
  for (int i = 0; i < 4; i++)
    expect_vat_ok(vat_send(turn, f->to, mu_step, (void *)3));
  expect_vat_ok(vat_send(turn, vat_self(turn), mu_flood, NULL));
}

static void mu_kill(vat_turn *turn, void *state, void *arg) {
  (void)state;
  expect_vat_ok(vat_kill(turn, arg));
}

static void mu_fail(vat_turn *turn, void *state, void *arg) {
  (void)state, (void)arg;
  expect_vat_ok(vat_fail(turn, vat_atom_named("mu_boom")));
}

enum mu_how { MU_HOST_EXIT, MU_KILL, MU_LINK, MU_HOW_COUNT };

/* How the exit is sent: the host's vat_host_exit, another vat's vat_kill,
 * or the exit along a link from a vat that fails. */
static void mu_end(int how, vat_ref *target, vat_ref *helper) {
  switch (how) {
  case MU_HOST_EXIT:
    ck_assert_vat_ok(vat_host_exit(target, vat_atom_value(vat_atom_killed())));
    break;
  case MU_KILL:
    ck_assert_vat_ok(vat_host_send(helper, mu_kill, target));
    break;
  default:
    ck_assert_vat_ok(vat_host_send(helper, mu_fail, NULL));
  }
}

static bool mu_dead_within(vat_ref *ref, double timeout_s) {
  double deadline = test_wall_seconds() + timeout_s;
  while (!vat_ref_is_dead(ref))
    if (test_wall_seconds() > deadline)
      return false;
    else
      test_sleep(0.0001);
  return true;
}

/* Deterministic: a pause point holds the flooder's worker right after it
 * parked the flooder, so the exit finds it parked every run. */
START_TEST(exit_reaches_a_muted_vat) {
  vat_system *sys = test_system(2);
  mu_rx *r;
  vat_ref *rx = mu_blocked_receiver(sys, &r);
  vat_ref *helper = test_spawn(sys, 8, NULL);
  mu_flooder *f;
  vat_ref *fl = test_spawn(sys, sizeof *f, (void **)&f);
  f->to = rx;
  f->link = _i == MU_LINK ? helper : NULL;
  vat__test_point_arm("turn.parked_muted");
  ck_assert_vat_ok(vat_host_send(fl, mu_flood, NULL));
  ck_assert_msg(vat__test_point_wait(10), "the flooder was never muted");
  vat__test_point_release();
  uint64_t turns = atomic_load(&f->turns);
  double t0 = test_wall_seconds();
  mu_end(_i, fl, helper);
  bool dead = mu_dead_within(fl, 5);
  double took = test_wall_seconds() - t0;
  /* The receiver never moved meanwhile: still blocked, still overloaded. */
  ck_assert_uint_eq(atomic_load(&r->open[2]), 0);
  ck_assert_uint_ge(vat_ref_queue_len(rx), MU_TICKS);
  ck_assert_msg(dead, "the muted flooder was not ended in 5 s");
  ck_assert_msg(took < (TEST_SCALE > 1 ? 1.0 : 0.1),
                "the exit took %.3f s to end the muted flooder", took);
  ck_assert_uint_le(atomic_load(&f->turns), turns + 1);
  atomic_store(&r->open[2], 1);
  test_quiesce(sys);
}
END_TEST

static void mu_run(vat_system *sys, uint64_t turns) {
  ck_assert_vat_ok(vat_system_run(sys, turns, 0, NULL));
}

/* Host-driven, counted in turns: the flooder is muted after its first
 * turn and runs no more; the host's exit ends it within a few turns while
 * the receiver still has thousands queued. */
START_TEST(exit_reaches_a_muted_vat_host_driven) {
  vat_system *sys = test_host_system(true, 11);
  vat_ref *rx;
  mu_rx *r;
  ck_assert_vat_ok(vat_host_spawn(
      sys, &(vat_entity_def){.state_size = sizeof *r, .overload = &mu_overload},
      &rx, (void **)&r));
  for (int i = 0; i < 4000; i++)
    ck_assert_vat_ok(vat_host_send(rx, mu_step, (void *)3));
  mu_run(sys, 64); /* its batch ends overloaded */
  mu_flooder *f;
  vat_ref *fl = test_spawn(sys, sizeof *f, (void **)&f);
  f->to = rx;
  ck_assert_vat_ok(vat_host_send(fl, mu_flood, NULL));
  mu_run(sys, 400);
  ck_assert_uint_eq(atomic_load(&f->turns), 1); /* muted */
  mu_run(sys, 400);
  ck_assert_uint_eq(atomic_load(&f->turns), 1);
  ck_assert_vat_ok(vat_host_exit(fl, vat_atom_value(vat_atom_killed())));
  mu_run(sys, 100);
  ck_assert_msg(vat_ref_is_dead(fl), "the muted flooder outlived its kill");
  ck_assert_uint_ge(vat_ref_queue_len(rx), 3000);
  ck_assert_vat_ok(vat_system_run_until_quiescent(sys, 0, NULL));
  test_quiesce(sys);
}
END_TEST

/* Stress, on 2 workers: rounds of flooders on a blocked receiver, each
 * ended at a random moment (before it runs, as it is muted, parked) by one
 * of the three kinds of exit; every one ends while the receiver stays
 * blocked and overloaded. */
enum { MU_MAX_FLOODERS = 8 };

START_TEST(stress_exits_reach_muted_vats) {
  uint64_t rng = test_seed("stress_exits_reach_muted_vats");
  unsigned rounds = test_quick() ? 4 : 20;
  for (unsigned round = 0; round < rounds; round++) {
    vat_system *sys = test_system(2);
    mu_rx *r;
    vat_ref *rx = mu_blocked_receiver(sys, &r);
    unsigned n = (unsigned)test_rand_between(&rng, 1, MU_MAX_FLOODERS);
    vat_ref *fl[MU_MAX_FLOODERS], *helper[MU_MAX_FLOODERS];
    int how[MU_MAX_FLOODERS];
    for (unsigned i = 0; i < n; i++) {
      mu_flooder *f;
      how[i] = (int)test_rand_between(&rng, 0, MU_HOW_COUNT - 1);
      helper[i] = test_spawn(sys, 8, NULL);
      fl[i] = test_spawn(sys, sizeof *f, (void **)&f);
      f->to = rx;
      f->link = how[i] == MU_LINK ? helper[i] : NULL;
      ck_assert_vat_ok(vat_host_send(fl[i], mu_flood, NULL));
    }
    for (unsigned i = 0; i < n; i++) {
      test_sleep(0.0001 * (double)test_rand_between(&rng, 0, 20));
      mu_end(how[i], fl[i], helper[i]);
    }
    for (unsigned i = 0; i < n; i++)
      ck_assert_msg(mu_dead_within(fl[i], 10),
                    "round %u: flooder %u of %u (exit kind %d) not ended",
                    round, i, n, how[i]);
    ck_assert_uint_eq(atomic_load(&r->open[2]), 0);
    atomic_store(&r->open[2], 1);
    test_quiesce(sys);
  }
}
END_TEST

/* --- Fatal exits overtake a backlog ---------------------------------------
 *
 * vat/exits.h: an exit that ends its receiver takes effect at the next
 * turn boundary, whatever its backlog (the messages queued before it
 * become dead letters); one a trap turns into a call keeps its place. The
 * target is held in a turn while BACKLOG messages and then the exit are
 * queued, so the order is fixed every run. */

enum { BACKLOG = 200 };

typedef struct ov_target {
  _Atomic uint64_t entered, open, handled, trapped_at;
  vat_ref *link;
  bool trap;
} ov_target;

static void ov_on_exit(vat_turn *turn, void *state, vat_ref *from,
                       vat_value reason) {
  (void)turn, (void)from, (void)reason;
  ov_target *t = state;
  atomic_store(&t->trapped_at, atomic_load(&t->handled) + 1);
}

/* Its first turn: trap and link, committed before the gate's turn. */
static void ov_setup(vat_turn *turn, void *state, void *arg) {
  (void)arg;
  ov_target *t = state;
  if (t->trap)
    expect_vat_ok(vat_trap_exit(turn, vat_self(turn), ov_on_exit));
  if (t->link)
    expect_vat_ok(vat_link(turn, t->link));
}

static void ov_gate(vat_turn *turn, void *state, void *arg) {
  (void)turn, (void)arg;
  ov_target *t = state;
  atomic_store(&t->entered, 1);
  while (atomic_load(&t->open) == 0)
    test_sleep(0.0002);
}

static void ov_msg(vat_turn *turn, void *state, void *arg) {
  (void)turn, (void)arg;
  atomic_fetch_add(&((ov_target *)state)->handled, 1);
}

static void ov_exit_error(vat_turn *turn, void *state, void *arg) {
  (void)state;
  expect_vat_ok(vat_exit(turn, arg, vat_atom_named("ov_boom")));
}

enum ov_how {
  OV_HOST_KILL,
  OV_HOST_ERROR,
  OV_TURN_KILL,
  OV_TURN_ERROR,
  OV_LINK_ERROR,
  OV_KILL_TRAPPING,
  OV_COUNT
};

START_TEST(fatal_exits_overtake_the_backlog) {
  vat_system *sys = test_system(2);
  ov_target *t;
  vat_ref *tr = test_spawn(sys, sizeof *t, (void **)&t);
  vat_ref *helper = test_spawn(sys, 8, NULL);
  t->trap = _i == OV_KILL_TRAPPING;
  t->link = _i == OV_LINK_ERROR ? helper : NULL;
  ck_assert_vat_ok(vat_host_send(tr, ov_setup, NULL));
  /* The helper holds the link before the target blocks: a vat the target
   * woke waits in its worker's next slot until the target's batch ends. */
  vat_info hi = {0};
  for (int i = 0; i < 30000 && t->link && hi.links == 0; i++) {
    ck_assert_vat_ok(vat_ref_inspect(helper, &hi));
    test_sleep(0.001);
  }
  ck_assert_vat_ok(vat_host_send(tr, ov_gate, NULL));
  ck_assert(test_wait_u64(&t->entered, 1, 30));
  for (int i = 0; i < BACKLOG; i++)
    ck_assert_vat_ok(vat_host_send(tr, ov_msg, NULL));
  uint64_t dead_before = test_stats(sys).dead_letters;
  vat_value killed = vat_atom_value(vat_atom_killed());
  switch (_i) {
  case OV_HOST_KILL:
  case OV_KILL_TRAPPING:
    ck_assert_vat_ok(vat_host_exit(tr, killed));
    break;
  case OV_HOST_ERROR:
    ck_assert_vat_ok(vat_host_exit(tr, vat_atom_named("ov_boom")));
    break;
  case OV_TURN_KILL:
    ck_assert_vat_ok(vat_host_send(helper, mu_kill, tr));
    break;
  case OV_TURN_ERROR:
    ck_assert_vat_ok(vat_host_send(helper, ov_exit_error, tr));
    break;
  default:
    ck_assert_vat_ok(vat_host_send(helper, mu_fail, NULL));
  }
  /* The exit is queued behind the backlog before the gate opens. */
  for (int i = 0; i < 30000 && vat_ref_queue_len(tr) < BACKLOG + 1; i++)
    test_sleep(0.001);
  ck_assert_msg(vat_ref_queue_len(tr) == BACKLOG + 1, "queued %zu, helper %s",
                vat_ref_queue_len(tr),
                vat_ref_is_dead(helper) ? "dead" : "alive");
  atomic_store(&t->open, 1);
  ck_assert(mu_dead_within(tr, 30));
  ck_assert_uint_eq(atomic_load(&t->handled), 0);
  ck_assert_uint_eq(atomic_load(&t->trapped_at), 0);
  test_quiesce(sys);
  ck_assert_uint_eq(test_stats(sys).dead_letters - dead_before, BACKLOG);
}
END_TEST

/* A trapped exit is a message: it runs after the backlog queued before it. */
START_TEST(trapped_exit_keeps_its_place_in_the_backlog) {
  vat_system *sys = test_system(2);
  ov_target *t;
  vat_ref *tr = test_spawn(sys, sizeof *t, (void **)&t);
  t->trap = true;
  ck_assert_vat_ok(vat_host_send(tr, ov_setup, NULL));
  ck_assert_vat_ok(vat_host_send(tr, ov_gate, NULL));
  ck_assert(test_wait_u64(&t->entered, 1, 30));
  for (int i = 0; i < BACKLOG; i++)
    ck_assert_vat_ok(vat_host_send(tr, ov_msg, NULL));
  ck_assert_vat_ok(vat_host_exit(tr, vat_atom_named("ov_boom")));
  atomic_store(&t->open, 1);
  ck_assert(test_wait_u64(&t->trapped_at, BACKLOG + 1, 30));
  ck_assert(!vat_ref_is_dead(tr));
  test_quiesce(sys);
}
END_TEST

/* --- A watcher's end ------------------------------------------------------
 *
 * Erlang removes the monitors a process made when it ends: a long-lived
 * vat watched by many short-lived ones would otherwise keep a watch, and
 * through it the dead watcher, for each one that ever watched it. */

static void ignore_down(vat_turn *turn, void *state, uint64_t monitor,
                        vat_ref *who, vat_value reason) {
  (void)turn, (void)state, (void)monitor, (void)who, (void)reason;
}

static void watch_arg(vat_turn *turn, void *state, void *arg) {
  (void)state;
  uint64_t id;
  expect_vat_ok(vat_monitor(turn, arg, ignore_down, &id));
}

START_TEST(a_vat_that_ends_takes_its_monitors_with_it) {
  vat_system *sys = test_system(2);
  vat_ref *watched = test_spawn(sys, 8, NULL);
  enum { WATCHERS = 200, KEPT = 3 };
  vat_ref *watchers[WATCHERS];
  for (int i = 0; i < WATCHERS; i++) {
    watchers[i] = test_spawn(sys, 8, NULL);
    ck_assert_vat_ok(vat_host_send(watchers[i], watch_arg, watched));
  }
  vat_info info = {0};
  for (int i = 0; i < 30000 && info.monitored_by < WATCHERS; i++) {
    ck_assert_vat_ok(vat_ref_inspect(watched, &info));
    test_sleep(0.001);
  }
  ck_assert_uint_eq(info.monitored_by, WATCHERS);
  /* All but KEPT end, normally: their monitors go with them. */
  vat_promise *ended[WATCHERS];
  for (int i = KEPT; i < WATCHERS; i++) {
    ck_assert_vat_ok(vat_host_monitor(watchers[i], NULL, &ended[i]));
    ck_assert_vat_ok(vat_host_send(watchers[i], stop_now, NULL));
  }
  for (int i = KEPT; i < WATCHERS; i++)
    ck_assert_vat_ok(vat_promise_wait(ended[i], 30, NULL));
  for (int i = 0; i < 30000 && info.monitored_by > KEPT; i++) {
    ck_assert_vat_ok(vat_ref_inspect(watched, &info));
    test_sleep(0.001);
  }
  ck_assert_uint_eq(info.monitored_by, KEPT);
  test_quiesce(sys);
}
END_TEST

/* --- Host monitors at shutdown ---------------------------------------------
 *
 * vat/core.h: once a system stops, everything outside it that waits on its
 * vats settles with `shutdown`: a host thread's monitor of a vat still
 * alive gets its down then; one of a vat that ended got its reason. */
START_TEST(host_monitors_settle_at_shutdown) {
  vat_system *sys = test_system(2);
  vat_ref *alive = test_spawn(sys, 8, NULL), *ends = test_spawn(sys, 8, NULL);
  vat_promise *down_alive, *down_ends;
  ck_assert_vat_ok(vat_host_monitor(alive, NULL, &down_alive));
  ck_assert_vat_ok(vat_host_monitor(ends, NULL, &down_ends));
  vat_info info = {0};
  for (int i = 0; i < 30000; i++) {
    ck_assert_vat_ok(vat_ref_inspect(alive, &info));
    if (info.monitored_by == 1)
      break;
    test_sleep(0.001);
  }
  ck_assert_uint_eq(info.monitored_by, 1);
  ck_assert_vat_ok(vat_host_send(ends, mu_fail, NULL));
  vat_value reason;
  ck_assert_int_eq(vat_promise_wait(down_ends, 30, &reason), VAT_OK);
  ck_assert(vat_is_atom(reason, vat_atom_intern("mu_boom")));
  ck_assert_int_eq(vat_promise_wait(down_alive, 0, NULL), VAT_ETIMEDOUT);
  test_quiesce(sys);
  ck_assert_int_eq(vat_promise_wait(down_alive, 0, &reason), VAT_OK);
  ck_assert(vat_is_atom(reason, vat_atom_shutdown()));
}
END_TEST

/* --- Only the latest unlink's acknowledgement ends "unlinking" -------------
 *
 * src/exits/exits.c's protocol: A unlinks B (UNLINK 1), links it again and
 * unlinks it again (UNLINK 2); B, between UNLINK 1 and A's new LINK, links
 * A itself. B's LINK reaches A after ACK 1 and before ACK 2: A is still
 * unlinking (its latest unlink is 2), so it must ignore that LINK, which
 * UNLINK 2 undid at B. An ACK 1 that ended the unlinking state would let
 * A keep a link B does not have. B is held in a turn while A's signals
 * queue, so the interleaving is the same every run. */
typedef struct ul_vat {
  vat_ref *peer;
  _Atomic uint64_t entered, open, steps, pinged;
} ul_vat;

static void ul_link(vat_turn *turn, void *state, void *arg) {
  (void)arg;
  ul_vat *u = state;
  expect_vat_ok(vat_link(turn, u->peer));
  atomic_fetch_add(&u->steps, 1);
}

static void ul_gate(vat_turn *turn, void *state, void *arg) {
  (void)turn, (void)arg;
  ul_vat *u = state;
  atomic_store(&u->entered, 1);
  while (atomic_load(&u->open) == 0)
    test_sleep(0.0002);
}

/* A's first unlink, then B told to link A: B gets it right after UNLINK 1. */
static void ul_unlink_then_tell(vat_turn *turn, void *state, void *arg) {
  (void)arg;
  ul_vat *u = state;
  expect_vat_ok(vat_unlink(turn, u->peer));
  expect_vat_ok(vat_send(turn, u->peer, ul_link, NULL));
  atomic_fetch_add(&u->steps, 1);
}

static void ul_unlink(vat_turn *turn, void *state, void *arg) {
  (void)arg;
  ul_vat *u = state;
  expect_vat_ok(vat_unlink(turn, u->peer));
  atomic_fetch_add(&u->steps, 1);
}

static void ul_pinged(vat_turn *turn, void *state, void *arg) {
  (void)turn, (void)arg;
  atomic_store(&((ul_vat *)state)->pinged, 1);
}

/* Behind everything B sent A: once A runs it, A has handled them. */
static void ul_ping_peer(vat_turn *turn, void *state, void *arg) {
  (void)arg;
  expect_vat_ok(vat_send(turn, ((ul_vat *)state)->peer, ul_pinged, NULL));
}

static size_t ul_links(vat_ref *ref) {
  vat_info info;
  ck_assert_vat_ok(vat_ref_inspect(ref, &info));
  return info.links;
}

START_TEST(only_the_latest_unlink_ack_ends_unlinking) {
  vat_system *sys = test_system(2);
  ul_vat *a, *b;
  vat_ref *ar = test_spawn(sys, sizeof *a, (void **)&a);
  vat_ref *br = test_spawn(sys, sizeof *b, (void **)&b);
  a->peer = br;
  b->peer = ar;
  ck_assert_vat_ok(vat_host_send(ar, ul_link, NULL));
  for (int i = 0; i < 30000 && (ul_links(ar) != 1 || ul_links(br) != 1); i++)
    test_sleep(0.001);
  ck_assert_uint_eq(ul_links(br), 1);
  ck_assert_vat_ok(vat_host_send(br, ul_gate, NULL));
  ck_assert(test_wait_u64(&b->entered, 1, 30));
  ck_assert_vat_ok(vat_host_send(ar, ul_unlink_then_tell, NULL));
  ck_assert_vat_ok(vat_host_send(ar, ul_link, NULL));
  ck_assert_vat_ok(vat_host_send(ar, ul_unlink, NULL));
  ck_assert(test_wait_u64(&a->steps, 4, 30));
  /* UNLINK 1, the order to link, LINK, UNLINK 2: all queued at B. */
  for (int i = 0; i < 30000 && vat_ref_queue_len(br) < 4; i++)
    test_sleep(0.001);
  ck_assert_uint_eq(vat_ref_queue_len(br), 4);
  atomic_store(&b->open, 1);
  ck_assert_vat_ok(vat_host_send(br, ul_ping_peer, NULL));
  ck_assert(test_wait_u64(&a->pinged, 1, 30));
  ck_assert_uint_eq(ul_links(br), 0);
  ck_assert_msg(ul_links(ar) == 0,
                "A kept a link to B, which B does not have (A took B's "
                "LINK while its latest unlink was unacknowledged)");
  test_quiesce(sys);
}
END_TEST

Suite *test_exits_suite(void) {
  Suite *s = suite_create("exits");
  TCase *tc = test_case("rules", 30);
  tcase_add_loop_test(tc, matrix, 0, K_COUNT * R_COUNT * 2);
  tcase_add_loop_test(tc, exit_signal, 0, E_COUNT * FROM_COUNT * 2);
  tcase_add_test(tc, monitor_ids_and_demonitor);
  tcase_add_test(tc, one_link_per_pair);
  tcase_add_test(tc, spawn_link_is_atomic);
  tcase_add_loop_test(tc, unlink_crossing_link, 0, 8);
  tcase_add_test(tc, chain_of_links);
  tcase_add_test(tc, stop_callbacks_run_once);
  tcase_add_test(tc, bad_calls);
  tcase_add_loop_test(tc, exit_and_down_follow_the_last_turns_sends, 0, 4);
  tcase_add_test(tc, stop_callbacks_run_before_links_and_monitors_fire);
  tcase_add_test(tc, trap_exit_null_stops_trapping);
  tcase_add_loop_test(tc, failed_turn_discards_link_changes, 0, 2);
  suite_add_tcase(s, tc);
  TCase *ov = test_case("overtaking", 60);
  tcase_add_loop_test(ov, fatal_exits_overtake_the_backlog, 0, OV_COUNT);
  tcase_add_test(ov, trapped_exit_keeps_its_place_in_the_backlog);
  tcase_add_test(ov, a_vat_that_ends_takes_its_monitors_with_it);
  tcase_add_test(ov, host_monitors_settle_at_shutdown);
  tcase_add_test(ov, only_the_latest_unlink_ack_ends_unlinking);
  suite_add_tcase(s, ov);

  TCase *mu = test_case("muted", 120);
  tcase_add_loop_test(mu, exit_reaches_a_muted_vat, 0, MU_HOW_COUNT);
  tcase_add_test(mu, exit_reaches_a_muted_vat_host_driven);
  tcase_add_test(mu, stress_exits_reach_muted_vats);
  suite_add_tcase(s, mu);

  TCase *st = test_case("stress", 120);
  tcase_add_test(st, stress_links_and_monitors);
  tcase_add_test(st, every_monitor_fires_once);
  suite_add_tcase(s, st);
  TCase *ord = test_case("creation order", 60);
  tcase_add_test(ord, monitors_and_links_fire_in_creation_order);
  suite_add_tcase(s, ord);
  TCase *eff = test_case("commit order", 120);
  tcase_add_test(eff, link_made_before_answer_is_in_place_when_host_acts);
  tcase_add_test(eff, stress_link_then_answer_then_peer_exits_normally);
  tcase_add_loop_test(eff, stop_callbacks_run_outside_any_turn, 0, END_COUNT);
  tcase_add_loop_test(eff, stop_with_commits_the_turn_then_ends, 0,
                      SW_REL_COUNT * 2);
  suite_add_tcase(s, eff);
  return s;
}
