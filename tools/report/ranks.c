/*
** tools/report/ranks.c: --all-ranks-html, one report per rank and a landing
** page that compares them.
**
** Rank files are dedicated_log_{torch,kiln}_trace_rank_<N>[_*].log in DIR (other
** names are ignored; for a rank with several files the first by name is
** used). Each rank's report goes to OUT/rank_<N>/. The landing page lists
** per-rank counts and the divergences: compile ids missing on some ranks and
** compile ids whose Dynamo graph (payload MD5) differs between ranks. The
** combined chromium_events.json has each event's pid set to its rank.
**
** Ranks are reported one after the other, and each rank's report state is
** released (its files closed) as soon as a small summary is taken: the
** number of ranks is bounded by neither memory nor open files.
*/
#include <dirent.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/hashmap.h"
#include "report/html.h"
#include "report/report.h"

#define PREFIX "dedicated_log_torch_trace_rank_"
#define KILN_PREFIX "dedicated_log_kiln_trace_rank_"

/* What the landing page needs of one compile id of a rank. */
typedef struct rank_id {
  char *label;
  char md5[33];
} rank_id;

typedef struct rank_run {
  long rank;
  char *file;
  rank_id *ids;          /* frame compile ids, sorted by label */
  size_t nids;
  size_t ncompiles, compiles, breaks, failures;
  uint64_t defects;
  double compile_s;
} rank_run;

static int by_rank(const void *a, const void *b) {
  const rank_run *x = a, *y = b;
  if (x->rank != y->rank) return x->rank < y->rank ? -1 : 1;
  return strcmp(x->file, y->file);
}

static kn_status find_ranks(const char *dir, rank_run **out, size_t *n) {
  DIR *d = opendir(dir);
  if (!d) return kn__error(KN_EIO, "cannot open directory '%s'", dir);
  rank_run *rs = NULL;
  size_t nr = 0;
  struct dirent *e;
  kn_status st = KN_OK;
  while ((e = readdir(d)) && !st) {
    const char *s = e->d_name;
    size_t len = strlen(s);
    const char *num = !strncmp(s, PREFIX, strlen(PREFIX)) ? s + strlen(PREFIX)
                      : !strncmp(s, KILN_PREFIX, strlen(KILN_PREFIX))
                          ? s + strlen(KILN_PREFIX) : NULL;
    if (!num || len < 4 || strcmp(s + len - 4, ".log")) continue;
    char *end;
    long rank = strtol(num, &end, 10);
    if (end == num || (*end != '_' && *end != '.') || rank < 0 ||
        rank > 1000000)
      continue;
    rank_run *p = realloc(rs, (nr + 1) * sizeof *p);
    if (!p) {
      st = kn__oom();
      break;
    }
    rs = p;
    memset(&rs[nr], 0, sizeof rs[nr]);
    rs[nr].rank = rank;
    size_t need = strlen(dir) + len + 2;
    rs[nr].file = malloc(need);
    if (!rs[nr].file) {
      st = kn__oom();
      break;
    }
    snprintf(rs[nr].file, need, "%s/%s", dir, s);
    nr++;
  }
  closedir(d);
  if (nr) qsort(rs, nr, sizeof *rs, by_rank);
  size_t k = 0; /* keep the first file of each rank */
  for (size_t i = 0; i < nr; i++) {
    if (k && rs[k - 1].rank == rs[i].rank) {
      free(rs[i].file);
      continue;
    }
    rs[k++] = rs[i];
  }
  *out = rs;
  *n = k;
  if (!st && !k)
    st = kn__error(KN_EINVAL, "no %s<N>*.log files in '%s'", PREFIX, dir);
  return st;
}

static int by_label(const void *a, const void *b) {
  return strcmp(((const rank_id *)a)->label, ((const rank_id *)b)->label);
}

static const rank_id *find_label(const rank_run *r, const char *label) {
  rank_id key = {.label = (char *)label};
  return bsearch(&key, r->ids, r->nids, sizeof key, by_label);
}

/* Keep the counts and frame compile ids of a finished rank report. */
static kn_status summarize(rank_run *rr, const rp_report *r) {
  rr->ncompiles = r->ncompiles;
  rr->compiles = r->trie.inserted;
  rr->breaks = r->nbreaks;
  rr->failures = r->nfailures;
  rr->defects = r->st.defects;
  rr->compile_s = r->total_compile_s;
  rr->ids = calloc(r->ncompiles + 1, sizeof *rr->ids);
  if (!rr->ids) return kn__oom();
  for (size_t k = 0; k < r->ncompiles; k++) {
    const rp_compile *c = r->compiles[k];
    if (c->frame < 0) continue;
    rank_id *id = &rr->ids[rr->nids];
    id->label = strdup(c->label);
    if (!id->label) return kn__oom();
    memcpy(id->md5, c->graph_md5, sizeof id->md5);
    rr->nids++;
  }
  qsort(rr->ids, rr->nids, sizeof *rr->ids, by_label);
  return KN_OK;
}

/* Compile ids seen on any rank, with where they are missing or differ. */
static void divergence(FILE *f, rank_run *rs, size_t n) {
  fputs("<h2>Divergence</h2>\n<table>\n<tr><th>Compile id</th><th>Missing on"
        " ranks</th><th>Dynamo graph differs</th></tr>\n", f);
  size_t rows = 0;
  kn__hashmap seen;
  kn__hm_init(&seen, true);
  for (size_t i = 0; i < n; i++) {
    for (size_t k = 0; k < rs[i].nids; k++) {
      const rank_id *c = &rs[i].ids[k];
      bool dup;
      kn__hm_get(&seen, c->label, &dup);
      if (dup || !kn__hm_put(&seen, c->label, NULL)) continue;
      kn__sb missing = KN__SB_INIT;
      bool differs = false;
      for (size_t j = 0; j < n; j++) {
        const rank_id *o = find_label(&rs[j], c->label);
        if (!o) kn__sb_printf(&missing, "%ld ", rs[j].rank);
        else if (strcmp(o->md5, c->md5)) differs = true;
      }
      if (missing.len || differs) {
        fprintf(f, "<tr><td>%s</td><td>%s</td><td>%s</td></tr>\n", c->label,
                kn__sb_cstr(&missing), differs ? "yes" : "");
        rows++;
      }
      kn__sb_fini(&missing);
    }
  }
  kn__hm_fini(&seen);
  fputs("</table>\n", f);
  if (!rows) fputs("<p>All ranks compiled the same compile ids with the same "
                   "Dynamo graphs.</p>\n", f);
}

static kn_status landing(rp_out *out, const rp_opts *o, rank_run *rs,
                         size_t n) {
  FILE *f = rp_out_fopen(out, "index.html");
  if (!f) return kn_last_status();
  rp_html_begin(f, "kiln report: all ranks", "");
  if (o->custom_header) fputs(o->custom_header, f);
  fputs("<h1>kiln report: all ranks</h1>\n<p><a href=\"chromium_events.json\">"
        "chromium_events.json</a> (all ranks, pid = rank)</p>\n<table>\n<tr>"
        "<th>Rank</th><th>Compile ids</th><th>Compiles</th><th>Graph breaks"
        "</th><th>Failures and restarts</th><th>Defects</th><th>Compile time"
        "</th></tr>\n", f);
  for (size_t i = 0; i < n; i++) {
    const rank_run *r = &rs[i];
    fprintf(f, "<tr><td><a href=\"rank_%ld/index.html\">rank %ld</a></td>"
            "<td class=\"num\">%zu</td><td class=\"num\">%zu</td><td "
            "class=\"num\">%zu</td><td class=\"num\">%zu</td><td "
            "class=\"num\">%llu</td><td class=\"num\">%.3f s</td></tr>\n",
            r->rank, r->rank, r->ncompiles, r->compiles, r->breaks,
            r->failures, (unsigned long long)r->defects, r->compile_s);
  }
  fputs("</table>\n", f);
  divergence(f, rs, n);
  rp_html_end(f);
  return fclose(f) == 0 ? KN_OK : kn__error(KN_EIO, "cannot write index");
}

/* Each rank's chromium_events.json holds one event per line. */
static kn_status merge_chromium(rp_out *out, rank_run *rs, size_t n) {
  FILE *f = rp_out_fopen(out, "chromium_events.json");
  if (!f) return kn_last_status();
  fputs("[\n", f);
  bool first = true;
  for (size_t i = 0; i < n; i++) {
    char rel[64];
    snprintf(rel, sizeof rel, "rank_%ld/chromium_events.json", rs[i].rank);
    size_t need = strlen(out->path) + sizeof rel + 2;
    char *path = malloc(need);
    if (!path) break;
    snprintf(path, need, "%s/%s", out->path, rel);
    FILE *in = fopen(path, "r");
    free(path);
    if (!in) continue;
    char *line = NULL;
    size_t cap = 0;
    ssize_t len;
    while ((len = getline(&line, &cap, in)) > 0) {
      while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == ','))
        line[--len] = '\0';
      json_t *ev = json_loadb(line, (size_t)len, 0, NULL);
      if (json_is_object(ev)) {
        json_object_set_new(ev, "pid", json_integer(rs[i].rank));
        fputs(first ? "" : ",\n", f);
        json_dumpf(ev, f, JSON_COMPACT | JSON_SORT_KEYS);
        first = false;
      }
      json_decref(ev);
    }
    free(line);
    fclose(in);
  }
  fputs("\n]\n", f);
  return fclose(f) == 0 ? KN_OK : kn__error(KN_EIO, "cannot write events");
}

kn_status rp_report_all_ranks(const rp_opts *opts, const char *dir) {
  rank_run *rs = NULL;
  size_t n = 0;
  rp_out out;
  kn_status st = find_ranks(dir, &rs, &n);
  if (!st) st = rp_out_prepare(&out, opts->out, opts->overwrite);
  else out.fd = -1, out.path = NULL;
  for (size_t i = 0; i < n && !st; i++) {
    rp_opts o = *opts;
    char sub[64];
    snprintf(sub, sizeof sub, "rank_%ld", rs[i].rank);
    size_t need = strlen(opts->out) + sizeof sub + 2;
    char *path = malloc(need);
    if (!path) {
      st = kn__oom();
      break;
    }
    snprintf(path, need, "%s/%s", opts->out, sub);
    o.out = path;
    o.overwrite = false;
    rp_report rep;
    st = rp_report_file(&o, rs[i].file, &rep);
    if (!st) st = summarize(&rs[i], &rep);
    rp_report_fini(&rep);
    free(path);
  }
  if (!st) st = landing(&out, opts, rs, n);
  if (!st) st = merge_chromium(&out, rs, n);
  char *msg = st ? strdup(kn_last_error()) : NULL;
  for (size_t i = 0; i < n; i++) {
    for (size_t k = 0; k < rs[i].nids; k++) free(rs[i].ids[k].label);
    free(rs[i].ids);
    free(rs[i].file);
  }
  free(rs);
  rp_out_close(&out);
  if (msg) {
    kn__error(st, "%s", msg);
    free(msg);
  }
  return st;
}
