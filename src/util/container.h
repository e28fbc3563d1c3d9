/* container_of: the struct that embeds a member, from the member's
 * address. The runtime embeds signals and effects in their owners (a
 * promise's request, a vat's timer state), so that one allocation serves
 * both; this is the one way back. */
#ifndef VAT_UTIL_CONTAINER_H
#define VAT_UTIL_CONTAINER_H

#include <stddef.h>

#define vat__container_of(ptr, type, member)                                   \
  ((type *)(void *)((char *)(ptr)-offsetof(type, member)))

#endif
