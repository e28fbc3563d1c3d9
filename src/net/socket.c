/* Addresses, connecting and listening: plain blocking sockets on the
 * calling host thread; once connected, a socket is handed to
 * vat_conn_open and its I/O moves to the connection's loop. A listener
 * served on the host's loop (vat_listener_serve) waits for connections
 * with a poll handle there and accepts them without blocking. */
#define _GNU_SOURCE 1
#define GC_THREADS 1
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <gc/gc.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>
#include <uv.h>

#include "internal.h"

/* A listener served on the host's loop. Uncollectable: the loop, which
 * the collector does not scan, is what points at it, and it keeps the
 * listener reachable until its handle is closed. */
typedef struct listen_watch {
  uv_poll_t poll;
  int fd; /* closed once the handle is */
  vat_listener *l;
  vat_accept_fn fn;
  void *ctx;
} listen_watch;

/* The listener's connections open at once (options max_connections).
 * Shared with each connection it accepted, which leaves on a worker when
 * it ends, so it outlives a closed listener. */
struct net_places {
  atomic_size_t open;
  size_t max; /* 0: no cap */
  atomic_uint_least64_t refused;
};

struct vat_listener {
  int fd;
  net_places *places;
  int port;
  char *path; /* a Unix socket's, to remove on close */
  vat_system *sys;
  vat_ref *bootstrap;
  vat_conn_options opt;
  listen_watch *watch; /* while served on the host's loop */
};

typedef struct address {
  struct sockaddr_storage sa;
  socklen_t len;
  bool is_unix;
} address;

static bool loopback(const address *a) {
  if (a->sa.ss_family == AF_INET) {
    const struct sockaddr_in *in = (const void *)&a->sa;
    return (ntohl(in->sin_addr.s_addr) >> 24) == 127;
  }
  const struct sockaddr_in6 *in6 = (const void *)&a->sa;
  return IN6_IS_ADDR_LOOPBACK(&in6->sin6_addr);
}

static int parse_port(const char *s, in_port_t *out) {
  char *end;
  errno = 0;
  long v = strtol(s, &end, 10);
  if (*s == '\0' || *end != '\0' || errno || v < 0 || v > 65535)
    return VAT_EINVAL;
  *out = htons((in_port_t)v);
  return VAT_OK;
}

static int parse_tcp(const char *s, address *a) {
  char host[64];
  const char *colon;
  if (*s == '[') { /* [v6]:port */
    const char *close = strchr(s, ']');
    if (close == NULL || close[1] != ':' ||
        (size_t)(close - s - 1) >= sizeof host)
      return VAT_EINVAL;
    memcpy(host, s + 1, (size_t)(close - s - 1));
    host[close - s - 1] = '\0';
    colon = close + 1;
    struct sockaddr_in6 *in6 = (void *)&a->sa;
    in6->sin6_family = AF_INET6;
    a->len = sizeof *in6;
    if (inet_pton(AF_INET6, host, &in6->sin6_addr) != 1)
      return VAT_EINVAL;
    return parse_port(colon + 1, &in6->sin6_port);
  }
  colon = strrchr(s, ':');
  if (colon == NULL || (size_t)(colon - s) >= sizeof host)
    return VAT_EINVAL;
  memcpy(host, s, (size_t)(colon - s));
  host[colon - s] = '\0';
  struct sockaddr_in *in = (void *)&a->sa;
  in->sin_family = AF_INET;
  a->len = sizeof *in;
  if (inet_pton(AF_INET, host, &in->sin_addr) != 1)
    return VAT_EINVAL;
  return parse_port(colon + 1, &in->sin_port);
}

static int parse_address(const char *s, const vat_conn_options *opt,
                         address *a) {
  memset(a, 0, sizeof *a);
  if (s == NULL)
    return VAT_EINVAL;
  if (strncmp(s, "unix:", 5) == 0) {
    struct sockaddr_un *un = (void *)&a->sa;
    size_t n = strlen(s + 5);
    if (n == 0 || n >= sizeof un->sun_path)
      return VAT_EINVAL;
    un->sun_family = AF_UNIX;
    memcpy(un->sun_path, s + 5, n + 1);
    a->len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n + 1);
    a->is_unix = true;
    return VAT_OK;
  }
  if (strncmp(s, "tcp:", 4) != 0 || parse_tcp(s + 4, a) != VAT_OK)
    return VAT_EINVAL;
  if (!loopback(a) && !(opt != NULL && opt->allow_remote))
    return VAT_EINVAL;
  return VAT_OK;
}

/* connect() interrupted by a signal (the collector's) goes on in the
 * background: wait for it to finish. */
static int finish_connect(int fd) {
  struct pollfd p = {.fd = fd, .events = POLLOUT};
  int rc;
  while ((rc = poll(&p, 1, -1)) < 0 && errno == EINTR)
    ;
  int err = 0;
  socklen_t len = sizeof err;
  if (rc < 0 || getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0)
    return -1;
  errno = err;
  return err ? -1 : 0;
}

int vat_connect(vat_system *sys, const char *address_text, vat_ref *bootstrap,
                const vat_conn_options *opt, vat_conn **out) {
  address a;
  if (sys == NULL || out == NULL)
    return VAT_EINVAL;
  int rc = parse_address(address_text, opt, &a);
  if (rc == VAT_OK) /* before connecting: bad options open nothing */
    rc = net_out_limits(opt, NULL, NULL);
  if (rc == VAT_OK)
    rc = net_timeout_limits(opt, NULL, NULL);
  if (rc != VAT_OK)
    return rc;
  int fd = socket(a.sa.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0)
    return VAT_EIO;
  if (connect(fd, (struct sockaddr *)&a.sa, a.len) < 0 &&
      !(errno == EINTR && finish_connect(fd) == 0)) {
    int e = errno;
    close(fd);
    errno = e;
    return VAT_EIO;
  }
  rc = vat_conn_open(sys, fd, bootstrap, opt, out);
  if (rc != VAT_OK)
    close(fd);
  return rc;
}

int vat_listen(vat_system *sys, const char *address_text, vat_ref *bootstrap,
               const vat_conn_options *opt, vat_listener **out) {
  address a;
  if (sys == NULL || out == NULL)
    return VAT_EINVAL;
  int rc = parse_address(address_text, opt, &a);
  if (rc == VAT_OK) /* now, not at every connection accepted */
    rc = net_out_limits(opt, NULL, NULL);
  if (rc == VAT_OK)
    rc = net_timeout_limits(opt, NULL, NULL);
  if (rc != VAT_OK)
    return rc;
  vat_listener *l = GC_MALLOC(sizeof *l);
  net_places *places = GC_MALLOC(sizeof *places);
  if (l == NULL || places == NULL)
    return VAT_ENOMEM;
  places->max = opt != NULL ? opt->max_connections : 0;
  l->places = places;
  int fd = socket(a.sa.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0)
    return VAT_EIO;
  int one = 1;
  if (!a.is_unix)
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  struct sockaddr_storage bound;
  socklen_t blen = sizeof bound;
  if (bind(fd, (struct sockaddr *)&a.sa, a.len) < 0 || listen(fd, 128) < 0 ||
      getsockname(fd, (struct sockaddr *)&bound, &blen) < 0) {
    int e = errno;
    close(fd);
    errno = e;
    return VAT_EIO;
  }
  l->fd = fd;
  l->sys = sys;
  l->bootstrap = bootstrap;
  vat_conn_options_default(&l->opt);
  if (opt != NULL)
    l->opt = *opt;
  if (a.is_unix) {
    const char *p = ((struct sockaddr_un *)&a.sa)->sun_path;
    l->path = GC_MALLOC_ATOMIC(strlen(p) + 1);
    if (l->path != NULL)
      strcpy(l->path, p);
  } else if (bound.ss_family == AF_INET) {
    l->port = ntohs(((struct sockaddr_in *)&bound)->sin_port);
  } else {
    l->port = ntohs(((struct sockaddr_in6 *)&bound)->sin6_port);
  }
  *out = l;
  return VAT_OK;
}

int vat_listener_port(vat_listener *l) {
  return l ? l->port : 0;
}

bool net_places_take(net_places *p) {
  size_t n = atomic_load(&p->open);
  do {
    if (p->max != 0 && n >= p->max) {
      atomic_fetch_add(&p->refused, 1);
      return false;
    }
  } while (!atomic_compare_exchange_weak(&p->open, &n, n + 1));
  return true;
}

void net_places_leave(net_places *p) {
  atomic_fetch_sub(&p->open, 1);
}

int vat_listener_inspect(vat_listener *l, vat_listener_info *out) {
  if (l == NULL || out == NULL)
    return VAT_EINVAL;
  *out = (vat_listener_info){.open = atomic_load(&l->places->open),
                             .max_connections = l->places->max,
                             .refused = atomic_load(&l->places->refused)};
  return VAT_OK;
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int vat_listener_accept(vat_listener *l, double timeout_s, vat_conn **out) {
  if (l == NULL || out == NULL)
    return VAT_EINVAL;
  if (l->fd < 0)
    return VAT_ECLOSED;
  if (l->watch != NULL)
    return VAT_EBUSY;
  double deadline = now_s() + timeout_s;
  for (;;) {
    int ms = -1;
    if (timeout_s >= 0) {
      double left = deadline - now_s();
      if (left <= 0)
        return VAT_ETIMEDOUT;
      ms = (int)(left * 1000) + 1;
    }
    struct pollfd p = {.fd = l->fd, .events = POLLIN};
    int rc = poll(&p, 1, ms);
    if (rc < 0 && errno != EINTR)
      return VAT_EIO;
    if (rc <= 0)
      continue; /* a signal, or the deadline: checked above */
    int fd = accept4(l->fd, NULL, NULL, SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == EAGAIN || errno == ECONNABORTED)
        continue;
      return VAT_EIO;
    }
    /* At the cap (VAT_EAGAIN) it is accepted all the same and closed at
     * once: the peer reads end of stream now, rather than wait in the
     * backlog for a place that may never come. */
    rc = net_conn_open(l->sys, fd, l->bootstrap, &l->opt, l->places, out);
    if (rc != VAT_OK)
      close(fd);
    return rc;
  }
}

/* --- Serving on the host's loop ---------------------------------------- */

static void on_watch_closed(uv_handle_t *h) {
  listen_watch *w = h->data;
  close(w->fd); /* only now: epoll must not watch a descriptor reused */
  GC_FREE(w);
}

/* Accepts every connection waiting (the socket does not block), handing
 * each to the host's callback; stops at the first hard error. */
static void on_acceptable(uv_poll_t *h, int status, int events) {
  (void)events;
  listen_watch *w = h->data;
  vat_listener *l = w->l;
  if (status < 0) {
    uv_poll_stop(h);
    w->fn(w->ctx, l, VAT_EIO, NULL);
    return;
  }
  while (l->watch == w) { /* the callback may close the listener */
    int fd = accept4(w->fd, NULL, NULL, SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK)
        return;
      if (errno == EINTR || errno == ECONNABORTED)
        continue;
      /* EMFILE and the like stay readable: stop rather than spin. */
      uv_poll_stop(h);
      w->fn(w->ctx, l, VAT_EIO, NULL);
      return;
    }
    vat_conn *conn = NULL;
    int rc = net_conn_open(l->sys, fd, l->bootstrap, &l->opt, l->places, &conn);
    if (rc != VAT_OK)
      close(fd);
    w->fn(w->ctx, l, rc, conn);
  }
}

int vat_listener_serve(vat_listener *l, vat_accept_fn fn, void *ctx) {
  if (l == NULL || fn == NULL || l->opt.loop == NULL)
    return VAT_EINVAL;
  if (l->fd < 0)
    return VAT_ECLOSED;
  if (l->watch != NULL)
    return VAT_EBUSY;
  int flags = fcntl(l->fd, F_GETFL);
  if (flags < 0 || fcntl(l->fd, F_SETFL, flags | O_NONBLOCK) < 0)
    return VAT_EIO;
  listen_watch *w = GC_MALLOC_UNCOLLECTABLE(sizeof *w);
  if (w == NULL)
    return VAT_ENOMEM;
  w->fd = l->fd;
  w->l = l;
  w->fn = fn;
  w->ctx = ctx;
  w->poll.data = w;
  if (uv_poll_init(l->opt.loop, &w->poll, l->fd) != 0) {
    GC_FREE(w);
    return VAT_EIO;
  }
  if (uv_poll_start(&w->poll, UV_READABLE, on_acceptable) != 0) {
    w->fd = dup(l->fd); /* the close callback closes a copy: ours stays */
    uv_close((uv_handle_t *)&w->poll, on_watch_closed);
    return VAT_EIO;
  }
  l->watch = w;
  return VAT_OK;
}

int vat_listener_close(vat_listener *l) {
  if (l == NULL)
    return VAT_EINVAL;
  if (l->fd >= 0) {
    if (l->watch != NULL)
      uv_close((uv_handle_t *)&l->watch->poll, on_watch_closed);
    else
      close(l->fd);
    l->watch = NULL;
    l->fd = -1;
    if (l->path != NULL)
      unlink(l->path);
  }
  return VAT_OK;
}
