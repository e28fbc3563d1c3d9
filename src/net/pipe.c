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
 * them all through one answer, in the order they were sent.
 *
 * Which question an answer ref stands for must be known as long as the
 * ref can be sent to, after the answer too (the peer keeps answers for
 * that), and no longer: the connection makes no other use of the ref, and
 * a table keyed by the ref's address for the connection's life grew by an
 * entry per pipelined call, while a ref made later at a collected one's
 * address would have found the old question. So the table holds each
 * ref weakly, a disappearing link in an entry the collector does not scan
 * (net_pipes_put): the link reads NULL once the ref is collected, before
 * its memory can be reused, and a lookup matches only an entry whose link
 * still names the ref it is given. Entries of collected refs go when the
 * table has grown to twice what was alive at the last sweep. */
#define GC_THREADS 1
#include <gc/gc.h>

#include "internal.h"

/* --- Answer refs and their questions -------------------------------------- */

typedef struct pipe_entry {
  void *ref;    /* the answer ref: a disappearing link, NULL once collected */
  uint64_t key; /* its address, the table's key */
  uint64_t q;   /* the question it stands for */
  bool live;    /* the sweep's reading of `ref`, under the collector's lock */
} pipe_entry;

enum { PIPES_SWEEP_MIN = 64 };

uint64_t net_pipes_get(const net_pipes *p, vat_ref *answer) {
  const pipe_entry *e = net_table_get(&p->refs, (uint64_t)(uintptr_t)answer);
  /* Read without the collector's lock: a ref the caller holds is alive,
   * so its own entry's link is not being cleared; and an entry left by a
   * collected ref at the same address was cleared before that address
   * could be allocated again, which came before the caller got `answer`. */
  return e != NULL && e->ref == (void *)answer ? e->q : 0;
}

static void mark_live(void *ctx, void *val) {
  (void)ctx;
  pipe_entry *e = val;
  e->live = e->ref != NULL;
}

typedef struct kept {
  net_table refs;
  bool failed;
} kept;

static void keep_live(void *ctx, void *val) {
  kept *k = ctx;
  pipe_entry *e = val;
  if (e->live && !net_table_put(&k->refs, e->key, e))
    k->failed = true;
}

/* Drops the entries of collected refs. The links are read under the
 * collector's lock, which it holds while it clears them; the table is
 * rebuilt after, as that allocates (a link cleared in between leaves its
 * entry to the next sweep). */
static bool sweep(net_pipes *p) {
  GC_alloc_lock();
  net_table_each(&p->refs, mark_live, NULL);
  GC_alloc_unlock();
  kept k = {{0}, false};
  net_table_each(&p->refs, keep_live, &k);
  if (k.failed)
    return false;
  p->refs = k.refs;
  p->sweep_at =
      2 * k.refs.len > PIPES_SWEEP_MIN ? 2 * k.refs.len : PIPES_SWEEP_MIN;
  return true;
}

bool net_pipes_put(net_pipes *p, vat_ref *answer, uint64_t q) {
  if (p->refs.len >= p->sweep_at && !sweep(p))
    return false;
  pipe_entry *e = GC_MALLOC_ATOMIC(sizeof *e);
  if (e == NULL)
    return false;
  e->ref = answer;
  e->key = (uint64_t)(uintptr_t)answer;
  e->q = q;
  e->live = true;
  /* The object the ref is (an entity is an object of its own; a vat's
   * first entity lies inside its vat's). */
  void *obj = GC_base(answer);
  if (obj != NULL &&
      GC_general_register_disappearing_link(&e->ref, obj) == GC_NO_MEMORY)
    return false;
  return net_table_put(&p->refs, e->key, e);
}

/* --- The answer ref --------------------------------------------------------
 */

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
