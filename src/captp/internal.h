/* CapTP's wire format, the shared parts: error reporting, the forms both
 * body decoders build (tagged values, errors, bigints), and the slot
 * caches a value's encoding or decoding keeps. See vat/captp.h for the
 * mapping and README.md in this folder for the layout. */
#ifndef VAT_CAPTP_INTERNAL_H
#define VAT_CAPTP_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "vat/captp.h"
#include "captp/json.h"
#include "vat/error.h"

/* Records the reason (when err is not NULL) and returns `rc`, so that a
 * failure reads `return captp__fail(err, rc, CODE, offset, fmt, ...)`. */
int captp__fail(vat_captp_error *err, int rc, vat_captp_err code, size_t offset,
                const char *fmt, ...) __attribute__((format(printf, 5, 6)));
void captp__clear(vat_captp_error *err);

/* A value's decoding: the body's parsed text, the slot names it may use
 * and the values already imported for them, so a slot used twice is
 * imported once (identity). */
typedef struct captp__decoder {
  const captp__json *json;
  const char *const *slot_names;
  size_t n_slots;
  vat_value *imported; /* n_slots entries, VAT_T_NULL until imported */
  const vat_captp_slots *table;
  vat_captp_error *err;
} captp__decoder;

/* The value of slot `index`, imported on first use; `want` is 'o' or 'p'
 * when the encoding says which (smallcaps), 0 when the name decides. */
int captp__import(captp__decoder *d, int64_t index, const char *iface,
                  char want, vat_value *out);

/* Body decoders: capdata (decode.c) and smallcaps (smallcaps.c), from the
 * node at index `at` of d->json. */
int captp__decode_capdata(captp__decoder *d, uint32_t at, int depth,
                          vat_value *out);
int captp__decode_smallcaps(captp__decoder *d, uint32_t at, int depth,
                            vat_value *out);
/* A JSON array as a list, each item decoded by `item` (decode.c): the one
 * form both body formats spell alike. */
typedef int captp__decode_fn(captp__decoder *d, uint32_t at, int depth,
                             vat_value *out);
int captp__decode_list(captp__decoder *d, uint32_t at, int depth,
                       captp__decode_fn *item, vat_value *out);
/* A JSON object's members as a map with atom keys, each name decoded by
 * `key_of` and each value by `item`, leaving out the members named in
 * `skip` (NULL-terminated; NULL: none) (decode.c). */
typedef int captp__key_fn(captp__decoder *d, const char *key, size_t len,
                          vat_value *out);
int captp__decode_members(captp__decoder *d, uint32_t at, int depth,
                          const char *const *skip, captp__key_fn *key_of,
                          captp__decode_fn *item, vat_value *out);

/* Forms both decoders share (forms.c). */
/* A tagged value whose payload is already decoded. */
int captp__tagged(const char *tag, size_t tag_len, vat_value payload,
                  vat_value *out, vat_captp_error *err);
/* An error from its name, message and other fields (a map with atom keys,
 * or null for none); see the mapping's note [8]. */
int captp__error(const char *name, size_t name_len, const char *message,
                 size_t message_len, vat_value extra, vat_value *out,
                 vat_captp_error *err);
/* A bigint from decimal digits with an optional sign: an int, or the
 * record bigint("<digits>") beyond int64. */
int captp__bigint(const char *digits, size_t len, vat_value *out,
                  vat_captp_error *err);
/* True when `s` is an optional '-' then decimal digits, no leading zero. */
bool captp__is_digits(const char *s, size_t len);
/* The atom `undefined`, `bigint`, `message`, `payload`, `name`, `@qclass`,
 * interned once. */
const vat_atom *captp__atom_undefined(void);
const vat_atom *captp__atom_bigint(void);
const vat_atom *captp__atom_message(void);
const vat_atom *captp__atom_payload(void);
const vat_atom *captp__atom_name(void);
const vat_atom *captp__atom_qclass(void);

/* Base64 (RFC 4648, padded) for bytes (base64.c). decode returns false on
 * malformed input; *out is GC atomic memory. */
char *captp__base64_encode(const void *data, size_t len, size_t *out_len);
bool captp__base64_decode(const char *s, size_t len, void **out,
                          size_t *out_len);

/* Parses a capdata or smallcaps body and decodes it (value.c). */
int captp__decode_body(const char *body, size_t len,
                       const char *const *slot_names, size_t n_slots,
                       const vat_captp_slots *table, vat_value *out,
                       vat_captp_error *err);
/* Decodes CapData, the object at node `cd` of an envelope {body, slots}
 * (value.c). On failure *in_value tells whether the shape {body, slots}
 * was sound and the body or a slot failed (vat_captp_msg's value_failed).
 * With `unwanted`, a sound shape naming no slots is left undecoded:
 * *skipped is set and *out is null. *format is the body's, once the
 * shape was sound. */
int captp__decode_capdata_object(const captp__json *j, uint32_t cd,
                                 const vat_captp_slots *table, bool unwanted,
                                 vat_value *out, bool *in_value, bool *skipped,
                                 vat_captp_format *format,
                                 vat_captp_error *err);

#endif
