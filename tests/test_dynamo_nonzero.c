/*
** test_dynamo_nonzero.c: the data-dependent op nonzero (values from torch
** 1.13's torch.nonzero) and how the capture frontend handles an op whose
** output shape depends on the data: a graph break before it, the op run
** eagerly on the real values, its row count recorded as the break's answer
** (another count traces a new branch), the graph_breaks log and the
** dynamo_graph_break_reason trace artifact.
*/
#pragma GCC optimize("no-optimize-sibling-calls")
#include <criterion/criterion.h>
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "kiln/compile.h"
#include "kiln/kiln.h"
#include "kiln/log.h"
#include "kiln/trace.h"
#include "support/dynamo_util.h"
#include "support/log_capture.h"
#include "support/trace_util.h"

TestSuite(nonzero, .init = kn_test_dynamo_setup, .fini = kn_test_dynamo_teardown);

/* r must be int64 [rows, cols] holding want (row-major). */
static void expect_coords(kn_tensor *r, int64_t rows, int64_t cols, const int64_t *want) {
  cr_assert(r, "%s", kn_last_error());
  cr_assert_eq(kn_tensor_dtype(r), KN_INT64);
  cr_assert_eq(kn_ndim(r), 2);
  cr_assert_eq(kn_size(r, 0), rows);
  cr_assert_eq(kn_size(r, 1), cols);
  for (int64_t i = 0; i < rows; i++)
    for (int64_t j = 0; j < cols; j++)
      cr_expect_eq(kn_get(r, (int64_t[]){i, j}), (double)want[i * cols + j], "[%lld, %lld]",
                   (long long)i, (long long)j);
}

/* torch.nonzero(torch.tensor([[0., 1.5, 0.], [nan, 0., -2.]])) ->
** [[0, 1], [1, 0], [1, 2]] (NaN counts as nonzero) */
Test(nonzero, eager_float_with_nan) {
  kn_scope_begin();
  kn_tensor *a = kn_from_floats((float[]){0, 1.5f, 0, NAN, 0, -2}, KN_SHAPE(2, 3));
  expect_coords(kn_nonzero(a), 3, 2, (int64_t[]){0, 1, 1, 0, 1, 2});
  kn_scope_end();
}

/* torch.arange(6).reshape(2, 3).t() = [[0, 3], [1, 4], [2, 5]] ->
** [[0, 1], [1, 0], [1, 1], [2, 0], [2, 1]] (non-contiguous int64 input) */
Test(nonzero, eager_transposed_int) {
  kn_scope_begin();
  kn_tensor *b = kn_transpose(kn_reshape(kn_arange_dtype(kn_int(0), kn_int(6), kn_int(1), KN_INT64), 2, (int64_t[]){2, 3}), 0, 1);
  cr_assert(b, "%s", kn_last_error());
  expect_coords(kn_nonzero(b), 5, 2, (int64_t[]){0, 1, 1, 0, 1, 1, 2, 0, 2, 1});
  kn_scope_end();
}

/* bool [True, False, True] -> [[0], [2]]; 0-dim 5. -> size [1, 0]; 0-dim 0.
** -> [0, 0]; zeros(0, 3) -> [0, 2] */
Test(nonzero, eager_bool_scalar_empty) {
  kn_scope_begin();
  kn_tensor *m = kn_from_array((bool[]){true, false, true}, KN_SHAPE(3), KN_BOOL);
  expect_coords(kn_nonzero(m), 2, 1, (int64_t[]){0, 2});
  kn_tensor *s5 = kn_full(0, NULL, kn_float(5), KN_FLOAT32);
  expect_coords(kn_nonzero(s5), 1, 0, NULL);
  kn_tensor *s0 = kn_full(0, NULL, kn_float(0), KN_FLOAT32);
  expect_coords(kn_nonzero(s0), 0, 0, NULL);
  expect_coords(kn_nonzero(kn_zeros(KN_SHAPE(0, 3), KN_FLOAT32)), 0, 2, NULL);
  kn_scope_end();
}

/* torch: nonzero(x).requires_grad == False, grad_fn None */
Test(nonzero, not_differentiable) {
  kn_scope_begin();
  kn_tensor *x = kn_full(KN_SHAPE(4), kn_float(-1), KN_FLOAT32);
  cr_assert_eq(kn_set_requires_grad(x, true), KN_OK);
  kn_tensor *r = kn_nonzero(x);
  cr_assert(r, "%s", kn_last_error());
  cr_expect(!kn_requires_grad(r));
  cr_expect_null(kn_grad_fn_name(r));
  kn_scope_end();
}

Test(nonzero, meta_input_is_an_error) {
  kn_scope_begin();
  kn_tensor *m = kn_empty_meta(KN_SHAPE(3), KN_FLOAT32);
  cr_assert(m, "%s", kn_last_error());
  cr_expect_null(kn_nonzero(m));
  cr_expect_eq(kn_last_status(), KN_EUNSUPPORTED);
  cr_expect(strstr(kn_last_error(), "nonzero: the output shape depends on the input's data, "
                                    "which a meta tensor does not have"),
            "%s", kn_last_error());
  kn_scope_end();
}

/* ---- under kn_compile ------------------------------------------------------ */
static kn_tensor *nz_fn(kn_tensor *x) {
  kn_tensor *pos = kn_relu(x);
  kn_tensor *idx = kn_nonzero(pos);
  return kn_mul_scalar(idx, kn_int(10));
}

static kn_compile_counter cc;

/* x = [a, b, c, d] -> coords of the positive entries * 10 */
static kn_tensor *vec4(double a, double b, double c, double d) {
  return kn_from_floats((float[]){(float)a, (float)b, (float)c, (float)d}, KN_SHAPE(4));
}

Test(nonzero, compiled_break_segments_and_branches) {
  kn_compile_counter_clear(&cc);
  kn_compile_options o = {.backend_fn = kn_compile_counter_backend, .backend_ud = &cc};
  kn_compiled *f = KN_COMPILE(nz_fn, &o);
  kn_scope_begin();
  /* 1: two positives: [1, 3] * 10 */
  kn_tensor *y = kn_call_t(f, vec4(-1, 2, -3, 4));
  expect_coords(y, 2, 1, (int64_t[]){10, 30});
  cr_expect_eq(cc.frame_count, 2); /* relu | nonzero (eager) | mul */
  cr_expect_eq(cc.op_count, 2);
  /* 2: other data, same count: both segments cached */
  y = kn_call_t(f, vec4(5, -1, 7, -2));
  expect_coords(y, 2, 1, (int64_t[]){0, 20});
  cr_expect_eq(cc.frame_count, 2);
  /* 3: three positives: the answer (row count) differs -> a new branch */
  y = kn_call_t(f, vec4(1, 1, -1, 1));
  expect_coords(y, 3, 1, (int64_t[]){0, 10, 30});
  cr_expect_eq(cc.frame_count, 3);
  /* 4: both counts now hit */
  y = kn_call_t(f, vec4(-1, 1, 1, 1));
  expect_coords(y, 3, 1, (int64_t[]){10, 20, 30});
  y = kn_call_t(f, vec4(1, -1, -1, 1));
  expect_coords(y, 2, 1, (int64_t[]){0, 30});
  cr_expect_eq(cc.frame_count, 3);
  kn_scope_end();
  kn_compiled_free(f);
}

Test(nonzero, fullgraph_is_an_error) {
  kn_compile_options o = {.fullgraph = true};
  kn_compiled *f = KN_COMPILE(nz_fn, &o);
  kn_scope_begin();
  cr_expect_null(kn_call_t(f, vec4(-1, 2, -3, 4)));
  cr_expect(strstr(kn_last_error(), "(fullgraph=true): Dynamic shape operator: dynamic shape "
                                    "operator: kiln.ops.nonzero"),
            "%s", kn_last_error());
  kn_scope_end();
  kn_compiled_free(f);
}

static void gb_body(const kn_test_records *r, void *ud) {
  (void)ud;
  kn_reset();
  kn_compiled *f = KN_COMPILE(nz_fn, NULL);
  kn_scope_begin();
  for (int i = 0; i < 2; i++) cr_assert(kn_call_t(f, vec4(-1, 2, -3, 4)), "%s", kn_last_error());
  kn_scope_end();
  kn_compiled_free(f);
  cr_assert_eq(r->n, 1);
  const char *m = r->v[0].message;
  cr_expect(strstr(m, "Graph break in user code at " __FILE__ ":"), "%s", m);
  cr_expect(strstr(m, "Graph Break Reason: Dynamic shape operator\n"
                      "  Explanation: Operator `kiln.ops.nonzero`'s output shape depends on "
                      "input Tensor data.\n"
                      "  Hint: Use an op with a fixed output shape (a mask with kn_where) or run "
                      "it outside the compiled function.\n"
                      "  Developer debug context: dynamic shape operator: kiln.ops.nonzero\n"
                      "User code traceback:\n"),
            "%s", m);
  cr_expect(strstr(m, "in nz_fn\n    kn_tensor *idx = kn_nonzero(pos);"), "%s", m);
}

Test(nonzero, graph_breaks_log) {
  kn_log_setting s[] = {KN_LOG_FLAG("graph_breaks", 1)};
  kn_test_logging_twice(s, 1, gb_body, NULL);
}

Test(nonzero, trace_records) {
  char *dir = kn_test_trace_start();
  kn_compiled *f = KN_COMPILE(nz_fn, NULL);
  kn_scope_begin();
  cr_assert(kn_call_t(f, vec4(-1, 2, -3, 4)), "%s", kn_last_error());
  kn_scope_end();
  char *why = kn_test_dyn_payload("dynamo_graph_break_reason", 0);
  cr_assert(why);
  cr_expect(strstr(why, "Graph Break Reason: Dynamic shape operator"), "%s", why);
  cr_expect(strstr(why, "dynamic shape operator: kiln.ops.nonzero"), "%s", why);
  free(why);
  /* the segment after the break reads nonzero's output as L['___stack0'] */
  char *code = kn_test_dyn_payload("dynamo_output_graph", 1);
  cr_assert(code);
  cr_expect(strstr(code, "L_stack0_: \"i64[2, 1][1, 1]cpu\""), "%s", code);
  cr_expect(strstr(code, "kiln.ops.mul(l_stack0_, 10)"), "%s", code);
  free(code);
  uint64_t defects = 99;
  char *all = kn_test_dyn_trace(true, &defects);
  cr_expect_eq(defects, 0);
  cr_expect_eq(kn_test_count_sub(all, "\"dynamo_output_graph\""), 2, "%s", all);
  free(all);
  kn_compiled_free(f);
  kn_trace_disable();
  kn_test_rmdir(dir);
}

/* A break after the nonzero break: the replay (a new branch at the later
** break) re-runs nonzero eagerly on the real values and carries its output. */
static kn_tensor *nz_then_if(kn_tensor *x) {
  kn_tensor *idx = kn_nonzero(kn_relu(x));
  if (kn_is_true(kn_gt_scalar(kn_sum(idx), kn_int(2)))) return kn_mul_scalar(idx, kn_int(2));
  return kn_mul_scalar(idx, kn_int(3));
}

Test(nonzero, later_break_branches) {
  kn_compile_counter_clear(&cc);
  kn_compile_options o = {.backend_fn = kn_compile_counter_backend, .backend_ud = &cc};
  kn_compiled *f = KN_COMPILE(nz_then_if, &o);
  kn_scope_begin();
  /* rows [1], [3]: sum 4 > 2 -> * 2 */
  expect_coords(kn_call_t(f, vec4(-1, 2, -3, 4)), 2, 1, (int64_t[]){2, 6});
  /* rows [0], [1]: sum 1 -> * 3 (same count, other answer at the later break) */
  expect_coords(kn_call_t(f, vec4(1, 2, -3, -4)), 2, 1, (int64_t[]){0, 3});
  int frames = cc.frame_count;
  /* both cached now */
  expect_coords(kn_call_t(f, vec4(-1, -2, 3, 4)), 2, 1, (int64_t[]){4, 6});
  expect_coords(kn_call_t(f, vec4(2, 1, -3, -4)), 2, 1, (int64_t[]){0, 3});
  cr_expect_eq(cc.frame_count, frames);
  kn_scope_end();
  kn_compiled_free(f);
}
