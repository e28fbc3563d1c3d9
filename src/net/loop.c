/* See loop.h. The loop's thread runs for the rest of the process once
 * started: its one async handle keeps the loop alive, and it costs a
 * sleeping thread when no connection is open. */
#define GC_THREADS 1
#include <gc/gc.h> /* pthread_create registers the thread: it sends */
#include <pthread.h>
#include <sched.h>
#include <semaphore.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>
#include <uv.h>

#include "loop.h"
#include "testpoint.h"
#include "vat/host.h"

static struct {
  pthread_once_t once;
  bool started;
  uv_loop_t uv;
  uv_async_t wake;
  pthread_mutex_t mu; /* guards head, tail and every queued flag */
  net_posted *head, *tail;
  char *buffer;
} shared = {.once = PTHREAD_ONCE_INIT, .mu = PTHREAD_MUTEX_INITIALIZER};

/* How this thread runs the loop now: not at all; inside GC_do_blocking
 * (the loop's own thread, and a worker blocking in its poll); or as a
 * worker's poll that does not block, whose frames the collector scans as
 * ever. */
enum { NOT_RUNNING, RUNNING_BLOCKING, RUNNING_ACTIVE };
static _Thread_local int running;
/* Callbacks the loop's thread has run (net_loop_active), so its poll
 * knows whether it found anything. */
static _Thread_local uint64_t callbacks;

/* Who runs the loop. One thread at a time holds `run_mu` and runs it: the
 * loop's own thread, or an idle worker of any system (vat/host.h's idle
 * poller), which reads a frame and runs the connection's turn that takes
 * it without waking another thread. A worker about to sleep that finds
 * the loop's thread holding the loop asks for it (`handover`, and a wake
 * of the loop) and waits: the thread lets go, and steps aside while
 * workers keep polling. Once none has let go of the loop for
 * STEP_ASIDE_NS and none holds it (all busy, or no system with workers),
 * the thread takes it back, so the sockets are never left unpolled for
 * long; while a worker holds it, blocked in its poll (the process idle),
 * the thread sleeps until that worker lets go. hand_mu guards how the loop
 * passes between the thread and the workers. */
static pthread_mutex_t run_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t hand_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t handed_cond = PTHREAD_COND_INITIALIZER; /* to workers */
static pthread_cond_t let_go_cond = PTHREAD_COND_INITIALIZER; /* to it */
static bool thread_holds;     /* the thread holds run_mu */
static bool thread_waits;     /* it waits aside for a worker to let go */
static _Atomic bool handover; /* a worker asked it to let go (read unlocked) */
static _Atomic uint64_t worker_polled_ns; /* a worker last let go */
#define STEP_ASIDE_NS 5000000u

/* Takes the connections posted so far, in the order they were posted.
 * Each comes off the list (its flag down, under the lock) before it is
 * handled, so a post made while it is handled takes it again; one posted
 * meanwhile waits for the next wake-up, so that a busy connection cannot
 * keep the loop from its sockets. */
static void *take_posted_now(void *arg) {
  (void)arg;
  pthread_mutex_lock(&shared.mu);
  net_posted *p = shared.head;
  shared.head = shared.tail = NULL;
  pthread_mutex_unlock(&shared.mu);
  while (p != NULL) {
    pthread_mutex_lock(&shared.mu);
    net_posted *next = p->next;
    p->queued = false;
    pthread_mutex_unlock(&shared.mu);
    net_io_posted(p);
    p = next;
  }
  return NULL;
}

static void take_posted(uv_async_t *h) {
  (void)h;
  net_loop_active(take_posted_now, NULL);
}

/* The collector scans this thread's stack conservatively, and the thread
 * lives on. Blocked in uv_run it sits under libuv's frames (uv__io_poll's
 * 12 KiB of events, mostly left as they were) and the registers they
 * saved, where the callbacks that ran before left pointers: one stale
 * pointer kept a closed connection's vat and its tables alive (20,000
 * names, 1.9 MB). Clearing the stack below before each poll did not reach
 * them all. So uv_run runs inside GC_do_blocking, where the collector
 * scans only the frames above it, and each callback that touches the
 * collector's memory comes back in through net_loop_active, which scans
 * the callback's own frames while it runs. Between callbacks libuv holds
 * only the loop's memory and the connections' (uncollectable) structs. */
void *net_loop_active(void *(*fn)(void *), void *arg) {
  if (running == NOT_RUNNING)
    return fn(arg);
  callbacks++;
  if (running == RUNNING_ACTIVE)
    return fn(arg);
  return GC_call_with_gc_active(fn, arg);
}

static uint64_t now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

/* After it found something, the loop polls without sleeping for this
 * long before it blocks in the kernel again: one call at a time, the next
 * frame comes back within a round trip to the peer (tens of µs), and a
 * thread woken from epoll_wait takes several µs more to run, on each
 * side of every call. The workers spin as long before they park
 * (vat_config.spin). */
#define POLL_SPIN_NS 40000u

/* The loop's thread runs the loop, holding run_mu, until a worker asks
 * for it. False when no handle is left (the wake-up handle failed). */
static bool run_until_asked(void) {
  uint64_t active_at = 0;
  bool polling = false;
  while (!atomic_load_explicit(&handover, memory_order_acquire)) {
    uint64_t before = callbacks;
    if (uv_run(&shared.uv, polling ? UV_RUN_NOWAIT : UV_RUN_ONCE) == 0 &&
        !uv_loop_alive(&shared.uv))
      return false;
    uint64_t t = now_ns();
    if (callbacks != before)
      active_at = t;
    polling = t - active_at < POLL_SPIN_NS;
    if (polling)
      sched_yield();
  }
  return true;
}

/* The thread has just taken run_mu, under hand_mu. An ask made before is
 * stale: cleared before a worker can see the thread holding the loop. */
static void taken(void) {
  atomic_store_explicit(&handover, false, memory_order_relaxed);
  thread_holds = true;
}

/* The thread lets go of the loop, asked by a worker. */
static void hand_over(void) {
  /* As if a worker had just polled: it is about to. */
  atomic_store_explicit(&worker_polled_ns, now_ns(), memory_order_relaxed);
  pthread_mutex_lock(&hand_mu);
  pthread_mutex_unlock(&run_mu);
  thread_holds = false;
  pthread_cond_broadcast(&handed_cond);
  pthread_mutex_unlock(&hand_mu);
}

/* Waits, the loop let go, while workers poll; returns holding it. */
static void step_aside(void) {
  pthread_mutex_lock(&hand_mu);
  for (;;) {
    uint64_t since = now_ns() - atomic_load_explicit(&worker_polled_ns,
                                                     memory_order_relaxed);
    if (since < STEP_ASIDE_NS) {
      struct timespec until;
      clock_gettime(CLOCK_REALTIME, &until);
      until.tv_nsec += (long)(STEP_ASIDE_NS - since);
      if (until.tv_nsec >= 1000000000) {
        until.tv_sec++;
        until.tv_nsec -= 1000000000;
      }
      pthread_cond_timedwait(&let_go_cond, &hand_mu, &until);
      continue;
    }
    /* A worker letting go tells under hand_mu: either this trylock
     * follows its unlock, or it wakes us. */
    if (pthread_mutex_trylock(&run_mu) == 0)
      break;
    /* About to wait for the worker (tests hold the thread here). */
    VAT__TEST_POINT("net.loop.waits");
    thread_waits = true;
    pthread_cond_wait(&let_go_cond, &hand_mu);
    thread_waits = false;
  }
  taken();
  pthread_mutex_unlock(&hand_mu);
}

static void *run(void *arg) {
  /* The loop is the thread's before net_loop_start returns: no worker
   * takes it first, so the first to ask finds the thread holding it. */
  pthread_mutex_lock(&run_mu); /* run_mu, then hand_mu, as hand_over */
  pthread_mutex_lock(&hand_mu);
  taken();
  pthread_mutex_unlock(&hand_mu);
  sem_post(arg);
  for (;;) {
    running = RUNNING_BLOCKING;
    bool alive = run_until_asked();
    running = NOT_RUNNING;
    if (!alive)
      break;
    hand_over();
    /* Handed to a worker (tests hold the thread here). */
    VAT__TEST_POINT("net.loop.handed");
    step_aside();
    /* Back from the workers (tests hold the thread here). */
    VAT__TEST_POINT("net.loop.taken");
  }
  pthread_mutex_unlock(&run_mu);
  return NULL;
}

static void *loop_main(void *arg) {
  GC_do_blocking(run, arg);
  return NULL;
}

/* --- The idle poller: workers running the loop (vat/host.h) ------------- */

static bool poller_acquire(void *ctx, bool wait) {
  (void)ctx;
  if (pthread_mutex_trylock(&run_mu) == 0)
    return true;
  if (!wait)
    return false;
  pthread_mutex_lock(&hand_mu);
  bool took;
  /* While the thread holds it: ask, and wait until it lets go, which it
   * does as soon as its poll returns (the wake makes it return at once).
   * Asked again after each wake-up: slow to wake (a loaded machine), this
   * worker may find the loop taken back, and the ask cleared with it. */
  while (!(took = pthread_mutex_trylock(&run_mu) == 0) && thread_holds) {
    atomic_store_explicit(&handover, true, memory_order_relaxed);
    uv_async_send(&shared.wake);
    pthread_cond_wait(&handed_cond, &hand_mu);
#if VAT_TEST_HOOKS
    /* Woken, before it looks: as slow a wake-up as a test makes it, which
     * holds the worker here, hand_mu let go. */
    pthread_mutex_unlock(&hand_mu);
    VAT__TEST_POINT("net.loop.ask_woken");
    pthread_mutex_lock(&hand_mu);
#endif
  }
  pthread_mutex_unlock(&hand_mu);
  return took; /* false: another worker polls */
}

static void *poll_blocking(void *arg) {
  uv_run(&shared.uv, UV_RUN_ONCE);
  return arg;
}

static void poller_poll(void *ctx, bool block) {
  (void)ctx;
  if (block) {
    running = RUNNING_BLOCKING;
    GC_do_blocking(poll_blocking, NULL);
  } else {
    running = RUNNING_ACTIVE;
    uv_run(&shared.uv, UV_RUN_NOWAIT);
  }
  running = NOT_RUNNING;
}

static void poller_release(void *ctx) {
  (void)ctx;
  atomic_store_explicit(&worker_polled_ns, now_ns(), memory_order_relaxed);
  pthread_mutex_unlock(&run_mu);
  pthread_mutex_lock(&hand_mu);
  if (thread_waits)
    pthread_cond_signal(&let_go_cond);
  pthread_mutex_unlock(&hand_mu);
}

static void poller_wake(void *ctx) {
  (void)ctx;
  uv_async_send(&shared.wake);
}

static void start_once(void) {
  shared.buffer = malloc(NET_READ_BUFFER);
  if (shared.buffer == NULL || uv_loop_init(&shared.uv) != 0)
    return;
  if (uv_async_init(&shared.uv, &shared.wake, take_posted) != 0) {
    uv_loop_close(&shared.uv);
    return;
  }
  pthread_t t;
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  /* The thread starts with SIGPIPE blocked: a write to a socket the peer
   * closed then fails with EPIPE instead of killing the process, without
   * touching the process's signal dispositions. */
  sigset_t pipe, old;
  sigemptyset(&pipe);
  sigaddset(&pipe, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &pipe, &old);
  sem_t holding; /* the thread holds the loop */
  sem_init(&holding, 0, 0);
  int rc = pthread_create(&t, &attr, loop_main, &holding);
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  pthread_attr_destroy(&attr);
  if (rc != 0) {
    sem_destroy(&holding);
    uv_close((uv_handle_t *)&shared.wake, NULL);
    uv_run(&shared.uv, UV_RUN_DEFAULT);
    uv_loop_close(&shared.uv);
    return;
  }
  while (sem_wait(&holding) != 0) /* the collector's signals interrupt it */
    ;
  sem_destroy(&holding);
  shared.started = true;
  /* Refused when the process has a poller of its own already (a host's, a
   * test's): then this thread alone runs the loop. */
  vat_idle_poller_set(&(vat_idle_poller){.acquire = poller_acquire,
                                         .poll = poller_poll,
                                         .release = poller_release,
                                         .wake = poller_wake});
}

bool net_loop_start(void) {
  pthread_once(&shared.once, start_once);
  return shared.started;
}

struct uv_loop_s *net_loop_uv(void) {
  return &shared.uv;
}

char *net_loop_buffer(void) {
  return shared.buffer;
}

bool net_loop_is_current(void) {
  return running != NOT_RUNNING;
}

/* Only the post that finds the list empty wakes the loop: the list is
 * taken whole after the wake-up's flag went down (libuv clears it before
 * the callback), so a post that finds it full rides on the wake-up its
 * first post sent. */
bool net_loop_post(net_posted *p) {
  pthread_mutex_lock(&shared.mu);
  if (p->queued) {
    pthread_mutex_unlock(&shared.mu);
    return false;
  }
  p->queued = true;
  p->next = NULL;
  bool first = shared.head == NULL;
  if (shared.tail != NULL)
    shared.tail->next = p;
  else
    shared.head = p;
  shared.tail = p;
  pthread_mutex_unlock(&shared.mu);
  if (first)
    uv_async_send(&shared.wake);
  return true;
}
