/* The mint under load (run by `mint stress`): client vats on every worker
 * send thousands of random deposits between hundreds of purses, some of
 * them invalid on purpose, and the ledger must come out exact: the total
 * conserved, no balance negative, every invalid transfer refused with the
 * right error. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "vat.h"

enum { CLIENTS = 16, START_BALANCE = 1000 };
enum kind { VALID, WRONG_CURRENCY, FORGED };

typedef struct client {
  vat_value purses; /* a list of purse refs */
  vat_ref *foreign, *forged;
  uint64_t rng;
  int left;
  int64_t done_ok, overdraft, wrong_currency, forged_refused, unexpected;
  vat_resolver *finished;
} client;

static uint64_t next_rand(uint64_t *s) {
  *s ^= *s << 13;
  *s ^= *s >> 7;
  *s ^= *s << 17;
  return *s;
}

static vat_ref *any_purse(client *c) {
  return vat_value_ref(
      vat_at(c->purses, next_rand(&c->rng) % vat_len(c->purses)));
}

static void transfer(vat_turn *turn, client *c);

/* The answer to one deposit: was it the one this kind of transfer must
 * get? */
static void answered(vat_turn *turn, void *state, void *ctx, bool resolved,
                     vat_value value) {
  client *c = state;
  enum kind kind = (enum kind)(intptr_t)ctx;
  const char *code = resolved ? "" : vat_atom_name(vat_error_code(value));
  if (kind == VALID && resolved)
    c->done_ok++;
  else if (kind == VALID && strcmp(code, "insufficient_funds") == 0)
    c->overdraft++;
  else if (kind == WRONG_CURRENCY && strcmp(code, "foreign_purse") == 0)
    c->wrong_currency++;
  else if (kind == FORGED && strcmp(code, "foreign_purse") == 0)
    c->forged_refused++;
  else
    c->unexpected++;
  transfer(turn, c);
}

/* One deposit at a time per client; sixteen clients run at once. */
static void transfer(vat_turn *turn, client *c) {
  if (c->left-- == 0) {
    vat_value counts[] = {vat_int(c->done_ok + c->overdraft),
                          vat_int(c->wrong_currency),
                          vat_int(c->forged_refused), vat_int(c->unexpected)};
    vat_resolve(turn, c->finished, vat_list(counts, 4));
    return;
  }
  uint64_t roll = next_rand(&c->rng) % 100;
  enum kind kind = roll < 3 ? WRONG_CURRENCY : roll < 6 ? FORGED : VALID;
  vat_ref *src = kind == WRONG_CURRENCY ? c->foreign
                 : kind == FORGED       ? c->forged
                                        : any_purse(c);
  vat_value args[2] = {vat_int((int64_t)(next_rand(&c->rng) % 1500)),
                       vat_ref_value(src)};
  vat_promise *p;
  vat_request(turn, any_purse(c), vat_atom_intern("deposit"), vat_list(args, 2),
              0, &p);
  vat_when(turn, p, answered, (void *)(intptr_t)kind);
}

static void start(vat_turn *turn, void *state, void *arg, vat_resolver *r) {
  (void)arg;
  client *c = state;
  c->finished = r;
  transfer(turn, c);
}

static vat_value ask(vat_ref *to, const char *selector, vat_value args) {
  vat_promise *p;
  vat_value v = vat_null();
  if (vat_host_request(to, vat_atom_intern(selector), args, 0, &p) == VAT_OK)
    vat_promise_wait(p, 60, &v);
  return v;
}

int stress(vat_system *sys, vat_ref *mint_ref, vat_ref *yen_purse, int purses,
           int transfers) {
  if (purses < 2 || purses > 1000 || transfers < 0)
    return 2;
  vat_value refs[1000];
  for (int i = 0; i < purses; i++)
    refs[i] = ask(mint_ref, "make_purse", vat_int(START_BALANCE));
  vat_value list = vat_list(refs, (size_t)purses);
  vat_ref *forged;
  vat_host_spawn(sys, &(vat_entity_def){.state_size = 8}, &forged, NULL);

  vat_promise *finished[CLIENTS];
  for (int i = 0; i < CLIENTS; i++) {
    vat_ref *ref;
    client *c;
    vat_host_spawn(sys, &(vat_entity_def){.state_size = sizeof(client)}, &ref,
                   (void **)&c);
    *c = (client){.purses = list,
                  .foreign = yen_purse,
                  .forged = forged,
                  .rng = 0x9E3779B97F4A7C15ULL * (uint64_t)(i + 1),
                  .left = transfers / CLIENTS + (i < transfers % CLIENTS)};
    vat_host_call(ref, start, NULL, 0, &finished[i]);
  }
  int64_t sums[4] = {0};
  for (int i = 0; i < CLIENTS; i++) {
    vat_value counts;
    if (vat_promise_wait(finished[i], 120, &counts) != VAT_OK)
      return 1;
    for (size_t k = 0; k < 4; k++) {
      int64_t n = 0;
      vat_get_int(vat_at(counts, k), &n);
      sums[k] += n;
    }
  }

  int64_t total = 0, negative = 0;
  for (int i = 0; i < purses; i++) {
    int64_t b = -1;
    vat_get_int(ask(vat_value_ref(refs[i]), "balance", vat_null()), &b);
    total += b;
    negative += b < 0;
  }
  int64_t before = (int64_t)purses * START_BALANCE;
  printf("%d purses, %d client vats, %d transfers\n", purses, CLIENTS,
         transfers);
  printf("moved or refused as overdraft: %" PRId64 "\n", sums[0]);
  printf("refused as wrong currency: %" PRId64 "\n", sums[1]);
  printf("refused as forged purse: %" PRId64 "\n", sums[2]);
  printf("unexpected answers: %" PRId64 "\n", sums[3]);
  printf("total before %" PRId64 ", after %" PRId64 ": %s\n", before, total,
         total == before ? "conserved" : "NOT CONSERVED");
  printf("negative balances: %" PRId64 "\n", negative);
  return total == before && negative == 0 && sums[3] == 0 ? 0 : 1;
}
