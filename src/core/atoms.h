/* The runtime's well-known atoms, interned once by vat_init (before any
 * thread may use them: its release store publishes them). */
#ifndef VAT_CORE_ATOMS_H
#define VAT_CORE_ATOMS_H

#include "vat/value.h"

typedef struct vat__atoms {
  const vat_atom *normal, *killed, *noproc, *shutdown;
  const vat_atom *timeout, *not_a_ref, *promise_cycle, *demonitored;
  const vat_atom *overloaded;
} vat__atoms;

extern vat__atoms vat__atom;

/** Interns the table; from vat_init only. */
void vat__atoms_intern(void);

#endif
