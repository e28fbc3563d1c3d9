/* Crash reports (see core/crash.h) and the default hook's line. None of it
 * is on the message path: it runs once per vat that ends abnormally. */
#include "core/crash.h"

#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include "core/deliver.h"
#include "core/hooks.h"
#include "core/reasons.h"
#include "core/system.h"
#include "vat/exits.h"

/* The reasons of vat/exits.h, here because the core reports crashes by
 * them and cannot call up into the exits module. */
bool vat_reason_is_normal(vat_value reason) {
  return vat_is_atom(reason, vat__reason.normal);
}

bool vat_reason_is_orderly(vat_value reason) {
  const vat_atom *sd = vat__reason.shutdown;
  return vat_reason_is_normal(reason) || vat_is_atom(reason, sd) ||
         (reason.type == VAT_T_ERROR && vat_error_code(reason) == sd);
}

/* The symbol name of a function, where the dynamic linker knows it. */
static const char *symbol_name(vat_fn fn) {
  void *addr;
  memcpy(&addr, &fn, sizeof addr); /* a function pointer as an address */
  Dl_info info;
  if (dladdr(addr, &info) == 0 || info.dli_sname == NULL ||
      info.dli_saddr != addr)
    return NULL;
  return info.dli_sname;
}

static void describe_cause(const vat__msg *m, vat_crash_report *r) {
  vat_fn fn = vat__msg_fn(m); /* an urgent message: what it runs */
  if (fn == vat__dispatch_dynamic) {
    r->selector = m->arg;
  } else if (m->fn == vat__dispatch_signal) {
    const vat__signal *sig = m->arg;
    if (sig->cls->handler) {
      /* Named only, never called through this type. */
      r->handler = (vat_fn)sig->cls->handler(sig);
      r->handler_name = symbol_name(r->handler);
    } else {
      r->signal = sig->cls->name ? sig->cls->name : "signal";
    }
  } else {
    r->handler = fn;
    r->handler_name = symbol_name(fn);
  }
}

bool vat__crash_begin(vat__vat *v, vat_value reason, const vat__msg *cause,
                      vat_crash_report *report) {
  if (v->sys->cfg.on_crash == NULL || vat_reason_is_orderly(reason))
    return false;
  *report = (vat_crash_report){
      .vat = &v->first,
      .label = vat__label_of(v),
      .reason = reason,
      .watched = vat__hooks_vat_watched(v),
  };
  describe_cause(cause, report);
  return true;
}

void vat__crash_end(vat__vat *v, const vat_crash_report *report) {
  v->sys->cfg.on_crash(v->sys->cfg.crash_ctx, report);
}

/* --- The default hook ------------------------------------------------------
 */

enum { REASON_MAX = 200 };

size_t vat_crash_format(const vat_crash_report *r, char *buf, size_t size) {
  if (r == NULL) {
    if (size > 0)
      buf[0] = '\0';
    return 0;
  }
  char reason[REASON_MAX + 4];
  if (vat_format(r->reason, reason, REASON_MAX + 1) > REASON_MAX)
    strcpy(reason + REASON_MAX, "...");
  char who[VAT_LABEL_MAX + 32];
  if (r->label)
    snprintf(who, sizeof who, "\"%s\"", r->label);
  else
    snprintf(who, sizeof who, "%p", (void *)r->vat);
  char what[128];
  if (r->selector)
    snprintf(what, sizeof what, "message '%.100s'", vat_atom_name(r->selector));
  else if (r->signal)
    snprintf(what, sizeof what, "%s signal", r->signal);
  else if (r->handler_name)
    snprintf(what, sizeof what, "%.100s", r->handler_name);
  else if (r->handler) {
    void *addr;
    memcpy(&addr, &r->handler, sizeof addr);
    snprintf(what, sizeof what, "function %p", addr);
  } else
    snprintf(what, sizeof what, "nothing");
  int n = snprintf(buf, size, "libvat: vat %s crashed: %s (handling %s)\n", who,
                   reason, what);
  return n < 0 ? 0 : (size_t)n;
}

void vat_crash_print(void *ctx, const vat_crash_report *report) {
  if (report == NULL || report->watched)
    return;
  char line[512];
  size_t n = vat_crash_format(report, line, sizeof line);
  if (n >= sizeof line)
    n = sizeof line - 1;
  FILE *out = ctx ? ctx : stderr;
  /* One call: stdio locks the stream for it, so lines written from
   * several workers at once stay whole. */
  fwrite(line, 1, n, out);
  fflush(out);
}
