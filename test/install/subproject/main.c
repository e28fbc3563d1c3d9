/* A program of a project that builds libvat as its subproject: it asks a
 * vat for an answer and checks the library is the version its headers
 * say. Prints "ok 42" on success. */
#include <stdio.h>
#include <string.h>

#include <vat.h>

static void answer(vat_turn *turn, void *state, void *arg, vat_resolver *r) {
  (void)state;
  vat_resolve(turn, r, vat_int(6 * (int64_t)(intptr_t)arg));
}

int main(void) {
  if (strcmp(vat_version(), VAT_VERSION_STRING) != 0) {
    fprintf(stderr, "library %s, headers %s\n", vat_version(),
            VAT_VERSION_STRING);
    return 1;
  }
  vat_system *sys;
  if (vat_init() != VAT_OK || vat_system_new(NULL, &sys) != VAT_OK)
    return 1;
  vat_entity_def def = {.state_size = 0};
  vat_ref *ref;
  vat_promise *p;
  vat_value v;
  int64_t n = 0;
  if (vat_host_spawn(sys, &def, &ref, NULL) != VAT_OK ||
      vat_host_call(ref, answer, (void *)(intptr_t)7, 0, &p) != VAT_OK ||
      vat_promise_wait(p, 30, &v) != VAT_OK || vat_get_int(v, &n) != VAT_OK)
    return 1;
  printf("ok %lld\n", (long long)n);
  vat_system_shutdown(sys, 10);
  vat_system_destroy(sys);
  return n == 42 ? 0 : 1;
}
