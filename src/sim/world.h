/* One simulated world: the state the harness keeps for the seed it runs,
 * shared by the run loop (harness.c), the scheduler's chooser it installs
 * (choose.c), the faults (faults.c) and the plans they follow (plan.c). */
#ifndef VAT_SIM_WORLD_H
#define VAT_SIM_WORLD_H

#include <stdint.h>

#include "core/vat.h"
#include "sched/runq.h"
#include "sched/task.h"
#include "vat/sim.h"

enum {
  VAT__SIM_MAX_DEPTH = 16,
  VAT__SIM_TEXT_MAX = 120, /* a fault at a time's text, its NUL not counted */
};

/* The most ready vats a step chooses among: the first VAT__RUNQ_SIZE of
 * each of the world's systems (VAT_SIM_MAX_SYSTEMS). */
#define VAT__SIM_READY_MAX (VAT__RUNQ_SIZE * VAT_SIM_MAX_SYSTEMS)

struct vat__sim_machines;

/* One fault of an explicit plan (vat_sim_options.plan): a fault at a step
 * strikes its vat at that step, or at the first step after it where it
 * can; a fault at a time (`text` set) strikes when the world's clock gets
 * there, or never (vat/sim.h). */
typedef struct vat__sim_planned {
  uint64_t step;
  vat_sim_fault_kind kind;
  uint64_t amount;   /* delay: steps; jitter: nanoseconds; else 0 */
  const char *label; /* its vat by label, or NULL: by index */
  unsigned index;
  const char *text; /* at a time: "crash m1", a source's fault; else NULL */
  uint64_t at;      /* ...and its time on the world's clock */
} vat__sim_planned;

typedef struct vat__sim_plan {
  vat__sim_planned *faults; /* collector memory */
  unsigned n;
} vat__sim_plan;

/* A fault at a time that struck (timed.c): a machine's crash or an event
 * source's fault, as a plan's text says it. */
typedef struct vat__sim_timed {
  uint64_t at;      /* on the world's clock */
  const char *text; /* "crash m1", "partition m0-m1 for 150ms" */
  unsigned after;   /* the faults at a step that struck before it */
} vat__sim_timed;

typedef struct vat__sim_world {
  vat_sim_options opt;
  vat_system *sys;
  uint64_t pick_rng;  /* the strategy's draws */
  uint64_t fault_rng; /* the fault plan's draws */
  uint64_t steps;
  uint64_t digest;
  /* The vats seen so far, in the order they were first ready: an open
   * addressing table from vat to index, and each index's vat and PCT
   * priority. Collector memory: it keeps the vats alive, so an address
   * is never reused for another vat during the run. */
  vat__vat **keys;   /* cap slots */
  uint32_t *slot_of; /* index into vats, per slot */
  vat__vat **vats;   /* by index */
  uint64_t *prio;    /* by index */
  uint32_t nvats, cap;
  uint64_t change[VAT__SIM_MAX_DEPTH]; /* PCT's change points (steps) */
  unsigned nchange;
  /* The faults: an explicit plan (each entry's `done` set once it
   * struck), or, with `plan` NULL, those the seed draws, one waiting at a
   * time for a step where it can strike. */
  const vat__sim_plan *plan;
  unsigned char *planned_done;
  bool fault_pending;
  vat_sim_fault pending; /* its kind and amount */
  /* Every fault that struck, in order (collector memory), and the name
   * each vat had as it struck: its label, when that label was a plain
   * word no other vat seen had (NULL: it is named vat#I). */
  vat_sim_fault *faults;
  const char **fault_labels;
  unsigned nfaults, faults_cap;
  /* Faults at a time (timed.c): those waiting for their time, and every
   * one that struck, in order (collector memory). */
  struct vat__sim_due *due;
  uint64_t due_seq;
  vat__sim_timed *timed;
  unsigned ntimed, timed_cap;
  /* A stop struck a vat of this system: it stops after this step (the
   * world with it, in a world of one: harness.c; else machines.c). */
  vat_system *stop;
  /* Why a plan's fault at a time was refused as it fell due (timed.c):
   * the run stops, and the campaign returns VAT_EINVAL with it. */
  const char *refused;
  /* Delay faults (hold.c): whether the world watches its systems'
   * deliveries; the vat whose turn at step hold_step has its
   * sends held, for hold_steps steps; what is held, oldest first; and the
   * first message of what it delivers now. */
  bool watching;
  vat__vat *hold_from;
  uint64_t hold_step, hold_steps;
  struct vat__sim_held *held, *held_tail;
  struct vat__msg *passing;
  /* Its systems, when it has several, and its event sources
   * (sim/machines.c). */
  struct vat__sim_machines *machines;
} vat__sim_world;

/** Prepares `w` for `seed` (the table, the draws, PCT's change points),
 *  to follow `plan` (NULL: draw the faults). */
void vat__sim_world_init(vat__sim_world *w, const vat_sim_options *o,
                         const vat__sim_plan *plan, uint64_t seed);

/** The chooser the world's system calls at every step (sched/queues.h). */
uint32_t vat__sim_choose(void *ctx, vat__task *const *ready, uint32_t n);

/** vat__sim_choose without the faults: the step's choice among `ready`
 *  (n at most VAT__SIM_READY_MAX, of any of the world's systems), its
 *  index in *index. The faults due at that step strike next
 *  (vat__sim_faults_step), inside the run call of its vat's system. */
uint32_t vat__sim_decide(vat__sim_world *w, vat__task *const *ready, uint32_t n,
                         uint32_t *index);

/** The world's vats' tracks for its trace (core/system.h): a vat's index,
 *  and its name as plans write it into `name` (when not NULL); -1 for a
 *  vat not seen. */
int vat__sim_track(void *ctx, const void *vat, char *name, size_t size);

/* faults.c */

/** The faults due at this step (the vat `v`, index `i`, was chosen for
 *  it): an explicit plan's, or one the seed draws. */
void vat__sim_faults_step(vat__sim_world *w, vat__vat *v, uint32_t i);

/** The fault kinds' names, as plans write them ("kill", ...); NULL for a
 *  kind that is none. */
const char *vat__sim_fault_name(vat_sim_fault_kind kind);

/** Mixes `v` into a run's digest. */
static inline uint64_t vat__sim_mix(uint64_t h, uint64_t v) {
  h ^= v + 0x9E3779B97F4A7C15ull + (h << 6) + (h >> 2);
  return h * 0x100000001B3ull;
}

/** splitmix64: the world's draws. */
static inline uint64_t vat__sim_draw(uint64_t *x) {
  uint64_t z = (*x += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

/* plan.c */

/** The label of vat index `i` when a plan may name it by it: a plain word
 *  ([A-Za-z0-9_.-]) that no other vat seen so far has; else NULL. */
const char *vat__sim_plain_label(const vat__sim_world *w, unsigned i);

/** The index of the vat a plan's fault names, if it was seen already. */
bool vat__sim_planned_vat(const vat__sim_world *w, const vat__sim_planned *p,
                          uint32_t *index);

/** Parses a plan's text (vat/sim.h) into `out` (collector memory). VAT_OK,
 *  or VAT_EINVAL with a line saying what is wrong, and where, in `why`. */
int vat__sim_plan_parse(const char *text, vat__sim_plan *out, char *why,
                        size_t size);

/** Writes the faults that struck in `w` as a plan's text into `buf`:
 *  "none" when there were none. A text that does not fit ends with
 *  "..." (and does not parse). Returns false then. */
bool vat__sim_plan_format(const vat__sim_world *w, char *buf, size_t size);

/** Fault `i` of those that struck in `w`, as its plan's text says it
 *  (collector memory). */
const char *vat__sim_fault_text(const vat__sim_world *w, unsigned i);

/** The faults that struck in `w` as a plan that strikes them again, each
 *  vat named as the text names it: those at a step first, then those at
 *  a time, each kind in the order it struck (collector memory). */
void vat__sim_plan_of(const vat__sim_world *w, vat__sim_plan *out);

/** A fault at a time's text as a plan may hold it: printable ASCII, no
 *  ';' nor "'", not empty, no blank at either end. */
bool vat__sim_fault_text_ok(const char *text);

/** A fault at a time that struck, as its plan's text says it ("at 1500us:
 *  crash m1"; collector memory). */
const char *vat__sim_timed_text(const vat__sim_timed *t);

#endif
