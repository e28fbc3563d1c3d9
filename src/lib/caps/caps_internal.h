/* Helpers shared by the capability patterns; not part of the API. */
#ifndef VAT_CAPS_INTERNAL_H
#define VAT_CAPS_INTERNAL_H

#include <stdatomic.h>
#include <stdbool.h>

#include "vat.h"

/* Revocation is one flag shared by the guarded entities and their revoker.
 * It is atomic because the host forms put them in different vats. */
typedef struct caps__cell {
  _Atomic bool revoked;
} caps__cell;

/* Makes an entity in the calling vat (turn given) or in a new vat of `sys`
 * (host thread). */
int caps__entity(vat_turn *turn, vat_system *sys, const vat_entity_def *def,
                 vat_ref **out, void **state);

/* Makes a revoker for `cell`, as caps__entity does. */
int caps__revoker_new(vat_turn *turn, vat_system *sys, caps__cell *cell,
                      vat_ref **out);

bool caps__is_revoked(caps__cell *cell);

/* Sends a dynamic message on to `to`, as a wrapper does. A request goes
 * with a guard in the calling vat in place of its reply ref: the guard
 * passes the first answer on, and breaks the request with `to`'s exit
 * reason if `to`'s vat ends (or had ended) before answering. Inside a
 * turn. Errors: as vat_send_msg, VAT_ENOMEM. */
int caps__forward(vat_turn *turn, vat_ref *to, const vat_atom *selector,
                  vat_value value);

/* Refuses a message: answers a request with the error (code, payload),
 * drops anything else. */
void caps__refuse(vat_turn *turn, vat_value msg, const vat_atom *code,
                  vat_value payload);

#endif
