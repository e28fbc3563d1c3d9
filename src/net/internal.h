/* The connection's parts, shared by the files of net/ (see README.md). */
#ifndef VAT_NET_INTERNAL_H
#define VAT_NET_INTERNAL_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "vat/caps.h"
#include "vat/captp.h"
#include "vat/net.h"

/* --- table.c: uint64 keys to pointers, in collector memory ------------- */

typedef struct net_table {
  uint64_t *keys; /* 0 marks an empty slot; keys are never 0 */
  void **vals;
  size_t cap, len;
} net_table;

void *net_table_get(const net_table *t, uint64_t key);
/** Adds or replaces; false when memory is exhausted. */
bool net_table_put(net_table *t, uint64_t key, void *val);
/** Removes `key` and returns its value (NULL when absent). */
void *net_table_take(net_table *t, uint64_t key);
/** Calls fn on every entry (the table must not change meanwhile). */
void net_table_each(const net_table *t, void (*fn)(void *ctx, void *val),
                    void *ctx);

/** pipe.c's answer refs and the questions they stand for (see there). */
typedef struct net_pipes {
  net_table refs;  /* an answer ref's address -> its entry */
  size_t sweep_at; /* entries at which those of collected refs go */
} net_pipes;

/* --- io.c: the socket, on the shared loop or the host's ----------------- */

typedef struct net_io net_io;

/** Prepares the I/O of `fd`, which it owns from now on (closed on
 *  failure too); frames will go to `conn` as net_on_frame messages, the
 *  end as one net_on_lost message. `out_pause`, `out_max`: the output
 *  limits (vat_conn_options, checked). `host_loop` NULL: on the shared
 *  loop (loop.h), started if it was not, and the socket opened there once
 *  net_io_run asks; else the host's, and this is called on its thread,
 *  which reads from then on. NULL on failure. */
net_io *net_io_new(int fd, vat_ref *conn, size_t max_frame, size_t out_pause,
                   size_t out_max, struct uv_loop_s *host_loop);
/** Starts reading: called by the connection vat's first turn, so no
 *  frame arrives before the vat is set up (on the host's loop, nothing to
 *  do: the host runs it). */
void net_io_run(net_io *io);
/** Queues bytes (copied) for writing; dropped once the socket closed.
 *  Never blocks for I/O. The connection vat's turns. flags:
 *  NET_WRITE_MORE, more frames follow at once (they queue for the loop,
 *  not straight to the socket); NET_WRITE_ANSWER, the frame is owed to
 *  the peer's calls, and counts towards the reading's pause. *queued: the
 *  bytes queued before these. NET_WRITE_OK, or nothing was queued: no
 *  memory was left for the copy (NET_WRITE_NOMEM), or more than out_max
 *  bytes are queued already (NET_WRITE_FULL: the peer does not read). */
enum { NET_WRITE_OK, NET_WRITE_NOMEM, NET_WRITE_FULL };
enum { NET_WRITE_MORE = 1, NET_WRITE_ANSWER = 2 };
int net_io_write(net_io *io, const char *data, size_t len, unsigned flags,
                 size_t *queued);
/** Closes the socket at once, dropping what is queued (for a peer that
 *  does not read it). Any thread. */
void net_io_abort(net_io *io);
/** The connection vat took a frame of `len` bytes (net_on_frame): it no
 *  longer counts towards the reading's pause. The vat's turns. */
void net_io_frame_done(net_io *io, size_t len);
/** The output queue and reading state, for vat_conn_inspect. Any thread. */
void net_io_info(net_io *io, vat_conn_info *out);
/** Whether the answers queued for the peer are out_resume bytes or more:
 *  the peer lets what it asked for pile up, where a full queue of this
 *  side's own calls is this side sending faster than the peer reads. Any
 *  thread. */
bool net_io_answers_unread(net_io *io);
/** Closes the socket once what was queued is written. Any thread. */
void net_io_close(net_io *io);
/** As net_io_close, for the connection vat ending the connection: returns
 *  true when the loop side is done already (the socket closed, what it
 *  held freed), else false, and it sends the vat one net_on_io_done when
 *  it is. Connection vat's turns only. */
bool net_io_end(net_io *io);
/** The connection vat's share of `io`: released by net_io_release, or
 *  when collected (a vat whose system stopped with it alive). */
typedef struct net_io_owner net_io_owner;
net_io_owner *net_io_owner_new(void);
void net_io_owner_set(net_io_owner *o, net_io *io);
/** The io a share holds; NULL once released. */
net_io *net_io_owner_io(net_io_owner *o);
/** One more owner of `io` (before handing it to a second net_io_owner). */
void net_io_share(net_io *io);
/** The connection vat is done with its io (it may be freed). */
void net_io_release(net_io_owner *o);

/* --- conn.c: the connection vat ---------------------------------------- */

typedef struct net_conn net_conn; /* the connection entity's state */

enum { NET_METHOD_NAMES = 16 }; /* net_conn's cache of method names */

/** A connection's counts, read by vat_conn_inspect from any thread and
 *  kept by its handle after the end: written by the connection vat's
 *  turns alone, so each is a relaxed load and store (net_count_add). */
typedef struct net_counts {
  _Atomic uint64_t frames_in, bytes_in, frames_out, bytes_out;
  _Atomic size_t questions, answers_owed;
} net_counts;

static inline void net_count_add(_Atomic uint64_t *x, uint64_t n) {
  atomic_store_explicit(x, atomic_load_explicit(x, memory_order_relaxed) + n,
                        memory_order_relaxed);
}

static inline void net_count_set(_Atomic size_t *x, size_t n) {
  atomic_store_explicit(x, n, memory_order_relaxed);
}
/** A listener's count of its open connections (socket.c). */
typedef struct net_places net_places;

/** Messages the I/O thread sends the connection vat. `arg` is a net_frame
 *  or, for net_on_lost, a NUL-terminated cause (collector memory). */
typedef struct net_frame {
  size_t len;
  char data[]; /* NUL-terminated */
} net_frame;
void net_on_frame(vat_turn *turn, void *state, void *arg);
/** A run of frames read together, in one block: `count` net_frames one
 *  after the other, each padded to NET_FRAME_ALIGN (net_frames_next).
 *  One message takes them all into the vat, in order: a message, an
 *  allocation and a turn a frame cost ~1k instructions on each side. */
typedef struct net_frames {
  size_t count; /* the frames follow */
} net_frames;
enum { NET_FRAME_ALIGN = 8 };
/** The bytes a frame of `len` takes in a run. */
static inline size_t net_frame_size(size_t len) {
  return (sizeof(net_frame) + len + 1 + NET_FRAME_ALIGN - 1) &
         ~(size_t)(NET_FRAME_ALIGN - 1);
}
static inline net_frame *net_frames_first(net_frames *run) {
  return (net_frame *)(run + 1);
}
static inline net_frame *net_frames_next(net_frame *f) {
  return (net_frame *)((char *)f + net_frame_size(f->len));
}
/** net_on_frame for each frame of a net_frames run. */
void net_on_frames(vat_turn *turn, void *state, void *arg);
void net_on_lost(vat_turn *turn, void *state, void *arg);
void net_on_io_done(vat_turn *turn, void *state, void *arg);
/** Takes the frames that waited while the peer had max_questions waiting
 *  on this side, as long as it has fewer: an answer went back. */
void net_take_waiting_frames(vat_turn *turn, net_conn *c);

/** Frames of the peer's waiting to be taken, oldest first (conn.c). */
typedef struct net_waiting_frame {
  struct net_waiting_frame *next;
  net_frame *frame;
} net_waiting_frame;

/** The numbers of the answers kept for pipelining, oldest first. */
typedef struct net_answer_ring {
  uint64_t *ids;
  size_t cap, head, len;
} net_answer_ring;

struct net_conn {
  const struct net_transport *tp; /* its I/O's calls (transport.h) */
  net_counts *counts;             /* shared with its vat_conn handle */
  void *io;                       /* the transport's */
  void *owner;                    /* the vat's share of io */
  vat_ref *self;
  vat_ref *bootstrap;             /* offered to the peer; may be NULL */
  vat_resolver *remote_bootstrap; /* the peer's, until answered */
  vat_resolver *closed;           /* settled once its socket closed */
  vat_value end_reason;           /* why it ended, for `closed` */
  const char *bootstrap_qid;      /* our CTP_BOOTSTRAP question */
  uint64_t bootstrap_q;           /* its number */
  uint64_t peer_bootstrap_q;      /* the peer's latest CTP_BOOTSTRAP */
  double question_timeout_s;      /* options; 0: none */
  size_t max_questions;           /* options: each way */
  size_t calls_taken; /* options max_calls_taken, at most max_questions */
  size_t max_exports;             /* options: each way */
  vat_captp_format format;        /* what values are written in */
  size_t open_answers;            /* the peer's questions not answered yet */
  size_t open_sends; /* the peer's send-only calls its targets work on */
  bool peer_takes_send_only;  /* its BOOTSTRAP said so (vat/captp.h [10]) */
  uint64_t values_skipped;    /* answers nobody wanted, not decoded */
  net_waiting_frame *waiting; /* read while calls_taken were taken */
  net_waiting_frame *waiting_tail;
  uint64_t next_question, next_export;
  net_table questions;          /* our question number -> net_question */
  net_table answers;            /* their question number -> net_answer */
  net_table watches;            /* a called ref's address -> net_watch */
  const vat_atom *request_label, *resolve, *break_; /* interned once */
  /* The peer's method names lately called (calls.c): a call's name is
   * found here without the process-wide atom table's two locks. Bounded,
   * and gone with the connection, so names from the wire stay weak. */
  const vat_atom *method_names[NET_METHOD_NAMES];
  net_answer_ring kept;         /* which answers are kept, oldest first */
  net_table exports;            /* our export number -> vat_ref */
  net_table export_ids;         /* vat_ref -> export number (as a pointer) */
  net_table imports;            /* their export number -> proxy ref */
  net_table import_ids;         /* proxy ref -> their export number */
  net_table promises;           /* their promise number -> its import */
  net_table import_promise_ids; /* their promise, imported -> its number */
  net_table export_promises;    /* our export number -> vat_promise */
  net_table export_counts;      /* our export number -> times sent */
  net_pipes pipes;              /* answer ref (pipe.c) -> question number */
  const char *iface_label;      /* the label iface was made of (slots.c) */
  const char *iface;            /* "Alleged: " and that label, sanitized */
  bool ended;

  /* timeouts.c */
  double handshake_timeout_s;        /* options, checked; 0: none */
  double idle_timeout_s;             /* options, checked; 0: none */
  struct vat_timer *handshake_timer; /* until the first message */
  unsigned silent_ticks;             /* idle ticks without a message */
  bool heard_first;                  /* a message arrived: the handshake */
  bool heard_since_tick;             /* a message since the last idle tick */

  /* a listener's connection (socket.c) */
  net_places *places; /* the listener's, or NULL */
  bool place_left;    /* it left them */
};

/** A question this side asked: the reply ref of the request it came from
 *  (NULL for a one-way message or the bootstrap). */
typedef struct net_question {
  vat_ref *reply;
  struct vat_timer *timer; /* the question timeout's, or NULL */
} net_question;

/* --- questions.c: this side's questions ---------------------------------- */

/** Registers a question for `reply` and stores its number in *n. Errors:
 *  VAT_EBUSY (max_questions wait already), VAT_ENOMEM. */
int net_ask(vat_turn *turn, net_conn *c, vat_ref *reply, uint64_t *n);
/** Forgets question n (its timeout too) and returns it; NULL if unknown. */
net_question *net_answered(net_conn *c, uint64_t n);

/* --- The peer's questions: answers (calls.c) and watches (watches.c) --- */

typedef struct net_watch net_watch;
typedef struct net_pipelined net_pipelined;

/** One of the peer's questions, from the call to its CTP_RETURN and, kept
 *  for calls the peer pipelines on it, after. A call to one of our refs
 *  gets the reply entity of a request (vat/caps.h) whose state this is:
 *  no promise, no monitor of its own (the target's watch serves every
 *  call to it). */
typedef struct net_answer {
  net_conn *c;
  const char *qid;
  vat_ref *target;     /* the ref the call went to; NULL: none, or not known */
  net_watch *watch;    /* while the target's answer is awaited */
  struct net_answer *watch_prev, *watch_next; /* the watch's list */
  net_pipelined *calls, *calls_last; /* pipelined on it before it settled */
  vat_value settled;   /* once sent: the ref it resolved to, null, or why */
  bool answered;       /* the first answer came: later ones are ignored */
  bool open;           /* not sent yet */
  bool broken;         /* ...it broke with `settled` */
} net_answer;

/** The watch on the vat of `target`, a ref the peer calls: made on the
 *  first call, it monitors that vat once for every call to the ref.
 *  NULL for a ref of the connection's own vat (whose end nobody here
 *  would see) or without memory. Inside a turn of the connection vat. */
net_watch *net_watch_of(vat_turn *turn, net_conn *c, vat_ref *target);
/** `a` waits for an answer from w's vat. */
void net_watch_add(net_watch *w, net_answer *a);
/** `a` is answered. A watch left with no call is let go unless its ref
 *  is exported or the bootstrap (the peer may call it again). */
void net_watch_remove(vat_turn *turn, net_watch *w, net_answer *a);
/** The peer dropped `ref`: its watch goes if no call waits on it. */
void net_watch_drop(vat_turn *turn, net_conn *c, vat_ref *ref);
/** Watches held (for tests). */
size_t net_watches_held(const net_conn *c);
/** The vat `a` called ended first, with `reason` (calls.c). */
void net_answer_target_ended(vat_turn *turn, net_answer *a, vat_value reason);

/** Sends `msg`, encoded with this connection's slots. Inside a turn of the
 *  connection vat. Returns VAT_OK or the encoding's error. */
int net_send(vat_turn *turn, net_conn *c, const vat_captp_msg *msg,
             vat_captp_error *err);
/** Ends the connection with disconnected(cause); `tell_peer` sends a
 *  CTP_DISCONNECT first. */
void net_end(vat_turn *turn, net_conn *c, const char *cause, bool tell_peer);
/** Ends the connection with `reason` in place of disconnected(...). */
void net_end_with(vat_turn *turn, net_conn *c, vat_value reason,
                  bool tell_peer);
/** vat_conn_open, for a connection a listener accepted: it takes one of
 *  the listener's `places` (may be NULL) and holds it until it ends;
 *  VAT_EAGAIN when none is free. */
int net_conn_open(vat_system *sys, int fd, vat_ref *bootstrap,
                  const vat_conn_options *opt, net_places *places,
                  vat_conn **out);
/** The output limits of `opt` (NULL: the defaults), checked: VAT_OK, or
 *  VAT_EINVAL (out_max_bytes below out_pause_bytes; a line on stderr). */
int net_out_limits(const vat_conn_options *opt, size_t *pause, size_t *max);
/** "q-12", "o+3": a slot or question name in collector memory. */
const char *net_name(char kind, char sign, uint64_t n);
/** Parses "q-12" etc.: the number, or 0 when `s` is not kind+sign+digits. */
uint64_t net_parse(const char *s, char kind, char sign);
/** disconnected(cause) */
vat_value net_disconnected(const char *cause);

/* --- timeouts.c: the handshake and idle timeouts ----------------------- */

/** The timeouts of `opt` (NULL: the defaults), checked, in seconds (0:
 *  none): VAT_OK, or VAT_EINVAL (a NaN; a line on stderr). */
int net_timeout_limits(const vat_conn_options *opt, double *handshake_s,
                       double *idle_s);
/** Arms them: the connection vat's first turn. */
void net_timeouts_start(vat_turn *turn, net_conn *c);
/** A message arrived from the peer. */
void net_timeouts_heard(net_conn *c);

/* --- socket.c: a listener's places -------------------------------------- */

/** Takes a place for a new connection: false when `p` is at its cap (the
 *  refusal counted). Any thread. */
bool net_places_take(net_places *p);
/** A connection holding one of `p` ended: its place is free. Any thread. */
void net_places_leave(net_places *p);

/* --- slots.c: imports, exports and proxies ------------------------------ */

/** One of the peer's promises, imported. */
typedef struct net_import_promise {
  vat_promise *promise;
  vat_resolver *resolver;
} net_import_promise;

/** The slot table for values crossing `c`, inside `turn`. */
typedef struct net_slots_ctx {
  vat_turn *turn;
  net_conn *c;
} net_slots_ctx;
vat_captp_slots net_slots(net_slots_ctx *ctx);
/** Values of the peer's answers and settlements left undecoded because
 *  nobody waited for them (for tests). */
uint64_t net_values_skipped(const net_conn *c);
/** Sends selector(value), a message a proxy received, as a CTP_CALL to
 *  `target` ("o-N", or "q-N" for a question): a request's answer settles
 *  it, and pipe.c's records are followed. Inside a turn of the
 *  connection vat. */
void net_call_out(vat_turn *turn, net_conn *c, const char *target,
                  const vat_atom *selector, vat_value value);
/** The peer's CTP_DROP of our export n, received `dec` times. */
void net_drop(vat_turn *turn, net_conn *c, uint64_t n, int64_t dec);
/** The resolver of the peer's promise N, forgotten (NULL if unknown). */
vat_resolver *net_take_promise(net_conn *c, uint64_t n);

/* --- pipe.c: sends on the answer of an unanswered question ------------ */

/** Notes that `answer` stands for question `q` for as long as the ref
 *  lives. False when memory is exhausted. */
bool net_pipes_put(net_pipes *p, vat_ref *answer, uint64_t q);
/** The question `answer` stands for; 0 when none (its call never went). */
uint64_t net_pipes_get(const net_pipes *p, vat_ref *answer);
/** True when `v` is a message for a pipelined answer: stores the answer's
 *  ref and the original message value. */
bool net_pipe_via(vat_value v, vat_ref **answer, vat_value *inner);
/** True when the payload `v` asks for a pipelined answer: stores the
 *  arguments and the answer's ref. */
bool net_pipe_parse(vat_value v, vat_value *args, vat_ref **answer);
/** The connection entity's own messages: those sent to
 *  vat_conn_bootstrap_ref, which go to the bootstrap question. */
void net_bootstrap_receive(vat_turn *turn, void *state,
                           const vat_atom *selector, vat_value value);

/* --- refusals.c ---------------------------------------------------------- */

/** A broken answer's reason as the exception the peer gets (the table in
 *  vat/net.h); `target` is the ref the call went to, or NULL. */
vat_value net_exception(vat_value reason, vat_ref *target);

/* --- calls.c: questions asked by the peer ------------------------------ */

/** Sends `m` (a CTP_RETURN or a CTP_RESOLVE, its id set) settling with
 *  `value`: resolved, or broken, its reason as the exception the peer gets
 *  (net_exception; `target` the ref the call went to, or NULL). A value
 *  that cannot go (no CapData form, past max_exports) goes as an exception
 *  saying so. */
void net_send_outcome(vat_turn *turn, net_conn *c, vat_captp_msg *m,
                      bool resolved, vat_value value, vat_ref *target);
void net_handle_bootstrap(vat_turn *turn, net_conn *c, const char *qid);
void net_handle_call(vat_turn *turn, net_conn *c, const vat_captp_msg *m);
/** A CTP_CALL whose envelope decoded but whose method and arguments did
 *  not (`why`): answered with an exception, the connection kept. */
void net_handle_bad_call(vat_turn *turn, net_conn *c, const vat_captp_msg *m,
                         const char *why);
/** Our question answered: settles whoever asked it. */
void net_handle_return(vat_turn *turn, net_conn *c, const vat_captp_msg *m);
void net_handle_resolve(vat_turn *turn, net_conn *c, const vat_captp_msg *m);
/** The kept answers held whole (a context and question id each): those
 *  not settled yet or settled to a ref, a promise or a reason. For tests:
 *  the rest, settled to data, should hold nothing. */
size_t net_answers_kept_whole(const net_conn *c);

#endif
