/*
** test_nn_rms_norm.c: rms_norm (_fused_rms_norm, ops/nn_rms_norm.c, and its
** row kernels in ops/norm_rows.c) against a double-precision reference
** written here: rs = 1 / sqrt(mean(x^2) + eps), y = x * rs * w, and the
** backward gx = rs * g - x * rs^3 / D * sum(g * x) with g = go * w,
** gw = the sum over rows of go * x * rs. Row lengths 1, 7, 1023, 1025 and
** 9000 (36 KB of float32: longer than L1), float32, float64 and bfloat16,
** with and without weight, contiguous and transposed inputs, enough rows to
** take the threaded path, on the baseline and on the widest ISA's kernels;
** central finite differences of float64; zero rows; the default eps; the
** same forward and input gradient on 1 and 2 threads; compiled graphs
** (fixed and dynamic sizes); bad shapes and dtypes.
*/
#include <criterion/criterion.h>
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kiln/kiln.h"
#include "ops/norm_rows.h"
#include "ops/vmath.h"
#include "support/leakcheck.h"

TestSuite(rms_norm, .init = kn_test_leakcheck_begin, .fini = kn_test_leakcheck_end);

static double *doubles_of(kn_tensor *t) {
  kn_tensor *c = kn_contiguous(kn_to(t, KN_FLOAT64));
  cr_assert_not_null(c, "%s", kn_last_error());
  return kn_data(c);
}

typedef struct ref {
  double *y, *gx, *gw;
} ref;

/* The reference over M rows of D values (x, go contiguous doubles). */
static ref reference(const double *x, const double *go, const double *w, int64_t M, int64_t D,
                     double eps) {
  ref r = {calloc((size_t)(M * D) + 1, 8), calloc((size_t)(M * D) + 1, 8),
           calloc((size_t)D + 1, 8)};
  for (int64_t i = 0; i < M; i++) {
    const double *xr = x + i * D, *gr = go + i * D;
    double ss = 0, s = 0;
    for (int64_t j = 0; j < D; j++) {
      ss += xr[j] * xr[j];
      s += gr[j] * (w ? w[j] : 1) * xr[j];
    }
    double rs = 1 / sqrt(ss / (double)D + eps);
    for (int64_t j = 0; j < D; j++) {
      r.y[i * D + j] = xr[j] * rs * (w ? w[j] : 1);
      r.gx[i * D + j] = rs * gr[j] * (w ? w[j] : 1) - xr[j] * rs * rs * rs / (double)D * s;
      r.gw[j] += gr[j] * xr[j] * rs;
    }
  }
  return r;
}

static void close_to(const char *what, const double *got, const double *want, int64_t n,
                     double tol, int64_t D) {
  for (int64_t i = 0; i < n; i++)
    cr_assert(fabs(got[i] - want[i]) <= tol * (1 + fabs(want[i])),
              "%s (D %lld) element %lld: got %.17g, want %.17g", what, (long long)D,
              (long long)i, got[i], want[i]);
}

/* One case: M rows of D, transposed storage when `strided`. */
static void check_case(kn_dtype dt, int64_t M, int64_t D, bool weighted, bool strided) {
  kn_scope_begin();
  kn_generator *gen = kn_generator_new((uint64_t)(D * 131 + M));
  double tol = dt == KN_FLOAT32 ? 2e-6 : dt == KN_FLOAT64 ? 1e-13 : 1e-2, eps = 1e-5;
  kn_tensor *base = strided ? kn_randn(KN_SHAPE(D, M), gen, dt) : kn_randn(KN_SHAPE(M, D), gen, dt);
  cr_assert_eq(kn_set_requires_grad(base, true), KN_OK);
  kn_tensor *x = strided ? kn_transpose(base, 0, 1) : base;
  cr_assert_eq(kn_is_contiguous(x), !strided || M == 1 || D == 1);
  kn_tensor *w = weighted ? kn_randn(KN_SHAPE(D), gen, dt) : NULL;
  kn_tensor *go = kn_randn(KN_SHAPE(M, D), gen, dt);
  kn_tensor *ins[2] = {x, w};
  if (weighted) cr_assert_eq(kn_set_requires_grad(w, true), KN_OK);
  kn_tensor *y = kn_rms_norm(x, 1, (int64_t[]){D}, w, &eps);
  cr_assert_not_null(y, "%s", kn_last_error());
  cr_assert_eq(kn_tensor_dtype(y), dt);
  kn_tensor *g[2];
  cr_assert_eq(kn_autograd_grad(&y, 1, ins, weighted ? 2 : 1, &go, false, false, false, g),
               KN_OK, "%s", kn_last_error());
  ref r = reference(doubles_of(x), doubles_of(go), w ? doubles_of(w) : NULL, M, D, eps);
  close_to("y", doubles_of(y), r.y, M * D, tol, D);
  close_to("grad x", doubles_of(g[0]), r.gx, M * D, tol * 10, D);
  if (weighted) close_to("grad weight", doubles_of(g[1]), r.gw, D, tol * sqrt((double)M) * 10, D);
  free(r.y), free(r.gx), free(r.gw);
  kn_generator_free(gen);
  kn_scope_end();
}

static void sweep(kn_dtype dt) {
  static const int64_t Ds[] = {1, 7, 1023, 1025, 9000};
  for (int k = 0; k < 5; k++) {
    int64_t M = Ds[k] >= 1000 ? 70 : 9; /* 70 x 1023: past two grains, a team of 2 */
    for (int weighted = 0; weighted < 2; weighted++)
      for (int strided = 0; strided < 2; strided++) check_case(dt, M, Ds[k], weighted, strided);
  }
}

/* float32's input gradient, computed in float from rs^3 * sum(g x) / D
** rounded once a row (norm_rows_body.h), within a few roundings of its
** terms: 64 rows of 1024 against the formula in long double from the same
** float inputs; the error over |rs g| + |x rs^3 sum(g x) / D| at most
** 8 * 2^-24 (measured 3.5; 3.0 with the gradient in double). */
Test(rms_norm, float32_input_gradient_within_roundings_of_its_terms) {
  const int64_t M = 64, D = 1024;
  const double eps = 1e-6;
  kn_generator *gen = kn_generator_new(5);
  kn_tensor *x = kn_add_scalar(kn_mul_scalar(kn_randn(KN_SHAPE(M, D), gen, KN_FLOAT32),
                                             kn_float(2)), kn_float(0.5));
  kn_tensor *go = kn_randn(KN_SHAPE(M, D), gen, KN_FLOAT32);
  kn_tensor *w = kn_randn(KN_SHAPE(D), gen, KN_FLOAT32);
  cr_assert_eq(kn_set_requires_grad(x, true), KN_OK);
  kn_tensor *y = kn_rms_norm(x, 1, (int64_t[]){D}, w, &eps), *gx;
  cr_assert_eq(kn_autograd_grad(&y, 1, &x, 1, &go, false, false, false, &gx), KN_OK, "%s",
               kn_last_error());
  const float *xv = kn_data(x), *wv = kn_data(w), *gv = kn_data(go), *ov = kn_data(gx);
  double worst = 0;
  int64_t at = -1;
  for (int64_t r = 0; r < M; r++) {
    long double ss = 0, s = 0;
    for (int64_t k = 0; k < D; k++) ss += (long double)xv[r * D + k] * xv[r * D + k];
    long double rs = 1 / sqrtl(ss / D + eps);
    for (int64_t k = 0; k < D; k++) s += (long double)gv[r * D + k] * wv[k] * xv[r * D + k];
    long double c = rs * rs * rs * s / D;
    for (int64_t k = 0; k < D; k++) {
      long double g = (long double)gv[r * D + k] * wv[k], want = rs * g - xv[r * D + k] * c;
      long double terms = fabsl(rs * g) + fabsl(xv[r * D + k] * c);
      double e = (double)(fabsl(ov[r * D + k] - want) / terms);
      if (e > worst) worst = e, at = r * D + k;
    }
  }
  cr_expect(worst <= 8 * 0x1p-24, "grad x[%lld] = %a: %.3g of its terms", (long long)at,
            at < 0 ? 0 : ov[at], worst);
  kn_generator_free(gen);
}

Test(rms_norm, float32_matches_the_double_reference) { sweep(KN_FLOAT32); }
Test(rms_norm, float64_matches_the_double_reference) { sweep(KN_FLOAT64); }

/* bfloat16: computed in float32, rounded once (the tolerance is bfloat16's
** half ulp, 2^-9, with room for the rounded inputs). */
Test(rms_norm, bfloat16_is_computed_in_float32) {
  check_case(KN_BFLOAT16, 5, 7, true, false);
  check_case(KN_BFLOAT16, 70, 1025, true, true);
}

/* The baseline kernels (what a CPU without AVX2 runs) too. */
Test(rms_norm, baseline_kernels_match_the_double_reference) {
  cr_assert_eq(kn__vmath_force(KN__ISA_SCALAR), KN_OK);
  cr_assert_str_eq(kn__norm_rows_get()->name, "baseline");
  sweep(KN_FLOAT32);
  sweep(KN_FLOAT64);
  cr_assert_eq(kn__vmath_force(KN__ISA_COUNT), KN_OK);
}

/* sum(rms_norm(x, w) * c) for a fixed c, in double. */
static double objective(kn_tensor *x, kn_tensor *w, kn_tensor *c, double eps) {
  kn_scope_begin();
  kn_tensor *y = kn_rms_norm(x, 2, (int64_t[]){3, 5}, w, &eps);
  cr_assert_not_null(y, "%s", kn_last_error());
  double v = 0;
  cr_assert_eq(kn_item_double(kn_sum(kn_mul(y, c)), &v), KN_OK);
  kn_scope_end();
  return v;
}

/* Central differences of float64 over a [2, 3, 5] input normalized over its
** last two dims, for x and the weight. */
Test(rms_norm, gradients_match_finite_differences) {
  kn_generator *gen = kn_generator_new(7);
  kn_tensor *x = kn_randn(KN_SHAPE(2, 3, 5), gen, KN_FLOAT64);
  kn_tensor *w = kn_randn(KN_SHAPE(3, 5), gen, KN_FLOAT64);
  kn_tensor *c = kn_randn(KN_SHAPE(2, 3, 5), gen, KN_FLOAT64);
  double eps = 1e-3, h = 1e-6;
  kn_tensor *ins[2] = {x, w}, *g[2];
  for (int i = 0; i < 2; i++) cr_assert_eq(kn_set_requires_grad(ins[i], true), KN_OK);
  kn_tensor *y = kn_rms_norm(x, 2, (int64_t[]){3, 5}, w, &eps);
  cr_assert_eq(kn_autograd_grad(&y, 1, ins, 2, &c, false, false, false, g), KN_OK, "%s",
               kn_last_error());
  for (int k = 0; k < 2; k++) {
    double *p = kn_data(ins[k]), *gp = kn_data(kn_contiguous(g[k]));
    for (int64_t i = 0; i < kn_numel(ins[k]); i++) {
      double v = p[i];
      p[i] = v + h;
      double up = objective(x, w, c, eps);
      p[i] = v - h;
      double down = objective(x, w, c, eps);
      p[i] = v;
      double fd = (up - down) / (2 * h);
      cr_assert(fabs(gp[i] - fd) <= 1e-6 * (1 + fabs(fd)), "%s element %lld: %.12g, fd %.12g",
                k ? "weight" : "x", (long long)i, gp[i], fd);
    }
  }
  kn_generator_free(gen);
}

/* Zero rows: an empty output, and a zero weight gradient (torch's). */
Test(rms_norm, zero_rows) {
  kn_tensor *x = kn_zeros(KN_SHAPE(0, 4), KN_FLOAT32), *w = kn_ones(KN_SHAPE(4), KN_FLOAT32);
  cr_assert_eq(kn_set_requires_grad(x, true), KN_OK);
  cr_assert_eq(kn_set_requires_grad(w, true), KN_OK);
  kn_tensor *y = kn_rms_norm(x, 1, (int64_t[]){4}, w, NULL);
  cr_assert_not_null(y, "%s", kn_last_error());
  cr_assert_eq(kn_numel(y), 0);
  kn_tensor *ins[2] = {x, w}, *g[2], *go = kn_zeros(KN_SHAPE(0, 4), KN_FLOAT32);
  cr_assert_eq(kn_autograd_grad(&y, 1, ins, 2, &go, false, false, false, g), KN_OK, "%s",
               kn_last_error());
  cr_assert_eq(kn_numel(g[0]), 0);
  cr_assert_eq(kn_numel(g[1]), 4);
  for (int64_t i = 0; i < 4; i++) cr_assert_eq(((float *)kn_data(g[1]))[i], 0.0f);
}

/* eps omitted: float32's machine epsilon (float64's for float64), which
** matters for inputs of mean square 1e-8. */
Test(rms_norm, default_eps_is_the_machine_epsilon) {
  static const kn_dtype dts[2] = {KN_FLOAT32, KN_FLOAT64};
  for (int k = 0; k < 2; k++) {
    kn_tensor *x = kn_mul_scalar(kn_to(kn_arange(kn_float(1), kn_float(6), kn_float(1)), dts[k]),
                                 kn_float(1e-4));
    kn_tensor *y = kn_rms_norm(x, 1, (int64_t[]){5}, NULL, NULL);
    cr_assert_not_null(y, "%s", kn_last_error());
    double eps = k ? DBL_EPSILON : FLT_EPSILON, ss = 0, *xp = doubles_of(x), *yp = doubles_of(y);
    for (int i = 0; i < 5; i++) ss += xp[i] * xp[i];
    for (int i = 0; i < 5; i++) {
      double want = xp[i] / sqrt(ss / 5 + eps);
      cr_assert(fabs(yp[i] - want) <= 1e-6 * fabs(want), "%s element %d: %.9g, want %.9g",
                kn_dtype_name(dts[k]), i, yp[i], want);
    }
  }
}

/* Rows are independent: the output and the input gradient are the same
** bits on 1 and 2 threads (the weight gradient's sum follows the team). */
Test(rms_norm, rows_are_the_same_on_one_and_two_threads) {
  kn_generator *gen = kn_generator_new(3);
  kn_tensor *x = kn_randn(KN_SHAPE(70, 1025), gen, KN_FLOAT32);
  kn_tensor *w = kn_randn(KN_SHAPE(1025), gen, KN_FLOAT32);
  kn_tensor *go = kn_randn(KN_SHAPE(70, 1025), gen, KN_FLOAT32);
  cr_assert_eq(kn_set_requires_grad(x, true), KN_OK);
  int prev = kn_get_num_threads();
  kn_tensor *y[2], *g[2];
  for (int t = 0; t < 2; t++) {
    cr_assert_eq(kn_set_num_threads(t + 1), KN_OK);
    y[t] = kn_rms_norm(x, 1, (int64_t[]){1025}, w, NULL);
    cr_assert_eq(kn_autograd_grad(&y[t], 1, &x, 1, &go, false, false, false, &g[t]), KN_OK,
                 "%s", kn_last_error());
  }
  cr_assert_eq(kn_set_num_threads(prev), KN_OK);
  size_t n = 70 * 1025 * sizeof(float);
  cr_expect_eq(memcmp(kn_data(y[0]), kn_data(y[1]), n), 0, "forward differs");
  cr_expect_eq(memcmp(kn_data(g[0]), kn_data(g[1]), n), 0, "input gradient differs");
  kn_generator_free(gen);
}

static kn_tensor *rms_fn(kn_tensor *x, kn_tensor *w) {
  return kn_rms_norm(x, 1, (int64_t[]){33}, w, NULL);
}

/* A compiled graph calls the op (an extern call): eager's values. */
Test(rms_norm, compiled_matches_eager) {
  kn_scope_begin();
  kn_generator *gen = kn_generator_new(5);
  kn_tensor *x = kn_randn(KN_SHAPE(6, 33), gen, KN_FLOAT32);
  kn_tensor *w = kn_randn(KN_SHAPE(33), gen, KN_FLOAT32);
  kn_tensor *go = kn_randn(KN_SHAPE(6, 33), gen, KN_FLOAT32), *gc, *ge;
  cr_assert_eq(kn_set_requires_grad(x, true), KN_OK);
  kn_compile_options o = {.backend = "inductor", .dynamic = KN_DYNAMIC_FALSE};
  kn_compiled *f = KN_COMPILE(rms_fn, &o);
  cr_assert_not_null(f, "%s", kn_last_error());
  kn_tensor *yc = kn_call_t(f, x, w), *ye = rms_fn(x, w);
  cr_assert_not_null(yc, "%s", kn_last_error());
  cr_assert_eq(kn_autograd_grad(&yc, 1, &x, 1, &go, false, false, false, &gc), KN_OK, "%s",
               kn_last_error());
  cr_assert_eq(kn_autograd_grad(&ye, 1, &x, 1, &go, false, false, false, &ge), KN_OK);
  cr_expect_eq(memcmp(kn_data(yc), kn_data(ye), 6 * 33 * sizeof(float)), 0);
  cr_expect_eq(memcmp(kn_data(kn_contiguous(gc)), kn_data(kn_contiguous(ge)),
                      6 * 33 * sizeof(float)), 0);
  kn_compiled_free(f);
  kn_generator_free(gen);
  kn_scope_end();
}

/* Under dynamic sizes one compiled graph serves 6 and 11 rows (the metas
** keep the row count symbolic), with eager's values and gradients. */
Test(rms_norm, compiled_with_dynamic_rows) {
  kn_scope_begin();
  kn_generator *gen = kn_generator_new(9);
  kn_tensor *w = kn_randn(KN_SHAPE(33), gen, KN_FLOAT32);
  kn_compile_options o = {.backend = "inductor", .dynamic = KN_DYNAMIC_TRUE};
  kn_compiled *f = KN_COMPILE(rms_fn, &o);
  cr_assert_not_null(f, "%s", kn_last_error());
  for (int64_t rows = 6; rows <= 11; rows += 5) {
    kn_tensor *x = kn_randn(KN_SHAPE(rows, 33), gen, KN_FLOAT32);
    kn_tensor *go = kn_randn(KN_SHAPE(rows, 33), gen, KN_FLOAT32), *gc, *ge;
    cr_assert_eq(kn_set_requires_grad(x, true), KN_OK);
    kn_tensor *yc = kn_call_t(f, x, w), *ye = rms_fn(x, w);
    cr_assert_not_null(yc, "%s", kn_last_error());
    cr_assert_eq(kn_autograd_grad(&yc, 1, &x, 1, &go, false, false, false, &gc), KN_OK, "%s",
                 kn_last_error());
    cr_assert_eq(kn_autograd_grad(&ye, 1, &x, 1, &go, false, false, false, &ge), KN_OK);
    size_t n = (size_t)rows * 33 * sizeof(float);
    cr_expect_eq(memcmp(kn_data(kn_contiguous(yc)), kn_data(ye), n), 0, "rows %lld",
                 (long long)rows);
    cr_expect_eq(memcmp(kn_data(kn_contiguous(gc)), kn_data(kn_contiguous(ge)), n), 0,
                 "rows %lld", (long long)rows);
  }
  kn_compiled_free(f);
  kn_generator_free(gen);
  kn_scope_end();
}

Test(rms_norm, bad_shapes_and_dtypes_are_errors) {
  kn_tensor *x = kn_ones(KN_SHAPE(2, 3), KN_FLOAT32), *w = kn_ones(KN_SHAPE(4), KN_FLOAT32);
  cr_expect_null(kn_rms_norm(x, 1, (int64_t[]){4}, NULL, NULL));
  cr_expect(strstr(kn_last_error(), "expected input with shape [*, 4], but got input of size"
                                     "[2, 3]"), "%s", kn_last_error());
  cr_expect_null(kn_rms_norm(x, 1, (int64_t[]){3}, w, NULL));
  cr_expect(strstr(kn_last_error(), "Expected weight to be of same shape as normalized_shape"),
            "%s", kn_last_error());
  kn_tensor *xi = kn_ones(KN_SHAPE(2, 3), KN_INT64);
  cr_expect_null(kn_rms_norm(xi, 1, (int64_t[]){3}, NULL, NULL));
  cr_expect(strstr(kn_last_error(), "expected a floating input, got int64"), "%s",
            kn_last_error());
}
