/* Values to CapData text, written straight into an output buffer: the
 * body for vat_capdata_encode, or the body already escaped as the "body"
 * string of a message's envelope (message.c); in capdata (encode.c) or
 * smallcaps (encode_smallcaps.c), which share what is below. */
#ifndef VAT_CAPTP_ENCODER_H
#define VAT_CAPTP_ENCODER_H

#include "captp/internal.h"
#include "captp/out.h"
#include "value/value_internal.h"

/* A value's encoding: where the text goes and the slots it exported, in
 * index order. Most values export a few slots or none; the first ones
 * live in the encoder itself. */
enum { CAPTP__INLINE_SLOTS = 8 };
typedef struct captp__encoder {
  captp__out *out;
  bool esc; /* the body is the inside of a JSON string */
  vat_captp_format format;
  const vat_captp_slots *table;
  vat_captp_error *err;
  size_t n, cap;
  vat_value *exported;               /* the value of each slot */
  char (*names)[VAT_CAPTP_SLOT_MAX]; /* and its name */
  vat_value inline_exported[CAPTP__INLINE_SLOTS];
  char inline_names[CAPTP__INLINE_SLOTS][VAT_CAPTP_SLOT_MAX];
} captp__encoder;

void captp__encoder_init(captp__encoder *e, captp__out *out, bool esc,
                         vat_captp_format format, const vat_captp_slots *table,
                         vat_captp_error *err);
/* Writes v's body text in e->format; VAT_OK or the failure, recorded in
 * e->err. After a failure the output holds no usable text. */
int captp__encode_body(captp__encoder *e, vat_value v);
/* The smallcaps body after its '#', at `depth` (encode_smallcaps.c). */
int captp__encode_smallcaps(captp__encoder *e, vat_value v, int depth);
/* The failure "out of memory" while encoding. */
int captp__encode_nomem(vat_captp_error *err);

/* The slot index of a ref or promise, exported through the table the
 * first time (the same one again reuses its index); *iface is the
 * table's interface name for a ref's first time, else NULL. */
int captp__slot(captp__encoder *e, vat_value v, size_t *index,
                const char **iface);
/* Whether every key of m is an atom (a copyRecord, not a copyMap). */
bool captp__atom_keyed(const vat__map *m);
/* Whether r is bigint("<digits>") with canonical digits: *digits, *len. */
bool captp__bigint_digits(const vat__record *r, const char **digits,
                          size_t *len);

/* How an error's payload travels (note [8] of vat/captp.h): no message;
 * the payload string as the message; a record's members, its "message"
 * among them (set in *message); or the payload as a "payload" member. */
typedef enum {
  CAPTP__ERROR_BARE,
  CAPTP__ERROR_MESSAGE,
  CAPTP__ERROR_MEMBERS,
  CAPTP__ERROR_PAYLOAD,
} captp__error_shape;
captp__error_shape captp__error_shape_of(vat_value payload, vat_value *message);

#endif
