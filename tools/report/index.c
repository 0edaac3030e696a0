/*
** tools/report/index.c: index.html, failures_and_restarts.html and
** compile_directory.json.
**
** The index opens with a summary (compiles, recompiles, graph breaks,
** failures, restarts, total compile time), then the stack trie coloured by
** status, the failures table, every compile id with its files, the records
** that have no page of their own, the defects and the unknown-stacks trie.
** A small inline script adds a filter box; without JavaScript the page is
** complete, only the box stays hidden.
*/
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "report/html.h"
#include "report/report.h"

static const char *simplify(const char *path) {
  const char *s = strstr(path, "site-packages/");
  return s ? s + strlen("site-packages/") : path;
}

static void frame_html(void *ud, FILE *f, const rp_frame *fr) {
  rp_report *r = ud;
  fputs("<span class=\"frame\">", f);
  rp_html_esc(f, simplify(rp_string(r, fr->file)));
  fprintf(f, ":%lld in ", (long long)fr->line);
  rp_html_esc(f, fr->name);
  if (fr->loc) {
    fputs("<br><span class=\"frame-loc\">&nbsp;&nbsp;&nbsp;&nbsp;", f);
    rp_html_esc(f, fr->loc);
    fputs("</span>", f);
  }
  fputs("</span>", f);
}

static void term_html(void *ud, FILE *f, size_t ci) {
  rp_report *r = ud;
  rp_compile *c = r->compiles[ci];
  fprintf(f, "<a class=\"%s\" href=\"index.html#%s\">%s</a>", r->status_of[ci],
          c->label, c->label);
}

void rp_write_trie(rp_report *r, FILE *f, const rp_trie *t) {
  rp_trie_render rd = {frame_html, term_html, r};
  rp_trie_write(t, f, &rd);
}

static uint64_t count_recompiles(const rp_report *r) {
  uint64_t n = 0;
  for (size_t i = 0; i < r->ncompiles; i++)
    if (r->compiles[i]->fcid > 0 && r->compiles[i]->attempt <= 0) n++;
  return n;
}

static uint64_t count_failed(const rp_report *r) {
  uint64_t n = 0;
  for (size_t i = 0; i < r->ncompiles; i++) n += r->compiles[i]->failed;
  return n;
}

typedef struct cell {
  const char *name, *href;
  char value[32];
} cell;

static void put(cell *c, size_t *n, const char *name, const char *href,
                unsigned long long v) {
  c[*n].name = name;
  c[*n].href = href;
  snprintf(c[*n].value, sizeof c[*n].value, "%llu", v);
  (*n)++;
}

/* One header row of names and one row of values, so it stays compact. */
static void summary(rp_report *r, FILE *f) {
  cell c[12];
  size_t n = 0;
  uint64_t restarts = r->nfailures - count_failed(r);
  put(c, &n, "Compiles", NULL, r->trie.inserted);
  put(c, &n, "Compile ids", "#compile-ids", r->ncompiles);
  put(c, &n, "Recompiles", "recompiles.html", count_recompiles(r));
  put(c, &n, "Graph breaks", "graph_breaks.html", r->nbreaks);
  put(c, &n, "Failures", "failures_and_restarts.html", count_failed(r));
  put(c, &n, "Restarts", "failures_and_restarts.html", restarts);
  c[n].name = "Compile time";
  c[n].href = NULL;
  snprintf(c[n++].value, sizeof c[0].value, "%.3f s", r->total_compile_s);
  put(c, &n, "Records", NULL, r->st.records);
  put(c, &n, "Chromium events", r->st.chromium ? "chromium_events.json" : NULL,
      r->st.chromium);
  put(c, &n, "Defects", "#defects", r->st.defects);
  fputs("<h2 id=\"summary\">Summary</h2>\n<table class=\"summary\">\n<tr>", f);
  for (size_t i = 0; i < n; i++) {
    if (c[i].href) fprintf(f, "<th><a href=\"%s\">%s</a></th>", c[i].href,
                           c[i].name);
    else fprintf(f, "<th>%s</th>", c[i].name);
  }
  fputs("</tr>\n<tr>", f);
  for (size_t i = 0; i < n; i++)
    fprintf(f, "<td class=\"num\">%s</td>", c[i].value);
  fputs("</tr>\n</table>\n", f);
}

static void nav(FILE *f) {
  fputs("<nav><a href=\"#summary\">Summary</a><a href=\"#stack-trie\">Stack "
        "trie</a><a href=\"#compile-ids\">Compile ids</a><a "
        "href=\"recompiles.html\">Recompiles</a><a "
        "href=\"graph_breaks.html\">Graph breaks</a><a "
        "href=\"symbolic_shapes.html\">Symbolic shapes</a><a "
        "href=\"timeline.html\">Timeline</a><a "
        "href=\"failures_and_restarts.html\">Failures and restarts</a><a "
        "href=\"chromium_events.json\">chromium_events.json</a><a "
        "href=\"raw.jsonl\">raw.jsonl</a><a "
        "href=\"compile_directory.json\">compile_directory.json</a></nav>\n",
        f);
}

static void trie_section(rp_report *r, FILE *f) {
  fputs("<h2 id=\"stack-trie\">Stack trie</h2>\n<p>Each path is the user stack "
        "at which a frame started compiling; the compile ids that started "
        "there end it.</p>\n<p class=\"legend\"><span class=\"status-ok\">ok"
        "</span><span class=\"status-break\">restarted (graph break)</span>"
        "<span class=\"status-empty\">empty graph</span><span "
        "class=\"status-error\">failed</span><span class=\"status-missing\">"
        "no metrics</span></p>\n", f);
  /* A deep or large trie starts collapsed, so the page opens on the summary
  ** and the compile list rather than on thousands of frames. */
  const rp_trie *t = &r->trie;
  bool open = t->maxdepth <= RP_TRIE_OPEN_DEPTH && t->nnodes <= RP_TRIE_OPEN_NODES;
  fprintf(f, "<details%s><summary>Stack trie: %zu stack(s), %zu frame(s), "
          "deepest %zu%s</summary>\n", open ? " open" : "", t->inserted,
          t->nnodes, t->maxdepth, open ? "" : " (collapsed: click to open)");
  rp_write_trie(r, f, &r->trie);
  fputs("</details>\n", f);
}

static void failures_table(rp_report *r, FILE *f, size_t limit) {
  fputs("<table>\n<tr><th>Compile Id</th><th>Failure Type</th><th>Failure "
        "Description</th><th>Failure Source</th></tr>\n", f);
  for (size_t i = 0; i < r->nfailures && i < limit; i++) {
    rp_failure *x = &r->failures[i];
    rp_compile *c = r->compiles[x->compile];
    fputs("<tr><td>", f);
    if (c->metrics_url) fprintf(f, "<a href=\"%s\">%s</a>", c->metrics_url,
                                c->label);
    else fputs(c->label, f);
    fputs("</td><td>", f);
    rp_html_esc(f, x->type);
    fputs("</td><td><pre>", f);
    rp_html_esc(f, x->reason);
    fputs("</pre></td><td>", f);
    rp_html_esc(f, x->source);
    fputs("</td></tr>\n", f);
  }
  fputs("</table>\n", f);
}

static void artifact_item(FILE *f, const rp_artifact *a) {
  fputs("<li>", f);
  if (*a->url) {
    fputs("<a href=\"", f);
    rp_html_esc(f, a->url);
    fputs("\">", f);
    rp_html_esc(f, a->name);
    fputs("</a>", f);
  } else {
    rp_html_esc(f, a->name);
  }
  if (a->readable_url) {
    fputs(" [<a href=\"", f);
    rp_html_esc(f, a->readable_url);
    fputs("\">readable</a>]", f);
  }
  /* The JSON keeps tlparse's emoji; pages use words (no emoji font needed). */
  const char *mark = !strcmp(a->suffix, "\xe2\x9d\x8c")
                         ? " <span class=\"status-error\">cache miss</span>"
                     : !strcmp(a->suffix, "\xe2\x9c\x85")
                         ? " <span class=\"status-ok\">cache hit</span>"
                     : *a->suffix ? " <span class=\"status-break\">cache bypass</span>"
                                  : "";
  fprintf(f, "%s (%llu)</li>\n", mark, (unsigned long long)a->number);
}

static void compile_list(rp_report *r, FILE *f) {
  fputs("<h2 id=\"compile-ids\">Compile ids</h2>\n<p>Build products of each "
        "compile id <code>[frame/frame_compile]</code>, "
        "<code>_N</code> = restart attempt, <code>!N/</code> = compiled "
        "autograd, <code>[-/-]</code> = records outside any compile.</p>\n"
        "<div id=\"filter\"><label>Filter: <input id=\"q\" type=\"search\" "
        "placeholder=\"compile id, function or file name\"></label></div>\n"
        "<ul id=\"compiles\">\n", f);
  for (size_t i = 0; i < r->ncompiles; i++) {
    rp_compile *c = r->compiles[i];
    fprintf(f, "<li class=\"compile\"><a id=\"%s\" class=\"%s\" "
            "href=\"#%s\">%s</a>", c->label, r->status_of[i], c->label,
            c->label);
    const char *fn = c->co_name ? c->co_name : c->fn_name;
    if (fn) {
      fputs(" <code>", f);
      rp_html_esc(f, fn);
      fputs("</code>", f);
    }
    if (c->failed) {
      fputs(" <span class=\"status-error\">", f);
      rp_html_esc(f, c->fail_type);
      fputs("</span>", f);
    }
    if (c->compile_time_s > 0) fprintf(f, " %.3f s", c->compile_time_s);
    fputs("\n<ul>\n", f);
    for (size_t k = 0; k < c->narts; k++) artifact_item(f, &c->arts[k]);
    fputs("</ul></li>\n", f);
  }
  fputs("</ul>\n", f);
}

static int cmp_str(const void *a, const void *b) {
  return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static void unknown_section(rp_report *r, FILE *f) {
  fputs("<h2 id=\"unknown\">Records without a page</h2>\n", f);
  size_t n = r->unknown.len, k = 0;
  if (!n) {
    fputs("<p>None.</p>\n", f);
    return;
  }
  const char **names = malloc(n * sizeof *names);
  if (!names) return;
  const kn__hm_slot *s;
  for (size_t i = 0; kn__hm_next(&r->unknown, &i, &s);) names[k++] = s->key.s;
  qsort(names, k, sizeof *names, cmp_str);
  fputs("<table>\n<tr><th>Event</th><th>Records</th></tr>\n", f);
  for (size_t i = 0; i < k; i++) {
    fputs("<tr><td><code>", f);
    rp_html_esc(f, names[i]);
    fprintf(f, "</code></td><td class=\"num\">%llu</td></tr>\n",
            (unsigned long long)(uintptr_t)kn__hm_get(&r->unknown, names[i],
                                                      NULL));
  }
  fputs("</table>\n", f);
  free(names);
}

static void defects_section(rp_report *r, FILE *f) {
  fprintf(f, "<h2 id=\"defects\">Defects</h2>\n<p>%llu defect(s) in the "
          "trace.</p>\n", (unsigned long long)r->st.defects);
  if (!r->ndefect_msgs) return;
  fputs("<ul>\n", f);
  for (size_t i = 0; i < r->ndefect_msgs; i++) {
    fputs("<li><code>", f);
    rp_html_esc(f, r->defect_msgs[i] ? r->defect_msgs[i] : "(out of memory)");
    fputs("</code></li>\n", f);
  }
  fputs("</ul>\n", f);
}

kn_status rp_write_index(rp_report *r) {
  FILE *f = rp_out_fopen(&r->out, "index.html");
  if (!f) return kn_last_status();
  rp_html_begin(f, "kiln report", "");
  if (r->opts->custom_header) fputs(r->opts->custom_header, f);
  fputs("<h1>kiln report</h1>\n<p>Trace: <code>", f);
  const char *base = strrchr(r->input, '/');
  rp_html_esc(f, base ? base + 1 : r->input);
  fputs("</code></p>\n", f);
  nav(f);
  summary(r, f);
  trie_section(r, f);
  if (r->nfailures) {
    fprintf(f, "<h2 id=\"failures\">Failures and restarts</h2>\n<p>This run had "
            "%zu restart(s) and/or compilation failure(s): <a "
            "href=\"failures_and_restarts.html\">all of them</a>.</p>\n",
            r->nfailures);
    failures_table(r, f, 20);
  }
  compile_list(r, f);
  unknown_section(r, f);
  defects_section(r, f);
  if (r->unknown_trie.inserted) {
    fputs("<h2 id=\"unknown-stacks\">Unknown stacks</h2>\n<p>Records logged "
          "outside a compile with the stack of the logging call.</p>\n", f);
    rp_write_trie(r, f, &r->unknown_trie);
  }
  rp_html_filter_script(f);
  rp_html_end(f);
  bool bad = ferror(f) != 0;
  if (fclose(f) != 0 || bad) return kn__error(KN_EIO, "cannot write index.html");
  return KN_OK;
}

kn_status rp_write_failures_page(rp_report *r) {
  FILE *f = rp_out_fopen(&r->out, "failures_and_restarts.html");
  if (!f) return kn_last_status();
  rp_html_begin(f, "Failures and restarts", "");
  fputs("<h1>Failures and restarts</h1>\n<p><a href=\"index.html\">back to the "
        "index</a></p>\n", f);
  if (r->nfailures) failures_table(r, f, SIZE_MAX);
  else fputs("<p>No failures or restarts.</p>\n", f);
  rp_html_end(f);
  return fclose(f) == 0 ? KN_OK : kn__error(KN_EIO, "cannot write page");
}

static json_t *compile_entry(const rp_compile *c) {
  json_t *arts = json_array();
  for (size_t k = 0; k < c->narts; k++) {
    rp_artifact *a = &c->arts[k];
    json_array_append_new(arts, json_pack("{s:s,s:s,s:I,s:s,s:s?}", "url",
                                          a->url, "name", a->name, "number",
                                          (json_int_t)a->number, "suffix",
                                          a->suffix, "readable_url",
                                          a->readable_url));
  }
  return json_pack("{s:o}", "artifacts", arts);
}

/* Text with every newline followed by two more spaces of indentation. */
static void put_indented(FILE *f, const char *s) {
  for (; *s; s++) {
    fputc(*s, f);
    if (*s == '\n') fputs("  ", f);
  }
}

/* Written one compile id at a time (as jansson would indent the whole
** object), so memory does not grow with the number of compile ids. */
kn_status rp_write_compile_directory(rp_report *r) {
  FILE *f = rp_out_fopen(&r->out, "compile_directory.json");
  if (!f) return kn_last_status();
  fputs(r->ncompiles ? "{\n" : "{}", f);
  bool oom = false;
  for (size_t i = 0; i < r->ncompiles && !oom; i++) {
    json_t *label = json_string(r->compiles[i]->label);
    json_t *e = compile_entry(r->compiles[i]);
    char *ls = json_dumps(label, JSON_ENCODE_ANY);
    char *es = json_dumps(e, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    oom = !ls || !es;
    if (!oom) {
      fprintf(f, "  %s: ", ls);
      put_indented(f, es);
      fputs(i + 1 < r->ncompiles ? ",\n" : "\n}", f);
    }
    free(ls), free(es);
    json_decref(label), json_decref(e);
  }
  fputc('\n', f);
  bool bad = ferror(f) != 0;
  if (fclose(f) != 0 || bad || oom)
    return oom ? kn__oom() : kn__error(KN_EIO, "cannot write json");
  return KN_OK;
}
