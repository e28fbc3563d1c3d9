/* The process-wide atom table.
 *
 * An open-addressing hash table with linear probing, kept at most half
 * used and rebuilt (at twice the size, or the same size when dead entries
 * made it full) by rehashing. One mutex guards it: a lookup is a probe
 * under that lock, as cheap for a program's selectors as it always was.
 *
 * Two kinds of atom. A strong one, interned by the program, is never
 * freed: allocated uncollectable, and atomic (it holds no pointers). A
 * weak one, made for a name that came from outside (vat_atom_intern_weak_n),
 * is ordinary collectable memory: the table, in malloc memory the
 * collector does not scan, is no root for it, so it lives as long as a
 * value refers to it. Its slot is a disappearing link: the collector
 * clears the slot's pointer when the atom becomes unreachable, and the
 * slot stays behind as a tombstone (its state and hash untouched) so that
 * probe chains through it still reach the entries placed after it; a
 * rebuild drops the tombstones.
 *
 * The collector clears links while it holds its allocation lock, after it
 * has decided which objects die. So a weak slot's pointer is read only with
 * that lock held (GC_alloc_lock): then either the collector has not yet
 * looked, and the pointer we take onto our stack makes the atom reachable,
 * or it has, and the slot reads NULL. Reading it without the lock could
 * hand out an atom already judged dead. The slot's hash and state, which
 * the collector never writes, are read under the table lock alone, so a
 * probe takes the allocation lock only on a weak slot of the same hash.
 *
 * Lock order: the table lock, then the allocation lock. The collector never
 * takes the table lock (atoms have no finalisers), so this cannot deadlock.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "util/gc.h"
#include "value/value_internal.h"

#define MIN_CAPACITY 64

enum slot_state {
  SLOT_FREE = 0, /* never used since the last rebuild: ends a probe */
  SLOT_STRONG,   /* atom is permanent */
  SLOT_WEAK,     /* atom is a disappearing link: NULL once collected */
};

typedef struct slot {
  const vat_atom *atom;
  uint32_t hash;  /* the atom's low half, so probes need not read the atom */
  uint32_t state; /* enum slot_state */
} slot;

static pthread_mutex_t table_lock = PTHREAD_MUTEX_INITIALIZER;
static slot *slots;     /* capacity entries */
static size_t capacity; /* zero or a power of two */
static size_t used;     /* slots not SLOT_FREE, tombstones included */

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

static bool names(const vat_atom *a, const char *name, size_t len) {
  return a != NULL && a->len == len && memcmp(a->name, name, len) == 0;
}

static void **link_of(slot *s) {
  return (void **)&s->atom;
}

/* A weak slot's atom if it is still alive and named `name`, else NULL. */
static const vat_atom *weak_match(slot *s, const char *name, size_t len) {
  GC_alloc_lock();
  const vat_atom *a = s->atom;
  if (!names(a, name, len))
    a = NULL;
  GC_alloc_unlock();
  return a;
}

/* The live atom named `name`, with its slot in *at; or NULL, with *at the
 * free slot that ends the name's probe chain (where it would go). */
static const vat_atom *lookup(uint32_t hash, const char *name, size_t len,
                              size_t *at) {
  size_t mask = capacity - 1;
  for (size_t i = hash & mask;; i = (i + 1) & mask) {
    slot *s = &slots[i];
    if (s->state == SLOT_FREE) {
      *at = i;
      return NULL;
    }
    if (s->hash != hash)
      continue;
    const vat_atom *a = s->state == SLOT_STRONG
                            ? (names(s->atom, name, len) ? s->atom : NULL)
                            : weak_match(s, name, len);
    if (a != NULL) {
      *at = i;
      return a;
    }
  }
}

static size_t free_slot(slot *table, size_t cap, uint32_t hash) {
  size_t mask = cap - 1;
  size_t i = hash & mask;
  while (table[i].state != SLOT_FREE)
    i = (i + 1) & mask;
  return i;
}

/* The weak atoms still alive, with the allocation lock held so that none
 * dies while they are counted. A bound: some may die before the rebuild
 * moves them. */
static size_t live_count(void) {
  size_t n = 0;
  GC_alloc_lock();
  for (size_t i = 0; i < capacity; i++)
    n += slots[i].state == SLOT_STRONG ||
         (slots[i].state == SLOT_WEAK && slots[i].atom != NULL);
  GC_alloc_unlock();
  return n;
}

/* Rehashes the live entries into a table at most a quarter full, so that a
 * quarter of it is inserted before the next rebuild (amortised O(1)): a
 * table of live atoms doubles, one full of tombstones is rebuilt at its own
 * size or smaller. Slots are indexed by the hash's low half, so a table
 * has at most 2^32 of them. */
static bool rebuild(void) {
  size_t live = live_count();
  size_t new_cap = MIN_CAPACITY;
  while (new_cap / 4 < live) {
    if (new_cap >= (size_t)1 << 32 || new_cap > SIZE_MAX / 2 / sizeof *slots)
      return false;
    new_cap *= 2;
  }
  slot *table = calloc(new_cap, sizeof *table);
  size_t *dest = calloc(capacity ? capacity : 1, sizeof *dest);
  if (table == NULL || dest == NULL) {
    free(table);
    free(dest);
    return false;
  }
  size_t n = 0;
  /* Strong entries, and the weak ones alive now (copied under the lock:
   * see the top); dead ones are left behind. */
  GC_alloc_lock();
  for (size_t i = 0; i < capacity; i++) {
    slot *s = &slots[i];
    dest[i] = SIZE_MAX;
    if (s->state == SLOT_FREE || (s->state == SLOT_WEAK && s->atom == NULL))
      continue;
    size_t j = free_slot(table, new_cap, s->hash);
    table[j] = *s;
    dest[i] = j;
    n++;
  }
  GC_alloc_unlock();
  /* Each weak link follows its atom. A collection since the copy may have
   * cleared the old link (the atom died): then no link is found, and the
   * copy, which no one has read yet, becomes a tombstone. Moving allocates
   * nothing, so it cannot fail half way. */
  for (size_t i = 0; i < capacity; i++) {
    if (slots[i].state != SLOT_WEAK || dest[i] == SIZE_MAX)
      continue;
    slot *to = &table[dest[i]];
    if (GC_move_disappearing_link(link_of(&slots[i]), link_of(to)) !=
        GC_SUCCESS)
      to->atom = NULL; /* died since the copy */
  }
  free(dest);
  free(slots);
  slots = table;
  capacity = new_cap;
  used = n;
  return true;
}

static vat_atom *make_atom(uint64_t hash, const char *name, size_t len,
                           bool weak) {
  if (len > SIZE_MAX - sizeof(vat_atom) - 1)
    return NULL;
  size_t size = sizeof(vat_atom) + len + 1;
  vat_atom *a =
      weak ? GC_MALLOC_ATOMIC(size) : GC_MALLOC_ATOMIC_UNCOLLECTABLE(size);
  if (a == NULL)
    return NULL;
  a->hash = hash;
  a->len = len;
  if (len > 0)
    memcpy(a->name, name, len);
  a->name[len] = '\0';
  return a;
}

/* A weak atom the program now interns is made permanent: a pin, an
 * uncollectable cell that points to it, keeps it reachable, and its slot
 * stops being a link. The atom is on our stack meanwhile, so it cannot die
 * between the two. The pins are chained from `pins` (under the table
 * lock): a cell nothing reads would let the compiler drop the store into
 * it, malloc-like memory being private to the call. */
typedef struct pin {
  const vat_atom *atom;
  struct pin *next;
} pin;

static pin *pins;

static bool make_strong(slot *s, const vat_atom *a) {
  pin *p = GC_MALLOC_UNCOLLECTABLE(sizeof *p);
  if (p == NULL)
    return false;
  p->atom = a;
  p->next = pins;
  pins = p;
  GC_unregister_disappearing_link(link_of(s));
  s->state = SLOT_STRONG;
  return true;
}

static const vat_atom *intern(const char *name, size_t len, bool weak) {
  if (name == NULL)
    return NULL;
  uint64_t hash = vat__hash_bytes(name, len);
  uint32_t low = (uint32_t)hash;
  const vat_atom *result = NULL;
  size_t i = 0;
  pthread_mutex_lock(&table_lock);
  if (capacity > 0 && (result = lookup(low, name, len, &i)) != NULL) {
    if (!weak && slots[i].state == SLOT_WEAK && !make_strong(&slots[i], result))
      result = NULL;
    goto out;
  }
  /* Rebuild before allocating the atom, so that a failure leaves the table
   * as it was and no uncollectable atom is lost. */
  if ((used + 1) * 2 > capacity) {
    if (!rebuild())
      goto out;
    lookup(low, name, len, &i); /* a miss still: only its place moved */
  }
  vat_atom *a = make_atom(hash, name, len, weak);
  if (a == NULL)
    goto out;
  slot *s = &slots[i];
  *s = (slot){.atom = a, .hash = low, .state = weak ? SLOT_WEAK : SLOT_STRONG};
  if (weak &&
      GC_general_register_disappearing_link(link_of(s), a) != GC_SUCCESS) {
    *s = (slot){0}; /* out of memory: the atom is garbage, the slot free */
    goto out;
  }
  used++;
  result = a;
out:
  pthread_mutex_unlock(&table_lock);
  return result;
}

void vat__atom_table_lock(void) {
  pthread_mutex_lock(&table_lock);
}

void vat__atom_table_unlock(void) {
  pthread_mutex_unlock(&table_lock);
}

const vat_atom *vat_atom_intern_n(const char *name, size_t len) {
  return intern(name, len, false);
}

const vat_atom *vat_atom_intern_weak_n(const char *name, size_t len) {
  return intern(name, len, true);
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
