/* Base64 for bytes, which travel as a tagged value (vat/captp.h, note
 * [5]). Standard alphabet, padded, no line breaks: what JS's btoa and
 * Buffer write. Strict on input: a bad character or bad padding fails. */
#include <gc/gc.h>
#include <stdbool.h>
#include <stdint.h>

#include "captp/internal.h"

static const char alphabet[] =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

char *captp__base64_encode(const void *data, size_t len, size_t *out_len) {
  const uint8_t *in = data;
  size_t n = (len + 2) / 3 * 4;
  char *out = GC_MALLOC_ATOMIC(n + 1);
  if (out == NULL)
    return NULL;
  size_t o = 0;
  for (size_t i = 0; i < len; i += 3) {
    uint32_t w = (uint32_t)in[i] << 16;
    if (i + 1 < len)
      w |= (uint32_t)in[i + 1] << 8;
    if (i + 2 < len)
      w |= in[i + 2];
    out[o++] = alphabet[(w >> 18) & 63];
    out[o++] = alphabet[(w >> 12) & 63];
    out[o++] = i + 1 < len ? alphabet[(w >> 6) & 63] : '=';
    out[o++] = i + 2 < len ? alphabet[w & 63] : '=';
  }
  out[o] = '\0';
  *out_len = o;
  return out;
}

static int sextet(char c) {
  if (c >= 'A' && c <= 'Z')
    return c - 'A';
  if (c >= 'a' && c <= 'z')
    return c - 'a' + 26;
  if (c >= '0' && c <= '9')
    return c - '0' + 52;
  if (c == '+')
    return 62;
  if (c == '/')
    return 63;
  return -1;
}

bool captp__base64_decode(const char *s, size_t len, void **out,
                          size_t *out_len) {
  if (len % 4 != 0)
    return false;
  size_t pad = 0;
  if (len > 0 && s[len - 1] == '=')
    pad = len > 1 && s[len - 2] == '=' ? 2 : 1;
  size_t n = len / 4 * 3 - pad;
  uint8_t *bytes = GC_MALLOC_ATOMIC(n + 1);
  if (bytes == NULL)
    return false;
  size_t o = 0;
  for (size_t i = 0; i < len; i += 4) {
    bool last = i + 4 == len;
    uint32_t w = 0;
    for (size_t k = 0; k < 4; k++) {
      int v = sextet(s[i + k]);
      if (v < 0) {
        /* '=' only as the padding of the last quantum. */
        if (!(last && s[i + k] == '=' && k >= 4 - pad))
          return false;
        v = 0;
      } else if (last && k >= 4 - pad) {
        return false;
      }
      w = w << 6 | (uint32_t)v;
    }
    bytes[o++] = (uint8_t)(w >> 16);
    if (!last || pad < 2)
      bytes[o++] = (uint8_t)(w >> 8);
    if (!last || pad < 1)
      bytes[o++] = (uint8_t)w;
  }
  *out = bytes;
  *out_len = o;
  return true;
}
