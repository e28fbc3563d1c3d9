/* JSON text written straight into one growing buffer: the encoder's
 * output (out.c). No tree is built and nothing is copied twice: a CapData
 * body meant for an envelope is written already escaped as the string it
 * becomes there (`esc`), so it is never escaped after the fact. What is
 * written is exactly what jansson's compact dump wrote before (the same
 * escapes, the same number spellings), so frames stay byte for byte the
 * same. */
#ifndef VAT_CAPTP_OUT_H
#define VAT_CAPTP_OUT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* The text is buf[start..len); `start` bytes are left free in front (a
 * netstring header goes there, so framing copies nothing) and two more are
 * always free after the text (a frame's ',' and a NUL). The buffer is the
 * collector's atomic memory, or (`heap`) malloc memory the caller keeps
 * and reuses. */
typedef struct captp__out {
  char *buf;
  size_t start, len, cap;
  bool heap;
} captp__out;

/* False when out of memory. */
bool captp__out_init(captp__out *o, size_t reserve);
/* The same in `buf` (malloc memory of `cap` bytes, NULL and 0 at first),
 * grown with realloc: the caller takes it back from o->buf, o->cap. */
bool captp__out_init_heap(captp__out *o, size_t reserve, char *buf, size_t cap);
/* Room for n more bytes (and the two spare); false when out of memory. */
bool captp__out_grow(captp__out *o, size_t n);

static inline bool captp__out_room(captp__out *o, size_t n) {
  return o->cap - o->len >= n + 2 || captp__out_grow(o, n);
}

static inline bool captp__out_put(captp__out *o, const char *s, size_t n) {
  if (!captp__out_room(o, n))
    return false;
  memcpy(o->buf + o->len, s, n);
  o->len += n;
  return true;
}

/* Where a string written by captp__out_string went wrong. */
typedef enum {
  CAPTP__OUT_OK,
  CAPTP__OUT_UTF8, /* not valid UTF-8: nothing written */
  CAPTP__OUT_NOMEM,
} captp__out_rc;

/* s[0..len) as a JSON string, quotes included, escaped as jansson's
 * compact dump escapes (", \, \b \f \n \r \t, other controls as \u00XX,
 * everything else as is); `esc`: that text escaped once more, as the
 * inside of an enclosing JSON string. NUL is allowed. The _after form
 * writes `prefix` (plain ASCII: a smallcaps form's "+", "$3.") inside the
 * quotes before s. */
captp__out_rc captp__out_string_after(captp__out *o, const char *prefix,
                                      size_t prefix_len, const char *s,
                                      size_t len, bool esc);
static inline captp__out_rc captp__out_string(captp__out *o, const char *s,
                                              size_t len, bool esc) {
  return captp__out_string_after(o, NULL, 0, s, len, esc);
}
/* An integer, as "%lld" writes it. */
bool captp__out_int(captp__out *o, int64_t i);
/* A finite double as jansson writes a real with precision 17: "%.17g",
 * ".0" added when that has neither '.' nor 'e', the exponent's '+' and
 * leading zeros dropped. */
bool captp__out_real(captp__out *o, double f);
/* "%.17g" of f into text, NUL-terminated, when 1e-3 <= |f| < 1e17 and it
 * is in fixed notation: its length; otherwise 0 (real.c). */
size_t captp__real17_fixed(double f, char text[40]);

#endif
