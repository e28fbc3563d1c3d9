/* The fine-grained reasons of vat/captp.h: names, texts, and recording. */
#include <stdarg.h>
#include <stdio.h>

#include "captp/internal.h"

const char *vat_captp_err_name(vat_captp_err code) {
  switch (code) {
#define CAPTP_ERR_NAME(name, text)                                             \
  case VAT_CAPTP_ERR_##name:                                                   \
    return "VAT_CAPTP_ERR_" #name;
    VAT_CAPTP_ERR_MAP(CAPTP_ERR_NAME)
#undef CAPTP_ERR_NAME
  }
  return "VAT_CAPTP_ERR_UNKNOWN";
}

const char *vat_captp_err_text(vat_captp_err code) {
  switch (code) {
#define CAPTP_ERR_TEXT(name, text)                                             \
  case VAT_CAPTP_ERR_##name:                                                   \
    return text;
    VAT_CAPTP_ERR_MAP(CAPTP_ERR_TEXT)
#undef CAPTP_ERR_TEXT
  }
  return "unknown error";
}

void captp__clear(vat_captp_error *err) {
  if (err != NULL) {
    err->code = VAT_CAPTP_ERR_NONE;
    err->offset = 0;
    err->detail[0] = '\0';
  }
}

int captp__fail(vat_captp_error *err, int rc, vat_captp_err code, size_t offset,
                const char *fmt, ...) {
  /* The first failure is the cause; a caller further out must not
   * overwrite it with its own, vaguer one. */
  if (err != NULL && err->code == VAT_CAPTP_ERR_NONE) {
    err->code = code;
    err->offset = offset;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->detail, sizeof err->detail, fmt, ap);
    va_end(ap);
  }
  return rc;
}
