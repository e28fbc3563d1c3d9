/* The encoder's text writer (out.h): a buffer that grows by doubling,
 * strings escaped in one pass while their UTF-8 is checked, and numbers
 * spelt as jansson spelt them. */
#include <gc/gc.h>
#include <stdio.h>
#include <stdlib.h>

#include "captp/out.h"

bool captp__out_init(captp__out *o, size_t reserve) {
  /* A small call's frame fits the first buffer. */
  size_t cap = 256 + reserve;
  *o = (captp__out){.buf = GC_MALLOC_ATOMIC(cap),
                    .start = reserve,
                    .len = reserve,
                    .cap = cap};
  return o->buf != NULL;
}

bool captp__out_init_heap(captp__out *o, size_t reserve, char *buf,
                          size_t cap) {
  *o = (captp__out){.buf = buf, .start = reserve, .cap = cap, .heap = true};
  if (!captp__out_room(o, reserve + 256)) /* as captp__out_init's */
    return false;
  o->len = reserve;
  return true;
}

bool captp__out_grow(captp__out *o, size_t n) {
  size_t cap = o->cap ? o->cap * 2 : 256;
  while (cap - o->len < n + 2) {
    if (cap > SIZE_MAX / 2)
      return false;
    cap *= 2;
  }
  char *grown = o->heap ? realloc(o->buf, cap) : GC_REALLOC(o->buf, cap);
  if (grown == NULL)
    return false;
  o->buf = grown;
  o->cap = cap;
  return true;
}

/* Bytes a JSON string holds as they are: printable ASCII but '"' and
 * '\\' (jansson escapes no others, not even DEL or '/'). */
static inline bool plain(unsigned char c) {
  return c >= 0x20 && c < 0x80 && c != '"' && c != '\\';
}

/* The length of the valid UTF-8 sequence at p (its first byte >= 0x80),
 * or 0: what jansson's check refuses (overlong forms, surrogates, beyond
 * U+10FFFF, a stray or missing continuation byte) this refuses too. */
static size_t utf8_sequence(const unsigned char *p, const unsigned char *end) {
  unsigned char c = p[0];
  size_t n;
  unsigned char lo = 0x80, hi = 0xbf; /* the second byte's range */
  if (c < 0xc2)
    return 0;
  if (c < 0xe0) {
    n = 2;
  } else if (c < 0xf0) {
    n = 3;
    if (c == 0xe0)
      lo = 0xa0; /* overlong */
    else if (c == 0xed)
      hi = 0x9f; /* surrogates */
  } else if (c < 0xf5) {
    n = 4;
    if (c == 0xf0)
      lo = 0x90; /* overlong */
    else if (c == 0xf4)
      hi = 0x8f; /* beyond U+10FFFF */
  } else {
    return 0;
  }
  if ((size_t)(end - p) < n || p[1] < lo || p[1] > hi)
    return 0;
  for (size_t i = 2; i < n; i++)
    if (p[i] < 0x80 || p[i] > 0xbf)
      return 0;
  return n;
}

/* The escape for byte c (not plain, below 0x80) at w; the end. */
static char *escape(char *w, unsigned char c, bool esc) {
  static const char hex[] = "0123456789ABCDEF";
  char short_form = 0;
  switch (c) {
  case '"':
    short_form = '"';
    break;
  case '\\':
    short_form = '\\';
    break;
  case '\b':
    short_form = 'b';
    break;
  case '\f':
    short_form = 'f';
    break;
  case '\n':
    short_form = 'n';
    break;
  case '\r':
    short_form = 'r';
    break;
  case '\t':
    short_form = 't';
    break;
  default:
    break;
  }
  /* The escape's own backslash, escaped again inside an enclosing string. */
  *w++ = '\\';
  if (esc)
    *w++ = '\\';
  if (short_form == '"' || short_form == '\\') {
    if (esc)
      *w++ = '\\';
    *w++ = short_form;
    return w;
  }
  if (short_form != 0) {
    *w++ = short_form;
    return w;
  }
  memcpy(w, "u00", 3);
  w[3] = hex[c >> 4];
  w[4] = hex[c & 15];
  return w + 5;
}

captp__out_rc captp__out_string_after(captp__out *o, const char *prefix,
                                      size_t prefix_len, const char *s,
                                      size_t len, bool esc) {
  /* Worst cases: 7 bytes out for one in (\\u00XX), a quote 2 (\"). */
  enum { CHUNK = 1024, WORST = 7, QUOTE = 2, SEQUENCE_TAIL = 3 };
  size_t mark = o->len;
  const unsigned char *p = (const unsigned char *)s, *end = p + len;
  if (!captp__out_room(o, QUOTE + prefix_len))
    return CAPTP__OUT_NOMEM;
  char *w = o->buf + o->len;
  if (esc)
    *w++ = '\\';
  *w++ = '"';
  if (prefix_len > 0) /* NULL with 0 is no argument for memcpy */
    memcpy(w, prefix, prefix_len);
  w += prefix_len;
  o->len = (size_t)(w - o->buf);
  for (;;) {
    size_t chunk = (size_t)(end - p) < CHUNK ? (size_t)(end - p) : CHUNK;
    /* A sequence that starts in this chunk may end up to 3 bytes past it. */
    if (!captp__out_room(o, WORST * chunk + SEQUENCE_TAIL + QUOTE)) {
      o->len = mark;
      return CAPTP__OUT_NOMEM;
    }
    w = o->buf + o->len;
    const unsigned char *stop = p + chunk;
    while (p < stop) {
      unsigned char c = *p;
      if (plain(c)) {
        *w++ = (char)c;
        p++;
      } else if (c < 0x80) {
        w = escape(w, c, esc);
        p++;
      } else {
        size_t n = utf8_sequence(p, end);
        if (n == 0) {
          o->len = mark;
          return CAPTP__OUT_UTF8;
        }
        memcpy(w, p, n);
        w += n;
        p += n;
      }
    }
    o->len = (size_t)(w - o->buf);
    if (p >= end)
      break;
  }
  if (esc)
    *w++ = '\\';
  *w++ = '"';
  o->len = (size_t)(w - o->buf);
  return CAPTP__OUT_OK;
}

bool captp__out_int(captp__out *o, int64_t i) {
  char digits[20];
  size_t n = 0;
  /* Negated as unsigned: INT64_MIN has no positive int64. */
  uint64_t u = i < 0 ? 0 - (uint64_t)i : (uint64_t)i;
  do {
    digits[n++] = (char)('0' + u % 10);
    u /= 10;
  } while (u != 0);
  if (!captp__out_room(o, n + 1))
    return false;
  char *w = o->buf + o->len;
  if (i < 0)
    *w++ = '-';
  while (n > 0)
    *w++ = digits[--n];
  o->len = (size_t)(w - o->buf);
  return true;
}

bool captp__out_real(captp__out *o, double f) {
  char text[40];
  size_t len = captp__real17_fixed(f, text);
  if (len == 0) {
    int n = snprintf(text, sizeof text, "%.17g", f);
    if (n < 0 || (size_t)n >= sizeof text - 3)
      return false;
    len = (size_t)n;
  }
  bool point = false, exponent = false;
  for (size_t i = 0; i < len; i++) {
    char c = text[i];
    if (c == 'e') {
      exponent = true;
    } else if ((c < '0' || c > '9') && c != '-' && c != '+') {
      text[i] = '.'; /* the locale's decimal point, as jansson reads it */
      point = true;
    }
  }
  /* So that it reads back as a real, not an integer. */
  if (!point && !exponent) {
    memcpy(text + len, ".0", 2);
    len += 2;
  }
  /* No '+' and no leading zeros in the exponent: "1e300", "1e-5". */
  char *start = memchr(text, 'e', len);
  if (start != NULL) {
    start++;
    char *digits = start + 1;
    if (*start == '-')
      start++;
    while (*digits == '0')
      digits++;
    if (digits != start) {
      memmove(start, digits, len - (size_t)(digits - text));
      len -= (size_t)(digits - start);
    }
  }
  return captp__out_put(o, text, len);
}
