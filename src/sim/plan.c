/* Fault plans as text (vat/sim.h): what vat_sim_result.plan prints, and
 * what vat_sim_options.plan and VAT_SIM_PLAN read back. One grammar both
 * ways, so that a reported plan pasted back strikes the same faults:
 *
 *   plan   := "none" | fault (";" fault)*
 *   fault  := "step" N ":" kind vat [amount] | "at" time ":" text
 *   kind   := kill | fail | delay | jitter | timeout | stop
 *   vat    := a label ([A-Za-z0-9_.-]+) | "vat#" I
 *   amount := N "steps" (delay; "1 step" too) | "+" time (jitter)
 *   time   := N unit (unit ns, us, ms or s, no blank between)
 *   text   := "crash" machine | a source's fault (vat_sim_source_fault):
 *             printable, up to the next ";" or the end, no "'"
 *
 * with blanks between the tokens (at least one between two words and
 * numbers). The parser is strict: anything else is refused with where and
 * what was expected, never guessed at. What a fault at a time's text says
 * is for its machine or source to read when its time comes (timed.c).
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "core/vat.h"
#include "sim/world.h"
#include "util/gc.h"
#include "util/mem.h"
#include "vat/observe.h"

static bool plain_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
         (c >= '0' && c <= '9') || c == '_' || c == '.' || c == '-';
}

static bool plain(const char *s) {
  if (s == NULL || *s == '\0')
    return false;
  for (; *s; s++)
    if (!plain_char(*s))
      return false;
  return true;
}

static const char *label_of(const vat__sim_world *w, unsigned i) {
  return vat_ref_label(&w->vats[i]->first);
}

const char *vat__sim_plain_label(const vat__sim_world *w, unsigned i) {
  const char *label = i < w->nvats ? label_of(w, i) : NULL;
  if (!plain(label))
    return NULL;
  for (unsigned j = 0; j < w->nvats; j++) {
    const char *other = label_of(w, j);
    if (j != i && other != NULL && strcmp(other, label) == 0)
      return NULL;
  }
  return label;
}

bool vat__sim_planned_vat(const vat__sim_world *w, const vat__sim_planned *p,
                          uint32_t *index) {
  if (p->label == NULL) {
    *index = p->index;
    return p->index < w->nvats;
  }
  for (uint32_t i = 0; i < w->nvats; i++) {
    const char *label = label_of(w, i);
    if (label != NULL && strcmp(label, p->label) == 0) {
      *index = i;
      return true;
    }
  }
  return false;
}

bool vat__sim_fault_text_ok(const char *text) {
  size_t n = text != NULL ? strlen(text) : 0;
  if (n == 0 || text[0] == ' ' || text[n - 1] == ' ')
    return false;
  for (size_t k = 0; k < n; k++)
    if (text[k] < ' ' || text[k] > '~' || text[k] == ';' || text[k] == '\'')
      return false;
  return true;
}

/* --- Times ---------------------------------------------------------------- */

static const struct {
  const char *unit;
  uint64_t ns;
} units[] = {{"s", 1000000000ull}, {"ms", 1000000}, {"us", 1000}, {"ns", 1}};
enum { NUNITS = sizeof units / sizeof units[0] };

int vat_sim_time_format(uint64_t ns, char *buf, size_t size) {
  size_t i = 0;
  while (ns % units[i].ns != 0)
    i++;
  return snprintf(buf, size, "%" PRIu64 "%s", ns / units[i].ns, units[i].unit);
}

/* --- Writing -------------------------------------------------------------- */

/* The jitter in the largest unit that states it exactly. */
static void put_duration(char *buf, size_t size, uint64_t ns) {
  buf[0] = '+';
  vat_sim_time_format(ns, buf + 1, size - 1);
}

static void put_fault(char *buf, size_t size, const vat_sim_fault *f,
                      const char *label) {
  char vat[32], amount[48] = "";
  if (label == NULL)
    snprintf(vat, sizeof vat, "vat#%u", f->vat);
  if (f->kind == VAT_SIM_DELAY)
    snprintf(amount, sizeof amount, " %" PRIu64 " step%s", f->amount,
             f->amount == 1 ? "" : "s");
  else if (f->kind == VAT_SIM_JITTER) {
    amount[0] = ' ';
    put_duration(amount + 1, sizeof amount - 1, f->amount);
  }
  snprintf(buf, size, "step %" PRIu64 ": %s %s%s", f->step,
           vat__sim_fault_name(f->kind), label ? label : vat, amount);
}

static void put_timed(char *buf, size_t size, const vat__sim_timed *t) {
  char at[32];
  vat_sim_time_format(t->at, at, sizeof at);
  snprintf(buf, size, "at %s: %s", at, t->text);
}

static const char *copied(const char *one) {
  size_t n = strlen(one);
  char *text = vat__oom_check(GC_MALLOC_ATOMIC(n + 1), "a fault's text");
  memcpy(text, one, n + 1);
  return text;
}

const char *vat__sim_fault_text(const vat__sim_world *w, unsigned i) {
  char one[VAT_LABEL_MAX + 128];
  put_fault(one, sizeof one, &w->faults[i], w->fault_labels[i]);
  return copied(one);
}

const char *vat__sim_timed_text(const vat__sim_timed *t) {
  char one[VAT__SIM_TEXT_MAX + 64];
  put_timed(one, sizeof one, t);
  return copied(one);
}

/* The faults that struck in `w` in the order they struck, both kinds: the
 * k-th of them is a fault at a time when *timed (index *i), else at a
 * step. Those at a time go before the faults at a step that struck after
 * them. */
static void nth_struck(const vat__sim_world *w, unsigned k, bool *timed,
                       unsigned *i) {
  unsigned step = 0, time = 0;
  for (;;) {
    bool t = time < w->ntimed &&
             (step == w->nfaults || w->timed[time].after <= step);
    if (step + time == k) {
      *timed = t;
      *i = t ? time : step;
      return;
    }
    t ? time++ : step++;
  }
}

bool vat__sim_plan_format(const vat__sim_world *w, char *buf, size_t size) {
  unsigned total = w->nfaults + w->ntimed;
  if (total == 0) {
    snprintf(buf, size, "none");
    return true;
  }
  size_t at = 0;
  buf[0] = '\0';
  for (unsigned k = 0; k < total; k++) {
    char one[VAT_LABEL_MAX + VAT__SIM_TEXT_MAX + 128];
    bool timed;
    unsigned i;
    nth_struck(w, k, &timed, &i);
    if (timed)
      put_timed(one, sizeof one, &w->timed[i]);
    else
      put_fault(one, sizeof one, &w->faults[i], w->fault_labels[i]);
    size_t need = strlen(one) + (k ? 2 : 0);
    /* Room for this one and, unless it is the last, for "; ...". */
    if (at + need + (k + 1 < total ? 5 : 0) >= size) {
      snprintf(buf + at, size - at, "%s...", k ? "; " : "");
      return false;
    }
    at += (size_t)snprintf(buf + at, size - at, "%s%s", k ? "; " : "", one);
  }
  return true;
}

void vat__sim_plan_of(const vat__sim_world *w, vat__sim_plan *out) {
  out->n = w->nfaults + w->ntimed;
  out->faults = vat__gc_alloc((out->n + 1) * sizeof *out->faults);
  for (unsigned i = 0; i < w->nfaults; i++) {
    const vat_sim_fault *f = &w->faults[i];
    out->faults[i] = (vat__sim_planned){.step = f->step,
                                        .kind = f->kind,
                                        .amount = f->amount,
                                        .label = w->fault_labels[i],
                                        .index = f->vat};
  }
  for (unsigned i = 0; i < w->ntimed; i++)
    out->faults[w->nfaults + i] =
        (vat__sim_planned){.text = w->timed[i].text, .at = w->timed[i].at};
}

/* --- Reading -------------------------------------------------------------- */

typedef struct reader {
  const char *text, *at;
  char *why;
  size_t size;
} reader;

static int refuse(reader *r, const char *expected) {
  if (*r->at == '\0')
    snprintf(r->why, r->size, "plan: at its end: expected %s", expected);
  else
    snprintf(r->why, r->size, "plan: at character %zu (\"%.16s\"): expected %s",
             (size_t)(r->at - r->text) + 1, r->at, expected);
  return VAT_EINVAL;
}

static bool blank(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

static void skip_blanks(reader *r) {
  while (blank(*r->at))
    r->at++;
}

/* The word `w`, as a whole word (not the start of a longer one). */
static bool word(reader *r, const char *w) {
  skip_blanks(r);
  size_t n = strlen(w);
  if (strncmp(r->at, w, n) != 0 || plain_char(r->at[n]))
    return false;
  r->at += n;
  return true;
}

static bool punct(reader *r, char c) {
  skip_blanks(r);
  if (*r->at != c)
    return false;
  r->at++;
  return true;
}

/* A decimal number without sign; refused past UINT64_MAX. */
static int number(reader *r, uint64_t *out, const char *what) {
  skip_blanks(r);
  if (*r->at < '0' || *r->at > '9')
    return refuse(r, what);
  uint64_t n = 0;
  const char *start = r->at;
  for (; *r->at >= '0' && *r->at <= '9'; r->at++) {
    unsigned d = (unsigned)(*r->at - '0');
    if (n > (UINT64_MAX - d) / 10) {
      r->at = start;
      return refuse(r, "a smaller number");
    }
    n = n * 10 + d;
  }
  *out = n;
  return VAT_OK;
}

static int kind(reader *r, vat_sim_fault_kind *out) {
  for (int k = VAT_SIM_KILL; vat__sim_fault_name(k) != NULL; k++)
    if (word(r, vat__sim_fault_name(k))) {
      *out = (vat_sim_fault_kind)k;
      return VAT_OK;
    }
  return refuse(r, "a fault kind (kill, fail, delay, jitter, timeout, stop)");
}

static int vat_named(reader *r, vat__sim_planned *p) {
  static const char *expected = "a vat: its label, or vat#N";
  skip_blanks(r);
  if (strncmp(r->at, "vat#", 4) == 0) {
    r->at += 4;
    uint64_t i;
    if (blank(*r->at))
      return refuse(r, expected);
    int rc = number(r, &i, expected);
    if (rc != VAT_OK)
      return rc;
    if (i >= UINT32_MAX)
      return refuse(r, "a smaller vat number");
    p->index = (unsigned)i;
    return VAT_OK;
  }
  const char *start = r->at;
  while (plain_char(*r->at))
    r->at++;
  if (r->at == start)
    return refuse(r, expected);
  size_t n = (size_t)(r->at - start);
  char *label = vat__oom_check(GC_MALLOC_ATOMIC(n + 1), "a plan");
  memcpy(label, start, n);
  label[n] = '\0';
  p->label = label;
  return VAT_OK;
}

static int delay_steps(reader *r, vat__sim_planned *p) {
  static const char *expected = "the delay in steps, as \"3 steps\"";
  if (!blank(*r->at))
    return refuse(r, expected);
  int rc = number(r, &p->amount, expected);
  if (rc != VAT_OK)
    return rc;
  if (p->amount == 0)
    return refuse(r, "a delay of 1 step or more");
  if (!blank(*r->at) || !word(r, p->amount == 1 ? "step" : "steps"))
    return refuse(r, p->amount == 1 ? "\"step\"" : "\"steps\"");
  return VAT_OK;
}

/* A time: a number and its unit, no blank between. `what` names it in a
 * refusal; `least` is its smallest value. */
static int time_value(reader *r, uint64_t *out, const char *what,
                      uint64_t least) {
  uint64_t n;
  if (number(r, &n, what) != VAT_OK)
    return VAT_EINVAL;
  for (size_t i = 0; i < NUNITS; i++) {
    size_t len = strlen(units[i].unit);
    if (strncmp(r->at, units[i].unit, len) == 0 && !plain_char(r->at[len])) {
      if (n > UINT64_MAX / units[i].ns)
        return refuse(r, least == 1 ? "a shorter jitter" : "a shorter time");
      if (n * units[i].ns < least)
        return refuse(r, "a jitter of 1 ns or more");
      r->at += len;
      *out = n * units[i].ns;
      return VAT_OK;
    }
  }
  return refuse(r, "a unit: ns, us, ms or s");
}

int vat_sim_time_parse(const char *text, uint64_t *ns, const char **end) {
  if (text == NULL || ns == NULL || *text < '0' || *text > '9')
    return VAT_EINVAL;
  reader r = {.text = text, .at = text, .why = NULL, .size = 0};
  if (time_value(&r, ns, "a time", 0) != VAT_OK)
    return VAT_EINVAL;
  if (end != NULL)
    *end = r.at;
  return VAT_OK;
}

static int jitter(reader *r, vat__sim_planned *p) {
  static const char *expected =
      "the jitter, as \"+250ms\" (a whole number of ns, us, ms or s)";
  if (!blank(*r->at) || !punct(r, '+') || blank(*r->at))
    return refuse(r, expected);
  return time_value(r, &p->amount, expected, 1);
}

/* A fault at a time: "at" already read. */
static int timed(reader *r, vat__sim_planned *p) {
  static const char *expected = "the time, as \"1500us\" (a whole number of "
                                "ns, us, ms or s)";
  if (!blank(*r->at))
    return refuse(r, expected);
  skip_blanks(r);
  int rc = time_value(r, &p->at, expected, 0);
  if (rc != VAT_OK)
    return rc;
  if (!punct(r, ':'))
    return refuse(r, "\":\" after the time");
  skip_blanks(r);
  const char *start = r->at;
  while (*r->at != '\0' && *r->at != ';')
    r->at++;
  const char *end = r->at;
  while (end > start && blank(end[-1]))
    end--;
  size_t n = (size_t)(end - start);
  if (n > VAT__SIM_TEXT_MAX) {
    r->at = start;
    return refuse(r, "a shorter text (120 bytes at most)");
  }
  char *text = vat__oom_check(GC_MALLOC_ATOMIC(n + 1), "a plan");
  memcpy(text, start, n);
  text[n] = '\0';
  if (!vat__sim_fault_text_ok(text)) {
    r->at = start;
    return refuse(r, "what strikes then: \"crash\" and a machine, or a "
                     "source's fault, in printable text without ';' or "
                     "\"'\"");
  }
  p->text = text;
  return VAT_OK;
}

static int fault(reader *r, vat__sim_planned *p) {
  *p = (vat__sim_planned){0};
  int rc;
  if (word(r, "at"))
    return timed(r, p);
  if (!word(r, "step"))
    return refuse(r, "\"step\" or \"at\"");
  if ((rc = number(r, &p->step, "the step's number")) != VAT_OK)
    return rc;
  if (p->step == 0)
    return refuse(r, "a step from 1");
  if (!punct(r, ':'))
    return refuse(r, "\":\" after the step");
  if ((rc = kind(r, &p->kind)) != VAT_OK)
    return rc;
  if ((rc = vat_named(r, p)) != VAT_OK)
    return rc;
  if (p->kind == VAT_SIM_DELAY)
    return delay_steps(r, p);
  if (p->kind == VAT_SIM_JITTER)
    return jitter(r, p);
  return VAT_OK;
}

int vat__sim_plan_parse(const char *text, vat__sim_plan *out, char *why,
                        size_t size) {
  reader r = {.text = text, .at = text, .why = why, .size = size};
  *out = (vat__sim_plan){0};
  if (word(&r, "none")) {
    skip_blanks(&r);
    return *r.at == '\0' ? VAT_OK : refuse(&r, "nothing after \"none\"");
  }
  unsigned cap = 1;
  for (const char *c = text; *c; c++)
    cap += *c == ';';
  vat__sim_planned *faults = vat__gc_alloc(cap * sizeof *faults);
  unsigned n = 0;
  for (;;) {
    int rc = fault(&r, &faults[n++]);
    if (rc != VAT_OK)
      return rc;
    skip_blanks(&r);
    if (*r.at == '\0')
      break;
    if (!punct(&r, ';'))
      return refuse(&r, "\";\" or the plan's end");
  }
  out->faults = faults;
  out->n = n;
  return VAT_OK;
}
