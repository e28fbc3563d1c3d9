/* Turns: one message run on one entity, its effects buffered until it
 * commits. The turn loop (vat__run_batch) is what the scheduler calls.
 */
#ifndef VAT_CORE_TURN_H
#define VAT_CORE_TURN_H

#include <stdbool.h>

#include "core/message.h"
#include "core/thread.h"
#include "core/vat.h"

/* Work a turn defers to its commit (and forgets if it fails). Commit keeps
 * program order: an effect takes place after the sends buffered before it
 * was deferred and before those buffered after it, and what it sends
 * through the turn goes out right after it. So whoever learns of an effect
 * (a host woken by a resolution, a vat sent a link) finds the turn's
 * earlier sends and signals already queued. An effect must not defer
 * another from its commit. */
typedef struct vat__effect vat__effect;
struct vat__effect {
  vat__effect *next;
  void (*commit)(vat_turn *turn, vat__effect *effect);
  vat__msg *after; /* the last send buffered before it; NULL: none */
};

struct vat_turn {
  vat__worker *worker;
  vat__vat *vat;
  vat_ref *self;
  vat__msg *msg;
  vat__msg *out_head, *out_tail; /* buffered sends, in order */
  vat__vat *spawned;             /* vats spawned by this turn */
  vat__effect *effects_head, *effects_tail;
  bool failed;
  bool stop;
  bool committing;  /* running effects: they may not defer more */
  vat_value reason; /* failed or stop: how the vat ends */
};

/* Inline: every send and every turn-side call starts with it. */
static inline int vat__check_turn(vat_turn *turn) {
  if (turn == NULL || turn != vat__current_turn)
    return VAT_ENOTINTURN;
  if (turn->failed)
    return VAT_ETURNFAILED;
  return VAT_OK;
}

/** Runs up to `budget` messages of `v`. Returns whether it has more. */
bool vat__run_batch(vat__worker *w, vat__vat *v, unsigned budget);

/** Defers `effect` to the turn's commit. Not from a commit. */
void vat__turn_defer(vat_turn *turn, vat__effect *effect);

#endif
