/*
** test_nn_layers.c: pooling, batch_norm, layer_norm, dropout and embedding:
** hand-computed values, ties and NaN in max pooling, integer avg pooling,
** running-stat updates, seeded dropout, padding_idx, meta inputs, errors,
** and float64 gradient checks (second order where the rule is linear).
*/
#include "nn_util.h"
#include "support/gradcheck.h"

static int64_t live0;
static void setup(void) {
  live0 = kn_live_tensors();
  kn_scope_begin();
}
static void teardown(void) {
  kn_scope_end();
  cr_assert_eq(kn_live_tensors(), live0, "leaked %lld tensors",
               (long long)(kn_live_tensors() - live0));
}
TestSuite(nn_layers, .init = setup, .fini = teardown);

static kn_tensor *leaf(int ndim, const int64_t *sizes, double start) {
  kn_tensor *t = kn_empty(ndim, sizes, KN_FLOAT64);
  double *p = kn_data(t);
  for (int64_t i = 0; i < kn_numel(t); i++) p[i] = sin(start + 1.37 * (double)i) + 0.01 * (double)i;
  cr_assert_eq(kn_set_requires_grad(t, true), KN_OK);
  return t;
}

#define GC(order, fn, ud, ...)                                                            \
  do {                                                                                    \
    kn_tensor *in_[] = {__VA_ARGS__};                                                     \
    char why_[1024] = "";                                                                 \
    int n_ = (int)(sizeof in_ / sizeof in_[0]);                                           \
    bool ok_ = order == 1 ? kn_gradcheck(fn, in_, n_, ud, why_, sizeof why_)              \
                          : kn_gradgradcheck(fn, in_, n_, ud, why_, sizeof why_);         \
    cr_assert(ok_, "%s (order %d): %s", #fn, order, why_);                                \
  } while (0)

/* ---- pooling ------------------------------------------------------------------------- */

Test(nn_layers, max_pool_values_ties_nan_and_indices) {
  kn_tensor *x = NT(KN_FLOAT32, KN_SHAPE(1, 3, 3), 1, 5, 2, 7, 3, 3, 0, 9, 9);
  kn_tensor *idx = NULL;
  kn_tensor *y = kn_max_pool2d_with_indices(x, (int64_t[]){2, 2}, (int64_t[]){1, 1}, NULL, NULL,
                                            false, &idx);
  EXPECT(y, KN_SHAPE(1, 2, 2), 0, 7, 5, 9, 9); /* torch: first maximum wins */
  EXPECT(idx, KN_SHAPE(1, 2, 2), 0, 3, 1, 7, 7);
  cr_assert_eq(kn_tensor_dtype(idx), KN_INT64);
  kn_tensor *xn = NT(KN_FLOAT64, KN_SHAPE(1, 1, 2, 2), 1, NAN, 3, 2);
  EXPECT(kn_max_pool2d(xn, (int64_t[]){2, 2}, NULL, NULL, NULL, false), KN_SHAPE(1, 1, 1, 1), 0, NAN);
  /* padding never wins: all-negative input with pad 1 */
  kn_tensor *neg = NT(KN_FLOAT64, KN_SHAPE(1, 1, 2, 2), -4, -3, -2, -1);
  EXPECT(kn_max_pool2d(neg, (int64_t[]){2, 2}, NULL, (int64_t[]){1, 1}, NULL, false),
         KN_SHAPE(1, 1, 2, 2), 0, -4, -3, -2, -1);
  /* ceil_mode adds the partial window: 5 -> 3 outputs with k2 s2 */
  kn_tensor *r = nt_range(KN_FLOAT64, KN_SHAPE(1, 1, 1, 5), 0, 1);
  EXPECT(kn_max_pool2d(r, (int64_t[]){1, 2}, NULL, NULL, NULL, true), KN_SHAPE(1, 1, 1, 3), 0, 1, 3, 4);
  EXPECT(kn_max_pool2d(r, (int64_t[]){1, 2}, NULL, NULL, NULL, false), KN_SHAPE(1, 1, 1, 2), 0, 1, 3);
}

Test(nn_layers, avg_pool_values_and_integers) {
  kn_tensor *x = nt_range(KN_FLOAT32, KN_SHAPE(1, 4, 4), 0, 1);
  EXPECT(kn_avg_pool2d(x, (int64_t[]){2, 2}, NULL, NULL, false, true, 0), KN_SHAPE(1, 2, 2), 0,
         2.5, 4.5, 10.5, 12.5);
  kn_tensor *xi = nt_range(KN_INT64, KN_SHAPE(1, 4, 4), 0, 1);
  EXPECT(kn_avg_pool2d(xi, (int64_t[]){3, 3}, NULL, (int64_t[]){1, 1}, false, true, 0),
         KN_SHAPE(1, 2, 2), 0, 1, 2, 4, 5);
  /* count_include_pad=false divides the corner window by 4 */
  EXPECT(kn_avg_pool2d(x, (int64_t[]){3, 3}, NULL, (int64_t[]){1, 1}, false, false, 0),
         KN_SHAPE(1, 2, 2), 1e-6, 2.5, 4.5, 10.5, 12.5);
  EXPECT(kn_avg_pool2d(x, (int64_t[]){2, 2}, NULL, NULL, false, true, 2), KN_SHAPE(1, 2, 2), 0,
         5, 9, 21, 25);
  /* a transposed (non-contiguous) input */
  kn_tensor *xt = kn_transpose(x, 1, 2);
  EXPECT(kn_avg_pool2d(xt, (int64_t[]){2, 2}, NULL, NULL, false, true, 0), KN_SHAPE(1, 2, 2), 0,
         2.5, 10.5, 4.5, 12.5);
}

Test(nn_layers, pool_errors_and_meta) {
  kn_tensor *x = kn_ones(KN_SHAPE(2, 4, 5, 5), KN_FLOAT32);
  int64_t k2[2] = {2, 2}, k7[2] = {7, 7};
  EXPECT_ERR(kn_max_pool2d(x, k2, NULL, (int64_t[]){2, 2}, NULL, false), KN_EINVAL,
             "pad should be at most half of kernel size, but got pad=2 and kernel_size=2");
  EXPECT_ERR(kn_max_pool2d(x, k7, NULL, NULL, NULL, false), KN_ESHAPE,
             "Given input size: (4x5x5). Calculated output size: (4x0x0). Output size is too small");
  EXPECT_ERR(kn_avg_pool2d(x, k7, NULL, NULL, false, true, 0), KN_ESHAPE, "Output size is too small");
  EXPECT_ERR(kn_max_pool2d(kn_ones(KN_SHAPE(2, 5), KN_FLOAT32), k2, NULL, NULL, NULL, false),
             KN_ESHAPE, "non-empty 3D or 4D (batch mode) tensor expected for input");
  EXPECT_ERR(kn_max_pool2d(x, NULL, NULL, NULL, NULL, false), KN_EINVAL,
             "max_pool2d: kernel_size must either be a single int, or a tuple of two ints");
  EXPECT_ERR(kn_max_pool2d(x, k2, (int64_t[]){0, 0}, NULL, NULL, false), KN_EINVAL,
             "stride should not be zero");
  EXPECT_ERR(kn_max_pool2d(x, k2, NULL, NULL, (int64_t[]){0, 0}, false), KN_EINVAL,
             "dilation should be greater than zero, but got dilationH: 0 dilationW: 0");
  EXPECT_ERR(kn_max_pool2d(kn_ones(KN_SHAPE(1, 2, 2), KN_INT64), k2, NULL, NULL, NULL, false),
             KN_EDTYPE, "\"max_pool2d\" not implemented for 'Long'");
  kn_tensor *m = kn_max_pool2d(kn_empty_meta(KN_SHAPE(2, 4, 5, 5), KN_FLOAT32), (int64_t[]){3, 3},
                               (int64_t[]){2, 2}, NULL, NULL, true);
  cr_assert_not_null(m, "%s", kn_last_error());
  cr_assert_eq(kn_tensor_device(m), KN_META);
  cr_assert_eq(kn_size(m, 2), 2);
  cr_assert_eq(kn_size(m, 3), 2);
}

typedef struct poolp {
  int64_t k[2], s[2], p[2], d[2];
  bool ceil, cip;
} poolp;
static kn_tensor *f_max(kn_tensor *const *x, int n, void *ud) {
  const poolp *q = ud;
  (void)n;
  return kn_max_pool2d(x[0], q->k, q->s, q->p, q->d, q->ceil);
}
static kn_tensor *f_avg(kn_tensor *const *x, int n, void *ud) {
  const poolp *q = ud;
  (void)n;
  return kn_avg_pool2d(x[0], q->k, q->s, q->p, q->ceil, q->cip, 0);
}

Test(nn_layers, pool_gradchecks) {
  poolp a = {{2, 2}, {1, 2}, {1, 0}, {1, 1}, true, true};
  GC(1, f_max, &a, leaf(KN_SHAPE(1, 2, 4, 5), 0));
  poolp b = {{2, 3}, {2, 1}, {1, 1}, {2, 1}, false, false};
  GC(1, f_max, &b, leaf(KN_SHAPE(2, 5, 6), 0));
  GC(1, f_avg, &a, leaf(KN_SHAPE(1, 2, 4, 5), 0));
  poolp c = {{3, 3}, {2, 2}, {1, 1}, {1, 1}, true, false};
  GC(1, f_avg, &c, leaf(KN_SHAPE(1, 5, 6), 0));
  GC(2, f_avg, &c, leaf(KN_SHAPE(1, 5, 6), 0));
}

/* ---- normalisation ---------------------------------------------------------------------- */

Test(nn_layers, batch_norm_training_updates_running_stats) {
  kn_tensor *x = NT(KN_FLOAT64, KN_SHAPE(2, 2), 1, 2, 3, 6);
  kn_tensor *rm = NT(KN_FLOAT64, KN_SHAPE(2), 0, 0), *rv = NT(KN_FLOAT64, KN_SHAPE(2), 1, 1);
  uint64_t v0 = kn_tensor_version(rm);
  kn_tensor *y = kn_batch_norm(x, rm, rv, NULL, NULL, true, 0.1, 0);
  EXPECT(y, KN_SHAPE(2, 2), 1e-12, -1, -1, 1, 1);
  /* means 2 and 4; unbiased variances 2 and 8 */
  EXPECT(rm, KN_SHAPE(2), 1e-12, 0.2, 0.4);
  EXPECT(rv, KN_SHAPE(2), 1e-12, 0.9 + 0.2, 0.9 + 0.8);
  cr_assert_gt(kn_tensor_version(rm), v0);
  /* eval uses the running stats, with weight and bias */
  kn_tensor *w = NT(KN_FLOAT64, KN_SHAPE(2), 2, 1), *b = NT(KN_FLOAT64, KN_SHAPE(2), 0, 10);
  kn_tensor *rm2 = NT(KN_FLOAT64, KN_SHAPE(2), 1, 2), *rv2 = NT(KN_FLOAT64, KN_SHAPE(2), 4, 1);
  EXPECT(kn_batch_norm(x, rm2, rv2, w, b, false, 0.1, 0), KN_SHAPE(2, 2), 1e-12, 0, 10, 2, 14);
  EXPECT(rm2, KN_SHAPE(2), 0, 1, 2); /* untouched in eval */
  /* float32, no running stats */
  kn_tensor *xf = NT(KN_FLOAT32, KN_SHAPE(2, 1, 2), 0, 2, 4, 6);
  EXPECT(kn_batch_norm(xf, NULL, NULL, NULL, NULL, true, 0.1, 0), KN_SHAPE(2, 1, 2), 1e-6,
         -1.3416407, -0.4472136, 0.4472136, 1.3416407);
}

Test(nn_layers, norm_errors) {
  EXPECT_ERR(kn_batch_norm(kn_ones(KN_SHAPE(1, 3), KN_FLOAT32), NULL, NULL, NULL, NULL, true, 0.1, 1e-5),
             KN_EINVAL, "Expected more than 1 value per channel when training, got input size [1, 3]");
  EXPECT_ERR(kn_batch_norm(kn_ones(KN_SHAPE(2, 3), KN_FLOAT32), kn_zeros(KN_SHAPE(4), KN_FLOAT32),
                           kn_ones(KN_SHAPE(3), KN_FLOAT32), NULL, NULL, true, 0.1, 1e-5),
             KN_ESHAPE, "running_mean should contain 3 elements not 4");
  EXPECT_ERR(kn_batch_norm(kn_ones(KN_SHAPE(2, 3), KN_FLOAT32), NULL, NULL, NULL, NULL, false, 0.1, 1e-5),
             KN_EINVAL, "running_mean and running_var must be defined in evaluation mode");
  EXPECT_ERR(kn_layer_norm(kn_ones(KN_SHAPE(2, 4), KN_FLOAT32), KN_SHAPE(3), NULL, NULL, 1e-5),
             KN_ESHAPE, "Given normalized_shape=[3], expected input with shape [*, 3], but got input of size[2, 4]");
  EXPECT_ERR(kn_layer_norm(kn_ones(KN_SHAPE(2, 3), KN_FLOAT32), KN_SHAPE(3),
                           kn_ones(KN_SHAPE(4), KN_FLOAT32), NULL, 1e-5),
             KN_ESHAPE, "Expected weight to be of same shape as normalized_shape, but got weight of shape [4] and normalized_shape = [3]");
  kn_tensor *m = kn_layer_norm(kn_empty_meta(KN_SHAPE(7, 3, 4), KN_FLOAT32), KN_SHAPE(3, 4), NULL, NULL, 1e-5);
  cr_assert_not_null(m, "%s", kn_last_error());
  cr_assert_eq(kn_size(m, 0), 7);
  cr_assert_eq(kn_tensor_device(m), KN_META);
}

Test(nn_layers, layer_norm_values) {
  kn_tensor *x = NT(KN_FLOAT64, KN_SHAPE(2, 3), 1, 2, 3, 10, 10, 10);
  EXPECT(kn_layer_norm(x, KN_SHAPE(3), NULL, NULL, 0), KN_SHAPE(2, 3), 1e-9, -1.224744871391589,
         0, 1.224744871391589, NAN, NAN, NAN); /* constant row with eps 0: 0/0 */
  kn_tensor *w = NT(KN_FLOAT64, KN_SHAPE(3), 1, 2, 3), *b = NT(KN_FLOAT64, KN_SHAPE(3), 0, 1, 0);
  EXPECT(kn_layer_norm(x, KN_SHAPE(3), w, b, 1e-5), KN_SHAPE(2, 3), 1e-5, -1.2247357, 1,
         3.674207, 0, 1, 0);
}

typedef struct normp {
  bool training, affine;
} normp;
static kn_tensor *f_bn(kn_tensor *const *x, int n, void *ud) {
  const normp *q = ud;
  (void)n;
  return kn_batch_norm(x[0], NULL, NULL, q->affine ? x[1] : NULL, q->affine ? x[2] : NULL,
                       q->training, 0.1, 1e-5);
}
static kn_tensor *f_bn_eval(kn_tensor *const *x, int n, void *ud) {
  (void)n, (void)ud;
  kn_tensor *rm = NT(KN_FLOAT64, KN_SHAPE(3), 0.1, -0.2, 0.3);
  kn_tensor *rv = NT(KN_FLOAT64, KN_SHAPE(3), 1.5, 0.7, 2);
  return kn_batch_norm(x[0], rm, rv, x[1], x[2], false, 0.1, 1e-5);
}
static kn_tensor *f_ln(kn_tensor *const *x, int n, void *ud) {
  (void)ud;
  return kn_layer_norm(x[0], KN_SHAPE(2, 3), n > 1 ? x[1] : NULL, n > 2 ? x[2] : NULL, 1e-5);
}

Test(nn_layers, norm_gradchecks) {
  normp t = {true, true}, plain = {true, false};
  GC(1, f_bn, &t, leaf(KN_SHAPE(3, 3, 2), 0), leaf(KN_SHAPE(3), 1), leaf(KN_SHAPE(3), 2));
  GC(1, f_bn, &plain, leaf(KN_SHAPE(4, 2), 0));
  GC(1, f_bn_eval, NULL, leaf(KN_SHAPE(2, 3, 2), 0), leaf(KN_SHAPE(3), 1), leaf(KN_SHAPE(3), 2));
  GC(1, f_ln, NULL, leaf(KN_SHAPE(2, 2, 3), 0), leaf(KN_SHAPE(2, 3), 1), leaf(KN_SHAPE(2, 3), 2));
  GC(1, f_ln, NULL, leaf(KN_SHAPE(4, 2, 3), 0));
}

/* ---- dropout ------------------------------------------------------------------------------ */

Test(nn_layers, dropout_seeded_scaled_and_eval_identity) {
  kn_tensor *x = kn_ones(KN_SHAPE(1000), KN_FLOAT32);
  kn_generator *g1 = kn_generator_new(42), *g2 = kn_generator_new(42);
  kn_tensor *mask = NULL;
  kn_tensor *a = kn_native_dropout(x, 0.25, true, g1, &mask);
  kn_tensor *b = kn_dropout(x, 0.25, true, g2);
  cr_assert_not_null(a, "%s", kn_last_error());
  int kept = 0;
  for (int i = 0; i < 1000; i++) {
    float v = ((float *)kn_data(a))[i];
    bool m = ((bool *)kn_data(mask))[i];
    cr_assert(v == 0.0f || fabsf(v - 1.0f / 0.75f) < 1e-6f, "element %d = %g", i, v);
    cr_assert_eq(v != 0.0f, m);
    cr_assert_eq(v, ((float *)kn_data(b))[i], "same seed, same mask");
    kept += m;
  }
  cr_assert(kept > 690 && kept < 810, "kept %d of 1000 at p=0.25", kept);
  /* the generator advanced: a second draw differs */
  kn_tensor *c = kn_dropout(x, 0.25, true, g1);
  int same = 0;
  for (int i = 0; i < 1000; i++) same += ((float *)kn_data(c))[i] == ((float *)kn_data(a))[i];
  cr_assert_lt(same, 1000);
  cr_assert_eq(kn_dropout(x, 0.5, false, g1), x, "eval returns the input itself");
  cr_assert_eq(kn_dropout(x, 0.0, true, g1), x);
  kn_tensor *all = kn_dropout(x, 1.0, true, g1);
  EXPECT0(kn_sum(all), 0, 0);
  EXPECT_ERR(kn_dropout(x, 1.5, true, g1), KN_EINVAL,
             "dropout probability has to be between 0 and 1, but got 1.5");
  kn_generator_free(g1);
  kn_generator_free(g2);
}

static kn_tensor *f_drop(kn_tensor *const *x, int n, void *ud) {
  (void)n;
  kn_generator *g = kn_generator_new(7); /* the same mask on every evaluation */
  kn_tensor *r = kn_dropout(x[0], *(double *)ud, true, g);
  kn_generator_free(g);
  return r;
}

Test(nn_layers, dropout_gradients) {
  double p = 0.4;
  GC(1, f_drop, &p, leaf(KN_SHAPE(3, 5), 0));
  GC(2, f_drop, &p, leaf(KN_SHAPE(3, 5), 0));
  kn_tensor *x = leaf(KN_SHAPE(4), 0);
  cr_assert_str_eq(kn_grad_fn_name(kn_dropout(x, 0.5, true, NULL)), "NativeDropoutBackward0");
}

/* ---- embedding ---------------------------------------------------------------------------- */

Test(nn_layers, embedding_rows_padding_and_errors) {
  kn_tensor *w = nt_range(KN_FLOAT32, KN_SHAPE(4, 2), 0, 1);
  kn_tensor *idx = NT(KN_INT64, KN_SHAPE(2, 2), 3, 0, 1, -1);
  EXPECT(kn_embedding(idx, w, KN_NO_PADDING_IDX, false), KN_SHAPE(2, 2, 2), 0, 6, 7, 0, 1, 2, 3, 6, 7);
  kn_tensor *i32 = NT(KN_INT32, KN_SHAPE(1), 2);
  EXPECT(kn_embedding(i32, kn_t(nt_range(KN_FLOAT64, KN_SHAPE(2, 4), 0, 1)), KN_NO_PADDING_IDX, false),
         KN_SHAPE(1, 2), 0, 2, 6);
  EXPECT_ERR(kn_embedding(NT(KN_INT64, KN_SHAPE(1), 5), w, KN_NO_PADDING_IDX, false), KN_ERANGE,
             "index out of range in self");
  EXPECT_ERR(kn_embedding(NT(KN_FLOAT32, KN_SHAPE(1), 1), w, KN_NO_PADDING_IDX, false), KN_EDTYPE,
             "Expected tensor for argument #1 'indices' to have one of the following scalar types: "
             "Long, Int; but got torch.FloatTensor instead (while checking arguments for embedding)");
  EXPECT_ERR(kn_embedding(idx, w, 4, false), KN_ERANGE, "Padding_idx must be within num_embeddings");
  /* padding row gets no gradient; counts scale with scale_grad_by_freq */
  kn_tensor *wg = leaf(KN_SHAPE(4, 2), 0);
  kn_tensor *y = kn_embedding(NT(KN_INT64, KN_SHAPE(4), 1, 1, 2, 3), wg, -1, true);
  cr_assert_eq(kn_backward(y, kn_ones(KN_SHAPE(4, 2), KN_FLOAT64)), KN_OK, "%s", kn_last_error());
  EXPECT(kn_grad(wg), KN_SHAPE(4, 2), 0, 0, 0, 1, 1, 1, 1, 0, 0);
  kn_set_grad(wg, NULL);
}

static kn_tensor *f_emb(kn_tensor *const *x, int n, void *ud) {
  (void)n, (void)ud;
  return kn_embedding(NT(KN_INT64, KN_SHAPE(2, 3), 0, 2, 2, 4, 1, 0), x[0], KN_NO_PADDING_IDX, false);
}

Test(nn_layers, embedding_gradcheck) {
  GC(1, f_emb, NULL, leaf(KN_SHAPE(5, 3), 0));
}

/* ---- zero-size and meta inputs ------------------------------------------------------------ */

Test(nn_layers, zero_size_and_meta_inputs) {
  kn_tensor *p = kn_max_pool2d(kn_ones(KN_SHAPE(0, 2, 4, 4), KN_FLOAT32), (int64_t[]){2, 2}, NULL,
                               NULL, NULL, false);
  cr_assert_not_null(p, "%s", kn_last_error());
  cr_assert_eq(kn_size(p, 0), 0);
  cr_assert_eq(kn_size(p, 2), 2);
  kn_tensor *l = kn_layer_norm(kn_ones(KN_SHAPE(0, 3), KN_FLOAT32), KN_SHAPE(3), NULL, NULL, 1e-5);
  cr_assert_not_null(l, "%s", kn_last_error());
  cr_assert_eq(kn_numel(l), 0);
  kn_tensor *e = kn_embedding(kn_zeros(KN_SHAPE(0), KN_INT64), kn_ones(KN_SHAPE(3, 2), KN_FLOAT32),
                              KN_NO_PADDING_IDX, false);
  cr_assert_not_null(e, "%s", kn_last_error());
  cr_assert_eq(kn_size(e, 0), 0);
  cr_assert_eq(kn_size(e, 1), 2);
  /* meta: shapes and dtypes only */
  kn_tensor *bn = kn_batch_norm(kn_empty_meta(KN_SHAPE(4, 3, 5), KN_FLOAT64), NULL, NULL, NULL,
                                NULL, true, 0.1, 1e-5);
  cr_assert_not_null(bn, "%s", kn_last_error());
  cr_assert_eq(kn_tensor_device(bn), KN_META);
  cr_assert_eq(kn_tensor_dtype(bn), KN_FLOAT64);
  cr_assert_eq(kn_size(bn, 2), 5);
  kn_tensor *mask = NULL;
  kn_tensor *d = kn_native_dropout(kn_empty_meta(KN_SHAPE(6, 7), KN_FLOAT32), 0.5, true, NULL, &mask);
  cr_assert_not_null(d, "%s", kn_last_error());
  cr_assert_eq(kn_tensor_dtype(mask), KN_BOOL);
  cr_assert_eq(kn_tensor_device(mask), KN_META);
  kn_tensor *em = kn_embedding(kn_empty_meta(KN_SHAPE(2, 5), KN_INT64),
                               kn_empty_meta(KN_SHAPE(10, 4), KN_FLOAT32), KN_NO_PADDING_IDX, false);
  cr_assert_not_null(em, "%s", kn_last_error());
  cr_assert_eq(kn_ndim(em), 3);
  cr_assert_eq(kn_size(em, 2), 4);
  kn_tensor *ap = kn_avg_pool2d(kn_empty_meta(KN_SHAPE(3, 7, 7), KN_BFLOAT16), (int64_t[]){3, 3},
                                (int64_t[]){2, 2}, (int64_t[]){1, 1}, true, false, 0);
  cr_assert_not_null(ap, "%s", kn_last_error());
  cr_assert_eq(kn_size(ap, 1), 4);
  cr_assert_eq(kn_tensor_dtype(ap), KN_BFLOAT16);
}

Test(nn_layers, bfloat16_pool_and_norm) {
  kn_tensor *x = NT(KN_BFLOAT16, KN_SHAPE(1, 2, 2), 1, 2, 3, 4);
  EXPECT(kn_max_pool2d(x, (int64_t[]){2, 2}, NULL, NULL, NULL, false), KN_SHAPE(1, 1, 1), 0, 4);
  EXPECT(kn_avg_pool2d(x, (int64_t[]){2, 2}, NULL, NULL, false, true, 0), KN_SHAPE(1, 1, 1), 0, 2.5);
  kn_tensor *y = kn_layer_norm(NT(KN_BFLOAT16, KN_SHAPE(1, 2), 1, 3), KN_SHAPE(2), NULL, NULL, 0);
  EXPECT(y, KN_SHAPE(1, 2), 0.01, -1, 1);
  cr_assert_eq(kn_tensor_dtype(y), KN_BFLOAT16);
}
