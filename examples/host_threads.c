/* A host program with threads of its own asks vats questions and blocks
 * for the answers.
 *
 * A "squares" vat answers requests; four host threads each register with
 * the library, ask it 1,000 questions with vat_host_call, and wait for each
 * answer with vat_promise_wait. A turn must never block — a host thread
 * may.
 */
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include <vat.h>

enum { THREADS = 4, QUESTIONS = 1000 };

typedef struct squares {
  uint64_t answered;
} squares;

static void square(vat_turn *turn, void *state, void *arg,
                   vat_resolver *resolver) {
  squares *s = state;
  int64_t n = (int64_t)(intptr_t)arg;
  s->answered++;
  vat_resolve(turn, resolver, vat_int(n * n));
}

typedef struct asker {
  vat_ref *squares;
  int index;
  int wrong;
} asker;

static void *ask(void *arg) {
  asker *a = arg;
  if (vat_thread_register() != VAT_OK) {
    a->wrong = QUESTIONS;
    return NULL;
  }
  for (int64_t q = 0; q < QUESTIONS; q++) {
    int64_t n = a->index * QUESTIONS + q;
    vat_promise *p;
    vat_value answer;
    int64_t got = -1;
    if (vat_host_call(a->squares, square, (void *)(intptr_t)n, 0, &p) !=
            VAT_OK ||
        vat_promise_wait(p, 10, &answer) != VAT_OK ||
        vat_get_int(answer, &got) != VAT_OK || got != n * n)
      a->wrong++;
  }
  vat_thread_unregister();
  return NULL;
}

int main(void) {
  if (vat_init() != VAT_OK)
    return 1;
  vat_system *sys;
  vat_ref *ref;
  squares *s;
  if (vat_system_new(NULL, &sys) != VAT_OK ||
      vat_host_spawn(sys, &(vat_entity_def){.state_size = sizeof(squares)},
                     &ref, (void **)&s) != VAT_OK)
    return 1;

  pthread_t threads[THREADS];
  asker askers[THREADS];
  for (int i = 0; i < THREADS; i++) {
    askers[i] = (asker){.squares = ref, .index = i};
    pthread_create(&threads[i], NULL, ask, &askers[i]);
  }
  int wrong = 0;
  for (int i = 0; i < THREADS; i++) {
    pthread_join(threads[i], NULL);
    wrong += askers[i].wrong;
  }
  vat_system_shutdown(sys, 5);
  printf("%d threads asked %d questions: %" PRIu64 " answered, %d wrong\n",
         THREADS, THREADS * QUESTIONS, s->answered, wrong);
  vat_system_destroy(sys);
  return wrong == 0 ? 0 : 1;
}
