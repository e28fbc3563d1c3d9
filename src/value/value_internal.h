/* Private layouts of the heap values behind vat_value.
 *
 * Every heap value is immutable once its constructor returns, and no
 * constructor can make a value refer to one made after it, so values form a
 * DAG: recursive walks (compare, hash, format) always end.
 *
 * Strings and bytes hold no pointers and live in GC_MALLOC_ATOMIC memory, so
 * the collector never scans them; lists, records, maps and errors hold
 * values, which may hold pointers, and live in GC_MALLOC memory. Atoms the
 * program interns are never freed; weakly interned ones live while
 * referenced (see atom.c).
 */
#ifndef VAT_VALUE_INTERNAL_H
#define VAT_VALUE_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "vat/value.h"

struct vat_atom {
  uint64_t hash; /* of the name only: the same in every process */
  size_t len;
  char name[]; /* len bytes, then a NUL */
};

/* A string or a byte string. A string's data is NUL-terminated so that
 * vat_string_data() can hand it out as a C string; bytes get the NUL too,
 * which costs one byte and keeps one layout. */
typedef struct vat__blob {
  size_t len;
  char data[];
} vat__blob;

typedef struct vat__list {
  size_t n;
  vat_value items[];
} vat__list;

typedef struct vat__record {
  const vat_atom *label;
  size_t n;
  vat_value fields[];
} vat__record;

typedef struct vat__map_entry {
  vat_value key;
  vat_value val;
} vat__map_entry;

/* Entries sorted by vat_compare on their keys, keys distinct: lookup is a
 * binary search, and two equal maps have the same entries in the same order,
 * which is what compare and hash rely on. */
typedef struct vat__map {
  size_t n;
  vat__map_entry entries[];
} vat__map;

typedef struct vat__error {
  const vat_atom *code;
  vat_value payload;
} vat__error;

/* Orders atoms by name (bytes, then length), not by address, so that the
 * order of values does not change from one run to the next. */
int vat__atom_compare(const vat_atom *a, const vat_atom *b);

/* The atom table's lock, for a caller that forks a process that will use
 * atoms (sim/parallel.c): held across fork(2), so that the child does not
 * inherit it taken by a thread it does not have. Take it before the
 * collector's fork preparation (the table lock comes first, atom.c). */
void vat__atom_table_lock(void);
void vat__atom_table_unlock(void);

/* The hash of `len` bytes; atoms and strings share it. */
uint64_t vat__hash_bytes(const void *data, size_t len);

/* A finaliser that spreads every input bit over the whole word. */
static inline uint64_t vat__mix64(uint64_t x) {
  x ^= x >> 30;
  x *= UINT64_C(0xbf58476d1ce4e5b9);
  x ^= x >> 27;
  x *= UINT64_C(0x94d049bb133111eb);
  x ^= x >> 31;
  return x;
}

#endif
