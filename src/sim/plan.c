/* Fault plans as text (vat/sim.h): what vat_sim_result.plan prints, and
 * what vat_sim_options.plan and VAT_SIM_PLAN read back. One grammar both
 * ways, so that a reported plan pasted back strikes the same faults:
 *
 *   plan   := "none" | fault (";" fault)*
 *   fault  := "step" N ":" kind vat [amount]
 *   kind   := kill | fail | delay | jitter | timeout | stop
 *   vat    := a label ([A-Za-z0-9_.-]+) | "vat#" I
 *   amount := N "steps" (delay; "1 step" too) | "+" N unit (jitter;
 *             unit ns, us, ms or s)
 *
 * with blanks between the tokens (at least one between two words and
 * numbers). The parser is strict: anything else is refused with where and
 * what was expected, never guessed at.
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

/* --- Writing -------------------------------------------------------------- */

/* The jitter in the largest unit that states it exactly. */
static void put_duration(char *buf, size_t size, uint64_t ns) {
  static const struct {
    const char *unit;
    uint64_t ns;
  } units[] = {{"s", 1000000000ull}, {"ms", 1000000}, {"us", 1000}};
  for (size_t i = 0; i < sizeof units / sizeof units[0]; i++)
    if (ns % units[i].ns == 0) {
      snprintf(buf, size, "+%" PRIu64 "%s", ns / units[i].ns, units[i].unit);
      return;
    }
  snprintf(buf, size, "+%" PRIu64 "ns", ns);
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

const char *vat__sim_fault_text(const vat__sim_world *w, unsigned i) {
  char one[VAT_LABEL_MAX + 128];
  put_fault(one, sizeof one, &w->faults[i], w->fault_labels[i]);
  size_t n = strlen(one);
  char *text = vat__oom_check(GC_MALLOC_ATOMIC(n + 1), "a fault's text");
  memcpy(text, one, n + 1);
  return text;
}

bool vat__sim_plan_format(const vat__sim_world *w, char *buf, size_t size) {
  if (w->nfaults == 0) {
    snprintf(buf, size, "none");
    return true;
  }
  size_t at = 0;
  buf[0] = '\0';
  for (unsigned i = 0; i < w->nfaults; i++) {
    char one[VAT_LABEL_MAX + 128];
    put_fault(one, sizeof one, &w->faults[i], w->fault_labels[i]);
    size_t need = strlen(one) + (i ? 2 : 0);
    /* Room for this one and, unless it is the last, for "; ...". */
    if (at + need + (i + 1 < w->nfaults ? 5 : 0) >= size) {
      snprintf(buf + at, size - at, "%s...", i ? "; " : "");
      return false;
    }
    at += (size_t)snprintf(buf + at, size - at, "%s%s", i ? "; " : "", one);
  }
  return true;
}

void vat__sim_plan_of(const vat__sim_world *w, vat__sim_plan *out) {
  out->n = w->nfaults;
  out->faults = vat__gc_alloc((w->nfaults + 1) * sizeof *out->faults);
  for (unsigned i = 0; i < w->nfaults; i++) {
    const vat_sim_fault *f = &w->faults[i];
    out->faults[i] = (vat__sim_planned){.step = f->step,
                                        .kind = f->kind,
                                        .amount = f->amount,
                                        .label = w->fault_labels[i],
                                        .index = f->vat};
  }
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

static int jitter(reader *r, vat__sim_planned *p) {
  static const char *expected =
      "the jitter, as \"+250ms\" (a whole number of ns, us, ms or s)";
  static const struct {
    const char *unit;
    uint64_t ns;
  } units[] = {{"ns", 1}, {"us", 1000}, {"ms", 1000000}, {"s", 1000000000}};
  if (!blank(*r->at) || !punct(r, '+') || blank(*r->at))
    return refuse(r, expected);
  uint64_t n;
  if (number(r, &n, expected) != VAT_OK)
    return VAT_EINVAL;
  for (size_t i = 0; i < sizeof units / sizeof units[0]; i++) {
    size_t len = strlen(units[i].unit);
    if (strncmp(r->at, units[i].unit, len) == 0 && !plain_char(r->at[len])) {
      if (n == 0)
        return refuse(r, "a jitter of 1 ns or more");
      if (n > UINT64_MAX / units[i].ns)
        return refuse(r, "a shorter jitter");
      r->at += len;
      p->amount = n * units[i].ns;
      return VAT_OK;
    }
  }
  return refuse(r, "a unit: ns, us, ms or s");
}

static int fault(reader *r, vat__sim_planned *p) {
  *p = (vat__sim_planned){0};
  int rc;
  if (!word(r, "step"))
    return refuse(r, "\"step\"");
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
