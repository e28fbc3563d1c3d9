/* A readable text form of values, for logs, test failures and debuggers.
 *
 *   null  true  42  1.5  2.0  inf  nan   scalars; a float always shows a
 *                                        '.', an exponent, inf or nan, so it
 *                                        never reads as an integer
 *   'ok  '"two words"                    atoms: bare name when it is an
 *                                        identifier, else quoted
 *   "a\n\"b\""  #bytes[3]                strings with C escapes; bytes by
 *                                        length only
 *   [1, 2]  point{1, 2}  #{k => v}       lists, records, maps (in key order)
 *   <ref 0x...>  error(badarg, "x")      refs; errors, payload omitted when
 *                                        null
 *
 * It is not meant to be parsed back: refs and byte contents do not survive.
 */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "value/value_internal.h"

typedef struct out {
  char *buf;
  size_t size;
  size_t len; /* what the full text needs so far, even past size */
} out;

static void put_n(out *o, const char *s, size_t n) {
  for (size_t i = 0; i < n; i++) {
    if (o->size > 0 && o->len < o->size - 1)
      o->buf[o->len] = s[i];
    if (o->len < SIZE_MAX - 1)
      o->len++;
  }
}

static void put(out *o, const char *s) {
  put_n(o, s, strlen(s));
}

static void put_escaped(out *o, const char *s, size_t n) {
  put(o, "\"");
  for (size_t i = 0; i < n; i++) {
    unsigned char c = (unsigned char)s[i];
    char esc[8];
    switch (c) {
    case '"':
      put(o, "\\\"");
      break;
    case '\\':
      put(o, "\\\\");
      break;
    case '\n':
      put(o, "\\n");
      break;
    case '\r':
      put(o, "\\r");
      break;
    case '\t':
      put(o, "\\t");
      break;
    default:
      /* Bytes from 0x80 up pass through: they are UTF-8 in a string. */
      if (c < 0x20 || c == 0x7f) {
        snprintf(esc, sizeof esc, "\\x%02x", c);
        put(o, esc);
      } else {
        put_n(o, (const char *)&s[i], 1);
      }
    }
  }
  put(o, "\"");
}

static bool is_identifier(const vat_atom *atom) {
  if (atom->len == 0)
    return false;
  for (size_t i = 0; i < atom->len; i++) {
    char c = atom->name[i];
    bool alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
    if (!alpha && (i == 0 || c < '0' || c > '9'))
      return false;
  }
  return true;
}

/* A label or an error code: the bare name where it reads unambiguously. */
static void put_name(out *o, const vat_atom *atom) {
  if (is_identifier(atom))
    put_n(o, atom->name, atom->len);
  else {
    put(o, "'");
    put_escaped(o, atom->name, atom->len);
  }
}

static void put_float(out *o, double f) {
  if (isnan(f)) {
    put(o, "nan");
    return;
  }
  if (isinf(f)) {
    put(o, f < 0 ? "-inf" : "inf");
    return;
  }
  /* The shortest precision that reads back as the same double. */
  char text[40];
  for (int prec = 1; prec <= 17; prec++) {
    snprintf(text, sizeof text, "%.*g", prec, f);
    if (strtod(text, NULL) == f)
      break;
  }
  put(o, text);
  if (strpbrk(text, ".e") == NULL)
    put(o, ".0");
}

static void put_value(out *o, vat_value v);

static void put_seq(out *o, const vat_value *items, size_t n) {
  for (size_t i = 0; i < n; i++) {
    if (i > 0)
      put(o, ", ");
    put_value(o, items[i]);
  }
}

static void put_value(out *o, vat_value v) {
  char num[48];
  switch (v.type) {
  case VAT_T_NULL:
    put(o, "null");
    return;
  case VAT_T_BOOL:
    put(o, v.as.b ? "true" : "false");
    return;
  case VAT_T_INT:
    snprintf(num, sizeof num, "%" PRId64, v.as.i);
    put(o, num);
    return;
  case VAT_T_FLOAT:
    put_float(o, v.as.f);
    return;
  case VAT_T_ATOM:
    put(o, "'");
    if (is_identifier(v.as.atom))
      put_n(o, v.as.atom->name, v.as.atom->len);
    else
      put_escaped(o, v.as.atom->name, v.as.atom->len);
    return;
  case VAT_T_STRING: {
    const vat__blob *b = v.as.obj;
    put_escaped(o, b->data, b->len);
    return;
  }
  case VAT_T_BYTES: {
    const vat__blob *b = v.as.obj;
    snprintf(num, sizeof num, "#bytes[%zu]", b->len);
    put(o, num);
    return;
  }
  case VAT_T_LIST: {
    const vat__list *l = v.as.obj;
    put(o, "[");
    put_seq(o, l->items, l->n);
    put(o, "]");
    return;
  }
  case VAT_T_RECORD: {
    const vat__record *r = v.as.obj;
    put_name(o, r->label);
    put(o, "{");
    put_seq(o, r->fields, r->n);
    put(o, "}");
    return;
  }
  case VAT_T_MAP: {
    const vat__map *m = v.as.obj;
    put(o, "#{");
    for (size_t i = 0; i < m->n; i++) {
      if (i > 0)
        put(o, ", ");
      put_value(o, m->entries[i].key);
      put(o, " => ");
      put_value(o, m->entries[i].val);
    }
    put(o, "}");
    return;
  }
  case VAT_T_REF:
    snprintf(num, sizeof num, "<ref %p>", (void *)v.as.ref);
    put(o, num);
    return;
  case VAT_T_PROMISE:
    snprintf(num, sizeof num, "<promise %p>", v.as.obj);
    put(o, num);
    return;
  case VAT_T_ERROR: {
    const vat__error *e = v.as.obj;
    put(o, "error(");
    put_name(o, e->code);
    if (e->payload.type != VAT_T_NULL) {
      put(o, ", ");
      put_value(o, e->payload);
    }
    put(o, ")");
    return;
  }
  }
  put(o, "<invalid>");
}

size_t vat_format(vat_value v, char *buf, size_t size) {
  out o = {.buf = buf, .size = buf == NULL ? 0 : size, .len = 0};
  put_value(&o, v);
  if (o.size > 0)
    o.buf[o.len < o.size ? o.len : o.size - 1] = '\0';
  return o.len;
}
