/* Runs every suite, or only those named on the command line. Each test runs
 * in its own process (Check's fork mode) and calls vat_init() itself, so no
 * collector state crosses a fork. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "suites.h"

typedef struct {
  const char *name;
  Suite *(*make)(void);
} suite_entry;

static const suite_entry all_suites[] = {
#define VAT__SUITE_ENTRY(name) {#name, test_##name##_suite},
    VAT_TEST_SUITES(VAT__SUITE_ENTRY)
#undef VAT__SUITE_ENTRY
};

static bool wanted(const char *name, int argc, char **argv) {
  if (argc < 2)
    return true;
  for (int i = 1; i < argc; i++)
    if (strcmp(argv[i], name) == 0)
      return true;
  return false;
}

int main(int argc, char **argv) {
  SRunner *runner = NULL;
  for (size_t i = 0; i < sizeof all_suites / sizeof all_suites[0]; i++) {
    if (!wanted(all_suites[i].name, argc, argv))
      continue;
    Suite *s = all_suites[i].make();
    if (runner == NULL)
      runner = srunner_create(s);
    else
      srunner_add_suite(runner, s);
  }
  if (runner == NULL) {
    fprintf(stderr, "no suite matches\n");
    return 2;
  }
  srunner_set_fork_status(runner, CK_FORK);
  srunner_run_all(runner, CK_NORMAL);
  int failed = srunner_ntests_failed(runner);
  srunner_free(runner);
  return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
