/* Exits between vats: links, monitors, trap_exit, exit signals, and the
 * entities' stop callbacks. (Being written: only the core's hooks exist.) */
#include "internal.h"

void vat__exits_track_stop(vat__vat *v, vat_ref *entity, vat_stop_fn fn) {
  (void)v;
  (void)entity;
  (void)fn;
}

void vat__exits_terminated(vat__worker *w, vat__vat *v, vat_value reason) {
  (void)w;
  (void)v;
  (void)reason;
}
