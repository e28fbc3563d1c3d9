/* Netstring frames, `<length>:<payload>,`, read incrementally: bytes may
 * arrive split anywhere. The length is checked as Endo's reader checks it
 * (digits only, no leading zero, at most 9 digits) and against the
 * reader's maximum as soon as it grows past it, so a hostile length costs
 * nothing. A frame that arrives whole in one feed is handed out in place,
 * without a copy; a split one is gathered in the reader's buffer. After a
 * bad byte the reader stays failed: a bad frame ends the connection. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "captp/internal.h"

typedef enum { LENGTH, PAYLOAD, COMMA, FAILED } read_state;

struct vat_netstring_reader {
  size_t max; /* largest payload accepted */
  read_state state;
  unsigned digits; /* length digits seen */
  size_t length;   /* the frame's payload length, as read so far */
  size_t have;     /* payload bytes gathered in buf */
  char *buf;       /* malloc'd, cap bytes: payload bytes hold no pointers */
  size_t cap;
  size_t position; /* bytes consumed before the current feed */
  int rc;          /* FAILED: the error to repeat */
  vat_captp_error failure;
};

vat_netstring_reader *vat_netstring_reader_new(size_t max_frame) {
  vat_netstring_reader *r = calloc(1, sizeof *r);
  if (r == NULL)
    return NULL;
  if (max_frame == 0)
    max_frame = VAT_NETSTRING_DEFAULT_MAX;
  r->max =
      max_frame < VAT_NETSTRING_MAX_FRAME ? max_frame : VAT_NETSTRING_MAX_FRAME;
  r->state = LENGTH;
  return r;
}

void vat_netstring_reader_free(vat_netstring_reader *r) {
  if (r != NULL) {
    free(r->buf);
    free(r);
  }
}

/* Digits written by hand: snprintf's format parsing cost ~700
 * instructions a frame, as much as the rest of the header's work. */
size_t vat_netstring_header(size_t len, char buf[12]) {
  if (len > VAT_NETSTRING_MAX_FRAME)
    return 0;
  char digits[10];
  size_t n = 0;
  do {
    digits[n++] = (char)('0' + len % 10);
    len /= 10;
  } while (len > 0);
  for (size_t i = 0; i < n; i++)
    buf[i] = digits[n - 1 - i];
  buf[n] = ':';
  buf[n + 1] = '\0';
  return n + 1;
}

/* Fails the reader at stream offset `at`; later calls repeat the error. */
static int fail(vat_netstring_reader *r, int rc, vat_captp_err code, size_t at,
                unsigned char c, vat_captp_error *err) {
  r->state = FAILED;
  r->rc = rc;
  captp__clear(&r->failure);
  captp__fail(&r->failure, rc, code, at, "byte %zu (0x%02x)", at, c);
  if (err != NULL)
    *err = r->failure;
  return rc;
}

/* One length character; returns VAT_OK or fails the reader. */
static int length_char(vat_netstring_reader *r, unsigned char c, size_t at,
                       vat_captp_error *err) {
  if (c < '0' || c > '9')
    return fail(r, VAT_EFRAME, VAT_CAPTP_ERR_LENGTH_CHAR, at, c, err);
  if (r->digits == 1 && r->length == 0)
    return fail(r, VAT_EFRAME, VAT_CAPTP_ERR_LEADING_ZERO, at, c, err);
  if (r->digits == 9)
    return fail(r, VAT_EFRAME, VAT_CAPTP_ERR_LENGTH_DIGITS, at, c, err);
  r->digits++;
  r->length = r->length * 10 + (size_t)(c - '0');
  if (r->length > r->max)
    return fail(r, VAT_EFRAMESIZE, VAT_CAPTP_ERR_TOO_LARGE, at, c, err);
  return VAT_OK;
}

static bool reserve(vat_netstring_reader *r, size_t n) {
  if (n <= r->cap)
    return true;
  size_t cap = r->cap ? r->cap : 256;
  while (cap < n)
    cap *= 2;
  char *grown = realloc(r->buf, cap);
  if (grown == NULL)
    return false;
  r->buf = grown;
  r->cap = cap;
  return true;
}

static void next_frame(vat_netstring_reader *r) {
  r->state = LENGTH;
  r->digits = 0;
  r->length = 0;
  r->have = 0;
}

int vat_netstring_read(vat_netstring_reader *r, const void *data, size_t len,
                       size_t *used, const char **frame, size_t *frame_len,
                       vat_captp_error *err) {
  if (r == NULL || (data == NULL && len > 0) || used == NULL || frame == NULL ||
      frame_len == NULL)
    return VAT_EINVAL;
  captp__clear(err);
  const unsigned char *in = data;
  size_t i = 0;
  int rc = 0;
  *used = 0;
  if (r->state == FAILED) {
    if (err != NULL)
      *err = r->failure;
    return r->rc;
  }
  while (i < len && rc == 0) {
    switch (r->state) {
    case LENGTH:
      if (in[i] != ':') {
        if ((rc = length_char(r, in[i], r->position + i, err)) != VAT_OK)
          break;
        i++;
        continue;
      }
      if (r->digits == 0) {
        rc = fail(r, VAT_EFRAME, VAT_CAPTP_ERR_EMPTY_LENGTH, r->position + i,
                  in[i], err);
        break;
      }
      i++;
      /* Whole in this feed: hand it out in place. */
      if (len - i > r->length) {
        if (in[i + r->length] != ',') {
          rc = fail(r, VAT_EFRAME, VAT_CAPTP_ERR_MISSING_COMMA,
                    r->position + i + r->length, in[i + r->length], err);
          break;
        }
        *frame = (const char *)in + i;
        *frame_len = r->length;
        i += r->length + 1;
        next_frame(r);
        rc = 1;
        break;
      }
      r->state = PAYLOAD;
      if (!reserve(r, r->length + 1)) {
        rc = VAT_ENOMEM;
        break;
      }
      continue;
    case PAYLOAD: {
      size_t n = r->length - r->have;
      if (n > len - i)
        n = len - i;
      memcpy(r->buf + r->have, in + i, n);
      r->have += n;
      i += n;
      if (r->have == r->length)
        r->state = COMMA;
      continue;
    }
    case COMMA:
      if (in[i] != ',') {
        rc = fail(r, VAT_EFRAME, VAT_CAPTP_ERR_MISSING_COMMA, r->position + i,
                  in[i], err);
        break;
      }
      i++;
      r->buf[r->length] = '\0';
      *frame = r->buf;
      *frame_len = r->length;
      next_frame(r);
      rc = 1;
      break;
    case FAILED:
      break;
    }
  }
  r->position += i;
  *used = i;
  return rc;
}
