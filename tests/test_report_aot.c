/*
** test_report_aot.c: `kiln report` on a real trace of functions compiled
** with "aot_eager": the compile page (compilation_metrics_N.html) shows the
** compile's joint, forward and backward graphs (training) or its inference
** graph, highlighted, each linked to its .txt, in the trace's order; the
** AOT cache artifacts are listed in the index as cache misses.
*/
#include <criterion/criterion.h>
#include <dirent.h>
#include <stdlib.h>
#include <string.h>

#include "core/strbuf.h"
#include "kiln/compile.h"
#include "kiln/kiln.h"
#include "kiln/trace.h"
#include "support/report_util.h"

static kn_tensor *sin_mul(kn_tensor *x, kn_tensor *y) { return kn_mul(kn_sin(x), y); }

/* A trace of sin_mul compiled twice: training (frame 0), inference (frame 1). */
static char *write_aot_trace(const char *dir) {
  /* a cache of its own (the build tree's, and the default one under $HOME,
  ** keep entries from earlier runs: a second run then hit them, and the
  ** cache misses this test expects were hits) */
  char *cache = ru_path2(dir, "cache");
  cr_assert_eq(setenv("KILN_CACHE_DIR", cache, 1), 0);
  free(cache);
  cr_assert_eq(kn_trace_enable(dir), KN_OK);
  kn_compile_options o = {.backend = "aot_eager", .dynamic = KN_DYNAMIC_FALSE};
  kn_compiled *f = kn_compile_tensor_fn((void (*)(void))sin_mul, 2, "sin_mul", "model.c", 3, &o);
  kn_compiled *g = kn_compile_tensor_fn((void (*)(void))sin_mul, 2, "sin_mul", "model.c", 3, &o);
  kn_scope_begin();
  kn_tensor *x = kn_randn(KN_SHAPE(3, 4), NULL, KN_FLOAT32);
  kn_tensor *y = kn_randn(KN_SHAPE(3, 4), NULL, KN_FLOAT32);
  kn_set_requires_grad(x, true);
  cr_assert_not_null(kn_call_t(f, x, y), "%s", kn_last_error());
  cr_assert_not_null(kn_call_t(g, kn_detach(x), y), "%s", kn_last_error());
  kn_scope_end();
  kn_compiled_free(f);
  kn_compiled_free(g);
  char *path = kn_trace_file_path();
  kn_trace_disable();
  cr_assert_not_null(path);
  return path;
}

/* The one file of dir whose name starts with prefix (owned). */
static char *only_file(const char *dir, const char *prefix) {
  DIR *d = opendir(dir);
  cr_assert_not_null(d, "%s", dir);
  char *found = NULL;
  for (struct dirent *e; (e = readdir(d));)
    if (!strncmp(e->d_name, prefix, strlen(prefix))) {
      cr_assert_null(found, "two %s files", prefix);
      found = ru_path2(dir, e->d_name);
    }
  closedir(d);
  cr_assert_not_null(found, "no %s file in %s", prefix, dir);
  return found;
}

static const char *after(const char *hay, const char *needle) {
  const char *p = hay ? strstr(hay, needle) : NULL;
  cr_expect_not_null(p, "missing: %s", needle);
  return p ? p + strlen(needle) : NULL;
}

Test(report_aot, compile_pages_show_the_aot_graphs, .timeout = 120) {
  char *tmp = ru_tmpdir();
  char *trace = write_aot_trace(tmp);
  char *out = ru_path2(tmp, "r");
  kn__sb args = KN__SB_INIT;
  kn__sb_printf(&args, "--strict -o '%s' '%s'", out, trace);
  char *err = NULL;
  cr_assert_eq(ru_kiln(kn__sb_cstr(&args), &err), 0, "%s", err ? err : "");
  free(err);
  char *d0 = ru_path2(out, "-_0_0_0"), *d1 = ru_path2(out, "-_1_0_0");
  char *p0 = only_file(d0, "compilation_metrics_"), *p1 = only_file(d1, "compilation_metrics_");
  char *train = ru_read(p0, NULL), *inf = ru_read(p1, NULL);
  /* training: the three graphs in the trace's order, after the file list */
  const char *at = after(train, "<h2>Output files</h2>");
  at = after(at, "<h2>AOT graphs</h2>\n<h3>Joint graph <small><a href=\"-_0_0_0/aot_joint_graph_");
  at = after(at, "primals_1");
  at = after(at, "tangents_1");
  at = after(at, "<h3>Forward graph <small><a href=\"-_0_0_0/aot_forward_graph_");
  at = after(at, "<h3>Backward graph <small><a href=\"-_0_0_0/aot_backward_graph_");
  at = after(at, "<h2>Compile time</h2>");
  cr_expect_null(strstr(train, "Inference graph"));
  /* inference: one graph */
  at = after(inf, "<h2>AOT graphs</h2>\n<h3>Inference graph <small><a href=\"-_1_0_0/aot_inference_graph_");
  cr_expect_null(strstr(inf, "Joint graph"));
  cr_expect_null(strstr(inf, "Backward graph"));
  /* the cache artifacts in the index (training and inference have different
  ** keys: a miss each), marked as tlparse marks misses */
  char *ipath = ru_path2(out, "index.html");
  char *index = ru_read(ipath, NULL);
  free(ipath);
  const char *miss = after(index, "<a href=\"-_0_0_0/aotautograd_cache_miss_");
  miss = after(miss, "</a> <span class=\"status-error\">cache miss</span>");
  miss = after(miss, "<a href=\"-_1_0_0/aotautograd_cache_miss_");
  miss = after(miss, "</a> <span class=\"status-error\">cache miss</span>");
  size_t checked = 0;
  cr_expect_eq(ru_check_links(out, &checked), 0);
  free(index);
  free(train), free(inf), free(p0), free(p1), free(d0), free(d1);
  kn__sb_fini(&args);
  free(trace), free(out);
  ru_rmtree(tmp);
  free(tmp);
}
