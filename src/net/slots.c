/* Imports, exports and proxies: how refs and promises cross a connection.
 *
 * Slot names follow CapTP: a sender writes "o+N" for its own export N and
 * "o-N" for the receiver's export N (its import); the receiver reads them
 * the other way round. So "o+N" received is the peer's object N (a proxy,
 * made once and kept: the same slot is the same ref), and "o-N" received
 * is this side's export N (the original ref: identity survives a round
 * trip). A proxy sent back to its own side is written "o-N".
 *
 * A proxy is an entity of the connection vat: a dynamic message to it
 * becomes a CTP_CALL, a message-form request one whose answer settles the
 * request (calls.c). */
#define GC_THREADS 1
#include <gc/gc.h>
#include <stdio.h>
#include <string.h>

#include "internal.h"
#include "vat/observe.h"

typedef struct proxy {
  net_conn *c;
  uint64_t id; /* the peer's export number */
} proxy;

typedef net_import_promise import_promise;

/* --- Proxies: messages out ----------------------------------------------- */

static void refuse(vat_turn *turn, vat_ref *reply, const char *code,
                   const char *detail) {
  if (reply != NULL)
    vat_reply_error(turn, reply,
                    vat_error(vat_atom_intern(code), vat_string(detail)));
}

/* Sends selector(value) as a CTP_CALL to `target` ("o-N", or "q-N" when
 * pipelined); false when it did not go (the request, if any, is answered
 * with why). *question is its number; 0 for a send-only call, which has
 * none: a one-way message (no reply) that nothing is pipelined on, to a
 * peer that takes those (vat/captp.h, note [10]). */
static bool call_out(vat_turn *turn, net_conn *c, const char *target,
                     const vat_atom *selector, vat_value args, vat_ref *reply,
                     bool pipelined_on, uint64_t *question) {
  if (vat_type_of(args) != VAT_T_LIST)
    args = vat_list(&args, 1);
  uint64_t n = 0;
  int rc = VAT_OK;
  bool send_only = reply == NULL && !pipelined_on && c->peer_takes_send_only;
  if (reply == NULL && !send_only)
    /* A one-way message to a peer that answers every call (Endo): nobody
     * waits for its answer, ignored as unknown, so it is not a question
     * waiting and max_questions does not hold it back. */
    n = c->next_question++;
  else if (reply != NULL)
    rc = net_ask(turn, c, reply, &n);
  if (rc == VAT_EBUSY) {
    refuse(turn, reply, "limit", "too many questions wait on the peer");
    return false;
  }
  if (rc != VAT_OK) {
    refuse(turn, reply, "nomem", "out of memory");
    return false;
  }
  const char *qid = send_only ? NULL : net_name('q', '-', n);
  if (!send_only && qid == NULL) {
    net_answered(c, n);
    refuse(turn, reply, "nomem", "out of memory");
    return false;
  }
  vat_value method[2] = {vat_string(vat_atom_name(selector)), args};
  vat_captp_msg m = {.type = VAT_CAPTP_CALL,
                     .id = qid,
                     .target = target,
                     .value = vat_list(method, 2)};
  vat_captp_error err;
  rc = net_send(turn, c, &m, &err);
  *question = n;
  if (rc == VAT_OK)
    return true;
  /* The send ended the connection (the queue past out_max_bytes, no
   * memory): the end broke every question, this one too, with why. A
   * refusal now would answer the request a second time. */
  if (c->ended)
    return false;
  net_answered(c, n);
  if (rc == VAT_EBUSY) {
    refuse(turn, reply, "limit", "too many exports");
    return false;
  }
  char detail[256];
  snprintf(detail, sizeof detail, "%s: %s%s%s", vat_strerror(rc),
           vat_captp_err_text(err.code), err.detail[0] ? ": " : "", err.detail);
  refuse(turn, reply, "encode", detail);
  return false;
}

void net_call_out(vat_turn *turn, net_conn *c, const char *target,
                  const vat_atom *selector, vat_value value) {
  /* A message for the answer of an earlier call (pipe.c) goes to that
   * question; the call that made it remembers its question. An answer
   * ref pipelined on forwards through the one it was made on, which wraps
   * the message again: the innermost answer is the one it was sent to. */
  vat_ref *answer = NULL;
  bool via = false;
  while (net_pipe_via(value, &answer, &value))
    via = true;
  vat_value args = value;
  vat_ref *reply = NULL;
  vat_request_parse(value, &args, &reply);
  /* A call pipelined on an answer ref is both: it goes to that answer's
   * question, and its own answer ref stands for its own question. */
  vat_ref *pipe = NULL;
  net_pipe_parse(args, &args, &pipe);
  if (c->ended) {
    if (reply != NULL)
      vat_reply_error(turn, reply, net_disconnected("closed"));
    return;
  }
  if (target == NULL) {
    refuse(turn, reply, "nomem", "out of memory");
    return;
  }
  if (via) {
    uint64_t q = net_pipes_get(&c->pipes, answer);
    if (q == 0) { /* the call it follows never went out */
      refuse(turn, reply, "Error", "the call this one follows failed");
      return;
    }
    target = net_name('q', '-', q);
  }
  uint64_t n;
  if (call_out(turn, c, target, selector, args, reply, pipe != NULL, &n) &&
      pipe != NULL) /* no memory: its messages are refused */
    (void)net_pipes_put(&c->pipes, pipe, n);
}

static void proxy_receive(vat_turn *turn, void *state, const vat_atom *selector,
                          vat_value value) {
  proxy *p = state;
  net_call_out(turn, p->c, net_name('o', '-', p->id), selector, value);
}

static const vat_entity_def proxy_def = {
    .state_size = sizeof(proxy),
    .receive = proxy_receive,
};

/* --- Exporting ----------------------------------------------------------- */

/* How many times export n went out: the peer's CTP_DROP gives back what
 * it received, and the export is forgotten at zero. A message that fails
 * to encode may count without going: that export then stays (the safe
 * side). */
static bool count_export(net_conn *c, uint64_t n) {
  uintptr_t sent = (uintptr_t)net_table_get(&c->export_counts, n);
  return net_table_put(&c->export_counts, n, (void *)(sent + 1));
}

void net_drop(vat_turn *turn, net_conn *c, uint64_t n, int64_t dec) {
  uintptr_t sent = (uintptr_t)net_table_get(&c->export_counts, n);
  if (sent == 0 || dec <= 0)
    return; /* unknown, or nothing given back */
  if ((uint64_t)dec < sent) {
    net_table_put(&c->export_counts, n, (void *)(sent - (uintptr_t)dec));
    return;
  }
  /* At zero, both directions go: sent again, the ref gets a new number. */
  net_table_take(&c->export_counts, n);
  void *obj = net_table_take(&c->exports, n);
  if (obj == NULL)
    obj = net_table_take(&c->export_promises, n);
  if (obj != NULL) {
    net_table_take(&c->export_ids, (uint64_t)(uintptr_t)obj);
    net_watch_drop(turn, c, obj);
  }
}

/* A promise we exported settled: tell the peer (CTP_RESOLVE), naming it
 * as the peer does ("p-N" for our p+N), as an answer is told: a broken
 * one's reason as the exception of vat/net.h's table, so the peer tells
 * refusals apart alike whether it asked or was handed a promise. */
typedef struct exported_promise {
  net_conn *c; /* the when-callback may run on a proxy's state: not used */
  uint64_t n;
} exported_promise;

static void promise_settled(vat_turn *turn, void *state, void *ctx,
                            bool resolved, vat_value value) {
  exported_promise *e = ctx;
  (void)state;
  vat_captp_msg m = {.type = VAT_CAPTP_RESOLVE, .id = net_name('p', '-', e->n)};
  net_send_outcome(turn, e->c, &m, resolved, value, NULL);
}

static int export_promise(net_slots_ctx *x, vat_promise *p,
                          char slot[VAT_CAPTP_SLOT_MAX]) {
  net_conn *c = x->c;
  uint64_t key = (uint64_t)(uintptr_t)p;
  uint64_t theirs =
      (uint64_t)(uintptr_t)net_table_get(&c->import_promise_ids, key);
  if (theirs != 0) { /* the peer's own promise, sent back */
    snprintf(slot, VAT_CAPTP_SLOT_MAX, "p-%llu", (unsigned long long)theirs);
    return VAT_OK;
  }
  uint64_t n = (uint64_t)(uintptr_t)net_table_get(&c->export_ids, key);
  if (n == 0) {
    if (c->exports.len + c->export_promises.len >= c->max_exports)
      return VAT_EBUSY;
    exported_promise *e = GC_MALLOC(sizeof *e);
    if (e == NULL)
      return VAT_ENOMEM;
    n = c->next_export++;
    e->c = c;
    e->n = n;
    if (!net_table_put(&c->export_promises, n, p) ||
        !net_table_put(&c->export_ids, key, (void *)(uintptr_t)n))
      return VAT_ENOMEM;
    int rc = vat_when(x->turn, p, promise_settled, e);
    if (rc != VAT_OK)
      return rc;
  }
  if (!count_export(c, n))
    return VAT_ENOMEM;
  snprintf(slot, VAT_CAPTP_SLOT_MAX, "p+%llu", (unsigned long long)n);
  return VAT_OK;
}

/* --- A ref's iface ------------------------------------------------------ */

#define IFACE_PREFIX "Alleged: "
/* Bytes of the label: as many as the library keeps (a guard for the
 * buffer: a kept label is no longer, and a replaced byte takes one). */
#define IFACE_LABEL_MAX VAT_LABEL_MAX

/* The length of the UTF-8 character at s (n bytes left), or 0 when the
 * bytes there are not one (overlong forms and surrogates included). */
static size_t utf8_char(const unsigned char *s, size_t n) {
  size_t len = s[0] < 0x80             ? 1
               : (s[0] & 0xE0) == 0xC0 ? 2
               : (s[0] & 0xF0) == 0xE0 ? 3
               : (s[0] & 0xF8) == 0xF0 ? 4
                                       : 0;
  if (len == 0 || len > n)
    return 0;
  uint32_t cp = len == 1 ? s[0] : s[0] & (0x7F >> len);
  for (size_t i = 1; i < len; i++) {
    if ((s[i] & 0xC0) != 0x80)
      return 0;
    cp = cp << 6 | (s[i] & 0x3F);
  }
  static const uint32_t least[5] = {0, 0, 0x80, 0x800, 0x10000};
  if (cp < least[len] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
    return 0;
  return len;
}

/* "Alleged: LABEL" for a ref of a vat with a label: the program's text,
 * shown by the peer (Endo's remotables print it), so it is cut to
 * IFACE_LABEL_MAX bytes, and control characters and bytes that are not
 * UTF-8 become '?': the frame stays valid JSON text of a bounded size.
 * Without a label, the library's name. One label made is kept: a
 * connection's exports mostly come from a few vats. */
static const char *iface_of(net_conn *c, vat_ref *ref) {
  const char *label = vat_ref_label(ref);
  if (label == NULL || label[0] == '\0')
    return IFACE_PREFIX "libvat";
  if (label == c->iface_label)
    return c->iface;
  char *s = GC_MALLOC_ATOMIC(sizeof IFACE_PREFIX + IFACE_LABEL_MAX);
  if (s == NULL)
    return IFACE_PREFIX "libvat";
  memcpy(s, IFACE_PREFIX, sizeof IFACE_PREFIX - 1);
  size_t out = sizeof IFACE_PREFIX - 1, in = 0, left = strlen(label);
  const size_t end = out + IFACE_LABEL_MAX;
  while (in < left) {
    const unsigned char *at = (const unsigned char *)label + in;
    size_t len = utf8_char(at, left - in);
    if (len == 0 || at[0] < 0x20 || at[0] == 0x7F) {
      if (out + 1 > end)
        break;
      s[out++] = '?';
      in += len ? len : 1;
      continue;
    }
    if (out + len > end)
      break; /* cut before a character that does not fit whole */
    memcpy(s + out, at, len);
    out += len;
    in += len;
  }
  s[out] = '\0';
  c->iface_label = label;
  c->iface = s;
  return s;
}

static int export_slot(void *ctx, vat_value v, char slot[VAT_CAPTP_SLOT_MAX],
                       const char **iface) {
  net_slots_ctx *x = ctx;
  net_conn *c = x->c;
  vat_ref *ref = vat_value_ref(v);
  if (ref == NULL)
    return export_promise(x, vat_value_promise(v), slot);
  uint64_t key = (uint64_t)(uintptr_t)ref;
  uint64_t theirs = (uint64_t)(uintptr_t)net_table_get(&c->import_ids, key);
  if (theirs != 0) {
    snprintf(slot, VAT_CAPTP_SLOT_MAX, "o-%llu", (unsigned long long)theirs);
    return VAT_OK;
  }
  uint64_t n = (uint64_t)(uintptr_t)net_table_get(&c->export_ids, key);
  if (n == 0) {
    if (c->exports.len + c->export_promises.len >= c->max_exports)
      return VAT_EBUSY; /* the value does not go: its call breaks */
    n = c->next_export++;
    if (!net_table_put(&c->exports, n, ref) ||
        !net_table_put(&c->export_ids, key, (void *)(uintptr_t)n))
      return VAT_ENOMEM;
  }
  if (!count_export(c, n))
    return VAT_ENOMEM;
  snprintf(slot, VAT_CAPTP_SLOT_MAX, "o+%llu", (unsigned long long)n);
  *iface = iface_of(c, ref);
  return VAT_OK;
}

/* --- Importing ----------------------------------------------------------- */

static int import_object(net_slots_ctx *x, uint64_t n, vat_value *out) {
  net_conn *c = x->c;
  vat_ref *ref = net_table_get(&c->imports, n);
  if (ref == NULL) {
    if (c->imports.len >= c->max_exports)
      return VAT_EBUSY; /* ends the connection: a bad message */
    proxy *p;
    int rc = vat_entity_new(x->turn, &proxy_def, &ref, (void **)&p);
    if (rc != VAT_OK)
      return rc;
    p->c = c;
    p->id = n;
    if (!net_table_put(&c->imports, n, ref) ||
        !net_table_put(&c->import_ids, (uint64_t)(uintptr_t)ref,
                       (void *)(uintptr_t)n))
      return VAT_ENOMEM;
  }
  *out = vat_ref_value(ref);
  return VAT_OK;
}

static int import_promise_slot(net_conn *c, uint64_t n, vat_value *out) {
  import_promise *ip = net_table_get(&c->promises, n);
  if (ip == NULL) {
    if (c->promises.len >= c->max_exports)
      return VAT_EBUSY; /* ends the connection */
    ip = GC_MALLOC(sizeof *ip);
    if (ip == NULL || vat_promise_new(&ip->promise, &ip->resolver) != VAT_OK ||
        !net_table_put(&c->promises, n, ip) ||
        !net_table_put(&c->import_promise_ids, (uint64_t)(uintptr_t)ip->promise,
                       (void *)(uintptr_t)n))
      return VAT_ENOMEM;
  }
  *out = vat_promise_value(ip->promise);
  return VAT_OK;
}

static int import_slot(void *ctx, const char *slot, const char *iface,
                       vat_value *out) {
  net_slots_ctx *x = ctx;
  uint64_t n;
  (void)iface;
  if ((n = net_parse(slot, 'o', '+')) != 0)
    return import_object(x, n, out);
  if ((n = net_parse(slot, 'o', '-')) != 0) {
    vat_ref *ref = net_table_get(&x->c->exports, n);
    if (ref == NULL)
      return VAT_ENOTFOUND; /* not an export of ours: a bad message */
    *out = vat_ref_value(ref);
    return VAT_OK;
  }
  if ((n = net_parse(slot, 'p', '+')) != 0)
    return import_promise_slot(x->c, n, out);
  if ((n = net_parse(slot, 'p', '-')) != 0) {
    vat_promise *p = net_table_get(&x->c->export_promises, n);
    if (p == NULL)
      return VAT_ENOTFOUND;
    *out = vat_promise_value(p);
    return VAT_OK;
  }
  return VAT_ENOTFOUND;
}

vat_resolver *net_take_promise(net_conn *c, uint64_t n) {
  import_promise *ip = net_table_take(&c->promises, n);
  if (ip == NULL)
    return NULL;
  net_table_take(&c->import_promise_ids, (uint64_t)(uintptr_t)ip->promise);
  return ip->resolver;
}

/* An answer nobody asked for any more, a one-way message's above all, is
 * left undecoded: a client streaming one-way messages spent over half
 * its decoding on the answers it then dropped. */
static bool wants_value(void *ctx, const vat_captp_msg *m) {
  net_conn *c = ((net_slots_ctx *)ctx)->c;
  if (m->type == VAT_CAPTP_RETURN)
    return net_table_get(&c->questions, net_parse(m->id, 'q', '-')) != NULL;
  if (m->type == VAT_CAPTP_RESOLVE)
    return net_table_get(&c->promises, net_parse(m->id, 'p', '-')) != NULL;
  return true;
}

uint64_t net_values_skipped(const net_conn *c) {
  return c->values_skipped;
}

vat_captp_slots net_slots(net_slots_ctx *ctx) {
  return (vat_captp_slots){ctx, export_slot, import_slot, wants_value};
}
