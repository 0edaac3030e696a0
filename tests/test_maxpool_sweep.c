/*
** test_maxpool_sweep.c: max_pool2d's float32 (vector) and float64 kernels
** and its backward against a second implementation written here from the
** definition (each window's taps visited in row-major order in double, the
** first maximum kept, the first NaN winning; the gradient scattered to the
** chosen input element), over a sweep of kernel sizes, strides, padding,
** dilation and ceil_mode on planes whose widths are not multiples of four,
** with ties, NaN and -inf, strided (non-contiguous) inputs, and a case large
** enough for a 2-thread team.
*/
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>

#include "kiln/kiln.h"

typedef struct geo {
  int64_t kh, kw, sh, sw, ph, pw, dh, dw;
  bool ceil;
} geo;

static int64_t out_len(int64_t in, int64_t k, int64_t s, int64_t p, int64_t d, bool ceil) {
  int64_t num = in + 2 * p - d * (k - 1) - 1 + (ceil ? s - 1 : 0);
  int64_t o = num / s + 1; /* num >= 0 for the sweep's cases */
  if (ceil && (o - 1) * s >= in + p) o--;
  return o;
}

/* Value of element (p, h, w) of x (any strides), as double. */
static double at(const kn_tensor *x, int64_t p, int64_t h, int64_t w) {
  const int64_t *st = kn_strides(x);
  int64_t C = kn_sizes(x)[1];
  int64_t off = (p / C) * st[0] + (p % C) * st[1] + h * st[2] + w * st[3];
  if (kn_tensor_dtype(x) == KN_FLOAT32) return ((const float *)kn_data(x))[off];
  return ((const double *)kn_data(x))[off];
}

/* Compare kiln's values, indices and input gradient (for the output
** gradient go[i] = 1 + i % 7) with the reference. */
static void check(kn_tensor *x, const geo *g, const char *what) {
  const int64_t *sz = kn_sizes(x);
  int64_t P = sz[0] * sz[1], H = sz[2], W = sz[3];
  int64_t OH = out_len(H, g->kh, g->sh, g->ph, g->dh, g->ceil);
  int64_t OW = out_len(W, g->kw, g->sw, g->pw, g->dw, g->ceil);
  kn_tensor *idx = NULL;
  cr_assert_eq(kn_set_requires_grad(x, true), KN_OK);
  kn_tensor *y = kn_max_pool2d_with_indices(x, (int64_t[]){g->kh, g->kw},
                                            (int64_t[]){g->sh, g->sw}, (int64_t[]){g->ph, g->pw},
                                            (int64_t[]){g->dh, g->dw}, g->ceil, &idx);
  cr_assert(y && idx, "%s: %s", what, kn_last_error());
  cr_assert_eq(kn_sizes(y)[2], OH, "%s", what);
  cr_assert_eq(kn_sizes(y)[3], OW, "%s", what);
  kn_tensor *go = kn_empty(4, kn_sizes(y), kn_tensor_dtype(x));
  double *ref_g = calloc((size_t)(P * H * W), sizeof(double));
  for (int64_t i = 0; i < kn_numel(go); i++) {
    if (kn_tensor_dtype(x) == KN_FLOAT32) ((float *)kn_data(go))[i] = (float)(1 + i % 7);
    else ((double *)kn_data(go))[i] = (double)(1 + i % 7);
  }
  kn_tensor *yc = kn_contiguous(y), *ic = kn_contiguous(idx);
  for (int64_t p = 0; p < P; p++)
    for (int64_t oh = 0; oh < OH; oh++)
      for (int64_t ow = 0; ow < OW; ow++) {
        double best = -INFINITY;
        int64_t bi = -1;
        for (int64_t i = 0; i < g->kh; i++)
          for (int64_t j = 0; j < g->kw; j++) {
            int64_t h = oh * g->sh - g->ph + i * g->dh, w = ow * g->sw - g->pw + j * g->dw;
            if (h < 0 || h >= H || w < 0 || w >= W) continue;
            double v = at(x, p, h, w);
            if (bi < 0 || v > best || (isnan(v) && !isnan(best))) best = v, bi = h * W + w;
          }
        int64_t o = (p * OH + oh) * OW + ow;
        double got = kn_tensor_dtype(x) == KN_FLOAT32 ? ((const float *)kn_data(yc))[o]
                                                      : ((const double *)kn_data(yc))[o];
        int64_t gi = ((const int64_t *)kn_data(ic))[o];
        cr_assert(isnan(best) ? isnan(got) : got == best, "%s: value at %lld: %g, expected %g",
                  what, (long long)o, got, best);
        cr_assert_eq(gi, bi, "%s: index at %lld: %lld, expected %lld", what, (long long)o,
                     (long long)gi, (long long)bi);
        if (bi >= 0) ref_g[p * H * W + bi] += (double)(1 + o % 7);
      }
  cr_assert_eq(kn_backward(y, go), KN_OK, "%s: %s", what, kn_last_error());
  kn_tensor *gx = kn_contiguous(kn_grad(x));
  for (int64_t i = 0; i < P * H * W; i++) {
    double got = kn_tensor_dtype(x) == KN_FLOAT32 ? ((const float *)kn_data(gx))[i]
                                                  : ((const double *)kn_data(gx))[i];
    cr_assert_eq(got, ref_g[i], "%s: grad at %lld: %g, expected %g", what, (long long)i, got,
                 ref_g[i]);
  }
  free(ref_g);
  kn_release(gx), kn_release(yc), kn_release(ic), kn_release(go);
  kn_release(y), kn_release(idx);
}

/* [N, C, H, W] of dtype dt: a coarse grid of values (many ties), with a
** NaN or -inf sprinkled in when `specials`. */
static kn_tensor *input(int64_t N, int64_t C, int64_t H, int64_t W, kn_dtype dt, unsigned seed,
                        bool specials) {
  kn_tensor *t = kn_empty(4, (int64_t[]){N, C, H, W}, dt);
  srand(seed);
  for (int64_t i = 0; i < kn_numel(t); i++) {
    int r = rand();
    double v = (double)(r % 9) - 4.0;
    if (specials && r % 23 == 0) v = NAN;
    if (specials && r % 29 == 0) v = -INFINITY;
    if (dt == KN_FLOAT32) ((float *)kn_data(t))[i] = (float)v;
    else ((double *)kn_data(t))[i] = v;
  }
  return t;
}

static void sweep(kn_dtype dt) {
  int n = 0;
  for (int64_t k = 1; k <= 3; k++)
    for (int64_t s = 1; s <= 3; s++)
      for (int64_t p = 0; p <= k / 2; p++)
        for (int64_t d = 1; d <= 2; d++)
          for (int c = 0; c <= 1; c++) {
            geo g = {k, k + (s == 2), s, s == 3 ? 1 : s, p, p, d, 3 - d, c};
            if (g.pw > g.kw / 2) g.pw = g.kw / 2;
            int64_t H = 3 + (k + s + d) % 5 + d * k, W = 5 + (2 * k + s + p + c) % 7 + 2 * d * k;
            char what[160];
            snprintf(what, sizeof what, "%s k%lldx%lld s%lldx%lld p%lldx%lld d%lldx%lld ceil%d",
                     dt == KN_FLOAT32 ? "f32" : "f64", (long long)g.kh, (long long)g.kw,
                     (long long)g.sh, (long long)g.sw, (long long)g.ph, (long long)g.pw,
                     (long long)g.dh, (long long)g.dw, c);
            kn_tensor *x = input(2, 3, H, W, dt, (unsigned)n, n % 2 == 0);
            n++;
            check(x, &g, what);
            kn_release(x);
          }
}

Test(maxpool_sweep, float32_matches_the_definition) { sweep(KN_FLOAT32); }
Test(maxpool_sweep, float64_matches_the_definition) { sweep(KN_FLOAT64); }

/* A channels-last view and a column slice: strided planes. */
Test(maxpool_sweep, strided_inputs) {
  for (int f = 0; f <= 1; f++) {
    kn_dtype dt = f ? KN_FLOAT64 : KN_FLOAT32;
    kn_tensor *base = input(2, 9, 7, 3, dt, 77u + (unsigned)f, true); /* [N, H, W, C] data */
    kn_tensor *x = kn_permute(base, 4, (int64_t[]){0, 3, 1, 2}); /* [2, 3, 9, 7] */
    check(x, &(geo){2, 3, 2, 2, 1, 1, 1, 1, true}, "channels-last view");
    kn_release(x);
    kn_tensor *wide = input(1, 2, 6, 13, dt, 91u, false);
    kn_tensor *cols = kn_slice(wide, 3, 1, 12, 2); /* every other column: stride 2 */
    check(cols, &(geo){3, 2, 1, 1, 1, 1, 1, 1, false}, "column slice");
    kn_release(cols), kn_release(wide), kn_release(base);
  }
}

/* Enough windows for a team of two (when the machine has two cores). */
Test(maxpool_sweep, two_threads) {
  int prev = kn_get_num_threads();
  kn_set_num_threads(2);
  kn_tensor *x = input(8, 16, 16, 18, KN_FLOAT32, 5u, true);
  check(x, &(geo){2, 2, 2, 2, 0, 0, 1, 1, false}, "2 threads");
  kn_release(x);
  kn_set_num_threads(prev);
}

/* 2x2 windows of stride 2 without padding (float32's contiguous-group
** path): odd and even sizes, widths around multiples of eight, ceil_mode's
** partial last row and column, and a column slice (not contiguous). */
Test(maxpool_sweep, pair_windows) {
  unsigned seed = 300;
  for (int64_t H = 2; H <= 7; H++)
    for (int64_t W = 2; W <= 19; W += (W < 10 ? 1 : 3))
      for (int c = 0; c <= 1; c++) {
        char what[96];
        snprintf(what, sizeof what, "2x2 s2 H%lld W%lld ceil%d", (long long)H, (long long)W, c);
        kn_tensor *x = input(2, 2, H, W, KN_FLOAT32, seed, seed % 2 == 0);
        seed++;
        check(x, &(geo){2, 2, 2, 2, 0, 0, 1, 1, c}, what);
        kn_release(x);
      }
  kn_tensor *wide = input(1, 3, 6, 34, KN_FLOAT32, 7u, true);
  kn_tensor *cols = kn_slice(wide, 3, 0, 34, 2);
  check(cols, &(geo){2, 2, 2, 2, 0, 0, 1, 1, false}, "2x2 s2 column slice");
  kn_release(cols), kn_release(wide);
}
