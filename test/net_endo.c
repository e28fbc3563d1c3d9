/* libvat against the real Endo: listens on 127.0.0.1, runs
 * test/captp/endo/peer.js (@endo/captp, pinned by its lock file) as the
 * other side, calls its objects, has it call ours, and checks both (calls
 * pipelined on each side's bootstrap question before it is answered
 * among them: the peer holds our bootstrap question until our calls on it
 * have arrived, and reports what it saw on the wire; a chain pipelined on
 * an answer ref; a lone surrogate from Endo failing only its call); then
 * twice more with a call pending: Endo disconnecting, and the Endo process
 * killed.
 *
 *   net-endo NODE PEER_DIR
 *
 * Exits 77 (skipped) when NODE is missing or PEER_DIR has no
 * node_modules (`npm ci` there brings them). Bounded: every wait has a
 * deadline and the peer exits on its own after 20 s. */
#define GC_THREADS 1
#include <gc/gc.h>

#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "vat.h"
#include "vat/caps.h"
#include "vat/net.h"

#define WAIT_S 15.0

static int failures;

#define CHECK(cond, ...)                                                       \
  do {                                                                         \
    if (!(cond)) {                                                             \
      fprintf(stderr, "net-endo: %s:%d: ", __FILE__, __LINE__);                \
      fprintf(stderr, __VA_ARGS__);                                            \
      fputc('\n', stderr);                                                     \
      failures++;                                                              \
    }                                                                          \
  } while (0)

static const vat_atom *sel(const char *name) {
  return vat_atom_intern(name);
}

/* --- The C object Endo calls -------------------------------------------- */

static void called_back(vat_turn *turn, void *state, void *ctx, bool resolved,
                        vat_value value) {
  (void)state;
  if (resolved)
    vat_reply(turn, ctx, value);
  else
    vat_reply_error(turn, ctx, value);
}

/* Reasons of the table in vat/net.h that JS has no name for, by a name
 * the peer passes. */
static vat_value reason_named(const char *name) {
  if (name != NULL && strcmp(name, "refused") == 0)
    return vat_error(vat_atom_refused(), vat_string("echo"));
  if (name != NULL && strcmp(name, "killed") == 0)
    return vat_atom_value(vat_atom_killed());
  if (name != NULL && strcmp(name, "custom") == 0)
    return vat_error(sel("NotFound"), vat_string("no such key"));
  return vat_int(42);
}

static void served_receive(vat_turn *turn, void *state,
                           const vat_atom *selector, vat_value value) {
  (void)state;
  vat_value args;
  vat_ref *reply;
  if (!vat_request_parse(value, &args, &reply))
    return;
  if (selector == sel("add")) {
    int64_t a = 0, b = 0;
    vat_get_int(vat_at(args, 0), &a);
    vat_get_int(vat_at(args, 1), &b);
    vat_reply(turn, reply, vat_int(a + b));
  } else if (selector == sel("echo")) {
    vat_reply(turn, reply, vat_at(args, 0));
  } else if (selector == sel("self")) {
    vat_reply(turn, reply, vat_ref_value(vat_self(turn)));
  } else if (selector == sel("fail")) {
    vat_reply_error(turn, reply,
                    vat_error(sel("RangeError"), vat_string("too big")));
  } else if (selector == sel("defer") || selector == sel("defer_break")) {
    vat_promise *later;
    vat_resolver *r;
    vat_promise_new(&later, &r);
    vat_value pv = vat_promise_value(later);
    vat_reply(turn, reply, vat_list(&pv, 1));
    if (selector == sel("defer"))
      vat_resolve(turn, r, vat_at(args, 0));
    else
      vat_break(turn, r, vat_error(sel("Error"), vat_at(args, 0)));
  } else if (selector == sel("fail_with") || selector == sel("defer_with")) {
    /* The same libvat reason for the answer, or for a promise in it. */
    vat_value reason = reason_named(vat_string_data(vat_at(args, 0)));
    if (selector == sel("fail_with")) {
      vat_reply_error(turn, reply, reason);
    } else {
      vat_promise *later;
      vat_resolver *r;
      vat_promise_new(&later, &r);
      vat_value pv = vat_promise_value(later);
      vat_reply(turn, reply, vat_list(&pv, 1));
      vat_break(turn, r, reason);
    }
  } else if (selector == sel("revoked")) {
    /* A caretaker of this object, revoked before the peer can call it
     * (the revoker's message is queued ahead of any call). */
    vat_ref *forwarder, *revoker;
    if (vat_caretaker_new(turn, vat_self(turn), &forwarder, &revoker) ==
            VAT_OK &&
        vat_revoke(turn, revoker) == VAT_OK)
      vat_reply(turn, reply, vat_ref_value(forwarder));
  } else if (selector == sel("facet")) {
    const vat_atom *add = sel("add");
    vat_ref *facet;
    if (vat_facet_new(turn, vat_self(turn), &add, 1, &facet) == VAT_OK)
      vat_reply(turn, reply, vat_ref_value(facet));
  } else if (selector == sel("call_back")) {
    vat_value ping = vat_string("from server");
    vat_promise *p;
    if (vat_request(turn, vat_value_ref(vat_at(args, 0)), sel("ping"),
                    vat_list(&ping, 1), 0, &p) == VAT_OK)
      vat_when(turn, p, called_back, reply);
  } else {
    vat_reply_error(turn, reply, vat_error(sel("Error"), vat_string("no")));
  }
}

static void pinged_receive(vat_turn *turn, void *state,
                           const vat_atom *selector, vat_value value) {
  (void)state;
  (void)selector;
  vat_value args;
  vat_ref *reply;
  if (!vat_request_parse(value, &args, &reply))
    return;
  char text[128];
  snprintf(text, sizeof text, "pong: %s", vat_string_data(vat_at(args, 0)));
  vat_reply(turn, reply, vat_string(text));
}

/* A vat pipelining getCounter().incr(1n) on Endo, without waiting for
 * the counter; the answer settles `done`. */
typedef struct piper {
  vat_ref *endo;
  vat_resolver *done;
} piper;

static void piped(vat_turn *turn, void *state, void *ctx, bool resolved,
                  vat_value value) {
  piper *p = state;
  (void)ctx;
  if (resolved)
    vat_resolve(turn, p->done, value);
  else
    vat_break(turn, p->done, value);
}

static void pipe_calls(vat_turn *turn, void *state, void *arg) {
  piper *p = state;
  (void)arg;
  vat_promise *counter, *incr;
  vat_ref *answer;
  vat_value one = vat_int(1);
  if (vat_conn_pipeline(turn, p->endo, sel("getCounter"), vat_list(NULL, 0), 0,
                        &counter, &answer) == VAT_OK &&
      vat_request(turn, answer, sel("incr"), vat_list(&one, 1), 0, &incr) ==
          VAT_OK)
    vat_when(turn, incr, piped, NULL);
}

static int ask(vat_ref *to, const char *method, vat_value *args, size_t n,
               double timeout_s, vat_value *out);
static const char *show(vat_value v);

/* A vat chaining E(E(endo).echo(endo)).makeAdder(100), then plus(23) on
 * that and add(1, 2) on the first answer, all before any answer. */
typedef struct chainer {
  vat_ref *endo;
  vat_resolver *plus, *add;
} chainer;

static void chain_plussed(vat_turn *turn, void *state, void *ctx, bool resolved,
                          vat_value value) {
  (void)ctx;
  vat_resolver *r = ((chainer *)state)->plus;
  if (resolved)
    vat_resolve(turn, r, value);
  else
    vat_break(turn, r, value);
}

static void chain_added(vat_turn *turn, void *state, void *ctx, bool resolved,
                        vat_value value) {
  (void)ctx;
  vat_resolver *r = ((chainer *)state)->add;
  if (resolved)
    vat_resolve(turn, r, value);
  else
    vat_break(turn, r, value);
}

static void chain_calls(vat_turn *turn, void *state, void *arg) {
  chainer *ch = state;
  (void)arg;
  vat_promise *echoed, *adder, *plus, *add;
  vat_ref *first, *second;
  vat_value e = vat_ref_value(ch->endo), base = vat_int(100), x = vat_int(23);
  vat_value one_two[2] = {vat_int(1), vat_int(2)};
  if (vat_conn_pipeline(turn, ch->endo, sel("echo"), vat_list(&e, 1), 0,
                        &echoed, &first) != VAT_OK ||
      vat_conn_pipeline(turn, first, sel("makeAdder"), vat_list(&base, 1), 0,
                        &adder, &second) != VAT_OK)
    return;
  if (vat_request(turn, second, sel("plus"), vat_list(&x, 1), 0, &plus) ==
      VAT_OK)
    vat_when(turn, plus, chain_plussed, NULL);
  if (vat_request(turn, first, sel("add"), vat_list(one_two, 2), 0, &add) ==
      VAT_OK)
    vat_when(turn, add, chain_added, NULL);
}

static void check_chained(vat_system *sys, vat_ref *endo) {
  chainer *ch;
  vat_ref *ref;
  vat_promise *plus, *add;
  vat_host_spawn(sys, &(vat_entity_def){.state_size = sizeof(chainer)}, &ref,
                 (void **)&ch);
  ch->endo = endo;
  vat_promise_new(&plus, &ch->plus);
  vat_promise_new(&add, &ch->add);
  vat_host_send(ref, chain_calls, NULL);
  vat_value v;
  int rc = vat_promise_wait(plus, WAIT_S, &v);
  CHECK(rc == VAT_OK && vat_equal(v, vat_int(123)),
        "E(E(endo).echo(endo)).makeAdder(100), plus(23): %s %s",
        vat_err_name(rc), show(v));
  rc = vat_promise_wait(add, WAIT_S, &v);
  CHECK(rc == VAT_OK && vat_equal(v, vat_int(3)),
        "add(1, 2) on E(endo).echo(endo): %s %s", vat_err_name(rc), show(v));
}

/* A vat calling Endo's bootstrap through vat_conn_bootstrap_ref before
 * the bootstrap is answered: add(40, 2), and makeAdder(100).plus(23)
 * pipelined on that. */
typedef struct boot_piper {
  vat_ref *boot;
  vat_resolver *sum, *plus;
} boot_piper;

static void settle(vat_turn *turn, vat_resolver *r, bool resolved,
                   vat_value value) {
  if (resolved)
    vat_resolve(turn, r, value);
  else
    vat_break(turn, r, value);
}

static void boot_summed(vat_turn *turn, void *state, void *ctx, bool resolved,
                        vat_value value) {
  (void)ctx;
  settle(turn, ((boot_piper *)state)->sum, resolved, value);
}

static void boot_plussed(vat_turn *turn, void *state, void *ctx, bool resolved,
                         vat_value value) {
  (void)ctx;
  settle(turn, ((boot_piper *)state)->plus, resolved, value);
}

static void pipe_on_bootstrap(vat_turn *turn, void *state, void *arg) {
  boot_piper *bp = state;
  (void)arg;
  vat_value args[2] = {vat_int(40), vat_int(2)};
  vat_promise *sum, *adder, *plus;
  vat_ref *answer;
  if (vat_request(turn, bp->boot, sel("add"), vat_list(args, 2), 0, &sum) ==
      VAT_OK)
    vat_when(turn, sum, boot_summed, NULL);
  vat_value base = vat_int(100), x = vat_int(23);
  if (vat_conn_pipeline(turn, bp->boot, sel("makeAdder"), vat_list(&base, 1), 0,
                        &adder, &answer) == VAT_OK &&
      vat_request(turn, answer, sel("plus"), vat_list(&x, 1), 0, &plus) ==
          VAT_OK)
    vat_when(turn, plus, boot_plussed, NULL);
}

/* Sends the calls on Endo's bootstrap question, right after accepting
 * (the peer holds the question until they come), and checks them. */
static void check_bootstrap_pipelined(vat_system *sys, vat_conn *conn) {
  boot_piper *bp;
  vat_ref *ref;
  vat_promise *sum, *plus;
  vat_host_spawn(sys, &(vat_entity_def){.state_size = sizeof(boot_piper)}, &ref,
                 (void **)&bp);
  bp->boot = vat_conn_bootstrap_ref(conn);
  vat_promise_new(&sum, &bp->sum);
  vat_promise_new(&plus, &bp->plus);
  vat_host_send(ref, pipe_on_bootstrap, NULL);
  vat_value v;
  int rc = vat_promise_wait(sum, WAIT_S, &v);
  CHECK(rc == VAT_OK && vat_equal(v, vat_int(42)),
        "add on the bootstrap question: %s %s", vat_err_name(rc), show(v));
  rc = vat_promise_wait(plus, WAIT_S, &v);
  CHECK(rc == VAT_OK && vat_equal(v, vat_int(123)),
        "makeAdder(100).plus(23) on the bootstrap question: %s %s",
        vat_err_name(rc), show(v));
}

/* What Endo saw: our two calls on its bootstrap question arrived before
 * it answered the question. */
static void check_wire_report(vat_ref *endo) {
  vat_value v, early;
  int rc = ask(endo, "wireReport", NULL, 0, 0, &v);
  CHECK(rc == VAT_OK &&
            vat_map_get(v,
                        vat_atom_named("callsOnYourBootstrapBeforeItsAnswer"),
                        &early) == VAT_OK &&
            vat_equal(early, vat_int(2)),
        "Endo's view of the calls on its bootstrap question: %s %s",
        vat_err_name(rc), show(v));
}

/* --- Calling Endo --------------------------------------------------------- */

static int ask(vat_ref *to, const char *method, vat_value *args, size_t n,
               double timeout_s, vat_value *out) {
  vat_promise *p;
  int rc = vat_host_request(to, sel(method), vat_list(args, n), timeout_s, &p);
  if (rc != VAT_OK)
    return rc;
  return vat_promise_wait(p, WAIT_S, out);
}

static const char *show(vat_value v) {
  static char buf[512];
  vat_format(v, buf, sizeof buf);
  return buf;
}

static void check_echo(vat_ref *endo) {
  vat_value keys[2] = {vat_atom_named("x"), vat_atom_named("y")};
  vat_value vals[2] = {vat_int(-7), vat_float(1.5)};
  vat_value mkeys[2] = {vat_int(3), vat_int(1)};
  vat_value items[2] = {vat_int(1), vat_string("two")};
  vat_value kinds[] = {
      vat_null(),
      vat_bool(true),
      vat_int(INT64_MIN),
      vat_int(42),
      vat_float(3.25),
      vat_float(INFINITY),
      vat_atom_named("undefined"),
      vat_atom_named("sym"),
      vat_string("héllo ✓ 𝄞"),
      vat_bytes("\0\1\2\377", 4),
      vat_list(items, 2),
      vat_record(sel("point"), vals, 2),
      vat_map(keys, vals, 2),
      vat_map(mkeys, vals, 2),
  };
  for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++) {
    vat_value v;
    int rc = ask(endo, "echo", &kinds[i], 1, 0, &v);
    char want[256];
    vat_format(kinds[i], want, sizeof want);
    CHECK(rc == VAT_OK && vat_equal(v, kinds[i]), "echo %s: %s %s", want,
          vat_err_name(rc), show(v));
  }
}

/* The message of an error from Endo: its payload holds its fields. */
static vat_value error_message(vat_value e) {
  vat_value msg = vat_null();
  if (vat_type_of(e) == VAT_T_ERROR)
    vat_map_get(vat_error_payload(e), vat_atom_named("message"), &msg);
  return msg;
}

/* An error comes back with the errorId Endo gives it: same code and
 * message. */
static void check_echo_error(vat_ref *endo) {
  vat_value e = vat_error(sel("TypeError"), vat_string("bad thing")), v, msg;
  int rc = ask(endo, "echo", &e, 1, 0, &v);
  CHECK(rc == VAT_OK && vat_type_of(v) == VAT_T_ERROR &&
            vat_error_code(v) == sel("TypeError") &&
            vat_map_get(vat_error_payload(v), vat_atom_named("message"),
                        &msg) == VAT_OK &&
            vat_equal(msg, vat_string("bad thing")),
        "echo error: %s %s", vat_err_name(rc), show(v));
}

static void check_calls(vat_system *sys, vat_ref *endo) {
  vat_value args[2] = {vat_int(40), vat_int(2)}, v;
  int rc = ask(endo, "add", args, 2, 0, &v);
  CHECK(rc == VAT_OK && vat_equal(v, vat_int(42)), "add: %s %s",
        vat_err_name(rc), show(v));
  check_echo(endo);
  check_echo_error(endo);
  rc = ask(endo, "fail", NULL, 0, 0, &v);
  CHECK(rc == VAT_EBROKEN && vat_type_of(v) == VAT_T_ERROR &&
            vat_error_code(v) == sel("TypeError"),
        "fail: %s %s", vat_err_name(rc), show(v));
  rc = ask(endo, "later", NULL, 0, 0, &v);
  CHECK(rc == VAT_OK && vat_string_data(v) &&
            strcmp(vat_string_data(v), "later") == 0,
        "later: %s %s", vat_err_name(rc), show(v));
  rc = ask(endo, "rejectLater", NULL, 0, 0, &v);
  CHECK(rc == VAT_EBROKEN && vat_error_code(v) == sel("RangeError"),
        "rejectLater: %s %s", vat_err_name(rc), show(v));
  /* A promise of Endo's inside an answer, rejected the same way: it
   * breaks as the answer did (Endo's errorIds differ: name and message). */
  vat_value answered = v;
  rc = ask(endo, "pendingReject", NULL, 0, 0, &v);
  vat_promise *rejected = vat_value_promise(vat_at(v, 0));
  CHECK(rc == VAT_OK && rejected != NULL, "pendingReject: %s %s",
        vat_err_name(rc), show(v));
  if (rejected != NULL) {
    rc = vat_promise_wait(rejected, WAIT_S, &v);
    CHECK(rc == VAT_EBROKEN && vat_type_of(v) == VAT_T_ERROR &&
              vat_error_code(v) == vat_error_code(answered) &&
              vat_equal(error_message(v), error_message(answered)),
          "pendingReject's promise: %s %s, the answer %s", vat_err_name(rc),
          show(v), show(answered));
  }
  /* A promise of Endo's inside an answer, settled later. */
  rc = ask(endo, "pending", NULL, 0, 0, &v);
  vat_promise *later = vat_value_promise(vat_at(v, 0));
  CHECK(rc == VAT_OK && later != NULL, "pending: %s %s", vat_err_name(rc),
        show(v));
  if (later != NULL) {
    rc = vat_promise_wait(later, WAIT_S, &v);
    CHECK(rc == VAT_OK && vat_string_data(v) &&
              strcmp(vat_string_data(v), "p later") == 0,
          "pending's promise: %s %s", vat_err_name(rc), show(v));
  }
  /* A promise of ours, which Endo awaits; we settle it after sending. */
  vat_promise *mine;
  vat_resolver *r;
  vat_promise_new(&mine, &r);
  vat_value list = vat_list((vat_value[]){vat_promise_value(mine)}, 1);
  vat_promise *got;
  vat_host_request(endo, sel("awaitIt"), vat_list(&list, 1), 0, &got);
  vat_resolve(NULL, r, vat_string("mine"));
  rc = vat_promise_wait(got, WAIT_S, &v);
  CHECK(rc == VAT_OK && vat_string_data(v) &&
            strcmp(vat_string_data(v), "got mine") == 0,
        "awaitIt: %s %s", vat_err_name(rc), show(v));
  /* Endo never answers: the request's own timeout settles it. */
  rc = ask(endo, "never", NULL, 0, 0.2, &v);
  CHECK(rc == VAT_EBROKEN && vat_is_atom(v, vat_atom_timeout()), "never: %s %s",
        vat_err_name(rc), show(v));
  /* Identity: the same Endo object twice is one proxy; ours comes back. */
  vat_value c1, c2;
  ask(endo, "getCounter", NULL, 0, 0, &c1);
  ask(endo, "getCounter", NULL, 0, 0, &c2);
  CHECK(vat_type_of(c1) == VAT_T_REF && vat_value_ref(c1) == vat_value_ref(c2),
        "counter identity: %s", show(c1));
  vat_value by = vat_int(5);
  rc = ask(vat_value_ref(c1), "incr", &by, 1, 0, &v);
  CHECK(rc == VAT_OK && vat_equal(v, vat_int(5)), "incr: %s %s",
        vat_err_name(rc), show(v));
  /* Pipelined on Endo's answer before it arrives. */
  piper *pp;
  vat_ref *piper_ref;
  vat_promise *piped_result;
  vat_host_spawn(sys, &(vat_entity_def){.state_size = sizeof(piper)},
                 &piper_ref, (void **)&pp);
  pp->endo = endo;
  vat_promise_new(&piped_result, &pp->done);
  vat_host_send(piper_ref, pipe_calls, NULL);
  rc = vat_promise_wait(piped_result, WAIT_S, &v);
  CHECK(rc == VAT_OK && vat_equal(v, vat_int(6)), "pipelined incr: %s %s",
        vat_err_name(rc), show(v));
  check_chained(sys, endo);
  vat_ref *pinged;
  vat_entity_def pinged_def = {.receive = pinged_receive};
  vat_host_spawn(sys, &pinged_def, &pinged, NULL);
  vat_value pv = vat_ref_value(pinged);
  rc = ask(endo, "same", &pv, 1, 0, &v);
  CHECK(rc == VAT_OK && vat_value_ref(v) == pinged, "same: %s %s",
        vat_err_name(rc), show(v));
  rc = ask(endo, "callBack", &pv, 1, 0, &v);
  CHECK(rc == VAT_OK && vat_string_data(v) &&
            strcmp(vat_string_data(v), "pong: from endo") == 0,
        "callBack: %s %s", vat_err_name(rc), show(v));
  /* Endo calls us and reports. */
  rc = ask(endo, "runChecks", NULL, 0, 0, &v);
  CHECK(rc == VAT_OK && vat_type_of(v) == VAT_T_LIST && vat_len(v) == 0,
        "Endo's checks of the C side: %s %s", vat_err_name(rc), show(v));
}

static bool exited(pid_t pid, int *status, double timeout_s) {
  struct timespec t0;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  for (;;) {
    pid_t r = waitpid(pid, status, WNOHANG);
    if (r == pid)
      return true;
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    if ((double)(now.tv_sec - t0.tv_sec) +
            (double)(now.tv_nsec - t0.tv_nsec) / 1e9 >
        timeout_s)
      return false;
    struct timespec ms = {0, 10000000};
    nanosleep(&ms, NULL);
  }
}

typedef enum scenario {
  CALLS,   /* everything above, then this side closes */
  HANG_UP, /* Endo disconnects with a call pending */
  KILLED,  /* the Endo process dies with a call pending */
} scenario;

static const char *scenario_name[] = {"calls", "hang up", "killed"};

/* A call Endo never answers, pending when the connection goes. */
static void check_pending_breaks(vat_ref *endo, vat_conn *conn, pid_t pid,
                                 scenario sc) {
  vat_promise *pending;
  vat_host_request(endo, sel("never"), vat_list(NULL, 0), 0, &pending);
  vat_value v;
  /* Answered after "never" reached Endo (one connection is in order). */
  int rc = ask(endo, "add", (vat_value[]){vat_int(1), vat_int(1)}, 2, 0, &v);
  CHECK(rc == VAT_OK, "add before the end: %s", vat_err_name(rc));
  if (sc == HANG_UP) {
    rc = ask(endo, "hangUp", NULL, 0, 0, &v);
  } else {
    kill(pid, SIGKILL);
  }
  rc = vat_promise_wait(pending, WAIT_S, &v);
  const char *cause = vat_type_of(v) == VAT_T_ERROR
                          ? vat_string_data(vat_error_payload(v))
                          : NULL;
  CHECK(rc == VAT_EBROKEN && vat_error_code(v) == vat_atom_disconnected() &&
            cause != NULL,
        "%s: the pending call: %s %s", scenario_name[sc], vat_err_name(rc),
        show(v));
  if (cause != NULL && sc == HANG_UP)
    CHECK(strcmp(cause, "disconnected by the peer") == 0, "hang up: %s", cause);
  if (cause != NULL && sc == KILLED)
    CHECK(strcmp(cause, "end of stream") == 0 || strncmp(cause, "read", 4) == 0,
          "killed: %s", cause);
  rc = vat_promise_wait(vat_conn_closed(conn), WAIT_S, &v);
  CHECK(rc == VAT_OK, "%s: closed: %s", scenario_name[sc], vat_err_name(rc));
  /* Later calls to its refs break at once. */
  rc = ask(endo, "add", (vat_value[]){vat_int(1), vat_int(1)}, 2, 0, &v);
  CHECK(rc == VAT_EBROKEN && vat_is_atom(v, vat_atom_noconnection()),
        "%s: a later call: %s %s", scenario_name[sc], vat_err_name(rc),
        show(v));
}

static void run_peer(vat_system *sys, vat_listener *l, const char *node,
                     const char *dir, scenario sc) {
  char port[16], peer[4096];
  snprintf(port, sizeof port, "%d", vat_listener_port(l));
  snprintf(peer, sizeof peer, "%s/peer.js", dir);
  pid_t pid = fork();
  if (pid == 0) {
    if (sc == CALLS)
      execl(node, node, peer, port, "hold-bootstrap=2", (char *)NULL);
    else
      execl(node, node, peer, port, (char *)NULL);
    _exit(127);
  }
  vat_conn *conn;
  int rc = vat_listener_accept(l, WAIT_S, &conn);
  CHECK(rc == VAT_OK, "accept: %s", vat_strerror(rc));
  if (rc == VAT_OK) {
    vat_value v;
    if (sc == CALLS)
      check_bootstrap_pipelined(sys, conn);
    rc = vat_promise_wait(vat_conn_bootstrap(conn), WAIT_S, &v);
    CHECK(rc == VAT_OK && vat_type_of(v) == VAT_T_REF, "bootstrap: %s %s",
          vat_err_name(rc), show(v));
    if (rc == VAT_OK && sc == CALLS) {
      check_wire_report(vat_value_ref(v));
      check_calls(sys, vat_value_ref(v));
    }
    if (rc == VAT_OK && sc != CALLS)
      check_pending_breaks(vat_value_ref(v), conn, pid, sc);
    vat_conn_close(conn);
    rc = vat_promise_wait(vat_conn_closed(conn), WAIT_S, &v);
    CHECK(rc == VAT_OK, "closed: %s", vat_err_name(rc));
  }
  int status = 0;
  if (!exited(pid, &status, WAIT_S)) {
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
    CHECK(false, "the Endo peer did not exit");
  }
  if (sc == KILLED)
    CHECK(WIFSIGNALED(status), "the Endo peer was not killed: %d", status);
  else
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0,
          "%s: the Endo peer's status: %d", scenario_name[sc], status);
}

int main(int argc, char **argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: net-endo NODE PEER_DIR\n");
    return 2;
  }
  char modules[4096];
  snprintf(modules, sizeof modules, "%s/node_modules/@endo/captp", argv[2]);
  if (access(argv[1], X_OK) != 0 || access(modules, F_OK) != 0) {
    fprintf(stderr, "net-endo: skipped: no node or no %s (npm ci)\n", modules);
    return 77;
  }
  vat_init();
  vat_config cfg;
  vat_config_default(&cfg);
  cfg.workers = 2;
  vat_system *sys;
  vat_system_new(&cfg, &sys);
  vat_entity_def served_def = {.receive = served_receive,
                               .label = "libvat-served"};
  vat_ref *served;
  vat_host_spawn(sys, &served_def, &served, NULL);
  vat_listener *l;
  int rc = vat_listen(sys, "tcp:127.0.0.1:0", served, NULL, &l);
  if (rc != VAT_OK) {
    fprintf(stderr, "net-endo: listen: %s\n", vat_strerror(rc));
    return 1;
  }
  for (int sc = CALLS; sc <= KILLED; sc++)
    run_peer(sys, l, argv[1], argv[2], (scenario)sc);
  vat_listener_close(l);
  vat_system_shutdown(sys, 10);
  vat_system_destroy(sys);
  if (failures == 0)
    printf("net-endo: all checks passed, both ways\n");
  return failures ? 1 : 0;
}
