/* libvat — values and atoms.
 *
 * A vat_value is what a dynamic message carries, what an exit reason is, and
 * what a promise resolves to. It is a small struct passed by value: scalars
 * (null, booleans, integers, floats, atoms) live inside it; everything else
 * points to an immutable GC object made by the constructors below. Values are
 * immutable once made, so they are shared between vats and threads without
 * copying. The data model follows the E family's wire formats (null, bool,
 * integer, float, string, bytes, list, record, map, atom, ref, error), so a
 * value can later cross a process boundary unchanged.
 *
 * Atoms are interned names: two atoms with the same name are the same
 * pointer, so comparing selectors is one pointer comparison. The atom table is
 * process-wide (atoms are shared by every system). An atom the program
 * interns (vat_atom_intern) is permanent; intern selectors once, at
 * start-up, and keep the pointers. Names that come from outside (a peer's
 * record keys and method names) are interned weakly
 * (vat_atom_intern_weak_n): such an atom lives while a value refers to it,
 * so a stream of new names does not grow the process for ever.
 *
 * Threads: every function here may be called from any registered thread,
 * inside or outside a turn.
 */
#ifndef VAT_VALUE_H
#define VAT_VALUE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct vat_atom vat_atom;       /* interned name; compare by pointer */
typedef struct vat_entity vat_ref;      /* see vat/core.h */
typedef struct vat_promise vat_promise; /* see vat/promise.h */

typedef enum vat_type {
  VAT_T_NULL = 0, /* the zero-initialised value is null */
  VAT_T_BOOL,
  VAT_T_INT,   /* int64_t */
  VAT_T_FLOAT, /* double */
  VAT_T_ATOM,
  VAT_T_STRING, /* UTF-8 bytes, length-counted, NUL-terminated copy */
  VAT_T_BYTES,
  VAT_T_LIST,    /* immutable array of values */
  VAT_T_RECORD,  /* tagged tuple: an atom label and fields */
  VAT_T_MAP,     /* immutable map from values to values */
  VAT_T_REF,     /* a ref to an entity */
  VAT_T_ERROR,   /* an error: an atom code and an optional payload value */
  VAT_T_PROMISE, /* a promise (vat/promise.h); compared by identity */
} vat_type;

typedef struct vat_value {
  vat_type type;
  union {
    bool b;
    int64_t i;
    double f;
    const vat_atom *atom;
    vat_ref *ref;
    const void *obj; /* string, bytes, list, record, map, error: GC object */
  } as;
} vat_value;

/* --- Atoms ------------------------------------------------------------- */

/** The atom named `name` (NUL-terminated), interning it on first use.
 *  Returns NULL only when `name` is NULL or memory is exhausted. */
const vat_atom *vat_atom_intern(const char *name);
/** Like vat_atom_intern for a name of `len` bytes (may contain NUL). */
const vat_atom *vat_atom_intern_n(const char *name, size_t len);
/** The atom named by `len` bytes at `name`, for a name from outside the
 *  program. A name already interned, strongly or weakly and still alive,
 *  gives the same atom as vat_atom_intern_n, so identity comparison holds
 *  between the two. Otherwise the atom is made weakly: it lives while a
 *  value or pointer the collector sees (GC memory, a stack, a message)
 *  refers to it, then is collected and forgotten by the table, and a later
 *  intern of the name makes a new one. A strong intern of the name while
 *  it is alive makes it permanent. Keep a weak atom only where the
 *  collector looks. NULL for a NULL name or out of memory. */
const vat_atom *vat_atom_intern_weak_n(const char *name, size_t len);
/** The atom's name, NUL-terminated; valid while the atom is (a strongly
 *  interned atom's for ever). */
const char *vat_atom_name(const vat_atom *atom);
/** The length of the atom's name in bytes. */
size_t vat_atom_len(const vat_atom *atom);

/* --- Constructors ------------------------------------------------------ */
/* Constructors of heap values copy what they are given. They return a
 * VAT_T_NULL value only when memory is exhausted or an argument is invalid
 * (NULL data with a non-zero length, a NULL atom label); check with
 * vat_is_null() where that matters. */

vat_value vat_null(void);
vat_value vat_bool(bool b);
vat_value vat_int(int64_t i);
vat_value vat_float(double f);
vat_value vat_atom_value(const vat_atom *atom);
/** `name` is interned. */
vat_value vat_atom_named(const char *name);
vat_value vat_string(const char *utf8);
vat_value vat_string_n(const char *utf8, size_t len);
vat_value vat_bytes(const void *data, size_t len);
vat_value vat_list(const vat_value *items, size_t n);
vat_value vat_record(const vat_atom *label, const vat_value *fields, size_t n);
/** A map from keys[i] to vals[i]; a key given twice keeps the last value. */
vat_value vat_map(const vat_value *keys, const vat_value *vals, size_t n);
vat_value vat_ref_value(vat_ref *ref);
/** A value carrying a promise (null for a NULL promise). */
vat_value vat_promise_value(vat_promise *promise);
/** An error with an atom code and a payload (vat_null() for none). */
vat_value vat_error(const vat_atom *code, vat_value payload);

/* --- Accessors --------------------------------------------------------- */
/* Accessors of the wrong type return a neutral result (0, NULL, false, a
 * null value); the vat_get_* forms report VAT_ETYPE instead. */

static inline vat_type vat_type_of(vat_value v) {
  return v.type;
}
static inline bool vat_is_null(vat_value v) {
  return v.type == VAT_T_NULL;
}
/** True when v is the atom `atom`. */
static inline bool vat_is_atom(vat_value v, const vat_atom *atom) {
  return v.type == VAT_T_ATOM && v.as.atom == atom;
}

int vat_get_int(vat_value v, int64_t *out);
int vat_get_float(vat_value v, double *out);
int vat_get_bool(vat_value v, bool *out);

const char *
vat_string_data(vat_value v); /* NUL-terminated; NULL if not a string */
size_t vat_string_len(vat_value v);
const void *vat_bytes_data(vat_value v);
size_t vat_bytes_len(vat_value v);
/** Number of items of a list, fields of a record, or entries of a map. */
size_t vat_len(vat_value v);
/** Item i of a list or field i of a record; null when out of range. */
vat_value vat_at(vat_value v, size_t i);
const vat_atom *vat_record_label(vat_value v);
/** The value of `key` in map `m`: VAT_OK, VAT_ENOTFOUND or VAT_ETYPE. */
int vat_map_get(vat_value m, vat_value key, vat_value *out);
const vat_atom *vat_error_code(vat_value v);
vat_value vat_error_payload(vat_value v);
vat_ref *vat_value_ref(vat_value v);
/** The promise a VAT_T_PROMISE value carries, or NULL. */
vat_promise *vat_value_promise(vat_value v);

/* --- Comparison and printing ------------------------------------------- */

/** Structural equality (refs and atoms by identity; floats by value). */
bool vat_equal(vat_value a, vat_value b);
/** A total order: by type first, then by content. */
int vat_compare(vat_value a, vat_value b);
/** A hash consistent with vat_equal. */
uint64_t vat_hash(vat_value v);
/** Writes a readable form of v into buf (snprintf rules: always
 *  NUL-terminated when size > 0; returns the length the full text needs). */
size_t vat_format(vat_value v, char *buf, size_t size);

#ifdef __cplusplus
}
#endif

#endif
