/* CapData to values, the entry points: parse the body (the second JSON
 * parse of every message: the body is a string holding JSON), pick the
 * body format, and import slots through the caller's table once each. */
#include <gc/gc.h>
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

int captp__import(captp__decoder *d, json_int_t index, const char *iface,
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

int captp__decode_body(const char *body, size_t len,
                       const char *const *slot_names, size_t n_slots,
                       const vat_captp_slots *table, vat_value *out,
                       vat_captp_error *err) {
  bool smallcaps = len > 0 && body[0] == '#';
  size_t skip = smallcaps ? 1 : 0;
  json_error_t jerr;
  json_t *j = json_loadb(body + skip, len - skip, CAPTP__JSON_LOAD, &jerr);
  if (j == NULL)
    return captp__fail(err, VAT_EDECODE, VAT_CAPTP_ERR_JSON,
                       (size_t)jerr.position + skip, "body: %s", jerr.text);
  captp__decoder d = {
      .slot_names = slot_names,
      .n_slots = n_slots,
      .imported = n_slots > 0 ? GC_MALLOC(n_slots * sizeof(vat_value)) : NULL,
      .table = table,
      .err = err,
  };
  int rc;
  if (n_slots > 0 && d.imported == NULL)
    rc = captp__fail(err, VAT_ENOMEM, VAT_CAPTP_ERR_NOMEM, 0, "slots");
  else if (smallcaps)
    rc = captp__decode_smallcaps(&d, j, 0, out);
  else
    rc = captp__decode_capdata(&d, j, 0, out);
  json_decref(j);
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

int captp__decode_capdata_object(const json_t *cd, const vat_captp_slots *table,
                                 vat_value *out, bool *in_value,
                                 vat_captp_error *err) {
  *in_value = false;
  json_t *body = json_object_get(cd, "body");
  json_t *slots = json_object_get(cd, "slots");
  if (!json_is_object(cd) || !json_is_string(body) || !json_is_array(slots))
    return captp__fail(err, VAT_EDECODE, VAT_CAPTP_ERR_CAPDATA, 0,
                       "not {body, slots}");
  size_t n = json_array_size(slots);
  const char **names = n > 0 ? GC_MALLOC(n * sizeof *names) : NULL;
  if (n > 0 && names == NULL)
    return captp__fail(err, VAT_ENOMEM, VAT_CAPTP_ERR_NOMEM, 0, "slots");
  for (size_t i = 0; i < n; i++) {
    json_t *s = json_array_get(slots, i);
    if (!json_is_string(s))
      return captp__fail(err, VAT_EDECODE, VAT_CAPTP_ERR_CAPDATA, 0,
                         "slot %zu is not a string", i);
    names[i] = json_string_value(s);
  }
  /* The shape was sound: what fails from here is the value itself. */
  *in_value = true;
  return captp__decode_body(json_string_value(body), json_string_length(body),
                            names, n, table, out, err);
}
