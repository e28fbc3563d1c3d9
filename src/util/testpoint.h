/* Named points where a test can stop a thread, so that a race the code
 * must survive happens on purpose, every run, instead of by luck.
 *
 * VAT__TEST_POINT(name) marks a place between two steps that another
 * thread may interleave with (a sender between its state check and its
 * push, say). In the library proper it compiles to nothing. The unit tests
 * link a build of the same sources with VAT_TEST_HOOKS set, where a test
 * can arm a point: the next thread to reach it blocks there until the test
 * releases it (test/support.h: test_point_arm and friends).
 */
#ifndef VAT_UTIL_TESTPOINT_H
#define VAT_UTIL_TESTPOINT_H

#if VAT_TEST_HOOKS
#include <stdbool.h>

void vat__test_point(const char *name);
/** Arms `name`: the next thread that reaches it blocks until released.
 *  One point is armed at a time; arming replaces it. */
void vat__test_point_arm(const char *name);
/** Waits until a thread blocks at the armed point; false after `timeout_s`. */
bool vat__test_point_wait(double timeout_s);
/** Lets the blocked thread go on, and disarms the point. */
void vat__test_point_release(void);
/** Lets the blocked thread go on and arms `next` as it leaves, before it
 *  can reach `next` (a point it may reach at once). */
void vat__test_point_release_then(const char *next);
#define VAT__TEST_POINT(name) vat__test_point(name)
#else
#define VAT__TEST_POINT(name) ((void)0)
#endif

#endif
