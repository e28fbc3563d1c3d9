/* CapTP's wire format: values to CapData and back, the frames Endo sent in
 * a recorded exchange, smallcaps, bad input, netstrings split anywhere,
 * and the encoder compared byte for byte with the one it replaced. */
#include <dirent.h>
#include <inttypes.h>
#include <jansson.h>
#include <malloc.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "captp/out.h"
#include "captp_reference.h"
#include "same_value.h"
#include "suites.h"
#include "support.h"
#include "util/gc.h"
#include "value/value_internal.h" /* a map's entries, for its key */
#include "vat/captp.h"

#ifndef VAT_TEST_CAPTP_CORPUS
#error "the build passes the corpus folder as VAT_TEST_CAPTP_CORPUS"
#endif

/* --- A slot table: names <-> stand-ins for refs and promises ----------- */
/* The codec never looks inside a ref or a promise, so the tests use the
 * addresses of these objects; the table is a list of (name, value, iface). */

#define MAX_SLOTS 64
typedef struct slot_table {
  char names[MAX_SLOTS][VAT_CAPTP_SLOT_MAX];
  const char *ifaces[MAX_SLOTS];
  char iface_text[MAX_SLOTS][64]; /* copies of received ifaces */
  vat_value values[MAX_SLOTS];
  int n;
  int exports; /* export_slot calls */
  int imports; /* import_slot calls */
} slot_table;

static char stand_ins[MAX_SLOTS];

static int export_slot(void *ctx, vat_value v, char slot[VAT_CAPTP_SLOT_MAX],
                       const char **iface) {
  slot_table *t = ctx;
  t->exports++;
  for (int i = 0; i < t->n; i++)
    if (t->values[i].type == v.type && t->values[i].as.obj == v.as.obj) {
      strcpy(slot, t->names[i]);
      *iface = t->ifaces[i];
      return VAT_OK;
    }
  if (t->n == MAX_SLOTS)
    return VAT_ENOMEM;
  snprintf(t->names[t->n], VAT_CAPTP_SLOT_MAX, "%c+%d",
           v.type == VAT_T_REF ? 'o' : 'p', t->n + 1);
  t->values[t->n] = v;
  t->ifaces[t->n] = v.type == VAT_T_REF ? "Alleged: Thing" : NULL;
  strcpy(slot, t->names[t->n]);
  *iface = t->ifaces[t->n];
  t->n++;
  return VAT_OK;
}

static int import_slot(void *ctx, const char *slot, const char *iface,
                       vat_value *out) {
  slot_table *t = ctx;
  t->imports++;
  for (int i = 0; i < t->n; i++)
    if (strcmp(t->names[i], slot) == 0) {
      *out = t->values[i];
      return VAT_OK;
    }
  if (t->n == MAX_SLOTS)
    return VAT_ENOMEM;
  snprintf(t->names[t->n], VAT_CAPTP_SLOT_MAX, "%s", slot);
  t->ifaces[t->n] = NULL;
  if (iface != NULL) {
    snprintf(t->iface_text[t->n], sizeof t->iface_text[t->n], "%s", iface);
    t->ifaces[t->n] = t->iface_text[t->n];
  }
  void *p = &stand_ins[t->n];
  t->values[t->n] = slot[0] == 'o' ? vat_ref_value((vat_ref *)p)
                                   : vat_promise_value((vat_promise *)p);
  *out = t->values[t->n++];
  return VAT_OK;
}

static vat_captp_slots table_of(slot_table *t) {
  return (vat_captp_slots){
      .ctx = t, .export_slot = export_slot, .import_slot = import_slot};
}

static vat_value ref_n(int i) {
  return vat_ref_value((vat_ref *)&stand_ins[i]);
}

static vat_value str(const char *s) {
  return vat_string(s);
}

static vat_value pair_map(vat_value k1, vat_value v1, vat_value k2,
                          vat_value v2) {
  vat_value keys[] = {k1, k2}, vals[] = {v1, v2};
  return vat_map(keys, vals, 2);
}

static vat_value A(const char *name) {
  return vat_atom_named(name);
}

/* Encodes and decodes v through one table; the decoded value. */
static vat_value round_trip(vat_value v, vat_capdata *cd) {
  slot_table t = {0};
  vat_captp_slots slots = table_of(&t);
  vat_captp_error err;
  vat_capdata local;
  if (cd == NULL)
    cd = &local;
  int rc = vat_capdata_encode(v, &slots, cd, &err);
  ck_assert_msg(rc == VAT_OK, "encode: %s: %s (%s)", vat_err_name(rc),
                vat_captp_err_name(err.code), err.detail);
  vat_value back;
  rc = vat_capdata_decode(cd->body, cd->body_len, cd->slots, cd->n_slots,
                          &slots, &back, &err);
  ck_assert_msg(rc == VAT_OK, "decode %s: %s: %s (%s)", cd->body,
                vat_err_name(rc), vat_captp_err_name(err.code), err.detail);
  return back;
}

static vat_value every_kind(size_t i, size_t *n) {
  static const unsigned char raw[] = {0, 1, 2, 0xff, 0xfe};
  vat_value one = vat_int(1), two = vat_int(2);
  vat_value list2[] = {one, two};
  vat_value list1 = vat_list(&one, 1);
  vat_value list2v = vat_list(list2, 2);
  vat_value bigdigits = str("-123456789012345678901234567890");
  vat_value kinds[] = {
      vat_null(),
      vat_bool(true),
      vat_bool(false),
      vat_int(0),
      vat_int(-1),
      vat_int(INT64_MAX),
      vat_int(INT64_MIN),
      vat_float(1.5),
      vat_float(-2.25),
      vat_float(3.0),
      vat_float(1e300),
      vat_float(5e-324),
      vat_float(0.1),
      vat_float(INFINITY),
      vat_float(-INFINITY),
      A("ok"),
      A("undefined"),
      A("@@asyncIterator"),
      A("héllo"),
      str(""),
      str("héllo, wörld ✓ 𝄞"),
      vat_string_n("nul\0inside", 10),
      str("!bang"),
      str("#hash"),
      str("$dollar"),
      vat_bytes(raw, 0),
      vat_bytes(raw, 1),
      vat_bytes(raw, 2),
      vat_bytes(raw, 5),
      vat_list(NULL, 0),
      list2v,
      vat_list(&list2v, 1),
      vat_record(vat_atom_intern("empty"), NULL, 0),
      vat_record(vat_atom_intern("one"), &one, 1),
      vat_record(vat_atom_intern("one_list"), &list1, 1),
      vat_record(vat_atom_intern("one_list2"), &list2v, 1),
      vat_record(vat_atom_intern("point"), list2, 2),
      vat_record(vat_atom_intern("copySet"), list2, 2),
      vat_record(vat_atom_intern("bigint"), &bigdigits, 1),
      vat_map(NULL, NULL, 0),
      pair_map(A("b"), one, A("a"), str("x")),
      pair_map(str("b"), one, str("a"), two),
      pair_map(vat_int(3), str("c"), vat_int(1), str("a")),
      pair_map(A("k"), one, str("k"), two),
      pair_map(A("@qclass"), str("q"), A("other"), one),
      pair_map(A("@qclass"), A("undefined"), A("@qclass"), one),
      vat_error(vat_atom_intern("Error"), vat_null()),
      vat_error(vat_atom_intern("TypeError"), str("bad thing")),
      vat_error(vat_atom_intern("timeout"), vat_int(5)),
      vat_error(vat_atom_intern("Error"),
                pair_map(A("message"), str("m"), A("errorId"), str("e#1"))),
      vat_error(vat_atom_intern("Error"),
                pair_map(A("message"), vat_int(1), A("x"), one)),
      ref_n(40),
      vat_promise_value((vat_promise *)&stand_ins[41]),
      vat_list((vat_value[]){ref_n(40), ref_n(42), ref_n(40)}, 3),
  };
  *n = sizeof kinds / sizeof kinds[0];
  return i < *n ? kinds[i] : vat_null();
}

START_TEST(every_value_kind_round_trips) {
  size_t n;
  every_kind(0, &n);
  for (size_t i = 0; i < n; i++) {
    vat_value v = every_kind(i, &n);
    ck_assert_msg(i < 5 || v.type != VAT_T_NULL, "kind %zu not built", i);
    vat_capdata cd;
    vat_value back = round_trip(v, &cd);
    char a[256], b[256];
    vat_format(v, a, sizeof a);
    vat_format(back, b, sizeof b);
    ck_assert_msg(vat_equal(v, back), "kind %zu: %s came back as %s via %s", i,
                  a, b, cd.body);
  }
}
END_TEST

START_TEST(nan_round_trips) {
  vat_value back = round_trip(vat_float(NAN), NULL);
  ck_assert_int_eq(back.type, VAT_T_FLOAT);
  ck_assert(isnan(back.as.f));
}
END_TEST

static const char *body_of(vat_value v) {
  vat_capdata cd;
  slot_table t = {0};
  vat_captp_slots slots = table_of(&t);
  ck_assert_vat_ok(vat_capdata_encode(v, &slots, &cd, NULL));
  return cd.body;
}

START_TEST(encoded_forms_are_endos) {
  ck_assert_str_eq(body_of(vat_int(-123)),
                   "{\"@qclass\":\"bigint\",\"digits\":\"-123\"}");
  ck_assert_str_eq(body_of(vat_float(3.0)), "3");
  ck_assert_str_eq(body_of(vat_float(-0.0)), "0");
  ck_assert_str_eq(body_of(vat_float(1.5)), "1.5");
  ck_assert_str_eq(body_of(vat_float(NAN)), "{\"@qclass\":\"NaN\"}");
  ck_assert_str_eq(body_of(A("undefined")), "{\"@qclass\":\"undefined\"}");
  ck_assert_str_eq(body_of(A("ok")),
                   "{\"@qclass\":\"symbol\",\"name\":\"ok\"}");
  ck_assert_str_eq(body_of(pair_map(A("b"), vat_null(), A("a"), vat_null())),
                   "{\"a\":null,\"b\":null}");
  ck_assert_str_eq(
      body_of(vat_record(vat_atom_intern("p"), (vat_value[]){vat_int(1)}, 1)),
      "{\"@qclass\":\"tagged\",\"tag\":\"p\",\"payload\":[{\"@qclass\":"
      "\"bigint\",\"digits\":\"1\"}]}");
  ck_assert_str_eq(body_of(vat_bytes("\x01\x02\x03\x04", 4)),
                   "{\"@qclass\":\"tagged\",\"tag\":\"vat:bytes\",\"payload\":"
                   "\"AQIDBA==\"}");
  ck_assert_str_eq(
      body_of(vat_error(vat_atom_intern("TypeError"), str("no"))),
      "{\"@qclass\":\"error\",\"message\":\"no\",\"name\":\"TypeError\"}");
  ck_assert_str_eq(
      body_of(pair_map(vat_int(1), str("a"), vat_int(3), str("c"))),
      "{\"@qclass\":\"tagged\",\"tag\":\"copyMap\",\"payload\":{"
      "\"keys\":[{\"@qclass\":\"bigint\",\"digits\":\"3\"},{"
      "\"@qclass\":\"bigint\",\"digits\":\"1\"}],\"values\":["
      "\"c\",\"a\"]}}");
  /* The same ref twice is one slot; its iface goes with the first. */
  vat_capdata cd;
  vat_value twice = vat_list((vat_value[]){ref_n(1), ref_n(1)}, 2);
  round_trip(twice, &cd);
  ck_assert_uint_eq(cd.n_slots, 1);
  ck_assert_str_eq(cd.slots[0], "o+1");
  ck_assert_str_eq(cd.body, "[{\"@qclass\":\"slot\",\"iface\":\"Alleged: "
                            "Thing\",\"index\":0},{\"@qclass\":\"slot\","
                            "\"index\":0}]");
}
END_TEST

START_TEST(decoded_hard_cases) {
  slot_table t = {0};
  vat_captp_slots slots = table_of(&t);
  vat_value v;
  /* A JS number, integral or not, is a float. */
  ck_assert_vat_ok(vat_capdata_decode("42", 2, NULL, 0, NULL, &v, NULL));
  ck_assert(v.type == VAT_T_FLOAT && v.as.f == 42.0);
  const char *huge = "18446744073709552000";
  ck_assert_vat_ok(
      vat_capdata_decode(huge, strlen(huge), NULL, 0, NULL, &v, NULL));
  ck_assert(v.type == VAT_T_FLOAT && v.as.f == 18446744073709552000.0);
  /* A bigint beyond int64 is the record bigint("digits"). */
  const char *big =
      "{\"@qclass\":\"bigint\",\"digits\":\"9223372036854775808\"}";
  ck_assert_vat_ok(
      vat_capdata_decode(big, strlen(big), NULL, 0, NULL, &v, NULL));
  ck_assert_int_eq(v.type, VAT_T_RECORD);
  ck_assert_str_eq(vat_string_data(vat_at(v, 0)), "9223372036854775808");
  const char *min =
      "{\"@qclass\":\"bigint\",\"digits\":\"-9223372036854775808\"}";
  ck_assert_vat_ok(
      vat_capdata_decode(min, strlen(min), NULL, 0, NULL, &v, NULL));
  ck_assert(v.type == VAT_T_INT && v.as.i == INT64_MIN);
  /* A tagged value with a non-array payload: a one-field record. */
  const char *any = "{\"@qclass\":\"tagged\",\"tag\":\"match:any\",\"payload\":"
                    "{\"@qclass\":\"undefined\"}}";
  ck_assert_vat_ok(
      vat_capdata_decode(any, strlen(any), NULL, 0, NULL, &v, NULL));
  ck_assert_int_eq(vat_len(v), 1);
  ck_assert(vat_is_atom(vat_at(v, 0), vat_atom_intern("undefined")));
  /* An empty copyMap is an empty map. */
  const char *cm = "{\"@qclass\":\"tagged\",\"tag\":\"copyMap\",\"payload\":{"
                   "\"keys\":[],\"values\":[]}}";
  ck_assert_vat_ok(vat_capdata_decode(cm, strlen(cm), NULL, 0, NULL, &v, NULL));
  ck_assert(v.type == VAT_T_MAP && vat_len(v) == 0);
  /* A slot used twice is imported once: one proxy, identity kept. */
  const char *two = "[{\"@qclass\":\"slot\",\"index\":0,\"iface\":\"Alleged: "
                    "X\"},{\"@qclass\":\"slot\",\"index\":0}]";
  const char *names[] = {"o-5"};
  ck_assert_vat_ok(
      vat_capdata_decode(two, strlen(two), names, 1, &slots, &v, NULL));
  ck_assert_int_eq(t.imports, 1);
  ck_assert(vat_equal(vat_at(v, 0), vat_at(v, 1)));
  ck_assert_str_eq(t.ifaces[0], "Alleged: X");
}
END_TEST

/* --- Encoding errors --------------------------------------------------- */

START_TEST(unencodable_values_are_named) {
  vat_captp_error err;
  vat_capdata cd;
  ck_assert_vat_err(
      vat_capdata_encode(vat_string_n("\xff\xfe", 2), NULL, &cd, &err),
      VAT_EENCODE);
  ck_assert_int_eq(err.code, VAT_CAPTP_ERR_UTF8);
  ck_assert_vat_err(vat_capdata_encode(ref_n(0), NULL, &cd, &err), VAT_EENCODE);
  ck_assert_int_eq(err.code, VAT_CAPTP_ERR_EXPORT);
  vat_value deep = vat_null();
  for (int i = 0; i < VAT_CAPTP_MAX_DEPTH; i++)
    deep = vat_list(&deep, 1);
  ck_assert_vat_err(vat_capdata_encode(deep, NULL, &cd, &err), VAT_EENCODE);
  ck_assert_int_eq(err.code, VAT_CAPTP_ERR_DEPTH);
  ck_assert_vat_err(vat_capdata_encode(vat_null(), NULL, NULL, &err),
                    VAT_EINVAL);
  /* A map key that is an atom with invalid UTF-8. */
  vat_value bad_key = pair_map(vat_atom_value(vat_atom_intern_n("\xc3", 1)),
                               vat_null(), A("a"), vat_null());
  ck_assert_vat_err(vat_capdata_encode(bad_key, NULL, &cd, &err), VAT_EENCODE);
  ck_assert_int_eq(err.code, VAT_CAPTP_ERR_UTF8);
}
END_TEST

static int refuse_second(void *ctx, vat_value v, char slot[VAT_CAPTP_SLOT_MAX],
                         const char **iface) {
  int *calls = ctx;
  (void)v;
  *iface = NULL;
  if (++*calls == 2)
    return VAT_ENOTFOUND;
  snprintf(slot, VAT_CAPTP_SLOT_MAX, "o+%d", *calls);
  return VAT_OK;
}

/* A failure anywhere inside a value frees what was built (ASan's leak
 * check watches) and reports the first cause. */
/* Values that fail to encode, each on bad UTF-8 somewhere inside. */
static const vat_value *bad_inside(size_t *n) {
  static vat_value nested[13];
  vat_value bad = vat_string_n("\xc3(", 2);
  vat_value bad_atom = vat_atom_value(vat_atom_intern_n("\xff", 1));
  vat_value one = vat_int(1);
  vat_value in_list[] = {one, bad};
  vat_value values[] = {
      vat_list(in_list, 2),
      pair_map(A("a"), one, A("b"), vat_list(in_list, 2)),
      pair_map(vat_int(1), one, vat_int(2), bad),
      pair_map(vat_int(1), one, bad, one),
      vat_record(vat_atom_intern_n("\xff", 1), &one, 1),
      vat_record(vat_atom_intern("r"), in_list, 2),
      vat_error(vat_atom_intern_n("\xff", 1), vat_null()),
      vat_error(vat_atom_intern("E"), bad),
      vat_error(vat_atom_intern("E"), vat_list(in_list, 2)),
      vat_error(vat_atom_intern("E"),
                pair_map(A("message"), str("m"), A("x"), bad)),
      bad_atom,
      pair_map(A("@qclass"), bad, A("z"), one),
      pair_map(A("@qclass"), one, A("z"), bad),
  };
  _Static_assert(sizeof values / sizeof values[0] ==
                     sizeof nested / sizeof nested[0],
                 "nested holds them all");
  memcpy(nested, values, sizeof values);
  *n = sizeof nested / sizeof nested[0];
  return nested;
}

START_TEST(failures_deep_inside_values) {
  vat_value one = vat_int(1);
  size_t n_nested;
  const vat_value *nested = bad_inside(&n_nested);
  for (size_t i = 0; i < n_nested; i++) {
    vat_capdata cd;
    vat_captp_error err;
    int rc = vat_capdata_encode(nested[i], NULL, &cd, &err);
    ck_assert_msg(rc == VAT_EENCODE && err.code == VAT_CAPTP_ERR_UTF8,
                  "value %zu: %s %s", i, vat_err_name(rc),
                  vat_captp_err_name(err.code));
  }
  /* The table refuses the second ref: its code comes back. */
  int calls = 0;
  vat_captp_slots refusing = {.ctx = &calls, .export_slot = refuse_second};
  vat_value refs[] = {ref_n(1), pair_map(A("k"), ref_n(2), A("l"), one)};
  vat_capdata cd;
  vat_captp_error err;
  ck_assert_vat_err(vat_capdata_encode(vat_list(refs, 2), &refusing, &cd, &err),
                    VAT_ENOTFOUND);
  ck_assert_int_eq(err.code, VAT_CAPTP_ERR_EXPORT);
  vat_captp_msg msg = {
      .type = VAT_CAPTP_RETURN, .id = "q-1", .value = vat_list(refs, 2)};
  char *out;
  size_t len;
  calls = 0;
  ck_assert_vat_err(vat_captp_encode(&msg, &refusing, &out, &len, &err),
                    VAT_ENOTFOUND);
}
END_TEST

/* --- Decoding errors: every bad input is an error code and a name ------ */

typedef struct bad_body {
  const char *body;
  vat_captp_err code;
} bad_body;

static const bad_body bad_bodies[] = {
    {"", VAT_CAPTP_ERR_JSON},
    {"[1,", VAT_CAPTP_ERR_JSON},
    {"\"\\ud800\"", VAT_CAPTP_ERR_JSON},
    {"\"\xff\"", VAT_CAPTP_ERR_JSON},
    {"{\"@qclass\":\"ibid\",\"index\":0}", VAT_CAPTP_ERR_QCLASS},
    {"{\"@qclass\":\"nope\"}", VAT_CAPTP_ERR_QCLASS},
    {"{\"@qclass\":1}", VAT_CAPTP_ERR_QCLASS},
    {"{\"@qclass\":\"symbol\"}", VAT_CAPTP_ERR_QCLASS},
    {"{\"@qclass\":\"hilbert\"}", VAT_CAPTP_ERR_QCLASS},
    {"{\"@qclass\":\"bigint\",\"digits\":\"12a\"}", VAT_CAPTP_ERR_BIGINT},
    {"{\"@qclass\":\"bigint\",\"digits\":\"007\"}", VAT_CAPTP_ERR_BIGINT},
    {"{\"@qclass\":\"bigint\",\"digits\":\"-0\"}", VAT_CAPTP_ERR_BIGINT},
    {"{\"@qclass\":\"bigint\",\"digits\":\"\"}", VAT_CAPTP_ERR_BIGINT},
    {"{\"@qclass\":\"bigint\"}", VAT_CAPTP_ERR_BIGINT},
    {"{\"@qclass\":\"tagged\",\"tag\":1,\"payload\":[]}", VAT_CAPTP_ERR_TAGGED},
    {"{\"@qclass\":\"tagged\",\"tag\":\"copyMap\",\"payload\":[]}",
     VAT_CAPTP_ERR_TAGGED},
    {"{\"@qclass\":\"tagged\",\"tag\":\"copyMap\",\"payload\":{\"keys\":[1],"
     "\"values\":[]}}",
     VAT_CAPTP_ERR_TAGGED},
    {"{\"@qclass\":\"tagged\",\"tag\":\"vat:bytes\",\"payload\":\"abc\"}",
     VAT_CAPTP_ERR_TAGGED},
    {"{\"@qclass\":\"error\",\"name\":\"Error\"}", VAT_CAPTP_ERR_ERROR},
    {"{\"@qclass\":\"error\",\"message\":1,\"name\":\"Error\"}",
     VAT_CAPTP_ERR_ERROR},
    {"{\"@qclass\":\"slot\",\"index\":1}", VAT_CAPTP_ERR_SLOT},
    {"{\"@qclass\":\"slot\",\"index\":-1}", VAT_CAPTP_ERR_SLOT},
    {"{\"@qclass\":\"slot\",\"index\":0.5}", VAT_CAPTP_ERR_SLOT},
    {"{\"@qclass\":\"slot\",\"index\":0,\"iface\":3}", VAT_CAPTP_ERR_SLOT},
    {"#\"$1\"", VAT_CAPTP_ERR_SLOT},
    {"#\"&0.iface\"", VAT_CAPTP_ERR_SMALLCAPS},
    {"#\"$x\"", VAT_CAPTP_ERR_SMALLCAPS},
    {"#\"#what\"", VAT_CAPTP_ERR_SMALLCAPS},
    {"#\"'reserved\"", VAT_CAPTP_ERR_SMALLCAPS},
    {"#{\"#bad\":1}", VAT_CAPTP_ERR_SMALLCAPS},
    {"#{\"#tag\":\"t\"}", VAT_CAPTP_ERR_SMALLCAPS},
    {"#{\"#tag\":\"t\",\"payload\":1,\"x\":2}", VAT_CAPTP_ERR_SMALLCAPS},
    {"#{\"#error\":\"m\"}", VAT_CAPTP_ERR_ERROR},
    {"#\"+\"", VAT_CAPTP_ERR_BIGINT},
    {"#", VAT_CAPTP_ERR_JSON},
};

START_TEST(bad_bodies_are_named_errors) {
  const bad_body *b = &bad_bodies[_i];
  slot_table t = {0};
  vat_captp_slots slots = table_of(&t);
  const char *names[] = {"o-1"};
  vat_captp_error err;
  vat_value v;
  int rc =
      vat_capdata_decode(b->body, strlen(b->body), names, 1, &slots, &v, &err);
  ck_assert_msg(rc == VAT_EDECODE && err.code == b->code,
                "%s: %s, %s (%s), expected %s", b->body, vat_err_name(rc),
                vat_captp_err_name(err.code), err.detail,
                vat_captp_err_name(b->code));
  ck_assert_str_ne(vat_captp_err_text(err.code), "unknown error");
  ck_assert_str_ne(vat_strerror(rc), "unknown error");
}
END_TEST

START_TEST(bad_slots_and_tables) {
  vat_captp_error err;
  vat_value v;
  const char *body = "{\"@qclass\":\"slot\",\"index\":0}";
  const char *bad_names[] = {"q-1", "o+01", "o1", "x+1", "o+", "o--1", "o+1a"};
  slot_table t = {0};
  vat_captp_slots slots = table_of(&t);
  for (size_t i = 0; i < sizeof bad_names / sizeof bad_names[0]; i++) {
    ck_assert_vat_err(vat_capdata_decode(body, strlen(body), &bad_names[i], 1,
                                         &slots, &v, &err),
                      VAT_EDECODE);
    ck_assert_int_eq(err.code, VAT_CAPTP_ERR_SLOT);
  }
  const char *ok[] = {"o-1"};
  ck_assert_vat_err(
      vat_capdata_decode(body, strlen(body), ok, 1, NULL, &v, &err),
      VAT_EDECODE);
  ck_assert_int_eq(err.code, VAT_CAPTP_ERR_IMPORT);
  /* A smallcaps promise reference to an "o" slot is the wrong kind. */
  ck_assert_vat_err(vat_capdata_decode("#\"&0\"", 5, ok, 1, &slots, &v, &err),
                    VAT_EDECODE);
  ck_assert_int_eq(err.code, VAT_CAPTP_ERR_SLOT);
  ck_assert_vat_err(vat_capdata_decode(NULL, 0, NULL, 0, NULL, &v, &err),
                    VAT_EINVAL);
  ck_assert_vat_err(vat_capdata_decode("1", 1, NULL, 1, NULL, &v, &err),
                    VAT_EINVAL);
}
END_TEST

START_TEST(deep_bodies_are_refused) {
  size_t depth = VAT_CAPTP_MAX_DEPTH + 1;
  char *body = malloc(2 * depth + 1);
  memset(body, '[', depth);
  memset(body + depth, ']', depth);
  body[2 * depth] = '\0';
  vat_captp_error err;
  vat_value v;
  ck_assert_vat_err(
      vat_capdata_decode(body, 2 * depth, NULL, 0, NULL, &v, &err),
      VAT_EDECODE);
  ck_assert_int_eq(err.code, VAT_CAPTP_ERR_DEPTH);
  body[0] = '#';
  ck_assert_vat_err(
      vat_capdata_decode(body, 2 * depth, NULL, 0, NULL, &v, &err),
      VAT_EDECODE);
  free(body);
}
END_TEST

/* --- Messages ---------------------------------------------------------- */

static const char *const bad_messages[] = {
    "[]",
    "{}",
    "{\"type\":1}",
    "nope",
    "{\"type\":\"CTP_CALL\",\"questionID\":1,\"target\":\"o-1\",\"method\":"
    "{\"body\":\"1\",\"slots\":[]}}",
    "{\"type\":\"CTP_CALL\",\"questionID\":\"q-1\",\"method\":{\"body\":\"1\","
    "\"slots\":[]}}",
    "{\"type\":\"CTP_CALL\",\"questionID\":\"q-1\",\"target\":\"o-1\"}",
    "{\"type\":\"CTP_RETURN\",\"answerID\":\"q-1\",\"result\":{\"body\":1,"
    "\"slots\":[]}}",
    "{\"type\":\"CTP_RETURN\",\"answerID\":\"q-1\",\"result\":{\"body\":\"1\","
    "\"slots\":[1]}}",
    "{\"type\":\"CTP_RETURN\",\"answerID\":\"q-1\",\"result\":{\"body\":\"1\"}"
    "}",
    "{\"type\":\"CTP_RESOLVE\",\"promiseID\":\"p-1\"}",
    "{\"type\":\"CTP_DROP\",\"slotID\":\"o-1\",\"decRefs\":-1}",
    "{\"type\":\"CTP_DROP\",\"slotID\":\"o-1\",\"decRefs\":\"x\"}",
    "{\"type\":\"CTP_BOOTSTRAP\"}",
    "{\"type\":\"CTP_RETURN\",\"answerID\":\"q-1\",\"result\":{\"body\":\"["
    "\",\"slots\":[]}}",
};

START_TEST(bad_messages_are_named_errors) {
  const char *m = bad_messages[_i];
  vat_captp_msg msg;
  vat_captp_error err;
  int rc = vat_captp_decode(m, strlen(m), NULL, &msg, &err);
  ck_assert_msg(rc == VAT_EDECODE && err.code != VAT_CAPTP_ERR_NONE,
                "%s: %s %s", m, vat_err_name(rc), vat_captp_err_name(err.code));
}
END_TEST

/* Which failures are the value's alone (value_failed, the envelope kept)
 * and which the envelope's. */
static const struct {
  const char *json;
  bool value_failed;
} value_failures[] = {
    /* A lone surrogate, as JSON.stringify writes it in Endo's body. */
    {"{\"type\":\"CTP_CALL\",\"questionID\":\"q-2\",\"target\":\"o-1\","
     "\"method\":{\"body\":\"[\\\"echo\\\",[\\\"a\\\\ud800b\\\"]]\","
     "\"slots\":[]}}",
     true},
    {"{\"type\":\"CTP_CALL\",\"questionID\":\"q-2\",\"target\":\"o-1\","
     "\"method\":{\"body\":\"[\\\"echo\\\",[{\\\"@qclass\\\":"
     "\\\"slot\\\",\\\"index\\\":1}]]\",\"slots\":[\"o-1\"]}}",
     true},
    {"{\"type\":\"CTP_RETURN\",\"answerID\":\"q-2\",\"result\":{\"body\":"
     "\"#[\\\"%x\\\",\",\"slots\":[]}}",
     true},
    /* The envelope's: the outer JSON, a field, the {body, slots} shape. */
    {"{\"type\":\"CTP_CALL\",\"questionID\":\"q-\\ud800\",\"target\":"
     "\"o-1\",\"method\":{\"body\":\"1\",\"slots\":[]}}",
     false},
    {"{\"type\":\"CTP_CALL\",\"questionID\":\"q-2\",\"method\":{\"body\":"
     "\"1\",\"slots\":[]}}",
     false},
    {"{\"type\":\"CTP_CALL\",\"questionID\":\"q-2\",\"target\":\"o-1\","
     "\"method\":{\"body\":\"1\",\"slots\":[1]}}",
     false},
};

START_TEST(a_bad_value_keeps_the_envelope) {
  const char *json = value_failures[_i].json;
  bool in_value = value_failures[_i].value_failed;
  vat_captp_msg msg;
  vat_captp_error err;
  ck_assert_vat_err(vat_captp_decode(json, strlen(json), NULL, &msg, &err),
                    VAT_EDECODE);
  ck_assert_msg(msg.value_failed == in_value, "%s: value_failed %d (%s)", json,
                msg.value_failed, err.detail);
  if (in_value) {
    ck_assert_str_eq(msg.id, "q-2");
    ck_assert(vat_is_null(msg.value));
    if (msg.type == VAT_CAPTP_CALL)
      ck_assert_str_eq(msg.target, "o-1");
  }
}
END_TEST

/* wants_value's answer: false for the ids listed, and what it was shown. */
typedef struct unwanted {
  slot_table slots;
  const char *skip_id; /* the message id whose value nobody wants */
  int asked;
  vat_captp_type type_seen;
  bool reject_seen;
} unwanted;

static bool wants_value(void *ctx, const vat_captp_msg *m) {
  unwanted *u = ctx;
  u->asked++;
  u->type_seen = m->type;
  u->reject_seen = m->is_reject;
  return strcmp(m->id, u->skip_id) != 0;
}

static int unwanted_import(void *ctx, const char *slot, const char *iface,
                           vat_value *out) {
  return import_slot(&((unwanted *)ctx)->slots, slot, iface, out);
}

static int decode_unwanted(unwanted *u, const char *json, vat_captp_msg *m,
                           vat_captp_error *err) {
  vat_captp_slots table = {
      .ctx = u, .import_slot = unwanted_import, .wants_value = wants_value};
  return vat_captp_decode(json, strlen(json), &table, m, err);
}

/* A value nobody wants is left undecoded unless it names slots; its body
 * is not read, its envelope is. */
START_TEST(a_value_nobody_wants_is_not_decoded) {
  unwanted u = {.skip_id = "q-1"};
  vat_captp_msg m;
  vat_captp_error err;
  /* Unwanted, no slots: skipped, even a body that would not decode. */
  ck_assert_vat_ok(decode_unwanted(
      &u,
      "{\"type\":\"CTP_RETURN\",\"answerID\":\"q-1\",\"exception\":"
      "{\"body\":\"#[\\\"%x\\\",\",\"slots\":[]}}",
      &m, &err));
  ck_assert(m.value_skipped && !m.value_failed && vat_is_null(m.value));
  ck_assert_int_eq(u.asked, 1);
  ck_assert(u.type_seen == VAT_CAPTP_RETURN && u.reject_seen);
  ck_assert_str_eq(m.id, "q-1");
  /* Wanted: decoded. */
  ck_assert_vat_ok(decode_unwanted(
      &u,
      "{\"type\":\"CTP_RESOLVE\",\"promiseID\":\"p-2\",\"res\":{\"body\":"
      "\"7\",\"slots\":[]}}",
      &m, &err));
  ck_assert(!m.value_skipped && vat_equal(m.value, vat_float(7)));
  ck_assert(u.type_seen == VAT_CAPTP_RESOLVE && !u.reject_seen);
  /* Unwanted but naming a slot: decoded, the slot imported. */
  ck_assert_vat_ok(decode_unwanted(
      &u,
      "{\"type\":\"CTP_RETURN\",\"answerID\":\"q-1\",\"result\":{\"body\":"
      "\"{\\\"@qclass\\\":\\\"slot\\\",\\\"index\\\":0}\","
      "\"slots\":[\"o+5\"]}}",
      &m, &err));
  ck_assert(!m.value_skipped && vat_type_of(m.value) == VAT_T_REF);
  ck_assert_int_eq(u.slots.imports, 1);
  /* Unwanted, and the envelope wrong: still an error, not a skip. */
  ck_assert_vat_err(
      decode_unwanted(&u,
                      "{\"type\":\"CTP_RETURN\",\"answerID\":\"q-1\","
                      "\"result\":{\"body\":\"1\",\"slots\":[1]}}",
                      &m, &err),
      VAT_EDECODE);
  ck_assert(!m.value_skipped && !m.value_failed);
  ck_assert_vat_err(
      decode_unwanted(&u,
                      "{\"type\":\"CTP_RETURN\",\"answerID\":\"q-1\","
                      "\"result\":{\"body\":\"1\"}}",
                      &m, &err),
      VAT_EDECODE);
  /* Not asked for messages without a value. */
  int asked = u.asked;
  ck_assert_vat_ok(decode_unwanted(
      &u, "{\"type\":\"CTP_BOOTSTRAP\",\"questionID\":\"q-1\"}", &m, &err));
  ck_assert_vat_ok(decode_unwanted(
      &u, "{\"type\":\"CTP_DROP\",\"slotID\":\"o-1\"}", &m, &err));
  ck_assert_int_eq(u.asked, asked);
}
END_TEST

/* A message of every type, and both outcomes of those that have two. */
static const vat_captp_msg *every_type(size_t *n) {
  static vat_captp_msg all[9];
  vat_value method = vat_list(
      (vat_value[]){str("incr"), vat_list((vat_value[]){ref_n(3)}, 1)}, 2);
  vat_captp_msg msgs[] = {
      {.type = VAT_CAPTP_BOOTSTRAP, .id = "q-1", .has_epoch = true},
      {.type = VAT_CAPTP_CALL, .id = "q-2", .target = "o-1", .value = method},
      {.type = VAT_CAPTP_RETURN, .id = "q-2", .value = vat_int(7)},
      {.type = VAT_CAPTP_RETURN,
       .id = "q-3",
       .is_reject = true,
       .value = vat_error(vat_atom_intern("Error"), str("no"))},
      {.type = VAT_CAPTP_RESOLVE, .id = "p-1", .value = str("later")},
      {.type = VAT_CAPTP_RESOLVE, .id = "p-2", .is_reject = true},
      {.type = VAT_CAPTP_DROP,
       .id = "o-4",
       .dec_refs = 3,
       .has_epoch = true,
       .epoch = 2},
      {.type = VAT_CAPTP_DISCONNECT, .reason_json = "{\"why\":\"done\"}"},
      {.type = VAT_CAPTP_DISCONNECT},
  };
  _Static_assert(sizeof msgs / sizeof msgs[0] == sizeof all / sizeof all[0],
                 "all holds them all");
  memcpy(all, msgs, sizeof msgs);
  *n = sizeof all / sizeof all[0];
  return all;
}

START_TEST(messages_of_every_type_round_trip) {
  size_t n_msgs;
  const vat_captp_msg *msgs = every_type(&n_msgs);
  for (size_t i = 0; i < n_msgs; i++) {
    slot_table t = {0};
    vat_captp_slots slots = table_of(&t);
    char *frame;
    size_t len, used, flen;
    vat_captp_error err;
    int rc = vat_captp_encode_frame(&msgs[i], &slots, &frame, &len, &err);
    ck_assert_msg(rc == VAT_OK, "msg %zu: %s %s", i, vat_err_name(rc),
                  err.detail);
    vat_netstring_reader *r = vat_netstring_reader_new(0);
    const char *json;
    ck_assert_int_eq(
        vat_netstring_read(r, frame, len, &used, &json, &flen, &err), 1);
    ck_assert_uint_eq(used, len);
    vat_captp_msg back;
    ck_assert_vat_ok(vat_captp_decode(json, flen, &slots, &back, &err));
    vat_netstring_reader_free(r);
    const vat_captp_msg *m = &msgs[i];
    ck_assert_int_eq(back.type, m->type);
    ck_assert_int_eq(back.has_epoch, m->has_epoch);
    ck_assert_int_eq(back.epoch, m->epoch);
    ck_assert_int_eq(back.is_reject, m->is_reject);
    ck_assert_int_eq(back.dec_refs, m->dec_refs);
    ck_assert(vat_equal(back.value, m->value));
    if (m->id != NULL)
      ck_assert_str_eq(back.id, m->id);
    if (m->target != NULL)
      ck_assert_str_eq(back.target, m->target);
    if (m->reason_json != NULL)
      ck_assert_str_eq(back.reason_json, m->reason_json);
    else
      ck_assert_ptr_null(back.reason_json);
  }
  /* Unknown types decode, to be ignored; bad messages do not encode. */
  vat_captp_msg back, empty = {.type = VAT_CAPTP_CALL};
  const char *trap = "{\"type\":\"CTP_TRAP_ITERATE\",\"questionID\":\"q-1\"}";
  ck_assert_vat_ok(vat_captp_decode(trap, strlen(trap), NULL, &back, NULL));
  ck_assert_int_eq(back.type, VAT_CAPTP_UNKNOWN);
  ck_assert_str_eq(back.type_name, "CTP_TRAP_ITERATE");
  char *out;
  size_t len;
  ck_assert_vat_err(vat_captp_encode(&empty, NULL, &out, &len, NULL),
                    VAT_EINVAL);
  ck_assert_vat_err(vat_captp_encode(&back, NULL, &out, &len, NULL),
                    VAT_EINVAL);
  vat_captp_msg bad_reason = {.type = VAT_CAPTP_DISCONNECT,
                              .reason_json = "{nope"};
  ck_assert_vat_err(vat_captp_encode(&bad_reason, NULL, &out, &len, NULL),
                    VAT_EINVAL);
  ck_assert_str_eq(vat_captp_type_name(VAT_CAPTP_RESOLVE), "CTP_RESOLVE");
  ck_assert_ptr_null(vat_captp_type_name(VAT_CAPTP_UNKNOWN));
}
END_TEST

/* --- The recorded Endo exchange ---------------------------------------- */

typedef struct blob {
  char *data;
  size_t len;
} blob;

static blob read_file(const char *path) {
  FILE *f = fopen(path, "rb");
  ck_assert_msg(f != NULL, "cannot open %s", path);
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  blob b = {malloc((size_t)n + 1), (size_t)n};
  ck_assert_uint_eq(fread(b.data, 1, (size_t)n, f), (size_t)n);
  b.data[n] = '\0';
  fclose(f);
  return b;
}

static void free_paths(char **paths, size_t n) {
  for (size_t i = 0; i < n; i++)
    free(paths[i]);
  free(paths);
}

static int by_name(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The sorted paths of the files in a corpus folder. */
static size_t corpus_files(const char *sub, char ***paths) {
  char dir[512];
  snprintf(dir, sizeof dir, "%s/%s", VAT_TEST_CAPTP_CORPUS, sub);
  DIR *d = opendir(dir);
  ck_assert_msg(d != NULL, "no corpus folder %s", dir);
  size_t n = 0, cap = 64;
  *paths = malloc(cap * sizeof **paths);
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    if (e->d_name[0] == '.')
      continue;
    if (n == cap)
      *paths = realloc(*paths, (cap *= 2) * sizeof **paths);
    size_t len = strlen(dir) + strlen(e->d_name) + 2;
    (*paths)[n] = malloc(len);
    snprintf((*paths)[n++], len, "%s/%s", dir, e->d_name);
  }
  closedir(d);
  qsort(*paths, n, sizeof **paths, by_name);
  return n;
}

/* A message's JSON with each CapData body parsed in place, for comparing
 * structure: object key order, spacing and number spelling ("1e+300"
 * against "1.0000000000000001e+300") may differ; values may not. */
static json_t *structure(const char *json, size_t len) {
  json_error_t jerr;
  json_t *j =
      json_loadb(json, len, JSON_DECODE_INT_AS_REAL | JSON_ALLOW_NUL, &jerr);
  ck_assert_msg(j != NULL, "%s", jerr.text);
  const char *fields[] = {"method", "result", "exception", "res", "rej"};
  for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++) {
    json_t *cd = json_object_get(j, fields[i]);
    json_t *body = json_object_get(cd, "body");
    if (body == NULL)
      continue;
    json_t *parsed = json_loadb(
        json_string_value(body), json_string_length(body),
        JSON_DECODE_ANY | JSON_DECODE_INT_AS_REAL | JSON_ALLOW_NUL, &jerr);
    ck_assert_msg(parsed != NULL, "body: %s", jerr.text);
    json_object_set_new(cd, "body", parsed);
  }
  return j;
}

START_TEST(endo_frames_decode_and_reencode_the_same) {
  char **paths;
  size_t n = corpus_files("frames", &paths);
  ck_assert_uint_ge(n, 30);
  size_t types_seen[VAT_CAPTP_DISCONNECT + 1] = {0};
  /* One table per sender for the whole exchange, as each end of a
   * connection keeps one: a slot name means the same thing each time its
   * sender uses it. */
  static slot_table tables[2];
  memset(tables, 0, sizeof tables);
  for (size_t i = 0; i < n; i++) {
    slot_table *t = &tables[strstr(paths[i], "-server-") != NULL];
    vat_captp_slots slots = table_of(t);
    blob b = read_file(paths[i]);
    vat_netstring_reader *r = vat_netstring_reader_new(0);
    const char *json;
    size_t used, len;
    vat_captp_error err;
    ck_assert_int_eq(
        vat_netstring_read(r, b.data, b.len, &used, &json, &len, &err), 1);
    ck_assert_uint_eq(used, b.len);
    vat_captp_msg msg;
    int rc = vat_captp_decode(json, len, &slots, &msg, &err);
    ck_assert_msg(rc == VAT_OK, "%s: %s %s (%s)", paths[i], vat_err_name(rc),
                  vat_captp_err_name(err.code), err.detail);
    ck_assert_int_ne(msg.type, VAT_CAPTP_UNKNOWN);
    types_seen[msg.type]++;
    char *again;
    size_t again_len;
    rc = vat_captp_encode(&msg, &slots, &again, &again_len, &err);
    ck_assert_msg(rc == VAT_OK, "%s: re-encode: %s (%s)", paths[i],
                  vat_captp_err_name(err.code), err.detail);
    json_t *want = structure(json, len), *got = structure(again, again_len);
    char *w = json_dumps(want, JSON_COMPACT | JSON_SORT_KEYS);
    char *g = json_dumps(got, JSON_COMPACT | JSON_SORT_KEYS);
    ck_assert_msg(json_equal(want, got), "%s:\n sent %s\n  got %s", paths[i], w,
                  g);
    free(w);
    free(g);
    json_decref(want);
    json_decref(got);
    vat_netstring_reader_free(r);
    free(b.data);
  }
  free_paths(paths, n);
  for (int type = VAT_CAPTP_BOOTSTRAP; type <= VAT_CAPTP_DISCONNECT; type++)
    if (type != VAT_CAPTP_DROP)
      ck_assert_msg(types_seen[type] > 0, "no %s in the corpus",
                    vat_captp_type_name(type));
}
END_TEST

static vat_value field_of(vat_value map, const char *name) {
  vat_value f;
  ck_assert_msg(vat_map_get(map, A(name), &f) == VAT_OK, "no field %s", name);
  return f;
}

/* The client's echo of every kind decodes to the documented forms. */
START_TEST(endo_values_decode_to_the_documented_forms) {
  char **paths;
  size_t n = corpus_files("frames", &paths);
  blob b = {0};
  for (size_t i = 0; i < n && b.data == NULL; i++) {
    if (strstr(paths[i], "-client-CTP_CALL") == NULL)
      continue;
    b = read_file(paths[i]);
    if (strstr(b.data, "bangStr") == NULL) {
      free(b.data);
      b.data = NULL;
    }
  }
  ck_assert_ptr_nonnull(b.data);
  slot_table t = {0};
  vat_captp_slots slots = table_of(&t);
  vat_captp_msg msg;
  const char *json = strchr(b.data, ':') + 1;
  ck_assert_vat_ok(vat_captp_decode(json, b.len - (size_t)(json - b.data) - 1,
                                    &slots, &msg, NULL));
  ck_assert_int_eq(msg.type, VAT_CAPTP_CALL);
  ck_assert_str_eq(msg.id, "q-3");
  ck_assert_str_eq(msg.target, "o-1");
  ck_assert(msg.has_epoch && msg.epoch == 0);
  ck_assert_str_eq(vat_string_data(vat_at(msg.value, 0)), "echo");
  vat_value all = vat_at(vat_at(msg.value, 1), 0);
  ck_assert_int_eq(all.type, VAT_T_MAP);
  ck_assert(vat_equal(field_of(all, "int"), vat_float(42)));
  ck_assert(vat_equal(field_of(all, "negZero"), vat_float(0)));
  ck_assert(vat_equal(field_of(all, "smallBigint"), vat_int(-3)));
  vat_value digits = str("12345678901234567890");
  ck_assert(vat_equal(field_of(all, "bigint"),
                      vat_record(vat_atom_intern("bigint"), &digits, 1)));
  ck_assert(isnan(field_of(all, "nan").as.f));
  ck_assert(vat_is_atom(field_of(all, "undef"), vat_atom_intern("undefined")));
  ck_assert(vat_is_atom(field_of(all, "asyncIter"),
                        vat_atom_intern("@@asyncIterator")));
  vat_value only = str("only");
  ck_assert(vat_equal(field_of(all, "set1"),
                      vat_record(vat_atom_intern("copySet"), &only, 1)));
  ck_assert(vat_equal(field_of(all, "map"),
                      pair_map(vat_int(3), str("c"), vat_int(1), str("a"))));
  ck_assert(
      vat_equal(field_of(all, "point"),
                vat_record(vat_atom_intern("point"),
                           (vat_value[]){vat_float(1), vat_float(2)}, 2)));
  vat_value e = field_of(all, "error");
  ck_assert_str_eq(vat_atom_name(vat_error_code(e)), "TypeError");
  vat_value m;
  ck_assert_vat_ok(vat_map_get(vat_error_payload(e), A("message"), &m));
  ck_assert_str_eq(vat_string_data(m), "bad thing");
  ck_assert_vat_ok(vat_map_get(vat_error_payload(e), A("errorId"), &m));
  ck_assert_int_eq(m.type, VAT_T_STRING);
  ck_assert(vat_equal(field_of(all, "remotable"), field_of(all, "again")));
  ck_assert_int_eq(field_of(all, "remotable").type, VAT_T_REF);
  ck_assert_int_eq(t.imports, 1);
  ck_assert_str_eq(t.ifaces[0], "Alleged: Counter");
  free(b.data);
  free_paths(paths, n);
}
END_TEST

/* The whole exchange as one stream, fed split at every byte position. */
START_TEST(endo_stream_split_at_every_position) {
  char **paths;
  size_t n = corpus_files("frames", &paths);
  size_t total = 0, cap = 1 << 16;
  char *stream = malloc(cap);
  size_t *ends = malloc(n * sizeof *ends);
  for (size_t i = 0; i < n && i < 12; i++) {
    blob b = read_file(paths[i]);
    while (total + b.len > cap)
      stream = realloc(stream, cap *= 2);
    memcpy(stream + total, b.data, b.len);
    total += b.len;
    ends[i] = total;
    free(b.data);
  }
  size_t frames = n < 12 ? n : 12;
  for (size_t split = 0; split <= total; split++) {
    vat_netstring_reader *r = vat_netstring_reader_new(0);
    size_t got = 0, pos = 0;
    size_t cuts[] = {split, total};
    for (size_t c = 0; c < 2; c++) {
      while (pos < cuts[c]) {
        const char *frame;
        size_t used, len;
        int rc = vat_netstring_read(r, stream + pos, cuts[c] - pos, &used,
                                    &frame, &len, NULL);
        ck_assert_int_ge(rc, 0);
        pos += used;
        if (rc == 1) {
          size_t start = got == 0 ? 0 : ends[got - 1];
          /* The payload sits between the header and the ','. */
          ck_assert_int_eq(stream[ends[got] - 1], ',');
          ck_assert_mem_eq(frame, stream + ends[got] - 1 - len, len);
          ck_assert_uint_gt(ends[got] - start, len);
          got++;
        }
      }
    }
    ck_assert_uint_eq(got, frames);
    vat_netstring_reader_free(r);
  }
  free(ends);
  free(stream);
  free_paths(paths, n);
}
END_TEST

/* Endo's smallcaps bodies decode, and this side writes each value back
 * as a body that decodes to it again. */
START_TEST(endo_smallcaps_bodies_decode) {
  char **paths;
  size_t n = corpus_files("smallcaps", &paths);
  ck_assert_uint_ge(n, 5);
  for (size_t i = 0; i < n; i++) {
    blob b = read_file(paths[i]);
    json_t *cd = json_loads(b.data, 0, NULL);
    ck_assert_ptr_nonnull(cd);
    json_t *body = json_object_get(cd, "body"),
           *sl = json_object_get(cd, "slots");
    const char *names[8];
    size_t ns = json_array_size(sl);
    for (size_t k = 0; k < ns && k < 8; k++)
      names[k] = json_string_value(json_array_get(sl, k));
    slot_table t = {0};
    vat_captp_slots slots = table_of(&t);
    vat_value v;
    vat_captp_error err;
    int rc =
        vat_capdata_decode(json_string_value(body), json_string_length(body),
                           names, ns, &slots, &v, &err);
    ck_assert_msg(rc == VAT_OK, "%s: %s (%s)", paths[i],
                  vat_captp_err_name(err.code), err.detail);
    /* Written back by this side in smallcaps: the same value again. */
    vat_capdata out;
    vat_value again;
    ck_assert_vat_ok(
        vat_capdata_encode_as(v, VAT_CAPTP_SMALLCAPS, &slots, &out, NULL));
    ck_assert_vat_ok(vat_capdata_decode(out.body, out.body_len, out.slots,
                                        out.n_slots, &slots, &again, NULL));
    ck_assert_msg(vat_equal(v, again), "%s:\n endo %s\n ours %s", paths[i],
                  json_string_value(body), out.body);
    if (i == 0) {
      /* All kinds, as the capdata frames carry them. */
      vat_value f;
      ck_assert_vat_ok(vat_map_get(v, A("bigint"), &f));
      ck_assert_int_eq(f.type, VAT_T_RECORD);
      ck_assert_vat_ok(vat_map_get(v, A("smallBigint"), &f));
      ck_assert(f.type == VAT_T_INT && f.as.i == -3);
      ck_assert_vat_ok(vat_map_get(v, A("bangStr"), &f));
      ck_assert_str_eq(vat_string_data(f), "!not special");
      ck_assert_vat_ok(vat_map_get(v, A("undef"), &f));
      ck_assert(vat_is_atom(f, vat_atom_intern("undefined")));
      ck_assert_vat_ok(vat_map_get(v, A("ninf"), &f));
      ck_assert(f.type == VAT_T_FLOAT && f.as.f == -INFINITY);
      ck_assert_vat_ok(vat_map_get(v, A("symbol"), &f));
      ck_assert(vat_is_atom(f, vat_atom_intern("ok")));
      ck_assert_vat_ok(vat_map_get(v, A("map"), &f));
      ck_assert(f.type == VAT_T_MAP && vat_len(f) == 2);
      ck_assert_vat_ok(vat_map_get(v, A("error"), &f));
      ck_assert_str_eq(vat_atom_name(vat_error_code(f)), "TypeError");
      ck_assert_str_eq(vat_string_data(vat_error_payload(f)), "bad thing");
      vat_value r1, r2;
      ck_assert_vat_ok(vat_map_get(v, A("remotable"), &r1));
      ck_assert_vat_ok(vat_map_get(v, A("again"), &r2));
      ck_assert(r1.type == VAT_T_REF && vat_equal(r1, r2));
      ck_assert_str_eq(t.ifaces[0], "Alleged: Counter");
    }
    json_decref(cd);
    free(b.data);
  }
  free_paths(paths, n);
}
END_TEST

/* --- Netstrings -------------------------------------------------------- */

typedef struct bad_frame {
  const char *bytes;
  size_t max;
  int rc;
  vat_captp_err code;
  size_t offset;
} bad_frame;

static const bad_frame bad_frames[] = {
    {"01:a,", 0, VAT_EFRAME, VAT_CAPTP_ERR_LEADING_ZERO, 1},
    {"1234567890:", VAT_NETSTRING_MAX_FRAME, VAT_EFRAME,
     VAT_CAPTP_ERR_LENGTH_DIGITS, 9},
    {":", 0, VAT_EFRAME, VAT_CAPTP_ERR_EMPTY_LENGTH, 0},
    {"3:abc;", 0, VAT_EFRAME, VAT_CAPTP_ERR_MISSING_COMMA, 5},
    {"3:abcd", 0, VAT_EFRAME, VAT_CAPTP_ERR_MISSING_COMMA, 5},
    {"a", 0, VAT_EFRAME, VAT_CAPTP_ERR_LENGTH_CHAR, 0},
    {"12 :", 0, VAT_EFRAME, VAT_CAPTP_ERR_LENGTH_CHAR, 2},
    {"-1:", 0, VAT_EFRAME, VAT_CAPTP_ERR_LENGTH_CHAR, 0},
    {"1:a,x", 0, VAT_EFRAME, VAT_CAPTP_ERR_LENGTH_CHAR, 4},
    {"1001:", 1000, VAT_EFRAMESIZE, VAT_CAPTP_ERR_TOO_LARGE, 3},
    {"999999999:", 0, VAT_EFRAMESIZE, VAT_CAPTP_ERR_TOO_LARGE, 6},
};

START_TEST(bad_frames_are_named_and_stick) {
  const bad_frame *b = &bad_frames[_i];
  size_t len = strlen(b->bytes);
  /* Whole, then byte by byte: the same error at the same offset. */
  for (int bytewise = 0; bytewise < 2; bytewise++) {
    vat_netstring_reader *r = vat_netstring_reader_new(b->max);
    vat_captp_error err = {0};
    int rc = 0;
    size_t pos = 0;
    while (pos < len) {
      const char *frame;
      size_t used, flen;
      size_t chunk = bytewise ? 1 : len - pos;
      rc = vat_netstring_read(r, b->bytes + pos, chunk, &used, &frame, &flen,
                              &err);
      pos += used;
      if (rc < 0)
        break;
    }
    ck_assert_msg(rc == b->rc && err.code == b->code && err.offset == b->offset,
                  "%s: %s %s at %zu", b->bytes, vat_err_name(rc),
                  vat_captp_err_name(err.code), err.offset);
    /* Failed for good. */
    const char *frame;
    size_t used, flen;
    vat_captp_error again;
    ck_assert_int_eq(
        vat_netstring_read(r, "1:a,", 4, &used, &frame, &flen, &again), b->rc);
    ck_assert_int_eq(again.code, b->code);
    vat_netstring_reader_free(r);
  }
}
END_TEST

START_TEST(netstring_edge_cases) {
  vat_netstring_reader *r = vat_netstring_reader_new(4);
  const char *frame;
  size_t used, len;
  /* Empty frames, a frame exactly at the maximum, several per feed. */
  const char *in = "0:,4:abcd,0:,";
  size_t pos = 0, got = 0;
  while (pos < strlen(in)) {
    int rc = vat_netstring_read(r, in + pos, strlen(in) - pos, &used, &frame,
                                &len, NULL);
    ck_assert_int_eq(rc, 1);
    pos += used;
    ck_assert_uint_eq(len, got == 1 ? 4 : 0);
    got++;
  }
  ck_assert_uint_eq(got, 3);
  ck_assert_int_eq(vat_netstring_read(r, "", 0, &used, &frame, &len, NULL), 0);
  ck_assert_vat_err(vat_netstring_read(NULL, "", 0, &used, &frame, &len, NULL),
                    VAT_EINVAL);
  vat_netstring_reader_free(r);
  vat_netstring_reader_free(NULL);
  char header[12];
  ck_assert_uint_eq(vat_netstring_header(0, header), 2);
  ck_assert_str_eq(header, "0:");
  ck_assert_uint_eq(vat_netstring_header(VAT_NETSTRING_MAX_FRAME, header), 10);
  ck_assert_uint_eq(vat_netstring_header(VAT_NETSTRING_MAX_FRAME + 1, header),
                    0);
}
END_TEST

START_TEST(every_reason_has_a_name_and_text) {
#define CHECK_REASON(name, text)                                               \
  ck_assert_str_eq(vat_captp_err_name(VAT_CAPTP_ERR_##name),                   \
                   "VAT_CAPTP_ERR_" #name);                                    \
  ck_assert_str_eq(vat_captp_err_text(VAT_CAPTP_ERR_##name), text);
  VAT_CAPTP_ERR_MAP(CHECK_REASON)
#undef CHECK_REASON
  ck_assert_str_eq(vat_captp_err_name((vat_captp_err)999),
                   "VAT_CAPTP_ERR_UNKNOWN");
  ck_assert_str_eq(vat_captp_err_text((vat_captp_err)999), "unknown error");
}
END_TEST

/* --- Names from the wire ----------------------------------------------- */
/* A peer chooses record keys, symbol names, tags and error names; each
 * decodes to an atom. Those atoms must not outlive the values that hold
 * them, or a peer sending new names grows the process for ever. */

/* The bodies that carry a name chosen by the peer, in both encodings. */
static const char *const name_forms[] = {
    "{\"%s\":1}",
    "#{\"%s\":1}",
    "{\"@qclass\":\"symbol\",\"name\":\"%s\"}",
    "#\"%%%s\"",
    "{\"@qclass\":\"tagged\",\"tag\":\"%s\",\"payload\":[]}",
    "#{\"#tag\":\"%s\",\"payload\":[]}",
    "{\"@qclass\":\"error\",\"name\":\"%s\",\"message\":\"m\"}",
    "#{\"#error\":\"m\",\"name\":\"%s\"}",
};
enum { NAME_FORMS = sizeof name_forms / sizeof name_forms[0] };

/* The atom the body decodes to (a key, symbol, label or error code). */
static const vat_atom *decoded_name(vat_value v) {
  switch (vat_type_of(v)) {
  case VAT_T_MAP:
    ck_assert_uint_eq(vat_len(v), 1);
    return ((const vat__map *)v.as.obj)->entries[0].key.as.atom;
  case VAT_T_ATOM:
    return v.as.atom;
  case VAT_T_RECORD:
    return vat_record_label(v);
  case VAT_T_ERROR:
    return vat_error_code(v);
  default:
    ck_abort_msg("not a named value: type %d", (int)vat_type_of(v));
    return NULL;
  }
}

static const vat_atom *decode_named(unsigned form, const char *name) {
  char body[256];
  snprintf(body, sizeof body, name_forms[form], name);
  vat_value v;
  vat_captp_error err;
  int rc = vat_capdata_decode(body, strlen(body), NULL, 0, NULL, &v, &err);
  ck_assert_msg(rc == VAT_OK, "%s: %s", body, err.detail);
  return decoded_name(v);
}

/* Live bytes: the collector's heap in use, and malloc's (where the atom
 * table lives). */
static size_t live_bytes_after_collecting(void) {
  for (int i = 0; i < 3; i++)
    GC_gcollect();
  struct mallinfo2 mi = mallinfo2();
  return GC_get_heap_size() - GC_get_free_bytes() + mi.uordblks + mi.hblkhd;
}

/* 50-byte names, unique per (round, i). */
static void decode_unique_names(unsigned round, size_t n) {
  char name[64];
  for (size_t i = 0; i < n; i++) {
    snprintf(name, sizeof name,
             "wire-name-%02u-%09zu-padding-padding-padding-p", round, i);
    decode_named((unsigned)(i % NAME_FORMS), name);
  }
}

START_TEST(unique_wire_names_leave_the_live_heap_flat) {
  enum { ROUNDS = 4 };
  size_t n = test_quick() ? 20000 : 200000;
  decode_unique_names(0, n / 4); /* the table and heap find their size */
  size_t live[ROUNDS + 1];
  live[0] = live_bytes_after_collecting();
  fprintf(stderr, "wire names: live before: %zu KiB\n", live[0] / 1024);
  for (unsigned r = 1; r <= ROUNDS; r++) {
    decode_unique_names(r, n);
    live[r] = live_bytes_after_collecting();
    fprintf(stderr, "wire names: live after %u x %zu new names: %zu KiB\n", r,
            n, live[r] / 1024);
  }
  /* Each round's names are garbage once decoded: what is live at the end
   * is what was live before, within slack for the collector's and the
   * table's free room. Kept atoms would be ~80 bytes a name. */
  size_t slack = (size_t)n * 8 + (1u << 20);
  ck_assert_msg(live[ROUNDS] < live[0] + slack,
                "grew from %zu to %zu KiB (slack %zu KiB)", live[0] / 1024,
                live[ROUNDS] / 1024, slack / 1024);
}
END_TEST

START_TEST(wire_names_are_the_programs_atoms) {
  const vat_atom *mine = vat_atom_intern("wire-names-the-program-interned");
  for (unsigned f = 0; f < NAME_FORMS; f++)
    ck_assert_ptr_eq(decode_named(f, "wire-names-the-program-interned"), mine);
  /* A name the peer sent first is one atom while it lives, however it
   * comes, and the program's interning of it is that atom too. */
  vat_value held[NAME_FORMS];
  const vat_atom *first = decode_named(0, "wire-names-the-peer-sent-first");
  held[0] = vat_atom_value(first);
  for (unsigned f = 1; f < NAME_FORMS; f++) {
    const vat_atom *again = decode_named(f, "wire-names-the-peer-sent-first");
    ck_assert_ptr_eq(again, first);
    held[f] = vat_atom_value(again);
    GC_gcollect();
  }
  ck_assert_ptr_eq(vat_atom_intern("wire-names-the-peer-sent-first"), first);
  for (unsigned f = 0; f < NAME_FORMS; f++)
    ck_assert_ptr_eq(held[f].as.atom, first);
}
END_TEST

/* --- The streaming encoder against the one it replaced ----------------- */
/* captp_reference.c is the tree-building encoder as it was; whatever it
 * wrote (frames, bodies, slot names) or refused (code, reason, detail),
 * the streaming encoder must write or refuse the same, byte for byte. */

/* Stand-ins whose export is odd: a name that is not UTF-8, a refusal, a
 * name that fills the buffer without a NUL, ifaces that need escapes. */
#define ODD_STAND_INS 12
static char odd_stand_ins[ODD_STAND_INS];

typedef struct odd_table {
  int exports;
} odd_table;

static int odd_export(void *ctx, vat_value v, char slot[VAT_CAPTP_SLOT_MAX],
                      const char **iface) {
  static const char *const ifaces[] = {
      NULL,
      "Alleged: Thing",
      "q\"uote b\\ack",
      "tab\tnl\n\x01",
      "h\xc3\xa9llo \xe2\x9c\x93",
      "\xff bad",
      "",
  };
  odd_table *t = ctx;
  t->exports++;
  size_t i = (size_t)((const char *)v.as.obj - odd_stand_ins);
  *iface = ifaces[i % (sizeof ifaces / sizeof ifaces[0])];
  if (i == 9) {
    snprintf(slot, VAT_CAPTP_SLOT_MAX, "\xc3(");
  } else if (i == 10) {
    return VAT_ENOTFOUND;
  } else if (i == 11) {
    memset(slot, '7', VAT_CAPTP_SLOT_MAX);
  } else {
    snprintf(slot, VAT_CAPTP_SLOT_MAX, "%c+%d", v.type == VAT_T_REF ? 'o' : 'p',
             t->exports);
  }
  return VAT_OK;
}

/* Which table a comparison uses: the tests' own or the odd one. */
typedef struct tables {
  slot_table plain;
  odd_table odd;
  vat_captp_slots slots;
} tables;

static void tables_init(tables *t, bool odd) {
  memset(t, 0, sizeof *t);
  t->slots = odd ? (vat_captp_slots){.ctx = &t->odd, .export_slot = odd_export}
                 : table_of(&t->plain);
}

static void same_failure(int rc_new, const vat_captp_error *new_err, int rc_old,
                         const vat_captp_error *old_err, const char *what) {
  ck_assert_msg(rc_new == rc_old && new_err->code == old_err->code &&
                    strcmp(new_err->detail, old_err->detail) == 0,
                "%s: new %s %s (%s), old %s %s (%s)", what,
                vat_err_name(rc_new), vat_captp_err_name(new_err->code),
                new_err->detail, vat_err_name(rc_old),
                vat_captp_err_name(old_err->code), old_err->detail);
}

static void same_text(const char *new_text, size_t new_len,
                      const char *old_text, size_t old_len, const char *what) {
  ck_assert_msg(new_len == old_len && memcmp(new_text, old_text, new_len) == 0,
                "%s:\n new %.*s\n old %.*s", what, (int)new_len, new_text,
                (int)old_len, old_text);
  ck_assert_msg(new_text[new_len] == '\0', "%s: not NUL-terminated", what);
}

/* v's capdata from both encoders, each with a fresh table of its own. */
static void same_capdata(vat_value v, bool odd, const char *what) {
  tables a, b;
  tables_init(&a, odd);
  tables_init(&b, odd);
  vat_capdata cn, co;
  vat_captp_error en, eo;
  int rn = vat_capdata_encode(v, &a.slots, &cn, &en);
  int ro = captp_ref_capdata_encode(v, &b.slots, &co, &eo);
  same_failure(rn, &en, ro, &eo, what);
  ck_assert_msg(a.plain.exports == b.plain.exports &&
                    a.odd.exports == b.odd.exports,
                "%s: the table was asked %d/%d times, not %d/%d", what,
                a.plain.exports, a.odd.exports, b.plain.exports, b.odd.exports);
  if (rn != VAT_OK)
    return;
  same_text(cn.body, cn.body_len, co.body, co.body_len, what);
  ck_assert_msg(cn.n_slots == co.n_slots, "%s: %zu slots, not %zu", what,
                cn.n_slots, co.n_slots);
  for (size_t i = 0; i < cn.n_slots; i++)
    ck_assert_msg(strcmp(cn.slots[i], co.slots[i]) == 0, "%s: slot %zu %s/%s",
                  what, i, cn.slots[i], co.slots[i]);
  ck_assert_ptr_null(cn.slots[cn.n_slots]);
}

/* One buffer for every frame encoded into one (framed == 2), reused
 * from message to message as a connection reuses its own, so frames of
 * every size follow each other in it. */
static vat_captp_frame_buf reused;

static int encode_as(int framed, const vat_captp_msg *m,
                     const vat_captp_slots *slots, char **text, size_t *len,
                     vat_captp_error *err) {
  if (framed == 2)
    return vat_captp_encode_frame_into(&reused, m, slots, text, len, err);
  return framed ? vat_captp_encode_frame(m, slots, text, len, err)
                : vat_captp_encode(m, slots, text, len, err);
}

/* The message's JSON and its frame from both encoders (ours both into
 * fresh memory and into a reused buffer). */
static void same_message(const vat_captp_msg *m, bool odd, const char *what) {
  for (int framed = 0; framed < 3; framed++) {
    tables a, b;
    tables_init(&a, odd);
    tables_init(&b, odd);
    char *tn = NULL, *to = NULL;
    size_t ln = 0, lo = 0;
    vat_captp_error en, eo;
    int rn = encode_as(framed, m, &a.slots, &tn, &ln, &en);
    int ro = framed ? captp_ref_encode_frame(m, &b.slots, &to, &lo, &eo)
                    : captp_ref_encode(m, &b.slots, &to, &lo, &eo);
    same_failure(rn, &en, ro, &eo, what);
    if (rn == VAT_OK)
      same_text(tn, ln, to, lo, what);
  }
  same_capdata(m->value, odd, what);
}

START_TEST(encoder_matches_reference_on_the_tests_values) {
  char what[64];
  size_t n;
  every_kind(0, &n);
  for (size_t i = 0; i < n; i++) {
    snprintf(what, sizeof what, "every_kind %zu", i);
    same_capdata(every_kind(i, &n), false, what);
    same_capdata(every_kind(i, &n), true, what);
    vat_captp_msg m = {.type = VAT_CAPTP_RESOLVE,
                       .id = "p-1",
                       .value = every_kind(i, &n),
                       .has_epoch = true,
                       .epoch = (int64_t)i};
    same_message(&m, false, what);
  }
  const vat_value *bad = bad_inside(&n);
  for (size_t i = 0; i < n; i++) {
    snprintf(what, sizeof what, "bad_inside %zu", i);
    same_capdata(bad[i], false, what);
  }
  vat_value deep = vat_null();
  for (int i = 0; i < VAT_CAPTP_MAX_DEPTH; i++) {
    snprintf(what, sizeof what, "depth %d", i + 1);
    same_capdata(deep, false, what);
    deep = vat_list(&deep, 1);
  }
  same_capdata(deep, false, "too deep");
  vat_value others[] = {
      vat_float(NAN),
      vat_float(-0.0),
      ref_n(0),
      vat_string_n("\xff\xfe", 2),
      pair_map(vat_atom_value(vat_atom_intern_n("\xc3", 1)), vat_null(), A("a"),
               vat_null()),
      vat_list((vat_value[]){ref_n(1), ref_n(1)}, 2),
      vat_list(
          (vat_value[]){ref_n(1), pair_map(A("k"), ref_n(2), A("l"), ref_n(1))},
          2),
      /* A bad name and a bad value inside: the value's failure is the one
       * reported, and the refs before it are exported all the same. */
      vat_record(vat_atom_intern_n("\xff", 1),
                 (vat_value[]){ref_n(4), vat_string_n("\xc3(", 2)}, 2),
      vat_record(vat_atom_intern_n("\xff", 1), (vat_value[]){ref_n(4)}, 1),
      pair_map(
          vat_atom_value(vat_atom_intern_n("\xc3", 1)),
          vat_list((vat_value[]){ref_n(5), vat_string_n("\xed\xa0\x80", 3)}, 2),
          A("a"), vat_null()),
      vat_error(vat_atom_intern_n("\xff", 1), vat_string_n("\xc3", 1)),
      /* Escapes inside the envelope's string: each once more. */
      str("q\"b\\s/\x01\x1f\x7f\n\t\b\f\r \xc3\xa9"),
  };
  for (size_t i = 0; i < sizeof others / sizeof others[0]; i++) {
    snprintf(what, sizeof what, "other %zu", i);
    same_capdata(others[i], false, what);
    vat_captp_msg m = {
        .type = VAT_CAPTP_RETURN, .id = "q-1", .value = others[i]};
    same_message(&m, false, what);
  }
  /* A bad name over a value the table refuses: the table's code wins. */
  vat_value refused = vat_ref_value((vat_ref *)&odd_stand_ins[10]);
  same_capdata(vat_record(vat_atom_intern_n("\xff", 1), &refused, 1), true,
               "refused under a bad tag");
  same_capdata(pair_map(vat_atom_value(vat_atom_intern_n("\xc3", 1)), refused,
                        A("a"), vat_null()),
               true, "refused under a bad key");
  /* No table at all. */
  vat_capdata cn, co;
  vat_captp_error en, eo;
  same_failure(vat_capdata_encode(ref_n(0), NULL, &cn, &en), &en,
               captp_ref_capdata_encode(ref_n(0), NULL, &co, &eo), &eo,
               "no table");
  const vat_captp_msg *msgs = every_type(&n);
  for (size_t i = 0; i < n; i++) {
    snprintf(what, sizeof what, "every_type %zu", i);
    same_message(&msgs[i], false, what);
  }
  vat_captp_msg bad_msgs[] = {
      {.type = VAT_CAPTP_CALL},
      {.type = VAT_CAPTP_CALL, .id = "q-1"},
      {.type = VAT_CAPTP_UNKNOWN, .id = "q-1"},
      {.type = (vat_captp_type)99, .id = "q-1"},
      {.type = VAT_CAPTP_DISCONNECT, .reason_json = "{nope"},
      {.type = VAT_CAPTP_DISCONNECT, .reason_json = "\"\\u0000\""},
      {.type = VAT_CAPTP_RETURN, .id = "q-\xff", .value = vat_null()},
      {.type = VAT_CAPTP_CALL,
       .id = "q-1",
       .target = "\xc3",
       .value = ref_n(1)},
      {.type = VAT_CAPTP_RETURN, .id = "q-1", .value = vat_string_n("\xc3", 1)},
  };
  for (size_t i = 0; i < sizeof bad_msgs / sizeof bad_msgs[0]; i++) {
    snprintf(what, sizeof what, "bad message %zu", i);
    same_message(&bad_msgs[i], false, what);
  }
  char *tn, *to;
  size_t ln, lo;
  same_failure(vat_captp_encode(NULL, NULL, &tn, &ln, &en), &en,
               captp_ref_encode(NULL, NULL, &to, &lo, &eo), &eo, "NULL msg");
  ck_assert_int_eq(vat_captp_encode(&msgs[0], NULL, NULL, &ln, &en),
                   captp_ref_encode(&msgs[0], NULL, NULL, &lo, &eo));
  ck_assert_int_eq(vat_captp_encode_frame(&msgs[0], NULL, &tn, NULL, &en),
                   captp_ref_encode_frame(&msgs[0], NULL, &to, NULL, &eo));
  /* Into a buffer: a NULL one refused; a failure leaves it usable. */
  ck_assert_int_eq(
      vat_captp_encode_frame_into(NULL, &msgs[0], NULL, &tn, &ln, &en),
      VAT_EINVAL);
  vat_captp_frame_buf buf = {0};
  ck_assert_int_ne(vat_captp_encode_frame_into(
                       &buf,
                       &bad_msgs[sizeof bad_msgs / sizeof bad_msgs[0] - 1],
                       NULL, &tn, &ln, &en),
                   VAT_OK);
  ck_assert_vat_ok(
      vat_captp_encode_frame_into(&buf, &msgs[0], NULL, &tn, &ln, &en));
  ck_assert_vat_ok(captp_ref_encode_frame(&msgs[0], NULL, &to, &lo, &eo));
  same_text(tn, ln, to, lo, "into a buffer after a failure");
  vat_captp_frame_buf_free(&buf);
  ck_assert_ptr_null(buf.data);
  vat_captp_frame_buf_free(NULL);
}
END_TEST

/* Every recorded frame decoded, then encoded by both, through one table
 * per sender as in endo_frames_decode_and_reencode_the_same. */
START_TEST(encoder_matches_reference_on_endo_frames) {
  char **paths;
  size_t n = corpus_files("frames", &paths);
  ck_assert_uint_ge(n, 30);
  static slot_table decoding[2];
  memset(decoding, 0, sizeof decoding);
  for (size_t i = 0; i < n; i++) {
    slot_table *t = &decoding[strstr(paths[i], "-server-") != NULL];
    vat_captp_slots slots = table_of(t);
    blob b = read_file(paths[i]);
    const char *json = strchr(b.data, ':') + 1;
    vat_captp_msg msg;
    ck_assert_vat_ok(vat_captp_decode(json, b.len - (size_t)(json - b.data) - 1,
                                      &slots, &msg, NULL));
    /* Both encoders export through copies of the same table. */
    for (int framed = 0; framed < 3; framed++) {
      slot_table ta = *t, tb = *t;
      vat_captp_slots sa = table_of(&ta), sb = table_of(&tb);
      char *tn, *to;
      size_t ln, lo;
      vat_captp_error en, eo;
      int rn = encode_as(framed, &msg, &sa, &tn, &ln, &en);
      int ro = framed ? captp_ref_encode_frame(&msg, &sb, &to, &lo, &eo)
                      : captp_ref_encode(&msg, &sb, &to, &lo, &eo);
      same_failure(rn, &en, ro, &eo, paths[i]);
      ck_assert_vat_ok(rn);
      same_text(tn, ln, to, lo, paths[i]);
      ck_assert_int_eq(ta.exports, tb.exports);
    }
    free(b.data);
  }
  free_paths(paths, n);
}
END_TEST

/* A seeded generator of values of every kind, odd ones favoured. */
typedef struct rng {
  uint64_t s;
} rng;

static uint64_t next(rng *r) { /* splitmix64 */
  uint64_t z = (r->s += 0x9e3779b97f4a7c15u);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
  return z ^ (z >> 31);
}

static size_t below(rng *r, size_t n) {
  return (size_t)(next(r) % n);
}

/* Pieces of strings: plain, needing escapes, UTF-8 of every length, and
 * (the last ones, rarely picked) not UTF-8. */
static const char *const pieces[] = {
    "a", "Z", " ", "0", "~", "/", "\"", "\\", "\x7f", "\b", "\f", "\n", "\r",
    "\t", "\x01", "\x1f", "\x1b", "\xc3\xa9", "\xc2\x80", "\xdf\xbf",
    "\xe2\x9c\x93", "\xe0\xa0\x80", "\xed\x9f\xbf", "\xee\x80\x80",
    "\xef\xbf\xbf", "\xf0\x9d\x84\x9e", "\xf0\x90\x80\x80", "\xf4\x8f\xbf\xbf",
    "\\u0041", "\\\"", "\"\\", "@qclass", "#", "!", "$", "%",
    /* not UTF-8 */
    "\xc0\x80", "\xc1\xbf", "\xed\xa0\x80", "\xed\xbf\xbf", "\xe0\x9f\xbf",
    "\xf0\x8f\xbf\xbf", "\xf4\x90\x80\x80", "\xf5\x80\x80\x80", "\xff", "\x80",
    "\xc3", "\xe2\x9c", "\xf0\x9d\x84", "\xc3\x28"};
enum { PIECES = sizeof pieces / sizeof pieces[0], GOOD_PIECES = PIECES - 14 };

/* Random text: len pieces, a NUL now and then, and with probability
 * 1/bad_odds one piece that is not UTF-8. */
static size_t random_text(rng *r, char *buf, size_t cap, size_t pieces_n,
                          size_t bad_odds) {
  size_t len = 0;
  size_t bad_at = below(r, bad_odds) == 0 ? below(r, pieces_n + 1) : SIZE_MAX;
  for (size_t i = 0; i <= pieces_n; i++) {
    const char *p;
    size_t plen;
    if (i == bad_at) {
      p = pieces[GOOD_PIECES + below(r, PIECES - GOOD_PIECES)];
      plen = strlen(p);
    } else if (i == pieces_n) {
      break;
    } else if (below(r, 40) == 0) {
      p = "";
      plen = 1; /* a NUL */
    } else {
      p = pieces[below(r, GOOD_PIECES)];
      plen = strlen(p);
    }
    if (len + plen >= cap)
      break;
    memcpy(buf + len, p, plen);
    len += plen;
  }
  buf[len] = '\0';
  return len;
}

static vat_value random_string(rng *r) {
  /* Now and then long enough to cross the writer's 1024-byte chunks. */
  size_t n = below(r, 50) == 0 ? 300 + below(r, 1200) : below(r, 12);
  char *buf = malloc(4 * n + 8);
  size_t len = random_text(r, buf, 4 * n + 8, n, 30);
  vat_value s = vat_string_n(buf, len);
  free(buf);
  return s;
}

static const vat_atom *random_atom(rng *r) {
  static const char *const names[] = {"ok",
                                      "undefined",
                                      "@qclass",
                                      "message",
                                      "name",
                                      "bigint",
                                      "errorId",
                                      "a",
                                      "b",
                                      "z",
                                      "",
                                      "copySet",
                                      "point",
                                      "Error",
                                      "TypeError",
                                      "@@asyncIterator",
                                      "h\xc3\xa9llo",
                                      "q\"uote",
                                      "back\\slash",
                                      "nl\n",
                                      "stack",
                                      "payload"};
  size_t k = below(r, 60);
  if (k == 0)
    return vat_atom_intern_n("nul\0in", 6);
  if (k == 1)
    return vat_atom_intern_n("\xff", 1);
  if (k == 2)
    return vat_atom_intern_n("\xc3", 1);
  if (k < 6) {
    char buf[64];
    size_t len = random_text(r, buf, sizeof buf, below(r, 6), 8);
    return vat_atom_intern_n(buf, len);
  }
  return vat_atom_intern(names[below(r, sizeof names / sizeof names[0])]);
}

static int64_t random_int(rng *r) {
  static const int64_t edges[] = {
      0, 1,  -1,  INT64_MAX,  INT64_MIN,   INT64_MIN + 1,
      9, 10, -10, 1000000007, -(1LL << 53)};
  switch (below(r, 4)) {
  case 0:
    return edges[below(r, sizeof edges / sizeof edges[0])];
  case 1:
    return (int64_t)next(r);
  case 2:
    return (int64_t)(next(r) >> below(r, 64));
  default:
    return (int64_t)below(r, 2000) - 1000;
  }
}

static double random_double(rng *r) {
  static const double edges[] = {0.0,
                                 -0.0,
                                 NAN,
                                 -NAN,
                                 INFINITY,
                                 -INFINITY,
                                 0.1,
                                 -2.5,
                                 1e-5,
                                 1e-7,
                                 1e16,
                                 1e17,
                                 1e21,
                                 1e300,
                                 5e-324,
                                 2.2250738585072014e-308,
                                 1.7976931348623157e308,
                                 9.2e18,
                                 -9.2e18,
                                 9.1999999999999990e18,
                                 9007199254740993.0,
                                 18446744073709551616.0,
                                 0.30000000000000004,
                                 123456789.125,
                                 -1.2345678901234567e-300};
  switch (below(r, 6)) {
  case 0:
    return edges[below(r, sizeof edges / sizeof edges[0])];
  case 1: {
    uint64_t bits = next(r);
    double f;
    memcpy(&f, &bits, sizeof f);
    return f;
  }
  case 2:
    return (double)random_int(r);
  case 3:
    return (double)((int64_t)below(r, 200000) - 100000) / 100.0;
  case 4:
    return ldexp((double)(next(r) >> 11), (int)below(r, 200) - 150);
  default:
    return (double)random_int(r) * pow(10.0, (double)below(r, 40) - 20.0);
  }
}

static vat_value random_value(rng *r, int depth);

static vat_value random_container(rng *r, int depth) {
  size_t n = below(r, depth < 3 ? 6 : 3);
  vat_value items[8], keys[8];
  for (size_t i = 0; i < n; i++)
    items[i] = random_value(r, depth + 1);
  switch (below(r, 6)) {
  case 0:
  case 1:
    return vat_list(items, n);
  case 2: { /* atom keys: an object, or hilbert's hotel with @qclass */
    for (size_t i = 0; i < n; i++)
      keys[i] = vat_atom_value(random_atom(r));
    return vat_map(keys, items, n);
  }
  case 3: { /* other keys: a copyMap */
    for (size_t i = 0; i < n; i++) {
      switch (below(r, 4)) {
      case 0:
        keys[i] = vat_int(random_int(r));
        break;
      case 1:
        keys[i] = random_string(r);
        break;
      case 2:
        keys[i] = vat_atom_value(random_atom(r));
        break;
      default:
        keys[i] = random_value(r, depth + 1);
      }
    }
    return vat_map(keys, items, n);
  }
  case 4: {
    const vat_atom *label = random_atom(r);
    if (below(r, 4) == 0) {
      static const char *const digits[] = {"0",
                                           "-1",
                                           "12345678901234567890",
                                           "-98765432109876543210",
                                           "007",
                                           "-0",
                                           "12a",
                                           "",
                                           "+1"};
      vat_value d = str(digits[below(r, sizeof digits / sizeof digits[0])]);
      if (below(r, 8) == 0)
        d = vat_string_n("12\0"
                         "3",
                         4);
      return vat_record(vat_atom_intern("bigint"), &d, 1);
    }
    return vat_record(label, items, n);
  }
  default: {
    vat_value payload;
    switch (below(r, 5)) {
    case 0:
      payload = vat_null();
      break;
    case 1:
      payload = random_string(r);
      break;
    case 2: /* fields with a string message: written as members */
      keys[0] = A("message");
      items[0] = below(r, 6) == 0 ? vat_int(1) : random_string(r);
      n = n < 3 ? n : 3;
      for (size_t i = 1; i <= n; i++) {
        keys[i] = vat_atom_value(random_atom(r));
        items[i] = random_value(r, depth + 1);
      }
      payload = vat_map(keys, items, n + 1);
      break;
    default:
      payload = random_value(r, depth + 1);
    }
    return vat_error(random_atom(r), payload);
  }
  }
}

static vat_value random_value(rng *r, int depth) {
  /* Rarely, a chain right around the depth limit. */
  if (depth == 0 && below(r, 400) == 0) {
    vat_value v = random_value(r, 5);
    int chain = VAT_CAPTP_MAX_DEPTH - 3 + (int)below(r, 6);
    for (int i = 1; i < chain; i++)
      v = below(r, 3) == 0 ? vat_error(vat_atom_intern("E"), v)
                           : vat_list(&v, 1);
    return v;
  }
  size_t kind = below(r, depth > 6 ? 9 : 13);
  switch (kind) {
  case 0:
    return vat_null();
  case 1:
    return vat_bool(below(r, 2));
  case 2:
    return vat_int(random_int(r));
  case 3:
    return vat_float(random_double(r));
  case 4:
    return vat_atom_value(random_atom(r));
  case 5:
  case 6:
    return random_string(r);
  case 7: {
    unsigned char raw[8];
    size_t n = below(r, sizeof raw + 1);
    for (size_t i = 0; i < n; i++)
      raw[i] = (unsigned char)next(r);
    return vat_bytes(raw, n);
  }
  case 8: { /* refs and promises, the same ones again and again */
    size_t i = below(r, below(r, 10) == 0 ? ODD_STAND_INS : 9);
    void *p = &odd_stand_ins[i];
    return below(r, 3) == 0 ? vat_promise_value((vat_promise *)p)
                            : vat_ref_value((vat_ref *)p);
  }
  default:
    return random_container(r, depth);
  }
}

START_TEST(encoder_matches_reference_on_random_values) {
  uint64_t seed = test_seed("encoder_matches_reference_on_random_values");
  rng r = {seed};
  char what[96];
  enum { VALUES = 20000, MESSAGES = 4000 };
  size_t failed = 0;
  for (size_t i = 0; i < VALUES; i++) {
    vat_value v = random_value(&r, 0);
    snprintf(what, sizeof what, "seed %" PRIu64 ", value %zu", seed, i);
    tables a, b;
    tables_init(&a, true);
    tables_init(&b, true);
    vat_capdata cn;
    vat_captp_error en;
    if (vat_capdata_encode(v, &a.slots, &cn, &en) != VAT_OK)
      failed++;
    same_capdata(v, true, what);
  }
  /* Most values encode: the generator is not mostly testing refusals. */
  ck_assert_msg(failed < VALUES / 3, "seed %" PRIu64 ": %zu of %d refused",
                seed, failed, VALUES);
  static const char *const reasons[] = {
      NULL,
      "{\"why\":\"done\"}",
      "[1,2.5,{\"a\":null,\"b\":[true,false]}]",
      "1e300",
      "-0",
      "\"h\\u00e9\\n\\\"\"",
      "{nope",
      "\"\\u0000\"",
      " { \"z\" : 1 , \"a\" : 2 , \"z\" : 3 } ",
      "12345678901234567890"};
  for (size_t i = 0; i < MESSAGES; i++) {
    char id[64], target[64];
    random_text(&r, id, sizeof id, below(&r, 5), 20);
    random_text(&r, target, sizeof target, below(&r, 5), 20);
    vat_captp_msg m = {
        .type = (vat_captp_type)(1 + below(&r, VAT_CAPTP_DISCONNECT)),
        .id = below(&r, 30) == 0 ? NULL : id,
        .target = below(&r, 30) == 0 ? NULL : target,
        .value = random_value(&r, 0),
        .is_reject = below(&r, 2),
        .takes_send_only = below(&r, 2),
        .has_epoch = below(&r, 2),
        .epoch = random_int(&r),
        .dec_refs = random_int(&r),
        .reason_json = reasons[below(&r, sizeof reasons / sizeof reasons[0])],
    };
    snprintf(what, sizeof what, "seed %" PRIu64 ", message %zu", seed, i);
    same_message(&m, true, what);
  }
}
END_TEST

/* --- Smallcaps written ------------------------------------------------- */

/* Imports by slot name, so that two decodings of one value agree in
 * whatever order each imports: the name's place in `names` picks the
 * stand-in, and the iface received is kept in that place. */
typedef struct named_slots {
  const char *const *names;
  size_t n;
  const char *ifaces[MAX_SLOTS];
  char text[MAX_SLOTS][64];
} named_slots;

static int import_by_name(void *ctx, const char *slot, const char *iface,
                          vat_value *out) {
  named_slots *t = ctx;
  for (size_t i = 0; i < t->n && i < MAX_SLOTS; i++)
    if (strcmp(t->names[i], slot) == 0) {
      if (iface != NULL) {
        snprintf(t->text[i], sizeof t->text[i], "%s", iface);
        t->ifaces[i] = t->text[i];
      }
      void *p = &stand_ins[i];
      *out = slot[0] == 'o' ? vat_ref_value((vat_ref *)p)
                            : vat_promise_value((vat_promise *)p);
      return VAT_OK;
    }
  return VAT_ENOTFOUND;
}

/* v in both formats through the odd table: both refuse it alike, or both
 * name the same slots and decode to one value, ifaces and all. */
static void same_in_both_formats(vat_value v, const char *what) {
  tables a, b;
  tables_init(&a, true);
  tables_init(&b, true);
  vat_capdata cd, sc;
  vat_captp_error ec, es;
  int rc_c = vat_capdata_encode_as(v, VAT_CAPTP_CAPDATA, &a.slots, &cd, &ec);
  int rc_s = vat_capdata_encode_as(v, VAT_CAPTP_SMALLCAPS, &b.slots, &sc, &es);
  if (rc_c != VAT_OK || rc_s != VAT_OK) {
    same_failure(rc_s, &es, rc_c, &ec, what);
    return;
  }
  ck_assert_msg(sc.body[0] == '#' && sc.body_len == strlen(sc.body), "%s: %s",
                what, sc.body);
  ck_assert_uint_eq(sc.n_slots, cd.n_slots);
  for (size_t i = 0; i < sc.n_slots; i++)
    ck_assert_str_eq(sc.slots[i], cd.slots[i]);
  named_slots tc = {.names = cd.slots, .n = cd.n_slots},
              ts = {.names = sc.slots, .n = sc.n_slots};
  vat_captp_slots by_c = {.ctx = &tc, .import_slot = import_by_name},
                  by_s = {.ctx = &ts, .import_slot = import_by_name};
  vat_value from_c, from_s;
  rc_c = vat_capdata_decode(cd.body, cd.body_len, cd.slots, cd.n_slots, &by_c,
                            &from_c, &ec);
  rc_s = vat_capdata_decode(sc.body, sc.body_len, sc.slots, sc.n_slots, &by_s,
                            &from_s, &es);
  ck_assert_msg(rc_s == rc_c && (rc_c == VAT_OK || es.code == ec.code),
                "%s: capdata %s (%s), smallcaps %s (%s):\n %s\n %s", what,
                vat_captp_err_name(ec.code), ec.detail,
                vat_captp_err_name(es.code), es.detail, cd.body, sc.body);
  if (rc_c != VAT_OK)
    return;
  ck_assert_msg(vat_equal(from_c, from_s), "%s:\n capdata %s\n smallcaps %s",
                what, cd.body, sc.body);
  for (size_t i = 0; i < sc.n_slots && i < MAX_SLOTS; i++)
    /* Capdata's decoder reads a hilbert form's rest before its original,
     * so it may meet a slot first where no iface goes with it. */
    ck_assert_msg(
        tc.ifaces[i] == NULL ||
            (ts.ifaces[i] != NULL && strcmp(ts.ifaces[i], tc.ifaces[i]) == 0),
        "%s: slot %zu's iface: capdata %s, smallcaps %s\n %s\n %s", what, i,
        tc.ifaces[i] ? tc.ifaces[i] : "(none)",
        ts.ifaces[i] ? ts.ifaces[i] : "(none)", cd.body, sc.body);
}

START_TEST(smallcaps_carries_what_capdata_carries) {
  char what[96];
  size_t n;
  every_kind(0, &n);
  for (size_t i = 0; i < n; i++) {
    snprintf(what, sizeof what, "every_kind %zu", i);
    same_in_both_formats(every_kind(i, &n), what);
  }
  uint64_t seed = test_seed("smallcaps_carries_what_capdata_carries");
  rng r = {seed};
  for (size_t i = 0; i < 20000; i++) {
    snprintf(what, sizeof what, "seed %" PRIu64 ", value %zu", seed, i);
    same_in_both_formats(random_value(&r, 0), what);
  }
}
END_TEST

static const char *smallcaps_of(vat_value v) {
  vat_capdata cd;
  slot_table t = {0};
  vat_captp_slots slots = table_of(&t);
  ck_assert_vat_ok(
      vat_capdata_encode_as(v, VAT_CAPTP_SMALLCAPS, &slots, &cd, NULL));
  return cd.body;
}

/* As @endo/marshal's encodeToSmallcaps writes each. */
START_TEST(smallcaps_forms_are_endos) {
  ck_assert_str_eq(smallcaps_of(vat_int(5)), "#\"+5\"");
  ck_assert_str_eq(smallcaps_of(vat_int(0)), "#\"+0\"");
  ck_assert_str_eq(smallcaps_of(vat_int(-123)), "#\"-123\"");
  ck_assert_str_eq(smallcaps_of(vat_int(INT64_MIN)),
                   "#\"-9223372036854775808\"");
  ck_assert_str_eq(smallcaps_of(vat_float(3.0)), "#3");
  ck_assert_str_eq(smallcaps_of(vat_float(-0.0)), "#0");
  ck_assert_str_eq(smallcaps_of(vat_float(NAN)), "#\"#NaN\"");
  ck_assert_str_eq(smallcaps_of(vat_float(-INFINITY)), "#\"#-Infinity\"");
  ck_assert_str_eq(smallcaps_of(A("undefined")), "#\"#undefined\"");
  ck_assert_str_eq(smallcaps_of(A("ok")), "#\"%ok\"");
  ck_assert_str_eq(smallcaps_of(str("plain")), "#\"plain\"");
  ck_assert_str_eq(smallcaps_of(str("!bang")), "#\"!!bang\"");
  ck_assert_str_eq(smallcaps_of(str("-dash")), "#\"!-dash\"");
  ck_assert_str_eq(smallcaps_of(str(".dot")), "#\".dot\"");
  ck_assert_str_eq(smallcaps_of(str("")), "#\"\"");
  ck_assert_str_eq(
      smallcaps_of(pair_map(A("#k"), vat_null(), A("@qclass"), vat_int(1))),
      "#{\"@qclass\":\"+1\",\"!#k\":null}");
  ck_assert_str_eq(smallcaps_of(vat_record(vat_atom_intern("p"),
                                           (vat_value[]){vat_int(1)}, 1)),
                   "#{\"#tag\":\"p\",\"payload\":[\"+1\"]}");
  vat_value big = str("12345678901234567890");
  ck_assert_str_eq(smallcaps_of(vat_record(vat_atom_intern("bigint"), &big, 1)),
                   "#\"+12345678901234567890\"");
  /* Base64 may start with '+': escaped as any string would be. */
  ck_assert_str_eq(smallcaps_of(vat_bytes("\xfb\xff", 2)),
                   "#{\"#tag\":\"vat:bytes\",\"payload\":\"!+/8=\"}");
  ck_assert_str_eq(
      smallcaps_of(vat_error(vat_atom_intern("TypeError"), str("no"))),
      "#{\"#error\":\"no\",\"name\":\"TypeError\"}");
  ck_assert_str_eq(
      smallcaps_of(vat_error(
          vat_atom_intern("Error"),
          pair_map(A("message"), str("m"), A("errorId"), str("e#1")))),
      "#{\"errorId\":\"e#1\",\"#error\":\"m\",\"name\":\"Error\"}");
  ck_assert_str_eq(
      smallcaps_of(vat_error(vat_atom_intern("timeout"), vat_int(5))),
      "#{\"#error\":\"\",\"payload\":\"+5\",\"name\":\"timeout\"}");
  ck_assert_str_eq(
      smallcaps_of(pair_map(vat_int(1), str("a"), vat_int(3), str("c"))),
      "#{\"#tag\":\"copyMap\",\"payload\":{\"keys\":[\"+3\",\"+1\"],"
      "\"values\":[\"c\",\"a\"]}}");
  /* The same ref twice is one slot; its iface goes with the first. */
  vat_value refs =
      vat_list((vat_value[]){ref_n(1), ref_n(1),
                             vat_promise_value((vat_promise *)&stand_ins[2])},
               3);
  ck_assert_str_eq(smallcaps_of(refs),
                   "#[\"$0.Alleged: Thing\",\"$0\",\"&1\"]");
  /* In a message the body is a JSON string: escaped once more. */
  vat_value incr[2] = {str("incr"), vat_list((vat_value[]){vat_int(1)}, 1)};
  vat_captp_msg m = {.type = VAT_CAPTP_CALL,
                     .id = "q-2",
                     .target = "o-1",
                     .value = vat_list(incr, 2),
                     .format = VAT_CAPTP_SMALLCAPS};
  char *json;
  size_t len;
  ck_assert_vat_ok(vat_captp_encode(&m, NULL, &json, &len, NULL));
  ck_assert_str_eq(json, "{\"type\":\"CTP_CALL\",\"questionID\":\"q-2\","
                         "\"target\":\"o-1\",\"method\":{\"body\":"
                         "\"#[\\\"incr\\\",[\\\"+1\\\"]]\",\"slots\":[]}}");
}
END_TEST

START_TEST(a_message_says_its_body_format) {
  for (int f = VAT_CAPTP_CAPDATA; f <= VAT_CAPTP_SMALLCAPS; f++) {
    vat_captp_msg m = {.type = VAT_CAPTP_RETURN,
                       .id = "q-1",
                       .value = vat_int(7),
                       .format = (vat_captp_format)f};
    char *json;
    size_t len;
    ck_assert_vat_ok(vat_captp_encode(&m, NULL, &json, &len, NULL));
    vat_captp_msg back;
    ck_assert_vat_ok(vat_captp_decode(json, len, NULL, &back, NULL));
    ck_assert_int_eq(back.format, f);
    ck_assert(vat_equal(back.value, vat_int(7)));
  }
  vat_captp_msg bad = {.type = VAT_CAPTP_RETURN,
                       .id = "q-1",
                       .value = vat_int(7),
                       .format = (vat_captp_format)2};
  char *json;
  size_t len;
  vat_captp_error err;
  ck_assert_int_eq(vat_captp_encode(&bad, NULL, &json, &len, &err), VAT_EINVAL);
  ck_assert_msg(strstr(err.detail, "format") != NULL, "%s", err.detail);
  vat_capdata cd;
  ck_assert_int_eq(
      vat_capdata_encode_as(vat_int(1), (vat_captp_format)-1, NULL, &cd, &err),
      VAT_EINVAL);
  ck_assert_msg(strstr(err.detail, "format") != NULL, "%s", err.detail);
}
END_TEST

/* Note [10] of vat/captp.h: a CALL without an id, and the BOOTSTRAP
 * that offers to take those. */
START_TEST(send_only_calls_and_their_offer_round_trip) {
  vat_value method[2] = {vat_string("ping"), vat_list(NULL, 0)};
  vat_captp_msg call = {
      .type = VAT_CAPTP_CALL, .target = "o-1", .value = vat_list(method, 2)};
  char *json;
  size_t len;
  ck_assert_vat_ok(vat_captp_encode(&call, NULL, &json, &len, NULL));
  ck_assert_str_eq(json, "{\"type\":\"CTP_CALL\",\"target\":\"o-1\","
                         "\"method\":{\"body\":\"[\\\"ping\\\",[]]\","
                         "\"slots\":[]}}");
  vat_captp_msg back;
  ck_assert_vat_ok(vat_captp_decode(json, len, NULL, &back, NULL));
  ck_assert(back.type == VAT_CAPTP_CALL && back.id == NULL);
  ck_assert_str_eq(back.target, "o-1");
  vat_captp_msg boot = {
      .type = VAT_CAPTP_BOOTSTRAP, .id = "q-1", .takes_send_only = true};
  ck_assert_vat_ok(vat_captp_encode(&boot, NULL, &json, &len, NULL));
  ck_assert_str_eq(json, "{\"type\":\"CTP_BOOTSTRAP\",\"questionID\":\"q-1\","
                         "\"acceptsSendOnly\":true}");
  ck_assert_vat_ok(vat_captp_decode(json, len, NULL, &back, NULL));
  ck_assert(back.takes_send_only);
  /* Endo's, and anything but true, offer nothing. */
  static const char *const no_offer[] = {
      "{\"type\":\"CTP_BOOTSTRAP\",\"questionID\":\"q-1\"}",
      "{\"type\":\"CTP_BOOTSTRAP\",\"questionID\":\"q-1\","
      "\"acceptsSendOnly\":1}",
      "{\"type\":\"CTP_BOOTSTRAP\",\"questionID\":\"q-1\","
      "\"acceptsSendOnly\":\"true\"}",
  };
  for (size_t i = 0; i < sizeof no_offer / sizeof no_offer[0]; i++) {
    ck_assert_vat_ok(
        vat_captp_decode(no_offer[i], strlen(no_offer[i]), NULL, &back, NULL));
    ck_assert_msg(!back.takes_send_only, "%s", no_offer[i]);
  }
  /* Only a CALL goes without an id. */
  vat_captp_msg answer = {.type = VAT_CAPTP_RETURN, .value = vat_int(1)};
  vat_captp_error err;
  ck_assert_int_eq(vat_captp_encode(&answer, NULL, &json, &len, &err),
                   VAT_EINVAL);
  const char *no_id = "{\"type\":\"CTP_RETURN\",\"result\":{\"body\":"
                      "\"1\",\"slots\":[]}}";
  ck_assert_int_eq(vat_captp_decode(no_id, strlen(no_id), NULL, &back, &err),
                   VAT_EDECODE);
  ck_assert_int_eq(err.code, VAT_CAPTP_ERR_FIELD);
}
END_TEST

/* Reals as jansson spelt them (precision 17), whichever way out.c takes:
 * its own digits in 1e-3 <= |f| < 1e17, snprintf elsewhere. Ties, powers
 * of ten and the range's edges are picked on purpose. */
START_TEST(reals_are_spelt_as_jansson_spelt_them) {
  uint64_t seed = test_seed("reals_are_spelt_as_jansson_spelt_them");
  rng r = {seed};
  enum { REALS = 300000 };
  for (size_t i = 0; i < REALS; i++) {
    double f;
    uint64_t bits = next(&r);
    switch (i % 8) {
    case 0: /* any double */
      memcpy(&f, &bits, sizeof f);
      break;
    case 1: /* exponent within the fast range, any mantissa */
      bits = (bits & ~(UINT64_C(0x7ff) << 52)) |
             (uint64_t)(1013 + below(&r, 70)) << 52;
      memcpy(&f, &bits, sizeof f);
      break;
    case 2: /* exact ties at the 17th digit: odd quarters near 2^50 */
      f = ldexp((double)((bits >> 11) | 1 | UINT64_C(1) << 52), -2);
      break;
    case 3: { /* powers of ten and their neighbours */
      f = pow(10.0, (double)below(&r, 24) - 5.0);
      for (size_t k = below(&r, 4); k > 0; k--)
        f = nextafter(f, (bits & 1) ? INFINITY : 0.0);
      break;
    }
    case 4: /* the range's edges */
      f = (bits & 2) ? 1e17 : 1e-3;
      for (size_t k = below(&r, 3); k > 0; k--)
        f = nextafter(f, (bits & 1) ? INFINITY : 0.0);
      break;
    case 5: /* decimals as people write them */
      f = (double)(int64_t)(bits % 2000000) / 100.0 + 9.99;
      break;
    case 6:
      f = ldexp((double)(bits >> 11), (int)below(&r, 120) - 100);
      break;
    default:
      f = (double)(bits % 100000000) * pow(10.0, (double)below(&r, 30) - 20);
    }
    if ((bits >> 63) != 0)
      f = -f;
    if (!isfinite(f))
      continue;
    json_t *j = json_real(f);
    char want[64];
    size_t n =
        json_dumpb(j, want, sizeof want,
                   JSON_ENCODE_ANY | JSON_COMPACT | JSON_REAL_PRECISION(17));
    json_decref(j);
    captp__out o;
    ck_assert(captp__out_init(&o, 0));
    ck_assert(captp__out_real(&o, f));
    ck_assert_msg(o.len == n && memcmp(o.buf, want, n) == 0,
                  "seed %" PRIu64 ", real %zu (%a): %.*s, not %.*s", seed, i, f,
                  (int)o.len, o.buf, (int)n, want);
  }
}
END_TEST

/* --- The one-pass decoder against the jansson-based one --------------- */
/* Both decoders read the same text, each through a fresh table of its
 * own: they must agree on accepting it, on the value (bit for bit: -0 is
 * not 0 here), on the failure (code and reason; the detail too, but for
 * JSON failures, whose text is each parser's own), on value_failed and the
 * envelope's fields, and on what they asked the table. */


/* What the two tables were asked, in order. */
static void same_imports(const slot_table *a, const slot_table *b,
                         const char *what) {
  ck_assert_msg(a->imports == b->imports && a->n == b->n,
                "%s: %d imports (%d slots), not %d (%d)", what, a->imports,
                a->n, b->imports, b->n);
  for (int i = 0; i < a->n; i++)
    ck_assert_msg(!strcmp(a->names[i], b->names[i]) &&
                      same_str(a->ifaces[i], b->ifaces[i]),
                  "%s: import %d %s/%s", what, i, a->names[i], b->names[i]);
}

/* jansson drops a raw NUL byte that follows a number or a word (its
 * reader takes the NUL it put back for "nothing buffered"), so it took
 * "1\0" for 1; the parser refuses it (a control character outside a
 * string). True when text may hold such a NUL, raw or as the \u0000 of a
 * body inside a message. */
static bool nul_after_token(const char *text, size_t len) {
  for (size_t i = 1; i < len; i++) {
    unsigned char c = (unsigned char)text[i - 1];
    bool token_end = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') ||
                     (c >= 'A' && c <= 'Z');
    if (token_end && (text[i] == '\0' ||
                      (len - i >= 6 && memcmp(text + i, "\\u0000", 6) == 0)))
      return true;
  }
  return false;
}

static void same_decode_failure(int rn, const vat_captp_error *en, int ro,
                                const vat_captp_error *eo, const char *what,
                                const char *text, size_t len) {
  if (rn == VAT_EDECODE && en->code == VAT_CAPTP_ERR_JSON &&
      eo->code != VAT_CAPTP_ERR_JSON && nul_after_token(text, len))
    return; /* the one place the old decoder was wrong */
  ck_assert_msg(rn == ro && en->code == eo->code &&
                    (en->code == VAT_CAPTP_ERR_JSON ||
                     (strcmp(en->detail, eo->detail) == 0 &&
                      en->offset == eo->offset)),
                "%s: %.*s\n new %s %s (%s), old %s %s (%s)", what,
                (int)(len < 300 ? len : 300), text, vat_err_name(rn),
                vat_captp_err_name(en->code), en->detail, vat_err_name(ro),
                vat_captp_err_name(eo->code), eo->detail);
}

static const char *const decode_names[] = {"o-1", "p-2", "o+3", "o+01",
                                           "p+4", "o-5", "x", "o-7"};

/* A body decoded by both, with the first n_names of decode_names. Returns
 * whether it decoded. */
static bool same_body_decode(const char *body, size_t len, size_t n_names,
                             const char *what) {
  slot_table ta = {0}, tb = {0};
  vat_captp_slots sa = table_of(&ta), sb = table_of(&tb);
  vat_value vn = vat_null(), vo = vat_null();
  vat_captp_error en, eo;
  int rn =
      vat_capdata_decode(body, len, decode_names, n_names, &sa, &vn, &en);
  int ro =
      captp_ref_capdata_decode(body, len, decode_names, n_names, &sb, &vo, &eo);
  same_decode_failure(rn, &en, ro, &eo, what, body, len);
  if (rn != ro)
    return false; /* a NUL the old decoder dropped */
  same_imports(&ta, &tb, what);
  if (rn == VAT_OK)
    ck_assert_msg(same_value(vn, vo), "%s: %.*s: the values differ", what,
                  (int)(len < 300 ? len : 300), body);
  return rn == VAT_OK;
}

/* A message decoded by both. Returns whether it decoded. */
static bool same_msg_decode(const char *json, size_t len, const char *what) {
  slot_table ta = {0}, tb = {0};
  vat_captp_slots sa = table_of(&ta), sb = table_of(&tb);
  vat_captp_msg mn, mo;
  vat_captp_error en, eo;
  int rn = vat_captp_decode(json, len, &sa, &mn, &en);
  int ro = captp_ref_decode(json, len, &sb, &mo, &eo);
  same_decode_failure(rn, &en, ro, &eo, what, json, len);
  if (rn != ro || en.code != eo.code ||
      (en.code == VAT_CAPTP_ERR_JSON && nul_after_token(json, len)))
    return false; /* a NUL the old decoder dropped: refused sooner */
  same_imports(&ta, &tb, what);
  ck_assert_msg(
      mn.type == mo.type && same_str(mn.type_name, mo.type_name) &&
          same_str(mn.id, mo.id) && same_str(mn.target, mo.target) &&
          mn.is_reject == mo.is_reject &&
          mn.takes_send_only == mo.takes_send_only &&
          mn.dec_refs == mo.dec_refs && mn.has_epoch == mo.has_epoch &&
          mn.epoch == mo.epoch && same_str(mn.reason_json, mo.reason_json) &&
          mn.value_failed == mo.value_failed && same_value(mn.value, mo.value),
      "%s: %.*s: the messages differ (reason %s / %s)", what,
      (int)(len < 300 ? len : 300), json, mn.reason_json ? mn.reason_json : "-",
      mo.reason_json ? mo.reason_json : "-");
  return rn == VAT_OK;
}

/* A body wrapped as a RETURN's result: escaped as a JSON string (the
 * bytes as they are but for '"', '\\' and controls, so bad UTF-8 stays
 * bad). */
static size_t wrap_body(const char *body, size_t len, size_t n_names,
                        char *out, size_t cap) {
  size_t o = (size_t)snprintf(out, cap,
                              "{\"type\":\"CTP_RETURN\",\"answerID\":\"q-1\","
                              "\"result\":{\"body\":\"");
  for (size_t i = 0; i < len && o + 8 < cap; i++) {
    unsigned char c = (unsigned char)body[i];
    if (c == '"' || c == '\\') {
      out[o++] = '\\';
      out[o++] = (char)c;
    } else if (c < 0x20) {
      o += (size_t)snprintf(out + o, cap - o, "\\u%04x", c);
    } else {
      out[o++] = (char)c;
    }
  }
  o += (size_t)snprintf(out + o, cap - o, "\",\"slots\":[");
  for (size_t i = 0; i < n_names; i++)
    o += (size_t)snprintf(out + o, cap - o, "%s\"%s\"", i ? "," : "",
                          decode_names[i]);
  o += (size_t)snprintf(out + o, cap - o, "]}}");
  return o < cap ? o : cap - 1;
}

/* A body by both decoders, bare and inside a message. */
static void same_decodes(const char *body, size_t len, const char *what) {
  same_body_decode(body, len, 3, what);
  size_t cap = 6 * len + 256;
  char *msg = malloc(cap);
  size_t n = wrap_body(body, len, 3, msg, cap);
  same_msg_decode(msg, n, what);
  free(msg);
}

/* Texts at the edges of JSON and of each form, beyond the tests' own. */
static const char *const decode_edges[] = {
    " 1 ", "\t\n\r[1]\r\n\t", "\f1", "1 2", "[1,]", "[,1]", "{\"a\":1,}",
    "{,}", "{\"a\" 1}", "{\"a\":}", "{1:2}", "[1 2]", "[", "]", "{", "\"",
    "\"abc", "tru", "true", "truex", "nul", "null", "nullx", "falsey",
    "True", "0", "-0", "-0.0", "01", "-01", "1.", ".5", "+1", "1e", "1e+",
    "1E-2", "1e400", "-1e400", "1e-400", "4.9e-324", "2.5e-324",
    "1.7976931348623157e308", "1.7976931348623159e308",
    "123456789012345678901234567890", "0.1", "0.30000000000000004",
    "9007199254740993", "1e22", "1e23", "123456789012345e-22",
    "1000000000000000000000e-1", "0e1000000000000000000000", "-",
    "--1", "1.5e3x", "\"\\u0000\"", "{\"\\u0000\":1}", "{\"a\\u0000\":1}",
    "{\"a\":\"\\u0000\",\"b\":1}", "{\"a\":{\"b\\u0000\":1}}",
    "[\"\\u0000\",{\"c\":2}]",
    "\"\\ud800\"", "\"\\udc00\"", "\"\\ud800\\udc00\"", "\"\\ud800\\u0041\"",
    "\"\\ud800x\"", "\"\\uDBFF\\uDFFF\"", "\"\\u00e9\\u00E9\"", "\"\\u12\"",
    "\"\\u12g4\"", "\"\\x\"", "\"\\/\\b\\f\\n\\r\\t\\\"\\\\\"", "\"\\",
    "\"\t\"", "\"\x01\"", "\"\x7f\"", "\"\xc3\xa9\"", "\"\xc3\"", "\"\xc0\x80\"",
    "\"\xc1\xbf\"", "\"\xe0\x9f\xbf\"", "\"\xe0\xa0\x80\"", "\"\xed\x9f\xbf\"",
    "\"\xed\xa0\x80\"", "\"\xef\xbf\xbf\"", "\"\xf0\x8f\xbf\xbf\"",
    "\"\xf0\x90\x80\x80\"", "\"\xf4\x8f\xbf\xbf\"", "\"\xf4\x90\x80\x80\"",
    "\"\xf5\x80\x80\x80\"", "\"\xff\"", "\"\x80\"", "\xc3\xa9", "[\"a\"]\xff",
    "{\"a\":1,\"a\":2}", "{\"a\":1,\"b\":2,\"a\":3}",
    "{\"@qclass\":\"bigint\",\"digits\":\"1\",\"digits\":\"2\"}",
    "{\"@qclass\":\"nope\",\"@qclass\":\"undefined\"}",
    "{\"@qclass\":\"undefined\",\"@qclass\":\"nope\"}",
    "{\"@qclass\":\"slot\",\"index\":1e0}",
    "{\"@qclass\":\"slot\",\"index\":0,\"index\":2}",
    "{\"@qclass\":\"slot\",\"index\":-0}",
    "{\"@qclass\":\"slot\",\"index\":0,\"iface\":null}",
    "{\"@qclass\":\"un\\u0000defined\"}", "{\"@qclass\":\"undefined\\u0000\"}",
    "{\"@qclass\":\"symbol\",\"name\":\"a\\u0000b\"}",
    "{\"@qclass\":\"error\",\"name\":\"E\",\"message\":\"m\",\"x\":1,"
    "\"name\":\"F\",\"y\":{\"@qclass\":\"nope\"}}",
    "{\"@qclass\":\"error\",\"name\":\"E\",\"message\":\"\",\"payload\":[1]}",
    "{\"@qclass\":\"hilbert\",\"original\":1,\"rest\":{\"a\":2,\"a\":3}}",
    "{\"@qclass\":\"hilbert\",\"original\":1,\"rest\":{}}",
    "{\"@qclass\":\"hilbert\",\"original\":{\"@qclass\":\"nope\"},"
    "\"rest\":{\"b\":{\"@qclass\":\"bad\"}}}",
    "{\"@qclass\":\"tagged\",\"tag\":\"copySet\",\"payload\":[1,2]}",
    "{\"@qclass\":\"tagged\",\"tag\":\"copyMap\",\"payload\":{\"keys\":[1],"
    "\"values\":[2],\"values\":[3]}}",
    "{\"b\":{\"@qclass\":\"nope\"},\"a\":{\"@qclass\":\"bad\"}}",
    "{\"b\":{\"@qclass\":\"nope\"},\"a\":1,\"b\":2}",
    "[{\"@qclass\":\"slot\",\"index\":2},{\"@qclass\":\"slot\",\"index\":0,"
    "\"iface\":\"I\"},{\"@qclass\":\"slot\",\"index\":0}]",
    "[{\"@qclass\":\"slot\",\"index\":0},{\"@qclass\":\"nope\"},{\"@qclass\""
    ":\"slot\",\"index\":1}]",
    "[{\"@qclass\":\"slot\",\"index\":0}, tru]",
    "#[\"$0.Alleged: X\",\"&1\",\"$0\",\"$2\",\"!#x\",\"%sym\",\"+12\",\"-3\"]",
    "#{\"#tag\":\"t\",\"payload\":1,\"#tag\":\"u\"}",
    "#{\"#tag\":\"t\",\"#tag\":\"u\"}",
    "#{\"#tag\":\"t\",\"payload\":1,\"payload\":2,\"#tag\":\"!x\"}",
    "#{\"#error\":\"m\",\"name\":\"E\",\"name\":\"F\",\"x\":\"!y\"}",
    "#{\"#error\":\"m\",\"name\":\"E\",\"#x\":1}",
    "#{\"!#a\":1,\"b\":\"#NaN\",\"b\":\"#Infinity\"}",
    "#{\"a\":\"#what\",\"#b\":1}", "#\"$0.\"", "#\"$00\"", "#\"$\"",
    "#\"$1234567890123456789\"", "#\"&0\"", "#\"&1\"", "#\"%\"", "#\"!\"",
    "#\"#undefined\\u0000\"", "#[1,2", "##", "# 1", "#\"\\ud800\"",
};

START_TEST(decoder_matches_reference_on_the_tests_cases) {
  char what[64];
  for (size_t i = 0; i < sizeof bad_bodies / sizeof bad_bodies[0]; i++) {
    snprintf(what, sizeof what, "bad body %zu", i);
    same_decodes(bad_bodies[i].body, strlen(bad_bodies[i].body), what);
  }
  for (size_t i = 0; i < sizeof decode_edges / sizeof decode_edges[0]; i++) {
    snprintf(what, sizeof what, "edge %zu", i);
    same_decodes(decode_edges[i], strlen(decode_edges[i]), what);
    for (size_t n = 0; n <= 8; n += 4)
      same_body_decode(decode_edges[i], strlen(decode_edges[i]), n, what);
  }
  for (size_t i = 0; i < sizeof bad_messages / sizeof bad_messages[0]; i++) {
    snprintf(what, sizeof what, "bad message %zu", i);
    same_msg_decode(bad_messages[i], strlen(bad_messages[i]), what);
  }
  for (size_t i = 0; i < sizeof value_failures / sizeof value_failures[0];
       i++) {
    snprintf(what, sizeof what, "value failure %zu", i);
    same_msg_decode(value_failures[i].json, strlen(value_failures[i].json),
                    what);
  }
  static const char *const messages[] = {
      "{\"type\":\"CTP_TRAP_ITERATE\",\"questionID\":\"q-1\"}",
      "{\"type\":\"CTP_X\\u0000\"}",
      "{\"type\":\"CTP_CALL\\u0000x\",\"questionID\":\"q\",\"target\":\"t\","
      "\"method\":{\"body\":\"1\",\"slots\":[]}}",
      "{\"type\":\"CTP_BOOTSTRAP\",\"questionID\":\"q\\u0000\"}",
      "{\"type\":\"CTP_BOOTSTRAP\",\"questionID\":\"q\",\"epoch\":1.5}",
      "{\"type\":\"CTP_BOOTSTRAP\",\"questionID\":\"q\",\"epoch\":9.2e18}",
      "{\"type\":\"CTP_BOOTSTRAP\",\"questionID\":\"q\",\"epoch\":-3,"
      "\"epoch\":4}",
      "{\"type\":\"CTP_DROP\",\"slotID\":\"o-1\",\"decRefs\":2.0}",
      "{\"type\":\"CTP_DROP\",\"slotID\":\"o-1\",\"decRefs\":null}",
      "{\"type\":\"CTP_DROP\",\"slotID\":\"o-1\",\"decRefs\":1e300}",
      "{\"type\":\"CTP_RETURN\",\"answerID\":\"q\",\"exception\":{\"body\":"
      "\"1\",\"slots\":[]}}",
      "{\"type\":\"CTP_RETURN\",\"answerID\":\"q\",\"exception\":{\"body\":"
      "\"1\",\"slots\":[]},\"result\":{\"body\":\"2\",\"slots\":[]}}",
      "{\"type\":\"CTP_RESOLVE\",\"promiseID\":\"p\",\"rej\":1}",
      "{\"type\":\"CTP_RESOLVE\",\"promiseID\":\"p\",\"res\":{\"body\":\"1\","
      "\"slots\":[],\"body\":\"2\"}}",
      "{\"type\":\"CTP_RESOLVE\",\"promiseID\":\"p\",\"res\":{\"body\":\"[{"
      "\\\"@qclass\\\":\\\"slot\\\",\\\"index\\\":0}]\",\"slots\":[\"o\\u0000"
      "-1\"]}}",
      "{\"type\":\"CTP_DISCONNECT\"}",
      "{\"type\":\"CTP_DISCONNECT\",\"reason\":null}",
      "{\"type\":\"CTP_DISCONNECT\",\"reason\":1}",
      "{\"type\":\"CTP_DISCONNECT\",\"reason\":-0}",
      "{\"type\":\"CTP_DISCONNECT\",\"reason\":[1e300,0.1,-2.5e-7,1e17,"
      "123456789012345678]}",
      "{\"type\":\"CTP_DISCONNECT\",\"reason\": { \"z\" : 1 , \"a\" : [ ] , "
      "\"z\" : { } } }",
      "{\"type\":\"CTP_DISCONNECT\",\"reason\":\"h\\u00e9\\n\\\"\\u0000\\/"
      "\\u001f\\u007f\\ud83d\\ude00\"}",
      "{\"type\":\"CTP_DISCONNECT\",\"reason\":{\"message\":\"closed\","
      "\"errorId\":\"e-1\",\"name\":\"Error\"},\"epoch\":0}",
      "{\"type\":\"CTP_DISCONNECT\",\"reason\":[1,2,]}",
      "{\"type\":\"CTP_CALL\",\"questionID\":\"q-1\",\"target\":\"o-1\","
      "\"method\":{\"body\":\"#[\\\"inc\\\",[\\\"+5\\\"]]\",\"slots\":[]},"
      "\"type\":\"CTP_RETURN\"}",
  };
  for (size_t i = 0; i < sizeof messages / sizeof messages[0]; i++) {
    snprintf(what, sizeof what, "message %zu", i);
    same_msg_decode(messages[i], strlen(messages[i]), what);
  }
  /* Every kind, encoded; every type of message, framed. */
  size_t n;
  every_kind(0, &n);
  for (size_t i = 0; i < n; i++) {
    vat_capdata cd;
    vat_value v = every_kind(i, &n);
    slot_table t = {0};
    vat_captp_slots slots = table_of(&t);
    ck_assert_vat_ok(vat_capdata_encode(v, &slots, &cd, NULL));
    snprintf(what, sizeof what, "every_kind %zu", i);
    same_body_decode(cd.body, cd.body_len, 8, what);
  }
  const vat_captp_msg *msgs = every_type(&n);
  for (size_t i = 0; i < n; i++) {
    slot_table t = {0};
    vat_captp_slots slots = table_of(&t);
    char *json;
    size_t len;
    ck_assert_vat_ok(vat_captp_encode(&msgs[i], &slots, &json, &len, NULL));
    snprintf(what, sizeof what, "every_type %zu", i);
    same_msg_decode(json, len, what);
  }
  /* Nesting around both limits: the value's (128), the parser's (2048). */
  static const int depths[] = {127, 128, 129, 2047, 2048, 2049, 5000};
  for (size_t i = 0; i < sizeof depths / sizeof depths[0]; i++) {
    for (int form = 0; form < 4; form++) {
      int d = depths[i];
      char *body = malloc(8 * (size_t)d + 16);
      size_t len = 0;
      if (form == 3)
        body[len++] = '#';
      for (int k = 0; k < d; k++) {
        const char *open = form == 1 ? "{\"a\":" : "[";
        memcpy(body + len, open, strlen(open));
        len += strlen(open);
      }
      if (form == 2 && len > 0)
        body[len - 1] = '0'; /* a syntax error at the bottom */
      for (int k = 0; k < d; k++)
        body[len++] = form == 1 ? '}' : ']';
      snprintf(what, sizeof what, "depth %d, form %d", d, form);
      same_decodes(body, len, what);
      free(body);
    }
  }
}
END_TEST

/* Every recorded frame, and every smallcaps body as a RETURN's result. */
START_TEST(decoder_matches_reference_on_endo_frames) {
  char **paths;
  size_t n = corpus_files("frames", &paths);
  ck_assert_uint_ge(n, 30);
  for (size_t i = 0; i < n; i++) {
    blob b = read_file(paths[i]);
    const char *json = strchr(b.data, ':') + 1;
    size_t len = b.len - (size_t)(json - b.data) - 1;
    ck_assert(same_msg_decode(json, len, paths[i]));
    free(b.data);
  }
  free_paths(paths, n);
  n = corpus_files("smallcaps", &paths);
  ck_assert_uint_ge(n, 5);
  for (size_t i = 0; i < n; i++) {
    blob b = read_file(paths[i]);
    char *msg = malloc(b.len + 128);
    size_t len = (size_t)snprintf(
        msg, b.len + 128,
        "{\"type\":\"CTP_RETURN\",\"answerID\":\"q-1\",\"result\":%s}",
        b.data);
    ck_assert(same_msg_decode(msg, len, paths[i]));
    free(msg);
    free(b.data);
  }
  free_paths(paths, n);
}
END_TEST

/* A value (or message) encoded by this library, decoded by both. */
START_TEST(decoder_matches_reference_on_random_values) {
  uint64_t seed = test_seed("decoder_matches_reference_on_random_values");
  rng r = {seed};
  char what[96];
  enum { VALUES = 20000, MESSAGES = 4000 };
  size_t decoded = 0;
  for (size_t i = 0; i < VALUES; i++) {
    vat_value v = random_value(&r, 0);
    tables t;
    tables_init(&t, true);
    vat_capdata cd;
    if (vat_capdata_encode(v, &t.slots, &cd, NULL) != VAT_OK)
      continue;
    snprintf(what, sizeof what, "seed %" PRIu64 ", value %zu", seed, i);
    /* The encoder names slots o+N/p+N from 1; these names are the
     * decoder's own test table's. */
    decoded += same_body_decode(cd.body, cd.body_len, 8, what);
  }
  ck_assert_msg(decoded > VALUES / 2, "seed %" PRIu64 ": %zu decoded", seed,
                decoded);
  static const char *const reasons[] = {
      NULL, "{\"why\":\"done\"}", "[1,2.5,{\"a\":null,\"b\":[true,false]}]",
      "1e300", "-0", "\"h\\u00e9\\n\\\"\"",
      " { \"z\" : 1 , \"a\" : 2 , \"z\" : 3 } ", "12345678901234567890"};
  for (size_t i = 0; i < MESSAGES; i++) {
    char id[64], target[64];
    random_text(&r, id, sizeof id, below(&r, 5), 20);
    random_text(&r, target, sizeof target, below(&r, 5), 20);
    vat_captp_msg m = {
        .type = (vat_captp_type)(1 + below(&r, VAT_CAPTP_DISCONNECT)),
        .id = id,
        .target = target,
        .value = random_value(&r, 0),
        .is_reject = below(&r, 2),
        .takes_send_only = below(&r, 2),
        .has_epoch = below(&r, 2),
        .epoch = random_int(&r),
        .dec_refs = random_int(&r),
        .reason_json = reasons[below(&r, sizeof reasons / sizeof reasons[0])],
    };
    tables t;
    tables_init(&t, true);
    char *json;
    size_t len;
    if (vat_captp_encode(&m, &t.slots, &json, &len, NULL) != VAT_OK)
      continue;
    snprintf(what, sizeof what, "seed %" PRIu64 ", message %zu", seed, i);
    same_msg_decode(json, len, what);
  }
}
END_TEST

/* Pieces a mutation puts into a text: JSON's own characters, escapes,
 * numbers, forms, and bytes that are not UTF-8. */
static const char *const splices[] = {
    "\"", "\\", "{", "}", "[", "]", ",", ":", "0", "-", "e", ".", "1e400",
    "-0", " ", "\t", "\n", "\f", "\x01", "\x7f", "\\u", "\\u0000",
    "\\ud800", "\\udc00", "\\ud800\\udc00", "\\\\", "\\\"", "\\/", "\\x",
    "\xc3\xa9", "\xc3", "\xed\xa0\x80", "\xf4\x90\x80\x80", "\xff", "\x80",
    "null", "true", "tru", "\"@qclass\":", "\"@qclass\":\"slot\",",
    "{\"@qclass\":\"slot\",\"index\":0}", "{\"@qclass\":\"slot\",\"index\":1}",
    "{\"@qclass\":\"bigint\",\"digits\":\"7\"}", "\"#tag\":", "\"#error\":",
    "\"$0\"", "\"&1\"", "\"!\"", "\"%x\"", "\"+1\"", "#", "\"a\":1,",
    "\"index\":", "\"body\":", "\"slots\":[],", "\"type\":", "\\\\u0000",
    "\\\\ud800", "\\\"\\\\"};
enum { SPLICES = sizeof splices / sizeof splices[0] };

/* Mutates text[0..len) in place (cap bytes of room): one to three edits,
 * each a byte replaced, bytes cut, a piece put in, a stretch repeated, or
 * the end cut off. */
static size_t mutate(rng *r, char *text, size_t len, size_t cap) {
  size_t edits = 1 + below(r, 3);
  for (size_t e = 0; e < edits; e++) {
    size_t at = len > 0 ? below(r, len + 1) : 0;
    switch (below(r, 6)) {
    case 0: /* a byte replaced */
      if (at < len) {
        const char *p = splices[below(r, SPLICES)];
        text[at] = below(r, 4) == 0 ? (char)next(r) : p[0];
      }
      break;
    case 1: { /* bytes cut */
      size_t n = 1 + below(r, 4);
      if (at + n > len)
        n = len - at;
      memmove(text + at, text + at + n, len - at - n);
      len -= n;
      break;
    }
    case 2:
    case 3: { /* a piece put in */
      const char *p = splices[below(r, SPLICES)];
      size_t n = strlen(p);
      if (len + n >= cap)
        break;
      memmove(text + at + n, text + at, len - at);
      memcpy(text + at, p, n);
      len += n;
      break;
    }
    case 4: { /* a stretch repeated */
      size_t n = below(r, 12);
      if (at + n > len)
        n = len - at;
      if (len + n >= cap)
        break;
      memmove(text + at + n, text + at, len - at);
      len += n;
      break;
    }
    default: /* the end cut off */
      len = at;
    }
  }
  return len;
}

/* The old decoder's one mistake found: jansson took a raw NUL byte after
 * a number or a word for nothing ("1\0" read as 1). A NUL outside a
 * string is no JSON (RFC 8259 allows none): refused, in a body and in an
 * envelope. */
START_TEST(raw_nul_after_a_token_is_refused) {
  static const char *const texts[] = {"1\0", "[1\0,2]", "true\0", "[null\0]",
                                      "{\"a\":false\0}"};
  static const size_t lens[] = {2, 6, 5, 7, 12};
  for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++) {
    vat_value v;
    vat_captp_error err;
    ck_assert_int_eq(
        captp_ref_capdata_decode(texts[i], lens[i], NULL, 0, NULL, &v, &err),
        VAT_OK);
    ck_assert_vat_err(
        vat_capdata_decode(texts[i], lens[i], NULL, 0, NULL, &v, &err),
        VAT_EDECODE);
    ck_assert_int_eq(err.code, VAT_CAPTP_ERR_JSON);
  }
  const char msg[] = "{\"type\":\"CTP_BOOTSTRAP\",\"questionID\":\"q-1\","
                     "\"epoch\":1\0}";
  vat_captp_msg m;
  vat_captp_error err;
  ck_assert_int_eq(captp_ref_decode(msg, sizeof msg - 1, NULL, &m, &err),
                   VAT_OK);
  ck_assert_vat_err(vat_captp_decode(msg, sizeof msg - 1, NULL, &m, &err),
                    VAT_EDECODE);
  ck_assert_int_eq(err.code, VAT_CAPTP_ERR_JSON);
}
END_TEST

/* Valid texts mutated: both decoders must agree on each. */
START_TEST(decoder_matches_reference_on_mutations) {
  uint64_t seed = test_seed("decoder_matches_reference_on_mutations");
  rng r = {seed};
  char what[128];
  /* Seeds: the recorded frames' JSON, and bodies from random values. */
  enum { MAX_SEEDS = 256, MUTANTS = 30000 };
  char *seeds[MAX_SEEDS];
  size_t seed_len[MAX_SEEDS];
  bool is_body[MAX_SEEDS];
  size_t n_seeds = 0;
  char **paths;
  size_t n = corpus_files("frames", &paths);
  for (size_t i = 0; i < n && n_seeds < MAX_SEEDS; i++) {
    blob b = read_file(paths[i]);
    const char *json = strchr(b.data, ':') + 1;
    seed_len[n_seeds] = b.len - (size_t)(json - b.data) - 1;
    seeds[n_seeds] = malloc(seed_len[n_seeds] + 1);
    memcpy(seeds[n_seeds], json, seed_len[n_seeds]);
    is_body[n_seeds++] = false;
    free(b.data);
  }
  free_paths(paths, n);
  while (n_seeds < MAX_SEEDS) {
    tables t;
    tables_init(&t, false);
    vat_capdata cd;
    if (vat_capdata_encode(random_value(&r, 2), &t.slots, &cd, NULL) != VAT_OK)
      continue;
    seeds[n_seeds] = malloc(cd.body_len + 1);
    memcpy(seeds[n_seeds], cd.body, cd.body_len);
    seed_len[n_seeds] = cd.body_len;
    is_body[n_seeds++] = true;
  }
  size_t accepted = 0;
  for (size_t i = 0; i < MUTANTS; i++) {
    size_t s = below(&r, n_seeds);
    size_t cap = 2 * seed_len[s] + 256;
    char *text = malloc(cap);
    memcpy(text, seeds[s], seed_len[s]);
    size_t len = mutate(&r, text, seed_len[s], cap);
    snprintf(what, sizeof what, "seed %" PRIu64 ", mutant %zu of %s %zu", seed,
             i, is_body[s] ? "body" : "frame", s);
    if (is_body[s]) {
      accepted += same_body_decode(text, len, 3, what);
      size_t mcap = 6 * len + 256;
      char *msg = malloc(mcap);
      size_t mlen = wrap_body(text, len, 3, msg, mcap);
      same_msg_decode(msg, mlen, what);
      free(msg);
    } else {
      accepted += same_msg_decode(text, len, what);
    }
    free(text);
  }
  /* Not all refused: the mutants reach past the parser. */
  ck_assert_msg(accepted > MUTANTS / 20, "seed %" PRIu64 ": %zu accepted",
                seed, accepted);
  for (size_t i = 0; i < n_seeds; i++)
    free(seeds[i]);
}
END_TEST

Suite *test_captp_suite(void) {
  Suite *s = suite_create("captp");

  TCase *tc = test_case("values", 60);
  tcase_add_test(tc, every_value_kind_round_trips);
  tcase_add_test(tc, nan_round_trips);
  tcase_add_test(tc, encoded_forms_are_endos);
  tcase_add_test(tc, decoded_hard_cases);
  tcase_add_test(tc, unencodable_values_are_named);
  tcase_add_test(tc, failures_deep_inside_values);
  tcase_add_loop_test(tc, bad_bodies_are_named_errors, 0,
                      sizeof bad_bodies / sizeof bad_bodies[0]);
  tcase_add_test(tc, bad_slots_and_tables);
  tcase_add_test(tc, deep_bodies_are_refused);
  tcase_add_test(tc, every_reason_has_a_name_and_text);
  suite_add_tcase(s, tc);

  tc = test_case("messages", 60);
  tcase_add_loop_test(tc, bad_messages_are_named_errors, 0,
                      sizeof bad_messages / sizeof bad_messages[0]);
  tcase_add_test(tc, messages_of_every_type_round_trip);
  tcase_add_test(tc, a_value_nobody_wants_is_not_decoded);
  tcase_add_test(tc, send_only_calls_and_their_offer_round_trip);
  tcase_add_loop_test(tc, a_bad_value_keeps_the_envelope, 0,
                      (int)(sizeof value_failures / sizeof value_failures[0]));
  suite_add_tcase(s, tc);

  tc = test_case("endo", 120);
  tcase_add_test(tc, endo_frames_decode_and_reencode_the_same);
  tcase_add_test(tc, endo_values_decode_to_the_documented_forms);
  tcase_add_test(tc, endo_stream_split_at_every_position);
  tcase_add_test(tc, endo_smallcaps_bodies_decode);
  suite_add_tcase(s, tc);

  tc = test_case("netstring", 60);
  tcase_add_loop_test(tc, bad_frames_are_named_and_stick, 0,
                      sizeof bad_frames / sizeof bad_frames[0]);
  tcase_add_test(tc, netstring_edge_cases);
  suite_add_tcase(s, tc);

  tc = test_case("names", 120);
#if !VAT_GC_NO_COLLECT /* nothing is reclaimed in a build that never collects  \
                        */
  tcase_add_test(tc, unique_wire_names_leave_the_live_heap_flat);
#endif
  tcase_add_test(tc, wire_names_are_the_programs_atoms);
  suite_add_tcase(s, tc);

  tc = test_case("encoder", 120);
  tcase_add_test(tc, encoder_matches_reference_on_the_tests_values);
  tcase_add_test(tc, encoder_matches_reference_on_endo_frames);
  tcase_add_test(tc, encoder_matches_reference_on_random_values);
  tcase_add_test(tc, reals_are_spelt_as_jansson_spelt_them);
  suite_add_tcase(s, tc);

  tc = test_case("smallcaps", 120);
  tcase_add_test(tc, smallcaps_carries_what_capdata_carries);
  tcase_add_test(tc, smallcaps_forms_are_endos);
  tcase_add_test(tc, a_message_says_its_body_format);
  suite_add_tcase(s, tc);

  tc = test_case("decoder", 300);
  tcase_add_test(tc, decoder_matches_reference_on_the_tests_cases);
  tcase_add_test(tc, decoder_matches_reference_on_endo_frames);
  tcase_add_test(tc, decoder_matches_reference_on_random_values);
  tcase_add_test(tc, decoder_matches_reference_on_mutations);
  tcase_add_test(tc, raw_nul_after_a_token_is_refused);
  suite_add_tcase(s, tc);
  return s;
}
