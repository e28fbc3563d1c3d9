/* Capdata bodies to values, from the parsed text (json.h: every number a
 * double), "@qclass" objects as vat/captp.h's table says. An object's
 * members are read as a parser that keeps one per name reads them (each
 * name where it came first, with its last value). Recursion is bounded by
 * VAT_CAPTP_MAX_DEPTH, so a hostile body cannot exhaust the stack; the
 * parser bounds its own nesting (2048). */
#include <gc/gc.h>
#include <math.h>
#include <string.h>

#include "captp/internal.h"
#include "value/value_internal.h"

#define FAIL(d, code, ...)                                                     \
  captp__fail((d)->err, VAT_EDECODE, VAT_CAPTP_ERR_##code, 0, __VA_ARGS__)

#define NODE(d, i) captp__jat((d)->json, i)
#define GET(d, obj, lit) CAPTP__JSON_GET((d)->json, obj, lit)

static int nomem(captp__decoder *d) {
  return captp__fail(d->err, VAT_ENOMEM, VAT_CAPTP_ERR_NOMEM, 0, "decode");
}

/* Small lists and maps are built on the stack (which the collector
 * scans) and copied once into the value. */
enum { INLINE_ITEMS = 16 };

int captp__decode_list(captp__decoder *d, uint32_t at, int depth,
                       captp__decode_fn *item, vat_value *out) {
  const captp__jnode *a = NODE(d, at);
  size_t n = a->len;
  vat_value inline_items[INLINE_ITEMS];
  vat_value *items =
      n <= INLINE_ITEMS ? inline_items : GC_MALLOC(n * sizeof *items);
  if (items == NULL)
    return nomem(d);
  uint32_t i = at + 1;
  for (size_t k = 0; k < n; k++, i = NODE(d, i)->end) {
    int rc = item(d, i, depth, &items[k]);
    if (rc != VAT_OK)
      return rc;
  }
  *out = vat_list(items, n);
  return out->type == VAT_T_NULL ? nomem(d) : VAT_OK;
}

static bool skipped(const captp__jnode *key, const char *const *skip) {
  for (; skip != NULL && *skip != NULL; skip++)
    if (strlen(*skip) == key->len && memcmp(key->as.str, *skip, key->len) == 0)
      return true;
  return false;
}

static int decode_members(captp__decoder *d, const captp__jmembers *ms,
                          int depth, const char *const *skip,
                          captp__key_fn *key_of, captp__decode_fn *item,
                          vat_value *keys, vat_value *vals, vat_value *out) {
  size_t i = 0;
  for (size_t k = 0; k < ms->n; k++) {
    const captp__jnode *key = NODE(d, ms->m[k].key);
    if (skipped(key, skip))
      continue;
    int rc = key_of(d, key->as.str, key->len, &keys[i]);
    if (rc == VAT_OK)
      rc = item(d, ms->m[k].val, depth, &vals[i]);
    if (rc != VAT_OK)
      return rc;
    i++;
  }
  *out = vat_map(keys, vals, i);
  return out->type == VAT_T_NULL ? nomem(d) : VAT_OK;
}

int captp__decode_members(captp__decoder *d, uint32_t at, int depth,
                          const char *const *skip, captp__key_fn *key_of,
                          captp__decode_fn *item, vat_value *out) {
  captp__jmembers ms;
  if (!captp__json_members(d->json, at, &ms))
    return nomem(d);
  vat_value inline_keys[INLINE_ITEMS], inline_vals[INLINE_ITEMS];
  vat_value *keys = inline_keys, *vals = inline_vals;
  if (ms.n > INLINE_ITEMS) {
    keys = GC_MALLOC(ms.n * sizeof *keys);
    vals = GC_MALLOC(ms.n * sizeof *vals);
  }
  int rc = keys == NULL || vals == NULL
               ? nomem(d)
               : decode_members(d, &ms, depth, skip, key_of, item, keys, vals,
                                out);
  captp__json_members_free(&ms);
  return rc;
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

/* A JSON object's members, decoded, as a map with atom keys, leaving out
 * those named in `skip` (NULL for none). */
static int members(captp__decoder *d, uint32_t at, int depth,
                   const char *const *skip, vat_value *out) {
  return captp__decode_members(d, at, depth, skip, plain_key,
                               captp__decode_capdata, out);
}

/* A string member of a @qclass object, or NULL. */
static const char *str_field(captp__decoder *d, uint32_t at, const char *name,
                             size_t *len) {
  uint32_t f = captp__json_get(d->json, at, name, strlen(name));
  if (f == 0 || NODE(d, f)->type != CAPTP__J_STRING)
    return NULL;
  *len = NODE(d, f)->len;
  return NODE(d, f)->as.str;
}

static int slot(captp__decoder *d, uint32_t at, vat_value *out) {
  uint32_t index = GET(d, at, "index");
  uint32_t iface = GET(d, at, "iface");
  double x = index != 0 && NODE(d, index)->type == CAPTP__J_NUMBER
                 ? NODE(d, index)->as.num
                 : -1;
  if (x < 0 || x != floor(x) || x >= (double)d->n_slots)
    return FAIL(d, SLOT, "slot index is not an integer below %zu", d->n_slots);
  if (iface != 0 && NODE(d, iface)->type != CAPTP__J_STRING)
    return FAIL(d, SLOT, "slot iface is not a string");
  return captp__import(d, (int64_t)x,
                       iface != 0 ? NODE(d, iface)->as.str : NULL, 0, out);
}

static int error_form(captp__decoder *d, uint32_t at, int depth,
                      vat_value *out) {
  size_t name_len = 0, msg_len = 0;
  const char *name = str_field(d, at, "name", &name_len);
  const char *msg = str_field(d, at, "message", &msg_len);
  if (name == NULL || msg == NULL)
    return FAIL(d, ERROR, "error needs string name and message");
  /* The other fields. */
  static const char *const skip[] = {"name", "message", "@qclass", NULL};
  vat_value extra;
  int rc = members(d, at, depth, skip, &extra);
  if (rc != VAT_OK)
    return rc;
  return captp__error(name, name_len, msg, msg_len, extra, out, d->err);
}

/* Endo's "hilbert hotel": a record that has its own "@qclass" key. */
static int hilbert(captp__decoder *d, uint32_t at, int depth, vat_value *out) {
  uint32_t original = GET(d, at, "original");
  uint32_t rest = GET(d, at, "rest");
  if (original == 0 ||
      (rest != 0 &&
       (NODE(d, rest)->type != CAPTP__J_OBJECT || NODE(d, rest)->len == 0 ||
        GET(d, rest, "@qclass") != 0)))
    return FAIL(d, QCLASS, "malformed hilbert");
  vat_value base = vat_map(NULL, NULL, 0);
  int rc = rest != 0 ? members(d, rest, depth, NULL, &base) : VAT_OK;
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

static bool is(const char *s, size_t len, const char *lit) {
  return len == strlen(lit) && memcmp(s, lit, len) == 0;
}

static int qclass(captp__decoder *d, uint32_t at, const char *qc, size_t qc_len,
                  int depth, vat_value *out) {
  size_t len;
  const char *s;
  if (is(qc, qc_len, "undefined")) {
    *out = vat_atom_value(captp__atom_undefined());
    return VAT_OK;
  }
  if (is(qc, qc_len, "NaN")) {
    *out = vat_float(NAN);
    return VAT_OK;
  }
  if (is(qc, qc_len, "Infinity") || is(qc, qc_len, "-Infinity")) {
    *out = vat_float(qc[0] == '-' ? -INFINITY : INFINITY);
    return VAT_OK;
  }
  if (is(qc, qc_len, "bigint")) {
    if ((s = str_field(d, at, "digits", &len)) == NULL)
      return FAIL(d, BIGINT, "bigint without string digits");
    return captp__bigint(s, len, out, d->err);
  }
  if (is(qc, qc_len, "symbol")) {
    if ((s = str_field(d, at, "name", &len)) == NULL)
      return FAIL(d, QCLASS, "symbol without a string name");
    const vat_atom *a = vat_atom_intern_weak_n(s, len);
    if (a == NULL)
      return nomem(d);
    *out = vat_atom_value(a);
    return VAT_OK;
  }
  if (is(qc, qc_len, "tagged")) {
    uint32_t payload = GET(d, at, "payload");
    if ((s = str_field(d, at, "tag", &len)) == NULL || payload == 0)
      return FAIL(d, TAGGED, "tagged without a string tag and a payload");
    vat_value p;
    int rc = captp__decode_capdata(d, payload, depth, &p);
    return rc != VAT_OK ? rc : captp__tagged(s, len, p, out, d->err);
  }
  if (is(qc, qc_len, "slot"))
    return slot(d, at, out);
  if (is(qc, qc_len, "error"))
    return error_form(d, at, depth, out);
  if (is(qc, qc_len, "hilbert"))
    return hilbert(d, at, depth, out);
  return FAIL(d, QCLASS, "unknown @qclass \"%.60s\"", qc);
}

int captp__decode_capdata(captp__decoder *d, uint32_t at, int depth,
                          vat_value *out) {
  if (++depth > VAT_CAPTP_MAX_DEPTH)
    return FAIL(d, DEPTH, "deeper than %d", VAT_CAPTP_MAX_DEPTH);
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
    *out = vat_string_n(j->as.str, j->len);
    return out->type == VAT_T_NULL ? nomem(d) : VAT_OK;
  case CAPTP__J_ARRAY:
    return captp__decode_list(d, at, depth, captp__decode_capdata, out);
  case CAPTP__J_OBJECT: {
    uint32_t qc = GET(d, at, "@qclass");
    if (qc == 0)
      return members(d, at, depth, NULL, out);
    const captp__jnode *q = NODE(d, qc);
    /* A name with a NUL in it is no name this table knows. */
    if (q->type != CAPTP__J_STRING || strlen(q->as.str) != q->len)
      return FAIL(d, QCLASS, "@qclass is not a string");
    return qclass(d, at, q->as.str, q->len, depth, out);
  }
  }
  return FAIL(d, JSON, "unexpected JSON type");
}
