/* The socket side of a connection: on the shared loop's thread with
 * every other connection (loop.h), or on the host's loop
 * (vat_conn_options.loop), run by the host.
 *
 * Reads: bytes go through a netstring reader; the complete frames of a
 * read are copied into one block of collector memory and sent to the
 * connection vat as one net_on_frames message (vat_host_send: the shared loop's
 * thread is registered, being made by the collector's pthread_create; the
 * host's loop thread was registered when it opened the connection, or
 * vat_conn_open failed there). The first failure (end of
 * stream, read or write error, bad frame) sends one net_on_lost and
 * closes the socket; a write that fails because the peer hung up first
 * reads what the peer sent before it went (write_failed). A vat that ended the
 * connection (net_io_end) hears net_on_io_done once the loop side let go, the
 * socket closed: its `closed` promise waits for that.
 *
 * Writes: the connection vat's turns append frames to a queue of chunks
 * (copied into the last chunk the loop has not taken, under a mutex), and
 * wake the loop: on the shared loop
 * they post the connection (net_loop_post), which wakes the loop only
 * when nothing else was posted; on the host's, the connection's own
 * async handle (uv_async_send, a write to an eventfd, never blocking).
 * The loop writes them in order.
 * A close request shuts the stream down after the queued writes; an
 * abort (a peer that does not read) closes at once, dropping them.
 *
 * Pacing: the answers queued and the frames the vat has not taken yet are
 * counted; past out_pause bytes reading stops until they are down to
 * out_resume, and past out_max bytes queued, answers or not, no frame goes
 * (pace_reading, net_io_write).
 *
 * Lifetime: the struct is uncollectable collector memory (scanned, so the
 * conn ref in it keeps the vat reachable while the loop side runs) with
 * three owners: the loop side (its handles, until all are closed), the
 * connection vat, and the vat_conn handle (and, while it is posted, the
 * shared loop's list), so that vat_conn_close may still close the socket after
 * the system shut down. The last to let go frees it. The vat lets go when it
 * ends (its on_stop) or, when its system stopped with it alive and on_stop
 * never runs, when it is collected: its state holds a small finalized
 * object, the net_io_owner; the handle's share is one too. */
#define GC_THREADS 1
#include <errno.h>
#include <gc/gc.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <uv.h>

#include "internal.h"
#include "loop.h"
#include "testpoint.h"

/* A chunk of the output queue: the frames queued one after another, as
 * many as fit. A node per frame was a malloc and a free per frame, the
 * free on the loop's thread; the worker's malloc arena then shrank and
 * grew back at every burst, and its madvise and page faults (TLB
 * shootdowns on every CPU) were 6% of a pipelined call's time. One chunk
 * written is kept for the next (io->spare). */
typedef struct out_buf {
  struct out_buf *next;
  uv_write_t req;
  size_t len;     /* bytes of frames in data */
  size_t cap;     /* bytes data holds */
  size_t answers; /* ...of len, owed to the peer's calls (NET_WRITE_ANSWER) */
  char data[];
} out_buf;

/* A chunk's size (a frame larger gets a chunk of its own size): a run of
 * pipelined frames, ~150 bytes each, in one. */
enum { OUT_CHUNK = 32 * 1024 - sizeof(out_buf) };

struct net_io {
  uv_loop_t *loop; /* the shared loop's, or the host's */
  bool shared;     /* on the shared loop */
  bool opened;     /* shared loop's thread only: the handle is made */
  int fd;          /* the socket, until the shared loop opens its handle */
  net_posted posted;
  union {
    uv_stream_t stream;
    uv_tcp_t tcp;
    uv_pipe_t pipe;
  } s;
  uv_async_t wake; /* the host's loop only */
  uv_shutdown_t shutdown_req;
  vat_ref *conn;
  vat_netstring_reader *reader;
  pthread_mutex_t mu; /* guards head, tail, spare, chunks_out, close_asked,
                         abort_asked, closed */
  out_buf *head, *tail;
  out_buf *spare; /* a chunk written, for the next; NULL once closed */
  /* Chunks the loop took off the queue and has not written or dropped
   * yet: a frame the vat sends straight to the socket would pass them. */
  size_t chunks_out;
  /* The socket, for the vat's sends straight to it (net_io_write); -1
   * if opening it failed (once closing, `closed` stops them). Guarded by
   * mu. */
  int sock;
  bool close_asked; /* the vat asked for a close after the queued writes */
  bool abort_asked; /* ...or at once, dropping them (net_io_abort) */
  bool closed;      /* the handles are closing: do not wake the loop */
  bool tell_done;   /* the vat waits for net_on_io_done (net_io_end) */
  bool loop_done;   /* the loop side let go (loop_side_done) */
  bool finishing;   /* loop thread only: the handles are being closed */
  bool shutting;    /* loop thread only: uv_shutdown is under way */
  int open_handles; /* loop thread only: handles not closed yet */
  /* loop thread only: the read buffer, the shared loop's or (on the
   * host's) this connection's own (malloc'd: never scanned) */
  char *in;
  /* Output: bytes of the frames queued and not yet written (or dropped),
   * added by the vat's turns, taken off by the loop. The limits are set
   * before the loop starts. */
  atomic_size_t out_queued, out_peak;
  /* ...of which frames owed to the peer's calls: its answers. */
  atomic_size_t out_answers;
  /* Input: bytes of the frames sent to the vat that it has not taken yet
   * (net_io_frame_done): the calls whose answers are still to come. */
  atomic_size_t in_pending;
  size_t out_pause, out_resume, out_max;
  bool paused; /* loop thread only: reading stopped for what it holds */
  atomic_bool reading_paused;
  _Atomic uint64_t read_pauses;
  /* Owners: the loop side, the vat, the handle. acq_rel so the last owner
   * sees the others' writes to the struct before it frees it. */
  atomic_int owners;
};

static void release(net_io *io) {
  if (atomic_fetch_sub_explicit(&io->owners, 1, memory_order_acq_rel) != 1)
    return;
  free(io->spare);
  pthread_mutex_destroy(&io->mu);
  GC_FREE(io);
}

/* The loop side lets go. What only it used goes now, not with the last
 * owner: the handle's share may last until the process exits. */
static void loop_side_done(net_io *io) {
  vat_ref *conn = io->conn;
  io->conn = NULL; /* lets the vat become garbage (see net_io_owner) */
  vat_netstring_reader_free(io->reader);
  io->reader = NULL;
  if (!io->shared)
    free(io->in);
  io->in = NULL;
  pthread_mutex_lock(&io->mu);
  io->loop_done = true;
  bool tell = io->tell_done;
  pthread_mutex_unlock(&io->mu);
  /* Last: once told, the vat may end and the program exit. The vat still
   * holds its share, so the struct outlives this. */
  if (tell && conn != NULL)
    vat_host_send(conn, net_on_io_done, NULL);
  release(io);
}

struct net_io_owner {
  net_io *io; /* NULL once released */
};

static void owner_finalize(void *obj, void *data) {
  (void)data;
  net_io_release(obj);
}

net_io_owner *net_io_owner_new(void) {
  net_io_owner *o = GC_MALLOC_ATOMIC(sizeof *o);
  if (o == NULL)
    return NULL;
  o->io = NULL;
  GC_REGISTER_FINALIZER(o, owner_finalize, NULL, NULL, NULL);
  return o;
}

void net_io_owner_set(net_io_owner *o, net_io *io) {
  o->io = io;
}

net_io *net_io_owner_io(net_io_owner *o) {
  return o->io;
}

void net_io_share(net_io *io) {
  atomic_fetch_add_explicit(&io->owners, 1, memory_order_relaxed);
}

void net_io_release(net_io_owner *o) {
  /* The vat's on_stop and the finalizer never run at once: the finalizer
   * runs only once the vat, and so its state, is unreachable. */
  net_io *io = o->io;
  o->io = NULL;
  if (io != NULL)
    release(io);
}

/* --- Ending -------------------------------------------------------------- */

/* Frees chunks written or dropped, but for one kept as the spare while
 * the connection is open (under io->mu), and takes their frames off the
 * output count. */
static void free_queue_locked(net_io *io, out_buf *b) {
  size_t bytes = 0, answers = 0;
  while (b != NULL) {
    out_buf *next = b->next;
    bytes += b->len;
    answers += b->answers;
    if (io->spare == NULL && !io->closed && b->cap == OUT_CHUNK)
      io->spare = b;
    else
      free(b);
    b = next;
  }
  atomic_fetch_sub_explicit(&io->out_queued, bytes, memory_order_relaxed);
  if (answers > 0)
    atomic_fetch_sub(&io->out_answers, answers);
}

/* Frees chunks the loop took off the queue (on_wake), written or dropped. */
static void done_out(net_io *io, out_buf *b) {
  size_t n = 0;
  for (out_buf *f = b; f != NULL; f = f->next)
    n++;
  pthread_mutex_lock(&io->mu);
  io->chunks_out -= n;
  free_queue_locked(io, b);
  pthread_mutex_unlock(&io->mu);
}

/* The last handle closed lets go. */
static void *closed_now(void *h) {
  net_io *io = ((uv_handle_t *)h)->data;
  if (--io->open_handles == 0)
    loop_side_done(io);
  return NULL;
}

static void on_closed(uv_handle_t *h) {
  net_loop_active(closed_now, h);
}

/* Wakes the loop for what was just asked of it: with io->mu held, and
 * not once the handles are closing (io->closed). On the shared loop the
 * post holds a share of io until the loop has taken it (net_io_posted):
 * a connection may be posted after its last handle's close was asked,
 * and must outlive the close's callback. */
static void wake_loop(net_io *io) {
  if (!io->shared) {
    uv_async_send(&io->wake);
    return;
  }
  net_io_share(io);
  if (!net_loop_post(&io->posted)) /* posted already: that post's share */
    atomic_fetch_sub_explicit(&io->owners, 1, memory_order_relaxed);
}

/* Closes the handles; on our own loop the last close lets go. Writes
 * still queued are dropped. */
static void finish(net_io *io) {
  if (io->finishing)
    return;
  io->finishing = true;
  pthread_mutex_lock(&io->mu);
  io->closed = true;
  out_buf *rest = io->head;
  io->head = io->tail = NULL;
  free(io->spare);
  io->spare = NULL;
  free_queue_locked(io, rest);
  pthread_mutex_unlock(&io->mu);
  uv_close((uv_handle_t *)&io->s.stream, on_closed);
  if (!io->shared)
    uv_close((uv_handle_t *)&io->wake, on_closed);
}

/* Tells the vat why the connection ended, once, then closes. A vat that
 * asked for the close knows already. */
static void lost(net_io *io, const char *what, const char *detail) {
  if (io->finishing)
    return;
  bool asked;
  pthread_mutex_lock(&io->mu);
  asked = io->close_asked;
  pthread_mutex_unlock(&io->mu);
  if (!asked) {
    size_t n = strlen(what) + (detail ? strlen(detail) + 2 : 0) + 1;
    char *cause = GC_MALLOC_ATOMIC(n);
    if (cause != NULL) {
      snprintf(cause, n, "%s%s%s", what, detail ? ": " : "",
               detail ? detail : "");
      vat_host_send(io->conn, net_on_lost, cause);
    }
  }
  finish(io);
}

/* --- Pacing ------------------------------------------------------------- */

static void on_alloc(uv_handle_t *h, size_t hint, uv_buf_t *buf);
static void on_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf);

/* What the connection holds for its peer's calls: the answers queued,
 * and the frames read that the vat has not taken yet, whose answers are
 * to come (the loop reads far faster than the vat answers: counting the
 * output alone, a flood of calls was read whole before the first answers
 * queued). Not this side's own calls queued: a side streaming calls to
 * a peer slower than it must still read the peer's answers, or the
 * peer's answers queue, it stops reading too, and the two wait on each
 * other for ever. out_max bounds those. */
static size_t held(net_io *io) {
  return atomic_load(&io->out_answers) + atomic_load(&io->in_pending);
}

/* Reading follows what the connection holds for the peer: a peer that
 * does not read what it asked for is not read from past out_pause bytes,
 * so its further calls wait in its own socket, not here as more answers;
 * reading goes on once it holds out_resume or less. Called on the loop's
 * thread whenever the count may have crossed either mark: after frames
 * were handed to libuv or written, after a read, and when the vat, having
 * taken frames while reading is paused, wakes the loop. */
static void pace_reading(net_io *io) {
  for (int turn = 0; turn < 2; turn++) {
    if (io->shutting || io->finishing) /* reading stopped for good */
      return;
    size_t h = held(io);
    bool pause = io->paused ? h > io->out_resume : h > io->out_pause;
    if (pause == io->paused)
      return;
    int rc = pause ? uv_read_stop(&io->s.stream)
                   : uv_read_start(&io->s.stream, on_alloc, on_read);
    if (rc != 0) {
      lost(io, "read", uv_strerror(rc));
      return;
    }
    io->paused = pause;
    /* Seq_cst, and the count read again after it (the second turn): the
     * vat takes frames off, then reads this flag (net_io_frame_done), so
     * one of the two sees the other and reading cannot stay paused with
     * nothing held. */
    atomic_store(&io->reading_paused, pause);
    if (!pause)
      return;
    atomic_fetch_add_explicit(&io->read_pauses, 1, memory_order_relaxed);
  }
}

void net_io_frame_done(net_io *io, size_t len) {
  atomic_fetch_sub(&io->in_pending, len);
  if (!atomic_load(&io->reading_paused) || held(io) > io->out_resume)
    return;
  pthread_mutex_lock(&io->mu);
  if (!io->closed)
    wake_loop(io); /* on_wake paces the reading */
  pthread_mutex_unlock(&io->mu);
}

/* --- Reading ------------------------------------------------------------- */

#define READ_BUFFER NET_READ_BUFFER

/* One read buffer per loop, or per connection on the host's loop,
 * reused: each read is consumed (framed and copied) before the next. */
static void on_alloc(uv_handle_t *h, size_t hint, uv_buf_t *buf) {
  net_io *io = h->data;
  (void)hint;
  *buf = uv_buf_init(io->in, READ_BUFFER);
}

/* A frame read and not yet handed to the vat: in the read buffer, or
 * (a frame split across reads) in the netstring reader's, which its next
 * read may overwrite. */
typedef struct frame_ref {
  const char *data;
  size_t len;
} frame_ref;

/* Frames handed to the vat in one message at most (their bytes are one
 * read's, or one frame that was split). */
enum { RUN_MAX = 256 };

/* Copies the frames into one block of collector memory and sends it as
 * one message (net_on_frames): one allocation, one message and one turn
 * for every frame of a read. False once the system is closing. */
static bool deliver(net_io *io, const frame_ref *run, size_t n) {
  size_t size = sizeof(net_frames), bytes = 0;
  for (size_t i = 0; i < n; i++) {
    size += net_frame_size(run[i].len);
    bytes += run[i].len;
  }
  net_frames *frames = GC_MALLOC_ATOMIC(size);
  if (frames == NULL)
    return false;
  frames->count = n;
  net_frame *f = net_frames_first(frames);
  for (size_t i = 0; i < n; i++, f = net_frames_next(f)) {
    f->len = run[i].len;
    memcpy(f->data, run[i].data, run[i].len);
    f->data[run[i].len] = '\0';
  }
  atomic_fetch_add(&io->in_pending, bytes);
  /* Fails only once the system is closing: nobody is left to tell. */
  if (vat_host_send(io->conn, net_on_frames, frames) == VAT_OK)
    return true;
  atomic_fetch_sub(&io->in_pending, bytes);
  return false;
}

/* Frames the bytes of one read and hands the complete ones to the vat, in
 * runs; stops once the connection is lost (a bad frame, the system
 * closing), the frames before a bad one handed over first. */
static void consume(net_io *io, const char *p, size_t left) {
  frame_ref run[RUN_MAX];
  size_t n = 0;
  const char *start = p, *stop = p + left;
  while (left > 0 && !io->finishing) {
    size_t used = 0, len = 0;
    const char *frame = NULL;
    vat_captp_error err;
    int rc = vat_netstring_read(io->reader, p, left, &used, &frame, &len, &err);
    if (rc < 0) {
      if (n > 0 && !deliver(io, run, n)) {
        lost(io, "system closed", NULL);
        return;
      }
      char detail[200];
      snprintf(detail, sizeof detail, "%s at byte %zu",
               vat_captp_err_text(err.code), err.offset);
      lost(io, rc == VAT_EFRAMESIZE ? "frame too large" : "bad frame", detail);
      return;
    }
    p += used;
    left -= used;
    if (rc != 1)
      continue;
    run[n++] = (frame_ref){frame, len};
    /* One gathered in the reader's buffer goes before the reader reuses
     * it; the frames in the read buffer stay there until we return. */
    bool in_place = frame >= start && frame < stop;
    if (!in_place || n == RUN_MAX) {
      if (!deliver(io, run, n)) {
        lost(io, "system closed", NULL);
        return;
      }
      n = 0;
    }
  }
  if (n > 0 && !io->finishing && !deliver(io, run, n))
    lost(io, "system closed", NULL);
}

typedef struct {
  uv_stream_t *s;
  ssize_t n;
  const uv_buf_t *buf;
} read_done;

static void *read_now(void *arg) {
  read_done *r = arg;
  net_io *io = r->s->data;
  if (r->n == UV_EOF)
    lost(io, "end of stream", NULL);
  else if (r->n < 0)
    lost(io, "read", uv_strerror((int)r->n));
  else {
    consume(io, r->buf->base, (size_t)r->n);
    pace_reading(io);
  }
  return NULL;
}

static void on_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf) {
  read_done r = {s, n, buf};
  net_loop_active(read_now, &r);
}

/* Reads, now, what the peer sent before it hung up: its last frames go to
 * the vat and its end of stream, or a read error, ends the connection.
 * True when the connection is lost by then; false when nothing more is
 * there (the socket would block). What is left is finite: a peer that
 * hung up sends no more. */
static bool read_the_rest(net_io *io) {
  uv_os_fd_t fd;
  if (uv_fileno((uv_handle_t *)&io->s.stream, &fd) != 0)
    return false;
  while (!io->finishing) {
    ssize_t n = read(fd, io->in, READ_BUFFER);
    if (n > 0) {
      consume(io, io->in, (size_t)n);
    } else if (n == 0) {
      lost(io, "end of stream", NULL);
    } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
      return false;
    } else if (errno != EINTR) {
      lost(io, "read", uv_strerror(uv_translate_sys_error(errno)));
    }
  }
  return true;
}

/* --- Writing ------------------------------------------------------------- */

static void *shutdown_now(void *req) {
  finish(((uv_shutdown_t *)req)->handle->data);
  return NULL;
}

static void on_shutdown(uv_shutdown_t *req, int status) {
  (void)status;
  net_loop_active(shutdown_now, req);
}

/* A write request carries a run of frames (write_run): the first frame's
 * request, the run linked through `next`. */
/* A write failed. When the peer hung up (EPIPE; ECONNRESET when it left
 * some of our bytes unread), what it sent before it went is likely here,
 * unread: its CTP_DISCONNECT, its end of stream. Whether our write or our
 * read fails first is only timing, and those say why the peer went, so
 * they are read first; the write's error is the cause only when they say
 * nothing. */
static void write_failed(net_io *io, int status) {
  if ((status == UV_EPIPE || status == UV_ECONNRESET) && read_the_rest(io))
    return;
  lost(io, "write", uv_strerror(status));
}

typedef struct {
  uv_write_t *req;
  int status;
} write_done;

static void *write_now(void *arg) {
  write_done *w = arg;
  out_buf *b = w->req->data;
  net_io *io = w->req->handle->data;
  done_out(io, b);
  if (w->status < 0 && w->status != UV_ECANCELED)
    write_failed(io, w->status);
  else
    pace_reading(io);
  return NULL;
}

static void on_write(uv_write_t *req, int status) {
  write_done w = {req, status};
  net_loop_active(write_now, &w);
}

enum { WRITE_RUN_MAX = 64 };

/* Writes up to WRITE_RUN_MAX queued chunks from `b` on with one request
 * (one writev): pipelined calls queue many frames between two wake-ups,
 * and a system call each was a fifth of a call's cost. Returns the chunks
 * after the run. */
static out_buf *write_run(net_io *io, out_buf *b) {
  uv_buf_t bufs[WRITE_RUN_MAX];
  unsigned n = 0;
  out_buf *last = b;
  for (out_buf *f = b; f != NULL && n < WRITE_RUN_MAX; f = f->next) {
    bufs[n++] = uv_buf_init(f->data, (unsigned)f->len);
    last = f;
  }
  out_buf *rest = last->next;
  last->next = NULL;
  b->req.data = b;
  /* libuv copies `bufs`; the frames stay ours until on_write. */
  if (io->finishing) {
    done_out(io, b);
    return rest;
  }
  /* A test stops the loop here, with frames taken and not yet written. */
  VAT__TEST_POINT("net.loop.before_write");
  int rc = uv_write(&b->req, &io->s.stream, bufs, n, on_write);
  if (rc != 0) { /* the frames cannot go: the connection is lost */
    done_out(io, b);
    write_failed(io, rc);
  }
  return rest;
}

static void on_wake(net_io *io) {
  pthread_mutex_lock(&io->mu);
  out_buf *b = io->head;
  bool close = io->close_asked, abort = io->abort_asked;
  io->head = io->tail = NULL;
  for (out_buf *f = b; f != NULL; f = f->next)
    io->chunks_out++;
  pthread_mutex_unlock(&io->mu);
  if (abort) { /* writes already handed to libuv are cancelled */
    done_out(io, b);
    finish(io);
    return;
  }
  while (b != NULL)
    b = write_run(io, b);
  pace_reading(io);
  if (close && !io->shutting && !io->finishing) {
    io->shutting = true;
    uv_read_stop(&io->s.stream);
    if (uv_shutdown(&io->shutdown_req, &io->s.stream, on_shutdown) != 0)
      finish(io);
  }
}

/* Nothing queued or on its way: the frame goes straight to the socket,
 * from the vat's turn, without waking the loop. True when nothing is left
 * to queue: it all went, or the connection ended (nothing more goes out).
 * What the socket does not take now is left in *data and *len for the
 * loop, as is a frame whose send fails: the loop's write then fails the
 * same way and tells why (write_failed, which reads what the peer sent
 * first). Only the vat's turns call it, one at a time. */
static bool send_straight(net_io *io, const char **data, size_t *len) {
  pthread_mutex_lock(&io->mu);
  bool done = io->closed || io->close_asked;
  if (!done && io->head == NULL && io->chunks_out == 0 && io->sock >= 0) {
    ssize_t n = send(io->sock, *data, *len, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n == (ssize_t)*len) {
      done = true;
    } else if (n > 0) {
      *data += n;
      *len -= (size_t)n;
    }
  }
  pthread_mutex_unlock(&io->mu);
  return done;
}

int net_io_write(net_io *io, const char *data, size_t len, unsigned flags,
                 size_t *queued) {
  /* Past the hard limit nothing more goes: the queue stays under it plus
   * the one frame that passed it. The loop only takes off. */
  *queued = atomic_load_explicit(&io->out_queued, memory_order_relaxed);
  if (*queued > io->out_max)
    return NET_WRITE_FULL;
  /* A test stops here to let the peer hang up before the write. */
  VAT__TEST_POINT("net.write.before_send");
  if (!(flags & NET_WRITE_MORE) && send_straight(io, &data, &len))
    return NET_WRITE_OK;
  pthread_mutex_lock(&io->mu);
  if (io->closed || io->close_asked) {
    pthread_mutex_unlock(&io->mu);
    return NET_WRITE_OK; /* the connection ended: nothing more goes out */
  }
  /* The last chunk is not the loop's until on_wake takes the queue (under
   * mu), so the frame may go into it. */
  out_buf *b = io->tail;
  if (b == NULL || b->cap - b->len < len) {
    if (len <= OUT_CHUNK && io->spare != NULL) {
      b = io->spare;
      io->spare = NULL;
    } else {
      size_t cap = len > OUT_CHUNK ? len : OUT_CHUNK;
      b = malloc(sizeof *b + cap);
      if (b == NULL) {
        pthread_mutex_unlock(&io->mu);
        return NET_WRITE_NOMEM;
      }
      b->cap = cap;
    }
    b->next = NULL;
    b->len = b->answers = 0;
    if (io->tail)
      io->tail->next = b;
    else
      io->head = b;
    io->tail = b;
  }
  bool first = io->head == b && b->len == 0;
  memcpy(b->data + b->len, data, len);
  b->len += len;
  size_t now =
      atomic_fetch_add_explicit(&io->out_queued, len, memory_order_relaxed) +
      len;
  /* Before the loop can write it and take it off (on_wake, under mu). */
  if (flags & NET_WRITE_ANSWER) {
    b->answers += len;
    atomic_fetch_add(&io->out_answers, len);
  }
  /* The vat's turns are the only writer of the peak. */
  if (now > atomic_load_explicit(&io->out_peak, memory_order_relaxed))
    atomic_store_explicit(&io->out_peak, now, memory_order_relaxed);
  /* Under the mutex: the handles are still open. Only the first frame
   * queued wakes the loop: the loop takes the queue after it was woken,
   * so frames that find it full go with the first. */
  if (first)
    wake_loop(io);
  pthread_mutex_unlock(&io->mu);
  return NET_WRITE_OK;
}

static void close_locked(net_io *io) {
  if (!io->closed && !io->close_asked) {
    io->close_asked = true;
    wake_loop(io);
  }
}

void net_io_abort(net_io *io) {
  pthread_mutex_lock(&io->mu);
  if (!io->closed && !io->abort_asked) {
    io->abort_asked = true;
    wake_loop(io);
  }
  pthread_mutex_unlock(&io->mu);
}

void net_io_close(net_io *io) {
  pthread_mutex_lock(&io->mu);
  close_locked(io);
  pthread_mutex_unlock(&io->mu);
}

bool net_io_end(net_io *io) {
  pthread_mutex_lock(&io->mu);
  close_locked(io);
  bool done = io->loop_done;
  io->tell_done = !done;
  pthread_mutex_unlock(&io->mu);
  return done;
}

void net_io_info(net_io *io, vat_conn_info *out) {
  out->out_queued = atomic_load_explicit(&io->out_queued, memory_order_relaxed);
  out->out_peak = atomic_load_explicit(&io->out_peak, memory_order_relaxed);
  out->in_pending = atomic_load_explicit(&io->in_pending, memory_order_relaxed);
  out->reading_paused =
      atomic_load_explicit(&io->reading_paused, memory_order_relaxed);
  out->read_pauses =
      atomic_load_explicit(&io->read_pauses, memory_order_relaxed);
}

bool net_io_answers_unread(net_io *io) {
  return atomic_load_explicit(&io->out_answers, memory_order_relaxed) >=
         io->out_resume;
}

/* --- Opening ------------------------------------------------------------ */

static int open_stream(net_io *io, int fd) {
  if (uv_guess_handle(fd) == UV_TCP) {
    int rc = uv_tcp_init(io->loop, &io->s.tcp);
    if (rc == 0)
      rc = uv_tcp_open(&io->s.tcp, fd);
    /* Frames are whole messages, written at once: Nagle's wait for more
     * would only add a round trip's delay to every call. */
    return rc ? rc : uv_tcp_nodelay(&io->s.tcp, 1);
  }
  int rc = uv_pipe_init(io->loop, &io->s.pipe, 0);
  return rc ? rc : uv_pipe_open(&io->s.pipe, fd);
}

static void on_async(uv_async_t *h) {
  on_wake(h->data);
}

/* On the shared loop's thread: a posted connection, its socket's handle
 * made the first time. Then what it was posted for, and the post's share
 * let go. */
void net_io_posted(net_posted *p) {
  net_io *io = (net_io *)((char *)p - offsetof(net_io, posted));
  if (!io->opened) {
    io->opened = true;
    io->s.stream.data = io;
    int rc = open_stream(io, io->fd);
    io->open_handles = 1; /* made, even when opening failed: closed too */
    if (rc != 0) {
      pthread_mutex_lock(&io->mu);
      io->sock = -1; /* no send may reach a number reused after this */
      pthread_mutex_unlock(&io->mu);
      close(io->fd); /* not the handle's: libuv took it only on success */
    } else
      rc = uv_read_start(&io->s.stream, on_alloc, on_read);
    io->fd = -1;
    if (rc != 0)
      lost(io, "open", uv_strerror(rc));
  }
  on_wake(io);
  release(io); /* the post's share */
}

/* On the host's loop, opening failed: closes the handles opened so far,
 * the vat never having had its share; the last close callback frees the
 * struct. */
static void abandon(net_io *io) {
  io->closed = true;
  atomic_store_explicit(&io->owners, 1, memory_order_relaxed);
  int opened = io->open_handles;
  uv_close((uv_handle_t *)&io->s.stream, on_closed);
  if (opened > 1)
    uv_close((uv_handle_t *)&io->wake, on_closed);
}

/* The handles are made here, on the host's loop's thread. */
static net_io *open_on_host_loop(net_io *io, int fd) {
  io->in = malloc(READ_BUFFER);
  if (io->in == NULL) {
    close(fd);
    atomic_store_explicit(&io->owners, 1, memory_order_relaxed);
    loop_side_done(io);
    return NULL;
  }
  io->s.stream.data = io;
  io->wake.data = io;
  io->open_handles = 1; /* the stream is closed on failure too */
  if (open_stream(io, fd) != 0) {
    close(fd); /* not the handle's: libuv took it only on success */
    abandon(io);
    return NULL;
  }
  if (uv_async_init(io->loop, &io->wake, on_async) != 0) {
    abandon(io);
    return NULL;
  }
  io->open_handles = 2;
  /* No read callback runs before the caller returns to the loop, after
   * it sent the vat its first message. */
  if (uv_read_start(&io->s.stream, on_alloc, on_read) != 0) {
    abandon(io);
    return NULL;
  }
  return io;
}

net_io *net_io_new(int fd, vat_ref *conn, size_t max_frame, size_t out_pause,
                   size_t out_max, struct uv_loop_s *host_loop) {
  net_io *io = GC_MALLOC_UNCOLLECTABLE(sizeof *io);
  if (io == NULL) {
    close(fd);
    return NULL;
  }
  memset(io, 0, sizeof *io);
  io->conn = conn;
  io->fd = -1;
  io->sock = fd;
  /* A stream socket only: the shared loop opens the handle later, where
   * a refusal could no longer fail the call, and epoll refuses a regular
   * file by aborting the loop's thread. */
  uv_handle_type kind = uv_guess_handle(fd);
  bool stream = kind == UV_TCP || kind == UV_NAMED_PIPE;
  io->reader = vat_netstring_reader_new(max_frame);
  io->out_pause = out_pause;
  io->out_resume = out_pause / 2;
  io->out_max = out_max;
  atomic_init(&io->owners, 2);
  pthread_mutex_init(&io->mu, NULL);
  if (!stream || io->reader == NULL ||
      (host_loop == NULL && !net_loop_start())) {
    close(fd);
    atomic_store_explicit(&io->owners, 1, memory_order_relaxed);
    loop_side_done(io);
    return NULL;
  }
  if (host_loop != NULL) {
    io->loop = host_loop;
    return open_on_host_loop(io, fd);
  }
  /* The handle is made on the loop's thread, when net_io_run posts it. */
  io->shared = true;
  io->loop = net_loop_uv();
  io->in = net_loop_buffer();
  io->fd = fd;
  return io;
}

void net_io_run(net_io *io) {
  if (!io->shared)
    return; /* the host runs its loop */
  pthread_mutex_lock(&io->mu);
  wake_loop(io);
  pthread_mutex_unlock(&io->mu);
}
