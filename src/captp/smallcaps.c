/* Smallcaps bodies to values (Endo's newer body format, a '#' then JSON).
 * Strings carry the special forms: a first character from '!' to '-'
 * marks one ("!" escapes a plain string, "%" a symbol, "#" a constant,
 * "+"/"-" a bigint, "$" a remotable, "&" a promise; the rest are
 * reserved); objects with "#tag" or "#error" are tagged values and errors.
 * Decoding only: this library writes capdata, as Endo's CapTP does. */
#include <gc/gc.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "captp/internal.h"

#define FAIL(d, ...)                                                           \
  captp__fail((d)->err, VAT_EDECODE, VAT_CAPTP_ERR_SMALLCAPS, 0, __VA_ARGS__)

static int nomem(captp__decoder *d) {
  return captp__fail(d->err, VAT_ENOMEM, VAT_CAPTP_ERR_NOMEM, 0, "decode");
}

static bool special(const char *s, size_t len) {
  return len > 0 && s[0] >= '!' && s[0] <= '-';
}

static bool is(const char *s, size_t len, const char *lit) {
  return len == strlen(lit) && memcmp(s, lit, len) == 0;
}

/* "$12.Alleged: X" or "&3": the index, then the iface after a '.'. */
static int slot_ref(captp__decoder *d, const char *s, size_t len,
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
      return nomem(d);
    memcpy(copy, s + i + 1, len - i - 1);
    copy[len - i - 1] = '\0';
    iface = copy;
  }
  return captp__import(d, index, iface, s[0] == '$' ? 'o' : 'p', out);
}

static int string(captp__decoder *d, const char *s, size_t len,
                  vat_value *out) {
  if (!special(s, len)) {
    *out = vat_string_n(s, len);
    return out->type == VAT_T_NULL ? nomem(d) : VAT_OK;
  }
  switch (s[0]) {
  case '!':
    *out = vat_string_n(s + 1, len - 1);
    return out->type == VAT_T_NULL ? nomem(d) : VAT_OK;
  case '%': {
    const vat_atom *a = vat_atom_intern_weak_n(s + 1, len - 1);
    if (a == NULL)
      return nomem(d);
    *out = vat_atom_value(a);
    return VAT_OK;
  }
  case '#':
    if (is(s, len, "#undefined"))
      *out = vat_atom_value(captp__atom_undefined());
    else if (is(s, len, "#NaN"))
      *out = vat_float(NAN);
    else if (is(s, len, "#Infinity"))
      *out = vat_float(INFINITY);
    else if (is(s, len, "#-Infinity"))
      *out = vat_float(-INFINITY);
    else
      return FAIL(d, "unknown constant \"%.40s\"", s);
    return VAT_OK;
  case '+':
  case '-':
    return captp__bigint(s, len, out, d->err);
  case '$':
  case '&':
    return slot_ref(d, s, len, out);
  }
  return FAIL(d, "reserved special character '%c'", s[0]);
}

/* A smallcaps property name: a string as smallcaps spells one ("!"
 * escapes), so a name starting with '#' (or another special character)
 * is refused. */
static int escaped_key(captp__decoder *d, const char *key, size_t len,
                       vat_value *out) {
  vat_value name;
  int rc = string(d, key, len, &name);
  if (rc != VAT_OK)
    return rc;
  if (name.type != VAT_T_STRING)
    return FAIL(d, "property name \"%.40s\" is not a string", key);
  const vat_atom *a =
      vat_atom_intern_weak_n(vat_string_data(name), vat_string_len(name));
  if (a == NULL)
    return nomem(d);
  *out = vat_atom_value(a);
  return VAT_OK;
}

/* Members as a map with atom keys (names decoded: "!" escapes), leaving
 * out `skip` (NULL for none). Names starting with '#' are refused unless
 * skipped. */
static int members(captp__decoder *d, const json_t *j, int depth,
                   const char *skip, vat_value *out) {
  return captp__decode_members(d, j, depth, skip, escaped_key,
                               captp__decode_smallcaps, out);
}

static int tagged(captp__decoder *d, const json_t *j, int depth,
                  vat_value *out) {
  json_t *tag = json_object_get(j, "#tag");
  json_t *payload = json_object_get(j, "payload");
  if (!json_is_string(tag) || payload == NULL || json_object_size(j) != 2)
    return FAIL(d, "#tag needs a string tag and a payload, nothing else");
  vat_value t, p;
  int rc = string(d, json_string_value(tag), json_string_length(tag), &t);
  if (rc == VAT_OK && t.type != VAT_T_STRING)
    return FAIL(d, "#tag is not a string");
  if (rc == VAT_OK)
    rc = captp__decode_smallcaps(d, payload, depth, &p);
  if (rc != VAT_OK)
    return rc;
  return captp__tagged(vat_string_data(t), vat_string_len(t), p, out, d->err);
}

static int error_form(captp__decoder *d, const json_t *j, int depth,
                      vat_value *out) {
  json_t *message = json_object_get(j, "#error");
  json_t *name = json_object_get(j, "name");
  if (!json_is_string(message) || !json_is_string(name) ||
      json_object_get(j, "message") != NULL)
    return captp__fail(d->err, VAT_EDECODE, VAT_CAPTP_ERR_ERROR, 0,
                       "#error needs a string message and name");
  vat_value m, n, extra;
  int rc =
      string(d, json_string_value(message), json_string_length(message), &m);
  if (rc == VAT_OK)
    rc = string(d, json_string_value(name), json_string_length(name), &n);
  if (rc == VAT_OK && (m.type != VAT_T_STRING || n.type != VAT_T_STRING))
    return captp__fail(d->err, VAT_EDECODE, VAT_CAPTP_ERR_ERROR, 0,
                       "#error's message and name must decode to strings");
  json_t *rest = rc == VAT_OK ? json_deep_copy(j) : NULL;
  if (rc == VAT_OK && rest == NULL)
    return nomem(d);
  if (rc != VAT_OK)
    return rc;
  json_object_del(rest, "name");
  rc = members(d, rest, depth, "#error", &extra);
  json_decref(rest);
  if (rc != VAT_OK)
    return rc;
  return captp__error(vat_string_data(n), vat_string_len(n), vat_string_data(m),
                      vat_string_len(m), extra, out, d->err);
}

int captp__decode_smallcaps(captp__decoder *d, const json_t *j, int depth,
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
    return string(d, json_string_value(j), json_string_length(j), out);
  case JSON_ARRAY:
    return captp__decode_list(d, j, depth, captp__decode_smallcaps, out);
  case JSON_OBJECT:
    if (json_object_get(j, "#tag") != NULL)
      return tagged(d, j, depth, out);
    if (json_object_get(j, "#error") != NULL)
      return error_form(d, j, depth, out);
    return members(d, j, depth, NULL, out);
  }
  return FAIL(d, "unexpected JSON type");
}
