/* The promise module's shared layouts and its state machine's entry
 * points, for promise.c (settling, observing, obligations) and request.c
 * (requests, resolvers, pipelining). */
#ifndef VAT_PROMISE_STATE_H
#define VAT_PROMISE_STATE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>

#include "core/deliver.h"
#include "core/turn.h"
#include "core/vat.h"
#include "vat/promise.h"
#include "vat/timer.h"

enum {
  ST_PENDING = VAT_PROMISE_PENDING,
  ST_RESOLVED = VAT_PROMISE_RESOLVED,
  ST_BROKEN = VAT_PROMISE_BROKEN,
  /* Resolved with another promise, waiting for it: only that promise (or a
   * timeout) may settle this one now. */
  ST_FOLLOWING,
};

enum obs_kind { OBS_WHEN, OBS_SEND, OBS_CALL, OBS_FOLLOW, OBS_WAIT };

typedef struct observer observer;
struct observer {
  observer *next;
  enum obs_kind kind;
  vat__signal sig;      /* OBS_WHEN: the notification */
  vat_promise *promise; /* WHEN: observed; CALL, FOLLOW: the one to settle */
  vat_ref *ref;         /* WHEN: the observer entity */
  vat_when_fn when;
  vat_fn fn;            /* SEND */
  void *arg;            /* SEND: argument; WHEN: context */
  pthread_cond_t *cond; /* WAIT: on the waiter's stack */
};

typedef struct request {
  vat__signal sig;
  vat_request_fn fn;
  void *arg;
} request;

struct vat_resolver {
  vat_promise *promise;
  _Atomic bool used;
};

struct vat_promise {
  pthread_mutex_t lock;
  /* Written under the lock; release so that a lock-free reader (peek) that
   * sees a settled state sees `value`. */
  _Atomic int state;
  vat_value value;
  observer *head, *tail;
  vat_timer *timeout;
  uint64_t timeout_ns; /* asked for; armed when the calling turn commits */
  vat_system *sys;     /* whose timer service keeps the timeout */
  vat__vat *owner;     /* the vat that received the request */
  /* Two effects, one after the other, never both pending: arming the
   * timeout is an effect of the calling turn, and the request is
   * delivered only after that turn's commit ran it; answering is an
   * effect of the turn that resolves, and a resolver answers once. So
   * they share the memory, under two names. */
  union {
    vat__effect arm;
    vat__effect answer;
  } effect;
  int answer_state;
  vat_value answer;
  vat_resolver resolver;
  request req;
  bool from_host; /* a host thread waits on it (vat_host_call) */
};

/* The obligations of one vat: promises of requests it received (or
 * resolvers it used in a turn) that may still be pending. Swept lazily. */
struct vat__promises {
  vat_promise **items;
  size_t n, cap;
};

static inline int vat__promise_state_of(vat_promise *p) {
  return atomic_load_explicit(&p->state, memory_order_acquire);
}

static inline bool vat__promise_is_settled(int s) {
  return s == ST_RESOLVED || s == ST_BROKEN;
}

/* promise.c */
vat_promise *vat__promise_alloc(vat_system *sys);
/** Settles p with (state, v) once, and runs its observers; `turn`, when
 *  not NULL, is the committing turn whose sends they join. A following
 *  promise is settled only with `override_follow` (by what it follows, or
 *  its timeout). */
void vat__promise_settle(vat_promise *p, int state, vat_value v, vat_turn *turn,
                         bool override_follow);
/** Adds `o` to p's observers, or runs it now if p has settled. */
void vat__promise_observe(vat_promise *p, observer *o, vat_turn *turn);
/** `v` owes p's answer: if it ends first, p breaks with its reason. */
void vat__promise_track(vat__vat *v, vat_promise *p);

#endif
