/* Membranes (see vat/caps.h).
 *
 * A caretaker guards one ref; but the target may hand out other refs in
 * its answers, and the holder may pass its own refs in, and those would
 * escape revocation. A membrane closes the gap: every ref crossing it is
 * swapped for a proxy of the same membrane, so after revocation nothing
 * obtained through it works any more.
 *
 * Each proxy knows the side its target lives on. A message arriving at a
 * proxy crosses towards that side: plain refs in it come from the other
 * side and are wrapped; proxies of this membrane whose targets live on the
 * destination side are unwrapped, so a ref that goes out and comes back
 * is itself again and never wrapped twice.
 *
 * Proxies are made only in turns of proxies, so all of a membrane's
 * proxies live in one vat, and its tables need no lock. */
#define GC_THREADS 1
#include <gc/gc.h>

#include "caps_internal.h"
#include "vat/caps.h"

enum { INSIDE = 0, OUTSIDE = 1 };

/* An open-addressing map from pointer to pointer. */
typedef struct ptrmap {
  void **keys;
  void **vals;
  size_t cap; /* a power of two, or 0 */
  size_t n;
} ptrmap;

typedef struct membrane {
  caps__cell *cell;
  ptrmap proxies; /* proxy ref -> its proxy state */
  ptrmap made[2]; /* per side: target ref -> proxy ref */
} membrane;

typedef struct proxy {
  membrane *m;
  vat_ref *target;
  int side; /* where target lives */
} proxy;

static size_t hash_ptr(const void *p, size_t cap) {
  uint64_t h = (uint64_t)(uintptr_t)p * 0x9E3779B97F4A7C15ULL;
  return (size_t)(h >> 32) & (cap - 1);
}

static void *map_get(const ptrmap *m, const void *key) {
  if (m->cap == 0)
    return NULL;
  for (size_t i = hash_ptr(key, m->cap);; i = (i + 1) & (m->cap - 1)) {
    if (m->keys[i] == key)
      return m->vals[i];
    if (m->keys[i] == NULL)
      return NULL;
  }
}

static int map_put(ptrmap *m, void *key, void *val) {
  if (2 * (m->n + 1) > m->cap) {
    size_t cap = m->cap ? 2 * m->cap : 16;
    ptrmap bigger = {.keys = GC_MALLOC(cap * sizeof(void *)),
                     .vals = GC_MALLOC(cap * sizeof(void *)),
                     .cap = cap};
    if (bigger.keys == NULL || bigger.vals == NULL)
      return VAT_ENOMEM;
    for (size_t i = 0; i < m->cap; i++)
      if (m->keys[i] != NULL)
        (void)map_put(&bigger, m->keys[i], m->vals[i]);
    *m = bigger;
  }
  size_t i = hash_ptr(key, m->cap);
  while (m->keys[i] != NULL && m->keys[i] != key)
    i = (i + 1) & (m->cap - 1);
  if (m->keys[i] == NULL)
    m->n++;
  m->keys[i] = key;
  m->vals[i] = val;
  return VAT_OK;
}

static void relay(vat_turn *turn, void *state, const vat_atom *selector,
                  vat_value value);

static const vat_entity_def proxy_def = {.state_size = sizeof(proxy),
                                         .receive = relay};

static int proxy_new(vat_turn *turn, vat_system *sys, membrane *m,
                     vat_ref *target, int side, vat_ref **out) {
  vat_ref *ref = map_get(&m->made[side], target);
  if (ref != NULL) {
    *out = ref;
    return VAT_OK;
  }
  proxy *p;
  int rc = caps__entity(turn, sys, &proxy_def, &ref, (void **)&p);
  if (rc != VAT_OK)
    return rc;
  *p = (proxy){.m = m, .target = target, .side = side};
  if ((rc = map_put(&m->proxies, ref, p)) != VAT_OK ||
      (rc = map_put(&m->made[side], target, ref)) != VAT_OK)
    return rc;
  *out = ref;
  return VAT_OK;
}

/* Rewrites `v` for delivery on side `to`. VAT_ENOTSUP: it holds a map or
 * a promise, which may hide refs the public API cannot reach. */
static int wrap(vat_turn *turn, membrane *m, vat_value v, int to,
                vat_value *out) {
  switch (vat_type_of(v)) {
  case VAT_T_REF: {
    vat_ref *ref = vat_value_ref(v);
    proxy *p = map_get(&m->proxies, ref);
    if (p != NULL && p->side == to) {
      *out = vat_ref_value(p->target);
      return VAT_OK;
    }
    int rc = proxy_new(turn, NULL, m, ref, 1 - to, &ref);
    if (rc == VAT_OK)
      *out = vat_ref_value(ref);
    return rc;
  }
  case VAT_T_LIST:
  case VAT_T_RECORD: {
    size_t n = vat_len(v);
    vat_value *items = GC_MALLOC(n > 0 ? n * sizeof *items : 1);
    if (items == NULL)
      return VAT_ENOMEM;
    for (size_t i = 0; i < n; i++) {
      int rc = wrap(turn, m, vat_at(v, i), to, &items[i]);
      if (rc != VAT_OK)
        return rc;
    }
    *out = vat_type_of(v) == VAT_T_LIST
               ? vat_list(items, n)
               : vat_record(vat_record_label(v), items, n);
    return vat_is_null(*out) ? VAT_ENOMEM : VAT_OK;
  }
  case VAT_T_ERROR: {
    vat_value payload;
    int rc = wrap(turn, m, vat_error_payload(v), to, &payload);
    if (rc != VAT_OK)
      return rc;
    *out = vat_error(vat_error_code(v), payload);
    return vat_is_null(*out) ? VAT_ENOMEM : VAT_OK;
  }
  case VAT_T_MAP:
  case VAT_T_PROMISE:
    return VAT_ENOTSUP;
  default: /* no refs inside */
    *out = v;
    return VAT_OK;
  }
}

static void relay(vat_turn *turn, void *state, const vat_atom *selector,
                  vat_value value) {
  proxy *p = state;
  if (caps__is_revoked(p->m->cell)) {
    caps__refuse(turn, value, vat_atom_revoked(), vat_null());
    return;
  }
  vat_value crossed;
  int rc = wrap(turn, p->m, value, p->side, &crossed);
  if (rc == VAT_ENOTSUP)
    caps__refuse(turn, value, vat_atom_refused(),
                 vat_atom_named("unwrappable"));
  else if (rc == VAT_OK)
    (void)caps__forward(turn, p->target, selector, crossed);
}

static int make(vat_turn *turn, vat_system *sys, vat_ref *target,
                vat_ref **wrapped, vat_ref **revoker) {
  if (target == NULL || wrapped == NULL || revoker == NULL)
    return VAT_EINVAL;
  membrane *m = GC_MALLOC(sizeof *m);
  caps__cell *cell = GC_MALLOC(sizeof *cell);
  if (m == NULL || cell == NULL)
    return VAT_ENOMEM;
  atomic_init(&cell->revoked, false);
  m->cell = cell;
  vat_ref *outer, *rev;
  int rc = proxy_new(turn, sys, m, target, INSIDE, &outer);
  if (rc == VAT_OK)
    rc = caps__revoker_new(turn, sys, cell, &rev);
  if (rc != VAT_OK)
    return rc;
  *wrapped = outer;
  *revoker = rev;
  return VAT_OK;
}

int vat_membrane_new(vat_turn *turn, vat_ref *target, vat_ref **wrapped,
                     vat_ref **revoker) {
  if (turn == NULL)
    return VAT_ENOTINTURN;
  return make(turn, NULL, target, wrapped, revoker);
}

int vat_host_membrane_new(vat_system *sys, vat_ref *target, vat_ref **wrapped,
                          vat_ref **revoker) {
  if (sys == NULL)
    return VAT_EINVAL;
  return make(NULL, sys, target, wrapped, revoker);
}
