/* Turn tracing, the file half: configuration at system start, and the
 * writer that turns the workers' rings (core/trace.h) into Trace Event
 * Format JSON, which Perfetto and chrome://tracing open. See vat/trace.h
 * for what the file holds. */
#ifndef VAT_TRACE_TRACE_H
#define VAT_TRACE_TRACE_H

#include "core/hooks.h"
#include "vat/core.h"

/** Writes the trace file at shutdown, when the system names one. */
extern const vat__module vat__trace_module;

/** A vat_config.trace_path that traces nothing, whatever VAT_TRACE says:
 *  for systems the library makes whose trace nobody asked for (a
 *  simulated world's other machines, the runs that shrink a failure). */
extern const char vat__trace_off[];

/** Reads the configuration (and VAT_TRACE, VAT_TRACE_EVENTS) into `sys`
 *  before its workers are made. VAT_OK or VAT_EINVAL. */
int vat__trace_configure(vat_system *sys);

/** What the file calls a turn's or send's target: a function's symbol, a
 *  selector's or signal's name. Into `buf` when it must be made. */
const char *vat__trace_name(const void *what, uint32_t form, char *buf,
                            size_t size);

#endif
