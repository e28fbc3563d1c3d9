/* A host program with its own poll() loop drives a host-driven system.
 *
 * Lines typed on stdin go to a "shouter" vat as dynamic messages; it
 * answers each with a numbered, upper-cased copy, which a "printer" vat in
 * the same system writes out. No thread besides main: every turn runs
 * inside vat_system_run(), called when poll() says stdin or the system's
 * descriptor is ready.
 *
 *   $ printf 'hello\nworld\n' | ./poll_stdin
 *   1: HELLO
 *   2: WORLD
 */
#include <ctype.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <vat.h>

typedef struct shouter {
  vat_ref *printer;
  const vat_atom *line, *print;
  long count;
} shouter;

static void shout(vat_turn *turn, void *state, const vat_atom *selector,
                  vat_value value) {
  shouter *s = state;
  if (selector != s->line)
    return;
  char buf[512];
  size_t n = vat_string_len(value);
  if (n >= sizeof buf)
    n = sizeof buf - 1;
  for (size_t i = 0; i < n; i++)
    buf[i] = (char)toupper((unsigned char)vat_string_data(value)[i]);
  char out[600];
  snprintf(out, sizeof out, "%ld: %.*s", ++s->count, (int)n, buf);
  vat_send_msg(turn, s->printer, s->print, vat_string(out));
}

static void print(vat_turn *turn, void *state, const vat_atom *selector,
                  vat_value value) {
  (void)turn;
  (void)state;
  (void)selector;
  printf("%s\n", vat_string_data(value));
  fflush(stdout);
}

static void check(int rc, const char *what) {
  if (rc != VAT_OK) {
    fprintf(stderr, "%s: %s\n", what, vat_strerror(rc));
    exit(1);
  }
}

int main(void) {
  check(vat_init(), "vat_init");
  vat_config cfg;
  vat_config_default(&cfg);
  cfg.workers = 0; /* host-driven: runs only inside vat_system_run() */
  vat_system *sys;
  check(vat_system_new(&cfg, &sys), "vat_system_new");

  vat_ref *printer, *shouter_ref;
  shouter *s;
  check(
      vat_host_spawn(sys, &(vat_entity_def){.receive = print}, &printer, NULL),
      "spawn printer");
  check(vat_host_spawn(
            sys,
            &(vat_entity_def){.state_size = sizeof(shouter), .receive = shout},
            &shouter_ref, (void **)&s),
        "spawn shouter");
  s->printer = printer;
  s->line = vat_atom_intern("line");
  s->print = vat_atom_intern("print");

  int sys_fd;
  check(vat_system_fd(sys, &sys_fd), "vat_system_fd");
  char *line = NULL;
  size_t cap = 0;
  for (bool more = false;;) {
    struct pollfd fds[2] = {{.fd = 0, .events = POLLIN},
                            {.fd = sys_fd, .events = POLLIN}};
    if (poll(fds, 2, more ? 0 : -1) < 0)
      break;
    if (fds[0].revents & (POLLIN | POLLHUP)) {
      ssize_t n = getline(&line, &cap, stdin);
      if (n < 0)
        break; /* end of input */
      if (n > 0 && line[n - 1] == '\n')
        line[--n] = '\0';
      check(vat_host_send_msg(shouter_ref, s->line, vat_string_n(line, n)),
            "send");
    }
    vat_run_result r;
    check(vat_system_run(sys, 0, 0, &r), "vat_system_run");
    more = r.more;
  }
  free(line);
  /* Shutting down a host-driven system runs it until nothing is left. */
  check(vat_system_shutdown(sys, 5), "vat_system_shutdown");
  vat_system_destroy(sys);
  return 0;
}
