/*
** test_nn_batch_norm.c: batch_norm forward and backward at sizes that split
** over threads, against a double-precision reference written here (two-pass
** statistics, PyTorch's formulas), float32 and float64, training and
** evaluation; results bit-identical at 1 and 2 threads. (test_nn_layers and
** test_nn_ref check small cases against torch 1.13's values.)
*/
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "kiln/kiln.h"
#include "support/leakcheck.h"

TestSuite(nn_batch_norm, .init = kn_test_leakcheck_begin, .fini = kn_test_leakcheck_end);

#define N 6
#define C 20
#define S 2600 /* 312000 elements: 2 threads' worth */

/* t's values as float64 (scope-owned; t is contiguous). */
static const double *f64(kn_tensor *t) { return kn_data(kn_to(t, KN_FLOAT64)); }

/* Reference forward and input gradient (training: batch statistics; eval:
** the running ones), x and g as double [N, C, S]. */
static void reference(const double *x, const double *g, const double *w, const double *b,
                      bool train, const double *rm, const double *rv, double eps, double *y,
                      double *gi, double *gw, double *gb) {
  for (int c = 0; c < C; c++) {
    double m = 0, v = 0, M = (double)N * S;
    for (int n = 0; n < N; n++)
      for (int s = 0; s < S; s++) m += x[(n * C + c) * S + s];
    m /= M;
    for (int n = 0; n < N; n++)
      for (int s = 0; s < S; s++) v += pow(x[(n * C + c) * S + s] - m, 2);
    v /= M;
    if (!train) m = rm[c], v = rv[c];
    double inv = 1 / sqrt(v + eps), sg = 0, sgx = 0;
    for (int n = 0; n < N; n++)
      for (int s = 0; s < S; s++) {
        int64_t i = (n * C + c) * S + s;
        double xh = (x[i] - m) * inv;
        y[i] = xh * w[c] + b[c];
        sg += g[i];
        sgx += g[i] * xh;
      }
    gw[c] = sgx;
    gb[c] = sg;
    for (int n = 0; n < N; n++)
      for (int s = 0; s < S; s++) {
        int64_t i = (n * C + c) * S + s;
        double xh = (x[i] - m) * inv;
        gi[i] = train ? w[c] * inv / M * (M * g[i] - sg - xh * sgx) : g[i] * w[c] * inv;
      }
  }
}

typedef struct run {
  kn_tensor *y, *gx, *gw, *gb;
} run;

static run forward_backward(kn_tensor *x, kn_tensor *g, kn_tensor *w, kn_tensor *b, bool train,
                            kn_dtype dt) {
  kn_tensor *rm = kn_zeros(1, (int64_t[]){C}, dt), *rv = kn_ones(1, (int64_t[]){C}, dt);
  kn_tensor *xl = kn_detach(x), *wl = kn_detach(w), *bl = kn_detach(b);
  kn_set_requires_grad(xl, true);
  kn_set_requires_grad(wl, true);
  kn_set_requires_grad(bl, true);
  run r = {kn_batch_norm(xl, rm, rv, wl, bl, train, 0.1, 1e-5), NULL, NULL, NULL};
  cr_assert_not_null(r.y, "%s", kn_last_error());
  cr_assert_eq(kn_backward(r.y, g), KN_OK, "%s", kn_last_error());
  r.gx = kn_grad(xl), r.gw = kn_grad(wl), r.gb = kn_grad(bl);
  return r;
}

static bool same_bytes(kn_tensor *a, kn_tensor *b) {
  return kn_numel(a) == kn_numel(b) &&
         !memcmp(kn_data(a), kn_data(b), (size_t)kn_numel(a) * kn_dtype_size(kn_tensor_dtype(a)));
}

static void check(kn_dtype dt, bool train) {
  kn_scope_begin();
  kn_generator *gen = kn_generator_new(11);
  int64_t sz[3] = {N, C, S};
  kn_tensor *x = kn_to(kn_add_scalar(kn_randn(3, sz, gen, KN_FLOAT32), kn_float(3)), dt);
  kn_tensor *g = kn_to(kn_randn(3, sz, gen, KN_FLOAT32), dt);
  kn_tensor *w = kn_to(kn_randn(1, (int64_t[]){C}, gen, KN_FLOAT32), dt);
  kn_tensor *b = kn_to(kn_randn(1, (int64_t[]){C}, gen, KN_FLOAT32), dt);
  kn_set_num_threads(1);
  run one = forward_backward(x, g, w, b, train, dt);
  kn_set_num_threads(2);
  run two = forward_backward(x, g, w, b, train, dt);
  kn_set_num_threads(0);
  cr_assert(same_bytes(one.y, two.y) && same_bytes(one.gx, two.gx) &&
            same_bytes(one.gw, two.gw) && same_bytes(one.gb, two.gb),
            "1 and 2 threads differ (dtype %d, train %d)", (int)dt, train);
  int64_t n = (int64_t)N * C * S;
  kn_tensor *xd = kn_to(x, KN_FLOAT64), *gd = kn_to(g, KN_FLOAT64);
  kn_tensor *wd = kn_to(w, KN_FLOAT64), *bd = kn_to(b, KN_FLOAT64);
  double *y = malloc((size_t)n * sizeof *y), *gi = malloc((size_t)n * sizeof *gi), gw[C], gb[C];
  double rm[C], rv[C];
  for (int c = 0; c < C; c++) rm[c] = 0, rv[c] = 1;
  reference(kn_data(xd), kn_data(gd), kn_data(wd), kn_data(bd), train, rm, rv, 1e-5, y, gi, gw,
            gb);
  double tol = dt == KN_FLOAT32 ? 2e-6 : 1e-12, worst = 0;
  const double *ky = f64(one.y), *kgx = f64(one.gx), *kgw = f64(one.gw), *kgb = f64(one.gb);
  for (int64_t i = 0; i < n; i++) {
    worst = fmax(worst, fabs(ky[i] - y[i]) / (1 + fabs(y[i])));
    worst = fmax(worst, fabs(kgx[i] - gi[i]) / (1 + fabs(gi[i])));
  }
  for (int c = 0; c < C; c++) {
    worst = fmax(worst, fabs(kgw[c] - gw[c]) / (1 + fabs(gw[c])));
    worst = fmax(worst, fabs(kgb[c] - gb[c]) / (1 + fabs(gb[c])));
  }
  cr_assert(worst <= tol, "dtype %d train %d: worst relative error %g > %g", (int)dt, train,
            worst, tol);
  free(y);
  free(gi);
  kn_generator_free(gen);
  kn_scope_end();
}

Test(nn_batch_norm, float32_training) { check(KN_FLOAT32, true); }
Test(nn_batch_norm, float32_eval) { check(KN_FLOAT32, false); }
Test(nn_batch_norm, float64_training) { check(KN_FLOAT64, true); }
Test(nn_batch_norm, float64_eval) { check(KN_FLOAT64, false); }
