/* CapData to values, the entry points: parse the body (json.c: the body
 * is a string holding JSON, so its text is parsed on its own), pick the
 * body format, and import slots through the caller's table once each. */
#include <gc/gc.h>
#include <stdlib.h>
#include <string.h>

#include "captp/internal.h"

/* "o+12", "p-3": a kind, a sign, decimal digits without a leading zero. */
static bool slot_name_ok(const char *s) {
  size_t len = strlen(s);
  if (len < 3 || len >= VAT_CAPTP_SLOT_MAX || (s[0] != 'o' && s[0] != 'p') ||
      (s[1] != '+' && s[1] != '-'))
    return false;
  return s[2] != '-' && captp__is_digits(s + 2, len - 2);
}

int captp__import(captp__decoder *d, int64_t index, const char *iface,
                  char want, vat_value *out) {
  if (index < 0 || (size_t)index >= d->n_slots)
    return captp__fail(d->err, VAT_EDECODE, VAT_CAPTP_ERR_SLOT, 0,
                       "slot index %lld not below %zu", (long long)index,
                       d->n_slots);
  if (d->imported[index].type != VAT_T_NULL) {
    *out = d->imported[index];
    return VAT_OK;
  }
  const char *name = d->slot_names[index];
  if (!slot_name_ok(name) || (want != 0 && name[0] != want))
    return captp__fail(d->err, VAT_EDECODE, VAT_CAPTP_ERR_SLOT, 0,
                       "slot \"%.40s\" is not %c[+-]N", name,
                       want != 0 ? want : 'o');
  if (d->table == NULL || d->table->import_slot == NULL)
    return captp__fail(d->err, VAT_EDECODE, VAT_CAPTP_ERR_IMPORT, 0,
                       "no slot table for \"%s\"", name);
  vat_value v = vat_null();
  int rc = d->table->import_slot(d->table->ctx, name, iface, &v);
  if (rc != VAT_OK)
    return captp__fail(d->err, rc < 0 ? rc : VAT_EDECODE, VAT_CAPTP_ERR_IMPORT,
                       0, "slot \"%s\": %s", name, vat_strerror(rc));
  if (v.type != (name[0] == 'o' ? VAT_T_REF : VAT_T_PROMISE))
    return captp__fail(d->err, VAT_EDECODE, VAT_CAPTP_ERR_SLOT, 0,
                       "the table gave slot \"%s\" a value of the wrong kind",
                       name);
  d->imported[index] = v;
  *out = v;
  return VAT_OK;
}

/* Most values use a few slots: their imports live on the stack, which the
 * collector scans. */
enum { INLINE_SLOTS = 8 };

int captp__decode_body(const char *body, size_t len,
                       const char *const *slot_names, size_t n_slots,
                       const vat_captp_slots *table, vat_value *out,
                       vat_captp_error *err) {
  bool smallcaps = len > 0 && body[0] == '#';
  size_t skip = smallcaps ? 1 : 0;
  captp__json j;
  int rc = captp__json_parse(&j, body + skip, len - skip, skip, "body: ", err);
  if (rc != VAT_OK) {
    captp__json_free(&j);
    return rc;
  }
  vat_value inline_imported[INLINE_SLOTS];
  captp__decoder d = {
      .json = &j,
      .slot_names = slot_names,
      .n_slots = n_slots,
      .imported = n_slots <= INLINE_SLOTS
                      ? inline_imported
                      : GC_MALLOC(n_slots * sizeof(vat_value)),
      .table = table,
      .err = err,
  };
  for (size_t i = 0; i < n_slots && i < INLINE_SLOTS; i++)
    inline_imported[i] = vat_null();
  if (d.imported == NULL)
    rc = captp__fail(err, VAT_ENOMEM, VAT_CAPTP_ERR_NOMEM, 0, "slots");
  else if (smallcaps)
    rc = captp__decode_smallcaps(&d, 0, 0, out);
  else
    rc = captp__decode_capdata(&d, 0, 0, out);
  captp__json_free(&j);
  return rc;
}

int vat_capdata_decode(const char *body, size_t body_len,
                       const char *const *slot_names, size_t n_slots,
                       const vat_captp_slots *slots, vat_value *out,
                       vat_captp_error *err) {
  captp__clear(err);
  if (body == NULL || out == NULL || (slot_names == NULL && n_slots > 0))
    return captp__fail(err, VAT_EINVAL, VAT_CAPTP_ERR_TYPE, 0, "NULL argument");
  for (size_t i = 0; i < n_slots; i++)
    if (slot_names[i] == NULL)
      return captp__fail(err, VAT_EINVAL, VAT_CAPTP_ERR_TYPE, 0,
                         "slot name %zu is NULL", i);
  return captp__decode_body(body, body_len, slot_names, n_slots, slots, out,
                            err);
}

int captp__decode_capdata_object(const captp__json *j, uint32_t cd,
                                 const vat_captp_slots *table, bool unwanted,
                                 vat_value *out, bool *in_value, bool *skipped,
                                 vat_captp_format *format,
                                 vat_captp_error *err) {
  *in_value = *skipped = false;
  const captp__jnode *o = captp__jat(j, cd);
  uint32_t body = 0, slots = 0;
  if (o->type == CAPTP__J_OBJECT) {
    body = CAPTP__JSON_GET(j, cd, "body");
    slots = CAPTP__JSON_GET(j, cd, "slots");
  }
  if (body == 0 || slots == 0 || captp__jat(j, body)->type != CAPTP__J_STRING ||
      captp__jat(j, slots)->type != CAPTP__J_ARRAY)
    return captp__fail(err, VAT_EDECODE, VAT_CAPTP_ERR_CAPDATA, 0,
                       "not {body, slots}");
  const captp__jnode *b = captp__jat(j, body);
  *format = b->len > 0 && b->as.str[0] == '#' ? VAT_CAPTP_SMALLCAPS
                                              : VAT_CAPTP_CAPDATA;
  size_t n = captp__jat(j, slots)->len;
  if (unwanted && n == 0) {
    *skipped = true;
    *out = vat_null();
    return VAT_OK;
  }
  const char *inline_names[INLINE_SLOTS];
  const char **names = n <= INLINE_SLOTS ? inline_names
                                         : malloc(n * sizeof *names);
  if (names == NULL)
    return captp__fail(err, VAT_ENOMEM, VAT_CAPTP_ERR_NOMEM, 0, "slots");
  int rc = VAT_OK;
  uint32_t at = slots + 1;
  for (size_t i = 0; i < n; i++, at = captp__jat(j, at)->end) {
    if (captp__jat(j, at)->type != CAPTP__J_STRING) {
      rc = captp__fail(err, VAT_EDECODE, VAT_CAPTP_ERR_CAPDATA, 0,
                       "slot %zu is not a string", i);
      break;
    }
    names[i] = captp__jat(j, at)->as.str;
  }
  if (rc == VAT_OK) {
    /* The shape was sound: what fails from here is the value itself. */
    *in_value = true;
    rc = captp__decode_body(b->as.str, b->len, names, n, table, out, err);
  }
  if (names != inline_names)
    free(names);
  return rc;
}
