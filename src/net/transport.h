/* The seam between a connection vat and its I/O: an explicit table of
 * what the vat asks of whatever carries its bytes (as nginx's
 * ngx_event_actions stands between its modules and epoll or kqueue).
 * conn.c and timeouts.c call only these; the I/O answers the vat with
 * messages (net_on_frame for each frame, net_on_lost once, net_on_io_done
 * after the vat's end, internal.h), whichever carries it.
 *
 * Two implementations: a socket on a libuv loop (io.c, its table in
 * transport.c) and a simulated machine's end of an in-memory stream
 * (sim_stream.c), which runs on a simulated world's virtual clock with no
 * loop and no thread. */
#ifndef VAT_NET_TRANSPORT_H
#define VAT_NET_TRANSPORT_H

#include <stdbool.h>
#include <stddef.h>

#include "vat/net.h"

typedef struct net_places net_places; /* internal.h */

/* What a transport does for its connection vat; `io` is the transport's
 * own (net_conn.io). The calls and their promises are those of io.c's
 * functions of the same names (internal.h), which the socket's table
 * wraps: net_io_run, net_io_write (its NET_WRITE_* results and flags),
 * net_io_abort, net_io_frame_done, net_io_info, net_io_answers_unread,
 * net_io_close, net_io_end.
 * A write copies its frame: the caller may reuse or free it on return
 * (net_send's encode buffer). */
typedef struct net_transport {
  const char *name;
  void (*run)(void *io);
  int (*write)(void *io, const char *data, size_t len, unsigned flags,
               size_t *queued);
  void (*abort)(void *io);
  void (*frame_done)(void *io, size_t len);
  void (*info)(void *io, vat_conn_info *out);
  /* Whether the answers queued for the peer are half the pause or more:
   * a full queue's cause is then the peer's not reading. */
  bool (*answers_unread)(void *io);
  void (*close)(void *io);
  bool (*end)(void *io);
  /* The shares of the io the connection holds (net_conn_io): the io a
   * share stands for, NULL once released; and letting a share go. */
  void *(*owned)(void *share);
  void (*release)(void *share);
} net_transport;

/* What a transport hands the connection it opens: its io and two shares
 * of it, the vat's (released when the vat ends, or by the transport when
 * the vat is collected with its system stopped) and the vat_conn
 * handle's (inspect, and a close after the system shut down). */
typedef struct net_conn_io {
  void *io;
  void *vat_share;
  void *handle_share;
} net_conn_io;

/* Makes the io of the connection vat `conn` (the vat exists, its first
 * turn not run yet) with the checked limits; VAT_OK, or an error with
 * nothing made. `ctx` is net_conn_open_with's. */
typedef int (*net_attach_fn)(void *ctx, vat_ref *conn,
                             const vat_conn_options *o, size_t out_pause,
                             size_t out_max, net_conn_io *out);

/* vat_conn_open over any transport: the options checked, the connection
 * vat made, `attach` called for its io, and the vat started. A listener's
 * `places` as net_conn_open. Host thread. Errors as vat_conn_open, and
 * attach's. */
int net_conn_open_with(vat_system *sys, vat_ref *bootstrap,
                       const vat_conn_options *opt, net_places *places,
                       const net_transport *tp, net_attach_fn attach, void *ctx,
                       vat_conn **out);

/* The socket's transport: io.c on the shared loop or the host's. */
extern const net_transport net_socket_transport;
/* Its attach: `ctx` points at the descriptor (an int), left open on
 * failure and closed on success (the io owns a copy). */
int net_socket_attach(void *ctx, vat_ref *conn, const vat_conn_options *o,
                      size_t out_pause, size_t out_max, net_conn_io *out);

#endif
