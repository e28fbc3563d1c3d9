/* Values to capdata, written as text in one pass (no tree), and the slot
 * names the caller's table gives each distinct ref and promise. The forms
 * are vat/captp.h's table; objects are written in Endo's key order
 * (sorted, except "tagged", which Endo writes @qclass, tag, payload). The
 * output is byte for byte what a jansson tree dumped compact gave, and a
 * value that does not encode fails with the same reason it always did:
 * where that tree built a member's value before checking its name, this
 * checks the name first but, when it is bad, still encodes the value
 * first so that the value's own failure, if any, is the one reported. */
#include <gc/gc.h>
#include <math.h>
#include <string.h>

#include "captp/encoder.h"
#include "value/value_internal.h"

#define FAIL(e, code, ...)                                                     \
  captp__fail((e)->err, VAT_EENCODE, VAT_CAPTP_ERR_##code, 0, __VA_ARGS__)

/* Fixed text in the body's two spellings: Q is a quote as the body holds
 * it, QE the same quote inside the envelope's string. A form is a macro
 * of the quote, so both spellings are string constants. */
#define Q "\""
#define QE "\\\""
#define QCLASS(q, name) "{" q "@qclass" q ":" q name q
#define F_NAN(q) QCLASS(q, "NaN") "}"
#define F_INFINITY(q) QCLASS(q, "Infinity") "}"
#define F_MINUS_INFINITY(q) QCLASS(q, "-Infinity") "}"
#define F_UNDEFINED(q) QCLASS(q, "undefined") "}"
#define F_BIGINT(q) QCLASS(q, "bigint") "," q "digits" q ":" q
#define F_BIGINT_END(q) q "}"
#define F_SYMBOL(q) QCLASS(q, "symbol") "," q "name" q ":"
#define F_TAGGED(q) QCLASS(q, "tagged") "," q "tag" q ":"
#define F_PAYLOAD(q) "," q "payload" q ":"
#define F_BYTES(q) F_TAGGED(q) q "vat:bytes" q F_PAYLOAD(q) q
#define F_BYTES_END(q) q "}"
#define F_COPYMAP(q) F_TAGGED(q) q "copyMap" q F_PAYLOAD(q) "{" q "keys" q ":"
#define F_VALUES(q) "," q "values" q ":"
#define F_HILBERT(q) QCLASS(q, "hilbert") "," q "original" q ":"
#define F_REST(q) "," q "rest" q ":{"
#define F_ERROR(q) QCLASS(q, "error") ","
#define F_MESSAGE(q) q "message" q ":"
#define F_NO_MESSAGE(q) q "message" q ":" q q
#define F_ERROR_NAME(q) "," q "name" q ":"
#define F_SLOT(q) QCLASS(q, "slot") ","
#define F_IFACE(q) q "iface" q ":"
#define F_INDEX(q) q "index" q ":"

#define PUT(e, s, n) captp__out_put((e)->out, s, n)
#define PUT_FORM(e, FORM)                                                      \
  ((e)->esc ? PUT(e, FORM(QE), sizeof FORM(QE) - 1)                            \
            : PUT(e, FORM(Q), sizeof FORM(Q) - 1))
/* Returns the out-of-memory failure when a write fails. */
#define TRY(e, write)                                                          \
  do {                                                                         \
    if (!(write))                                                              \
      return captp__encode_nomem((e)->err);                                    \
  } while (0)

int captp__encode_nomem(vat_captp_error *err) {
  return captp__fail(err, VAT_ENOMEM, VAT_CAPTP_ERR_NOMEM, 0, "encode");
}

static int encode(captp__encoder *e, vat_value v, int depth);

static bool put_char(captp__encoder *e, char c) {
  return PUT(e, &c, 1);
}

/* A string, or a UTF8 failure naming it. */
static int string(captp__encoder *e, const char *s, size_t len) {
  switch (captp__out_string(e->out, s, len, e->esc)) {
  case CAPTP__OUT_OK:
    return VAT_OK;
  case CAPTP__OUT_UTF8:
    return FAIL(e, UTF8, "\"%.40s\"", s);
  case CAPTP__OUT_NOMEM:
    break;
  }
  return captp__encode_nomem(e->err);
}

/* As JS writes numbers: integral ones without a fraction, -0 as 0. */
static int number(captp__encoder *e, double f) {
  if (isnan(f))
    TRY(e, PUT_FORM(e, F_NAN));
  else if (isinf(f))
    TRY(e, f > 0 ? PUT_FORM(e, F_INFINITY) : PUT_FORM(e, F_MINUS_INFINITY));
  else if (f == floor(f) && fabs(f) < 9.2e18)
    TRY(e, captp__out_int(e->out, (int64_t)f));
  else
    TRY(e, captp__out_real(e->out, f));
  return VAT_OK;
}

static int int64(captp__encoder *e, int64_t i) {
  TRY(e, PUT_FORM(e, F_BIGINT) && captp__out_int(e->out, i) &&
             PUT_FORM(e, F_BIGINT_END));
  return VAT_OK;
}

static int atom(captp__encoder *e, const vat_atom *a) {
  if (a == captp__atom_undefined()) {
    TRY(e, PUT_FORM(e, F_UNDEFINED));
    return VAT_OK;
  }
  TRY(e, PUT_FORM(e, F_SYMBOL));
  int rc = string(e, vat_atom_name(a), vat_atom_len(a));
  if (rc == VAT_OK)
    TRY(e, put_char(e, '}'));
  return rc;
}

static int list(captp__encoder *e, const vat_value *items, size_t n,
                int depth) {
  TRY(e, put_char(e, '['));
  for (size_t i = 0; i < n; i++) {
    if (i > 0)
      TRY(e, put_char(e, ','));
    int rc = encode(e, items[i], depth);
    if (rc != VAT_OK)
      return rc;
  }
  TRY(e, put_char(e, ']'));
  return VAT_OK;
}

/* {"@qclass":"tagged","tag":tag,"payload":[fields]}. A bad tag fails, but
 * only after the fields have encoded (their failure comes first). */
static int tagged_fields(captp__encoder *e, const char *tag, size_t tag_len,
                         const vat_value *fields, size_t n, int depth) {
  TRY(e, PUT_FORM(e, F_TAGGED));
  size_t mark = e->out->len;
  switch (captp__out_string(e->out, tag, tag_len, e->esc)) {
  case CAPTP__OUT_OK:
    break;
  case CAPTP__OUT_NOMEM:
    return captp__encode_nomem(e->err);
  case CAPTP__OUT_UTF8: {
    e->out->len = mark;
    int rc = list(e, fields, n, depth);
    return rc != VAT_OK ? rc : FAIL(e, UTF8, "\"%.40s\"", tag);
  }
  }
  TRY(e, PUT_FORM(e, F_PAYLOAD));
  int rc = list(e, fields, n, depth);
  if (rc == VAT_OK)
    TRY(e, put_char(e, '}'));
  return rc;
}

static int bytes(captp__encoder *e, vat_value v) {
  size_t len;
  char *b64 = captp__base64_encode(vat_bytes_data(v), vat_bytes_len(v), &len);
  if (b64 == NULL)
    return captp__encode_nomem(e->err);
  TRY(e, PUT_FORM(e, F_BYTES) && PUT(e, b64, len) && PUT_FORM(e, F_BYTES_END));
  return VAT_OK;
}

/* The entries of a map with atom keys as an object's members, each after
 * a ',' when `comma` (else the first without); `skip` (NULL for none) is
 * left out. A bad key fails after its value has encoded. */
static int members(captp__encoder *e, const vat__map *m, const vat_atom *skip,
                   bool comma, int depth) {
  for (size_t i = 0; i < m->n; i++) {
    const vat_atom *k = m->entries[i].key.as.atom;
    if (k == skip)
      continue;
    if (comma)
      TRY(e, put_char(e, ','));
    comma = true;
    size_t mark = e->out->len;
    switch (
        captp__out_string(e->out, vat_atom_name(k), vat_atom_len(k), e->esc)) {
    case CAPTP__OUT_OK:
      break;
    case CAPTP__OUT_NOMEM:
      return captp__encode_nomem(e->err);
    case CAPTP__OUT_UTF8: {
      e->out->len = mark;
      int rc = encode(e, m->entries[i].val, depth);
      return rc != VAT_OK ? rc
                          : FAIL(e, UTF8, "key \"%.40s\"", vat_atom_name(k));
    }
    }
    TRY(e, put_char(e, ':'));
    int rc = encode(e, m->entries[i].val, depth);
    if (rc != VAT_OK)
      return rc;
  }
  return VAT_OK;
}

bool captp__atom_keyed(const vat__map *m) {
  for (size_t i = 0; i < m->n; i++)
    if (m->entries[i].key.type != VAT_T_ATOM)
      return false;
  return true;
}

/* Endo's hilbert hotel: {"@qclass":"hilbert","original":...,"rest":{...}}
 * for a record whose own key is "@qclass". */
static int hilbert(captp__encoder *e, const vat__map *m, int depth) {
  vat_value orig;
  vat_map_get((vat_value){.type = VAT_T_MAP, .as.obj = m},
              vat_atom_value(captp__atom_qclass()), &orig);
  TRY(e, PUT_FORM(e, F_HILBERT));
  int rc = encode(e, orig, depth);
  if (rc != VAT_OK)
    return rc;
  if (m->n > 1) {
    TRY(e, PUT_FORM(e, F_REST));
    if ((rc = members(e, m, captp__atom_qclass(), false, depth)) != VAT_OK)
      return rc;
    TRY(e, put_char(e, '}'));
  }
  TRY(e, put_char(e, '}'));
  return VAT_OK;
}

/* copyMap, keys in descending order: Endo's rank order for a copyMap's
 * keys is descending, and for keys of one type vat_compare agrees. */
static int copy_map(captp__encoder *e, const vat__map *m, int depth) {
  TRY(e, PUT_FORM(e, F_COPYMAP));
  for (int values = 0; values < 2; values++) {
    if (values)
      TRY(e, PUT_FORM(e, F_VALUES));
    TRY(e, put_char(e, '['));
    for (size_t i = 0; i < m->n; i++) {
      if (i > 0)
        TRY(e, put_char(e, ','));
      const vat__map_entry *entry = &m->entries[m->n - 1 - i];
      int rc = encode(e, values ? entry->val : entry->key, depth);
      if (rc != VAT_OK)
        return rc;
    }
    TRY(e, put_char(e, ']'));
  }
  TRY(e, PUT(e, "}}", 2));
  return VAT_OK;
}

static int map(captp__encoder *e, vat_value v, int depth) {
  const vat__map *m = v.as.obj;
  if (!captp__atom_keyed(m))
    return copy_map(e, m, depth);
  vat_value ignored;
  if (vat_map_get(v, vat_atom_value(captp__atom_qclass()), &ignored) == VAT_OK)
    return hilbert(e, m, depth);
  TRY(e, put_char(e, '{'));
  int rc = members(e, m, NULL, false, depth);
  if (rc == VAT_OK)
    TRY(e, put_char(e, '}'));
  return rc;
}

bool captp__bigint_digits(const vat__record *r, const char **digits,
                          size_t *len) {
  if (r->label != captp__atom_bigint() || r->n != 1 ||
      r->fields[0].type != VAT_T_STRING)
    return false;
  *digits = vat_string_data(r->fields[0]);
  *len = vat_string_len(r->fields[0]);
  return captp__is_digits(*digits, *len) && strlen(*digits) == *len;
}

static int record(captp__encoder *e, vat_value v, int depth) {
  const vat__record *r = v.as.obj;
  const char *digits;
  size_t len;
  if (captp__bigint_digits(r, &digits, &len)) {
    TRY(e, PUT_FORM(e, F_BIGINT) && PUT(e, digits, len) &&
               PUT_FORM(e, F_BIGINT_END));
    return VAT_OK;
  }
  return tagged_fields(e, vat_atom_name(r->label), vat_atom_len(r->label),
                       r->fields, r->n, depth);
}

captp__error_shape captp__error_shape_of(vat_value p, vat_value *message) {
  vat_value ignored;
  if (p.type == VAT_T_NULL)
    return CAPTP__ERROR_BARE;
  if (p.type == VAT_T_STRING) {
    *message = p;
    return CAPTP__ERROR_MESSAGE;
  }
  if (p.type == VAT_T_MAP && captp__atom_keyed(p.as.obj) &&
      vat_map_get(p, vat_atom_value(captp__atom_message()), message) ==
          VAT_OK &&
      message->type == VAT_T_STRING &&
      vat_map_get(p, vat_atom_value(captp__atom_name()), &ignored) != VAT_OK &&
      vat_map_get(p, vat_atom_value(captp__atom_qclass()), &ignored) != VAT_OK)
    return CAPTP__ERROR_MEMBERS;
  return CAPTP__ERROR_PAYLOAD;
}

/* The error's fields from its payload (note [8] of vat/captp.h). */
static int error_fields(captp__encoder *e, vat_value p, int depth) {
  vat_value msg;
  switch (captp__error_shape_of(p, &msg)) {
  case CAPTP__ERROR_BARE:
    TRY(e, PUT_FORM(e, F_NO_MESSAGE));
    return VAT_OK;
  case CAPTP__ERROR_MESSAGE:
    TRY(e, PUT_FORM(e, F_MESSAGE));
    return string(e, vat_string_data(p), vat_string_len(p));
  case CAPTP__ERROR_MEMBERS:
    return members(e, p.as.obj, NULL, false, depth);
  case CAPTP__ERROR_PAYLOAD:
    break;
  }
  TRY(e, PUT_FORM(e, F_NO_MESSAGE) && PUT_FORM(e, F_PAYLOAD));
  return encode(e, p, depth);
}

/* Members in Endo's order, sorted: errorId, message, then name. */
static int error(captp__encoder *e, vat_value v, int depth) {
  const vat_atom *code = vat_error_code(v);
  TRY(e, PUT_FORM(e, F_ERROR));
  int rc = error_fields(e, vat_error_payload(v), depth);
  if (rc != VAT_OK)
    return rc;
  TRY(e, PUT_FORM(e, F_ERROR_NAME));
  if ((rc = string(e, vat_atom_name(code), vat_atom_len(code))) != VAT_OK)
    return rc;
  TRY(e, put_char(e, '}'));
  return VAT_OK;
}

/* Room for one more slot; false when out of memory. */
static bool slot_room(captp__encoder *e) {
  if (e->n < e->cap)
    return true;
  size_t cap = 2 * e->cap;
  vat_value *exported = GC_MALLOC(cap * sizeof *exported);
  char(*names)[VAT_CAPTP_SLOT_MAX] = GC_MALLOC_ATOMIC(cap * sizeof *names);
  if (exported == NULL || names == NULL)
    return false;
  memcpy(exported, e->exported, e->n * sizeof *exported);
  memcpy(names, e->names, e->n * sizeof *names);
  e->exported = exported;
  e->names = names;
  e->cap = cap;
  return true;
}

/* Whether the slot name is UTF-8 (it goes into the envelope as a string);
 * checked by writing it and taking it back. */
static captp__out_rc check_name(captp__encoder *e, const char *name) {
  size_t mark = e->out->len;
  captp__out_rc rc = captp__out_string(e->out, name, strlen(name), false);
  e->out->len = mark;
  return rc;
}

int captp__slot(captp__encoder *e, vat_value v, size_t *slot_index,
                const char **slot_iface) {
  size_t index = 0;
  while (index < e->n && !(e->exported[index].type == v.type &&
                           e->exported[index].as.obj == v.as.obj))
    index++;
  const char *iface = NULL;
  if (index == e->n) {
    if (e->table == NULL || e->table->export_slot == NULL)
      return FAIL(e, EXPORT, "no slot table");
    char name[VAT_CAPTP_SLOT_MAX] = {0};
    int rc = e->table->export_slot(e->table->ctx, v, name, &iface);
    if (rc != VAT_OK)
      return captp__fail(e->err, rc < 0 ? rc : VAT_EENCODE,
                         VAT_CAPTP_ERR_EXPORT, 0, "%s", vat_strerror(rc));
    name[VAT_CAPTP_SLOT_MAX - 1] = '\0';
    if (!slot_room(e))
      return captp__encode_nomem(e->err);
    switch (check_name(e, name)) {
    case CAPTP__OUT_OK:
      break;
    case CAPTP__OUT_UTF8:
      return FAIL(e, UTF8, "\"%.40s\"", name);
    case CAPTP__OUT_NOMEM:
      return captp__encode_nomem(e->err);
    }
    memcpy(e->names[e->n], name, sizeof name);
    e->exported[e->n++] = v;
  }
  *slot_index = index;
  *slot_iface = v.type == VAT_T_REF ? iface : NULL;
  return VAT_OK;
}

/* The slot of a ref or promise: the same one again reuses its index. */
static int slot(captp__encoder *e, vat_value v) {
  size_t index;
  const char *iface;
  int rc = captp__slot(e, v, &index, &iface);
  if (rc != VAT_OK)
    return rc;
  TRY(e, PUT_FORM(e, F_SLOT));
  if (iface != NULL) {
    TRY(e, PUT_FORM(e, F_IFACE));
    rc = string(e, iface, strlen(iface));
    if (rc != VAT_OK)
      return rc;
    TRY(e, put_char(e, ','));
  }
  TRY(e, PUT_FORM(e, F_INDEX) && captp__out_int(e->out, (int64_t)index) &&
             put_char(e, '}'));
  return VAT_OK;
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

void captp__encoder_init(captp__encoder *e, captp__out *out, bool esc,
                         vat_captp_format format, const vat_captp_slots *table,
                         vat_captp_error *err) {
  e->out = out;
  e->esc = esc;
  e->format = format;
  e->table = table;
  e->err = err;
  e->n = 0;
  e->cap = CAPTP__INLINE_SLOTS;
  e->exported = e->inline_exported;
  e->names = e->inline_names;
}

int captp__encode_body(captp__encoder *e, vat_value v) {
  if (e->format != VAT_CAPTP_SMALLCAPS)
    return encode(e, v, 0);
  TRY(e, put_char(e, '#'));
  return captp__encode_smallcaps(e, v, 0);
}

int vat_capdata_encode(vat_value v, const vat_captp_slots *slots,
                       vat_capdata *out, vat_captp_error *err) {
  return vat_capdata_encode_as(v, VAT_CAPTP_CAPDATA, slots, out, err);
}

int vat_capdata_encode_as(vat_value v, vat_captp_format format,
                          const vat_captp_slots *slots, vat_capdata *out,
                          vat_captp_error *err) {
  captp__clear(err);
  if (out == NULL)
    return captp__fail(err, VAT_EINVAL, VAT_CAPTP_ERR_TYPE, 0, "out is NULL");
  if (format != VAT_CAPTP_CAPDATA && format != VAT_CAPTP_SMALLCAPS)
    return captp__fail(err, VAT_EINVAL, VAT_CAPTP_ERR_TYPE, 0,
                       "unknown body format %d", (int)format);
  captp__out text;
  if (!captp__out_init(&text, 0))
    return captp__encode_nomem(err);
  captp__encoder e;
  captp__encoder_init(&e, &text, false, format, slots, err);
  int rc = captp__encode_body(&e, v);
  if (rc != VAT_OK)
    return rc;
  text.buf[text.len] = '\0'; /* the two spare bytes after the text */
  const char **names = GC_MALLOC((e.n + 1) * sizeof *names);
  if (names == NULL)
    return captp__encode_nomem(err);
  for (size_t i = 0; i < e.n; i++) {
    size_t len = strlen(e.names[i]);
    char *copy = GC_MALLOC_ATOMIC(len + 1);
    if (copy == NULL)
      return captp__encode_nomem(err);
    memcpy(copy, e.names[i], len + 1);
    names[i] = copy;
  }
  *out = (vat_capdata){
      .body = text.buf, .body_len = text.len, .slots = names, .n_slots = e.n};
  return VAT_OK;
}
