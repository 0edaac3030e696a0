/*
** test_dynamo_explain.c: kn_explain, the C form of torch._dynamo.explain, on
** the seed functions (test_structured_trace.py's example_fn and
** example_training_fn, with the training fn's two breaks written as
** kn_graph_break like test_dynamo_trace.c does), a data-dependent branch,
** recompile cases (explaining never touches the function's cache), errors.
*/
#pragma GCC optimize("no-optimize-sibling-calls")
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kiln/compile.h"
#include "kiln/kiln.h"
#include "support/dynamo_util.h"

TestSuite(explain, .init = kn_test_dynamo_setup, .fini = kn_test_dynamo_teardown);

static kn_tensor *example_fn(kn_tensor *a) {
  kn_tensor *output = kn_mul(a, kn_ones(KN_SHAPE(1000, 1000), KN_FLOAT32));
  output = kn_add(output, kn_ones(KN_SHAPE(1000, 1000), KN_FLOAT32));
  return output;
}

/* spec §8 (logging_and_recompile_ux.md): the TENSOR_MATCH text */
#define EXAMPLE_GUARD                                                                    \
  "TENSOR_MATCH: check_tensor(L['a'], Tensor, DispatchKeySet(CPU, BackendSelect, "       \
  "ADInplaceOrView, AutogradCPU), torch.float32, device=None, requires_grad=%s, "       \
  "size=[%s], stride=[%s])"

static void expect_ops(const kn_explain_graph *g, int n, const char *const *ops) {
  cr_assert_eq(g->op_count, n);
  for (int i = 0; i < n; i++) cr_expect_str_eq(g->ops[i], ops[i]);
}

Test(explain, example_fn) {
  kn_compiled *f = KN_COMPILE(example_fn, NULL);
  kn_scope_begin();
  kn_explanation *e = kn_explain_t(f, kn_ones(KN_SHAPE(1000, 1000), KN_FLOAT32));
  cr_assert(e, "%s", kn_last_error());
  cr_expect_eq(e->graph_count, 1);
  cr_expect_eq(e->graph_break_count, 0);
  cr_expect_eq(e->op_count, 4);
  expect_ops(&e->graphs[0], 4,
             (const char *[]){"kiln.ops.full", "kiln.ops.mul", "kiln.ops.full", "kiln.ops.add"});
  cr_expect_str_eq(e->graphs[0].compile_id, "0/0");
  cr_expect(strstr(e->graphs[0].code, "        add: \"f32[1000, 1000][1000, 1]cpu\" = "
                                      "kiln.ops.add(mul, ones_1);  mul = ones_1 = None\n"),
            "%s", e->graphs[0].code);
  char guard[512];
  snprintf(guard, sizeof guard, EXAMPLE_GUARD, "False", "1000, 1000", "1000, 1");
  cr_assert_eq(e->nguards, 2);
  cr_expect_str_eq(e->guards[0], "GLOBAL_STATE: ___check_global_state()");
  cr_expect_str_eq(e->guards[1], guard);
  char *s = kn_explanation_str(e);
  char want[2048];
  snprintf(want, sizeof want,
           "Graph Count: 1\nGraph Break Count: 0\nOp Count: 4\nBreak Reasons:\n"
           "Ops per Graph:\n  Ops 1:\n    kiln.ops.full\n    kiln.ops.mul\n"
           "    kiln.ops.full\n    kiln.ops.add\n"
           "Out Guards:\n  Guard 1:\n    GLOBAL_STATE: ___check_global_state()\n"
           "  Guard 2:\n    %s\n", guard);
  cr_expect_str_eq(s, want);
  free(s);
  kn_explanation_free(e);
  kn_scope_end();
  kn_compiled_free(f);
}

/* The seed's example_training_fn, its breaks as in test_dynamo_trace.c. */
static int break_line[2];
static kn_tensor *example_training_fn(kn_tensor *a) {
  kn_graph_break(); break_line[0] = __LINE__;
  kn_tensor *output = kn_mul(a, kn_ones(KN_SHAPE(1000, 1000), KN_FLOAT32));
  output = kn_add(output, kn_ones(KN_SHAPE(1000, 1000), KN_FLOAT32));
  kn_tensor *s = kn_sum(output);
  kn_graph_break(); break_line[1] = __LINE__;
  (void)s;
  return output;
}

static void expect_break(const kn_explain_break *b, const char *reason, const char *fn, int line,
                         const char *code) {
  cr_expect_str_eq(b->reason, reason);
  cr_assert_eq(b->nstack, 1);
  cr_expect_str_eq(b->stack[0].file, __FILE__);
  cr_expect_str_eq(b->stack[0].func, fn);
  cr_expect_eq(b->stack[0].line, line);
  cr_expect_str_eq(b->stack[0].code, code);
}

Test(explain, training_fn_with_breaks) {
  kn_compiled *f = KN_COMPILE(example_training_fn, NULL);
  kn_scope_begin();
  kn_tensor *a = kn_ones(KN_SHAPE(1000, 1000), KN_FLOAT32);
  cr_assert_eq(kn_set_requires_grad(a, true), KN_OK);
  kn_explanation *e = kn_explain_t(f, a);
  cr_assert(e, "%s", kn_last_error());
  /* three segments: the empty ones before the first and after the second
  ** break are not graphs */
  cr_expect_eq(e->graph_count, 1);
  cr_expect_eq(e->graph_break_count, 2);
  cr_expect_eq(e->op_count, 5);
  expect_ops(&e->graphs[0], 5,
             (const char *[]){"kiln.ops.full", "kiln.ops.mul", "kiln.ops.full", "kiln.ops.add",
                              "kiln.ops.sum"});
  cr_expect_str_eq(e->graphs[0].compile_id, "1/0");
  for (int i = 0; i < 2; i++)
    expect_break(&e->breaks[i], "Call to `kn_graph_break()`", "example_training_fn",
                 break_line[i], i ? "kn_graph_break(); break_line[1] = __LINE__;"
                                  : "kn_graph_break(); break_line[0] = __LINE__;");
  char guard[512];
  snprintf(guard, sizeof guard, EXAMPLE_GUARD, "True", "1000, 1000", "1000, 1");
  cr_assert_eq(e->nguards, 2);
  cr_expect_str_eq(e->guards[1], guard);
  char *s = kn_explanation_str(e);
  char want[512];
  snprintf(want, sizeof want,
           "Graph Count: 1\nGraph Break Count: 2\nOp Count: 5\nBreak Reasons:\n"
           "  Break Reason 1:\n    Reason: Call to `kn_graph_break()`\n    User Stack:\n"
           "      File \"%s\", line %d, in example_training_fn\n"
           "        kn_graph_break(); break_line[0] = __LINE__;\n"
           "  Break Reason 2:\n", __FILE__, break_line[0]);
  cr_expect(!strncmp(s, want, strlen(want)), "%s", s);
  free(s);
  kn_explanation_free(e);
  kn_scope_end();
  kn_compiled_free(f);
}

static int branch_line;
static kn_tensor *branchy(kn_tensor *x) {
  kn_tensor *r;
  branch_line = __LINE__ + 1;
  if (kn_is_true(kn_gt_scalar(kn_sum(x), kn_int(0))))
    r = kn_relu(x);
  else
    r = kn_neg(x);
  return r;
}

Test(explain, data_dependent_branch) {
  kn_compile_options o = {.fullgraph = true}; /* explain reports breaks even so */
  kn_compiled *f = KN_COMPILE(branchy, &o);
  kn_scope_begin();
  kn_explanation *e = kn_explain_t(f, kn_full(KN_SHAPE(3), kn_float(-1), KN_FLOAT32));
  cr_assert(e, "%s", kn_last_error());
  cr_expect_eq(e->graph_count, 2);
  cr_expect_eq(e->graph_break_count, 1);
  expect_ops(&e->graphs[0], 2, (const char *[]){"kiln.ops.sum", "kiln.ops.gt"});
  expect_ops(&e->graphs[1], 1, (const char *[]){"kiln.ops.neg"}); /* the branch taken */
  cr_expect_str_eq(e->graphs[1].compile_id, "1/0");
  expect_break(&e->breaks[0], "Data-dependent branching", "branchy", branch_line,
               "if (kn_is_true(kn_gt_scalar(kn_sum(x), kn_int(0))))");
  kn_explanation_free(e);
  kn_scope_end();
  kn_compiled_free(f);
}

/* Recompile cases: explaining other inputs neither adds nor replaces a cache
** entry, does not call the backend and does not count against the limit. */
static kn_tensor *scale_fn(kn_tensor *a) { return kn_mul_scalar(kn_relu(a), kn_float(2)); }

static int guard_failures;
static void on_guard_fail(const kn_guard_failure *g, void *ud) {
  (void)g, (void)ud;
  guard_failures++;
}

Test(explain, recompile_cases_leave_the_cache_alone) {
  kn_compile_counter cc = {0};
  kn_compile_options o = {.backend_fn = kn_compile_counter_backend, .backend_ud = &cc,
                          .cache_size_limit = 2, .guard_fail_fn = on_guard_fail};
  kn_compiled *f = KN_COMPILE(scale_fn, &o);
  guard_failures = 0;
  kn_scope_begin();
  kn_tensor *x34 = kn_ones(KN_SHAPE(3, 4), KN_FLOAT32), *x54 = kn_ones(KN_SHAPE(5, 4), KN_FLOAT32);
  cr_assert(kn_call_t(f, x34), "%s", kn_last_error());
  cr_assert_eq(cc.frame_count, 1);
  for (int i = 0; i < 3; i++) { /* more explains than the cache limit */
    kn_explanation *e = kn_explain_t(f, kn_ones(KN_SHAPE(5, 4), KN_FLOAT64));
    cr_assert(e, "%s", kn_last_error());
    cr_expect_eq(e->graph_count, 1);
    char want[512];
    snprintf(want, sizeof want,
             "TENSOR_MATCH: check_tensor(L['a'], Tensor, DispatchKeySet(CPU, BackendSelect, "
             "ADInplaceOrView, AutogradCPU), torch.float64, device=None, requires_grad=False, "
             "size=[5, 4], stride=[4, 1])");
    cr_expect_str_eq(e->guards[1], want);
    kn_explanation_free(e);
  }
  cr_expect_eq(cc.frame_count, 1); /* the backend was not called */
  cr_expect_eq(guard_failures, 0); /* no recompile happened */
  cr_assert(kn_call_t(f, x34));
  cr_expect_eq(cc.frame_count, 1); /* the entry is still there */
  cr_assert(kn_call_t(f, x54));      /* a real recompile: automatic dynamic */
  cr_expect_eq(cc.frame_count, 2);
  cr_expect_eq(guard_failures, 1);
  /* after the recompile, explain still shows a first call's (static) graph */
  kn_explanation *e = kn_explain_t(f, x54);
  cr_assert(e);
  cr_expect(strstr(e->guards[1], "size=[5, 4]"), "%s", e->guards[1]);
  kn_explanation_free(e);
  kn_scope_end();
  kn_compiled_free(f);
}

static kn_tensor *dynamo_error_fn(kn_tensor *a) {
  kn_tensor *output = kn_mul(a, kn_ones(KN_SHAPE(1000, 1000), KN_FLOAT32));
  output = kn_add(output, kn_ones(KN_SHAPE(10, 10), KN_FLOAT32));
  return output;
}

Test(explain, errors) {
  kn_compiled *f = KN_COMPILE(dynamo_error_fn, NULL);
  kn_scope_begin();
  kn_tensor *a = kn_ones(KN_SHAPE(1000, 1000), KN_FLOAT32);
  cr_expect_null(kn_explain_t(f, a));
  cr_expect_eq(kn_last_status(), KN_ESHAPE);
  cr_expect(strstr(kn_last_error(), "The size of tensor a (1000) must match the size of tensor b "
                                    "(10) at non-singleton dimension 1"), "%s", kn_last_error());
  cr_expect_null(kn_explain(NULL, NULL, 0));
  cr_expect_str_eq(kn_last_error(), "kn_explain: the compiled function is NULL");
  cr_expect_null(kn_explain(f, (kn_value[]){kn_vint(3)}, 1));
  cr_expect_str_eq(kn_last_error(), "kn_explain: dynamo_error_fn: argument 0: expected a tensor");
  cr_expect_null(kn_explain_t(f, a, a));
  cr_expect_str_eq(kn_last_error(), "kn_explain: dynamo_error_fn expects 1 arguments, got 2");
  kn_scope_end();
  kn_compiled_free(f);
}
