/*
** test_aot_sweep.c: the AOT op sweep. Each differentiable op is compiled
** alone, f(x[, y]) = op(x[, y]), and in a two-op chain through it,
** g(x[, y]) = op(x[, y]) * sum(sin(x)) (x's gradient then sums two paths),
** with backend "aot_eager"; outputs and input gradients (for a random
** output gradient) are compared with the same function run eagerly on the
** same inputs. Layouts: contiguous, transposed (non-contiguous x), broadcast
** (y of size [1, n]); sizes static, or dynamic (compiled with dynamic sizes
** at [5, 6], then called at [7, 9] too: the joint graphs stay symbolic, so
** AOT compiles exactly as often as the "eager" backend, which is once for
** the contiguous and broadcast layouts, and gives eager's results at both
** sizes). float64, and float32 for the static layouts and the dynamic
** contiguous one. Zero-size inputs: x of [0, 6] (y [0, 6], or [1, 6]
** broadcast), static sizes, both dtypes (select at index 1 of an empty dim
** is an error in eager code too, and is left out). The min-cut partitioner
** (KILN_AOT_PARTITIONER=min_cut) on the three layouts, static and dynamic.
**
** Tolerance: |compiled - eager| <= atol + rtol * |eager| elementwise, with
** atol = rtol = 1e-12 for float64 and 1e-5 for float32 (the graphs call the
** same kernels as eager code, in the same order per value; the bound leaves
** room for a different summation order of gradients that meet: a few ulps
** of float32's 1.2e-7, times the magnitudes summed). NaN equals NaN (the
** mean of an empty tensor).
*/
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "kiln/compile.h"
#include "kiln/kiln.h"
#include "support/dynamo_util.h"

TestSuite(aot_sweep, .init = kn_test_dynamo_setup, .fini = kn_test_dynamo_teardown, .timeout = 300);

/* The dtype of a sweep and its tolerance. */
static kn_dtype dtype = KN_FLOAT64;
static double tol = 1e-12;

/* positive x; no broadcast case; no zero-size case */
enum { POS = 1, NOBCAST = 2, NOZERO = 4 };

typedef kn_tensor *(*fn1)(kn_tensor *);
typedef kn_tensor *(*fn2)(kn_tensor *, kn_tensor *);
typedef struct opcase {
  const char *name;
  fn1 f1;
  fn2 f2;
  int flags;
} opcase;

static const int64_t d1[1] = {1}, d0[1] = {0};
static kn_tensor *sum_all(kn_tensor *x) { return kn_sum(x); }
static kn_tensor *mean_all(kn_tensor *x) { return kn_mean(x); }
static kn_tensor *sum_d0(kn_tensor *x) { return kn_sum_dims(x, d0, 1, false); }
static kn_tensor *mean_d1(kn_tensor *x) { return kn_mean_dims(x, d1, 1, true); }
static kn_tensor *amax_d1(kn_tensor *x) { return kn_amax(x, d1, 1, false); }
static kn_tensor *softmax1(kn_tensor *x) { return kn_softmax(x, 1); }
static kn_tensor *log_softmax1(kn_tensor *x) { return kn_log_softmax(x, 1); }
static kn_tensor *cumsum0(kn_tensor *x) { return kn_cumsum(x, 0); }
static kn_tensor *transpose(kn_tensor *x) { return kn_transpose(x, 0, 1); }
static kn_tensor *flatten(kn_tensor *x) { return kn_flatten(x, 0, 1); }
static kn_tensor *unsqueeze1(kn_tensor *x) { return kn_unsqueeze(x, 1); }
static kn_tensor *narrow1(kn_tensor *x) { return kn_narrow(x, 1, 1, 3); }
static kn_tensor *select0(kn_tensor *x) { return kn_select(x, 0, 1); }
static kn_tensor *mul_scalar(kn_tensor *x) { return kn_mul_scalar(x, kn_float(2.5)); }
static kn_tensor *add_scalar(kn_tensor *x) { return kn_add_scalar(x, kn_float(-0.5)); }
static kn_tensor *pow_scalar(kn_tensor *x) { return kn_pow_scalar(x, kn_float(3.0)); }
static kn_tensor *clamp(kn_tensor *x) {
  kn_scalar lo = kn_float(-0.5), hi = kn_float(0.5);
  return kn_clamp(x, &lo, &hi);
}
static kn_tensor *gelu(kn_tensor *x) { return kn_gelu(x, KN_GELU_NONE); }
static kn_tensor *gelu_tanh(kn_tensor *x) { return kn_gelu(x, KN_GELU_TANH); }
static kn_tensor *softplus(kn_tensor *x) { return kn_softplus(x, kn_float(1.0), kn_float(20.0)); }
static kn_tensor *add_alpha(kn_tensor *x, kn_tensor *y) { return kn_add_scaled(x, y, kn_float(2.5)); }
static kn_tensor *powt(kn_tensor *x, kn_tensor *y) { return kn_pow(x, y); }
static kn_tensor *mm_t(kn_tensor *x, kn_tensor *y) { return kn_mm(x, kn_t(y)); }
static kn_tensor *linear(kn_tensor *x, kn_tensor *y) { return kn_linear(x, y, NULL); }
static kn_tensor *mse(kn_tensor *x, kn_tensor *y) { return kn_mse_loss(x, y, KN_REDUCTION_MEAN); }
static kn_tensor *where_gt(kn_tensor *x, kn_tensor *y) { return kn_where(kn_gt(x, y), x, y); }

static const opcase ops[] = {
    {"neg", kn_neg, NULL, 0},         {"abs", kn_abs, NULL, 0},
    {"exp", kn_exp, NULL, 0},         {"expm1", kn_expm1, NULL, 0},
    {"log", kn_log, NULL, POS},       {"log2", kn_log2, NULL, POS},
    {"log1p", kn_log1p, NULL, POS},   {"sqrt", kn_sqrt, NULL, POS},
    {"rsqrt", kn_rsqrt, NULL, POS},   {"reciprocal", kn_reciprocal, NULL, POS},
    {"sin", kn_sin, NULL, 0},         {"cos", kn_cos, NULL, 0},
    {"tan", kn_tan, NULL, 0},         {"tanh", kn_tanh, NULL, 0},
    {"sinh", kn_sinh, NULL, 0},       {"cosh", kn_cosh, NULL, 0},
    {"atan", kn_atan, NULL, 0},       {"sigmoid", kn_sigmoid, NULL, 0},
    {"relu", kn_relu, NULL, 0},       {"gelu", gelu, NULL, 0},
    {"gelu_tanh", gelu_tanh, NULL, 0}, {"silu", kn_silu, NULL, 0},
    {"erf", kn_erf, NULL, 0},         {"softplus", softplus, NULL, 0},
    {"clamp", clamp, NULL, 0},        {"clone", kn_clone, NULL, 0},
    {"mul_scalar", mul_scalar, NULL, 0}, {"add_scalar", add_scalar, NULL, 0},
    {"pow_scalar", pow_scalar, NULL, 0}, {"sum", sum_all, NULL, 0},
    {"mean", mean_all, NULL, 0},      {"sum_dim0", sum_d0, NULL, 0},
    {"mean_dim1_keepdim", mean_d1, NULL, 0}, {"amax_dim1", amax_d1, NULL, 0},
    {"softmax", softmax1, NULL, 0},   {"log_softmax", log_softmax1, NULL, 0},
    {"cumsum", cumsum0, NULL, 0},     {"transpose", transpose, NULL, 0},
    {"flatten", flatten, NULL, 0},    {"unsqueeze", unsqueeze1, NULL, 0},
    {"narrow", narrow1, NULL, 0},     {"select", select0, NULL, NOZERO},
    {"add", NULL, kn_add, 0},         {"add_alpha", NULL, add_alpha, 0},
    {"sub", NULL, kn_sub, 0},         {"mul", NULL, kn_mul, 0},
    {"div", NULL, kn_div, 0},         {"maximum", NULL, kn_maximum, 0},
    {"minimum", NULL, kn_minimum, 0}, {"pow", NULL, powt, POS},
    {"where", NULL, where_gt, 0},     {"mm", NULL, mm_t, 0},
    {"linear", NULL, linear, 0},      {"mse_loss", NULL, mse, NOBCAST},
};
#define NOPS ((int)(sizeof ops / sizeof ops[0]))

/* The op alone or chained: op(...) * sum(sin(x)) (any output shape). */
static const opcase *cur;
static bool chained;
static kn_tensor *call_op(kn_tensor *x, kn_tensor *y) {
  kn_tensor *r = cur->f1 ? cur->f1(x) : cur->f2(x, y);
  if (!chained || !r) return r;
  return kn_mul(r, kn_sum(kn_sin(x)));
}
static kn_tensor *op1(kn_tensor *x) { return call_op(x, NULL); }
static kn_tensor *op2(kn_tensor *x, kn_tensor *y) { return call_op(x, y); }

typedef enum layout { CONTIG, TRANSPOSED, BROADCAST } layout;

static kn_tensor *input(int64_t n, int64_t m, bool t, bool pos, uint64_t seed) {
  kn_generator *g = kn_generator_new(seed);
  kn_tensor *x = t ? kn_t(kn_randn(KN_SHAPE(m, n), g, dtype)) : kn_randn(KN_SHAPE(n, m), g, dtype);
  kn_generator_free(g);
  if (pos) x = kn_add_scalar(kn_abs(x), kn_float(0.5));
  x = kn_detach(x);
  kn_set_requires_grad(x, true);
  return x;
}

static int mismatches(kn_tensor *got, kn_tensor *want) {
  if (!got || !want) return 1;
  if (kn_ndim(got) != kn_ndim(want) || kn_numel(got) != kn_numel(want)) return 1;
  if (kn_tensor_dtype(got) != kn_tensor_dtype(want)) return 1;
  kn_tensor *g = kn_contiguous(kn_to(kn_flatten(got, 0, -1), KN_FLOAT64));
  kn_tensor *w = kn_contiguous(kn_to(kn_flatten(want, 0, -1), KN_FLOAT64));
  const double *a = kn_data(g), *b = kn_data(w);
  int bad = 0;
  for (int64_t i = 0; i < kn_numel(g); i++)
    if (!(fabs(a[i] - b[i]) <= tol + tol * fabs(b[i])) && !(isnan(a[i]) && isnan(b[i]))) bad++;
  return bad;
}

/* out and gradients of f at (x, y) for output gradient seeded `seed`. */
static kn_tensor *run(kn_compiled *cf, kn_tensor *x, kn_tensor *y, kn_tensor **gx, kn_tensor **gy) {
  kn_tensor *out = cf ? (y ? kn_call_t(cf, x, y) : kn_call_t(cf, x)) : (y ? op2(x, y) : op1(x));
  if (!out) return NULL;
  kn_generator *g = kn_generator_new(99);
  kn_tensor *go = kn_randn(kn_ndim(out), kn_sizes(out), g, kn_tensor_dtype(out));
  kn_generator_free(g);
  kn_tensor *in[2] = {x, y}, *gr[2] = {NULL, NULL};
  if (kn_autograd_grad(&out, 1, in, y ? 2 : 1, &go, false, false, true, gr) != KN_OK) return NULL;
  *gx = gr[0];
  *gy = gr[1];
  return out;
}

/* One case: returns a description of the first mismatch, or NULL. */
static const char *check(kn_compiled *cf, int64_t n, int64_t m, layout l, char *msg, size_t cap) {
  bool pos = cur->flags & POS;
  kn_tensor *x = input(n, m, l == TRANSPOSED, pos, 1);
  kn_tensor *y = cur->f2 ? input(l == BROADCAST ? 1 : n, m, false, pos, 2) : NULL;
  kn_tensor *gx = NULL, *gy = NULL, *ex = NULL, *ey = NULL;
  kn_tensor *got = run(cf, x, y, &gx, &gy);
  if (!got) return snprintf(msg, cap, "compiled: %s", kn_last_error()), msg;
  kn_tensor *want = run(NULL, x, y, &ex, &ey);
  cr_assert(want, "eager %s: %s", cur->name, kn_last_error());
  const char *what = mismatches(got, want) ? "output" : mismatches(gx, ex) ? "grad x"
                     : y && mismatches(gy, ey)                             ? "grad y" : NULL;
  if (what) snprintf(msg, cap, "%s differs from eager", what);
  return what ? msg : NULL;
}

/* Compiles of the same function and calls with the "eager" backend: AOT
** adds none (its joint graph is symbolic: a specialised one would guard the
** first sizes and recompile at the second). */
static const char *extra_compiles(layout l, int aot_compiles, char *msg, size_t cap) {
  kn_reset();
  kn_scope_begin();
  kn_compile_counter cc = {.inner = "eager"};
  kn_compile_options o = {.backend_fn = kn_compile_counter_backend, .backend_ud = &cc,
                          .dynamic = KN_DYNAMIC_TRUE};
  kn_compiled *cf = kn_compile_tensor_fn(cur->f1 ? (void (*)(void))op1 : (void (*)(void))op2,
                                         cur->f1 ? 1 : 2, cur->name, __FILE__, __LINE__, &o);
  char tmp[600];
  (void)check(cf, 5, 6, l, tmp, sizeof tmp);
  (void)check(cf, 7, 9, l, tmp, sizeof tmp);
  kn_compiled_free(cf);
  kn_scope_end();
  if (aot_compiles == cc.frame_count) return NULL;
  snprintf(msg, cap, "%d compiles with aot_eager, %d with eager", aot_compiles, cc.frame_count);
  return msg;
}

static void sweep_at(layout l, bool dynamic, int64_t rows) {
  int failures = 0;
  for (int k = 0; k < NOPS; k++) {
    cur = &ops[k];
    if (l == BROADCAST && (!cur->f2 || (cur->flags & NOBCAST))) continue;
    if (rows == 0 && (cur->flags & NOZERO)) continue;
    for (int c = 0; c < 2; c++) {
      chained = c == 1;
      kn_reset();
      kn_scope_begin();
      kn_compile_counter cc = {.inner = "aot_eager"};
      kn_compile_options o = {.backend_fn = kn_compile_counter_backend, .backend_ud = &cc,
                              .dynamic = dynamic ? KN_DYNAMIC_TRUE : KN_DYNAMIC_FALSE};
      kn_compiled *cf = kn_compile_tensor_fn(cur->f1 ? (void (*)(void))op1 : (void (*)(void))op2,
                                             cur->f1 ? 1 : 2, cur->name, __FILE__, __LINE__, &o);
      char msg[600];
      const char *bad = check(cf, rows, 6, l, msg, sizeof msg);
      if (!bad && dynamic) bad = check(cf, 7, 9, l, msg, sizeof msg);
      kn_compiled_free(cf);
      kn_scope_end();
      if (!bad && dynamic) bad = extra_compiles(l, cc.frame_count, msg, sizeof msg);
      if (bad) {
        failures++;
        cr_log_error("%s%s (layout %d, %s, %lld rows): %s", cur->name, chained ? " chained" : "",
                     (int)l, dtype == KN_FLOAT32 ? "float32" : "float64", (long long)rows, bad);
      }
    }
  }
  cr_expect_eq(failures, 0, "%d op cases differ from eager", failures);
}

static void sweep(layout l, bool dynamic) { sweep_at(l, dynamic, 5); }

static void sweep_f32(layout l, bool dynamic, int64_t rows) {
  dtype = KN_FLOAT32;
  tol = 1e-5;
  sweep_at(l, dynamic, rows);
}

Test(aot_sweep, contiguous_static) { sweep(CONTIG, false); }
Test(aot_sweep, transposed_static) { sweep(TRANSPOSED, false); }
Test(aot_sweep, broadcast_static) { sweep(BROADCAST, false); }
Test(aot_sweep, contiguous_dynamic) { sweep(CONTIG, true); }
Test(aot_sweep, transposed_dynamic) { sweep(TRANSPOSED, true); }
Test(aot_sweep, broadcast_dynamic) { sweep(BROADCAST, true); }

Test(aot_sweep, contiguous_static_float32) { sweep_f32(CONTIG, false, 5); }
Test(aot_sweep, transposed_static_float32) { sweep_f32(TRANSPOSED, false, 5); }
Test(aot_sweep, broadcast_static_float32) { sweep_f32(BROADCAST, false, 5); }
Test(aot_sweep, contiguous_dynamic_float32) { sweep_f32(CONTIG, true, 5); }
Test(aot_sweep, zero_size_contiguous) { sweep_at(CONTIG, false, 0); }
Test(aot_sweep, zero_size_transposed) { sweep_at(TRANSPOSED, false, 0); }
Test(aot_sweep, zero_size_broadcast) { sweep_at(BROADCAST, false, 0); }
Test(aot_sweep, zero_size_float32) { sweep_f32(CONTIG, false, 0); }

static void sweep_min_cut(layout l, bool dynamic) {
  setenv("KILN_AOT_PARTITIONER", "min_cut", 1);
  sweep(l, dynamic);
  unsetenv("KILN_AOT_PARTITIONER");
}

Test(aot_sweep, contiguous_static_min_cut) { sweep_min_cut(CONTIG, false); }
Test(aot_sweep, transposed_static_min_cut) { sweep_min_cut(TRANSPOSED, false); }
Test(aot_sweep, broadcast_static_min_cut) { sweep_min_cut(BROADCAST, false); }
Test(aot_sweep, contiguous_dynamic_min_cut) { sweep_min_cut(CONTIG, true); }
