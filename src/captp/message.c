/* CapTP messages to and from JSON: the envelope around CapData values.
 * Field names per type are the table at the end of vat/captp.h's mapping;
 * which types exist is Endo 4.5's list (CTP_TRAP_ITERATE and any other
 * type decode as UNKNOWN, which the connection ignores, as Endo does). */
#include <gc/gc.h>
#include <math.h>
#include <string.h>

#include <jansson.h>

#include "captp/encoder.h"

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

const char *vat_captp_type_name(vat_captp_type type) {
  return (size_t)type < N_TYPES ? type_names[type] : NULL;
}

#define FIELD_FAIL(err, ...)                                                   \
  captp__fail(err, VAT_EDECODE, VAT_CAPTP_ERR_FIELD, 0, __VA_ARGS__)

#define NODE(j, i) captp__jat(j, i)

/* The string at node `at` (0: none) copied into the collector's memory,
 * or NULL (also for one with a NUL inside, which no C string holds). */
static const char *gc_string_at(const captp__json *j, uint32_t at) {
  const captp__jnode *s = NODE(j, at);
  if (at == 0 || s->type != CAPTP__J_STRING || strlen(s->as.str) != s->len)
    return NULL;
  char *copy = GC_MALLOC_ATOMIC(s->len + 1);
  if (copy != NULL)
    memcpy(copy, s->as.str, s->len + 1);
  return copy;
}

/* A string member, as gc_string_at. */
static const char *gc_string(const captp__json *j, uint32_t o,
                             const char *key) {
  return gc_string_at(j, captp__json_get(j, o, key, strlen(key)));
}

/* An integral JSON number that fits int64, into *out. */
static bool int_field(const captp__json *j, uint32_t o, const char *key,
                      int64_t *out) {
  uint32_t at = captp__json_get(j, o, key, strlen(key));
  if (at == 0 || NODE(j, at)->type != CAPTP__J_NUMBER)
    return false;
  double x = NODE(j, at)->as.num;
  if (x != floor(x) || fabs(x) >= 9.2e18)
    return false;
  *out = (int64_t)x;
  return true;
}

static vat_captp_type type_of(const char *name) {
  for (size_t t = 1; t < N_TYPES; t++)
    if (strcmp(name, type_names[t]) == 0)
      return (vat_captp_type)t;
  return VAT_CAPTP_UNKNOWN;
}

/* The JSON at node `at` written compact, as jansson's dump wrote it: each
 * name once, where it first came, with its last value; every number a
 * real (precision 17); strings escaped as out.c escapes them. */
static bool dump(const captp__json *j, uint32_t at, captp__out *o) {
  const captp__jnode *n = NODE(j, at);
  switch ((captp__jtype)n->type) {
  case CAPTP__J_NULL:
    return captp__out_put(o, "null", 4);
  case CAPTP__J_FALSE:
    return captp__out_put(o, "false", 5);
  case CAPTP__J_TRUE:
    return captp__out_put(o, "true", 4);
  case CAPTP__J_NUMBER:
    return captp__out_real(o, n->as.num);
  case CAPTP__J_STRING:
    return captp__out_string(o, n->as.str, n->len, false) == CAPTP__OUT_OK;
  case CAPTP__J_ARRAY: {
    bool ok = captp__out_put(o, "[", 1);
    uint32_t i = at + 1;
    for (uint32_t k = 0; ok && k < n->len; k++, i = NODE(j, i)->end)
      ok = (k == 0 || captp__out_put(o, ",", 1)) && dump(j, i, o);
    return ok && captp__out_put(o, "]", 1);
  }
  case CAPTP__J_OBJECT: {
    captp__jmembers ms;
    bool ok = captp__json_members(j, at, &ms) && captp__out_put(o, "{", 1);
    for (size_t k = 0; ok && k < ms.n; k++) {
      const captp__jnode *key = NODE(j, ms.m[k].key);
      ok =
          (k == 0 || captp__out_put(o, ",", 1)) &&
          captp__out_string(o, key->as.str, key->len, false) == CAPTP__OUT_OK &&
          captp__out_put(o, ":", 1) && dump(j, ms.m[k].val, o);
    }
    captp__json_members_free(&ms);
    return ok && captp__out_put(o, "}", 1);
  }
  }
  return false;
}

static int decode_fields(const captp__json *j, const vat_captp_slots *slots,
                         vat_captp_msg *m, vat_captp_error *err) {
  /* Endo leaves epoch out of some messages and never checks it. */
  m->has_epoch = int_field(j, 0, "epoch", &m->epoch);
  if (m->type == VAT_CAPTP_UNKNOWN)
    return VAT_OK;
  if (m->type == VAT_CAPTP_DISCONNECT) {
    uint32_t reason = CAPTP__JSON_GET(j, 0, "reason");
    if (reason != 0) {
      captp__out o;
      if (!captp__out_init(&o, 0) || !dump(j, reason, &o))
        return captp__fail(err, VAT_ENOMEM, VAT_CAPTP_ERR_NOMEM, 0, "reason");
      o.buf[o.len] = '\0';
      m->reason_json = o.buf;
    }
    return VAT_OK;
  }
  /* A CALL without a questionID is send-only (note [10] of vat/captp.h);
   * one that is there must be a string. */
  const char *id_name = id_field[m->type];
  uint32_t id = captp__json_get(j, 0, id_name, strlen(id_name));
  bool send_only = m->type == VAT_CAPTP_CALL && id == 0;
  if (!send_only && (m->id = gc_string_at(j, id)) == NULL)
    return FIELD_FAIL(err, "%s needs a string %s", type_names[m->type],
                      id_field[m->type]);
  if (m->type == VAT_CAPTP_DROP) {
    m->dec_refs = 0;
    if (CAPTP__JSON_GET(j, 0, "decRefs") != 0 &&
        (!int_field(j, 0, "decRefs", &m->dec_refs) || m->dec_refs < 0))
      return FIELD_FAIL(err, "decRefs is not a count");
    return VAT_OK;
  }
  if (m->type == VAT_CAPTP_CALL &&
      (m->target = gc_string(j, 0, "target")) == NULL)
    return FIELD_FAIL(err, "CTP_CALL needs a string target");
  if (m->type == VAT_CAPTP_BOOTSTRAP) {
    uint32_t takes = CAPTP__JSON_GET(j, 0, "acceptsSendOnly");
    m->takes_send_only = takes != 0 && NODE(j, takes)->type == CAPTP__J_TRUE;
    return VAT_OK;
  }
  const char *const *names = value_field[m->type];
  uint32_t cd = captp__json_get(j, 0, names[0], strlen(names[0]));
  if (cd == 0 && names[1] != NULL) {
    cd = captp__json_get(j, 0, names[1], strlen(names[1]));
    m->is_reject = true;
  }
  if (cd == 0)
    return FIELD_FAIL(err, "%s needs %s%s%s", type_names[m->type], names[0],
                      names[1] ? " or " : "", names[1] ? names[1] : "");
  bool in_value;
  bool unwanted = slots != NULL && slots->wants_value != NULL &&
                  !slots->wants_value(slots->ctx, m);
  int rc =
      captp__decode_capdata_object(j, cd, slots, unwanted, &m->value, &in_value,
                                   &m->value_skipped, &m->format, err);
  m->value_failed = rc != VAT_OK && in_value;
  if (rc != VAT_OK)
    m->value = vat_null();
  return rc;
}

int vat_captp_decode(const char *json, size_t len, const vat_captp_slots *slots,
                     vat_captp_msg *out, vat_captp_error *err) {
  captp__clear(err);
  if (json == NULL || out == NULL)
    return captp__fail(err, VAT_EINVAL, VAT_CAPTP_ERR_TYPE, 0, "NULL argument");
  *out = (vat_captp_msg){0};
  captp__json j;
  int rc = captp__json_parse(&j, json, len, 0, "", err);
  if (rc == VAT_OK) {
    uint32_t type = CAPTP__JSON_GET(&j, 0, "type");
    if (NODE(&j, 0)->type != CAPTP__J_OBJECT || type == 0 ||
        NODE(&j, type)->type != CAPTP__J_STRING) {
      rc = captp__fail(err, VAT_EDECODE, VAT_CAPTP_ERR_MESSAGE, 0,
                       "no string \"type\"");
    } else {
      out->type = type_of(NODE(&j, type)->as.str);
      if (out->type == VAT_CAPTP_UNKNOWN)
        out->type_name = gc_string(&j, 0, "type");
      rc = decode_fields(&j, slots, out, err);
    }
  }
  captp__json_free(&j);
  return rc;
}

/* --- Encoding: the envelope written as text (out.h), with each value's
 * body written into it already escaped as the string it is (encoder.h). */

#define PUT_LIT(o, s) captp__out_put(o, s, sizeof s - 1)
#define TRY(err, write)                                                        \
  do {                                                                         \
    if (!(write))                                                              \
      return captp__encode_nomem(err);                                         \
  } while (0)

/* ,"name": */
static bool put_key(captp__out *o, const char *name) {
  return PUT_LIT(o, ",\"") && captp__out_put(o, name, strlen(name)) &&
         PUT_LIT(o, "\":");
}

/* A string field, or `what` named as not UTF-8. */
static int string_field(captp__out *o, const char *key, const char *s,
                        const char *what, vat_captp_error *err) {
  TRY(err, put_key(o, key));
  switch (captp__out_string(o, s, strlen(s), false)) {
  case CAPTP__OUT_OK:
    return VAT_OK;
  case CAPTP__OUT_UTF8:
    return captp__fail(err, VAT_EINVAL, VAT_CAPTP_ERR_UTF8, 0, "%s", what);
  case CAPTP__OUT_NOMEM:
    break;
  }
  return captp__encode_nomem(err);
}

static int append_json(const char *text, size_t n, void *data) {
  return captp__out_put(data, text, n) ? 0 : -1;
}

/* The disconnect reason: JSON the caller wrote, checked and written
 * compact. Once a connection, so jansson's parse and dump stay. */
static int reason(captp__out *o, const char *reason_json,
                  vat_captp_error *err) {
  json_error_t jerr;
  json_t *r = json_loads(reason_json, JSON_DECODE_ANY, &jerr);
  if (r == NULL)
    return captp__fail(err, VAT_EINVAL, VAT_CAPTP_ERR_JSON, 0,
                       "reason_json: %s", jerr.text);
  bool ok = put_key(o, "reason") &&
            json_dump_callback(r, append_json, o,
                               JSON_COMPACT | JSON_ENCODE_ANY) == 0;
  json_decref(r);
  return ok ? VAT_OK : captp__encode_nomem(err);
}

/* ,"<field>":{"body":"<the body, escaped>","slots":[names]} */
static int capdata(captp__out *o, const char *field, vat_value v,
                   vat_captp_format format, const vat_captp_slots *slots,
                   vat_captp_error *err) {
  TRY(err, put_key(o, field) && PUT_LIT(o, "{\"body\":\""));
  captp__encoder e;
  captp__encoder_init(&e, o, true, format, slots, err);
  int rc = captp__encode_body(&e, v);
  if (rc != VAT_OK)
    return rc;
  TRY(err, PUT_LIT(o, "\",\"slots\":["));
  for (size_t i = 0; i < e.n; i++) {
    /* The encoder checked each name's UTF-8 when it took it. */
    TRY(err, (i == 0 || PUT_LIT(o, ",")) &&
                 captp__out_string(o, e.names[i], strlen(e.names[i]), false) ==
                     CAPTP__OUT_OK);
  }
  TRY(err, PUT_LIT(o, "]}"));
  return VAT_OK;
}

/* The fields after "type", in the order the envelope always had. */
static int encode_fields(const vat_captp_msg *m, const vat_captp_slots *slots,
                         captp__out *o, vat_captp_error *err) {
  if (m->has_epoch)
    TRY(err, put_key(o, "epoch") && captp__out_int(o, m->epoch));
  if (m->type == VAT_CAPTP_DISCONNECT)
    return m->reason_json == NULL ? VAT_OK : reason(o, m->reason_json, err);
  if (m->type == VAT_CAPTP_CALL ? m->target == NULL : m->id == NULL)
    return captp__fail(err, VAT_EINVAL, VAT_CAPTP_ERR_FIELD, 0, "%s needs %s",
                       type_names[m->type],
                       m->type == VAT_CAPTP_CALL ? "id and target" : "id");
  /* A CALL without one is send-only (note [10] of vat/captp.h). */
  int rc = m->id == NULL ? VAT_OK
                         : string_field(o, id_field[m->type], m->id, "id", err);
  if (rc == VAT_OK && m->type == VAT_CAPTP_CALL)
    rc = string_field(o, "target", m->target, "target", err);
  if (rc != VAT_OK)
    return rc;
  if (m->type == VAT_CAPTP_DROP) {
    TRY(err, put_key(o, "decRefs") && captp__out_int(o, m->dec_refs));
    return VAT_OK;
  }
  if (m->type == VAT_CAPTP_BOOTSTRAP) {
    if (m->takes_send_only)
      TRY(err, put_key(o, "acceptsSendOnly") && PUT_LIT(o, "true"));
    return VAT_OK;
  }
  const char *name = value_field[m->type][m->is_reject ? 1 : 0];
  if (name == NULL)
    name = value_field[m->type][0];
  return capdata(o, name, m->value, m->format, slots, err);
}

/* The message's JSON after `reserve` free bytes, two more free after it
 * (see out.h); `heap`: into the caller's buffer, o->buf and o->cap, which
 * it takes back whatever the result. */
static int encode_message(const vat_captp_msg *msg,
                          const vat_captp_slots *slots, size_t reserve,
                          captp__out *o, bool heap, vat_captp_error *err) {
  captp__clear(err);
  if (msg == NULL || msg->type == VAT_CAPTP_UNKNOWN ||
      (size_t)msg->type >= N_TYPES)
    return captp__fail(err, VAT_EINVAL, VAT_CAPTP_ERR_TYPE, 0,
                       "NULL argument or no known type");
  if (msg->format != VAT_CAPTP_CAPDATA && msg->format != VAT_CAPTP_SMALLCAPS)
    return captp__fail(err, VAT_EINVAL, VAT_CAPTP_ERR_TYPE, 0,
                       "unknown body format %d", (int)msg->format);
  const char *type = type_names[msg->type];
  bool ready = heap ? captp__out_init_heap(o, reserve, o->buf, o->cap)
                    : captp__out_init(o, reserve);
  TRY(err, ready && PUT_LIT(o, "{\"type\":\"") &&
               captp__out_put(o, type, strlen(type)) && PUT_LIT(o, "\""));
  int rc = encode_fields(msg, slots, o, err);
  if (rc != VAT_OK)
    return rc;
  TRY(err, PUT_LIT(o, "}"));
  return VAT_OK;
}

int vat_captp_encode(const vat_captp_msg *msg, const vat_captp_slots *slots,
                     char **out, size_t *out_len, vat_captp_error *err) {
  captp__out o;
  int rc = encode_message(msg, slots, 0, &o, false, err);
  if (rc != VAT_OK)
    return rc;
  if (out == NULL || out_len == NULL)
    return VAT_EINVAL;
  o.buf[o.len] = '\0';
  *out = o.buf;
  *out_len = o.len;
  return VAT_OK;
}

enum { RESERVE = 12 };

/* The header goes right before the JSON, in the space reserved for it:
 * the frame is one buffer, written once. */
static int frame(captp__out *o, char **out, size_t *out_len,
                 vat_captp_error *err) {
  size_t len = o->len - RESERVE;
  char header[12];
  size_t h = vat_netstring_header(len, header);
  if (h == 0)
    return captp__fail(err, VAT_EFRAMESIZE, VAT_CAPTP_ERR_TOO_LARGE, 0,
                       "%zu bytes", len);
  char *at = o->buf + RESERVE - h;
  memcpy(at, header, h);
  at[h + len] = ',';
  at[h + len + 1] = '\0';
  *out = at;
  *out_len = h + len + 1;
  return VAT_OK;
}

int vat_captp_encode_frame(const vat_captp_msg *msg,
                           const vat_captp_slots *slots, char **out,
                           size_t *out_len, vat_captp_error *err) {
  captp__out o;
  int rc = encode_message(msg, slots, RESERVE, &o, false, err);
  if (rc != VAT_OK)
    return rc;
  if (out == NULL || out_len == NULL)
    return VAT_EINVAL;
  return frame(&o, out, out_len, err);
}

int vat_captp_encode_frame_into(vat_captp_frame_buf *buf,
                                const vat_captp_msg *msg,
                                const vat_captp_slots *slots, char **out,
                                size_t *out_len, vat_captp_error *err) {
  if (buf == NULL || out == NULL || out_len == NULL) {
    captp__clear(err);
    return captp__fail(err, VAT_EINVAL, VAT_CAPTP_ERR_TYPE, 0, "NULL argument");
  }
  captp__out o = {.buf = buf->data, .cap = buf->cap};
  int rc = encode_message(msg, slots, RESERVE, &o, true, err);
  buf->data = o.buf; /* grown or not, still the caller's */
  buf->cap = o.cap;
  if (rc != VAT_OK)
    return rc;
  return frame(&o, out, out_len, err);
}

void vat_captp_frame_buf_free(vat_captp_frame_buf *buf) {
  if (buf != NULL) {
    free(buf->data);
    *buf = (vat_captp_frame_buf){0};
  }
}
