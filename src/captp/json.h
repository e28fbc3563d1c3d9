/* A strict JSON parser (RFC 8259) for what comes off the wire: the
 * envelope and each CapData body. It accepts exactly what the decoder
 * accepted when jansson parsed for it (json_loadb with JSON_DECODE_ANY,
 * JSON_ALLOW_NUL, JSON_DECODE_INT_AS_REAL): any value at the top, white
 * space " \t\n\r" around tokens and nothing else after the value; strings
 * of valid UTF-8 with no raw control character, the escapes \" \\ \/ \b
 * \f \n \r \t \uXXXX, a \u escape of a surrogate only as a high one
 * followed by a low one (a lone one is refused), \u0000 allowed except in
 * an object's key; numbers spelt as the RFC spells them, each a double
 * (one too large for a double is refused); nesting up to 2048 values.
 *
 * The result is a tape, not a tree: every value is one node in a flat
 * array, in text order, a container followed by its contents (an object
 * by key, value, key, value...), with the index past its last content, so
 * that a walk skips a subtree in one step. Strings are unescaped into one
 * text buffer, each NUL-terminated (a string holding a NUL is read with
 * its length). Nothing is allocated for a small text: the first nodes and
 * bytes live in the parser's own struct (on the caller's stack). */
#ifndef VAT_CAPTP_JSON_H
#define VAT_CAPTP_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "vat/captp.h"

/* jansson's nesting limit, kept: deeper text is refused as JSON. */
#define CAPTP__JSON_MAX_DEPTH 2048

typedef enum {
  CAPTP__J_NULL,
  CAPTP__J_FALSE,
  CAPTP__J_TRUE,
  CAPTP__J_NUMBER,
  CAPTP__J_STRING,
  CAPTP__J_ARRAY,
  CAPTP__J_OBJECT,
} captp__jtype;

typedef struct captp__jnode {
  uint8_t type; /* captp__jtype */
  uint32_t len; /* string: bytes; array: items; object: members, repeated
                   names included */
  uint32_t end; /* the index past this value's nodes */
  union {
    double num;
    const char *str; /* in the text buffer, NUL-terminated */
  } as;
} captp__jnode;

enum { CAPTP__JSON_NODES = 64, CAPTP__JSON_TEXT = 1024 };

typedef struct captp__json {
  captp__jnode *nodes; /* nodes[0] is the top value */
  size_t n, cap;
  char *text;
  size_t text_len, text_cap;
  captp__jnode node_store[CAPTP__JSON_NODES];
  char text_store[CAPTP__JSON_TEXT];
} captp__json;

/* Parses s[0..len). VAT_OK, or VAT_EDECODE with a JSON reason whose offset
 * is `base` plus the byte where the text went wrong and whose detail
 * starts with `prefix`, or VAT_ENOMEM. Call captp__json_free after either. */
int captp__json_parse(captp__json *j, const char *s, size_t len, size_t base,
                      const char *prefix, vat_captp_error *err);
void captp__json_free(captp__json *j);

static inline const captp__jnode *captp__jat(const captp__json *j,
                                             uint32_t i) {
  return &j->nodes[i];
}

/* The value of the member named key[0..len) of object `obj` (the last
 * when the name repeats, as jansson kept it), or 0 for none (0 is the top
 * node, never a member). */
uint32_t captp__json_get(const captp__json *j, uint32_t obj, const char *key,
                         size_t len);
#define CAPTP__JSON_GET(j, obj, lit) captp__json_get(j, obj, lit, sizeof lit - 1)

/* An object's members as jansson kept them: each name once, where it was
 * first, with the value it had last. */
typedef struct captp__jmember {
  uint32_t key, val;
} captp__jmember;
enum { CAPTP__JSON_INLINE_MEMBERS = 16 };
typedef struct captp__jmembers {
  size_t n;
  captp__jmember *m;
  captp__jmember store[CAPTP__JSON_INLINE_MEMBERS];
} captp__jmembers;

/* False when out of memory. Call captp__json_members_free after. */
bool captp__json_members(const captp__json *j, uint32_t obj,
                         captp__jmembers *out);
void captp__json_members_free(captp__jmembers *m);

#endif
