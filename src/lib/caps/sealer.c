/* Sealer / unsealer pairs (see vat/caps.h).
 *
 * A box must be an ordinary value, so it can travel in any message, yet
 * show nothing of its content. The public value types can all be read, so
 * the content never goes into the box: the box is a fresh bytes object,
 * recognised by its identity, and the pair keeps a table from box to
 * content. The table holds boxes hidden from the collector (so it does not
 * keep them alive) and a finalizer on each box drops its entry once the
 * box is garbage. Forging a box means producing an object of that
 * identity, which only vat_seal does.
 *
 * Finalizers may run inside any allocation, on any thread, so nothing is
 * allocated while the pair's lock is held: a finalizer taking that lock on
 * the same thread would deadlock. */
#include <pthread.h>

#define GC_THREADS 1
#include <gc/gc.h>

#include "vat/caps.h"

typedef struct entry {
  struct entry *next;
  GC_hidden_pointer box;
  vat_value content;
} entry;

typedef struct pair {
  pthread_mutex_t lock;
  entry **buckets;
  size_t nbuckets; /* a power of two */
  size_t count;
} pair;

struct vat_sealer {
  pair *pair;
};
struct vat_unsealer {
  pair *pair;
};

static size_t slot(const pair *p, GC_hidden_pointer key) {
  uint64_t h = (uint64_t)key * 0x9E3779B97F4A7C15ULL;
  return (size_t)(h >> 32) & (p->nbuckets - 1);
}

int vat_sealer_pair_new(vat_sealer **sealer, vat_unsealer **unsealer) {
  if (sealer == NULL || unsealer == NULL)
    return VAT_EINVAL;
  pair *p = GC_MALLOC(sizeof *p);
  vat_sealer *s = GC_MALLOC(sizeof *s);
  vat_unsealer *u = GC_MALLOC(sizeof *u);
  entry **buckets = GC_MALLOC(16 * sizeof *buckets);
  if (p == NULL || s == NULL || u == NULL || buckets == NULL)
    return VAT_ENOMEM;
  pthread_mutex_init(&p->lock, NULL);
  p->buckets = buckets;
  p->nbuckets = 16;
  s->pair = p;
  u->pair = p;
  *sealer = s;
  *unsealer = u;
  return VAT_OK;
}

/* Runs when a box becomes garbage. */
static void forget(void *box, void *cd) {
  pair *p = cd;
  GC_hidden_pointer key = GC_HIDE_POINTER(box);
  pthread_mutex_lock(&p->lock);
  for (entry **e = &p->buckets[slot(p, key)]; *e != NULL; e = &(*e)->next) {
    if ((*e)->box == key) {
      entry *dead = *e;
      *e = dead->next;
      dead->next = NULL; /* a stale link would retain the chain */
      p->count--;
      break;
    }
  }
  pthread_mutex_unlock(&p->lock);
}

/* Doubles the table when it is loaded; the new array is made before the
 * lock is taken and thrown away if another thread grew it first. */
static void maybe_grow(pair *p) {
  pthread_mutex_lock(&p->lock);
  size_t want = p->count >= 2 * p->nbuckets ? 2 * p->nbuckets : 0;
  pthread_mutex_unlock(&p->lock);
  if (want == 0)
    return;
  entry **fresh = GC_MALLOC(want * sizeof *fresh);
  if (fresh == NULL)
    return; /* longer chains, still correct */
  pthread_mutex_lock(&p->lock);
  if (p->nbuckets < want) {
    entry **old = p->buckets;
    size_t n = p->nbuckets;
    p->buckets = fresh;
    p->nbuckets = want;
    for (size_t i = 0; i < n; i++) {
      for (entry *e = old[i], *next; e != NULL; e = next) {
        next = e->next;
        size_t s = slot(p, e->box);
        e->next = fresh[s];
        fresh[s] = e;
      }
      old[i] = NULL;
    }
  }
  pthread_mutex_unlock(&p->lock);
}

int vat_seal(vat_sealer *sealer, vat_value content, vat_value *box) {
  if (sealer == NULL || box == NULL)
    return VAT_EINVAL;
  pair *p = sealer->pair;
  static const char text[] = "sealed";
  vat_value b = vat_bytes(text, sizeof text - 1);
  entry *e = GC_MALLOC(sizeof *e);
  if (vat_is_null(b) || e == NULL)
    return VAT_ENOMEM;
  void *base = GC_base((void *)b.as.obj);
  e->box = GC_HIDE_POINTER(base);
  e->content = content;
  maybe_grow(p);
  GC_REGISTER_FINALIZER_NO_ORDER(base, forget, p, NULL, NULL);
  pthread_mutex_lock(&p->lock);
  size_t s = slot(p, e->box);
  e->next = p->buckets[s];
  p->buckets[s] = e;
  p->count++;
  pthread_mutex_unlock(&p->lock);
  *box = b;
  return VAT_OK;
}

int vat_unseal(vat_unsealer *unsealer, vat_value box, vat_value *content) {
  if (unsealer == NULL || content == NULL)
    return VAT_EINVAL;
  if (vat_type_of(box) != VAT_T_BYTES)
    return VAT_ENOTFOUND;
  pair *p = unsealer->pair;
  GC_hidden_pointer key = GC_HIDE_POINTER(GC_base((void *)box.as.obj));
  int rc = VAT_ENOTFOUND;
  pthread_mutex_lock(&p->lock);
  for (entry *e = p->buckets[slot(p, key)]; e != NULL; e = e->next) {
    if (e->box == key) {
      *content = e->content;
      rc = VAT_OK;
      break;
    }
  }
  pthread_mutex_unlock(&p->lock);
  return rc;
}
