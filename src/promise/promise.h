/* Requests and promises: a module on the core's hooks (core/hooks.h). */
#ifndef VAT_PROMISE_PROMISE_H
#define VAT_PROMISE_PROMISE_H

#include <stdbool.h>

#include "core/hooks.h"
#include "core/vat.h"

extern const vat__module vat__promise_module;

/** A timeout fault of a simulated world (sim/): of the requests `v` has
 *  received and not settled whose callers asked for a timeout, the first
 *  it received breaks now with `timeout`, as though its deadline had
 *  passed (its late answer is then dropped, as any late answer). False
 *  when there is none. Outside any turn, on the thread that runs `v`'s
 *  host-driven system. */
bool vat__promises_time_out(vat__vat *v);

#endif
