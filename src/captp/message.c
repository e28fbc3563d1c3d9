/* CapTP messages to and from JSON: the envelope around CapData values.
 * Field names per type are the table at the end of vat/captp.h's mapping;
 * which types exist is Endo 4.5's list (CTP_TRAP_ITERATE and any other
 * type decode as UNKNOWN, which the connection ignores, as Endo does). */
#include <gc/gc.h>
#include <math.h>
#include <string.h>

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

/* A string member copied into the collector's memory, or NULL. */
static const char *gc_string(const json_t *o, const char *key) {
  json_t *s = json_object_get(o, key);
  if (!json_is_string(s) ||
      strlen(json_string_value(s)) != json_string_length(s))
    return NULL;
  size_t n = json_string_length(s);
  char *copy = GC_MALLOC_ATOMIC(n + 1);
  if (copy != NULL)
    memcpy(copy, json_string_value(s), n + 1);
  return copy;
}

/* An integral JSON number that fits int64, into *out. */
static bool int_field(const json_t *o, const char *key, int64_t *out) {
  json_t *n = json_object_get(o, key);
  if (!json_is_number(n))
    return false;
  double x = json_number_value(n);
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

static int decode_fields(const json_t *j, const vat_captp_slots *slots,
                         vat_captp_msg *m, vat_captp_error *err) {
  /* Endo leaves epoch out of some messages and never checks it. */
  m->has_epoch = int_field(j, "epoch", &m->epoch);
  if (m->type == VAT_CAPTP_UNKNOWN)
    return VAT_OK;
  if (m->type == VAT_CAPTP_DISCONNECT) {
    json_t *reason = json_object_get(j, "reason");
    if (reason != NULL) {
      size_t len;
      char *text = NULL;
      size_t n = json_dumpb(reason, NULL, 0, JSON_COMPACT | JSON_ENCODE_ANY);
      if (n > 0 && (text = GC_MALLOC_ATOMIC(n + 1)) != NULL &&
          (len = json_dumpb(reason, text, n, JSON_COMPACT | JSON_ENCODE_ANY)) ==
              n)
        text[n] = '\0';
      else
        return captp__fail(err, VAT_ENOMEM, VAT_CAPTP_ERR_NOMEM, 0, "reason");
      m->reason_json = text;
    }
    return VAT_OK;
  }
  if ((m->id = gc_string(j, id_field[m->type])) == NULL)
    return FIELD_FAIL(err, "%s needs a string %s", type_names[m->type],
                      id_field[m->type]);
  if (m->type == VAT_CAPTP_DROP) {
    m->dec_refs = 0;
    if (json_object_get(j, "decRefs") != NULL &&
        (!int_field(j, "decRefs", &m->dec_refs) || m->dec_refs < 0))
      return FIELD_FAIL(err, "decRefs is not a count");
    return VAT_OK;
  }
  if (m->type == VAT_CAPTP_CALL && (m->target = gc_string(j, "target")) == NULL)
    return FIELD_FAIL(err, "CTP_CALL needs a string target");
  if (m->type == VAT_CAPTP_BOOTSTRAP)
    return VAT_OK;
  const char *const *names = value_field[m->type];
  json_t *cd = json_object_get(j, names[0]);
  if (cd == NULL && names[1] != NULL) {
    cd = json_object_get(j, names[1]);
    m->is_reject = true;
  }
  if (cd == NULL)
    return FIELD_FAIL(err, "%s needs %s%s%s", type_names[m->type], names[0],
                      names[1] ? " or " : "", names[1] ? names[1] : "");
  bool in_value;
  int rc = captp__decode_capdata_object(cd, slots, &m->value, &in_value, err);
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
  json_error_t jerr;
  json_t *j = json_loadb(json, len, CAPTP__JSON_LOAD, &jerr);
  if (j == NULL)
    return captp__fail(err, VAT_EDECODE, VAT_CAPTP_ERR_JSON,
                       (size_t)jerr.position, "%s", jerr.text);
  int rc;
  json_t *type = json_object_get(j, "type");
  if (!json_is_object(j) || !json_is_string(type)) {
    rc = captp__fail(err, VAT_EDECODE, VAT_CAPTP_ERR_MESSAGE, 0,
                     "no string \"type\"");
  } else {
    out->type = type_of(json_string_value(type));
    if (out->type == VAT_CAPTP_UNKNOWN)
      out->type_name = gc_string(j, "type");
    rc = decode_fields(j, slots, out, err);
  }
  json_decref(j);
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
                   const vat_captp_slots *slots, vat_captp_error *err) {
  TRY(err, put_key(o, field) && PUT_LIT(o, "{\"body\":\""));
  captp__encoder e;
  captp__encoder_init(&e, o, true, slots, err);
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
  if (m->id == NULL || (m->type == VAT_CAPTP_CALL && m->target == NULL))
    return captp__fail(err, VAT_EINVAL, VAT_CAPTP_ERR_FIELD, 0, "%s needs id%s",
                       type_names[m->type],
                       m->type == VAT_CAPTP_CALL ? " and target" : "");
  int rc = string_field(o, id_field[m->type], m->id, "id", err);
  if (rc == VAT_OK && m->type == VAT_CAPTP_CALL)
    rc = string_field(o, "target", m->target, "target", err);
  if (rc != VAT_OK)
    return rc;
  if (m->type == VAT_CAPTP_DROP) {
    TRY(err, put_key(o, "decRefs") && captp__out_int(o, m->dec_refs));
    return VAT_OK;
  }
  if (m->type == VAT_CAPTP_BOOTSTRAP)
    return VAT_OK;
  const char *name = value_field[m->type][m->is_reject ? 1 : 0];
  if (name == NULL)
    name = value_field[m->type][0];
  return capdata(o, name, m->value, slots, err);
}

/* The message's JSON after `reserve` free bytes, two more free after it
 * (see out.h). */
static int encode_message(const vat_captp_msg *msg,
                          const vat_captp_slots *slots, size_t reserve,
                          captp__out *o, vat_captp_error *err) {
  captp__clear(err);
  if (msg == NULL || msg->type == VAT_CAPTP_UNKNOWN ||
      (size_t)msg->type >= N_TYPES)
    return captp__fail(err, VAT_EINVAL, VAT_CAPTP_ERR_TYPE, 0,
                       "NULL argument or no known type");
  const char *type = type_names[msg->type];
  TRY(err, captp__out_init(o, reserve) && PUT_LIT(o, "{\"type\":\"") &&
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
  int rc = encode_message(msg, slots, 0, &o, err);
  if (rc != VAT_OK)
    return rc;
  if (out == NULL || out_len == NULL)
    return VAT_EINVAL;
  o.buf[o.len] = '\0';
  *out = o.buf;
  *out_len = o.len;
  return VAT_OK;
}

/* The header goes right before the JSON, in the space reserved for it:
 * the frame is one buffer, written once. */
int vat_captp_encode_frame(const vat_captp_msg *msg,
                           const vat_captp_slots *slots, char **out,
                           size_t *out_len, vat_captp_error *err) {
  enum { RESERVE = 12 };
  captp__out o;
  int rc = encode_message(msg, slots, RESERVE, &o, err);
  if (rc != VAT_OK)
    return rc;
  if (out == NULL || out_len == NULL)
    return VAT_EINVAL;
  size_t len = o.len - RESERVE;
  char header[12];
  size_t h = vat_netstring_header(len, header);
  if (h == 0)
    return captp__fail(err, VAT_EFRAMESIZE, VAT_CAPTP_ERR_TOO_LARGE, 0,
                       "%zu bytes", len);
  char *frame = o.buf + RESERVE - h;
  memcpy(frame, header, h);
  frame[h + len] = ',';
  frame[h + len + 1] = '\0';
  *out = frame;
  *out_len = h + len + 1;
  return VAT_OK;
}
