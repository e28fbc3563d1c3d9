/* A simulated world's network (vat/sim_net.h): links between machines
 * (simnet.c) and the connections' streams over them (simstream.c), the
 * streams' ends being a connection's transport (transport.h). Everything
 * here runs on the world's thread, in its steps and its source's calls:
 * no lock, no atomic. Collector memory throughout, but each end's
 * netstring reader (malloc'd: freed once the end reads no more, when the
 * world ends, or by a finalized box if neither comes). */
#ifndef VAT_NET_SIMNET_H
#define VAT_NET_SIMNET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "transport.h"
#include "vat/captp.h"
#include "vat/sim_net.h"

typedef struct sim_link sim_link;

/* The ends with something on their way to them, in the order of their
 * links, then of their streams (the order deliveries are made in): what a
 * step of the network looks at, however many connections are open. */
typedef struct sim_busy {
  struct sim_end **ends;
  size_t n, cap;
} sim_busy;

/* What travels towards an end: bytes a write made, or the end of the
 * writer's side (FIN, its vat closed it; RST, it aborted). */
enum { SIM_DATA, SIM_FIN, SIM_RST };

typedef struct sim_seg {
  struct sim_seg *next;
  uint64_t at; /* when it reaches its end, partitions aside */
  int kind;
  bool answer; /* answers the peer's call (NET_WRITE_ANSWER) */
  size_t len;
  char data[];
} sim_seg;

typedef struct sim_reader_box {
  vat_netstring_reader *reader; /* NULL once freed */
} sim_reader_box;

/* One side of a connection over a link: its transport's io. */
typedef struct sim_end {
  struct sim_end *peer;
  sim_link *link;
  vat_system *sys; /* its machine */
  vat_ref *conn;   /* its connection vat */
  uint64_t stream; /* the connection's number in the world */
  unsigned side;   /* 0: the dialling machine's, 1: the server's */
  bool busy;       /* in its network's sim_busy */
  sim_reader_box *in;
  sim_seg *head, *tail;      /* on their way to it, oldest first */
  size_t on_the_way;         /* bytes in head..tail */
  size_t answers_on_the_way; /* of them, answers to its calls */
  size_t peak;               /* the most its peer has had on the way to it */
  size_t in_pending;         /* frames handed to its vat and not yet taken */
  size_t out_max;            /* options: past this on the way, writes fail */
  size_t out_resume; /* options: half the pause, answers unread past it */
  bool closed;       /* its vat ended it: what it writes is dropped */
  bool gone;         /* it was told of the end: what comes is dropped */
  bool frozen;       /* its machine went down */
} sim_end;

struct sim_link {
  vat_system *a, *b;
  size_t index;   /* among its network's links, as they were made */
  sim_busy *busy; /* its network's */
  vat_sim_link_options opt;
  uint64_t healed_at; /* partitioned while now is before this */
  sim_end **ends;     /* of the connections over it, as they opened */
  size_t nends, cap;
  vat_sim_link_info info;
};

/* --- simstream.c ---------------------------------------------------------- */

extern const net_transport net_sim_transport;

/** A connection's two ends over `link`, from `from` (ends[0]) to the
 *  other machine (ends[1]), numbered `stream`; NULL when out of memory. */
bool sim_stream_new(sim_link *link, vat_system *from, uint64_t stream,
                    sim_end *ends[2]);
/** net_attach_fn for an end (ctx): the end takes its connection vat. */
int sim_end_attach(void *ctx, vat_ref *conn, const vat_conn_options *o,
                   size_t out_pause, size_t out_max, net_conn_io *out);
/** When the first of what is on its way to `e` may arrive (partitions
 *  counted); UINT64_MAX: nothing is. */
uint64_t sim_end_next(const sim_end *e);
/** Delivers to `e` what has arrived by `now`; returns a hash of it. */
uint64_t sim_end_deliver(sim_end *e, uint64_t now);
/** A reset: what is on its way to `e` is dropped and its vat told the
 *  connection was reset, unless it ended it or knew already. */
void sim_end_reset(sim_end *e);
/** `e`'s machine went down (crashed or stopped): what is on its way to it is
 * dropped, and what comes later too. */
void sim_end_freeze(sim_end *e);
/** The world ended: `e` lets its reader go (nothing arrives any more). */
void sim_end_forget(sim_end *e);
/** Nothing more will happen at `e` (it is done with, nothing on its way):
 *  its link may forget it. */
bool sim_end_done(const sim_end *e);

/* --- simnet.c ------------------------------------------------------------- */

/** The clock of the world `link` is in. */
uint64_t sim_link_now(const sim_link *link);
/** A number drawn from that world's seed. */
uint64_t sim_link_draw(const sim_link *link);
/** Something is on its way to `e` now: the network looks at it until
 *  nothing is. False when out of memory. */
bool sim_busy_add(sim_end *e);

#if VAT_TEST_HOOKS
/** The most connection ends the network of the world running `sys` went
 *  through in one look for its next event or one firing (0: no network):
 *  what a step costs it, which the tests bound by the live connections. */
size_t vat__sim_net_most_ends_walked(vat_system *sys);
#endif

#endif
