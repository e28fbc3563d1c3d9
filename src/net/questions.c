/* This side's questions: numbering, the limit on how many wait at once,
 * and the connection's question timeout.
 *
 * Endo never answers a call to an unknown target or with a body it cannot
 * decode, so a question may wait for ever on a live connection; with
 * options.question_timeout_s each question breaks with `timeout` after
 * that long, and is forgotten (a late answer is ignored). */
#define GC_THREADS 1
#include <gc/gc.h>

#include "internal.h"
#include "vat/timer.h"

typedef struct expiry {
  uint64_t n;
} expiry;

/* vat_conn_inspect reads how many wait from any thread. */
static void questions_changed(net_conn *c) {
  net_count_set(&c->counts->questions, c->questions.len);
}

static void expired(vat_turn *turn, void *state, void *arg) {
  net_conn *c = state;
  expiry *x = arg;
  net_question *q = net_table_take(&c->questions, x->n);
  if (q == NULL)
    return; /* answered meanwhile */
  questions_changed(c);
  vat_value reason = vat_atom_value(vat_atom_timeout());
  if (q->reply != NULL)
    vat_reply_error(turn, q->reply, reason);
  if (x->n == c->bootstrap_q && c->remote_bootstrap != NULL) {
    vat_break(turn, c->remote_bootstrap, reason);
    c->remote_bootstrap = NULL;
  }
}

int net_ask(vat_turn *turn, net_conn *c, vat_ref *reply, uint64_t *n) {
  if (c->questions.len >= c->max_questions)
    return VAT_EBUSY;
  net_question *q = GC_MALLOC(sizeof *q);
  if (q == NULL)
    return VAT_ENOMEM;
  q->reply = reply;
  *n = c->next_question++;
  if (!net_table_put(&c->questions, *n, q))
    return VAT_ENOMEM;
  questions_changed(c);
  if (c->question_timeout_s > 0) {
    expiry *x = GC_MALLOC_ATOMIC(sizeof *x);
    if (x != NULL) {
      x->n = *n;
      vat_later(turn, c->question_timeout_s, c->self, expired, x, &q->timer);
    }
  }
  return VAT_OK;
}

net_question *net_answered(net_conn *c, uint64_t n) {
  net_question *q = net_table_take(&c->questions, n);
  questions_changed(c);
  if (q != NULL && q->timer != NULL)
    vat_timer_cancel(q->timer);
  return q;
}
