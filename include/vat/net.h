/* libvat — CapTP connections: refs across processes.
 *
 * A connection speaks CapTP as Endo (`@endo/captp` 4.5) does, over a
 * connected byte stream (TCP or a Unix socket), to another libvat process
 * or to a JavaScript program. Each side offers one bootstrap ref; the other
 * side gets a promise for it and, from there, refs to whatever objects the
 * calls return.
 *
 * Link with libvat-net (`pkg-config --cflags --libs libvat-net`): the
 * connections and the wire format are a library of their own on top of
 * libvat, which alone loads neither libuv nor jansson.
 *
 * The connection is a vat. Refs imported from the peer ("proxies") are
 * ordinary refs to entities of that vat: a dynamic message sent to one
 * (vat_send_msg) becomes a CTP_CALL whose answer is ignored; a request in
 * message form (vat_request, vat/caps.h) becomes a CTP_CALL whose
 * CTP_RETURN settles the caller's promise. The selector is the method
 * name; the payload is the argument list (a payload that is not a list is
 * sent as the one argument). A call from the peer to a ref this side
 * exported arrives as vat_request(ref, method, args-list) and its answer,
 * once settled, goes back as CTP_RETURN (an error or a broken promise as
 * the exception). Refs inside values are exported as needed: the same ref
 * sent twice keeps its slot, the same slot received twice is the same
 * proxy, and a proxy sent back to its own side arrives as the original
 * ref. A function message (vat_send, vat_call) sent to a proxy runs on the
 * proxy's state and is not forwarded: use selectors.
 *
 * The I/O runs on a libuv loop: by default on one loop of the library's
 * own for the sockets of every connection in the process, which idle
 * workers of any system poll themselves (vat/host.h's idle poller: a frame
 * a worker reads runs its turn on that worker, with no other thread
 * woken), and a thread of the library's while none does (the first
 * connection starts it; it stays for the life of the process, asleep when
 * no connection is open); or on the host's own loop (options `loop`, see
 * "The host's loop" below). Threads do not grow with connections: an
 * idle connection costs about 7 KiB. Frames become turns of the
 * connection vat. A frame its turn sends goes straight to the socket
 * when nothing is queued before it and no more messages wait for the
 * vat (a call at a time costs no wake-up of the loop); otherwise, or
 * what the socket does not take at once, is queued for the loop, which
 * writes what queued in runs. The send never waits, so no worker ever
 * blocks on the network.
 *
 * A call from the peer whose message is well formed but whose method and
 * arguments do not decode fails alone: it is answered with the exception
 * TypeError("bad argument: ...") and the connection goes on. So fail a
 * slot naming an export this side does not have, and a JS string holding
 * a lone surrogate (Endo sends it as a valid JSON escape, but a libvat
 * string is UTF-8, where a lone surrogate has no form). Likewise an
 * answer (CTP_RETURN) or a promise's settlement (CTP_RESOLVE) whose value
 * does not decode breaks that question or promise with TypeError("bad
 * result: ...").
 *
 * Each ref this side exports is described to the peer as "Alleged: LABEL"
 * (capdata's slot "iface", which Endo shows when it prints the remotable:
 * getInterfaceOf), LABEL being the label of the ref's vat (vat/observe.h;
 * every entity of a vat shares it), or "Alleged: libvat" for a vat
 * without one. A label is the program's text, shown to the peer: it goes
 * bounded as the library keeps it (VAT_LABEL_MAX bytes, cut before a
 * character that does not fit), and a control character or a byte that
 * is not UTF-8 is written '?', so a frame stays valid JSON text.
 *
 * Refusals. A call from the peer that fails is answered with an exception
 * whose name and message tell the peer why. A JavaScript peer (Endo's
 * marshal) keeps only its own error names (Error, TypeError, RangeError,
 * ReferenceError, SyntaxError, EvalError, URIError, AggregateError) and
 * makes any other an Error; a libvat peer reads the name back as the
 * error's code and the message as its payload. So (the first row that
 * applies):
 *
 *   the call's answer broke with       name on the wire  message
 *   ---------------------------------  ----------------  -------------------
 *   an error named as JS names them    unchanged         unchanged
 *   a value that does not decode       TypeError         "bad argument: ..."
 *   refused(x): a facet without the    TypeError         "refused: x"
 *     method, a membrane's refusal
 *   revoked(...): a caretaker or       revoked (JS:      "revoked"
 *     membrane revoked                 Error)
 *   the exit reason of the vat the     the reason's      "vat ended: REASON"
 *     call went to, or any of normal,  code (JS: Error)  (e.g. "vat ended:
 *     killed, noproc, noconnection,                      killed")
 *     shutdown, overloaded
 *   limit(...), or an answer that      RangeError        "limit: ..."
 *     would export past max_exports
 *   a target this side never exported  Error             "unknown target o-N"
 *     (or forgot after CTP_DROP), or
 *     an answer no longer kept
 *   any other error code(s), an atom   code (JS: Error)  "code: s", "code"
 *   any other value v                  Error             "" (v as "payload")
 *
 * (A reason whose payload is neither null, a string nor an atom keeps its
 * fields and its message as they are.) To a JS caller the start of the
 * message, up to the first ':', tells the cases apart. A libvat entity
 * has no list of methods: what it answers to a selector it does not know
 * is its own affair (a TypeError says it as JS would); a facet
 * (vat/caps.h) refuses those it does not let through, as above. A promise
 * this side exported that breaks (CTP_RESOLVE) goes as an answer does,
 * its reason by the same table (no call's target: an ended vat's row is
 * for the reasons only an ended vat gives), so a peer handed a promise
 * tells refusals apart as one that asked does. An answer or a settlement
 * that cannot go either way is an exception: Error("the value has no
 * CapData form: ...") (a string that is not UTF-8, say), or
 * RangeError("limit: too many exports"). The other way, the peer's
 * exception (CTP_RETURN) and its rejection (CTP_RESOLVE) break ours with
 * the reason as it decodes, alike.
 *
 * When the connection ends (end of stream, a read or write error, a
 * CTP_DISCONNECT from the peer, a frame that is malformed or over the limit,
 * any other message that does not decode (a bad value inside a call, an
 * answer or a settlement fails only that one, below), a limit the peer
 * exceeded, vat_conn_close), every question still waiting on the peer breaks
 * with the error disconnected(cause) (code vat_atom_disconnected(), the
 * payload a string naming the cause), as does the bootstrap promise if it is
 * still pending. A write that fails because the peer hung up (EPIPE,
 * ECONNRESET) is not the cause when the peer said why first: what it sent
 * before it went is read, so its CTP_DISCONNECT gives "disconnected by the
 * peer" and its end of stream "end of stream", whichever of the two sides'
 * writes came first. Then, once the socket is closed and the connection's
 * I/O has let go of what it held (what was queued before a vat_conn_close is
 * written first), vat_conn_closed resolves with that error (a system shut
 * down with the connection open breaks it with `shutdown` instead) and the
 * connection vat ends with the reason `noconnection`, as Erlang reports a
 * lost node: monitors held on its proxies fire with it, later messages to
 * them are dead letters, and requests sent to them break with it (in
 * between, requests to them break with disconnected("closed")). So a program
 * may exit, or count its descriptors, as soon as vat_conn_closed settles. A
 * peer that never reads holds a close that has writes queued, and with it
 * the promise. A peer that does not read its answers is not read from
 * meanwhile (options out_pause_bytes), and the connection ends with
 * overloaded(...) once the output queued for it passes options
 * out_max_bytes: what a connection holds for its peer is bounded, and the
 * other connections of its system go on. Nor is a peer that says nothing
 * kept for ever: options handshake_timeout_s (10 s by default) and
 * idle_timeout_s end its connection with timeout(...) in place of
 * disconnected(cause), and a listener's max_connections bounds how many it
 * holds at once.
 *
 * Promises inside values cross too: a local promise is exported ("p+N")
 * and the peer told how it settles (CTP_RESOLVE) once it does; a promise
 * of the peer's arrives as a local promise that its CTP_RESOLVE settles.
 * Calls the peer pipelines on this side's answers (target q-N) are
 * delivered once the answer settles; the last max_questions answers are
 * kept for that (Endo keeps all, which a long connection cannot afford).
 *
 * CTP_DROP from the peer gives back references to an export; when all it
 * was sent are given back the export is forgotten both ways (sent again,
 * the ref gets a new slot). This side never sends CTP_DROP (Endo's
 * exporter mishandles them): proxies live as long as the connection.
 *
 * The host's loop. A program built on libuv sets options `loop` to its
 * uv_loop_t, and the connection's socket handles (a stream and an async
 * handle; a listener's poll handle) live on that loop, run by the host:
 *  - The loop's thread opens the connection (vat_conn_open, vat_connect,
 *    vat_listener_accept, or vat_listener_serve's callback) and must be
 *    registered with the library (vat_thread_register; the thread that
 *    called vat_init is): that is checked there (VAT_ENOTREGISTERED), and
 *    it reads there (vat_host_send) from then on. It must stay registered
 *    and run the loop while the connection lives; nothing reads or writes
 *    otherwise. libuv is not thread-safe: no other thread may run that
 *    loop or touch its handles meanwhile.
 *  - Vats' turns (workers, or the thread inside vat_system_run) only queue
 *    frames and wake the loop with uv_async_send: any thread may send.
 *    vat_conn_close, vat_conn_bootstrap and vat_conn_closed stay callable
 *    from any host thread; a host thread that waits (vat_promise_wait) on
 *    the loop's thread stops the loop, and so the connection: run the loop
 *    until the promise settles instead (vat_promise_peek).
 *  - With a system that has workers, the connection's turns run on the
 *    workers and the loop's thread does the I/O only. A host-driven
 *    system (vat/host.h) may be run by the same loop, polling
 *    vat_system_fd and timing vat_system_next_timer as the libuv example
 *    does: one thread, one loop for the vats and the sockets.
 *  - Writes to a socket the peer closed raise SIGPIPE on the loop's
 *    thread, which the library does not touch there: the host ignores or
 *    blocks SIGPIPE (on its own thread the library blocks it).
 *  - Before closing its loop, the host ends every connection on it
 *    (vat_conn_close, or the peer's end) and every listener
 *    (vat_listener_close) and runs the loop until their handles are closed:
 *    a connection's are closed by the time vat_conn_closed settles, so
 *    uv_run returns once the host's own handles are closed too, and
 *    uv_loop_close then returns 0. A system shut down with a connection
 *    open leaves no turn to end it: vat_conn_close then closes its socket
 *    directly.
 *
 * Built when the library has CapTP (jansson) and libuv (meson feature
 * option `net`); not included by <vat.h>.
 */
#ifndef VAT_NET_H
#define VAT_NET_H

#include <stddef.h>
#include <stdint.h>

#include "vat/core.h"
#include "vat/promise.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct vat_conn vat_conn;
typedef struct vat_listener vat_listener;

typedef struct vat_conn_options {
  /** Largest frame accepted from the peer, in payload bytes. A larger one
   *  ends the connection. 0: VAT_NETSTRING_DEFAULT_MAX (1 MiB). */
  size_t max_frame;
  /** The connection vat's label (vat/observe.h); NULL: "captp". */
  const char *label;
  /** Listen and connect: allow an address that is not loopback. Off by
   *  default, so a program does not expose its objects by accident. */
  bool allow_remote;
  /** Seconds after which a question this side asked breaks with `timeout`
   *  if the peer has not answered (Endo never answers some calls). 0: no
   *  limit but the request's own timeout and the connection's end. */
  double question_timeout_s;
  /** Questions waiting at once, each way (0: VAT_CONN_MAX_QUESTIONS). One
   *  more request from this side breaks with the error limit(...). While
   *  the peer has this many waiting on this side (or max_calls_taken,
   *  lower by default), what it sends next waits,
   *  in order and not yet taken, until one of them is answered: so a peer
   *  that streams calls to a slower server is held back, not cut off. What
   *  waits counts as held for the peer (out_pause_bytes): past that,
   *  reading pauses and its further frames wait in its own socket. (Calls
   *  of the peer's whose answers wait on this side's questions to it wait,
   *  when the peer's answers to those came after the limit, until this
   *  side's question timeout breaks them.) A one-way message
   *  from this side (vat_send_msg to a proxy) waits for nothing and does
   *  not count here. To a peer that takes send-only calls (another
   *  libvat side; vat/captp.h, note [10]) it goes without a question and
   *  nothing comes back; to one that does not (Endo) it goes as a
   *  question, which the peer counts until it has answered it, and its
   *  answer is dropped unread. */
  size_t max_questions;
  /** Refs exported, and proxies imported (0: VAT_CONN_MAX_EXPORTS). A
   *  value that would export one more fails to go (its call breaks with
   *  limit(...), an answer becomes an exception); a peer that makes this
   *  side import one more ends the connection. */
  size_t max_exports;
  /** The host's libuv loop (a uv_loop_t *) for the connection's socket,
   *  run by the host on its thread; NULL: the library's loop, shared by
   *  every connection. See "The host's loop" above. For a listener: where
   *  the connections it accepts live, and where vat_listener_serve waits. */
  struct uv_loop_s *loop;
  /** What the connection holds for the peer's calls, in bytes, past
   *  which it stops reading from the peer: the answers queued (frames
   *  owed to the peer that the socket has not taken yet) plus the frames
   *  read that the connection vat has not taken yet (whose answers are to
   *  come). A peer that does not read its answers then waits with its
   *  further calls in its own socket, not in this process. This side's
   *  own calls queued do not count (out_max_bytes bounds them): a side
   *  streaming calls at a slower peer goes on reading its answers, so the
   *  peer's answers drain and it reads on. Reading resumes once that is
   *  down to half of this. Two sides that each hold more than
   *  this for the other at once (large answers both ways) stop reading
   *  each other and wait for each other for ever (each side's question
   *  timeout still breaks its questions): keep it above what both ways
   *  carry at once. 0: VAT_CONN_OUT_PAUSE (1 MiB, as Erlang's
   *  distribution buffer busy limit): a burst from the peer then waits in
   *  its socket rather than in this process's heap, where reading it all
   *  ahead of the calls' work made a burst of 100,000 one-way messages
   *  run slower (bench/README.md). */
  size_t out_pause_bytes;
  /** Output queued past which the connection ends: a frame to send when
   *  more than this is queued ends it with the error overloaded(cause)
   *  (code vat_atom_overloaded()) in place of disconnected(cause), what
   *  was queued is dropped and the socket closed at once. The cause says
   *  whose frames filled the queue: "peer does not read: N bytes queued"
   *  when answers to the peer's calls are half of out_pause_bytes or more
   *  of it (the peer leaves what it asked for unread), else "sending
   *  faster than the peer reads: N bytes queued" (this side's own calls
   *  and messages, as a burst of one-way messages faster than the peer
   *  takes them makes, however well it reads). A request whose frame
   *  found the queue full breaks with that error, once, as every question
   *  waiting does. So the queue holds at most this plus one frame. It bounds
   *  what reading's pause cannot hold back: this side's own calls to the
   *  peer, and the answers to calls read before the pause. 0:
   *  VAT_CONN_OUT_MAX. Below out_pause_bytes (each after its default):
   *  VAT_EINVAL. */
  size_t out_max_bytes;
  /** Seconds the peer has, from the connection's opening, to send its
   *  first message: one that decodes as CapTP (this side asks for the
   *  peer's bootstrap as it opens, so a CapTP peer answers at once, or
   *  asks for this side's). A frame counts once it is whole: bytes that
   *  never make one, or one dribbled a byte at a time past the timeout,
   *  do not. Past it the connection
   *  ends (CTP_DISCONNECT sent) with the error timeout("handshake: no
   *  message from the peer within N s") (code vat_atom_timeout()) in
   *  place of disconnected(cause), so a peer that connects and says
   *  nothing holds no connection, nor a listener's place, for ever. 0:
   *  VAT_CONN_HANDSHAKE_TIMEOUT (10 s); negative or infinite: no limit;
   *  NaN: VAT_EINVAL. */
  double handshake_timeout_s;
  /** Seconds without a message from the peer after which the connection
   *  ends, with timeout("idle: no message from the peer for N s"), as the
   *  handshake's. It ends between N and 1.25 N s after the last message
   *  (a check every N/4 s, as Erlang's net_kernel ticks). The silence does
   *  not count while the peer waits on this side, with a call of its
   *  still unanswered, nor while this side does not read it (the pause of
   *  out_pause_bytes, or frames read that the vat has not taken yet).
   *  Questions this side asked do count, since CapTP has no keep-alive: a
   *  peer that owes answers and says nothing is what this ends, so keep it
   *  above the longest a call to the peer takes (question_timeout_s
   *  bounds each question alone). 0 (the default), negative or infinite:
   *  no limit; NaN: VAT_EINVAL. */
  double idle_timeout_s;
  /** For a listener (vat_listen): connections it accepted open at once, at
   *  most (0: no cap). One more is accepted and closed at once, so its
   *  peer reads end of stream rather than wait in the backlog: accept
   *  returns VAT_EAGAIN, and serve's callback gets VAT_EAGAIN and no
   *  connection (serving goes on); vat_listener_inspect counts it. A
   *  connection's place is free once it has ended and its socket is
   *  closed (when vat_conn_closed settles) or its vat ended otherwise.
   *  Ignored by vat_conn_open and vat_connect. */
  size_t max_connections;
  /** The peer's calls this side works on at once, at most max_questions
   *  (0: VAT_CONN_MAX_CALLS_TAKEN, 1,024): its questions and its send-only
   *  calls, each until its target has answered it (to nobody, for a
   *  send-only call) or ended. Past it, what the peer sends
   *  next waits as past max_questions: in order, not yet taken, until one
   *  is answered, counted as held for the peer (out_pause_bytes), so a
   *  peer that streams calls faster than they are answered waits in its
   *  own socket. Each call taken is a request in flight in this process
   *  (~800 bytes with a small argument): at 100,000 taken, a burst of
   *  200,000 one-way messages grew the serving side's heap to 90 MB,
   *  marked by every collection, and ran at less than half the speed it
   *  has at 1,024. Raise it for a peer whose calls each wait long (on a timer,
   *  on another peer) and come many at once. */
  size_t max_calls_taken;
  /** Write values in capdata, the body format Endo writes by default, in
   *  place of smallcaps (vat/captp.h, vat_captp_format): for a peer whose
   *  marshal reads no smallcaps (@endo/marshal before 0.8). Off by
   *  default: smallcaps is shorter and quicker for both sides to read.
   *  What the peer writes is read either way. */
  bool write_capdata;
} vat_conn_options;

#define VAT_CONN_MAX_QUESTIONS 100000
#define VAT_CONN_MAX_CALLS_TAKEN 1024
#define VAT_CONN_MAX_EXPORTS 100000
#define VAT_CONN_OUT_PAUSE ((size_t)1 << 20)
#define VAT_CONN_OUT_MAX ((size_t)64 << 20)
#define VAT_CONN_HANDSHAKE_TIMEOUT 10.0

/** Fills `opt` with the defaults (all zero). Any thread. */
void vat_conn_options_default(vat_conn_options *opt);

/** Starts a connection over `fd`, a connected stream socket, offering
 *  `bootstrap` (NULL: none; the peer's bootstrap question is then answered
 *  with an exception) to the peer. On success the connection owns `fd`
 *  (it closes it when it ends) and *out is its handle, a collector object.
 *  Host thread; with options `loop`, that loop's thread. Errors:
 *  VAT_EINVAL (NULL sys/out, fd < 0, out_max_bytes below out_pause_bytes,
 *  a timeout that is NaN: a line on stderr says which), VAT_ENOMEM, VAT_EIO (`fd` is not a
 *  stream socket, libuv refused it, or the I/O thread did not start), and those of
 *  vat_host_spawn (VAT_ENOTREGISTERED: the thread is not registered). On
 *  error `fd` is left open. */
int vat_conn_open(vat_system *sys, int fd, vat_ref *bootstrap,
                  const vat_conn_options *opt, vat_conn **out);

/** A promise for the peer's bootstrap ref (a proxy). It breaks with
 *  disconnected(cause) if the connection ends first. The same promise on
 *  every call. Any thread. NULL for a NULL connection. */
vat_promise *vat_conn_bootstrap(vat_conn *conn);

/** Pipelining on the bootstrap: a ref standing for the peer's bootstrap
 *  object from the moment the connection opens, before the peer has
 *  answered the bootstrap question. Messages (vat_send_msg) and requests
 *  (vat_request) sent to it, and vat_conn_pipeline calls with it as the
 *  target, go to the peer at once as CTP_CALLs addressed to the bootstrap
 *  question ("q-N"), in the order each sender sent them, so a connection's
 *  first calls need not wait for the bootstrap's round trip. They keep
 *  that address after the answer arrives: the peer delivers them to what
 *  it answered, and if it answered with an exception the requests break
 *  with it. The ref is the connection vat's own: when the connection ends
 *  requests sent to it break with `noconnection` and a monitor on it
 *  fires with that reason, as for proxies; a function message (vat_send)
 *  sent to it is not forwarded (use selectors). The same ref on every
 *  call. Any thread. NULL for a NULL connection (there is no other
 *  error). An Endo peer (@endo/captp 4.5) records its bootstrap answer a
 *  few microtasks after the CTP_BOOTSTRAP arrives: one whose reader hands
 *  CapTP the frames of one read in the same tick finds no answer for a
 *  call that came in that read, and never answers it. */
vat_ref *vat_conn_bootstrap_ref(vat_conn *conn);

/** A promise resolved, when the connection has ended and its socket is
 *  closed, with its reason: the error disconnected(cause). If the
 *  connection vat ends otherwise it breaks: with `shutdown` when its
 *  system shuts down with the connection open (once vat_system_shutdown
 *  has stopped the system), or with the reason its vat failed with. Any
 *  thread. NULL for NULL. */
vat_promise *vat_conn_closed(vat_conn *conn);

/** What a connection holds for its peer, and what crossed it
 *  (vat_conn_inspect): a snapshot, each field read on its own. */
typedef struct vat_conn_info {
  size_t out_queued;    /* bytes queued for the peer, not yet taken by the
                           socket */
  size_t out_peak;      /* the most out_queued has been */
  size_t in_pending;    /* bytes of frames read from the peer that the
                           connection vat has not taken yet */
  bool reading_paused;  /* reading from the peer is paused (options
                           out_pause_bytes) */
  uint64_t read_pauses; /* times reading was paused */
  uint64_t frames_in;   /* CapTP frames the connection took from the peer */
  uint64_t bytes_in;    /* their bytes, as netstrings ("12:{...},") */
  uint64_t frames_out;  /* frames it sent or queued for the peer */
  uint64_t bytes_out;   /* their bytes, as netstrings */
  size_t questions;     /* this side's questions the peer has not answered
                           (a one-way message is none) */
  size_t answers_owed;  /* the peer's questions this side has not answered
                           (a send-only call is none) */
} vat_conn_info;

/** Fills *out with the connection's output queue and reading state, and
 *  its counts; after the connection ended, as they were last (questions
 *  0: the end broke them). Any thread. Errors: VAT_EINVAL (NULL conn or
 *  out). */
int vat_conn_inspect(vat_conn *conn, vat_conn_info *out);

/** Ends the connection: sends CTP_DISCONNECT, then closes the socket once
 *  what was queued before it is written. Pending questions break with
 *  disconnected("closed"). Ending an ended connection does nothing. Once
 *  its system is shutting down or shut down, no turn can end it: this
 *  closes the socket (after what was queued) itself and returns VAT_OK.
 *  Host thread. Errors: VAT_EINVAL, and those of vat_host_send but
 *  VAT_ECLOSED. */
int vat_conn_close(vat_conn *conn);

/** Pipelining: sends method(args) to `target`, a ref imported from a
 *  connection (a proxy), as a request (vat_request: *out is the promise
 *  for its answer), and makes *answer, a ref standing for that answer:
 *  messages and requests sent to it go to the peer at once, addressed to
 *  the unanswered question (CapTP's "q-N" target), so a chain of calls
 *  costs one round trip. They are sent in order after the call, and keep
 *  that address after the answer came (the peer delivers them to what it
 *  answered, while it keeps the answer: Endo keeps all, libvat the last
 *  max_questions), for as long as the ref lives; the connection keeps
 *  nothing for an answer ref once it is collected. `target`
 *  must be a proxy, a vat_conn_bootstrap_ref, or an answer ref from an
 *  earlier vat_conn_pipeline: the call is chained, addressed to that
 *  earlier question as CapTP pipelines (Endo's E(E(x).a()).b()), and the
 *  new answer ref stands for its own question. Any other ref receives the
 *  record captp.pipe(args, answer) as the request's payload. Inside a
 *  turn; the answer ref is an entity of the calling vat, which forwards
 *  what it gets. Errors: VAT_EINVAL (NULL target/method/out/answer), and
 *  those of vat_entity_new and vat_request. */
int vat_conn_pipeline(vat_turn *turn, vat_ref *target, const vat_atom *method,
                      vat_value args, double timeout_s, vat_promise **out,
                      vat_ref **answer);

/** The code of the reason a connection ended: "disconnected". */
const vat_atom *vat_atom_disconnected(void);
/** The exit reason of an ended connection's vat: "noconnection". */
const vat_atom *vat_atom_noconnection(void);

/* --- Addresses --------------------------------------------------------
 * "tcp:HOST:PORT" (HOST a numeric IPv4 address, or [v6] in brackets;
 * PORT 0 in vat_listen asks the kernel for one) or "unix:PATH". A TCP
 * address must be loopback unless options allow_remote is set
 * (VAT_EINVAL). */

/** Connects to `address` (blocking, on the calling thread) and opens a
 *  connection on it. Host thread. Errors: VAT_EINVAL (bad address, remote
 *  without allow_remote), VAT_EIO (connect failed: errno says why), and
 *  those of vat_conn_open. */
int vat_connect(vat_system *sys, const char *address, vat_ref *bootstrap,
                const vat_conn_options *opt, vat_conn **out);

/** Listens on `address`; every connection accepted offers `bootstrap`,
 *  with options `opt` (checked now, as vat_conn_open checks them: the
 *  same VAT_EINVAL). Host thread. Errors: VAT_EINVAL, VAT_EIO (socket,
 *  bind or listen failed: errno says why), VAT_ENOMEM. */
int vat_listen(vat_system *sys, const char *address, vat_ref *bootstrap,
               const vat_conn_options *opt, vat_listener **out);

/** The TCP port the listener is bound to (the kernel's pick for port 0);
 *  0 for a Unix socket or NULL. Any thread. */
int vat_listener_port(vat_listener *l);

/** Waits up to `timeout_s` seconds (negative: for ever) for the next
 *  connection and opens it. Host thread (with options `loop`: that loop's
 *  thread, which it blocks; vat_listener_serve does not). Errors:
 *  VAT_EINVAL, VAT_ETIMEDOUT, VAT_ECLOSED (listener closed), VAT_EBUSY
 *  (served on a loop), VAT_EAGAIN (a connection came with the listener
 *  at options max_connections: it was closed), VAT_EIO, and those of
 *  vat_conn_open. */
int vat_listener_accept(vat_listener *l, double timeout_s, vat_conn **out);

/** Gets each connection vat_listener_serve accepted: `rc` VAT_OK and the
 *  connection (opened with the listener's options, on its loop), or an
 *  error and NULL: one of vat_conn_open's or VAT_EAGAIN (at
 *  max_connections; that connection was closed; serving goes on), or VAT_EIO (accepting failed: serving has stopped;
 *  close the listener). Runs on the loop's thread, as a
 *  libuv callback; it may close the listener. */
typedef void (*vat_accept_fn)(void *ctx, vat_listener *l, int rc,
                              vat_conn *conn);

/** Serves the listener on the loop of its options (`loop`, required): the
 *  loop waits for connections and `fn(ctx, ...)` gets each, until
 *  vat_listener_close. The loop's thread, registered (see "The host's
 *  loop"). Errors: VAT_EINVAL (NULL l or fn, no loop in the listener's
 *  options), VAT_ECLOSED (closed), VAT_EBUSY (served already), VAT_EIO
 *  (libuv refused the socket), VAT_ENOMEM. */
int vat_listener_serve(vat_listener *l, vat_accept_fn fn, void *ctx);

/** A listener's connections (vat_listener_inspect): a snapshot. */
typedef struct vat_listener_info {
  size_t open;            /* connections it accepted that hold a place */
  size_t max_connections; /* options; 0: no cap */
  uint64_t refused;       /* connections closed at once at the cap */
} vat_listener_info;

/** Fills *out with the listener's count of connections; after it closed,
 *  as the connections it accepted end. Any thread. Errors: VAT_EINVAL
 *  (NULL l or out). */
int vat_listener_inspect(vat_listener *l, vat_listener_info *out);

/** Stops listening and closes the socket (a Unix socket's path is
 *  removed). Connections already accepted go on. Host thread; a served
 *  listener's on its loop's thread (its handle closes in the loop's next
 *  iteration). Errors: VAT_EINVAL. */
int vat_listener_close(vat_listener *l);

#ifdef __cplusplus
}
#endif

#endif
