/* Crash reports: a vat's abnormal end, told to its system's on_crash hook
 * (vat/observe.h has the rules). Made in two steps around the modules'
 * ended hooks: whether anyone watched must be asked before they forget
 * the links and monitors, and the hook runs after them, once the vat's
 * end has reached everyone it will reach. */
#ifndef VAT_CORE_CRASH_H
#define VAT_CORE_CRASH_H

#include <stdbool.h>

#include "core/message.h"
#include "core/vat.h"
#include "vat/observe.h"

/** Whether v's end with `reason`, while handling `cause`, is to be
 *  reported; if so fills *report. On v's worker, v's `dead` set. */
bool vat__crash_begin(vat__vat *v, vat_value reason, const vat__msg *cause,
                      vat_crash_report *report);

/** Calls the hook with the report vat__crash_begin made. */
void vat__crash_end(vat__vat *v, const vat_crash_report *report);

#endif
