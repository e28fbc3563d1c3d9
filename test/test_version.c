/* The version: the macros generated from meson's project version, and
 * vat_version(), the library's own, agree. */
#include <stdio.h>
#include <string.h>

#include "suites.h"
#include "support.h"

/* The project's version as meson.build states it, passed by test/meson.build:
 * the generated header must follow it, never a copy edited by hand. */
#ifndef VAT_TEST_PROJECT_VERSION
#error "test/meson.build passes VAT_TEST_PROJECT_VERSION"
#endif

START_TEST(macros_follow_the_project_version) {
  ck_assert_str_eq(VAT_VERSION_STRING, VAT_TEST_PROJECT_VERSION);
  char parts[64];
  snprintf(parts, sizeof parts, "%d.%d.%d", VAT_VERSION_MAJOR,
           VAT_VERSION_MINOR, VAT_VERSION_PATCH);
  ck_assert_str_eq(parts, VAT_VERSION_STRING);
}
END_TEST

START_TEST(library_reports_the_headers_version) {
  const char *v = vat_version();
  ck_assert_ptr_nonnull(v);
  ck_assert_str_eq(v, VAT_VERSION_STRING);
  /* A static string: the same pointer every time. */
  ck_assert_ptr_eq(vat_version(), v);
}
END_TEST

START_TEST(number_and_at_least_order_versions) {
  ck_assert_int_eq(VAT_VERSION_NUMBER, VAT_VERSION_MAJOR * 10000 +
                                           VAT_VERSION_MINOR * 100 +
                                           VAT_VERSION_PATCH);
  ck_assert(VAT_VERSION_AT_LEAST(VAT_VERSION_MAJOR, VAT_VERSION_MINOR,
                                 VAT_VERSION_PATCH));
  ck_assert(VAT_VERSION_AT_LEAST(0, 0, 0));
  ck_assert(!VAT_VERSION_AT_LEAST(VAT_VERSION_MAJOR, VAT_VERSION_MINOR,
                                  VAT_VERSION_PATCH + 1));
  ck_assert(!VAT_VERSION_AT_LEAST(VAT_VERSION_MAJOR, VAT_VERSION_MINOR + 1, 0));
  ck_assert(!VAT_VERSION_AT_LEAST(VAT_VERSION_MAJOR + 1, 0, 0));
  /* Usable in #if, where users test for a feature. */
#if !VAT_VERSION_AT_LEAST(VAT_VERSION_MAJOR, VAT_VERSION_MINOR,                \
                          VAT_VERSION_PATCH)
  ck_abort_msg("VAT_VERSION_AT_LEAST is false in #if");
#endif
}
END_TEST

Suite *test_version_suite(void) {
  Suite *s = suite_create("version");
  TCase *tc = test_case("version", 0);
  tcase_add_test(tc, macros_follow_the_project_version);
  tcase_add_test(tc, library_reports_the_headers_version);
  tcase_add_test(tc, number_and_at_least_order_versions);
  suite_add_tcase(s, tc);
  return s;
}
