/* Turn tracing, the recording half: each worker keeps a ring of fixed-size
 * binary events that only it writes. Recording takes no lock, allocates
 * nothing and formats nothing; the oldest events are overwritten when the
 * ring is full, and the count of events ever recorded says how many were.
 * trace/ turns the rings into a file.
 *
 * Off (the default), the runtime pays one well-predicted branch per turn
 * (vat__run_batch), per commit's chain of sends (deliver_chain), and one
 * on the colder paths (spawn, a vat's end, parking, a dead letter).
 *
 * Flows: a traced send gets an id, kept in the message node, that the turn
 * running the message records; the file draws an arrow from one to the
 * other. A send made in a turn records no event of its own: its id names
 * the sending turn's event (the worker, the event's sequence number in the
 * ring) and the send's place among the turn's sends, and the turn's event
 * counts its sends, so trace/ can list every flow that started. A send
 * made outside a turn, or past VAT__TRACE_MAX_SENDS in one, records a
 * SEND event with an id of its own (the LOOSE bit). Ids are unique in a
 * system and differ between the systems of a process: the system's tag
 * and the worker's index in the top bits.
 */
#ifndef VAT_CORE_TRACE_H
#define VAT_CORE_TRACE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "core/deliver.h"
#include "core/message.h"
#include "core/turn.h"
#include "core/vat.h"
#if defined(__x86_64__) || defined(__i386__)
#include <x86intrin.h>
#endif

/* Time is read once per group of turns, not per turn: the clock costs
 * more than the rest of a traced turn (about 30 cycles for the time-stamp
 * counter, more under a hypervisor). A turn reads it when the worker's
 * last VAT__TRACE_STRIDE turns used the previous reading, or when
 * something between turns (idle, park, a dead letter) read it since;
 * the others carry the group's reading. trace/ spreads a group's turns
 * evenly between its reading and the next event with a time of its own.
 * When a group averaged over about a microsecond per turn, every turn
 * reads the clock until VAT__TRACE_STRIDE turns in a row were fast again,
 * so long turns keep their true durations. Everything recorded during a turn
 * carries the turn's (group's) time; a turn ends where the next one begins, or
 * at the next event with a time of its own (IDLE, a dead letter). So a turn's
 * slice includes the few nanoseconds of scheduling that follow it.
 * A deterministic system's ring reads its virtual clock at every turn
 * instead (vat__trace_virtual_time): no groups, no stride. */
enum { VAT__TRACE_STRIDE = 16 };

enum vat__trace_kind {
  VAT__TR_TURN = 1, /* a turn begins: flow in, vat, entity, what, sends */
  VAT__TR_SEND,     /* a send with no turn event to start from (below) */
  VAT__TR_DROP,     /* a traced message dropped as a dead letter: flow */
  VAT__TR_SPAWN,    /* vat spawned; entity: the spawning vat */
  VAT__TR_EXIT,     /* vat ended; what: the reason's atom, form: its type */
  VAT__TR_PARK,     /* the worker parks */
  VAT__TR_WAKE,     /* the worker is awake again */
  VAT__TR_IDLE,     /* the worker ran out of work: the last turn ended */
  VAT__TR_FAULT,    /* a simulated world's fault struck vat (sim/): flow:
                       its step; entity: its kind's name; what: its text */
};

/* What a message runs, as the file names it. */
enum vat__trace_form {
  VAT__TR_FN = 0, /* what: the handler function */
  VAT__TR_DYN,    /* what: the selector atom */
  VAT__TR_SIGNAL, /* what: the signal's class (vat__signal_class) */
};

/* One event, written whole by its worker. Pointers are identities and
 * names, not references: the ring is not scanned, so it keeps no vat or
 * entity alive. Signal classes live for ever and functions are code, so
 * trace/ may read their names later; atoms may not live for ever (weak
 * ones, from a peer), so the ring keeps each event's `what` again in an
 * array the collector scans (`names`), until the slot is reused. */
typedef struct vat__trace_event {
  uint64_t ts; /* ticks (vat__trace_ticks) */
  uint64_t flow;
  const void *vat;
  const void *entity;
  const void *what;
  uint16_t kind, form;
  uint32_t sends; /* TURN: sends committed, written as they commit */
} vat__trace_event;

/* A flow id: 9 bits of system tag, 8 of worker, then either LOOSE and a
 * count of its own, or the sending turn's event's sequence number (36
 * bits: it wraps after 2^36 events, far more than a ring holds) and the
 * send's place in the turn (10 bits). */
enum {
  VAT__FLOW_TAG_SHIFT = 55,
  VAT__FLOW_WORKER_SHIFT = 47,
  VAT__FLOW_SEQ_SHIFT = 10,
  VAT__TRACE_MAX_SENDS = 1 << VAT__FLOW_SEQ_SHIFT,
};
#define VAT__FLOW_LOOSE ((uint64_t)1 << 46)
#define VAT__FLOW_SEQ_MASK (((uint64_t)1 << 36) - 1)

/** The id of send `k` of the turn recorded as event `seq` by the worker
 *  whose flow ids start with `base`. */
static inline uint64_t vat__trace_flow_id(uint64_t base, uint64_t seq,
                                          uint32_t k) {
  return base | (seq & VAT__FLOW_SEQ_MASK) << VAT__FLOW_SEQ_SHIFT | k;
}

/** The top bits of the flow ids of worker `index` of a system tagged `tag`. */
static inline uint64_t vat__trace_flow_base(unsigned tag, unsigned index) {
  return (uint64_t)(tag & 0x1ff) << VAT__FLOW_TAG_SHIFT |
         (uint64_t)((index + 1) & 0xff) << VAT__FLOW_WORKER_SHIFT;
}

_Static_assert(sizeof(vat__trace_event) == 48, "an event is six words");

typedef struct vat__trace_ring {
  /* Events ever recorded. Written by the owner only, with release, after
   * the event's slot, so a reader that copies the ring while it runs can
   * tell which slots it may have caught mid-overwrite (trace/). */
  _Atomic uint64_t head;
  uint64_t mask;            /* slots - 1; slots is a power of two */
  uint64_t flow_base;       /* vat__trace_flow_base */
  uint64_t next_flow;       /* the last loose flow id */
  uint64_t turn_ts;         /* the running turn's time; 0 between turns */
  uint64_t turn_seq;        /* the running turn's event's sequence number */
  uint32_t turn_sends;      /* its sends so far */
  uint64_t clock;           /* the last reading, the current group's time */
  uint32_t left;            /* turns that may still use `clock` */
  uint32_t group;           /* turns in its group, if it ends at `left` 0 */
  uint32_t stride;          /* turns per reading: VAT__TRACE_STRIDE, or 1 */
  uint32_t fast;            /* fast turns in a row while the stride is 1 */
  uint64_t slow;            /* ticks per microsecond: a slow turn's average */
  vat__trace_event *events; /* collector memory, not scanned */
  const void **names;       /* each slot's `what`, scanned: see above */
  /* A deterministic system's ring reads its virtual clock instead (see
   * vat__trace_virtual_time): the system's clock, or NULL; and the
   * earliest time the next turn may have, 1 ns past the last turn's. */
  const _Atomic uint64_t *virtual_now;
  uint64_t virtual_next;
} vat__trace_ring;

/** A clock that is cheap to read on every turn: the time-stamp counter
 *  where there is one (x86: constant-rate and synchronised across cores
 *  on the CPUs libvat targets), else monotonic nanoseconds. trace/ maps
 *  ticks to nanoseconds with two readings of both clocks. */
static inline uint64_t vat__trace_ticks(void) {
#if defined(__x86_64__) || defined(__i386__)
  return __rdtsc();
#else
  return vat__monotonic_ns();
#endif
}

/** The time of an event in a deterministic system: its virtual clock, in
 *  nanoseconds plus one (so that no time is 0, which `turn_ts` reads as
 *  "between turns"), or, when that is earlier, the time after the last
 *  turn's. Each turn takes the time this gives and moves it on by one: so
 *  turns at one virtual instant are 1 ns apart, in the order they ran,
 *  and whatever is recorded between two turns (a fault, a timer's send,
 *  the worker going idle) has the time of the turn that follows. */
static inline uint64_t vat__trace_virtual_time(const vat__trace_ring *r) {
  /* Acquire: pairs with vat_system_advance_clock's update. */
  uint64_t now = atomic_load_explicit(r->virtual_now, memory_order_acquire) + 1;
  return now > r->virtual_next ? now : r->virtual_next;
}

/** A ring of sys->trace_events slots or more, for worker number `index`. */
vat__trace_ring *vat__trace_ring_new(vat_system *sys, unsigned index);

/** The next slot; vat__trace_publish() makes it count. Owner only. */
static inline vat__trace_event *vat__trace_slot(vat__trace_ring *r) {
  uint64_t h = atomic_load_explicit(&r->head, memory_order_relaxed);
  return &r->events[h & r->mask];
}

static inline void vat__trace_publish(vat__trace_ring *r) {
  uint64_t h = atomic_load_explicit(&r->head, memory_order_relaxed);
  r->names[h & r->mask] = r->events[h & r->mask].what;
  /* Release: a concurrent reader that sees the new count sees the slot. */
  atomic_store_explicit(&r->head, h + 1, memory_order_release);
}

/* The recording calls, out of line: only a traced system makes them. */

/** The out-of-line rest of vat__trace_sends: from the chain's message
 *  `m`, past the turn's VAT__TRACE_MAX_SENDS. */
void vat__trace_sends_loose(vat__trace_ring *r, vat__msg *m);
/** As vat__trace_sends, for one message sent outside a turn's buffer. */
void vat__trace_send_now(vat__trace_ring *r, vat__msg *m);
/** A message `m` with a flow dropped at a dead vat. */
void vat__trace_drop(vat__trace_ring *r, const vat__msg *m);
void vat__trace_spawn(vat__trace_ring *r, const vat__vat *v,
                      const vat__vat *parent);
void vat__trace_exit(vat__trace_ring *r, const vat__vat *v, vat_value reason);
void vat__trace_mark(vat__trace_ring *r, enum vat__trace_kind kind);
/** A fault a simulated world injected (sim/) into `v` at `step`: `kind`
 *  names it (a string that lives for ever), `text` says it as its plan
 *  does (collector memory: the ring keeps it until its slot is reused). */
void vat__trace_fault(vat__trace_ring *r, const vat__vat *v, const char *kind,
                      const char *text, uint64_t step);
/** What `m` runs, for the file's name of a turn or send, and its form.
 *  Inline: once per traced turn and per traced send. */
static inline const void *vat__trace_what(const vat__msg *m, uint16_t *form) {
  if (m->fn == vat__dispatch_dynamic) {
    *form = VAT__TR_DYN;
    return m->arg;
  }
  if (m->fn == vat__dispatch_signal) {
    *form = VAT__TR_SIGNAL;
    return ((const vat__signal *)m->arg)->cls;
  }
  *form = VAT__TR_FN;
  return (const void *)(uintptr_t)m->fn;
}

/** The time a turn starting now records: a fresh reading once per group
 *  of turns (see the top), the group's reading otherwise. */
static inline uint64_t vat__trace_turn_clock(vat__trace_ring *r) {
  if (__builtin_expect(r->left == 0, 0)) {
    if (r->virtual_now != NULL) { /* `left` stays 0: every turn reads it */
      uint64_t t = vat__trace_virtual_time(r);
      r->virtual_next = t + 1;
      return t;
    }
    uint64_t now = vat__trace_ticks();
    /* The group just ended averaged a microsecond or more per turn: time
     * each turn alone, until a stride's worth of turns in a row were fast.
     * A group after an idle spell (group 0) says nothing. */
    if (r->group != 0) {
      if (now - r->clock > r->group * r->slow)
        r->stride = 1, r->fast = 0;
      else if (r->stride == 1 && ++r->fast == VAT__TRACE_STRIDE)
        r->stride = VAT__TRACE_STRIDE;
    }
    r->left = r->stride;
    r->group = r->stride; /* unless something between turns reads it */
    r->clock = now;
  }
  r->left--;
  return r->clock;
}

/** A turn of `v` running `m` begins. Inline in the traced turn loop:
 *  every store here is one per turn. */
static inline void vat__trace_turn(vat__trace_ring *r, const vat__vat *v,
                                   const vat__msg *m) {
  uint64_t h = atomic_load_explicit(&r->head, memory_order_relaxed);
  vat__trace_event *e = &r->events[h & r->mask];
  uint64_t ts = vat__trace_turn_clock(r);
  r->turn_ts = ts;
  r->turn_seq = h;
  r->turn_sends = 0;
  e->ts = ts;
  e->flow = m->flow;
  e->vat = v;
  e->entity = m->target;
  e->what = vat__trace_what(m, &e->form);
  r->names[h & r->mask] = e->what;
  e->kind = VAT__TR_TURN;
  e->sends = 0;
  /* Release: a concurrent reader that sees the new count sees the slot. */
  atomic_store_explicit(&r->head, h + 1, memory_order_release);
}
/** The turn's event learns its count of sends, unless the turn recorded
 *  so much that its event was overwritten already (its flows' starts are
 *  then lost, as an overwritten event's are). A reader copying the ring
 *  while the system runs may see the count before or after this store:
 *  the flows it misses are reported lost, consistently within the file. */
static inline void vat__trace_count_sends(vat__trace_ring *r) {
  uint64_t h = atomic_load_explicit(&r->head, memory_order_relaxed);
  /* Events below `h` are written; the turn's slot is reused by event
   * turn_seq + mask + 1, written once h passed it. */
  if (__builtin_expect(h - r->turn_seq <= r->mask + 1, 1))
    r->events[r->turn_seq & r->mask].sends = r->turn_sends;
}

/** Gives each message of the chain from `m` (linked to NULL), committed
 *  by the running turn, a flow id naming the turn's event, and counts
 *  them in that event. Inline: once per traced turn that sends. */
static inline void vat__trace_sends(vat__trace_ring *r, vat__msg *m) {
  uint32_t k = r->turn_sends;
  uint64_t flow = vat__trace_flow_id(r->flow_base, r->turn_seq, 0);
  for (; m != NULL; m = atomic_load_explicit(&m->next, memory_order_relaxed)) {
    if (__builtin_expect(k == VAT__TRACE_MAX_SENDS, 0)) {
      vat__trace_sends_loose(r, m);
      break;
    }
    vat__msg_set_flow(m, flow | k++);
  }
  r->turn_sends = k;
  vat__trace_count_sends(r);
}

/** The turn is over: what is recorded from here on reads the clock. */
static inline void vat__trace_turn_end(vat__trace_ring *r) {
  r->turn_ts = 0;
}

#endif
