/*
** profiler/export.c: Chrome trace JSON and the key_averages-style table.
*/
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/error.h"
#include "core/strbuf.h"
#include "profiler/profiler.h"
#include "profiler/profiler_int.h"

static json_t *event_json(const kn__prof_ev *e, int64_t t0) {
  json_t *args = json_object();
  json_t *dims = e->shapes && *e->shapes ? json_loads(e->shapes, 0, NULL) : NULL;
  if (dims) json_object_set_new(args, "Input Dims", dims);
  if (e->seq >= 0) json_object_set_new(args, "Sequence number", json_integer(e->seq));
  return json_pack("{s:s, s:s, s:s, s:f, s:f, s:i, s:I, s:o}", "ph", "X", "cat", e->category,
                   "name", e->name, "ts", (double)(e->start_ns - t0) / 1e3, "dur",
                   (double)e->dur_ns / 1e3, "pid", (int)getpid(), "tid", (json_int_t)e->thread,
                   "args", args);
}

kn_status kn_profiler_export_chrome_trace(const char *path) {
  if (!path) return kn__error(KN_EINVAL, "kn_profiler_export_chrome_trace: path is NULL");
  kn__prof_ev *evs;
  int n = kn__prof_snapshot(&evs);
  if (n < 0) return kn__oom();
  int64_t t0 = n ? evs[0].start_ns : 0;
  for (int i = 1; i < n; i++) t0 = evs[i].start_ns < t0 ? evs[i].start_ns : t0;
  json_t *list = json_array();
  for (int i = 0; list && i < n; i++) {
    json_t *e = event_json(&evs[i], t0);
    if (!e || json_array_append_new(list, e)) json_decref(list), list = NULL;
  }
  free(evs);
  json_t *root = list ? json_pack("{s:o, s:s}", "traceEvents", list, "displayTimeUnit", "ms")
                      : NULL;
  if (!root) return kn__oom();
  int rc = json_dump_file(root, path, JSON_COMPACT);
  json_decref(root);
  return rc == 0 ? KN_OK : kn__error(KN_EIO, "cannot write '%s': %s", path, strerror(errno));
}

/* ---- the table -------------------------------------------------------------------------- */
typedef struct row {
  const char *name;
  int64_t self_ns, total_ns, count;
} row;

static int by_thread_start(const void *a, const void *b) {
  const kn__prof_ev *x = a, *y = b;
  if (x->thread != y->thread) return x->thread < y->thread ? -1 : 1;
  if (x->start_ns != y->start_ns) return x->start_ns < y->start_ns ? -1 : 1;
  return (y->dur_ns > x->dur_ns) - (y->dur_ns < x->dur_ns); /* parents first */
}

/* self[i] = dur[i] - the durations of its direct children (events nested in
** it on the same thread). */
static void self_times(const kn__prof_ev *e, int n, int64_t *self) {
  int stack[256], depth = 0;
  for (int i = 0; i < n; i++) {
    self[i] = e[i].dur_ns;
    while (depth && (e[stack[depth - 1]].thread != e[i].thread ||
                     e[i].start_ns >= e[stack[depth - 1]].start_ns + e[stack[depth - 1]].dur_ns))
      depth--;
    if (depth) self[stack[depth - 1]] -= e[i].dur_ns;
    if (depth < 256) stack[depth++] = i;
  }
}

static int sort_key;
static int by_key(const void *a, const void *b) {
  const row *x = a, *y = b;
  int64_t kx = sort_key == 0 ? x->self_ns : sort_key == 1 ? x->total_ns : x->count;
  int64_t ky = sort_key == 0 ? y->self_ns : sort_key == 1 ? y->total_ns : y->count;
  return (ky > kx) - (ky < kx);
}

static int aggregate(const kn__prof_ev *e, int n, const int64_t *self, row *rows) {
  int nr = 0;
  for (int i = 0; i < n; i++) {
    int r = 0;
    while (r < nr && strcmp(rows[r].name, e[i].name)) r++;
    if (r == nr) rows[nr++] = (row){e[i].name, 0, 0, 0};
    rows[r].self_ns += self[i], rows[r].total_ns += e[i].dur_ns, rows[r].count++;
  }
  return nr;
}

static void fmt_time(char *buf, size_t n, int64_t ns) {
  if (ns >= 1000000000) snprintf(buf, n, "%.3fs", (double)ns / 1e9);
  else if (ns >= 1000000) snprintf(buf, n, "%.3fms", (double)ns / 1e6);
  else snprintf(buf, n, "%.3fus", (double)ns / 1e3);
}

static void put_rows(kn__sb *sb, const row *rows, int nr, int width, int64_t all_self) {
  const char *dash = "------------";
  kn__sb_printf(sb, "%.*s", width, "------------------------------------------------------------");
  for (int k = 0; k < 6; k++) kn__sb_printf(sb, "  %s", dash);
  kn__sb_printf(sb, "  \n%*s  %12s  %12s  %12s  %12s  %12s  %12s  \n", width, "Name",
                "Self CPU %", "Self CPU", "CPU total %", "CPU total", "CPU time avg",
                "# of Calls");
  kn__sb_printf(sb, "%.*s", width, "------------------------------------------------------------");
  for (int k = 0; k < 6; k++) kn__sb_printf(sb, "  %s", dash);
  kn__sb_puts(sb, "  \n");
  for (int r = 0; r < nr; r++) {
    char s[32], t[32], a[32], ps[32], pt[32];
    fmt_time(s, sizeof s, rows[r].self_ns);
    fmt_time(t, sizeof t, rows[r].total_ns);
    fmt_time(a, sizeof a, rows[r].total_ns / rows[r].count);
    double scale = all_self ? 100.0 / (double)all_self : 0;
    snprintf(ps, sizeof ps, "%.2f%%", scale * (double)rows[r].self_ns);
    snprintf(pt, sizeof pt, "%.2f%%", scale * (double)rows[r].total_ns);
    kn__sb_printf(sb, "%*.*s  %12s  %12s  %12s  %12s  %12s  %12lld  \n", width, width,
                  rows[r].name, ps, s, pt, t, a, (long long)rows[r].count);
  }
  kn__sb_printf(sb, "%.*s", width, "------------------------------------------------------------");
  for (int k = 0; k < 6; k++) kn__sb_printf(sb, "  %s", dash);
  char tot[32];
  fmt_time(tot, sizeof tot, all_self);
  kn__sb_printf(sb, "  \nSelf CPU time total: %s\n", tot);
}

char *kn_profiler_table(const char *sort_by, int row_limit) {
  sort_key = !sort_by || !strcmp(sort_by, "self_cpu_time_total") ? 0
             : !strcmp(sort_by, "cpu_time_total")                ? 1
                                                                 : 2;
  kn__prof_ev *e;
  int n = kn__prof_snapshot(&e);
  int64_t *self = n >= 0 ? malloc(sizeof *self * (size_t)(n + 1)) : NULL;
  row *rows = self ? malloc(sizeof *rows * (size_t)(n + 1)) : NULL;
  char *out = NULL;
  if (rows) {
    qsort(e, (size_t)n, sizeof *e, by_thread_start);
    self_times(e, n, self);
    int nr = aggregate(e, n, self, rows);
    int64_t all_self = 0;
    int width = 4;
    for (int r = 0; r < nr; r++) all_self += rows[r].self_ns;
    qsort(rows, (size_t)nr, sizeof *rows, by_key);
    if (row_limit > 0 && nr > row_limit) nr = row_limit;
    for (int r = 0; r < nr; r++)
      if ((int)strlen(rows[r].name) > width) width = (int)strlen(rows[r].name);
    width = width > 60 ? 60 : width;
    kn__sb sb;
    kn__sb_init(&sb);
    put_rows(&sb, rows, nr, width, all_self);
    out = kn__sb_failed(&sb) ? NULL : kn__sb_take(&sb);
    if (!out) kn__sb_fini(&sb);
  }
  if (!out) kn__oom();
  free(rows), free(self);
  if (n >= 0) free(e);
  return out;
}
