/* libvat — simulated machines joined by CapTP connections (simulation
 * testing, vat/sim.h).
 *
 * In a simulated world of several systems (vat_sim_system_new), each
 * system is a machine; this joins them by libvat's own CapTP connections
 * (vat/net.h: the same connection vats, proxies, questions, timeouts and
 * ends), carried by an in-memory network on the world's virtual clock in
 * place of sockets: no libuv, no thread, and every byte on it is part of
 * the seed's run, which replays exactly (the run's digest covers what
 * each delivery carried).
 *
 *   static void *setup(vat_system *client_sys, void *ctx) {
 *     vat_system *server_sys;
 *     vat_sim_system_new(client_sys, NULL, &server_sys);
 *     vat_sim_serve(server_sys, counter_ref, NULL, NULL, NULL);
 *     vat_sim_link_options lo;
 *     vat_sim_link_options_default(&lo);
 *     lo.latency_ns = 5000000;   // 5 ms each way
 *     lo.fault_rate = 0.5;       // a partition or a disconnect, maybe
 *     vat_sim_link(client_sys, server_sys, &lo);
 *     vat_conn *conn;
 *     vat_sim_connect(client_sys, server_sys, NULL, NULL, &conn);
 *     ... vat_conn_bootstrap(conn) is the server's counter, a proxy ...
 *   }
 *
 * The served object, and watching the connection (examples/sim_job_queue.c,
 * a job queue across two machines that runs as a test, holds the whole
 * program: test/sim_net_example_sync.sh keeps these two excerpts the
 * same as it). What a machine serves is an ordinary vat: its receive
 * function gets each call from the peer as a request (vat/caps.h), the
 * method's name as the selector, and in the value the arguments (a list)
 * and the ref to reply to; its reply (vat_reply, or vat_reply_error for
 * an exception) is the call's answer over the connection. A one-way
 * message from the peer is no request (vat_request_parse is false):
 *
 *   typedef struct queue {
 *     bool done[JOBS + 1];
 *     unsigned ndone;
 *   } queue;
 *
 *   static void queue_receive(vat_turn *turn, void *state, const vat_atom *method,
 *                             vat_value request) {
 *     queue *q = state;
 *     vat_value args;
 *     vat_ref *reply;
 *     if (!vat_request_parse(request, &args, &reply))
 *       return;
 *     if (method == vat_atom_intern("take")) {
 *       int64_t job = 1;
 *       while (job <= JOBS && q->done[job])
 *         job++;
 *       vat_reply(turn, reply, vat_int(job <= JOBS ? job : 0));
 *     } else if (method == vat_atom_intern("finished")) {
 *       int64_t job = 0;
 *       if (vat_get_int(vat_at(args, 0), &job) == VAT_OK && job >= 1 &&
 *           job <= JOBS && !q->done[job]) {
 *         q->done[job] = true;
 *         q->ndone++;
 *       }
 *       vat_reply(turn, reply, vat_int(q->ndone));
 *     } else {
 *       vat_reply_error(
 *           turn, reply,
 *           vat_error(vat_atom_intern("TypeError"), vat_string("no such method")));
 *     }
 *   }
 *
 *   static const vat_entity_def queue_def = {
 *       .state_size = sizeof(queue), .receive = queue_receive, .label = "queue"};
 *
 * The dialling side calls it through a proxy (the bootstrap
 * vat_sim_dial's promise resolves to) and watches the proxy: a monitor
 * on it fires with `noconnection` when the connection it came over ends
 * (a disconnect, a timeout, a crash found out) and also when the program
 * closed that connection itself, as it does with the one it replaces
 * (vat_sim_dial's opened function), so only the proxy in use is a cue to
 * dial again:
 *
 *   static void connection_lost(vat_turn *turn, void *state, uint64_t monitor,
 *                               vat_ref *who, vat_value reason) {
 *     (void)monitor, (void)reason;
 *     worker *w = state;
 *     if (who == w->queue)
 *       dial(turn, w);
 *   }
 *
 *   static void connected(vat_turn *turn, void *state, void *ctx, bool resolved,
 *                         vat_value value) {
 *     (void)ctx;
 *     worker *w = state;
 *     vat_ref *q = vat_value_ref(value);
 *     uint64_t id;
 *     if (!resolved || q == NULL) {
 *       dial(turn, w);
 *       return;
 *     }
 *     w->queue = q;
 *     vat_monitor(turn, q, connection_lost, &id);
 *     take(turn, w, q);
 *   }
 *
 * A machine serves (vat_sim_serve): it offers a bootstrap ref, with
 * connection options, to whoever connects to it. A connection opens from
 * the host side at once (vat_sim_connect, in a scenario's setup), or,
 * from a vat's turn as a program's own reconnect code does, after the
 * link's latency (vat_sim_dial: a promise for the peer's bootstrap,
 * and the new connection handed to a function as it opens). Each
 * side is a connection vat as vat_conn_open makes one: its options say
 * its limits and timeouts, its vat_conn_closed settles when it ends, its
 * proxies end with `noconnection`. A connection's options `loop` is not
 * used. Unless its options give it a label, each side's connection vat
 * is labelled "A-B.K": machine A's side of the K-th connection (from 1)
 * on the link of A and B; so a plan and a trace (vat/sim.h) name it
 * ("step 25: kill wkr-m0.2" kills the second connection's side on
 * machine wkr).
 *
 * A link joins two machines: made by vat_sim_link, or with the defaults
 * by the first connection between them. What one side of a connection
 * writes reaches the other side latency_ns later, plus a jitter drawn
 * from the seed, in the order it was written (a later write never
 * arrives before an earlier one), through the netstring reader a
 * socket's bytes go through.
 * Turns take no time on the virtual clock: the clock moves only when no
 * vat of any machine is ready, to the next delivery, timer or fault.
 *
 * Faults, drawn from the seed when the link is made (options fault_rate,
 * max_faults, fault_kinds, fault_window_ns), or planned (vat_sim_net_fault):
 *  - VAT_SIM_NET_PARTITION: nothing crosses the link, either way, for the
 *    partition's time: what is on its way, or written meanwhile, is held
 *    and arrives, in order, when it heals; a connection dialled meanwhile
 *    waits for it (up to connect_timeout_ns). A connection's own timeouts
 *    run meanwhile: a partition longer than its question, idle or
 *    handshake timeout ends it as a silent peer ends it, and what it
 *    writes as it ends (its CTP_DISCONNECT, its end of stream) arrives
 *    when the partition heals.
 *  - VAT_SIM_NET_DISCONNECT: every connection on the link ends at once on
 *    both sides, as a reset does: what was on its way is dropped, and
 *    each side's connection ends with disconnected("read: connection
 *    reset by peer") (its questions break with it, its proxies end with
 *    `noconnection`). The link stays up: the machines' programs may
 *    connect again (vat_sim_dial).
 * A machine crash (vat_sim_system_crash) is silence: what is sent to the
 * crashed machine is dropped, it sends nothing more, and dialling it
 * times out; its peers learn of it by their own timeouts. A machine a
 * stop fault stopped (vat/sim.h) is silent the same way.
 * Each fault that strikes is in the run's vat_sim_result.notes ("2.000
 * ms: partition m0-m1 for 1.500 s", "disconnect m0-m1: 2 connection ends
 * reset"). A fault strikes only while the world has something else to do
 * (vat/sim.h): one planned for after the program is done never does.
 * The faults drawn from the seed are faults at a time of the run
 * (vat/sim.h), in its plan as "at 2ms: partition m0-m1 for 1500ms" and
 * "at 3223613ns: disconnect m0-m1": replayed from a plan (VAT_SIM_PLAN),
 * which may also hold such faults written by hand, replaced by an
 * explicit plan, and shrunk. A link joins two machines both ways: a plan
 * may name it in either order ("disconnect m1-m0" is the link m0-m1). A
 * hand-written fault must be on a link made by the time it falls due,
 * and be written as above: one that names no link then ("disconnect
 * m0-nobody"), or is no network fault ("explode m0-m1", "partition m0-m1
 * for ever"), is refused as it falls due (vat_sim_run returns VAT_EINVAL,
 * its message naming the fault; vat/sim.h), rather than silently
 * missed. The plan is read before the scenario's setup makes the links,
 * so its faults can only be checked when they fall due. Those a scenario
 * plans itself (vat_sim_net_fault) are its own: in every run, in the
 * notes and not in the plan.
 *
 * Not simulated: a connection's pause of reading past out_pause_bytes (a
 * link delivers what arrives; out_max_bytes still bounds what a side has
 * on its way: past it the connection ends with overloaded(...), whose
 * cause names, as over a socket, the peer's not reading when half
 * out_pause_bytes or more of it is answers to the peer's calls), and
 * partial writes.
 *
 * Every call here runs on the world's thread while the world runs (its
 * setup and checks, its sources; vat_sim_dial also inside a turn), as
 * vat/sim.h's calls do, and names its machines by their systems. Link
 * with libvat-net.
 */
#ifndef VAT_SIM_NET_H
#define VAT_SIM_NET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "vat/net.h"
#include "vat/sim.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum vat_sim_net_fault_kind {
  VAT_SIM_NET_PARTITION,
  VAT_SIM_NET_DISCONNECT,
} vat_sim_net_fault_kind;

/* vat_sim_link_options.fault_kinds: VAT_SIM_NET_FAULT(kind) each. */
#define VAT_SIM_NET_FAULT(kind) (1u << (kind))
#define VAT_SIM_NET_FAULTS_ALL                                                 \
  (VAT_SIM_NET_FAULT(VAT_SIM_NET_PARTITION) |                                  \
   VAT_SIM_NET_FAULT(VAT_SIM_NET_DISCONNECT))

typedef struct vat_sim_link_options {
  /** One way, in ns; default 1 ms. Below 2^62, as are jitter_ns and
   *  connect_timeout_ns. */
  uint64_t latency_ns;
  /** Each write arrives up to this much later again, drawn from the seed
   *  (order kept); default 0. */
  uint64_t jitter_ns;
  /** A dial across a partition, or to a crashed machine, fails this long
   *  after it began, with disconnected("connect: connection timed out").
   *  Default 1 s; at least 1. */
  uint64_t connect_timeout_ns;
  /** Faults drawn from the seed as the link is made: each of max_faults
   *  strikes with probability fault_rate (in [0, 1]; default 0: none),
   *  its kind drawn among fault_kinds (0, the default: both), at a time
   *  drawn from [now, now + fault_window_ns) (default 1 s; at least 1). A
   *  partition lasts from partition_min_ns to partition_max_ns, drawn
   *  (defaults 100 ms and 5 s; min at most max). max_faults default 1. */
  double fault_rate;
  unsigned max_faults;
  unsigned fault_kinds;
  uint64_t fault_window_ns;
  uint64_t partition_min_ns, partition_max_ns;
} vat_sim_link_options;

/** Fills `o` with the defaults. Any thread. */
void vat_sim_link_options_default(vat_sim_link_options *o);

/** Joins machines `a` and `b` (two systems of one running world) with a
 *  link of options `o` (NULL: defaults), and draws its faults. Errors:
 *  VAT_EINVAL (NULL or equal systems, not of one running world, options
 *  out of range), VAT_EBUSY (they are linked already: a link is made
 *  once, before the connections that use it). */
int vat_sim_link(vat_system *a, vat_system *b, const vat_sim_link_options *o);

/** Called when a connection opens on machine `sys` (host side, between
 *  steps), with that machine's side of it, `conn`: the serving side's
 *  (vat_sim_serve) or the dialling side's (vat_sim_dial). Host side, it
 *  may close it or another (vat_conn_close), inspect it, or hand it to a
 *  vat (vat_host_send); vat_conn_closed and vat_conn_inspect may be
 *  called from any turn. */
typedef void (*vat_sim_opened_fn)(void *ctx, vat_system *sys, vat_conn *conn);

/** Machine `sys` serves: each connection to it offers `bootstrap` (NULL:
 *  none) with options `opt` (NULL: defaults; copied; checked now as
 *  vat_listen checks them) and is handed to `fn(ctx, ...)` (NULL: to
 *  nobody). A second call replaces the first, for connections made
 *  after it. Errors: VAT_EINVAL (NULL sys, no running world, bad
 *  options). */
int vat_sim_serve(vat_system *sys, vat_ref *bootstrap,
                  const vat_conn_options *opt, vat_sim_opened_fn fn, void *ctx);

/** Opens a connection from machine `from` to machine `to` now, as though
 *  its handshake had just been made: both sides' connection vats exist
 *  when it returns (what they write crosses the link as any other
 *  bytes). *out is the side of `from`, offering `bootstrap` with options
 *  `opt` (as vat_conn_open). Host side, not inside a turn. Errors:
 *  VAT_EINVAL (NULL or equal systems, no running world, bad options),
 *  VAT_ENOTFOUND (`to` does not serve), VAT_ECLOSED (either machine
 *  crashed), VAT_EINTURN, and those of vat_conn_open. */
int vat_sim_connect(vat_system *from, vat_system *to, vat_ref *bootstrap,
                    const vat_conn_options *opt, vat_conn **out);

/** Dials machine `to` from machine `from`, as a program's reconnect code
 *  does: the connection opens when the dial crosses the link (latency_ns
 *  on; across a partition when it heals), and *peer_bootstrap, a promise
 *  made now, follows the new connection's bootstrap promise
 *  (vat_conn_bootstrap: it resolves to a proxy of `to`'s bootstrap once
 *  that crosses back). It breaks with disconnected("connect: connection
 *  refused") when `to` does not serve then, and with
 *  disconnected("connect: connection timed out") when `to` crashed or a
 *  partition outlasts connect_timeout_ns. As the connection opens, before
 *  *peer_bootstrap resolves, `opened(ctx, from, conn)` (NULL: nobody) is
 *  handed `from`'s side of it, as vat_sim_serve's fn is handed the
 *  server's: the program's way to close, inspect or watch what it
 *  dialled (a connection left open lives on, with its vats, until the
 *  world ends; closing the one it replaces is the program's part). No
 *  connection is made while the dial is on its way, hence no vat_conn to
 *  hand back now: a vat cannot be made inside a turn. Inside a turn of a
 *  vat of `from` (the dial is made at once, not when the turn commits: a
 *  turn that fails after it still dials), or the host side. Errors:
 *  VAT_EINVAL (NULL or equal systems, NULL peer_bootstrap, no running
 *  world, bad options), VAT_ECLOSED (`from` crashed). */
int vat_sim_dial(vat_system *from, vat_system *to, vat_ref *bootstrap,
                 const vat_conn_options *opt, vat_sim_opened_fn opened,
                 void *ctx, vat_promise **peer_bootstrap);

/** Plans a fault on the link of `a` and `b` (made with the defaults if
 *  there is none) at `at_ns` on the world's clock (before the next step
 *  when not later than now); a partition lasts `duration_ns` (at least
 *  1; ignored for a disconnect). Errors: VAT_EINVAL (bad systems, no
 *  world, an unknown kind, a partition of 0 ns). */
int vat_sim_net_fault(vat_system *a, vat_system *b, vat_sim_net_fault_kind kind,
                      uint64_t at_ns, uint64_t duration_ns);

/** What a link carried (vat_sim_link_inspect): counts since it was made. */
typedef struct vat_sim_link_info {
  uint64_t bytes_written;   /* by either side's connections */
  uint64_t bytes_delivered; /* ...that reached a live connection */
  uint64_t bytes_dropped;   /* ...dropped: a reset, a crash, an ended side */
  size_t bytes_on_the_way;  /* written and neither delivered nor dropped */
  uint64_t connections;     /* opened over it */
  uint64_t partitions, disconnects; /* faults that struck it */
  bool partitioned;                 /* now */
  uint64_t healed_at_ns; /* when the last partition heals (or healed) */
} vat_sim_link_info;

/** Fills *out for the link of `a` and `b`. Errors: VAT_EINVAL (NULL,
 *  no world), VAT_ENOTFOUND (no link between them). */
int vat_sim_link_inspect(vat_system *a, vat_system *b, vat_sim_link_info *out);

#ifdef __cplusplus
}
#endif

#endif
