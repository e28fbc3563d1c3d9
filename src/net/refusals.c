/* What the peer sees of a call that failed: an exception whose name and
 * message tell one refusal from another (the table in vat/net.h).
 *
 * A JavaScript peer keeps an error's name only when it is one of the
 * language's own error constructors (Endo's marshal makes any other an
 * Error), so the message has to carry the rest. A libvat code that JS has
 * no name for stays the name, which a libvat peer reads back as the code,
 * and goes in front of the message too, which is what a JS caller can
 * read. Refusals that JS has a name for get it: a method refused is a
 * TypeError, as calling a method an object lacks is in JS; a limit a
 * RangeError, as JS reports its own. */
#define GC_THREADS 1
#include <gc/gc.h>
#include <string.h>

#include "internal.h"
#include "vat/caps.h"
#include "vat/exits.h"

static bool is_js_name(const vat_atom *code) {
  static const char *const names[] = {
      "Error",       "TypeError", "RangeError", "ReferenceError",
      "SyntaxError", "EvalError", "URIError",   "AggregateError",
  };
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
    if (strcmp(vat_atom_name(code), names[i]) == 0)
      return true;
  return false;
}

/* The reasons only an ended vat gives (vat/core.h, vat/exits.h, vat/net.h),
 * or the reason the call's own target ended with. */
static bool ended_vat(vat_value reason, vat_ref *target) {
  if (vat_type_of(reason) == VAT_T_ATOM) {
    const vat_atom *a = reason.as.atom;
    if (a == vat_atom_killed() || a == vat_atom_noproc() ||
        a == vat_atom_normal() || a == vat_atom_shutdown() ||
        a == vat_atom_noconnection() || a == vat_atom_overloaded())
      return true;
  }
  return target != NULL && vat_ref_is_dead(target) &&
         vat_equal(reason, vat_ref_exit_reason(target));
}

/* "prefix: code: detail", each part left out when empty; the code also
 * when the detail already starts with it (a message that names itself). */
static vat_value message(const char *prefix, const vat_atom *code,
                         const char *detail, size_t detail_len) {
  const char *name = code ? vat_atom_name(code) : "";
  size_t name_len = code ? vat_atom_len(code) : 0;
  if (name_len > 0 && detail_len >= name_len &&
      memcmp(detail, name, name_len) == 0 &&
      (detail_len == name_len || detail[name_len] == ':')) {
    name = "";
    name_len = 0;
  }
  size_t cap = strlen(prefix) + name_len + detail_len + 5;
  char *s = GC_MALLOC_ATOMIC(cap);
  if (s == NULL)
    return vat_string(name_len ? name : prefix);
  size_t n = 0;
  const char *parts[3] = {prefix, name, detail};
  size_t lens[3] = {strlen(prefix), name_len, detail_len};
  for (int i = 0; i < 3; i++) {
    if (lens[i] == 0)
      continue;
    if (n > 0) {
      memcpy(s + n, ": ", 2);
      n += 2;
    }
    memcpy(s + n, parts[i], lens[i]);
    n += lens[i];
  }
  return vat_string_n(s, n);
}

vat_value net_exception(vat_value reason, vat_ref *target) {
  const vat_atom *code;
  vat_value payload = vat_null();
  if (vat_type_of(reason) == VAT_T_ERROR) {
    code = vat_error_code(reason);
    payload = vat_error_payload(reason);
  } else if (vat_type_of(reason) == VAT_T_ATOM) {
    code = reason.as.atom;
  } else {
    /* A value of the program's: an Error carrying it (Endo keeps it). */
    return vat_error(vat_atom_intern("Error"), reason);
  }
  const char *detail = "";
  size_t detail_len = 0;
  if (vat_type_of(payload) == VAT_T_STRING) {
    detail = vat_string_data(payload);
    detail_len = vat_string_len(payload);
  } else if (vat_type_of(payload) == VAT_T_ATOM) {
    detail = vat_atom_name(payload.as.atom);
    detail_len = vat_atom_len(payload.as.atom);
  } else if (vat_type_of(payload) != VAT_T_NULL) {
    return reason; /* fields of their own (an error relayed from Endo) */
  }
  if (ended_vat(reason, target))
    return vat_error(code, message("vat ended", code, detail, detail_len));
  if (code == vat_atom_refused())
    return vat_error(vat_atom_intern("TypeError"),
                     message("", code, detail, detail_len));
  if (code == vat_atom_intern("limit"))
    return vat_error(vat_atom_intern("RangeError"),
                     message("", code, detail, detail_len));
  if (is_js_name(code))
    return vat_type_of(reason) == VAT_T_ERROR
               ? reason
               : vat_error(code, vat_string(vat_atom_name(code)));
  return vat_error(code, message("", code, detail, detail_len));
}
