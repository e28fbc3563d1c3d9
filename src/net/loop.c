/* See loop.h. The loop's thread runs for the rest of the process once
 * started: its one async handle keeps it alive, and it costs a sleeping
 * thread when no connection is open. */
#define GC_THREADS 1
#include <gc/gc.h> /* pthread_create registers the thread: it sends */
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>
#include <uv.h>

#include "loop.h"

static struct {
  pthread_once_t once;
  bool started;
  uv_loop_t uv;
  uv_async_t wake;
  pthread_mutex_t mu; /* guards head, tail and every queued flag */
  net_posted *head, *tail;
  char *buffer;
} shared = {.once = PTHREAD_ONCE_INIT, .mu = PTHREAD_MUTEX_INITIALIZER};

static _Thread_local bool on_loop_thread;
/* Callbacks the loop's thread has run (net_loop_active), so its poll
 * knows whether it found anything. */
static _Thread_local uint64_t callbacks;

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
  if (!on_loop_thread)
    return fn(arg);
  callbacks++;
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

static void *run(void *arg) {
  (void)arg;
  uint64_t active_at = 0;
  bool polling = false;
  for (;;) {
    uint64_t before = callbacks;
    if (uv_run(&shared.uv, polling ? UV_RUN_NOWAIT : UV_RUN_ONCE) == 0 &&
        !uv_loop_alive(&shared.uv))
      break; /* no handle left: the wake-up handle failed to start */
    uint64_t t = now_ns();
    if (callbacks != before)
      active_at = t;
    polling = t - active_at < POLL_SPIN_NS;
    if (polling)
      sched_yield();
  }
  return NULL;
}

static void *loop_main(void *arg) {
  (void)arg;
  on_loop_thread = true;
  GC_do_blocking(run, NULL);
  return NULL;
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
  int rc = pthread_create(&t, &attr, loop_main, NULL);
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  pthread_attr_destroy(&attr);
  if (rc != 0) {
    uv_close((uv_handle_t *)&shared.wake, NULL);
    uv_run(&shared.uv, UV_RUN_DEFAULT);
    uv_loop_close(&shared.uv);
    return;
  }
  shared.started = true;
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
  return on_loop_thread;
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
