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
