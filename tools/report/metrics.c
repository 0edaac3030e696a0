/*
** tools/report/metrics.c: compilation_metrics records.
**
** Each record becomes a page <dir>/<event>_N.html: the function, the files
** of that compile so far, compile times, the failure, restart reasons, then
** every field of the record as a table. The fields tlparse reads are type
** checked (a wrong type is a defect, not a crash); the compile summary and
** the failures list used by the index are filled here. The page also shows
** the compile's AOT graphs (joint, forward, backward or inference), read
** back from the files the report wrote for them.
*/
#include <ctype.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/error.h"
#include "report/html.h"
#include "report/report.h"

enum { T_STR, T_INT, T_NUM, T_LIST };

static const struct {
  const char *key;
  int type;
} typed[] = {
    {"co_name", T_STR}, {"co_filename", T_STR}, {"co_firstlineno", T_INT},
    {"cache_size", T_INT}, {"accumulated_cache_size", T_INT},
    {"guard_count", T_INT}, {"shape_env_guard_count", T_INT},
    {"graph_op_count", T_INT}, {"graph_node_count", T_INT},
    {"graph_input_count", T_INT}, {"start_time", T_NUM},
    {"entire_frame_compile_time_s", T_NUM}, {"backend_compile_time_s", T_NUM},
    {"inductor_compile_time_s", T_NUM}, {"code_gen_time_s", T_NUM},
    {"dynamo_time_before_restart_s", T_NUM}, {"fail_type", T_STR},
    {"fail_reason", T_STR}, {"fail_user_frame_filename", T_STR},
    {"fail_user_frame_lineno", T_INT}, {"non_compliant_ops", T_LIST},
    {"compliant_custom_ops", T_LIST}, {"restart_reasons", T_LIST},
};

static const char *type_name(json_t *v) {
  switch (json_typeof(v)) {
  case JSON_OBJECT: return "an object";
  case JSON_ARRAY: return "a list";
  case JSON_STRING: return "a string";
  case JSON_INTEGER: return "an integer";
  case JSON_REAL: return "a float";
  case JSON_TRUE: case JSON_FALSE: return "a boolean";
  default: return "null";
  }
}

static bool type_ok(json_t *v, int t) {
  if (!v || json_is_null(v)) return true;
  switch (t) {
  case T_STR: return json_is_string(v);
  case T_INT: return json_is_integer(v) && json_integer_value(v) >= 0;
  case T_NUM: return json_is_number(v);
  default: {
    if (!json_is_array(v)) return false;
    size_t i;
    json_t *e;
    json_array_foreach(v, i, e) if (!json_is_string(e)) return false;
    return true;
  }
  }
}

static bool check_types(rp_report *r, json_t *m, const char *ev,
                        uint64_t line) {
  static const char *names[] = {"a string", "a non-negative integer",
                                "a number", "a list of strings"};
  if (!json_is_object(m)) {
    rp_defect(r, line, "%s must be an object, found %s", ev, type_name(m));
    return false;
  }
  bool ok = true;
  for (size_t i = 0; i < sizeof typed / sizeof typed[0]; i++) {
    json_t *v = json_object_get(m, typed[i].key);
    if (type_ok(v, typed[i].type)) continue;
    rp_defect(r, line, "%s field '%s' must be %s or null, found %s", ev,
              typed[i].key, names[typed[i].type], type_name(v));
    ok = false;
  }
  return ok;
}

static char *dup_str(json_t *m, const char *k) {
  json_t *v = json_object_get(m, k);
  return json_is_string(v) ? strdup(json_string_value(v)) : NULL;
}

static double num(json_t *m, const char *k) {
  json_t *v = json_object_get(m, k);
  return json_is_number(v) ? json_number_value(v) : -1;
}

static kn_status add_failure(rp_report *r, size_t ci, const char *type,
                             const char *reason, const char *source) {
  if (r->nfailures == r->capfailures) {
    size_t nc = r->capfailures ? r->capfailures * 2 : 8;
    rp_failure *p = realloc(r->failures, nc * sizeof *p);
    if (!p) return kn__oom();
    r->failures = p;
    r->capfailures = nc;
  }
  rp_failure *f = &r->failures[r->nfailures];
  f->compile = ci;
  f->type = strdup(type);
  f->reason = strdup(reason ? reason : "");
  f->source = strdup(source);
  if (!f->type || !f->reason || !f->source) {
    free(f->type), free(f->reason), free(f->source);
    return kn__oom();
  }
  r->nfailures++;
  return KN_OK;
}

/* Fill the compile summary and the failures list. */
static kn_status summarize(rp_report *r, rp_compile *c, json_t *m) {
  size_t ci = c->idx;
  c->has_metrics = true;
  free(c->co_name), free(c->co_filename), free(c->fail_type),
      free(c->fail_reason);
  c->co_name = dup_str(m, "co_name");
  c->co_filename = dup_str(m, "co_filename");
  json_t *ln = json_object_get(m, "co_firstlineno");
  c->co_firstlineno = json_is_integer(ln) ? json_integer_value(ln) : -1;
  c->fail_type = dup_str(m, "fail_type");
  c->fail_reason = dup_str(m, "fail_reason");
  c->failed = c->fail_type != NULL;
  json_t *ops = json_object_get(m, "graph_op_count");
  c->empty_graph = !json_is_integer(ops) || json_integer_value(ops) == 0;
  json_t *rr = json_object_get(m, "restart_reasons");
  c->restarts_missing = !json_is_array(rr);
  c->has_restarts = json_array_size(rr) > 0;
  double t = num(m, "entire_frame_compile_time_s");
  if (t < 0 && num(m, "dynamo_cumulative_compile_time_us") >= 0)
    t = num(m, "dynamo_cumulative_compile_time_us") / 1e6;
  c->compile_time_s = t > 0 ? t : 0;
  r->total_compile_s += c->compile_time_s;
  size_t i;
  json_t *e;
  json_array_foreach(rr, i, e) {
    kn_status st = add_failure(r, ci, "RestartAnalysis", json_string_value(e),
                               "Not available for restarts (yet)");
    if (st) return st;
  }
  if (c->fail_type) {
    char src[1200];
    json_t *fl = json_object_get(m, "fail_user_frame_lineno");
    const char *ff = json_string_value(json_object_get(m,
                                       "fail_user_frame_filename"));
    snprintf(src, sizeof src, "%.1000s:%lld", ff ? ff : "(unknown)",
             json_is_integer(fl) ? (long long)json_integer_value(fl) : -1LL);
    kn_status st = add_failure(r, ci, c->fail_type, c->fail_reason, src);
    if (st) return st;
  }
  return KN_OK;
}

static void value_html(FILE *f, json_t *v) {
  if (json_is_string(v)) {
    const char *s = json_string_value(v);
    bool pre = strchr(s, '\n') || json_string_length(v) > 120;
    fputs(pre ? "<pre>" : "", f);
    rp_html_escn(f, s, json_string_length(v));
    fputs(pre ? "</pre>" : "", f);
  } else if (json_is_array(v) && json_array_size(v) > 0) {
    size_t i;
    json_t *e;
    fputs("<ul>", f);
    json_array_foreach(v, i, e) {
      fputs("<li>", f);
      value_html(f, e);
      fputs("</li>", f);
    }
    fputs("</ul>", f);
  } else if (json_is_real(v)) {
    char buf[40];
    fputs(rp_fmt_double(buf, sizeof buf, json_real_value(v)), f);
  } else {
    char *s = json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT | JSON_SORT_KEYS);
    rp_html_esc(f, s ? s : "");
    free(s);
  }
}

static void times_table(FILE *f, json_t *m) {
  static const char *keys[] = {"entire_frame_compile_time_s",
                               "backend_compile_time_s",
                               "inductor_compile_time_s", "code_gen_time_s",
                               "dynamo_time_before_restart_s"};
  fputs("<h2>Compile time</h2>\n<table>\n", f);
  for (size_t i = 0; i < 5; i++) {
    double t = num(m, keys[i]);
    fputs("<tr><th>", f);
    rp_html_esc(f, keys[i]);
    if (t >= 0) fprintf(f, "</th><td class=\"num\">%.4f s</td></tr>\n", t);
    else fputs("</th><td>n/a</td></tr>\n", f);
  }
  fputs("</table>\n", f);
}

/* ---- the AOT graphs of a compile, shown on its page ------------------------------- */

#define AOT_GRAPH_MAX (64 * 1024)

/* The title of an AOT graph file "aot_<kind>_graph_<N>.txt", or NULL. */
static const char *aot_title(const char *name) {
  static const char *const pre[] = {"aot_joint_graph_", "aot_forward_graph_",
                                    "aot_backward_graph_", "aot_inference_graph_"};
  static const char *const title[] = {"Joint graph", "Forward graph", "Backward graph",
                                      "Inference graph"};
  for (size_t k = 0; k < 4; k++) {
    size_t n = strlen(pre[k]);
    const char *dot = strrchr(name, '.');
    if (!strncmp(name, pre[k], n) && isdigit((unsigned char)name[n]) && dot &&
        !strcmp(dot, ".txt"))
      return title[k];
  }
  return NULL;
}

/* Up to AOT_GRAPH_MAX bytes of OUT/rel (owned; *len set), or NULL. */
static char *read_out(const rp_out *o, const char *rel, size_t *len) {
  int fd = openat(o->fd, rel, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return NULL;
  char *buf = malloc(AOT_GRAPH_MAX);
  ssize_t got = 0, k = 0;
  while (buf && got < AOT_GRAPH_MAX && (k = read(fd, buf + got, AOT_GRAPH_MAX - (size_t)got)) > 0)
    got += k;
  close(fd);
  if (!buf || k < 0) return free(buf), NULL;
  *len = (size_t)got;
  return buf;
}

/* The joint, forward and backward (or inference) graphs, as the trace
** recorded them for this compile, in that order. */
static void aot_graphs(FILE *f, const rp_out *o, const rp_compile *c) {
  bool any = false;
  for (size_t i = 0; i < c->narts; i++) {
    const char *title = aot_title(c->arts[i].name);
    if (!title || !*c->arts[i].url) continue;
    size_t len = 0;
    char *txt = read_out(o, c->arts[i].url, &len);
    if (!txt) continue;
    if (!any) fputs("<h2>AOT graphs</h2>\n", f);
    any = true;
    fprintf(f, "<h3>%s <small><a href=\"", title);
    rp_html_esc(f, c->arts[i].url); /* pages resolve links from OUT */
    fputs("\">", f);
    rp_html_esc(f, c->arts[i].name);
    fputs("</a></small></h3>\n", f);
    rp_html_code(f, txt, len, RP_LANG_PY);
    if (len == AOT_GRAPH_MAX) fputs("<p>(first 64 KiB; the file has the rest)</p>\n", f);
    free(txt);
  }
}

static void write_page(FILE *f, const rp_out *o, rp_compile *c, const char *ev, json_t *m) {
  char title[160];
  snprintf(title, sizeof title, "Compilation Info for %s", c->label);
  rp_html_begin(f, title, "../");
  fprintf(f, "<h1>%s</h1>\n<p><a href=\"index.html#%s\">back to the index</a>"
          " &middot; event <code>", title, c->label);
  rp_html_esc(f, ev);
  fputs("</code></p>\n<p>", f);
  rp_html_esc(f, json_string_value(json_object_get(m, "co_filename")));
  json_t *ln = json_object_get(m, "co_firstlineno");
  if (json_is_integer(ln)) fprintf(f, ":%lld", (long long)json_integer_value(ln));
  fputs(" in ", f);
  rp_html_esc(f, json_string_value(json_object_get(m, "co_name")));
  fputs("</p>\n<h2>Output files</h2>\n<ul>\n", f);
  for (size_t i = 0; i < c->narts; i++) {
    if (!*c->arts[i].url || !strncmp(c->arts[i].url, "http", 4)) continue;
    fputs("<li><a href=\"", f);
    rp_html_esc(f, c->arts[i].url);
    fputs("\">", f);
    rp_html_esc(f, c->arts[i].name);
    fputs("</a></li>\n", f);
  }
  fputs("</ul>\n", f);
  aot_graphs(f, o, c);
  times_table(f, m);
  fputs("<h2>Failure</h2>\n", f);
  const char *ft = json_string_value(json_object_get(m, "fail_type"));
  if (ft) {
    fputs("<p class=\"status-error\">", f);
    rp_html_esc(f, ft);
    fputs("</p>\n", f);
    value_html(f, json_object_get(m, "fail_reason"));
  } else {
    fputs("<p>No failures!</p>\n", f);
  }
  fputs("<h2>Restarts</h2>\n", f);
  json_t *rr = json_object_get(m, "restart_reasons");
  if (json_array_size(rr)) value_html(f, rr);
  else fputs("<p>No restarts!</p>\n", f);
  fputs("<h2>All fields</h2>\n<table>\n", f);
  const char *k;
  json_t *v;
  json_object_foreach(m, k, v) {
    if (json_is_null(v)) continue;
    fputs("<tr><th>", f);
    rp_html_esc(f, k);
    fputs("</th><td>", f);
    value_html(f, v);
    fputs("</td></tr>\n", f);
  }
  fputs("</table>\n", f);
  rp_html_end(f);
}

kn_status rp_write_metrics_page(rp_report *r, rp_compile *c, const char *ev,
                                json_t *m, uint64_t line) {
  if (!check_types(r, m, ev, line)) return KN_OK;
  if (!strcmp(ev, "compilation_metrics")) {
    kn_status st = summarize(r, c, m);
    if (st) return st;
  }
  uint64_t n = r->counter++;
  char rel[256];
  snprintf(rel, sizeof rel, "%s/%s_%llu.html", c->dir, ev,
           (unsigned long long)n);
  FILE *f = rp_out_fopen(&r->out, rel);
  if (!f) return kn_last_status();
  write_page(f, &r->out, c, ev, m);
  if (fclose(f) != 0) return kn__error(KN_EIO, "cannot write '%s'", rel);
  if (!strcmp(ev, "compilation_metrics")) {
    free(c->metrics_url);
    c->metrics_url = strdup(rel);
    if (!c->metrics_url) return kn__oom();
  }
  if (!rp_compile_add_artifact(c, rel, strrchr(rel, '/') + 1, n, "", NULL))
    return kn__oom();
  return KN_OK;
}
