/* Vat labels: names for humans, shown in crash reports and snapshots.
 * A label is an immutable copy in pointer-free collector memory, replaced
 * whole, so a reader on any thread sees one label or another, never a mix,
 * and keeps the one it read alive by holding it. */
#include <string.h>

#include "core/turn.h"
#include "core/vat.h"
#include "util/gc.h"
#include "vat/observe.h"

/* The longest prefix of `s` of at most VAT_LABEL_MAX bytes that ends on a
 * whole UTF-8 character. */
static size_t label_len(const char *s) {
  size_t n = strnlen(s, VAT_LABEL_MAX + 1);
  if (n <= VAT_LABEL_MAX)
    return n;
  n = VAT_LABEL_MAX;
  /* s[n] is the first byte cut; while it continues a character, that
   * character straddles the cut: cut before it. */
  while (n > 0 && ((unsigned char)s[n] & 0xC0) == 0x80)
    n--;
  return n;
}

void vat__label_set(vat__vat *v, const char *label) {
  char *copy = NULL;
  if (label != NULL) {
    size_t n = label_len(label);
    copy = GC_MALLOC_ATOMIC(n + 1);
    if (copy == NULL)
      return; /* a label is not worth failing for */
    memcpy(copy, label, n);
    copy[n] = '\0';
  }
  /* Release: a reader that acquire-loads the pointer sees the copy's
   * bytes. */
  __atomic_store_n(&vat__ext_of(v)->label, copy, __ATOMIC_RELEASE);
}

const char *vat__label_of(vat__vat *v) {
  vat__vat_ext *x = vat__ext_peek(v);
  /* Acquire: pairs with vat__label_set's release store. */
  return x ? __atomic_load_n(&x->label, __ATOMIC_ACQUIRE) : NULL;
}

int vat_set_label(vat_turn *turn, const char *label) {
  int rc = vat__check_turn(turn);
  if (rc != VAT_OK)
    return rc;
  vat__label_set(turn->vat, label);
  return VAT_OK;
}

const char *vat_ref_label(vat_ref *ref) {
  return ref ? vat__label_of(ref->vat) : NULL;
}
