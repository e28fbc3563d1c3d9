/* A chat room built from capabilities.
 *
 * A member holds one thing: a ref to post with. The room reaches the
 * member through one thing: a ref to the member's inbox. Both go through
 * caretakers (revocable forwarders, vat/caps.h) whose revokers only the
 * room holds, so kicking a member is revoking two refs: the member can no
 * longer post, and nothing more reaches them. No list of banned names, no
 * check on every message.
 *
 * Each member's posting ref leads to a "mouth" entity of its own, which
 * knows the member's name: the room learns who speaks from which ref was
 * used, not from what the speaker claims, so nobody can post as somebody
 * else.
 *
 * main plays the moderator (it holds the room ref, the authority to admit
 * and kick) and the members (it holds their posting refs). Each inbox
 * keeps a transcript, printed at the end.
 *
 * `chat --trace FILE` also writes a trace of every turn to FILE, to open
 * in ui.perfetto.dev or chrome://tracing (README: "Looking at a trace"). */
#include <stdio.h>
#include <string.h>

#include "vat.h"

enum { MAX_MEMBERS = 16, MAX_LINES = 16, LINE = 80 };

typedef struct member {
  char name[16];
  vat_ref *deliver;       /* caretaker for the member's inbox */
  vat_ref *stop_delivery; /* its revoker */
  vat_ref *stop_posting;  /* revoker of the member's posting ref */
} member;

typedef struct room {
  member members[MAX_MEMBERS];
  int n;
} room;

typedef struct mouth {
  room *room;
  int who;
} mouth;

static const vat_atom *sel(const char *name) {
  return vat_atom_intern(name);
}

/* Sends a line to every member; revoked deliveries drop it silently. */
static void broadcast(vat_turn *turn, room *r, const char *line) {
  for (int i = 0; i < r->n; i++)
    vat_send_msg(turn, r->members[i].deliver, sel("say"), vat_string(line));
}

/* A post, tagged with the name of the member this mouth belongs to. */
static void mouth_receive(vat_turn *turn, void *state, const vat_atom *selector,
                          vat_value msg) {
  mouth *m = state;
  vat_value text;
  vat_ref *reply;
  if (selector != sel("post") || !vat_request_parse(msg, &text, &reply))
    return;
  char line[LINE];
  snprintf(line, sizeof line, "%s: %s", m->room->members[m->who].name,
           vat_string_data(text));
  broadcast(turn, m->room, line);
  vat_reply(turn, reply, vat_bool(true));
}

static const vat_entity_def mouth_def = {.state_size = sizeof(mouth),
                                         .receive = mouth_receive};

/* join([name, inbox]) answers the new member's posting ref. */
static vat_value join(vat_turn *turn, room *r, vat_value args) {
  if (r->n == MAX_MEMBERS)
    return vat_error(sel("room_full"), vat_null());
  member *mb = &r->members[r->n];
  snprintf(mb->name, sizeof mb->name, "%s", vat_string_data(vat_at(args, 0)));
  vat_ref *mouth_ref, *poster;
  mouth *m;
  vat_entity_new(turn, &mouth_def, &mouth_ref, (void **)&m);
  *m = (mouth){.room = r, .who = r->n};
  vat_caretaker_new(turn, mouth_ref, &poster, &mb->stop_posting);
  vat_caretaker_new(turn, vat_value_ref(vat_at(args, 1)), &mb->deliver,
                    &mb->stop_delivery);
  r->n++;
  char line[LINE];
  snprintf(line, sizeof line, "* %s joined", mb->name);
  broadcast(turn, r, line);
  return vat_ref_value(poster);
}

static vat_value kick(vat_turn *turn, room *r, vat_value name) {
  for (int i = 0; i < r->n; i++) {
    member *mb = &r->members[i];
    if (strcmp(mb->name, vat_string_data(name)) != 0)
      continue;
    vat_revoke(turn, mb->stop_posting);
    vat_revoke(turn, mb->stop_delivery);
    char line[LINE];
    snprintf(line, sizeof line, "* %s was kicked", mb->name);
    broadcast(turn, r, line);
    return vat_bool(true);
  }
  return vat_error(sel("no_such_member"), name);
}

/* The room's own ref is the moderator's: join and kick. */
static void room_receive(vat_turn *turn, void *state, const vat_atom *selector,
                         vat_value msg) {
  vat_value args, answer;
  vat_ref *reply;
  if (!vat_request_parse(msg, &args, &reply))
    return;
  if (selector == sel("join"))
    answer = join(turn, state, args);
  else if (selector == sel("kick"))
    answer = kick(turn, state, args);
  else
    answer = vat_error(sel("unknown_selector"), vat_null());
  if (vat_type_of(answer) == VAT_T_ERROR)
    vat_reply_error(turn, reply, answer);
  else
    vat_reply(turn, reply, answer);
}

/* An inbox keeps what it is told. */
typedef struct inbox {
  char lines[MAX_LINES][LINE];
  int n;
} inbox;

static void inbox_receive(vat_turn *turn, void *state, const vat_atom *selector,
                          vat_value msg) {
  (void)turn;
  inbox *in = state;
  if (selector == sel("say") && in->n < MAX_LINES)
    snprintf(in->lines[in->n++], LINE, "%s", vat_string_data(msg));
}

/* --- main: the moderator and the members' scripts ------------------------ */

static vat_value ask(vat_ref *to, const char *selector, vat_value args) {
  vat_promise *p;
  vat_value v = vat_null();
  if (vat_host_request(to, sel(selector), args, 0, &p) == VAT_OK)
    vat_promise_wait(p, 10, &v);
  return v;
}

static vat_ref *admit(vat_ref *room_ref, const char *name, vat_ref *inbox_ref) {
  vat_value args[2] = {vat_string(name), vat_ref_value(inbox_ref)};
  return vat_value_ref(ask(room_ref, "join", vat_list(args, 2)));
}

static void post(vat_ref *poster, const char *who, const char *text) {
  vat_value v = ask(poster, "post", vat_string(text));
  if (vat_type_of(v) == VAT_T_ERROR)
    printf("%s's post \"%s\" was refused: %s\n", who, text,
           vat_atom_name(vat_error_code(v)));
}

int main(int argc, char **argv) {
  static const char *names[] = {"alice", "bob", "mallory"};
  vat_system *sys;
  vat_ref *room_ref, *inboxes[3], *posters[3];
  inbox *transcripts[3];
  vat_config cfg;
  vat_config_default(&cfg);
  if (argc == 3 && strcmp(argv[1], "--trace") == 0)
    cfg.trace_path = argv[2]; /* written when the system shuts down */
  else if (argc != 1) {
    fprintf(stderr, "usage: chat [--trace FILE]\n");
    return 2;
  }
  if (vat_init() != VAT_OK || vat_system_new(&cfg, &sys) != VAT_OK)
    return 1;
  vat_host_spawn(
      sys,
      &(vat_entity_def){.state_size = sizeof(room), .receive = room_receive},
      &room_ref, NULL);
  for (int i = 0; i < 3; i++) {
    vat_host_spawn(sys,
                   &(vat_entity_def){.state_size = sizeof(inbox),
                                     .receive = inbox_receive},
                   &inboxes[i], (void **)&transcripts[i]);
    posters[i] = admit(room_ref, names[i], inboxes[i]);
  }

  post(posters[0], "alice", "hello everyone");
  post(posters[1], "bob", "hi alice");
  post(posters[2], "mallory", "cheap watches, click here");
  ask(room_ref, "kick", vat_string("mallory"));
  post(posters[2], "mallory", "let me back in");
  post(posters[1], "bob", "that's better");

  /* Once the system is quiescent every line has arrived. */
  vat_system_shutdown(sys, 10);
  for (int i = 0; i < 3; i++) {
    printf("--- what %s saw\n", names[i]);
    for (int k = 0; k < transcripts[i]->n; k++)
      printf("%s\n", transcripts[i]->lines[k]);
  }
  vat_system_destroy(sys);
  return 0;
}
