/*
** test_dynamo_trace.c: the structured-trace records the capture frontend
** writes, compared with the seed test_structured_trace.py after the seed's
** own normalization (STACK/HASH/METRICS/ID/VIEW_FUNC), keeping the records
** this layer owns (aot_* and inductor_* records come from later layers). Every
** trace is also read back by the strict reader with zero defects.
*/
/* Keep the frames of functions that end in a tail call to a kiln op, so
** traced ops have their exact source lines (see docs/DYNAMO.md). */
#pragma GCC optimize("no-optimize-sibling-calls")
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kiln/compile.h"
#include "kiln/kiln.h"
#include "kiln/trace.h"
#include "support/dynamo_util.h"
#include "support/trace_util.h"

/* The capture layer's own traces/records: the interpreter backend, so no
** AOT or code-generator events mix in. */
static const kn_compile_options eager = {.backend = "eager"};

static char *dir;
static void setup(void) {
  kn_reset();
  dir = kn_test_trace_start();
}
static void teardown(void) {
  kn_trace_disable();
  kn_test_rmdir(dir);
  kn_reset();
}
TestSuite(dynamo_trace, .init = setup, .fini = teardown);

#define CTX(f, c, a) "\"frame_id\": " #f ", \"frame_compile_id\": " #c ", \"attempt\": " #a
#define DESC(f, c, a, extra, src)                                                               \
  "{\"describe_storage\": {\"id\": 0, \"describer_id\": \"ID\", \"size\": 4000000}, " CTX(f, c, a) "}\n" \
  "{\"describe_tensor\": {\"id\": 0, \"ndim\": 2, \"dtype\": \"torch.float32\", \"device\": "       \
  "\"device(type='cpu')\", \"size\": [1000, 1000], \"dynamo_hint_overrides\": {}, " extra          \
  "\"stride\": [1000, 1], \"storage\": 0, \"view_func\": \"VIEW_FUNC\", \"describer_id\": \"ID\"}, " \
  CTX(f, c, a) "}\n"                                                                             \
  "{\"describe_source\": {\"describer_id\": \"ID\", \"id\": 0, \"source\": \"" src "\"}, " CTX(f, c, a) "}\n"

static kn_tensor *example_fn(kn_tensor *a) {
  kn_tensor *output = kn_name(kn_mul(a, kn_ones(KN_SHAPE(1000, 1000), KN_FLOAT32)), "output");
  output = kn_name(kn_add(output, kn_ones(KN_SHAPE(1000, 1000), KN_FLOAT32)), "output");
  return output;
}

static void check_trace(const char *expected_seed) {
  uint64_t defects = 99;
  char *got = kn_test_dyn_trace(true, &defects);
  char *want = kn_test_dyn_filter(expected_seed);
  cr_expect_eq(defects, 0, "strict reader defects: %llu", (unsigned long long)defects);
  cr_expect_str_eq(got, want);
  free(got);
  free(want);
}

Test(dynamo_trace, example_fn) {
  kn_compiled *f = KN_COMPILE(example_fn, &eager);
  kn_scope_begin();
  kn_tensor *y = kn_call_t(f, kn_ones(KN_SHAPE(1000, 1000), KN_FLOAT32));
  cr_assert(y, "%s", kn_last_error());
  cr_expect_eq(kn_get(y, (int64_t[]){5, 7}), 2.0);
  kn_scope_end();
  /* the seed's expected text (records owned by later layers are filtered) */
  check_trace(
      "{\"dynamo_start\": {\"stack\": \"STACK\"}, " CTX(0, 0, 0) "}\n"
      DESC(0, 0, 0, "\"is_leaf\": true, ", "L['a']")
      "{\"dynamo_output_graph\": {\"sizes\": {\"l_a_\": [1000, 1000], \"ones\": [1000, 1000], "
      "\"output\": [1000, 1000], \"ones_1\": [1000, 1000], \"output_1\": [1000, 1000]}}, "
      CTX(0, 0, 0) ", \"has_payload\": \"HASH\"}\n"
      "{\"artifact\": {\"name\": \"before_pre_grad_graph\", \"encoding\": \"string\"}, " CTX(0, 0, 0) ", \"has_payload\": \"HASH\"}\n"
      "{\"aot_inference_graph\": {}, " CTX(0, 0, 0) ", \"has_payload\": \"HASH\"}\n"
      "{\"dynamo_cpp_guards_str\": {}, " CTX(0, 0, 0) ", \"has_payload\": \"HASH\"}\n"
      "{\"compilation_metrics\": \"METRICS\", " CTX(0, 0, 0) "}\n");
  /* payloads: the graph code and the guard dump */
  char *code = kn_test_dyn_payload("dynamo_output_graph", 0);
  cr_assert(code);
  cr_expect(strstr(code, "def forward(self, L_a_: \"f32[1000, 1000][1000, 1]cpu\"):"), "%s", code);
  cr_expect(strstr(code, "output_1: \"f32[1000, 1000][1000, 1]cpu\" = kiln.ops.add(output, ones_1)"), "%s", code);
  free(code);
  char *guards = kn_test_dyn_payload("dynamo_cpp_guards_str", 0);
  cr_assert(guards);
  cr_expect(strstr(guards, "TENSOR_MATCH: check_tensor(L['a'], Tensor, DispatchKeySet(CPU, "
                           "BackendSelect, ADInplaceOrView, AutogradCPU), torch.float32, "
                           "device=None, requires_grad=False, size=[1000, 1000], stride=[1000, 1])"),
            "%s", guards);
  free(guards);
  kn_compiled_free(f);
}

/* fn(x, y) = add(x, y), called with a tensor y, then with the int 1. */
static kn_value add_fn(const kn_value *args, int nargs, void *ud) {
  (void)nargs;
  (void)ud;
  kn_tensor *x = args[0].u.t;
  if (args[1].kind == KN_VTENSOR) return kn_vtensor(kn_add(x, args[1].u.t));
  return kn_vtensor(kn_add_scalar(x, kn_int(args[1].u.i)));
}

Test(dynamo_trace, recompiles) {
  const char *names[] = {"x", "y", NULL};
  kn_compile_options o = {.backend = "eager", .arg_names = names};
  kn_compiled *f = kn_compile_fn(add_fn, NULL, 2, "fn", __FILE__, __LINE__, &o);
  kn_scope_begin();
  kn_tensor *x = kn_ones(KN_SHAPE(1000, 1000), KN_FLOAT32);
  kn_value out;
  cr_assert_eq(kn_call(f, (kn_value[]){kn_vtensor(x), kn_vtensor(kn_ones(KN_SHAPE(1000, 1000), KN_FLOAT32))}, 2, &out), KN_OK, "%s", kn_last_error());
  cr_expect_eq(kn_get(out.u.t, (int64_t[]){1, 1}), 2.0);
  kn_value_release(out);
  cr_assert_eq(kn_call(f, (kn_value[]){kn_vtensor(x), kn_vint(1)}, 2, &out), KN_OK, "%s", kn_last_error());
  cr_expect_eq(kn_get(out.u.t, (int64_t[]){1, 1}), 2.0);
  kn_value_release(out);
  kn_scope_end();
  /* the seed's records: y changed type (tensor -> int), so automatic dynamic
  ** gives it a symbol on the recompile (kiln numbers symbols from s0; the
  ** seed's ShapeEnv was at s48). C code reads the int, so kiln specialises
  ** the symbol at once: the entry keeps the guard L['y'] == 1 (see
  ** docs/DYNAMO.md, "Int arguments"). */
  check_trace(
      "{\"dynamo_start\": {\"stack\": \"STACK\"}, " CTX(0, 0, 0) "}\n"
      DESC(0, 0, 0, "\"is_leaf\": true, ", "L['x']")
      "{\"describe_storage\": {\"id\": 1, \"describer_id\": \"ID\", \"size\": 4000000}, " CTX(0, 0, 0) "}\n"
      "{\"describe_tensor\": {\"id\": 1, \"ndim\": 2, \"dtype\": \"torch.float32\", \"device\": \"device(type='cpu')\", \"size\": [1000, 1000], \"dynamo_hint_overrides\": {}, \"is_leaf\": true, \"stride\": [1000, 1], \"storage\": 1, \"view_func\": \"VIEW_FUNC\", \"describer_id\": \"ID\"}, " CTX(0, 0, 0) "}\n"
      "{\"describe_source\": {\"describer_id\": \"ID\", \"id\": 1, \"source\": \"L['y']\"}, " CTX(0, 0, 0) "}\n"
      "{\"dynamo_output_graph\": {\"sizes\": {\"l_x_\": [1000, 1000], \"l_y_\": [1000, 1000], \"add\": [1000, 1000]}}, " CTX(0, 0, 0) ", \"has_payload\": \"HASH\"}\n"
      "{\"dynamo_cpp_guards_str\": {}, " CTX(0, 0, 0) ", \"has_payload\": \"HASH\"}\n"
      "{\"compilation_metrics\": \"METRICS\", " CTX(0, 0, 0) "}\n"
      "{\"artifact\": {\"name\": \"recompile_reasons\", \"encoding\": \"json\"}, " CTX(0, 1, 0) ", \"has_payload\": \"HASH\"}\n"
      "{\"dynamo_start\": {\"stack\": \"STACK\"}, " CTX(0, 1, 0) "}\n"
      DESC(0, 1, 0, "\"is_leaf\": true, ", "L['x']")
      "{\"create_symbol\": {\"symbol\": \"s0\", \"val\": \"1\", \"vr\": \"[-int_oo, int_oo]\", \"source\": \"L['y']\", \"user_stack\": \"STACK\", \"stack\": \"STACK\"}, " CTX(0, 1, 0) "}\n"
      "{\"dynamo_output_graph\": {\"sizes\": {\"l_x_\": [1000, 1000], \"add\": [1000, 1000]}}, " CTX(0, 1, 0) ", \"has_payload\": \"HASH\"}\n"
      "{\"dynamo_cpp_guards_str\": {}, " CTX(0, 1, 0) ", \"has_payload\": \"HASH\"}\n"
      "{\"compilation_metrics\": \"METRICS\", " CTX(0, 1, 0) "}\n");
  char *rr = kn_test_dyn_payload("recompile_reasons", 0);
  cr_assert(rr);
  cr_expect_str_eq(rr, "[\n\"0/0: expected type of 'L['y']' to be a tensor type, ' but found <class 'int'>\"\n]");
  free(rr);
  char *g = kn_test_dyn_payload("dynamo_cpp_guards_str", 1);
  cr_assert(g);
  cr_expect(strstr(g, "L['y'] == 1"), "%s", g);
  free(g);
  kn_compiled_free(f);
}

static kn_tensor *dynamo_error_fn(kn_tensor *a) {
  kn_tensor *output = kn_name(kn_mul(a, kn_ones(KN_SHAPE(1000, 1000), KN_FLOAT32)), "output");
  output = kn_name(kn_add(output, kn_ones(KN_SHAPE(10, 10), KN_FLOAT32)), "output");
  return output;
}

Test(dynamo_trace, dynamo_error) {
  kn_compiled *f = KN_COMPILE(dynamo_error_fn, &eager);
  kn_scope_begin();
  kn_tensor *a = kn_ones(KN_SHAPE(1000, 1000), KN_FLOAT32);
  cr_assert_eq(kn_set_requires_grad(a, true), KN_OK);
  kn_tensor *y = kn_call_t(f, a);
  cr_expect_null(y);
  const char *msg = kn_last_error();
  cr_expect(strstr(msg, "size=(1000, 1000)") && strstr(msg, "size=(10, 10)"), "%s", msg);
  cr_expect(strstr(msg, "The size of tensor a (1000) must match the size of tensor b (10)"), "%s", msg);
  cr_expect(strstr(msg, "in dynamo_error_fn\n    output = kn_name(kn_add(output, kn_ones(KN_SHAPE(10, 10), KN_FLOAT32)), \"output\");"), "%s", msg);
  kn_scope_end();
  check_trace(
      "{\"dynamo_start\": {\"stack\": \"STACK\"}, " CTX(0, 0, 0) "}\n"
      DESC(0, 0, 0, "\"is_leaf\": true, \"requires_grad\": true, ", "L['a']")
      "{\"artifact\": {\"name\": \"dynamo_error\", \"encoding\": \"string\"}, " CTX(0, 0, 0) ", \"has_payload\": \"HASH\"}\n"
      "{\"compilation_metrics\": \"METRICS\", " CTX(0, 0, 0) "}\n");
  char *m = kn_test_dyn_metadata("compilation_metrics", 0);
  cr_assert(m);
  cr_expect(strstr(m, "\"fail_type\":\"shape_error\""), "%s", m);
  cr_expect(strstr(m, "\"fail_reason\":\"Failed running call_function kiln.ops.add(*(FakeTensor(..., size=(1000, 1000)"), "%s", m);
  cr_expect(strstr(m, "\"co_name\":\"dynamo_error_fn\""), "%s", m);
  char *err = kn_test_dyn_payload("dynamo_error", 0);
  cr_expect(err && !strncmp(err, "Traceback (most recent call last):\n"
                                 "kiln.shape_error: Failed running call_function kiln.ops.add(", 95),
            "%s", err ? err : "(none)");
  free(err);
  cr_expect(strstr(m, "\"graph_op_count\":null") || strstr(m, "\"graph_op_count\":0"), "%s", m);
  free(m);
  kn_compiled_free(f);
}

static kn_tensor *mm_fn(kn_tensor *a, kn_tensor *b) { return kn_matmul(a, b); }

Test(dynamo_trace, graph_sizes_dynamic) {
  kn_compile_options o = {.backend = "eager", .dynamic = KN_DYNAMIC_TRUE};
  kn_compiled *f = KN_COMPILE(mm_fn, &o);
  kn_scope_begin();
  kn_tensor *y = kn_call_t(f, kn_ones(KN_SHAPE(5, 3), KN_FLOAT32), kn_ones(KN_SHAPE(3, 4), KN_FLOAT32));
  cr_assert(y, "%s", kn_last_error());
  cr_expect_eq(kn_size(y, 0), 5);
  cr_expect_eq(kn_size(y, 1), 4);
  cr_expect_eq(kn_get(y, (int64_t[]){4, 3}), 3.0);
  kn_scope_end();
  uint64_t defects = 9;
  char *got = kn_test_dyn_trace(true, &defects);
  cr_expect_eq(defects, 0);
  cr_expect(strstr(got, "{\"create_symbol\": {\"symbol\": \"s0\", \"val\": \"5\", \"vr\": \"[2, int_oo]\", \"source\": \"L['a'].size()[0]\", \"user_stack\": \"STACK\", \"stack\": \"STACK\"}, " CTX(0, 0, 0) "}\n"), "%s", got);
  cr_expect(strstr(got, "{\"guard_added_fast\": {\"expr\": \"Eq(s1, s2)\", \"user_stack\": \"STACK\", \"stack\": \"STACK\"}, " CTX(0, 0, 0) "}\n"), "%s", got);
  cr_expect(strstr(got, "{\"dynamo_output_graph\": {\"sizes\": {\"l_a_\": [\"s0\", \"s1\"], \"l_b_\": [\"s1\", \"s3\"], \"matmul\": [\"s0\", \"s3\"]}}, "), "%s", got);
  free(got);
  kn_compiled_free(f);
}

/* The seed's example_training_fn has two graph breaks (creating a tensor
** that requires grad, and backward()); kiln's purity rule keeps autograd
** calls out of compiled functions, so the port breaks explicitly at the
** same two places and returns what the seed returns. */
static kn_tensor *example_training_fn(kn_tensor *a) {
  kn_graph_break();
  kn_tensor *output = kn_name(kn_mul(a, kn_ones(KN_SHAPE(1000, 1000), KN_FLOAT32)), "output");
  output = kn_name(kn_add(output, kn_ones(KN_SHAPE(1000, 1000), KN_FLOAT32)), "output");
  kn_tensor *s = kn_sum(output);
  kn_graph_break();
  (void)s;
  return output;
}

Test(dynamo_trace, example_training_fn_graph_break_shape) {
  kn_compiled *f = KN_COMPILE(example_training_fn, &eager);
  kn_scope_begin();
  kn_tensor *a = kn_ones(KN_SHAPE(1000, 1000), KN_FLOAT32);
  cr_assert_eq(kn_set_requires_grad(a, true), KN_OK);
  kn_tensor *y = kn_call_t(f, a);
  cr_assert(y, "%s", kn_last_error());
  cr_expect_eq(kn_get(y, (int64_t[]){3, 3}), 2.0);
  cr_expect(kn_requires_grad(y));
  kn_scope_end();
  check_trace(
      "{\"dynamo_start\": {\"stack\": \"STACK\"}, " CTX(0, 0, 0) "}\n"
      DESC(0, 0, 0, "\"is_leaf\": true, \"requires_grad\": true, ", "L['a']")
      "{\"artifact\": {\"name\": \"dynamo_graph_break_reason\", \"encoding\": \"string\"}, " CTX(0, 0, 0) ", \"has_payload\": \"HASH\"}\n"
      DESC(0, 0, 1, "\"is_leaf\": true, \"requires_grad\": true, ", "L['a']")
      "{\"dynamo_cpp_guards_str\": {}, " CTX(0, 0, 1) ", \"has_payload\": \"HASH\"}\n"
      "{\"compilation_metrics\": \"METRICS\", " CTX(0, 0, 1) "}\n"
      "{\"dynamo_start\": {\"stack\": \"STACK\"}, " CTX(1, 0, 0) "}\n"
      DESC(1, 0, 0, "\"is_leaf\": true, \"requires_grad\": true, ", "L['___stack0']")
      "{\"artifact\": {\"name\": \"dynamo_graph_break_reason\", \"encoding\": \"string\"}, " CTX(1, 0, 0) ", \"has_payload\": \"HASH\"}\n"
      DESC(1, 0, 1, "\"is_leaf\": true, \"requires_grad\": true, ", "L['___stack0']")
      "{\"dynamo_output_graph\": {\"sizes\": {\"l_stack0_\": [1000, 1000], \"ones\": [1000, 1000], \"output\": [1000, 1000], \"ones_1\": [1000, 1000], \"output_1\": [1000, 1000], \"sum_1\": []}}, " CTX(1, 0, 1) ", \"has_payload\": \"HASH\"}\n"
      "{\"dynamo_cpp_guards_str\": {}, " CTX(1, 0, 1) ", \"has_payload\": \"HASH\"}\n"
      "{\"compilation_metrics\": \"METRICS\", " CTX(1, 0, 1) "}\n"
      /* the resume segment only returns `output`: described (as the seed's
      ** L['output']: C locals have no names), no guards (nothing compiled) */
      "{\"dynamo_start\": {\"stack\": \"STACK\"}, " CTX(2, 0, 0) "}\n"
      DESC(2, 0, 0, "\"requires_grad\": true, ", "L['___stack0']")
      "{\"compilation_metrics\": \"METRICS\", " CTX(2, 0, 0) "}\n");
  kn_compiled_free(f);
}

static kn_tensor *branchy(kn_tensor *x) {
  kn_tensor *r;
  if (kn_is_true(kn_gt_scalar(kn_sum(x), kn_int(0))))
    r = kn_mul_scalar(x, kn_float(2));
  else
    r = kn_mul_scalar(x, kn_float(3));
  return r;
}

Test(dynamo_trace, new_branch_is_a_recompile_of_the_resume_frame) {
  kn_compiled *f = KN_COMPILE(branchy, &eager);
  kn_scope_begin();
  cr_assert(kn_call_t(f, kn_ones(KN_SHAPE(4), KN_FLOAT32)));
  cr_assert(kn_call_t(f, kn_neg(kn_ones(KN_SHAPE(4), KN_FLOAT32))));
  cr_assert(kn_call_t(f, kn_ones(KN_SHAPE(4), KN_FLOAT32)));
  kn_scope_end();
  uint64_t defects = 9;
  char *got = kn_test_dyn_trace(true, &defects);
  cr_expect_eq(defects, 0);
  /* frame 0 (the condition), frame 1 compiled twice (one per answer) */
  cr_expect_eq(kn_test_count_sub(got, "{\"dynamo_start\""), 3, "%s", got);
  cr_expect(strstr(got, "{\"dynamo_start\": {\"stack\": \"STACK\"}, " CTX(1, 0, 0) "}"), "%s", got);
  cr_expect(strstr(got, "{\"dynamo_start\": {\"stack\": \"STACK\"}, " CTX(1, 1, 0) "}"), "%s", got);
  cr_expect_eq(kn_test_count_sub(got, "{\"dynamo_output_graph\""), 3, "%s", got);
  cr_expect_eq(kn_test_count_sub(got, "{\"compilation_metrics\""), 3, "%s", got);
  cr_expect_eq(kn_test_count_sub(got, "\"name\": \"dynamo_graph_break_reason\""), 1, "%s", got);
  free(got);
  kn_compiled_free(f);
}

/* Two handles of one C function (kn_compile twice) are two frames: each has
** its own cache, options and cache limit, so the second handle's first
** compile is frame 1, compile 0, with no recompile_reasons (PyTorch keys
** frames by code object: there it would be 0/1). docs/DYNAMO.md. */
Test(dynamo_trace, second_handle_of_a_function_is_a_new_frame) {
  kn_compiled *f = KN_COMPILE(example_fn, &eager), *g = KN_COMPILE(example_fn, &eager);
  kn_scope_begin();
  cr_assert(kn_call_t(f, kn_ones(KN_SHAPE(1000, 1000), KN_FLOAT32)));
  cr_assert(kn_call_t(g, kn_ones(KN_SHAPE(1000, 1000), KN_FLOAT32)));
  cr_assert(kn_call_t(f, kn_ones(KN_SHAPE(1000, 1000), KN_FLOAT32))); /* cached */
  kn_scope_end();
  kn_compiled_free(f);
  kn_compiled_free(g);
  uint64_t defects = 99;
  char *got = kn_test_dyn_trace(true, &defects);
  cr_expect_eq(kn_test_count_sub(got, "{\"dynamo_start\": {\"stack\": \"STACK\"}, " CTX(0, 0, 0)), 1,
               "%s", got);
  cr_expect_eq(kn_test_count_sub(got, "{\"dynamo_start\": {\"stack\": \"STACK\"}, " CTX(1, 0, 0)), 1,
               "%s", got);
  cr_expect_eq(kn_test_count_sub(got, "\"dynamo_start\""), 2, "%s", got);
  cr_expect_null(strstr(got, "recompile_reasons"), "%s", got);
  free(got);
}
