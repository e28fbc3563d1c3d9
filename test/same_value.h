/* Comparing two decoders' results: the same value bit for bit (-0 is
 * not 0, a NaN equals a NaN of the same bits) and the same strings. For
 * the CapTP decoder's differential tests and fuzzer. */
#ifndef VAT_TEST_SAME_VALUE_H
#define VAT_TEST_SAME_VALUE_H

#include <stdbool.h>
#include <string.h>

#include "value/value_internal.h"
#include "vat.h"

static inline bool same_value(vat_value a, vat_value b) {
  if (a.type != b.type)
    return false;
  switch (a.type) {
  case VAT_T_FLOAT:
    return memcmp(&a.as.f, &b.as.f, sizeof a.as.f) == 0;
  case VAT_T_LIST: {
    const vat__list *x = a.as.obj, *y = b.as.obj;
    if (x->n != y->n)
      return false;
    for (size_t i = 0; i < x->n; i++)
      if (!same_value(x->items[i], y->items[i]))
        return false;
    return true;
  }
  case VAT_T_RECORD: {
    const vat__record *x = a.as.obj, *y = b.as.obj;
    if (x->label != y->label || x->n != y->n)
      return false;
    for (size_t i = 0; i < x->n; i++)
      if (!same_value(x->fields[i], y->fields[i]))
        return false;
    return true;
  }
  case VAT_T_MAP: {
    const vat__map *x = a.as.obj, *y = b.as.obj;
    if (x->n != y->n)
      return false;
    for (size_t i = 0; i < x->n; i++)
      if (!same_value(x->entries[i].key, y->entries[i].key) ||
          !same_value(x->entries[i].val, y->entries[i].val))
        return false;
    return true;
  }
  case VAT_T_ERROR: {
    const vat__error *x = a.as.obj, *y = b.as.obj;
    return x->code == y->code && same_value(x->payload, y->payload);
  }
  default:
    return vat_equal(a, b);
  }
}

static inline bool same_str(const char *a, const char *b) {
  return (a == NULL && b == NULL) || (a != NULL && b != NULL && !strcmp(a, b));
}

#endif
