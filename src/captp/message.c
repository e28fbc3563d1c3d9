/* CapTP messages to and from JSON: the envelope around CapData values.
 * Field names per type are the table at the end of vat/captp.h's mapping;
 * which types exist is Endo 4.5's list (CTP_TRAP_ITERATE and any other
 * type decode as UNKNOWN, which the connection ignores, as Endo does). */
#include <gc/gc.h>
#include <math.h>
#include <string.h>

#include "captp/internal.h"

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

static int nomem(vat_captp_error *err) {
  return captp__fail(err, VAT_ENOMEM, VAT_CAPTP_ERR_NOMEM, 0, "encode");
}

static int encode_fields(const vat_captp_msg *m, const vat_captp_slots *slots,
                         json_t *o, vat_captp_error *err) {
  if (m->has_epoch &&
      json_object_set_new_nocheck(o, "epoch", json_integer(m->epoch)) != 0)
    return nomem(err);
  if (m->type == VAT_CAPTP_DISCONNECT) {
    if (m->reason_json == NULL)
      return VAT_OK;
    json_error_t jerr;
    json_t *r = json_loads(m->reason_json, JSON_DECODE_ANY, &jerr);
    if (r == NULL)
      return captp__fail(err, VAT_EINVAL, VAT_CAPTP_ERR_JSON, 0,
                         "reason_json: %s", jerr.text);
    return json_object_set_new_nocheck(o, "reason", r) ? nomem(err) : VAT_OK;
  }
  if (m->id == NULL || (m->type == VAT_CAPTP_CALL && m->target == NULL))
    return captp__fail(err, VAT_EINVAL, VAT_CAPTP_ERR_FIELD, 0, "%s needs id%s",
                       type_names[m->type],
                       m->type == VAT_CAPTP_CALL ? " and target" : "");
  json_t *id = json_string(m->id);
  if (id == NULL || json_object_set_new_nocheck(o, id_field[m->type], id))
    return captp__fail(err, VAT_EINVAL, VAT_CAPTP_ERR_UTF8, 0, "id");
  if (m->type == VAT_CAPTP_CALL) {
    json_t *t = json_string(m->target);
    if (t == NULL || json_object_set_new_nocheck(o, "target", t))
      return captp__fail(err, VAT_EINVAL, VAT_CAPTP_ERR_UTF8, 0, "target");
  }
  if (m->type == VAT_CAPTP_DROP)
    return json_object_set_new_nocheck(o, "decRefs", json_integer(m->dec_refs))
               ? nomem(err)
               : VAT_OK;
  if (m->type == VAT_CAPTP_BOOTSTRAP)
    return VAT_OK;
  const char *name = value_field[m->type][m->is_reject ? 1 : 0];
  if (name == NULL)
    name = value_field[m->type][0];
  json_t *cd;
  int rc = captp__encode_capdata(m->value, slots, &cd, err);
  if (rc != VAT_OK)
    return rc;
  return json_object_set_new_nocheck(o, name, cd) ? nomem(err) : VAT_OK;
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
    return nomem(err);
  }
  int rc = encode_fields(msg, slots, o, err);
  if (rc == VAT_OK &&
      (*buf = captp__dump(o, JSON_COMPACT, reserve, len)) == NULL)
    rc = nomem(err);
  json_decref(o);
  return rc;
}

int vat_captp_encode(const vat_captp_msg *msg, const vat_captp_slots *slots,
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
int vat_captp_encode_frame(const vat_captp_msg *msg,
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
