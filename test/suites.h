/* One Check suite per module; the runner runs them all. */
#ifndef VAT_TEST_SUITES_H
#define VAT_TEST_SUITES_H

#include <check.h>

/* CapTP's suite exists when the library was built with jansson. */
#if VAT_TEST_CAPTP
#define VAT__CAPTP_SUITE(X) X(captp)
#else
#define VAT__CAPTP_SUITE(X)
#endif

/* The net suites exist when the library was built with connections. */
#if VAT_TEST_NET
#define VAT__NET_SUITE(X) X(net) X(conns) X(bounds) X(sim_net)
#else
#define VAT__NET_SUITE(X)
#endif

#define VAT_TEST_SUITES(X)                                                     \
  X(error)                                                                     \
  X(value)                                                                     \
  X(mailbox)                                                                   \
  X(msgpool)                                                                   \
  X(runq)                                                                      \
  X(deque)                                                                     \
  X(sched)                                                                     \
  X(fresh)                                                                     \
  X(system)                                                                    \
  X(turn)                                                                      \
  X(send)                                                                      \
  X(host)                                                                      \
  X(memory)                                                                    \
  X(objcache)                                                                  \
  X(stress)                                                                    \
  X(promise)                                                                   \
  X(timer)                                                                     \
  X(exits)                                                                     \
  X(supervisor)                                                                \
  X(caps)                                                                      \
  X(trace)                                                                     \
  X(soak)                                                                      \
  X(version)                                                                   \
  X(overtake)                                                                  \
  X(overload)                                                                  \
  X(observe)                                                                   \
  X(sim)                                                                       \
  X(sim_bugs)                                                                  \
  X(sim_plan)                                                                  \
  X(sim_faults)                                                                \
  X(sim_machines)                                                              \
  X(sim_world_faults)                                                          \
  X(sim_replay)                                                                \
  X(sim_campaign)                                                              \
  VAT__CAPTP_SUITE(X)                                                          \
  VAT__NET_SUITE(X)

#define VAT__DECLARE_SUITE(name) Suite *test_##name##_suite(void);
VAT_TEST_SUITES(VAT__DECLARE_SUITE)
#undef VAT__DECLARE_SUITE

#endif
