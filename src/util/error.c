/* Error names and messages, generated from VAT_ERRNO_MAP. */
#include "vat/error.h"

const char *vat_strerror(int err) {
  switch (err) {
  case VAT_OK:
    return "success";
#define VAT__ERRNO_TEXT(name, value, text)                                     \
  case VAT_##name:                                                             \
    return text;
    VAT_ERRNO_MAP(VAT__ERRNO_TEXT)
#undef VAT__ERRNO_TEXT
  }
  return "unknown error";
}

const char *vat_err_name(int err) {
  switch (err) {
  case VAT_OK:
    return "VAT_OK";
#define VAT__ERRNO_NAME(name, value, text)                                     \
  case VAT_##name:                                                             \
    return "VAT_" #name;
    VAT_ERRNO_MAP(VAT__ERRNO_NAME)
#undef VAT__ERRNO_NAME
  }
  return "VAT_UNKNOWN";
}
