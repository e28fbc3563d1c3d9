/* The test build's pause points; see testpoint.h. A mutex and a condition
 * variable: this runs only in tests, and only armed points ever block. */
#include "util/testpoint.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>

#include "util/clock.h"

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t changed; /* on CLOCK_MONOTONIC, like every wait here */
static pthread_once_t changed_once = PTHREAD_ONCE_INIT;
/* Read without the lock on every pass, so a disarmed point costs a load. */
static _Atomic(const char *) armed;
static bool arrived, released;
/* Armed as the released thread leaves (vat__test_point_release_then). */
static const char *then;
static uint64_t left; /* threads that left a point */

static void init_changed(void) {
  vat__cond_init_monotonic(&changed);
}

void vat__test_point(const char *name) {
  const char *want = atomic_load_explicit(&armed, memory_order_acquire);
  if (want == NULL || strcmp(want, name) != 0)
    return;
  pthread_mutex_lock(&lock);
  /* Only the first thread to get here blocks; the point is then spent. */
  if (atomic_load_explicit(&armed, memory_order_relaxed) != want || arrived) {
    pthread_mutex_unlock(&lock);
    return;
  }
  arrived = true;
  pthread_cond_broadcast(&changed);
  /* The collector's stop-the-world signal may wake this wait early: loop. */
  while (!released)
    pthread_cond_wait(&changed, &lock);
  atomic_store_explicit(&armed, then, memory_order_release);
  then = NULL;
  arrived = released = false;
  left++;
  pthread_cond_broadcast(&changed);
  pthread_mutex_unlock(&lock);
}

void vat__test_point_arm(const char *name) {
  pthread_once(&changed_once, init_changed);
  pthread_mutex_lock(&lock);
  arrived = released = false;
  atomic_store_explicit(&armed, name, memory_order_release);
  pthread_mutex_unlock(&lock);
}

bool vat__test_point_wait(double timeout_s) {
  struct timespec deadline = vat__deadline_after(timeout_s);
  pthread_mutex_lock(&lock);
  while (!arrived)
    if (pthread_cond_timedwait(&changed, &lock, &deadline) == ETIMEDOUT)
      break;
  bool ok = arrived;
  pthread_mutex_unlock(&lock);
  return ok;
}

void vat__test_point_release_then(const char *next) {
  pthread_mutex_lock(&lock);
  then = next;
  pthread_mutex_unlock(&lock);
  vat__test_point_release();
}

void vat__test_point_release(void) {
  pthread_mutex_lock(&lock);
  if (arrived) {
    released = true;
    pthread_cond_broadcast(&changed);
    /* Wait until the thread has left, so the next arm starts clean (it
     * may have reached the point armed after it already). */
    uint64_t before = left;
    while (left == before)
      pthread_cond_wait(&changed, &lock);
  } else {
    atomic_store_explicit(&armed, NULL, memory_order_release);
    then = NULL;
  }
  pthread_mutex_unlock(&lock);
}
