/*
** test_report.c: `kiln report` on the four real PyTorch traces. Each must
** parse under --strict and give exactly the compile ids, files and raw.jsonl
** line counts of the trace spec §5.2 (tlparse's own results); every link of
** every page must resolve.
*/
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>
#include <md5.h>

#include "core/strbuf.h"
#include "support/report_util.h"

#define FIX KN_FIXTURE_DIR "/pytorch_traces/"

static int cmp(const void *a, const void *b) {
  return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* The expected list, sorted like ru_list. */
static char *expected(const char **files) {
  size_t n = 0;
  while (files[n]) n++;
  const char **v = malloc(n * sizeof *v);
  memcpy(v, files, n * sizeof *v);
  qsort(v, n, sizeof *v, cmp);
  kn__sb sb = KN__SB_INIT;
  for (size_t i = 0; i < n; i++) kn__sb_printf(&sb, "%s\n", v[i]);
  free(v);
  return kn__sb_take(&sb);
}

static char *run_fixture(const char *name) {
  char *out = ru_tmpdir();
  kn__sb args = KN__SB_INIT;
  kn__sb_printf(&args, "--strict --no-browser -o '%s/r' '" FIX "%s'", out, name);
  char *err = NULL;
  int rc = ru_kiln(kn__sb_cstr(&args), &err);
  cr_assert_eq(rc, 0, "%s: rc %d: %s", name, rc, err ? err : "");
  free(err);
  kn__sb_fini(&args);
  return out;
}

static void check_files(const char *out, const char **files) {
  kn__sb dir = KN__SB_INIT;
  kn__sb_printf(&dir, "%s/r", out);
  char *got = ru_list(kn__sb_cstr(&dir));
  char *want = expected(files);
  cr_assert_str_eq(got, want);
  size_t checked;
  cr_assert_eq(ru_check_links(kn__sb_cstr(&dir), &checked), 0);
  cr_assert_gt(checked, 10);
  free(got);
  free(want);
  kn__sb_fini(&dir);
}

static size_t lines_of(const char *out, const char *rel) {
  kn__sb p = KN__SB_INIT;
  kn__sb_printf(&p, "%s/r/%s", out, rel);
  size_t n = ru_lines(kn__sb_cstr(&p));
  kn__sb_fini(&p);
  return n;
}

static char *read_out(const char *out, const char *rel) {
  kn__sb p = KN__SB_INIT;
  kn__sb_printf(&p, "%s/r/%s", out, rel);
  char *s = ru_read(kn__sb_cstr(&p), NULL);
  kn__sb_fini(&p);
  cr_assert_not_null(s, "%s missing", rel);
  return s;
}

#define COMMON "index.html", "failures_and_restarts.html", "recompiles.html", \
  "graph_breaks.html", "compile_directory.json", "chromium_events.json",    \
  "raw.jsonl", "symbolic_shapes.html", "timeline.html"

Test(report_fixture, simple) {
  const char *files[] = {
      COMMON, "-_0_0_0/dynamo_output_graph_0.txt", "-_0_0_0/dynamo_output_graph_0.html",
      "-_0_0_0/aot_forward_graph_fw_metadata_1.txt",
      "-_0_0_0/aot_inference_graph_2.txt", "-_0_0_0/aot_inference_graph_2.html", "-_0_0_0/fx_graph_runnable_3.txt",
      "-_0_0_0/inductor_post_grad_graph_4.txt", "-_0_0_0/inductor_post_grad_graph_4.html",
      "-_0_0_0/inductor_output_code_cyjwx6x6efpuwt4dvr4ev42v4ghac5zo2uggvscht2"
      "otwnesito6_5.html",
      "-_0_0_0/fx_graph_cache_miss_6.json",
      "-_0_0_0/aotautograd_cache_hash_7.json",
      "-_0_0_0/dynamo_cpp_guards_str_8.txt",
      "-_0_0_0/compilation_metrics_9.html",
      "payloads/35842d763c8905794995d6c4a089d3b3.txt", NULL};
  char *out = run_fixture("simple.log");
  check_files(out, files);
  cr_assert_eq(lines_of(out, "raw.jsonl"), 15);
  /* 50 chromium events, one per line between "[" and "]". */
  cr_assert_eq(lines_of(out, "chromium_events.json"), 52);
  /* chromium_events.json is one JSON array (what Perfetto loads). */
  json_error_t jerr;
  kn__sb cp = KN__SB_INIT;
  kn__sb_printf(&cp, "%s/r/chromium_events.json", out);
  json_t *ev = json_load_file(kn__sb_cstr(&cp), 0, &jerr);
  kn__sb_fini(&cp);
  cr_assert(json_is_array(ev), "%s", jerr.text);
  cr_assert_eq(json_array_size(ev), 50);
  cr_assert_str_eq(json_string_value(json_object_get(json_array_get(ev, 0),
                                                     "ph")), "B");
  json_decref(ev);
  /* raw.jsonl: the string table (12 str records), then JSON records with
  ** the header fields added. */
  char *raw = read_out(out, "raw.jsonl");
  json_t *st = json_loadb(raw, strcspn(raw, "\n"), 0, &jerr);
  cr_assert_eq(json_array_size(json_object_get(st, "string_table")), 12);
  json_decref(st);
  const char *second = strchr(raw, '\n') + 1;
  json_t *r1 = json_loadb(second, strcspn(second, "\n"), 0, &jerr);
  cr_assert(json_is_object(json_object_get(r1, "dynamo_start")), "%s", second);
  cr_assert_eq(json_integer_value(json_object_get(r1, "lineno")), 961);
  cr_assert_str_eq(json_string_value(json_object_get(r1, "pathname")),
                   "torch/_dynamo/convert_frame.py");
  json_decref(r1);
  free(raw);
  char *dirj = read_out(out, "compile_directory.json");
  char *a = strstr(dirj, "\"[-/-]\""), *b = strstr(dirj, "\"[0/0]\"");
  cr_assert(a && b && a < b, "compile ids [-/-] then [0/0]");
  cr_assert_not_null(strstr(dirj, "\"fx_graph_cache_miss_6.json\""));
  free(dirj);
  char *idx = read_out(out, "index.html");
  cr_assert_not_null(strstr(idx, "<a id=\"[0/0]\""));
  cr_assert_not_null(strstr(idx, "href=\"-_0_0_0/compilation_metrics_9.html\""));
  free(idx);
  ru_rmtree(out);
  free(out);
}

Test(report_fixture, comp_metrics_restarts) {
  const char *files[] = {
      COMMON, "-_0_0_1/dynamo_output_graph_0.txt", "-_0_0_1/dynamo_output_graph_0.html", "-_0_0_1/dynamo_guards_1.html",
      "-_0_0_1/compilation_metrics_2.html", "-_1_0_1/dynamo_output_graph_3.txt", "-_1_0_1/dynamo_output_graph_3.html",
      "-_1_0_1/dynamo_guards_4.html", "-_1_0_1/compilation_metrics_5.html",
      "-_2_0_0/dynamo_output_graph_6.txt", "-_2_0_0/dynamo_output_graph_6.html", "-_2_0_0/dynamo_guards_7.html",
      "-_2_0_0/compilation_metrics_8.html",
      "payloads/11726d08889974e57b12edee2812504e.txt",
      "payloads/29e35548d59d0e446f0c8a3f3010cc72.txt",
      "payloads/e18e1bcb67140c0a67427a6119556f7a.txt", NULL};
  char *out = run_fixture("comp_metrics.log");
  check_files(out, files);
  cr_assert_eq(lines_of(out, "raw.jsonl"), 13);
  char *dirj = read_out(out, "compile_directory.json");
  const char *ids[] = {"\"[0/0]\"", "\"[0/0_1]\"", "\"[1/0]\"", "\"[1/0_1]\"",
                       "\"[2/0]\""};
  const char *prev = dirj;
  for (int i = 0; i < 5; i++) {
    const char *p = strstr(dirj, ids[i]);
    cr_assert(p && p >= prev, "compile id %s in first-seen order", ids[i]);
    prev = p;
  }
  free(dirj);
  /* Restarts colour the trie entries of [0/0] and [1/0] as graph breaks. */
  char *idx = read_out(out, "index.html");
  cr_assert_not_null(strstr(idx, "class=\"status-break\" href=\"index.html#[0/0]\""));
  cr_assert_not_null(strstr(idx, "class=\"status-break\" href=\"index.html#[1/0]\""));
  free(idx);
  ru_rmtree(out);
  free(out);
}

Test(report_fixture, chromium_events_failure) {
  const char *files[] = {COMMON, "-_0_0_0/dynamo_output_graph_0.txt", "-_0_0_0/dynamo_output_graph_0.html",
                         "-_0_0_0/dynamo_error_1.txt",
                         "-_0_0_0/compilation_metrics_2.html", NULL};
  char *out = run_fixture("chromium_events.log");
  check_files(out, files);
  cr_assert_eq(lines_of(out, "raw.jsonl"), 8);
  cr_assert_eq(lines_of(out, "chromium_events.json"), 8); /* 6 events */
  char *fail = read_out(out, "failures_and_restarts.html");
  cr_assert_not_null(strstr(fail, "BackendCompilerFailed"));
  size_t rows = 0;
  for (const char *p = fail; (p = strstr(p, "<tr><td>")); p++) rows++;
  cr_assert_eq(rows, 1);
  free(fail);
  char *idx = read_out(out, "index.html");
  cr_assert_not_null(strstr(idx, "class=\"status-error\" href=\"index.html#[0/0]\""));
  free(idx);
  ru_rmtree(out);
  free(out);
}

Test(report_fixture, rank1_recompile) {
  const char *d0 = "-_0_0_0/", *d1 = "-_0_1_0/";
  const char *names[] = {"dynamo_output_graph_%d.txt", "before_pre_grad_graph_%d.txt",
      "after_pre_grad_graph_%d.txt", "aotautograd_cache_miss_%d.json",
      "aot_forward_graph_fw_metadata_%d.txt", "aot_inference_graph_%d.txt",
      "torch._functorch.config_%d.txt", "fx_graph_runnable_%d.txt",
      "before_post_grad_graph_%d.txt", "after_post_grad_graph_%d.txt", NULL,
      "triton_kernel_info_%d.json", "inductor_runtime_and_tensor_meta_%d.json",
      "inductor_collective_schedule_%d.json", "fx_graph_cache_miss_%d.json",
      "inductor_provenance_tracking_node_mappings_%d.json",
      "inductor_provenance_tracking_kernel_stack_traces_%d.json"};
  static char buf[64][160];
  const char *files[80] = {COMMON};
  size_t n = 9, b = 0;
  for (int k = 0; k < 2; k++) {
    int base = k ? 21 : 0;
    const char *d = k ? d1 : d0;
    for (int i = 0; i < 17; i++) {
      if (!names[i]) continue;
      char nm[128];
      snprintf(nm, sizeof nm, names[i], base + i);
      snprintf(buf[b], sizeof buf[b], "%s%s", d, nm);
      files[n++] = buf[b++];
      if (i != 0 && i != 5) continue; /* graphs get a highlighted .html */
      snprintf(buf[b], sizeof buf[b], "%s%.*s.html", d, (int)strlen(nm) - 4, nm);
      files[n++] = buf[b++];
    }
    snprintf(buf[b], sizeof buf[b], "%sinductor_provenance_tracking_kernel_stack_"
             "traces_%d_readable.html", d, base + 16);
    files[n++] = buf[b++];
    snprintf(buf[b], sizeof buf[b], "%sdynamo_cpp_guards_str_%d.txt", d, base + 18);
    files[n++] = buf[b++];
    snprintf(buf[b], sizeof buf[b], "%scompilation_metrics_%d.html", d, base + 19);
    files[n++] = buf[b++];
  }
  files[n++] = "-_0_0_0/inductor_output_code_clk3g2zb5brjgofxec355bjazxqzfzeciui"
               "t7y4gvwmk5cbkeugs_10.html";
  files[n++] = "-_0_1_0/inductor_output_code_cgd7ve5jf7cyi2gmm2n3bxxfm2berj3vix"
               "luiyvwftcfluyhppik_31.html";
  files[n++] = "-_0_1_0/recompile_reasons_20.json";
  files[n++] = "-_-_-_-/graph_execution_41.json";
  files[n++] = "payloads/260f45c249f31406f2c86433efae6275.txt";
  files[n++] = "payloads/b80ec6fb5e099182f734802f84851913.txt";
  files[n] = NULL;
  char *out = run_fixture("dedicated_log_torch_trace_rank_1_fglwclht.log");
  check_files(out, files);
  cr_assert_eq(lines_of(out, "raw.jsonl"), 72);
  char *idx = read_out(out, "index.html");
  cr_assert_not_null(strstr(idx, "id=\"unknown-stacks\""), "unknown stacks trie");
  free(idx);
  /* The recompile view names the guard that failed for [0/0]. */
  char *rc = read_out(out, "recompiles.html");
  cr_assert_not_null(strstr(rc, "2 compiles of inner"));
  cr_assert_not_null(strstr(rc, "<a href=\"index.html#[0/0]\">[0/0]</a>"));
  cr_assert_not_null(strstr(rc, "-_0_0_0/dynamo_cpp_guards_str_18.txt"));
  free(rc);
  ru_rmtree(out);
  free(out);
}

/* A trace written by kiln's own writer: recompile and graph break views. */
Test(report_fixture, kiln_trace) {
  char *tmp = ru_tmpdir();
  char *trace = ru_write_kiln_trace(tmp);
  cr_assert_not_null(trace);
  kn__sb args = KN__SB_INIT;
  kn__sb_printf(&args, "--strict -o '%s/r' '%s'", tmp, trace);
  char *err = NULL;
  cr_assert_eq(ru_kiln(kn__sb_cstr(&args), &err), 0, "%s", err);
  free(err);
  kn__sb_fini(&args);
  const char *code = "void kernel(float *out, const float *x) {\n"
                     "  for (int i = 0; i < 4; i++) out[i] = x[i] * 2;\n}\n";
  char md5[33], payload[64];
  MD5Data((const unsigned char *)code, strlen(code), md5);
  snprintf(payload, sizeof payload, "payloads/%s.txt", md5);
  const char *files[] = {
      COMMON, "-_0_0_0/dynamo_output_graph_0.txt", "-_0_0_0/dynamo_output_graph_0.html",
      "-_0_0_0/inductor_output_code_kernel_ab12_1.html",
      "-_0_0_0/dynamo_cpp_guards_str_2.txt", "-_0_0_0/compilation_metrics_3.html",
      "-_0_1_0/recompile_reasons_4.json", "-_0_1_0/dynamo_output_graph_5.txt", "-_0_1_0/dynamo_output_graph_5.html",
      "-_0_1_0/inductor_output_code_kernel_ab12_6.html",
      "-_0_1_0/dynamo_cpp_guards_str_7.txt", "-_0_1_0/compilation_metrics_8.html",
      "-_1_0_0/dynamo_output_graph_9.txt", "-_1_0_0/dynamo_output_graph_9.html",
      "-_1_0_0/dynamo_graph_break_reason_10.txt",
      "-_1_0_0/inductor_output_code_kernel_ab12_11.html",
      "-_1_0_0/dynamo_cpp_guards_str_12.txt",
      "-_1_0_0/compilation_metrics_13.html", payload, NULL};
  check_files(tmp, files);
  cr_assert_eq(lines_of(tmp, "raw.jsonl"), 18);
  cr_assert_eq(lines_of(tmp, "chromium_events.json"), 8);
  char *rc = read_out(tmp, "recompiles.html");
  cr_assert_not_null(strstr(rc, "2 compiles of step"));
  cr_assert_not_null(strstr(rc, "<li>L[&#39;x&#39;].size()[0] == 4</li>"), "%s", rc);
  cr_assert_not_null(strstr(rc, "<mark>| +- TENSOR_MATCH: L[&#39;x&#39;].size()"
                                "[0] == 4</mark>"));
  cr_assert_eq(strstr(strstr(rc, "[0/1]</a>"), "<mark>"), NULL,
               "[0/1]'s own guards are not marked");
  free(rc);
  char *gb = read_out(tmp, "graph_breaks.html");
  cr_assert_not_null(strstr(gb, "<tr><td><code>/home/u/train.c:14</code></td>"
                                "<td class=\"num\">1</td><td><ul><li>"
                                "Data-dependent branching</li></ul></td>"));
  free(gb);
  char *idx = read_out(tmp, "index.html");
  cr_assert_not_null(strstr(idx, "/home/u/train.c:40 in main"));
  cr_assert_not_null(strstr(idx, "class=\"status-ok\" href=\"index.html#[0/1]\""));
  free(idx);
  ru_rmtree(tmp);
  free(trace);
  free(tmp);
}
