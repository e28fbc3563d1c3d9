/* A worker's work-first deque: the vats its turns woke and displaced from
 * the next slot, newest on top. The owner pushes and pops the newest; any
 * thread steals the oldest, one vat per steal. A tree of vats (each turn
 * spawning and waking several) thus runs depth first on its worker, with
 * few vats alive at once, while idle workers take its oldest, largest
 * branches. This is Chase and Lev's deque on a bounded ring, with the
 * C11 orders of Lê, Pop, Cohen and Zappa Nardelli (PPoPP 2013).
 *
 * `bottom` is the owner's; `top` moves by CAS, by thieves (and by the
 * owner when it takes the last vat). A slot is written only by the owner,
 * only at `bottom`, and only while fewer than VAT__DEQUE_SIZE vats are
 * held, so it is never a slot a thief can still win.
 *
 * A slot is cleared once its vat is taken, so that the deque holds no
 * dead vat from the collector: by the owner as it pops, and, for the
 * vats thieves took, by the owner's next push (`clean` up to the top it
 * last read). A thief cannot clear its own slot: by then the owner may
 * have written it anew.
 */
#ifndef VAT_SCHED_DEQUE_H
#define VAT_SCHED_DEQUE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "sched/task.h"
#include "util/cpu.h"

#define VAT__DEQUE_SIZE 4096u

/* `top` and `bottom` on lines of their own: a thief's CAS of top does
 * not take away the line the owner writes bottom on, and the owner reads
 * top only to pop, or when the deque looks full (`top_seen`, a value top
 * had: never ahead of it). Spawn on two workers: 10% faster. */
typedef struct vat__deque {
  _Alignas(VAT__CACHE_LINE) _Atomic uint32_t top; /* thieves and owner: CAS */
  _Alignas(VAT__CACHE_LINE) _Atomic uint32_t bottom; /* owner: store */
  uint32_t top_seen; /* owner: top as it last read it */
  uint32_t clean;    /* owner: slots below it are cleared */
  _Alignas(VAT__CACHE_LINE) _Atomic(vat__task *) slots[VAT__DEQUE_SIZE];
} vat__deque;

void vat__deque_init(vat__deque *d);

/** Owner: puts `v` on top. Returns false when the deque is full. */
bool vat__deque_push(vat__deque *d, vat__task *v);

/** Owner: takes the newest vat, or NULL. */
vat__task *vat__deque_pop(vat__deque *d);

/** Any thread (the owner included): takes the oldest vat, or NULL when
 *  the deque was empty or another thread won the race for that vat. */
vat__task *vat__deque_steal(vat__deque *d);

/** Any thread: how many vats are held (a snapshot). */
uint32_t vat__deque_size(vat__deque *d);

#endif
