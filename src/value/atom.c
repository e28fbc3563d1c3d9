/* The process-wide atom table.
 *
 * An open-addressing hash table with linear probing, kept at most half full
 * and doubled by rehashing. One mutex guards it: interning is meant to happen
 * once per name, at start-up, so a lock-free read path would buy little.
 *
 * Atoms are never freed. Each one is allocated uncollectable, so the
 * collector keeps it whether or not anything still points to it, and atomic,
 * because it holds no pointers and need not be scanned. That is also why the
 * table itself may live in malloc memory, which the collector does not see.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "util/gc.h"
#include "value/value_internal.h"

#define MIN_CAPACITY 64

static pthread_mutex_t table_lock = PTHREAD_MUTEX_INITIALIZER;
static const vat_atom **slots; /* capacity entries, NULL when free */
static size_t capacity;        /* zero or a power of two */
static size_t count;

uint64_t vat__hash_bytes(const void *data, size_t len) {
  /* FNV-1a, then a finaliser: FNV alone leaves the low bits, which pick the
   * slot, poorly mixed for short names. */
  const unsigned char *p = data;
  uint64_t h = UINT64_C(0xcbf29ce484222325);
  for (size_t i = 0; i < len; i++) {
    h ^= p[i];
    h *= UINT64_C(0x100000001b3);
  }
  return vat__mix64(h ^ len);
}

int vat__atom_compare(const vat_atom *a, const vat_atom *b) {
  if (a == b)
    return 0;
  size_t n = a->len < b->len ? a->len : b->len;
  int c = memcmp(a->name, b->name, n);
  if (c != 0)
    return c < 0 ? -1 : 1;
  if (a->len != b->len)
    return a->len < b->len ? -1 : 1;
  return 0;
}

static size_t find_slot(const vat_atom **table, size_t cap, uint64_t hash,
                        const char *name, size_t len) {
  size_t mask = cap - 1;
  for (size_t i = (size_t)hash & mask;; i = (i + 1) & mask) {
    const vat_atom *a = table[i];
    if (a == NULL)
      return i;
    if (a->hash == hash && a->len == len && memcmp(a->name, name, len) == 0)
      return i;
  }
}

static bool grow(void) {
  size_t new_cap = capacity == 0 ? MIN_CAPACITY : capacity * 2;
  if (new_cap < capacity || new_cap > SIZE_MAX / sizeof *slots)
    return false;
  const vat_atom **table = calloc(new_cap, sizeof *table);
  if (table == NULL)
    return false;
  for (size_t i = 0; i < capacity; i++) {
    const vat_atom *a = slots[i];
    if (a != NULL)
      table[find_slot(table, new_cap, a->hash, a->name, a->len)] = a;
  }
  free(slots);
  slots = table;
  capacity = new_cap;
  return true;
}

static const vat_atom *make_atom(uint64_t hash, const char *name, size_t len) {
  if (len > SIZE_MAX - sizeof(vat_atom) - 1)
    return NULL;
  vat_atom *a = GC_MALLOC_ATOMIC_UNCOLLECTABLE(sizeof(vat_atom) + len + 1);
  if (a == NULL)
    return NULL;
  a->hash = hash;
  a->len = len;
  if (len > 0)
    memcpy(a->name, name, len);
  a->name[len] = '\0';
  return a;
}

const vat_atom *vat_atom_intern_n(const char *name, size_t len) {
  if (name == NULL)
    return NULL;
  uint64_t hash = vat__hash_bytes(name, len);
  const vat_atom *result = NULL;
  pthread_mutex_lock(&table_lock);
  size_t i = 0;
  if (capacity > 0) {
    i = find_slot(slots, capacity, hash, name, len);
    if (slots[i] != NULL) {
      result = slots[i];
      goto out;
    }
  }
  /* Grow before allocating the atom, so that a failure leaves the table as
   * it was and no uncollectable atom is lost. */
  if ((count + 1) * 2 > capacity) {
    if (!grow())
      goto out;
    i = find_slot(slots, capacity, hash, name, len);
  }
  result = make_atom(hash, name, len);
  if (result != NULL) {
    slots[i] = result;
    count++;
  }
out:
  pthread_mutex_unlock(&table_lock);
  return result;
}

const vat_atom *vat_atom_intern(const char *name) {
  if (name == NULL)
    return NULL;
  return vat_atom_intern_n(name, strlen(name));
}

const char *vat_atom_name(const vat_atom *atom) {
  return atom == NULL ? NULL : atom->name;
}

size_t vat_atom_len(const vat_atom *atom) {
  return atom == NULL ? 0 : atom->len;
}
