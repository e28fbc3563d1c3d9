/* One simulated world: the state the harness keeps for the seed it runs,
 * shared by the run loop (harness.c) and the scheduler's chooser it
 * installs (choose.c). */
#ifndef VAT_SIM_WORLD_H
#define VAT_SIM_WORLD_H

#include <stdint.h>

#include "core/vat.h"
#include "sched/runq.h"
#include "sched/task.h"
#include "vat/sim.h"

enum { VAT__SIM_MAX_DEPTH = 16 };

/* The most ready vats a step chooses among: the first VAT__RUNQ_SIZE of
 * each of the world's systems (VAT_SIM_MAX_SYSTEMS). */
#define VAT__SIM_READY_MAX (VAT__RUNQ_SIZE * VAT_SIM_MAX_SYSTEMS)

struct vat__sim_machines;

typedef struct vat__sim_world {
  vat_sim_options opt;
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
  /* A drawn fault that waits for a step where it applies. */
  bool fault_pending;
  vat_sim_fault_kind pending_kind;
  unsigned nfaults;
  vat_sim_fault faults[VAT_SIM_MAX_REPORTED_FAULTS];
  /* Its systems, when it has several, and its event sources
   * (sim/machines.c). */
  struct vat__sim_machines *machines;
} vat__sim_world;

/** Prepares `w` for `seed` (the table, the draws, PCT's change points). */
void vat__sim_world_init(vat__sim_world *w, const vat_sim_options *o,
                         uint64_t seed);

/** The chooser the world's system calls at every step (sched/queues.h). */
uint32_t vat__sim_choose(void *ctx, vat__task *const *ready, uint32_t n);

/** vat__sim_choose without the faults: the step's choice among `ready`
 *  (n at most VAT__SIM_READY_MAX, of any of the world's systems), its
 *  index in *index. */
uint32_t vat__sim_decide(vat__sim_world *w, vat__task *const *ready, uint32_t n,
                         uint32_t *index);
/** ...and the faults due at that step, on its vat `v` (index `i`): inside
 *  the run call of v's system. */
void vat__sim_strike(vat__sim_world *w, vat__vat *v, uint32_t i);

/** The label of vat index `i`, or "vat#I" written into buf. */
const char *vat__sim_vat_name(const vat__sim_world *w, unsigned i, char *buf,
                              size_t size);

#endif
