/* printf's "%.17g" without printf, for the doubles a message carries most
 * (prices, measures: 1e-3 <= |f| < 1e17), where it is the encoder's
 * largest cost: a real in that range is m * 2^e with m < 2^53, so f *
 * 10^k for the k that leaves 17 digits before the point is m * 5^k *
 * 2^(e+k), exact in 128 bits, and its rounding to an integer is decided
 * exactly from the bits shifted out (to nearest, ties to even, as glibc
 * rounds in the default rounding mode). The digits are then laid out as
 * %g lays them out in fixed notation: the point after the first X+1
 * digits (X the decimal exponent), trailing zeros dropped. Anything else
 * is left to snprintf. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "captp/out.h"

#ifdef __SIZEOF_INT128__
__extension__ typedef unsigned __int128 u128;

enum { DIGITS = 17 };

/* 5^k, k = 0..20 */
/* clang-format off */
static const uint64_t pow5[] = {
    UINT64_C(1), UINT64_C(5), UINT64_C(25), UINT64_C(125), UINT64_C(625),
    UINT64_C(3125), UINT64_C(15625), UINT64_C(78125), UINT64_C(390625),
    UINT64_C(1953125), UINT64_C(9765625), UINT64_C(48828125),
    UINT64_C(244140625), UINT64_C(1220703125), UINT64_C(6103515625),
    UINT64_C(30517578125), UINT64_C(152587890625), UINT64_C(762939453125),
    UINT64_C(3814697265625), UINT64_C(19073486328125),
    UINT64_C(95367431640625)
};
/* clang-format on */
#define MAX_K ((int)(sizeof pow5 / sizeof pow5[0]) - 1)

/* floor(m * 10^k * 2^e) and whether the part cut off is more than, or
 * exactly, one half; false when k is out of the table's range. */
static bool scaled(uint64_t m, int e, int k, uint64_t *q, int *cut) {
  if (k < 0 || k > MAX_K)
    return false;
  u128 p = (u128)m * pow5[k];
  int shift = e + k; /* 10^k = 5^k * 2^k */
  if (shift >= 0) {
    u128 r = shift < 64 ? p << shift : 0;
    if (shift >= 64 || r >> shift != p || r >> 64 != 0)
      return false;
    *q = (uint64_t)r;
    *cut = -1; /* nothing cut off */
    return true;
  }
  int s = -shift;
  if (s >= 127)
    return false;
  u128 rest = p & (((u128)1 << s) - 1), half = (u128)1 << (s - 1);
  *q = (uint64_t)(p >> s);
  *cut = rest > half ? 1 : rest == half ? 0 : -1;
  return true;
}

size_t captp__real17_fixed(double f, char text[40]) {
  double a = fabs(f);
  if (!(a >= 1e-3 && a < 1e17))
    return 0;
  uint64_t bits;
  memcpy(&bits, &a, sizeof bits);
  uint64_t m = (bits & ((UINT64_C(1) << 52) - 1)) | UINT64_C(1) << 52;
  int e = (int)(bits >> 52) - 1075; /* normal: a >= 1e-3 */
  const uint64_t low = UINT64_C(10000000000000000), high = low * 10;
  int x = (int)floor(log10(a)); /* the decimal exponent, maybe off by one */
  uint64_t q;
  int cut;
  for (int tries = 0;; tries++) {
    if (tries == 3 || !scaled(m, e, DIGITS - 1 - x, &q, &cut))
      return 0;
    if (q >= high)
      x++;
    else if (q < low)
      x--;
    else
      break;
  }
  if (cut > 0 || (cut == 0 && (q & 1)))
    q++;
  if (q == high) { /* 99999999999999999.5 -> 1e(x+1) */
    q = low;
    x++;
  }
  if (x >= DIGITS)
    return 0; /* %g's exponential form: snprintf's */
  char d[DIGITS];
  for (int i = DIGITS - 1; i >= 0; i--) {
    d[i] = (char)('0' + q % 10);
    q /= 10;
  }
  int last = DIGITS - 1; /* the last digit kept: trailing zeros go */
  while (last > x && last > 0 && d[last] == '0')
    last--;
  char *w = text;
  if (signbit(f))
    *w++ = '-';
  if (x >= 0) {
    memcpy(w, d, (size_t)x + 1);
    w += x + 1;
    if (last > x) {
      *w++ = '.';
      memcpy(w, d + x + 1, (size_t)(last - x));
      w += last - x;
    }
  } else {
    *w++ = '0';
    *w++ = '.';
    for (int i = 0; i < -x - 1; i++)
      *w++ = '0';
    memcpy(w, d, (size_t)last + 1);
    w += last + 1;
  }
  *w = '\0';
  return (size_t)(w - text);
}
#else
size_t captp__real17_fixed(double f, char text[40]) {
  (void)f;
  (void)text;
  return 0;
}
#endif
