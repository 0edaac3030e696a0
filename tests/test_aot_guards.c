/*
** test_aot_guards.c: the guards and runtime cases of seed
** test_aot_autograd.py with "aot_eager".
*/
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "aot/aot.h"
#include "autograd/autograd.h"
#include "kiln/compile.h"
#include "kiln/kiln.h"
#include "ops/opdef.h"
#include "support/dynamo_util.h"
#include "support/log_capture.h"
#include "support/trace_util.h"

TestSuite(aot_guards, .init = kn_test_dynamo_setup, .fini = kn_test_dynamo_teardown);

static char reason[8][512];
static int nreason;
static void on_fail(const kn_guard_failure *g, void *ud) {
  (void)ud;
  if (nreason < 8) snprintf(reason[nreason++], sizeof reason[0], "%s", g->reason);
}

static kn_tensor *leaf(int64_t n, int64_t m, bool rg, uint64_t seed) {
  kn_generator *g = kn_generator_new(seed);
  kn_tensor *t = kn_randn(KN_SHAPE(n, m), g, KN_FLOAT32);
  kn_generator_free(g);
  if (rg) kn_set_requires_grad(t, true);
  return t;
}

static double max_diff(kn_tensor *a, kn_tensor *b) {
  cr_assert(a && b, "missing tensor (%s)", kn_last_error());
  double v = INFINITY;
  cr_assert_eq(kn_item_double(kn_amax(kn_abs(kn_sub(a, b)), NULL, 0, false), &v), KN_OK, "%s",
               kn_last_error());
  return v;
}

static kn_tensor *mul_add_xy(kn_tensor *x, kn_tensor *y) { return kn_add(kn_mul(x, y), kn_sin(x)); }

/* F.forward(x, y): x.trunc_(); y.trunc_(); return x + y */
static kn_tensor *trunc_add(kn_tensor *x, kn_tensor *y) {
  kn_trunc_(x);
  kn_trunc_(y);
  return kn_add(x, y);
}

/* The first record whose message contains s (NULL if none). */
static const char *first_record(const kn_test_records *r, const char *s) {
  for (size_t i = 0; i < r->n; i++)
    if (strstr(r->v[i].message, s)) return r->v[i].message;
  return NULL;
}

Test(aot_guards, test_arg_dupe_via_dynamo_recompiles) {
  kn_scope_begin();
  kn_tensor *x = leaf(3, 3, true, 1), *y = leaf(3, 3, true, 2);
  kn_compile_counter cc = {.inner = "aot_eager"};
  kn_compile_options o = {.backend_fn = kn_compile_counter_backend, .backend_ud = &cc,
                          .guard_fail_fn = on_fail,
                          .arg_names = (const char *[]){"x", "y", NULL}};
  kn_compiled *f = KN_COMPILE(trunc_add, &o);
  nreason = 0;
  cr_assert(kn_call_t(f, kn_clone(x), kn_clone(y)), "%s", kn_last_error());
  cr_assert(kn_call_t(f, kn_clone(x), kn_clone(y)), "%s", kn_last_error());
  cr_expect_eq(nreason, 0);
  cr_expect_eq(cc.frame_count, 1);
  kn_reset();
  kn_compile_counter_clear(&cc);
  /* the same tensor twice, then two: a recompile whose reason is the alias guard */
  char *dir = kn_test_trace_start();
  kn_test_records r = {0};
  cr_assert_eq(kn_set_logs_str("recompiles"), KN_OK);
  kn_test_capture_begin(&r);
  kn_tensor *x3 = kn_clone(x), *x3e = kn_clone(x);
  kn_tensor *got = kn_call_t(f, x3, x3), *want = trunc_add(x3e, x3e);
  cr_assert(got, "%s", kn_last_error());
  cr_expect_leq(max_diff(got, want), 0.0);
  cr_expect_leq(max_diff(x3, x3e), 0.0, "the input is truncated in place as in eager");
  kn_tensor *x4 = kn_clone(x), *y4 = kn_clone(y), *x4e = kn_clone(x), *y4e = kn_clone(y);
  got = kn_call_t(f, x4, y4);
  want = trunc_add(x4e, y4e);
  kn_test_capture_end(&r);
  cr_assert(got, "%s", kn_last_error());
  cr_expect_leq(max_diff(got, want), 0.0);
  cr_expect_eq(cc.frame_count, 2);
  cr_assert_eq(nreason, 1);
  cr_expect(strstr(reason[0], "L['x'] is L['y']"), "%s", reason[0]);
  const char *rec = first_record(&r, "Recompiling function trunc_add");
  cr_expect(rec && strstr(rec, "triggered by the following guard failure(s):\n    - L['x'] is L['y']"),
            "%s", rec ? rec : "(no recompile record)");
  kn_test_records_free(&r);
  char *rr = kn_test_dyn_payload("recompile_reasons", 0);
  cr_assert(rr);
  cr_expect(!strncmp(rr, "[\n\"0/0: L['x'] is L['y']  ", 26), "%s", rr);
  free(rr);
  kn_trace_disable();
  kn_test_rmdir(dir);
  kn_compiled_free(f);
  kn_scope_end();
}

/* Distinct tensors first, then the same one twice: PyTorch's duplicate-input text. */
Test(aot_guards, arg_dupe_after_distinct_recompiles) {
  kn_scope_begin();
  kn_tensor *x = leaf(3, 3, true, 1), *y = leaf(3, 3, true, 2);
  kn_compile_counter cc = {.inner = "aot_eager"};
  kn_compile_options o = {.backend_fn = kn_compile_counter_backend, .backend_ud = &cc,
                          .guard_fail_fn = on_fail,
                          .arg_names = (const char *[]){"x", "y", NULL}};
  kn_compiled *f = KN_COMPILE(mul_add_xy, &o);
  nreason = 0;
  cr_assert(kn_call_t(f, x, y), "%s", kn_last_error());
  kn_tensor *got = kn_call_t(f, x, x);
  cr_assert(got, "%s", kn_last_error());
  cr_expect_eq(cc.frame_count, 2);
  cr_assert_eq(nreason, 1);
  cr_expect_str_eq(reason[0], "Duplicate tensor found where not expected! L['y']should not alias "
                              "to anything, but is aliased");
  kn_tensor *xe = leaf(3, 3, true, 1);
  kn_tensor *want = mul_add_xy(xe, xe);
  cr_expect_leq(max_diff(got, want), 0.0);
  cr_assert_eq(kn_backward(kn_sum(got), NULL), KN_OK, "%s", kn_last_error());
  cr_assert_eq(kn_backward(kn_sum(want), NULL), KN_OK, "%s", kn_last_error());
  cr_expect_leq(max_diff(kn_grad(x), kn_grad(xe)), 1e-6);
  kn_compiled_free(f);
  kn_scope_end();
}

/* ---- the seed's modules with a parameter `mean` --------------------------------------- */
static kn_module *mean_module(uint64_t seed) {
  kn_module *m = kn_module_new();
  kn_tensor *p = leaf(3, 3, true, seed);
  kn_module_add_param(m, "mean", p); /* retained; p is the scope's */
  return m;
}

/* forward(a, b, e, f): a.trunc_(); b.trunc_(); (a + b + self.mean) * e * f, with
** e and f ints, or lists read at [0] (the _list variant: forward(e, f, a, b)) */
static kn_value mean_fwd(const kn_value *args, int n, void *ud) {
  (void)n;
  bool list = ud != NULL;
  kn_tensor *a = args[list ? 3 : 1].u.t, *b = args[list ? 4 : 2].u.t;
  kn_value e = args[list ? 1 : 3], f = args[list ? 2 : 4];
  int64_t ev = list ? e.u.items[0].u.i : e.u.i, fv = list ? f.u.items[0].u.i : f.u.i;
  kn_trunc_(a);
  kn_trunc_(b);
  kn_tensor *s = kn_add(kn_add(a, b), kn_module_get(args[0].u.m, "mean"));
  return kn_vtensor(kn_mul_scalar(kn_mul_scalar(s, kn_int(ev)), kn_int(fv)));
}

/* Call g (compiled) on (m, a, b, k, k) and compare with eager on clones. */
static void mean_call(kn_compiled *g, kn_module *m, kn_tensor *a, kn_tensor *b, int64_t k, bool list) {
  kn_value kl[] = {kn_vint(k), kn_vint(2), kn_vint(1)};
  kn_value ek = list ? kn_vlist(3, kl) : kn_vint(k);
  bool same = a == b;
  kn_tensor *ae = kn_clone(a), *be = same ? ae : kn_clone(b);
  kn_value args[5], eargs[5];
  if (list) {
    memcpy(args, (kn_value[]){kn_vmodule(m), ek, ek, kn_vtensor(a), kn_vtensor(b)}, sizeof args);
    memcpy(eargs, (kn_value[]){kn_vmodule(m), ek, ek, kn_vtensor(ae), kn_vtensor(be)}, sizeof eargs);
  } else {
    memcpy(args, (kn_value[]){kn_vmodule(m), kn_vtensor(a), kn_vtensor(b), ek, ek}, sizeof args);
    memcpy(eargs, (kn_value[]){kn_vmodule(m), kn_vtensor(ae), kn_vtensor(be), ek, ek}, sizeof eargs);
  }
  kn_value out;
  cr_assert_eq(kn_call(g, args, 5, &out), KN_OK, "%s", kn_last_error());
  kn_value want = mean_fwd(eargs, 5, list ? (void *)1 : NULL);
  cr_expect_leq(max_diff(out.u.t, want.u.t), 1e-6);
  cr_expect_str_eq(kn_grad_fn_name(out.u.t), "CompiledFunctionBackward");
  kn_value_release(out);
}

static void mean_case(bool list) {
  kn_scope_begin();
  kn_module *m = mean_module(7);
  kn_tensor *a = leaf(3, 3, true, 1), *b = leaf(3, 3, true, 2);
  kn_compile_counter cc = {.inner = "aot_eager"};
  const char *names[] = {"self", "a", "b", "e", "f", NULL};
  const char *lnames[] = {"self", "e", "f", "a", "b", NULL};
  kn_compile_options o = {.backend_fn = kn_compile_counter_backend, .backend_ud = &cc,
                          .guard_fail_fn = on_fail, .arg_names = list ? lnames : names};
  kn_compiled *f = kn_compile_fn(mean_fwd, list ? (void *)1 : NULL, 5, "forward", __FILE__,
                                 __LINE__, &o);
  for (int round = 0; round < 2; round++) {
    nreason = 0;
    kn_tensor *a1 = kn_clone(a);
    mean_call(f, m, a1, a1, 2 + round, list);
    mean_call(f, m, kn_clone(a), kn_clone(b), 2 + round, list);
    cr_expect_eq(cc.frame_count, 2, "round %d", round);
    cr_assert_eq(nreason, 1);
    cr_expect(strstr(reason[0], "L['a'] is L['b']"), "%s", reason[0]);
    kn_reset();
    kn_compile_counter_clear(&cc);
  }
  kn_compiled_free(f);
  kn_module_free(m);
  kn_scope_end();
}

Test(aot_guards, test_arg_dupe_via_dynamo_recompiles_many_args_param_non_tensor_arg) {
  mean_case(false);
}

Test(aot_guards, test_arg_dupe_via_dynamo_recompiles_many_args_param_non_tensor_arg_list) {
  mean_case(true);
}

/* forward(a, b): a.trunc_(); b.trunc_(); a + b + self.mean */
static kn_value mean_ab(const kn_value *args, int n, void *ud) {
  (void)n, (void)ud;
  kn_trunc_(args[1].u.t);
  kn_trunc_(args[2].u.t);
  return kn_vtensor(kn_add(kn_add(args[1].u.t, args[2].u.t), kn_module_get(args[0].u.m, "mean")));
}

Test(aot_guards, test_arg_dupe_via_dynamo_recompiles_many_args_param) {
  kn_scope_begin();
  kn_module *m = mean_module(7), *me = mean_module(7);
  kn_tensor *a = leaf(3, 3, true, 1), *b = leaf(3, 3, true, 2);
  kn_compile_counter cc = {.inner = "aot_eager"};
  kn_compile_options o = {.backend_fn = kn_compile_counter_backend, .backend_ud = &cc,
                          .guard_fail_fn = on_fail,
                          .arg_names = (const char *[]){"self", "a", "b", NULL}};
  kn_compiled *f = kn_compile_fn(mean_ab, NULL, 3, "forward", __FILE__, __LINE__, &o);
  nreason = 0;
  kn_tensor *a1 = kn_clone(a), *a1e = kn_clone(a);
  kn_value out;
  cr_assert_eq(kn_call(f, (kn_value[]){kn_vmodule(m), kn_vtensor(a1), kn_vtensor(a1)}, 3, &out), KN_OK,
               "%s", kn_last_error());
  kn_value want = mean_ab((kn_value[]){kn_vmodule(me), kn_vtensor(a1e), kn_vtensor(a1e)}, 3, NULL);
  cr_expect_leq(max_diff(out.u.t, want.u.t), 0.0);
  /* the parameter's gradient, as eager's */
  cr_assert_eq(kn_backward(kn_sum(out.u.t), NULL), KN_OK, "%s", kn_last_error());
  cr_assert_eq(kn_backward(kn_sum(want.u.t), NULL), KN_OK, "%s", kn_last_error());
  cr_expect_leq(max_diff(kn_grad(kn_module_get(m, "mean")), kn_grad(kn_module_get(me, "mean"))), 0.0);
  kn_value_release(out);
  cr_assert_eq(kn_call(f, (kn_value[]){kn_vmodule(m), kn_vtensor(kn_clone(a)), kn_vtensor(kn_clone(b))},
                       3, &out), KN_OK, "%s", kn_last_error());
  kn_value_release(out);
  cr_expect_eq(cc.frame_count, 2);
  cr_assert_eq(nreason, 1);
  cr_expect(strstr(reason[0], "L['a'] is L['b']"), "%s", reason[0]);
  kn_compiled_free(f);
  kn_module_free(m);
  kn_module_free(me);
  kn_scope_end();
}

/* The seed's `z`: a tensor from outside the function (a global). */
static kn_tensor *global_z;

static kn_value mean_global(const kn_value *args, int n, void *ud) {
  (void)n, (void)ud;
  kn_tensor *a = args[1].u.t, *b = args[2].u.t;
  kn_trunc_(a);
  kn_trunc_(b);
  kn_tensor *s = kn_add(kn_add(kn_add(a, b), global_z), kn_module_get(args[0].u.m, "mean"));
  return kn_vtensor(kn_mul_scalar(kn_mul_scalar(s, kn_int(args[3].u.i)), kn_int(args[4].u.i)));
}

Test(aot_guards, test_arg_dupe_via_dynamo_recompiles_many_with_global) {
  kn_scope_begin();
  kn_module *m = mean_module(7);
  kn_tensor *a = leaf(3, 3, true, 1), *b = leaf(3, 3, true, 2);
  global_z = a;
  kn_compile_counter cc = {.inner = "aot_eager"};
  kn_compile_options o = {.backend_fn = kn_compile_counter_backend, .backend_ud = &cc,
                          .guard_fail_fn = on_fail,
                          .arg_names = (const char *[]){"self", "a", "b", "e", "f", NULL}};
  kn_compiled *f = kn_compile_fn(mean_global, NULL, 5, "forward", __FILE__, __LINE__, &o);
  nreason = 0;
  kn_value out;
  kn_tensor *a1 = kn_clone(a), *a1e = kn_clone(a);
  cr_assert_eq(kn_call(f, (kn_value[]){kn_vmodule(m), kn_vtensor(a1), kn_vtensor(a1), kn_vint(2), kn_vint(2)},
                       5, &out), KN_OK, "%s", kn_last_error());
  kn_value want = mean_global((kn_value[]){kn_vmodule(m), kn_vtensor(a1e), kn_vtensor(a1e), kn_vint(2),
                                           kn_vint(2)}, 5, NULL);
  cr_expect_leq(max_diff(out.u.t, want.u.t), 0.0);
  kn_value_release(out);
  cr_assert_eq(kn_call(f, (kn_value[]){kn_vmodule(m), kn_vtensor(kn_clone(a)), kn_vtensor(kn_clone(b)),
                                       kn_vint(2), kn_vint(2)}, 5, &out), KN_OK, "%s", kn_last_error());
  kn_value_release(out);
  cr_expect_eq(cc.frame_count, 2);
  cr_assert_eq(nreason, 1);
  cr_expect(strstr(reason[0], "L['a'] is L['b']"), "%s", reason[0]);
  global_z = NULL;
  kn_compiled_free(f);
  kn_module_free(m);
  kn_scope_end();
}

/* forward(a, b, c, d): each truncated in place, (a + b + c + d,) */
static kn_tensor *trunc4(kn_tensor *a, kn_tensor *b, kn_tensor *c, kn_tensor *d) {
  kn_trunc_(a);
  kn_trunc_(b);
  kn_trunc_(c);
  kn_trunc_(d);
  return kn_add(kn_add(kn_add(a, b), c), d);
}

Test(aot_guards, test_arg_dupe_via_dynamo_recompiles_many_args) {
  kn_scope_begin();
  kn_tensor *a = leaf(3, 3, true, 1), *b = leaf(3, 3, true, 2);
  kn_tensor *c = leaf(3, 3, true, 3), *d = leaf(3, 3, true, 4);
  kn_compile_counter cc = {.inner = "aot_eager"};
  kn_compile_options o = {.backend_fn = kn_compile_counter_backend, .backend_ud = &cc,
                          .guard_fail_fn = on_fail};
  kn_compiled *f = KN_COMPILE(trunc4, &o);
  nreason = 0;
  kn_tensor *a1 = kn_clone(a), *a1e = kn_clone(a);
  kn_tensor *got = kn_call_t(f, a1, a1, a1, a1);
  cr_assert(got, "%s", kn_last_error());
  cr_expect_leq(max_diff(got, trunc4(a1e, a1e, a1e, a1e)), 0.0);
  kn_tensor *b2 = kn_clone(b);
  cr_assert(kn_call_t(f, kn_clone(a), b2, b2, b2), "%s", kn_last_error());
  cr_expect_eq(cc.frame_count, 2);
  cr_assert_eq(nreason, 1);
  cr_expect(strstr(reason[0], "L['a'] is L['b']"), "%s", reason[0]);
  kn_reset();
  kn_compile_counter_clear(&cc);
  nreason = 0;
  kn_tensor *c3 = kn_clone(c);
  cr_assert(kn_call_t(f, kn_clone(a), kn_clone(b), c3, c3), "%s", kn_last_error());
  kn_tensor *a4 = kn_clone(a), *b4 = kn_clone(b), *c4 = kn_clone(c), *d4 = kn_clone(d);
  got = kn_call_t(f, a4, b4, c4, d4);
  cr_assert(got, "%s", kn_last_error());
  cr_expect_leq(max_diff(got, trunc4(kn_clone(a), kn_clone(b), kn_clone(c), kn_clone(d))), 0.0);
  cr_expect_eq(cc.frame_count, 2);
  cr_assert_eq(nreason, 1);
  cr_expect(strstr(reason[0], "L['c'] is L['d']"), "%s", reason[0]);
  kn_compiled_free(f);
  kn_scope_end();
}

/* ---- gradients of a tensor passed twice land on it once, summed ---------- */
static kn_tensor *mul_add(kn_tensor *a, kn_tensor *b) { return kn_add(kn_mul(a, b), kn_sin(a)); }

Test(aot_guards, dupe_gradients_summed_as_eager) {
  kn_scope_begin();
  kn_compile_options o = {.backend = "aot_eager"};
  kn_compiled *f = KN_COMPILE(mul_add, &o);
  kn_tensor *a = leaf(3, 3, true, 3), *ae = leaf(3, 3, true, 3);
  kn_tensor *got = kn_call_t(f, a, a);
  cr_assert(got, "%s", kn_last_error());
  cr_assert_eq(kn_backward(kn_sum(got), NULL), KN_OK, "%s", kn_last_error());
  kn_tensor *want = mul_add(ae, ae);
  cr_assert_eq(kn_backward(kn_sum(want), NULL), KN_OK, "%s", kn_last_error());
  cr_expect_leq(max_diff(got, want), 0.0);
  cr_expect_leq(max_diff(kn_grad(a), kn_grad(ae)), 1e-6);
  /* the literal: d/da (a*a + sin a) = 2a + cos a */
  kn_tensor *lit = kn_add(kn_mul_scalar(ae, kn_float(2)), kn_cos(ae));
  cr_expect_leq(max_diff(kn_grad(a), lit), 1e-6);
  kn_compiled_free(f);
  kn_scope_end();
}

/* ---- requires_grad ----------------------------------------------------------- */
static kn_tensor *add_xy(kn_tensor *x, kn_tensor *y) { return kn_add(x, y); }

Test(aot_guards, test_requires_grad_fake_via_dynamo_recompiles) {
  kn_scope_begin();
  kn_tensor *x = leaf(3, 3, true, 1), *y = leaf(3, 3, true, 2), *z = leaf(3, 3, false, 3);
  kn_compile_counter cc = {.inner = "aot_eager"};
  kn_compile_options o = {.backend_fn = kn_compile_counter_backend, .backend_ud = &cc,
                          .guard_fail_fn = on_fail,
                          .arg_names = (const char *[]){"x", "y", NULL}};
  kn_compiled *f = KN_COMPILE(add_xy, &o);
  nreason = 0;
  kn_tensor *r1 = kn_call_t(f, x, y);
  kn_tensor *r2 = kn_call_t(f, x, z);
  cr_assert(r1 && r2, "%s", kn_last_error());
  cr_assert_eq(nreason, 1);
  cr_expect(strstr(reason[0], "tensor 'L['y']' requires_grad mismatch. expected requires_grad=1"),
            "%s", reason[0]);
  cr_expect_eq(cc.frame_count, 2);
  cr_expect_str_eq(kn_grad_fn_name(r2), "CompiledFunctionBackward");
  kn_tensor *xe = leaf(3, 3, true, 1);
  cr_expect_leq(max_diff(r2, add_xy(xe, z)), 0.0);
  cr_assert_eq(kn_backward(kn_sum(r2), NULL), KN_OK, "%s", kn_last_error());
  cr_expect_null(kn_grad(z));
  cr_expect_leq(max_diff(kn_grad(x), kn_ones(KN_SHAPE(3, 3), KN_FLOAT32)), 0.0, "d(x + z)/dx = 1");
  /* a fresh start with (x, z) twice: one compile, no failure */
  kn_reset();
  kn_compile_counter_clear(&cc);
  nreason = 0;
  cr_assert(kn_call_t(f, x, z) && kn_call_t(f, x, z), "%s", kn_last_error());
  cr_expect_eq(cc.frame_count, 1);
  cr_expect_eq(nreason, 0);
  kn_compiled_free(f);
  kn_scope_end();
}

/* ---- nn.Parameter built inside ------------------------------------------------ */
static kn_tensor *param_inside(kn_tensor *x) {
  kn_tensor *y = kn_sin(x);
  kn_tensor *z = kn_ones(KN_SHAPE(1), KN_FLOAT32);
  kn_set_requires_grad(z, true);
  return kn_add(y, z);
}

Test(aot_guards, test_nn_parameter_construction) {
  kn_scope_begin();
  kn_compile_counter cc = {.inner = "aot_eager"};
  kn_compile_options o = {.backend_fn = kn_compile_counter_backend, .backend_ud = &cc};
  kn_compiled *f = KN_COMPILE(param_inside, &o);
  kn_tensor *x = kn_rand(KN_SHAPE(4, 4), NULL, KN_FLOAT32);
  char *dir = kn_test_trace_start();
  for (int i = 0; i < 2; i++) {
    kn_tensor *got = kn_call_t(f, x), *want = param_inside(x);
    cr_assert(got, "%s", kn_last_error());
    cr_expect_leq(max_diff(got, want), 0.0);
    cr_expect(kn_requires_grad(got) && kn_requires_grad(want));
    /* eager's AddBackward0 is the compiled node here: a training graph */
    cr_expect_str_eq(kn_grad_fn_name(got), "CompiledFunctionBackward");
    cr_expect_eq(kn_backward(kn_sum(got), NULL), KN_OK, "%s", kn_last_error());
  }
  cr_expect_eq(cc.frame_count, 1);
  /* the new leaf is an input of the forward graph; its gradient (16 ones
  ** summed over the broadcast) is returned by the backward graph */
  char *fw = kn_test_dyn_payload("aot_forward_graph", 0);
  char *bw = kn_test_dyn_payload("aot_backward_graph", 0);
  cr_assert(fw && bw);
  cr_expect(strstr(fw, "primals_2: \"f32[1][1]cpu\""), "%s", fw);
  cr_expect(strstr(bw, "kiln.ops.sum"), "%s", bw);
  free(fw);
  free(bw);
  kn_trace_disable();
  kn_test_rmdir(dir);
  kn_compiled_free(f);
  kn_scope_end();
}

/* ---- invalid leaf set ----------------------------------------------------------- */
static kn_tensor *leaf_inplace(kn_tensor *x) {
  kn_tensor *o = kn_ones(KN_SHAPE(2), KN_FLOAT32);
  if (kn_copy_(x, o) != KN_OK) return NULL;
  return x;
}

Test(aot_guards, test_aot_autograd_raises_invalid_leaf_set) {
  kn_scope_begin();
  kn_compile_options o = {.backend = "aot_eager"};
  kn_compiled *f = KN_COMPILE(leaf_inplace, &o);
  kn_tensor *x = kn_ones(KN_SHAPE(2), KN_FLOAT32);
  kn_set_requires_grad(x, true);
  cr_expect_null(leaf_inplace(x));
  cr_expect(strstr(kn_last_error(), "is being used in an in-place operation"), "%s", kn_last_error());
  cr_expect_null(kn_call_t(f, x));
  cr_expect(strstr(kn_last_error(), "is being used in an in-place operation"), "%s", kn_last_error());
  kn_compiled_free(f);
  kn_scope_end();
}

/* ---- data pointer -------------------------------------------------------------- */
static kn_tensor *data_fn(kn_tensor *x) {
  kn_tensor *y = kn_clone(x);
  if (!kn_data(y)) return NULL;
  return y;
}

Test(aot_guards, test_data_ptr_access_fails_in_forward) {
  kn_scope_begin();
  kn_compile_options o = {.backend = "aot_eager", .fullgraph = true};
  kn_compiled *f = KN_COMPILE(data_fn, &o);
  kn_tensor *x = kn_randn(KN_SHAPE(3), NULL, KN_FLOAT32);
  cr_expect_null(kn_call_t(f, x));
  cr_expect(strstr(kn_last_error(), "Cannot access data pointer"), "%s", kn_last_error());
  kn_compiled_free(f);
  kn_scope_end();
}

/* ---- sequence numbers ------------------------------------------------------------ */
/* A model like the seed's (linear, relu, a residual add, flatten, an L1 loss). */
static kn_tensor *seq_model(kn_tensor *x, kn_tensor *target, kn_tensor *w, kn_tensor *b) {
  kn_tensor *h = kn_relu(kn_linear(x, w, b));
  h = kn_reshape(kn_add(h, x), KN_SHAPE(-1));
  return kn_mean(kn_abs(kn_sub(h, target)));
}

/* Eager's sequence numbers: a mode writing "seq|op" for every top-level call
** (the node it makes, or, in backward, the node whose rule runs), relative to
** the first. */
typedef struct seqlog {
  kn__mode mode;
  char buf[8192];
  size_t len;
  uint64_t base;
  int depth;
} seqlog;

static kn_status seq_handle(kn__mode *self, kn__call *c, kn__outs *out) {
  seqlog *l = self->state;
  if (c->op->flags & KN_OPF_COMPOSITE) return kn__mode_decompose(self, c, out);
  int64_t s = kn__autograd_current_seq();
  if (s < 0) s = (int64_t)kn__peek_seq();
  if (l->len < sizeof l->buf - 64)
    l->len += (size_t)snprintf(l->buf + l->len, sizeof l->buf - l->len, "%lld|%s\n",
                               (long long)(s - (int64_t)l->base), c->op->name);
  return kn__dispatch_below(self, c, out);
}

static kn__graph *seq_grabbed;
static kn_status seq_grab(kn_graph_module *gm, kn_tensor *const *ex, int n, void *ud,
                          kn_compiled_graph *out) {
  (void)ud;
  kn__graph_free(seq_grabbed);
  seq_grabbed = kn__graph_copy(kn__graph_module_graph(gm));
  return kn__aot_eager_compile(gm, ex, n, NULL, out);
}

static kn_tensor *seq_leaf(int64_t n, int64_t m, uint64_t seed) {
  kn_generator *g = kn_generator_new(seed);
  kn_tensor *t = m ? kn_randn(KN_SHAPE(n, m), g, KN_FLOAT64) : kn_randn(KN_SHAPE(n), g, KN_FLOAT64);
  kn_generator_free(g);
  kn_set_requires_grad(t, true);
  return t;
}

Test(aot_guards, test_eager_sequence_nr) {
  kn_scope_begin();
  kn_tensor *x = seq_leaf(4, 8, 1), *w = seq_leaf(8, 8, 2), *b = seq_leaf(8, 0, 3);
  kn_tensor *target = kn_detach(seq_leaf(32, 0, 4));
  /* eager, forward then backward, under the logging mode */
  static seqlog l;
  memset(&l, 0, sizeof l);
  l.mode = (kn__mode){"seqlog", seq_handle, &l};
  l.base = kn__peek_seq();
  cr_assert_eq(kn__mode_push(&l.mode), KN_OK);
  kn_tensor *loss = seq_model(x, target, w, b);
  kn_tensor *gi[3];
  kn_status st = kn_autograd_grad(&loss, 1, (kn_tensor *[]){x, w, b}, 3, NULL, false, true, false, gi);
  kn__mode_pop(&l.mode);
  cr_assert_eq(st, KN_OK, "%s", kn_last_error());
  /* the compiled function's joint graph */
  kn_compile_options o = {.backend_fn = seq_grab};
  kn_compiled *f = KN_COMPILE(seq_model, &o);
  cr_assert(kn_call_t(f, x, target, w, b), "%s", kn_last_error());
  cr_assert(seq_grabbed);
  kn__aot_joint j;
  cr_assert_eq(kn__aot_trace_joint(seq_grabbed, (bool[]){true, false, true, true}, 4, false, &j),
               KN_OK, "%s", kn_last_error());
  char got[8192];
  size_t len = 0;
  for (int i = 0; i < kn__graph_num_nodes(j.g); i++) {
    const kn__gnode *n = kn__graph_node(j.g, i);
    if (n->op != KN__GN_CALL || !n->opdef) continue;
    cr_expect_geq(n->autograd_seq_nr, 0, "%s", n->name);
    /* a view a rule makes without the dispatcher (no eager op) */
    if (!strcmp(n->opdef->name, "as_strided")) continue;
    len += (size_t)snprintf(got + len, sizeof got - len, "%lld|%s\n", (long long)n->autograd_seq_nr,
                            n->opdef->name);
  }
  cr_expect_str_eq(got, l.buf);
  /* PyTorch's pattern (the seed's table): forward ops count up, each
  ** backward op carries its forward op's number, counting down */
  cr_expect_str_eq(got, "0|t\n1|addmm\n2|relu\n3|add\n4|_reshape_alias\n5|sub\n6|abs\n7|mean\n"
                        "7|unsqueeze\n7|expand\n7|div\n6|sgn\n6|mul\n4|_reshape_alias\n"
                        "2|threshold_backward\n1|sum\n1|transpose\n1|mm\n1|transpose\n1|mm\n"
                        "1|transpose\n1|add\n0|t\n");
  /* the loss's grad_fn is the mean's node: number 7 */
  cr_expect_eq(kn_grad_fn_seq_nr(loss) - (int64_t)l.base, 7);
  cr_expect_eq(kn_grad_fn_seq_nr(x), -1, "a leaf has no grad_fn");
  /* the partition keeps them: the backward graph counts down */
  kn__aot_parts p;
  cr_assert_eq(kn__aot_partition(&j, &p), KN_OK, "%s", kn_last_error());
  int64_t last = INT64_MAX;
  int nbw = 0;
  for (int i = 0; i < kn__graph_num_nodes(p.bw); i++) {
    const kn__gnode *n = kn__graph_node(p.bw, i);
    if (n->op != KN__GN_CALL || !n->opdef) continue;
    cr_expect_leq(n->autograd_seq_nr, last, "%s", n->name);
    last = n->autograd_seq_nr;
    nbw++;
  }
  cr_expect_gt(nbw, 5);
  kn__aot_parts_fini(&p);
  kn__aot_joint_fini(&j);
  kn__graph_free(seq_grabbed);
  seq_grabbed = NULL;
  kn_compiled_free(f);
  kn_scope_end();
}

/* ---- an LSTM compiled with aot_eager trains as eager ---------------------------------- */
static kn_value lstm_loss(const kn_value *args, int n, void *ud) {
  (void)n, (void)ud;
  kn_tensor *y = kn_nn_forward(args[0].u.m, args[1].u.t);
  return kn_vtensor(kn_mse_loss(y, args[2].u.t, KN_REDUCTION_MEAN));
}

/* One SGD step of model m on (x, target); compiled through f when f is set. */
static double lstm_step(kn_compiled *f, kn_module *m, kn_optimizer *opt, kn_tensor *x,
                        kn_tensor *target) {
  kn_value args[] = {kn_vmodule(m), kn_vtensor(x), kn_vtensor(target)};
  kn_value out = {0};
  if (f) cr_assert_eq(kn_call(f, args, 3, &out), KN_OK, "%s", kn_last_error());
  else out = lstm_loss(args, 3, NULL);
  cr_assert(out.u.t, "%s", kn_last_error());
  if (f) cr_expect_str_eq(kn_grad_fn_name(out.u.t), "CompiledFunctionBackward");
  double v = NAN;
  cr_assert_eq(kn_item_double(out.u.t, &v), KN_OK);
  cr_assert_eq(kn_backward(out.u.t, NULL), KN_OK, "%s", kn_last_error());
  cr_assert_eq(kn_optim_step(opt), KN_OK, "%s", kn_last_error());
  kn_optim_zero_grad(opt);
  if (f) kn_value_release(out);
  return v;
}

static kn_module *lstm_model(kn_tensor ***params, int *np) {
  kn_generator *g = kn_generator_new(11);
  kn_module *m = kn_nn_lstm(16, 16, 2, true, false, g);
  kn_generator_free(g);
  *np = kn_nn_parameters(m, params);
  return m;
}

Test(aot_guards, test_lstm) {
  kn_scope_begin();
  kn_tensor **pc, **pe;
  int nc, ne;
  kn_module *mc = lstm_model(&pc, &nc), *me = lstm_model(&pe, &ne);
  cr_assert_eq(nc, 8);
  cr_assert_eq(ne, 8);
  kn_optim_options so = {.lr = 0.5};
  kn_optimizer *oc = kn_sgd(pc, nc, &so), *oe = kn_sgd(pe, ne, &so);
  /* the seed's input is a permuted (non-contiguous) [T, B, in] tensor */
  kn_generator *g = kn_generator_new(5);
  kn_tensor *x = kn_permute(kn_randn(KN_SHAPE(4, 16, 12), g, KN_FLOAT32), 3, (int64_t[]){2, 0, 1});
  kn_tensor *target = kn_randn(KN_SHAPE(12, 4, 16), g, KN_FLOAT32);
  kn_generator_free(g);
  kn_compile_counter cc = {.inner = "aot_eager"};
  kn_compile_options o = {.backend_fn = kn_compile_counter_backend, .backend_ud = &cc,
                          .arg_names = (const char *[]){"self", "permute", "target", NULL}};
  kn_compiled *f = kn_compile_fn(lstm_loss, NULL, 3, "lstm_loss", __FILE__, __LINE__, &o);
  double first = 0, last = 0;
  for (int step = 0; step < 4; step++) {
    double lc = lstm_step(f, mc, oc, x, target), le = lstm_step(NULL, me, oe, x, target);
    cr_expect(fabs(lc - le) <= 1e-5 * fabs(le), "step %d: loss %.9g, eager %.9g", step, lc, le);
    if (step == 0) first = le;
    last = le;
  }
  cr_expect_lt(last, first, "the loss decreases (%g -> %g)", first, last);
  for (int i = 0; i < nc; i++) cr_expect_leq(max_diff(pc[i], pe[i]), 1e-5, "parameter %d", i);
  cr_expect_eq(cc.frame_count, 1);
  kn_compiled_free(f);
  kn_optim_free(oc);
  kn_optim_free(oe);
  free(pc);
  free(pe);
  kn_module_free(mc);
  kn_module_free(me);
  kn_scope_end();
}

/* ---- composite ops are traced as their parts ------------------------------------------- */
/* linear on a transposed 3-D input: its reshape copies, and addmm's backward
** reads that copy, which must be a value of the joint graph. */
static kn_tensor *linear_t(kn_tensor *x, kn_tensor *w) {
  return kn_linear(kn_transpose(x, 0, 1), w, NULL);
}

Test(aot_guards, composite_parts_saved_for_backward) {
  kn_scope_begin();
  kn_compile_options o = {.backend = "aot_eager"};
  kn_compiled *f = KN_COMPILE(linear_t, &o);
  kn_generator *g = kn_generator_new(9);
  kn_tensor *x = kn_randn(KN_SHAPE(3, 4, 5), g, KN_FLOAT32), *w = kn_randn(KN_SHAPE(6, 5), g, KN_FLOAT32);
  kn_generator_free(g);
  kn_tensor *xe = kn_detach(x), *we = kn_detach(w);
  kn_set_requires_grad(x, true);
  kn_set_requires_grad(w, true);
  kn_set_requires_grad(xe, true);
  kn_set_requires_grad(we, true);
  kn_tensor *got = kn_call_t(f, x, w), *want = linear_t(xe, we);
  cr_assert(got, "%s", kn_last_error());
  cr_expect_leq(max_diff(got, want), 1e-6);
  cr_assert_eq(kn_backward(kn_sum(got), NULL), KN_OK, "%s", kn_last_error());
  cr_assert_eq(kn_backward(kn_sum(want), NULL), KN_OK, "%s", kn_last_error());
  cr_expect_leq(max_diff(kn_grad(x), kn_grad(xe)), 1e-5);
  cr_expect_leq(max_diff(kn_grad(w), kn_grad(we)), 1e-5);
  kn_compiled_free(f);
  kn_scope_end();
}
