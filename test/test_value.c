/* Values and atoms: constructors, accessors, order, hashing and printing. */
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "suites.h"
#include "support.h"
#include "util/gc.h" /* before any pthread_create: it registers the threads */

#define LEN(a) (sizeof(a) / sizeof((a)[0]))

/* Refs are opaque; the value layer only stores and compares their addresses,
 * so any distinct objects stand in for entities here. */
static max_align_t fake_entities[4];
#define FAKE_REF(i) ((vat_ref *)(void *)&fake_entities[(i)])

static const char *fmt(vat_value v) {
  static char buf[512];
  size_t n = vat_format(v, buf, sizeof buf);
  ck_assert_uint_lt(n, sizeof buf);
  ck_assert_uint_eq(n, strlen(buf));
  return buf;
}

static int sign(int c) {
  return (c > 0) - (c < 0);
}

/* --- Atoms ------------------------------------------------------------- */

START_TEST(atom_interning_is_identity) {
  const vat_atom *a = vat_atom_intern("hello");
  ck_assert_ptr_nonnull(a);
  ck_assert_ptr_eq(vat_atom_intern("hello"), a);
  ck_assert_ptr_eq(vat_atom_intern_n("hello world", 5), a);
  ck_assert_ptr_ne(vat_atom_intern("hell"), a);
  ck_assert_ptr_ne(vat_atom_intern("Hello"), a);
  ck_assert_str_eq(vat_atom_name(a), "hello");
  ck_assert_uint_eq(vat_atom_len(a), 5);

  /* The name is copied, not borrowed. */
  char name[] = "mutable";
  const vat_atom *m = vat_atom_intern(name);
  name[0] = 'M';
  ck_assert_str_eq(vat_atom_name(m), "mutable");
  ck_assert_ptr_eq(vat_atom_intern("mutable"), m);
}
END_TEST

START_TEST(atom_empty_and_invalid) {
  const vat_atom *e = vat_atom_intern("");
  ck_assert_ptr_nonnull(e);
  ck_assert_ptr_eq(vat_atom_intern_n("xyz", 0), e);
  ck_assert_str_eq(vat_atom_name(e), "");
  ck_assert_uint_eq(vat_atom_len(e), 0);

  ck_assert_ptr_null(vat_atom_intern(NULL));
  ck_assert_ptr_null(vat_atom_intern_n(NULL, 0));
  ck_assert_ptr_null(vat_atom_intern_n(NULL, 3));
  ck_assert_ptr_null(vat_atom_name(NULL));
  ck_assert_uint_eq(vat_atom_len(NULL), 0);
}
END_TEST

START_TEST(atom_embedded_nul) {
  const vat_atom *ab = vat_atom_intern_n("a\0b", 3);
  const vat_atom *a0 = vat_atom_intern_n("a\0", 2);
  const vat_atom *a = vat_atom_intern("a");
  ck_assert_ptr_nonnull(ab);
  ck_assert_ptr_ne(ab, a);
  ck_assert_ptr_ne(ab, a0);
  ck_assert_ptr_ne(a0, a);
  ck_assert_ptr_eq(vat_atom_intern_n("a\0b", 3), ab);
  ck_assert_uint_eq(vat_atom_len(ab), 3);
  ck_assert_int_eq(memcmp(vat_atom_name(ab), "a\0b", 4), 0);
  ck_assert_uint_eq(vat_atom_len(a0), 2);
  /* The C-string view stops at the first NUL. */
  ck_assert_str_eq(vat_atom_name(ab), "a");
}
END_TEST

START_TEST(atom_table_grows_and_survives_collection) {
  enum { N = 20000 };
  static const vat_atom *atoms[N];
  char name[32];
  for (int i = 0; i < N; i++) {
    snprintf(name, sizeof name, "grow-%d", i);
    atoms[i] = vat_atom_intern(name);
    ck_assert_ptr_nonnull(atoms[i]);
  }
  /* Nothing but the table refers to most atoms now; they must stay. */
  for (int i = 0; i < N; i++)
    atoms[i] = NULL;
  GC_gcollect();
  for (int i = 0; i < 1000; i++)
    (void)vat_string("garbage to reuse freed memory");
  GC_gcollect();
  for (int i = 0; i < N; i++) {
    snprintf(name, sizeof name, "grow-%d", i);
    const vat_atom *a = vat_atom_intern(name);
    ck_assert_str_eq(vat_atom_name(a), name);
    ck_assert_ptr_eq(vat_atom_intern(name), a);
  }
}
END_TEST

enum { N_THREADS = 8, N_SHARED = 4096, N_OWN = 500 };

typedef struct {
  int id;
  const vat_atom *shared[N_SHARED];
  const vat_atom *own[N_OWN];
} intern_job;

static pthread_barrier_t intern_start;

static void *intern_worker(void *arg) {
  intern_job *job = arg;
  char name[48];
  pthread_barrier_wait(&intern_start);
  for (int i = 0; i < N_SHARED; i++) {
    /* Threads walk the shared names in different orders (an odd multiplier
     * permutes a power of two), so that they race to create the same atom
     * and to grow the table. */
    int k = (i * (2 * job->id + 1)) % N_SHARED;
    snprintf(name, sizeof name, "shared-%d", k);
    job->shared[k] = vat_atom_intern(name);
    if (i < N_OWN) {
      snprintf(name, sizeof name, "own-%d-%d", job->id, i);
      job->own[i] = vat_atom_intern(name);
    }
    if (i % 256 == 0)
      (void)vat_list(NULL, 0); /* allocate, so collections run meanwhile */
  }
  return NULL;
}

START_TEST(atom_interning_from_threads) {
  static intern_job jobs[N_THREADS];
  pthread_t threads[N_THREADS];
  ck_assert_int_eq(pthread_barrier_init(&intern_start, NULL, N_THREADS), 0);
  for (int t = 0; t < N_THREADS; t++) {
    jobs[t].id = t;
    ck_assert_int_eq(pthread_create(&threads[t], NULL, intern_worker, &jobs[t]),
                     0);
  }
  for (int t = 0; t < N_THREADS; t++)
    ck_assert_int_eq(pthread_join(threads[t], NULL), 0);
  pthread_barrier_destroy(&intern_start);

  char name[48];
  for (int k = 0; k < N_SHARED; k++) {
    snprintf(name, sizeof name, "shared-%d", k);
    const vat_atom *a = vat_atom_intern(name);
    ck_assert_str_eq(vat_atom_name(a), name);
    for (int t = 0; t < N_THREADS; t++)
      ck_assert_ptr_eq(jobs[t].shared[k], a);
  }
  for (int t = 0; t < N_THREADS; t++)
    for (int i = 0; i < N_OWN; i++) {
      snprintf(name, sizeof name, "own-%d-%d", t, i);
      ck_assert_ptr_eq(vat_atom_intern(name), jobs[t].own[i]);
      ck_assert_str_eq(vat_atom_name(jobs[t].own[i]), name);
    }
}
END_TEST

/* --- Weak atoms -------------------------------------------------------- */

/* The tests watch many atoms, not one: conservative scanning may keep an
 * odd one alive through a stale word, never most of them. */
enum { WATCHED = 256 };

static atomic_int weak_collected;
static atomic_bool watched_collected[WATCHED];
/* The atoms finalized, kept so that their memory cannot come back as new
 * atoms of the same names and pass for the old ones. */
static void *volatile weak_finalized[WATCHED];

static void note_collected(void *obj, void *data) {
  size_t i = (size_t)(uintptr_t)data;
  weak_finalized[i] = obj;
  atomic_store(&watched_collected[i], true);
  atomic_fetch_add(&weak_collected, 1);
}

static void watched_name(char *buf, size_t size, const char *prefix, int i) {
  snprintf(buf, size, "%s-%d", prefix, i);
}

/* Interns WATCHED names weakly into box[], each atom watched for its
 * collection, their pointers hidden in hidden[]. Out of line, so that no
 * stray copy on the test's stack keeps an atom alive. */
__attribute__((noinline)) static void
intern_watched(const char *prefix, vat_value *box, uintptr_t *hidden) {
  atomic_store(&weak_collected, 0);
  char name[48];
  for (int i = 0; i < WATCHED; i++) {
    watched_name(name, sizeof name, prefix, i);
    const vat_atom *a = vat_atom_intern_weak_n(name, strlen(name));
    ck_assert_ptr_nonnull(a);
    ck_assert_str_eq(vat_atom_name(a), name);
    atomic_store(&watched_collected[i], false);
    GC_REGISTER_FINALIZER((void *)a, note_collected, (void *)(uintptr_t)i, NULL,
                          NULL);
    box[i] = vat_atom_value(a);
    hidden[i] = ~(uintptr_t)a;
  }
}

/* How many of the watched names (weakly or not) intern to their hidden
 * atom; with `collected` set, checks that exactly the collected ones do
 * not. */
__attribute__((noinline)) static int interning_to(const char *prefix,
                                                  const uintptr_t *hidden,
                                                  bool weak, bool collected) {
  char name[48];
  int same = 0;
  for (int i = 0; i < WATCHED; i++) {
    watched_name(name, sizeof name, prefix, i);
    const vat_atom *a = weak ? vat_atom_intern_weak_n(name, strlen(name))
                             : vat_atom_intern(name);
    ck_assert_str_eq(vat_atom_name(a), name);
    bool is = (uintptr_t)a == ~hidden[i];
    same += is;
    if (collected)
      ck_assert_msg(is != atomic_load(&watched_collected[i]),
                    "%s: collected %d, same atom %d", name,
                    (int)atomic_load(&watched_collected[i]), (int)is);
  }
  return same;
}

__attribute__((noinline)) static void scrub_stack(void) {
  volatile char junk[16384];
  for (size_t i = 0; i < sizeof junk; i++)
    junk[i] = 0;
}

static void collect_fully(void) {
  scrub_stack();
  for (int i = 0; i < 3; i++)
    GC_gcollect();
  GC_invoke_finalizers();
}

START_TEST(weak_atoms_live_while_referenced) {
  vat_value *box = GC_MALLOC(WATCHED * sizeof *box);
  uintptr_t hidden[WATCHED];
  intern_watched("weak-held", box, hidden);
  collect_fully();
  ck_assert_int_eq(atomic_load(&weak_collected), 0);
  ck_assert_int_eq(interning_to("weak-held", hidden, true, false), WATCHED);
  /* Names kept alive meanwhile make the table grow: it is rebuilt several
   * times while the atoms live, and their links must follow them. */
  enum { OTHERS = 2000 };
  vat_value *others = GC_MALLOC(OTHERS * sizeof *others);
  char name[32];
  for (int i = 0; i < OTHERS; i++) {
    int len = snprintf(name, sizeof name, "weak-other-%d", i);
    others[i] = vat_atom_value(vat_atom_intern_weak_n(name, (size_t)len));
  }
  collect_fully();
  ck_assert_int_eq(atomic_load(&weak_collected), 0);
  ck_assert_int_eq(interning_to("weak-held", hidden, true, false), WATCHED);
  /* Let go: the atoms are collected and the table forgets them, so their
   * names make new atoms. */
  for (int i = 0; i < WATCHED; i++)
    box[i] = vat_null();
  collect_fully();
  ck_assert_int_ge(atomic_load(&weak_collected), WATCHED * 9 / 10);
  interning_to("weak-held", hidden, true, true);
}
END_TEST

START_TEST(strong_intern_makes_a_weak_atom_permanent) {
  vat_value *box = GC_MALLOC(WATCHED * sizeof *box);
  uintptr_t hidden[WATCHED];
  intern_watched("weak-then-strong", box, hidden);
  ck_assert_int_eq(interning_to("weak-then-strong", hidden, false, false),
                   WATCHED);
  for (int i = 0; i < WATCHED; i++)
    box[i] = vat_null();
  collect_fully();
  ck_assert_int_eq(atomic_load(&weak_collected), 0);
  ck_assert_int_eq(interning_to("weak-then-strong", hidden, true, false),
                   WATCHED);
  ck_assert_int_eq(interning_to("weak-then-strong", hidden, false, false),
                   WATCHED);
}
END_TEST

START_TEST(weak_intern_of_a_strong_name_is_that_atom) {
  const vat_atom *a = vat_atom_intern("strong-first");
  ck_assert_ptr_eq(vat_atom_intern_weak_n("strong-first", 12), a);
  ck_assert_ptr_eq(vat_atom_intern_weak_n("strong-first-and-more", 12), a);
  ck_assert_ptr_null(vat_atom_intern_weak_n(NULL, 3));
  const vat_atom *e = vat_atom_intern_weak_n("", 0);
  ck_assert_ptr_eq(vat_atom_intern(""), e);
}
END_TEST

/* Threads intern the same names weakly, while others churn through
 * names that die (so the table is rebuilt and links cleared under them)
 * and collect. Each thread keeps its last atoms; those alive together
 * must be one atom per name. */
enum { WEAK_THREADS = 4, WEAK_SHARED = 512, WEAK_ROUNDS = 40 };

typedef struct {
  int id;
  const vat_atom *shared[WEAK_SHARED];
} weak_job;

static void *weak_worker(void *arg) {
  weak_job *job = arg;
  char name[48];
  pthread_barrier_wait(&intern_start);
  int rounds = test_quick() ? WEAK_ROUNDS / 10 : WEAK_ROUNDS;
  for (int r = 0; r < rounds; r++) {
    for (int i = 0; i < WEAK_SHARED; i++) {
      int k = (i * (2 * job->id + 1)) % WEAK_SHARED;
      int len = snprintf(name, sizeof name, "weak-shared-%d", k);
      job->shared[k] = vat_atom_intern_weak_n(name, (size_t)len);
      len = snprintf(name, sizeof name, "weak-churn-%d-%d-%d", job->id, r, i);
      (void)vat_atom_intern_weak_n(name, (size_t)len);
    }
    if (job->id == 0)
      GC_gcollect();
  }
  return NULL;
}

START_TEST(weak_interning_from_threads) {
  static weak_job jobs[WEAK_THREADS];
  pthread_t threads[WEAK_THREADS];
  ck_assert_int_eq(pthread_barrier_init(&intern_start, NULL, WEAK_THREADS), 0);
  for (int t = 0; t < WEAK_THREADS; t++) {
    jobs[t].id = t;
    ck_assert_int_eq(pthread_create(&threads[t], NULL, weak_worker, &jobs[t]),
                     0);
  }
  for (int t = 0; t < WEAK_THREADS; t++)
    ck_assert_int_eq(pthread_join(threads[t], NULL), 0);
  pthread_barrier_destroy(&intern_start);
  char name[48];
  for (int k = 0; k < WEAK_SHARED; k++) {
    int len = snprintf(name, sizeof name, "weak-shared-%d", k);
    const vat_atom *a = vat_atom_intern_weak_n(name, (size_t)len);
    ck_assert_str_eq(vat_atom_name(a), name);
    for (int t = 0; t < WEAK_THREADS; t++)
      ck_assert_ptr_eq(jobs[t].shared[k], a);
  }
}
END_TEST

/* --- Scalars ----------------------------------------------------------- */

START_TEST(scalars) {
  vat_value zero = {0};
  ck_assert(vat_is_null(zero));
  ck_assert(vat_is_null(vat_null()));
  ck_assert_int_eq(vat_type_of(vat_null()), VAT_T_NULL);

  bool b = false;
  ck_assert_int_eq(vat_type_of(vat_bool(true)), VAT_T_BOOL);
  ck_assert_vat_ok(vat_get_bool(vat_bool(true), &b));
  ck_assert(b);
  ck_assert_vat_ok(vat_get_bool(vat_bool(false), &b));
  ck_assert(!b);

  int64_t i = 0;
  ck_assert_vat_ok(vat_get_int(vat_int(INT64_MIN), &i));
  ck_assert(i == INT64_MIN);
  ck_assert_vat_ok(vat_get_int(vat_int(INT64_MAX), &i));
  ck_assert(i == INT64_MAX);

  double f = 0;
  ck_assert_vat_ok(vat_get_float(vat_float(-2.5), &f));
  ck_assert(f == -2.5);
  ck_assert_vat_ok(vat_get_float(vat_float(NAN), &f));
  ck_assert(isnan(f));
}
END_TEST

START_TEST(scalar_accessors_reject_wrong_type_and_null_out) {
  int64_t i = 7;
  double f = 7;
  bool b = true;
  ck_assert_vat_err(vat_get_int(vat_float(1.0), &i), VAT_ETYPE);
  ck_assert_vat_err(vat_get_int(vat_null(), &i), VAT_ETYPE);
  ck_assert_vat_err(vat_get_int(vat_string("1"), &i), VAT_ETYPE);
  ck_assert_vat_err(vat_get_float(vat_int(1), &f), VAT_ETYPE);
  ck_assert_vat_err(vat_get_bool(vat_int(1), &b), VAT_ETYPE);
  ck_assert_vat_err(vat_get_bool(vat_null(), &b), VAT_ETYPE);
  /* A failed get leaves *out alone. */
  ck_assert(i == 7 && f == 7 && b);

  ck_assert_vat_err(vat_get_int(vat_int(1), NULL), VAT_EINVAL);
  ck_assert_vat_err(vat_get_float(vat_float(1), NULL), VAT_EINVAL);
  ck_assert_vat_err(vat_get_bool(vat_bool(true), NULL), VAT_EINVAL);
}
END_TEST

START_TEST(atom_values) {
  const vat_atom *ok = vat_atom_intern("ok");
  vat_value v = vat_atom_value(ok);
  ck_assert_int_eq(vat_type_of(v), VAT_T_ATOM);
  ck_assert(vat_is_atom(v, ok));
  ck_assert(!vat_is_atom(v, vat_atom_intern("error")));
  ck_assert(!vat_is_atom(vat_string("ok"), ok));
  ck_assert(vat_is_atom(vat_atom_named("ok"), ok));
  ck_assert(vat_equal(vat_atom_named("ok"), v));

  ck_assert(vat_is_null(vat_atom_value(NULL)));
  ck_assert(vat_is_null(vat_atom_named(NULL)));
}
END_TEST

/* --- Strings and bytes ------------------------------------------------- */

START_TEST(strings) {
  char src[] = "héllo";
  vat_value s = vat_string(src);
  src[0] = 'H'; /* copied, not borrowed */
  ck_assert_int_eq(vat_type_of(s), VAT_T_STRING);
  ck_assert_str_eq(vat_string_data(s), "héllo");
  ck_assert_uint_eq(vat_string_len(s), strlen("héllo"));

  vat_value n = vat_string_n("a\0b\0", 3);
  ck_assert_uint_eq(vat_string_len(n), 3);
  ck_assert_int_eq(memcmp(vat_string_data(n), "a\0b", 4), 0);

  vat_value part = vat_string_n("abcdef", 3);
  ck_assert_str_eq(vat_string_data(part), "abc");

  vat_value empty = vat_string("");
  ck_assert_int_eq(vat_type_of(empty), VAT_T_STRING);
  ck_assert_str_eq(vat_string_data(empty), "");
  ck_assert(vat_equal(empty, vat_string_n(NULL, 0)));

  ck_assert(vat_is_null(vat_string(NULL)));
  ck_assert(vat_is_null(vat_string_n(NULL, 4)));

  ck_assert_ptr_null(vat_string_data(vat_bytes("abc", 3)));
  ck_assert_uint_eq(vat_string_len(vat_bytes("abc", 3)), 0);
  ck_assert_ptr_null(vat_string_data(vat_int(3)));
  ck_assert_ptr_null(vat_string_data(vat_atom_named("abc")));
}
END_TEST

START_TEST(bytes) {
  unsigned char src[] = {0, 1, 0xff, 0};
  vat_value b = vat_bytes(src, 4);
  src[1] = 9;
  ck_assert_int_eq(vat_type_of(b), VAT_T_BYTES);
  ck_assert_uint_eq(vat_bytes_len(b), 4);
  ck_assert_int_eq(memcmp(vat_bytes_data(b), "\0\1\xff\0", 4), 0);

  vat_value empty = vat_bytes(NULL, 0);
  ck_assert_int_eq(vat_type_of(empty), VAT_T_BYTES);
  ck_assert_uint_eq(vat_bytes_len(empty), 0);
  ck_assert(vat_is_null(vat_bytes(NULL, 1)));

  ck_assert(!vat_equal(vat_bytes("ab", 2), vat_string("ab")));
  ck_assert_ptr_null(vat_bytes_data(vat_string("ab")));
  ck_assert_uint_eq(vat_bytes_len(vat_string("ab")), 0);
}
END_TEST

/* --- Lists, records, errors, refs -------------------------------------- */

START_TEST(lists) {
  vat_value items[] = {vat_int(1), vat_string("two"), vat_null()};
  vat_value l = vat_list(items, LEN(items));
  items[0] = vat_int(100); /* copied */
  ck_assert_int_eq(vat_type_of(l), VAT_T_LIST);
  ck_assert_uint_eq(vat_len(l), 3);
  ck_assert(vat_equal(vat_at(l, 0), vat_int(1)));
  ck_assert_str_eq(vat_string_data(vat_at(l, 1)), "two");
  ck_assert(vat_is_null(vat_at(l, 2)));
  ck_assert(vat_is_null(vat_at(l, 3)));
  ck_assert(vat_is_null(vat_at(l, SIZE_MAX)));

  vat_value empty = vat_list(NULL, 0);
  ck_assert_int_eq(vat_type_of(empty), VAT_T_LIST);
  ck_assert_uint_eq(vat_len(empty), 0);
  ck_assert(vat_is_null(vat_list(NULL, 2)));

  ck_assert_uint_eq(vat_len(vat_int(5)), 0);
  ck_assert_uint_eq(vat_len(vat_string("abc")), 0);
  ck_assert(vat_is_null(vat_at(vat_string("abc"), 0)));
  ck_assert(vat_is_null(vat_at(vat_null(), 0)));
}
END_TEST

START_TEST(records) {
  const vat_atom *point = vat_atom_intern("point");
  vat_value fields[] = {vat_int(3), vat_int(4)};
  vat_value r = vat_record(point, fields, 2);
  ck_assert_int_eq(vat_type_of(r), VAT_T_RECORD);
  ck_assert_ptr_eq(vat_record_label(r), point);
  ck_assert_uint_eq(vat_len(r), 2);
  ck_assert(vat_equal(vat_at(r, 1), vat_int(4)));
  ck_assert(vat_is_null(vat_at(r, 2)));

  vat_value unit = vat_record(point, NULL, 0);
  ck_assert_int_eq(vat_type_of(unit), VAT_T_RECORD);
  ck_assert_uint_eq(vat_len(unit), 0);

  ck_assert(vat_is_null(vat_record(NULL, fields, 2)));
  ck_assert(vat_is_null(vat_record(point, NULL, 1)));
  ck_assert_ptr_null(vat_record_label(vat_list(fields, 2)));
  ck_assert_ptr_null(vat_record_label(vat_atom_value(point)));
  /* A list and a record with the same items differ. */
  ck_assert(!vat_equal(r, vat_list(fields, 2)));
}
END_TEST

START_TEST(errors) {
  const vat_atom *badarg = vat_atom_intern("badarg");
  vat_value e = vat_error(badarg, vat_string("why"));
  ck_assert_int_eq(vat_type_of(e), VAT_T_ERROR);
  ck_assert_ptr_eq(vat_error_code(e), badarg);
  ck_assert_str_eq(vat_string_data(vat_error_payload(e)), "why");

  vat_value bare = vat_error(badarg, vat_null());
  ck_assert(vat_is_null(vat_error_payload(bare)));
  ck_assert(!vat_equal(e, bare));

  ck_assert(vat_is_null(vat_error(NULL, vat_int(1))));
  ck_assert_ptr_null(vat_error_code(vat_atom_value(badarg)));
  ck_assert(vat_is_null(vat_error_payload(vat_int(1))));
}
END_TEST

START_TEST(refs) {
  vat_value r = vat_ref_value(FAKE_REF(0));
  ck_assert_int_eq(vat_type_of(r), VAT_T_REF);
  ck_assert_ptr_eq(vat_value_ref(r), FAKE_REF(0));
  ck_assert(vat_equal(r, vat_ref_value(FAKE_REF(0))));
  ck_assert(!vat_equal(r, vat_ref_value(FAKE_REF(1))));
  ck_assert_int_eq(
      vat_compare(vat_ref_value(FAKE_REF(0)), vat_ref_value(FAKE_REF(1))), -1);
  ck_assert(vat_hash(r) == vat_hash(vat_ref_value(FAKE_REF(0))));

  ck_assert(vat_is_null(vat_ref_value(NULL)));
  ck_assert_ptr_null(vat_value_ref(vat_int(1)));
  ck_assert_ptr_null(vat_value_ref(vat_null()));
}
END_TEST

/* --- Maps -------------------------------------------------------------- */

START_TEST(map_lookup) {
  vat_value keys[] = {vat_atom_named("b"), vat_int(1), vat_string("s"),
                      vat_float(NAN), vat_float(-0.0)};
  vat_value vals[] = {vat_int(10), vat_int(20), vat_int(30), vat_int(40),
                      vat_int(50)};
  vat_value m = vat_map(keys, vals, LEN(keys));
  ck_assert_int_eq(vat_type_of(m), VAT_T_MAP);
  ck_assert_uint_eq(vat_len(m), LEN(keys));

  vat_value out = vat_null();
  for (size_t i = 0; i < LEN(keys); i++) {
    ck_assert_vat_ok(vat_map_get(m, keys[i], &out));
    ck_assert(vat_equal(out, vals[i]));
  }
  /* Equal keys find the entry: a fresh string, another NaN, +0.0. */
  ck_assert_vat_ok(vat_map_get(m, vat_string("s"), &out));
  ck_assert(vat_equal(out, vat_int(30)));
  ck_assert_vat_ok(vat_map_get(m, vat_float(-NAN), &out));
  ck_assert(vat_equal(out, vat_int(40)));
  ck_assert_vat_ok(vat_map_get(m, vat_float(0.0), &out));
  ck_assert(vat_equal(out, vat_int(50)));

  out = vat_int(-1);
  ck_assert_vat_err(vat_map_get(m, vat_float(1.0), &out), VAT_ENOTFOUND);
  ck_assert_vat_err(vat_map_get(m, vat_atom_named("a"), &out), VAT_ENOTFOUND);
  ck_assert_vat_err(vat_map_get(m, vat_null(), &out), VAT_ENOTFOUND);
  ck_assert(vat_equal(out, vat_int(-1)));

  ck_assert_vat_err(vat_map_get(vat_list(keys, 2), keys[0], &out), VAT_ETYPE);
  ck_assert_vat_err(vat_map_get(vat_null(), keys[0], &out), VAT_ETYPE);
  ck_assert_vat_err(vat_map_get(m, keys[0], NULL), VAT_EINVAL);
}
END_TEST

START_TEST(map_duplicate_keys_keep_last) {
  vat_value keys[] = {vat_string("k"), vat_int(1), vat_string("k"),
                      vat_int(2),      vat_int(1), vat_string("k")};
  vat_value vals[] = {vat_int(1), vat_int(2), vat_int(3),
                      vat_int(4), vat_int(5), vat_int(6)};
  vat_value m = vat_map(keys, vals, LEN(keys));
  ck_assert_uint_eq(vat_len(m), 3);
  vat_value out;
  ck_assert_vat_ok(vat_map_get(m, vat_string("k"), &out));
  ck_assert(vat_equal(out, vat_int(6)));
  ck_assert_vat_ok(vat_map_get(m, vat_int(1), &out));
  ck_assert(vat_equal(out, vat_int(5)));
  ck_assert_vat_ok(vat_map_get(m, vat_int(2), &out));
  ck_assert(vat_equal(out, vat_int(4)));

  /* Order of construction does not matter; duplicates do not count. */
  vat_value k2[] = {vat_int(2), vat_string("k"), vat_int(1)};
  vat_value v2[] = {vat_int(4), vat_int(6), vat_int(5)};
  vat_value m2 = vat_map(k2, v2, 3);
  ck_assert(vat_equal(m, m2));
  ck_assert_int_eq(vat_compare(m, m2), 0);
  ck_assert(vat_hash(m) == vat_hash(m2));
  ck_assert_str_eq(fmt(m), "#{1 => 5, 2 => 4, \"k\" => 6}");
}
END_TEST

START_TEST(map_large_shuffled) {
  enum { N = 3000, DISTINCT = 1000 };
  static vat_value keys[N], vals[N];
  uint64_t x = 12345;
  for (int i = 0; i < N; i++) {
    x = x * 6364136223846793005u + 1442695040888963407u;
    int k = (int)((x >> 33) % DISTINCT);
    keys[i] = (i % 2) ? vat_int(k) : vat_list((vat_value[]){vat_int(k)}, 1);
    vals[i] = vat_int(i);
  }
  vat_value m = vat_map(keys, vals, N);
  GC_gcollect();
  for (int i = 0; i < N; i++) {
    /* The last index with an equal key is the one kept. */
    int last = i;
    for (int j = i + 1; j < N; j++)
      if (vat_equal(keys[j], keys[i]))
        last = j;
    vat_value out;
    ck_assert_vat_ok(vat_map_get(m, keys[i], &out));
    ck_assert(vat_equal(out, vat_int(last)));
  }
  size_t n = vat_len(m);
  ck_assert_uint_le(n, 2 * DISTINCT);
  ck_assert_uint_gt(n, DISTINCT);
}
END_TEST

START_TEST(map_empty_and_invalid) {
  vat_value m = vat_map(NULL, NULL, 0);
  ck_assert_int_eq(vat_type_of(m), VAT_T_MAP);
  ck_assert_uint_eq(vat_len(m), 0);
  vat_value out;
  ck_assert_vat_err(vat_map_get(m, vat_null(), &out), VAT_ENOTFOUND);
  vat_value k = vat_int(1);
  ck_assert(vat_is_null(vat_map(NULL, &k, 1)));
  ck_assert(vat_is_null(vat_map(&k, NULL, 1)));
  ck_assert(vat_is_null(vat_at(vat_map(&k, &k, 1), 0)));
}
END_TEST

/* --- Equality, order, hash --------------------------------------------- */

START_TEST(order_between_and_within_types) {
  /* One value of each type, in type order. */
  const vat_atom *a = vat_atom_intern("a");
  vat_value one[] = {vat_null(),
                     vat_bool(false),
                     vat_int(0),
                     vat_float(0),
                     vat_atom_value(a),
                     vat_string(""),
                     vat_bytes(NULL, 0),
                     vat_list(NULL, 0),
                     vat_record(a, NULL, 0),
                     vat_map(NULL, NULL, 0),
                     vat_ref_value(FAKE_REF(0)),
                     vat_error(a, vat_null())};
  for (size_t i = 0; i < LEN(one); i++)
    for (size_t j = 0; j < LEN(one); j++)
      ck_assert_int_eq(vat_compare(one[i], one[j]), (i > j) - (i < j));

  ck_assert(!vat_equal(vat_int(1), vat_float(1.0)));
  ck_assert_int_lt(vat_compare(vat_bool(false), vat_bool(true)), 0);
  ck_assert_int_lt(vat_compare(vat_int(INT64_MIN), vat_int(INT64_MAX)), 0);
  ck_assert_int_lt(vat_compare(vat_int(-1), vat_int(0)), 0);

  /* Floats: -inf < ... < -0 == 0 < ... < inf < NaN, and NaN == NaN. */
  ck_assert_int_lt(vat_compare(vat_float(-INFINITY), vat_float(-1e308)), 0);
  ck_assert_int_eq(vat_compare(vat_float(-0.0), vat_float(0.0)), 0);
  ck_assert(vat_equal(vat_float(-0.0), vat_float(0.0)));
  ck_assert(vat_hash(vat_float(-0.0)) == vat_hash(vat_float(0.0)));
  ck_assert_int_lt(vat_compare(vat_float(INFINITY), vat_float(NAN)), 0);
  ck_assert_int_gt(vat_compare(vat_float(NAN), vat_float(INFINITY)), 0);
  ck_assert_int_eq(vat_compare(vat_float(NAN), vat_float(-NAN)), 0);
  ck_assert(vat_equal(vat_float(NAN), vat_float(NAN)));
  ck_assert(vat_hash(vat_float(NAN)) == vat_hash(vat_float(-NAN)));

  /* Atoms by name, whatever the order they were interned in. */
  vat_value zz = vat_atom_named("zz-interned-first");
  vat_value aa = vat_atom_named("aa-interned-second");
  ck_assert_int_lt(vat_compare(aa, zz), 0);
  ck_assert_int_lt(vat_compare(vat_atom_named("ab"), vat_atom_named("abc")), 0);
  ck_assert_int_lt(vat_compare(vat_atom_value(vat_atom_intern_n("a", 1)),
                               vat_atom_value(vat_atom_intern_n("a\0", 2))),
                   0);

  /* Sequences: lexicographic, a prefix first, bytes unsigned. */
  ck_assert_int_lt(vat_compare(vat_string("ab"), vat_string("abc")), 0);
  ck_assert_int_lt(vat_compare(vat_string("abc"), vat_string("abd")), 0);
  ck_assert_int_lt(vat_compare(vat_string_n("a", 1), vat_string_n("a\0", 2)),
                   0);
  ck_assert_int_lt(vat_compare(vat_bytes("\x01", 1), vat_bytes("\xff", 1)), 0);
  vat_value l12[] = {vat_int(1), vat_int(2)};
  vat_value l13[] = {vat_int(1), vat_int(3)};
  ck_assert_int_lt(vat_compare(vat_list(l12, 1), vat_list(l12, 2)), 0);
  ck_assert_int_lt(vat_compare(vat_list(l12, 2), vat_list(l13, 2)), 0);
  ck_assert_int_gt(vat_compare(vat_list(l13, 2), vat_list(l12, 2)), 0);

  /* Records: label first, then fields. */
  const vat_atom *b = vat_atom_intern("b");
  ck_assert_int_lt(vat_compare(vat_record(a, l13, 2), vat_record(b, l12, 1)),
                   0);
  ck_assert_int_lt(vat_compare(vat_record(a, l12, 2), vat_record(a, l13, 2)),
                   0);

  /* Errors: code first, then payload. */
  ck_assert_int_lt(
      vat_compare(vat_error(a, vat_int(9)), vat_error(b, vat_int(1))), 0);
  ck_assert_int_lt(
      vat_compare(vat_error(a, vat_int(1)), vat_error(a, vat_int(2))), 0);
  ck_assert(
      vat_equal(vat_error(a, vat_string("x")), vat_error(a, vat_string("x"))));
}
END_TEST

/* Deterministic random values of every type, nested a few levels. */
static uint64_t rng_next(uint64_t *s) {
  *s = *s * 6364136223846793005u + 1442695040888963407u;
  return *s >> 33;
}

static vat_value random_value(uint64_t *s, int depth) {
  static const char *names[] = {"a", "b", "ab", "", "zz"};
  static const double floats[] = {0.0, -0.0, 1.5, -1.5, 1e300, -1e-300};
  unsigned kind = (unsigned)(rng_next(s) % (depth > 0 ? 12 : 8));
  vat_value items[3];
  vat_value vals[3];
  size_t n = (size_t)(rng_next(s) % 4);
  if (kind >= 8)
    for (size_t i = 0; i < n; i++) {
      items[i] = random_value(s, depth - 1);
      vals[i] = random_value(s, depth - 1);
    }
  switch (kind) {
  case 0:
    return vat_null();
  case 1:
    return vat_bool(rng_next(s) % 2);
  case 2:
    return vat_int((int64_t)(rng_next(s) % 5) - 2);
  case 3: {
    uint64_t r = rng_next(s) % 9;
    if (r == 6)
      return vat_float(NAN);
    if (r == 7)
      return vat_float(INFINITY);
    if (r == 8)
      return vat_float(-INFINITY);
    return vat_float(floats[r]);
  }
  case 4:
    return vat_atom_named(names[rng_next(s) % LEN(names)]);
  case 5: {
    const char *str = names[rng_next(s) % LEN(names)];
    return vat_string(str);
  }
  case 6:
    return vat_bytes("\0\x80z", (size_t)(rng_next(s) % 4));
  case 7:
    return vat_ref_value(FAKE_REF(rng_next(s) % 2));
  case 8:
    return vat_list(items, n);
  case 9:
    return vat_record(vat_atom_intern(names[rng_next(s) % 2]), items, n);
  case 10:
    return vat_map(items, vals, n);
  default:
    return vat_error(vat_atom_intern(names[rng_next(s) % 2]),
                     n > 0 ? items[0] : vat_null());
  }
}

START_TEST(order_is_total_and_consistent) {
  enum { N = 160 };
  static vat_value vs[N], twins[N];
  uint64_t seed = 42, twin_seed = 42;
  for (int i = 0; i < N; i++) {
    vs[i] = random_value(&seed, 3);
    twins[i] = random_value(&twin_seed, 3); /* equal, separately built */
  }
  GC_gcollect();
  for (int i = 0; i < N; i++) {
    ck_assert(vat_equal(vs[i], twins[i]));
    ck_assert_int_eq(vat_compare(vs[i], twins[i]), 0);
    ck_assert(vat_hash(vs[i]) == vat_hash(twins[i]));
    ck_assert_int_eq(vat_compare(vs[i], vs[i]), 0);
  }
  int equal_pairs = 0;
  for (int i = 0; i < N; i++)
    for (int j = 0; j < N; j++) {
      int c = vat_compare(vs[i], vs[j]);
      ck_assert_int_eq(sign(c), -sign(vat_compare(vs[j], vs[i])));
      ck_assert_int_eq(c == 0, vat_equal(vs[i], vs[j]));
      ck_assert_int_eq(vat_equal(vs[i], vs[j]), vat_equal(vs[j], vs[i]));
      if (c == 0) {
        ck_assert(vat_hash(vs[i]) == vat_hash(vs[j]));
        equal_pairs += i != j;
      }
    }
  ck_assert_int_gt(equal_pairs, 0); /* the generator does repeat itself */
  for (int i = 0; i < N; i++)
    for (int j = 0; j < N; j++) {
      int ij = vat_compare(vs[i], vs[j]);
      for (int k = 0; k < N; k++) {
        int jk = vat_compare(vs[j], vs[k]);
        if (ij <= 0 && jk <= 0)
          ck_assert_int_le(vat_compare(vs[i], vs[k]), 0);
        if (ij == 0 && jk == 0)
          ck_assert_int_eq(vat_compare(vs[i], vs[k]), 0);
      }
    }
}
END_TEST

START_TEST(hash_spreads) {
  /* Not a quality test: only that unequal simple values rarely collide. */
  enum { N = 1000 };
  static uint64_t hashes[N];
  for (int i = 0; i < N; i++)
    hashes[i] = vat_hash(vat_int(i));
  int collisions = 0;
  for (int i = 0; i < N; i++)
    for (int j = i + 1; j < N; j++)
      collisions += hashes[i] == hashes[j];
  ck_assert_int_eq(collisions, 0);
  ck_assert(vat_hash(vat_int(0)) != vat_hash(vat_float(0)));
  ck_assert(vat_hash(vat_string("a")) != vat_hash(vat_bytes("a", 1)));
  ck_assert(vat_hash(vat_string("a")) != vat_hash(vat_atom_named("a")));
  ck_assert(vat_hash(vat_null()) != vat_hash(vat_bool(false)));
}
END_TEST

/* --- Printing ---------------------------------------------------------- */

START_TEST(format_scalars) {
  ck_assert_str_eq(fmt(vat_null()), "null");
  ck_assert_str_eq(fmt(vat_bool(true)), "true");
  ck_assert_str_eq(fmt(vat_bool(false)), "false");
  ck_assert_str_eq(fmt(vat_int(42)), "42");
  ck_assert_str_eq(fmt(vat_int(INT64_MIN)), "-9223372036854775808");
  ck_assert_str_eq(fmt(vat_float(1.5)), "1.5");
  ck_assert_str_eq(fmt(vat_float(2.0)), "2.0");
  ck_assert_str_eq(fmt(vat_float(-0.0)), "-0.0");
  ck_assert_str_eq(fmt(vat_float(0.1)), "0.1");
  ck_assert_str_eq(fmt(vat_float(1e300)), "1e+300");
  ck_assert_str_eq(fmt(vat_float(NAN)), "nan");
  ck_assert_str_eq(fmt(vat_float(INFINITY)), "inf");
  ck_assert_str_eq(fmt(vat_float(-INFINITY)), "-inf");
  ck_assert_str_eq(fmt(vat_float(0.1 + 0.2)), "0.30000000000000004");
}
END_TEST

START_TEST(format_text) {
  ck_assert_str_eq(fmt(vat_atom_named("ok")), "'ok");
  ck_assert_str_eq(fmt(vat_atom_named("_x9")), "'_x9");
  ck_assert_str_eq(fmt(vat_atom_named("two words")), "'\"two words\"");
  ck_assert_str_eq(fmt(vat_atom_named("9lives")), "'\"9lives\"");
  ck_assert_str_eq(fmt(vat_atom_named("")), "'\"\"");
  ck_assert_str_eq(fmt(vat_atom_value(vat_atom_intern_n("a\0b", 3))),
                   "'\"a\\x00b\"");
  ck_assert_str_eq(fmt(vat_string("hi")), "\"hi\"");
  ck_assert_str_eq(fmt(vat_string("q\"b\\n\n\t\r\x01\x7f")),
                   "\"q\\\"b\\\\n\\n\\t\\r\\x01\\x7f\"");
  ck_assert_str_eq(fmt(vat_string("héllo")), "\"héllo\"");
  ck_assert_str_eq(fmt(vat_string_n("a\0", 2)), "\"a\\x00\"");
  ck_assert_str_eq(fmt(vat_bytes("abc", 3)), "#bytes[3]");
  ck_assert_str_eq(fmt(vat_bytes(NULL, 0)), "#bytes[0]");
}
END_TEST

START_TEST(format_compound) {
  vat_value items[] = {vat_int(1), vat_int(2)};
  ck_assert_str_eq(fmt(vat_list(items, 2)), "[1, 2]");
  ck_assert_str_eq(fmt(vat_list(NULL, 0)), "[]");
  ck_assert_str_eq(fmt(vat_record(vat_atom_intern("point"), items, 2)),
                   "point{1, 2}");
  ck_assert_str_eq(fmt(vat_record(vat_atom_intern("unit"), NULL, 0)), "unit{}");
  ck_assert_str_eq(fmt(vat_record(vat_atom_intern("a b"), items, 1)),
                   "'\"a b\"{1}");

  vat_value inner[] = {vat_int(1), vat_string("x")};
  vat_value keys[] = {vat_atom_named("a"), vat_int(1)};
  vat_value vals[] = {vat_list(inner, 2), vat_null()};
  ck_assert_str_eq(fmt(vat_map(keys, vals, 2)),
                   "#{1 => null, 'a => [1, \"x\"]}");
  ck_assert_str_eq(fmt(vat_map(NULL, NULL, 0)), "#{}");

  const vat_atom *badarg = vat_atom_intern("badarg");
  ck_assert_str_eq(fmt(vat_error(badarg, vat_null())), "error(badarg)");
  ck_assert_str_eq(fmt(vat_error(badarg, vat_list(items, 2))),
                   "error(badarg, [1, 2])");
  ck_assert_str_eq(fmt(vat_error(vat_atom_intern("no way"), vat_int(1))),
                   "error('\"no way\", 1)");

  char want[64];
  snprintf(want, sizeof want, "<ref %p>", (void *)FAKE_REF(1));
  ck_assert_str_eq(fmt(vat_ref_value(FAKE_REF(1))), want);
  ck_assert_int_eq(strncmp(want, "<ref 0x", 7), 0);

  vat_value bogus = {.type = (vat_type)99};
  ck_assert_str_eq(fmt(bogus), "<invalid>");
}
END_TEST

START_TEST(format_follows_snprintf) {
  vat_value items[] = {vat_int(10), vat_int(20)};
  vat_value l = vat_list(items, 2); /* "[10, 20]": 8 characters */
  char buf[16];

  ck_assert_uint_eq(vat_format(l, NULL, 0), 8);
  memset(buf, 'x', sizeof buf);
  ck_assert_uint_eq(vat_format(l, buf, 0), 8);
  ck_assert_int_eq(buf[0], 'x'); /* size 0: nothing written */

  ck_assert_uint_eq(vat_format(l, buf, 1), 8);
  ck_assert_str_eq(buf, "");
  memset(buf, 'x', sizeof buf);
  ck_assert_uint_eq(vat_format(l, buf, 5), 8);
  ck_assert_str_eq(buf, "[10,");
  ck_assert_int_eq(buf[5], 'x');
  ck_assert_uint_eq(vat_format(l, buf, 8), 8);
  ck_assert_str_eq(buf, "[10, 20");
  ck_assert_uint_eq(vat_format(l, buf, 9), 8);
  ck_assert_str_eq(buf, "[10, 20]");
  ck_assert_uint_eq(vat_format(l, buf, sizeof buf), 8);
  ck_assert_str_eq(buf, "[10, 20]");
}
END_TEST

START_TEST(values_survive_collection) {
  vat_value inner[] = {vat_string("deep"), vat_bytes("\1\2", 2)};
  vat_value keys[] = {vat_string("k")};
  vat_value vals[] = {vat_list(inner, 2)};
  vat_value fields[] = {vat_map(keys, vals, 1), vat_float(0.5)};
  vat_value v = vat_error(vat_atom_intern("boom"),
                          vat_record(vat_atom_intern("r"), fields, 2));
  for (int i = 0; i < 3; i++) {
    GC_gcollect();
    for (int j = 0; j < 10000; j++)
      (void)vat_string("churn, to reuse anything freed by mistake");
  }
  ck_assert_str_eq(fmt(v),
                   "error(boom, r{#{\"k\" => [\"deep\", #bytes[2]]}, 0.5})");
}
END_TEST

Suite *test_value_suite(void) {
  Suite *s = suite_create("value");

  TCase *tc = test_case("atoms", 60);
  tcase_add_test(tc, atom_interning_is_identity);
  tcase_add_test(tc, atom_empty_and_invalid);
  tcase_add_test(tc, atom_embedded_nul);
  tcase_add_test(tc, atom_table_grows_and_survives_collection);
  tcase_add_test(tc, atom_interning_from_threads);
#if !VAT_GC_NO_COLLECT /* nothing is reclaimed in a build that never collects  \
                        */
  tcase_add_test(tc, weak_atoms_live_while_referenced);
#endif
  tcase_add_test(tc, strong_intern_makes_a_weak_atom_permanent);
  tcase_add_test(tc, weak_intern_of_a_strong_name_is_that_atom);
  tcase_add_test(tc, weak_interning_from_threads);
  suite_add_tcase(s, tc);

  tc = test_case("constructors", 0);
  tcase_add_test(tc, scalars);
  tcase_add_test(tc, scalar_accessors_reject_wrong_type_and_null_out);
  tcase_add_test(tc, atom_values);
  tcase_add_test(tc, strings);
  tcase_add_test(tc, bytes);
  tcase_add_test(tc, lists);
  tcase_add_test(tc, records);
  tcase_add_test(tc, errors);
  tcase_add_test(tc, refs);
  tcase_add_test(tc, values_survive_collection);
  suite_add_tcase(s, tc);

  tc = test_case("maps", 60);
  tcase_add_test(tc, map_lookup);
  tcase_add_test(tc, map_duplicate_keys_keep_last);
  tcase_add_test(tc, map_large_shuffled);
  tcase_add_test(tc, map_empty_and_invalid);
  suite_add_tcase(s, tc);

  tc = test_case("order", 120);
  tcase_add_test(tc, order_between_and_within_types);
  tcase_add_test(tc, order_is_total_and_consistent);
  tcase_add_test(tc, hash_spreads);
  suite_add_tcase(s, tc);

  tc = test_case("format", 0);
  tcase_add_test(tc, format_scalars);
  tcase_add_test(tc, format_text);
  tcase_add_test(tc, format_compound);
  tcase_add_test(tc, format_follows_snprintf);
  suite_add_tcase(s, tc);

  return s;
}
