/* A ring of vats passing a token: the smallest complete libvat program
 * that makes many vats talk.
 *
 * Each vat knows exactly one other vat, the next one in the ring: that ref
 * is all the authority it has. The token counts the hops still to go;
 * each vat takes one off and hands it on. The vat where it reaches zero
 * resolves the promise main is waiting on.
 *
 * It compiles as C++ too (.ci/install-check builds it both ways): hence
 * the casts from void * and no compound literals.
 *
 * usage: ring [VATS [LAPS]] */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "vat.h"

typedef struct node {
  int64_t id;
  vat_ref *next; /* the only vat this one can talk to */
} node;

/* The token carries its own way home: whoever holds it last can report
 * the end of the trip, and no other vat can. It is handed from vat to vat,
 * so only one vat touches it at a time. */
typedef struct token {
  intptr_t hops_left;
  vat_resolver *home;
} token;

/* One hop: runs in the vat that holds the token. */
static void pass(vat_turn *turn, void *state, void *arg) {
  node *n = (node *)state;
  token *t = (token *)arg;
  if (--t->hops_left == 0) {
    vat_resolve(turn, t->home, vat_int(n->id));
    return;
  }
  vat_send(turn, n->next, pass, t);
}

/* A request: the answer will be where the token stopped. */
static void start(vat_turn *turn, void *state, void *arg, vat_resolver *r) {
  node *n = (node *)state;
  token *t = (token *)arg;
  t->home = r;
  vat_send(turn, n->next, pass, t);
}

int main(int argc, char **argv) {
  int vats = argc > 1 ? atoi(argv[1]) : 1000;
  int laps = argc > 2 ? atoi(argv[2]) : 10;
  if (vats < 1 || laps < 1)
    return 2;
  /* Static, so the collector sees the resolver it will hold. */
  static token tok;

  vat_system *sys;
  if (vat_init() != VAT_OK || vat_system_new(NULL, &sys) != VAT_OK)
    return 1;

  /* Spawn the vats back to front, so each is given its successor at birth;
   * the first vat's successor is set last, closing the ring. */
  vat_entity_def def = {.state_size = sizeof(node)};
  vat_ref *first = NULL, *next = NULL;
  node *last = NULL;
  for (int i = vats - 1; i >= 0; i--) {
    node *n;
    vat_host_spawn(sys, &def, &first, (void **)&n);
    n->id = i;
    n->next = next;
    if (last == NULL)
      last = n;
    next = first;
  }
  last->next = first;

  /* The token starts at vat 0 and makes `laps` trips round the ring. */
  vat_promise *trip;
  vat_value where;
  intptr_t hops = (intptr_t)vats * laps;
  tok.hops_left = hops;
  if (vat_host_call(first, start, &tok, 0, &trip) != VAT_OK ||
      vat_promise_wait(trip, 60, &where) != VAT_OK)
    return 1;
  int64_t id = 0;
  vat_get_int(where, &id);
  printf("%d vats, %d laps: %" PRIdPTR
         " hops, the token stopped at vat %" PRId64 "\n",
         vats, laps, hops, id);

  vat_system_shutdown(sys, 10);
  vat_system_destroy(sys);
  return 0;
}
