/* Capdata bodies to values: JSON as parsed by jansson (every number a
 * double), "@qclass" objects as vat/captp.h's table says. Recursion is
 * bounded by VAT_CAPTP_MAX_DEPTH, so a hostile body cannot exhaust the
 * stack; jansson's parser bounds its own nesting (2048). */
#include <gc/gc.h>
#include <math.h>
#include <string.h>

#include "captp/internal.h"
#include "value/value_internal.h"

#define FAIL(d, code, ...)                                                     \
  captp__fail((d)->err, VAT_EDECODE, VAT_CAPTP_ERR_##code, 0, __VA_ARGS__)

static int nomem(captp__decoder *d) {
  return captp__fail(d->err, VAT_ENOMEM, VAT_CAPTP_ERR_NOMEM, 0, "decode");
}

int captp__decode_list(captp__decoder *d, const json_t *j, int depth,
                       captp__decode_fn *item, vat_value *out) {
  size_t n = json_array_size(j);
  vat_value *items = n > 0 ? GC_MALLOC(n * sizeof *items) : NULL;
  if (n > 0 && items == NULL)
    return nomem(d);
  for (size_t i = 0; i < n; i++) {
    int rc = item(d, json_array_get(j, i), depth, &items[i]);
    if (rc != VAT_OK)
      return rc;
  }
  *out = vat_list(items, n);
  return out->type == VAT_T_NULL ? nomem(d) : VAT_OK;
}

int captp__decode_members(captp__decoder *d, const json_t *j, int depth,
                          const char *skip, captp__key_fn *key_of,
                          captp__decode_fn *item, vat_value *out) {
  size_t n = json_object_size(j), i = 0;
  vat_value *keys = n > 0 ? GC_MALLOC(n * sizeof *keys) : NULL;
  vat_value *vals = n > 0 ? GC_MALLOC(n * sizeof *vals) : NULL;
  if (n > 0 && (keys == NULL || vals == NULL))
    return nomem(d);
  const char *key;
  size_t key_len;
  json_t *val;
  json_object_keylen_foreach((json_t *)j, key, key_len, val) {
    if (skip != NULL && strlen(skip) == key_len &&
        memcmp(key, skip, key_len) == 0)
      continue;
    int rc = key_of(d, key, key_len, &keys[i]);
    if (rc == VAT_OK)
      rc = item(d, val, depth, &vals[i]);
    if (rc != VAT_OK)
      return rc;
    i++;
  }
  *out = vat_map(keys, vals, i);
  return out->type == VAT_T_NULL ? nomem(d) : VAT_OK;
}

/* Capdata names a property by its plain text. */
static int plain_key(captp__decoder *d, const char *key, size_t len,
                     vat_value *out) {
  const vat_atom *a = vat_atom_intern_weak_n(key, len);
  if (a == NULL)
    return nomem(d);
  *out = vat_atom_value(a);
  return VAT_OK;
}

/* A JSON object's members, decoded, as a map with atom keys; `skip`
 * (NULL for none) names one key left out. */
static int members(captp__decoder *d, const json_t *j, int depth,
                   const char *skip, vat_value *out) {
  return captp__decode_members(d, j, depth, skip, plain_key,
                               captp__decode_capdata, out);
}

/* A string member of a @qclass object, or NULL. */
static const char *str_field(const json_t *j, const char *name, size_t *len) {
  json_t *f = json_object_get(j, name);
  if (!json_is_string(f))
    return NULL;
  *len = json_string_length(f);
  return json_string_value(f);
}

static int slot(captp__decoder *d, const json_t *j, vat_value *out) {
  json_t *index = json_object_get(j, "index");
  json_t *iface = json_object_get(j, "iface");
  double x = json_is_number(index) ? json_number_value(index) : -1;
  if (x < 0 || x != floor(x) || x >= (double)d->n_slots)
    return FAIL(d, SLOT, "slot index is not an integer below %zu", d->n_slots);
  if (iface != NULL && !json_is_string(iface))
    return FAIL(d, SLOT, "slot iface is not a string");
  return captp__import(d, (json_int_t)x,
                       iface != NULL ? json_string_value(iface) : NULL, 0, out);
}

static int error_form(captp__decoder *d, const json_t *j, int depth,
                      vat_value *out) {
  size_t name_len = 0, msg_len = 0;
  const char *name = str_field(j, "name", &name_len);
  const char *msg = str_field(j, "message", &msg_len);
  if (name == NULL || msg == NULL)
    return FAIL(d, ERROR, "error needs string name and message");
  /* The other fields, "@qclass", "name" and "message" aside. */
  json_t *rest = json_deep_copy(j);
  if (rest == NULL)
    return nomem(d);
  json_object_del(rest, "name");
  json_object_del(rest, "message");
  vat_value extra;
  int rc = members(d, rest, depth, "@qclass", &extra);
  json_decref(rest);
  if (rc != VAT_OK)
    return rc;
  return captp__error(name, name_len, msg, msg_len, extra, out, d->err);
}

/* Endo's "hilbert hotel": a record that has its own "@qclass" key. */
static int hilbert(captp__decoder *d, const json_t *j, int depth,
                   vat_value *out) {
  json_t *original = json_object_get(j, "original");
  json_t *rest = json_object_get(j, "rest");
  if (original == NULL ||
      (rest != NULL && (!json_is_object(rest) || json_object_size(rest) == 0 ||
                        json_object_get(rest, "@qclass"))))
    return FAIL(d, QCLASS, "malformed hilbert");
  vat_value base = vat_map(NULL, NULL, 0);
  int rc = rest != NULL ? members(d, rest, depth, NULL, &base) : VAT_OK;
  vat_value orig;
  if (rc == VAT_OK)
    rc = captp__decode_capdata(d, original, depth, &orig);
  if (rc != VAT_OK)
    return rc;
  const vat__map *m = base.as.obj;
  vat_value *keys = GC_MALLOC((m->n + 1) * sizeof *keys);
  vat_value *vals = GC_MALLOC((m->n + 1) * sizeof *vals);
  if (keys == NULL || vals == NULL)
    return nomem(d);
  size_t i;
  for (i = 0; i < m->n; i++) {
    keys[i] = m->entries[i].key;
    vals[i] = m->entries[i].val;
  }
  keys[i] = vat_atom_value(captp__atom_qclass());
  vals[i] = orig;
  *out = vat_map(keys, vals, i + 1);
  return out->type == VAT_T_NULL ? nomem(d) : VAT_OK;
}

static int qclass(captp__decoder *d, const json_t *j, const char *qc, int depth,
                  vat_value *out) {
  size_t len;
  const char *s;
  if (strcmp(qc, "undefined") == 0) {
    *out = vat_atom_value(captp__atom_undefined());
    return VAT_OK;
  }
  if (strcmp(qc, "NaN") == 0) {
    *out = vat_float(NAN);
    return VAT_OK;
  }
  if (strcmp(qc, "Infinity") == 0 || strcmp(qc, "-Infinity") == 0) {
    *out = vat_float(qc[0] == '-' ? -INFINITY : INFINITY);
    return VAT_OK;
  }
  if (strcmp(qc, "bigint") == 0) {
    if ((s = str_field(j, "digits", &len)) == NULL)
      return FAIL(d, BIGINT, "bigint without string digits");
    return captp__bigint(s, len, out, d->err);
  }
  if (strcmp(qc, "symbol") == 0) {
    if ((s = str_field(j, "name", &len)) == NULL)
      return FAIL(d, QCLASS, "symbol without a string name");
    const vat_atom *a = vat_atom_intern_weak_n(s, len);
    if (a == NULL)
      return nomem(d);
    *out = vat_atom_value(a);
    return VAT_OK;
  }
  if (strcmp(qc, "tagged") == 0) {
    json_t *payload = json_object_get(j, "payload");
    if ((s = str_field(j, "tag", &len)) == NULL || payload == NULL)
      return FAIL(d, TAGGED, "tagged without a string tag and a payload");
    vat_value p;
    int rc = captp__decode_capdata(d, payload, depth, &p);
    return rc != VAT_OK ? rc : captp__tagged(s, len, p, out, d->err);
  }
  if (strcmp(qc, "slot") == 0)
    return slot(d, j, out);
  if (strcmp(qc, "error") == 0)
    return error_form(d, j, depth, out);
  if (strcmp(qc, "hilbert") == 0)
    return hilbert(d, j, depth, out);
  return FAIL(d, QCLASS, "unknown @qclass \"%.60s\"", qc);
}

int captp__decode_capdata(captp__decoder *d, const json_t *j, int depth,
                          vat_value *out) {
  if (++depth > VAT_CAPTP_MAX_DEPTH)
    return FAIL(d, DEPTH, "deeper than %d", VAT_CAPTP_MAX_DEPTH);
  switch (json_typeof(j)) {
  case JSON_NULL:
    *out = vat_null();
    return VAT_OK;
  case JSON_TRUE:
  case JSON_FALSE:
    *out = vat_bool(json_is_true(j));
    return VAT_OK;
  case JSON_INTEGER: /* not with CAPTP__JSON_LOAD; kept for completeness */
  case JSON_REAL:
    *out = vat_float(json_number_value(j));
    return VAT_OK;
  case JSON_STRING:
    *out = vat_string_n(json_string_value(j), json_string_length(j));
    return out->type == VAT_T_NULL ? nomem(d) : VAT_OK;
  case JSON_ARRAY:
    return captp__decode_list(d, j, depth, captp__decode_capdata, out);
  case JSON_OBJECT: {
    json_t *qc = json_object_get(j, "@qclass");
    if (qc == NULL)
      return members(d, j, depth, NULL, out);
    if (!json_is_string(qc) ||
        strlen(json_string_value(qc)) != json_string_length(qc))
      return FAIL(d, QCLASS, "@qclass is not a string");
    return qclass(d, j, json_string_value(qc), depth, out);
  }
  }
  return FAIL(d, JSON, "unexpected JSON type");
}
