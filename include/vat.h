/* libvat — E-style vats for concurrent, capability-style C programs.
 * The one header to include. */
#ifndef VAT_H
#define VAT_H

#include "vat/caps.h"
#include "vat/core.h"
#include "vat/error.h"
#include "vat/exits.h"
#include "vat/host.h"
#include "vat/observe.h"
#include "vat/promise.h"
#include "vat/sim.h"
#include "vat/supervisor.h"
#include "vat/timer.h"
#include "vat/trace.h"
#include "vat/value.h"
#include "vat/version.h"

#endif
