/* libFuzzer target: the one-pass decoder against the jansson-based one
 * it replaced (test/captp_reference_decode.c). The input is decoded as a
 * CapTP message and as a CapData body (with three slot names) by both:
 * they must agree on accepting it, on the value (bit for bit), on the
 * failure's code (and its detail, but for JSON failures, whose text is
 * each parser's own) and on the message's fields. The one difference
 * allowed is the old decoder's mistake: jansson dropped a raw NUL byte
 * after a number or a word, which the new parser refuses. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "captp_reference.h"
#include "same_value.h"
#include "value/value_internal.h"
#include "vat.h"
#include "vat/captp.h"

static char stand_ins[16];
static const char *const names[] = {"o-1", "p-2", "o+3"};

static int import_slot(void *ctx, const char *slot, const char *iface,
                       vat_value *out) {
  (void)ctx;
  (void)iface;
  void *p = &stand_ins[(unsigned char)slot[strlen(slot) - 1] % 16];
  *out = slot[0] == 'o' ? vat_ref_value((vat_ref *)p)
                        : vat_promise_value((vat_promise *)p);
  return VAT_OK;
}

static const vat_captp_slots table = {.import_slot = import_slot};


/* A NUL, raw or escaped, right after a character a number or word ends in. */
static bool nul_after_token(const char *text, size_t len) {
  for (size_t i = 1; i < len; i++) {
    unsigned char c = (unsigned char)text[i - 1];
    bool token_end = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') ||
                     (c >= 'A' && c <= 'Z');
    if (token_end && (text[i] == '\0' ||
                      (len - i >= 6 && memcmp(text + i, "\\u0000", 6) == 0)))
      return true;
  }
  return false;
}

/* False when the outcomes may differ only by that NUL. */
static bool same_failure(int rn, const vat_captp_error *en, int ro,
                         const vat_captp_error *eo, const char *text,
                         size_t len) {
  /* Refused where jansson went on: at once, or (a body's JSON failing
   * further in) with other fields decoded. */
  if (rn == VAT_EDECODE && en->code == VAT_CAPTP_ERR_JSON &&
      nul_after_token(text, len))
    return false;
  if (rn != ro || en->code != eo->code ||
      (en->code != VAT_CAPTP_ERR_JSON && strcmp(en->detail, eo->detail) != 0))
    abort();
  return true;
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc;
  (void)argv;
  return vat_init() == VAT_OK ? 0 : 1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const char *text = (const char *)data;
  vat_captp_msg mn, mo;
  vat_captp_error en, eo;
  int rn = vat_captp_decode(text, size, &table, &mn, &en);
  int ro = captp_ref_decode(text, size, &table, &mo, &eo);
  if (same_failure(rn, &en, ro, &eo, text, size) &&
      !(mn.type == mo.type && same_str(mn.type_name, mo.type_name) &&
        same_str(mn.id, mo.id) && same_str(mn.target, mo.target) &&
        mn.is_reject == mo.is_reject && mn.dec_refs == mo.dec_refs &&
        mn.has_epoch == mo.has_epoch && mn.epoch == mo.epoch &&
        same_str(mn.reason_json, mo.reason_json) &&
        mn.value_failed == mo.value_failed && same_value(mn.value, mo.value)))
    abort();
  vat_value vn = vat_null(), vo = vat_null();
  rn = vat_capdata_decode(text, size, names, 3, &table, &vn, &en);
  ro = captp_ref_capdata_decode(text, size, names, 3, &table, &vo, &eo);
  if (same_failure(rn, &en, ro, &eo, text, size) && !same_value(vn, vo))
    abort();
  return 0;
}
