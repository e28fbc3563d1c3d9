/* See hooks.h. The tables are filled by vat_init, before any thread but
 * the caller's may use the library (its release store publishes them),
 * and only read after. */
#include "core/hooks.h"

#include <assert.h>

static const vat__module *modules[VAT__MAX_MODULES];
static unsigned nmodules;
vat__per_vat_hooks vat__vat_hooks;

void vat__module_register(const vat__module *m) {
  for (unsigned i = 0; i < nmodules; i++)
    if (modules[i] == m)
      return; /* vat_init may run again after a failed start */
  assert(nmodules < VAT__MAX_MODULES);
  modules[nmodules++] = m;
  vat__per_vat_hooks *h = &vat__vat_hooks;
  if (m->vat_ended)
    h->ended[h->n_ended++] = m->vat_ended;
  if (m->entity_stop)
    h->entity_stop[h->n_entity_stop++] = m->entity_stop;
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

void vat__hooks_vat_stranded(vat__vat *v, vat_value reason) {
  for (unsigned i = 0; i < nmodules; i++)
    if (modules[i]->vat_stranded)
      modules[i]->vat_stranded(v, reason);
}

bool vat__hooks_vat_watched(vat__vat *v) {
  for (unsigned i = 0; i < nmodules; i++)
    if (modules[i]->vat_watched && modules[i]->vat_watched(v))
      return true;
  return false;
}
