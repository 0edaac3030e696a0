/*
** tools/report/views.c: views tlparse does not have, and compile status.
**
** recompiles.html groups compiles per function (compiled-autograd id and
** frame id) and shows, for each compile, its guards next to the guard that
** failed and made the next compile happen (the next compile's
** recompile_reasons, "<id>: <reason>"); guard lines that contain the failed
** check are highlighted. graph_breaks.html groups dynamo_graph_break_reason
** artifacts by user source location with counts, and restart reasons by text.
*/
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "report/html.h"
#include "report/report.h"

enum { F_METRICS = 1, F_FAILED = 2, F_EMPTY = 4, F_RESTART = 8 };

/* Compile ids in (ca, frame, fcid, attempt) order, first seen first on a
** tie; an owned array of r->ncompiles indices, NULL on OOM. Sorting replaces
** a map keyed by strings: 8 bytes per compile id. */
static int by_id(const void *a, const void *b, void *ud) {
  const rp_report *r = ud;
  size_t i = *(const size_t *)a, j = *(const size_t *)b;
  const rp_compile *x = r->compiles[i], *y = r->compiles[j];
  int64_t kx[4] = {x->ca, x->frame, x->fcid, x->attempt};
  int64_t ky[4] = {y->ca, y->frame, y->fcid, y->attempt};
  for (int k = 0; k < 4; k++)
    if (kx[k] != ky[k]) return kx[k] < ky[k] ? -1 : 1;
  return i < j ? -1 : i > j;
}

static size_t *sorted_ids(const rp_report *r) {
  size_t *v = malloc((r->ncompiles + 1) * sizeof *v);
  if (!v) return NULL;
  for (size_t i = 0; i < r->ncompiles; i++) v[i] = i;
  qsort_r(v, r->ncompiles, sizeof *v, by_id, (void *)r);
  return v;
}

static bool same_fn(const rp_compile *a, const rp_compile *b) {
  return a->ca == b->ca && a->frame == b->frame;
}

static bool same_fcid(const rp_compile *a, const rp_compile *b) {
  return same_fn(a, b) && a->fcid == b->fcid;
}

static unsigned flags_of(const rp_compile *c) {
  if (!c->has_metrics) return 0;
  return F_METRICS | (c->failed ? F_FAILED : 0) |
         (c->empty_graph ? F_EMPTY : 0) |
         (c->has_restarts || c->restarts_missing ? F_RESTART : 0);
}

static const char *status_name(unsigned fl) {
  return !(fl & F_METRICS) ? "status-missing"
         : fl & F_FAILED   ? "status-error"
         : fl & F_EMPTY    ? "status-empty"
         : fl & F_RESTART  ? "status-break"
                           : "status-ok";
}

kn_status rp_status_build(rp_report *r) {
  free(r->status_of);
  r->status_of = calloc(r->ncompiles + 1, sizeof *r->status_of);
  size_t *v = sorted_ids(r);
  if (!r->status_of || !v) {
    free(v);
    return kn__oom();
  }
  for (size_t s = 0, e; s < r->ncompiles; s = e) {
    unsigned fl = 0;
    for (e = s; e < r->ncompiles &&
                same_fcid(r->compiles[v[s]], r->compiles[v[e]]); e++)
      fl |= flags_of(r->compiles[v[e]]);
    for (size_t k = s; k < e; k++) r->status_of[v[k]] = status_name(fl);
  }
  free(v);
  return KN_OK;
}

/* The compiles of one function: a run of the sorted index array, already
** in (fcid, attempt) order; first is its earliest compile index. */
typedef struct group {
  const size_t *idx;
  size_t n, first;
} group;

/* Reasons in next's recompile_reasons that name prev ("0/0: ...") or carry
** no id at all (older traces); prefix is "0/0: " or "!1/0/0: ". */
static void failed_guards(FILE *f, const rp_compile *prev,
                          const rp_compile *next, const char **first) {
  char prefix[64];
  if (prev->ca >= 0)
    snprintf(prefix, sizeof prefix, "!%lld/%lld/%lld: ", (long long)prev->ca,
             (long long)prev->frame, (long long)prev->fcid);
  else
    snprintf(prefix, sizeof prefix, "%lld/%lld: ", (long long)prev->frame,
             (long long)prev->fcid);
  size_t i, shown = 0;
  json_t *e;
  fputs("<ul>", f);
  json_array_foreach(next->recompile_reasons, i, e) {
    const char *s = json_string_value(e);
    if (!s) continue;
    bool mine = !strncmp(s, prefix, strlen(prefix));
    bool unprefixed = !strstr(s, ": ") || !(s[0] >= '0' && s[0] <= '9');
    if (!mine && !unprefixed) continue;
    if (mine) s += strlen(prefix);
    if (!*first) *first = s;
    fputs("<li>", f);
    rp_html_esc(f, s);
    fputs("</li>", f);
    shown++;
  }
  if (!shown) fputs("<li>(no reason recorded for this compile)</li>", f);
  fputs("</ul>", f);
}

/* Guard text with lines matching the failed check highlighted. */
static void guards_html(FILE *f, const rp_report *r, const rp_compile *c,
                        const char *failed) {
  char *text = rp_compile_guards(r, c);
  if (!text) {
    fputs("(no guards recorded)", f);
    return;
  }
  size_t lines = 1, hits = 0;
  for (const char *p = text; *p; p++) lines += *p == '\n';
  for (const char *p = text; *p && failed;) {
    size_t n = strcspn(p, "\n");
    char *line = strndup(p, n);
    hits += line && rp_guard_line_matches(line, failed);
    free(line);
    p += n + (p[n] == '\n');
  }
  /* Open when a line is highlighted, so the failed guard shows at once. */
  fprintf(f, "<details%s><summary>%zu guard line(s), %zu matching the "
          "failure</summary><pre>", hits ? " open" : "", lines, hits);
  const char *p = text;
  while (*p) {
    size_t n = strcspn(p, "\n");
    char *line = strndup(p, n);
    bool hit = line && rp_guard_line_matches(line, failed);
    if (hit) fputs("<mark>", f);
    rp_html_escn(f, p, n);
    if (hit) fputs("</mark>", f);
    fputc('\n', f);
    free(line);
    p += n + (p[n] == '\n');
  }
  free(text);
  fputs("</pre></details>", f);
  fputs(" <a href=\"", f);
  rp_html_esc(f, c->guards_url);
  fputs("\">file</a>", f);
}

static void function_title(FILE *f, const rp_report *r, const group *g) {
  const char *name = NULL, *file = NULL;
  int64_t line = -1;
  for (size_t k = 0; k < g->n; k++) {
    const rp_compile *c = r->compiles[g->idx[k]];
    if (!name) name = c->co_name ? c->co_name : c->fn_name;
    if (!file && c->co_filename) file = c->co_filename, line = c->co_firstlineno;
  }
  rp_html_esc(f, name ? name : "(unknown function)");
  if (file) { /* the file's base name; the full path shows on hover */
    const char *base = strrchr(file, '/');
    fputs(" <small title=\"", f);
    rp_html_esc(f, file);
    fputs("\">", f);
    rp_html_esc(f, base ? base + 1 : file);
    fprintf(f, ":%lld</small>", (long long)line);
  }
}

/* The compile with guards for each fcid: its last attempt with guards. */
static void group_table(FILE *f, const rp_report *r, const group *g) {
  fputs("<table>\n<tr><th>Compile</th><th>Guard that failed on a later "
        "call, making the next compile</th><th>Guards of this compile</th>"
        "</tr>\n", f);
  for (size_t k = 0; k < g->n; k++) {
    const rp_compile *c = r->compiles[g->idx[k]];
    bool last_of_fcid = k + 1 == g->n ||
                        r->compiles[g->idx[k + 1]]->fcid != c->fcid;
    if (!last_of_fcid) continue;
    const rp_compile *next = NULL;
    for (size_t j = k + 1; j < g->n && !next; j++)
      if (r->compiles[g->idx[j]]->recompile_reasons) next = r->compiles[g->idx[j]];
    fprintf(f, "<tr><td><a href=\"index.html#%s\">%s</a></td><td>", c->label,
            c->label);
    const char *failed = NULL;
    if (next) failed_guards(f, c, next, &failed);
    else fputs("(no later compile)", f);
    fputs("</td><td class=\"guards\">", f);
    guards_html(f, r, c, failed);
    fputs("</td></tr>\n", f);
  }
  fputs("</table>\n", f);
}

static int by_first(const void *a, const void *b) {
  const group *x = a, *y = b;
  return x->first < y->first ? -1 : x->first > y->first;
}

/* Functions compiled more than once, in first-seen order. */
static kn_status collect_groups(const rp_report *r, const size_t *v,
                                group **out, size_t *n) {
  group *gs = NULL;
  size_t ng = 0, cap = 0;
  for (size_t s = 0, e; s < r->ncompiles; s = e) {
    size_t first = v[s];
    for (e = s; e < r->ncompiles && same_fn(r->compiles[v[s]],
                                            r->compiles[v[e]]); e++)
      if (v[e] < first) first = v[e];
    if (r->compiles[v[s]]->frame < 0 || r->compiles[v[e - 1]]->fcid <= 0)
      continue;
    if (ng == cap) {
      cap = cap ? cap * 2 : 8;
      group *p = realloc(gs, cap * sizeof *p);
      if (!p) {
        free(gs);
        return kn__oom();
      }
      gs = p;
    }
    gs[ng++] = (group){v + s, e - s, first};
  }
  if (ng) qsort(gs, ng, sizeof *gs, by_first);
  *out = gs;
  *n = ng;
  return KN_OK;
}

kn_status rp_write_recompiles_page(rp_report *r) {
  group *gs = NULL;
  size_t ng = 0, *v = sorted_ids(r);
  if (!v) return kn__oom();
  kn_status st = collect_groups(r, v, &gs, &ng);
  FILE *f = st ? NULL : rp_out_fopen(&r->out, "recompiles.html");
  if (!f) {
    free(gs), free(v);
    return st ? st : kn_last_status();
  }
  rp_html_begin(f, "Recompiles", "");
  fputs("<h1>Recompiles</h1>\n<p><a href=\"index.html\">back to the index</a>"
        "</p>\n<p>Per function, each compile's guards next to the guard that "
        "failed on a later call and why, which is what made the next compile "
        "happen.</p>\n", f);
  for (size_t k = 0; k < ng; k++) {
    fprintf(f, "<h2>%lld compiles of ",
            (long long)r->compiles[gs[k].idx[gs[k].n - 1]]->fcid + 1);
    function_title(f, r, &gs[k]);
    fputs("</h2>\n", f);
    group_table(f, r, &gs[k]);
  }
  if (!ng) fputs("<p>No function was compiled more than once.</p>\n", f);
  rp_html_end(f);
  free(gs), free(v);
  return fclose(f) == 0 ? KN_OK : kn__error(KN_EIO, "cannot write page");
}

static void breaks_table(rp_report *r, FILE *f) {
  bool *done = calloc(r->nbreaks + 1, 1);
  if (!done) return;
  fputs("<table>\n<tr><th>User source location</th><th>Breaks</th>"
        "<th>Reasons</th><th>Compiles</th></tr>\n", f);
  for (size_t i = 0; i < r->nbreaks; i++) {
    if (done[i]) continue;
    size_t count = 0;
    for (size_t j = i; j < r->nbreaks; j++)
      count += !strcmp(r->breaks[j].location, r->breaks[i].location);
    fputs("<tr><td><code>", f);
    rp_html_esc(f, r->breaks[i].location);
    fprintf(f, "</code></td><td class=\"num\">%zu</td><td><ul>", count);
    for (size_t j = i; j < r->nbreaks; j++) {
      if (strcmp(r->breaks[j].location, r->breaks[i].location)) continue;
      bool dup = false;
      for (size_t k = i; k < j && !dup; k++)
        dup = !strcmp(r->breaks[k].location, r->breaks[i].location) &&
              !strcmp(r->breaks[k].reason, r->breaks[j].reason);
      if (dup) continue;
      fputs("<li>", f);
      rp_html_esc(f, r->breaks[j].reason);
      fputs("</li>", f);
    }
    fputs("</ul></td><td>", f);
    for (size_t j = i; j < r->nbreaks; j++) {
      if (strcmp(r->breaks[j].location, r->breaks[i].location)) continue;
      done[j] = true;
      const char *label = r->breaks[j].compile < r->ncompiles
                              ? r->compiles[r->breaks[j].compile]->label : "?";
      fputs("<a href=\"", f);
      rp_html_esc(f, r->breaks[j].url);
      fprintf(f, "\">%s</a> ", label);
    }
    fputs("</td></tr>\n", f);
  }
  fputs("</table>\n", f);
  free(done);
}

kn_status rp_write_graph_breaks_page(rp_report *r) {
  FILE *f = rp_out_fopen(&r->out, "graph_breaks.html");
  if (!f) return kn_last_status();
  rp_html_begin(f, "Graph breaks", "");
  fprintf(f, "<h1>Graph breaks</h1>\n<p><a href=\"index.html\">back to the "
          "index</a></p>\n<p>%zu graph break(s), grouped by user source "
          "location.</p>\n", r->nbreaks);
  if (r->nbreaks) breaks_table(r, f);
  fputs("<h2>Restart reasons</h2>\n", f);
  size_t n = 0;
  fputs("<ul>\n", f);
  for (size_t i = 0; i < r->nfailures; i++) {
    if (strcmp(r->failures[i].type, "RestartAnalysis")) continue;
    fprintf(f, "<li>%s: ", r->compiles[r->failures[i].compile]->label);
    rp_html_esc(f, r->failures[i].reason);
    fputs("</li>\n", f);
    n++;
  }
  fputs("</ul>\n", f);
  if (!n) fputs("<p>No restarts.</p>\n", f);
  rp_html_end(f);
  return fclose(f) == 0 ? KN_OK : kn__error(KN_EIO, "cannot write page");
}
