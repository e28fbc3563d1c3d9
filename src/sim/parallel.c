/* A campaign's seeds in worker processes (vat/sim.h, "Parallel
 * campaigns").
 *
 * The caller forks the workers (no exec) and waits for them. They share
 * one anonymous mapping: the next chunk of seeds to take, the lowest seed
 * that ended the campaign so far (its limit), per worker the seed it runs
 * (so a worker that dies is known by its seed) and its counts for the
 * progress line, and per chunk the seeds run in it and their turns and
 * faults (so the totals can be those of the seeds a serial campaign would
 * have run, whichever worker ran them). Chunks are taken in order and no
 * seed at or above the limit is started, so every seed below the final
 * limit runs, once. Each worker's pipe carries its results: the seed that
 * failed (or whose run returned an error), the last seed's result when it
 * passed, and a last word saying it finished. A worker that closes its
 * pipe without that word died, inside the seed its slot names.
 *
 * Forking a process that has threads: the child has only the forking
 * thread, and a lock another thread held at fork(2) stays held there.
 * The collector's lock is made safe by its fork handlers: libgc installs
 * them at GC_INIT where it can (Debian's 8.2.2 does: HANDLE_FORK is its
 * default on Linux), and GC_atfork_prepare/parent/child, called around
 * fork(2) here, are no-ops then and do the same work in its manual mode.
 * The child's collector forgets the other threads and marks alone. The
 * atom table's lock is taken across fork(2) too, before the collector's
 * (value/atom.c's order). glibc's own fork handlers cover malloc and
 * stdio. A worker touches nothing else of the caller's: it makes its own
 * systems, one per seed, on its one thread, runs no finaliser (the
 * caller's objects it cannot reach would otherwise be finalised there),
 * and ends with _exit(2): no atexit handler runs, no stdio buffer of the
 * caller's is written twice (they were flushed before the fork). */
#include "sim/parallel.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif
#include <unistd.h>

#include "sim/run.h"
#include "util/gc.h"
#include "value/value_internal.h"

/* The mapping is shared by processes: its atomics must be the processor's
 * own, not a lock kept in one process's memory. */
#if ATOMIC_LLONG_LOCK_FREE != 2
#error "parallel campaigns need lock-free 64-bit atomics"
#endif

typedef _Atomic unsigned long long shared_u64;

enum {
  /* Chunks at most, so that the per-chunk tallies stay small (24 KiB):
   * a campaign of up to this many seeds takes them one at a time (taking
   * one costs an atomic add, a world thousands of times more); a longer
   * one in chunks of count / MAX_CHUNKS, rounded up, still hundreds of
   * chunks for a few dozen workers to share. */
  MAX_CHUNKS = 1024,
  /* How often the caller looks at the workers' counts to draw progress. */
  POLL_MS = 100,
};

/* One worker's place in the mapping, written by it alone. */
typedef struct slot {
  alignas(64) shared_u64 running;  /* the seed's index + 1; 0: none */
  shared_u64 seeds, turns, failed; /* for the progress line */
} slot;

/* What ran of one chunk, written by the worker that took it. */
typedef struct tally {
  shared_u64 run, turns, faults;
} tally;

typedef struct shared {
  alignas(64) shared_u64 next_chunk;
  alignas(64) shared_u64 limit; /* the lowest index that ended it; count:
                                   none yet */
} shared;

enum report_kind { REPORT_EVENT = 1, REPORT_LAST, REPORT_DONE };

/* A worker's message on its pipe; EVENT and LAST are followed by the
 * seed's vat_sim_result. */
typedef struct report {
  uint32_t kind;
  int32_t rc;
  uint64_t index; /* the seed's offset from the first */
} report;

/* What a worker can send: EVENT or LAST (one of them; after a failure it
 * takes no more seeds), then DONE. */
#define MAX_SENT (2 * sizeof(report) + sizeof(vat_sim_result))

typedef struct worker {
  pid_t pid;
  int fd; /* the pipe's read end; -1 once at its end */
  size_t len;
  unsigned char sent[MAX_SENT];
  bool overflow; /* it sent more than it can: a broken worker */
} worker;

typedef struct campaign {
  const vat__sim_seeds *seeds;
  pid_t parent;
  uint64_t first, count, chunk, nchunks;
  unsigned jobs, started;
  void *map;
  size_t map_size;
  shared *sh;
  slot *slots;
  tally *tallies;
  worker *workers;
} campaign;

unsigned vat__sim_jobs(const vat_sim_options *o) {
  if (o->jobs != 0)
    return o->jobs;
  long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  return cpus > 0
             ? (unsigned)(cpus < VAT_SIM_MAX_JOBS ? cpus : VAT_SIM_MAX_JOBS)
             : 1;
}

/* --- The shared mapping --------------------------------------------------- */

static size_t round_up(size_t n, size_t to) {
  return (n + to - 1) / to * to;
}

static bool map_shared(campaign *c) {
  size_t slots_at = round_up(sizeof(shared), 64);
  size_t tallies_at = round_up(slots_at + c->jobs * sizeof(slot), 64);
  c->map_size = tallies_at + c->nchunks * sizeof(tally);
  void *m = mmap(NULL, c->map_size, PROT_READ | PROT_WRITE,
                 MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED)
    return false;
  c->map = m; /* zero-filled: counts 0, chunk 0 next */
  c->sh = m;
  c->slots = (slot *)((char *)m + slots_at);
  c->tallies = (tally *)((char *)m + tallies_at);
  atomic_store_explicit(&c->sh->limit, c->count, memory_order_relaxed);
  return true;
}

/* Lowers the limit to `index` unless it is lower already. */
static void lower_limit(shared *sh, uint64_t index) {
  unsigned long long seen =
      atomic_load_explicit(&sh->limit, memory_order_relaxed);
  while (index < seen && !atomic_compare_exchange_weak_explicit(
                             &sh->limit, &seen, index, memory_order_relaxed,
                             memory_order_relaxed)) {
  }
}

static void add(shared_u64 *x, uint64_t n) {
  atomic_fetch_add_explicit(x, n, memory_order_relaxed);
}

static uint64_t get(shared_u64 *x) {
  return atomic_load_explicit(x, memory_order_relaxed);
}

/* --- A worker ------------------------------------------------------------- */

/* All of `len` bytes, or false. */
static bool send_all(int fd, const void *data, size_t len) {
  const char *p = data;
  while (len > 0) {
    ssize_t n = write(fd, p, len);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      return false;
    p += n;
    len -= (size_t)n;
  }
  return true;
}

static bool send_report(int fd, uint32_t kind, int rc, uint64_t index,
                        const vat_sim_result *r) {
  report h = {.kind = kind, .rc = rc, .index = index};
  return send_all(fd, &h, sizeof h) &&
         (r == NULL || send_all(fd, r, sizeof *r));
}

/* Runs the seeds of the chunks it takes, in order, until none is left or
 * the next seed is at or above the limit; then says it is done. */
static _Noreturn void worker_main(campaign *c, unsigned me, int fd) {
#ifdef __linux__
  /* A worker dies with its caller: an orphan would run the rest of the
   * campaign for no one. */
  if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != c->parent)
    _exit(3);
#endif
  for (unsigned i = 0; i < c->started; i++)
    close(c->workers[i].fd);    /* the earlier workers' pipes are not its */
  GC_set_finalize_on_demand(1); /* and GC_invoke_finalizers never called */
  unsetenv("VAT_TRACE"); /* the failing seed's run in the caller traces */
  slot *s = &c->slots[me];
  for (;;) {
    uint64_t k =
        atomic_fetch_add_explicit(&c->sh->next_chunk, 1, memory_order_relaxed);
    if (k >= c->nchunks)
      break;
    tally *t = &c->tallies[k];
    uint64_t end =
        c->count - k * c->chunk < c->chunk ? c->count : (k + 1) * c->chunk;
    for (uint64_t i = k * c->chunk; i < end; i++) {
      if (i >= get(&c->sh->limit))
        goto done; /* a lower seed failed: this one does not count */
      atomic_store_explicit(&s->running, i + 1, memory_order_relaxed);
      vat_sim_result r;
      memset(&r, 0, sizeof r);
      int rc = c->seeds->run(c->seeds->ctx, c->first + i, &r);
      add(&t->run, 1);
      add(&t->turns, r.total_turns);
      add(&t->faults, r.total_faults);
      add(&s->seeds, 1);
      add(&s->turns, r.total_turns);
      atomic_store_explicit(&s->running, 0, memory_order_relaxed);
      if (rc != VAT_OK || r.failed) {
        add(&s->failed, 1);
        lower_limit(c->sh, i);
        if (!send_report(fd, REPORT_EVENT, rc, i, &r))
          _exit(2);
        goto done;
      }
      if (i == c->count - 1 && !send_report(fd, REPORT_LAST, rc, i, &r))
        _exit(2);
    }
  }
done:
  fflush(NULL); /* what the scenario printed here */
  _exit(send_report(fd, REPORT_DONE, VAT_OK, 0, NULL) ? 0 : 2);
}

/* --- Starting and collecting the workers ---------------------------------- */

/* Forks worker `i`; VAT_EIO (errno kept) when its pipe or fork failed. */
static int start(campaign *c, unsigned i) {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) /* no exec of another thread's gets it */
    return VAT_EIO;
  vat__atom_table_lock();
  GC_atfork_prepare();
  pid_t pid = fork();
  if (pid == 0) {
    GC_atfork_child();
    vat__atom_table_unlock();
    close(fds[0]);
    worker_main(c, i, fds[1]);
  }
  int err = errno;
  GC_atfork_parent();
  vat__atom_table_unlock();
  close(fds[1]); /* so that its end is the pipe's end */
  if (pid < 0) {
    close(fds[0]);
    errno = err;
    return VAT_EIO;
  }
  c->workers[i] = (worker){.pid = pid, .fd = fds[0]};
  c->started++;
  return VAT_OK;
}

/* Takes what worker `w` sent since the last call; false at its end. */
static bool take(worker *w) {
  unsigned char spill[256];
  for (;;) {
    bool room = w->len < sizeof w->sent;
    unsigned char *to = room ? w->sent + w->len : spill;
    size_t size = room ? sizeof w->sent - w->len : sizeof spill;
    ssize_t n = read(w->fd, to, size);
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0 && errno == EAGAIN)
      return true;
    if (n <= 0) {
      close(w->fd);
      w->fd = -1;
      return false;
    }
    if (room)
      w->len += (size_t)n;
    else
      w->overflow = true;
    return true;
  }
}

static void draw(campaign *c, vat__sim_progress *p) {
  if (!vat__sim_progress_due(p))
    return;
  uint64_t seeds = 0, turns = 0, failed = 0;
  for (unsigned i = 0; i < c->started; i++) {
    seeds += get(&c->slots[i].seeds);
    turns += get(&c->slots[i].turns);
    failed += get(&c->slots[i].failed);
  }
  vat__sim_progress_update(p, seeds, turns, failed);
}

/* Worker `i` ended without saying it finished. If it died inside a seed,
 * the campaign ends there, as at a failure: the others take no seed above
 * it from now on. */
static void died_in(campaign *c, unsigned i) {
  uint64_t running = get(&c->slots[i].running);
  if (running != 0)
    lower_limit(c->sh, running - 1);
}

/* Whether the worker's messages end with DONE. */
static bool finished(const worker *w) {
  if (w->overflow)
    return false;
  for (size_t at = 0; at + sizeof(report) <= w->len;) {
    report h;
    memcpy(&h, w->sent + at, sizeof h);
    at += sizeof h;
    if (h.kind == REPORT_DONE)
      return at == w->len;
    at += sizeof(vat_sim_result);
  }
  return false;
}

/* Reads every worker's pipe to its end, drawing progress meanwhile; a
 * worker whose pipe ends without DONE lowers the limit to its seed. False
 * when poll(2) failed (errno): the workers were told to stop, and their
 * pipes read to the end all the same. */
static bool collect(campaign *c, vat__sim_progress *p) {
  struct pollfd fds[VAT_SIM_MAX_JOBS];
  unsigned owner[VAT_SIM_MAX_JOBS];
  for (;;) {
    nfds_t n = 0;
    for (unsigned i = 0; i < c->started; i++)
      if (c->workers[i].fd >= 0) {
        fds[n] = (struct pollfd){.fd = c->workers[i].fd, .events = POLLIN};
        owner[n++] = i;
      }
    if (n == 0)
      return true;
    int ready = poll(fds, n, p != NULL && p->fd >= 0 ? POLL_MS : -1);
    if (ready < 0 && errno != EINTR) {
      int err = errno;
      lower_limit(c->sh, 0); /* every worker stops at its next seed */
      for (unsigned i = 0; i < c->started; i++)
        while (c->workers[i].fd >= 0 && take(&c->workers[i])) {
        }
      errno = err;
      return false;
    }
    for (nfds_t k = 0; ready > 0 && k < n; k++)
      if (fds[k].revents != 0 && !take(&c->workers[owner[k]]) &&
          !finished(&c->workers[owner[k]]))
        died_in(c, owner[k]);
    draw(c, p);
  }
}

/* Waits for worker `w`; its status, or -1 when it cannot be had (SIGCHLD
 * ignored: the system reaped it). */
static int reap(worker *w) {
  int status;
  for (;;) {
    if (waitpid(w->pid, &status, 0) == w->pid)
      return status;
    if (errno != EINTR)
      return -1;
  }
}

/* --- The result a serial campaign would give ------------------------------ */

/* The worker's report of `kind`, with its result copied into `r`. */
static bool find_report(const worker *w, uint32_t kind, report *h,
                        vat_sim_result *r) {
  for (size_t at = 0; at + sizeof *h <= w->len;) {
    memcpy(h, w->sent + at, sizeof *h);
    at += sizeof *h;
    if (h->kind == REPORT_DONE)
      continue;
    if (at + sizeof *r > w->len)
      return false;
    if (h->kind == kind) {
      memcpy(r, w->sent + at, sizeof *r);
      return true;
    }
    at += sizeof *r;
  }
  return false;
}

static void describe_death(int status, char *buf, size_t size) {
  if (status == -1)
    snprintf(buf, size, "ended (its status is not known)");
  else if (WIFSIGNALED(status))
    snprintf(buf, size, "was killed by signal %d (%s)", WTERMSIG(status),
             strsignal(WTERMSIG(status)));
  else
    snprintf(buf, size, "exited with status %d", WEXITSTATUS(status));
}

/* The lowest seed that ended the campaign, if one did: a failure or an
 * error a worker reported (*rc, *theirs), or a worker that died inside it
 * (*status). */
typedef struct ending {
  bool found, died;
  uint64_t index;
  int rc, status;
  vat_sim_result theirs;
} ending;

static void find_ending(campaign *c, const int *status, ending *e) {
  e->found = false;
  for (unsigned i = 0; i < c->started; i++) {
    report h;
    vat_sim_result r;
    if (find_report(&c->workers[i], REPORT_EVENT, &h, &r) &&
        (!e->found || h.index < e->index))
      *e = (ending){.found = true, .index = h.index, .rc = h.rc, .theirs = r};
  }
  /* A worker that died inside a seed: a seed it had not reported. */
  for (unsigned i = 0; i < c->started; i++) {
    uint64_t running = get(&c->slots[i].running);
    if (finished(&c->workers[i]) || running == 0 ||
        (e->found && running - 1 >= e->index))
      continue;
    *e = (ending){
        .found = true, .died = true, .index = running - 1, .status = status[i]};
  }
}

/* Totals over the seeds up to index `upto` (all when it is count). */
static void totals(campaign *c, uint64_t upto, uint64_t *run, uint64_t *turns,
                   uint64_t *faults) {
  *run = *turns = *faults = 0;
  for (uint64_t k = 0; k < c->nchunks && k * c->chunk <= upto; k++) {
    *run += get(&c->tallies[k].run);
    *turns += get(&c->tallies[k].turns);
    *faults += get(&c->tallies[k].faults);
  }
}

static bool same_failure(int rc, const vat_sim_result *here, int their_rc,
                         const vat_sim_result *theirs) {
  if (rc != their_rc)
    return false;
  if (rc != VAT_OK)
    return true;
  return here->failed && here->turns == theirs->turns &&
         here->digest == theirs->digest &&
         strcmp(here->message, theirs->message) == 0;
}

/* The failure a worker saw and this process did not. */
static void not_deterministic(const ending *e, int rc,
                              const vat_sim_result *here, vat_sim_result *out) {
  char again[120];
  if (rc != VAT_OK)
    snprintf(again, sizeof again, "could not run it (%s)", vat_err_name(rc));
  else if (!here->failed)
    snprintf(again, sizeof again, "it passed");
  else
    snprintf(again, sizeof again, "%" PRIu64 " turns, digest %016" PRIx64,
             here->turns, here->digest);
  *out = e->theirs;
  char theirs[sizeof out->message];
  memcpy(theirs, e->theirs.message, sizeof theirs);
  snprintf(out->message, sizeof out->message,
           "not deterministic: in a worker process %" PRIu64
           " turns, digest %016" PRIx64 ": %.80s; run again here: %.60s",
           e->theirs.turns, e->theirs.digest, theirs, again);
  out->failed = true;
  out->verdict = VAT_SIM_NOT_DETERMINISTIC;
}

static void died(const ending *e, uint64_t seed, vat_sim_result *out) {
  char how[96];
  describe_death(e->status, how, sizeof how);
  memset(out, 0, sizeof *out);
  out->failed = true;
  out->verdict = VAT_SIM_WORKER_DIED;
  out->seed = seed;
  snprintf(out->message, sizeof out->message,
           "its worker process died running it: it %s", how);
  snprintf(out->plan, sizeof out->plan, "unknown");
  snprintf(out->replay, sizeof out->replay,
           "VAT_SIM_SEED=%" PRIu64 "\n# it crashed its worker process: run "
           "it here, under a debugger",
           seed);
}

/* Fills `out` from what the workers ran; the code vat_sim_run returns. */
static int merge(campaign *c, const int *status, vat_sim_result *out) {
  ending e;
  find_ending(c, status, &e);
  /* Every seed below the ending ran, and the ending's own when it ended
   * by a report; else a worker ended between seeds, leaving some unrun. */
  uint64_t upto = e.found ? e.index : c->count - 1;
  uint64_t want = e.found ? e.index + !e.died : c->count;
  uint64_t run, turns, faults;
  totals(c, upto, &run, &turns, &faults);
  report h;
  bool last = false;
  for (unsigned i = 0; i < c->started && !e.found && !last; i++)
    last = find_report(&c->workers[i], REPORT_LAST, &h, out);
  if (run != want || (!e.found && !last)) {
    memset(out, 0, sizeof *out);
    snprintf(out->message, sizeof out->message,
             "a worker process ended between seeds: %" PRIu64 " of the %" PRIu64
             " seeds to run ran",
             run, want);
    errno = ECHILD;
    return VAT_EIO;
  }
  int rc = VAT_OK;
  if (e.found) {
    uint64_t seed = c->first + e.index;
    vat_sim_result here;
    memset(&here, 0, sizeof here);
    if (e.died) {
      died(&e, seed, out);
    } else if (e.rc == VAT_OK && vat__sim_over_bound(e.theirs.verdict)) {
      *out = e.theirs; /* this machine's cost: running it here proves nothing */
    } else if (same_failure(rc = c->seeds->run(c->seeds->ctx, seed, &here),
                            &here, e.rc, &e.theirs)) {
      if (here.failed)
        c->seeds->settle(c->seeds->ctx, &here);
      *out = here;
    } else {
      not_deterministic(&e, rc, &here, out);
      rc = VAT_OK;
    }
  }
  out->seeds_run = e.found ? e.index + 1 : c->count;
  out->total_turns = turns;
  out->total_faults = faults;
  return rc;
}

/* --- The campaign --------------------------------------------------------- */

int vat__sim_parallel(const vat__sim_seeds *seeds, uint64_t first,
                      uint64_t count, unsigned jobs,
                      vat__sim_progress *progress, vat_sim_result *out) {
  campaign c = {
      .seeds = seeds, .parent = getpid(), .first = first, .count = count};
  c.chunk = count / MAX_CHUNKS + (count % MAX_CHUNKS != 0);
  c.nchunks = count / c.chunk + (count % c.chunk != 0);
  c.jobs = jobs < c.nchunks ? jobs : (unsigned)c.nchunks;
  c.workers = calloc(c.jobs, sizeof *c.workers);
  if (c.workers == NULL)
    return VAT_ENOMEM;
  int rc = VAT_OK;
  if (!map_shared(&c)) {
    free(c.workers);
    return VAT_EIO;
  }
  fflush(NULL); /* else each worker would write the caller's buffers too */
  for (unsigned i = 0; i < c.jobs && rc == VAT_OK; i++)
    rc = start(&c, i);
  int err = errno;
  if (rc != VAT_OK)
    lower_limit(c.sh, 0); /* those started stop at their next seed */
  if (!collect(&c, progress) && rc == VAT_OK) {
    rc = VAT_EIO;
    err = errno;
  }
  int status[VAT_SIM_MAX_JOBS];
  for (unsigned i = 0; i < c.started; i++)
    status[i] = reap(&c.workers[i]);
  if (rc == VAT_OK) {
    rc = merge(&c, status, out);
    err = errno;
  }
  munmap(c.map, c.map_size);
  free(c.workers);
  errno = err;
  return rc;
}
