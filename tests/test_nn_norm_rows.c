/*
** test_nn_norm_rows.c: layer_norm's row kernels (ops/norm_rows.c) against a
** straightforward double-precision reference written here: the mean, the
** biased variance, y = (x - mean) / sqrt(var + eps) * w + b, and the
** textbook backward (gx = rstd / D * (D g - sum g - xhat sum g xhat) with
** g = go * w, gw = sum over rows of go * xhat, gb = sum of go). Odd row
** lengths (1, 3, 17, 1000, 1025), float32 and float64, with and without
** weight and bias, contiguous and transposed inputs, enough rows to take the
** threaded path, on the baseline and on the widest ISA's kernels.
*/
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kiln/kiln.h"
#include "ops/norm_rows.h"
#include "ops/vmath.h"
#include "support/leakcheck.h"

TestSuite(norm_rows, .init = kn_test_leakcheck_begin, .fini = kn_test_leakcheck_end);

static double *doubles_of(kn_tensor *t) {
  kn_tensor *c = kn_contiguous(kn_to(t, KN_FLOAT64));
  cr_assert_not_null(c, "%s", kn_last_error());
  return kn_data(c);
}

typedef struct ref {
  double *y, *gx, *gw, *gb;
} ref;

/* The reference over M rows of D values (x, go contiguous doubles). */
static ref reference(const double *x, const double *go, const double *w, const double *b,
                     int64_t M, int64_t D, double eps) {
  ref r = {calloc((size_t)(M * D), 8), calloc((size_t)(M * D), 8), calloc((size_t)D, 8),
           calloc((size_t)D, 8)};
  double *xh = calloc((size_t)D, 8);
  for (int64_t i = 0; i < M; i++) {
    const double *xr = x + i * D, *gr = go + i * D;
    double m = 0, v = 0, sg = 0, sgx = 0;
    for (int64_t j = 0; j < D; j++) m += xr[j];
    m /= (double)D;
    for (int64_t j = 0; j < D; j++) v += (xr[j] - m) * (xr[j] - m);
    double rs = 1 / sqrt(v / (double)D + eps);
    for (int64_t j = 0; j < D; j++) {
      xh[j] = (xr[j] - m) * rs;
      r.y[i * D + j] = xh[j] * (w ? w[j] : 1) + (b ? b[j] : 0);
      double g = gr[j] * (w ? w[j] : 1);
      sg += g;
      sgx += g * xh[j];
      r.gw[j] += gr[j] * xh[j];
      r.gb[j] += gr[j];
    }
    for (int64_t j = 0; j < D; j++)
      r.gx[i * D + j] = rs / (double)D * ((double)D * gr[j] * (w ? w[j] : 1) - sg - xh[j] * sgx);
  }
  free(xh);
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
static void check_case(kn_dtype dt, int64_t M, int64_t D, bool affine, bool strided) {
  kn_generator *gen = kn_generator_new((uint64_t)(D * 131 + M));
  double tol = dt == KN_FLOAT32 ? 2e-5 : 1e-11, eps = 1e-5;
  /* a mean away from zero; strided: x is the transpose of a [D, M] leaf */
  kn_tensor *base = kn_add_scalar(strided ? kn_randn(KN_SHAPE(D, M), gen, dt)
                                          : kn_randn(KN_SHAPE(M, D), gen, dt), kn_float(3));
  cr_assert_eq(kn_set_requires_grad(base, true), KN_OK);
  kn_tensor *x = strided ? kn_transpose(base, 0, 1) : base;
  cr_assert_eq(kn_is_contiguous(x), !strided || M == 1 || D == 1);
  kn_tensor *w = affine ? kn_randn(KN_SHAPE(D), gen, dt) : NULL;
  kn_tensor *b = affine ? kn_randn(KN_SHAPE(D), gen, dt) : NULL;
  kn_tensor *go = kn_randn(KN_SHAPE(M, D), gen, dt);
  kn_tensor *ins[3] = {x, w, b};
  for (int i = 1; i < (affine ? 3 : 1); i++)
    cr_assert_eq(kn_set_requires_grad(ins[i], true), KN_OK);
  kn_tensor *y = kn_layer_norm(x, 1, (int64_t[]){D}, w, b, eps);
  cr_assert_not_null(y, "%s", kn_last_error());
  kn_tensor *g[3];
  cr_assert_eq(kn_autograd_grad(&y, 1, ins, affine ? 3 : 1, &go, false, false, false, g), KN_OK,
               "%s", kn_last_error());
  ref r = reference(doubles_of(x), doubles_of(go), w ? doubles_of(w) : NULL,
                    b ? doubles_of(b) : NULL, M, D, eps);
  close_to("y", doubles_of(y), r.y, M * D, tol, D);
  close_to("grad x", doubles_of(g[0]), r.gx, M * D, tol * (D > 1 ? 10 : 1), D);
  if (affine) {
    close_to("grad weight", doubles_of(g[1]), r.gw, D, tol * sqrt((double)M), D);
    close_to("grad bias", doubles_of(g[2]), r.gb, D, tol * sqrt((double)M), D);
  }
  free(r.y), free(r.gx), free(r.gw), free(r.gb);
  kn_generator_free(gen);
}

static void sweep(kn_dtype dt) {
  static const int64_t Ds[] = {1, 3, 17, 1000, 1025};
  for (int k = 0; k < 5; k++) {
    int64_t M = Ds[k] >= 1000 ? 70 : 9; /* 70 x 1025 rows: past KN__NORM_PAR_MIN */
    for (int affine = 0; affine < 2; affine++)
      for (int strided = 0; strided < 2; strided++) check_case(dt, M, Ds[k], affine, strided);
  }
}

/* float32's input gradient, computed in float from row constants rounded
** once (norm_rows_body.h), stays within a few roundings of its terms: 64
** rows of 1024 (every third with an output gradient close to constant, so
** that the terms cancel), against the formula in long double from the same
** float inputs; the error over rstd * (|g| + |sum g| / D + |xhat sum g xhat|
** / D) at most 16 * 2^-24 (measured 5.5; 3 when the gradient was computed
** in double from the float mean and rstd). */
Test(norm_rows, float32_input_gradient_within_roundings_of_its_terms) {
  const int64_t M = 64, D = 1024;
  kn_generator *gen = kn_generator_new(5);
  kn_tensor *x = kn_add_scalar(kn_mul_scalar(kn_randn(KN_SHAPE(M, D), gen, KN_FLOAT32),
                                             kn_float(2)), kn_float(0.5));
  kn_tensor *go = kn_randn(KN_SHAPE(M, D), gen, KN_FLOAT32);
  kn_tensor *w = kn_randn(KN_SHAPE(D), gen, KN_FLOAT32), *b = kn_randn(KN_SHAPE(D), gen, KN_FLOAT32);
  float *gv = kn_data(go);
  for (int64_t r = 0; r < M; r += 3)
    for (int64_t k = 0; k < D; k++) gv[r * D + k] = 1.0f + gv[r * D + k] * 1e-3f;
  cr_assert_eq(kn_set_requires_grad(x, true), KN_OK);
  kn_tensor *y = kn_layer_norm(x, 1, (int64_t[]){D}, w, b, 1e-5), *gx;
  cr_assert_eq(kn_autograd_grad(&y, 1, &x, 1, &go, false, false, false, &gx), KN_OK, "%s",
               kn_last_error());
  const float *xv = kn_data(x), *wv = kn_data(w), *ov = kn_data(gx);
  double worst = 0;
  int64_t at = -1;
  for (int64_t r = 0; r < M; r++) {
    long double s = 0, ss = 0, sg = 0, sgx = 0;
    for (int64_t k = 0; k < D; k++) s += xv[r * D + k];
    long double mu = s / D;
    for (int64_t k = 0; k < D; k++) ss += (xv[r * D + k] - mu) * (xv[r * D + k] - mu);
    long double rs = 1 / sqrtl(ss / D + 1e-5L);
    for (int64_t k = 0; k < D; k++) {
      long double g = (long double)gv[r * D + k] * wv[k], xh = (xv[r * D + k] - mu) * rs;
      sg += g, sgx += g * xh;
    }
    for (int64_t k = 0; k < D; k++) {
      long double g = (long double)gv[r * D + k] * wv[k], xh = (xv[r * D + k] - mu) * rs;
      long double want = rs / D * (D * g - sg - xh * sgx);
      long double terms = rs * (fabsl(g) + fabsl(sg) / D + fabsl(xh * sgx) / D);
      double e = (double)(fabsl(ov[r * D + k] - want) / terms);
      if (e > worst) worst = e, at = r * D + k;
    }
  }
  cr_expect(worst <= 16 * 0x1p-24, "grad x[%lld] = %a: %.3g of its terms", (long long)at,
            at < 0 ? 0 : ov[at], worst);
  kn_generator_free(gen);
}

Test(norm_rows, float32_matches_the_double_reference) { sweep(KN_FLOAT32); }
Test(norm_rows, float64_matches_the_double_reference) { sweep(KN_FLOAT64); }

/* The baseline kernels (what a CPU without AVX2 runs) too. */
Test(norm_rows, baseline_kernels_match_the_double_reference) {
  cr_assert_eq(kn__vmath_force(KN__ISA_SCALAR), KN_OK);
  cr_assert_str_eq(kn__norm_rows_get()->name, "baseline");
  sweep(KN_FLOAT32);
  sweep(KN_FLOAT64);
  cr_assert_eq(kn__vmath_force(KN__ISA_COUNT), KN_OK);
}

/* Rows pipelined: a row's sum (layer_norm) or sum of squares (rms_norm) is
** added up in the previous row's pass, the first row's in a pass of its own.
** Nine copies of one row must then give nine equal rows, bit for bit, for
** every row length up to 40 and some longer (rests of 0 to 15 elements
** past the vectors), float32 and float64, on every ISA's kernels. */
static int equal_rows(kn_tensor *y, int64_t rows, int64_t D) {
  kn_tensor *c = kn_contiguous(y);
  const char *v = kn_data(c);
  size_t w = (size_t)D * kn_dtype_size(kn_tensor_dtype(c));
  int r = 1;
  while (r < rows && !memcmp(v, v + r * w, w)) r++;
  return r == rows;
}

static void same_rows_sweep(kn_dtype dt) {
  const double eps = 1e-6;
  for (int64_t D = 1; D <= 1100; D += D < 40 ? 1 : 97) {
    kn_scope_begin();
    kn_tensor *row = kn_add_scalar(kn_randn(KN_SHAPE(1, D), NULL, dt), kn_float(2));
    kn_tensor *x = kn_contiguous(kn_expand(row, KN_SHAPE(9, D)));
    const int64_t d = D;
    kn_tensor *ln = kn_layer_norm(x, 1, &d, NULL, NULL, 1e-5), *rn = kn_rms_norm(x, 1, &d, NULL, &eps);
    cr_assert(ln && rn, "%s", kn_last_error());
    cr_expect(equal_rows(ln, 9, D), "layer_norm, rows of %lld (%s)", (long long)D, kn_dtype_name(dt));
    cr_expect(equal_rows(rn, 9, D), "rms_norm, rows of %lld (%s)", (long long)D, kn_dtype_name(dt));
    kn_scope_end();
  }
}

Test(norm_rows, pipelined_rows_give_equal_rows_equal_bits) {
  for (int isa = 0; isa < 2; isa++) {
    if (isa) cr_assert_eq(kn__vmath_force(KN__ISA_SCALAR), KN_OK);
    same_rows_sweep(KN_FLOAT32);
    same_rows_sweep(KN_FLOAT64);
  }
  cr_assert_eq(kn__vmath_force(KN__ISA_COUNT), KN_OK);
}
