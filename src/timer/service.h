/* The timer module's shared layouts: timers, the per-system service and
 * the per-vat state, for timer.c (the service, arming, cancelling),
 * heap.c (the deadline heap) and idle.c (idle timeouts). */
#ifndef VAT_TIMER_SERVICE_H
#define VAT_TIMER_SERVICE_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/deliver.h"
#include "core/turn.h"
#include "core/vat.h"
#include "vat/timer.h"

#define NOT_ARMED UINT32_MAX

enum timer_kind { T_MSG, T_CALL, T_IDLE };

struct vat_timer {
  uint64_t deadline; /* before arming: the delay */
  uint64_t period;   /* 0: one-shot */
  uint64_t seq;
  uint32_t slot;
  uint8_t kind;
  bool armed, cancelled, fired, dynamic;
  vat__vat *owner;                /* NULL for T_CALL */
  vat_timer *own_prev, *own_next; /* the owner's armed timers */
  /* A turn's timers to arm at its commit, or the calls that fell due in
   * one firing (T_CALL): a timer is in one such batch at most, once. */
  vat_timer *batch_next;
  union {
    vat_ref *to;
    vat_system *sys; /* T_CALL */
  } u;
  union {
    vat_fn fn;
    void (*call)(void *);
  } f;
  void *arg;
  vat_value *value; /* dynamic messages */
};

typedef struct vat__timer_service {
  pthread_mutex_t lock;
  pthread_cond_t cond;
  vat_timer **heap;
  size_t n, cap;
  uint64_t seq;
  bool stop, has_thread;
  pthread_t thread;
} service;

/* Per vat: its armed timers, the timers its current turn arms at commit,
 * and its idle timeout. */
struct vat__timers {
  vat_timer *owned;
  vat__effect arm_effect;
  vat_timer *to_arm, *to_arm_tail;
  /* Idle timeout: touched by the vat's own turns only. */
  vat_timer *idle_check;
  uint64_t idle_ns;
  vat_ref *idle_to;
  vat_fn idle_fn;
  void *idle_arg;
  uint32_t snap;
  unsigned silent;
  vat__signal idle_sig;
};

/* heap.c: under the service lock. Inserting stamps the arming sequence. */
void vat__timer_heap_insert(service *s, vat_timer *t);
void vat__timer_heap_remove(service *s, vat_timer *t);

/* timer.c */
/** The vat's timer state, made on first use; from its own turns. */
struct vat__timers *vat__timers_of(vat__vat *v);
/** Under the lock: arms t, whose `deadline` holds its delay, from `now`. */
void vat__timer_arm_locked(service *s, vat_timer *t, uint64_t now);
/** Under the lock: cancels t; it leaves the heap if it is armed there. */
void vat__timer_cancel_locked(service *s, vat_timer *t);

#endif
