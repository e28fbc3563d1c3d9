/* The boundary (see boundary.h). A vat is noted once, the first time it
 * takes on state someone outside its system waits on, and the note is a
 * weak reference (a disappearing link): a vat that is collected was waited
 * on by nobody, and its note empties. */
#include "core/boundary.h"

#include "core/hooks.h"
#include "core/reasons.h"
#include "core/system.h"
#include "util/gc.h"
#include "util/mem.h"

typedef struct vat__edge {
  struct vat__edge *next;
  GC_hidden_pointer vat; /* 0 once the collector reclaimed it */
} vat__edge;

/* Drops the notes of collected vats; under boundary_lock. Reading `vat`
 * without the allocator's lock is enough to see whether it is 0. */
static void prune_edges(vat_system *sys) {
  size_t live = 0;
  for (vat__edge **e = &sys->boundary; *e != NULL;) {
    if ((*e)->vat == 0) {
      vat__edge *gone = *e;
      *e = gone->next;
      gone->next = NULL; /* a stale link would retain the chain */
    } else {
      e = &(*e)->next;
      live++;
    }
  }
  sys->boundary_len = live;
  sys->boundary_prune_at = 2 * live + 64;
}

void vat__boundary_note(vat__vat *v) {
  vat__vat_ext *ext = vat__ext_of(v);
  if (ext->on_boundary)
    return;
  ext->on_boundary = true;
  vat__edge *e = vat__gc_alloc(sizeof *e);
  e->vat = GC_HIDE_POINTER(v);
  if (GC_general_register_disappearing_link((void **)&e->vat, v) ==
      GC_NO_MEMORY)
    vat__oom("a boundary note");
  vat_system *sys = v->sys;
  pthread_mutex_lock(&sys->boundary_lock);
  e->next = sys->boundary;
  sys->boundary = e;
  if (++sys->boundary_len >= sys->boundary_prune_at)
    prune_edges(sys);
  pthread_mutex_unlock(&sys->boundary_lock);
}

typedef struct reveal_ctx {
  vat__edge *head;
  vat__vat **out;
} reveal_ctx;

/* Under the allocator's lock, so no collection clears a link between the
 * read and the store into `out`, where the collector sees it. */
static void *reveal_edges(void *arg) {
  reveal_ctx *ctx = arg;
  size_t i = 0;
  for (vat__edge *e = ctx->head; e != NULL; e = e->next)
    if (e->vat != 0)
      ctx->out[i++] = GC_REVEAL_POINTER(e->vat);
  return NULL;
}

/* After the workers stopped: the vats noted on the boundary break what
 * they owe and fire their links and monitors to other systems, all with
 * `shutdown`. Their own system's vats are stopped too, so nothing there
 * is told. */
void vat__boundary_settle(vat_system *sys) {
  pthread_mutex_lock(&sys->boundary_lock);
  reveal_ctx ctx = {.head = sys->boundary};
  size_t n = sys->boundary_len;
  sys->boundary = NULL;
  sys->boundary_len = 0;
  pthread_mutex_unlock(&sys->boundary_lock);
  if (n == 0)
    return;
  ctx.out = vat__gc_alloc(n * sizeof *ctx.out);
  GC_call_with_alloc_lock(reveal_edges, &ctx);
  vat_value reason = vat_atom_value(vat__reason.shutdown);
  for (size_t i = 0; i < n; i++) {
    vat__vat *v = ctx.out[i];
    if (v == NULL || vat__is_dead(v))
      continue; /* collected, or ended and told everyone then */
    vat__hooks_vat_stranded(v, reason);
  }
}
