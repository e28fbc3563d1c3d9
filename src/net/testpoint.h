/* The pause points of util/testpoint.h, for net/: VAT__TEST_POINT(name)
 * marks a place in the I/O where a test makes a race happen on purpose.
 *
 * net/ is built on the public API and cannot include util/testpoint.h, so
 * the one declaration it needs is repeated here. The library users get
 * compiles the points to nothing and calls no internal function (the
 * layering check reads that build); only the unit tests' copy of net/,
 * built with VAT_TEST_HOOKS, calls the test build's vat__test_point. */
#ifndef VAT_NET_TESTPOINT_H
#define VAT_NET_TESTPOINT_H

#if VAT_TEST_HOOKS
void vat__test_point(const char *name);
#define VAT__TEST_POINT(name) vat__test_point(name)
#else
#define VAT__TEST_POINT(name) ((void)0)
#endif

#endif
