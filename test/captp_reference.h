/* The encoder as it was (captp_reference.c): the same contract as
 * vat_capdata_encode, vat_captp_encode and vat_captp_encode_frame; and
 * the decoder as it was (captp_reference_decode.c): the same contract as
 * vat_capdata_decode and vat_captp_decode. */
#ifndef VAT_TEST_CAPTP_REFERENCE_H
#define VAT_TEST_CAPTP_REFERENCE_H

#include "vat/captp.h"

int captp_ref_capdata_encode(vat_value v, const vat_captp_slots *slots,
                             vat_capdata *out, vat_captp_error *err);
int captp_ref_encode(const vat_captp_msg *msg, const vat_captp_slots *slots,
                     char **out, size_t *out_len, vat_captp_error *err);
int captp_ref_encode_frame(const vat_captp_msg *msg,
                           const vat_captp_slots *slots, char **out,
                           size_t *out_len, vat_captp_error *err);

int captp_ref_capdata_decode(const char *body, size_t body_len,
                             const char *const *slot_names, size_t n_slots,
                             const vat_captp_slots *slots, vat_value *out,
                             vat_captp_error *err);
int captp_ref_decode(const char *json, size_t len, const vat_captp_slots *slots,
                     vat_captp_msg *out, vat_captp_error *err);

#endif
