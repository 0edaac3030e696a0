/*
** test_report_browser.c: the generated pages in a real browser. Debian's
** headless Chromium loads index.html (from a PyTorch trace and from a trace
** written by kiln's writer); the DOM it builds must hold the compile
** entries and links, the filter script must have run, and a screenshot is
** saved (report_*.png in the test's working directory; docs/img/ holds a
** copy). The recompile, symbolic-shape and timeline pages are checked on a
** trace of a real compiled function. Skipped with a message when
** /usr/bin/chromium is missing.
*/
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/strbuf.h"
#include "support/report_util.h"

#define CHROMIUM "/usr/bin/chromium"
#define FIX KN_FIXTURE_DIR "/pytorch_traces/"

static void need_chromium(void) {
  if (access(CHROMIUM, X_OK) != 0)
    cr_skip_test("skipped: " CHROMIUM " not installed (apt-get install chromium)");
}

/* Run headless Chromium on a page with a fresh profile. what is
** "--dump-dom" (stdout to out) or "--screenshot=<out>". Returns the rc. */
static int chromium(const char *tmp, const char *page, const char *what,
                    const char *out) {
  kn__sb cmd = KN__SB_INIT;
  kn__sb_printf(&cmd,
                "timeout 60 " CHROMIUM " --headless --no-sandbox --disable-gpu "
                "--no-first-run --disable-background-networking "
                "--disable-component-update --disable-sync "
                "--user-data-dir='%s/profile' --window-size=1280,900 ",
                tmp);
  if (!strcmp(what, "--dump-dom"))
    kn__sb_printf(&cmd, "--dump-dom 'file://%s' > '%s' 2>/dev/null", page, out);
  else
    kn__sb_printf(&cmd, "--screenshot='%s' 'file://%s' > /dev/null 2>&1", out,
                  page);
  int rc = system(kn__sb_cstr(&cmd));
  kn__sb_fini(&cmd);
  return rc;
}

static char *dom_of(const char *tmp, const char *page) {
  kn__sb out = KN__SB_INIT;
  kn__sb_printf(&out, "%s/dom.html", tmp);
  cr_assert_eq(chromium(tmp, page, "--dump-dom", kn__sb_cstr(&out)), 0);
  char *dom = ru_read(kn__sb_cstr(&out), NULL);
  kn__sb_fini(&out);
  cr_assert_not_null(dom);
  return dom;
}

static void screenshot(const char *tmp, const char *page, const char *png) {
  char cwd[1024];
  cr_assert_not_null(getcwd(cwd, sizeof cwd));
  kn__sb out = KN__SB_INIT;
  kn__sb_printf(&out, "%s/%s", cwd, png);
  cr_assert_eq(chromium(tmp, page, "--screenshot", kn__sb_cstr(&out)), 0);
  size_t n = 0;
  char *img = ru_read(kn__sb_cstr(&out), &n);
  cr_assert_not_null(img, "no screenshot %s", kn__sb_cstr(&out));
  cr_assert_eq(memcmp(img, "\x89PNG\r\n\x1a\n", 8), 0, "a PNG file");
  cr_assert_gt(n, 20000, "a page with content, not a blank image");
  free(img);
  kn__sb_fini(&out);
}

static char *report(const char *tmp, const char *trace) {
  kn__sb args = KN__SB_INIT;
  kn__sb_printf(&args, "--strict -o '%s/r' '%s'", tmp, trace);
  char *err = NULL;
  cr_assert_eq(ru_kiln(kn__sb_cstr(&args), &err), 0, "%s", err);
  free(err);
  kn__sb_fini(&args);
  kn__sb page = KN__SB_INIT;
  kn__sb_printf(&page, "%s/r/index.html", tmp);
  return kn__sb_take(&page);
}

Test(report_browser, pytorch_trace_index, .timeout = 240) {
  need_chromium();
  char *tmp = ru_tmpdir();
  char *page = report(tmp, FIX "dedicated_log_torch_trace_rank_1_fglwclht.log");
  char *dom = dom_of(tmp, page);
  const char *want[] = {
      "<a id=\"[0/0]\" class=\"status-ok\" href=\"#[0/0]\">[0/0]</a>",
      "<a id=\"[0/1]\" class=\"status-ok\" href=\"#[0/1]\">[0/1]</a>",
      "<a id=\"[-/-]\" class=\"status-missing\" href=\"#[-/-]\">[-/-]</a>",
      "<a href=\"-_0_0_0/compilation_metrics_19.html\">compilation_metrics_19.html</a>",
      "<a href=\"-_0_1_0/recompile_reasons_20.json\">recompile_reasons_20.json</a>",
      "<a href=\"-_-_-_-/graph_execution_41.json\">graph_execution_41.json</a>",
      "<a class=\"status-ok\" href=\"index.html#[0/0]\">[0/0]</a>",
      /* The filter script ran and showed its box. */
      "<div id=\"filter\" style=\"display: block;\">"};
  for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
    cr_assert_not_null(strstr(dom, want[i]), "DOM lacks %s", want[i]);
  screenshot(tmp, page, "report_index_pytorch.png");
  free(dom), free(page);
  ru_rmtree(tmp);
  free(tmp);
}

Test(report_browser, kiln_trace_index_and_recompiles, .timeout = 240) {
  need_chromium();
  char *tmp = ru_tmpdir();
  char *trace = ru_write_kiln_trace(tmp);
  cr_assert_not_null(trace);
  char *page = report(tmp, trace);
  char *dom = dom_of(tmp, page);
  const char *want[] = {
      "<a id=\"[0/0]\" class=\"status-ok\" href=\"#[0/0]\">[0/0]</a> <code>step</code>",
      "<a id=\"[0/1]\" class=\"status-ok\" href=\"#[0/1]\">[0/1]</a>",
      "<a id=\"[1/0]\" class=\"status-ok\" href=\"#[1/0]\">[1/0]</a> <code>step_resume</code>",
      "<a href=\"-_1_0_0/dynamo_graph_break_reason_10.txt\">",
      "<a href=\"recompiles.html\">Recompiles</a>"};
  for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
    cr_assert_not_null(strstr(dom, want[i]), "DOM lacks %s", want[i]);
  free(dom);
  kn__sb rp = KN__SB_INIT;
  kn__sb_printf(&rp, "%s/r/recompiles.html", tmp);
  dom = dom_of(tmp, kn__sb_cstr(&rp));
  cr_assert_not_null(strstr(dom, "<details open=\"\">"), "failed guard opened");
  cr_assert_not_null(strstr(dom, "<mark>| +- TENSOR_MATCH: L['x'].size()[0] == 4</mark>"));
  screenshot(tmp, kn__sb_cstr(&rp), "report_recompiles_writer.png");
  kn__sb_fini(&rp);
  free(dom), free(page), free(trace);
  ru_rmtree(tmp);
  free(tmp);
}

static char *dom_of_page(const char *tmp, const char *rel) {
  kn__sb p = KN__SB_INIT;
  kn__sb_printf(&p, "%s/r/%s", tmp, rel);
  char *dom = dom_of(tmp, kn__sb_cstr(&p));
  kn__sb_fini(&p);
  return dom;
}

static void screenshot_page(const char *tmp, const char *rel, const char *png) {
  kn__sb p = KN__SB_INIT;
  kn__sb_printf(&p, "%s/r/%s", tmp, rel);
  screenshot(tmp, kn__sb_cstr(&p), png);
  kn__sb_fini(&p);
}

static size_t count(const char *s, const char *needle) {
  size_t n = 0;
  for (const char *p = s; (p = strstr(p, needle)); p++) n++;
  return n;
}

Test(report_browser, real_kiln_trace_pages, .timeout = 300) {
  need_chromium();
  char *tmp = ru_tmpdir();
  char *trace = ru_write_real_kiln_trace(tmp);
  cr_assert_not_null(trace);
  free(report(tmp, trace));
  char *dom = dom_of_page(tmp, "recompiles.html");
  cr_assert_not_null(strstr(dom, "<details open=\"\"><summary>7 guard line(s), 1 "
                                 "matching the failure</summary>"), "%s", dom);
  cr_assert_not_null(strstr(dom, "<mark>| | +- TENSOR_MATCH: check_tensor(L['a'], "
                                 "Tensor,"), "%s", dom);
  screenshot_page(tmp, "recompiles.html", "report_recompiles_kiln.png");
  free(dom);
  dom = dom_of_page(tmp, "symbolic_shapes.html");
  cr_assert_not_null(strstr(dom, "<td>s0</td><td>8</td><td>[2, int_oo]</td>"));
  free(dom);
  dom = dom_of_page(tmp, "timeline.html");
  /* The SVG was parsed as SVG: its elements are in the DOM with their
  ** titles, per phase (bars) and per compile id and phase (timeline). */
  cr_assert_gt(count(dom, "<rect "), 10, "%s", dom);
  cr_assert_not_null(strstr(dom, "<title>entire_frame_compile: "));
  cr_assert_not_null(strstr(dom, "<title>[0/0] entire_frame_compile: "));
  cr_assert_not_null(strstr(dom, "<title>[0/1] entire_frame_compile: "));
  screenshot_page(tmp, "timeline.html", "report_timeline_kiln.png");
  free(dom), free(trace);
  ru_rmtree(tmp);
  free(tmp);
}
