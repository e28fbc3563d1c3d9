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
  int64_t index = 0;
  while (i < len && s[i] >= '0' && s[i] <= '9' && i < 16)
    index = index * 10 + (s[i++] - '0');
  if (i == 1 || (s[1] == '0' && i > 2) || (i < len && s[i] != '.'))
    return FAIL(d, "bad slot reference \"%.40s\"", s);
  if (index >= (int64_t)d->n_slots)
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
 * out those named in `skip` (NULL for none). Names starting with '#' are
 * refused unless skipped. */
static int members(captp__decoder *d, uint32_t at, int depth,
                   const char *const *skip, vat_value *out) {
  return captp__decode_members(d, at, depth, skip, escaped_key,
                               captp__decode_smallcaps, out);
}

#define NODE(d, i) captp__jat((d)->json, i)
#define GET(d, obj, lit) CAPTP__JSON_GET((d)->json, obj, lit)

/* How many names an object has, each counted once. */
static int distinct_names(captp__decoder *d, uint32_t at, size_t *n) {
  captp__jmembers ms;
  if (!captp__json_members(d->json, at, &ms))
    return nomem(d);
  *n = ms.n;
  captp__json_members_free(&ms);
  return VAT_OK;
}

static int tagged(captp__decoder *d, uint32_t at, int depth, vat_value *out) {
  uint32_t tag = GET(d, at, "#tag");
  uint32_t payload = GET(d, at, "payload");
  size_t n = 0;
  int rc = NODE(d, at)->len == 2 ? VAT_OK : distinct_names(d, at, &n);
  if (rc != VAT_OK)
    return rc;
  if (NODE(d, at)->len == 2)
    n = tag != 0 && payload != 0 ? 2 : 1;
  if (tag == 0 || NODE(d, tag)->type != CAPTP__J_STRING || payload == 0 ||
      n != 2)
    return FAIL(d, "#tag needs a string tag and a payload, nothing else");
  vat_value t, p;
  rc = string(d, NODE(d, tag)->as.str, NODE(d, tag)->len, &t);
  if (rc == VAT_OK && t.type != VAT_T_STRING)
    return FAIL(d, "#tag is not a string");
  if (rc == VAT_OK)
    rc = captp__decode_smallcaps(d, payload, depth, &p);
  if (rc != VAT_OK)
    return rc;
  return captp__tagged(vat_string_data(t), vat_string_len(t), p, out, d->err);
}

static int error_form(captp__decoder *d, uint32_t at, int depth,
                      vat_value *out) {
  uint32_t message = GET(d, at, "#error");
  uint32_t name = GET(d, at, "name");
  if (message == 0 || NODE(d, message)->type != CAPTP__J_STRING || name == 0 ||
      NODE(d, name)->type != CAPTP__J_STRING || GET(d, at, "message") != 0)
    return captp__fail(d->err, VAT_EDECODE, VAT_CAPTP_ERR_ERROR, 0,
                       "#error needs a string message and name");
  vat_value m, n, extra;
  int rc = string(d, NODE(d, message)->as.str, NODE(d, message)->len, &m);
  if (rc == VAT_OK)
    rc = string(d, NODE(d, name)->as.str, NODE(d, name)->len, &n);
  if (rc == VAT_OK && (m.type != VAT_T_STRING || n.type != VAT_T_STRING))
    return captp__fail(d->err, VAT_EDECODE, VAT_CAPTP_ERR_ERROR, 0,
                       "#error's message and name must decode to strings");
  if (rc != VAT_OK)
    return rc;
  static const char *const skip[] = {"name", "#error", NULL};
  rc = members(d, at, depth, skip, &extra);
  if (rc != VAT_OK)
    return rc;
  return captp__error(vat_string_data(n), vat_string_len(n), vat_string_data(m),
                      vat_string_len(m), extra, out, d->err);
}

int captp__decode_smallcaps(captp__decoder *d, uint32_t at, int depth,
                            vat_value *out) {
  if (++depth > VAT_CAPTP_MAX_DEPTH)
    return captp__fail(d->err, VAT_EDECODE, VAT_CAPTP_ERR_DEPTH, 0,
                       "deeper than %d", VAT_CAPTP_MAX_DEPTH);
  const captp__jnode *j = NODE(d, at);
  switch ((captp__jtype)j->type) {
  case CAPTP__J_NULL:
    *out = vat_null();
    return VAT_OK;
  case CAPTP__J_TRUE:
  case CAPTP__J_FALSE:
    *out = vat_bool(j->type == CAPTP__J_TRUE);
    return VAT_OK;
  case CAPTP__J_NUMBER:
    *out = vat_float(j->as.num);
    return VAT_OK;
  case CAPTP__J_STRING:
    return string(d, j->as.str, j->len, out);
  case CAPTP__J_ARRAY:
    return captp__decode_list(d, at, depth, captp__decode_smallcaps, out);
  case CAPTP__J_OBJECT:
    if (GET(d, at, "#tag") != 0)
      return tagged(d, at, depth, out);
    if (GET(d, at, "#error") != 0)
      return error_form(d, at, depth, out);
    return members(d, at, depth, NULL, out);
  }
  return FAIL(d, "unexpected JSON type");
}
