/* The socket's transport (transport.h): io.c's calls behind the table,
 * and the making of a connection's socket I/O. */
#include <unistd.h>

#include "internal.h"
#include "transport.h"

static void sock_run(void *io) {
  net_io_run(io);
}

static int sock_write(void *io, const char *data, size_t len, unsigned flags,
                      size_t *queued) {
  return net_io_write(io, data, len, flags, queued);
}

static void sock_abort(void *io) {
  net_io_abort(io);
}

static void sock_frame_done(void *io, size_t len) {
  net_io_frame_done(io, len);
}

static void sock_info(void *io, vat_conn_info *out) {
  net_io_info(io, out);
}

static bool sock_answers_unread(void *io) {
  return net_io_answers_unread(io);
}

static void sock_close(void *io) {
  net_io_close(io);
}

static bool sock_end(void *io) {
  return net_io_end(io);
}

static void *sock_owned(void *share) {
  return net_io_owner_io(share);
}

static void sock_release(void *share) {
  net_io_release(share);
}

const net_transport net_socket_transport = {
    .name = "socket",
    .run = sock_run,
    .write = sock_write,
    .abort = sock_abort,
    .frame_done = sock_frame_done,
    .info = sock_info,
    .answers_unread = sock_answers_unread,
    .close = sock_close,
    .end = sock_end,
    .owned = sock_owned,
    .release = sock_release,
};

/* The shares are finalized owners (io.c): a vat collected with its
 * system stopped still lets go. libvat's own descriptor: libuv closes it
 * with the handle, even when opening fails, and the caller's stays open
 * until we succeed. */
int net_socket_attach(void *ctx, vat_ref *conn, const vat_conn_options *o,
                      size_t out_pause, size_t out_max, net_conn_io *out) {
  int fd = *(int *)ctx;
  net_io_owner *vat_share = net_io_owner_new();
  net_io_owner *handle_share = net_io_owner_new();
  if (vat_share == NULL || handle_share == NULL)
    return VAT_ENOMEM;
  int mine = dup(fd);
  net_io *io;
  if (mine < 0 || (io = net_io_new(mine, conn, o->max_frame, out_pause, out_max,
                                   o->loop)) == NULL)
    return VAT_EIO;
  net_io_owner_set(vat_share, io);
  net_io_share(io);
  net_io_owner_set(handle_share, io);
  close(fd);
  *out = (net_conn_io){io, vat_share, handle_share};
  return VAT_OK;
}
