/*
** support/report_util.c: see report_util.h.
*/
#include <dirent.h>
#include <stdarg.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <md5.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/strbuf.h"
#include "support/report_util.h"
#include "support/files.h"

int ru_kilnf(char **err, const char *fmt, ...) {
  kn__sb sb = KN__SB_INIT;
  va_list ap;
  va_start(ap, fmt);
  kn__sb_vprintf(&sb, fmt, ap);
  va_end(ap);
  int rc = ru_kiln(kn__sb_cstr(&sb), err);
  kn__sb_fini(&sb);
  return rc;
}

char *ru_path2(const char *a, const char *b) {
  kn__sb sb = KN__SB_INIT;
  kn__sb_printf(&sb, "%s/%s", a, b);
  return kn__sb_take(&sb);
}

char *ru_tmpdir(void) {
  char *t = strdup("/tmp/kiln_report_test_XXXXXX");
  if (t && !mkdtemp(t)) {
    free(t);
    return NULL;
  }
  return t;
}

static int rm_one(const char *p, const struct stat *st, int flag,
                  struct FTW *ftw) {
  (void)st, (void)flag, (void)ftw;
  return remove(p);
}

void ru_rmtree(const char *dir) {
  if (dir) nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

char *ru_read(const char *path, size_t *n) { return kn_test_read_file(path, n); }

int ru_kiln(const char *args, char **err) {
  char errfile[] = "/tmp/kiln_report_err_XXXXXX";
  int fd = mkstemp(errfile);
  if (fd < 0) return -1;
  close(fd);
  kn__sb cmd = KN__SB_INIT;
  kn__sb_printf(&cmd, "timeout 120 '%s' report %s > /dev/null 2> '%s'",
                KN_TOOL_PATH, args, errfile);
  int rc = system(kn__sb_cstr(&cmd));
  kn__sb_fini(&cmd);
  if (err) *err = ru_read(errfile, NULL);
  unlink(errfile);
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

size_t ru_lines(const char *path) {
  size_t n = 0, len = 0;
  char *s = ru_read(path, &len);
  if (!s) return 0;
  for (size_t i = 0; i < len; i++) n += s[i] == '\n';
  if (len && s[len - 1] != '\n') n++;
  free(s);
  return n;
}

static int cmp(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

static void walk(const char *root, const char *rel, char ***v, size_t *n) {
  kn__sb p = KN__SB_INIT;
  kn__sb_printf(&p, "%s%s%s", root, *rel ? "/" : "", rel);
  DIR *d = opendir(kn__sb_cstr(&p));
  kn__sb_fini(&p);
  if (!d) return;
  struct dirent *e;
  while ((e = readdir(d))) {
    if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
    kn__sb r = KN__SB_INIT;
    kn__sb_printf(&r, "%s%s%s", rel, *rel ? "/" : "", e->d_name);
    kn__sb full = KN__SB_INIT;
    kn__sb_printf(&full, "%s/%s", root, kn__sb_cstr(&r));
    struct stat st;
    if (lstat(kn__sb_cstr(&full), &st) == 0 && S_ISDIR(st.st_mode)) {
      walk(root, kn__sb_cstr(&r), v, n);
      kn__sb_fini(&r);
    } else {
      *v = realloc(*v, (*n + 1) * sizeof **v);
      (*v)[(*n)++] = kn__sb_take(&r);
    }
    kn__sb_fini(&full);
  }
  closedir(d);
}

char *ru_list(const char *dir) {
  char **v = NULL;
  size_t n = 0;
  walk(dir, "", &v, &n);
  if (n) qsort(v, n, sizeof *v, cmp);
  kn__sb out = KN__SB_INIT;
  for (size_t i = 0; i < n; i++) {
    kn__sb_printf(&out, "%s\n", v[i]);
    free(v[i]);
  }
  free(v);
  return kn__sb_take(&out);
}

void ru_record(FILE *f, int line, const char *meta, const char *payload) {
  fprintf(f, "V1121 10:00:00.000000 4242 kiln/trace.c:%d] ", line);
  if (!payload) {
    fprintf(f, "%s\n", meta);
    return;
  }
  char hex[33];
  MD5Data((const unsigned char *)payload, strlen(payload), hex);
  size_t ml = strlen(meta);
  fprintf(f, "%.*s, \"has_payload\": \"%s\"}\n", (int)(ml - 1), meta, hex);
  const char *p = payload;
  for (;;) {
    size_t k = strcspn(p, "\n");
    fprintf(f, "\t%.*s\n", (int)k, p);
    if (!p[k]) break;
    p += k + 1;
  }
}

static size_t check_page(const char *dir, const char *rel, size_t *checked) {
  kn__sb path = KN__SB_INIT;
  kn__sb_printf(&path, "%s/%s", dir, rel);
  char *html = ru_read(kn__sb_cstr(&path), NULL);
  kn__sb_fini(&path);
  if (!html) return 1;
  /* Links resolve from the page's directory, or from its parent for pages
  ** inside compile directories, which use <base href="../">. */
  char reldir[512] = "";
  const char *slash = strrchr(rel, '/');
  if (slash) snprintf(reldir, sizeof reldir, "%.*s/", (int)(slash - rel), rel);
  if (strstr(html, "<base href=\"../\">") && *reldir) {
    reldir[strlen(reldir) - 1] = '\0';
    char *up = strrchr(reldir, '/');
    if (up) up[1] = '\0';
    else reldir[0] = '\0';
  }
  size_t bad = 0;
  for (const char *p = html; (p = strstr(p, "href=\"")); ) {
    p += 6;
    size_t k = strcspn(p, "\"#");
    if (k == 0 || !strncmp(p, "http://", 7) || !strncmp(p, "https://", 8) ||
        !strncmp(p, "../\"", 4)) {
      p += k;
      continue;
    }
    kn__sb t = KN__SB_INIT;
    kn__sb_printf(&t, "%s/%s%.*s", dir, reldir, (int)k, p);
    struct stat st;
    (*checked)++;
    if (stat(kn__sb_cstr(&t), &st) != 0) {
      fprintf(stderr, "broken link in %s: %s\n", rel, kn__sb_cstr(&t));
      bad++;
    }
    kn__sb_fini(&t);
    p += k;
  }
  free(html);
  return bad;
}

size_t ru_check_links(const char *dir, size_t *checked) {
  char *list = ru_list(dir);
  size_t bad = 0;
  *checked = 0;
  for (char *line = list, *nl; line && *line; line = nl + 1) {
    nl = strchr(line, '\n');
    *nl = '\0';
    size_t len = strlen(line);
    if (len > 5 && !strcmp(line + len - 5, ".html"))
      bad += check_page(dir, line, checked);
  }
  free(list);
  return bad;
}

/* ---- a kiln trace written by kiln's writer ---- */
#include "kiln/trace.h"
#include "trace/compile_id.h"
#include "trace/events.h"
#include "trace/trace.h"

static void one_compile(int64_t frame, int64_t fcid, const char *guard,
                        const char *recompile_reason, bool graph_break) {
  kn_compile_id id = {-1, frame, fcid};
  kn__compile_ctx saved;
  kn__compile_ctx_enter(id, &saved);
  kn__trace_opts o = {.file = "tests/support/report_util.c", .line = 1};
  if (recompile_reason) {
    json_t *l = json_pack("[s]", recompile_reason);
    kn__trace_artifact_json("recompile_reasons", l, &o);
    json_decref(l);
  }
  kn__trace_frame st[2] = {{"/home/u/train.c", 40, "main", "loss = step(x);"},
                           {"/home/u/train.c", 12, frame ? "step_resume" : "step",
                            NULL}};
  kn__trace_dynamo_start(st, 2, &o);
  kn__trace_chromium_event("dynamo", 'B', 1000.0 + (double)fcid, NULL, &o);
  char graph[200];
  snprintf(graph, sizeof graph, "def forward(self, L_x_: \"f32[%d]\"):\n"
           "    mul = L_x_ * 2\n    return (mul,)\n", fcid ? 5 : 4);
  kn__trace_structured("dynamo_output_graph", json_pack("{s:{}}", "sizes"),
                       graph, SIZE_MAX, &o);
  if (graph_break)
    kn__trace_artifact("dynamo_graph_break_reason", "string",
                       "Graph break in user code at /home/u/train.c:14\n"
                       "Graph Break Reason: Data-dependent branching\n"
                       "  Hint: Use torch.cond to express dynamic control flow.",
                       SIZE_MAX, &o);
  kn__trace_structured("inductor_output_code",
                       json_pack("{s:s}", "filename", "/tmp/kiln/ab/kernel_ab12.c"),
                       "void kernel(float *out, const float *x) {\n"
                       "  for (int i = 0; i < 4; i++) out[i] = x[i] * 2;\n}\n",
                       SIZE_MAX, &o);
  char guards[300];
  snprintf(guards, sizeof guards, "TREE_GUARD_MANAGER:\n+- RootGuardManager\n"
           "| +- TENSOR_MATCH: %s\n| +- GLOBAL_STATE: ___check_global_state()",
           guard);
  kn__trace_structured("dynamo_cpp_guards_str", NULL, guards, SIZE_MAX, &o);
  kn__trace_chromium_event("dynamo", 'E', 2000.0 + (double)fcid, NULL, &o);
  json_t *m = json_pack("{s:s,s:s,s:i,s:i,s:i,s:[]}", "co_name",
                        frame ? "step_resume" : "step", "co_filename",
                        "/home/u/train.c", "co_firstlineno", 12,
                        "graph_op_count", 1, "guard_count", 2,
                        "restart_reasons");
  json_object_set_new(m, "dynamo_cumulative_compile_time_us",
                      json_integer(1500 + fcid));
  kn__trace_compilation_metrics(m, &o);
  kn__compile_ctx_leave(&saved);
}

char *ru_write_kiln_trace(const char *dir) {
  kn__trace_fake_header("1121 10:00:00.000000", 4242);
  if (kn_trace_enable(dir) != KN_OK) return NULL;
  one_compile(0, 0, "L['x'].size()[0] == 4", NULL, false);
  one_compile(0, 1, "L['x'].size()[0] == 5", "0/0: L['x'].size()[0] == 4",
              false);
  one_compile(1, 0, "L['y'].size()[0] == 4", NULL, true);
  char *path = kn_trace_file_path();
  kn_trace_disable();
  kn__trace_fake_header(NULL, 0);
  return path;
}

/* ---- a trace from a real compiled function ---------------------------- */
#include "kiln/compile.h"
#include "kiln/kiln.h"

static kn_tensor *ru_scale_add(kn_tensor *x) {
  kn_tensor *y = kn_mul_scalar(x, kn_float(2));
  return kn_add_scalar(y, kn_int(1));
}

char *ru_write_real_kiln_trace(const char *dir) {
  if (kn_trace_enable(dir) != KN_OK) return NULL;
  /* A short file name, so pictures of the report hold no build path; the
  ** eager backend: the report tests name the trace's artifacts by number. */
  kn_compile_options o = {.backend = "eager"};
  kn_compiled *f = kn_compile_tensor_fn((void (*)(void))ru_scale_add, 1,
                                        "scale_add", "model.c", 12, &o);
  bool ok = f != NULL;
  kn_scope_begin();
  for (int64_t n = 4; ok && n <= 16; n *= 2)
    ok = kn_call_t(f, kn_ones(KN_SHAPE(n, 3), KN_FLOAT32)) != NULL;
  kn_scope_end();
  kn_compiled_free(f);
  char *path = ok ? kn_trace_file_path() : NULL;
  kn_trace_disable();
  return path;
}

/* Keep the frames of the calls below (no tail calls), so the guards'
** user lines are exact. */
#pragma GCC push_options
#pragma GCC optimize("no-optimize-sibling-calls")
static kn_tensor *ru_pair_add(kn_tensor *x, kn_tensor *y) {
  kn_tensor *s = kn_add(x, y); /* the op's guards */
  kn_tensor *r = kn_mul_scalar(s, kn_int(kn_size(x, 0))); /* a size read by user code */
  return r;
}
#pragma GCC pop_options

char *ru_write_guarded_kiln_trace(const char *dir) {
  if (kn_trace_enable(dir) != KN_OK) return NULL;
  kn_compile_options o = {.backend = "eager", .dynamic = KN_DYNAMIC_TRUE};
  kn_compiled *f = kn_compile_tensor_fn((void (*)(void))ru_pair_add, 2, "pair_add", "model.c", 30,
                                        &o);
  bool ok = f != NULL;
  kn_scope_begin();
  ok = ok && kn_call_t(f, kn_ones(KN_SHAPE(4, 3), KN_FLOAT32), kn_ones(KN_SHAPE(4, 3), KN_FLOAT32));
  kn_scope_end();
  kn_compiled_free(f);
  char *path = ok ? kn_trace_file_path() : NULL;
  kn_trace_disable();
  return path;
}
