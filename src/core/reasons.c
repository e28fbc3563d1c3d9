/* See reasons.h. */
#include "core/reasons.h"

vat__reasons vat__reason;

void vat__reasons_intern(void) {
  vat__reason = (vat__reasons){
      .normal = vat_atom_intern("normal"),
      .killed = vat_atom_intern("killed"),
      .noproc = vat_atom_intern("noproc"),
      .shutdown = vat_atom_intern("shutdown"),
      .timeout = vat_atom_intern("timeout"),
      .not_a_ref = vat_atom_intern("not_a_ref"),
      .promise_cycle = vat_atom_intern("promise_cycle"),
      .demonitored = vat_atom_intern("demonitored"),
      .overloaded = vat_atom_intern("overloaded"),
  };
}

const vat_atom *vat_atom_normal(void) {
  return vat__reason.normal;
}
const vat_atom *vat_atom_killed(void) {
  return vat__reason.killed;
}
const vat_atom *vat_atom_noproc(void) {
  return vat__reason.noproc;
}
