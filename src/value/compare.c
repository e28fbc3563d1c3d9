/* Equality, order and hashing of values.
 *
 * The three agree: vat_compare(a, b) == 0 exactly when vat_equal(a, b), and
 * equal values hash alike. The order is total so that maps can keep their
 * keys sorted, and it depends on nothing that changes between runs except
 * where a ref's address is involved: atoms sort by name, not by address.
 *
 * Types sort in vat_type order, so the integer 1 and the float 1.0 are
 * different values. Floats compare by value (-0.0 equals 0.0); every NaN
 * equals every other NaN and sorts after +infinity, which keeps the order
 * total and makes a NaN usable as a map key. Sequences (strings, bytes,
 * lists, record fields, map entries) compare lexicographically, a prefix
 * first.
 */
#include <math.h>
#include <string.h>

#include "value/value_internal.h"

static int sign_of(int c) {
  return (c > 0) - (c < 0);
}

static int compare_float(double a, double b) {
  int a_nan = isnan(a), b_nan = isnan(b);
  if (a_nan || b_nan)
    return (a_nan != 0) - (b_nan != 0);
  return (a > b) - (a < b);
}

static int compare_blobs(const vat__blob *a, const vat__blob *b) {
  size_t n = a->len < b->len ? a->len : b->len;
  int c = n > 0 ? memcmp(a->data, b->data, n) : 0;
  if (c != 0)
    return sign_of(c);
  return (a->len > b->len) - (a->len < b->len);
}

static int compare_seqs(const vat_value *a, size_t an, const vat_value *b,
                        size_t bn) {
  size_t n = an < bn ? an : bn;
  for (size_t i = 0; i < n; i++) {
    int c = vat_compare(a[i], b[i]);
    if (c != 0)
      return c;
  }
  return (an > bn) - (an < bn);
}

static int compare_maps(const vat__map *a, const vat__map *b) {
  size_t n = a->n < b->n ? a->n : b->n;
  for (size_t i = 0; i < n; i++) {
    int c = vat_compare(a->entries[i].key, b->entries[i].key);
    if (c == 0)
      c = vat_compare(a->entries[i].val, b->entries[i].val);
    if (c != 0)
      return c;
  }
  return (a->n > b->n) - (a->n < b->n);
}

int vat_compare(vat_value a, vat_value b) {
  /* Unsigned, so that even a corrupt type has a place in the order. */
  unsigned ta = (unsigned)a.type, tb = (unsigned)b.type;
  if (ta != tb)
    return ta < tb ? -1 : 1;
  switch (a.type) {
  case VAT_T_NULL:
    return 0;
  case VAT_T_BOOL:
    return (a.as.b > b.as.b) - (a.as.b < b.as.b);
  case VAT_T_INT:
    return (a.as.i > b.as.i) - (a.as.i < b.as.i);
  case VAT_T_FLOAT:
    return compare_float(a.as.f, b.as.f);
  case VAT_T_ATOM:
    return vat__atom_compare(a.as.atom, b.as.atom);
  case VAT_T_STRING:
  case VAT_T_BYTES:
    return compare_blobs(a.as.obj, b.as.obj);
  case VAT_T_LIST: {
    const vat__list *la = a.as.obj, *lb = b.as.obj;
    return compare_seqs(la->items, la->n, lb->items, lb->n);
  }
  case VAT_T_RECORD: {
    const vat__record *ra = a.as.obj, *rb = b.as.obj;
    int c = vat__atom_compare(ra->label, rb->label);
    if (c != 0)
      return c;
    return compare_seqs(ra->fields, ra->n, rb->fields, rb->n);
  }
  case VAT_T_MAP:
    return compare_maps(a.as.obj, b.as.obj);
  case VAT_T_REF: {
    uintptr_t pa = (uintptr_t)a.as.ref, pb = (uintptr_t)b.as.ref;
    return (pa > pb) - (pa < pb);
  }
  case VAT_T_PROMISE: {
    uintptr_t pa = (uintptr_t)a.as.obj, pb = (uintptr_t)b.as.obj;
    return (pa > pb) - (pa < pb);
  }
  case VAT_T_ERROR: {
    const vat__error *ea = a.as.obj, *eb = b.as.obj;
    int c = vat__atom_compare(ea->code, eb->code);
    if (c != 0)
      return c;
    return vat_compare(ea->payload, eb->payload);
  }
  }
  return 0;
}

static bool equal_seqs(const vat_value *a, const vat_value *b, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (!vat_equal(a[i], b[i]))
      return false;
  return true;
}

bool vat_equal(vat_value a, vat_value b) {
  if (a.type != b.type)
    return false;
  switch (a.type) {
  case VAT_T_FLOAT:
    return a.as.f == b.as.f || (isnan(a.as.f) && isnan(b.as.f));
  case VAT_T_ATOM:
    return a.as.atom == b.as.atom; /* interned */
  case VAT_T_STRING:
  case VAT_T_BYTES: {
    const vat__blob *ba = a.as.obj, *bb = b.as.obj;
    return ba == bb ||
           (ba->len == bb->len &&
            (ba->len == 0 || memcmp(ba->data, bb->data, ba->len) == 0));
  }
  case VAT_T_LIST: {
    const vat__list *la = a.as.obj, *lb = b.as.obj;
    return la == lb ||
           (la->n == lb->n && equal_seqs(la->items, lb->items, la->n));
  }
  case VAT_T_RECORD: {
    const vat__record *ra = a.as.obj, *rb = b.as.obj;
    return ra == rb || (ra->label == rb->label && ra->n == rb->n &&
                        equal_seqs(ra->fields, rb->fields, ra->n));
  }
  case VAT_T_MAP: {
    const vat__map *ma = a.as.obj, *mb = b.as.obj;
    if (ma == mb)
      return true;
    if (ma->n != mb->n)
      return false;
    /* Both sorted by key with distinct keys, so equal maps line up. */
    for (size_t i = 0; i < ma->n; i++)
      if (!vat_equal(ma->entries[i].key, mb->entries[i].key) ||
          !vat_equal(ma->entries[i].val, mb->entries[i].val))
        return false;
    return true;
  }
  case VAT_T_ERROR: {
    const vat__error *ea = a.as.obj, *eb = b.as.obj;
    return ea == eb ||
           (ea->code == eb->code && vat_equal(ea->payload, eb->payload));
  }
  default:
    return vat_compare(a, b) == 0;
  }
}

static uint64_t combine(uint64_t h, uint64_t x) {
  return vat__mix64(h ^
                    (x + UINT64_C(0x9e3779b97f4a7c15) + (h << 6) + (h >> 2)));
}

static uint64_t hash_float(double f) {
  /* Values that compare equal must hash alike: one zero, one NaN. */
  if (f == 0)
    f = 0.0;
  else if (isnan(f))
    f = NAN;
  uint64_t bits;
  memcpy(&bits, &f, sizeof bits);
  return bits;
}

static uint64_t hash_seq(uint64_t h, const vat_value *items, size_t n) {
  for (size_t i = 0; i < n; i++)
    h = combine(h, vat_hash(items[i]));
  return combine(h, n);
}

uint64_t vat_hash(vat_value v) {
  uint64_t h = vat__mix64((uint64_t)v.type + 1);
  switch (v.type) {
  case VAT_T_NULL:
    return h;
  case VAT_T_BOOL:
    return combine(h, v.as.b);
  case VAT_T_INT:
    return combine(h, (uint64_t)v.as.i);
  case VAT_T_FLOAT:
    return combine(h, hash_float(v.as.f));
  case VAT_T_ATOM:
    return combine(h, v.as.atom->hash);
  case VAT_T_STRING:
  case VAT_T_BYTES: {
    const vat__blob *b = v.as.obj;
    return combine(h, vat__hash_bytes(b->data, b->len));
  }
  case VAT_T_LIST: {
    const vat__list *l = v.as.obj;
    return hash_seq(h, l->items, l->n);
  }
  case VAT_T_RECORD: {
    const vat__record *r = v.as.obj;
    return hash_seq(combine(h, r->label->hash), r->fields, r->n);
  }
  case VAT_T_MAP: {
    const vat__map *m = v.as.obj;
    for (size_t i = 0; i < m->n; i++) {
      h = combine(h, vat_hash(m->entries[i].key));
      h = combine(h, vat_hash(m->entries[i].val));
    }
    return combine(h, m->n);
  }
  case VAT_T_REF:
    return combine(h, (uint64_t)(uintptr_t)v.as.ref);
  case VAT_T_PROMISE:
    return combine(h, (uint64_t)(uintptr_t)v.as.obj);
  case VAT_T_ERROR: {
    const vat__error *e = v.as.obj;
    return combine(combine(h, e->code->hash), vat_hash(e->payload));
  }
  }
  return h;
}
