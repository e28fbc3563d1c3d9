/* Values to CapData text, written straight into an output buffer
 * (encode.c): the body for vat_capdata_encode, or the body already
 * escaped as the "body" string of a message's envelope (message.c). */
#ifndef VAT_CAPTP_ENCODER_H
#define VAT_CAPTP_ENCODER_H

#include "captp/internal.h"
#include "captp/out.h"

/* A value's encoding: where the text goes and the slots it exported, in
 * index order. Most values export a few slots or none; the first ones
 * live in the encoder itself. */
enum { CAPTP__INLINE_SLOTS = 8 };
typedef struct captp__encoder {
  captp__out *out;
  bool esc; /* the body is the inside of a JSON string */
  const vat_captp_slots *table;
  vat_captp_error *err;
  size_t n, cap;
  vat_value *exported;               /* the value of each slot */
  char (*names)[VAT_CAPTP_SLOT_MAX]; /* and its name */
  vat_value inline_exported[CAPTP__INLINE_SLOTS];
  char inline_names[CAPTP__INLINE_SLOTS][VAT_CAPTP_SLOT_MAX];
} captp__encoder;

void captp__encoder_init(captp__encoder *e, captp__out *out, bool esc,
                         const vat_captp_slots *table, vat_captp_error *err);
/* Writes v's body text (Endo's capdata); VAT_OK or the failure, recorded
 * in e->err. After a failure the output holds no usable text. */
int captp__encode_body(captp__encoder *e, vat_value v);
/* The failure "out of memory" while encoding. */
int captp__encode_nomem(vat_captp_error *err);

#endif
