/* See overload.h: queue lengths, overload policies, muting. Nothing here runs
 * per message; the turn loop and delivery call in only when a flag says
 * so. */
#include "core/overload.h"

#include <errno.h>

#include "core/deliver.h"
#include "core/reasons.h"
#include "core/system.h"
#include "core/turn.h"
#include "core/worker.h"
#include "sched/sched.h"
#include "util/clock.h"
#include "util/mem.h"
#include "util/testpoint.h"

/* --- The record ---------------------------------------------------------- */

/* The system's settings with its defaults filled in (runtime/lifecycle.c
 * checked them). */
static void defaults(vat_system *sys, vat_overload *out) {
  *out = sys->cfg.overload;
  if (out->policy == VAT_OVERLOAD_DEFAULT)
    out->policy = VAT_OVERLOAD_MUTE;
  if (out->high == 0)
    out->high = VAT_QUEUE_HIGH_DEFAULT;
  if (out->low == 0)
    out->low = out->high / 4 ? out->high / 4 : 1;
}

static void apply(vat__overload_state *f, const vat_overload *ov) {
  atomic_store_explicit(&f->high, ov->high, memory_order_relaxed);
  atomic_store_explicit(&f->low, ov->low, memory_order_relaxed);
  atomic_store_explicit(&f->policy, (uint8_t)ov->policy, memory_order_relaxed);
}

vat__overload_state *vat__overload_peek(vat__vat *v) {
  vat__vat_ext *x = vat__ext_peek(v);
  /* Acquire: pairs with the release store in vat__overload_of. */
  return x ? __atomic_load_n(&x->overload, __ATOMIC_ACQUIRE) : NULL;
}

static void store_base(vat__overload_state *f, vat__vat *v, uint64_t base);

vat__overload_state *vat__overload_of(vat__vat *v) {
  vat__vat_ext *x = vat__ext_of(v);
  if (x->overload != NULL)
    return x->overload;
  vat__overload_state *f = vat__gc_alloc(sizeof *f);
  pthread_mutex_init(&f->lock, NULL);
  vat__cond_init_monotonic(&f->drained);
  vat_overload ov;
  defaults(v->sys, &ov);
  apply(f, &ov);
  /* The count starts from what is queued now (a walk, once per vat):
   * pushed 0, so base is minus the queue. */
  store_base(f, v, -(uint64_t)vat__mailbox_peek_len(&v->mailbox, SIZE_MAX));
  /* Release: whoever reads it through vat__overload_peek sees it made; a
   * sender that sees VAT__COUNTED (release, below) finds it. */
  __atomic_store_n(&x->overload, f, __ATOMIC_RELEASE);
  atomic_fetch_or_explicit(&v->flags, VAT__COUNTED, memory_order_release);
  return f;
}

/* Fills in `ov`'s zeros from the system's settings and checks it. */
static int resolve(vat_system *sys, const vat_overload *in, vat_overload *ov) {
  vat_overload d;
  defaults(sys, &d);
  *ov = *in;
  if ((unsigned)ov->policy > VAT_OVERLOAD_NONE)
    return VAT_EINVAL;
  if (ov->policy == VAT_OVERLOAD_DEFAULT)
    ov->policy = d.policy;
  if (ov->high == 0)
    ov->high = in->low > d.high ? in->low : d.high;
  if (ov->low == 0)
    ov->low = ov->high / 4 ? ov->high / 4 : 1;
  return ov->low <= ov->high ? VAT_OK : VAT_EINVAL;
}

int vat__overload_check_defaults(const vat_overload *ov) {
  if ((unsigned)ov->policy > VAT_OVERLOAD_NONE ||
      (ov->high != 0 && ov->low > ov->high) ||
      (ov->high == 0 && ov->low > VAT_QUEUE_HIGH_DEFAULT))
    return VAT_EINVAL;
  return VAT_OK;
}

int vat__overload_check(vat_system *sys, const vat_overload *in) {
  vat_overload ov;
  return in == NULL ? VAT_OK : resolve(sys, in, &ov);
}

int vat__overload_configure(vat__vat *v, const vat_overload *in) {
  vat_overload ov;
  int rc = resolve(v->sys, in, &ov);
  if (rc == VAT_OK)
    apply(vat__overload_of(v), &ov);
  return rc;
}

static size_t high_of(vat__overload_state *f) {
  return atomic_load_explicit(&f->high, memory_order_relaxed);
}
static size_t low_of(vat__overload_state *f) {
  return atomic_load_explicit(&f->low, memory_order_relaxed);
}
static uint8_t policy_of(vat__overload_state *f) {
  return atomic_load_explicit(&f->policy, memory_order_relaxed);
}

/* --- The vat's own worker ----------------------------------------------- */

/* The flags the vat's worker sets and clears (a sender also sets
 * VAT__OVERLOADED, under the record's lock: mark_overloaded); others may
 * set VAT__ALERTED meanwhile, hence the read-modify-writes. Release on
 * set: a sender that acquires the flag sees the overload record made. */
static void set_flag(vat__vat *v, uint8_t bit) {
  atomic_fetch_or_explicit(&v->flags, bit, memory_order_release);
}
static void clear_flag(vat__vat *v, uint8_t bit) {
  atomic_fetch_and_explicit(&v->flags, (uint8_t)~bit, memory_order_release);
}

static uint64_t pushed_of(vat__overload_state *f) {
  /* Acquire: pairs with the senders' release add, made after their push:
   * a take after this finds every push counted here. */
  return atomic_load_explicit(&f->pushed, memory_order_acquire);
}
static void store_base(vat__overload_state *f, vat__vat *v, uint64_t base) {
  f->base_turns = v->turns;
  atomic_store_explicit(&f->base, base, memory_order_relaxed);
}

/* A batch's end counted `queued`, exactly or (a walk that stopped at a
 * mark) at least that many. Exact: the base follows. At least: the queue
 * is also what it was at the last base less the turns run since, which
 * is exact but for self-sends (never counted at the sender); the longer
 * of the two, so that vat_ref_queue_len never reads a long queue as the
 * mark it stopped at. */
static void store_counted_base(vat__overload_state *f, vat__vat *v,
                               uint64_t pushed, size_t queued, bool exact) {
  uint64_t base = pushed - queued;
  if (!exact) {
    uint64_t run = atomic_load_explicit(&f->base, memory_order_relaxed) +
                   (uint32_t)(v->turns - f->base_turns);
    if ((int64_t)(run - base) < 0)
      base = run;
  }
  store_base(f, v, base);
}

/* Schedules the vats of a muted list taken from a record (linked through
 * link), each no longer muted. */
static void schedule_released(vat__worker *w, vat__vat *list) {
  while (list != NULL) {
    vat__vat *next = list->link;
    list->link = NULL;
    /* Before it can run: a sender that reads it clear may mark it. */
    atomic_store_explicit(&vat__overload_peek(list)->muted_on, NULL,
                          memory_order_relaxed);
    /* Not this worker's next slot: the vat that drained is still running
     * here, and an idle worker may take the sender at once (a backlogged
     * pair spreads over two workers). Not the shared queue either, which
     * this worker looks at every few batches: it took the sender back
     * there as often as the idle worker did. */
    if (w == NULL || w != vat__current_worker || list->sys != w->sys)
      vat__schedule_external(&list->sys->sched, &list->task);
    else
      vat__schedule_stealable(&w->run, &list->task);
    list = next;
  }
}

/* Clears VAT__OVERLOADED, then schedules every vat muted on v and wakes
 * the host threads waiting. A sender that mutes itself checks the flag
 * under the lock: either it saw it clear (and was not muted), or it is
 * on the list this takes under the same lock after the clear. */
static void unmute(vat__worker *w, vat__vat *v, vat__overload_state *f) {
  clear_flag(v, VAT__OVERLOADED);
  pthread_mutex_lock(&f->lock);
  vat__vat *list = f->muted;
  f->muted = NULL;
  if (f->waiters != 0)
    pthread_cond_broadcast(&f->drained);
  pthread_mutex_unlock(&f->lock);
  schedule_released(w, list);
}

/* Moves the cursor past the nodes popped since it last moved, then on
 * toward the tail, counting, but not past `limit` nodes from the head:
 * the one mark that matters now. Past it, the walk would only pull into
 * the cache nodes that will be evicted before they are handled (a flood's
 * queue ran at half speed so). Returns the count, and `*exact` whether it
 * reached the tail. */
static size_t count_queue(vat__worker *w, vat__vat *v, vat__overload_state *f,
                          bool valid, size_t limit, bool *exact) {
  vat__mailbox *mb = &v->mailbox;
  /* Each turn popped one message; wrapping arithmetic, as the counter. */
  size_t ran = (uint32_t)(v->turns - f->turns);
  f->turns = v->turns;
  if (!valid || f->mark == NULL || f->ahead <= ran) { /* popped, unknown */
    f->mark = NULL;
    f->ahead = 0;
  } else {
    f->ahead -= ran;
  }
  *exact = true;
  /* The cursor at the tail: nothing came in since but what this take
   * brings, and the take counts it as it walks. Otherwise a pop's take
   * or a self-send added nodes the cursor must walk over. */
  if (f->mark != NULL && f->mark == mb->tail) {
    f->ahead += vat__mailbox_take_counted(mb, &w->pool);
    f->mark = mb->tail;
    return f->ahead;
  }
  vat__mailbox_take_new(mb, &w->pool);
  vat__msg *m = f->mark ? f->mark : mb->head;
  if (m == NULL)
    return 0;
  if (f->mark == NULL)
    f->ahead = 1;
  vat__msg *next;
  while ((next = atomic_load_explicit(&m->next, memory_order_relaxed)) !=
         NULL) {
    if (f->ahead >= limit) {
      *exact = false;
      break;
    }
    f->ahead++;
    m = next;
  }
  f->mark = m;
  return f->ahead;
}

void vat__overload_recount(vat__vat *v) {
  vat__vat_ext *x = v->ext;
  if (x != NULL && x->overload != NULL)
    x->overload->mark = NULL;
}

/* A vat that is neither behind nor overloaded yet, with a queue shorter
 * than this (and than its high mark), is left without a record: most
 * vats that end a batch with work left have a message or two queued (a
 * self-send), and 80,000 of them would each carry a record for nothing. */
enum { QUICK_LOOK = 128 };

/* Whether v's queue is shorter than QUICK_LOOK and its high mark: a walk
 * of at most that many nodes, which a batch just brought into the cache. */
static bool queue_is_short(vat__worker *w, vat__vat *v) {
  vat__overload_state *f = vat__overload_peek(v);
  size_t limit = QUICK_LOOK;
  if (f != NULL && high_of(f) < limit)
    limit = high_of(f);
  else if (f == NULL) {
    vat_overload d;
    defaults(v->sys, &d);
    if (d.high < limit)
      limit = d.high;
  }
  vat__mailbox_take_new(&v->mailbox, &w->pool);
  size_t n = 0;
  for (vat__msg *m = v->mailbox.head; m != NULL;
       m = atomic_load_explicit(&m->next, memory_order_relaxed))
    if (++n >= limit)
      return false;
  return true;
}

/* The end of a batch of v that left work waiting: counts its queue, and
 * sets or clears VAT__OVERLOADED, or ends v (VAT_OVERLOAD_FAIL). */
static void behind(vat__worker *w, vat__vat *v) {
  uint8_t flags = atomic_load_explicit(&v->flags, memory_order_relaxed);
  if (flags & VAT__DEAD)
    return;
  /* A counted vat counts at every such end: its senders' estimate starts
   * from it. */
  if (!(flags & (VAT__BEHIND | VAT__OVERLOADED | VAT__COUNTED)) &&
      queue_is_short(w, v))
    return;
  vat__overload_state *f = vat__overload_of(v);
  /* Before the take: every push it finds counted is in this or later. */
  uint64_t pushed = pushed_of(f);
  bool exact;
  size_t queued =
      count_queue(w, v, f, flags & VAT__BEHIND,
                  flags & VAT__OVERLOADED ? low_of(f) : high_of(f), &exact);
  store_counted_base(f, v, pushed, queued, exact);
  if (!(flags & VAT__BEHIND))
    set_flag(v, VAT__BEHIND);
  uint8_t policy = policy_of(f);
  if (policy == VAT_OVERLOAD_NONE) {
    if (flags & VAT__OVERLOADED) /* its policy changed meanwhile */
      unmute(w, v, f);
    return;
  }
  if (!(flags & VAT__OVERLOADED)) {
    if (queued < high_of(f))
      return;
    if (policy == VAT_OVERLOAD_FAIL) {
      vat__terminate(w, v, vat_atom_value(vat__reason.overloaded), NULL);
      return;
    }
    set_flag(v, VAT__OVERLOADED);
  } else if (policy == VAT_OVERLOAD_FAIL) {
    /* A sender's count found it past the mark (vat__overload_count). */
    vat__terminate(w, v, vat_atom_value(vat__reason.overloaded), NULL);
  } else if (queued < low_of(f)) {
    unmute(w, v, f);
  }
}

bool vat__overload_idle(vat__worker *w, vat__vat *v, vat__msgpool *pool) {
  uint8_t flags = atomic_load_explicit(&v->flags, memory_order_relaxed);
  if (flags & VAT__YIELD) /* else its next batch would stop at once */
    atomic_fetch_and_explicit(&v->flags, (uint8_t)~VAT__YIELD,
                              memory_order_relaxed);
  if (!(flags & (VAT__BEHIND | VAT__OVERLOADED | VAT__COUNTED)))
    return vat__mailbox_try_idle(&v->mailbox, pool);
  vat__overload_state *f = vat__overload_of(v);
  /* A sender's count found a VAT_OVERLOAD_FAIL vat past its mark, and
   * its batch drained the queue: it ends now, at the latest. */
  if ((flags & (VAT__OVERLOADED | VAT__DEAD)) == VAT__OVERLOADED &&
      policy_of(f) == VAT_OVERLOAD_FAIL)
    vat__terminate(w, v, vat_atom_value(vat__reason.overloaded), NULL);
  f->mark = NULL; /* a stale link would retain nodes (DESIGN.md) */
  f->ahead = 0;
  if (flags & VAT__BEHIND)
    clear_flag(v, VAT__BEHIND);
  /* Under the lock, so that a sender marking v overloaded or parking on
   * it finds it either busy (and it comes here again before it is idle)
   * or idle (and it does neither): see the top. */
  pthread_mutex_lock(&f->lock);
  store_base(f, v, pushed_of(f)); /* empty now */
  vat__vat *list = NULL;
  if (atomic_load_explicit(&v->flags, memory_order_relaxed) & VAT__OVERLOADED) {
    clear_flag(v, VAT__OVERLOADED);
    list = f->muted;
    f->muted = NULL;
    if (f->waiters != 0)
      pthread_cond_broadcast(&f->drained);
  }
  bool idle = vat__mailbox_try_idle(&v->mailbox, pool);
  pthread_mutex_unlock(&f->lock);
  /* The list is this call's, and the vats on it are not v: whether or
   * not v now runs elsewhere, they may be scheduled. */
  schedule_released(w, list);
  return idle;
}

void vat__overload_release(vat__worker *w, vat__vat *v) {
  vat__overload_state *f = vat__overload_peek(v);
  if (f != NULL)
    unmute(w, v, f);
}

vat__vat *vat__overload_take_muted(vat__vat *v) {
  vat__overload_state *f = vat__overload_peek(v);
  if (f == NULL)
    return NULL;
  pthread_mutex_lock(&f->lock);
  vat__vat *list = f->muted;
  f->muted = NULL;
  pthread_mutex_unlock(&f->lock);
  return list;
}

/* --- Senders ------------------------------------------------------------- */

/* --- Exits to muted vats --------------------------------------------------
 *
 * An exit that may end a vat must reach it while it is muted (vat/exits.h):
 * its sender alerts it (VAT__ALERTED) and then takes it off the list it
 * is parked on (vat__overload_unpark); a vat about to park claims it
 * (muted_on, mute) and then, under the list's lock, parks only
 * if it is not alerted. The two are a store then a load on each side, with
 * a full fence between: either the sender sees where the vat parks, and
 * takes it off under the same lock (or finds it not yet there, and the
 * parker, taking the lock after it, sees the alert), or the parker sees
 * the alert and does not park. Either way the vat runs, and the exit
 * overtakes its queue. A stale muted_on (the vat was released since) only
 * costs the sender a look at a list it is not on. */

static bool alerted(vat__vat *v) {
  return atomic_load_explicit(&v->flags, memory_order_relaxed) & VAT__ALERTED;
}

bool vat__overload_unpark(vat__vat *v) {
  atomic_thread_fence(memory_order_seq_cst); /* after the alert: see above */
  vat__overload_state *own = vat__overload_peek(v);
  vat__vat *on =
      own ? atomic_load_explicit(&own->muted_on, memory_order_relaxed) : NULL;
  vat__overload_state *f = on ? vat__overload_peek(on) : NULL;
  if (f == NULL)
    return false;
  bool found = false;
  pthread_mutex_lock(&f->lock);
  for (vat__vat **p = &f->muted; *p != NULL; p = &(*p)->link)
    if (*p == v) {
      *p = v->link;
      v->link = NULL;
      found = true;
      break;
    }
  pthread_mutex_unlock(&f->lock);
  if (found) /* before it runs, as schedule_released does */
    atomic_store_explicit(&own->muted_on, NULL, memory_order_relaxed);
  return found;
}

/* The end of a batch of `v` with VAT__MUTING set and work left: clears
 * the bit, and parks v on its receiver's muted list when it should wait
 * (see the top). Returns whether v still needs queueing. */
static bool mute(vat__vat *v) {
  uint8_t mine = atomic_fetch_and_explicit(&v->flags, (uint8_t)~VAT__MUTING,
                                           memory_order_relaxed);
  vat__overload_state *own = vat__overload_of(v);
  vat__vat *to = own->mute_on;
  own->mute_on = NULL;
  /* Never on itself; never while overloaded itself (see overload.h: that is
   * what keeps mutes from forming a cycle); never once it ended. */
  if (to == NULL || to == v || (mine & (VAT__OVERLOADED | VAT__DEAD)))
    return true;
  vat__overload_state *f = vat__overload_peek(to);
  if (f == NULL)
    return true;
  /* Claims being muted under its own lock, where a sender would mark it
   * overloaded: from here no sender does, and if one did first, it does
   * not wait (so a muted vat is never overloaded: see the top). */
  pthread_mutex_lock(&own->lock);
  bool over =
      atomic_load_explicit(&v->flags, memory_order_relaxed) & VAT__OVERLOADED;
  if (!over)
    atomic_store_explicit(&own->muted_on, to, memory_order_relaxed);
  pthread_mutex_unlock(&own->lock);
  if (over)
    return true;
  /* The claim is the hint an exit's sender reads: see "Exits to muted
   * vats" below. */
  atomic_thread_fence(memory_order_seq_cst);
  pthread_mutex_lock(&f->lock);
  /* Under the lock: the receiver clears the flag before it takes the
   * list under this lock (unmute), and goes idle only under it
   * (vat__overload_idle): busy here, it comes back for the list. Acquire:
   * pairs with its release. */
  uint8_t theirs = atomic_load_explicit(&to->flags, memory_order_acquire);
  bool wait =
      (theirs & (VAT__OVERLOADED | VAT__DEAD)) == VAT__OVERLOADED &&
      atomic_load_explicit(&to->mailbox.top, memory_order_relaxed) != NULL &&
      !alerted(v);
  if (wait) {
    v->link = f->muted;
    f->muted = v;
  }
  pthread_mutex_unlock(&f->lock);
  if (!wait)
    atomic_store_explicit(&own->muted_on, NULL, memory_order_relaxed);
  return !wait;
}

void vat__overload_yield(vat__vat *v) {
  /* Relaxed: only its own worker reads the bit back. */
  atomic_fetch_or_explicit(&v->flags, VAT__YIELD, memory_order_relaxed);
}

bool vat__overload_batch_end(vat__worker *w, vat__vat *v) {
  behind(w, v);
  uint8_t flags = atomic_load_explicit(&v->flags, memory_order_relaxed);
  if (flags & VAT__YIELD)
    atomic_fetch_and_explicit(&v->flags, (uint8_t)~VAT__YIELD,
                              memory_order_relaxed);
  if (!(flags & VAT__MUTING))
    return true;
  bool queue = mute(v);
  if (!queue) /* parked on its receiver's muted list */
    VAT__TEST_POINT("turn.parked_muted");
  return queue;
}

/* Takes the chain's ordinary messages out; keeps its signals and urgent
 * messages, which no policy drops. VAT_OVERLOAD_DROP counts them as
 * dropped. A VAT_OVERLOAD_FAIL vat a sender's count found past its mark
 * ends at its batch's end: ordinary messages sent meanwhile are dead
 * letters (vat/core.h), now rather than then, so the queue stays
 * bounded. */
static vat__msg *drop_ordinary(vat__worker *w, vat__vat *to,
                               vat__overload_state *f, bool dead,
                               vat__msg *first, vat__msg **last) {
  vat__msg *keep = NULL, *keep_tail = NULL;
  uint64_t dropped = 0;
  for (vat__msg *m = first, *next;; m = next) {
    bool end = m == *last;
    next = end ? NULL : atomic_load_explicit(&m->next, memory_order_relaxed);
    if (m->fn == vat__dispatch_signal || m->fn == vat__run_urgent) {
      atomic_store_explicit(&m->next, NULL, memory_order_relaxed);
      if (keep_tail)
        atomic_store_explicit(&keep_tail->next, m, memory_order_relaxed);
      else
        keep = m;
      keep_tail = m;
    } else {
      if (dead)
        vat__dead_letter(w, m);
      else
        dropped++;
      if (w)
        vat__msg_free(&w->pool, m);
    }
    if (end)
      break;
  }
  if (dropped) {
    /* Relaxed: counts, read in snapshots; nothing is ordered by them. */
    atomic_fetch_add_explicit(&f->dropped, dropped, memory_order_relaxed);
    atomic_fetch_add_explicit(&to->sys->overload_dropped, dropped,
                              memory_order_relaxed);
  }
  *last = keep_tail;
  return keep;
}

/* The sender is the vat whose turn is committing on this worker: it
 * notes the receiver in its own record (its worker's to write) and flags
 * itself, so that its turn loop stops at the next boundary. Urgent
 * messages bypass muting: control traffic must get through. */
static void note_mute(vat__worker *w, vat__vat *to, bool ordinary) {
  vat_turn *t = vat__current_turn;
  if (ordinary && w != NULL && t != NULL && t->worker == w && t->vat != to &&
      w->sys == to->sys) {
    vat__overload_of(t->vat)->mute_on = to;
    /* Relaxed: only its own worker reads the bit back. */
    atomic_fetch_or_explicit(&t->vat->flags, VAT__MUTING, memory_order_relaxed);
  }
}

vat__msg *vat__overload_on_send(vat__worker *w, vat__vat *to, vat__msg *first,
                                vat__msg **last) {
  vat__overload_state *f = vat__overload_peek(to);
  if (f == NULL)
    return first;
  uint8_t policy = policy_of(f);
  if (policy == VAT_OVERLOAD_DROP || policy == VAT_OVERLOAD_FAIL)
    return drop_ordinary(w, to, f, policy == VAT_OVERLOAD_FAIL, first, last);
  if (policy == VAT_OVERLOAD_MUTE)
    note_mute(w, to, first->fn != vat__run_urgent);
  return first;
}

/* A sender's count found `to` past its high mark: marks it overloaded,
 * under its lock, unless it is muted (a muted vat is never overloaded,
 * which keeps mutes from forming a cycle), ended, or idle (it then has
 * nothing queued and would not come back to clear the flag; the push
 * that made the count was handled meanwhile). */
static void mark_overloaded(vat__vat *to, vat__overload_state *f) {
  pthread_mutex_lock(&f->lock);
  if (atomic_load_explicit(&f->muted_on, memory_order_relaxed) == NULL &&
      !vat__is_dead(to) &&
      atomic_load_explicit(&to->mailbox.top, memory_order_relaxed) != NULL)
    set_flag(to, VAT__OVERLOADED);
  pthread_mutex_unlock(&f->lock);
}

void vat__overload_count(vat__worker *w, vat__vat *to, size_t n,
                         bool ordinary) {
  vat__overload_state *f =
      vat__overload_peek(to); /* made before VAT__COUNTED was set */
  /* Release: pairs with pushed_of's acquire; the push came first. */
  uint64_t now =
      atomic_fetch_add_explicit(&f->pushed, n, memory_order_release) + n;
  uint8_t policy = policy_of(f);
  if (now - atomic_load_explicit(&f->base, memory_order_relaxed) < high_of(f) ||
      policy == VAT_OVERLOAD_NONE)
    return;
  if (!vat__is_overloaded(to))
    mark_overloaded(to, f);
  if (policy == VAT_OVERLOAD_MUTE && vat__is_overloaded(to))
    note_mute(w, to, ordinary);
}

size_t vat__overload_queue_len(vat__vat *to) {
  vat__overload_state *f = vat__overload_peek(to);
  uint64_t n = atomic_load_explicit(&f->pushed, memory_order_relaxed) -
               atomic_load_explicit(&f->base, memory_order_relaxed);
  /* A base stored after the pushed we read: a moment's negative. */
  return (int64_t)n < 0 ? 0 : (size_t)n;
}

vat__vat *vat__overload_muted_on(vat__vat *v) {
  vat__overload_state *f = vat__overload_peek(v);
  return f ? atomic_load_explicit(&f->muted_on, memory_order_relaxed) : NULL;
}

bool vat__overload_wait(vat__vat *v, uint64_t deadline_ns) {
  if (!vat__is_overloaded(v))
    return true;
  vat__overload_state *f = vat__overload_peek(v);
  if (f == NULL)
    return true;
  struct timespec ts = {.tv_sec = (time_t)(deadline_ns / 1000000000u),
                        .tv_nsec = (long)(deadline_ns % 1000000000u)};
  pthread_mutex_lock(&f->lock);
  f->waiters++;
  /* The flag is cleared before unmute takes the lock and broadcasts, so
   * a waiter that saw it set under the lock is woken. Spurious wake-ups
   * (the collector's signals among them) just look again. */
  while (vat__is_overloaded(v) && !vat__is_dead(v) &&
         vat__system_state(v->sys) == VAT__RUNNING) {
    if (pthread_cond_timedwait(&f->drained, &f->lock, &ts) == ETIMEDOUT)
      break;
  }
  f->waiters--;
  /* A vat that ended, or a system that closes, is the send's to report. */
  bool ok = !vat__is_overloaded(v) || vat__is_dead(v) ||
            vat__system_state(v->sys) != VAT__RUNNING;
  pthread_mutex_unlock(&f->lock);
  return ok;
}
