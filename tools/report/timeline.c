/*
** tools/report/timeline.c: timeline.html, compile time drawn as SVG.
**
** Chromium events ("B"/"E" pairs and "X" complete events) become intervals
** per compile id and phase name. The page holds two inline SVG pictures:
** a bar of the total time per phase, and a timeline with one row per
** compile id where nested phases are stacked. Every rectangle carries a
** <title> (the phase, compile id and duration), which browsers show on
** hover without any script. Sizes are fixed by the page, so the pictures
** need nothing from the network. Intervals are capped (RP_TIMELINE_MAX);
** events past the cap are counted, not drawn.
*/
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "report/html.h"
#include "report/jsonout.h"
#include "report/report.h"

#define ROW_H 16
#define LABEL_W 230
#define PLOT_W 820
#define MAX_ROWS 300

typedef struct rp_span {
  uint32_t key, name;   /* interned compile label / phase name */
  uint32_t depth;
  double t0, t1;        /* microseconds */
} rp_span;

struct rp_timeline {
  rp_span *spans;
  size_t n, cap, dropped;
  size_t *open;         /* indices of spans begun ("B") and not yet ended */
  size_t nopen, capopen;
  char **names;         /* interned strings: labels and phase names */
  size_t nnames, capnames;
  kn__hashmap ids;      /* string -> index + 1 */
};

static bool grow(void **p, size_t *cap, size_t need, size_t elem) {
  if (need <= *cap) return true;
  size_t nc = *cap ? *cap * 2 : 64;
  while (nc < need) nc *= 2;
  void *q = realloc(*p, nc * elem);
  if (!q) return false;
  *p = q;
  *cap = nc;
  return true;
}

static bool intern(rp_timeline *t, const char *s, uint32_t *id) {
  uintptr_t v = (uintptr_t)kn__hm_get(&t->ids, s, NULL);
  if (v) {
    *id = (uint32_t)(v - 1);
    return true;
  }
  if (!grow((void **)&t->names, &t->capnames, t->nnames + 1, sizeof *t->names))
    return false;
  char *c = strdup(s);
  if (!c || !kn__hm_put(&t->ids, s, (void *)(uintptr_t)(t->nnames + 1))) {
    free(c);
    return false;
  }
  t->names[t->nnames] = c;
  *id = (uint32_t)t->nnames++;
  return true;
}

void rp_timeline_free(rp_timeline *t) {
  if (!t) return;
  for (size_t i = 0; i < t->nnames; i++) free(t->names[i]);
  free(t->names);
  free(t->spans);
  free(t->open);
  kn__hm_fini(&t->ids);
  free(t);
}

/* A JSON string token's contents (quotes dropped, escapes kept as text),
** or "" when v is not a string. */
static void str_of(const char *v, size_t n, char *buf, size_t cap) {
  if (n < 2 || v[0] != '"') {
    buf[0] = '\0';
    return;
  }
  size_t len = n - 2 < cap - 1 ? n - 2 : cap - 1;
  memcpy(buf, v + 1, len);
  buf[len] = '\0';
}

static bool field(const char *ev, size_t n, const char *k, char *buf, size_t cap) {
  const char *v;
  size_t vl;
  if (!rp_json_field(ev, n, k, &v, &vl)) return false;
  str_of(v, vl, buf, cap);
  return true;
}

static double num_field(const char *ev, size_t n, const char *k) {
  const char *v;
  size_t vl;
  char buf[64];
  if (!rp_json_field(ev, n, k, &v, &vl) || vl >= sizeof buf) return -1;
  memcpy(buf, v, vl);
  buf[vl] = '\0';
  char *end;
  double d = strtod(buf, &end);
  return end == buf || *end ? -1 : d;
}

/* The row label: the record's compile id, else the event's args.compile_id. */
static void label_of(const rp_compile *c, const char *ev, size_t n, char *buf,
                     size_t cap) {
  const char *args;
  size_t an;
  char cid[96];
  if ((c->frame >= 0 || c->ca >= 0) ||
      !rp_json_field(ev, n, "args", &args, &an) ||
      !field(args, an, "compile_id", cid, sizeof cid) || !cid[0]) {
    snprintf(buf, cap, "%s", c->label);
    return;
  }
  snprintf(buf, cap, strcmp(cid, "None") ? "[%s]" : "(no compile id)", cid);
}

static size_t depth_of(const rp_timeline *t, uint32_t key) {
  size_t d = 0;
  for (size_t i = 0; i < t->nopen; i++) d += t->spans[t->open[i]].key == key;
  return d;
}

static void end_span(rp_timeline *t, uint32_t key, uint32_t name, double ts) {
  for (size_t i = t->nopen; i-- > 0;) {
    rp_span *s = &t->spans[t->open[i]];
    if (s->key != key || s->name != name) continue;
    s->t1 = ts >= s->t0 ? ts : s->t0;
    memmove(&t->open[i], &t->open[i + 1], (t->nopen - i - 1) * sizeof *t->open);
    t->nopen--;
    return;
  }
}

kn_status rp_timeline_event(rp_report *r, const rp_compile *c, const char *ev,
                            size_t n) {
  char ph[8], name[160], label[128];
  double ts = num_field(ev, n, "ts");
  if (!field(ev, n, "ph", ph, sizeof ph) || !field(ev, n, "name", name, sizeof name) ||
      ts < 0 || (ph[0] != 'B' && ph[0] != 'E' && ph[0] != 'X'))
    return KN_OK;
  if (!r->timeline) {
    r->timeline = calloc(1, sizeof *r->timeline);
    if (!r->timeline) return kn__oom();
    kn__hm_init(&r->timeline->ids, true);
  }
  rp_timeline *t = r->timeline;
  label_of(c, ev, n, label, sizeof label);
  uint32_t key, nm;
  if (!intern(t, label, &key) || !intern(t, name, &nm)) return kn__oom();
  if (ph[0] == 'E') {
    end_span(t, key, nm, ts);
    return KN_OK;
  }
  if (t->n >= RP_TIMELINE_MAX || (ph[0] == 'B' && t->nopen >= 1024)) {
    t->dropped++;
    return KN_OK;
  }
  if (!grow((void **)&t->spans, &t->cap, t->n + 1, sizeof *t->spans) ||
      !grow((void **)&t->open, &t->capopen, t->nopen + 1, sizeof *t->open))
    return kn__oom();
  double dur = ph[0] == 'X' ? num_field(ev, n, "dur") : 0;
  t->spans[t->n] = (rp_span){key, nm, (uint32_t)depth_of(t, key), ts,
                             ts + (dur > 0 ? dur : 0)};
  if (ph[0] == 'B') t->open[t->nopen++] = t->n;
  t->n++;
  return KN_OK;
}

/* ---- the page ----------------------------------------------------------- */

static const char *const palette[] = {"#4e79a7", "#f28e2b", "#59a14f", "#e15759",
                                      "#76b7b2", "#edc948", "#b07aa1", "#ff9da7",
                                      "#9c755f", "#bab0ac"};

static const char *color(uint32_t name) { return palette[name % 10]; }

static void fmt_ms(char *buf, size_t n, double us) {
  double ms = us / 1000.0;
  if (ms >= 100) snprintf(buf, n, "%.0f ms", ms);
  else if (ms >= 1) snprintf(buf, n, "%.2f ms", ms);
  else snprintf(buf, n, "%.3f ms", ms);
}

static void rect(FILE *f, double x, double y, double w, double h,
                 const char *fill, const char *tip) {
  fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" "
          "fill=\"%s\"><title>", x, y, w < 1 ? 1 : w, h, fill);
  rp_html_esc(f, tip);
  fputs("</title></rect>", f);
}

static void text(FILE *f, double x, double y, const char *anchor, const char *s) {
  fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"%s\">", x, y, anchor);
  rp_html_esc(f, s);
  fputs("</text>", f);
}

typedef struct total {
  uint32_t name;
  double us;
} total;

static int by_us(const void *a, const void *b) {
  const total *x = a, *y = b;
  return x->us < y->us ? 1 : x->us > y->us ? -1 : (x->name > y->name) - (x->name < y->name);
}

/* Total time per phase name, largest first (at most 25 bars). */
static void bars(FILE *f, const rp_timeline *t) {
  total *tot = calloc(t->nnames + 1, sizeof *tot);
  if (!tot) return;
  for (size_t i = 0; i < t->nnames; i++) tot[i].name = (uint32_t)i;
  for (size_t i = 0; i < t->n; i++) tot[t->spans[i].name].us += t->spans[i].t1 - t->spans[i].t0;
  qsort(tot, t->nnames, sizeof *tot, by_us);
  size_t rows = 0;
  while (rows < t->nnames && rows < 25 && tot[rows].us > 0) rows++;
  double max = rows ? tot[0].us : 1;
  fprintf(f, "<h2 id=\"phases\">Compile time per phase</h2>\n<p>Summed over "
          "all compile ids; nested phases count in their parents too.</p>\n"
          "<svg class=\"chart\" xmlns=\"http://www.w3.org/2000/svg\" "
          "width=\"%d\" height=\"%zu\" font-size=\"11\">", LABEL_W + PLOT_W + 90,
          rows * ROW_H + 4);
  for (size_t i = 0; i < rows; i++) {
    char ms[32], tip[300];
    const char *nm = t->names[tot[i].name];
    fmt_ms(ms, sizeof ms, tot[i].us);
    snprintf(tip, sizeof tip, "%s: %s", nm, ms);
    double y = (double)i * ROW_H, w = tot[i].us / max * PLOT_W;
    char lab[48];
    snprintf(lab, sizeof lab, strlen(nm) > 34 ? "%.31s..." : "%s", nm);
    text(f, LABEL_W - 6, y + 12, "end", lab);
    rect(f, LABEL_W, y + 2, w, ROW_H - 4, color(tot[i].name), tip);
    text(f, LABEL_W + w + 4, y + 12, "start", ms);
  }
  fputs("</svg>\n", f);
  if (!rows) fputs("<p>No phase took measurable time.</p>\n", f);
  free(tot);
}

static int by_key_t0(const void *a, const void *b, void *ud) {
  const rp_span *s = ud, *x = &s[*(const size_t *)a], *y = &s[*(const size_t *)b];
  if (x->key != y->key) return x->key < y->key ? -1 : 1;
  return x->t0 < y->t0 ? -1 : x->t0 > y->t0;
}

static void axis(FILE *f, double t0, double t1) {
  for (int k = 0; k <= 4; k++) {
    double x = LABEL_W + PLOT_W * k / 4.0;
    char ms[32];
    fmt_ms(ms, sizeof ms, (t1 - t0) * k / 4.0);
    fprintf(f, "<line x1=\"%.1f\" y1=\"14\" x2=\"%.1f\" y2=\"20\" stroke=\"#999\"/>",
            x, x);
    text(f, x, 11, k == 0 ? "start" : k == 4 ? "end" : "middle", ms);
  }
}

/* One row band per compile id, nested phases stacked by depth. */
static void rows_svg(FILE *f, const rp_timeline *t, const size_t *ord,
                     double t0, double t1, size_t *shown) {
  double scale = PLOT_W / (t1 > t0 ? t1 - t0 : 1), y = 22;
  size_t i = 0;
  *shown = 0;
  while (i < t->n && *shown < MAX_ROWS) {
    uint32_t key = t->spans[ord[i]].key;
    size_t e = i, depth = 0;
    while (e < t->n && t->spans[ord[e]].key == key) {
      if (t->spans[ord[e]].depth > depth) depth = t->spans[ord[e]].depth;
      e++;
    }
    double h = (double)(depth + 1) * ROW_H;
    fprintf(f, "<rect x=\"0\" y=\"%.1f\" width=\"%d\" height=\"%.1f\" fill=\"%s\"/>",
            y, LABEL_W + PLOT_W, h, *shown % 2 ? "#ffffff" : "#f3f3f3");
    text(f, LABEL_W - 6, y + 12, "end", t->names[key]);
    for (; i < e; i++) {
      const rp_span *s = &t->spans[ord[i]];
      char ms[32], tip[400];
      fmt_ms(ms, sizeof ms, s->t1 - s->t0);
      snprintf(tip, sizeof tip, "%s %s: %s", t->names[key], t->names[s->name], ms);
      double x = LABEL_W + (s->t0 - t0) * scale, w = (s->t1 - s->t0) * scale;
      double sy = y + s->depth * ROW_H + 1;
      rect(f, x, sy, w, ROW_H - 2, color(s->name), tip);
      if (w > 70) {
        char lab[40];
        snprintf(lab, sizeof lab, "%.*s", (int)(w / 7) < 38 ? (int)(w / 7) : 38,
                 t->names[s->name]);
        fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" fill=\"#fff\">", x + 3, sy + 11);
        rp_html_esc(f, lab);
        fputs("</text>", f);
      }
    }
    y += h;
    (*shown)++;
  }
}

static size_t count_rows(const rp_timeline *t, const size_t *ord) {
  size_t rows = 0;
  for (size_t i = 0; i < t->n; i++)
    rows += !i || t->spans[ord[i]].key != t->spans[ord[i - 1]].key;
  return rows;
}

static double rows_height(const rp_timeline *t, const size_t *ord) {
  double h = 0;
  size_t rows = 0;
  for (size_t i = 0; i < t->n && rows < MAX_ROWS;) {
    uint32_t key = t->spans[ord[i]].key, depth = 0;
    for (; i < t->n && t->spans[ord[i]].key == key; i++)
      if (t->spans[ord[i]].depth > depth) depth = t->spans[ord[i]].depth;
    h += (double)(depth + 1) * ROW_H;
    rows++;
  }
  return h;
}

static void timeline_svg(FILE *f, const rp_timeline *t) {
  size_t *ord = malloc((t->n + 1) * sizeof *ord);
  if (!ord) return;
  double t0 = t->spans[0].t0, t1 = t->spans[0].t1;
  for (size_t i = 0; i < t->n; i++) {
    ord[i] = i;
    if (t->spans[i].t0 < t0) t0 = t->spans[i].t0;
    if (t->spans[i].t1 > t1) t1 = t->spans[i].t1;
  }
  qsort_r(ord, t->n, sizeof *ord, by_key_t0, t->spans);
  size_t nrows = count_rows(t, ord), shown;
  fprintf(f, "<h2 id=\"timeline\">Timeline</h2>\n<p>One row per compile id, "
          "phases nested below their parents; hover a bar for its "
          "duration.</p>\n<svg class=\"chart\" xmlns=\"http://www.w3.org/2000/svg\" "
          "width=\"%d\" height=\"%.0f\" font-size=\"11\">", LABEL_W + PLOT_W + 10,
          rows_height(t, ord) + 26);
  axis(f, t0, t1);
  rows_svg(f, t, ord, t0, t1, &shown);
  fputs("</svg>\n", f);
  if (shown < nrows)
    fprintf(f, "<p>The first %zu of %zu compile ids are drawn.</p>\n", shown, nrows);
  free(ord);
}

kn_status rp_write_timeline_page(rp_report *r) {
  FILE *f = rp_out_fopen(&r->out, "timeline.html");
  if (!f) return kn_last_status();
  const rp_timeline *t = r->timeline;
  rp_html_begin(f, "Compile timeline", "");
  fputs("<h1>Compile timeline</h1>\n<p><a href=\"index.html\">back to the "
        "index</a> &middot; drawn from <a href=\"chromium_events.json\">"
        "chromium_events.json</a>, which Perfetto also opens.</p>\n", f);
  if (!t || !t->n) {
    fputs("<p>The trace has no timed chromium events.</p>\n", f);
  } else {
    bars(f, t);
    timeline_svg(f, t);
    if (t->dropped)
      fprintf(f, "<p>%zu events past the first %d were not drawn.</p>\n",
              t->dropped, RP_TIMELINE_MAX);
  }
  rp_html_end(f);
  bool bad = ferror(f) != 0;
  return fclose(f) == 0 && !bad ? KN_OK
                                : kn__error(KN_EIO, "cannot write timeline.html");
}
