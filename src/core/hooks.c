/* See hooks.h. The table is filled by vat_init, before any thread but the
 * caller's may use the library (its release store publishes it), and only
 * read after. */
#include "core/hooks.h"

#include <assert.h>

enum { MAX_MODULES = 8 };

static const vat__module *modules[MAX_MODULES];
static unsigned nmodules;

void vat__module_register(const vat__module *m) {
  for (unsigned i = 0; i < nmodules; i++)
    if (modules[i] == m)
      return; /* vat_init may run again after a failed start */
  assert(nmodules < MAX_MODULES);
  modules[nmodules++] = m;
}

int vat__hooks_system_start(vat_system *sys) {
  for (unsigned i = 0; i < nmodules; i++) {
    if (modules[i]->system_start == NULL)
      continue;
    int rc = modules[i]->system_start(sys);
    if (rc != VAT_OK) {
      /* Undo the ones that started, newest first. */
      while (i-- > 0)
        if (modules[i]->system_stop)
          modules[i]->system_stop(sys);
      return rc;
    }
  }
  return VAT_OK;
}

void vat__hooks_system_stop(vat_system *sys) {
  for (unsigned i = 0; i < nmodules; i++)
    if (modules[i]->system_stop)
      modules[i]->system_stop(sys);
}

void vat__hooks_vat_ended(vat__worker *w, vat__vat *v, vat_value reason) {
  for (unsigned i = 0; i < nmodules; i++)
    if (modules[i]->vat_ended)
      modules[i]->vat_ended(w, v, reason);
}

void vat__hooks_vat_stranded(vat__vat *v, vat_value reason) {
  for (unsigned i = 0; i < nmodules; i++)
    if (modules[i]->vat_stranded)
      modules[i]->vat_stranded(v, reason);
}

void vat__hooks_entity_stop(vat__vat *v, vat_ref *entity, vat_stop_fn fn) {
  for (unsigned i = 0; i < nmodules; i++)
    if (modules[i]->entity_stop)
      modules[i]->entity_stop(v, entity, fn);
}
