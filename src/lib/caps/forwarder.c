/* The caretaker: a revocable forwarder (see vat/caps.h).
 *
 * Whoever is given the forwarder instead of the target can use the target
 * exactly as long as the holder of the revoker allows. Requests pass with
 * a guard for their answer (caps__forward), so the caller hears of the
 * target's end. */
#define GC_THREADS 1
#include <gc/gc.h>

#include "caps_internal.h"
#include "vat/caps.h"

typedef struct forwarder {
  vat_ref *target;
  caps__cell *cell;
} forwarder;

static void forward(vat_turn *turn, void *state, const vat_atom *selector,
                    vat_value value) {
  forwarder *f = state;
  if (caps__is_revoked(f->cell)) {
    caps__refuse(turn, value, vat_atom_revoked(), vat_null());
    return;
  }
  (void)caps__forward(turn, f->target, selector, value);
}

static const vat_entity_def forwarder_def = {.state_size = sizeof(forwarder),
                                             .receive = forward};

static int make(vat_turn *turn, vat_system *sys, vat_ref *target,
                vat_ref **fwd_out, vat_ref **revoker_out) {
  if (target == NULL || fwd_out == NULL || revoker_out == NULL)
    return VAT_EINVAL;
  caps__cell *cell = GC_MALLOC(sizeof *cell);
  if (cell == NULL)
    return VAT_ENOMEM;
  atomic_init(&cell->revoked, false);
  vat_ref *fwd, *revoker;
  forwarder *f;
  int rc = caps__entity(turn, sys, &forwarder_def, &fwd, (void **)&f);
  if (rc != VAT_OK)
    return rc;
  f->target = target;
  f->cell = cell;
  rc = caps__revoker_new(turn, sys, cell, &revoker);
  if (rc != VAT_OK)
    return rc;
  *fwd_out = fwd;
  *revoker_out = revoker;
  return VAT_OK;
}

int vat_caretaker_new(vat_turn *turn, vat_ref *target, vat_ref **forwarder,
                      vat_ref **revoker) {
  if (turn == NULL)
    return VAT_ENOTINTURN;
  return make(turn, NULL, target, forwarder, revoker);
}

int vat_host_caretaker_new(vat_system *sys, vat_ref *target,
                           vat_ref **forwarder, vat_ref **revoker) {
  if (sys == NULL)
    return VAT_EINVAL;
  return make(NULL, sys, target, forwarder, revoker);
}
