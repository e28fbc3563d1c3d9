/* Attenuated facets (see vat/caps.h).
 *
 * A facet gives away part of an entity's authority: the holder may send
 * the selectors it was given and nothing else. The list is small and
 * fixed, so a linear search over interned atoms (pointer compares) is as
 * fast as anything cleverer. */
#include <string.h>

#define GC_THREADS 1
#include <gc/gc.h>

#include "caps_internal.h"
#include "vat/caps.h"

typedef struct facet {
  vat_ref *target;
  const vat_atom **allowed;
  size_t n;
} facet;

static bool allows(const facet *f, const vat_atom *selector) {
  for (size_t i = 0; i < f->n; i++)
    if (f->allowed[i] == selector)
      return true;
  return false;
}

static void filter(vat_turn *turn, void *state, const vat_atom *selector,
                   vat_value value) {
  facet *f = state;
  if (!allows(f, selector)) {
    caps__refuse(turn, value, vat_atom_refused(), vat_atom_value(selector));
    return;
  }
  (void)caps__forward(turn, f->target, selector, value);
}

static const vat_entity_def facet_def = {.state_size = sizeof(facet),
                                         .receive = filter};

static int make(vat_turn *turn, vat_system *sys, vat_ref *target,
                const vat_atom *const *allowed, size_t n, vat_ref **out) {
  if (target == NULL || out == NULL || (allowed == NULL && n > 0))
    return VAT_EINVAL;
  /* Atoms live for ever, so the copy need not keep them alive, but the
   * array itself must be scanned memory: it sits in the facet's state. */
  const vat_atom **copy = GC_MALLOC(n > 0 ? n * sizeof *copy : 1);
  if (copy == NULL)
    return VAT_ENOMEM;
  if (n > 0)
    memcpy(copy, allowed, n * sizeof *copy);
  facet *f;
  int rc = caps__entity(turn, sys, &facet_def, out, (void **)&f);
  if (rc != VAT_OK)
    return rc;
  *f = (facet){.target = target, .allowed = copy, .n = n};
  return VAT_OK;
}

int vat_facet_new(vat_turn *turn, vat_ref *target,
                  const vat_atom *const *allowed, size_t n, vat_ref **out) {
  if (turn == NULL)
    return VAT_ENOTINTURN;
  return make(turn, NULL, target, allowed, n, out);
}

int vat_host_facet_new(vat_system *sys, vat_ref *target,
                       const vat_atom *const *allowed, size_t n,
                       vat_ref **out) {
  if (sys == NULL)
    return VAT_EINVAL;
  return make(NULL, sys, target, allowed, n, out);
}
