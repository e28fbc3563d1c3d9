/* Mint and purses: E's classic money example.
 *
 * Money is authority. A purse holds a balance; holding a ref to a purse is
 * the right to take money out of it, so you pay someone by sprouting a
 * small purse, filling it, and handing over only that one. A deposit
 *
 *     dest <- deposit([amount, src])
 *
 * moves `amount` from src into dest. The mint knows which purses it made:
 * money moves only between purses of the same mint (currency), so an
 * object that merely claims to be a purse holds nothing anyone accepts.
 * No message creates money except the mint's make_purse, and only the
 * holder of the mint ref can send that.
 *
 * All purses of a mint are entities of the mint's vat, so a deposit is one
 * turn: atomic, with nothing else in between. Clients in other vats, on
 * every worker, send deposits concurrently; the ledger stays exact.
 *
 * usage: mint            a short story, printed
 *        mint stress [PURSES [TRANSFERS]]   random transfers by 16 vats */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "vat.h"

enum { MAX_PURSES = 1024 };

typedef struct purse purse;
typedef struct mint {
  /* The purses this mint made: the only ones it honours. */
  vat_ref *refs[MAX_PURSES];
  purse *states[MAX_PURSES];
  int n;
} mint;

struct purse {
  mint *mint;
  int64_t balance;
};

static const vat_atom *sel(const char *name) {
  return vat_atom_intern(name);
}

static vat_value refusal(const char *code) {
  return vat_error(sel(code), vat_null());
}

static void purse_receive(vat_turn *, void *, const vat_atom *, vat_value);

/* Runs in the mint's vat (for the mint or one of its purses). */
static vat_value new_purse(vat_turn *turn, mint *m, int64_t balance) {
  vat_ref *ref;
  purse *p;
  if (m->n == MAX_PURSES ||
      vat_entity_new(turn,
                     &(vat_entity_def){.state_size = sizeof(purse),
                                       .receive = purse_receive},
                     &ref, (void **)&p) != VAT_OK)
    return refusal("no_room");
  *p = (purse){.mint = m, .balance = balance};
  m->refs[m->n] = ref;
  m->states[m->n++] = p;
  return vat_ref_value(ref);
}

/* The brand check: a ref is a purse of this currency only if this mint
 * made it. */
static purse *genuine(mint *m, vat_ref *ref) {
  for (int i = 0; i < m->n; i++)
    if (m->refs[i] == ref)
      return m->states[i];
  return NULL;
}

static vat_value deposit(purse *dest, vat_value args) {
  int64_t amount;
  if (vat_get_int(vat_at(args, 0), &amount) != VAT_OK || amount < 0)
    return refusal("bad_amount"); /* a negative deposit would mint money */
  purse *src = genuine(dest->mint, vat_value_ref(vat_at(args, 1)));
  if (src == NULL)
    return refusal("foreign_purse");
  if (src->balance < amount)
    return refusal("insufficient_funds");
  src->balance -= amount;
  dest->balance += amount;
  return vat_bool(true);
}

static void purse_receive(vat_turn *turn, void *state, const vat_atom *selector,
                          vat_value msg) {
  purse *p = state;
  vat_value args, answer;
  vat_ref *reply;
  if (!vat_request_parse(msg, &args, &reply))
    return; /* purses only answer requests */
  if (selector == sel("balance"))
    answer = vat_int(p->balance);
  else if (selector == sel("sprout"))
    answer = new_purse(turn, p->mint, 0);
  else if (selector == sel("deposit"))
    answer = deposit(p, args);
  else
    answer = refusal("unknown_selector");
  if (vat_type_of(answer) == VAT_T_ERROR)
    vat_reply_error(turn, reply, answer);
  else
    vat_reply(turn, reply, answer);
}

/* The mint answers one request: make_purse(initial balance). */
static void mint_receive(vat_turn *turn, void *state, const vat_atom *selector,
                         vat_value msg) {
  vat_value args;
  vat_ref *reply;
  int64_t amount;
  if (!vat_request_parse(msg, &args, &reply) || selector != sel("make_purse"))
    return;
  if (vat_get_int(args, &amount) != VAT_OK || amount < 0)
    vat_reply_error(turn, reply, refusal("bad_amount"));
  else
    vat_reply(turn, reply, new_purse(turn, state, amount));
}

static const vat_entity_def mint_def = {.state_size = sizeof(mint),
                                        .receive = mint_receive};

/* Main's side: ask and wait. A refusal comes back as the error. */
static vat_value ask(vat_ref *to, const char *selector, vat_value args) {
  vat_promise *p;
  vat_value v = vat_null();
  if (vat_host_request(to, sel(selector), args, 0, &p) == VAT_OK)
    vat_promise_wait(p, 30, &v);
  return v;
}

static int64_t balance(vat_ref *purse_ref) {
  int64_t b = -1;
  vat_get_int(ask(purse_ref, "balance", vat_null()), &b);
  return b;
}

static const char *pay(vat_ref *dest, int64_t amount, vat_ref *src) {
  vat_value args[2] = {vat_int(amount), vat_ref_value(src)};
  vat_value v = ask(dest, "deposit", vat_list(args, 2));
  return vat_type_of(v) == VAT_T_ERROR ? vat_atom_name(vat_error_code(v))
                                       : "ok";
}

int stress(vat_system *sys, vat_ref *mint_ref, vat_ref *yen_purse, int purses,
           int transfers); /* in mint_stress.c */

static void story(vat_system *sys, vat_ref *dollars, vat_ref *yen) {
  vat_ref *alice = vat_value_ref(ask(dollars, "make_purse", vat_int(100)));
  vat_ref *bob = vat_value_ref(ask(dollars, "make_purse", vat_int(0)));
  printf("alice has %" PRId64 ", bob has %" PRId64 "\n", balance(alice),
         balance(bob));

  /* Alice pays 30 without giving Bob her purse: she fills a new one. */
  vat_ref *payment = vat_value_ref(ask(alice, "sprout", vat_null()));
  printf("alice fills a payment purse with 30: %s\n", pay(payment, 30, alice));
  printf("bob deposits 30 from it: %s\n", pay(bob, 30, payment));
  printf("bob tries to take 30 more from it: %s\n", pay(bob, 30, payment));
  printf("bob tries a negative amount: %s\n", pay(bob, -5, payment));

  /* Yen are not dollars. */
  vat_ref *carol = vat_value_ref(ask(yen, "make_purse", vat_int(1000)));
  printf("bob tries to deposit 10 yen: %s\n", pay(bob, 10, carol));

  /* Something that claims to be a purse but was not made by the mint. */
  vat_ref *forged;
  vat_host_spawn(
      sys,
      &(vat_entity_def){.state_size = sizeof(purse), .receive = purse_receive},
      &forged, NULL);
  printf("bob tries to deposit 10 from a forged purse: %s\n",
         pay(bob, 10, forged));
  printf("alice has %" PRId64 ", bob has %" PRId64 ", payment has %" PRId64
         "\n",
         balance(alice), balance(bob), balance(payment));
}

int main(int argc, char **argv) {
  vat_system *sys;
  vat_ref *dollars, *yen;
  if (vat_init() != VAT_OK || vat_system_new(NULL, &sys) != VAT_OK ||
      vat_host_spawn(sys, &mint_def, &dollars, NULL) != VAT_OK ||
      vat_host_spawn(sys, &mint_def, &yen, NULL) != VAT_OK)
    return 1;
  int rc = 0;
  if (argc > 1) {
    vat_ref *carol = vat_value_ref(ask(yen, "make_purse", vat_int(1000)));
    rc = stress(sys, dollars, carol, argc > 2 ? atoi(argv[2]) : 300,
                argc > 3 ? atoi(argv[3]) : 20000);
  } else {
    story(sys, dollars, yen);
  }
  vat_system_shutdown(sys, 10);
  vat_system_destroy(sys);
  return rc;
}
