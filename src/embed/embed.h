/* Embedding: host-driven systems, run by their host's threads. */
#ifndef VAT_EMBED_EMBED_H
#define VAT_EMBED_EMBED_H

#include <stdbool.h>

#include "core/system.h"

/** Host-driven shutdown: runs the system until quiescent or the deadline.
 *  Returns whether it went quiet. */
bool vat__host_drain(vat_system *sys, double timeout_s);

/** Deterministic mode: the next vat to run, drawn from every ready vat
 *  with the system's seeded generator; NULL when none is ready. */
vat__vat *vat__next_seeded(vat__worker *w);

#endif
