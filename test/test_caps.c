/* Capability patterns: requests in message form, caretakers, sealer /
 * unsealer pairs, facets and membranes, with their refusals. */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define GC_THREADS 1
#include <gc/gc.h>

#include "support.h"

/* --- A target that records what reaches it ------------------------------- */

typedef struct target {
  _Atomic uint64_t hits;  /* "hit" messages */
  _Atomic uint64_t pings; /* "ping" messages */
  vat_ref *inner;         /* handed out by "get_inner" */
  vat_ref *stored;        /* the ref given by "call_back" */
} target;

static const vat_atom *sel(const char *name) {
  return vat_atom_intern(name);
}

static void target_receive(vat_turn *turn, void *state,
                           const vat_atom *selector, vat_value value) {
  target *t = state;
  vat_value payload = value;
  vat_ref *reply = NULL;
  (void)vat_request_parse(value, &payload, &reply);
  if (selector == sel("hit"))
    atomic_fetch_add_explicit(&t->hits, 1, memory_order_release);
  else if (selector == sel("ping"))
    atomic_fetch_add_explicit(&t->pings, 1, memory_order_release);
  else if (selector == sel("echo") || selector == sel("read") ||
           selector == sel("write"))
    expect_vat_ok(vat_reply(turn, reply, payload));
  else if (selector == sel("count"))
    expect_vat_ok(
        vat_reply(turn, reply, vat_int((int64_t)atomic_load(&t->hits))));
  else if (selector == sel("get_inner"))
    expect_vat_ok(vat_reply(turn, reply, vat_ref_value(t->inner)));
  else if (selector == sel("get_inner_in_error"))
    expect_vat_ok(vat_reply(
        turn, reply, vat_error(sel("carried"), vat_ref_value(t->inner))));
  else if (selector == sel("get_inner_in_record")) {
    vat_value field = vat_ref_value(t->inner);
    expect_vat_ok(vat_reply(turn, reply, vat_record(sel("box"), &field, 1)));
  } else if (selector == sel("is_inner"))
    expect_vat_ok(
        vat_reply(turn, reply, vat_bool(vat_value_ref(payload) == t->inner)));
  else if (selector == sel("call_back")) {
    t->stored = vat_value_ref(payload);
    expect_vat_ok(vat_send_msg(turn, t->stored, sel("ping"), vat_null()));
    expect_vat_ok(vat_reply(turn, reply, vat_bool(true)));
  } else if (selector == sel("ping_stored"))
    expect_vat_ok(vat_send_msg(turn, t->stored, sel("ping"), vat_null()));
  /* "silent" requests are never answered. */
}

static const vat_entity_def target_def = {.state_size = sizeof(target),
                                          .receive = target_receive};

static vat_ref *spawn_target(vat_system *sys, target **t) {
  vat_ref *ref;
  ck_assert_vat_ok(vat_host_spawn(sys, &target_def, &ref, (void **)t));
  return ref;
}

static vat_value request(vat_ref *to, const char *selector, vat_value payload,
                         int expect_rc) {
  vat_promise *p;
  vat_value v = vat_null();
  ck_assert_vat_ok(vat_host_request(to, sel(selector), payload, 0, &p));
  ck_assert_vat_err(vat_promise_wait(p, 10, &v), expect_rc);
  return v;
}

static void assert_error(vat_value v, const vat_atom *code) {
  char buf[128];
  vat_format(v, buf, sizeof buf);
  ck_assert_msg(vat_error_code(v) == code, "got %s, expected error %s", buf,
                vat_atom_name(code));
}

/* --- Requests ------------------------------------------------------------- */

START_TEST(request_answered_and_timed_out) {
  vat_system *sys = test_system(2);
  target *t;
  vat_ref *ref = spawn_target(sys, &t);
  ck_assert(vat_equal(request(ref, "echo", vat_int(42), VAT_OK), vat_int(42)));
  vat_promise *p;
  vat_value v;
  ck_assert_vat_ok(vat_host_request(ref, sel("silent"), vat_null(), 0.05, &p));
  ck_assert_vat_err(vat_promise_wait(p, 10, &v), VAT_EBROKEN);
  ck_assert(vat_is_atom(v, vat_atom_timeout()));
  ck_assert_vat_err(vat_host_request(ref, NULL, vat_null(), 0, &p), VAT_EINVAL);
  ck_assert_vat_err(vat_host_request(ref, sel("x"), vat_null(), -1, &p),
                    VAT_EINVAL);
  ck_assert(!vat_request_parse(vat_int(1), NULL, NULL));
  test_quiesce(sys);
}
END_TEST

typedef struct asker {
  vat_ref *to;
  _Atomic uint64_t settled;
  bool resolved[2];
  vat_value values[2];
} asker;

static void asked(vat_turn *turn, void *state, void *ctx, bool resolved,
                  vat_value value) {
  (void)turn;
  asker *a = state;
  size_t i = (size_t)(uintptr_t)ctx;
  a->resolved[i] = resolved;
  a->values[i] = value;
  atomic_fetch_add_explicit(&a->settled, 1, memory_order_release);
}

static void ask_twice(vat_turn *turn, void *state, void *arg) {
  (void)arg;
  asker *a = state;
  vat_promise *p, *q;
  expect_vat_ok(vat_request(turn, a->to, sel("echo"), vat_int(3), 0, &p));
  expect_vat_ok(vat_request(turn, a->to, sel("silent"), vat_null(), 0.05, &q));
  expect_vat_ok(vat_when(turn, p, asked, (void *)0));
  expect_vat_ok(vat_when(turn, q, asked, (void *)1));
}

START_TEST(request_from_a_turn) {
  vat_system *sys = test_system(2);
  target *t;
  asker *a;
  vat_ref *aref;
  ck_assert_vat_ok(vat_host_spawn(
      sys, &(vat_entity_def){.state_size = sizeof(asker)}, &aref, (void **)&a));
  a->to = spawn_target(sys, &t);
  ck_assert_vat_ok(vat_host_send(aref, ask_twice, NULL));
  ck_assert(test_wait_u64(&a->settled, 2, 10));
  ck_assert(a->resolved[0] && vat_equal(a->values[0], vat_int(3)));
  ck_assert(!a->resolved[1] && vat_is_atom(a->values[1], vat_atom_timeout()));
  vat_promise *p;
  ck_assert_vat_err(vat_request(NULL, a->to, sel("echo"), vat_null(), 0, &p),
                    VAT_ENOTINTURN);
  test_quiesce(sys);
}
END_TEST

/* --- Caretaker ------------------------------------------------------------ */

START_TEST(caretaker_forwards_until_revoked) {
  vat_system *sys = test_system(2);
  target *t;
  vat_ref *ref = spawn_target(sys, &t), *fwd, *revoker;
  ck_assert_vat_ok(vat_host_caretaker_new(sys, ref, &fwd, &revoker));
  ck_assert_ptr_ne(fwd, ref);
  for (int i = 0; i < 100; i++)
    ck_assert_vat_ok(vat_host_send_msg(fwd, sel("hit"), vat_null()));
  ck_assert(vat_equal(request(fwd, "echo", vat_int(5), VAT_OK), vat_int(5)));
  ck_assert_uint_eq(atomic_load(&t->hits), 100);

  ck_assert(vat_equal(request(revoker, "revoke", vat_null(), VAT_OK),
                      vat_bool(true)));
  for (int i = 0; i < 100; i++)
    ck_assert_vat_ok(vat_host_send_msg(fwd, sel("hit"), vat_null()));
  /* The forwarder handles these in order: when the request is refused,
   * the hits before it were dropped. */
  assert_error(request(fwd, "echo", vat_int(5), VAT_EBROKEN),
               vat_atom_revoked());
  test_quiesce(sys);
  ck_assert_uint_eq(atomic_load(&t->hits), 100);
}
END_TEST

typedef struct client {
  vat_ref *target;
} client;

/* Made inside a turn, the forwarder and revoker are entities of this vat,
 * so what this turn sends them arrives in order. */
static void use_and_revoke(vat_turn *turn, void *state, void *arg) {
  (void)arg;
  client *c = state;
  vat_ref *fwd, *revoker;
  expect_vat_ok(vat_caretaker_new(turn, c->target, &fwd, &revoker));
  expect_vat_ok(vat_send_msg(turn, fwd, sel("hit"), vat_null()));
  expect_vat_ok(vat_revoke(turn, revoker));
  expect_vat_ok(vat_send_msg(turn, fwd, sel("hit"), vat_null()));
  expect_vat_ok(vat_send_msg(turn, fwd, sel("hit"), vat_null()));
}

START_TEST(caretaker_made_in_a_turn) {
  vat_system *sys = test_system(2);
  target *t;
  vat_ref *ref = spawn_target(sys, &t), *cref;
  client *c;
  ck_assert_vat_ok(
      vat_host_spawn(sys, &(vat_entity_def){.state_size = sizeof(client)},
                     &cref, (void **)&c));
  c->target = ref;
  ck_assert_vat_ok(vat_host_send(cref, use_and_revoke, NULL));
  test_quiesce(sys);
  ck_assert_uint_eq(atomic_load(&t->hits), 1);
  vat_ref *a, *b;
  ck_assert_vat_err(vat_caretaker_new(NULL, ref, &a, &b), VAT_ENOTINTURN);
  ck_assert_vat_err(vat_host_caretaker_new(sys, NULL, &a, &b), VAT_EINVAL);
}
END_TEST

/* Revocation while many vats send through one forwarder. A second
 * caretaker in the same vat is a probe: what it forwards after the
 * revocation reaches the target after everything the first forwarded
 * before it (one vat to another: commit order), so the count the probe
 * reads is final. */
enum { LOAD_SENDERS = 8, LOAD_EACH = 5000 / TEST_SCALE };

typedef struct hub {
  vat_ref *target, *fwd, *revoker, *probe, *probe_revoker;
} hub;

static void hub_setup(vat_turn *turn, void *state, void *arg, vat_resolver *r) {
  (void)arg;
  hub *h = state;
  expect_vat_ok(vat_caretaker_new(turn, h->target, &h->fwd, &h->revoker));
  expect_vat_ok(
      vat_caretaker_new(turn, h->target, &h->probe, &h->probe_revoker));
  expect_vat_ok(vat_resolve(turn, r, vat_bool(true)));
}

typedef struct load_sender {
  vat_ref *to;
  int sent;
  _Atomic uint64_t *done;
} load_sender;

static void send_hits(vat_turn *turn, void *state, void *arg) {
  (void)arg;
  load_sender *s = state;
  for (int i = 0; i < 7 && s->sent < LOAD_EACH; i++, s->sent++)
    expect_vat_ok(vat_send_msg(turn, s->to, sel("hit"), vat_null()));
  if (s->sent < LOAD_EACH)
    expect_vat_ok(vat_send(turn, vat_self(turn), send_hits, NULL));
  else
    atomic_fetch_add_explicit(s->done, 1, memory_order_release);
}

START_TEST(revocation_under_load_is_final) {
  vat_system *sys = test_system(2);
  static _Atomic uint64_t done;
  target *t;
  hub *h;
  vat_ref *href;
  ck_assert_vat_ok(vat_host_spawn(
      sys, &(vat_entity_def){.state_size = sizeof(hub)}, &href, (void **)&h));
  h->target = spawn_target(sys, &t);
  vat_promise *ready;
  ck_assert_vat_ok(vat_host_call(href, hub_setup, NULL, 0, &ready));
  ck_assert_vat_ok(vat_promise_wait(ready, 10, NULL));
  for (int i = 0; i < LOAD_SENDERS; i++) {
    vat_ref *ref;
    load_sender *s;
    ck_assert_vat_ok(vat_host_spawn(
        sys, &(vat_entity_def){.state_size = sizeof(load_sender)}, &ref,
        (void **)&s));
    *s = (load_sender){.to = h->fwd, .done = &done};
    ck_assert_vat_ok(vat_host_send(ref, send_hits, NULL));
  }
  /* Revoke under load: once hits have started to arrive. */
  ck_assert(test_wait_u64(&t->hits, 1, 10));
  request(h->revoker, "revoke", vat_null(), VAT_OK);
  assert_error(request(h->fwd, "echo", vat_null(), VAT_EBROKEN),
               vat_atom_revoked());
  int64_t at_revocation = -1;
  ck_assert_vat_ok(vat_get_int(request(h->probe, "count", vat_null(), VAT_OK),
                               &at_revocation));
  ck_assert(test_wait_u64(&done, LOAD_SENDERS, 30));
  test_quiesce(sys);
  ck_assert_uint_eq(atomic_load(&t->hits), (uint64_t)at_revocation);
  ck_assert_uint_le(atomic_load(&t->hits), LOAD_SENDERS * LOAD_EACH);
}
END_TEST

/* --- Sealer / unsealer ---------------------------------------------------- */

START_TEST(sealed_box_opens_only_with_its_unsealer) {
  vat_sealer *s1, *s2;
  vat_unsealer *u1, *u2;
  ck_assert_vat_ok(vat_sealer_pair_new(&s1, &u1));
  ck_assert_vat_ok(vat_sealer_pair_new(&s2, &u2));
  vat_value fields[2] = {vat_string("secret"), vat_int(7)};
  vat_value content = vat_list(fields, 2), box, out;
  ck_assert_vat_ok(vat_seal(s1, content, &box));
  ck_assert_vat_ok(vat_unseal(u1, box, &out));
  ck_assert(vat_equal(out, content));
  /* Another pair's unsealer, a copy of the box, other values: refused. */
  ck_assert_vat_err(vat_unseal(u2, box, &out), VAT_ENOTFOUND);
  vat_value copy = vat_bytes(vat_bytes_data(box), vat_bytes_len(box));
  ck_assert(vat_equal(copy, box));
  ck_assert_vat_err(vat_unseal(u1, copy, &out), VAT_ENOTFOUND);
  ck_assert_vat_err(vat_unseal(u1, content, &out), VAT_ENOTFOUND);
  ck_assert_vat_err(vat_unseal(u1, vat_null(), &out), VAT_ENOTFOUND);
  /* The box shows nothing of what it holds. */
  char buf[128];
  vat_format(box, buf, sizeof buf);
  ck_assert_ptr_null(strstr(buf, "secret"));
  ck_assert_vat_err(vat_seal(NULL, content, &box), VAT_EINVAL);
  ck_assert_vat_err(vat_unseal(NULL, box, &out), VAT_EINVAL);
}
END_TEST

START_TEST(boxes_survive_collections_and_garbage_goes) {
  vat_sealer *s;
  vat_unsealer *u;
  ck_assert_vat_ok(vat_sealer_pair_new(&s, &u));
  static vat_value kept[64];
  for (int i = 0; i < 64; i++)
    ck_assert_vat_ok(vat_seal(s, vat_int(i), &kept[i]));
  /* The garbage boxes hold strings; a disappearing link to each (in
   * memory the collector does not scan) is cleared once the string is
   * freed, which needs the sealer to have forgotten its dropped box. */
  enum { GARBAGE = 20000 / TEST_SCALE };
  void **links = GC_MALLOC_ATOMIC(GARBAGE * sizeof *links);
  ck_assert_ptr_nonnull(links);
  for (int i = 0; i < GARBAGE; i++) {
    vat_value garbage, content = vat_string("garbage");
    ck_assert_vat_ok(vat_seal(s, content, &garbage));
    links[i] = GC_base((void *)content.as.obj);
    ck_assert_int_eq(GC_general_register_disappearing_link(&links[i], links[i]),
                     0);
  }
  for (int i = 0; i < 4; i++) {
    GC_gcollect();
    GC_invoke_finalizers();
  }
  for (int i = 0; i < 64; i++) {
    vat_value out;
    ck_assert_vat_ok(vat_unseal(u, kept[i], &out));
    ck_assert(vat_equal(out, vat_int(i)));
  }
#if !VAT_GC_NO_COLLECT
  int cleared = 0;
  for (int i = 0; i < GARBAGE; i++)
    cleared += links[i] == NULL;
  /* Conservative scanning may keep a few alive through stale words. */
  ck_assert_msg(cleared > GARBAGE * 9 / 10, "%d of %d contents freed", cleared,
                GARBAGE);
#endif
}
END_TEST

/* A box travels in a message; the receiving vat holds the unsealer. */
typedef struct opener {
  vat_unsealer *unsealer;
  _Atomic uint64_t opened, refused;
} opener;

static void opener_receive(vat_turn *turn, void *state,
                           const vat_atom *selector, vat_value value) {
  (void)turn;
  (void)selector;
  opener *o = state;
  vat_value content;
  if (vat_unseal(o->unsealer, value, &content) == VAT_OK &&
      vat_equal(content, vat_string("for you")))
    atomic_fetch_add(&o->opened, 1);
  else
    atomic_fetch_add(&o->refused, 1);
}

START_TEST(box_travels_between_vats) {
  vat_system *sys = test_system(2);
  vat_sealer *s, *other;
  vat_unsealer *u, *other_u;
  ck_assert_vat_ok(vat_sealer_pair_new(&s, &u));
  ck_assert_vat_ok(vat_sealer_pair_new(&other, &other_u));
  opener *o;
  vat_ref *ref;
  ck_assert_vat_ok(
      vat_host_spawn(sys,
                     &(vat_entity_def){.state_size = sizeof(opener),
                                       .receive = opener_receive},
                     &ref, (void **)&o));
  o->unsealer = u;
  vat_value good, bad;
  ck_assert_vat_ok(vat_seal(s, vat_string("for you"), &good));
  ck_assert_vat_ok(vat_seal(other, vat_string("for you"), &bad));
  ck_assert_vat_ok(vat_host_send_msg(ref, sel("box"), good));
  ck_assert_vat_ok(vat_host_send_msg(ref, sel("box"), bad));
  test_quiesce(sys);
  ck_assert_uint_eq(atomic_load(&o->opened), 1);
  ck_assert_uint_eq(atomic_load(&o->refused), 1);
}
END_TEST

/* --- Facet ---------------------------------------------------------------- */

START_TEST(facet_lets_through_only_its_selectors) {
  vat_system *sys = test_system(2);
  target *t;
  vat_ref *ref = spawn_target(sys, &t), *reader;
  const vat_atom *allowed[] = {sel("read"), sel("hit")};
  ck_assert_vat_ok(vat_host_facet_new(sys, ref, allowed, 2, &reader));
  ck_assert(vat_equal(request(reader, "read", vat_int(1), VAT_OK), vat_int(1)));
  vat_value v = request(reader, "write", vat_int(2), VAT_EBROKEN);
  assert_error(v, vat_atom_refused());
  ck_assert(vat_is_atom(vat_error_payload(v), sel("write")));
  ck_assert_vat_ok(vat_host_send_msg(reader, sel("hit"), vat_null()));
  ck_assert_vat_ok(vat_host_send_msg(reader, sel("ping"), vat_null()));
  /* In order behind the two above: once answered, both were handled. */
  ck_assert(vat_equal(request(reader, "read", vat_int(3), VAT_OK), vat_int(3)));
  test_quiesce(sys);
  ck_assert_uint_eq(atomic_load(&t->hits), 1);
  ck_assert_uint_eq(atomic_load(&t->pings), 0);
  ck_assert_vat_err(vat_host_facet_new(sys, ref, NULL, 1, &reader), VAT_EINVAL);
}
END_TEST

/* --- Membrane ------------------------------------------------------------- */

START_TEST(membrane_wraps_both_ways_and_revokes_all) {
  vat_system *sys = test_system(2);
  target *t, *in, *out;
  vat_ref *ref = spawn_target(sys, &t), *oref;
  t->inner = spawn_target(sys, &in);
  oref = spawn_target(sys, &out);
  vat_ref *wrapped, *revoker;
  ck_assert_vat_ok(vat_host_membrane_new(sys, ref, &wrapped, &revoker));

  /* A ref the target hands out arrives wrapped, and works. */
  vat_ref *inner =
      vat_value_ref(request(wrapped, "get_inner", vat_null(), VAT_OK));
  ck_assert_ptr_nonnull(inner);
  ck_assert_ptr_ne(inner, t->inner);
  ck_assert(vat_equal(request(inner, "echo", vat_int(9), VAT_OK), vat_int(9)));
  /* Sent back in, it is the inner ref again. */
  ck_assert(
      vat_equal(request(wrapped, "is_inner", vat_ref_value(inner), VAT_OK),
                vat_bool(true)));
  /* A ref passed in arrives wrapped, and works from the inside. */
  ck_assert(
      vat_equal(request(wrapped, "call_back", vat_ref_value(oref), VAT_OK),
                vat_bool(true)));
  ck_assert(test_wait_u64(&out->pings, 1, 10));
  ck_assert_ptr_nonnull(t->stored);
  ck_assert_ptr_ne(t->stored, oref);
  /* Inside lists and records too; maps cannot be searched: refused. */
  vat_value items[1] = {vat_ref_value(inner)};
  vat_value list = vat_list(items, 1);
  vat_value back = request(wrapped, "echo", list, VAT_OK);
  ck_assert_ptr_eq(vat_value_ref(vat_at(back, 0)), inner);
  vat_value key = vat_int(1);
  assert_error(request(wrapped, "echo", vat_map(&key, &key, 1), VAT_EBROKEN),
               vat_atom_refused());

  ck_assert(vat_equal(request(revoker, "revoke", vat_null(), VAT_OK),
                      vat_bool(true)));
  for (int i = 0; i < 10; i++) {
    ck_assert_vat_ok(vat_host_send_msg(wrapped, sel("hit"), vat_null()));
    ck_assert_vat_ok(vat_host_send_msg(inner, sel("hit"), vat_null()));
  }
  assert_error(request(wrapped, "echo", vat_int(1), VAT_EBROKEN),
               vat_atom_revoked());
  assert_error(request(inner, "echo", vat_int(1), VAT_EBROKEN),
               vat_atom_revoked());
  /* The inside's wrapped ref to the outside is cut off too. */
  ck_assert_vat_ok(vat_host_send_msg(ref, sel("ping_stored"), vat_null()));
  test_quiesce(sys);
  ck_assert_uint_eq(atomic_load(&t->hits), 0);
  ck_assert_uint_eq(atomic_load(&in->hits), 0);
  ck_assert_uint_eq(atomic_load(&out->pings), 1);
}
END_TEST

/* Refs inside errors and records cross a membrane wrapped like bare refs
 * (a ref that slipped through unwrapped would escape revocation); a
 * promise cannot be searched for refs, so it is refused. */
START_TEST(membrane_wraps_refs_in_errors_and_records) {
  vat_system *sys = test_system(2);
  target *t, *in;
  vat_ref *ref = spawn_target(sys, &t);
  t->inner = spawn_target(sys, &in);
  vat_ref *wrapped, *revoker;
  ck_assert_vat_ok(vat_host_membrane_new(sys, ref, &wrapped, &revoker));

  vat_value err = request(wrapped, "get_inner_in_error", vat_null(), VAT_OK);
  ck_assert(vat_error_code(err) == sel("carried"));
  vat_ref *via_error = vat_value_ref(vat_error_payload(err));
  ck_assert_ptr_nonnull(via_error);
  ck_assert_msg(via_error != t->inner, "a ref in an error leaked through");
  vat_value rec = request(wrapped, "get_inner_in_record", vat_null(), VAT_OK);
  ck_assert(vat_record_label(rec) == sel("box"));
  vat_ref *via_record = vat_value_ref(vat_at(rec, 0));
  ck_assert_ptr_nonnull(via_record);
  ck_assert_msg(via_record != t->inner, "a ref in a record leaked through");
  /* Both are proxies that work, and sent back in they are the inner ref. */
  ck_assert(
      vat_equal(request(via_error, "echo", vat_int(3), VAT_OK), vat_int(3)));
  vat_value back = vat_error(sel("carried"), vat_ref_value(via_record));
  vat_value echoed = request(wrapped, "echo", back, VAT_OK);
  ck_assert_ptr_eq(vat_value_ref(vat_error_payload(echoed)), via_record);
  ck_assert(
      vat_equal(request(wrapped, "is_inner", vat_ref_value(via_error), VAT_OK),
                vat_bool(true)));
  /* A proxy reaching the membrane from the side its target is not on (the
   * test reads the inside's proxy straight from its state) is not
   * unwrapped there: only proxies whose targets live on the destination
   * side are. Unwrapped, it would hand the inside a bare outside ref. */
  target *out;
  vat_ref *oref = spawn_target(sys, &out);
  ck_assert(
      vat_equal(request(wrapped, "call_back", vat_ref_value(oref), VAT_OK),
                vat_bool(true)));
  vat_ref *inside_proxy = t->stored;
  ck_assert_ptr_ne(inside_proxy, oref);
  ck_assert(vat_equal(
      request(wrapped, "call_back", vat_ref_value(inside_proxy), VAT_OK),
      vat_bool(true)));
  ck_assert_msg(t->stored != oref, "a proxy crossing the wrong way was "
                                   "unwrapped to the bare outside ref");
  ck_assert(test_wait_u64(&out->pings, 2, 10));
  /* A promise is refused as unwrappable. */
  vat_promise *p;
  vat_resolver *r;
  ck_assert_vat_ok(vat_promise_new(&p, &r));
  assert_error(request(wrapped, "echo", vat_promise_value(p), VAT_EBROKEN),
               vat_atom_refused());

  ck_assert(vat_equal(request(revoker, "revoke", vat_null(), VAT_OK),
                      vat_bool(true)));
  for (int i = 0; i < 5; i++) {
    ck_assert_vat_ok(vat_host_send_msg(via_error, sel("hit"), vat_null()));
    ck_assert_vat_ok(vat_host_send_msg(via_record, sel("hit"), vat_null()));
  }
  test_quiesce(sys);
  ck_assert_uint_eq(atomic_load(&in->hits), 0);
}
END_TEST

typedef struct holder {
  vat_ref *target, *wrapped, *revoker;
} holder;

static void make_membrane(vat_turn *turn, void *state, void *arg) {
  (void)arg;
  holder *h = state;
  expect_vat_ok(vat_membrane_new(turn, h->target, &h->wrapped, &h->revoker));
  expect_vat_ok(vat_send_msg(turn, h->wrapped, sel("hit"), vat_null()));
  expect_vat_ok(vat_revoke(turn, h->revoker));
  expect_vat_ok(vat_send_msg(turn, h->wrapped, sel("hit"), vat_null()));
}

START_TEST(membrane_made_in_a_turn) {
  vat_system *sys = test_system(2);
  target *t;
  holder *h;
  vat_ref *href;
  ck_assert_vat_ok(
      vat_host_spawn(sys, &(vat_entity_def){.state_size = sizeof(holder)},
                     &href, (void **)&h));
  h->target = spawn_target(sys, &t);
  ck_assert_vat_ok(vat_host_send(href, make_membrane, NULL));
  test_quiesce(sys);
  ck_assert_uint_eq(atomic_load(&t->hits), 1);
}
END_TEST

/* --- Requests to vats that die ------------------------------------------
 * A message-form request must not wait for ever on a dead peer, any more
 * than vat_call does: it breaks with the callee's exit reason when the
 * callee has ended or ends before answering, through wrappers too. */

static vat_value doomed_reason(void) {
  return vat_reason_error(sel("doomed"), vat_int(13));
}

/* "die" requests end the callee without an answer; "answer_then_die"
 * answers, then ends it in the same turn; anything else is answered. */
static void doomed_receive(vat_turn *turn, void *state,
                           const vat_atom *selector, vat_value value) {
  (void)state;
  vat_value payload = vat_null();
  vat_ref *reply = NULL;
  (void)vat_request_parse(value, &payload, &reply);
  if (selector == sel("die")) {
    expect_vat_ok(vat_fail(turn, doomed_reason()));
    return;
  }
  if (reply != NULL)
    expect_vat_ok(vat_reply(turn, reply, payload));
  if (selector == sel("answer_then_die"))
    expect_vat_ok(vat_exit(turn, vat_self(turn), doomed_reason()));
}

static const vat_entity_def doomed_def = {.receive = doomed_receive};

enum wrapper { W_NONE, W_FACET, W_CARETAKER, W_MEMBRANE, W_COUNT };
enum fate { F_DIES, F_DEAD, F_ANSWERS_THEN_DIES, F_COUNT };

static const char *const wrapper_names[] = {"none", "facet", "caretaker",
                                            "membrane"};
static const char *const fate_names[] = {"dies while handling it",
                                         "already dead", "answers, then dies"};

/* Wraps `target` as the loop index says; each wrapper in a vat of its own
 * that outlives the target. */
static vat_ref *wrap_ref(vat_system *sys, vat_ref *target, int wrapper) {
  static const vat_atom *allowed[3];
  allowed[0] = sel("die");
  allowed[1] = sel("ask");
  allowed[2] = sel("answer_then_die");
  vat_ref *out = target, *revoker;
  switch (wrapper) {
  case W_FACET:
    ck_assert_vat_ok(vat_host_facet_new(sys, target, allowed, 3, &out));
    break;
  case W_CARETAKER:
    ck_assert_vat_ok(vat_host_caretaker_new(sys, target, &out, &revoker));
    break;
  case W_MEMBRANE:
    ck_assert_vat_ok(vat_host_membrane_new(sys, target, &out, &revoker));
    break;
  }
  return out;
}

static void wait_ended(vat_ref *ref) {
  for (int i = 0; i < 30000 && !vat_ref_is_dead(ref); i++)
    test_sleep(0.001);
  ck_assert(vat_ref_is_dead(ref));
}

static void assert_reason(vat_value got, vat_value want, const char *what) {
  char g[128], w[128];
  vat_format(got, g, sizeof g);
  vat_format(want, w, sizeof w);
  ck_assert_msg(vat_equal(got, want), "%s: broke with %s, expected %s", what, g,
                w);
}

/* Host-form requests, no timeout, for each wrapper and each fate. */
START_TEST(request_breaks_when_the_callee_dies) {
  int wrapper = _i % W_COUNT, fate = _i / W_COUNT;
  char what[128];
  snprintf(what, sizeof what, "wrapper %s, callee %s", wrapper_names[wrapper],
           fate_names[fate]);
  vat_system *sys = test_system(2);
  vat_ref *callee;
  ck_assert_vat_ok(vat_host_spawn(sys, &doomed_def, &callee, NULL));
  vat_ref *to = wrap_ref(sys, callee, wrapper);
  if (fate == F_DEAD) {
    ck_assert_vat_ok(vat_host_exit(callee, doomed_reason()));
    wait_ended(callee);
  }
  const char *selector = fate == F_DIES   ? "die"
                         : fate == F_DEAD ? "ask"
                                          : "answer_then_die";
  vat_promise *p;
  vat_value v = vat_null();
  ck_assert_vat_ok(vat_host_request(to, sel(selector), vat_int(5), 0, &p));
  int rc = vat_promise_wait(p, 10, &v);
  if (fate == F_ANSWERS_THEN_DIES) {
    /* The answer was sent before the end: it wins. */
    ck_assert_msg(rc == VAT_OK, "%s: %s", what, vat_err_name(rc));
    ck_assert(vat_equal(v, vat_int(5)));
  } else {
    ck_assert_msg(rc == VAT_EBROKEN, "%s: the request %s", what,
                  rc == VAT_ETIMEDOUT ? "never settled" : vat_err_name(rc));
    assert_reason(v, doomed_reason(), what);
  }
  wait_ended(callee);
  test_quiesce(sys);
}
END_TEST

/* The same from a turn: the caller's `when` sees the break. */
typedef struct dasker {
  vat_ref *to;
  _Atomic uint64_t settled;
  bool resolved;
  vat_value value;
} dasker;

static void asker_when(vat_turn *turn, void *state, void *ctx, bool resolved,
                       vat_value value) {
  (void)turn;
  (void)ctx;
  dasker *a = state;
  a->resolved = resolved;
  a->value = value;
  atomic_store_explicit(&a->settled, 1, memory_order_release);
}

static void asker_go(vat_turn *turn, void *state, void *arg) {
  dasker *a = state;
  vat_promise *p;
  expect_vat_ok(
      vat_request(turn, a->to, sel((const char *)arg), vat_int(9), 0, &p));
  expect_vat_ok(vat_when(turn, p, asker_when, NULL));
}

START_TEST(request_from_a_turn_breaks_when_the_callee_dies) {
  int wrapper = _i;
  vat_system *sys = test_system(2);
  vat_ref *callee;
  ck_assert_vat_ok(vat_host_spawn(sys, &doomed_def, &callee, NULL));
  dasker *a;
  vat_ref *caller = test_spawn(sys, sizeof *a, (void **)&a);
  a->to = wrap_ref(sys, callee, wrapper);
  ck_assert_vat_ok(vat_host_send(caller, asker_go, (void *)"die"));
  ck_assert_msg(test_wait_u64(&a->settled, 1, 10),
                "wrapper %s: the request never settled",
                wrapper_names[wrapper]);
  ck_assert(!a->resolved);
  assert_reason(a->value, doomed_reason(), wrapper_names[wrapper]);
  test_quiesce(sys);
}
END_TEST

/* Many requests in flight when the callee dies, through a random wrapper:
 * those it handled before its end resolve, every other one breaks with
 * its reason, and none is left waiting. */
START_TEST(requests_in_flight_when_the_callee_dies) {
  uint64_t rng = test_seed("requests in flight when the callee dies");
  for (int round = 0; round < 20; round++) {
    vat_system *sys = test_system(2);
    vat_ref *callee;
    ck_assert_vat_ok(vat_host_spawn(sys, &doomed_def, &callee, NULL));
    int wrapper = (int)test_rand_between(&rng, 0, W_COUNT - 1);
    vat_ref *to = wrap_ref(sys, callee, wrapper);
    int n = (int)test_rand_between(&rng, 20, 400);
    int die_at = (int)test_rand_between(&rng, 0, (uint64_t)n - 1);
    vat_promise **ps = GC_MALLOC((size_t)n * sizeof *ps);
    for (int i = 0; i < n; i++)
      ck_assert_vat_ok(vat_host_request(to, sel(i == die_at ? "die" : "ask"),
                                        vat_int(i), 0, &ps[i]));
    for (int i = 0; i < n; i++) {
      vat_value v = vat_null();
      int rc = vat_promise_wait(ps[i], 30, &v);
      if (i < die_at) {
        ck_assert_msg(rc == VAT_OK, "round %d (%s): request %d of %d: %s",
                      round, wrapper_names[wrapper], i, n, vat_err_name(rc));
        ck_assert(vat_equal(v, vat_int(i)));
      } else {
        ck_assert_msg(rc == VAT_EBROKEN,
                      "round %d (%s): request %d of %d (death at %d): %s",
                      round, wrapper_names[wrapper], i, n, die_at,
                      vat_err_name(rc));
        assert_reason(v, doomed_reason(), wrapper_names[wrapper]);
      }
    }
    test_quiesce(sys);
  }
}
END_TEST

Suite *test_caps_suite(void) {
  Suite *s = suite_create("caps");
  TCase *tc = test_case("caps", 60);
  tcase_add_test(tc, request_answered_and_timed_out);
  tcase_add_test(tc, request_from_a_turn);
  tcase_add_test(tc, caretaker_forwards_until_revoked);
  tcase_add_test(tc, caretaker_made_in_a_turn);
  tcase_add_test(tc, revocation_under_load_is_final);
  tcase_add_test(tc, sealed_box_opens_only_with_its_unsealer);
  tcase_add_test(tc, boxes_survive_collections_and_garbage_goes);
  tcase_add_test(tc, box_travels_between_vats);
  tcase_add_test(tc, facet_lets_through_only_its_selectors);
  tcase_add_test(tc, membrane_wraps_both_ways_and_revokes_all);
  tcase_add_test(tc, membrane_made_in_a_turn);
  tcase_add_test(tc, membrane_wraps_refs_in_errors_and_records);
  suite_add_tcase(s, tc);
  TCase *dead = test_case("dead callee", 60);
  tcase_add_loop_test(dead, request_breaks_when_the_callee_dies, 0,
                      W_COUNT * F_COUNT);
  tcase_add_loop_test(dead, request_from_a_turn_breaks_when_the_callee_dies, 0,
                      W_COUNT);
  tcase_add_test(dead, requests_in_flight_when_the_callee_dies);
  suite_add_tcase(s, dead);
  return s;
}
