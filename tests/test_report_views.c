/*
** test_report_views.c: the report's pages on a trace of a real compiled
** function (kiln's tracer, guards and shape environment, not a hand-made
** trace), and the guard matcher on the failure texts the seeds quote.
*/
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "core/strbuf.h"
#include "report/report.h"
#include "support/report_util.h"

/* Report a real kiln trace into tmp/r; returns tmp (owned). */
static char *real_report(void) {
  char *tmp = ru_tmpdir();
  char *trace = ru_write_real_kiln_trace(tmp);
  cr_assert_not_null(trace, "%s", kn_last_error());
  kn__sb args = KN__SB_INIT;
  kn__sb_printf(&args, "--strict -o '%s/r' '%s'", tmp, trace);
  char *err = NULL;
  cr_assert_eq(ru_kiln(kn__sb_cstr(&args), &err), 0, "%s", err);
  free(err), free(trace);
  kn__sb_fini(&args);
  return tmp;
}

static char *page(const char *tmp, const char *rel) {
  kn__sb p = KN__SB_INIT;
  kn__sb_printf(&p, "%s/r/%s", tmp, rel);
  char *s = ru_read(kn__sb_cstr(&p), NULL);
  cr_assert_not_null(s, "%s missing", rel);
  kn__sb_fini(&p);
  return s;
}

Test(report_views, recompile_highlights_kiln_size_guard) {
  char *tmp = real_report();
  char *rc = page(tmp, "recompiles.html");
  cr_assert_not_null(strstr(rc, "2 compiles of scale_add"), "%s", rc);
  cr_assert_not_null(strstr(rc, "<li>tensor &#39;L[&#39;a&#39;]&#39; size "
                                "mismatch at index 0. expected 4, actual 8</li>"));
  cr_assert_not_null(strstr(rc, "<details open><summary>7 guard line(s), 1 "
                                "matching the failure</summary>"), "%s", rc);
  cr_assert_not_null(strstr(rc, "<mark>| | +- TENSOR_MATCH: check_tensor(L[&#39;"
                                "a&#39;], Tensor, DispatchKeySet(CPU, "
                                "BackendSelect, ADInplaceOrView, AutogradCPU), "
                                "torch.float32, device=None, requires_grad=False,"
                                " size=[4, 3], stride=[3, 1])"), "%s", rc);
  free(rc);
  ru_rmtree(tmp);
  free(tmp);
}

/* The value text of key in the trace's first compilation_metrics record. */
static char *trace_value(const char *tmp, const char *key) {
  char *list = ru_list(tmp);
  char *nl = strchr(list, '\n');
  *nl = '\0';
  kn__sb p = KN__SB_INIT;
  kn__sb_printf(&p, "%s/%s", tmp, list);
  char *text = ru_read(kn__sb_cstr(&p), NULL);
  kn__sb_fini(&p);
  kn__sb k = KN__SB_INIT;
  kn__sb_printf(&k, "\"%s\": ", key);
  char *at = strstr(text, kn__sb_cstr(&k));
  cr_assert_not_null(at);
  at += k.len;
  char *v = strndup(at, strcspn(at, ",}"));
  kn__sb_fini(&k);
  free(text), free(list);
  return v;
}

Test(report_views, metrics_floats_as_written_in_the_trace) {
  char *tmp = real_report();
  char *m = page(tmp, "-_0_0_0/compilation_metrics_2.html");
  const char *keys[] = {"entire_frame_compile_time_s", "backend_compile_time_s",
                        "start_time"};
  for (int i = 0; i < 3; i++) {
    char *v = trace_value(tmp, keys[i]);
    cr_assert(strchr(v, '.') || strchr(v, 'e'), "%s is a float: %s", keys[i], v);
    kn__sb want = KN__SB_INIT;
    kn__sb_printf(&want, "<tr><th>%s</th><td>%s</td></tr>", keys[i], v);
    cr_assert_not_null(strstr(m, kn__sb_cstr(&want)), "%s", kn__sb_cstr(&want));
    kn__sb_fini(&want);
    free(v);
  }
  /* Long values wrap inside their cell instead of widening the table. */
  cr_assert_not_null(strstr(m, "td{overflow-wrap:anywhere}td pre{white-space:pre-wrap}"));
  free(m);
  ru_rmtree(tmp);
  free(tmp);
}

/* Reason texts from the seeds (test_recompiles) against guard lines in the
** format kiln and PyTorch print them. */
Test(report_views, guard_matcher_on_seed_reasons) {
  const char *ta = "| | +- TENSOR_MATCH: check_tensor(L['a'], Tensor, "
                   "DispatchKeySet(CPU), torch.float32, size=[3], stride=[1])";
  const char *tb = "| | +- TENSOR_MATCH: check_tensor(L['b'], Tensor, "
                   "DispatchKeySet(CPU), torch.float32, size=[3], stride=[1])";
  const char *tab = "| | +- TENSOR_MATCH: check_tensor(L['ab'], Tensor, size=[3])";
  const char *src = "| +- GuardManager: source=L['a']";
  const char *r1 = "tensor 'L['a']' size mismatch at index 0. expected 3, actual 2";
  const char *r2 = "tensor 'L['a']' dtype mismatch. expected Float, actual Half";
  const char *r3 = "expected type of 'L['b']' to be a tensor type, ' but found "
                   "<class 'int'>";
  cr_assert(rp_guard_line_matches(ta, r1));
  cr_assert(rp_guard_line_matches(ta, r2));
  cr_assert_not(rp_guard_line_matches(tb, r1));
  cr_assert_not(rp_guard_line_matches(tab, r1));
  cr_assert_not(rp_guard_line_matches(src, r1));
  cr_assert(rp_guard_line_matches(tb, r3));
  cr_assert_not(rp_guard_line_matches(ta, r3));
  cr_assert(rp_guard_line_matches("| +- GLOBAL_STATE: ___check_global_state()",
                                  "global state changed: grad_mode True -> False"));
  /* A guard's own code, as shape guards fail. */
  cr_assert(rp_guard_line_matches("| +- SHAPE_ENV: 2 <= L['a'].size()[0]",
                                  "2 <= L['a'].size()[0]"));
  cr_assert(rp_guard_line_matches("| | +- ID_MATCH: ___check_obj_id(L['fn'], 1396)",
                                  "___check_obj_id(fn, 1396)"));
  cr_assert_not(rp_guard_line_matches(ta, ""));
  cr_assert_not(rp_guard_line_matches(ta, NULL));
}

Test(report_views, symbolic_shapes_page_of_a_real_trace) {
  char *tmp = real_report();
  char *s = page(tmp, "symbolic_shapes.html");
  /* kiln keeps the 2 <= s0 bound in the guards (SHAPE_ENV), not as a
  ** guard_added record: this function adds no other shape guard. */
  cr_assert_not_null(strstr(s, "1 symbol(s), 0 guard(s), 0 specialization(s)"), "%s", s);
  cr_assert_not_null(strstr(s, "<tr><td><a href=\"index.html#[0/1]\">[0/1]</a></td>"
                               "<td>s0</td><td>8</td><td>[2, int_oo]</td><td>L[&#39;a"
                               "&#39;].size()[0]</td><td></td><td></td></tr>"), "%s", s);
  free(s);
  char *idx = page(tmp, "index.html");
  cr_assert_not_null(strstr(idx, "<a href=\"symbolic_shapes.html\">Symbolic shapes</a>"));
  cr_assert_null(strstr(idx, "<code>create_symbol</code>"), "no longer without a page");
  free(idx);
  ru_rmtree(tmp);
  free(tmp);
}

/* Issue 21: each guard a real compile adds shows the user line and the
** kiln function that added it (its stack columns were empty). */
Test(report_views, symbolic_shapes_page_names_each_guards_op_and_line) {
  char *tmp = ru_tmpdir();
  char *trace = ru_write_guarded_kiln_trace(tmp);
  cr_assert_not_null(trace, "%s", kn_last_error());
  char *err = NULL;
  cr_assert_eq(ru_kilnf(&err, "--strict -o '%s/r' '%s'", tmp, trace), 0, "%s", err);
  free(err), free(trace);
  char *s = page(tmp, "symbolic_shapes.html");
  /* kn_add's broadcast: Eq(s1, s3) and Eq(s0, s2); kn_size: Eq(s0, 4) */
  cr_assert_not_null(strstr(s, "4 symbol(s), 3 guard(s), 0 specialization(s)"), "%s", s);
  const char *rows[3][3] = {
      {"<td><code>Eq(s1, s3)</code></td>", "kn_tensor *s = kn_add(x, y); /* the op&#39;s guards */",
       "</summary>"},
      {"<td><code>Eq(s0, s2)</code></td>", "kn_tensor *s = kn_add(x, y); /* the op&#39;s guards */",
       "</summary>"},
      {"<td><code>Eq(s0, 4)</code></td>", "kn_size(x, 0)", "<summary>kn_size"}};
  for (int i = 0; i < 3; i++) {
    const char *row = strstr(s, rows[i][0]);
    cr_assert_not_null(row, "%s", rows[i][0]);
    const char *end = strstr(row, "</tr>");
    kn__sb r = KN__SB_INIT;
    kn__sb_putn(&r, row, (size_t)(end - row));
    const char *t = kn__sb_cstr(&r);
    /* the user stack: the line in ru_pair_add, its source shown */
    cr_assert_not_null(strstr(t, "report_util.c:"), "%s", t);
    cr_assert_not_null(strstr(t, " in ru_pair_add ("), "%s", t);
    cr_assert_not_null(strstr(t, rows[i][1]), "%s", t);
    /* the framework stack: from the public function the user called */
    const char *fw = strstr(t, "</details></td><td><details><summary>");
    cr_assert_not_null(fw, "%s", t);
    cr_assert(!strncmp(fw + 37, "kn_add", 6) || !strncmp(fw + 37, "kn_size", 7), "%s", fw);
    cr_assert_not_null(strstr(fw, rows[i][2]), "%s", fw);
    kn__sb_fini(&r);
  }
  free(s);
  ru_rmtree(tmp);
  free(tmp);
}

/* Records as PyTorch writes them, with user and framework stacks. */
Test(report_views, symbolic_shapes_with_stacks_and_specializations) {
  char *tmp = ru_tmpdir();
  kn__sb tp = KN__SB_INIT;
  kn__sb_printf(&tp, "%s/t.log", tmp);
  FILE *f = fopen(kn__sb_cstr(&tp), "w");
  ru_record(f, 1, "{\"str\": [\"/u/model.py\", 0]}", NULL);
  ru_record(f, 2, "{\"str\": [\"torch/fx/experimental/symbolic_shapes.py\", 1]}", NULL);
  const char *cid = "\"frame_id\": 0, \"frame_compile_id\": 1, \"attempt\": 0";
  const char *us = "\"user_stack\": [{\"line\": 7, \"name\": \"forward\", "
                   "\"filename\": 0, \"loc\": \"return x.view(-1) <b>\"}], "
                   "\"stack\": [{\"line\": 4010, \"name\": \"evaluate_expr\", "
                   "\"filename\": 1}]";
  char meta[1024];
  snprintf(meta, sizeof meta, "{\"create_symbol\": {\"symbol\": \"s1\", \"val\": "
           "\"5\", \"vr\": \"[2, int_oo]\", \"source\": \"L['x'].size()[0]\", %s}, "
           "%s}", us, cid);
  ru_record(f, 3, meta, NULL);
  snprintf(meta, sizeof meta, "{\"guard_added\": {\"expr\": \"Eq(s1, 5)\", %s}, "
           "%s}", us, cid);
  ru_record(f, 4, meta, NULL);
  snprintf(meta, sizeof meta, "{\"symbolic_shape_specialization\": {\"symbol\": "
           "\"s1\", \"sources\": [\"L['x'].size()[0]\"], \"value\": \"5\", "
           "\"reason\": \"Eq(s1, 5)\", %s}, %s}", us, cid);
  ru_record(f, 5, meta, NULL);
  fclose(f);
  kn__sb args = KN__SB_INIT;
  kn__sb_printf(&args, "--strict -o '%s/r' '%s'", tmp, kn__sb_cstr(&tp));
  char *err = NULL;
  cr_assert_eq(ru_kiln(kn__sb_cstr(&args), &err), 0, "%s", err);
  free(err);
  char *s = page(tmp, "symbolic_shapes.html");
  const char *stacks = "<td><details><summary>/u/model.py:7 in forward (1 frame(s))"
                       "</summary><ul class=\"stack\">"
                       "<li>/u/model.py:7 in forward<br><code>return x.view(-1) "
                       "&lt;b&gt;</code></li></ul></details></td><td><details>"
                       "<summary>evaluate_expr (1 frame(s))</summary><ul class=\"stack\"><li>"
                       "torch/fx/experimental/symbolic_shapes.py:4010 in "
                       "evaluate_expr</li></ul></details></td></tr>";
  kn__sb want = KN__SB_INIT;
  kn__sb_printf(&want, "<td>s1</td><td>5</td><td>[2, int_oo]</td><td>L[&#39;x&#39;]"
                ".size()[0]</td>%s", stacks);
  cr_assert_not_null(strstr(s, kn__sb_cstr(&want)), "%s", s);
  kn__sb_clear(&want);
  kn__sb_printf(&want, "<td><code>Eq(s1, 5)</code></td><td>guard_added</td>%s", stacks);
  cr_assert_not_null(strstr(s, kn__sb_cstr(&want)), "%s", s);
  kn__sb_clear(&want);
  kn__sb_printf(&want, "<td>s1</td><td>L[&#39;x&#39;].size()[0]</td><td>5</td>"
                "<td>Eq(s1, 5)</td>%s", stacks);
  cr_assert_not_null(strstr(s, kn__sb_cstr(&want)), "%s", s);
  kn__sb_fini(&want), kn__sb_fini(&args), kn__sb_fini(&tp);
  free(s);
  ru_rmtree(tmp);
  free(tmp);
}

static void chromium(FILE *f, int line, const char *cid, const char *ev) {
  char meta[200];
  snprintf(meta, sizeof meta, "{\"chromium_event\": {}, %s}", cid);
  ru_record(f, line, meta, ev);
}

/* Events with known times: the SVG geometry follows from them (plot 820 px
** wide from x = 230, rows of 16 px from y = 22, bars 14 px high; colours
** cycle through a palette of 10 by interned-name order). */
Test(report_views, timeline_svg_from_chromium_events) {
  char *tmp = ru_tmpdir();
  kn__sb tp = KN__SB_INIT;
  kn__sb_printf(&tp, "%s/t.log", tmp);
  FILE *f = fopen(kn__sb_cstr(&tp), "w");
  const char *c0 = "\"frame_id\": 0, \"frame_compile_id\": 0, \"attempt\": 0";
  const char *c1 = "\"frame_id\": 0, \"frame_compile_id\": 1, \"attempt\": 0";
  chromium(f, 1, c0, "{\n\"name\": \"dynamo\",\n\"ts\": 1000,\n\"ph\": \"B\"\n}");
  chromium(f, 2, c0, "{\"name\": \"inner <x>\", \"ts\": 1500, \"ph\": \"B\"}");
  chromium(f, 3, c0, "{\"name\": \"inner <x>\", \"ts\": 2000, \"ph\": \"E\"}");
  chromium(f, 4, c0, "{\"name\": \"dynamo\", \"ts\": 3000.0, \"ph\": \"E\"}");
  chromium(f, 5, c1, "{\"name\": \"backend\", \"ts\": 2000, \"dur\": 500, \"ph\": \"X\"}");
  fclose(f);
  kn__sb args = KN__SB_INIT;
  kn__sb_printf(&args, "--strict -o '%s/r' '%s'", tmp, kn__sb_cstr(&tp));
  char *err = NULL;
  cr_assert_eq(ru_kiln(kn__sb_cstr(&args), &err), 0, "%s", err);
  free(err);
  char *s = page(tmp, "timeline.html");
  const char *want[] = {
      /* bars: dynamo 2 ms is the longest, the others scaled to it */
      "width=\"820.0\" height=\"12.0\" fill=\"#f28e2b\"><title>dynamo: 2.00 ms</title>",
      "width=\"205.0\" height=\"12.0\" fill=\"#59a14f\"><title>inner &lt;x&gt;: 0.500 ms",
      "width=\"205.0\" height=\"12.0\" fill=\"#76b7b2\"><title>backend: 0.500 ms",
      /* timeline rows */
      "<rect x=\"230.0\" y=\"23.0\" width=\"820.0\" height=\"14.0\" fill=\"#f28e2b\">"
      "<title>[0/0] dynamo: 2.00 ms</title></rect>",
      "<rect x=\"435.0\" y=\"39.0\" width=\"205.0\" height=\"14.0\" fill=\"#59a14f\">"
      "<title>[0/0] inner &lt;x&gt;: 0.500 ms</title></rect>",
      "<rect x=\"640.0\" y=\"55.0\" width=\"205.0\" height=\"14.0\" fill=\"#76b7b2\">"
      "<title>[0/1] backend: 0.500 ms</title></rect>",
      "<text x=\"224.0\" y=\"66.0\" text-anchor=\"end\">[0/1]</text>"};
  for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
    cr_assert_not_null(strstr(s, want[i]), "lacks %s\n%s", want[i], s);
  free(s);
  char *idx = page(tmp, "index.html");
  cr_assert_not_null(strstr(idx, "<a href=\"timeline.html\">Timeline</a>"));
  free(idx);
  kn__sb_fini(&args), kn__sb_fini(&tp);
  ru_rmtree(tmp);
  free(tmp);
}

Test(report_views, timeline_of_a_real_trace) {
  char *tmp = real_report();
  char *s = page(tmp, "timeline.html");
  cr_assert_not_null(strstr(s, "<text x=\"224.0\" y=\"34.0\" text-anchor=\"end\">[0/0]</text>"), "%s", s);
  cr_assert_not_null(strstr(s, "<title>[0/1] entire_frame_compile: "), "%s", s);
  cr_assert_not_null(strstr(s, "<title>entire_frame_compile: "), "%s", s);
  free(s);
  ru_rmtree(tmp);
  free(tmp);
}
