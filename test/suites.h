/* One Check suite per module; the runner runs them all. */
#ifndef VAT_TEST_SUITES_H
#define VAT_TEST_SUITES_H

#include <check.h>

#define VAT_TEST_SUITES(X)                                                     \
  X(error)                                                                     \
  X(value)                                                                     \
  X(mailbox)                                                                   \
  X(runq)                                                                      \
  X(sched)                                                                     \
  X(system)                                                                    \
  X(turn)                                                                      \
  X(send)                                                                      \
  X(host)                                                                      \
  X(memory)                                                                    \
  X(stress)                                                                    \
  X(promise)                                                                   \
  X(timer)                                                                     \
  X(exits)                                                                     \
  X(supervisor)                                                                \
  X(caps)                                                                      \
  X(trace)                                                                     \
  X(soak)                                                                      \
  X(version)                                                                   \
  X(overload)                                                                  \
  X(backpressure)                                                              \
  X(observe)

#define VAT__DECLARE_SUITE(name) Suite *test_##name##_suite(void);
VAT_TEST_SUITES(VAT__DECLARE_SUITE)
#undef VAT__DECLARE_SUITE

#endif
