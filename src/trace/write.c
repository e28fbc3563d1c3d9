/* The trace file: the workers' rings as Trace Event Format JSON.
 *
 * Each worker is a track (a thread: "worker N", or "host" for the one
 * context of a host-driven system); each turn is a complete slice ("X");
 * a send is a flow from the turn that committed it ("s") to the turn that
 * ran it ("f", bound to that turn's slice), both present only when both
 * ends are still in the rings. A turn's event counts its sends, whose ids
 * name it (core/trace.h): that is how the sends are listed. In the file a
 * flow's id is its place in that list, small enough for a JSON number. A flow
 * with one end overwritten (or never run: dropped, or still queued) is reported
 * lost: its surviving end says so, and "otherData" counts it. Events
 * overwritten in a ring are counted per track and in total, exactly. Formatting
 * happens only here.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/system.h"
#include "core/thread.h"
#include "core/trace.h"
#include "trace/rings.h"
#include "util/gc.h"
#include "trace/trace.h"
#include "vat/trace.h"

typedef vat__trace_track track;
typedef vat__trace_ids id_set;

/* --- Names, looked up once per function ---------------------------------- */

enum { NAME_SLOTS = 1024, NAME_MAX_LEN = 160 };

typedef struct name_cache {
  const void *key[NAME_SLOTS];
  char name[NAME_SLOTS][NAME_MAX_LEN];
} name_cache;

static const char *name_of(name_cache *c, const void *what, uint32_t form) {
  char buf[NAME_MAX_LEN];
  if (form != VAT__TR_FN || what == NULL)
    return what ? vat__trace_name(what, form, buf, sizeof buf) : "?";
  size_t h = ((uintptr_t)what >> 4) % NAME_SLOTS;
  for (size_t i = 0; i < NAME_SLOTS; i++, h = (h + 1) % NAME_SLOTS) {
    if (c->key[h] == what)
      return c->name[h];
    if (c->key[h] == NULL) {
      c->key[h] = what;
      snprintf(c->name[h], NAME_MAX_LEN, "%s",
               vat__trace_name(what, form, buf, sizeof buf));
      return c->name[h];
    }
  }
  return vat__trace_name(what, form, c->name[0], NAME_MAX_LEN); /* full */
}

/* --- Writing ------------------------------------------------------------- */

/* A deterministic system's vats and entities, numbered as the file first
 * names them (@1, @2, ...), so that a replay writes the same file: an
 * open addressing table from address to number. */
typedef struct ordinals {
  const void **keys;
  unsigned *nums;
  size_t cap, n;
} ordinals;

typedef struct writer {
  FILE *f;
  vat_system *sys;
  bool virtual_time; /* ticks are the virtual clock's nanoseconds, plus 1 */
  ordinals refs;
  /* A simulated world's vat tracks (core/system.h): which are named yet. */
  unsigned char *named;
  size_t named_cap;
  double ns_per_tick;
  uint64_t copied_at; /* ticks, after the rings were copied */
  name_cache *names;
  id_set starts, ends, drops;
  uint64_t lost_starts, lost_ends, dropped;
  bool first;
} writer;

static void put_str(FILE *f, const char *s) {
  fputc('"', f);
  for (; *s; s++) {
    unsigned char c = (unsigned char)*s;
    if (c == '"' || c == '\\')
      fprintf(f, "\\%c", c);
    else if (c < 0x20)
      fprintf(f, "\\u%04x", c);
    else
      fputc(c, f);
  }
  fputc('"', f);
}

/* Nanoseconds since the system started tracing. */
static uint64_t ns_of(const writer *w, uint64_t ticks) {
  if (ticks <= w->sys->trace_tick0)
    return 0;
  if (w->virtual_time) /* ticks are the virtual clock's nanoseconds */
    return ticks - w->sys->trace_tick0;
  return (uint64_t)((double)(ticks - w->sys->trace_tick0) * w->ns_per_tick);
}

static size_t ref_slot(const ordinals *o, const void *p) {
  size_t h = (size_t)(((uintptr_t)p >> 4) * 0x9E3779B97F4A7C15ull);
  for (h &= o->cap - 1; o->keys[h] != NULL && o->keys[h] != p;
       h = (h + 1) & (o->cap - 1))
    ;
  return h;
}

/* The number of `p` in `o`, given the next one when it is new; 0 when the
 * table cannot grow. */
static unsigned ordinal_of(ordinals *o, const void *p) {
  if (2 * (o->n + 1) > o->cap) {
    size_t cap = o->cap ? 2 * o->cap : 256;
    ordinals bigger = {calloc(cap, sizeof *o->keys),
                       calloc(cap, sizeof *o->nums), cap, o->n};
    if (bigger.keys == NULL || bigger.nums == NULL) {
      free(bigger.keys);
      free(bigger.nums);
      return 0;
    }
    for (size_t i = 0; i < o->cap; i++)
      if (o->keys[i] != NULL) {
        size_t h = ref_slot(&bigger, o->keys[i]);
        bigger.keys[h] = o->keys[i];
        bigger.nums[h] = o->nums[i];
      }
    free(o->keys);
    free(o->nums);
    *o = bigger;
  }
  size_t h = ref_slot(o, p);
  if (o->keys[h] == NULL) {
    o->keys[h] = p;
    o->nums[h] = (unsigned)++o->n;
  }
  return o->nums[h];
}

/* Writes `sep`"key":"<a vat's or entity's name>": its address, or in a
 * deterministic system its number (above), which a replay repeats. */
static void put_ref(writer *w, const char *sep, const char *key,
                    const void *p) {
  unsigned n = w->virtual_time && p ? ordinal_of(&w->refs, p) : 0;
  if (n != 0)
    fprintf(w->f, "%s\"%s\":\"@%u\"", sep, key, n);
  else
    fprintf(w->f, "%s\"%s\":\"%p\"", sep, key, p);
}

/* A flow id as the file shows it (in hexadecimal): in a deterministic
 * system without its system's tag, which depends on the systems the
 * process traced before (core/trace.h). */
static unsigned long long flow_shown(const writer *w, uint64_t id) {
  uint64_t tag = (uint64_t)0x1ff << VAT__FLOW_TAG_SHIFT;
  uint64_t own = vat__trace_flow_base(w->sys->trace_tag, 0) & tag;
  if (w->virtual_time && (id & tag) == own)
    id &= ~tag;
  return (unsigned long long)id;
}

/* Starts an event: {"ph":..,"pid":1,"tid":..,"ts":<us>, leaving it open. */
static void begin(writer *w, const char *ph, unsigned tid, uint64_t ns) {
  fprintf(w->f, "%s\n{\"ph\":\"%s\",\"pid\":1,\"tid\":%u,\"ts\":%llu.%03llu",
          w->first ? "" : ",", ph, tid, (unsigned long long)(ns / 1000),
          (unsigned long long)(ns % 1000));
  w->first = false;
}

static void put_name(writer *w, const char *cat, const char *name) {
  fprintf(w->f, ",\"cat\":\"%s\",\"name\":", cat);
  put_str(w->f, name);
}

static const char *cat_of(uint32_t form) {
  return form == VAT__TR_SIGNAL ? "signal"
         : form == VAT__TR_DYN  ? "message"
                                : "turn";
}

/* The track an event about `vat` is drawn on: its worker's (`tid`), or,
 * in a simulated world, the vat's own, named when first used; the vats'
 * tracks come after the workers'. */
static unsigned track_of(writer *w, unsigned tid, const void *vat) {
  vat_system *sys = w->sys;
  if (sys->trace_vat_track == NULL || vat == NULL)
    return tid;
  int k = sys->trace_vat_track(sys->trace_vat_track_ctx, vat, NULL, 0);
  if (k < 0)
    return tid;
  unsigned vt = sys->nworkers + 1 + (unsigned)k;
  if ((size_t)k >= w->named_cap) {
    size_t cap = 2 * (size_t)k + 16;
    unsigned char *named = realloc(w->named, cap);
    if (named == NULL)
      return vt; /* only its name is lost */
    memset(named + w->named_cap, 0, cap - w->named_cap);
    w->named = named;
    w->named_cap = cap;
  }
  if (!w->named[k]) {
    w->named[k] = 1;
    char name[96];
    sys->trace_vat_track(sys->trace_vat_track_ctx, vat, name, sizeof name);
    begin(w, "M", vt, 0);
    fputs(",\"name\":\"thread_name\",\"args\":{\"name\":", w->f);
    put_str(w->f, name);
    fputs("}}", w->f);
    begin(w, "M", vt, 0);
    fprintf(w->f,
            ",\"name\":\"thread_sort_index\",\"args\":{\"sort_index\":%u}}",
            vt);
  }
  return vt;
}

/* A flow's id in the file: its place among the started flows. */
static unsigned long long file_id(const writer *w, uint64_t id) {
  return (unsigned long long)vat__trace_ids_place(&w->starts, id);
}

/* A flow that started at `ts` (inside a turn unless `in_turn` is false):
 * its start, or, when its end is not in the trace, a mark saying why.
 * `e` is a loose send's event, which names the target; NULL for a turn's
 * send. A loose send made outside any turn (a dead letter's drop
 * answering its sender, on a worker between turns) gets a slice of no
 * length to start from: a flow starts inside a slice, or viewers drop it. */
static void write_start(writer *w, unsigned tid, uint64_t id, bool in_turn,
                        uint64_t ts, const vat__trace_event *e) {
  if (vat__trace_ids_has(&w->ends, id)) {
    if (!in_turn) {
      begin(w, "X", tid, ts);
      fputs(",\"dur\":0", w->f);
      put_name(w, "send", "outside a turn");
      fputs("}", w->f);
    }
    begin(w, "s", tid, ts);
    fprintf(w->f, ",\"cat\":\"flow\",\"name\":\"send\",\"id\":%llu}",
            file_id(w, id));
    return;
  }
  bool dropped = vat__trace_ids_has(&w->drops, id);
  w->lost_ends++;
  w->dropped += dropped;
  begin(w, "i", tid, ts);
  fputs(",\"s\":\"t\"", w->f);
  put_name(w, "flow", "send (lost)");
  fprintf(w->f, ",\"args\":{\"flow_lost\":\"%#llx\",\"why\":\"%s\"",
          flow_shown(w, id),
          dropped ? "dead letter" : "its turn is not in the trace");
  if (e != NULL) {
    put_ref(w, ",", "to", e->vat);
    fputs(",\"what\":", w->f);
    put_str(w->f, name_of(w->names, e->what, e->form));
  }
  fputs("}}", w->f);
}

/* The turn recorded as event `i` of `t`, from `ts` to `end`, with the
 * flow that caused it and those it started. */
static void write_turn(writer *w, unsigned tid, const track *t, size_t i,
                       uint64_t ts, uint64_t end) {
  const vat__trace_event *e = &t->ev[i];
  begin(w, "X", tid, ts);
  fprintf(w->f, ",\"dur\":%llu.%03llu", (unsigned long long)((end - ts) / 1000),
          (unsigned long long)((end - ts) % 1000));
  put_name(w, cat_of(e->form), name_of(w->names, e->what, e->form));
  fputs(",\"args\":{", w->f);
  put_ref(w, "", "vat", e->vat);
  put_ref(w, ",", "entity", e->entity);
  bool matched = vat__trace_ids_has(&w->starts, e->flow);
  if (e->flow != 0 && !matched) {
    fprintf(w->f, ",\"flow_lost\":\"%#llx\"", flow_shown(w, e->flow));
    w->lost_starts++;
  }
  fputs("}}", w->f);
  if (matched) {
    begin(w, "f", tid, ts);
    fprintf(w->f,
            ",\"bp\":\"e\",\"cat\":\"flow\",\"name\":\"send\","
            "\"id\":%llu}",
            file_id(w, e->flow));
  }
  for (uint32_t k = 0; k < e->sends; k++)
    write_start(w, tid, vat__trace_start_id(t, i, k), true, ts, NULL);
}

static void write_instant(writer *w, unsigned tid, const vat__trace_event *e,
                          uint64_t ts) {
  begin(w, "i", tid, ts);
  fputs(",\"s\":\"t\"", w->f);
  switch (e->kind) {
  case VAT__TR_SPAWN:
    put_name(w, "vat", "spawn");
    fputs(",\"args\":{", w->f);
    put_ref(w, "", "vat", e->vat);
    put_ref(w, ",", "by", e->entity);
    fputs("}}", w->f);
    break;
  case VAT__TR_EXIT:
    put_name(w, "vat", "exit");
    fputs(",\"args\":{", w->f);
    put_ref(w, "", "vat", e->vat);
    fputs(",\"reason\":", w->f);
    put_str(w->f, e->what ? vat_atom_name(e->what) : "(a value)");
    fputs("}}", w->f);
    break;
  case VAT__TR_DROP:
    put_name(w, "flow", "dead letter");
    fputs(",\"args\":{", w->f);
    put_ref(w, "", "vat", e->vat);
    fprintf(w->f, ",\"flow\":\"%#llx\"}}", flow_shown(w, e->flow));
    break;
  case VAT__TR_FAULT:
    put_name(w, "fault", e->entity ? (const char *)e->entity : "fault");
    fputs(",\"args\":{", w->f);
    if (e->vat != NULL) /* a fault at a time strikes a machine, no vat */
      put_ref(w, "", "vat", e->vat);
    fprintf(w->f, "%s\"step\":%llu,\"fault\":", e->vat != NULL ? "," : "",
            (unsigned long long)e->flow);
    put_str(w->f, e->what ? (const char *)e->what : "");
    fputs("}}", w->f);
    break;
  default:
    put_name(w, "sched", e->kind == VAT__TR_PARK ? "park" : "wake");
    fputs("}", w->f);
  }
}

/* A park and the wake that ends it, as one slice. */
static void write_parked(writer *w, unsigned tid, const vat__trace_event *p,
                         const vat__trace_event *wake) {
  uint64_t ts = ns_of(w, p->ts), end = ns_of(w, wake->ts);
  begin(w, "X", tid, ts);
  fprintf(w->f, ",\"dur\":%llu.%03llu", (unsigned long long)((end - ts) / 1000),
          (unsigned long long)((end - ts) % 1000));
  put_name(w, "sched", "parked");
  fputs("}", w->f);
}

/* A group of turns that share one clock reading (core/trace.h): they
 * run from that reading to the next event with a time of its own (or to
 * the copy's time, if the last was still running then), in equal shares. */
typedef struct group {
  uint64_t ts;         /* the shared reading, in ticks */
  uint64_t start, end; /* in nanoseconds */
  size_t turns, next;  /* how many; the next one's place among them */
} group;

static void group_at(const writer *w, const track *t, size_t i, group *g) {
  g->ts = t->ev[i].ts;
  g->turns = g->next = 0;
  size_t j = i;
  for (; j < t->n && t->ev[j].ts == g->ts; j++)
    g->turns += t->ev[j].kind == VAT__TR_TURN;
  g->start = ns_of(w, g->ts);
  g->end = ns_of(w, j < t->n ? t->ev[j].ts : w->copied_at);
  if (g->end < g->start)
    g->end = g->start;
}

/* The `k`-th share's start: exact integers, so that one turn's end is
 * the next one's start and slices never overlap. */
static uint64_t share(const group *g, size_t k) {
  __extension__ unsigned __int128 span = g->end - g->start;
  return g->start + (uint64_t)(span * k / g->turns);
}

static void write_track(writer *w, unsigned tid, const track *t) {
  begin(w, "M", tid, 0);
  fputs(",\"name\":\"thread_name\",\"args\":{\"name\":", w->f);
  char name[32];
  if (w->sys->host_driven)
    snprintf(name, sizeof name, "host");
  else
    snprintf(name, sizeof name, "worker %u", tid - 1);
  put_str(w->f, name);
  fprintf(w->f, ",\"events_lost\":%llu}}", (unsigned long long)t->lost);
  begin(w, "M", tid, 0);
  fprintf(w->f, ",\"name\":\"thread_sort_index\",\"args\":{\"sort_index\":%u}}",
          tid);
  if (t->lost && t->n) {
    begin(w, "i", tid, ns_of(w, t->ev[0].ts));
    fprintf(w->f,
            ",\"s\":\"t\",\"cat\":\"trace\",\"name\":\"%llu earlier "
            "events lost\",\"args\":{\"events_lost\":%llu}}",
            (unsigned long long)t->lost, (unsigned long long)t->lost);
  }
  /* What a turn records carries its time (core/trace.h): an event is
   * inside the turn before it when it has that time, and is drawn at the
   * turn's start. */
  uint64_t turn_ts = 0, turn_ns = 0; /* the open turn's; 0: none */
  unsigned turn_tid = tid;           /* its track */
  group g = {0};
  for (size_t i = 0; i < t->n; i++) {
    const vat__trace_event *e = &t->ev[i];
    if (e->kind == VAT__TR_TURN) {
      if (g.turns == 0 || e->ts != g.ts || g.next == g.turns)
        group_at(w, t, i, &g);
      turn_ns = share(&g, g.next);
      turn_tid = track_of(w, tid, e->vat);
      write_turn(w, turn_tid, t, i, turn_ns, share(&g, g.next + 1));
      g.next++;
      turn_ts = e->ts;
      continue;
    }
    bool in_turn = turn_ts != 0 && e->ts == turn_ts;
    if (!in_turn)
      turn_ts = 0;
    uint64_t ns = in_turn ? turn_ns : ns_of(w, e->ts);
    if (e->kind == VAT__TR_SEND)
      write_start(w, in_turn ? turn_tid : tid, e->flow, in_turn, ns, e);
    else if (e->kind == VAT__TR_PARK && i + 1 < t->n &&
             t->ev[i + 1].kind == VAT__TR_WAKE)
      write_parked(w, tid, e, &t->ev[++i]);
    else if (e->kind != VAT__TR_IDLE)
      write_instant(w, track_of(w, tid, e->vat), e, ns);
  }
}

static void write_all(writer *w, const track *tracks, unsigned n) {
  uint64_t lost = 0, recorded = 0;
  fputs("{\"displayTimeUnit\":\"ns\",\"traceEvents\":[", w->f);
  w->first = true;
  begin(w, "M", 0, 0);
  fputs(",\"name\":\"process_name\",\"args\":{\"name\":\"libvat\"}}", w->f);
  for (unsigned i = 0; i < n; i++) {
    write_track(w, i + 1, &tracks[i]);
    lost += tracks[i].lost;
    recorded += tracks[i].lost + tracks[i].n;
  }
  fprintf(w->f,
          "\n],\n\"otherData\":{\"producer\":\"libvat\",\"clock\":\"%s\","
          "\"tracks\":%u,"
          "\"ring_events\":%llu,\"events_recorded\":%llu,"
          "\"events_lost\":%llu,\"events_lost_per_track\":[",
          w->virtual_time ? "virtual" : "monotonic", n,
          (unsigned long long)w->sys->workers[0]->trace->mask + 1,
          (unsigned long long)recorded, (unsigned long long)lost);
  for (unsigned i = 0; i < n; i++)
    fprintf(w->f, "%s%llu", i ? "," : "", (unsigned long long)tracks[i].lost);
  fprintf(w->f,
          "],\"flows\":%zu,\"flows_lost\":%llu,\"flows_lost_start\":%llu,"
          "\"flows_lost_end\":%llu,\"flows_dead_letters\":%llu}}\n",
          w->ends.n - (size_t)w->lost_starts,
          (unsigned long long)(w->lost_starts + w->lost_ends),
          (unsigned long long)w->lost_starts, (unsigned long long)w->lost_ends,
          (unsigned long long)w->dropped);
}

static double calibrate(vat_system *sys) {
  uint64_t ticks = vat__trace_ticks(), ns = vat__monotonic_ns();
  if (ticks <= sys->trace_tick0 || ns <= sys->trace_ns0)
    return 1.0;
  return (double)(ns - sys->trace_ns0) / (double)(ticks - sys->trace_tick0);
}

/* Copies every worker's ring into `tracks`. */
static int snapshot(vat_system *sys, track *tracks) {
  /* Acquire: pairs with system_stop's store, made after the join. */
  bool still = atomic_load_explicit(&sys->trace_still, memory_order_acquire);
  for (unsigned i = 0; i < sys->nworkers; i++) {
    vat__trace_ring *r = sys->workers[i]->trace;
    /* Scanned, so that the atoms the copied events name (the ring's names
     * array may let go of them while we write) stay alive until named. */
    tracks[i].ev = GC_MALLOC_UNCOLLECTABLE((r->mask + 1) * sizeof *tracks[i].ev);
    if (tracks[i].ev == NULL)
      return VAT_ENOMEM;
    vat__trace_copy_ring(r, still, &tracks[i]);
    tracks[i].flow_base = r->flow_base;
  }
  return VAT_OK;
}

static int flows(writer *w, const track *tracks, unsigned n) {
  int rc = vat__trace_collect_ids(tracks, n, 0, true, &w->starts);
  if (rc == VAT_OK)
    rc = vat__trace_collect_ids(tracks, n, VAT__TR_TURN, false, &w->ends);
  if (rc == VAT_OK)
    rc = vat__trace_collect_ids(tracks, n, VAT__TR_DROP, false, &w->drops);
  return rc;
}

static int write_json(writer *w, const char *path, track *tracks, unsigned n) {
  w->f = fopen(path, "w");
  if (w->f == NULL)
    return VAT_EIO;
  setvbuf(w->f, NULL, _IOFBF, 1 << 20);
  write_all(w, tracks, n);
  int err = ferror(w->f);
  return fclose(w->f) != 0 || err ? VAT_EIO : VAT_OK;
}

static int write_file(vat_system *sys, const char *path) {
  unsigned n = sys->nworkers;
  track *tracks = calloc(n, sizeof *tracks);
  writer w = {.sys = sys,
              .virtual_time = sys->virtual_clock,
              .ns_per_tick = calibrate(sys)};
  w.names = calloc(1, sizeof *w.names);
  int rc = tracks && w.names ? VAT_OK : VAT_ENOMEM;
  if (rc == VAT_OK)
    rc = snapshot(sys, tracks);
  /* The end of a turn still running as the rings were copied. A
   * host-driven system's ring ends with its run call's IDLE unless a run
   * call on another thread is in a turn now: such a turn of a
   * deterministic system is drawn with no length. */
  w.copied_at = w.virtual_time ? 0 : vat__trace_ticks();
  if (rc == VAT_OK)
    rc = flows(&w, tracks, n);
  if (rc == VAT_OK)
    rc = write_json(&w, path, tracks, n);
  int saved = errno;
  free(w.starts.ids);
  free(w.ends.ids);
  free(w.drops.ids);
  free(w.names);
  free(w.named);
  free(w.refs.keys);
  free(w.refs.nums);
  for (unsigned i = 0; tracks && i < n; i++)
    GC_FREE(tracks[i].ev);
  free(tracks);
  errno = saved;
  return rc;
}

int vat_system_trace_write(vat_system *sys, const char *path) {
  if (sys == NULL)
    return VAT_EINVAL;
  int rc = vat__check_host();
  if (rc != VAT_OK)
    return rc;
  if (vat__system_state(sys) == VAT__DESTROYED)
    return VAT_ECLOSED;
  if (sys->trace_events == 0)
    return VAT_ENOTSUP;
  if (path == NULL)
    path = sys->trace_path;
  if (path == NULL || *path == '\0')
    return VAT_EINVAL;
  return write_file(sys, path);
}

/* At shutdown, after the workers joined: the rings are still. */
static void system_stop(vat_system *sys) {
  if (sys->trace_events == 0)
    return;
  /* Release: a later write on request copies the rings whole. */
  atomic_store_explicit(&sys->trace_still, true, memory_order_release);
  if (sys->trace_path == NULL)
    return;
  if (write_file(sys, sys->trace_path) != VAT_OK)
    fprintf(stderr, "libvat: cannot write the trace to %s: %s\n",
            sys->trace_path, strerror(errno));
}

const vat__module vat__trace_module = {
    .name = "trace",
    .system_stop = system_stop,
};
