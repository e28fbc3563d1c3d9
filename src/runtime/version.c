/* The library's version, fixed when it was built: a program compares it
 * with the VAT_VERSION_STRING its headers gave it. */
#include "vat/version.h"

const char *vat_version(void) {
  return VAT_VERSION_STRING;
}
