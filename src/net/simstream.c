/* A connection over a simulated link (vat/sim_net.h): its two ends, each
 * the transport (transport.h) of one side's connection vat.
 *
 * A write from one end becomes a segment on its way to the other, due
 * latency (and jitter) later, queued behind the segment written before
 * it; the network (simnet.c) delivers it when due and the link is not
 * partitioned: its bytes go through the end's netstring reader, and each
 * whole frame goes to the vat as net_on_frame, as io.c hands a socket's.
 * An end its vat closes sends FIN after what it wrote (the other side
 * reads end of stream), one it aborts RST (connection reset); an end that
 * heard either, or a reset of the link, drops what comes after. Its vat's
 * end needs no I/O to finish (nothing is held outside the collector but
 * the reader), so net_end finishes at once. */
#define GC_THREADS 1
#include <gc/gc.h>
#include <stdio.h>
#include <string.h>

#include "internal.h"
#include "simnet.h"

static void free_reader(void *obj, void *data) {
  (void)data;
  sim_reader_box *box = obj;
  vat_netstring_reader_free(box->reader);
  box->reader = NULL;
}

static void let_reader_go(sim_end *e) {
  if (e->in != NULL && e->in->reader != NULL) {
    vat_netstring_reader_free(e->in->reader);
    e->in->reader = NULL;
  }
}

bool sim_stream_new(sim_link *link, vat_system *from, uint64_t stream,
                    sim_end *ends[2]) {
  for (int i = 0; i < 2; i++) {
    sim_end *e = GC_MALLOC(sizeof *e);
    if (e == NULL)
      return false;
    e->link = link;
    e->sys = (from == link->a) == (i == 0) ? link->a : link->b;
    e->stream = stream;
    e->side = (unsigned)i;
    ends[i] = e;
  }
  ends[0]->peer = ends[1];
  ends[1]->peer = ends[0];
  return true;
}

int sim_end_attach(void *ctx, vat_ref *conn, const vat_conn_options *o,
                   size_t out_pause, size_t out_max, net_conn_io *out) {
  sim_end *e = ctx;
  /* A box of its own holds the reader, so that its finalizer is on an
   * object that points at nothing finalized: the two ends point at each
   * other, and a cycle of finalized objects is never collected. */
  sim_reader_box *box = GC_MALLOC_ATOMIC(sizeof *box);
  if (box == NULL)
    return VAT_ENOMEM;
  box->reader = vat_netstring_reader_new(o->max_frame);
  if (box->reader == NULL)
    return VAT_ENOMEM;
  GC_REGISTER_FINALIZER(box, free_reader, NULL, NULL, NULL);
  e->in = box;
  e->conn = conn;
  e->out_max = out_max;
  /* Reading is not paused (vat/sim_net.h): the pause only names a full
   * queue's cause, as the socket's does. */
  e->out_resume = out_pause / 2;
  *out = (net_conn_io){e, e, e};
  return VAT_OK;
}

/* --- On the way ----------------------------------------------------------- */

static void drop_all(sim_end *e) {
  for (sim_seg *s = e->head; s != NULL; s = s->next)
    e->link->info.bytes_dropped += s->len;
  e->link->info.bytes_on_the_way -= e->on_the_way;
  e->head = e->tail = NULL;
  e->on_the_way = e->answers_on_the_way = 0;
}

/* Puts a segment on its way to `to`, due after the link's latency and a
 * jitter. The queue keeps the stream's order: a segment drawn less jitter
 * than the one before it waits behind it (sim_end_next looks at the head
 * alone), as TCP hands on bytes in order. */
static int send_seg(sim_end *to, int kind, bool answer, const char *data,
                    size_t len) {
  if (to->frozen || to->gone || to->closed) { /* nobody reads it there */
    to->link->info.bytes_written += len;
    to->link->info.bytes_dropped += len;
    return NET_WRITE_OK;
  }
  sim_seg *s = GC_MALLOC_ATOMIC(sizeof *s + len);
  if (s == NULL || !sim_busy_add(to))
    return NET_WRITE_NOMEM;
  const vat_sim_link_options *o = &to->link->opt;
  uint64_t at = sim_link_now(to->link) + o->latency_ns;
  if (o->jitter_ns > 0)
    at += sim_link_draw(to->link) % (o->jitter_ns + 1);
  s->next = NULL;
  s->at = at;
  s->kind = kind;
  s->answer = answer;
  s->len = len;
  if (len > 0)
    memcpy(s->data, data, len);
  if (to->tail != NULL)
    to->tail->next = s;
  else
    to->head = s;
  to->tail = s;
  to->on_the_way += len;
  if (answer)
    to->answers_on_the_way += len;
  if (to->on_the_way > to->peak)
    to->peak = to->on_the_way;
  to->link->info.bytes_written += len;
  to->link->info.bytes_on_the_way += len;
  return NET_WRITE_OK;
}

uint64_t sim_end_next(const sim_end *e) {
  if (e->head == NULL)
    return UINT64_MAX;
  uint64_t healed = e->link->healed_at;
  return e->head->at > healed ? e->head->at : healed;
}

/* --- Arriving ------------------------------------------------------------- */

static void tell_lost(sim_end *e, const char *what, const char *detail) {
  e->gone = true;
  let_reader_go(e);
  if (e->closed) /* its vat ended it: it knows */
    return;
  size_t n = strlen(what) + (detail ? strlen(detail) + 2 : 0) + 1;
  char *cause = GC_MALLOC_ATOMIC(n);
  if (cause == NULL)
    return;
  snprintf(cause, n, "%s%s%s", what, detail ? ": " : "", detail ? detail : "");
  vat_host_send(e->conn, net_on_lost, cause);
}

static void hand_frame(sim_end *e, const char *frame, size_t len) {
  net_frame *f = GC_MALLOC_ATOMIC(sizeof *f + len + 1);
  if (f == NULL) {
    tell_lost(e, "out of memory", NULL);
    return;
  }
  f->len = len;
  memcpy(f->data, frame, len);
  f->data[len] = '\0';
  e->in_pending += len;
  if (vat_host_send(e->conn, net_on_frame, f) != VAT_OK) {
    e->in_pending -= len;
    tell_lost(e, "system closed", NULL);
  }
}

/* The bytes of one segment, framed: each whole frame to the vat. */
static void take_bytes(sim_end *e, const char *p, size_t left) {
  while (left > 0 && !e->gone) {
    size_t used = 0, len = 0;
    const char *frame = NULL;
    vat_captp_error err;
    int rc =
        vat_netstring_read(e->in->reader, p, left, &used, &frame, &len, &err);
    if (rc < 0) {
      char detail[200];
      snprintf(detail, sizeof detail, "%s at byte %zu",
               vat_captp_err_text(err.code), err.offset);
      tell_lost(e, rc == VAT_EFRAMESIZE ? "frame too large" : "bad frame",
                detail);
      return;
    }
    p += used;
    left -= used;
    if (rc == 1)
      hand_frame(e, frame, len);
  }
}

static uint64_t hash_seg(uint64_t h, const sim_seg *s, bool dropped) {
  h = (h ^ (uint64_t)s->kind ^ (dropped ? 0x100 : 0)) * 0x100000001B3ull;
  for (size_t i = 0; i < s->len; i++)
    h = (h ^ (unsigned char)s->data[i]) * 0x100000001B3ull;
  return h;
}

uint64_t sim_end_deliver(sim_end *e, uint64_t now) {
  uint64_t h = 0xCBF29CE484222325ull ^ e->stream;
  while (e->head != NULL && sim_end_next(e) <= now) {
    sim_seg *s = e->head;
    e->head = s->next;
    if (e->head == NULL)
      e->tail = NULL;
    e->on_the_way -= s->len;
    if (s->answer)
      e->answers_on_the_way -= s->len;
    e->link->info.bytes_on_the_way -= s->len;
    bool dropped = e->gone || e->closed || e->frozen;
    h = hash_seg(h, s, dropped);
    if (dropped) {
      e->link->info.bytes_dropped += s->len;
      continue;
    }
    e->link->info.bytes_delivered += s->len;
    if (s->kind == SIM_DATA)
      take_bytes(e, s->data, s->len);
    else if (s->kind == SIM_FIN)
      tell_lost(e, "end of stream", NULL);
    else
      tell_lost(e, "read", "connection reset by peer");
  }
  return h;
}

void sim_end_reset(sim_end *e) {
  drop_all(e);
  if (!e->gone) /* a reset it had not heard of */
    tell_lost(e, "read", "connection reset by peer");
}

void sim_end_freeze(sim_end *e) {
  e->frozen = true;
  drop_all(e);
  let_reader_go(e);
}

void sim_end_forget(sim_end *e) {
  let_reader_go(e);
}

bool sim_end_done(const sim_end *e) {
  return e->head == NULL && (e->gone || e->closed || e->frozen);
}

/* --- The transport -------------------------------------------------------- */

static void end_run(void *io) {
  (void)io; /* deliveries wait for the network's clock, not for this */
}

static int end_write(void *io, const char *data, size_t len, unsigned flags,
                     size_t *queued) {
  sim_end *e = io;
  /* Reading is never paused (vat/sim_net.h); answers are counted only to
   * name a full queue's cause. */
  *queued = e->peer->on_the_way;
  if (e->closed || e->gone || e->frozen)
    return NET_WRITE_OK; /* ended: nothing more goes out */
  if (*queued > e->out_max)
    return NET_WRITE_FULL;
  return send_seg(e->peer, SIM_DATA, (flags & NET_WRITE_ANSWER) != 0, data,
                  len);
}

static bool end_answers_unread(void *io) {
  sim_end *e = io;
  return e->peer->answers_on_the_way >= e->out_resume;
}

static void end_abort(void *io) {
  sim_end *e = io;
  if (e->closed)
    return;
  e->closed = true;
  if (!e->gone)
    send_seg(e->peer, SIM_RST, false, NULL, 0);
  let_reader_go(e);
}

static void end_frame_done(void *io, size_t len) {
  ((sim_end *)io)->in_pending -= len;
}

static void end_info(void *io, vat_conn_info *out) {
  sim_end *e = io;
  *out = (vat_conn_info){.out_queued = e->peer->on_the_way,
                         .out_peak = e->peer->peak,
                         .in_pending = e->in_pending};
}

static void end_close(void *io) {
  sim_end *e = io;
  if (e->closed)
    return;
  e->closed = true;
  if (!e->gone && !e->frozen)
    send_seg(e->peer, SIM_FIN, false, NULL, 0);
  let_reader_go(e);
}

static bool end_end(void *io) {
  end_close(io);
  return true;
}

static void *end_owned(void *share) {
  return share;
}

static void end_release(void *share) {
  (void)share; /* the collector's: nothing outside it to let go */
}

const net_transport net_sim_transport = {
    .name = "simulated link",
    .run = end_run,
    .write = end_write,
    .abort = end_abort,
    .frame_done = end_frame_done,
    .info = end_info,
    .answers_unread = end_answers_unread,
    .close = end_close,
    .end = end_end,
    .owned = end_owned,
    .release = end_release,
};
