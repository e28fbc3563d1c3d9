/* The connection vat: its life cycle, its frames in and out, its end.
 *
 * The vat's first entity (the state below) receives what the I/O thread
 * sends: net_on_frame for each frame, net_on_lost once. Proxies of the
 * peer's objects are more entities of the same vat (slots.c), so all the
 * connection's tables are touched by one vat's turns only, with no lock.
 * Ending the connection breaks what waits on the peer at once, and ends
 * the vat, which makes the proxies dead letters (vat/net.h), once the
 * I/O says the socket is closed (net_on_io_done). */
#define GC_THREADS 1
#include <gc/gc.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "transport.h"
#include "vat/observe.h"

struct vat_conn {
  vat_ref *ref;
  net_counts *counts; /* the connection vat's, kept after it ended */
  vat_promise *bootstrap;
  vat_promise *closed;
  const net_transport *tp;
  void *io; /* the handle's share: closes it after a shutdown */
};

const vat_atom *vat_atom_disconnected(void) {
  return vat_atom_intern("disconnected");
}

const vat_atom *vat_atom_noconnection(void) {
  return vat_atom_intern("noconnection");
}

vat_value net_disconnected(const char *cause) {
  return vat_error(vat_atom_disconnected(), vat_string(cause));
}

void vat_conn_options_default(vat_conn_options *opt) {
  if (opt != NULL)
    *opt = (vat_conn_options){0};
}

int net_out_limits(const vat_conn_options *opt, size_t *pause, size_t *max) {
  size_t p =
      opt && opt->out_pause_bytes ? opt->out_pause_bytes : VAT_CONN_OUT_PAUSE;
  size_t m = opt && opt->out_max_bytes ? opt->out_max_bytes : VAT_CONN_OUT_MAX;
  if (m < p) {
    /* VAT_EINVAL alone would not say which option, nor that a default is
     * one of the two. */
    fprintf(stderr,
            "libvat: vat_conn_options: out_max_bytes (%zu%s) is below "
            "out_pause_bytes (%zu%s)\n",
            m, opt && opt->out_max_bytes ? "" : ", the default", p,
            opt && opt->out_pause_bytes ? "" : ", the default");
    return VAT_EINVAL;
  }
  if (pause != NULL)
    *pause = p;
  if (max != NULL)
    *max = m;
  return VAT_OK;
}

/* Digits written by hand: snprintf cost ~950 instructions a name, and a
 * call names its target and its question. */
const char *net_name(char kind, char sign, uint64_t n) {
  char digits[20];
  size_t len = 0;
  do {
    digits[len++] = (char)('0' + n % 10);
    n /= 10;
  } while (n > 0);
  char *s = GC_MALLOC_ATOMIC(len + 3);
  if (s == NULL)
    return NULL;
  s[0] = kind;
  s[1] = sign;
  for (size_t i = 0; i < len; i++)
    s[2 + i] = digits[len - 1 - i];
  s[2 + len] = '\0';
  return s;
}

uint64_t net_parse(const char *s, char kind, char sign) {
  if (s == NULL || s[0] != kind || s[1] != sign || s[2] < '1' || s[2] > '9')
    return 0;
  uint64_t n = 0;
  for (const char *p = s + 2; *p; p++) {
    if (*p < '0' || *p > '9' || n > (UINT64_MAX - 9) / 10)
      return 0;
    n = n * 10 + (uint64_t)(*p - '0');
  }
  return n;
}

/* --- Sending ------------------------------------------------------------- */

static void end_with(vat_turn *turn, net_conn *c, vat_value reason,
                     bool tell_peer, bool drop);

/* Each thread that runs connection turns encodes into a buffer of its
 * own, reused frame after frame (the socket or the output queue copies
 * the frame before the next is encoded): a fresh collector block per
 * frame was an allocation, and its share of the collections, per call on
 * both sides. Freed when the thread exits; NULL (no key, no memory) falls
 * back to the collector's. */
static pthread_key_t encode_key;
static pthread_once_t encode_once = PTHREAD_ONCE_INIT;
static bool encode_key_made;

static void encode_buf_free(void *b) {
  vat_captp_frame_buf_free(b);
  free(b);
}

static void make_encode_key(void) {
  encode_key_made = pthread_key_create(&encode_key, encode_buf_free) == 0;
}

static vat_captp_frame_buf *encode_buf(void) {
  pthread_once(&encode_once, make_encode_key);
  if (!encode_key_made)
    return NULL;
  vat_captp_frame_buf *b = pthread_getspecific(encode_key);
  if (b == NULL && (b = calloc(1, sizeof *b)) != NULL &&
      pthread_setspecific(encode_key, b) != 0) {
    free(b);
    b = NULL;
  }
  return b;
}

/* A buffer a large frame grew is not kept past it. */
enum { ENCODE_KEEP = 64 * 1024 };

int net_send(vat_turn *turn, net_conn *c, const vat_captp_msg *msg,
             vat_captp_error *err) {
  if (c->ended || c->io == NULL)
    return VAT_ECLOSED;
  net_slots_ctx ctx = {turn, c};
  vat_captp_slots slots = net_slots(&ctx);
  char *frame;
  size_t len, queued;
  vat_captp_frame_buf *buf = encode_buf();
  vat_captp_msg m = *msg;
  m.format = c->format;
  int rc = buf ? vat_captp_encode_frame_into(buf, &m, &slots, &frame, &len, err)
               : vat_captp_encode_frame(&m, &slots, &frame, &len, err);
  if (rc != VAT_OK)
    return rc;
  /* More messages waiting for this vat (beyond the one it handles) are
   * likely more frames: those queue for the loop, which writes them in
   * runs, one system call each; a lone frame goes straight out. */
  unsigned flags = vat_ref_queue_len_max(c->self, 2) > 1 ? NET_WRITE_MORE : 0;
  /* What this side asks on its own account does not pause its reading
   * (see held() in io.c); all else answers the peer. */
  if (msg->type != VAT_CAPTP_CALL && msg->type != VAT_CAPTP_BOOTSTRAP)
    flags |= NET_WRITE_ANSWER;
  net_count_add(&c->counts->frames_out, 1);
  net_count_add(&c->counts->bytes_out, len);
  int wrote = c->tp->write(c->io, frame, len, flags, &queued);
  if (buf != NULL && buf->cap > ENCODE_KEEP) /* the write copied the frame */
    vat_captp_frame_buf_free(buf);
  if (wrote != NET_WRITE_OK) { /* counted before: the peer may read it first */
    net_count_add(&c->counts->frames_out, (uint64_t)-1);
    net_count_add(&c->counts->bytes_out, -(uint64_t)len);
  }
  switch (wrote) {
  case NET_WRITE_OK:
    return VAT_OK;
  case NET_WRITE_NOMEM:
    /* A frame that cannot be queued leaves the peer's view broken: end
     * the connection rather than go on without it. */
    net_end(turn, c, "out of memory", false);
    return VAT_ENOMEM;
  default: {
    /* What the peer does not read cannot be kept for ever: the
     * connection ends, and drops its queue (a close after the queued
     * writes would wait for the peer for ever too). Whose frames filled
     * it says why: answers the peer leaves unread, or this side's own
     * calls sent faster than the peer reads them (a burst of one-way
     * messages to a peer that reads all it can). */
    char cause[80];
    snprintf(cause, sizeof cause, "%s: %zu bytes queued",
             c->tp->answers_unread(c->io)
                 ? "peer does not read"
                 : "sending faster than the peer reads",
             queued);
    end_with(turn, c, vat_error(vat_atom_overloaded(), vat_string(cause)),
             false, true);
    return VAT_ECLOSED;
  }
  }
}

/* --- Ending -------------------------------------------------------------- */

typedef struct end_ctx {
  vat_turn *turn;
  vat_value reason;
} end_ctx;

static void break_question(void *ctx, void *val) {
  end_ctx *e = ctx;
  net_question *q = val;
  if (q->reply != NULL)
    vat_reply_error(e->turn, q->reply, e->reason);
}

static void break_promise(void *ctx, void *val) {
  end_ctx *e = ctx;
  net_import_promise *ip = val;
  vat_break(e->turn, ip->resolver, e->reason);
}

void net_end(vat_turn *turn, net_conn *c, const char *cause, bool tell_peer) {
  if (!c->ended)
    end_with(turn, c, net_disconnected(cause), tell_peer, false);
}

void net_end_with(vat_turn *turn, net_conn *c, vat_value reason,
                  bool tell_peer) {
  end_with(turn, c, reason, tell_peer, false);
}

/* Once, when the socket is closed or the vat ends otherwise: a listener
 * at its cap takes a connection again from then on. */
static void leave_place(net_conn *c) {
  if (c->places != NULL && !c->place_left) {
    c->place_left = true;
    net_places_leave(c->places);
  }
}

/* `drop`: what is queued is dropped and the socket closed at once, for a
 * peer that does not read; else it is written first. */
static void end_with(vat_turn *turn, net_conn *c, vat_value reason,
                     bool tell_peer, bool drop) {
  if (c->ended)
    return;
  if (tell_peer) {
    vat_captp_msg m = {.type = VAT_CAPTP_DISCONNECT,
                       .reason_json = "{\"message\":\"closed\"}"};
    net_send(turn, c, &m, NULL);
    if (c->ended) /* that send ended it (a full queue, no memory) */
      return;
  }
  c->ended = true;
  end_ctx e = {turn, reason};
  net_table_each(&c->questions, break_question, &e);
  net_table_each(&c->promises, break_promise, &e);
  if (c->remote_bootstrap != NULL)
    vat_break(turn, c->remote_bootstrap, reason);
  c->questions = c->promises = c->answers = (net_table){0};
  net_count_set(&c->counts->questions, 0);
  c->exports = c->export_ids = c->watches = (net_table){0};
  c->pipes = (net_pipes){0};
  c->end_reason = reason;
  /* `closed` waits for the socket to close and the I/O to let go of what
   * it holds (vat/net.h): the vat ends then, and not before, so that its
   * I/O can still tell it. */
  if (c->io != NULL && drop)
    c->tp->abort(c->io);
  if (c->io == NULL || c->tp->end(c->io))
    net_on_io_done(turn, c, NULL);
}

void net_on_io_done(vat_turn *turn, void *state, void *arg) {
  (void)arg;
  net_conn *c = state;
  leave_place(c);
  if (c->closed != NULL)
    vat_resolve(turn, c->closed, c->end_reason);
  vat_stop_with(turn, vat_atom_value(vat_atom_noconnection()));
}

static void conn_stop(void *state, vat_value reason) {
  net_conn *c = state;
  (void)reason;
  leave_place(c);
  if (c->io == NULL)
    return;
  c->tp->close(c->io);
  c->tp->release(c->owner);
  c->io = NULL;
  c->ended = true;
}

void net_on_lost(vat_turn *turn, void *state, void *arg) {
  net_end(turn, state, arg, false);
}

static void do_close(vat_turn *turn, void *state, void *arg) {
  (void)arg;
  net_end(turn, state, "closed", true);
}

/* vat_conn_closed's promise is this request's: answered when the
 * connection ends, and broken by the system (with `shutdown`, or the
 * reason the vat failed with) when the vat ends without answering it. */
static void keep_closed(vat_turn *turn, void *state, void *arg,
                        vat_resolver *closed) {
  (void)turn;
  (void)arg;
  ((net_conn *)state)->closed = closed;
}

static void abandon(vat_turn *turn, void *state, void *arg) {
  (void)state;
  (void)arg;
  vat_stop(turn);
}

/* --- Receiving ----------------------------------------------------------- */

static void handle(vat_turn *turn, net_conn *c, const vat_captp_msg *m) {
  switch (m->type) {
  case VAT_CAPTP_BOOTSTRAP:
    if (m->takes_send_only)
      c->peer_takes_send_only = true;
    net_handle_bootstrap(turn, c, m->id);
    break;
  case VAT_CAPTP_CALL:
    net_handle_call(turn, c, m);
    break;
  case VAT_CAPTP_RETURN:
    net_handle_return(turn, c, m);
    break;
  case VAT_CAPTP_RESOLVE:
    net_handle_resolve(turn, c, m);
    break;
  case VAT_CAPTP_DISCONNECT:
    net_end(turn, c, "disconnected by the peer", false);
    break;
  case VAT_CAPTP_DROP: {
    uint64_t n = net_parse(m->id, 'o', '-');
    net_drop(turn, c, n ? n : net_parse(m->id, 'p', '-'), m->dec_refs);
    break;
  }
  case VAT_CAPTP_UNKNOWN: /* a newer peer's message: ignored, as Endo does */
    break;
  }
}

static void take_frame(vat_turn *turn, net_conn *c, net_frame *f) {
  if (c->io != NULL)
    c->tp->frame_done(c->io, f->len);
  if (c->ended)
    return;
  net_count_add(&c->counts->frames_in, 1);
  char header[12];
  net_count_add(&c->counts->bytes_in,
                vat_netstring_header(f->len, header) + f->len + 1);
  /* Counted before it decodes: one that does not ends the connection. */
  net_timeouts_heard(c);
  net_slots_ctx ctx = {turn, c};
  vat_captp_slots slots = net_slots(&ctx);
  vat_captp_msg m;
  vat_captp_error err;
  int rc = vat_captp_decode(f->data, f->len, &slots, &m, &err);
  c->values_skipped += m.value_skipped;
  if (rc == VAT_EBUSY) {
    net_end(turn, c, "limit exceeded: too many imports", true);
    return;
  }
  if (rc != VAT_OK) {
    char why[224];
    snprintf(why, sizeof why, "%s%s%s", vat_captp_err_text(err.code),
             err.detail[0] ? ": " : "", err.detail);
    /* A well-formed message whose value holds something with no libvat
     * form fails alone: a slot this side never exported, or a JS string
     * with a lone surrogate (valid JSON, as Endo sends it, but libvat
     * strings are UTF-8 and a lone surrogate has no UTF-8 form; mending
     * it into U+FFFD would hand on a string the peer never sent). A call
     * is answered with an exception, as a call to an unknown method is;
     * an answer or a settlement breaks what waits for it. Anything else
     * wrong with a message, its envelope or a limit, ends the connection. */
    if (m.value_failed && (rc == VAT_EDECODE || rc == VAT_ENOTFOUND)) {
      if (m.type == VAT_CAPTP_CALL) {
        net_handle_bad_call(turn, c, &m, why);
        return;
      }
      char text[256];
      snprintf(text, sizeof text, "bad result: %s", why);
      m.value = vat_error(vat_atom_intern("TypeError"), vat_string(text));
      m.is_reject = true;
      handle(turn, c, &m);
      return;
    }
    char cause[256];
    snprintf(cause, sizeof cause, "bad message: %s", why);
    net_end(turn, c, cause, true);
    return;
  }
  handle(turn, c, &m);
}

/* The peer's calls its targets work on: questions and send-only calls,
 * each a request in flight. */
static size_t peer_calls_open(const net_conn *c) {
  return c->open_answers + c->open_sends;
}

/* While the peer has calls_taken waiting on this side its frames wait,
 * in order, and stay counted as held for it (net_io_frame_done not yet
 * called), so that past out_pause_bytes of them reading pauses and its
 * further frames wait in its own socket. Ending the connection at the
 * limit instead cut off a client that streams one-way messages (each a
 * question on the wire) to a server slower than it. Every frame waits,
 * not only calls: CapTP's messages take effect in the order sent. */
void net_on_frame(vat_turn *turn, void *state, void *arg) {
  net_conn *c = state;
  net_frame *f = arg;
  if (!c->ended &&
      (c->waiting != NULL || peer_calls_open(c) >= c->calls_taken)) {
    net_waiting_frame *w = GC_MALLOC(sizeof *w);
    if (w != NULL) {
      w->frame = f;
      if (c->waiting == NULL)
        c->waiting = w;
      else
        c->waiting_tail->next = w;
      c->waiting_tail = w;
      return;
    }
    net_end(turn, c, "out of memory", true);
  }
  take_frame(turn, c, f);
}

void net_on_frames(vat_turn *turn, void *state, void *arg) {
  net_frames *run = arg;
  net_frame *f = net_frames_first(run);
  for (size_t i = 0; i < run->count; i++, f = net_frames_next(f))
    net_on_frame(turn, state, f);
}

void net_take_waiting_frames(vat_turn *turn, net_conn *c) {
  while (c->waiting != NULL && peer_calls_open(c) < c->calls_taken) {
    net_waiting_frame *w = c->waiting;
    c->waiting = w->next;
    take_frame(turn, c, w->frame);
  }
}

/* The first turn: ask for the peer's bootstrap. */
static void start(vat_turn *turn, void *state, void *arg) {
  net_conn *c = state;
  (void)arg;
  c->self = vat_self(turn);
  c->tp->run(c->io);
  net_timeouts_start(turn, c);
  uint64_t n;
  if (net_ask(turn, c, NULL, &n) != VAT_OK ||
      (c->bootstrap_qid = net_name('q', '-', n)) == NULL) {
    net_end(turn, c, "out of memory", false);
    return;
  }
  c->bootstrap_q = n;
  /* Every libvat side takes the peer's send-only calls. */
  vat_captp_msg m = {.type = VAT_CAPTP_BOOTSTRAP,
                     .id = c->bootstrap_qid,
                     .takes_send_only = true};
  net_send(turn, c, &m, NULL);
}

/* --- Opening ------------------------------------------------------------- */

static const vat_entity_def conn_def = {
    .state_size = sizeof(net_conn),
    .receive = net_bootstrap_receive,
    .on_stop = conn_stop,
    .label = "captp",
};

int vat_conn_open(vat_system *sys, int fd, vat_ref *bootstrap,
                  const vat_conn_options *opt, vat_conn **out) {
  return net_conn_open(sys, fd, bootstrap, opt, NULL, out);
}

int net_conn_open(vat_system *sys, int fd, vat_ref *bootstrap,
                  const vat_conn_options *opt, net_places *places,
                  vat_conn **out) {
  if (fd < 0)
    return VAT_EINVAL;
  return net_conn_open_with(sys, bootstrap, opt, places, &net_socket_transport,
                            net_socket_attach, &fd, out);
}

int net_conn_open_with(vat_system *sys, vat_ref *bootstrap,
                       const vat_conn_options *opt, net_places *places,
                       const net_transport *tp, net_attach_fn attach, void *ctx,
                       vat_conn **out) {
  size_t out_pause, out_max;
  double handshake_s, idle_s;
  if (sys == NULL || out == NULL)
    return VAT_EINVAL;
  int rc = net_out_limits(opt, &out_pause, &out_max);
  if (rc == VAT_OK)
    rc = net_timeout_limits(opt, &handshake_s, &idle_s);
  if (rc != VAT_OK)
    return rc;
  vat_conn_options o;
  vat_conn_options_default(&o);
  if (opt != NULL)
    o = *opt;
  vat_entity_def def = conn_def;
  if (o.label != NULL)
    def.label = o.label;
  /* The spawn first: it checks the calling thread may use the library
   * (VAT_ENOTREGISTERED), which the collector's allocations below need. */
  net_conn *c;
  vat_ref *ref;
  if (places != NULL && !net_places_take(places))
    return VAT_EAGAIN;
  rc = vat_host_spawn(sys, &def, &ref, (void **)&c);
  if (rc != VAT_OK) {
    if (places != NULL)
      net_places_leave(places);
    return rc;
  }
  /* From here every failure ends the vat (`abandon`), which frees it. */
  c->places = places;
  vat_conn *h = GC_MALLOC(sizeof *h);
  vat_resolver *boot = NULL;
  if (h == NULL || (h->counts = GC_MALLOC_ATOMIC(sizeof *h->counts)) == NULL ||
      vat_promise_new(&h->bootstrap, &boot) != VAT_OK) {
    vat_host_send(ref, abandon, NULL);
    return VAT_ENOMEM;
  }
  h->ref = ref;
  *h->counts = (net_counts){0};
  c->counts = h->counts;
  /* Watched: a connection's end is expected, not a crash to report. */
  vat_promise *down;
  rc = vat_host_monitor(h->ref, NULL, &down);
  /* Sent before `start`, so it is kept before anything can end the
   * connection (one host thread's messages arrive in order). */
  if (rc == VAT_OK)
    rc = vat_host_call(h->ref, keep_closed, NULL, 0, &h->closed);
  if (rc != VAT_OK) {
    vat_host_send(h->ref, abandon, NULL);
    return rc;
  }
  c->bootstrap = bootstrap;
  c->remote_bootstrap = boot;
  c->next_question = c->next_export = 1;
  c->question_timeout_s = o.question_timeout_s > 0 ? o.question_timeout_s : 0;
  c->handshake_timeout_s = handshake_s;
  c->idle_timeout_s = idle_s;
  c->max_questions = o.max_questions ? o.max_questions : VAT_CONN_MAX_QUESTIONS;
  c->calls_taken =
      o.max_calls_taken ? o.max_calls_taken : VAT_CONN_MAX_CALLS_TAKEN;
  if (c->calls_taken > c->max_questions)
    c->calls_taken = c->max_questions;
  c->max_exports = o.max_exports ? o.max_exports : VAT_CONN_MAX_EXPORTS;
  c->format = o.write_capdata ? VAT_CAPTP_CAPDATA : VAT_CAPTP_SMALLCAPS;
  /* Each call from the peer is a request (vat/caps.h) answered by
   * "resolve" or "break": interned once, not three times a call. */
  c->request_label = vat_atom_intern("vat.request");
  c->resolve = vat_atom_intern("resolve");
  c->break_ = vat_atom_intern("break");
  c->tp = h->tp = tp;
  net_conn_io io;
  rc = attach(ctx, h->ref, &o, out_pause, out_max, &io);
  if (rc != VAT_OK) {
    c->ended = true;
    vat_host_send(h->ref, abandon, NULL);
    return rc;
  }
  c->io = io.io;
  c->owner = io.vat_share;
  h->io = io.handle_share;
  rc = vat_host_send(h->ref, start, NULL);
  if (rc != VAT_OK)
    return rc;
  *out = h;
  return VAT_OK;
}

vat_promise *vat_conn_bootstrap(vat_conn *conn) {
  return conn ? conn->bootstrap : NULL;
}

vat_ref *vat_conn_bootstrap_ref(vat_conn *conn) {
  return conn ? conn->ref : NULL;
}

int vat_conn_inspect(vat_conn *conn, vat_conn_info *out) {
  if (conn == NULL || out == NULL)
    return VAT_EINVAL;
  *out = (vat_conn_info){0};
  void *io = conn->tp->owned(conn->io);
  if (io != NULL)
    conn->tp->info(io, out);
  const net_counts *k = conn->counts;
  out->frames_in = atomic_load_explicit(&k->frames_in, memory_order_relaxed);
  out->bytes_in = atomic_load_explicit(&k->bytes_in, memory_order_relaxed);
  out->frames_out = atomic_load_explicit(&k->frames_out, memory_order_relaxed);
  out->bytes_out = atomic_load_explicit(&k->bytes_out, memory_order_relaxed);
  out->questions = atomic_load_explicit(&k->questions, memory_order_relaxed);
  out->answers_owed =
      atomic_load_explicit(&k->answers_owed, memory_order_relaxed);
  return VAT_OK;
}

vat_promise *vat_conn_closed(vat_conn *conn) {
  return conn ? conn->closed : NULL;
}

int vat_conn_close(vat_conn *conn) {
  if (conn == NULL)
    return VAT_EINVAL;
  int rc = vat_host_send(conn->ref, do_close, NULL);
  if (rc != VAT_ECLOSED)
    return rc;
  /* The system is shutting down or gone: no turn will end the connection,
   * so its socket is closed from here, or it would hold its thread, or
   * the host's loop, open for ever. */
  void *io = conn->tp->owned(conn->io);
  if (io != NULL)
    conn->tp->close(io);
  return VAT_OK;
}
