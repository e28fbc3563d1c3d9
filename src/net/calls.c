/* Questions in both directions.
 *
 * The peer's questions (CTP_BOOTSTRAP, CTP_CALL) become requests in message
 * form to the local ref, and each answer goes back as CTP_RETURN once its
 * promise settled: a promise that follows another is followed, never sent.
 * Each answer is kept under the question's number (its promise, then,
 * once sent, what it settled to), so a call the peer pipelines on it
 * (target "q-N") is delivered to what it resolves to.
 *
 * Our questions (made by proxies, slots.c, and the bootstrap question) are
 * settled here by the peer's CTP_RETURN. */
#define GC_THREADS 1
#include <gc/gc.h>
#include <stdio.h>
#include <string.h>

#include "internal.h"

/* One of the peer's questions: what its answer needs, and, kept for
 * calls the peer pipelines on it, the answer itself. Until it is settled
 * and sent that is the promise; then, unless a pipelined call already
 * waits on the promise, only what such a call needs: a ref it resolved
 * to, or why it broke (settled to data, the table holds settled_to_data
 * in its place). A settled promise kept whole (its request's state,
 * its vat) cost ~440 bytes, and the last max_questions answers are kept:
 * 44 MB of live heap that every collection marked. */
typedef struct answer_ctx {
  const char *qid;
  vat_ref *target;     /* the ref the call went to; NULL: none, or not known */
  vat_promise *answer; /* NULL once settled and compacted */
  vat_value settled;   /* then: the ref it resolved to, null, or the reason */
  bool broken;         /* ...it broke with `settled` */
  bool pipelined;      /* a call on it waits on `answer` (vat_when) */
} answer_ctx;

/* What the table keeps for an answer that settled to data, in place of
 * its answer_ctx: a call pipelined on it can only fail with not_a_ref
 * (its zeroes: settled, not broken, to null), so nothing of it need
 * live. Most answers are data, and the last max_questions are kept: at
 * 100,000 their contexts and question ids were 13 MB of the serving
 * side's live heap, which every collection marked (5-6 ms each, ~25 a
 * second under pipelined calls). Never written: a call on it finds
 * `answer` NULL. */
static answer_ctx settled_to_data;

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

static void send_return(vat_turn *turn, net_conn *c, const answer_ctx *a,
                        bool resolved, vat_value value) {
  vat_captp_msg m = {.type = VAT_CAPTP_RETURN, .id = a->qid};
  net_send_outcome(turn, c, &m, resolved, value, a->target);
}

static void answered(vat_turn *turn, void *state, void *ctx, bool resolved,
                     vat_value value) {
  net_conn *c = state;
  answer_ctx *a = ctx;
  c->open_answers--;
  send_return(turn, c, a, resolved, value);
  a->target = NULL;
  /* A call pipelined on it before now waits on the promise (vat_when), so
   * later ones must too, to stay behind it. */
  if (!a->pipelined) {
    bool target = vat_value_ref(value) != NULL ||
                  vat_value_promise(value) != NULL || !resolved;
    if (target) {
      a->answer = NULL;
      a->broken = !resolved;
      a->settled = value;
    } else {
      uint64_t n = net_parse(a->qid, 'q', '-');
      if (n != 0 && net_table_get(&c->answers, n) == a)
        net_table_put(&c->answers, n, &settled_to_data);
    }
  }
  net_take_waiting_frames(turn, c);
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

/* Keeps the answer for calls the peer pipelines on it: the last
 * max_questions answers, in a ring of their numbers that grows to that
 * size (Endo keeps every answer for ever; a long connection would). The
 * peer pipelines on a question as it asks it, so only recent ones count. */
static void keep_answer(net_conn *c, uint64_t n, answer_ctx *a) {
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

/* Keeps the answer for pipelining and sends it back once settled. */
static void answer_with(vat_turn *turn, net_conn *c, const char *qid,
                        vat_ref *target, vat_promise *p) {
  answer_ctx *a = GC_MALLOC(sizeof *a);
  if (a == NULL)
    return;
  a->qid = qid;
  a->target = target;
  a->answer = p;
  uint64_t n = net_parse(qid, 'q', '-');
  if (n != 0 && net_table_get(&c->answers, n) == NULL)
    keep_answer(c, n, a);
  c->open_answers++;
  vat_when(turn, p, answered, a);
}

static void answer_now(vat_turn *turn, net_conn *c, const char *qid,
                       bool resolved, vat_value value) {
  vat_promise *p;
  vat_resolver *r;
  if (vat_promise_new(&p, &r) != VAT_OK)
    return;
  if (resolved)
    vat_resolve(turn, r, value);
  else
    vat_break(turn, r, value);
  answer_with(turn, c, qid, NULL, p);
}

void net_handle_bootstrap(vat_turn *turn, net_conn *c, const char *qid) {
  c->peer_bootstrap_q = net_parse(qid, 'q', '-');
  if (c->bootstrap == NULL)
    answer_now(turn, c, qid, false, error_text("Error", "no bootstrap object"));
  else
    answer_now(turn, c, qid, true, vat_ref_value(c->bootstrap));
}

/* --- Calls from the peer ------------------------------------------------- */

typedef struct pipelined {
  const vat_atom *method;
  vat_value args;
  vat_resolver *answer;
} pipelined;

/* The pipelined call's target settled: deliver, or break the answer. */
static void target_settled(vat_turn *turn, void *state, void *ctx,
                           bool resolved, vat_value value) {
  pipelined *pc = ctx;
  (void)state;
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

static bool parse_method(vat_value method, const vat_atom **name,
                         vat_value *args) {
  if (vat_type_of(method) != VAT_T_LIST || vat_len(method) != 2)
    return false;
  vat_value n = vat_at(method, 0);
  *args = vat_at(method, 1);
  if (vat_type_of(n) != VAT_T_STRING || vat_type_of(*args) != VAT_T_LIST)
    return false;
  *name = vat_atom_intern_weak_n(vat_string_data(n), vat_string_len(n));
  return *name != NULL;
}

void net_handle_bad_call(vat_turn *turn, net_conn *c, const vat_captp_msg *m,
                         const char *why) {
  char text[256];
  snprintf(text, sizeof text, "bad argument: %s", why);
  answer_now(turn, c, m->id, false, error_text("TypeError", text));
}

void net_handle_call(vat_turn *turn, net_conn *c, const vat_captp_msg *m) {
  const vat_atom *name;
  vat_value args;
  if (!parse_method(m->value, &name, &args)) {
    answer_now(
        turn, c, m->id, false,
        error_text("TypeError", "bad argument: method is not [name, args]"));
    return;
  }
  uint64_t obj = net_parse(m->target, 'o', '-');
  uint64_t q = obj ? 0 : net_parse(m->target, 'q', '-');
  vat_ref *target = NULL;
  answer_ctx *answer = NULL;
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
    vat_promise *p;
    int rc = vat_request(turn, target, name, args, 0, &p);
    if (rc == VAT_OK)
      answer_with(turn, c, m->id, target, p);
    else /* answered all the same: the peer would wait for ever */
      answer_now(turn, c, m->id, false, error_text("Error", vat_strerror(rc)));
    return;
  }
  if (answer == NULL) {
    char text[96];
    snprintf(text, sizeof text, "unknown target %.40s", m->target);
    answer_now(turn, c, m->id, false, error_text("Error", text));
    return;
  }
  pipelined *pc = GC_MALLOC(sizeof *pc);
  vat_promise *p;
  if (pc == NULL || vat_promise_new(&p, &pc->answer) != VAT_OK)
    return;
  pc->method = name;
  pc->args = args;
  if (answer->answer != NULL) {
    answer->pipelined = true;
    vat_when(turn, answer->answer, target_settled, pc);
  } else {
    target_settled(turn, c, pc, !answer->broken, answer->settled);
  }
  answer_with(turn, c, m->id, NULL, p);
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
