/* Vats and entities: their layouts, and what the rest of the runtime asks
 * of them.
 *
 * Ownership in one paragraph: a vat is run by at most one worker at a time
 * (the mailbox protocol guarantees it), so everything in a vat is written
 * by that worker alone, except its mailbox's `top` (producers push), its
 * `flags` (senders set VAT__ALERTED) and `traps_hint` (read by senders).
 * Snapshots (vat_ref_inspect) read some fields from other threads; those
 * are written with relaxed atomic stores, said where they are.
 */
#ifndef VAT_CORE_VAT_H
#define VAT_CORE_VAT_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/mailbox.h"
#include "sched/task.h"
#include "util/cpu.h"
#include "vat/core.h"

typedef struct vat__vat vat__vat;
typedef struct vat__worker vat__worker;

/* vat__vat.flags. DEAD, ALERTED and MUTING need the turn loop's
 * attention (VAT__ATTENTION); OVERLOADED and BEHIND are the vat worker's
 * own bookkeeping of its queue (core/overload.h), which senders read. */
enum {
  VAT__DEAD = 1,
  VAT__ALERTED = 2,
  VAT__OVERLOADED = 4,
  VAT__BEHIND = 8,
  VAT__MUTING = 16, /* a turn of it sent to an overloaded vat */
  VAT__URGENT = 32, /* an urgent message was pushed to it */
  VAT__YIELD = 64,  /* its batch sent a burst: it ends (core/overload.h) */
  VAT__COUNTED = 128, /* it has an overload record: senders count (core/overload.h) */
  VAT__ATTENTION =
      VAT__DEAD | VAT__ALERTED | VAT__MUTING | VAT__URGENT | VAT__YIELD,
};

/* A vat's extension: what most vats never need, kept off the vat's one
 * hot cache line — its exit reason and the per-vat state of the modules
 * built on the core (exits, promises, timers). Made on first use, so that
 * a plain vat pays one pointer for all of it.
 * Each module owns its field and touches it only from the vat's own turns
 * and from its hooks (core/hooks.h). The core knows the fields' types only
 * by name. */
struct vat__exits;
struct vat__promises;
struct vat__timers;
struct vat__overload_state;
typedef struct vat__vat_ext {
  /* Set when the vat ends, before `dead`; left null by a `normal` end
   * that found no extension (see vat__exit_reason). */
  vat_value exit_reason;
  struct vat__exits *exits;
  struct vat__promises *promises;
  struct vat__timers *timers;
  /* Queue length, overload policy, muted senders (core/overload.h): made by
   * the vat's worker, published with a release store. */
  struct vat__overload_state *overload;
  /* The first entity's stop callback, kept here by the core rather than
   * in `exits`: a short-lived vat that only wants its end seen costs two
   * allocations, not four. The exits module runs it, before the other
   * entities' callbacks. */
  vat_stop_fn first_stop;
  /* In its system's boundary registry (core/boundary.h). */
  bool on_boundary;
  /* The vat's label (core/label.c): NULL or an immutable copy, replaced
   * whole by an atomic store, so any thread may read it. */
  const char *label;
} vat__vat_ext;

/* An entity: behaviour plus state. A vat_ref points to one. Its state
 * follows it in the same allocation, aligned for any type (the struct's
 * alignment makes its size a multiple of 16). */
struct vat_entity {
  _Alignas(16) vat__vat *vat;
  vat_receive_fn receive;
};

static inline void *vat__state(vat_ref *e) {
  return e + 1;
}

struct vat__vat {
  /* Hot: touched by every message. */
  vat__mailbox mailbox; /* first: see core/turn.c, try_idle */
  /* While runnable, the scheduler's link (sched/task.h); while on one of
   * the core's own lists, a turn's spawn list or a muted list
   * (core/overload.h), the core's. A vat is never on both at once, and the
   * link is NULL between the two. */
  union {
    vat__task task;
    vat__vat *link;
  };
  vat_system *sys;
  /* VAT__DEAD: set once, with release, after ext->exit_reason is written.
   * VAT__ALERTED: set, with release, after a signal that may end the vat
   * ahead of its queue was pushed (vat__alert); the turn loop clears it.
   * VAT__OVERLOADED, VAT__BEHIND, VAT__MUTING, VAT__YIELD: see
   * core/overload.h.
   * VAT__URGENT: set, with release, after an urgent message was pushed;
   * the turn loop clears it and moves urgent messages to the front.
   * One byte: the turn loop reads them with the one load it makes per
   * turn. */
  _Atomic uint8_t flags;
  /* Whether the vat traps exits, mirrored by the exits module for senders
   * deciding whether to alert it: a hint, written relaxed by the vat. */
  _Atomic bool traps_hint;
  /* Turns run, wrapping: lets an idle timer see silence. Written by the
   * vat's worker alone with relaxed atomic stores (plain moves), so a
   * snapshot from another thread may read it (vat_ref_inspect). */
  uint32_t turns;
  /* See vat__ext_of(); the exit reason lives there. Set once, from NULL,
   * by a release store (vat__ext_publish): another thread that
   * acquire-loads it sees the extension's fields as made. */
  vat__vat_ext *ext;
  /* The first entity, made with the vat, so spawning is one allocation.
   * Must stay last: its state follows it. The fields above fill exactly one
   * cache line, so the entity needs no padding before it and a vat with a
   * state of up to 47 bytes is one 128-byte object (vat__vat_new). */
  struct vat_entity first;
};

_Static_assert(offsetof(struct vat__vat, first) == VAT__CACHE_LINE,
               "the vat's header is one cache line");
/** The vat whose link `t` (not NULL) is. */
static inline vat__vat *vat__vat_of(vat__task *t) {
  return (vat__vat *)(void *)((char *)t - offsetof(vat__vat, task));
}

/** The vat's module state, made on first use. Only from the vat's turns
 *  or its hooks. */
vat__vat_ext *vat__ext_of(vat__vat *v);

/** Installs a new extension in v (whose ext is NULL). Release: a snapshot
 *  from another thread that acquire-loads `ext` sees it initialised. */
static inline void vat__ext_publish(vat__vat *v, vat__vat_ext *x) {
  __atomic_store_n(&v->ext, x, __ATOMIC_RELEASE);
}

/** From any thread: v's extension, or NULL. Acquire pairs with
 *  vat__ext_publish. */
static inline vat__vat_ext *vat__ext_peek(vat__vat *v) {
  return __atomic_load_n(&v->ext, __ATOMIC_ACQUIRE);
}
/** Makes a vat of `def` in sys, its memory from `cache` (a worker's, when
 *  a turn spawns) or, with cache NULL, from the calling thread's free lists
 *  (a host thread's). */
struct vat__objcache;
int vat__vat_new(vat_system *sys, struct vat__objcache *cache,
                 const vat_entity_def *def, vat__vat **out, void **state_out);
/** Ends `v` with `reason`, once: sets `dead`, then runs the modules' hooks,
 *  then reports the end to the crash hook if it is abnormal (core/crash.h)
 *  and `cause` is not NULL: the message v was handling when it ended, NULL
 *  for a vat that never ran. On worker `w`, the one that ran (or spawned)
 *  it last, outside any turn. */
struct vat__msg;
void vat__terminate(vat__worker *w, vat__vat *v, vat_value reason,
                    const struct vat__msg *cause);

/** The label of v, or NULL. Any thread (core/label.c). */
const char *vat__label_of(vat__vat *v);
/** Sets v's label (a copy of `label`; NULL clears it). From v's turns, or
 *  before v can run (at spawn). */
void vat__label_set(vat__vat *v, const char *label);

static inline bool vat__is_dead(const vat__vat *v) {
  return atomic_load_explicit(&v->flags, memory_order_acquire) & VAT__DEAD;
}

/** A dead vat's exit reason. Any thread, after vat__is_dead(v) was seen
 *  true (its acquire pairs with the release that set `dead`). A vat that
 *  ended `normal` with no extension has none to hold the reason
 *  (vat__terminate), nor a reason in one made after its end. */
vat_value vat__exit_reason(vat__vat *v);

#endif
