/* Names for what turns run: selectors and signals name themselves; a
 * handler function is named by its symbol, which dladdr() finds when the
 * function is exported (a program linked with -rdynamic, or a shared
 * library's public function). Otherwise it is named by its object file
 * and offset ("prog+0x1234"), which addr2line turns into a name. */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include "core/deliver.h"
#include "core/trace.h"
#include "trace/trace.h"

static const char *function_name(const void *fn, char *buf, size_t size) {
  Dl_info info;
  if (dladdr((void *)fn, &info) != 0) {
    if (info.dli_sname != NULL && info.dli_saddr == fn)
      return info.dli_sname;
    if (info.dli_fname != NULL) {
      const char *base = strrchr(info.dli_fname, '/');
      snprintf(buf, size, "%s+0x%zx", base ? base + 1 : info.dli_fname,
               (size_t)((const char *)fn - (const char *)info.dli_fbase));
      return buf;
    }
  }
  snprintf(buf, size, "%p", fn);
  return buf;
}

const char *vat__trace_name(const void *what, uint32_t form, char *buf,
                            size_t size) {
  switch (form) {
  case VAT__TR_DYN:
    return vat_atom_name(what);
  case VAT__TR_SIGNAL: {
    const vat__signal_class *cls = what;
    return cls->name ? cls->name : "signal";
  }
  default:
    return function_name(what, buf, size);
  }
}
