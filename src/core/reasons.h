/* The runtime's own reasons: the atoms its exits, rejections and
 * failures carry (`normal`, `killed`, `noproc`, `timeout`, ...), interned
 * once by vat_init (before any thread may use them: its release store
 * publishes them). Atoms themselves are value/'s (value/atom.c). */
#ifndef VAT_CORE_REASONS_H
#define VAT_CORE_REASONS_H

#include "vat/value.h"

typedef struct vat__reasons {
  const vat_atom *normal, *killed, *noproc, *shutdown;
  const vat_atom *timeout, *not_a_ref, *promise_cycle, *demonitored;
  const vat_atom *overloaded;
} vat__reasons;

extern vat__reasons vat__reason;

/** Interns the table; from vat_init only. */
void vat__reasons_intern(void);

#endif
