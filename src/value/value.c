/* Value constructors and accessors. See value_internal.h for the layouts. */
#include <string.h>

#include "util/gc.h"
#include "value/value_internal.h"
#include "vat/error.h"

/* Null is also what a constructor returns when it fails. */
static vat_value null_value(void) {
  return (vat_value){.type = VAT_T_NULL};
}

static vat_value heap_value(vat_type type, const void *obj) {
  return (vat_value){.type = type, .as.obj = obj};
}

/* n * size + header without overflow; SIZE_MAX when it would overflow, which
 * no allocator can satisfy. */
static size_t object_size(size_t header, size_t n, size_t size) {
  if (n > (SIZE_MAX - header) / size)
    return SIZE_MAX;
  return header + n * size;
}

/* --- Constructors ------------------------------------------------------ */

vat_value vat_null(void) {
  return null_value();
}

vat_value vat_bool(bool b) {
  return (vat_value){.type = VAT_T_BOOL, .as.b = b};
}

vat_value vat_int(int64_t i) {
  return (vat_value){.type = VAT_T_INT, .as.i = i};
}

vat_value vat_float(double f) {
  return (vat_value){.type = VAT_T_FLOAT, .as.f = f};
}

vat_value vat_atom_value(const vat_atom *atom) {
  if (atom == NULL)
    return null_value();
  return (vat_value){.type = VAT_T_ATOM, .as.atom = atom};
}

vat_value vat_atom_named(const char *name) {
  return vat_atom_value(vat_atom_intern(name));
}

static vat_value make_blob(vat_type type, const void *data, size_t len) {
  if (data == NULL && len > 0)
    return null_value();
  size_t size = object_size(sizeof(vat__blob) + 1, len, 1);
  if (size == SIZE_MAX)
    return null_value();
  vat__blob *blob = GC_MALLOC_ATOMIC(size);
  if (blob == NULL)
    return null_value();
  blob->len = len;
  if (len > 0)
    memcpy(blob->data, data, len);
  blob->data[len] = '\0';
  return heap_value(type, blob);
}

vat_value vat_string(const char *utf8) {
  if (utf8 == NULL)
    return null_value();
  return make_blob(VAT_T_STRING, utf8, strlen(utf8));
}

vat_value vat_string_n(const char *utf8, size_t len) {
  return make_blob(VAT_T_STRING, utf8, len);
}

vat_value vat_bytes(const void *data, size_t len) {
  return make_blob(VAT_T_BYTES, data, len);
}

vat_value vat_list(const vat_value *items, size_t n) {
  if (items == NULL && n > 0)
    return null_value();
  size_t size = object_size(sizeof(vat__list), n, sizeof(vat_value));
  if (size == SIZE_MAX)
    return null_value();
  vat__list *list = GC_MALLOC(size);
  if (list == NULL)
    return null_value();
  list->n = n;
  if (n > 0)
    memcpy(list->items, items, n * sizeof(vat_value));
  return heap_value(VAT_T_LIST, list);
}

vat_value vat_record(const vat_atom *label, const vat_value *fields, size_t n) {
  if (label == NULL || (fields == NULL && n > 0))
    return null_value();
  size_t size = object_size(sizeof(vat__record), n, sizeof(vat_value));
  if (size == SIZE_MAX)
    return null_value();
  vat__record *rec = GC_MALLOC(size);
  if (rec == NULL)
    return null_value();
  rec->label = label;
  rec->n = n;
  if (n > 0)
    memcpy(rec->fields, fields, n * sizeof(vat_value));
  return heap_value(VAT_T_RECORD, rec);
}

/* A stable merge of the sorted runs src[lo, mid) and src[mid, hi) into dst:
 * on equal keys the earlier entry goes first, so that after sorting the last
 * of a run of equal keys is the one given last. */
static void merge(const vat__map_entry *src, vat__map_entry *dst, size_t lo,
                  size_t mid, size_t hi) {
  size_t i = lo, j = mid, k = lo;
  while (i < mid && j < hi) {
    if (vat_compare(src[j].key, src[i].key) < 0)
      dst[k++] = src[j++];
    else
      dst[k++] = src[i++];
  }
  while (i < mid)
    dst[k++] = src[i++];
  while (j < hi)
    dst[k++] = src[j++];
}

/* Sorts a[0, n) stably, using tmp[0, n) as scratch; returns whichever of the
 * two holds the result. Bottom-up, so no recursion on user-sized input. */
static vat__map_entry *sort_entries(vat__map_entry *a, vat__map_entry *tmp,
                                    size_t n) {
  vat__map_entry *src = a, *dst = tmp;
  for (size_t width = 1; width < n; width *= 2) {
    for (size_t lo = 0; lo < n; lo += 2 * width) {
      size_t mid = lo + width < n ? lo + width : n;
      size_t hi = mid + width < n ? mid + width : n;
      merge(src, dst, lo, mid, hi);
    }
    vat__map_entry *t = src;
    src = dst;
    dst = t;
  }
  return src;
}

vat_value vat_map(const vat_value *keys, const vat_value *vals, size_t n) {
  if ((keys == NULL || vals == NULL) && n > 0)
    return null_value();
  size_t size = object_size(sizeof(vat__map), n, sizeof(vat__map_entry));
  if (size == SIZE_MAX || n > SIZE_MAX / 2 / sizeof(vat__map_entry))
    return null_value();
  vat__map *map = GC_MALLOC(size);
  if (map == NULL)
    return null_value();
  if (n == 0) {
    map->n = 0;
    return heap_value(VAT_T_MAP, map);
  }
  /* The scratch holds values, so it must be scanned: GC memory, not malloc,
   * though the caller's arrays keep the same objects alive in any case. */
  vat__map_entry *scratch = GC_MALLOC(2 * n * sizeof(vat__map_entry));
  if (scratch == NULL)
    return null_value();
  for (size_t i = 0; i < n; i++)
    scratch[i] = (vat__map_entry){.key = keys[i], .val = vals[i]};
  const vat__map_entry *sorted = sort_entries(scratch, scratch + n, n);
  size_t m = 0;
  for (size_t i = 0; i < n; i++) {
    if (i + 1 < n && vat_compare(sorted[i].key, sorted[i + 1].key) == 0)
      continue; /* a later duplicate follows and wins */
    map->entries[m++] = sorted[i];
  }
  map->n = m;
  GC_FREE(scratch);
  return heap_value(VAT_T_MAP, map);
}

vat_value vat_ref_value(vat_ref *ref) {
  if (ref == NULL)
    return null_value();
  return (vat_value){.type = VAT_T_REF, .as.ref = ref};
}

vat_value vat_promise_value(vat_promise *promise) {
  if (promise == NULL)
    return null_value();
  return (vat_value){.type = VAT_T_PROMISE, .as.obj = promise};
}

vat_value vat_error(const vat_atom *code, vat_value payload) {
  if (code == NULL)
    return null_value();
  vat__error *err = GC_MALLOC(sizeof *err);
  if (err == NULL)
    return null_value();
  err->code = code;
  err->payload = payload;
  return heap_value(VAT_T_ERROR, err);
}

/* --- Accessors --------------------------------------------------------- */

int vat_get_int(vat_value v, int64_t *out) {
  if (out == NULL)
    return VAT_EINVAL;
  if (v.type != VAT_T_INT)
    return VAT_ETYPE;
  *out = v.as.i;
  return VAT_OK;
}

int vat_get_float(vat_value v, double *out) {
  if (out == NULL)
    return VAT_EINVAL;
  if (v.type != VAT_T_FLOAT)
    return VAT_ETYPE;
  *out = v.as.f;
  return VAT_OK;
}

int vat_get_bool(vat_value v, bool *out) {
  if (out == NULL)
    return VAT_EINVAL;
  if (v.type != VAT_T_BOOL)
    return VAT_ETYPE;
  *out = v.as.b;
  return VAT_OK;
}

const char *vat_string_data(vat_value v) {
  if (v.type != VAT_T_STRING)
    return NULL;
  return ((const vat__blob *)v.as.obj)->data;
}

size_t vat_string_len(vat_value v) {
  if (v.type != VAT_T_STRING)
    return 0;
  return ((const vat__blob *)v.as.obj)->len;
}

const void *vat_bytes_data(vat_value v) {
  if (v.type != VAT_T_BYTES)
    return NULL;
  return ((const vat__blob *)v.as.obj)->data;
}

size_t vat_bytes_len(vat_value v) {
  if (v.type != VAT_T_BYTES)
    return 0;
  return ((const vat__blob *)v.as.obj)->len;
}

size_t vat_len(vat_value v) {
  switch (v.type) {
  case VAT_T_LIST:
    return ((const vat__list *)v.as.obj)->n;
  case VAT_T_RECORD:
    return ((const vat__record *)v.as.obj)->n;
  case VAT_T_MAP:
    return ((const vat__map *)v.as.obj)->n;
  default:
    return 0;
  }
}

vat_value vat_at(vat_value v, size_t i) {
  if (v.type == VAT_T_LIST) {
    const vat__list *list = v.as.obj;
    return i < list->n ? list->items[i] : null_value();
  }
  if (v.type == VAT_T_RECORD) {
    const vat__record *rec = v.as.obj;
    return i < rec->n ? rec->fields[i] : null_value();
  }
  return null_value();
}

const vat_atom *vat_record_label(vat_value v) {
  if (v.type != VAT_T_RECORD)
    return NULL;
  return ((const vat__record *)v.as.obj)->label;
}

int vat_map_get(vat_value m, vat_value key, vat_value *out) {
  if (out == NULL)
    return VAT_EINVAL;
  if (m.type != VAT_T_MAP)
    return VAT_ETYPE;
  const vat__map *map = m.as.obj;
  size_t lo = 0, hi = map->n;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    int c = vat_compare(key, map->entries[mid].key);
    if (c == 0) {
      *out = map->entries[mid].val;
      return VAT_OK;
    }
    if (c < 0)
      hi = mid;
    else
      lo = mid + 1;
  }
  return VAT_ENOTFOUND;
}

const vat_atom *vat_error_code(vat_value v) {
  if (v.type != VAT_T_ERROR)
    return NULL;
  return ((const vat__error *)v.as.obj)->code;
}

vat_value vat_error_payload(vat_value v) {
  if (v.type != VAT_T_ERROR)
    return null_value();
  return ((const vat__error *)v.as.obj)->payload;
}

vat_ref *vat_value_ref(vat_value v) {
  return v.type == VAT_T_REF ? v.as.ref : NULL;
}

vat_promise *vat_value_promise(vat_value v) {
  return v.type == VAT_T_PROMISE ? (vat_promise *)v.as.obj : NULL;
}
