/* libvat — CapTP's wire format: values as CapData, messages, netstrings.
 *
 * CapTP as Endo (`@endo/captp` 4.5) speaks it: each message is a JSON
 * object in a netstring frame (`<decimal length>:<JSON>,`), and each value
 * inside one travels as CapData, `{"body": "<JSON text>", "slots": [...]}`,
 * where refs and promises are named by slot strings ("o+3", "p-1"). This
 * header covers the format only: values to and from CapData, messages to and
 * from JSON, frames in and out. No I/O happens here; the slot table a caller
 * supplies (the connection) decides which slot names which ref or promise.
 *
 * Installed, with libvat-net, the library that defines its functions,
 * only when libvat was built with jansson (meson feature option `captp`;
 * README, "CapTP"): link with `pkg-config --cflags --libs libvat-net`. It
 * is not included by <vat.h>. Every function below may be called from any
 * registered thread, inside or outside a turn; none keeps state between
 * calls except a netstring reader, which belongs to one thread at a time.
 *
 * == The mapping ==
 *
 * Encoding writes Endo's "capdata" body format (what Endo sends), or on
 * request "smallcaps" (vat_captp_format; a connection writes smallcaps).
 * Decoding reads both (a smallcaps body starts with '#').
 *
 *   libvat value                 capdata (JSON in the body)
 *   ---------------------------  ------------------------------------------
 *   null                         null
 *   bool                         true / false
 *   int (int64)                  {"@qclass":"bigint","digits":"-123"}   [1]
 *   float, finite                a JSON number; -0 is written 0         [2]
 *   float NaN, +inf, -inf        {"@qclass":"NaN"}, {"@qclass":"Infinity"},
 *                                {"@qclass":"-Infinity"}
 *   atom `undefined`             {"@qclass":"undefined"}                [3]
 *   other atom                   {"@qclass":"symbol","name":"<name>"}   [3]
 *   string (valid UTF-8)         a JSON string; invalid UTF-8 is an
 *                                encoding error (VAT_CAPTP_ERR_UTF8)    [4]
 *   bytes                        {"@qclass":"tagged","tag":"vat:bytes",
 *                                 "payload":"<base64>"}                 [5]
 *   list                         a JSON array
 *   map, every key an atom       a JSON object (a copyRecord), keys sorted
 *                                by their UTF-8 bytes; a key "@qclass" is
 *                                written in Endo's "hilbert" form       [6]
 *   map, some key not an atom    {"@qclass":"tagged","tag":"copyMap",
 *                                 "payload":{"keys":[...],"values":[...]}}
 *                                entries in descending vat_compare order [6]
 *   record label(f1, ..., fn)    {"@qclass":"tagged","tag":"<label>",
 *                                 "payload":[f1, ..., fn]}              [7]
 *   record bigint("<digits>")    {"@qclass":"bigint","digits":"<digits>"}
 *                                (how integers beyond int64 come in)    [1]
 *   error code(payload)          {"@qclass":"error","message":...,
 *                                 "name":"<code>", ...}                 [8]
 *   ref                          {"@qclass":"slot","iface":"...","index":i}
 *   promise                      {"@qclass":"slot","index":i}          [9]
 *
 *   capdata form received        libvat value, or the decoding error
 *   ---------------------------  ------------------------------------------
 *   null, true, false            null, bool
 *   a JSON number                float (JS numbers are doubles)          [2]
 *   a JSON string                string (the UTF-8 is checked; a lone
 *                                surrogate escape is VAT_CAPTP_ERR_JSON)
 *   array                        list
 *   object without "@qclass"     map with atom keys                      [6]
 *   undefined                    the atom `undefined`                    [3]
 *   NaN, Infinity, -Infinity     float
 *   bigint                       int when it fits int64, else the record
 *                                bigint("<digits>"); bad digits:
 *                                VAT_CAPTP_ERR_BIGINT                    [1]
 *   symbol                       atom (`@@asyncIterator` included)
 *   tagged copyMap               map; a payload that is not {keys, values}
 *                                of equal lengths: VAT_CAPTP_ERR_TAGGED
 *   tagged vat:bytes             bytes; a payload that is not base64:
 *                                VAT_CAPTP_ERR_TAGGED                    [5]
 *   tagged, payload an array     record tag(items...) (copySet, copyBag,
 *                                and libvat records)                     [7]
 *   tagged, other payload        record tag(payload)                     [7]
 *   error                        error (name as the code)                [8]
 *   slot                         the slot table's value: a ref for an "o"
 *                                slot, a promise for a "p" slot; a bad
 *                                index, name or kind: VAT_CAPTP_ERR_SLOT
 *   hilbert                      map with the atom key "@qclass"         [6]
 *   any other @qclass ("ibid",   VAT_CAPTP_ERR_QCLASS
 *   unknown ones) or a bad field
 *
 * Smallcaps carries the same values: "#undefined", "#NaN", "#Infinity",
 * "#-Infinity"; "+N"/"-N" bigints (an int is "+1", "-7"); "%name" symbols;
 * "$i.iface" remotables; "&i" promises; "!..." escaped strings (keys too:
 * any that starts with a character from '!' to '-'); {"#tag","payload"}
 * tagged (bytes, copyMap, records as above); {"#error": message, "name",
 * ...} errors; a record's own "@qclass" key is a plain key (no hilbert
 * form). A value encoded in either format decodes to the same value.
 * Received, any other string that starts with a character from '!' to
 * '-', or a key starting with '#', is VAT_CAPTP_ERR_SMALLCAPS.
 *
 * The hard cases, decided:
 *  [1] Integers. A JS number is a double and a JS bigint is unbounded, so
 *      libvat's int64 travels as a bigint (exact both ways, and what Endo
 *      code uses for amounts) and its double as a number. A C program that
 *      calls a JS method wanting a number passes a float. A bigint beyond
 *      int64 arrives as the record bigint("<decimal digits>"), and that
 *      record is written back as the same bigint, so nothing is lost when a
 *      C vat passes it on.
 *  [2] A JSON number, integral or not, decodes to a float: 42 and 42.0 are
 *      one JS value. Integral floats below 2^63 are written without a
 *      fraction, as JS writes them. Capdata cannot carry -0 (Endo writes 0),
 *      so -0.0 is written 0. Finite floats are written with 17 significant
 *      digits, which reads back to the same double.
 *  [3] Endo's passable symbols are registered names, as atoms are; atoms
 *      travel as symbols. JS `undefined` has no libvat type, so it is the
 *      atom `undefined` both ways (a JS symbol named "undefined" therefore
 *      comes back as `undefined`). Decoding interns symbol names, record
 *      keys, tags and error names as atoms, weakly
 *      (vat_atom_intern_weak_n): a name the program interned decodes to
 *      the program's atom, and a new one lives only while a decoded value
 *      holds it, so names a peer invents do not accumulate.
 *  [4] JS strings are UTF-16; a libvat string that is not valid UTF-8 has
 *      no faithful JS form and is refused rather than mangled.
 *  [5] Endo's capdata cannot carry byte arrays ("not yet implemented"), so
 *      bytes travel as a tagged value Endo passes through unchanged.
 *  [6] JS copyRecords have string keys and Endo's code reads them as named
 *      fields, so they are maps keyed by atoms (one pointer comparison per
 *      lookup with a pre-interned name). A map with any other key is a
 *      copyMap. The empty map is written {} (an empty copyMap arrives as an
 *      empty map and leaves as {}). Key order: Endo sorts record keys by
 *      UTF-16 units, this encoder by UTF-8 bytes; they differ only between
 *      characters above U+FFFF and those from U+E000 to U+FFFF.
 *  [7] A record is a tagged value whose payload is the array of its fields,
 *      so every record round-trips. A tagged value whose payload is not an
 *      array (an Endo pattern such as M.any()) decodes to a record with one
 *      field, which is written back with an array payload: the only
 *      decoded form that does not round-trip.
 *  [8] Errors: the code is the error's name ("Error", "TypeError", or any
 *      atom). The payload maps to the other fields: null is message ""; a
 *      string is the message; a map with atom keys holding a string
 *      "message" and neither "name" nor "@qclass" is the field set itself
 *      (how an error with "errorId", "cause" or "errors" arrives); any other
 *      payload p is message "" plus a field "payload": p (Endo keeps it as
 *      a property). Decoding reverses this, so an error whose payload is the
 *      empty string comes back with a null payload.
 *  [9] Slots: the slot table names each distinct ref or promise in a value
 *      once (the same ref twice is one slot); a ref's iface is what the
 *      table gives ("Alleged: X"), optional on receipt.
 *
 * Message fields (vat_captp_msg), JSON names by type:
 *   BOOTSTRAP   id = questionID; takes_send_only = acceptsSendOnly   [10]
 *   CALL        id = questionID, target, value = method ([name, args]);
 *               id NULL: no questionID, a send-only call              [10]
 *   RETURN      id = answerID, value = result, or exception if is_reject
 *   RESOLVE     id = promiseID, value = res, or rej if is_reject
 *   DROP        id = slotID, dec_refs = decRefs
 *   DISCONNECT  reason_json = reason (raw JSON, not CapData, as Endo sends)
 *   any other   type UNKNOWN, type_name set: the caller ignores it
 * `epoch` is kept when present (has_epoch) and written back the same way.
 * [10] Send-only calls, an extension between libvat peers: a CALL without
 *      a questionID is one nobody answers (a one-way message), so no
 *      CTP_RETURN comes back for it. Endo would answer it all the same,
 *      with a RETURN that has no answerID, so a side sends one only to a
 *      peer whose BOOTSTRAP said "acceptsSendOnly":true (Endo ignores the
 *      field, and writes none).
 */
#ifndef VAT_CAPTP_H
#define VAT_CAPTP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "vat/error.h"
#include "vat/value.h"

#ifdef __cplusplus
extern "C" {
#endif

/* --- Errors ------------------------------------------------------------ */
/* Functions here return VAT_OK or a VAT_E* code (vat/error.h): VAT_EFRAME
 * for a bad frame, VAT_EFRAMESIZE for one over the limit, VAT_EDECODE for a
 * message or value that does not decode, VAT_EENCODE for a value that has
 * no CapData form, VAT_EINVAL for bad arguments, VAT_ENOMEM. The optional
 * vat_captp_error says precisely what and where. */

#define VAT_CAPTP_ERR_MAP(X)                                                   \
  X(NONE, "no error")                                                          \
  X(LENGTH_CHAR, "netstring length: a character is neither a digit nor ':'")   \
  X(EMPTY_LENGTH, "netstring length: no digit before ':'")                     \
  X(LEADING_ZERO, "netstring length: leading zero")                            \
  X(LENGTH_DIGITS, "netstring length: more than 9 digits")                     \
  X(MISSING_COMMA, "netstring: the payload is not followed by ','")            \
  X(TOO_LARGE, "netstring: frame larger than the reader's maximum")            \
  X(JSON, "text is not valid JSON (or not valid UTF-8)")                       \
  X(MESSAGE, "message is not an object with a string \"type\"")                \
  X(FIELD, "message field missing or of the wrong type")                       \
  X(CAPDATA, "CapData is not {\"body\": string, \"slots\": [string...]}")      \
  X(QCLASS, "unknown @qclass or malformed @qclass object")                     \
  X(SMALLCAPS, "malformed smallcaps encoding")                                 \
  X(BIGINT, "bigint digits are malformed")                                     \
  X(TAGGED, "tagged value with a malformed payload")                           \
  X(ERROR, "error without a string name and message")                          \
  X(SLOT, "slot index out of range, bad slot name, or wrong slot kind")        \
  X(IMPORT, "the slot table refused a slot (or none was given)")               \
  X(EXPORT, "the slot table refused a ref or promise (or none was given)")     \
  X(DEPTH, "value nested deeper than VAT_CAPTP_MAX_DEPTH")                     \
  X(UTF8, "string is not valid UTF-8")                                         \
  X(TYPE, "value of a type this form cannot hold")                             \
  X(NOMEM, "out of memory")

/** What exactly went wrong, finer than the VAT_E* code. */
typedef enum vat_captp_err {
#define VAT__CAPTP_ERR_ENUM(name, text) VAT_CAPTP_ERR_##name,
  VAT_CAPTP_ERR_MAP(VAT__CAPTP_ERR_ENUM)
#undef VAT__CAPTP_ERR_ENUM
} vat_captp_err;

/** Filled in by a failing call (cleared to NONE by a succeeding one). */
typedef struct vat_captp_error {
  vat_captp_err code;
  size_t offset;    /* frames: byte offset in the stream; JSON: in the text */
  char detail[160]; /* more: the parser's message, the bad @qclass, ... */
} vat_captp_error;

/** "VAT_CAPTP_ERR_LEADING_ZERO"; "VAT_CAPTP_ERR_UNKNOWN" otherwise. Static. */
const char *vat_captp_err_name(vat_captp_err code);
/** The text from VAT_CAPTP_ERR_MAP; "unknown error" otherwise. Static. */
const char *vat_captp_err_text(vat_captp_err code);

/* --- Slot tables --------------------------------------------------------- */

/** Longest slot name, NUL included ("o+" and up to 29 digits). */
#define VAT_CAPTP_SLOT_MAX 32
/** Deepest nesting of lists, maps, records and errors in one value. */
#define VAT_CAPTP_MAX_DEPTH 128

struct vat_captp_msg;

/** How refs and promises become slot names and back: the connection's
 *  import and export tables. Either function may be NULL, and then a value
 *  with a ref or promise fails to encode (VAT_CAPTP_ERR_EXPORT) or decode
 *  (VAT_CAPTP_ERR_IMPORT). Called on the encoding or decoding thread. */
typedef struct vat_captp_slots {
  void *ctx;
  /** Names `v` (a ref or a promise) as a slot: writes a NUL-terminated name
   *  ("o+1", "p+2", "o-3") to `slot` and sets *iface to an interface name
   *  for a ref ("Alleged: Counter") that lives until the encoding returns,
   *  or leaves it NULL. Called once per distinct ref or promise per value.
   *  Returns VAT_OK, or a negative code that ends the encoding. */
  int (*export_slot)(void *ctx, vat_value v, char slot[VAT_CAPTP_SLOT_MAX],
                     const char **iface);
  /** The value for `slot` (syntax checked: [op][+-]digits), `iface` the
   *  received interface name or NULL; both strings live only during the
   *  call (copy what you keep). Must store a ref for an "o" slot and a
   *  promise for a "p" slot. Called once per distinct slot index a value
   *  uses (a slot no part of the value uses is not imported). Returns
   *  VAT_OK, or a negative code that ends the decoding. */
  int (*import_slot)(void *ctx, const char *slot, const char *iface,
                     vat_value *out);
  /** May be NULL: every value is decoded. Asked by vat_captp_decode once
   *  a CALL's, RETURN's or RESOLVE's envelope has decoded and before its
   *  value, with `m`'s type, id, target and is_reject set: false when
   *  nobody will read the value (the answer to a one-way message, the
   *  settlement of a promise already forgotten). Such a value naming no
   *  slots is then not decoded (nor is its body checked): `value` stays
   *  null and `value_skipped` is set. One naming slots is decoded all the
   *  same, so that the refs it carries are imported, and in time dropped:
   *  the peer keeps an export until told. */
  bool (*wants_value)(void *ctx, const struct vat_captp_msg *m);
} vat_captp_slots;

/* --- Values <-> CapData ------------------------------------------------ */

/** The body format a value is written in; both are always read. */
typedef enum vat_captp_format {
  /** {"@qclass": ...} objects for special values: what Endo's CapTP writes
   *  by default. */
  VAT_CAPTP_CAPDATA = 0,
  /** '#' then JSON, special values as tagged strings: shorter (a small
   *  call's body is a third of its capdata) and quicker to read. Endo reads
   *  it (@endo/marshal 0.8 and later), and writes it when asked to. */
  VAT_CAPTP_SMALLCAPS = 1,
} vat_captp_format;

/** CapData as text: the body (JSON, NUL-terminated) and the slot names. The
 *  memory is the collector's, pointer-free; it lives while referenced. */
typedef struct vat_capdata {
  const char *body;
  size_t body_len;
  const char *const *slots;
  size_t n_slots;
} vat_capdata;

/** Encodes `v` as capdata. `slots` may be NULL for a value without refs or
 *  promises; `err` may be NULL. Errors: VAT_EENCODE (err says which value),
 *  the export function's code, VAT_ENOMEM, VAT_EINVAL (out NULL). */
int vat_capdata_encode(vat_value v, const vat_captp_slots *slots,
                       vat_capdata *out, vat_captp_error *err);

/** Like vat_capdata_encode, in `format`; a format not in vat_captp_format
 *  is VAT_EINVAL. */
int vat_capdata_encode_as(vat_value v, vat_captp_format format,
                          const vat_captp_slots *slots, vat_capdata *out,
                          vat_captp_error *err);

/** Decodes a capdata or smallcaps body with its slot names into *out.
 *  Errors: VAT_EDECODE, the import function's code, VAT_ENOMEM, VAT_EINVAL
 *  (body or out NULL, or slot names NULL with n_slots > 0). */
int vat_capdata_decode(const char *body, size_t body_len,
                       const char *const *slot_names, size_t n_slots,
                       const vat_captp_slots *slots, vat_value *out,
                       vat_captp_error *err);

/* --- Messages ---------------------------------------------------------- */

typedef enum vat_captp_type {
  VAT_CAPTP_UNKNOWN = 0, /* a type this side does not know: ignore it */
  VAT_CAPTP_BOOTSTRAP,
  VAT_CAPTP_CALL,
  VAT_CAPTP_RETURN,
  VAT_CAPTP_RESOLVE,
  VAT_CAPTP_DROP,
  VAT_CAPTP_DISCONNECT,
} vat_captp_type;

/** One CapTP message; which fields count depends on the type (see the
 *  table at the top). Strings are NUL-terminated; decoded ones, and the
 *  value, are the collector's: keep a decoded message where the collector
 *  looks (the stack, GC memory), as for any vat_value. */
typedef struct vat_captp_msg {
  vat_captp_type type;
  const char *type_name; /* decoded UNKNOWN messages: the "type" string */
  const char *id;        /* questionID (NULL: a send-only CALL), answerID,
                            promiseID or slotID */
  const char *target;    /* CALL: the target slot or question */
  vat_value value;       /* CALL method, RETURN or RESOLVE outcome */
  bool is_reject;        /* RETURN: exception; RESOLVE: rej */
  int64_t dec_refs;      /* DROP */
  bool has_epoch;
  int64_t epoch;
  const char *reason_json; /* DISCONNECT: raw JSON text, NULL to omit */
  bool value_failed;       /* decoding failed in the value only: see below */
  bool value_skipped;      /* left undecoded: vat_captp_slots.wants_value */
  /** Encoding: the format the value is written in (one not in
   *  vat_captp_format is VAT_EINVAL). Decoding: the one its body was in. */
  vat_captp_format format;
  /** BOOTSTRAP: the sender takes send-only CALLs (note [10]). */
  bool takes_send_only;
} vat_captp_msg;

/** The JSON name of a type ("CTP_CALL"); NULL for UNKNOWN. Static. */
const char *vat_captp_type_name(vat_captp_type type);

/** Decodes one message (the JSON inside a frame). Unknown types decode to
 *  VAT_CAPTP_UNKNOWN with VAT_OK; fields other types do not use are
 *  ignored. Errors: VAT_EDECODE, the import function's code, VAT_ENOMEM,
 *  VAT_EINVAL (json or out NULL). When the envelope decoded (the JSON, the
 *  type, the id and target fields, and the value's {body, slots} shape)
 *  and only the value failed, in its body or one of its slots, *out keeps
 *  the envelope's fields with `value_failed` set (the value is null): the
 *  caller may answer that one message (a CALL with an exception) rather
 *  than end the connection. Otherwise value_failed is false. */
int vat_captp_decode(const char *json, size_t len, const vat_captp_slots *slots,
                     vat_captp_msg *out, vat_captp_error *err);

/** Encodes `msg` as JSON text (*out NUL-terminated, the collector's
 *  memory, pointer-free). Errors: VAT_EENCODE, the export function's code,
 *  VAT_ENOMEM, VAT_EINVAL (a NULL or missing field, a type of UNKNOWN,
 *  reason_json that is not JSON, an unknown format). */
int vat_captp_encode(const vat_captp_msg *msg, const vat_captp_slots *slots,
                     char **out, size_t *out_len, vat_captp_error *err);

/** Like vat_captp_encode, framed as a netstring: ready to write. */
int vat_captp_encode_frame(const vat_captp_msg *msg,
                           const vat_captp_slots *slots, char **out,
                           size_t *out_len, vat_captp_error *err);

/** A buffer frames are encoded into and reused from, frame after frame
 *  (vat_captp_encode_frame_into): malloc memory, not the collector's, so
 *  a stream of frames allocates nothing once it is large enough. Start
 *  it zeroed ({0}); free it with vat_captp_frame_buf_free. One thread at
 *  a time. */
typedef struct vat_captp_frame_buf {
  char *data;
  size_t cap;
} vat_captp_frame_buf;

/** Like vat_captp_encode_frame, into `buf`, grown as needed: *out points
 *  into it (NUL-terminated), valid until the next call with `buf` or its
 *  free. The same errors, and VAT_EINVAL for a NULL buf, out or out_len;
 *  on any error `buf` stays usable (and is still the caller's to free). */
int vat_captp_encode_frame_into(vat_captp_frame_buf *buf,
                                const vat_captp_msg *msg,
                                const vat_captp_slots *slots, char **out,
                                size_t *out_len, vat_captp_error *err);

/** Frees what `buf` holds and zeroes it (NULL: nothing). */
void vat_captp_frame_buf_free(vat_captp_frame_buf *buf);

/* --- Netstrings -------------------------------------------------------- */

/** Endo's reader accepts at most 9 length digits. */
#define VAT_NETSTRING_MAX_FRAME 999999999u
/** The reader's maximum frame when created with 0. */
#define VAT_NETSTRING_DEFAULT_MAX (1u << 20)

typedef struct vat_netstring_reader vat_netstring_reader;

/** A reader for frames of at most `max_frame` payload bytes (0: the
 *  default; larger than VAT_NETSTRING_MAX_FRAME: that). Returns NULL when
 *  memory is exhausted. Its buffer is malloc'd, grown as frames need. */
vat_netstring_reader *vat_netstring_reader_new(size_t max_frame);
/** Frees the reader (NULL is fine). */
void vat_netstring_reader_free(vat_netstring_reader *r);

/** Feeds up to `len` bytes, split anywhere. Stops after the first complete
 *  frame: returns 1 with *frame and *frame_len set (valid until the next
 *  call on this reader, or while `data` lives), and *used the bytes of
 *  `data` consumed; call again with the rest. Returns 0 when all `len`
 *  bytes were consumed without completing a frame. A bad frame returns
 *  VAT_EFRAME or VAT_EFRAMESIZE (err says which byte and why) and the
 *  reader stays failed: the connection must end. VAT_ENOMEM when the
 *  buffer cannot grow; VAT_EINVAL for NULL arguments. */
int vat_netstring_read(vat_netstring_reader *r, const void *data, size_t len,
                       size_t *used, const char **frame, size_t *frame_len,
                       vat_captp_error *err);

/** Writes the netstring header for a payload of `len` bytes ("123:") into
 *  `buf` (NUL-terminated) and returns its length; 0 when len is over
 *  VAT_NETSTRING_MAX_FRAME. The frame is the header, the payload, ','. */
size_t vat_netstring_header(size_t len, char buf[12]);

#ifdef __cplusplus
}
#endif

#endif
