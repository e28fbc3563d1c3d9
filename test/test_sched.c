/* Scheduling policy: the vats a worker keeps to itself (its next slot and
 * its lane, see worker.c) do not starve the ones queued behind them. That
 * it keeps a producer with its consumer is a matter of speed, measured by
 * the benchmarks (bench/counter with two workers), not asserted here. */
#include <stdint.h>

#include "support.h"

/* --- Vats kept private do not starve queued ones ------------------------- */

typedef struct chatter {
  vat_ref *partner;
  vat_ref *late[2];
  test_counter *late_state[2];
  uint64_t turns;
} chatter;

static bool late_ones_ran(chatter *ch) {
  return atomic_load(&ch->late_state[0]->hits) > 0 &&
         atomic_load(&ch->late_state[1]->hits) > 0;
}

/* Talks with its partner until the two vats it woke late have both run.
 * Woken in one turn, the first of them waits in the run queue while the
 * pair keeps one worker busy. */
static void chat(vat_turn *turn, void *state, void *arg) {
  chatter *ch = state;
  expect_vat_ok(vat_send(turn, ch->partner, test_hit, NULL));
  if (++ch->turns == 1000)
    for (int i = 0; i < 2; i++)
      expect_vat_ok(vat_send(turn, ch->late[i], test_hit, NULL));
  if (ch->turns < 1000 || !late_ones_ran(ch))
    expect_vat_ok(vat_send(turn, vat_self(turn), chat, arg));
}

START_TEST(busy_pair_does_not_starve_queued_vats) {
  vat_system *sys = test_system(1);
  vat_ref *ref;
  chatter *ch;
  ck_assert_vat_ok(
      vat_host_spawn(sys, &(vat_entity_def){.state_size = sizeof(chatter)},
                     &ref, (void **)&ch));
  test_counter *partner_state;
  ch->partner = test_spawn_counter(sys, &partner_state);
  for (int i = 0; i < 2; i++)
    ch->late[i] = test_spawn_counter(sys, &ch->late_state[i]);
  ck_assert_vat_ok(vat_host_send(ref, chat, NULL));
  /* Quiescence comes only once both late vats ran. */
  test_quiesce(sys);
  ck_assert(late_ones_ran(ch));
  ck_assert_uint_eq(atomic_load(&partner_state->hits), ch->turns);
}
END_TEST

Suite *test_sched_suite(void) {
  Suite *s = suite_create("sched");
  TCase *tc = test_case("policy", 120);
  tcase_add_test(tc, busy_pair_does_not_starve_queued_vats);
  suite_add_tcase(s, tc);
  return s;
}
