/* jansson trees to text in the collector's memory, in one pass:
 * json_dumpb with no buffer serialises everything only to count, so
 * asking for the size first would write each message twice. The text
 * grows in a buffer instead, after `reserve` bytes left free at its front
 * (a netstring header goes there, so framing copies nothing). */
#include <gc/gc.h>
#include <string.h>

#include "captp/internal.h"

typedef struct sink {
  char *buf;
  size_t len, cap;
} sink;

static int append(const char *text, size_t n, void *data) {
  sink *s = data;
  if (s->len + n + 2 > s->cap) {
    size_t cap = s->cap * 2;
    while (s->len + n + 2 > cap)
      cap *= 2;
    char *grown = GC_REALLOC(s->buf, cap);
    if (grown == NULL)
      return -1;
    s->buf = grown;
    s->cap = cap;
  }
  memcpy(s->buf + s->len, text, n);
  s->len += n;
  return 0;
}

char *captp__dump(const json_t *j, size_t flags, size_t reserve, size_t *len) {
  sink s = {.buf = GC_MALLOC_ATOMIC(256 + reserve),
            .len = reserve,
            .cap = 256 + reserve};
  if (s.buf == NULL || json_dump_callback(j, append, &s, flags) != 0)
    return NULL;
  s.buf[s.len] = '\0'; /* append keeps two bytes free: ',' and NUL */
  *len = s.len - reserve;
  return s.buf;
}
