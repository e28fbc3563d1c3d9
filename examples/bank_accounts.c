/* Two account vats, A and B, each with a balance of 100, and six
 * transfers of 10 between them. A transfer debits the sender, which then
 * sends a credit to the other account:
 *
 *    host --transfer--> A (balance -= 10) --credit--> B (balance += 10)
 *
 * The bug: if B dies after A debited itself and before B handled the
 * credit, the credit goes nowhere (a message to a dead vat is dropped)
 * and the money is gone. The fix: each account monitors its peer, and
 * when the peer is down it refunds what it sent and the peer never
 * credited, and declines new transfers.
 *
 * The scenario (bank_buggy, bank_fixed) is what the simulation harness
 * runs for every seed:
 *  - setup spawns the two accounts in the world's fresh system and sends
 *    the six transfers, as a host thread does;
 *  - check is the invariant, asked after every turn: no money is created
 *    or lost. It counts the balances (an account's balance is its durable
 *    state, kept when the vat dies) and the money in flight that will
 *    still arrive somewhere: to a live account, or back to a live sender
 *    that will refund it (the fixed version);
 *  - done, asked when nothing is left to run, says whether every transfer
 *    settled.
 * The faults that kill an account come from the harness (fault_rate):
 * the program itself never kills anything. */
#include "bank_accounts.h"

#include <stdbool.h>
#include <stdio.h>

#include <gc/gc.h>

enum { ACCOUNTS = 2, TRANSFERS = 6, OPENING = 100, AMOUNT = 10 };

enum transfer_state { T_NEW, T_IN_FLIGHT, T_CREDITED, T_REFUNDED, T_DECLINED };

typedef struct transfer {
  int64_t amount;
  enum transfer_state state;
  unsigned from, to;
} transfer;

struct account;

/* What the checks look at: the accounts' states and every transfer. The
 * harness runs no turn while a check runs, so reading them is safe. */
typedef struct bank {
  bool fixed;
  vat_ref *acct[ACCOUNTS];
  struct account *state[ACCOUNTS];
  transfer *t[TRANSFERS];
} bank;

typedef struct account {
  bank *bank;
  unsigned index;
  int64_t balance;
  vat_ref *peer;
  bool peer_down;
} account;

/* --- The program ---------------------------------------------------------- */

static void credit(vat_turn *turn, void *state, void *arg) {
  (void)turn;
  account *a = (account *)state;
  transfer *t = (transfer *)arg;
  a->balance += t->amount;
  t->state = T_CREDITED;
}

static void send_transfer(vat_turn *turn, void *state, void *arg) {
  account *a = (account *)state;
  transfer *t = (transfer *)arg;
  if (a->peer_down || a->balance < t->amount) {
    t->state = T_DECLINED;
    return;
  }
  a->balance -= t->amount;
  t->state = T_IN_FLIGHT;
  vat_send(turn, a->peer, credit, t);
}

/* The fix: the peer is down, so what it was sent and did not credit will
 * never be credited: give it back. */
static void peer_down(vat_turn *turn, void *state, uint64_t id, vat_ref *who,
                      vat_value reason) {
  (void)turn, (void)id, (void)who, (void)reason;
  account *a = (account *)state;
  a->peer_down = true;
  for (unsigned i = 0; i < TRANSFERS; i++) {
    transfer *t = a->bank->t[i];
    if (t->from == a->index && t->state == T_IN_FLIGHT) {
      a->balance += t->amount;
      t->state = T_REFUNDED;
    }
  }
}

static void watch_peer(vat_turn *turn, void *state, void *arg) {
  (void)arg;
  account *a = (account *)state;
  uint64_t id;
  vat_monitor(turn, a->peer, peer_down, &id);
}

/* --- The scenario --------------------------------------------------------- */

static void *bank_setup(vat_system *sys, void *ctx) {
  bank *b = (bank *)GC_MALLOC(sizeof *b);
  b->fixed = ctx != NULL;
  static const char *labels[ACCOUNTS] = {"acct-a", "acct-b"};
  for (unsigned i = 0; i < ACCOUNTS; i++) {
    vat_entity_def def = {.state_size = sizeof(account), .label = labels[i]};
    if (vat_host_spawn(sys, &def, &b->acct[i], (void **)&b->state[i]) != VAT_OK)
      return NULL; /* the harness reports the seed as failed */
    *b->state[i] = (account){.bank = b, .index = i, .balance = OPENING};
  }
  for (unsigned i = 0; i < ACCOUNTS; i++) {
    b->state[i]->peer = b->acct[1 - i];
    if (b->fixed)
      vat_host_send(b->acct[i], watch_peer, NULL);
  }
  for (unsigned i = 0; i < TRANSFERS; i++) {
    transfer *t = (transfer *)GC_MALLOC(sizeof *t);
    *t = (transfer){.amount = AMOUNT, .from = i % 2, .to = 1 - i % 2};
    b->t[i] = t;
    vat_host_send(b->acct[t->from], send_transfer, t);
  }
  return b;
}

static bool bank_check(void *world, bool quiescent, char *why, size_t size) {
  (void)quiescent; /* the same invariant holds at every step */
  bank *b = (bank *)world;
  int64_t total = 0, lost = 0;
  for (unsigned i = 0; i < ACCOUNTS; i++)
    total += b->state[i]->balance;
  for (unsigned i = 0; i < TRANSFERS; i++) {
    transfer *t = b->t[i];
    if (t->state != T_IN_FLIGHT)
      continue;
    bool refund_owed = b->fixed && !vat_ref_is_dead(b->acct[t->from]);
    if (!vat_ref_is_dead(b->acct[t->to]) || refund_owed)
      total += t->amount;
    else
      lost += t->amount;
  }
  if (total != ACCOUNTS * OPENING) {
    snprintf(why, size,
             "money not conserved: %lld of %d (%lld lost in flight to a dead "
             "account)",
             (long long)total, ACCOUNTS * OPENING, (long long)lost);
    return false;
  }
  return true;
}

/* Every transfer settled, or never begun by an account that died. */
static bool bank_done(void *world) {
  bank *b = (bank *)world;
  for (unsigned i = 0; i < TRANSFERS; i++) {
    enum transfer_state s = b->t[i]->state;
    if (s == T_IN_FLIGHT ||
        (s == T_NEW && !vat_ref_is_dead(b->acct[b->t[i]->from])))
      return false;
  }
  return true;
}

static int fixed_marker;
const vat_sim_scenario bank_buggy = {.name = "bank",
                                     .setup = bank_setup,
                                     .check = bank_check,
                                     .done = bank_done};
const vat_sim_scenario bank_fixed = {.name = "bank-fixed",
                                     .setup = bank_setup,
                                     .check = bank_check,
                                     .done = bank_done,
                                     .ctx = &fixed_marker};
