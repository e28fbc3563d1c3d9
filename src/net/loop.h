/* The shared I/O loop: one libuv loop, started by the first connection
 * that has no host loop, runs the sockets of all of them, so that threads
 * do not grow with connections. One thread runs it at a time: an idle
 * worker of any system (vat/host.h's idle poller, set when the loop
 * starts), or the loop's own thread while no worker does (loop.c says
 * how they hand it over). Connections post themselves when they have
 * something for the loop to do (a frame to write, a close, reading to
 * resume, their socket to open); the loop takes each posted connection
 * once however often it was posted, and one wake-up of the loop serves
 * every post made before it ran. */
#ifndef VAT_NET_LOOP_H
#define VAT_NET_LOOP_H

#include <stdbool.h>
#include <stddef.h>

struct uv_loop_s;

/** A connection's place in the loop's list of posted connections. */
typedef struct net_posted {
  struct net_posted *next;
  bool queued; /* on the list (guarded by the loop's lock) */
} net_posted;

/** The shared loop, its thread started and the idle poller set on the
 *  first call; false when no thread could be made (then and on every
 *  later call). */
bool net_loop_start(void);
/** The shared loop's libuv loop, for the handles made on its thread. */
struct uv_loop_s *net_loop_uv(void);
/** Posts `p` for the loop's thread; false when it was posted already and
 *  not yet taken (the post it made then covers this one). Any thread. */
bool net_loop_post(net_posted *p);
/** The shared read buffer (NET_READ_BUFFER bytes): the loop's thread
 *  consumes each read before it makes the next. */
char *net_loop_buffer(void);

enum { NET_READ_BUFFER = 64 * 1024 };

/** Called on the loop's thread for each posted connection, once per
 *  post taken (io.c). */
void net_io_posted(net_posted *p);

/** Whether this thread runs the shared loop now (tests, assertions). */
bool net_loop_is_current(void);

/* Runs fn(arg) where the collector sees its frames: every libuv callback
 * on the shared loop that touches the collector's memory (allocates,
 * sends, holds a vat's pointer) goes through this. On any other thread
 * it is a plain call. See loop.c. */
void *net_loop_active(void *(*fn)(void *), void *arg);

#endif
