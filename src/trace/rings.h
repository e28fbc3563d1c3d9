/* Turn tracing, reading the rings back: a worker's ring copied into a
 * track, and the flow ids its events start and end (see write.c for how
 * the file uses them). Only trace/ includes this. */
#ifndef VAT_TRACE_RINGS_H
#define VAT_TRACE_RINGS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/trace.h"

/* One worker's events, oldest first. */
typedef struct vat__trace_track {
  vat__trace_event *ev;
  size_t n;
  uint64_t lost;      /* overwritten before the copy (or during it) */
  uint64_t flow_base; /* the worker's flow ids' top bits */
} vat__trace_track;

/** Copies what `r` holds into `t` (whose `ev` has room for the ring).
 *  Unless the system has stopped (`still`), its owner may be recording
 *  meanwhile; slots it may have overwritten during the copy are dropped
 *  and counted as lost. */
void vat__trace_copy_ring(vat__trace_ring *r, bool still, vat__trace_track *t);

/* A sorted set of flow ids, without repeats. */
typedef struct vat__trace_ids {
  uint64_t *ids;
  size_t n;
} vat__trace_ids;

/** Whether `id` (0: none) is in the set. */
bool vat__trace_ids_has(const vat__trace_ids *s, uint64_t id);
/** The place of `id` among the set's, from 1; 0 when it is not there. */
size_t vat__trace_ids_place(const vat__trace_ids *s, uint64_t id);

/** The flows an event starts: a turn's sends, or a loose send's one. */
size_t vat__trace_starts_of(const vat__trace_event *e);
/** The id of the `k`-th flow started by event `j` of `t`. */
uint64_t vat__trace_start_id(const vat__trace_track *t, size_t j, uint32_t k);

/** The flow ids of events of `kind` across the tracks (with `starts`: the
 *  flows they start instead). VAT_OK or VAT_ENOMEM; free out->ids. */
int vat__trace_collect_ids(const vat__trace_track *tracks, unsigned n,
                           uint32_t kind, bool starts, vat__trace_ids *out);

#endif
