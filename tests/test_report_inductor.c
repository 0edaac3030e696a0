/*
** test_report_inductor.c: `kiln report` on a real trace of a function
** compiled with the "inductor" backend. The compile's generated C
** (inductor_output_code) becomes inductor_output_code_<key>_N.html in the
** compile's directory, highlighted as C (keywords, preprocessor lines,
** comments, escaped), and the compile's entry in index.html links to it;
** fx_graph_runnable is listed beside it. Headless Chromium then loads both
** pages (skipped when /usr/bin/chromium is missing).
*/
#include <criterion/criterion.h>
#include <dirent.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/strbuf.h"
#include "kiln/compile.h"
#include "kiln/ops.h"
#include "kiln/trace.h"
#include "support/report_util.h"

#define CHROMIUM "/usr/bin/chromium"
#define CALL_DEF "<span class=\"k\">int</span> <span class=\"fn\">call</span>("

static kn_tensor *mlp_step(kn_tensor *x, kn_tensor *w) {
  kn_tensor *h = kn_mm(x, w);
  return kn_relu(kn_add_scalar(kn_mul_scalar(h, kn_float(0.5)), kn_float(1)));
}

/* A trace of mlp_step compiled with inductor, into dir; the path (owned). */
static char *write_inductor_trace(const char *dir, const char *cache) {
  setenv("KILN_CACHE_DIR", cache, 1);
  cr_assert_eq(kn_trace_enable(dir), KN_OK);
  kn_compile_options o = {.backend = "inductor"};
  kn_compiled *f = kn_compile_tensor_fn((void (*)(void))mlp_step, 2, "mlp_step", "model.c", 7, &o);
  cr_assert_not_null(f);
  kn_scope_begin();
  kn_tensor *x = kn_randn(KN_SHAPE(4, 6), NULL, KN_FLOAT32);
  kn_tensor *w = kn_randn(KN_SHAPE(6, 5), NULL, KN_FLOAT32);
  cr_assert_not_null(kn_call_t(f, x, w), "%s", kn_last_error());
  kn_scope_end();
  kn_compiled_free(f);
  char *path = kn_trace_file_path();
  kn_trace_disable();
  cr_assert_not_null(path);
  return path;
}

/* The file of the report under dir/sub whose name starts with prefix
** (relative to the report root), or NULL. Owned. */
static char *find_file(const char *root, const char *sub, const char *prefix) {
  kn__sb p = KN__SB_INIT;
  kn__sb_printf(&p, "%s/%s", root, sub);
  DIR *d = opendir(kn__sb_cstr(&p));
  kn__sb_fini(&p);
  if (!d) return NULL;
  char *found = NULL;
  for (struct dirent *e; !found && (e = readdir(d));)
    if (!strncmp(e->d_name, prefix, strlen(prefix))) {
      kn__sb r = KN__SB_INIT;
      kn__sb_printf(&r, "%s/%s", sub, e->d_name);
      found = kn__sb_take(&r);
      kn__sb_fini(&r);
    }
  closedir(d);
  return found;
}

typedef struct fixture { char *tmp, *cache, *out, *code_rel, *runnable_rel; } fixture;

static void build_report(fixture *fx) {
  fx->tmp = ru_tmpdir();
  fx->cache = ru_tmpdir();
  char *trace = write_inductor_trace(fx->tmp, fx->cache);
  kn__sb args = KN__SB_INIT, out = KN__SB_INIT;
  kn__sb_printf(&out, "%s/r", fx->tmp);
  kn__sb_printf(&args, "-o '%s' '%s'", kn__sb_cstr(&out), trace);
  char *err = NULL;
  cr_assert_eq(ru_kiln(kn__sb_cstr(&args), &err), 0, "%s", err ? err : "");
  free(err);
  free(trace);
  kn__sb_fini(&args);
  fx->out = kn__sb_take(&out);
  kn__sb_fini(&out);
  fx->code_rel = find_file(fx->out, "-_0_0_0", "inductor_output_code_");
  fx->runnable_rel = find_file(fx->out, "-_0_0_0", "fx_graph_runnable_");
  cr_assert_not_null(fx->code_rel, "no inductor_output_code file in -_0_0_0/:\n%s",
                     ru_list(fx->out));
}

static void drop(fixture *fx) {
  ru_rmtree(fx->tmp);
  ru_rmtree(fx->cache);
  free(fx->tmp), free(fx->cache), free(fx->out), free(fx->code_rel), free(fx->runnable_rel);
}

static char *read_rel(const fixture *fx, const char *rel) {
  kn__sb p = KN__SB_INIT;
  kn__sb_printf(&p, "%s/%s", fx->out, rel);
  char *s = ru_read(kn__sb_cstr(&p), NULL);
  kn__sb_fini(&p);
  cr_assert_not_null(s, "%s", rel);
  return s;
}

Test(report_inductor, output_code_page_is_highlighted_c_and_linked, .timeout = 120) {
  fixture fx = {0};
  build_report(&fx);
  const char *ext = strrchr(fx.code_rel, '.');
  cr_expect_str_eq(ext, ".html");
  char *page = read_rel(&fx, fx.code_rel);
  /* the generated file's own lines, highlighted as C */
  cr_expect(strstr(page, "<span class=\"k\">#include</span> &lt;stdbool.h&gt;"), "%s", page);
  cr_expect(strstr(page, "<span class=\"k\">static</span> <span class=\"k\">void</span> "
                         "<span class=\"fn\">kernel"), "kernel functions highlighted");
  cr_expect(strstr(page, CALL_DEF), "the entry point");
  cr_expect(strstr(page, "rt-&gt;<span class=\"fn\">ext_epi</span>(ctx, <span class=\"n\">0</span>, "),
            "the extern mm call with its epilogue, escaped");
  cr_expect(strstr(page, "<span class=\"c\">/* extern kiln.ops.mm mm */</span>"), "comments");
  cr_expect(strstr(page, "<span id=\"L1\">"), "line anchors");
  free(page);
  /* the compile's entry in index.html links to the page and to the repro */
  char *index = read_rel(&fx, "index.html");
  kn__sb href = KN__SB_INIT;
  kn__sb_printf(&href, "href=\"%s\"", fx.code_rel);
  cr_expect(strstr(index, kn__sb_cstr(&href)), "index links %s", fx.code_rel);
  cr_assert_not_null(fx.runnable_rel, "fx_graph_runnable listed");
  kn__sb_clear(&href);
  kn__sb_printf(&href, "href=\"%s\"", fx.runnable_rel);
  cr_expect(strstr(index, kn__sb_cstr(&href)), "index links %s", fx.runnable_rel);
  kn__sb_fini(&href);
  free(index);
  size_t checked = 0;
  cr_expect_eq(ru_check_links(fx.out, &checked), 0);
  drop(&fx);
}

/* Run headless Chromium's --dump-dom on a page into out. */
static int dump_dom(const char *tmp, const char *page, const char *out) {
  kn__sb cmd = KN__SB_INIT;
  kn__sb_printf(&cmd,
                "timeout 60 " CHROMIUM " --headless --no-sandbox --disable-gpu --no-first-run "
                "--disable-background-networking --disable-component-update --disable-sync "
                "--user-data-dir='%s/profile' --dump-dom 'file://%s' > '%s' 2>/dev/null",
                tmp, page, out);
  int rc = system(kn__sb_cstr(&cmd));
  kn__sb_fini(&cmd);
  return rc;
}

Test(report_inductor, output_code_in_headless_chromium, .timeout = 300) {
  if (access(CHROMIUM, X_OK) != 0)
    cr_skip_test("skipped: " CHROMIUM " not installed (apt-get install chromium)");
  fixture fx = {0};
  build_report(&fx);
  kn__sb page = KN__SB_INIT, dom = KN__SB_INIT;
  kn__sb_printf(&page, "%s/%s", fx.out, fx.code_rel);
  kn__sb_printf(&dom, "%s/dom.html", fx.tmp);
  cr_assert_eq(dump_dom(fx.tmp, kn__sb_cstr(&page), kn__sb_cstr(&dom)), 0);
  char *d = ru_read(kn__sb_cstr(&dom), NULL);
  cr_assert_not_null(d);
  cr_expect(strstr(d, "<pre class=\"code\">"), "the code block survives parsing");
  cr_expect(strstr(d, "<span class=\"k\">#include</span> &lt;stdbool.h&gt;"), "%.2000s", d);
  cr_expect(strstr(d, CALL_DEF));
  free(d);
  kn__sb_clear(&page);
  kn__sb_printf(&page, "%s/index.html", fx.out);
  cr_assert_eq(dump_dom(fx.tmp, kn__sb_cstr(&page), kn__sb_cstr(&dom)), 0);
  d = ru_read(kn__sb_cstr(&dom), NULL);
  cr_assert_not_null(d);
  kn__sb href = KN__SB_INIT;
  kn__sb_printf(&href, "href=\"%s\"", fx.code_rel);
  cr_expect(strstr(d, kn__sb_cstr(&href)), "the DOM of index.html links %s", fx.code_rel);
  kn__sb_fini(&href);
  free(d);
  kn__sb_fini(&page);
  kn__sb_fini(&dom);
  drop(&fx);
}
