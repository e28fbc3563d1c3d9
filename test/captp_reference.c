/* The CapTP encoder as it was before the streaming one: a jansson tree
 * for the body, dumped, then a tree for the envelope with the body as a
 * string, dumped into the frame. Kept unchanged, under other names, only
 * in the test build, but for what the protocol gained since (send-only
 * calls, note [10] of vat/captp.h): the reference the streaming encoder
 * is compared with byte for byte (test_captp.c, "encoder" case). */
#include <gc/gc.h>
#include <jansson.h>
#include <math.h>
#include <string.h>

#include "captp/internal.h"
#include "captp_reference.h"
#include "value/value_internal.h"

/* --- dump.c ------------------------------------------------------------ */

typedef struct sink {
  char *buf;
  size_t len, cap;
} sink;

static int append(const char *text, size_t n, void *data) {
  sink *s = data;
  if (s->len + n + 2 > s->cap) {
    size_t cap = s->cap * 2;
    while (s->len + n + 2 > cap)
      cap *= 2;
    char *grown = GC_REALLOC(s->buf, cap);
    if (grown == NULL)
      return -1;
    s->buf = grown;
    s->cap = cap;
  }
  memcpy(s->buf + s->len, text, n);
  s->len += n;
  return 0;
}

static char *captp__dump(const json_t *j, size_t flags, size_t reserve,
                         size_t *len) {
  sink s = {.buf = GC_MALLOC_ATOMIC(256 + reserve),
            .len = reserve,
            .cap = 256 + reserve};
  if (s.buf == NULL || json_dump_callback(j, append, &s, flags) != 0)
    return NULL;
  s.buf[s.len] = '\0'; /* append keeps two bytes free: ',' and NUL */
  *len = s.len - reserve;
  return s.buf;
}

/* --- encode.c ---------------------------------------------------------- */

typedef struct encoder {
  const vat_captp_slots *table;
  vat_captp_error *err;
  json_t *slots;       /* the slot names, in index order */
  vat_value *exported; /* the value of each slot, for reuse */
  size_t n, cap;
} encoder;

#define FAIL(e, code, ...)                                                     \
  captp__fail((e)->err, VAT_EENCODE, VAT_CAPTP_ERR_##code, 0, __VA_ARGS__)

static int encode(encoder *e, vat_value v, int depth, json_t **out);

static int nomem(encoder *e) {
  return captp__fail(e->err, VAT_ENOMEM, VAT_CAPTP_ERR_NOMEM, 0, "encode");
}

/* Takes `j` (NULL: out of memory) into *out. */
static int give(encoder *e, json_t *j, json_t **out) {
  *out = j;
  return j == NULL ? nomem(e) : VAT_OK;
}

/* {"@qclass": qclass}, ready for more members. */
static json_t *qobject(const char *qclass) {
  json_t *o = json_object();
  if (o != NULL &&
      json_object_set_new_nocheck(o, "@qclass", json_string_nocheck(qclass))) {
    json_decref(o);
    return NULL;
  }
  return o;
}

/* Sets o[key] = v, taking v (NULL: out of memory); false on failure. The
 * caller frees o. */
static bool put(json_t *o, const char *key, json_t *v) {
  return v != NULL && json_object_set_new_nocheck(o, key, v) == 0;
}

/* Gives *out the object o, or frees it and fails when !ok. */
static int built(encoder *e, json_t *o, bool ok, json_t **out) {
  if (!ok) {
    json_decref(o);
    return nomem(e);
  }
  *out = o;
  return VAT_OK;
}

static int string(encoder *e, const char *s, size_t len, json_t **out) {
  *out = json_stringn(s, len);
  return *out != NULL ? VAT_OK : FAIL(e, UTF8, "\"%.40s\"", s);
}

static int number(encoder *e, double f, json_t **out) {
  if (isnan(f))
    return give(e, qobject("NaN"), out);
  if (isinf(f))
    return give(e, qobject(f > 0 ? "Infinity" : "-Infinity"), out);
  /* As JS writes numbers: integral ones without a fraction, -0 as 0. */
  if (f == floor(f) && fabs(f) < 9.2e18)
    return give(e, json_integer((json_int_t)f), out);
  return give(e, json_real(f), out);
}

static int bigint_digits(encoder *e, const char *digits, json_t **out) {
  json_t *o = qobject("bigint");
  return built(e, o, o != NULL && put(o, "digits", json_string_nocheck(digits)),
               out);
}

static int int64(encoder *e, int64_t i, json_t **out) {
  char buf[24];
  snprintf(buf, sizeof buf, "%lld", (long long)i);
  return bigint_digits(e, buf, out);
}

static int atom(encoder *e, const vat_atom *a, json_t **out) {
  if (a == captp__atom_undefined())
    return give(e, qobject("undefined"), out);
  json_t *name;
  int rc = string(e, vat_atom_name(a), vat_atom_len(a), &name);
  if (rc != VAT_OK)
    return rc;
  json_t *o = qobject("symbol");
  if (o == NULL)
    json_decref(name);
  return built(e, o, o != NULL && put(o, "name", name), out);
}

/* {"@qclass":"tagged","tag":tag,"payload":payload}, taking payload. */
static int tagged(encoder *e, const char *tag, size_t tag_len, json_t *payload,
                  json_t **out) {
  json_t *t;
  int rc = string(e, tag, tag_len, &t);
  if (rc != VAT_OK) {
    json_decref(payload);
    return rc;
  }
  json_t *o = qobject("tagged");
  if (o == NULL) {
    json_decref(t);
    json_decref(payload);
    return nomem(e);
  }
  bool ok = put(o, "tag", t);
  if (!ok)
    json_decref(payload);
  return built(e, o, ok && put(o, "payload", payload), out);
}

static int list(encoder *e, const vat_value *items, size_t n, int depth,
                json_t **out) {
  json_t *a = json_array();
  if (a == NULL)
    return nomem(e);
  for (size_t i = 0; i < n; i++) {
    json_t *item;
    int rc = encode(e, items[i], depth, &item);
    if (rc == VAT_OK && json_array_append_new(a, item) != 0)
      rc = nomem(e);
    if (rc != VAT_OK) {
      json_decref(a);
      return rc;
    }
  }
  *out = a;
  return VAT_OK;
}

static int bytes(encoder *e, vat_value v, json_t **out) {
  size_t len;
  char *b64 = captp__base64_encode(vat_bytes_data(v), vat_bytes_len(v), &len);
  json_t *payload = b64 != NULL ? json_stringn_nocheck(b64, len) : NULL;
  if (payload == NULL)
    return nomem(e);
  return tagged(e, "vat:bytes", 9, payload, out);
}

/* The entries of a map with atom keys as an object's members; `skip`
 * (NULL for none) is left out. */
static int members(encoder *e, const vat__map *m, const vat_atom *skip,
                   int depth, json_t *o) {
  for (size_t i = 0; i < m->n; i++) {
    const vat_atom *k = m->entries[i].key.as.atom;
    if (k == skip)
      continue;
    json_t *v;
    int rc = encode(e, m->entries[i].val, depth, &v);
    if (rc != VAT_OK)
      return rc;
    if (json_object_setn_new(o, vat_atom_name(k), vat_atom_len(k), v) != 0)
      return FAIL(e, UTF8, "key \"%.40s\"", vat_atom_name(k));
  }
  return VAT_OK;
}

static bool atom_keyed(const vat__map *m) {
  for (size_t i = 0; i < m->n; i++)
    if (m->entries[i].key.type != VAT_T_ATOM)
      return false;
  return true;
}

/* Endo's hilbert hotel: {"@qclass":"hilbert","original":...,"rest":{...}}
 * for a record whose own key is "@qclass". */
static int hilbert(encoder *e, const vat__map *m, int depth, json_t **out) {
  vat_value orig;
  vat_map_get((vat_value){.type = VAT_T_MAP, .as.obj = m},
              vat_atom_value(captp__atom_qclass()), &orig);
  json_t *j, *rest = NULL;
  int rc = encode(e, orig, depth, &j);
  if (rc != VAT_OK)
    return rc;
  if (m->n > 1) {
    rest = json_object();
    if (rest == NULL ||
        (rc = members(e, m, captp__atom_qclass(), depth, rest)) != VAT_OK) {
      json_decref(rest);
      json_decref(j);
      return rc != VAT_OK ? rc : nomem(e);
    }
  }
  json_t *o = qobject("hilbert");
  if (o == NULL) {
    json_decref(j);
    json_decref(rest);
    return nomem(e);
  }
  bool ok = put(o, "original", j);
  if (!ok)
    json_decref(rest);
  return built(e, o, ok && (rest == NULL || put(o, "rest", rest)), out);
}

static int map(encoder *e, vat_value v, int depth, json_t **out) {
  const vat__map *m = v.as.obj;
  if (atom_keyed(m)) {
    vat_value ignored;
    if (vat_map_get(v, vat_atom_value(captp__atom_qclass()), &ignored) ==
        VAT_OK)
      return hilbert(e, m, depth, out);
    json_t *o = json_object();
    if (o == NULL)
      return nomem(e);
    int rc = members(e, m, NULL, depth, o);
    if (rc != VAT_OK) {
      json_decref(o);
      return rc;
    }
    *out = o;
    return VAT_OK;
  }
  /* copyMap, keys in descending order: Endo's rank order for a copyMap's
   * keys is descending, and for keys of one type vat_compare agrees. */
  vat_value *keys = GC_MALLOC(m->n * sizeof *keys);
  vat_value *vals = GC_MALLOC(m->n * sizeof *vals);
  if (keys == NULL || vals == NULL)
    return nomem(e);
  for (size_t i = 0; i < m->n; i++) {
    keys[i] = m->entries[m->n - 1 - i].key;
    vals[i] = m->entries[m->n - 1 - i].val;
  }
  json_t *k, *vs;
  int rc = list(e, keys, m->n, depth, &k);
  if (rc != VAT_OK)
    return rc;
  if ((rc = list(e, vals, m->n, depth, &vs)) != VAT_OK) {
    json_decref(k);
    return rc;
  }
  json_t *payload = json_object();
  bool ok = payload != NULL && put(payload, "keys", k);
  if (!ok)
    json_decref(k);
  if (!(ok && put(payload, "values", vs))) {
    if (payload == NULL || !ok)
      json_decref(vs);
    json_decref(payload);
    return nomem(e);
  }
  return tagged(e, "copyMap", 7, payload, out);
}

static int record(encoder *e, vat_value v, int depth, json_t **out) {
  const vat__record *r = v.as.obj;
  if (r->label == captp__atom_bigint() && r->n == 1 &&
      r->fields[0].type == VAT_T_STRING &&
      captp__is_digits(vat_string_data(r->fields[0]),
                       vat_string_len(r->fields[0])) &&
      strlen(vat_string_data(r->fields[0])) == vat_string_len(r->fields[0]))
    return bigint_digits(e, vat_string_data(r->fields[0]), out);
  json_t *payload;
  int rc = list(e, r->fields, r->n, depth, &payload);
  if (rc != VAT_OK)
    return rc;
  return tagged(e, vat_atom_name(r->label), vat_atom_len(r->label), payload,
                out);
}

/* The error's fields from its payload (note [8] of vat/captp.h), into o;
 * the caller frees o on failure. */
static int error_fields(encoder *e, vat_value p, int depth, json_t *o) {
  vat_value msg, ignored;
  if (p.type == VAT_T_NULL)
    return put(o, "message", json_string_nocheck("")) ? VAT_OK : nomem(e);
  if (p.type == VAT_T_STRING) {
    json_t *s;
    int rc = string(e, vat_string_data(p), vat_string_len(p), &s);
    if (rc != VAT_OK)
      return rc;
    return put(o, "message", s) ? VAT_OK : nomem(e);
  }
  if (p.type == VAT_T_MAP && atom_keyed(p.as.obj) &&
      vat_map_get(p, vat_atom_value(captp__atom_message()), &msg) == VAT_OK &&
      msg.type == VAT_T_STRING &&
      vat_map_get(p, vat_atom_value(captp__atom_name()), &ignored) != VAT_OK &&
      vat_map_get(p, vat_atom_value(captp__atom_qclass()), &ignored) != VAT_OK)
    return members(e, p.as.obj, NULL, depth, o);
  json_t *j;
  int rc = encode(e, p, depth, &j);
  if (rc != VAT_OK)
    return rc;
  if (!put(o, "message", json_string_nocheck(""))) {
    json_decref(j);
    return nomem(e);
  }
  return put(o, "payload", j) ? VAT_OK : nomem(e);
}

static int error(encoder *e, vat_value v, int depth, json_t **out) {
  const vat_atom *code = vat_error_code(v);
  json_t *name, *o = qobject("error");
  if (o == NULL)
    return nomem(e);
  /* Members in Endo's order, sorted: errorId, message, then name. */
  int rc = error_fields(e, vat_error_payload(v), depth, o);
  if (rc == VAT_OK)
    rc = string(e, vat_atom_name(code), vat_atom_len(code), &name);
  if (rc != VAT_OK) {
    json_decref(o);
    return rc;
  }
  return built(e, o, put(o, "name", name), out);
}

/* The slot of a ref or promise: the same one again reuses its index. */
static int slot(encoder *e, vat_value v, json_t **out) {
  size_t index = 0;
  while (index < e->n && !(e->exported[index].type == v.type &&
                           e->exported[index].as.obj == v.as.obj))
    index++;
  const char *iface = NULL;
  if (index == e->n) {
    if (e->table == NULL || e->table->export_slot == NULL)
      return FAIL(e, EXPORT, "no slot table");
    char name[VAT_CAPTP_SLOT_MAX] = {0};
    int rc = e->table->export_slot(e->table->ctx, v, name, &iface);
    if (rc != VAT_OK)
      return captp__fail(e->err, rc < 0 ? rc : VAT_EENCODE,
                         VAT_CAPTP_ERR_EXPORT, 0, "%s", vat_strerror(rc));
    name[VAT_CAPTP_SLOT_MAX - 1] = '\0';
    if (e->n == e->cap) {
      size_t cap = e->cap ? 2 * e->cap : 8;
      vat_value *grown = GC_MALLOC(cap * sizeof *grown);
      if (grown == NULL)
        return nomem(e);
      if (e->n > 0)
        memcpy(grown, e->exported, e->n * sizeof *grown);
      e->exported = grown;
      e->cap = cap;
    }
    json_t *s;
    if ((rc = string(e, name, strlen(name), &s)) != VAT_OK)
      return rc;
    if (json_array_append_new(e->slots, s) != 0)
      return nomem(e);
    e->exported[e->n++] = v;
  }
  json_t *iface_j = NULL;
  if (iface != NULL && v.type == VAT_T_REF) {
    int rc = string(e, iface, strlen(iface), &iface_j);
    if (rc != VAT_OK)
      return rc;
  }
  json_t *o = qobject("slot");
  if (o == NULL) {
    json_decref(iface_j);
    return nomem(e);
  }
  bool ok = iface_j == NULL || put(o, "iface", iface_j);
  return built(e, o, ok && put(o, "index", json_integer((json_int_t)index)),
               out);
}

static int encode(encoder *e, vat_value v, int depth, json_t **out) {
  *out = NULL;
  if (++depth > VAT_CAPTP_MAX_DEPTH)
    return FAIL(e, DEPTH, "deeper than %d", VAT_CAPTP_MAX_DEPTH);
  switch (v.type) {
  case VAT_T_NULL:
    return give(e, json_null(), out);
  case VAT_T_BOOL:
    return give(e, json_boolean(v.as.b), out);
  case VAT_T_INT:
    return int64(e, v.as.i, out);
  case VAT_T_FLOAT:
    return number(e, v.as.f, out);
  case VAT_T_ATOM:
    return atom(e, v.as.atom, out);
  case VAT_T_STRING:
    return string(e, vat_string_data(v), vat_string_len(v), out);
  case VAT_T_BYTES:
    return bytes(e, v, out);
  case VAT_T_LIST: {
    const vat__list *l = v.as.obj;
    return list(e, l->items, l->n, depth, out);
  }
  case VAT_T_RECORD:
    return record(e, v, depth, out);
  case VAT_T_MAP:
    return map(e, v, depth, out);
  case VAT_T_ERROR:
    return error(e, v, depth, out);
  case VAT_T_REF:
  case VAT_T_PROMISE:
    return slot(e, v, out);
  }
  return FAIL(e, TYPE, "unknown value type %d", (int)v.type);
}

/* The body's text and the slot names; e->slots is the caller's. */
static int encode_body(vat_value v, const vat_captp_slots *table,
                       vat_captp_error *err, encoder *e, char **body,
                       size_t *body_len) {
  *e = (encoder){.table = table, .err = err, .slots = json_array()};
  if (e->slots == NULL)
    return captp__fail(err, VAT_ENOMEM, VAT_CAPTP_ERR_NOMEM, 0, "encode");
  json_t *j;
  int rc = encode(e, v, 0, &j);
  if (rc != VAT_OK)
    return rc;
  *body = captp__dump(
      j, JSON_COMPACT | JSON_ENCODE_ANY | JSON_REAL_PRECISION(17), 0, body_len);
  json_decref(j);
  return *body != NULL ? VAT_OK : nomem(e);
}

static int captp__encode_capdata(vat_value v, const vat_captp_slots *slots,
                                 json_t **out, vat_captp_error *err) {
  encoder e;
  char *body = NULL;
  size_t len = 0;
  int rc = encode_body(v, slots, err, &e, &body, &len);
  json_t *o = rc == VAT_OK ? json_object() : NULL;
  if (rc == VAT_OK && (o == NULL ||
                       json_object_set_new_nocheck(
                           o, "body", json_stringn_nocheck(body, len)) != 0 ||
                       json_object_set_nocheck(o, "slots", e.slots) != 0))
    rc = captp__fail(err, VAT_ENOMEM, VAT_CAPTP_ERR_NOMEM, 0, "encode");
  json_decref(e.slots);
  if (rc != VAT_OK) {
    json_decref(o);
    return rc;
  }
  *out = o;
  return VAT_OK;
}

int captp_ref_capdata_encode(vat_value v, const vat_captp_slots *slots,
                             vat_capdata *out, vat_captp_error *err) {
  captp__clear(err);
  if (out == NULL)
    return captp__fail(err, VAT_EINVAL, VAT_CAPTP_ERR_TYPE, 0, "out is NULL");
  encoder e;
  char *body = NULL;
  size_t len = 0;
  int rc = encode_body(v, slots, err, &e, &body, &len);
  size_t n = e.slots != NULL ? json_array_size(e.slots) : 0;
  const char **names = rc == VAT_OK ? GC_MALLOC((n + 1) * sizeof *names) : NULL;
  if (rc == VAT_OK && names == NULL)
    rc = captp__fail(err, VAT_ENOMEM, VAT_CAPTP_ERR_NOMEM, 0, "encode");
  for (size_t i = 0; rc == VAT_OK && i < n; i++) {
    json_t *s = json_array_get(e.slots, i);
    char *copy = GC_MALLOC_ATOMIC(json_string_length(s) + 1);
    if (copy == NULL) {
      rc = captp__fail(err, VAT_ENOMEM, VAT_CAPTP_ERR_NOMEM, 0, "encode");
      break;
    }
    memcpy(copy, json_string_value(s), json_string_length(s) + 1);
    names[i] = copy;
  }
  json_decref(e.slots);
  if (rc != VAT_OK)
    return rc;
  *out = (vat_capdata){
      .body = body, .body_len = len, .slots = names, .n_slots = n};
  return VAT_OK;
}

/* --- message.c, the encode half ----------------------------------------- */

static const char *const type_names[] = {
    [VAT_CAPTP_BOOTSTRAP] = "CTP_BOOTSTRAP",
    [VAT_CAPTP_CALL] = "CTP_CALL",
    [VAT_CAPTP_RETURN] = "CTP_RETURN",
    [VAT_CAPTP_RESOLVE] = "CTP_RESOLVE",
    [VAT_CAPTP_DROP] = "CTP_DROP",
    [VAT_CAPTP_DISCONNECT] = "CTP_DISCONNECT",
};
#define N_TYPES (sizeof type_names / sizeof type_names[0])

/* Each type's id field, and its two value fields (fulfilled, rejected). */
static const char *const id_field[] = {
    [VAT_CAPTP_BOOTSTRAP] = "questionID", [VAT_CAPTP_CALL] = "questionID",
    [VAT_CAPTP_RETURN] = "answerID",      [VAT_CAPTP_RESOLVE] = "promiseID",
    [VAT_CAPTP_DROP] = "slotID",
};
static const char *const value_field[][2] = {
    [VAT_CAPTP_CALL] = {"method", NULL},
    [VAT_CAPTP_RETURN] = {"result", "exception"},
    [VAT_CAPTP_RESOLVE] = {"res", "rej"},
};

static int msg_nomem(vat_captp_error *err) {
  return captp__fail(err, VAT_ENOMEM, VAT_CAPTP_ERR_NOMEM, 0, "encode");
}

static int encode_fields(const vat_captp_msg *m, const vat_captp_slots *slots,
                         json_t *o, vat_captp_error *err) {
  if (m->has_epoch &&
      json_object_set_new_nocheck(o, "epoch", json_integer(m->epoch)) != 0)
    return msg_nomem(err);
  if (m->type == VAT_CAPTP_DISCONNECT) {
    if (m->reason_json == NULL)
      return VAT_OK;
    json_error_t jerr;
    json_t *r = json_loads(m->reason_json, JSON_DECODE_ANY, &jerr);
    if (r == NULL)
      return captp__fail(err, VAT_EINVAL, VAT_CAPTP_ERR_JSON, 0,
                         "reason_json: %s", jerr.text);
    return json_object_set_new_nocheck(o, "reason", r) ? msg_nomem(err)
                                                       : VAT_OK;
  }
  if (m->type == VAT_CAPTP_CALL ? m->target == NULL : m->id == NULL)
    return captp__fail(err, VAT_EINVAL, VAT_CAPTP_ERR_FIELD, 0, "%s needs id%s",
                       type_names[m->type],
                       m->type == VAT_CAPTP_CALL ? " and target" : "");
  json_t *id = m->id == NULL ? NULL : json_string(m->id);
  if (m->id != NULL &&
      (id == NULL || json_object_set_new_nocheck(o, id_field[m->type], id)))
    return captp__fail(err, VAT_EINVAL, VAT_CAPTP_ERR_UTF8, 0, "id");
  if (m->type == VAT_CAPTP_CALL) {
    json_t *t = json_string(m->target);
    if (t == NULL || json_object_set_new_nocheck(o, "target", t))
      return captp__fail(err, VAT_EINVAL, VAT_CAPTP_ERR_UTF8, 0, "target");
  }
  if (m->type == VAT_CAPTP_DROP)
    return json_object_set_new_nocheck(o, "decRefs", json_integer(m->dec_refs))
               ? msg_nomem(err)
               : VAT_OK;
  if (m->type == VAT_CAPTP_BOOTSTRAP)
    return m->takes_send_only && json_object_set_new_nocheck(
                                     o, "acceptsSendOnly", json_true())
               ? msg_nomem(err)
               : VAT_OK;
  const char *name = value_field[m->type][m->is_reject ? 1 : 0];
  if (name == NULL)
    name = value_field[m->type][0];
  json_t *cd;
  int rc = captp__encode_capdata(m->value, slots, &cd, err);
  if (rc != VAT_OK)
    return rc;
  return json_object_set_new_nocheck(o, name, cd) ? msg_nomem(err) : VAT_OK;
}

/* The message's JSON after `reserve` free bytes (see captp__dump). */
static int encode_message(const vat_captp_msg *msg,
                          const vat_captp_slots *slots, size_t reserve,
                          char **buf, size_t *len, vat_captp_error *err) {
  captp__clear(err);
  if (msg == NULL || buf == NULL || len == NULL ||
      msg->type == VAT_CAPTP_UNKNOWN || (size_t)msg->type >= N_TYPES)
    return captp__fail(err, VAT_EINVAL, VAT_CAPTP_ERR_TYPE, 0,
                       "NULL argument or no known type");
  json_t *o = json_object();
  if (o == NULL || json_object_set_new_nocheck(
                       o, "type", json_string_nocheck(type_names[msg->type]))) {
    json_decref(o);
    return msg_nomem(err);
  }
  int rc = encode_fields(msg, slots, o, err);
  if (rc == VAT_OK &&
      (*buf = captp__dump(o, JSON_COMPACT, reserve, len)) == NULL)
    rc = msg_nomem(err);
  json_decref(o);
  return rc;
}

int captp_ref_encode(const vat_captp_msg *msg, const vat_captp_slots *slots,
                     char **out, size_t *out_len, vat_captp_error *err) {
  char *buf = NULL;
  size_t len = 0;
  int rc = encode_message(msg, slots, 0, &buf, &len, err);
  if (rc != VAT_OK)
    return rc;
  if (out == NULL || out_len == NULL)
    return VAT_EINVAL;
  *out = buf;
  *out_len = len;
  return VAT_OK;
}

/* The header goes right before the JSON, in the space reserved for it:
 * the frame is one buffer, written once. */
int captp_ref_encode_frame(const vat_captp_msg *msg,
                           const vat_captp_slots *slots, char **out,
                           size_t *out_len, vat_captp_error *err) {
  enum { RESERVE = 12 };
  char *buf = NULL;
  size_t len = 0;
  int rc = encode_message(msg, slots, RESERVE, &buf, &len, err);
  if (rc != VAT_OK)
    return rc;
  if (out == NULL || out_len == NULL)
    return VAT_EINVAL;
  char header[12];
  size_t h = vat_netstring_header(len, header);
  if (h == 0)
    return captp__fail(err, VAT_EFRAMESIZE, VAT_CAPTP_ERR_TOO_LARGE, 0,
                       "%zu bytes", len);
  char *frame = buf + RESERVE - h;
  memcpy(frame, header, h);
  frame[h + len] = ',';
  frame[h + len + 1] = '\0';
  *out = frame;
  *out_len = h + len + 1;
  return VAT_OK;
}
