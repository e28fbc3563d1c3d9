/* The strict JSON parser of json.h: one pass over the text, recursive
 * descent (bounded by CAPTP__JSON_MAX_DEPTH, as jansson's was), strings
 * unescaped as they are read, numbers converted exactly (Clinger's fast
 * path, else strtod in the C locale). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* strtod_l */
#endif
#include <locale.h>
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "captp/internal.h"
#include "captp/json.h"

typedef struct parser {
  const unsigned char *start, *p, *end;
  captp__json *j;
  size_t base;
  const char *prefix;
  vat_captp_error *err;
  bool wrote_nul; /* a \u0000 was unescaped: object keys refuse it */
} parser;

/* A syntax error at the byte p points at. */
static int bad(parser *ps, const char *what) {
  size_t at = (size_t)(ps->p - ps->start);
  return captp__fail(ps->err, VAT_EDECODE, VAT_CAPTP_ERR_JSON, ps->base + at,
                     "%s%s at byte %zu", ps->prefix, what, at);
}

static int nomem(parser *ps) {
  return captp__fail(ps->err, VAT_ENOMEM, VAT_CAPTP_ERR_NOMEM, 0, "%sparse",
                     ps->prefix);
}

static bool grow_nodes(captp__json *j) {
  size_t cap = j->cap * 2;
  captp__jnode *grown;
  if (j->nodes == j->node_store) {
    grown = malloc(cap * sizeof *grown);
    if (grown != NULL)
      memcpy(grown, j->nodes, j->n * sizeof *grown);
  } else {
    grown = realloc(j->nodes, cap * sizeof *grown);
  }
  if (grown == NULL)
    return false;
  j->nodes = grown;
  j->cap = cap;
  return true;
}

/* A new node; its index, or UINT32_MAX when out of memory. */
static inline uint32_t add(captp__json *j, captp__jtype type) {
  if (j->n == j->cap && !grow_nodes(j))
    return UINT32_MAX;
  captp__jnode *n = &j->nodes[j->n];
  n->type = (uint8_t)type;
  n->len = 0;
  n->end = (uint32_t)(j->n + 1);
  return (uint32_t)j->n++;
}

static inline void skip_space(parser *ps) {
  while (ps->p < ps->end &&
         (*ps->p == ' ' || *ps->p == '\n' || *ps->p == '\r' || *ps->p == '\t'))
    ps->p++;
}

/* The length of the valid UTF-8 sequence at p (first byte >= 0x80), or 0. */
static size_t utf8_length(const unsigned char *p, const unsigned char *end) {
  unsigned char c = p[0], lo = 0x80, hi = 0xbf;
  size_t n;
  if (c >= 0xc2 && c <= 0xdf)
    n = 2;
  else if (c >= 0xe0 && c <= 0xef) {
    n = 3;
    if (c == 0xe0)
      lo = 0xa0; /* overlong */
    else if (c == 0xed)
      hi = 0x9f; /* surrogates */
  } else if (c >= 0xf0 && c <= 0xf4) {
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

static int hex4(const unsigned char *p) {
  int v = 0;
  for (int i = 0; i < 4; i++) {
    unsigned char c = p[i];
    int d = c >= '0' && c <= '9'   ? c - '0'
            : c >= 'a' && c <= 'f' ? c - 'a' + 10
            : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                   : -1;
    if (d < 0)
      return -1;
    v = v << 4 | d;
  }
  return v;
}

static char *put_utf8(char *w, uint32_t cp) {
  if (cp < 0x80) {
    *w++ = (char)cp;
  } else if (cp < 0x800) {
    *w++ = (char)(0xc0 | cp >> 6);
    *w++ = (char)(0x80 | (cp & 0x3f));
  } else if (cp < 0x10000) {
    *w++ = (char)(0xe0 | cp >> 12);
    *w++ = (char)(0x80 | (cp >> 6 & 0x3f));
    *w++ = (char)(0x80 | (cp & 0x3f));
  } else {
    *w++ = (char)(0xf0 | cp >> 18);
    *w++ = (char)(0x80 | (cp >> 12 & 0x3f));
    *w++ = (char)(0x80 | (cp >> 6 & 0x3f));
    *w++ = (char)(0x80 | (cp & 0x3f));
  }
  return w;
}

/* \uXXXX at p (p at the 'u'), a surrogate pair taken whole; advances p. */
static int unicode_escape(parser *ps, char **w) {
  const unsigned char *u = ps->p;
  int v = ps->end - u >= 5 ? hex4(u + 1) : -1;
  if (v < 0)
    return bad(ps, "invalid escape");
  ps->p = u + 5;
  uint32_t cp = (uint32_t)v;
  if (cp >= 0xdc00 && cp <= 0xdfff)
    return bad(ps, "invalid Unicode: a lone low surrogate");
  if (cp >= 0xd800 && cp <= 0xdbff) {
    const unsigned char *q = ps->p;
    if (ps->end - q < 6 || q[0] != '\\' || q[1] != 'u')
      return bad(ps, "invalid Unicode: a lone high surrogate");
    int lo = hex4(q + 2);
    if (lo < 0) {
      ps->p = q + 1;
      return bad(ps, "invalid escape");
    }
    if (lo < 0xdc00 || lo > 0xdfff)
      return bad(ps, "invalid Unicode: a high surrogate without a low one");
    cp = ((cp - 0xd800) << 10) + ((uint32_t)lo - 0xdc00) + 0x10000;
    ps->p = q + 6;
  }
  if (cp == 0)
    ps->wrote_nul = true;
  *w = put_utf8(*w, cp);
  return VAT_OK;
}

/* The bytes a string holds as they are, copied while scanned: printable
 * ASCII but '"' and '\\'. A lookup a byte: the four comparisons it replaced
 * cost ~14 instructions a byte, and a call to memcpy per run (a body's
 * text is a string whose every other token is an escaped quote). */
static const unsigned char plain_byte[256] = {
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, /* 0x00 */
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, /* 0x10 */
    1, 1, 0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, /* 0x20 */
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, /* 0x30 */
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, /* 0x40 */
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 1, 1, 1, /* 0x50 */
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, /* 0x60 */
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, /* 0x70 */
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, /* 0x80 */
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, /* 0x90 */
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, /* 0xa0 */
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, /* 0xb0 */
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, /* 0xc0 */
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, /* 0xd0 */
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, /* 0xe0 */
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, /* 0xf0 */
};

/* A string (p at its opening quote) into the text buffer, as node `i`. */
static int string(parser *ps, captp__jnode *node) {
  captp__json *j = ps->j;
  char *w0 = j->text + j->text_len, *w = w0;
  const unsigned char *p = ps->p + 1, *end = ps->end;
  for (;;) {
    while (p < end && plain_byte[*p])
      *w++ = (char)*p++;
    if (p == end) {
      ps->p = p;
      return bad(ps, "premature end of input in a string");
    }
    unsigned char c = *p;
    if (c == '"')
      break;
    if (c < 0x20) {
      ps->p = p;
      return bad(ps, "control character in a string");
    }
    if (c >= 0x80) {
      size_t n = utf8_length(p, end);
      if (n == 0) {
        ps->p = p;
        return bad(ps, "invalid UTF-8");
      }
      memcpy(w, p, n);
      w += n;
      p += n;
      continue;
    }
    /* a backslash */
    if (end - p < 2) {
      ps->p = p + 1;
      return bad(ps, "premature end of input in a string");
    }
    char short_form = 0;
    switch (p[1]) {
    case '"':
    case '\\':
    case '/':
      short_form = (char)p[1];
      break;
    case 'b':
      short_form = '\b';
      break;
    case 'f':
      short_form = '\f';
      break;
    case 'n':
      short_form = '\n';
      break;
    case 'r':
      short_form = '\r';
      break;
    case 't':
      short_form = '\t';
      break;
    case 'u': {
      ps->p = p + 1;
      int rc = unicode_escape(ps, &w);
      if (rc != VAT_OK)
        return rc;
      p = ps->p;
      continue;
    }
    default:
      ps->p = p + 1;
      return bad(ps, "invalid escape");
    }
    *w++ = short_form;
    p += 2;
  }
  *w = '\0';
  node->as.str = w0;
  node->len = (uint32_t)(w - w0);
  j->text_len += (size_t)(w - w0) + 1;
  ps->p = p + 1;
  return VAT_OK;
}

static locale_t c_locale(void) {
  /* Made once; a racing second one is freed. */
  static _Atomic(locale_t) cached;
  locale_t l = atomic_load_explicit(&cached, memory_order_acquire);
  if (l != (locale_t)0)
    return l;
  locale_t made = newlocale(LC_ALL_MASK, "C", (locale_t)0);
  locale_t expected = (locale_t)0;
  if (made == (locale_t)0)
    return (locale_t)0;
  if (!atomic_compare_exchange_strong_explicit(&cached, &expected, made,
                                               memory_order_acq_rel,
                                               memory_order_acquire)) {
    freelocale(made);
    return expected;
  }
  return made;
}

static const double exact_pow10[] = {
    1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,  1e8,  1e9,  1e10, 1e11,
    1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};

/* A number as the RFC spells it (p at '-' or a digit), as a double the
 * way strtod reads it; too large for a double is refused, as jansson
 * refused it. */
static int number(parser *ps, captp__jnode *node) {
  const unsigned char *p = ps->p, *end = ps->end, *start = p;
  bool neg = false;
  if (*p == '-') {
    neg = true;
    p++;
  }
  uint64_t m = 0;
  int digits = 0, frac_digits = 0;
  if (p == end || *p < '0' || *p > '9') {
    ps->p = p;
    return bad(ps, "invalid number");
  }
  if (*p == '0') {
    p++;
  } else {
    while (p < end && *p >= '0' && *p <= '9') {
      if (digits < 19)
        m = m * 10 + (uint64_t)(*p - '0');
      digits++;
      p++;
    }
  }
  if (p < end && *p == '.') {
    p++;
    if (p == end || *p < '0' || *p > '9') {
      ps->p = p;
      return bad(ps, "invalid number");
    }
    while (p < end && *p >= '0' && *p <= '9') {
      if (digits < 19)
        m = m * 10 + (uint64_t)(*p - '0');
      digits++;
      frac_digits++;
      p++;
    }
  }
  long exp = 0;
  bool exp_neg = false;
  if (p < end && (*p == 'e' || *p == 'E')) {
    p++;
    if (p < end && (*p == '+' || *p == '-'))
      exp_neg = *p++ == '-';
    if (p == end || *p < '0' || *p > '9') {
      ps->p = p;
      return bad(ps, "invalid number");
    }
    while (p < end && *p >= '0' && *p <= '9') {
      if (exp < 100000)
        exp = exp * 10 + (*p - '0');
      p++;
    }
  }
  ps->p = p;
  /* Exact when the digits fit a double's mantissa and the power of ten is
   * exact too: one correctly rounded operation (Clinger). */
  long e10 = (exp_neg ? -exp : exp) - frac_digits;
  if (digits <= 15 && e10 >= -22 && e10 <= 22) {
    double f = (double)m;
    f = e10 >= 0 ? f * exact_pow10[e10] : f / exact_pow10[-e10];
    node->as.num = neg ? -f : f;
    return VAT_OK;
  }
  size_t n = (size_t)(p - start);
  char local[64];
  char *text = n < sizeof local ? local : malloc(n + 1);
  if (text == NULL)
    return nomem(ps);
  memcpy(text, start, n);
  text[n] = '\0';
  locale_t c = c_locale();
  double f = c != (locale_t)0 ? strtod_l(text, NULL, c) : strtod(text, NULL);
  if (text != local)
    free(text);
  if (isinf(f)) {
    ps->p = start;
    return bad(ps, "real number overflow");
  }
  node->as.num = f;
  return VAT_OK;
}

static bool literal(parser *ps, const char *word, size_t n) {
  if ((size_t)(ps->end - ps->p) < n || memcmp(ps->p, word, n) != 0)
    return false;
  ps->p += n;
  return true;
}

static int value(parser *ps, int depth);

static int array(parser *ps, uint32_t at, int depth) {
  uint32_t n = 0;
  ps->p++;
  skip_space(ps);
  if (ps->p < ps->end && *ps->p == ']') {
    ps->p++;
  } else {
    for (;;) {
      int rc = value(ps, depth);
      if (rc != VAT_OK)
        return rc;
      n++;
      skip_space(ps);
      if (ps->p < ps->end && *ps->p == ',') {
        ps->p++;
        skip_space(ps);
        continue;
      }
      if (ps->p < ps->end && *ps->p == ']') {
        ps->p++;
        break;
      }
      return bad(ps, "']' expected");
    }
  }
  captp__jnode *node = &ps->j->nodes[at];
  node->len = n;
  node->end = (uint32_t)ps->j->n;
  return VAT_OK;
}

static int object(parser *ps, uint32_t at, int depth) {
  uint32_t n = 0;
  ps->p++;
  skip_space(ps);
  if (ps->p < ps->end && *ps->p == '}') {
    ps->p++;
  } else {
    for (;;) {
      if (ps->p == ps->end || *ps->p != '"')
        return bad(ps, "string or '}' expected");
      const unsigned char *key_at = ps->p;
      uint32_t k = add(ps->j, CAPTP__J_STRING);
      if (k == UINT32_MAX)
        return nomem(ps);
      ps->wrote_nul = false;
      int rc = string(ps, &ps->j->nodes[k]);
      if (rc != VAT_OK)
        return rc;
      if (ps->wrote_nul) {
        ps->p = key_at;
        return bad(ps, "NUL byte in object key not supported");
      }
      skip_space(ps);
      if (ps->p == ps->end || *ps->p != ':')
        return bad(ps, "':' expected");
      ps->p++;
      skip_space(ps);
      if ((rc = value(ps, depth)) != VAT_OK)
        return rc;
      n++;
      skip_space(ps);
      if (ps->p < ps->end && *ps->p == ',') {
        ps->p++;
        skip_space(ps);
        continue;
      }
      if (ps->p < ps->end && *ps->p == '}') {
        ps->p++;
        break;
      }
      return bad(ps, "'}' expected");
    }
  }
  captp__jnode *node = &ps->j->nodes[at];
  node->len = n;
  node->end = (uint32_t)ps->j->n;
  return VAT_OK;
}

/* One value, p at its first byte (white space skipped). */
static int value(parser *ps, int depth) {
  if (++depth > CAPTP__JSON_MAX_DEPTH)
    return bad(ps, "maximum parsing depth reached");
  if (ps->p == ps->end)
    return bad(ps, "premature end of input");
  captp__json *j = ps->j;
  uint32_t at;
  switch (*ps->p) {
  case '"':
    if ((at = add(j, CAPTP__J_STRING)) == UINT32_MAX)
      return nomem(ps);
    return string(ps, &j->nodes[at]);
  case '[':
    if ((at = add(j, CAPTP__J_ARRAY)) == UINT32_MAX)
      return nomem(ps);
    return array(ps, at, depth);
  case '{':
    if ((at = add(j, CAPTP__J_OBJECT)) == UINT32_MAX)
      return nomem(ps);
    return object(ps, at, depth);
  case 't':
  case 'f':
  case 'n': {
    captp__jtype type = *ps->p == 't'   ? CAPTP__J_TRUE
                        : *ps->p == 'f' ? CAPTP__J_FALSE
                                        : CAPTP__J_NULL;
    static const char *const words[] = {
        [CAPTP__J_NULL] = "null",
        [CAPTP__J_FALSE] = "false",
        [CAPTP__J_TRUE] = "true",
    };
    if (!literal(ps, words[type], strlen(words[type])))
      return bad(ps, "invalid token");
    return add(j, type) == UINT32_MAX ? nomem(ps) : VAT_OK;
  }
  default:
    if (*ps->p == '-' || (*ps->p >= '0' && *ps->p <= '9')) {
      if ((at = add(j, CAPTP__J_NUMBER)) == UINT32_MAX)
        return nomem(ps);
      return number(ps, &j->nodes[at]);
    }
    return bad(ps, "invalid token");
  }
}

int captp__json_parse(captp__json *j, const char *s, size_t len, size_t base,
                      const char *prefix, vat_captp_error *err) {
  j->nodes = j->node_store;
  j->n = 0;
  j->cap = CAPTP__JSON_NODES;
  j->text = j->text_store;
  j->text_len = 0;
  j->text_cap = CAPTP__JSON_TEXT;
  parser ps = {.start = (const unsigned char *)s,
               .p = (const unsigned char *)s,
               .end = (const unsigned char *)s + len,
               .j = j,
               .base = base,
               .prefix = prefix,
               .err = err};
  /* Indices are 32 bits; a frame is under 1 GB (VAT_NETSTRING_MAX_FRAME). */
  if (len >= UINT32_MAX)
    return nomem(&ps);
  /* Unescaped strings never outgrow the text, each less its two quotes
   * plus a NUL: len bytes are enough. */
  if (len + 1 > j->text_cap) {
    if ((j->text = malloc(len + 1)) == NULL) {
      j->text = j->text_store;
      return nomem(&ps);
    }
    j->text_cap = len + 1;
  }
  skip_space(&ps);
  int rc = value(&ps, 0);
  if (rc != VAT_OK)
    return rc;
  skip_space(&ps);
  if (ps.p != ps.end)
    return bad(&ps, "end of file expected");
  return VAT_OK;
}

void captp__json_free(captp__json *j) {
  if (j->nodes != j->node_store)
    free(j->nodes);
  if (j->text != j->text_store)
    free(j->text);
  j->nodes = j->node_store;
  j->text = j->text_store;
}

uint32_t captp__json_get(const captp__json *j, uint32_t obj, const char *key,
                         size_t len) {
  const captp__jnode *o = &j->nodes[obj];
  uint32_t found = 0;
  if (o->type != CAPTP__J_OBJECT)
    return 0;
  for (uint32_t k = obj + 1; k < o->end; k = j->nodes[k + 1].end) {
    const captp__jnode *name = &j->nodes[k];
    if (name->len == len && memcmp(name->as.str, key, len) == 0)
      found = k + 1;
  }
  return found;
}

static bool same_name(const captp__json *j, uint32_t a, uint32_t b) {
  const captp__jnode *x = &j->nodes[a], *y = &j->nodes[b];
  return x->len == y->len && memcmp(x->as.str, y->as.str, x->len) == 0;
}

/* For a large object: members sorted by name, then by place. */
typedef struct ranked {
  const captp__json *j;
  captp__jmember m;
  size_t place;
} ranked;

static int by_name_then_place(const void *a, const void *b) {
  const ranked *x = a, *y = b;
  const captp__jnode *kx = &x->j->nodes[x->m.key], *ky = &y->j->nodes[y->m.key];
  size_t n = kx->len < ky->len ? kx->len : ky->len;
  int c = memcmp(kx->as.str, ky->as.str, n);
  if (c == 0 && kx->len != ky->len)
    c = kx->len < ky->len ? -1 : 1;
  if (c == 0)
    c = x->place < y->place ? -1 : x->place > y->place;
  return c;
}

static int by_place(const void *a, const void *b) {
  const ranked *x = a, *y = b;
  return x->place < y->place ? -1 : x->place > y->place;
}

static bool large_members(const captp__json *j, uint32_t obj,
                          captp__jmembers *out) {
  const captp__jnode *o = &j->nodes[obj];
  ranked *r = malloc(o->len * sizeof *r);
  out->m = malloc(o->len * sizeof *out->m);
  if (r == NULL || out->m == NULL) {
    free(r);
    free(out->m);
    out->m = out->store;
    return false;
  }
  size_t n = 0;
  for (uint32_t k = obj + 1; k < o->end; k = j->nodes[k + 1].end, n++)
    r[n] = (ranked){.j = j, .m = {k, k + 1}, .place = n};
  qsort(r, n, sizeof *r, by_name_then_place);
  /* Each run of one name: its first place, its last value. */
  size_t kept = 0;
  for (size_t i = 0; i < n;) {
    size_t last = i;
    while (last + 1 < n && same_name(j, r[i].m.key, r[last + 1].m.key))
      last++;
    r[kept++] =
        (ranked){.j = j, .m = {r[i].m.key, r[last].m.val}, .place = r[i].place};
    i = last + 1;
  }
  qsort(r, kept, sizeof *r, by_place);
  for (size_t i = 0; i < kept; i++)
    out->m[i] = r[i].m;
  out->n = kept;
  free(r);
  return true;
}

bool captp__json_members(const captp__json *j, uint32_t obj,
                         captp__jmembers *out) {
  const captp__jnode *o = &j->nodes[obj];
  out->m = out->store;
  out->n = 0;
  if (o->len > CAPTP__JSON_INLINE_MEMBERS)
    return large_members(j, obj, out);
  for (uint32_t k = obj + 1; k < o->end; k = j->nodes[k + 1].end) {
    size_t i = 0;
    while (i < out->n && !same_name(j, out->m[i].key, k))
      i++;
    if (i < out->n)
      out->m[i].val = k + 1; /* a repeated name: the last value wins */
    else
      out->m[out->n++] = (captp__jmember){k, k + 1};
  }
  return true;
}

void captp__json_members_free(captp__jmembers *m) {
  if (m->m != m->store)
    free(m->m);
  m->m = m->store;
}
