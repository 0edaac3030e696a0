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
  cr_assert_not_null(strstr(rc, "2 compiles of ru_scale_add"), "%s", rc);
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
