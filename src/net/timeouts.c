/* The connection's clocks against a peer that says nothing: the handshake
 * timeout (no message since the connection opened) and the idle timeout
 * (no message for a while since). Both are timers of the connection vat
 * (vat_later, vat_every), as the question timeout is (questions.c), so
 * they run on the library's I/O thread and on the host's loop alike, and
 * on a deterministic system's virtual clock; the vat's end cancels them.
 *
 * The handshake. This side asks for the peer's bootstrap in the vat's
 * first turn (conn.c, `start`); a peer that speaks CapTP answers it, or
 * asks its own, at once. So the handshake is done at the first message
 * the peer sends that decodes (a frame that does not ends the connection
 * anyway): bytes that never make a frame, or a frame dribbled a byte at a
 * time, do not count.
 *
 * The idle timeout ticks four times a period, as Erlang's net_kernel
 * does, rather than re-arming a timer at every frame: a frame costs one
 * store, and the connection ends between 1 and 1.25 periods after the
 * last one. */
#define GC_THREADS 1
#include <gc/gc.h>
#include <math.h>
#include <stdio.h>

#include "internal.h"
#include "transport.h"
#include "vat/timer.h"

enum { IDLE_TICKS = 4 }; /* ticks a period; this many silent ones end it */

/* A negative or infinite value asks for no limit; NaN is no number. */
static int one_timeout(const char *name, double v, double if_zero,
                       double *out) {
  if (isnan(v)) {
    fprintf(stderr, "libvat: vat_conn_options: %s is NaN\n", name);
    return VAT_EINVAL;
  }
  if (v == 0)
    v = if_zero;
  *out = v > 0 && isfinite(v) ? v : 0;
  return VAT_OK;
}

int net_timeout_limits(const vat_conn_options *opt, double *handshake_s,
                       double *idle_s) {
  double h, i;
  int rc =
      one_timeout("handshake_timeout_s", opt ? opt->handshake_timeout_s : 0,
                  VAT_CONN_HANDSHAKE_TIMEOUT, &h);
  if (rc == VAT_OK)
    rc = one_timeout("idle_timeout_s", opt ? opt->idle_timeout_s : 0, 0, &i);
  if (rc != VAT_OK)
    return rc;
  if (handshake_s != NULL)
    *handshake_s = h;
  if (idle_s != NULL)
    *idle_s = i;
  return VAT_OK;
}

static void end_timed_out(vat_turn *turn, net_conn *c, const char *what,
                          double s) {
  char cause[96];
  snprintf(cause, sizeof cause, "%s: no message from the peer %s %g s", what,
           what[0] == 'h' ? "within" : "for", s);
  net_end_with(turn, c, vat_error(vat_atom_timeout(), vat_string(cause)), true);
}

static void handshake_expired(vat_turn *turn, void *state, void *arg) {
  net_conn *c = state;
  (void)arg;
  c->handshake_timer = NULL;
  if (!c->heard_first && !c->ended)
    end_timed_out(turn, c, "handshake", c->handshake_timeout_s);
}

/* A tick counts as heard while the peer waits on this side (a call of its
 * unanswered: the silence is ours), or while this side does not read it
 * (out_pause_bytes: what it sends waits in its socket). Questions this
 * side asked do not: a peer that owes answers and says nothing is what
 * the timeout is for. */
static void idle_tick(vat_turn *turn, void *state, void *arg) {
  net_conn *c = state;
  (void)arg;
  if (c->ended)
    return;
  vat_conn_info io = {0};
  if (c->io != NULL)
    c->tp->info(c->io, &io);
  if (c->heard_since_tick || c->open_answers > 0 || io.reading_paused ||
      io.in_pending > 0) {
    c->heard_since_tick = false;
    c->silent_ticks = 0;
    return;
  }
  if (++c->silent_ticks >= IDLE_TICKS)
    end_timed_out(turn, c, "idle", c->idle_timeout_s);
}

void net_timeouts_start(vat_turn *turn, net_conn *c) {
  if (c->handshake_timeout_s > 0)
    vat_later(turn, c->handshake_timeout_s, c->self, handshake_expired, NULL,
              &c->handshake_timer);
  if (c->idle_timeout_s > 0)
    vat_every(turn, c->idle_timeout_s / IDLE_TICKS, c->self, idle_tick, NULL,
              NULL);
}

void net_timeouts_heard(net_conn *c) {
  c->heard_since_tick = true;
  if (!c->heard_first) {
    c->heard_first = true;
    if (c->handshake_timer != NULL) {
      vat_timer_cancel(c->handshake_timer);
      c->handshake_timer = NULL;
    }
  }
}
