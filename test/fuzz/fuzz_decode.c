/* libFuzzer target: the message and value decoders. The input is decoded
 * as a CapTP message and, separately, as a CapData body (capdata, or
 * smallcaps when it starts with '#') with three slot names. A decoded
 * value must encode again, in both formats, and encoding is then a fixed
 * point: decode(encode(v)) encodes to the same text. Bad input must come back
 * as VAT_EDECODE with a named reason. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vat.h"
#include "vat/captp.h"

static char stand_ins[16];
static const char *const names[] = {"o-1", "p-2", "o+3"};

/* Imports any slot as a stand-in; exports it back under its name. */
static int import_slot(void *ctx, const char *slot, const char *iface,
                       vat_value *out) {
  (void)ctx;
  (void)iface;
  void *p = &stand_ins[(unsigned char)slot[strlen(slot) - 1] % 16];
  *out = slot[0] == 'o' ? vat_ref_value((vat_ref *)p)
                        : vat_promise_value((vat_promise *)p);
  return VAT_OK;
}

static int export_slot(void *ctx, vat_value v, char slot[VAT_CAPTP_SLOT_MAX],
                       const char **iface) {
  (void)ctx;
  size_t i = (size_t)((const char *)v.as.obj - stand_ins);
  snprintf(slot, VAT_CAPTP_SLOT_MAX, "%c+%zu", v.type == VAT_T_REF ? 'o' : 'p',
           i);
  *iface = v.type == VAT_T_REF ? "Alleged: X" : NULL;
  return VAT_OK;
}

static const vat_captp_slots table = {.export_slot = export_slot,
                                      .import_slot = import_slot};

/* The same table, wanting no value: one naming no slots is skipped. */
static bool wants_none(void *ctx, const vat_captp_msg *m) {
  (void)ctx;
  (void)m;
  return false;
}
static const vat_captp_slots unwanted = {.export_slot = export_slot,
                                         .import_slot = import_slot,
                                         .wants_value = wants_none};

static bool same_text(const char *a, const char *b) {
  return a == b || (a != NULL && b != NULL && strcmp(a, b) == 0);
}

/* Decoded again with no value wanted: whatever decoded still does, with
 * the same envelope; a skip only where the envelope was sound; a failure
 * only where the first decode failed too. */
static void same_envelope_unwanted(const char *text, size_t size, int rc,
                                   const vat_captp_msg *msg) {
  vat_captp_msg m;
  vat_captp_error err;
  int rc2 = vat_captp_decode(text, size, &unwanted, &m, &err);
  if (rc2 != VAT_OK) {
    if (rc == VAT_OK || m.value_skipped)
      abort();
    return;
  }
  if (m.type != msg->type || !same_text(m.id, msg->id) ||
      !same_text(m.target, msg->target) || m.is_reject != msg->is_reject)
    abort();
  if (m.value_skipped) {
    if (rc != VAT_OK && !msg->value_failed)
      abort();
  } else if (rc != VAT_OK || vat_compare(m.value, msg->value) != 0) {
    abort(); /* decoded both times (slots, or no value): the same */
  }
}

static void check_error(int rc, const vat_captp_error *err) {
  if (rc != VAT_EDECODE || err->code == VAT_CAPTP_ERR_NONE)
    abort();
}

/* v must encode, in either format, and re-decoding and re-encoding must
 * give the same text. */
static void fixed_point_as(vat_value v, vat_captp_format format) {
  vat_capdata a, b;
  vat_value again;
  vat_captp_error err;
  if (vat_capdata_encode_as(v, format, &table, &a, &err) != VAT_OK)
    abort();
  if (vat_capdata_decode(a.body, a.body_len, a.slots, a.n_slots, &table, &again,
                         &err) != VAT_OK)
    abort();
  if (vat_capdata_encode_as(again, format, &table, &b, &err) != VAT_OK ||
      a.body_len != b.body_len || memcmp(a.body, b.body, a.body_len) != 0)
    abort();
}

static void fixed_point(vat_value v) {
  fixed_point_as(v, VAT_CAPTP_CAPDATA);
  fixed_point_as(v, VAT_CAPTP_SMALLCAPS);
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc;
  (void)argv;
  return vat_init() == VAT_OK ? 0 : 1;
}

static vat_captp_frame_buf reused;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const char *text = (const char *)data;
  vat_captp_msg msg;
  vat_captp_error err;
  int rc = vat_captp_decode(text, size, &table, &msg, &err);
  same_envelope_unwanted(text, size, rc, &msg);
  if (rc != VAT_OK) {
    check_error(rc, &err);
  } else if (msg.type != VAT_CAPTP_UNKNOWN) {
    char *out, *again;
    size_t len, again_len;
    if (vat_captp_encode_frame(&msg, &table, &out, &len, &err) != VAT_OK)
      abort();
    /* The same frame into a buffer reused from input to input. */
    if (vat_captp_encode_frame_into(&reused, &msg, &table, &again, &again_len,
                                    &err) != VAT_OK ||
        again_len != len || memcmp(again, out, len) != 0)
      abort();
    fixed_point(msg.value);
  }
  vat_value v;
  rc = vat_capdata_decode(text, size, names, 3, &table, &v, &err);
  if (rc != VAT_OK)
    check_error(rc, &err);
  else
    fixed_point(v);
  return 0;
}
