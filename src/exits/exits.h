/* Links, monitors, exit signals and stop callbacks: a module on the core's
 * hooks (core/hooks.h). */
#ifndef VAT_EXITS_EXITS_H
#define VAT_EXITS_EXITS_H

#include "core/hooks.h"

extern const vat__module vat__exits_module;

#endif
