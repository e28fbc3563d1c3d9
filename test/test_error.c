/* Error names and messages. */
#include <limits.h>
#include <string.h>

#include "suites.h"
#include "support.h"

typedef struct {
  int code;
  const char *name;
  const char *text;
} error_entry;

static const error_entry all_errors[] = {
#define ERROR_ENTRY(name, value, text) {VAT_##name, "VAT_" #name, text},
    VAT_ERRNO_MAP(ERROR_ENTRY)
#undef ERROR_ENTRY
};

#define N_ERRORS (sizeof all_errors / sizeof all_errors[0])

START_TEST(every_code_has_its_name_and_text) {
  const error_entry *e = &all_errors[_i];
  ck_assert_int_lt(e->code, 0);
  ck_assert_str_eq(vat_err_name(e->code), e->name);
  ck_assert_str_eq(vat_strerror(e->code), e->text);
}
END_TEST

START_TEST(codes_are_distinct) {
  for (size_t i = 0; i < N_ERRORS; i++)
    for (size_t j = i + 1; j < N_ERRORS; j++) {
      ck_assert_int_ne(all_errors[i].code, all_errors[j].code);
      ck_assert_str_ne(all_errors[i].name, all_errors[j].name);
    }
}
END_TEST

START_TEST(ok_is_success) {
  ck_assert_int_eq(VAT_OK, 0);
  ck_assert_str_eq(vat_err_name(VAT_OK), "VAT_OK");
  ck_assert_str_eq(vat_strerror(VAT_OK), "success");
}
END_TEST

START_TEST(unknown_codes) {
  int lowest = 0;
  for (size_t i = 0; i < N_ERRORS; i++)
    if (all_errors[i].code < lowest)
      lowest = all_errors[i].code;
  /* Below the lowest code, so it stays unknown when codes are added. */
  const int unknown[] = {lowest - 1, 1, 42, INT_MIN, INT_MAX};
  for (size_t i = 0; i < sizeof unknown / sizeof unknown[0]; i++) {
    ck_assert_str_eq(vat_err_name(unknown[i]), "VAT_UNKNOWN");
    ck_assert_str_eq(vat_strerror(unknown[i]), "unknown error");
  }
}
END_TEST

Suite *test_error_suite(void) {
  Suite *s = suite_create("error");
  TCase *tc = test_case("names", 0);
  tcase_add_loop_test(tc, every_code_has_its_name_and_text, 0, (int)N_ERRORS);
  tcase_add_test(tc, codes_are_distinct);
  tcase_add_test(tc, ok_is_success);
  tcase_add_test(tc, unknown_codes);
  suite_add_tcase(s, tc);
  return s;
}
