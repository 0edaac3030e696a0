/*
** test_nn_conv.c: conv2d forward against hand-computed values and a direct
** (naive) convolution written here, over stride/padding/dilation/groups,
** bias, unbatched and non-contiguous inputs; convolution_backward against
** naive gradients; meta inputs and PyTorch's error texts.
*/
#include "nn_util.h"
#include "ops/opdef.h"
#include "support/leakcheck.h"

TestSuite(nn_conv, .init = kn_test_leakcheck_begin, .fini = kn_test_leakcheck_end);

typedef struct cp {
  int64_t s[2], p[2], d[2], g;
} cp;

static int64_t osize(int64_t in, int64_t k, int64_t s, int64_t p, int64_t d) {
  return (in + 2 * p - d * (k - 1) - 1) / s + 1;
}

/* Direct convolution from the definition (float64, any strides via kn_get). */
static void ref_conv(kn_tensor *x, kn_tensor *w, kn_tensor *b, cp q, double *out) {
  int64_t N = kn_size(x, 0), C = kn_size(x, 1), H = kn_size(x, 2), W = kn_size(x, 3);
  int64_t O = kn_size(w, 0), kh = kn_size(w, 2), kw = kn_size(w, 3);
  int64_t OH = osize(H, kh, q.s[0], q.p[0], q.d[0]), OW = osize(W, kw, q.s[1], q.p[1], q.d[1]);
  int64_t Cg = C / q.g, Og = O / q.g;
  for (int64_t n = 0; n < N; n++)
    for (int64_t o = 0; o < O; o++)
      for (int64_t i = 0; i < OH; i++)
        for (int64_t j = 0; j < OW; j++) {
          double s = b ? kn_get(b, &o) : 0;
          int64_t grp = o / Og;
          for (int64_t c = 0; c < Cg; c++)
            for (int64_t a = 0; a < kh; a++)
              for (int64_t e = 0; e < kw; e++) {
                int64_t ih = i * q.s[0] - q.p[0] + a * q.d[0];
                int64_t iw = j * q.s[1] - q.p[1] + e * q.d[1];
                if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
                s += kn_get(x, (int64_t[]){n, grp * Cg + c, ih, iw}) *
                     kn_get(w, (int64_t[]){o, c, a, e});
              }
          out[((n * O + o) * OH + i) * OW + j] = s;
        }
}

static void check_conv(kn_dtype dt, int64_t N, int64_t C, int64_t H, int64_t W, int64_t O,
                       int64_t kh, int64_t kw, cp q, bool bias) {
  kn_tensor *x = nt_range(dt, KN_SHAPE(N, C, H, W), -2, 0.0625);
  kn_tensor *w = nt_range(dt, KN_SHAPE(O, C / q.g, kh, kw), 1, -0.03125);
  kn_tensor *b = bias ? nt_range(dt, KN_SHAPE(O), 0.5, 0.25) : NULL;
  kn_tensor *y = kn_conv2d(x, w, b, q.s, q.p, q.d, q.g);
  cr_assert_not_null(y, "%s", kn_last_error());
  int64_t OH = osize(H, kh, q.s[0], q.p[0], q.d[0]), OW = osize(W, kw, q.s[1], q.p[1], q.d[1]);
  static double want[65536];
  ref_conv(x, w, b, q, want);
  nt_expect(y, KN_SHAPE(N, O, OH, OW), want, dt == KN_FLOAT32 ? 1e-3 : dt == KN_BFLOAT16 ? 0.05 : 1e-9);
}

Test(nn_conv, hand_computed_values) {
  kn_tensor *x = nt_range(KN_FLOAT32, KN_SHAPE(1, 1, 3, 3), 1, 1);
  kn_tensor *w = kn_ones(KN_SHAPE(1, 1, 2, 2), KN_FLOAT32);
  EXPECT(kn_conv2d(x, w, NULL, NULL, NULL, NULL, 1), KN_SHAPE(1, 1, 2, 2), 0, 12, 16, 24, 28);
  /* padding 1, stride 2: corners of the padded 5x5 grid */
  EXPECT(kn_conv2d(x, w, NULL, (int64_t[]){2, 2}, (int64_t[]){1, 1}, NULL, 1),
         KN_SHAPE(1, 1, 2, 2), 0, 1, 5, 11, 28);
  /* dilation 2 with a 2x2 kernel: the four corners */
  kn_tensor *b = NT(KN_FLOAT32, KN_SHAPE(1), 0.5);
  EXPECT(kn_conv2d(x, w, b, NULL, NULL, (int64_t[]){2, 2}, 1), KN_SHAPE(1, 1, 1, 1), 0, 20.5);
  /* unbatched input gives an unbatched output */
  kn_tensor *xu = nt_range(KN_FLOAT64, KN_SHAPE(1, 3, 3), 1, 1);
  EXPECT(kn_conv2d(xu, kn_ones(KN_SHAPE(2, 1, 2, 2), KN_FLOAT64), NULL, NULL, NULL, NULL, 1),
         KN_SHAPE(2, 2, 2), 0, 12, 16, 24, 28, 12, 16, 24, 28);
  /* integers work (torch accepts them on CPU) */
  EXPECT(kn_conv2d(kn__autorelease(kn__contiguous_copy(x, KN_INT64)),
                   kn_ones(KN_SHAPE(1, 1, 2, 2), KN_INT64), NULL, NULL, NULL, NULL, 1),
         KN_SHAPE(1, 1, 2, 2), 0, 12, 16, 24, 28);
}

Test(nn_conv, parameters_against_direct_convolution) {
  check_conv(KN_FLOAT64, 2, 3, 5, 6, 4, 3, 2, (cp){{1, 1}, {0, 0}, {1, 1}, 1}, true);
  check_conv(KN_FLOAT64, 2, 4, 7, 6, 6, 3, 3, (cp){{2, 1}, {1, 2}, {2, 1}, 1}, true);
  check_conv(KN_FLOAT64, 1, 4, 6, 6, 6, 3, 3, (cp){{1, 2}, {1, 1}, {1, 1}, 2}, false);
  check_conv(KN_FLOAT64, 2, 6, 5, 5, 6, 1, 1, (cp){{1, 1}, {0, 0}, {1, 1}, 6}, true); /* depthwise 1x1 */
  check_conv(KN_FLOAT32, 2, 3, 8, 8, 5, 3, 3, (cp){{2, 2}, {1, 1}, {1, 1}, 1}, true);
  check_conv(KN_BFLOAT16, 1, 1, 3, 3, 1, 2, 2, (cp){{1, 1}, {0, 0}, {1, 1}, 1}, false);
}

Test(nn_conv, non_contiguous_input_and_weight) {
  kn_tensor *x = nt_range(KN_FLOAT64, KN_SHAPE(2, 5, 4, 3), 0, 0.1);
  kn_tensor *xt = kn_permute(x, KN_SHAPE(0, 3, 2, 1)); /* [2, 3, 4, 5] */
  kn_tensor *w3 = kn_permute(nt_range(KN_FLOAT64, KN_SHAPE(3, 2, 2, 2), 1, -0.05), KN_SHAPE(1, 0, 2, 3));
  cp q = {{1, 1}, {1, 0}, {1, 1}, 1};
  kn_tensor *y = kn_conv2d(xt, w3, NULL, q.s, q.p, q.d, 1);
  cr_assert_not_null(y, "%s", kn_last_error());
  double want[512];
  ref_conv(xt, w3, NULL, q, want);
  nt_expect(y, KN_SHAPE(2, 2, 5, 4), want, 1e-9);
}

Test(nn_conv, zero_batch_and_meta) {
  kn_tensor *y = kn_conv2d(kn_ones(KN_SHAPE(0, 4, 5, 5), KN_FLOAT32),
                           kn_ones(KN_SHAPE(6, 4, 3, 3), KN_FLOAT32), NULL, NULL, NULL, NULL, 1);
  cr_assert_not_null(y, "%s", kn_last_error());
  cr_assert_eq(kn_size(y, 0), 0);
  cr_assert_eq(kn_size(y, 1), 6);
  kn_tensor *m = kn_conv2d(kn_empty_meta(KN_SHAPE(2, 4, 5, 5), KN_FLOAT32),
                           kn_empty_meta(KN_SHAPE(6, 4, 3, 3), KN_FLOAT32), NULL,
                           (int64_t[]){2, 1}, (int64_t[]){1, 2}, (int64_t[]){2, 1}, 1);
  cr_assert_not_null(m, "%s", kn_last_error());
  int64_t want[] = {2, 6, 2, 7}; /* torch: [2, 6, 2, 7] */
  for (int d = 0; d < 4; d++) cr_assert_eq(kn_size(m, d), want[d]);
  cr_assert_eq(kn_tensor_device(m), KN_META);
}

Test(nn_conv, errors_like_torch) {
  kn_tensor *x = kn_ones(KN_SHAPE(2, 4, 5, 5), KN_FLOAT32);
  EXPECT_ERR(kn_conv2d(kn_ones(KN_SHAPE(2, 3, 4, 5, 5), KN_FLOAT32), kn_ones(KN_SHAPE(6, 4, 3, 3), KN_FLOAT32), NULL, NULL, NULL, NULL, 1),
             KN_ESHAPE, "Expected 3D (unbatched) or 4D (batched) input to conv2d, but got input of size: [2, 3, 4, 5, 5]");
  EXPECT_ERR(kn_conv2d(x, kn_ones(KN_SHAPE(6, 3, 3, 3), KN_FLOAT32), NULL, NULL, NULL, NULL, 1),
             KN_ESHAPE, "Given groups=1, weight of size [6, 3, 3, 3], expected input[2, 4, 5, 5] to have 3 channels, but got 4 channels instead");
  EXPECT_ERR(kn_conv2d(x, kn_ones(KN_SHAPE(5, 2, 3, 3), KN_FLOAT32), NULL, NULL, NULL, NULL, 2),
             KN_ESHAPE, "Given groups=2, expected weight to be divisible by 2 at dimension 0, but got weight of size [[5, 2, 3, 3]] instead");
  EXPECT_ERR(kn_conv2d(x, kn_ones(KN_SHAPE(6, 4, 3, 3), KN_FLOAT32), NULL, NULL, NULL, NULL, 3),
             KN_ESHAPE, "Given groups=3, weight of size [6, 4, 3, 3], expected input[2, 4, 5, 5] to have 12 channels, but got 4 channels instead");
  EXPECT_ERR(kn_conv2d(x, kn_ones(KN_SHAPE(6, 4, 7, 7), KN_FLOAT32), NULL, NULL, NULL, NULL, 1),
             KN_ESHAPE, "Calculated padded input size per channel: (5 x 5). Kernel size: (7 x 7). Kernel size can't be greater than actual input size");
  EXPECT_ERR(kn_conv2d(x, kn_ones(KN_SHAPE(6, 4, 3, 3), KN_FLOAT32), kn_ones(KN_SHAPE(5), KN_FLOAT32), NULL, NULL, NULL, 1),
             KN_ESHAPE, "Given weight of size [6, 4, 3, 3], expected bias to be 1-dimensional with 6 elements, but got bias of size [5] instead");
  EXPECT_ERR(kn_conv2d(x, kn_ones(KN_SHAPE(6, 4, 3), KN_FLOAT32), NULL, NULL, NULL, NULL, 1),
             KN_ESHAPE, "Expected 4-dimensional weight for conv2d, but got 3-dimensional weight of size [6, 4, 3]");
  kn_tensor *w = kn_ones(KN_SHAPE(6, 4, 3, 3), KN_FLOAT32);
  EXPECT_ERR(kn_conv2d(x, w, NULL, (int64_t[]){0, 1}, NULL, NULL, 1), KN_EINVAL, "non-positive stride is not supported");
  EXPECT_ERR(kn_conv2d(x, w, NULL, NULL, (int64_t[]){-1, 0}, NULL, 1), KN_EINVAL, "negative padding is not supported");
  EXPECT_ERR(kn_conv2d(x, w, NULL, NULL, NULL, (int64_t[]){0, 0}, 1), KN_EINVAL, "non-positive dilation is not supported");
  EXPECT_ERR(kn_conv2d(x, kn_ones(KN_SHAPE(6, 4, 3, 3), KN_FLOAT64), NULL, NULL, NULL, NULL, 1),
             KN_EDTYPE, "Input type (torch.FloatTensor) and weight type (torch.DoubleTensor) should be the same");
  /* float16 runs (through float32 buffers, as mm): 1x1 kernel of 3 */
  kn_tensor *h = kn_conv2d(kn_ones(KN_SHAPE(1, 1, 2, 2), KN_FLOAT16),
                           kn_full(KN_SHAPE(1, 1, 1, 1), kn_int(3), KN_FLOAT16), NULL, NULL, NULL, NULL, 1);
  cr_assert(h && kn_tensor_dtype(h) == KN_FLOAT16, "%s", kn_last_error());
  double hs = 0;
  cr_assert_eq(kn_item_double(kn_sum(kn_to(h, KN_FLOAT64)), &hs), KN_OK);
  cr_assert_eq(hs, 12.0);
}

/* convolution_backward against gradients of the direct convolution: for
** L = sum(y * gout), dL/dx and dL/dw by the chain rule written out. */
Test(nn_conv, backward_op_matches_direct_gradients) {
  cp q = {{2, 1}, {1, 1}, {1, 2}, 2};
  int64_t N = 2, C = 4, H = 5, W = 6, O = 4, kh = 3, kw = 2;
  int64_t OH = osize(H, kh, 2, 1, 1), OW = osize(W, kw, 1, 1, 2);
  kn_tensor *x = nt_range(KN_FLOAT64, KN_SHAPE(N, C, H, W), -1, 0.01);
  kn_tensor *w = nt_range(KN_FLOAT64, KN_SHAPE(O, C / 2, kh, kw), 0.5, -0.02);
  kn_tensor *go = nt_range(KN_FLOAT64, KN_SHAPE(N, O, OH, OW), 0.3, 0.007);
  int64_t mask[3] = {1, 1, 1}, bsz = O, zeros[2] = {0, 0};
  kn__arg args[11] = {KN_A_T(go), KN_A_T(x), KN_A_T(w), KN_A_INTS(&bsz, 1), KN_A_INTS(q.s, 2),
                      KN_A_INTS(q.p, 2), KN_A_INTS(q.d, 2), KN_A_B(false), KN_A_INTS(zeros, 2),
                      KN_A_I(2), KN_A_INTS(mask, 3)};
  kn_tensor *r[3];
  cr_assert_eq(kn__invoke_multi(KN_OP_CONVOLUTION_BACKWARD, 11, args, r, 3), 3, "%s", kn_last_error());
  static double gx[1024], gw[256], gb[8];
  memset(gx, 0, sizeof gx);
  memset(gw, 0, sizeof gw);
  memset(gb, 0, sizeof gb);
  int64_t Cg = C / 2, Og = O / 2;
  for (int64_t n = 0; n < N; n++)
    for (int64_t o = 0; o < O; o++)
      for (int64_t i = 0; i < OH; i++)
        for (int64_t j = 0; j < OW; j++) {
          double g = kn_get(go, (int64_t[]){n, o, i, j});
          gb[o] += g;
          for (int64_t c = 0; c < Cg; c++)
            for (int64_t a = 0; a < kh; a++)
              for (int64_t e = 0; e < kw; e++) {
                int64_t ih = i * 2 - 1 + a, iw = j - 1 + e * 2;
                if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
                int64_t cin = (o / Og) * Cg + c;
                gx[((n * C + cin) * H + ih) * W + iw] += g * kn_get(w, (int64_t[]){o, c, a, e});
                gw[((o * Cg + c) * kh + a) * kw + e] += g * kn_get(x, (int64_t[]){n, cin, ih, iw});
              }
        }
  nt_expect(r[0], KN_SHAPE(N, C, H, W), gx, 1e-9);
  nt_expect(r[1], KN_SHAPE(O, C / 2, kh, kw), gw, 1e-9);
  nt_expect(r[2], KN_SHAPE(O), gb, 1e-9);
  /* a masked-out output is an empty placeholder */
  mask[0] = 0;
  cr_assert_eq(kn__invoke_multi(KN_OP_CONVOLUTION_BACKWARD, 11, args, r, 3), 3);
  cr_assert_eq(kn_numel(r[0]), 0);
  nt_expect(r[1], KN_SHAPE(O, C / 2, kh, kw), gw, 1e-9);
}
