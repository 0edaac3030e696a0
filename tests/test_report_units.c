/*
** test_report_units.c: the pieces of tools/report/ on their own: safe
** names and paths, confined writes, HTML escaping and numbered listings,
** the stack trie's shape. (tests/CMakeLists.txt compiles the report sources
** into this executable.)
*/
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "report/html.h"
#include "report/outdir.h"
#include "report/trie.h"
#include "support/report_util.h"

Test(report_units, safe_name) {
  char b[200];
  cr_assert_str_eq(rp_safe_name(b, sizeof b, "../x"), "_._x");
  cr_assert_str_eq(rp_safe_name(b, sizeof b, "/etc/passwd"), "_etc_passwd");
  cr_assert_str_eq(rp_safe_name(b, sizeof b, ""), "_");
  cr_assert_str_eq(rp_safe_name(b, sizeof b, ".."), "_.");
  cr_assert_str_eq(rp_safe_name(b, sizeof b, "torch._functorch.config"),
                   "torch._functorch.config");
  cr_assert_str_eq(rp_safe_name(b, sizeof b, "a b\tc<d>\xc3\xa9"), "a_b_c_d___");
  char big[400];
  memset(big, 'x', sizeof big - 1);
  big[sizeof big - 1] = '\0';
  cr_assert_eq(strlen(rp_safe_name(b, sizeof b, big)), RP_NAME_MAX);
  char small[5];
  cr_assert_str_eq(rp_safe_name(small, sizeof small, "abcdef"), "abcd");
}

Test(report_units, rel_path_ok) {
  cr_assert(rp_rel_path_ok("index.html"));
  cr_assert(rp_rel_path_ok("-_0_0_0/dynamo_output_graph_0.txt"));
  cr_assert(rp_rel_path_ok("payloads/abc.txt"));
  const char *bad[] = {"", "/abs", "../x", "a/../b", "a//b", "a/", ".hidden",
                       "a/.b", "sp ace", "a\\b", NULL};
  for (int i = 0; bad[i]; i++)
    cr_assert_not(rp_rel_path_ok(bad[i]), "'%s' must be refused", bad[i]);
  cr_assert_not(rp_rel_path_ok(NULL));
}

Test(report_units, writes_stay_inside_out) {
  char *tmp = ru_tmpdir();
  char out[300], outside[300], link[400];
  snprintf(out, sizeof out, "%s/out/deeper", tmp);
  snprintf(outside, sizeof outside, "%s/outside", tmp);
  mkdir(outside, 0755);
  rp_out o;
  cr_assert_eq(rp_out_prepare(&o, out, false), KN_OK, "%s", kn_last_error());
  FILE *f = rp_out_fopen(&o, "a/b/c.txt");
  cr_assert_not_null(f);
  fputs("hi", f);
  fclose(f);
  cr_assert(rp_out_exists(&o, "a/b/c.txt"));
  cr_assert_null(rp_out_fopen(&o, "../escape.txt"));
  cr_assert_not_null(strstr(kn_last_error(), "unsafe output path"));
  /* A symlink planted inside OUT is not followed, neither as a directory
  ** nor as the file itself. */
  snprintf(link, sizeof link, "%s/evil", out);
  cr_assert_eq(symlink(outside, link), 0);
  cr_assert_null(rp_out_fopen(&o, "evil/x.txt"));
  cr_assert_null(rp_out_fopen(&o, "evil"));
  char *listing = ru_list(outside);
  cr_assert_str_eq(listing, "");
  free(listing);
  rp_out_close(&o);
  /* Non-empty now: refused without overwrite, emptied with it. */
  cr_assert_eq(rp_out_prepare(&o, out, false), KN_EINVAL);
  cr_assert_eq(rp_out_prepare(&o, out, true), KN_OK);
  listing = ru_list(out);
  cr_assert_str_eq(listing, "");
  free(listing);
  struct stat st;
  cr_assert_eq(stat(outside, &st), 0, "the symlink target survives");
  rp_out_close(&o);
  ru_rmtree(tmp);
  free(tmp);
}

static char *capture(void (*fn)(FILE *, const char *), const char *arg) {
  char *buf = NULL;
  size_t n = 0;
  FILE *f = open_memstream(&buf, &n);
  fn(f, arg);
  fclose(f);
  return buf;
}

static void esc(FILE *f, const char *s) { rp_html_esc(f, s); }
static void numbered(FILE *f, const char *s) {
  rp_html_numbered(f, s, strlen(s));
}

Test(report_units, html_escaping) {
  char *s = capture(esc, "<script>alert(\"x\" & 'y')</script>");
  cr_assert_str_eq(s, "&lt;script&gt;alert(&quot;x&quot; &amp; &#39;y&#39;)"
                      "&lt;/script&gt;");
  free(s);
  char *buf = NULL;
  size_t n = 0;
  FILE *f = open_memstream(&buf, &n);
  rp_html_escn(f, "a\0<b", 4); /* NUL bytes are dropped */
  fclose(f);
  cr_assert_str_eq(buf, "a&lt;b");
  free(buf);
  s = capture(numbered, "x = 1\n<y>");
  cr_assert_str_eq(s, "<pre class=\"code\"><span id=\"L1\"><span class=\"ln\">1"
                      "</span>x = 1</span>\n<span id=\"L2\"><span class=\"ln\">"
                      "2</span>&lt;y&gt;</span>\n</pre>\n");
  free(s);
}

static void frame_txt(void *ud, FILE *f, const rp_frame *fr) {
  (void)ud;
  fprintf(f, "%s:%lld", fr->name, (long long)fr->line);
}
static void term_txt(void *ud, FILE *f, size_t c) {
  (void)ud;
  fprintf(f, "#%zu", c);
}

static json_t *stack(const char *spec) {
  /* "name:line,name:line" -> frames with filename 0 */
  json_t *a = json_array();
  char *dup = strdup(spec), *save = NULL;
  for (char *t = strtok_r(dup, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
    char *colon = strchr(t, ':');
    *colon = '\0';
    json_array_append_new(a, json_pack("{s:i,s:s,s:i}", "line", atoi(colon + 1),
                                       "name", t, "filename", 0));
  }
  free(dup);
  return a;
}

Test(report_units, trie_shares_prefixes_and_nests_only_at_divergence) {
  rp_trie t;
  rp_trie_init(&t);
  json_t *s1 = stack("main:1,f:2,g:3"), *s2 = stack("main:1,f:2,h:4");
  json_t *s3 = stack("main:1,f:2,g:3");
  cr_assert(rp_trie_insert(&t, s1, 3, 0, NULL));
  cr_assert(rp_trie_insert(&t, s2, 3, 1, NULL));
  cr_assert(rp_trie_insert(&t, s3, 2, 2, NULL)); /* only main:1,f:2 */
  cr_assert_eq(t.inserted, 3);
  char *buf = NULL;
  size_t n = 0;
  FILE *f = open_memstream(&buf, &n);
  rp_trie_render r = {frame_txt, term_txt, NULL};
  rp_trie_write(&t, f, &r);
  fclose(f);
  cr_assert_str_eq(buf, "<ul class=\"trie\">\n<li>main:1</li>\n<li>#2 f:2</li>\n"
                        "<li class=\"branch\">#0 g:3</li>\n"
                        "<li class=\"branch\">#1 h:4</li>\n</ul>\n");
  free(buf);
  json_decref(s1), json_decref(s2), json_decref(s3);
  rp_trie_fini(&t);
}

/* Expected strings are Python 3's repr() of the same doubles. */
Test(report_units, floats_print_as_python_repr) {
  const struct {
    double v;
    const char *repr;
  } cases[] = {{0.00061, "0.00061"},        {1e-05, "1e-05"},
               {0.0001, "0.0001"},          {3.910064697265625e-05, "3.910064697265625e-05"},
               {2.0, "2.0"},                {0.1 + 0.2, "0.30000000000000004"},
               {1712154528.0523684, "1712154528.0523684"},
               {1e16, "1e+16"},             {1e15, "1000000000000000.0"},
               {123456789012.0, "123456789012.0"}, {-0.5, "-0.5"},
               {1.5e300, "1.5e+300"},       {0.0, "0.0"},
               {5e-324, "5e-324"},          {0.012439489364624023, "0.012439489364624023"}};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char buf[40];
    cr_assert_str_eq(rp_fmt_double(buf, sizeof buf, cases[i].v), cases[i].repr);
  }
}

static char *code_html(const char *src, rp_lang lang) {
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  rp_html_code(f, src, strlen(src), lang);
  fclose(f);
  return buf;
}

Test(report_units, python_graph_code_is_highlighted_and_escaped) {
  char *h = code_html("def forward(self, x: \"f32[4]<b>\"):\n"
                      "    y = x * 2.5e-3  # scale <i>\n"
                      "    s = '''a\n</pre>'''\n    return (y,)",
                      RP_LANG_PY);
  const char *want =
      "<pre class=\"code\">"
      "<span id=\"L1\"><span class=\"ln\">1</span><span class=\"k\">def</span> "
      "<span class=\"fn\">forward</span>(self, x: <span class=\"s\">&quot;"
      "f32[4]&lt;b&gt;&quot;</span>):</span>\n"
      "<span id=\"L2\"><span class=\"ln\">2</span>    y = x * <span "
      "class=\"n\">2.5e-3</span>  <span class=\"c\"># scale &lt;i&gt;</span></span>\n"
      "<span id=\"L3\"><span class=\"ln\">3</span>    s = <span class=\"s\">"
      "&#39;&#39;&#39;a</span></span>\n"
      "<span id=\"L4\"><span class=\"ln\">4</span><span class=\"s\">&lt;/pre&gt;"
      "&#39;&#39;&#39;</span></span>\n"
      "<span id=\"L5\"><span class=\"ln\">5</span>    <span class=\"k\">return"
      "</span> (y,)</span>\n</pre>\n";
  cr_assert_str_eq(h, want);
  free(h);
}

Test(report_units, c_kernel_code_is_highlighted) {
  const char *src = "#include <math.h>\n/* a <kernel>\n   spans */ void k(float *o) {\n"
                    "  o[0] = 1.0f; // \"x\"\n}";
  cr_assert_eq(rp_guess_lang(src, strlen(src)), RP_LANG_C);
  cr_assert_eq(rp_guess_lang("def f(x):\n  return x", 20), RP_LANG_PY);
  char *h = code_html(src, RP_LANG_C);
  const char *want =
      "<pre class=\"code\">"
      "<span id=\"L1\"><span class=\"ln\">1</span><span class=\"k\">#include</span>"
      " &lt;math.h&gt;</span>\n"
      "<span id=\"L2\"><span class=\"ln\">2</span><span class=\"c\">/* a "
      "&lt;kernel&gt;</span></span>\n"
      "<span id=\"L3\"><span class=\"ln\">3</span><span class=\"c\">   spans */"
      "</span> <span class=\"k\">void</span> <span class=\"fn\">k</span>(<span "
      "class=\"k\">float</span> *o) {</span>\n"
      "<span id=\"L4\"><span class=\"ln\">4</span>  o[<span class=\"n\">0</span>] "
      "= <span class=\"n\">1.0f</span>; <span class=\"c\">// &quot;x&quot;</span>"
      "</span>\n"
      "<span id=\"L5\"><span class=\"ln\">5</span>}</span>\n</pre>\n";
  cr_assert_str_eq(h, want);
  free(h);
}
