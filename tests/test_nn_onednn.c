/*
** test_nn_onednn.c: the float32 kernels that run on oneDNN (mm, addmm, bmm,
** matmul through dnnl_sgemm; conv2d forward and backward through cached
** convolution primitives) against naive loops written here, on odd shapes,
** transposed and strided operands, zero sizes, batch broadcasting, every
** convolution parameter, and more geometries than the primitive cache holds.
** Also checks kn_nn_kernel_info against what the libraries report.
*/
#include <cblas.h>
#include <oneapi/dnnl/dnnl.h>
#include <oneapi/dnnl/dnnl_debug.h>
#include <pthread.h>
#include <stdio.h>

#include "nn_util.h"
#include "support/leakcheck.h"

char *openblas_get_corename(void);

TestSuite(nn_onednn, .init = kn_test_leakcheck_begin, .fini = kn_test_leakcheck_end);

/* Deterministic, irregular values in [-1, 1]. */
static kn_tensor *vals(int ndim, const int64_t *sizes, double seed) {
  kn_tensor *t = kn_empty(ndim, sizes, KN_FLOAT32);
  cr_assert_not_null(t, "%s", kn_last_error());
  float *p = kn_data(t);
  for (int64_t i = 0; i < kn_numel(t); i++) p[i] = (float)sin(seed + 0.731 * (double)i);
  return t;
}

/* Same values as vals(), held in one of three layouts: 0 contiguous, 1
** column-major (a transposed view of a contiguous buffer), 2 strided with
** gaps in both dims (every other row and column of a larger buffer). */
static kn_tensor *mat(int64_t r, int64_t c, double seed, int layout) {
  kn_tensor *m = vals(KN_SHAPE(r, c), seed);
  if (layout == 1) return nt_colmajor(m);
  if (layout == 0) return m;
  kn_tensor *big = kn_zeros(KN_SHAPE(2 * r + 1, 2 * c + 1), KN_FLOAT32);
  int64_t st[2] = {2 * (2 * c + 1), 2};
  kn_tensor *v = kn__autorelease(kn__make_view(big, 2, (int64_t[]){r, c}, st, big->offset));
  cr_assert_eq(kn__copy_into(v, m), KN_OK);
  return v;
}

/* Naive A @ B (any strides), in double. */
static void ref_mm(kn_tensor *a, kn_tensor *b, double *out) {
  int64_t M = kn_size(a, 0), K = kn_size(a, 1), N = kn_size(b, 1);
  for (int64_t i = 0; i < M; i++)
    for (int64_t j = 0; j < N; j++) {
      double s = 0;
      for (int64_t k = 0; k < K; k++)
        s += kn_get(a, (int64_t[]){i, k}) * kn_get(b, (int64_t[]){k, j});
      out[i * N + j] = s;
    }
}

static double want[1 << 16];

Test(nn_onednn, mm_odd_shapes_all_layouts) {
  static const int64_t shapes[][3] = {{1, 1, 1}, {7, 13, 5}, {33, 17, 1}, {1, 19, 23},
                                      {65, 3, 31}, {2, 100, 3}};
  for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
    for (int la = 0; la < 3; la++)
      for (int lb = 0; lb < 3; lb++) {
        int64_t M = shapes[s][0], K = shapes[s][1], N = shapes[s][2];
        kn_tensor *a = mat(M, K, 0.3 * (double)s, la), *b = mat(K, N, 1.0 + (double)s, lb);
        ref_mm(a, b, want);
        nt_expect(kn_mm(a, b), KN_SHAPE(M, N), want, 1e-4);
      }
}

Test(nn_onednn, addmm_alpha_beta_and_nan_self_with_beta_zero) {
  kn_tensor *a = mat(5, 7, 0.1, 1), *b = mat(7, 3, 0.2, 0);
  kn_tensor *s = vals(KN_SHAPE(5, 3), 0.7);
  ref_mm(a, b, want);
  for (int i = 0; i < 15; i++) want[i] = 0.5 * want[i] + 2.0 * nt_at(s, i);
  nt_expect(kn_addmm(s, a, b, kn_float(2.0), kn_float(0.5)), KN_SHAPE(5, 3), want, 1e-4);
  kn_tensor *nan = kn_full(KN_SHAPE(5, 3), kn_float(NAN), KN_FLOAT32);
  ref_mm(a, b, want);
  nt_expect(kn_addmm(nan, a, b, kn_int(0), kn_int(1)), KN_SHAPE(5, 3), want, 1e-4);
}

Test(nn_onednn, zero_sizes) {
  kn_tensor *r = kn_mm(vals(KN_SHAPE(0, 4), 0), vals(KN_SHAPE(4, 5), 1));
  nt_expect(r, KN_SHAPE(0, 5), want, 0);
  double zeros[15] = {0};
  nt_expect(kn_mm(vals(KN_SHAPE(3, 0), 0), vals(KN_SHAPE(0, 5), 1)), KN_SHAPE(3, 5), zeros, 0);
  nt_expect(kn_mm(vals(KN_SHAPE(3, 4), 0), vals(KN_SHAPE(4, 0), 1)), KN_SHAPE(3, 0), zeros, 0);
  kn_tensor *s = vals(KN_SHAPE(3, 5), 2);
  for (int i = 0; i < 15; i++) want[i] = 3.0 * nt_at(s, i);
  nt_expect(kn_addmm(s, vals(KN_SHAPE(3, 0), 0), vals(KN_SHAPE(0, 5), 1), kn_int(3), kn_int(1)),
            KN_SHAPE(3, 5), want, 1e-5);
  nt_expect(kn_bmm(vals(KN_SHAPE(0, 2, 3), 0), vals(KN_SHAPE(0, 3, 4), 1)), KN_SHAPE(0, 2, 4),
            want, 0);
  for (int i = 0; i < 54; i++) want[i] = 1.0; /* no input channels: only the bias */
  nt_expect(kn_conv2d(vals(KN_SHAPE(2, 0, 4, 4), 0), vals(KN_SHAPE(3, 0, 2, 2), 1),
                      kn_ones(KN_SHAPE(3), KN_FLOAT32), NULL, NULL, NULL, 1),
            KN_SHAPE(2, 3, 3, 3), want, 0);
}

/* Naive batched product of a [B, M, K] and b [B, K, N] (any strides). */
static void ref_bmm(kn_tensor *a, kn_tensor *b, double *out) {
  int64_t B = kn_size(a, 0), M = kn_size(a, 1), K = kn_size(a, 2), N = kn_size(b, 2);
  for (int64_t p = 0; p < B; p++)
    for (int64_t i = 0; i < M; i++)
      for (int64_t j = 0; j < N; j++) {
        double s = 0;
        for (int64_t k = 0; k < K; k++)
          s += kn_get(a, (int64_t[]){p, i, k}) * kn_get(b, (int64_t[]){p, k, j});
        out[(p * M + i) * N + j] = s;
      }
}

Test(nn_onednn, bmm_transposed_and_expanded_batches) {
  kn_tensor *a = kn_transpose(vals(KN_SHAPE(3, 6, 5), 0.4), 1, 2); /* [3, 5, 6] */
  kn_tensor *b = kn_expand(vals(KN_SHAPE(1, 6, 7), 0.9), 3, (int64_t[]){3, 6, 7});
  ref_bmm(a, b, want);
  nt_expect(kn_bmm(a, b), KN_SHAPE(3, 5, 7), want, 1e-4);
}

Test(nn_onednn, matmul_batch_broadcast) {
  kn_tensor *a = vals(KN_SHAPE(2, 1, 3, 4), 0.2), *b = vals(KN_SHAPE(5, 4, 6), 0.6);
  kn_tensor *r = kn_matmul(a, b);
  for (int64_t i = 0; i < 2; i++)
    for (int64_t j = 0; j < 5; j++)
      for (int64_t m = 0; m < 3; m++)
        for (int64_t n = 0; n < 6; n++) {
          double s = 0;
          for (int64_t k = 0; k < 4; k++)
            s += kn_get(a, (int64_t[]){i, 0, m, k}) * kn_get(b, (int64_t[]){j, k, n});
          want[((i * 5 + j) * 3 + m) * 6 + n] = s;
        }
  nt_expect(r, KN_SHAPE(2, 5, 3, 6), want, 1e-4);
}

/* ---- convolution -------------------------------------------------------------------- */

typedef struct geo {
  int64_t N, C, H, W, O, kh, kw, s[2], p[2], d[2], g;
} geo;

static int64_t osz(int64_t in, int64_t k, int64_t s, int64_t p, int64_t d) {
  return (in + 2 * p - d * (k - 1) - 1) / s + 1;
}

/* Runs the body (the trailing arguments) for every in-range tap of the convolution
** (c is the input channel within the group, ih/iw the input position). */
#define FOR_TAPS(q, OH, OW, ...)                                                    \
  for (int64_t n = 0; n < (q).N; n++)                                                \
    for (int64_t o = 0; o < (q).O; o++)                                              \
      for (int64_t i = 0; i < (OH); i++)                                             \
        for (int64_t j = 0; j < (OW); j++)                                           \
          for (int64_t c = 0; c < (q).C / (q).g; c++)                                \
            for (int64_t a = 0; a < (q).kh; a++)                                     \
              for (int64_t e = 0; e < (q).kw; e++) {                                 \
                int64_t ih = i * (q).s[0] - (q).p[0] + a * (q).d[0];                 \
                int64_t iw = j * (q).s[1] - (q).p[1] + e * (q).d[1];                 \
                int64_t ci = o / ((q).O / (q).g) * ((q).C / (q).g) + c;              \
                if (ih < 0 || ih >= (q).H || iw < 0 || iw >= (q).W) continue;        \
                __VA_ARGS__;                                                         \
              }

static double gx_want[1 << 16], gw_want[1 << 14], gb_want[64];

/* Forward and all three gradients of one float32 convolution against the
** naive loops (x may be given non-contiguous). */
static void check_geo(geo q, bool bias, bool strided_x) {
  int64_t OH = osz(q.H, q.kh, q.s[0], q.p[0], q.d[0]), OW = osz(q.W, q.kw, q.s[1], q.p[1], q.d[1]);
  kn_tensor *x = vals(KN_SHAPE(q.N, q.C, q.H, q.W), 0.1);
  if (strided_x) x = kn_permute(kn_contiguous(kn_permute(x, KN_SHAPE(0, 2, 3, 1))),
                                KN_SHAPE(0, 3, 1, 2)); /* channels-last strides */
  kn_tensor *w = vals(KN_SHAPE(q.O, q.C / q.g, q.kh, q.kw), 0.5);
  kn_tensor *b = bias ? vals(KN_SHAPE(q.O), 2.0) : NULL;
  kn_tensor *gy = vals(KN_SHAPE(q.N, q.O, OH, OW), 1.3);
  int64_t ny = q.N * q.O * OH * OW;
  for (int64_t k = 0; k < ny; k++) want[k] = b ? nt_at(b, (k / (OH * OW)) % q.O) : 0;
  memset(gx_want, 0, sizeof gx_want), memset(gw_want, 0, sizeof gw_want);
  memset(gb_want, 0, sizeof gb_want);
  FOR_TAPS(q, OH, OW, {
    double xv = kn_get(x, (int64_t[]){n, ci, ih, iw}), wv = kn_get(w, (int64_t[]){o, c, a, e});
    double g = kn_get(gy, (int64_t[]){n, o, i, j});
    want[((n * q.O + o) * OH + i) * OW + j] += xv * wv;
    gx_want[((n * q.C + ci) * q.H + ih) * q.W + iw] += g * wv;
    gw_want[((o * (q.C / q.g) + c) * q.kh + a) * q.kw + e] += g * xv;
  })
  for (int64_t k = 0; k < ny; k++) gb_want[(k / (OH * OW)) % q.O] += nt_at(gy, k);
  kn_tensor *in[3] = {x, w, b};
  for (int k = 0; k < 3; k++)
    if (in[k]) cr_assert_eq(kn_set_requires_grad(in[k], true), KN_OK);
  kn_tensor *y = kn_conv2d(x, w, b, q.s, q.p, q.d, q.g);
  nt_expect(y, KN_SHAPE(q.N, q.O, OH, OW), want, 1e-4);
  kn_tensor *gr[3] = {NULL, NULL, NULL};
  cr_assert_eq(kn_autograd_grad(&y, 1, in, bias ? 3 : 2, &gy, false, false, false, gr), KN_OK,
               "%s", kn_last_error());
  nt_expect(gr[0], KN_SHAPE(q.N, q.C, q.H, q.W), gx_want, 1e-4);
  nt_expect(gr[1], KN_SHAPE(q.O, q.C / q.g, q.kh, q.kw), gw_want, 1e-3);
  if (bias) nt_expect(gr[2], KN_SHAPE(q.O), gb_want, 1e-3);
}

Test(nn_onednn, conv_forward_and_backward_against_naive_loops) {
  check_geo((geo){2, 3, 7, 9, 5, 3, 3, {1, 1}, {1, 1}, {1, 1}, 1}, true, false);
  check_geo((geo){1, 4, 11, 6, 6, 3, 2, {2, 3}, {1, 0}, {1, 1}, 2}, false, false);
  check_geo((geo){3, 6, 9, 9, 6, 3, 3, {1, 2}, {2, 1}, {2, 3}, 3}, true, false);
  check_geo((geo){2, 5, 5, 5, 5, 1, 1, {1, 1}, {0, 0}, {1, 1}, 5}, true, false); /* depthwise */
  check_geo((geo){1, 1, 13, 4, 3, 5, 1, {3, 1}, {2, 0}, {1, 1}, 1}, true, true);
  check_geo((geo){2, 16, 8, 8, 32, 3, 3, {1, 1}, {1, 1}, {1, 1}, 1}, true, true);
}

Test(nn_onednn, unbatched_conv) {
  kn_tensor *x = vals(KN_SHAPE(3, 6, 5), 0.2), *w = vals(KN_SHAPE(4, 3, 2, 2), 0.8);
  kn_tensor *y4 = kn_conv2d(kn_unsqueeze(x, 0), w, NULL, NULL, NULL, NULL, 1);
  cr_assert_not_null(y4, "%s", kn_last_error());
  for (int64_t k = 0; k < kn_numel(y4); k++) want[k] = nt_at(y4, k);
  nt_expect(kn_conv2d(x, w, NULL, NULL, NULL, NULL, 1), KN_SHAPE(4, 5, 4), want, 1e-6);
}

/* More geometries than the primitive cache holds (64): evicted primitives are
** rebuilt and every result stays right. */
Test(nn_onednn, conv_primitive_cache_eviction) {
  for (int round = 0; round < 2; round++)
    for (int64_t h = 3; h < 3 + 70; h += 1) {
      kn_scope_begin();
      kn_tensor *x = vals(KN_SHAPE(1, 2, h, 3), 0.1), *w = vals(KN_SHAPE(2, 2, 3, 3), 0.4);
      kn_tensor *y = kn_conv2d(x, w, NULL, NULL, NULL, NULL, 1);
      cr_assert_not_null(y, "%s", kn_last_error());
      double s = 0;
      for (int64_t c = 0; c < 2; c++)
        for (int64_t a = 0; a < 3; a++)
          for (int64_t e = 0; e < 3; e++)
            s += kn_get(x, (int64_t[]){0, c, h - 3 + a, e}) * kn_get(w, (int64_t[]){1, c, a, e});
      cr_assert_float_eq(kn_get(y, (int64_t[]){0, 1, h - 3, 0}), s, 1e-4, "h=%lld",
                         (long long)h);
      kn_scope_end();
    }
}

/* Several threads run the same cached primitives (forward and both backward
** directions) at once; every result equals the single-threaded one. */
typedef struct conv_job {
  kn_tensor *x, *w, *want_y, *want_gx;
  int bad;
} conv_job;

static void *conv_worker(void *arg) {
  conv_job *j = arg;
  for (int it = 0; it < 20; it++) {
    kn_scope_begin();
    kn_tensor *x = kn_detach(j->x);
    kn_set_requires_grad(x, true);
    kn_tensor *y = kn_conv2d(x, j->w, NULL, NULL, (int64_t[]){1, 1}, NULL, 1), *gx = NULL;
    if (y) kn_autograd_grad(&y, 1, &x, 1, (kn_tensor *[]){j->want_y}, false, false, false, &gx);
    for (int64_t i = 0; y && gx && i < kn_numel(y); i++)
      j->bad += nt_at(y, i) != nt_at(j->want_y, i);
    for (int64_t i = 0; gx && i < kn_numel(gx); i++)
      j->bad += nt_at(gx, i) != nt_at(j->want_gx, i);
    j->bad += !y || !gx;
    kn_scope_end();
  }
  return NULL;
}

Test(nn_onednn, concurrent_calls_share_primitives) {
  kn_tensor *x = vals(KN_SHAPE(2, 16, 12, 12), 0.3), *w = vals(KN_SHAPE(16, 16, 3, 3), 0.6);
  kn_tensor *xg = kn_detach(x);
  cr_assert_eq(kn_set_requires_grad(xg, true), KN_OK);
  kn_tensor *y = kn_conv2d(xg, w, NULL, NULL, (int64_t[]){1, 1}, NULL, 1), *gx = NULL;
  cr_assert_not_null(y, "%s", kn_last_error());
  cr_assert_eq(kn_autograd_grad(&y, 1, &xg, 1, &y, false, false, false, &gx), KN_OK);
  conv_job jobs[3];
  pthread_t th[3];
  for (int i = 0; i < 3; i++) {
    jobs[i] = (conv_job){x, w, kn_detach(y), gx, 0};
    cr_assert_eq(pthread_create(&th[i], NULL, conv_worker, &jobs[i]), 0);
  }
  for (int i = 0; i < 3; i++) {
    pthread_join(th[i], NULL);
    cr_assert_eq(jobs[i].bad, 0, "thread %d: %d mismatches", i, jobs[i].bad);
  }
}

Test(nn_onednn, kernel_info_names_the_libraries) {
  const dnnl_version_t *v = dnnl_version();
  char want_dnnl[64], want_isa[96], want_core[96];
  snprintf(want_dnnl, sizeof want_dnnl, "onednn %d.%d.%d", v->major, v->minor, v->patch);
  const char *isa = dnnl_cpu_isa2str(dnnl_get_effective_cpu_isa());
  snprintf(want_isa, sizeof want_isa, "isa %s", strncmp(isa, "cpu_isa_", 8) ? isa : isa + 8);
  snprintf(want_core, sizeof want_core, "openblas core %s", openblas_get_corename());
  const char *info = kn_nn_kernel_info();
  cr_assert(strstr(info, want_dnnl), "%s", info);
  cr_assert(strstr(info, want_isa), "%s (want %s)", info, want_isa);
  cr_assert(strstr(info, want_core), "%s (want %s)", info, want_core);
}
