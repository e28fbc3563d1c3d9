/* The forms the capdata and smallcaps decoders share: bigints, tagged
 * values (records, copyMap, bytes) and errors, each from its parts already
 * decoded. The rules are the mapping's notes [1], [5], [6], [7] and [8] in
 * vat/captp.h. */
#include <gc/gc.h>
#include <stdatomic.h>
#include <string.h>

#include "captp/internal.h"
#include "value/value_internal.h"

/* Interned once and cached: strong atoms are never freed, so a racing second
 * interning stores the same pointer; relaxed is enough for a cache whose
 * every value is the same. */
#define CACHED_ATOM(fn, text)                                                  \
  const vat_atom *fn(void) {                                                   \
    static _Atomic(const vat_atom *) cached;                                   \
    const vat_atom *a = atomic_load_explicit(&cached, memory_order_relaxed);   \
    if (a == NULL) {                                                           \
      a = vat_atom_intern(text);                                               \
      atomic_store_explicit(&cached, a, memory_order_relaxed);                 \
    }                                                                          \
    return a;                                                                  \
  }
CACHED_ATOM(captp__atom_undefined, "undefined")
CACHED_ATOM(captp__atom_bigint, "bigint")
CACHED_ATOM(captp__atom_message, "message")
CACHED_ATOM(captp__atom_payload, "payload")
CACHED_ATOM(captp__atom_name, "name")
CACHED_ATOM(captp__atom_qclass, "@qclass")

bool captp__is_digits(const char *s, size_t len) {
  size_t i = 0;
  if (len > 0 && s[0] == '-')
    i = 1;
  if (i == len)
    return false;
  if (s[i] == '0' && len - i > 1)
    return false;
  for (; i < len; i++)
    if (s[i] < '0' || s[i] > '9')
      return false;
  return true;
}

int captp__bigint(const char *digits, size_t len, vat_value *out,
                  vat_captp_error *err) {
  /* JS's BigInt() accepts a leading '+', which smallcaps writes; the
   * canonical form (what String(bigint) gives) has none. */
  if (len > 0 && digits[0] == '+') {
    digits++;
    len--;
    if (len > 0 && digits[0] == '-')
      return captp__fail(err, VAT_EDECODE, VAT_CAPTP_ERR_BIGINT, 0,
                         "sign twice");
  }
  if (!captp__is_digits(digits, len) ||
      (len == 2 && digits[0] == '-' && digits[1] == '0'))
    return captp__fail(err, VAT_EDECODE, VAT_CAPTP_ERR_BIGINT, 0,
                       "\"%.*s\" is not canonical decimal digits",
                       (int)(len < 40 ? len : 40), digits);
  bool neg = digits[0] == '-';
  /* Accumulate negatively: INT64_MIN has no positive counterpart. */
  int64_t acc = 0;
  bool fits = true;
  for (size_t i = neg; i < len && fits; i++) {
    int d = digits[i] - '0';
    if (acc < (INT64_MIN + d) / 10)
      fits = false;
    else
      acc = acc * 10 - d;
  }
  if (fits && !neg && acc == INT64_MIN)
    fits = false;
  if (fits) {
    *out = vat_int(neg ? acc : -acc);
    return VAT_OK;
  }
  vat_value field = vat_string_n(digits, len);
  if (field.type == VAT_T_NULL)
    return captp__fail(err, VAT_ENOMEM, VAT_CAPTP_ERR_NOMEM, 0, "bigint");
  *out = vat_record(captp__atom_bigint(), &field, 1);
  return out->type == VAT_T_NULL
             ? captp__fail(err, VAT_ENOMEM, VAT_CAPTP_ERR_NOMEM, 0, "bigint")
             : VAT_OK;
}

static bool tag_is(const char *tag, size_t len, const char *name) {
  return len == strlen(name) && memcmp(tag, name, len) == 0;
}

/* copyMap's payload {keys: [...], values: [...]}: a record decoded as a map
 * with the atom keys `keys` and `values`, both lists of one length. */
static int copy_map(vat_value payload, vat_value *out, vat_captp_error *err) {
  vat_value keys, vals;
  if (payload.type != VAT_T_MAP || vat_len(payload) != 2 ||
      vat_map_get(payload, vat_atom_named("keys"), &keys) != VAT_OK ||
      vat_map_get(payload, vat_atom_named("values"), &vals) != VAT_OK ||
      keys.type != VAT_T_LIST || vals.type != VAT_T_LIST ||
      vat_len(keys) != vat_len(vals))
    return captp__fail(err, VAT_EDECODE, VAT_CAPTP_ERR_TAGGED, 0,
                       "copyMap payload is not {keys, values} of one length");
  const vat__list *k = keys.as.obj, *v = vals.as.obj;
  *out = vat_map(k->items, v->items, k->n);
  if (out->type == VAT_T_NULL)
    return captp__fail(err, VAT_ENOMEM, VAT_CAPTP_ERR_NOMEM, 0, "copyMap");
  return VAT_OK;
}

static int bytes(vat_value payload, vat_value *out, vat_captp_error *err) {
  void *data;
  size_t len;
  if (payload.type != VAT_T_STRING ||
      !captp__base64_decode(vat_string_data(payload), vat_string_len(payload),
                            &data, &len))
    return captp__fail(err, VAT_EDECODE, VAT_CAPTP_ERR_TAGGED, 0,
                       "vat:bytes payload is not a base64 string");
  *out = vat_bytes(data, len);
  if (out->type == VAT_T_NULL && len > 0)
    return captp__fail(err, VAT_ENOMEM, VAT_CAPTP_ERR_NOMEM, 0, "bytes");
  return VAT_OK;
}

int captp__tagged(const char *tag, size_t tag_len, vat_value payload,
                  vat_value *out, vat_captp_error *err) {
  if (tag_is(tag, tag_len, "copyMap"))
    return copy_map(payload, out, err);
  if (tag_is(tag, tag_len, "vat:bytes"))
    return bytes(payload, out, err);
  const vat_atom *label = vat_atom_intern_weak_n(tag, tag_len);
  if (label == NULL)
    return captp__fail(err, VAT_ENOMEM, VAT_CAPTP_ERR_NOMEM, 0, "tag");
  if (payload.type == VAT_T_LIST) {
    const vat__list *l = payload.as.obj;
    *out = vat_record(label, l->items, l->n);
  } else {
    *out = vat_record(label, &payload, 1);
  }
  if (out->type == VAT_T_NULL)
    return captp__fail(err, VAT_ENOMEM, VAT_CAPTP_ERR_NOMEM, 0, "record");
  return VAT_OK;
}

/* An error's payload from its fields (note [8]): none but an empty message
 * is null, none but a message is that string, none but an empty message
 * and "payload" is that payload, anything else the map of all fields. */
static int error_payload(const char *message, size_t message_len,
                         vat_value extra, vat_value *out) {
  size_t n_extra = extra.type == VAT_T_MAP ? vat_len(extra) : 0;
  vat_value p;
  if (n_extra == 0) {
    *out = message_len == 0 ? vat_null() : vat_string_n(message, message_len);
    return out->type == VAT_T_NULL && message_len > 0 ? VAT_ENOMEM : VAT_OK;
  }
  if (n_extra == 1 && message_len == 0 &&
      vat_map_get(extra, vat_atom_value(captp__atom_payload()), &p) == VAT_OK) {
    *out = p;
    return VAT_OK;
  }
  const vat__map *m = extra.as.obj;
  vat_value *keys = GC_MALLOC((m->n + 1) * sizeof *keys);
  vat_value *vals = GC_MALLOC((m->n + 1) * sizeof *vals);
  if (keys == NULL || vals == NULL)
    return VAT_ENOMEM;
  for (size_t i = 0; i < m->n; i++) {
    keys[i] = m->entries[i].key;
    vals[i] = m->entries[i].val;
  }
  keys[m->n] = vat_atom_value(captp__atom_message());
  vals[m->n] = vat_string_n(message, message_len);
  *out = vat_map(keys, vals, m->n + 1);
  return out->type == VAT_T_NULL ? VAT_ENOMEM : VAT_OK;
}

int captp__error(const char *name, size_t name_len, const char *message,
                 size_t message_len, vat_value extra, vat_value *out,
                 vat_captp_error *err) {
  const vat_atom *code = vat_atom_intern_weak_n(name, name_len);
  vat_value payload;
  if (code == NULL || error_payload(message, message_len, extra, &payload))
    return captp__fail(err, VAT_ENOMEM, VAT_CAPTP_ERR_NOMEM, 0, "error");
  *out = vat_error(code, payload);
  if (out->type == VAT_T_NULL)
    return captp__fail(err, VAT_ENOMEM, VAT_CAPTP_ERR_NOMEM, 0, "error");
  return VAT_OK;
}
