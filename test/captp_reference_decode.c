/* The CapTP decoder as it was before the one-pass one: jansson parses
 * the envelope, then the body (a string holding JSON), and the trees are
 * walked into values. Kept unchanged, under other names, only in the test
 * build, but for what the protocol gained since (send-only calls, note
 * [10] of vat/captp.h): the reference the one-pass decoder is compared
 * with, value for value and failure for failure (test_captp.c, "decoder"
 * case). Its sections are the files it was: value.c, decode.c,
 * smallcaps.c and the decoding half of message.c. */
#include <gc/gc.h>
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "captp/internal.h"
#include "captp_reference.h"
#include "value/value_internal.h"

#define REF_JSON_LOAD                                                          \
  (JSON_DECODE_ANY | JSON_ALLOW_NUL | JSON_DECODE_INT_AS_REAL)

typedef struct ref_decoder {
  const char *const *slot_names;
  size_t n_slots;
  vat_value *imported;
  const vat_captp_slots *table;
  vat_captp_error *err;
} ref_decoder;

int ref_import(ref_decoder *d, json_int_t index, const char *iface, char want,
               vat_value *out);
int ref_decode_capdata(ref_decoder *d, const json_t *j, int depth,
                       vat_value *out);
int ref_decode_smallcaps(ref_decoder *d, const json_t *j, int depth,
                         vat_value *out);
typedef int ref_decode_fn(ref_decoder *d, const json_t *j, int depth,
                          vat_value *out);
int ref_decode_list(ref_decoder *d, const json_t *j, int depth,
                    ref_decode_fn *item, vat_value *out);
typedef int ref_key_fn(ref_decoder *d, const char *key, size_t len,
                       vat_value *out);
int ref_decode_members(ref_decoder *d, const json_t *j, int depth,
                       const char *skip, ref_key_fn *key_of,
                       ref_decode_fn *item, vat_value *out);
int ref_decode_body(const char *body, size_t len, const char *const *slot_names,
                    size_t n_slots, const vat_captp_slots *table,
                    vat_value *out, vat_captp_error *err);
int ref_decode_capdata_object(const json_t *cd, const vat_captp_slots *table,
                              vat_value *out, bool *in_value,
                              vat_captp_error *err);

/* --- value.c ---------------------------------------------------------- */

/* "o+12", "p-3": a kind, a sign, decimal digits without a leading zero. */
static bool slot_name_ok(const char *s) {
  size_t len = strlen(s);
  if (len < 3 || len >= VAT_CAPTP_SLOT_MAX || (s[0] != 'o' && s[0] != 'p') ||
      (s[1] != '+' && s[1] != '-'))
    return false;
  return s[2] != '-' && captp__is_digits(s + 2, len - 2);
}

int ref_import(ref_decoder *d, json_int_t index, const char *iface,
                  char want, vat_value *out) {
  if (index < 0 || (size_t)index >= d->n_slots)
    return captp__fail(d->err, VAT_EDECODE, VAT_CAPTP_ERR_SLOT, 0,
                       "slot index %lld not below %zu", (long long)index,
                       d->n_slots);
  if (d->imported[index].type != VAT_T_NULL) {
    *out = d->imported[index];
    return VAT_OK;
  }
  const char *name = d->slot_names[index];
  if (!slot_name_ok(name) || (want != 0 && name[0] != want))
    return captp__fail(d->err, VAT_EDECODE, VAT_CAPTP_ERR_SLOT, 0,
                       "slot \"%.40s\" is not %c[+-]N", name,
                       want != 0 ? want : 'o');
  if (d->table == NULL || d->table->import_slot == NULL)
    return captp__fail(d->err, VAT_EDECODE, VAT_CAPTP_ERR_IMPORT, 0,
                       "no slot table for \"%s\"", name);
  vat_value v = vat_null();
  int rc = d->table->import_slot(d->table->ctx, name, iface, &v);
  if (rc != VAT_OK)
    return captp__fail(d->err, rc < 0 ? rc : VAT_EDECODE, VAT_CAPTP_ERR_IMPORT,
                       0, "slot \"%s\": %s", name, vat_strerror(rc));
  if (v.type != (name[0] == 'o' ? VAT_T_REF : VAT_T_PROMISE))
    return captp__fail(d->err, VAT_EDECODE, VAT_CAPTP_ERR_SLOT, 0,
                       "the table gave slot \"%s\" a value of the wrong kind",
                       name);
  d->imported[index] = v;
  *out = v;
  return VAT_OK;
}

int ref_decode_body(const char *body, size_t len,
                       const char *const *slot_names, size_t n_slots,
                       const vat_captp_slots *table, vat_value *out,
                       vat_captp_error *err) {
  bool smallcaps = len > 0 && body[0] == '#';
  size_t skip = smallcaps ? 1 : 0;
  json_error_t jerr;
  json_t *j = json_loadb(body + skip, len - skip, REF_JSON_LOAD, &jerr);
  if (j == NULL)
    return captp__fail(err, VAT_EDECODE, VAT_CAPTP_ERR_JSON,
                       (size_t)jerr.position + skip, "body: %s", jerr.text);
  ref_decoder d = {
      .slot_names = slot_names,
      .n_slots = n_slots,
      .imported = n_slots > 0 ? GC_MALLOC(n_slots * sizeof(vat_value)) : NULL,
      .table = table,
      .err = err,
  };
  int rc;
  if (n_slots > 0 && d.imported == NULL)
    rc = captp__fail(err, VAT_ENOMEM, VAT_CAPTP_ERR_NOMEM, 0, "slots");
  else if (smallcaps)
    rc = ref_decode_smallcaps(&d, j, 0, out);
  else
    rc = ref_decode_capdata(&d, j, 0, out);
  json_decref(j);
  return rc;
}

int captp_ref_capdata_decode(const char *body, size_t body_len,
                       const char *const *slot_names, size_t n_slots,
                       const vat_captp_slots *slots, vat_value *out,
                       vat_captp_error *err) {
  captp__clear(err);
  if (body == NULL || out == NULL || (slot_names == NULL && n_slots > 0))
    return captp__fail(err, VAT_EINVAL, VAT_CAPTP_ERR_TYPE, 0, "NULL argument");
  for (size_t i = 0; i < n_slots; i++)
    if (slot_names[i] == NULL)
      return captp__fail(err, VAT_EINVAL, VAT_CAPTP_ERR_TYPE, 0,
                         "slot name %zu is NULL", i);
  return ref_decode_body(body, body_len, slot_names, n_slots, slots, out,
                            err);
}

int ref_decode_capdata_object(const json_t *cd, const vat_captp_slots *table,
                                 vat_value *out, bool *in_value,
                                 vat_captp_error *err) {
  *in_value = false;
  json_t *body = json_object_get(cd, "body");
  json_t *slots = json_object_get(cd, "slots");
  if (!json_is_object(cd) || !json_is_string(body) || !json_is_array(slots))
    return captp__fail(err, VAT_EDECODE, VAT_CAPTP_ERR_CAPDATA, 0,
                       "not {body, slots}");
  size_t n = json_array_size(slots);
  const char **names = n > 0 ? GC_MALLOC(n * sizeof *names) : NULL;
  if (n > 0 && names == NULL)
    return captp__fail(err, VAT_ENOMEM, VAT_CAPTP_ERR_NOMEM, 0, "slots");
  for (size_t i = 0; i < n; i++) {
    json_t *s = json_array_get(slots, i);
    if (!json_is_string(s))
      return captp__fail(err, VAT_EDECODE, VAT_CAPTP_ERR_CAPDATA, 0,
                         "slot %zu is not a string", i);
    names[i] = json_string_value(s);
  }
  /* The shape was sound: what fails from here is the value itself. */
  *in_value = true;
  return ref_decode_body(json_string_value(body), json_string_length(body),
                            names, n, table, out, err);
}

/* --- decode.c --------------------------------------------------------- */

#define FAIL(d, code, ...)                                                     \
  captp__fail((d)->err, VAT_EDECODE, VAT_CAPTP_ERR_##code, 0, __VA_ARGS__)

static int cd_nomem(ref_decoder *d) {
  return captp__fail(d->err, VAT_ENOMEM, VAT_CAPTP_ERR_NOMEM, 0, "decode");
}

int ref_decode_list(ref_decoder *d, const json_t *j, int depth,
                       ref_decode_fn *item, vat_value *out) {
  size_t n = json_array_size(j);
  vat_value *items = n > 0 ? GC_MALLOC(n * sizeof *items) : NULL;
  if (n > 0 && items == NULL)
    return cd_nomem(d);
  for (size_t i = 0; i < n; i++) {
    int rc = item(d, json_array_get(j, i), depth, &items[i]);
    if (rc != VAT_OK)
      return rc;
  }
  *out = vat_list(items, n);
  return out->type == VAT_T_NULL ? cd_nomem(d) : VAT_OK;
}

int ref_decode_members(ref_decoder *d, const json_t *j, int depth,
                          const char *skip, ref_key_fn *key_of,
                          ref_decode_fn *item, vat_value *out) {
  size_t n = json_object_size(j), i = 0;
  vat_value *keys = n > 0 ? GC_MALLOC(n * sizeof *keys) : NULL;
  vat_value *vals = n > 0 ? GC_MALLOC(n * sizeof *vals) : NULL;
  if (n > 0 && (keys == NULL || vals == NULL))
    return cd_nomem(d);
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
  return out->type == VAT_T_NULL ? cd_nomem(d) : VAT_OK;
}

/* Capdata names a property by its plain text. */
static int cd_plain_key(ref_decoder *d, const char *key, size_t len,
                     vat_value *out) {
  const vat_atom *a = vat_atom_intern_weak_n(key, len);
  if (a == NULL)
    return cd_nomem(d);
  *out = vat_atom_value(a);
  return VAT_OK;
}

/* A JSON object's members, decoded, as a map with atom keys; `skip`
 * (NULL for none) names one key left out. */
static int cd_members(ref_decoder *d, const json_t *j, int depth,
                   const char *skip, vat_value *out) {
  return ref_decode_members(d, j, depth, skip, cd_plain_key,
                               ref_decode_capdata, out);
}

/* A string member of a @qclass object, or NULL. */
static const char *cd_str_field(const json_t *j, const char *name, size_t *len) {
  json_t *f = json_object_get(j, name);
  if (!json_is_string(f))
    return NULL;
  *len = json_string_length(f);
  return json_string_value(f);
}

static int cd_slot(ref_decoder *d, const json_t *j, vat_value *out) {
  json_t *index = json_object_get(j, "index");
  json_t *iface = json_object_get(j, "iface");
  double x = json_is_number(index) ? json_number_value(index) : -1;
  if (x < 0 || x != floor(x) || x >= (double)d->n_slots)
    return FAIL(d, SLOT, "slot index is not an integer below %zu", d->n_slots);
  if (iface != NULL && !json_is_string(iface))
    return FAIL(d, SLOT, "slot iface is not a string");
  return ref_import(d, (json_int_t)x,
                       iface != NULL ? json_string_value(iface) : NULL, 0, out);
}

static int cd_error_form(ref_decoder *d, const json_t *j, int depth,
                      vat_value *out) {
  size_t name_len = 0, msg_len = 0;
  const char *name = cd_str_field(j, "name", &name_len);
  const char *msg = cd_str_field(j, "message", &msg_len);
  if (name == NULL || msg == NULL)
    return FAIL(d, ERROR, "error needs string name and message");
  /* The other fields, "@qclass", "name" and "message" aside. */
  json_t *rest = json_deep_copy(j);
  if (rest == NULL)
    return cd_nomem(d);
  json_object_del(rest, "name");
  json_object_del(rest, "message");
  vat_value extra;
  int rc = cd_members(d, rest, depth, "@qclass", &extra);
  json_decref(rest);
  if (rc != VAT_OK)
    return rc;
  return captp__error(name, name_len, msg, msg_len, extra, out, d->err);
}

/* Endo's "hilbert hotel": a record that has its own "@qclass" key. */
static int cd_hilbert(ref_decoder *d, const json_t *j, int depth,
                   vat_value *out) {
  json_t *original = json_object_get(j, "original");
  json_t *rest = json_object_get(j, "rest");
  if (original == NULL ||
      (rest != NULL && (!json_is_object(rest) || json_object_size(rest) == 0 ||
                        json_object_get(rest, "@qclass"))))
    return FAIL(d, QCLASS, "malformed hilbert");
  vat_value base = vat_map(NULL, NULL, 0);
  int rc = rest != NULL ? cd_members(d, rest, depth, NULL, &base) : VAT_OK;
  vat_value orig;
  if (rc == VAT_OK)
    rc = ref_decode_capdata(d, original, depth, &orig);
  if (rc != VAT_OK)
    return rc;
  const vat__map *m = base.as.obj;
  vat_value *keys = GC_MALLOC((m->n + 1) * sizeof *keys);
  vat_value *vals = GC_MALLOC((m->n + 1) * sizeof *vals);
  if (keys == NULL || vals == NULL)
    return cd_nomem(d);
  size_t i;
  for (i = 0; i < m->n; i++) {
    keys[i] = m->entries[i].key;
    vals[i] = m->entries[i].val;
  }
  keys[i] = vat_atom_value(captp__atom_qclass());
  vals[i] = orig;
  *out = vat_map(keys, vals, i + 1);
  return out->type == VAT_T_NULL ? cd_nomem(d) : VAT_OK;
}

static int cd_qclass(ref_decoder *d, const json_t *j, const char *qc, int depth,
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
    if ((s = cd_str_field(j, "digits", &len)) == NULL)
      return FAIL(d, BIGINT, "bigint without string digits");
    return captp__bigint(s, len, out, d->err);
  }
  if (strcmp(qc, "symbol") == 0) {
    if ((s = cd_str_field(j, "name", &len)) == NULL)
      return FAIL(d, QCLASS, "symbol without a string name");
    const vat_atom *a = vat_atom_intern_weak_n(s, len);
    if (a == NULL)
      return cd_nomem(d);
    *out = vat_atom_value(a);
    return VAT_OK;
  }
  if (strcmp(qc, "tagged") == 0) {
    json_t *payload = json_object_get(j, "payload");
    if ((s = cd_str_field(j, "tag", &len)) == NULL || payload == NULL)
      return FAIL(d, TAGGED, "tagged without a string tag and a payload");
    vat_value p;
    int rc = ref_decode_capdata(d, payload, depth, &p);
    return rc != VAT_OK ? rc : captp__tagged(s, len, p, out, d->err);
  }
  if (strcmp(qc, "slot") == 0)
    return cd_slot(d, j, out);
  if (strcmp(qc, "error") == 0)
    return cd_error_form(d, j, depth, out);
  if (strcmp(qc, "hilbert") == 0)
    return cd_hilbert(d, j, depth, out);
  return FAIL(d, QCLASS, "unknown @qclass \"%.60s\"", qc);
}

int ref_decode_capdata(ref_decoder *d, const json_t *j, int depth,
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
  case JSON_INTEGER: /* not with REF_JSON_LOAD; kept for completeness */
  case JSON_REAL:
    *out = vat_float(json_number_value(j));
    return VAT_OK;
  case JSON_STRING:
    *out = vat_string_n(json_string_value(j), json_string_length(j));
    return out->type == VAT_T_NULL ? cd_nomem(d) : VAT_OK;
  case JSON_ARRAY:
    return ref_decode_list(d, j, depth, ref_decode_capdata, out);
  case JSON_OBJECT: {
    json_t *qc = json_object_get(j, "@qclass");
    if (qc == NULL)
      return cd_members(d, j, depth, NULL, out);
    if (!json_is_string(qc) ||
        strlen(json_string_value(qc)) != json_string_length(qc))
      return FAIL(d, QCLASS, "@qclass is not a string");
    return cd_qclass(d, j, json_string_value(qc), depth, out);
  }
  }
  return FAIL(d, JSON, "unexpected JSON type");
}

/* --- smallcaps.c ------------------------------------------------------ */

#undef FAIL
#define FAIL(d, ...)                                                           \
  captp__fail((d)->err, VAT_EDECODE, VAT_CAPTP_ERR_SMALLCAPS, 0, __VA_ARGS__)

static int sc_nomem(ref_decoder *d) {
  return captp__fail(d->err, VAT_ENOMEM, VAT_CAPTP_ERR_NOMEM, 0, "decode");
}

static bool sc_special(const char *s, size_t len) {
  return len > 0 && s[0] >= '!' && s[0] <= '-';
}

static bool sc_is(const char *s, size_t len, const char *lit) {
  return len == strlen(lit) && memcmp(s, lit, len) == 0;
}

/* "$12.Alleged: X" or "&3": the index, then the iface after a '.'. */
static int sc_slot_ref(ref_decoder *d, const char *s, size_t len,
                    vat_value *out) {
  size_t i = 1;
  json_int_t index = 0;
  while (i < len && s[i] >= '0' && s[i] <= '9' && i < 16)
    index = index * 10 + (s[i++] - '0');
  if (i == 1 || (s[1] == '0' && i > 2) || (i < len && s[i] != '.'))
    return FAIL(d, "bad slot reference \"%.40s\"", s);
  if (index >= (json_int_t)d->n_slots)
    return captp__fail(d->err, VAT_EDECODE, VAT_CAPTP_ERR_SLOT, 0,
                       "slot index %lld not below %zu", (long long)index,
                       d->n_slots);
  const char *iface = NULL;
  if (i < len) {
    if (s[0] == '&')
      return FAIL(d, "a promise reference has no iface");
    char *copy = GC_MALLOC_ATOMIC(len - i);
    if (copy == NULL)
      return sc_nomem(d);
    memcpy(copy, s + i + 1, len - i - 1);
    copy[len - i - 1] = '\0';
    iface = copy;
  }
  return ref_import(d, index, iface, s[0] == '$' ? 'o' : 'p', out);
}

static int sc_string(ref_decoder *d, const char *s, size_t len,
                  vat_value *out) {
  if (!sc_special(s, len)) {
    *out = vat_string_n(s, len);
    return out->type == VAT_T_NULL ? sc_nomem(d) : VAT_OK;
  }
  switch (s[0]) {
  case '!':
    *out = vat_string_n(s + 1, len - 1);
    return out->type == VAT_T_NULL ? sc_nomem(d) : VAT_OK;
  case '%': {
    const vat_atom *a = vat_atom_intern_weak_n(s + 1, len - 1);
    if (a == NULL)
      return sc_nomem(d);
    *out = vat_atom_value(a);
    return VAT_OK;
  }
  case '#':
    if (sc_is(s, len, "#undefined"))
      *out = vat_atom_value(captp__atom_undefined());
    else if (sc_is(s, len, "#NaN"))
      *out = vat_float(NAN);
    else if (sc_is(s, len, "#Infinity"))
      *out = vat_float(INFINITY);
    else if (sc_is(s, len, "#-Infinity"))
      *out = vat_float(-INFINITY);
    else
      return FAIL(d, "unknown constant \"%.40s\"", s);
    return VAT_OK;
  case '+':
  case '-':
    return captp__bigint(s, len, out, d->err);
  case '$':
  case '&':
    return sc_slot_ref(d, s, len, out);
  }
  return FAIL(d, "reserved special character '%c'", s[0]);
}

/* A smallcaps property name: a string as smallcaps spells one ("!"
 * escapes), so a name starting with '#' (or another special character)
 * is refused. */
static int sc_escaped_key(ref_decoder *d, const char *key, size_t len,
                       vat_value *out) {
  vat_value name;
  int rc = sc_string(d, key, len, &name);
  if (rc != VAT_OK)
    return rc;
  if (name.type != VAT_T_STRING)
    return FAIL(d, "property name \"%.40s\" is not a string", key);
  const vat_atom *a =
      vat_atom_intern_weak_n(vat_string_data(name), vat_string_len(name));
  if (a == NULL)
    return sc_nomem(d);
  *out = vat_atom_value(a);
  return VAT_OK;
}

/* Members as a map with atom keys (names decoded: "!" escapes), leaving
 * out `skip` (NULL for none). Names starting with '#' are refused unless
 * skipped. */
static int sc_members(ref_decoder *d, const json_t *j, int depth,
                   const char *skip, vat_value *out) {
  return ref_decode_members(d, j, depth, skip, sc_escaped_key,
                               ref_decode_smallcaps, out);
}

static int sc_tagged(ref_decoder *d, const json_t *j, int depth,
                  vat_value *out) {
  json_t *tag = json_object_get(j, "#tag");
  json_t *payload = json_object_get(j, "payload");
  if (!json_is_string(tag) || payload == NULL || json_object_size(j) != 2)
    return FAIL(d, "#tag needs a string tag and a payload, nothing else");
  vat_value t, p;
  int rc = sc_string(d, json_string_value(tag), json_string_length(tag), &t);
  if (rc == VAT_OK && t.type != VAT_T_STRING)
    return FAIL(d, "#tag is not a string");
  if (rc == VAT_OK)
    rc = ref_decode_smallcaps(d, payload, depth, &p);
  if (rc != VAT_OK)
    return rc;
  return captp__tagged(vat_string_data(t), vat_string_len(t), p, out, d->err);
}

static int sc_error_form(ref_decoder *d, const json_t *j, int depth,
                      vat_value *out) {
  json_t *message = json_object_get(j, "#error");
  json_t *name = json_object_get(j, "name");
  if (!json_is_string(message) || !json_is_string(name) ||
      json_object_get(j, "message") != NULL)
    return captp__fail(d->err, VAT_EDECODE, VAT_CAPTP_ERR_ERROR, 0,
                       "#error needs a string message and name");
  vat_value m, n, extra;
  int rc =
      sc_string(d, json_string_value(message), json_string_length(message), &m);
  if (rc == VAT_OK)
    rc = sc_string(d, json_string_value(name), json_string_length(name), &n);
  if (rc == VAT_OK && (m.type != VAT_T_STRING || n.type != VAT_T_STRING))
    return captp__fail(d->err, VAT_EDECODE, VAT_CAPTP_ERR_ERROR, 0,
                       "#error's message and name must decode to strings");
  json_t *rest = rc == VAT_OK ? json_deep_copy(j) : NULL;
  if (rc == VAT_OK && rest == NULL)
    return sc_nomem(d);
  if (rc != VAT_OK)
    return rc;
  json_object_del(rest, "name");
  rc = sc_members(d, rest, depth, "#error", &extra);
  json_decref(rest);
  if (rc != VAT_OK)
    return rc;
  return captp__error(vat_string_data(n), vat_string_len(n), vat_string_data(m),
                      vat_string_len(m), extra, out, d->err);
}

int ref_decode_smallcaps(ref_decoder *d, const json_t *j, int depth,
                            vat_value *out) {
  if (++depth > VAT_CAPTP_MAX_DEPTH)
    return captp__fail(d->err, VAT_EDECODE, VAT_CAPTP_ERR_DEPTH, 0,
                       "deeper than %d", VAT_CAPTP_MAX_DEPTH);
  switch (json_typeof(j)) {
  case JSON_NULL:
    *out = vat_null();
    return VAT_OK;
  case JSON_TRUE:
  case JSON_FALSE:
    *out = vat_bool(json_is_true(j));
    return VAT_OK;
  case JSON_INTEGER:
  case JSON_REAL:
    *out = vat_float(json_number_value(j));
    return VAT_OK;
  case JSON_STRING:
    return sc_string(d, json_string_value(j), json_string_length(j), out);
  case JSON_ARRAY:
    return ref_decode_list(d, j, depth, ref_decode_smallcaps, out);
  case JSON_OBJECT:
    if (json_object_get(j, "#tag") != NULL)
      return sc_tagged(d, j, depth, out);
    if (json_object_get(j, "#error") != NULL)
      return sc_error_form(d, j, depth, out);
    return sc_members(d, j, depth, NULL, out);
  }
  return FAIL(d, "unexpected JSON type");
}

/* --- message.c (decoding) --------------------------------------------- */

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
  bool send_only =
      m->type == VAT_CAPTP_CALL && json_object_get(j, "questionID") == NULL;
  if (!send_only && (m->id = gc_string(j, id_field[m->type])) == NULL)
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
  if (m->type == VAT_CAPTP_BOOTSTRAP) {
    m->takes_send_only = json_is_true(json_object_get(j, "acceptsSendOnly"));
    return VAT_OK;
  }
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
  int rc = ref_decode_capdata_object(cd, slots, &m->value, &in_value, err);
  m->value_failed = rc != VAT_OK && in_value;
  if (rc != VAT_OK)
    m->value = vat_null();
  return rc;
}

int captp_ref_decode(const char *json, size_t len, const vat_captp_slots *slots,
                     vat_captp_msg *out, vat_captp_error *err) {
  captp__clear(err);
  if (json == NULL || out == NULL)
    return captp__fail(err, VAT_EINVAL, VAT_CAPTP_ERR_TYPE, 0, "NULL argument");
  *out = (vat_captp_msg){0};
  json_error_t jerr;
  json_t *j = json_loadb(json, len, REF_JSON_LOAD, &jerr);
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
