/*
** test_nn_matmul.c: matmul's dispatch over 1-D/2-D/batched/broadcast shapes
** (values against a reference loop), linear with and without bias, meta
** inputs and the error texts of PyTorch 1.13.
*/
#include "nn_util.h"
#include "support/leakcheck.h"

TestSuite(nn_matmul, .init = kn_test_leakcheck_begin, .fini = kn_test_leakcheck_end);

/* Reference matmul on contiguous float64 tensors, written from the
** definition: a is [..., n, m] (or [m]), b [..., m, p] (or [m]); batch dims
** broadcast. Returns the expected result's flat values; shape in osz. */
static void ref_matmul(kn_tensor *a, kn_tensor *b, double *out, int *on, int64_t *osz) {
  int d1 = kn_ndim(a), d2 = kn_ndim(b);
  int64_t n = d1 > 1 ? kn_size(a, -2) : 1, m = kn_size(a, -1);
  int64_t p = d2 > 1 ? kn_size(b, -1) : 1;
  int nb1 = d1 > 2 ? d1 - 2 : 0, nb2 = d2 > 2 ? d2 - 2 : 0;
  int nb = nb1 > nb2 ? nb1 : nb2;
  int64_t bs[KN_MAX_DIMS], nbatch = 1;
  for (int i = 0; i < nb; i++) {
    int i1 = i - (nb - nb1), i2 = i - (nb - nb2);
    int64_t x = i1 >= 0 ? kn_size(a, i1) : 1, y = i2 >= 0 ? kn_size(b, i2) : 1;
    bs[i] = x > y ? x : y;
    nbatch *= bs[i];
  }
  for (int64_t bi = 0; bi < nbatch; bi++) {
    int64_t idx[KN_MAX_DIMS], r = bi;
    for (int i = nb - 1; i >= 0; i--) idx[i] = r % bs[i], r /= bs[i];
    int64_t offa = 0, offb = 0, sa = 1, sb = 1;
    for (int i = nb1 - 1; i >= 0; i--) {
      int64_t s = kn_size(a, i);
      offa += (s == 1 ? 0 : idx[i + nb - nb1]) * sa;
      sa *= s;
    }
    for (int i = nb2 - 1; i >= 0; i--) {
      int64_t s = kn_size(b, i);
      offb += (s == 1 ? 0 : idx[i + nb - nb2]) * sb;
      sb *= s;
    }
    const double *pa = (const double *)kn_data(a) + offa * n * m;
    const double *pb = (const double *)kn_data(b) + offb * m * p;
    for (int64_t i = 0; i < n; i++)
      for (int64_t j = 0; j < p; j++) {
        double s = 0;
        for (int64_t k = 0; k < m; k++) s += pa[i * m + k] * pb[k * p + j];
        out[(bi * n + i) * p + j] = s;
      }
  }
  *on = 0;
  for (int i = 0; i < nb; i++) osz[(*on)++] = bs[i];
  if (d1 > 1) osz[(*on)++] = n;
  if (d2 > 1) osz[(*on)++] = p;
}

static void check_matmul(int na, const int64_t *sa, int nb, const int64_t *sb) {
  kn_tensor *a = nt_range(KN_FLOAT64, na, sa, -1, 0.125);
  kn_tensor *b = nt_range(KN_FLOAT64, nb, sb, 0.5, -0.0625);
  double want[4096];
  int on;
  int64_t osz[KN_MAX_DIMS];
  ref_matmul(a, b, want, &on, osz);
  kn_tensor *c = kn_matmul(a, b);
  cr_assert_not_null(c, "%s", kn_last_error());
  nt_expect(c, on, osz, want, 1e-9);
}

Test(nn_matmul, every_rank_combination_matches_reference) {
  check_matmul(KN_SHAPE(4), KN_SHAPE(4));             /* dot */
  check_matmul(KN_SHAPE(3, 4), KN_SHAPE(4));          /* mv */
  check_matmul(KN_SHAPE(4), KN_SHAPE(4, 5));          /* row @ matrix */
  check_matmul(KN_SHAPE(3, 4), KN_SHAPE(4, 5));       /* mm */
  check_matmul(KN_SHAPE(2, 3, 4), KN_SHAPE(4, 5));    /* folded */
  check_matmul(KN_SHAPE(2, 3, 4), KN_SHAPE(4));       /* folded, vector */
  check_matmul(KN_SHAPE(2, 3, 4), KN_SHAPE(2, 4, 5)); /* bmm */
  check_matmul(KN_SHAPE(4), KN_SHAPE(2, 4, 5));       /* vector @ batch */
  check_matmul(KN_SHAPE(3, 4), KN_SHAPE(2, 4, 5));    /* matrix @ batch */
  check_matmul(KN_SHAPE(1, 2, 3, 4), KN_SHAPE(5, 1, 4, 2)); /* broadcast batch */
  check_matmul(KN_SHAPE(3, 1, 2, 4), KN_SHAPE(2, 4, 3));
}

Test(nn_matmul, shapes_of_torch_examples_and_dtypes) {
  kn_tensor *c = kn_matmul(kn_ones(KN_SHAPE(1, 2, 3, 4), KN_FLOAT32),
                           kn_ones(KN_SHAPE(5, 1, 4, 2), KN_FLOAT32));
  EXPECT0(kn_sum(c), 0, 5 * 2 * 3 * 2 * 4.0);
  cr_assert_eq(kn_ndim(c), 4);
  cr_assert_eq(kn_size(c, 0), 5);
  cr_assert_eq(kn_size(c, 3), 2);
  kn_tensor *l = kn_matmul(kn_ones(KN_SHAPE(4), KN_INT64), kn_ones(KN_SHAPE(4), KN_INT64));
  EXPECT0(l, 0, 4);
  cr_assert_eq(kn_tensor_dtype(l), KN_INT64);
}

Test(nn_matmul, transposed_operands) {
  kn_tensor *a = nt_range(KN_FLOAT64, KN_SHAPE(2, 4, 3), 1, 1);
  kn_tensor *at = kn_transpose(a, 1, 2); /* [2, 3, 4], non-contiguous */
  kn_tensor *b = nt_range(KN_FLOAT64, KN_SHAPE(4, 2), 0, 1);
  kn_tensor *r = kn_matmul(at, b);
  kn_tensor *ac = kn__autorelease(kn__contiguous_copy(at, KN_FLOAT64));
  double want[12];
  int on;
  int64_t osz[KN_MAX_DIMS];
  ref_matmul(ac, b, want, &on, osz);
  nt_expect(r, on, osz, want, 1e-9);
}

Test(nn_matmul, errors_like_torch) {
  kn_tensor *s = kn_ones(KN_SHAPE(2, 2), KN_FLOAT32);
  EXPECT_ERR(kn_matmul(kn_full(0, NULL, kn_float(1), KN_FLOAT32), s), KN_ESHAPE,
             "both arguments to matmul need to be at least 1D, but they are 0D and 2D");
  EXPECT_ERR(kn_matmul(kn_ones(KN_SHAPE(2, 3, 4), KN_FLOAT32), kn_ones(KN_SHAPE(5, 6), KN_FLOAT32)),
             KN_ESHAPE, "mat1 and mat2 shapes cannot be multiplied (6x4 and 5x6)");
  EXPECT_ERR(kn_matmul(kn_ones(KN_SHAPE(2, 3, 4), KN_FLOAT32), kn_ones(KN_SHAPE(3, 4, 6), KN_FLOAT32)),
             KN_ESHAPE, "The size of tensor a (2) must match the size of tensor b (3) at non-singleton dimension 0");
  EXPECT_ERR(kn_matmul(kn_ones(KN_SHAPE(3, 4), KN_FLOAT32), kn_ones(KN_SHAPE(5), KN_FLOAT32)),
             KN_ESHAPE, "size mismatch, got 3, 3x4,5");
  EXPECT_ERR(kn_matmul(kn_ones(KN_SHAPE(3), KN_FLOAT32), kn_ones(KN_SHAPE(4, 5), KN_FLOAT32)),
             KN_ESHAPE, "mat1 and mat2 shapes cannot be multiplied (1x3 and 4x5)");
  EXPECT_ERR(kn_matmul(kn_ones(KN_SHAPE(3, 4), KN_FLOAT32), kn_ones(KN_SHAPE(4, 5), KN_FLOAT64)),
             KN_EDTYPE, "expected scalar type Float but found Double");
}

Test(nn_matmul, meta_inputs) {
  kn_tensor *c = kn_matmul(kn_empty_meta(KN_SHAPE(7, 1, 3, 4), KN_FLOAT32),
                           kn_empty_meta(KN_SHAPE(2, 4, 9), KN_FLOAT32));
  cr_assert_not_null(c, "%s", kn_last_error());
  cr_assert_eq(kn_tensor_device(c), KN_META);
  int64_t want[] = {7, 2, 3, 9};
  cr_assert_eq(kn_ndim(c), 4);
  for (int d = 0; d < 4; d++) cr_assert_eq(kn_size(c, d), want[d]);
  kn_tensor *l = kn_linear(kn_empty_meta(KN_SHAPE(8, 5, 3), KN_FLOAT32),
                           kn_empty_meta(KN_SHAPE(6, 3), KN_FLOAT32),
                           kn_empty_meta(KN_SHAPE(6), KN_FLOAT32));
  cr_assert_not_null(l, "%s", kn_last_error());
  cr_assert_eq(kn_size(l, 0), 8);
  cr_assert_eq(kn_size(l, 2), 6);
  cr_assert_null(kn_data(l));
}

Test(nn_matmul, linear_values_with_and_without_bias) {
  kn_tensor *x = NT(KN_FLOAT32, KN_SHAPE(2, 3), 1, 2, 3, 4, 5, 6);
  kn_tensor *w = NT(KN_FLOAT32, KN_SHAPE(2, 3), 1, 0, -1, 0.5, 0.5, 0.5);
  kn_tensor *b = NT(KN_FLOAT32, KN_SHAPE(2), 10, 20);
  EXPECT(kn_linear(x, w, b), KN_SHAPE(2, 2), 1e-6, 8, 23, 8, 27.5);
  EXPECT(kn_linear(x, w, NULL), KN_SHAPE(2, 2), 1e-6, -2, 3, -2, 7.5);
  /* 1-D and 3-D inputs */
  EXPECT(kn_linear(NT(KN_FLOAT32, KN_SHAPE(3), 1, 2, 3), w, b), KN_SHAPE(2), 1e-6, 8, 23);
  kn_tensor *x3 = kn_reshape(x, KN_SHAPE(2, 1, 3));
  EXPECT(kn_linear(x3, w, b), KN_SHAPE(2, 1, 2), 1e-6, 8, 23, 8, 27.5);
  /* a transposed (non-contiguous) 3-D input */
  kn_tensor *x3t = kn_transpose(kn_reshape(x, KN_SHAPE(1, 2, 3)), 0, 1);
  EXPECT(kn_linear(x3t, w, b), KN_SHAPE(2, 1, 2), 1e-6, 8, 23, 8, 27.5);
}

Test(nn_matmul, linear_errors_like_torch) {
  kn_tensor *x = kn_ones(KN_SHAPE(3, 4), KN_FLOAT32);
  EXPECT_ERR(kn_linear(x, kn_ones(KN_SHAPE(5, 6), KN_FLOAT32), NULL), KN_ESHAPE,
             "mat1 and mat2 shapes cannot be multiplied (3x4 and 6x5)");
  EXPECT_ERR(kn_linear(x, kn_ones(KN_SHAPE(5, 4), KN_FLOAT32), kn_ones(KN_SHAPE(6), KN_FLOAT32)),
             KN_ESHAPE,
             "The expanded size of the tensor (5) must match the existing size (6) at "
             "non-singleton dimension 1.  Target sizes: [3, 5].  Tensor sizes: [6]");
}
