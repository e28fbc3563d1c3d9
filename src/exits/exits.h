/* Links, monitors, exit signals and stop callbacks: a module on the core's
 * hooks (core/hooks.h). */
#ifndef VAT_EXITS_EXITS_H
#define VAT_EXITS_EXITS_H

#include "core/hooks.h"

extern const vat__module vat__exits_module;

/** A monitor held by a host thread on target's vat: `fn(ctx, reason)`
 *  runs once when the vat ends (noproc if it had; shutdown if its system
 *  stops with it alive), on whichever thread sees it end, outside any
 *  turn; unless vat__exits_host_unwatch reaches the vat first (fn may
 *  still run if its down was already on its way: the caller decides which
 *  of the two counts). Stores a handle in *handle. Host thread; errors
 *  as vat_host_send. */
int vat__exits_host_watch(vat_ref *target,
                          void (*fn)(void *ctx, vat_value reason), void *ctx,
                          void **handle);
/** Asks target to forget the monitor. Any thread. */
void vat__exits_host_unwatch(void *handle);

#endif
