/* libFuzzer target: the netstring reader. The first two bytes choose the
 * reader's maximum frame and how the rest is split into feeds; the rest
 * is the stream. Every outcome must be a frame, "need more", or a named
 * error that repeats; never a crash, a leak or a hang. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "vat/captp.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 2)
    return 0;
  size_t max = (size_t)data[0] * 64; /* 0: the default */
  size_t chunk = (size_t)data[1] % 17 + 1;
  data += 2;
  size -= 2;
  vat_netstring_reader *r = vat_netstring_reader_new(max);
  if (r == NULL)
    abort();
  size_t pos = 0;
  while (pos < size) {
    size_t n = size - pos < chunk ? size - pos : chunk;
    const char *frame;
    size_t used, len;
    vat_captp_error err;
    int rc = vat_netstring_read(r, data + pos, n, &used, &frame, &len, &err);
    if (used > n)
      abort();
    pos += used;
    if (rc < 0) {
      if (err.code == VAT_CAPTP_ERR_NONE ||
          (rc != VAT_EFRAME && rc != VAT_EFRAMESIZE))
        abort();
      /* A failed reader stays failed. */
      if (vat_netstring_read(r, data, size, &used, &frame, &len, NULL) != rc)
        abort();
      break;
    }
    if (rc == 1) {
      if (max != 0 && len > max)
        abort();
      volatile char sink = len > 0 ? frame[len - 1] : 0; /* readable */
      (void)sink;
    } else if (used != n) {
      abort();
    }
  }
  vat_netstring_reader_free(r);
  return 0;
}
