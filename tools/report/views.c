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

static void group_key(const rp_compile *c, char *buf, size_t n, bool fcid) {
  snprintf(buf, n, "%lld_%lld_%lld", (long long)c->ca, (long long)c->frame,
           fcid ? (long long)c->fcid : -2LL);
}

kn_status rp_status_build(rp_report *r) {
  kn__hashmap m;
  kn__hm_init(&m, true);
  char key[80];
  kn_status st = KN_OK;
  for (size_t i = 0; i < r->ncompiles && !st; i++) {
    rp_compile *c = r->compiles[i];
    if (!c->has_metrics) continue;
    group_key(c, key, sizeof key, true);
    uintptr_t fl = (uintptr_t)kn__hm_get(&m, key, NULL) | F_METRICS;
    if (c->failed) fl |= F_FAILED;
    if (c->empty_graph) fl |= F_EMPTY;
    if (c->has_restarts || c->restarts_missing) fl |= F_RESTART;
    if (!kn__hm_put(&m, key, (void *)fl)) st = kn__oom();
  }
  free(r->status_of);
  r->status_of = calloc(r->ncompiles + 1, sizeof *r->status_of);
  if (!r->status_of && !st) st = kn__oom();
  for (size_t i = 0; i < r->ncompiles && !st; i++) {
    group_key(r->compiles[i], key, sizeof key, true);
    uintptr_t fl = (uintptr_t)kn__hm_get(&m, key, NULL);
    r->status_of[i] = !(fl & F_METRICS) ? "status-missing"
                      : fl & F_FAILED   ? "status-error"
                      : fl & F_EMPTY    ? "status-empty"
                      : fl & F_RESTART  ? "status-break"
                                        : "status-ok";
  }
  kn__hm_fini(&m);
  return st;
}

/* Compile indices of one function, sorted by (fcid, attempt). */
typedef struct group {
  size_t *idx, n, cap;
} group;

static int by_fcid(const void *a, const void *b, void *ud) {
  const rp_report *r = ud;
  const rp_compile *x = r->compiles[*(const size_t *)a];
  const rp_compile *y = r->compiles[*(const size_t *)b];
  if (x->fcid != y->fcid) return x->fcid < y->fcid ? -1 : 1;
  return x->attempt < y->attempt ? -1 : x->attempt > y->attempt;
}

static bool push(group *g, size_t i) {
  if (g->n == g->cap) {
    size_t nc = g->cap ? g->cap * 2 : 4;
    size_t *p = realloc(g->idx, nc * sizeof *p);
    if (!p) return false;
    g->idx = p;
    g->cap = nc;
  }
  g->idx[g->n++] = i;
  return true;
}

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

static bool word_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
         (c >= '0' && c <= '9') || c == '_';
}

/* Whether a guard line checks what the failure names: it holds the whole
** reason, or every word of 3+ characters in it (so the reason
** "___check_obj_id(fn, 1396)" finds "___check_obj_id(L['fn'], 1396)"). */
static bool line_matches(const char *line, const char *failed) {
  if (!failed || !*failed) return false;
  size_t n = strlen(failed);
  while (n && failed[n - 1] == ' ') n--;
  if (n && memmem(line, strlen(line), failed, n)) return true;
  size_t words = 0;
  for (size_t i = 0; i < n;) {
    if (!word_char(failed[i])) {
      i++;
      continue;
    }
    size_t j = i;
    while (j < n && word_char(failed[j])) j++;
    if (j - i >= 3) {
      if (!memmem(line, strlen(line), failed + i, j - i)) return false;
      words++;
    }
    i = j;
  }
  return words > 0;
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
    hits += line && line_matches(line, failed);
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
    bool hit = line && line_matches(line, failed);
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
  if (file) {
    fputs(" <small>", f);
    rp_html_esc(f, file);
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

static kn_status collect_groups(const rp_report *r, group **out, size_t *n) {
  kn__hashmap m;
  kn__hm_init(&m, true);
  group *gs = NULL;
  size_t ng = 0;
  char key[80];
  for (size_t i = 0; i < r->ncompiles; i++) {
    const rp_compile *c = r->compiles[i];
    if (c->frame < 0) continue;
    group_key(c, key, sizeof key, false);
    uintptr_t gi = (uintptr_t)kn__hm_get(&m, key, NULL);
    if (!gi) {
      group *p = realloc(gs, (ng + 1) * sizeof *p);
      if (!p || !kn__hm_put(&m, key, (void *)(uintptr_t)(ng + 1))) {
        gs = p ? p : gs;
        goto oom;
      }
      gs = p;
      memset(&gs[ng], 0, sizeof gs[ng]);
      gi = ++ng;
    }
    if (!push(&gs[gi - 1], i)) goto oom;
  }
  kn__hm_fini(&m);
  *out = gs;
  *n = ng;
  return KN_OK;
oom:
  for (size_t k = 0; k < ng; k++) free(gs[k].idx);
  free(gs);
  kn__hm_fini(&m);
  return kn__oom();
}

kn_status rp_write_recompiles_page(rp_report *r) {
  group *gs = NULL;
  size_t ng = 0;
  kn_status st = collect_groups(r, &gs, &ng);
  if (st) return st;
  FILE *f = rp_out_fopen(&r->out, "recompiles.html");
  if (!f) {
    for (size_t k = 0; k < ng; k++) free(gs[k].idx);
    free(gs);
    return kn_last_status();
  }
  rp_html_begin(f, "Recompiles", "");
  fputs("<h1>Recompiles</h1>\n<p><a href=\"index.html\">back to the index</a>"
        "</p>\n<p>Per function, each compile's guards next to the guard that "
        "failed on a later call and why, which is what made the next compile "
        "happen.</p>\n", f);
  size_t shown = 0;
  for (size_t k = 0; k < ng; k++) {
    group *g = &gs[k];
    qsort_r(g->idx, g->n, sizeof *g->idx, by_fcid, r);
    int64_t maxf = r->compiles[g->idx[g->n - 1]]->fcid;
    if (maxf <= 0) continue;
    fprintf(f, "<h2>%lld compiles of ", (long long)maxf + 1);
    function_title(f, r, g);
    fputs("</h2>\n", f);
    group_table(f, r, g);
    shown++;
  }
  if (!shown) fputs("<p>No function was compiled more than once.</p>\n", f);
  rp_html_end(f);
  for (size_t k = 0; k < ng; k++) free(gs[k].idx);
  free(gs);
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
