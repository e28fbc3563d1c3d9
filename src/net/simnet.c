/* A simulated world's network (vat/sim_net.h): its links, the machines
 * that serve, connections opened and dialled, and the faults, all one
 * event source of the world (vat/sim.h) that the harness fires when the
 * clock reaches them: planned faults and dials in the order they are due
 * (then made), then what each link has delivered by then. */
#define GC_THREADS 1
#include <gc/gc.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "internal.h"
#include "simnet.h"
#include "vat/host.h"

typedef struct server {
  struct server *next;
  vat_system *sys;
  vat_ref *bootstrap;
  vat_conn_options opt;
  vat_sim_opened_fn fn;
  void *ctx;
} server;

/* A dial on its way (vat_sim_dial). */
typedef struct dial {
  vat_system *from, *to;
  vat_ref *bootstrap;
  vat_conn_options opt;
  vat_sim_opened_fn opened;
  void *opened_ctx;
  vat_resolver *resolver;
  uint64_t deadline;
} dial;

enum { EV_PARTITION, EV_DISCONNECT, EV_DIAL };

typedef struct event {
  struct event *next;
  uint64_t at, seq; /* due, and made: ties go in the order made */
  int kind;
  sim_link *link;
  uint64_t duration; /* a partition's */
  dial *dial;
} event;

typedef struct sim_net {
  vat_system *sys; /* the world's, to name it */
  sim_link **links;
  size_t nlinks, cap;
  server *servers;
  event *events; /* by time, then by seq */
  uint64_t seq, streams;
  sim_busy busy;
#if VAT_TEST_HOOKS
  size_t most_walked; /* the most ends one look or firing went through */
#endif
} sim_net;

static const vat_sim_source net_source;

void vat_sim_link_options_default(vat_sim_link_options *o) {
  if (o == NULL)
    return;
  *o = (vat_sim_link_options){.latency_ns = 1000000,
                              .connect_timeout_ns = 1000000000,
                              .max_faults = 1,
                              .fault_window_ns = 1000000000,
                              .partition_min_ns = 100000000,
                              .partition_max_ns = 5000000000ull};
}

/* Times past this (146 years) are refused: sums of them stay in range. */
#define SIM_TIME_MAX ((uint64_t)1 << 62)

static bool valid_link_options(const vat_sim_link_options *o) {
  return o->latency_ns < SIM_TIME_MAX && o->jitter_ns < SIM_TIME_MAX &&
         o->connect_timeout_ns > 0 && o->connect_timeout_ns < SIM_TIME_MAX &&
         o->fault_rate >= 0 && o->fault_rate <= 1 &&
         (o->fault_kinds & ~VAT_SIM_NET_FAULTS_ALL) == 0 &&
         o->fault_window_ns > 0 && o->partition_min_ns > 0 &&
         o->partition_min_ns <= o->partition_max_ns;
}

/* --- The world's network -------------------------------------------------- */

/* The network of the world running `sys`, made on first use; NULL when no
 * world runs it (or no memory is left). */
static sim_net *net_of(vat_system *sys) {
  if (vat_sim_system_name(sys) == NULL)
    return NULL;
  sim_net *n = vat_sim_source_find(sys, &net_source);
  if (n != NULL)
    return n;
  n = GC_MALLOC(sizeof *n);
  if (n == NULL)
    return NULL;
  n->sys = sys;
  if (vat_sim_source_add(sys, &net_source, n) != VAT_OK)
    return NULL;
  return n;
}

/* Both of one world, and not one machine twice. */
static sim_net *pair_net(vat_system *a, vat_system *b) {
  if (a == NULL || b == NULL || a == b)
    return NULL;
  sim_net *n = net_of(a);
  return n != NULL && vat_sim_source_find(b, &net_source) == n ? n : NULL;
}

uint64_t sim_link_now(const sim_link *link) {
  return vat_system_now(link->a);
}

uint64_t sim_link_draw(const sim_link *link) {
  return vat_sim_draw(link->a);
}

static sim_link *find_link(sim_net *n, vat_system *a, vat_system *b) {
  for (size_t i = 0; i < n->nlinks; i++) {
    sim_link *l = n->links[i];
    if ((l->a == a && l->b == b) || (l->a == b && l->b == a))
      return l;
  }
  return NULL;
}

static void plan(sim_net *n, event *e) {
  e->seq = n->seq++;
  event **p = &n->events;
  while (*p != NULL && (*p)->at <= e->at)
    p = &(*p)->next;
  e->next = *p;
  *p = e;
}

static int plan_fault(sim_net *n, sim_link *l, int kind, uint64_t at,
                      uint64_t duration) {
  event *e = GC_MALLOC(sizeof *e);
  if (e == NULL)
    return VAT_ENOMEM;
  e->at = at;
  e->kind = kind;
  e->link = l;
  e->duration = duration;
  plan(n, e);
  return VAT_OK;
}

static const char *link_name(const sim_link *l, char *buf, size_t size);

/* A fault as a plan writes it: "partition m0-m1 for 150ms", "disconnect
 * m0-m1" (strike() reads it back). */
static void fault_text(const sim_link *l, int kind, uint64_t duration,
                       char *buf, size_t size) {
  char name[80], time[32];
  link_name(l, name, sizeof name);
  if (kind == EV_PARTITION) {
    vat_sim_time_format(duration, time, sizeof time);
    snprintf(buf, size, "partition %s for %s", name, time);
  } else {
    snprintf(buf, size, "disconnect %s", name);
  }
}

/* The link's faults, drawn as it is made: faults at a time of the world
 * (vat_sim_source_fault), in its plan, which strikes them through
 * strike() below. */
static int draw_faults(sim_net *n, sim_link *l) {
  const vat_sim_link_options *o = &l->opt;
  unsigned kinds = o->fault_kinds ? o->fault_kinds : VAT_SIM_NET_FAULTS_ALL;
  unsigned nkinds = (unsigned)__builtin_popcount(kinds);
  for (unsigned i = 0; o->fault_rate > 0 && i < o->max_faults; i++) {
    if ((double)(sim_link_draw(l) >> 11) * 0x1p-53 >= o->fault_rate)
      continue;
    unsigned pick = (unsigned)(sim_link_draw(l) % nkinds), kind = 0;
    for (;; kind++)
      if ((kinds & VAT_SIM_NET_FAULT(kind)) && pick-- == 0)
        break;
    uint64_t at = sim_link_now(l) + sim_link_draw(l) % o->fault_window_ns;
    uint64_t span = o->partition_max_ns - o->partition_min_ns;
    uint64_t duration =
        o->partition_min_ns + (span ? sim_link_draw(l) % (span + 1) : 0);
    char text[160];
    fault_text(l, (int)kind, duration, text, sizeof text);
    int rc = vat_sim_source_fault(n->sys, &net_source, at, text);
    if (rc != VAT_OK)
      return rc;
  }
  return VAT_OK;
}

static int make_link(sim_net *n, vat_system *a, vat_system *b,
                     const vat_sim_link_options *o, sim_link **out) {
  sim_link *l = GC_MALLOC(sizeof *l);
  if (l == NULL)
    return VAT_ENOMEM;
  if (n->nlinks == n->cap) {
    size_t cap = n->cap ? 2 * n->cap : 4;
    sim_link **links = GC_MALLOC(cap * sizeof *links);
    if (links == NULL)
      return VAT_ENOMEM;
    if (n->nlinks)
      memcpy(links, n->links, n->nlinks * sizeof *links);
    n->links = links;
    n->cap = cap;
  }
  l->a = a;
  l->b = b;
  l->opt = *o;
  l->index = n->nlinks;
  l->busy = &n->busy;
  n->links[n->nlinks++] = l;
  *out = l;
  return draw_faults(n, l);
}

/* The link of a and b, made with the defaults when there is none. */
static int link_of(sim_net *n, vat_system *a, vat_system *b, sim_link **out) {
  if ((*out = find_link(n, a, b)) != NULL)
    return VAT_OK;
  vat_sim_link_options o;
  vat_sim_link_options_default(&o);
  return make_link(n, a, b, &o, out);
}

/* --- What is on its way ----------------------------------------------------
 */

/* Ends deliver in the order of their links, then of their streams, as
 * they did when every end of every link was walked: a run's deliveries,
 * and so its schedule, are what they were. */
static bool delivers_before(const sim_end *x, const sim_end *y) {
  if (x->link->index != y->link->index)
    return x->link->index < y->link->index;
  return x->stream != y->stream ? x->stream < y->stream : x->side < y->side;
}

bool sim_busy_add(sim_end *e) {
  sim_busy *b = e->link->busy;
  if (e->busy)
    return true;
  if (b->n == b->cap) {
    size_t cap = b->cap ? 2 * b->cap : 8;
    sim_end **ends = GC_MALLOC(cap * sizeof *ends);
    if (ends == NULL)
      return false;
    if (b->n)
      memcpy(ends, b->ends, b->n * sizeof *ends);
    b->ends = ends;
    b->cap = cap;
  }
  size_t at = b->n;
  while (at > 0 && delivers_before(e, b->ends[at - 1]))
    at--;
  memmove(b->ends + at + 1, b->ends + at, (b->n - at) * sizeof *b->ends);
  b->ends[at] = e;
  b->n++;
  e->busy = true;
  return true;
}

/* Ends with nothing on their way any more (delivered, dropped) leave. */
static void busy_settle(sim_busy *b) {
  size_t kept = 0;
  for (size_t i = 0; i < b->n; i++) {
    sim_end *e = b->ends[i];
    if (e->head != NULL)
      b->ends[kept++] = e;
    else
      e->busy = false;
  }
  if (kept < b->n) /* b->ends is NULL until an end is first busy */
    memset(b->ends + kept, 0, (b->n - kept) * sizeof *b->ends);
  b->n = kept;
}

static server *server_of(sim_net *n, vat_system *sys) {
  for (server *s = n->servers; s != NULL; s = s->next)
    if (s->sys == sys)
      return s;
  return NULL;
}

static const char *link_name(const sim_link *l, char *buf, size_t size) {
  snprintf(buf, size, "%s-%s", vat_sim_system_name(l->a),
           vat_sim_system_name(l->b));
  return buf;
}

/* --- Connections ---------------------------------------------------------- */

/* A machine that crashed, or that a stop fault stopped, is silent. */
static bool machine_down(vat_system *sys) {
  return vat_sim_system_crashed(sys) || vat_sim_system_stopped(sys);
}

static int add_end(sim_link *l, sim_end *e) {
  if (l->nends == l->cap && l->cap > 0) {
    /* Ends done with go first: reconnecting for ever must not grow it. */
    size_t kept = 0;
    for (size_t i = 0; i < l->nends; i++)
      if (!sim_end_done(l->ends[i]))
        l->ends[kept++] = l->ends[i];
    memset(l->ends + kept, 0, (l->nends - kept) * sizeof *l->ends);
    l->nends = kept;
  }
  if (l->nends == l->cap) {
    size_t cap = l->cap ? 2 * l->cap : 8;
    sim_end **ends = GC_MALLOC(cap * sizeof *ends);
    if (ends == NULL)
      return VAT_ENOMEM;
    if (l->nends)
      memcpy(ends, l->ends, l->nends * sizeof *ends);
    l->ends = ends;
    l->cap = cap;
  }
  l->ends[l->nends++] = e;
  return VAT_OK;
}

/* `o` (NULL: the defaults) with, unless it names its connection vat
 * itself, the label "A-B.K": the side of machine A of the K-th connection
 * on its link with B. A plain word, as a plan names a vat by (vat/sim.h):
 * "captp" twice would be vat#N in plans and traces. The label is copied
 * as the vat is made, so `buf` may go once it is. */
static vat_conn_options labelled(const vat_conn_options *o, vat_system *self,
                                 vat_system *peer, uint64_t k, char *buf,
                                 size_t size) {
  vat_conn_options lo;
  vat_conn_options_default(&lo);
  if (o != NULL)
    lo = *o;
  if (lo.label == NULL) {
    snprintf(buf, size, "%s-%s.%" PRIu64, vat_sim_system_name(self),
             vat_sim_system_name(peer), k);
    lo.label = buf;
  }
  return lo;
}

/* Both sides' connections, now: `from`'s with bootstrap and opt, the
 * server's with its own. */
static int open_stream(sim_net *n, sim_link *l, vat_system *from,
                       vat_ref *bootstrap, const vat_conn_options *opt,
                       server *srv, vat_conn **out) {
  sim_end *ends[2];
  if (!sim_stream_new(l, from, ++n->streams, ends))
    return VAT_ENOMEM;
  vat_conn *mine, *theirs;
  uint64_t k = l->info.connections + 1;
  char label[2][80];
  vat_conn_options mine_opt = labelled(opt, from, srv->sys, k, label[0],
                                       sizeof label[0]),
                   theirs_opt = labelled(&srv->opt, srv->sys, from, k, label[1],
                                         sizeof label[1]);
  int rc =
      net_conn_open_with(from, bootstrap, &mine_opt, NULL, &net_sim_transport,
                         sim_end_attach, ends[0], &mine);
  if (rc != VAT_OK)
    return rc;
  rc = net_conn_open_with(srv->sys, srv->bootstrap, &theirs_opt, NULL,
                          &net_sim_transport, sim_end_attach, ends[1], &theirs);
  if (rc != VAT_OK) {
    /* As a peer that accepts and closes at once. */
    ends[1]->gone = ends[1]->closed = true;
    vat_conn_close(mine);
    return rc;
  }
  if ((rc = add_end(l, ends[0])) != VAT_OK ||
      (rc = add_end(l, ends[1])) != VAT_OK) {
    vat_conn_close(mine);
    vat_conn_close(theirs);
    return rc;
  }
  l->info.connections++;
  if (srv->fn != NULL)
    srv->fn(srv->ctx, srv->sys, theirs);
  *out = mine;
  return VAT_OK;
}

static int check_options(const vat_conn_options *opt) {
  int rc = net_out_limits(opt, NULL, NULL);
  return rc == VAT_OK ? net_timeout_limits(opt, NULL, NULL) : rc;
}

int vat_sim_serve(vat_system *sys, vat_ref *bootstrap,
                  const vat_conn_options *opt, vat_sim_opened_fn fn,
                  void *ctx) {
  sim_net *n = net_of(sys);
  if (n == NULL || check_options(opt) != VAT_OK)
    return VAT_EINVAL;
  server *s = server_of(n, sys);
  if (s == NULL) {
    if ((s = GC_MALLOC(sizeof *s)) == NULL)
      return VAT_ENOMEM;
    s->sys = sys;
    s->next = n->servers;
    n->servers = s;
  }
  s->bootstrap = bootstrap;
  vat_conn_options_default(&s->opt);
  if (opt != NULL)
    s->opt = *opt;
  s->fn = fn;
  s->ctx = ctx;
  return VAT_OK;
}

int vat_sim_connect(vat_system *from, vat_system *to, vat_ref *bootstrap,
                    const vat_conn_options *opt, vat_conn **out) {
  sim_net *n = pair_net(from, to);
  if (n == NULL || out == NULL || check_options(opt) != VAT_OK)
    return VAT_EINVAL;
  if (machine_down(from) || machine_down(to))
    return VAT_ECLOSED;
  server *srv = server_of(n, to);
  if (srv == NULL)
    return VAT_ENOTFOUND;
  sim_link *l;
  int rc = link_of(n, from, to, &l);
  return rc == VAT_OK ? open_stream(n, l, from, bootstrap, opt, srv, out) : rc;
}

int vat_sim_dial(vat_system *from, vat_system *to, vat_ref *bootstrap,
                 const vat_conn_options *opt, vat_sim_opened_fn opened,
                 void *ctx, vat_promise **peer_bootstrap) {
  sim_net *n = pair_net(from, to);
  if (n == NULL || peer_bootstrap == NULL || check_options(opt) != VAT_OK)
    return VAT_EINVAL;
  if (machine_down(from))
    return VAT_ECLOSED;
  sim_link *l;
  int rc = link_of(n, from, to, &l);
  if (rc != VAT_OK)
    return rc;
  dial *d = GC_MALLOC(sizeof *d);
  event *e = GC_MALLOC(sizeof *e);
  vat_promise *p;
  if (d == NULL || e == NULL || vat_promise_new(&p, &d->resolver) != VAT_OK)
    return VAT_ENOMEM;
  d->from = from;
  d->to = to;
  d->bootstrap = bootstrap;
  d->opened = opened;
  d->opened_ctx = ctx;
  vat_conn_options_default(&d->opt);
  if (opt != NULL)
    d->opt = *opt;
  uint64_t now = sim_link_now(l);
  d->deadline = now + l->opt.connect_timeout_ns;
  e->at = now + l->opt.latency_ns;
  e->kind = EV_DIAL;
  e->link = l;
  e->dial = d;
  plan(n, e);
  *peer_bootstrap = p;
  return VAT_OK;
}

/* The dial arrives: it connects, is refused, or (a partition, a machine
 * down) waits until it may, or times out. */
static uint64_t arrive(sim_net *n, event *e, uint64_t now) {
  dial *d = e->dial;
  sim_link *l = e->link;
  if (machine_down(d->from))
    return 1; /* nobody waits for it any more */
  bool blocked = machine_down(d->to) || l->healed_at > now;
  if (blocked && now < d->deadline) {
    e->at = l->healed_at > now && l->healed_at < d->deadline ? l->healed_at
                                                             : d->deadline;
    plan(n, e);
    return 2;
  }
  const char *refusal =
      blocked ? "connect: connection timed out" : "connect: connection refused";
  server *srv = server_of(n, d->to);
  if (!blocked && srv != NULL) {
    vat_conn *conn;
    int rc = open_stream(n, l, d->from, d->bootstrap, &d->opt, srv, &conn);
    if (rc == VAT_OK) {
      if (d->opened != NULL)
        d->opened(d->opened_ctx, d->from, conn);
      vat_resolve(NULL, d->resolver,
                  vat_promise_value(vat_conn_bootstrap(conn)));
      return 3;
    }
    refusal = vat_strerror(rc);
  }
  vat_break(NULL, d->resolver, net_disconnected(refusal));
  return 4;
}

/* --- Faults --------------------------------------------------------------- */

static uint64_t partition(sim_net *n, sim_link *l, uint64_t now,
                          uint64_t duration) {
  uint64_t healed = duration < UINT64_MAX - now ? now + duration : UINT64_MAX;
  if (healed > l->healed_at)
    l->healed_at = healed;
  l->info.partitions++;
  char name[80], text[128];
  snprintf(text, sizeof text, "partition %s for %.3f s",
           link_name(l, name, sizeof name), (double)duration * 1e-9);
  vat_sim_note(n->sys, text);
  return l->healed_at;
}

static uint64_t disconnect(sim_net *n, sim_link *l) {
  unsigned reset = 0;
  for (size_t i = 0; i < l->nends; i++) {
    sim_end *e = l->ends[i];
    if (!e->gone && !e->closed && !e->frozen)
      reset++;
    sim_end_reset(e);
  }
  l->info.disconnects++;
  char name[80], text[128];
  snprintf(text, sizeof text, "disconnect %s: %u connection ends reset",
           link_name(l, name, sizeof name), reset);
  vat_sim_note(n->sys, text);
  return reset;
}

int vat_sim_net_fault(vat_system *a, vat_system *b, vat_sim_net_fault_kind kind,
                      uint64_t at_ns, uint64_t duration_ns) {
  sim_net *n = pair_net(a, b);
  if (n == NULL ||
      (kind != VAT_SIM_NET_PARTITION && kind != VAT_SIM_NET_DISCONNECT) ||
      (kind == VAT_SIM_NET_PARTITION && duration_ns == 0))
    return VAT_EINVAL;
  sim_link *l;
  int rc = link_of(n, a, b, &l);
  return rc == VAT_OK ? plan_fault(n, l, (int)kind, at_ns, duration_ns) : rc;
}

int vat_sim_link(vat_system *a, vat_system *b, const vat_sim_link_options *o) {
  sim_net *n = pair_net(a, b);
  vat_sim_link_options dflt;
  if (o == NULL) {
    vat_sim_link_options_default(&dflt);
    o = &dflt;
  }
  if (n == NULL || !valid_link_options(o))
    return VAT_EINVAL;
  if (find_link(n, a, b) != NULL)
    return VAT_EBUSY;
  sim_link *l;
  return make_link(n, a, b, o, &l);
}

int vat_sim_link_inspect(vat_system *a, vat_system *b, vat_sim_link_info *out) {
  sim_net *n = pair_net(a, b);
  if (n == NULL || out == NULL)
    return VAT_EINVAL;
  sim_link *l = find_link(n, a, b);
  if (l == NULL)
    return VAT_ENOTFOUND;
  *out = l->info;
  out->partitioned = l->healed_at > sim_link_now(l);
  out->healed_at_ns = l->healed_at;
  return VAT_OK;
}

/* --- The world's source --------------------------------------------------- */

/* The first planned event of a kind: dials keep the world going, faults
 * do not (vat/sim.h). */
static uint64_t first_event(const sim_net *n, bool faults) {
  for (const event *e = n->events; e != NULL; e = e->next)
    if ((e->kind != EV_DIAL) == faults)
      return e->at;
  return UINT64_MAX;
}

static uint64_t next_fault(void *ctx) {
  return first_event(ctx, true);
}

/* What a step cost, for the tests only (vat__sim_net_most_ends_walked). */
static void walked(sim_net *n, size_t ends) {
#if VAT_TEST_HOOKS
  if (ends > n->most_walked)
    n->most_walked = ends;
#else
  (void)n, (void)ends;
#endif
}

static uint64_t next_event(void *ctx) {
  sim_net *n = ctx;
  uint64_t next = first_event(n, false);
  for (size_t i = 0; i < n->busy.n; i++) {
    uint64_t t = sim_end_next(n->busy.ends[i]);
    if (t < next)
      next = t;
  }
  walked(n, n->busy.n);
  return next;
}

static uint64_t mix(uint64_t h, uint64_t v) {
  return (h ^ v) * 0x100000001B3ull;
}

/* Whether the `len` bytes at `s` are machine `sys`'s name. */
static bool is_named(vat_system *sys, const char *s, size_t len) {
  const char *name = vat_sim_system_name(sys);
  return strlen(name) == len && memcmp(name, s, len) == 0;
}

/* The link "A-B" (machine names hold no '-') names, in either order: a
 * link joins two machines both ways, so "wkr-m0" is the link m0-wkr. */
static sim_link *link_named(sim_net *n, const char *name, size_t len) {
  const char *dash = memchr(name, '-', len);
  if (dash == NULL)
    return NULL;
  size_t first = (size_t)(dash - name), second = len - first - 1;
  for (size_t i = 0; i < n->nlinks; i++) {
    sim_link *l = n->links[i];
    if ((is_named(l->a, name, first) && is_named(l->b, dash + 1, second)) ||
        (is_named(l->b, name, first) && is_named(l->a, dash + 1, second)))
      return l;
  }
  return NULL;
}

/* A fault at a time of the world's plan, as fault_text writes it: struck
 * now on its link. */
static int strike(void *ctx, const char *text, uint64_t *hash) {
  sim_net *n = ctx;
  int kind;
  size_t skip;
  if (strncmp(text, "partition ", 10) == 0) {
    kind = EV_PARTITION;
    skip = 10;
  } else if (strncmp(text, "disconnect ", 11) == 0) {
    kind = EV_DISCONNECT;
    skip = 11;
  } else {
    return VAT_EINVAL;
  }
  const char *name = text + skip, *end = strchr(name, ' ');
  size_t len = end != NULL ? (size_t)(end - name) : strlen(name);
  uint64_t duration = 0;
  if (kind == EV_PARTITION) {
    const char *after;
    if (end == NULL || strncmp(end, " for ", 5) != 0 ||
        vat_sim_time_parse(end + 5, &duration, &after) != VAT_OK ||
        *after != '\0' || duration == 0)
      return VAT_EINVAL;
  } else if (end != NULL) {
    return VAT_EINVAL;
  }
  sim_link *l = link_named(n, name, len);
  if (l == NULL)
    return VAT_ENOTFOUND;
  uint64_t now = sim_link_now(l);
  *hash =
      kind == EV_PARTITION ? partition(n, l, now, duration) : disconnect(n, l);
  return VAT_OK;
}

static uint64_t fire(void *ctx, uint64_t now) {
  sim_net *n = ctx;
  uint64_t h = 0xCBF29CE484222325ull;
  while (n->events != NULL && n->events->at <= now) {
    event *e = n->events;
    n->events = e->next;
    e->next = NULL;
    h = mix(mix(h, e->seq), (uint64_t)e->kind);
    if (e->kind == EV_PARTITION)
      h = mix(h, partition(n, e->link, now, e->duration));
    else if (e->kind == EV_DISCONNECT)
      h = mix(h, disconnect(n, e->link));
    else
      h = mix(h, arrive(n, e, now));
  }
  /* A delivery only sends to its vat: nothing joins the ends meanwhile. */
  walked(n, n->busy.n);
  for (size_t i = 0; i < n->busy.n; i++)
    h = mix(h, sim_end_deliver(n->busy.ends[i], now));
  busy_settle(&n->busy);
  return h;
}

static void down(void *ctx, vat_system *sys) {
  sim_net *n = ctx;
  for (size_t i = 0; i < n->nlinks; i++)
    for (size_t j = 0; j < n->links[i]->nends; j++)
      if (n->links[i]->ends[j]->sys == sys)
        sim_end_freeze(n->links[i]->ends[j]);
}

/* The world ends with connections open (their vats do not end one by
 * one): their readers, the only memory outside the collector, go now. */
static void ended(void *ctx) {
  sim_net *n = ctx;
  for (size_t i = 0; i < n->nlinks; i++)
    for (size_t j = 0; j < n->links[i]->nends; j++)
      sim_end_forget(n->links[i]->ends[j]);
}

#if VAT_TEST_HOOKS
size_t vat__sim_net_most_ends_walked(vat_system *sys) {
  sim_net *n = vat_sim_source_find(sys, &net_source);
  return n != NULL ? n->most_walked : 0;
}
#endif

static const vat_sim_source net_source = {.name = "network",
                                          .strike = strike,
                                          .next_event = next_event,
                                          .next_fault = next_fault,
                                          .fire = fire,
                                          .down = down,
                                          .ended = ended};
