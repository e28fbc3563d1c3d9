/* Requests and promises. (Being written: only the core's hooks exist.) */
#include "internal.h"

void vat__promises_terminated(vat__worker *w, vat__vat *v, vat_value reason) {
  (void)w;
  (void)v;
  (void)reason;
}
