/* See atoms.h. */
#include "core/atoms.h"

vat__atoms vat__atom;

void vat__atoms_intern(void) {
  vat__atom = (vat__atoms){
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
  return vat__atom.normal;
}
const vat_atom *vat_atom_killed(void) {
  return vat__atom.killed;
}
const vat_atom *vat_atom_noproc(void) {
  return vat__atom.noproc;
}
