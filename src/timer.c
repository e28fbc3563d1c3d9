/* Timers. (Being written: only the core's hooks exist.) */
#include "internal.h"

int vat__timers_start(vat_system *sys) {
  (void)sys;
  return VAT_OK;
}

void vat__timers_stop(vat_system *sys) { (void)sys; }

void vat__timers_terminated(vat__worker *w, vat__vat *v, vat_value reason) {
  (void)w;
  (void)v;
  (void)reason;
}
