/* Pipelining: messages sent to the answer of a question not answered yet
 * go to the peer at once, addressed to the question ("q-N").
 *
 * vat_conn_pipeline makes, in the caller's vat, an entity standing for the
 * answer, and sends the call to the proxy with the payload
 * captp.pipe(args, answer-ref). The proxy sends the CTP_CALL and notes
 * which question the answer-ref stands for. Whatever the answer entity
 * receives it forwards to the same proxy as captp.via(answer-ref,
 * message), which the proxy sends to that question. Both the call and the
 * forwarded messages leave the caller's vat for the connection vat, the
 * call first (it was sent in the turn that made the answer entity, which
 * receives nothing before that turn commits), so the question is known
 * when they arrive: messages from one vat to another keep their order.
 *
 * Chains: vat_conn_pipeline on an answer ref sends the call to that ref,
 * which forwards it as above, so it goes to the earlier question (CapTP's
 * pipelining, as Endo's E(E(x).a()).b() does); the new answer ref forwards
 * to the earlier one, which wraps what it gets once more, and the proxy
 * takes the innermost captp.via's answer for the address. Both the call
 * and what the new ref forwards pass through the earlier ref, the call
 * first, so the new question is known when they reach the proxy.
 *
 * The peer's bootstrap is pipelined on the same way: vat_conn_bootstrap_ref
 * is the connection entity itself, and what it receives goes to the
 * bootstrap question. That question is asked in the connection vat's
 * first turn, queued before the handle is returned, so it is known when
 * any message for the ref arrives. Calls keep the question as their
 * address after the answer, as an answer ref's do, so the peer delivers
 * them all through one answer, in the order they were sent. */
#define GC_THREADS 1
#include <gc/gc.h>

#include "internal.h"

typedef struct answer {
  vat_ref *proxy; /* the proxy the call went to: its connection's vat */
} answer;

static const vat_atom *pipe_label(void) {
  return vat_atom_intern("captp.pipe");
}

static const vat_atom *via_label(void) {
  return vat_atom_intern("captp.via");
}

static void answer_receive(vat_turn *turn, void *state,
                           const vat_atom *selector, vat_value value) {
  answer *a = state;
  vat_value fields[2] = {vat_ref_value(vat_self(turn)), value};
  vat_send_msg(turn, a->proxy, selector, vat_record(via_label(), fields, 2));
}

static const vat_entity_def answer_def = {
    .state_size = sizeof(answer),
    .receive = answer_receive,
};

bool net_pipe_via(vat_value v, vat_ref **answer_ref, vat_value *inner) {
  if (vat_type_of(v) != VAT_T_RECORD || vat_record_label(v) != via_label() ||
      vat_len(v) != 2 || vat_value_ref(vat_at(v, 0)) == NULL)
    return false;
  *answer_ref = vat_value_ref(vat_at(v, 0));
  *inner = vat_at(v, 1);
  return true;
}

bool net_pipe_parse(vat_value v, vat_value *args, vat_ref **answer_ref) {
  if (vat_type_of(v) != VAT_T_RECORD || vat_record_label(v) != pipe_label() ||
      vat_len(v) != 2 || vat_value_ref(vat_at(v, 1)) == NULL)
    return false;
  *args = vat_at(v, 0);
  *answer_ref = vat_value_ref(vat_at(v, 1));
  return true;
}

int vat_conn_pipeline(vat_turn *turn, vat_ref *target, const vat_atom *method,
                      vat_value args, double timeout_s, vat_promise **out,
                      vat_ref **answer_out) {
  if (target == NULL || method == NULL || out == NULL || answer_out == NULL)
    return VAT_EINVAL;
  vat_ref *ref;
  answer *a;
  int rc = vat_entity_new(turn, &answer_def, &ref, (void **)&a);
  if (rc != VAT_OK)
    return rc;
  a->proxy = target;
  vat_value fields[2] = {args, vat_ref_value(ref)};
  rc = vat_request(turn, target, method, vat_record(pipe_label(), fields, 2),
                   timeout_s, out);
  if (rc != VAT_OK)
    return rc;
  *answer_out = ref;
  return VAT_OK;
}

void net_bootstrap_receive(vat_turn *turn, void *state,
                           const vat_atom *selector, vat_value value) {
  net_conn *c = state;
  net_call_out(turn, c, c->bootstrap_qid, selector, value);
}
