/*
** test_dynamo_guards.c: guard kinds beyond tensor checks (aliasing, grad
** mode, scalars, None, modules), automatic and explicit dynamic shapes,
** backend failures (WON'T CONVERT, suppress_errors), kn_export, kn_reset,
** and leaks on every path.
*/
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Keep the frames of functions that end in a tail call to a kiln op. */
#pragma GCC optimize("no-optimize-sibling-calls")

#include "core/error.h"
#include "kiln/autograd.h"
#include "kiln/compile.h"
#include "kiln/graph.h"
#include "kiln/kiln.h"
#include "kiln/log.h"
#include "support/dynamo_util.h"
#include "support/log_capture.h"

TestSuite(guards, .init = kn_test_dynamo_setup, .fini = kn_test_dynamo_teardown);

static char reason[8][512];
static int nreason;
static void on_fail(const kn_guard_failure *g, void *ud) {
  (void)ud;
  if (nreason < 8) snprintf(reason[nreason++], sizeof reason[0], "%s", g->reason);
}

static kn_tensor *add2(kn_tensor *a, kn_tensor *b) {
  kn_tensor *r = kn_add(a, b);
  return r;
}

Test(guards, aliasing) {
  kn_compile_counter cc = {0};
  kn_compile_options o = {.guard_fail_fn = on_fail, .backend_fn = kn_compile_counter_backend,
                          .backend_ud = &cc};
  kn_compiled *f = KN_COMPILE(add2, &o);
  kn_scope_begin();
  kn_tensor *x = kn_full(KN_SHAPE(2), kn_float(1), KN_FLOAT32);
  kn_tensor *y = kn_full(KN_SHAPE(2), kn_float(5), KN_FLOAT32);
  nreason = 0;
  cr_expect_eq(kn_get(kn_call_t(f, x, x), (int64_t[]){0}), 2.0);
  cr_expect_eq(kn_get(kn_call_t(f, x, y), (int64_t[]){0}), 6.0);
  cr_assert_eq(nreason, 1);
  cr_expect(!strncmp(reason[0], "L['a'] is L['b']", 16), "%s", reason[0]);
  nreason = 0;
  kn_reset();
  kn_compile_counter_clear(&cc);
  cr_expect_eq(kn_get(kn_call_t(f, x, y), (int64_t[]){0}), 6.0);
  cr_expect_eq(kn_get(kn_call_t(f, y, y), (int64_t[]){0}), 10.0);
  cr_assert_eq(nreason, 1);
  cr_expect_str_eq(reason[0], "Duplicate tensor found where not expected! L['b']should not "
                              "alias to anything, but is aliased");
  cr_expect_eq(cc.frame_count, 2);
  kn_scope_end();
  kn_compiled_free(f);
}

/* sum over i of (i + 1) * args[i] */
#define MANY 40
static kn_value weighted_sum(const kn_value *args, int nargs, void *ud) {
  (void)ud;
  kn_tensor *r = kn_mul_scalar(args[0].u.t, kn_float(1));
  for (int i = 1; i < nargs; i++) r = kn_add(r, kn_mul_scalar(args[i].u.t, kn_float(i + 1)));
  return kn_vtensor(r);
}

static double call_sum(kn_compiled *f, const kn_value *args) {
  kn_value out;
  cr_assert_eq(kn_call(f, args, MANY, &out), KN_OK, "%s", kn_last_error());
  double v = kn_get(out.u.t, (int64_t[]){0});
  kn_value_release(out);
  return v;
}

/* Over 16 tensor inputs the unaliased check keeps a set of the tensors seen
** (guards.c): an alias in any position, the first and the last included,
** still fails the entry traced with distinct tensors, and distinct tensors
** still hit it. */
Test(guards, aliasing_many_inputs) {
  kn_compile_counter cc = {0};
  kn_compile_options o = {.guard_fail_fn = on_fail, .backend_fn = kn_compile_counter_backend,
                          .backend_ud = &cc};
  kn_compiled *f = kn_compile_fn(weighted_sum, NULL, MANY, "weighted_sum", __FILE__, __LINE__, &o);
  cr_assert_not_null(f);
  kn_scope_begin();
  kn_value args[MANY];
  double want = 0;
  for (int i = 0; i < MANY; i++) {
    args[i] = kn_vtensor(kn_full(KN_SHAPE(2), kn_float(i), KN_FLOAT32));
    want += (double)(i + 1) * i;
  }
  nreason = 0;
  cr_expect_eq(call_sum(f, args), want);
  cr_expect_eq(call_sum(f, args), want);
  cr_expect_eq(cc.frame_count, 1);
  cr_expect_eq(nreason, 0);
  static const int pairs[][2] = {{30, 5}, {39, 0}, {1, 0}, {39, 38}};
  for (int p = 0; p < 4; p++) {
    kn_value a[MANY];
    memcpy(a, args, sizeof a);
    int dst = pairs[p][0], src = pairs[p][1];
    a[dst] = args[src];
    nreason = 0;
    kn_reset();
    kn_compile_counter_clear(&cc);
    cr_expect_eq(call_sum(f, args), want);
    double w = want + (double)(dst + 1) * (src - dst);
    cr_expect_eq(call_sum(f, a), w, "alias %d -> %d", dst, src);
    cr_expect_eq(nreason, 1, "alias %d -> %d", dst, src);
    cr_expect(strstr(reason[0], "Duplicate tensor found where not expected!") != NULL, "%s",
              reason[0]);
    cr_expect_eq(cc.frame_count, 2, "alias %d -> %d", dst, src);
    nreason = 0;
    cr_expect_eq(call_sum(f, a), w);
    cr_expect_eq(call_sum(f, args), want);
    cr_expect_eq(cc.frame_count, 2, "distinct and aliased calls hit their entries");
  }
  kn_scope_end();
  kn_compiled_free(f);
}

static kn_tensor *scale3(kn_tensor *a) {
  kn_tensor *r = kn_mul_scalar(a, kn_float(3));
  return r;
}

Test(guards, grad_mode) {
  kn_compile_options o = {.guard_fail_fn = on_fail};
  kn_compiled *f = KN_COMPILE(scale3, &o);
  kn_scope_begin();
  kn_tensor *x = kn_ones(KN_SHAPE(2), KN_FLOAT32);
  nreason = 0;
  cr_assert(kn_call_t(f, x));
  bool prev = kn_no_grad_begin();
  cr_assert(kn_call_t(f, x));
  kn_no_grad_end(prev);
  cr_assert_eq(nreason, 1);
  cr_expect_str_eq(reason[0], "global state changed: grad_mode True -> False");
  kn_scope_end();
  kn_compiled_free(f);
}

static kn_value scalars(const kn_value *args, int n, void *ud) {
  (void)n;
  (void)ud;
  kn_tensor *x = args[0].u.t;
  if (args[3].kind == KN_VNONE && args[2].u.b) x = kn_mul_scalar(x, kn_float(args[1].u.d));
  return kn_vtensor(x);
}

Test(guards, scalars_and_none) {
  kn_compile_options o = {.guard_fail_fn = on_fail,
                          .arg_names = (const char *[]){"x", "s", "flag", "opt", NULL}};
  kn_compiled *f = kn_compile_fn(scalars, NULL, 4, "scalars", __FILE__, __LINE__, &o);
  kn_scope_begin();
  kn_tensor *x = kn_ones(KN_SHAPE(2), KN_FLOAT32);
  kn_value out;
  kn_value a1[] = {kn_vtensor(x), kn_vdouble(0.1), kn_vbool(true), kn_vnone()};
  cr_assert_eq(kn_call(f, a1, 4, &out), KN_OK);
  cr_expect_float_eq(kn_get(out.u.t, (int64_t[]){0}), 0.1, 1e-6);
  kn_value_release(out);
  nreason = 0;
  kn_value a2[] = {kn_vtensor(x), kn_vdouble(0.5), kn_vbool(true), kn_vnone()};
  cr_assert_eq(kn_call(f, a2, 4, &out), KN_OK);
  cr_expect_float_eq(kn_get(out.u.t, (int64_t[]){0}), 0.5, 1e-6);
  kn_value_release(out);
  cr_assert_eq(nreason, 1);
  cr_expect(!strncmp(reason[0], "L['s'] == 0.1 ", 14), "%s", reason[0]);
  nreason = 0;
  kn_value a3[] = {kn_vtensor(x), kn_vdouble(0.5), kn_vbool(false), kn_vint(3)};
  cr_assert_eq(kn_call(f, a3, 4, &out), KN_OK);
  cr_expect_eq(kn_get(out.u.t, (int64_t[]){0}), 1.0);
  kn_value_release(out);
  cr_assert_eq(nreason, 2);
  cr_expect(!strncmp(reason[0], "L['flag'] == True ", 18), "%s", reason[0]);
  cr_expect(!strncmp(reason[1], "L['s'] == 0.1 ", 14), "%s", reason[1]);
  kn_scope_end();
  kn_compiled_free(f);
}

/* A module: linear layer weight/bias in a "layers" child named "0". */
static kn_value mod_fn(const kn_value *args, int n, void *ud) {
  (void)n;
  (void)ud;
  kn_module *m = args[0].u.m;
  kn_tensor *w = kn_module_get(m, "layers.0.weight");
  kn_tensor *b = kn_module_get(m, "layers.0.bias");
  return kn_vtensor(kn_add(kn_matmul(args[1].u.t, w), b));
}

Test(guards, modules) {
  char *dir = NULL;
  (void)dir;
  kn_compile_options o = {.arg_names = (const char *[]){"self", "x", NULL}};
  kn_compiled *f = kn_compile_fn(mod_fn, NULL, 2, "forward", __FILE__, __LINE__, &o);
  kn_scope_begin();
  kn_module *root = kn_module_new(), *layers = kn_module_new(), *l0 = kn_module_new();
  cr_assert_eq(kn_module_add_param(l0, "weight", kn_full(KN_SHAPE(3, 2), kn_float(2), KN_FLOAT32)), KN_OK);
  cr_assert_eq(kn_module_add_param(l0, "bias", kn_full(KN_SHAPE(2), kn_float(1), KN_FLOAT32)), KN_OK);
  cr_assert_eq(kn_module_add_child(layers, "0", l0), KN_OK);
  cr_assert_eq(kn_module_add_child(root, "layers", layers), KN_OK);
  kn_test_records r = {0};
  cr_assert_eq(kn_set_logs_str("graph_code"), KN_OK);
  kn_test_capture_begin(&r);
  kn_value out;
  kn_value args[] = {kn_vmodule(root), kn_vtensor(kn_ones(KN_SHAPE(4, 3), KN_FLOAT32))};
  cr_assert_eq(kn_call(f, args, 2, &out), KN_OK, "%s", kn_last_error());
  kn_test_capture_end(&r);
  cr_expect_eq(kn_get(out.u.t, (int64_t[]){3, 1}), 7.0);
  kn_value_release(out);
  const kn_test_record *g = kn_test_get_record(&r, "class GraphModule");
  cr_assert(g);
  cr_expect(strstr(g->message, "L_self_modules_layers_modules_0_parameters_weight_"), "%s", g->message);
  kn_test_records_free(&r);
  kn_module_free(root);
  kn_scope_end();
  kn_compiled_free(f);
}

static kn_tensor *sum_rows(kn_tensor *a) {
  kn_tensor *r = kn_sum_dims(a, (int64_t[]){1}, 1, false);
  return r;
}

Test(guards, automatic_dynamic) {
  kn_compile_counter cc = {0};
  kn_compile_options o = {.backend_fn = kn_compile_counter_backend, .backend_ud = &cc};
  kn_compiled *f = KN_COMPILE(sum_rows, &o);
  kn_scope_begin();
  for (int64_t n = 4; n <= 8; n++) {
    kn_tensor *y = kn_call_t(f, kn_ones(KN_SHAPE(n, 3), KN_FLOAT32));
    cr_assert(y, "%s", kn_last_error());
    cr_expect_eq(kn_size(y, 0), n);
    cr_expect_eq(kn_get(y, (int64_t[]){n - 1}), 3.0);
  }
  cr_expect_eq(cc.frame_count, 2); /* static, then s0 for the batch */
  /* sizes 0 and 1 stay specialised */
  cr_assert(kn_call_t(f, kn_ones(KN_SHAPE(1, 3), KN_FLOAT32)));
  cr_expect_eq(cc.frame_count, 3);
  /* the other dim is still static */
  cr_assert(kn_call_t(f, kn_ones(KN_SHAPE(5, 4), KN_FLOAT32)));
  cr_expect_eq(cc.frame_count, 4);
  kn_scope_end();
  kn_compiled_free(f);
}

static void dynamic_true_body(const kn_test_records *r, void *ud) {
  (void)ud;
  kn_reset();
  kn_compile_options o = {.dynamic = KN_DYNAMIC_TRUE, .guard_fail_fn = on_fail};
  kn_compiled *f = KN_COMPILE(sum_rows, &o);
  kn_scope_begin();
  nreason = 0;
  cr_assert(kn_call_t(f, kn_ones(KN_SHAPE(5, 3), KN_FLOAT32)));
  cr_assert(kn_call_t(f, kn_ones(KN_SHAPE(7, 9), KN_FLOAT32)));
  cr_expect_eq(nreason, 0);
  cr_assert(kn_call_t(f, kn_ones(KN_SHAPE(1, 9), KN_FLOAT32)));
  cr_assert_eq(nreason, 1);
  cr_expect(!strncmp(reason[0], "2 <= L['a'].size()[0]", 21), "%s", reason[0]);
  kn_scope_end();
  kn_compiled_free(f);
  cr_assert_eq(kn_test_count_artifact(r, "graph_sizes"), 2);
  const kn_test_record *g = &r->v[0];
  cr_expect(strstr(g->message, "l_a_: (s0, s1)\nl_a_ (concrete): (5, 3)\n"), "%s", g->message);
}

Test(guards, dynamic_true) {
  kn_log_setting s[] = {KN_LOG_FLAG("graph_sizes", 1)};
  kn_test_logging_twice(s, 1, dynamic_true_body, NULL);
}

static kn_status failing_backend(kn_graph_module *gm, kn_tensor *const *ex, int n, void *ud,
                                 kn_compiled_graph *out) {
  (void)gm;
  (void)ex;
  (void)n;
  (void)ud;
  (void)out;
  return kn__error(KN_EUNSUPPORTED, "LoweringException: AssertionError: target: kiln.ops.mul");
}

static void backend_failure_body(const kn_test_records *r, void *ud) {
  bool suppress = *(bool *)ud;
  kn_reset();
  kn_compile_options o = {.backend_fn = failing_backend, .suppress_errors = suppress};
  kn_compiled *f = KN_COMPILE(scale3, &o);
  kn_scope_begin();
  kn_tensor *y = kn_call_t(f, kn_ones(KN_SHAPE(2), KN_FLOAT32));
  if (suppress) {
    cr_assert(y, "%s", kn_last_error());
    cr_expect_eq(kn_get(y, (int64_t[]){1}), 3.0); /* ran eagerly */
  } else {
    cr_expect_null(y);
    cr_expect(strstr(kn_last_error(), "BackendCompilerFailed: backend='user_backend' raised:\n"
                                      "LoweringException: AssertionError: target: kiln.ops.mul"),
              "%s", kn_last_error());
  }
  kn_scope_end();
  kn_compiled_free(f);
  const kn_test_record *w = kn_test_get_record(r, "WON'T CONVERT scale3 ");
  cr_assert(w);
  cr_expect_eq(w->level, suppress ? KN_WARNING : KN_INFO);
  cr_expect(strstr(w->message, "Traceback (most recent call last):\n"
                               "kiln.BackendCompilerFailed: backend='user_backend' raised:"),
            "%s", w->message);
}

Test(guards, backend_failure_suppressed) {
  bool suppress = true;
  kn_log_setting s[] = {KN_LOG_LEVEL("dynamo", KN_INFO)};
  kn_test_logging_twice(s, 1, backend_failure_body, &suppress);
}

Test(guards, backend_failure_returned) {
  bool suppress = false;
  kn_log_setting s[] = {KN_LOG_LEVEL("dynamo", KN_INFO)};
  kn_test_logging_twice(s, 1, backend_failure_body, &suppress);
}

Test(guards, export_returns_a_graph_module) {
  kn_compile_counter cc = {0};
  kn_compile_options o = {.backend_fn = kn_compile_counter_backend, .backend_ud = &cc};
  kn_compiled *f = KN_COMPILE(add2, &o);
  kn_scope_begin();
  kn_tensor *x = kn_full(KN_SHAPE(2, 2), kn_float(2), KN_FLOAT32);
  kn_tensor *y = kn_full(KN_SHAPE(2, 2), kn_float(3), KN_FLOAT32);
  kn_graph_module *gm = kn_export(f, (kn_value[]){kn_vtensor(x), kn_vtensor(y)}, 2);
  cr_assert(gm, "%s", kn_last_error());
  cr_expect_eq(kn_graph_module_num_inputs(gm), 2);
  cr_expect_eq(kn_graph_module_num_outputs(gm), 1);
  kn_tensor *out = NULL;
  cr_assert_eq(kn_graph_module_call(gm, (kn_tensor *[]){y, y}, 2, &out, 1), KN_OK);
  cr_expect_eq(kn_get(out, (int64_t[]){1, 1}), 6.0);
  char *code = kn_graph_module_code(gm);
  cr_expect(strstr(code, "add: \"f32[2, 2][2, 1]cpu\" = kiln.ops.add(l_a_, l_b_"), "%s", code);
  free(code);
  kn_graph_module_free(gm);
  cr_expect_eq(cc.frame_count, 0); /* export does not run the backend */
  kn_scope_end();
  kn_compiled_free(f);
}

static kn_tensor *breaking(kn_tensor *a) {
  kn_graph_break();
  kn_tensor *r = kn_neg(a);
  return r;
}

Test(guards, export_refuses_graph_breaks) {
  kn_compiled *f = KN_COMPILE(breaking, NULL);
  kn_scope_begin();
  kn_tensor *x = kn_ones(KN_SHAPE(2), KN_FLOAT32);
  cr_expect_null(kn_export(f, (kn_value[]){kn_vtensor(x)}, 1));
  cr_expect(strstr(kn_last_error(), "graph break in user code at " __FILE__), "%s", kn_last_error());
  kn_scope_end();
  kn_compiled_free(f);
}

Test(guards, reset_forgets_entries) {
  kn_compile_counter cc = {0};
  kn_compile_options o = {.backend_fn = kn_compile_counter_backend, .backend_ud = &cc};
  kn_compiled *f = KN_COMPILE(scale3, &o);
  kn_scope_begin();
  kn_tensor *x = kn_ones(KN_SHAPE(2), KN_FLOAT32);
  cr_assert(kn_call_t(f, x));
  cr_assert(kn_call_t(f, x));
  cr_expect_eq(cc.frame_count, 1);
  kn_reset();
  cr_assert(kn_call_t(f, x));
  cr_expect_eq(cc.frame_count, 2);
  kn_scope_end();
  kn_compiled_free(f);
}

Test(guards, bad_arguments) {
  cr_expect_null(kn_compile_tensor_fn(NULL, 1, "f", __FILE__, 1, NULL));
  kn_compile_options bad = {.backend = "no_such_backend"};
  cr_expect_null(KN_COMPILE(scale3, &bad));
  cr_expect(strstr(kn_last_error(), "unknown backend 'no_such_backend' (registered: \"eager\""),
            "%s", kn_last_error());
  kn_compiled *f = KN_COMPILE(scale3, NULL);
  kn_value out;
  cr_expect_eq(kn_call(f, (kn_value[]){kn_vint(1)}, 1, &out), KN_EINVAL);
  cr_expect_eq(kn_call(f, NULL, 0, &out), KN_EINVAL);
  kn_compiled_free(f);
}
