/* The net suite's helpers (defined in test_net.c), for its other files:
 * two libvat connections over a socketpair, and a raw peer that writes
 * and reads the bytes of the wire itself. */
#ifndef VAT_TEST_NET_SUPPORT_H
#define VAT_TEST_NET_SUPPORT_H

#include <stddef.h>

#include "vat.h"
#include "vat/net.h"

#define WAIT_S 20.0

/* The object test_net.c serves: add(a, b), echo(x), self(), fail(),
 * hang() (never answered), defer(x) and defer_break(x), call_back(ref). */
extern const vat_entity_def server_def;

typedef struct pair {
  vat_system *sys;
  vat_ref *served; /* A's bootstrap */
  vat_ref *client; /* B's bootstrap */
  vat_conn *a, *b; /* a serves `served`, b serves `client` */
  vat_ref *remote; /* B's proxy for `served` */
} pair;

/** Two connections over a socketpair in a new system, both bootstraps
 *  answered. */
void open_pair(pair *p);
/** Closes both, waits for their ends, and quiesces the system. */
void close_pair(pair *p);
/** The ref `p` resolves to (asserted, within WAIT_S). */
vat_ref *wait_ref(vat_promise *p);
/** A request from the host; the rc of the wait, the value in *out. */
int ask(vat_ref *to, const char *method, vat_value *args, size_t n,
        vat_value *out);
/** Asserts `reason` is disconnected(cause), the cause starting with one
 *  of the '|'-separated prefixes. */
void assert_disconnected(vat_value reason, const char *prefixes);
/** Waits for `c`'s closed promise and asserts it as above. */
void wait_closed(vat_conn *c, const char *cause_prefix);

/* --- A raw peer: the test's end of the socket ---------------------------- */

/** Writes all of `s` (stops when the connection closed its end). */
void raw_write(int fd, const char *s);
/** Writes `json` as one netstring frame. */
void raw_frame(int fd, const char *json);
/** Reads into buf until `want` is in it, `seconds` passed or EOF. */
size_t raw_read_until(int fd, char *buf, size_t size, const char *want,
                      double seconds);
/** As raw_read_until for WAIT_S, asserting `want` came; the bytes read. */
size_t raw_expect(int fd, char *buf, size_t size, const char *want);
/** A new system of 2 workers serving server_def over a socketpair: the
 *  connection on sv[0] in *c, sv[1] the raw peer's. */
vat_system *raw_served(int sv[2], vat_conn **c);
/** A connection on `fd` offering nothing. */
void raw_open(vat_system *sys, int fd, const vat_conn_options *opt,
              vat_conn **c);
/** Sends CTP_CALL q-<q>, method() on `target`, without waiting. */
void raw_send_call(int fd, int q, const char *target, const char *method);
/** The raw peer answers the bootstrap question with its object o+1: the
 *  proxy. */
vat_ref *raw_answer_bootstrap(int raw, vat_conn *c);
/** The raw peer hangs up, the connection ends with it, the system is
 *  quiesced. */
void raw_hang_up(int fd, vat_conn *c, vat_system *sys);

#endif
