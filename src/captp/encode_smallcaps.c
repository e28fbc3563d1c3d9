/* Values to smallcaps, Endo's newer body format ('#' then JSON), written
 * in one pass as encode.c writes capdata, and for the same values: each
 * body decodes (smallcaps.c) to what the value's capdata decodes to.
 * Special values are strings whose first character says what they are
 * ("+1" a bigint, "$0.Alleged: X" a ref, "&1" a promise, "%name" a
 * symbol, "#NaN" a constant); a string or key of the program's that
 * starts with one of those characters ('!' to '-') is escaped with '!'.
 * Tagged values and errors are objects with a "#tag" or "#error" key.
 * Shorter than capdata and quicker to read: incr(1)'s body is 16 bytes
 * in place of 44, and decoding it looks into no object. A value fails
 * as its capdata would (the same codes and details). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "captp/encoder.h"

#define FAIL(e, code, ...)                                                     \
  captp__fail((e)->err, VAT_EENCODE, VAT_CAPTP_ERR_##code, 0, __VA_ARGS__)

/* Fixed keys in the body's two spellings (a quote as the body holds it,
 * and inside the envelope's string), as in encode.c. */
#define Q "\""
#define QE "\\\""
#define K_TAG(q) "{" q "#tag" q ":"
#define K_PAYLOAD(q) "," q "payload" q ":"
#define K_KEYS(q) "{" q "keys" q ":"
#define K_VALUES(q) "," q "values" q ":"
#define K_ERROR_KEY(q) q "#error" q
#define K_ERROR(q) "{" K_ERROR_KEY(q) ":"
#define K_NAME(q) "," q "name" q ":"
#define K_QCLASS(q) q "@qclass" q ":"

#define PUT(e, s, n) captp__out_put((e)->out, s, n)
#define PUT_FORM(e, FORM)                                                      \
  ((e)->esc ? PUT(e, FORM(QE), sizeof FORM(QE) - 1)                            \
            : PUT(e, FORM(Q), sizeof FORM(Q) - 1))
#define TRY(e, write)                                                          \
  do {                                                                         \
    if (!(write))                                                              \
      return captp__encode_nomem((e)->err);                                    \
  } while (0)

static int encode(captp__encoder *e, vat_value v, int depth);

static bool special(const char *s, size_t len) {
  return len > 0 && s[0] >= '!' && s[0] <= '-';
}

/* A JSON string: `prefix` (a special form's own, plain ASCII) then s. */
static int text(captp__encoder *e, const char *prefix, const char *s,
                size_t len) {
  switch (
      captp__out_string_after(e->out, prefix, strlen(prefix), s, len, e->esc)) {
  case CAPTP__OUT_OK:
    return VAT_OK;
  case CAPTP__OUT_UTF8:
    return FAIL(e, UTF8, "\"%.40s\"", s);
  case CAPTP__OUT_NOMEM:
    break;
  }
  return captp__encode_nomem(e->err);
}

/* A string of the program's, escaped when it would read as special;
 * nothing written unless CAPTP__OUT_OK. For keys and tags, whose failure
 * comes after their value's. */
static captp__out_rc put_string(captp__encoder *e, const char *s, size_t len) {
  bool escaped = special(s, len);
  return captp__out_string_after(e->out, "!", escaped ? 1 : 0, s, len, e->esc);
}

static int string(captp__encoder *e, const char *s, size_t len) {
  return text(e, special(s, len) ? "!" : "", s, len);
}

static int number(captp__encoder *e, double f) {
  if (isnan(f))
    return text(e, "#NaN", "", 0);
  if (isinf(f))
    return text(e, f > 0 ? "#Infinity" : "#-Infinity", "", 0);
  if (f == floor(f) && fabs(f) < 9.2e18) /* -0 too: Endo writes 0 */
    TRY(e, captp__out_int(e->out, (int64_t)f));
  else
    TRY(e, captp__out_real(e->out, f));
  return VAT_OK;
}

/* "+N" or "-N"; the digits of a negative one carry its '-'. */
static int bigint(captp__encoder *e, const char *digits, size_t len) {
  return text(e, digits[0] == '-' ? "" : "+", digits, len);
}

/* The commonest special value (every int argument and answer), written
 * whole: its text needs no escape. */
static int int64(captp__encoder *e, int64_t i) {
  char buf[26]; /* written from the end: quote, digits, sign, quote */
  size_t n = sizeof buf;
  const char *quote = e->esc ? QE : Q;
  size_t quote_len = e->esc ? 2 : 1;
  n -= quote_len;
  memcpy(buf + n, quote, quote_len);
  /* Negated as unsigned: INT64_MIN has no positive int64. */
  uint64_t u = i < 0 ? 0 - (uint64_t)i : (uint64_t)i;
  do {
    buf[--n] = (char)('0' + u % 10);
    u /= 10;
  } while (u != 0);
  buf[--n] = i < 0 ? '-' : '+';
  n -= quote_len;
  memcpy(buf + n, quote, quote_len);
  TRY(e, PUT(e, buf + n, sizeof buf - n));
  return VAT_OK;
}

static int atom(captp__encoder *e, const vat_atom *a) {
  if (a == captp__atom_undefined())
    return text(e, "#undefined", "", 0);
  return text(e, "%", vat_atom_name(a), vat_atom_len(a));
}

static int list(captp__encoder *e, const vat_value *items, size_t n,
                int depth) {
  TRY(e, PUT(e, "[", 1));
  for (size_t i = 0; i < n; i++) {
    if (i > 0)
      TRY(e, PUT(e, ",", 1));
    int rc = encode(e, items[i], depth);
    if (rc != VAT_OK)
      return rc;
  }
  TRY(e, PUT(e, "]", 1));
  return VAT_OK;
}

/* {"#tag":tag,"payload":[fields]}; a bad tag fails after the fields. */
static int tagged_fields(captp__encoder *e, const char *tag, size_t tag_len,
                         const vat_value *fields, size_t n, int depth) {
  TRY(e, PUT_FORM(e, K_TAG));
  switch (put_string(e, tag, tag_len)) {
  case CAPTP__OUT_OK:
    break;
  case CAPTP__OUT_NOMEM:
    return captp__encode_nomem(e->err);
  case CAPTP__OUT_UTF8: {
    int rc = list(e, fields, n, depth);
    return rc != VAT_OK ? rc : FAIL(e, UTF8, "\"%.40s\"", tag);
  }
  }
  TRY(e, PUT_FORM(e, K_PAYLOAD));
  int rc;
  if ((rc = list(e, fields, n, depth)) == VAT_OK)
    TRY(e, PUT(e, "}", 1));
  return rc;
}

static int bytes(captp__encoder *e, vat_value v) {
  size_t len;
  char *b64 = captp__base64_encode(vat_bytes_data(v), vat_bytes_len(v), &len);
  if (b64 == NULL)
    return captp__encode_nomem(e->err);
  TRY(e, PUT_FORM(e, K_TAG));
  int rc = string(e, "vat:bytes", 9);
  if (rc == VAT_OK) {
    TRY(e, PUT_FORM(e, K_PAYLOAD));
    rc = string(e, b64, len); /* "+..." is a base64 text too */
  }
  if (rc == VAT_OK)
    TRY(e, PUT(e, "}", 1));
  return rc;
}

/* The members of a map with atom keys, each after a ',' when `comma`;
 * `skip` (NULL for none) left out, and `error_message` (NULL for none)
 * written as the key "#error". A bad key fails after its value. */
static int members(captp__encoder *e, const vat__map *m, const vat_atom *skip,
                   const vat_atom *error_message, bool comma, int depth) {
  for (size_t i = 0; i < m->n; i++) {
    const vat_atom *k = m->entries[i].key.as.atom;
    if (k == skip)
      continue;
    if (comma)
      TRY(e, PUT(e, ",", 1));
    comma = true;
    captp__out_rc key =
        k == error_message
            ? (PUT_FORM(e, K_ERROR_KEY) ? CAPTP__OUT_OK : CAPTP__OUT_NOMEM)
            : put_string(e, vat_atom_name(k), vat_atom_len(k));
    switch (key) {
    case CAPTP__OUT_OK:
      break;
    case CAPTP__OUT_NOMEM:
      return captp__encode_nomem(e->err);
    case CAPTP__OUT_UTF8: {
      int rc = encode(e, m->entries[i].val, depth);
      return rc != VAT_OK ? rc
                          : FAIL(e, UTF8, "key \"%.40s\"", vat_atom_name(k));
    }
    }
    TRY(e, PUT(e, ":", 1));
    int rc = encode(e, m->entries[i].val, depth);
    if (rc != VAT_OK)
      return rc;
  }
  return VAT_OK;
}

/* copyMap, keys in descending order, as encode.c writes it. */
static int copy_map(captp__encoder *e, const vat__map *m, int depth) {
  TRY(e, PUT_FORM(e, K_TAG));
  int rc = string(e, "copyMap", 7);
  if (rc != VAT_OK)
    return rc;
  TRY(e, PUT_FORM(e, K_PAYLOAD) && PUT_FORM(e, K_KEYS));
  for (int values = 0; values < 2; values++) {
    if (values)
      TRY(e, PUT_FORM(e, K_VALUES));
    TRY(e, PUT(e, "[", 1));
    for (size_t i = 0; i < m->n; i++) {
      if (i > 0)
        TRY(e, PUT(e, ",", 1));
      const vat__map_entry *entry = &m->entries[m->n - 1 - i];
      if ((rc = encode(e, values ? entry->val : entry->key, depth)) != VAT_OK)
        return rc;
    }
    TRY(e, PUT(e, "]", 1));
  }
  TRY(e, PUT(e, "}}", 2));
  return VAT_OK;
}

/* A record's own "@qclass" key is only a key here (no hilbert form), but
 * goes first, as capdata's hilbert form writes it: so its refs take the
 * same slots, and a failure in it is the one reported, as there. */
static int map(captp__encoder *e, vat_value v, int depth) {
  const vat__map *m = v.as.obj;
  if (!captp__atom_keyed(m))
    return copy_map(e, m, depth);
  const vat_atom *qclass = captp__atom_qclass();
  vat_value first;
  bool hilbert = vat_map_get(v, vat_atom_value(qclass), &first) == VAT_OK;
  TRY(e, PUT(e, "{", 1));
  int rc = VAT_OK;
  if (hilbert) {
    TRY(e, PUT_FORM(e, K_QCLASS));
    rc = encode(e, first, depth);
  }
  if (rc == VAT_OK)
    rc = members(e, m, hilbert ? qclass : NULL, NULL, hilbert, depth);
  if (rc == VAT_OK)
    TRY(e, PUT(e, "}", 1));
  return rc;
}

static int record(captp__encoder *e, vat_value v, int depth) {
  const vat__record *r = v.as.obj;
  const char *digits;
  size_t len;
  if (captp__bigint_digits(r, &digits, &len))
    return bigint(e, digits, len);
  return tagged_fields(e, vat_atom_name(r->label), vat_atom_len(r->label),
                       r->fields, r->n, depth);
}

/* {"#error":message, members, "name":code}: the message under "#error",
 * never "message". A payload's members go in capdata's order, its
 * message among them, so that they fail in that order too. */
static int error(captp__encoder *e, vat_value v, int depth) {
  vat_value p = vat_error_payload(v), msg;
  int rc = VAT_OK;
  switch (captp__error_shape_of(p, &msg)) {
  case CAPTP__ERROR_BARE:
    TRY(e, PUT_FORM(e, K_ERROR));
    rc = text(e, "", "", 0);
    break;
  case CAPTP__ERROR_MESSAGE:
    TRY(e, PUT_FORM(e, K_ERROR));
    rc = string(e, vat_string_data(msg), vat_string_len(msg));
    break;
  case CAPTP__ERROR_MEMBERS:
    TRY(e, PUT(e, "{", 1));
    rc = members(e, p.as.obj, NULL, captp__atom_message(), false, depth);
    break;
  case CAPTP__ERROR_PAYLOAD:
    TRY(e, PUT_FORM(e, K_ERROR));
    rc = text(e, "", "", 0);
    if (rc == VAT_OK) {
      TRY(e, PUT_FORM(e, K_PAYLOAD));
      rc = encode(e, p, depth);
    }
    break;
  }
  if (rc != VAT_OK)
    return rc;
  const vat_atom *code = vat_error_code(v);
  TRY(e, PUT_FORM(e, K_NAME));
  if ((rc = string(e, vat_atom_name(code), vat_atom_len(code))) != VAT_OK)
    return rc;
  TRY(e, PUT(e, "}", 1));
  return VAT_OK;
}

/* "$i.iface" or "$i" for a ref, "&i" for a promise. */
static int slot(captp__encoder *e, vat_value v) {
  size_t index;
  const char *iface;
  int rc = captp__slot(e, v, &index, &iface);
  if (rc != VAT_OK)
    return rc;
  char prefix[32];
  snprintf(prefix, sizeof prefix, "%c%zu%s", v.type == VAT_T_REF ? '$' : '&',
           index, iface != NULL ? "." : "");
  return text(e, prefix, iface != NULL ? iface : "",
              iface != NULL ? strlen(iface) : 0);
}

static int encode(captp__encoder *e, vat_value v, int depth) {
  if (++depth > VAT_CAPTP_MAX_DEPTH)
    return FAIL(e, DEPTH, "deeper than %d", VAT_CAPTP_MAX_DEPTH);
  switch (v.type) {
  case VAT_T_NULL:
    TRY(e, PUT(e, "null", 4));
    return VAT_OK;
  case VAT_T_BOOL:
    TRY(e, v.as.b ? PUT(e, "true", 4) : PUT(e, "false", 5));
    return VAT_OK;
  case VAT_T_INT:
    return int64(e, v.as.i);
  case VAT_T_FLOAT:
    return number(e, v.as.f);
  case VAT_T_ATOM:
    return atom(e, v.as.atom);
  case VAT_T_STRING:
    return string(e, vat_string_data(v), vat_string_len(v));
  case VAT_T_BYTES:
    return bytes(e, v);
  case VAT_T_LIST: {
    const vat__list *l = v.as.obj;
    return list(e, l->items, l->n, depth);
  }
  case VAT_T_RECORD:
    return record(e, v, depth);
  case VAT_T_MAP:
    return map(e, v, depth);
  case VAT_T_ERROR:
    return error(e, v, depth);
  case VAT_T_REF:
  case VAT_T_PROMISE:
    return slot(e, v);
  }
  return FAIL(e, TYPE, "unknown value type %d", (int)v.type);
}

int captp__encode_smallcaps(captp__encoder *e, vat_value v, int depth) {
  return encode(e, v, depth);
}
