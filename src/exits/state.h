/* The exits module's shared layouts, for exits.c (state, the API, the
 * hooks) and signals.c (what travels between vats). See exits.c for the
 * design. */
#ifndef VAT_EXITS_STATE_H
#define VAT_EXITS_STATE_H

#include <stdbool.h>
#include <stdint.h>

#include "core/deliver.h"
#include "core/reasons.h"
#include "core/vat.h"
#include "exits/map.h"
#include "vat/exits.h"

typedef struct stop_cb {
  struct stop_cb *next;
  vat_ref *entity;
  vat_stop_fn fn;
} stop_cb;

/* One monitor, shared read-only by the watcher and the target once sent.
 * A host thread's monitor (vat__exits_host_watch) has no watcher: its down
 * is a call of `host_fn`, made wherever the down is sent. */
typedef struct watch {
  uint64_t id;
  vat_ref *watcher; /* the entity that called vat_monitor; NULL: a host's */
  vat_ref *who;     /* the ref it monitors */
  vat_down_fn fn;
  void (*host_fn)(void *ctx, vat_value reason);
  void *host_ctx;
} watch;

/* The maps iterate in insertion order, so a vat's end sends its exits and
 * downs in the order the links and monitors were made. Ids (monitors and
 * unlinks) come from a counter of the vat that makes them, not of the
 * process: a deterministic run sees the same ids every time. So a watch is
 * known to its target by its address, unique where an id is not. */
struct vat__exits {
  vat__xmap links;     /* linked: peer vat -> a ref of it */
  vat__xmap unlinking; /* unlinked, not yet acknowledged: peer vat -> id */
  vat__xmap watchers;  /* monitors on this vat: watch address -> watch */
  vat__xmap held;      /* monitors this vat made: id -> watch */
  uint64_t last_id;    /* of the monitors and unlinks this vat made */
  vat_ref *trap;       /* NULL: not trapping; see vat__exits_set_trap */
  vat_exit_fn trap_fn;
  stop_cb *stops;
};

typedef struct exit_sig {
  vat__signal base;
  vat__vat *from_vat; /* NULL from a host thread */
  vat_ref *from;
  vat_value reason;
  bool link; /* travelled along a link: rule 1 applies */
} exit_sig;

typedef struct link_sig {
  vat__signal base;
  vat_ref *from;
  uint64_t id; /* UNLINK and UNLINK_ACK: which unlink */
} link_sig;

typedef struct watch_sig {
  vat__signal base;
  watch *w;
  vat_value reason; /* DOWN only */
} watch_sig;

/** The vat's exits state, made on first use. Inline: every link signal
 *  asks; only the first one makes it. */
struct vat__exits *vat__exits_make(vat__vat *v);
static inline struct vat__exits *vat__exits_of(vat__vat *v) {
  if (v->ext != NULL && v->ext->exits != NULL)
    return v->ext->exits;
  return vat__exits_make(v);
}

/* The trap is stored with a relaxed atomic store (a plain move) by the
 * vat alone, so that a snapshot may read whether it traps. */
static inline void vat__exits_set_trap(struct vat__exits *x, vat_ref *trap) {
  __atomic_store_n(&x->trap, trap, __ATOMIC_RELAXED);
}

static inline bool vat__exits_is_kill(vat_value reason) {
  return vat_is_atom(reason, vat__reason.killed);
}

/* signals.c */
extern const vat__signal_class vat__exit_class, vat__link_class,
    vat__unlink_class, vat__monitor_class, vat__demonitor_class;
/** Notes `v` on its system's boundary if `peer` is of another system. */
void vat__exits_note_crossing(vat__vat *v, vat__vat *peer);
/** EXIT(reason) along a link, from the vat `from_vat` that ended. */
/* Whether an exit from `from_vat` (NULL: a host thread) is likely to end
 * `to`, so that its sender should alert it (core/deliver.h): read from
 * another thread, the trap is a hint. */
bool vat__exits_may_end(vat__vat *to, vat__vat *from_vat, vat_value reason,
                        bool link);

void vat__exits_send_exit(vat__worker *w, vat_ref *to, vat__vat *from_vat,
                          vat_value reason);
/** DOWN(reason) to the watcher of `wa`. */
void vat__exits_send_down(vat__worker *w, watch *wa, vat_value reason);

#endif
