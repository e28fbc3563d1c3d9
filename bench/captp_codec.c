/* captp_codec [N]: CapTP's wire format, encode and decode throughput.
 *
 * Three realistic messages, each encoded N times into a netstring frame
 * (vat_captp_encode_frame: value to CapData body, message to JSON, frame)
 * and decoded N times from the frame's JSON (vat_captp_decode: message
 * parse, body parse, values built), with the body in capdata, then in
 * smallcaps (rows marked '#', what a connection writes):
 *   small   a CTP_CALL incr(5n) on an import, as a counter client sends;
 *   mixed   a CTP_RETURN of a record with every kind (numbers, bigints,
 *           strings, symbols, a copySet, a copyMap, a ref twice, an
 *           error), like the recorded Endo exchange's echo;
 *   batch   a CTP_CALL carrying 100 orders {id, item, qty, price, tags}.
 * For scale, each message is also parsed N times by jansson alone (the
 * message, then its body: the two parses every decode makes, building no
 * values): what the JSON library costs of the decode.
 * Figures: messages/s and MB/s of frame text, per message and direction;
 * values/s counts every value node (scalars included). One thread: the
 * codec has no shared state. Each round is checked (decode of the encoding
 * equals the value). Times are the thread's CPU time: the codec never
 * blocks, and on a shared machine CPU time does not count the time other
 * processes held the core.
 */
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_util.h"
#include "vat/captp.h"

static const char usage[] = "usage: captp_codec [-h] [N]\n"
                            "  encodes and decodes each message N times "
                            "(default 200000)\n";

static char stand_ins[4];

static int export_slot(void *ctx, vat_value v, char slot[VAT_CAPTP_SLOT_MAX],
                       const char **iface) {
  (void)ctx;
  snprintf(slot, VAT_CAPTP_SLOT_MAX, "%c+%d", v.type == VAT_T_REF ? 'o' : 'p',
           (int)((const char *)v.as.obj - stand_ins) + 1);
  *iface = v.type == VAT_T_REF ? "Alleged: Counter" : NULL;
  return VAT_OK;
}

static int import_slot(void *ctx, const char *slot, const char *iface,
                       vat_value *out) {
  (void)ctx;
  (void)iface;
  void *p = &stand_ins[(slot[2] - '1') & 3];
  *out = slot[0] == 'o' ? vat_ref_value((vat_ref *)p)
                        : vat_promise_value((vat_promise *)p);
  return VAT_OK;
}

static const vat_captp_slots table = {.export_slot = export_slot,
                                      .import_slot = import_slot};

static vat_value map2(const char *k1, vat_value v1, const char *k2,
                      vat_value v2) {
  vat_value k[] = {vat_atom_named(k1), vat_atom_named(k2)}, v[] = {v1, v2};
  return vat_map(k, v, 2);
}

static vat_value small_method(void) {
  vat_value arg = vat_int(5);
  vat_value call[] = {vat_string("incr"), vat_list(&arg, 1)};
  return vat_list(call, 2);
}

static vat_value mixed_value(void) {
  vat_value counter = vat_ref_value((vat_ref *)&stand_ins[0]);
  vat_value set_items[] = {vat_string("a"), vat_string("b")};
  vat_value ck[] = {vat_int(3), vat_int(1)};
  vat_value cv[] = {vat_string("c"), vat_string("a")};
  const char *names[] = {"again", "big",    "bigint", "copyMap", "error",
                         "float", "int",    "list",   "nested",  "nul",
                         "point", "remote", "set",    "str",     "symbol",
                         "undef", "yes"};
  vat_value one = vat_float(1), two = vat_float(2);
  vat_value pt[] = {one, two};
  vat_value vals[] = {
      counter,
      vat_float(1e300),
      vat_int(1234567890123456789),
      vat_map(ck, cv, 2),
      vat_error(vat_atom_intern("TypeError"), vat_string("bad thing")),
      vat_float(1.5),
      vat_float(42),
      vat_list(pt, 2),
      map2("a", map2("b", vat_null(), "c", vat_bool(false)), "d", one),
      vat_null(),
      vat_record(vat_atom_intern("point"), pt, 2),
      counter,
      vat_record(vat_atom_intern("copySet"), set_items, 2),
      vat_string("h\xc3\xa9llo, w\xc3\xb6rld"),
      vat_atom_named("ok"),
      vat_atom_named("undefined"),
      vat_bool(true),
  };
  size_t n = sizeof vals / sizeof vals[0];
  vat_value keys[sizeof vals / sizeof vals[0]];
  for (size_t i = 0; i < n; i++)
    keys[i] = vat_atom_named(names[i]);
  return vat_map(keys, vals, n);
}

static vat_value batch_method(void) {
  enum { ORDERS = 100 };
  vat_value orders[ORDERS];
  for (int i = 0; i < ORDERS; i++) {
    char item[32];
    snprintf(item, sizeof item, "item-%04d", i);
    vat_value tags[] = {vat_string("fresh"), vat_string("boxed")};
    vat_value k[] = {vat_atom_named("id"), vat_atom_named("item"),
                     vat_atom_named("qty"), vat_atom_named("price"),
                     vat_atom_named("tags")};
    vat_value v[] = {vat_int(100000 + i), vat_string(item), vat_float(i % 7),
                     vat_float(9.99 + i), vat_list(tags, 2)};
    orders[i] = vat_map(k, v, 5);
  }
  vat_value args = vat_list(orders, ORDERS);
  vat_value call[] = {vat_string("placeOrders"), vat_list(&args, 1)};
  return vat_list(call, 2);
}

/* Value nodes in v, for values/s. */
static uint64_t nodes(vat_value v) {
  uint64_t n = 1;
  switch (v.type) {
  case VAT_T_LIST:
  case VAT_T_RECORD:
    for (size_t i = 0; i < vat_len(v); i++)
      n += nodes(vat_at(v, i));
    return n;
  case VAT_T_MAP: {
    /* Keys are atoms or scalars here: one node each. */
    return n + 2 * vat_len(v);
  }
  case VAT_T_ERROR:
    return n + nodes(vat_error_payload(v));
  default:
    return n;
  }
}

static double cpu_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

typedef struct figures {
  double enc_msgs, enc_mb, dec_msgs, dec_mb, values, json_msgs;
} figures;

/* jansson alone: the message and its body (after a smallcaps '#')
 * parsed, nothing built. */
static bool parse_only(const char *json, size_t len) {
  json_t *m = json_loadb(json, len, JSON_DECODE_INT_AS_REAL, NULL);
  if (m == NULL)
    return false;
  json_t *cd = json_object_get(m, "method");
  if (cd == NULL)
    cd = json_object_get(m, "result");
  json_t *body = json_object_get(cd, "body");
  const char *text = json_string_value(body);
  size_t skip = text != NULL && text[0] == '#' ? 1 : 0;
  json_t *b = json_loadb(text + skip, json_string_length(body) - skip,
                         JSON_DECODE_ANY | JSON_DECODE_INT_AS_REAL, NULL);
  json_decref(m);
  if (b == NULL)
    return false;
  json_decref(b);
  return true;
}

static bool run(const char *name, const vat_captp_msg *msg, uint64_t n,
                figures *f) {
  char *frame;
  size_t len;
  vat_captp_error err;
  bench_check(vat_captp_encode_frame(msg, &table, &frame, &len, &err),
              "encode");
  const char *json = strchr(frame, ':') + 1;
  size_t json_len = len - (size_t)(json - frame) - 1;
  /* As many untimed first: the first row timed cold ran at half the speed
   * of the same message timed later (a tenth as many warmed it only
   * part of the way). */
  for (uint64_t i = 0; i < n; i++) {
    char *out;
    size_t out_len;
    if (vat_captp_encode_frame(msg, &table, &out, &out_len, NULL) != VAT_OK)
      return false;
  }

  double t0 = cpu_now();
  for (uint64_t i = 0; i < n; i++) {
    char *out;
    size_t out_len;
    if (vat_captp_encode_frame(msg, &table, &out, &out_len, NULL) != VAT_OK)
      return false;
  }
  double t1 = cpu_now();
  vat_captp_msg back;
  for (uint64_t i = 0; i < n; i++)
    if (vat_captp_decode(json, json_len, &table, &back, NULL) != VAT_OK)
      return false;
  double t2 = cpu_now();
  for (uint64_t i = 0; i < n; i++)
    if (!parse_only(json, json_len))
      return false;
  double t3 = cpu_now();
  bool ok = vat_equal(back.value, msg->value) && back.type == msg->type;
  double enc = t1 - t0, dec = t2 - t1;
  f->json_msgs = (double)n / (t3 - t2);
  uint64_t vals = nodes(msg->value);
  f->enc_msgs = (double)n / enc;
  f->dec_msgs = (double)n / dec;
  f->enc_mb = (double)n * (double)len / enc / 1e6;
  f->dec_mb = (double)n * (double)json_len / dec / 1e6;
  f->values = (double)vals;
  printf("%-6s %5zu B frame, %4" PRIu64 " values: encode %9.0f msg/s %7.0f "
         "MB/s %10.0f values/s | decode %9.0f msg/s %7.0f MB/s %10.0f "
         "values/s | jansson's two parses alone %9.0f msg/s%s\n",
         name, len, vals, f->enc_msgs, f->enc_mb, f->enc_msgs * (double)vals,
         f->dec_msgs, f->dec_mb, f->dec_msgs * (double)vals, f->json_msgs,
         ok ? "" : "  (round trip differs)");
  return ok;
}

int main(int argc, char **argv) {
  bench_args args;
  bench_parse(argc, argv, usage, 1, &args);
  uint64_t n = args.nsizes > 0 ? args.sizes[0] : 200000;
  bench_check(vat_init(), "vat_init");

  vat_captp_msg small = {.type = VAT_CAPTP_CALL,
                         .id = "q-12",
                         .target = "o-3",
                         .value = small_method(),
                         .has_epoch = true};
  vat_captp_msg mixed = {.type = VAT_CAPTP_RETURN,
                         .id = "q-7",
                         .value = mixed_value(),
                         .has_epoch = true};
  vat_captp_msg batch = {.type = VAT_CAPTP_CALL,
                         .id = "q-99",
                         .target = "o-1",
                         .value = batch_method(),
                         .has_epoch = true};
  figures fs, fm, fb, ss, sm, sb;
  double start = cpu_now();
  bool ok = run("small", &small, n, &fs);
  ok = run("mixed", &mixed, n / 4, &fm) && ok;
  ok = run("batch", &batch, n / 100 + 1, &fb) && ok;
  small.format = mixed.format = batch.format = VAT_CAPTP_SMALLCAPS;
  ok = run("small#", &small, n, &ss) && ok;
  ok = run("mixed#", &mixed, n / 4, &sm) && ok;
  ok = run("batch#", &batch, n / 100 + 1, &sb) && ok;
  double seconds = cpu_now() - start;
  uint64_t messages = 6 * (n + n / 4 + n / 100 + 1);
  if (!ok)
    printf("verification failed\n");
  printf("RESULT workload=captp_codec workers=1 messages=%" PRIu64
         " seconds=%.3f rate=%.0f small_enc=%.0f small_dec=%.0f "
         "mixed_enc=%.0f mixed_dec=%.0f batch_enc=%.0f batch_dec=%.0f "
         "mixed_enc_mbs=%.1f mixed_dec_mbs=%.1f batch_enc_mbs=%.1f "
         "batch_dec_mbs=%.1f batch_dec_values=%.0f small_json=%.0f "
         "mixed_json=%.0f batch_json=%.0f small_sc_enc=%.0f small_sc_dec=%.0f "
         "mixed_sc_enc=%.0f mixed_sc_dec=%.0f batch_sc_enc=%.0f "
         "batch_sc_dec=%.0f peak_rss_mb=%.0f%s\n",
         messages, seconds, (double)messages / seconds, fs.enc_msgs,
         fs.dec_msgs, fm.enc_msgs, fm.dec_msgs, fb.enc_msgs, fb.dec_msgs,
         fm.enc_mb, fm.dec_mb, fb.enc_mb, fb.dec_mb, fb.dec_msgs * fb.values,
         fs.json_msgs, fm.json_msgs, fb.json_msgs, ss.enc_msgs, ss.dec_msgs,
         sm.enc_msgs, sm.dec_msgs, sb.enc_msgs, sb.dec_msgs,
         bench_peak_rss_mb(), ok ? "" : " ok=0");
  return ok ? 0 : 1;
}
