/* The modules built on the core (timers, promises, exits) register here at
 * vat_init; the core calls them through this table and includes none of
 * their headers. Hooks run in registration order, which runtime/init.c
 * fixes: timers, promises, exits — a dying vat's timers stop before its
 * obligations break, and those break before its links fire.
 *
 * None of these is on the message path: they run when a system starts or
 * stops, when a vat ends, and when an entity with a stop callback is made.
 */
#ifndef VAT_CORE_HOOKS_H
#define VAT_CORE_HOOKS_H

#include "core/vat.h"

typedef struct vat__module {
  const char *name;
  /** The system starts (before its workers) / stopped (after they joined).
   *  start returns VAT_OK or an error that fails vat_system_new. */
  int (*system_start)(vat_system *sys);
  void (*system_stop)(vat_system *sys);
  /** `v` ended with `reason` (its `dead` flag is set), on worker `w`.
   *  Called only for a vat whose extension holds module state (its
   *  exits, promises or timers field, or first_stop): a module keeps a
   *  vat's state there and nowhere else. */
  void (*vat_ended)(vat__worker *w, vat__vat *v, vat_value reason);
  /** v's system stopped with v alive and on the boundary: settle with
   *  `reason` what those outside the system wait on. */
  void (*vat_stranded)(vat__vat *v, vat_value reason);
  /** An entity other than v's first, with a stop callback, was made in
   *  `v` (the core keeps the first one's: vat__vat_ext.first_stop). */
  void (*entity_stop)(vat__vat *v, vat_ref *entity, vat_stop_fn fn);
  /** Whether anything outside v watches it (a link, a monitor): asked
   *  when v ends abnormally, before vat_ended, for its crash report. */
  bool (*vat_watched)(vat__vat *v);
} vat__module;

/** From vat_init only, before any system exists. */
void vat__module_register(const vat__module *m);

/* The core's side: each runs every registered module's hook, in order. */
int vat__hooks_system_start(vat_system *sys);
void vat__hooks_system_stop(vat_system *sys);
void vat__hooks_vat_stranded(vat__vat *v, vat_value reason);
/** Whether any module says something watches v. */
bool vat__hooks_vat_watched(vat__vat *v);

/* The hooks run once per vat, kept apart and compact (only the modules
 * that have one), so a vat's end pays an indirect call per hook and
 * nothing else: a million short-lived vats make this a hot path. */
enum { VAT__MAX_MODULES = 8 };
typedef struct vat__per_vat_hooks {
  unsigned n_ended, n_entity_stop;
  void (*ended[VAT__MAX_MODULES])(vat__worker *w, vat__vat *v,
                                  vat_value reason);
  void (*entity_stop[VAT__MAX_MODULES])(vat__vat *v, vat_ref *entity,
                                        vat_stop_fn fn);
} vat__per_vat_hooks;
extern vat__per_vat_hooks vat__vat_hooks;

static inline void vat__hooks_vat_ended(vat__worker *w, vat__vat *v,
                                        vat_value reason) {
  for (unsigned i = 0; i < vat__vat_hooks.n_ended; i++)
    vat__vat_hooks.ended[i](w, v, reason);
}

static inline void vat__hooks_entity_stop(vat__vat *v, vat_ref *entity,
                                          vat_stop_fn fn) {
  for (unsigned i = 0; i < vat__vat_hooks.n_entity_stop; i++)
    vat__vat_hooks.entity_stop[i](v, entity, fn);
}

#endif
