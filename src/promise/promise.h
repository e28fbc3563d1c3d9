/* Requests and promises: a module on the core's hooks (core/hooks.h). */
#ifndef VAT_PROMISE_PROMISE_H
#define VAT_PROMISE_PROMISE_H

#include "core/hooks.h"

extern const vat__module vat__promise_module;

#endif
