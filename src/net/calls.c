/* Questions in both directions.
 *
 * The peer's questions (CTP_BOOTSTRAP, CTP_CALL) become requests in message
 * form to the local ref, and each answer goes back as CTP_RETURN: a
 * promise it resolves to is followed, never sent. A call to one of our
 * refs carries a reply entity of this vat whose state is the net_answer
 * itself, watched by one monitor per called ref (watches.c): vat_request's
 * promise, its vat_when and a monitor per call cost a third of the
 * connection vat's work on a one-way call, and two more turns. Each
 * answer is kept under the question's number (while open, whole; once
 * sent, what it settled to), so a call the peer pipelines on it (target
 * "q-N") is delivered to what it resolves to, in order.
 *
 * Our questions (made by proxies, slots.c, and the bootstrap question) are
 * settled here by the peer's CTP_RETURN. */
#define GC_THREADS 1
#include <gc/gc.h>
#include <stdio.h>
#include <string.h>

#include "internal.h"

/* What the table keeps for an answer that settled to data, in place of
 * its net_answer: a call pipelined on it can only fail with not_a_ref
 * (its zeroes: sent, not broken, settled to null), so nothing of it need
 * live. Most answers are data, and the last max_questions are kept: at
 * 100,000 their contexts and question ids were 13 MB of the serving
 * side's live heap, which every collection marked (5-6 ms each, ~25 a
 * second under pipelined calls). Never written. */
static net_answer settled_to_data;

static vat_value error_text(const char *code, const char *text) {
  return vat_error(vat_atom_intern(code), vat_string(text));
}

/* A broken promise's reason goes as an exception (refusals.c); a value
 * that cannot go becomes one, as the peer must hear something. */
void net_send_outcome(vat_turn *turn, net_conn *c, vat_captp_msg *m,
                      bool resolved, vat_value value, vat_ref *target) {
  m->value = resolved ? value : net_exception(value, target);
  m->is_reject = !resolved;
  vat_captp_error err;
  int rc = net_send(turn, c, m, &err);
  if (rc == VAT_OK || rc == VAT_ECLOSED)
    return;
  if (rc == VAT_EBUSY) { /* max_exports: the value would export one more */
    m->value = error_text("RangeError", "limit: too many exports");
    m->is_reject = true;
    net_send(turn, c, m, NULL);
    return;
  }
  char detail[256];
  snprintf(detail, sizeof detail, "the value has no CapData form: %s%s%s",
           vat_captp_err_text(err.code), err.detail[0] ? ": " : "", err.detail);
  /* The encoder's detail quotes what failed, a string that is not UTF-8
   * say: as it is, the exception would not go either, and the peer would
   * wait for ever. */
  for (char *d = detail; *d; d++)
    if ((unsigned char)*d < 0x20 || (unsigned char)*d > 0x7e)
      *d = '?';
  m->value = vat_error(vat_atom_intern("Error"), vat_string(detail));
  m->is_reject = true;
  net_send(turn, c, m, NULL);
}

/* --- The peer's questions: open, answered, sent -------------------------- */

/* A call pipelined on one of the peer's answers, until that settles. */
struct net_pipelined {
  const vat_atom *method;
  vat_value args;
  vat_resolver *answer;
  net_pipelined *next;
};

static void target_settled(vat_turn *turn, net_pipelined *pc, bool resolved,
                           vat_value value);

/* Keeps the answer for calls the peer pipelines on it: the last
 * max_questions answers, in a ring of their numbers that grows to that
 * size (Endo keeps every answer for ever; a long connection would). The
 * peer pipelines on a question as it asks it, so only recent ones count. */
static void keep_answer(net_conn *c, uint64_t n, net_answer *a) {
  net_answer_ring *r = &c->kept;
  if (r->len == r->cap && r->cap < c->max_questions) {
    size_t cap = r->cap ? r->cap * 2 : 64;
    if (cap > c->max_questions)
      cap = c->max_questions;
    uint64_t *ids = GC_MALLOC_ATOMIC(cap * sizeof *ids);
    if (ids == NULL)
      return;
    for (size_t i = 0; i < r->len; i++)
      ids[i] = r->ids[(r->head + i) % r->cap];
    *r = (net_answer_ring){ids, cap, 0, r->len};
  }
  if (r->len == r->cap) { /* full: the oldest goes */
    net_table_take(&c->answers, r->ids[r->head]);
    r->head = (r->head + 1) % r->cap;
    r->len--;
  }
  r->ids[(r->head + r->len) % r->cap] = n;
  r->len++;
  net_table_put(&c->answers, n, a);
}

/* The question asked: kept for pipelining, counted until sent. A
 * send-only call (qid NULL) is only counted, until its target is done. */
static void open_answer(net_conn *c, net_answer *a, const char *qid,
                        vat_ref *target) {
  a->c = c;
  a->qid = qid;
  a->target = target;
  a->open = true;
  if (qid == NULL) {
    c->open_sends++;
    return;
  }
  uint64_t n = net_parse(qid, 'q', '-');
  if (n != 0 && net_table_get(&c->answers, n) == NULL)
    keep_answer(c, n, a);
  net_count_set(&c->counts->answers_owed, ++c->open_answers);
}

/* Its outcome, final (no promise to follow): sent, then the calls
 * pipelined on it meanwhile go, in order, before any later one can. */
static void send_answer(vat_turn *turn, net_answer *a, bool resolved,
                        vat_value value) {
  net_conn *c = a->c;
  a->open = false;
  if (a->qid == NULL) { /* send-only: nobody to tell, nothing to pipeline */
    c->open_sends--;
    a->target = NULL;
    return;
  }
  net_count_set(&c->counts->answers_owed, --c->open_answers);
  vat_captp_msg m = {.type = VAT_CAPTP_RETURN, .id = a->qid};
  net_send_outcome(turn, c, &m, resolved, value, a->target);
  a->target = NULL;
  for (net_pipelined *pc = a->calls; pc != NULL; pc = pc->next)
    target_settled(turn, pc, resolved, value);
  a->calls = a->calls_last = NULL;
  if (vat_value_ref(value) != NULL || !resolved) {
    a->broken = !resolved;
    a->settled = value;
  } else {
    uint64_t n = net_parse(a->qid, 'q', '-');
    if (n != 0 && net_table_get(&c->answers, n) == a)
      net_table_put(&c->answers, n, &settled_to_data);
  }
}

static void followed(vat_turn *turn, void *state, void *ctx, bool resolved,
                     vat_value value) {
  (void)state; /* the entity whose turn it is: any of the vat's */
  net_answer *a = ctx;
  send_answer(turn, a, resolved, value);
  net_take_waiting_frames(turn, a->c);
}

/* The first answer: a promise is followed, never sent (vat_when). */
static void settle(vat_turn *turn, net_answer *a, bool resolved,
                   vat_value value) {
  a->answered = true;
  vat_promise *p = resolved ? vat_value_promise(value) : NULL;
  if (p == NULL)
    send_answer(turn, a, resolved, value);
  else if (vat_when(turn, p, followed, a) != VAT_OK)
    send_answer(turn, a, false, error_text("Error", "cannot follow"));
}

void net_answer_target_ended(vat_turn *turn, net_answer *a, vat_value reason) {
  if (!a->answered)
    settle(turn, a, false, reason);
}

/* The reply entity of a call to one of our refs: the first "resolve" or
 * "break" answers it (a break without a reason is a refusal, as
 * vat_reply_error's is), later ones are ignored, as a request's are. */
static void reply_receive(vat_turn *turn, void *state, const vat_atom *selector,
                          vat_value value) {
  net_answer *a = state;
  net_conn *c = a->c;
  if (a->answered || (selector != c->resolve && selector != c->break_))
    return;
  if (a->watch != NULL)
    net_watch_remove(turn, a->watch, a);
  if (selector == c->resolve)
    settle(turn, a, true, value);
  else
    settle(turn, a, false,
           vat_is_null(value) ? vat_atom_value(vat_atom_refused()) : value);
  net_take_waiting_frames(turn, c);
}

static const vat_entity_def reply_def = {.state_size = sizeof(net_answer),
                                         .receive = reply_receive};

/* Answers a question at once, during the frame's own turn. */
static void answer_now(vat_turn *turn, net_conn *c, const char *qid,
                       bool resolved, vat_value value) {
  net_answer *a = GC_MALLOC(sizeof *a);
  if (a == NULL)
    return;
  open_answer(c, a, qid, NULL);
  settle(turn, a, resolved, value);
}

/* Answers a question with what `p` settles to. */
static void answer_later(vat_turn *turn, net_conn *c, const char *qid,
                         vat_promise *p) {
  net_answer *a = GC_MALLOC(sizeof *a);
  if (a == NULL)
    return;
  open_answer(c, a, qid, NULL);
  settle(turn, a, true, vat_promise_value(p));
}

/* The call as a request in message form (vat/caps.h) whose reply ref is
 * the answer itself, watched by the target's watch. */
static int ask_target(vat_turn *turn, net_conn *c, const char *qid,
                      vat_ref *target, const vat_atom *name, vat_value args) {
  vat_ref *reply;
  net_answer *a;
  int rc = vat_entity_new(turn, &reply_def, &reply, (void **)&a);
  if (rc != VAT_OK)
    return rc;
  vat_value fields[2] = {args, vat_ref_value(reply)};
  vat_value request = vat_record(c->request_label, fields, 2);
  if (vat_is_null(request))
    return VAT_ENOMEM;
  net_watch *w = net_watch_of(turn, c, target);
  /* The watch's first turn, which makes its monitor, is sent before the
   * call goes: see watches.c. */
  if ((rc = vat_send_msg(turn, target, name, request)) != VAT_OK)
    return rc;
  open_answer(c, a, qid, target);
  if (w != NULL)
    net_watch_add(w, a);
  return VAT_OK;
}

void net_handle_bootstrap(vat_turn *turn, net_conn *c, const char *qid) {
  c->peer_bootstrap_q = net_parse(qid, 'q', '-');
  if (c->bootstrap == NULL)
    answer_now(turn, c, qid, false, error_text("Error", "no bootstrap object"));
  else
    answer_now(turn, c, qid, true, vat_ref_value(c->bootstrap));
}

/* --- Calls from the peer ------------------------------------------------- */

/* The pipelined call's target settled: deliver, or break the answer. */
static void target_settled(vat_turn *turn, net_pipelined *pc, bool resolved,
                           vat_value value) {
  vat_ref *ref = vat_value_ref(value);
  if (!resolved || ref == NULL) {
    vat_break(turn, pc->answer,
              resolved ? vat_atom_value(vat_atom_not_a_ref()) : value);
    return;
  }
  vat_promise *p;
  if (vat_request(turn, ref, pc->method, pc->args, 0, &p) != VAT_OK)
    vat_break(turn, pc->answer, error_text("Error", "cannot send the call"));
  else
    vat_resolve(turn, pc->answer, vat_promise_value(p));
}

/* The atom of a method name from the wire. A peer calls few names, each
 * many times: the connection's small cache (a slot per hash, the last name
 * that hashed there) answers most without vat_atom_intern_weak_n's table
 * lock and, for a weak atom, the collector's allocation lock. */
static const vat_atom *method_atom(net_conn *c, const char *s, size_t len) {
  size_t h = len;
  for (size_t i = 0; i < len; i++)
    h = h * 31 + (unsigned char)s[i];
  const vat_atom **slot = &c->method_names[h % NET_METHOD_NAMES];
  const vat_atom *a = *slot;
  if (a != NULL && vat_atom_len(a) == len &&
      memcmp(vat_atom_name(a), s, len) == 0)
    return a;
  if ((a = vat_atom_intern_weak_n(s, len)) != NULL)
    *slot = a;
  return a;
}

static bool parse_method(net_conn *c, vat_value method, const vat_atom **name,
                         vat_value *args) {
  if (vat_type_of(method) != VAT_T_LIST || vat_len(method) != 2)
    return false;
  vat_value n = vat_at(method, 0);
  *args = vat_at(method, 1);
  if (vat_type_of(n) != VAT_T_STRING || vat_type_of(*args) != VAT_T_LIST)
    return false;
  *name = method_atom(c, vat_string_data(n), vat_string_len(n));
  return *name != NULL;
}

void net_handle_bad_call(vat_turn *turn, net_conn *c, const vat_captp_msg *m,
                         const char *why) {
  char text[256];
  snprintf(text, sizeof text, "bad argument: %s", why);
  answer_now(turn, c, m->id, false, error_text("TypeError", text));
}

/* A call on one of the peer's answers ("q-N"): it goes to what the
 * answer settles to, once it has. */
static void pipeline(vat_turn *turn, net_conn *c, const vat_captp_msg *m,
                     net_answer *on, const vat_atom *name, vat_value args) {
  net_pipelined *pc = GC_MALLOC(sizeof *pc);
  vat_promise *p;
  if (pc == NULL || vat_promise_new(&p, &pc->answer) != VAT_OK)
    return;
  pc->method = name;
  pc->args = args;
  if (on->open) {
    if (on->calls_last != NULL)
      on->calls_last->next = pc;
    else
      on->calls = pc;
    on->calls_last = pc;
  } else {
    target_settled(turn, pc, !on->broken, on->settled);
  }
  answer_later(turn, c, m->id, p);
}

void net_handle_call(vat_turn *turn, net_conn *c, const vat_captp_msg *m) {
  const vat_atom *name;
  vat_value args;
  if (!parse_method(c, m->value, &name, &args)) {
    answer_now(
        turn, c, m->id, false,
        error_text("TypeError", "bad argument: method is not [name, args]"));
    return;
  }
  uint64_t obj = net_parse(m->target, 'o', '-');
  uint64_t q = obj ? 0 : net_parse(m->target, 'q', '-');
  vat_ref *target = NULL;
  net_answer *answer = NULL;
  if (obj != 0)
    target = net_table_get(&c->exports, obj);
  else if (q != 0 && q == c->peer_bootstrap_q && c->bootstrap != NULL)
    /* The bootstrap answer is settled as it is asked: calls on it go
     * straight to the bootstrap ref, even once the answer is no longer
     * kept (a peer may pipeline on its bootstrap for the connection's
     * whole life, as vat_conn_bootstrap_ref does). */
    target = c->bootstrap;
  else if (q != 0)
    answer = net_table_get(&c->answers, q);
  if (target != NULL) {
    int rc = ask_target(turn, c, m->id, target, name, args);
    if (rc != VAT_OK) /* answered all the same: the peer would wait for ever */
      answer_now(turn, c, m->id, false, error_text("Error", vat_strerror(rc)));
    return;
  }
  if (answer == NULL) {
    char text[96];
    snprintf(text, sizeof text, "unknown target %.40s", m->target);
    answer_now(turn, c, m->id, false, error_text("Error", text));
    return;
  }
  pipeline(turn, c, m, answer, name, args);
}

static void count_whole(void *ctx, void *val) {
  if (val != &settled_to_data)
    ++*(size_t *)ctx;
}

size_t net_answers_kept_whole(const net_conn *c) {
  size_t n = 0;
  net_table_each(&c->answers, count_whole, &n);
  return n;
}

/* --- Answers to our questions --------------------------------------------- */

void net_handle_return(vat_turn *turn, net_conn *c, const vat_captp_msg *m) {
  uint64_t n = net_parse(m->id, 'q', '-');
  net_question *q = net_answered(c, n);
  if (q == NULL)
    return; /* not ours, or answered already: ignored */
  if (c->bootstrap_qid != NULL && strcmp(m->id, c->bootstrap_qid) == 0) {
    if (m->is_reject)
      vat_break(turn, c->remote_bootstrap, m->value);
    else
      vat_resolve(turn, c->remote_bootstrap, m->value);
    c->remote_bootstrap = NULL;
    return;
  }
  if (q->reply == NULL)
    return; /* a one-way message's answer */
  if (m->is_reject)
    vat_reply_error(turn, q->reply, m->value);
  else
    vat_reply(turn, q->reply, m->value);
}

void net_handle_resolve(vat_turn *turn, net_conn *c, const vat_captp_msg *m) {
  vat_resolver *r = net_take_promise(c, net_parse(m->id, 'p', '-'));
  if (r == NULL)
    return;
  if (m->is_reject)
    vat_break(turn, r, m->value);
  else
    vat_resolve(turn, r, m->value);
}
