/* See mailbox.h for the protocol. */
#include "core/mailbox.h"

#include <stdint.h>

#include "util/cpu.h"
#include "util/testpoint.h"

void vat__mailbox_init(vat__mailbox *mb) {
  atomic_init(&mb->top, NULL);
  vat__mailbox_set_taken(mb, 0);
  vat__mailbox_set_head(mb, NULL);
  mb->tail = NULL;
}

VAT__HOT bool vat__mailbox_push_chain(vat__mailbox *mb, vat__msg *first,
                                      vat__msg *last) {
  /* The stack links each node to the one pushed before it, the reverse of
   * the chain's order. Mark the oldest node unlinked first: the consumer may
   * see the nodes the moment `top` holds them, before that node's link to
   * the older part of the stack is stored. */
  vat__msg *before = VAT__MAILBOX_UNLINKED;
  for (vat__msg *m = first;;) {
    vat__msg *after = atomic_load_explicit(&m->next, memory_order_relaxed);
    atomic_store_explicit(&m->next, before, memory_order_relaxed);
    if (m == last)
      break;
    before = m;
    m = after;
  }
  /* acq_rel: release publishes the messages (and the links just written)
   * to the consumer's acquire load of `top`; acquire orders this push after
   * the previous owner of `top` — the consumer's CAS to IDLE included — so
   * the vat is scheduled at most once per IDLE. */
  vat__msg *below =
      atomic_exchange_explicit(&mb->top, last, memory_order_acq_rel);
  /* Where a producer preempted mid-push stops: the consumer sees `last`
   * but cannot reach the older nodes until the store below. */
  VAT__TEST_POINT("mailbox.push.after_exchange");
  /* Release pairs with the consumer's acquire load while it waits for this
   * link. */
  atomic_store_explicit(&first->next, below, memory_order_release);
  return below == NULL;
}

/* Only its address matters: a header never reaches the turn loop. */
void vat__mailbox_run_header(vat_turn *turn, void *state, void *arg) {
  (void)turn;
  (void)state;
  (void)arg;
}

/* A header's fields (mailbox.h, vat__mailbox_run_start): `arg` the run's
 * first node, `aux.run_last` its last, `flow` its length; `value.as.obj` links the
 * headers one take has passed. */
static vat__msg *run_first(const vat__msg *h) { return h->arg; }
static vat__msg *run_last(const vat__msg *h) { return h->aux.run_last; }
static vat__msg *next_header(const vat__msg *h) {
  return (vat__msg *)h->value.as.obj;
}

VAT__HOT void vat__mailbox_append_local(vat__mailbox *mb, vat__msg *m) {
  atomic_store_explicit(&m->next, NULL, memory_order_relaxed);
  if (mb->tail)
    atomic_store_explicit(&mb->tail->next, m, memory_order_relaxed);
  else
    vat__mailbox_set_head(mb, m);
  mb->tail = m;
}

static void recycle(vat__msgpool *pool, vat__msg *m) {
  if (m != NULL && pool != NULL)
    vat__msg_free(pool, m);
}

/* How long the consumer waits for a producer between its exchange and its
 * link store. That gap is one store long, so a wait that outlasts this
 * means the producer was preempted (or stopped by the collector): waiting
 * longer would stall the worker and every vat queued behind this one. */
enum { LINK_SPINS = 64 };

/* The link below `m`, or UNLINKED if its producer has not stored it within
 * the bounded wait. `wait`: no bound (the vat will never run again, and
 * the producer has one store left to do). */
static vat__msg *link_below(vat__msg *m, bool wait) {
  vat__msg *older;
  for (unsigned i = 0;; i++) {
    /* Acquire pairs with the producer's release store of the link: the
     * older nodes it reaches are published. */
    older = atomic_load_explicit(&m->next, memory_order_acquire);
    if (older != VAT__MAILBOX_UNLINKED || (i == LINK_SPINS && !wait))
      return older;
    if (i == 0 && wait)
      VAT__TEST_POINT("mailbox.drain.wait_for_link");
    vat__cpu_relax();
  }
}

/* Puts back the stack links of the nodes already reversed into `fifo` (the
 * newest last), above `stalled`: the segment stays as producers left it.
 * `headers` lists the run headers passed, oldest first; each one's run
 * lies whole in `fifo`, and only its last node's link was changed (the
 * header's own link still names the node below it). */
static void restore_stack(vat__msg *fifo, vat__msg *headers,
                          vat__msg *stalled) {
  vat__msg *below = stalled;
  while (fifo != NULL) {
    if (headers != NULL && fifo == run_first(headers)) {
      vat__msg *last = run_last(headers);
      fifo = atomic_load_explicit(&last->next, memory_order_relaxed);
      atomic_store_explicit(&last->next, NULL, memory_order_relaxed);
      below = headers;
      headers = next_header(headers);
      below->value = (vat_value){0};
      continue;
    }
    vat__msg *newer = atomic_load_explicit(&fifo->next, memory_order_relaxed);
    atomic_store_explicit(&fifo->next, below, memory_order_relaxed);
    below = fifo;
    fifo = newer;
  }
}

/* Appends fifo (oldest first, ending at `tail`) to the private list, and
 * makes `top` the newest node taken, `done` when it is in no list (a run
 * header): replacing it then recycles it. The old `taken` is recycled if it
 * was handled; if it is still queued, it is an ordinary node from now on,
 * recycled when done. */
static inline void take_finish(vat__mailbox *mb, vat__msgpool *pool,
                               vat__msg *taken, vat__msg *top, bool done,
                               vat__msg *fifo, vat__msg *tail) {
  if (mb->taken & VAT__TAKEN_DONE)
    recycle(pool, taken);
  if (mb->head == NULL)
    vat__mailbox_set_head(mb, fifo);
  else
    atomic_store_explicit(&mb->tail->next, fifo, memory_order_relaxed);
  vat__mailbox_set_taken(mb, (uintptr_t)top | (done ? VAT__TAKEN_DONE : 0));
  mb->tail = tail;
}

/* The take's walk from `m` on, once it met a run header; `fifo` and `n`
 * are what it took above `m`. Out of line: only commits of several
 * messages to one vat push runs, and the walk over single nodes stays as
 * small as it was. Returns the count taken, or 0 when a producer was
 * caught mid-push (nothing taken, as in take_impl). */
static __attribute__((noinline)) size_t
take_runs(vat__mailbox *mb, vat__msgpool *pool, bool wait, vat__msg *top,
          vat__msg *taken, vat__msg *m, vat__msg *fifo, size_t n) {
  vat__msg *headers = NULL; /* passed, oldest first (see restore_stack) */
  while (m != taken) {
    vat__msg *older = atomic_load_explicit(&m->next, memory_order_acquire);
    if (older == VAT__MAILBOX_UNLINKED &&
        (older = link_below(m, wait)) == VAT__MAILBOX_UNLINKED) {
      restore_stack(fifo, headers, m);
      return 0;
    }
    if (vat__mailbox_is_run_header(m)) {
      /* The run goes in whole, its nodes untouched. */
      atomic_store_explicit(&run_last(m)->next, fifo, memory_order_relaxed);
      fifo = run_first(m);
      m->value.as.obj = headers;
      headers = m;
      n += m->flow;
    } else {
      atomic_store_explicit(&m->next, fifo, memory_order_relaxed);
      fifo = m;
      n++;
    }
    m = older;
  }
  bool top_is_header = vat__mailbox_is_run_header(top);
  take_finish(mb, pool, taken, top, top_is_header, fifo,
              top_is_header ? run_last(top) : top);
  while (headers != NULL) {
    vat__msg *h = headers;
    headers = next_header(h);
    h->value = (vat_value){0};
    if (h != top)
      recycle(pool, h);
  }
  return n;
}

/* Takes what was pushed since `taken` and appends it, oldest first, to the
 * private list.
 *
 * A producer caught between its exchange and its link leaves a node the
 * walk cannot get past. Then nothing of the segment is taken: the nodes
 * above it were pushed later, maybe by a producer whose earlier messages
 * lie below it, so taking them alone would break that producer's order.
 * `taken` and `top` stay as they were, so the vat cannot go idle (try_idle's
 * CAS fails) and a later take gets the whole segment. With `wait` (a vat
 * that will not run again) it waits for the producer instead. */
static inline __attribute__((always_inline)) size_t
take_impl(vat__mailbox *mb, vat__msgpool *pool, bool wait,
          const bool counting) {
  /* Acquire pairs with the producers' release exchange: their messages'
   * contents are visible from here on. */
  vat__msg *top = atomic_load_explicit(&mb->top, memory_order_acquire);
  vat__msg *taken = vat__mailbox_taken(mb);
  if (top == taken)
    return 0;
  vat__msg *fifo = NULL;
  size_t n = 0; /* `counting` only: a constant 1 otherwise */
  for (vat__msg *m = top; m != taken;) {
    vat__msg *older = atomic_load_explicit(&m->next, memory_order_acquire);
    if (older == VAT__MAILBOX_UNLINKED &&
        (older = link_below(m, wait)) == VAT__MAILBOX_UNLINKED) {
      restore_stack(fifo, NULL, m);
      return 0;
    }
    if (__builtin_expect(vat__mailbox_is_run_header(m), 0)) {
      size_t got = take_runs(mb, pool, wait, top, taken, m, fifo, n);
      return counting || got == 0 ? got : 1;
    }
    atomic_store_explicit(&m->next, fifo, memory_order_relaxed);
    fifo = m;
    m = older;
    if (counting)
      n++;
  }
  take_finish(mb, pool, taken, top, false, fifo, top);
  return counting ? n : 1;
}

static VAT__HOT bool take(vat__mailbox *mb, vat__msgpool *pool, bool wait) {
  return take_impl(mb, pool, wait, false) != 0;
}

size_t vat__mailbox_take_counted(vat__mailbox *mb, vat__msgpool *pool) {
  return take_impl(mb, pool, false, true);
}

VAT__HOT bool vat__mailbox_take_new(vat__mailbox *mb, vat__msgpool *pool) {
  return take(mb, pool, false);
}

VAT__HOT bool vat__mailbox_try_idle(vat__mailbox *mb, vat__msgpool *pool) {
  if (mb->head != NULL)
    return false;
  /* Clear `taken` before the CAS: once the vat is idle, a producer may
   * schedule it on another worker at once, and the mailbox is that
   * worker's. The CAS's release publishes the cleared field to it. */
  uintptr_t taken_bits = mb->taken;
  vat__msg *taken = vat__mailbox_taken(mb);
  vat__mailbox_set_taken(mb, 0);
  /* Release also makes everything this vat's turns wrote happen-before the
   * next scheduling, which starts with a producer's acquire exchange that
   * finds IDLE — so the next worker to run the vat sees its state. */
  if (!atomic_compare_exchange_strong_explicit(&mb->top, &(vat__msg *){taken},
                                               NULL, memory_order_release,
                                               memory_order_relaxed)) {
    vat__mailbox_set_taken(mb, taken_bits);
    return false;
  }
  /* Ours alone now: `top` and the mailbox no longer refer to it. */
  if (taken_bits & VAT__TAKEN_DONE)
    recycle(pool, taken);
  return true;
}

/* Whether `m` is an urgent message (core/message.h). */
static bool is_urgent(const vat__msg *m) {
  return m->fn == vat__run_urgent;
}

void vat__mailbox_hoist_urgent(vat__mailbox *mb, vat__msgpool *pool) {
  take(mb, pool, false);
  vat__msg *uh = NULL, *ut = NULL, *nh = NULL, *nt = NULL;
  for (vat__msg *m = mb->head, *next; m != NULL; m = next) {
    next = atomic_load_explicit(&m->next, memory_order_relaxed);
    atomic_store_explicit(&m->next, NULL, memory_order_relaxed);
    vat__msg **h = is_urgent(m) ? &uh : &nh;
    vat__msg **t = is_urgent(m) ? &ut : &nt;
    if (*t)
      atomic_store_explicit(&(*t)->next, m, memory_order_relaxed);
    else
      *h = m;
    *t = m;
  }
  if (uh != NULL) {
    atomic_store_explicit(&ut->next, nh, memory_order_relaxed);
    vat__mailbox_set_head(mb, uh);
    mb->tail = nh ? nt : ut;
  } else {
    vat__mailbox_set_head(mb, nh);
    mb->tail = nt;
  }
}

vat__msg *vat__mailbox_find(vat__mailbox *mb, vat__msgpool *pool,
                            vat__msg_match *match, void *ctx, bool *complete) {
  *complete = take(mb, pool, false) ||
              atomic_load_explicit(&mb->top, memory_order_relaxed) ==
                  vat__mailbox_taken(mb);
  for (vat__msg *m = mb->head; m != NULL;
       m = atomic_load_explicit(&m->next, memory_order_relaxed))
    if (match(m, ctx))
      return m;
  return NULL;
}

vat__msg *vat__mailbox_extract(vat__mailbox *mb, vat__msg_match *match,
                               void *ctx, const vat__msg *stop) {
  vat__msg *out = NULL, *out_tail = NULL;
  for (vat__msg *m = mb->head, *prev = NULL, *next; m != NULL && m != stop;
       m = next) {
    next = atomic_load_explicit(&m->next, memory_order_relaxed);
    if (!match(m, ctx)) {
      prev = m;
      continue;
    }
    if (prev)
      atomic_store_explicit(&prev->next, next, memory_order_relaxed);
    else
      vat__mailbox_set_head(mb, next);
    if (mb->tail == m)
      mb->tail = prev;
    atomic_store_explicit(&m->next, NULL, memory_order_relaxed);
    if (out_tail)
      atomic_store_explicit(&out_tail->next, m, memory_order_relaxed);
    else
      out = m;
    out_tail = m;
  }
  return out;
}

size_t vat__mailbox_count(vat__mailbox *mb) {
  vat__mailbox_take_new(mb, NULL);
  size_t n = 0;
  for (vat__msg *m = mb->head; m != NULL;
       m = atomic_load_explicit(&m->next, memory_order_relaxed))
    n++;
  return n;
}

/* A snapshot's count, from any thread, of the private list from `head`
 * and the stack segment from `top` down to `taken`. Nothing is written
 * and nothing waits. If the consumer moved `head` or `taken` while we
 * counted, the walk may have followed nodes it had popped since: count
 * again, a few times; then give the last count (bounded by `max`, as a
 * recycled node may lead anywhere). Every node read is collector memory
 * reachable from this stack or a pool, and links are atomics: the walk is
 * safe, only its result may be stale. */
static size_t walk(vat__msg *from, vat__msg *stop, size_t max) {
  size_t n = 0;
  for (vat__msg *m = from;
       m != NULL && m != stop && m != VAT__MAILBOX_UNLINKED && n < max;) {
    /* A run header counts its run. Relaxed atomic reads: the node may be
     * reused under us, and its writers store these fields atomically. */
    if (__atomic_load_n(&m->fn, __ATOMIC_RELAXED) == vat__mailbox_run_header)
      n += __atomic_load_n(&m->flow, __ATOMIC_RELAXED);
    else
      n++;
    m = atomic_load_explicit(&m->next, memory_order_acquire);
  }
  return n < max ? n : max;
}

size_t vat__mailbox_peek_len(vat__mailbox *mb, size_t max) {
  size_t n = 0;
  for (int attempt = 0; attempt < 4; attempt++) {
    /* Acquire: a node seen through these was published by whoever linked
     * it (the consumer's stores are relaxed, but its nodes' links are
     * atomics read with acquire below). */
    vat__msg *head = __atomic_load_n(&mb->head, __ATOMIC_ACQUIRE);
    uintptr_t taken = __atomic_load_n(&mb->taken, __ATOMIC_ACQUIRE);
    vat__msg *top = atomic_load_explicit(&mb->top, memory_order_acquire);
    n = walk(head, NULL, max);
    vat__msg *stop = (vat__msg *)(taken & ~VAT__TAKEN_DONE);
    if (top != stop)
      n += walk(top, stop, max - n);
    if (__atomic_load_n(&mb->head, __ATOMIC_ACQUIRE) == head &&
        __atomic_load_n(&mb->taken, __ATOMIC_ACQUIRE) == taken)
      break;
  }
  return n;
}

vat__msg *vat__mailbox_pop_stopped(vat__mailbox *mb) {
  if (mb->head == NULL)
    take(mb, NULL, true);
  return vat__mailbox_pop(mb, NULL);
}
