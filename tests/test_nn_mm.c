/*
** test_nn_mm.c: mm, bmm, addmm, dot, mv: literal values, strided and
** transposed operands, dtypes (float32/64, bfloat16, integers, the float16
** and bool errors), zero sizes, meta inputs and PyTorch's error messages.
*/
#include "nn_util.h"
#include "support/leakcheck.h"

TestSuite(nn_mm, .init = kn_test_leakcheck_begin, .fini = kn_test_leakcheck_end);

/* Reference product in double over any strides. */
static void ref_mm(const kn_tensor *a, const kn_tensor *b, double *out) {
  int64_t M = kn_size(a, 0), K = kn_size(a, 1), N = kn_size(b, 1);
  for (int64_t i = 0; i < M; i++)
    for (int64_t j = 0; j < N; j++) {
      double s = 0;
      for (int64_t k = 0; k < K; k++)
        s += kn_get(a, (int64_t[]){i, k}) * kn_get(b, (int64_t[]){k, j});
      out[i * N + j] = s;
    }
}

Test(nn_mm, literal_2x3_times_3x2) {
  kn_tensor *a = NT(KN_FLOAT32, KN_SHAPE(2, 3), 1, 2, 3, 4, 5, 6);
  kn_tensor *b = NT(KN_FLOAT32, KN_SHAPE(3, 2), 7, 8, 9, 10, 11, 12);
  kn_tensor *c = kn_mm(a, b);
  EXPECT(c, KN_SHAPE(2, 2), 0, 58, 64, 139, 154);
  cr_assert_eq(kn_tensor_dtype(c), KN_FLOAT32);
  cr_assert(kn_is_contiguous(c));
  kn_tensor *d = kn_mm(kn__autorelease(kn__contiguous_copy(a, KN_FLOAT64)),
                       kn__autorelease(kn__contiguous_copy(b, KN_FLOAT64)));
  EXPECT(d, KN_SHAPE(2, 2), 0, 58, 64, 139, 154);
  cr_assert_eq(kn_tensor_dtype(d), KN_FLOAT64);
}

Test(nn_mm, transposed_and_strided_operands_match_reference) {
  for (int dt = 0; dt < 2; dt++) {
    kn_dtype t = dt ? KN_FLOAT64 : KN_FLOAT32;
    kn_tensor *a = nt_range(t, KN_SHAPE(5, 7), -3, 0.25);
    kn_tensor *b = nt_range(t, KN_SHAPE(7, 4), 2, -0.5);
    double want[20];
    ref_mm(a, b, want);
    /* column-major copies: BLAS gets CblasTrans */
    EXPECT(kn_mm(nt_colmajor(a), nt_colmajor(b)), KN_SHAPE(5, 4), 1e-4, want[0], want[1],
           want[2], want[3], want[4], want[5], want[6], want[7], want[8], want[9], want[10],
           want[11], want[12], want[13], want[14], want[15], want[16], want[17], want[18],
           want[19]);
    nt_expect(kn_mm(a, nt_colmajor(b)), KN_SHAPE(5, 4), want, 1e-4);
    /* every other column of a wider tensor: no BLAS layout, packed copy */
    kn_tensor *wide = nt_range(t, KN_SHAPE(5, 14), 0, 1);
    kn_tensor *sv = kn__autorelease(
        kn__make_view(wide, 2, (int64_t[]){5, 7}, (int64_t[]){14, 2}, 0));
    double want2[20];
    ref_mm(sv, b, want2);
    nt_expect(kn_mm(sv, b), KN_SHAPE(5, 4), want2, 1e-3);
    /* a row-padded view: lda > K */
    kn_tensor *pad = kn__autorelease(
        kn__make_view(wide, 2, (int64_t[]){5, 7}, (int64_t[]){14, 1}, 3));
    ref_mm(pad, b, want2);
    nt_expect(kn_mm(pad, b), KN_SHAPE(5, 4), want2, 1e-3);
  }
}

Test(nn_mm, broadcast_stride_zero_and_vector_shaped_operands) {
  /* an expanded operand (stride 0) must be packed, not handed to BLAS */
  kn_tensor *row = NT(KN_FLOAT32, KN_SHAPE(3), 1, 2, 3);
  kn_tensor *ex = kn__autorelease(
      kn__make_view(row, 2, (int64_t[]){2, 3}, (int64_t[]){0, 1}, 0));
  kn_tensor *b = NT(KN_FLOAT32, KN_SHAPE(3, 1), 1, 1, 1);
  EXPECT(kn_mm(ex, b), KN_SHAPE(2, 1), 0, 6, 6);
  /* 1xK and Kx1 with odd strides */
  kn_tensor *x = nt_range(KN_FLOAT64, KN_SHAPE(4, 4), 1, 1);
  kn_tensor *col = kn__autorelease(kn__make_view(x, 2, (int64_t[]){4, 1}, (int64_t[]){4, 9}, 1));
  kn_tensor *r = kn__autorelease(kn__make_view(x, 2, (int64_t[]){1, 4}, (int64_t[]){77, 4}, 0));
  EXPECT(kn_mm(r, col), KN_SHAPE(1, 1), 0, 1 * 2 + 5 * 6 + 9 * 10 + 13 * 14);
}

Test(nn_mm, bfloat16_and_integers) {
  kn_tensor *a = NT(KN_BFLOAT16, KN_SHAPE(2, 2), 1, 2, 3, 4);
  kn_tensor *c = kn_mm(a, a);
  EXPECT(c, KN_SHAPE(2, 2), 0, 7, 10, 15, 22);
  cr_assert_eq(kn_tensor_dtype(c), KN_BFLOAT16);
  kn_dtype ints[] = {KN_INT64, KN_INT32, KN_INT16, KN_INT8, KN_UINT8};
  for (int i = 0; i < 5; i++) {
    kn_tensor *x = NT(ints[i], KN_SHAPE(2, 3), 1, 2, 3, 4, 5, 6);
    kn_tensor *y = NT(ints[i], KN_SHAPE(3, 2), 1, 0, 0, 1, 1, 1);
    kn_tensor *z = kn_mm(x, y);
    EXPECT(z, KN_SHAPE(2, 2), 0, 4, 5, 10, 11);
    cr_assert_eq(kn_tensor_dtype(z), ints[i]);
  }
  /* int8 wraps like torch: 100 * 2 = 200 -> -56 */
  kn_tensor *w = NT(KN_INT8, KN_SHAPE(1, 1), 100);
  EXPECT(kn_mm(w, NT(KN_INT8, KN_SHAPE(1, 1), 2)), KN_SHAPE(1, 1), 0, -56);
}

/* float16 runs through float32 buffers (torch >= 2.1 accepts it on the
** CPU; 1.13 refused it): each result is the float32 product rounded once. */
Test(nn_mm, float16_rounds_the_float32_product_and_bool_fails_like_torch) {
  kn_tensor *a = kn_randn(KN_SHAPE(5, 7), NULL, KN_FLOAT32);
  kn_tensor *m = kn_randn(KN_SHAPE(7, 3), NULL, KN_FLOAT32);
  kn_tensor *ah = kn_to(a, KN_FLOAT16), *mh = kn_to(m, KN_FLOAT16);
  kn_tensor *ref = kn_to(kn_mm(kn_to(ah, KN_FLOAT32), kn_to(mh, KN_FLOAT32)), KN_FLOAT16);
  kn_tensor *got = kn_mm(ah, mh);
  cr_assert_eq(kn_tensor_dtype(got), KN_FLOAT16);
  cr_assert_eq(memcmp(kn_data(got), kn_data(ref), 15 * 2), 0);
  kn_tensor *b = kn_ones(KN_SHAPE(2, 2), KN_BOOL);
  EXPECT_ERR(kn_mm(b, b), KN_EDTYPE, "\"addmm_impl_cpu_\" not implemented for 'Bool'");
  kn_tensor *h3 = kn_ones(KN_SHAPE(2, 2, 2), KN_FLOAT16);
  kn_tensor *p = kn_bmm(h3, h3);
  cr_assert_eq(kn_tensor_dtype(p), KN_FLOAT16);
  double total = 0;
  cr_assert_eq(kn_item_double(kn_sum(kn_to(p, KN_FLOAT64)), &total), KN_OK);
  cr_assert_eq(total, 16.0); /* 8 entries of 1*1 + 1*1 */
}

Test(nn_mm, shape_and_dtype_errors_name_both_shapes) {
  kn_tensor *a = kn_ones(KN_SHAPE(3, 4), KN_FLOAT32);
  EXPECT_ERR(kn_mm(a, kn_ones(KN_SHAPE(5, 6), KN_FLOAT32)), KN_ESHAPE,
             "mat1 and mat2 shapes cannot be multiplied (3x4 and 5x6)");
  EXPECT_ERR(kn_mm(a, kn_ones(KN_SHAPE(4, 2), KN_FLOAT64)), KN_EDTYPE,
             "expected scalar type Float but found Double");
  EXPECT_ERR(kn_mm(kn_ones(KN_SHAPE(3), KN_FLOAT32), a), KN_ESHAPE, "self must be a matrix");
  EXPECT_ERR(kn_mm(a, kn_ones(KN_SHAPE(4), KN_FLOAT32)), KN_ESHAPE, "mat2 must be a matrix");
  EXPECT_ERR(kn_mm(a, NULL), KN_EINVAL, "NULL");
}

Test(nn_mm, zero_sizes) {
  EXPECT(kn_mm(kn_ones(KN_SHAPE(0, 4), KN_FLOAT32), kn_ones(KN_SHAPE(4, 2), KN_FLOAT32)),
         KN_SHAPE(0, 2), 0, 0);
  /* K == 0: a sum over nothing is 0, even into an uninitialised output */
  EXPECT(kn_mm(kn_ones(KN_SHAPE(3, 0), KN_FLOAT32), kn_ones(KN_SHAPE(0, 2), KN_FLOAT32)),
         KN_SHAPE(3, 2), 0, 0, 0, 0, 0, 0, 0);
  EXPECT(kn_mm(kn_ones(KN_SHAPE(2, 0), KN_INT64), kn_ones(KN_SHAPE(0, 1), KN_INT64)),
         KN_SHAPE(2, 1), 0, 0, 0);
}

Test(nn_mm, meta_inputs_give_shapes_only) {
  kn_tensor *a = kn_empty_meta(KN_SHAPE(1000, 30), KN_FLOAT32);
  kn_tensor *b = kn_empty_meta(KN_SHAPE(30, 7), KN_FLOAT32);
  kn_tensor *c = kn_mm(a, b);
  cr_assert_not_null(c, "%s", kn_last_error());
  cr_assert_eq(kn_tensor_device(c), KN_META);
  cr_assert_eq(kn_size(c, 0), 1000);
  cr_assert_eq(kn_size(c, 1), 7);
  cr_assert_null(kn_data(c));
  kn_tensor *bb = kn_bmm(kn_empty_meta(KN_SHAPE(5, 2, 3), KN_FLOAT64),
                         kn_empty_meta(KN_SHAPE(5, 3, 9), KN_FLOAT64));
  cr_assert_eq(kn_tensor_dtype(bb), KN_FLOAT64);
  cr_assert_eq(kn_size(bb, 2), 9);
  EXPECT_ERR(kn_mm(a, kn_empty_meta(KN_SHAPE(31, 7), KN_FLOAT32)), KN_ESHAPE,
             "(1000x30 and 31x7)");
}

Test(nn_mm, bmm_values_transposed_batches_and_errors) {
  kn_tensor *a = nt_range(KN_FLOAT32, KN_SHAPE(3, 2, 4), 0, 1);
  kn_tensor *b = nt_range(KN_FLOAT32, KN_SHAPE(3, 4, 5), 1, 0.5);
  kn_tensor *c = kn_bmm(a, b);
  cr_assert_not_null(c, "%s", kn_last_error());
  kn_tensor *bt = nt_colmajor(b);
  kn_tensor *c2 = kn_bmm(a, bt);
  for (int64_t i = 0; i < 3; i++) {
    kn_tensor *ai = kn__autorelease(kn__make_view(a, 2, (int64_t[]){2, 4}, (int64_t[]){4, 1}, i * 8));
    kn_tensor *bi = kn__autorelease(kn__make_view(b, 2, (int64_t[]){4, 5}, (int64_t[]){5, 1}, i * 20));
    double want[10];
    ref_mm(ai, bi, want);
    for (int k = 0; k < 10; k++) {
      cr_assert_float_eq(nt_at(c, i * 10 + k), want[k], 1e-3);
      cr_assert_float_eq(nt_at(c2, i * 10 + k), want[k], 1e-3);
    }
  }
  EXPECT_ERR(kn_bmm(kn_ones(KN_SHAPE(2, 3, 4), KN_FLOAT32), kn_ones(KN_SHAPE(3, 4, 5), KN_FLOAT32)),
             KN_ESHAPE,
             "Expected size for first two dimensions of batch2 tensor to be: [2, 4] but got: [3, 4].");
  EXPECT_ERR(kn_bmm(kn_ones(KN_SHAPE(3, 4), KN_FLOAT32), kn_ones(KN_SHAPE(2, 5, 5), KN_FLOAT32)),
             KN_ESHAPE, "batch1 must be a 3D tensor");
  EXPECT_ERR(kn_bmm(kn_ones(KN_SHAPE(2, 3, 4), KN_FLOAT32), kn_ones(KN_SHAPE(2, 4, 5), KN_FLOAT64)),
             KN_EDTYPE, "expected scalar type Float but found Double");
  EXPECT(kn_bmm(kn_ones(KN_SHAPE(2, 1, 3), KN_INT64), kn_ones(KN_SHAPE(2, 3, 1), KN_INT64)),
         KN_SHAPE(2, 1, 1), 0, 3, 3);
}

Test(nn_mm, addmm_beta_alpha_broadcast_self) {
  kn_tensor *a = NT(KN_FLOAT64, KN_SHAPE(2, 3), 1, 2, 3, 4, 5, 6);
  kn_tensor *b = NT(KN_FLOAT64, KN_SHAPE(3, 2), 7, 8, 9, 10, 11, 12);
  kn_tensor *bias = NT(KN_FLOAT64, KN_SHAPE(2), 1, -1);
  EXPECT(kn_addmm(bias, a, b, kn_int(1), kn_int(1)), KN_SHAPE(2, 2), 0, 59, 63, 140, 153);
  EXPECT(kn_addmm(bias, a, b, kn_float(2), kn_float(0.5)), KN_SHAPE(2, 2), 0, 31, 30, 71.5, 75);
  kn_tensor *colb = NT(KN_FLOAT64, KN_SHAPE(2, 1), 10, 20);
  EXPECT(kn_addmm(colb, a, b, kn_int(1), kn_int(-1)), KN_SHAPE(2, 2), 0, -48, -54, -119, -134);
  kn_tensor *s0 = NT(KN_FLOAT64, KN_SHAPE(1), 3);
  EXPECT(kn_addmm(s0, a, b, kn_int(1), kn_int(0)), KN_SHAPE(2, 2), 0, 3, 3, 3, 3);
  /* beta == 0 ignores NaN in self, like torch */
  kn_tensor *nanb = NT(KN_FLOAT64, KN_SHAPE(2, 2), NAN, NAN, NAN, NAN);
  EXPECT(kn_addmm(nanb, a, b, kn_int(0), kn_int(1)), KN_SHAPE(2, 2), 0, 58, 64, 139, 154);
  /* integers with beta/alpha: torch gives 2*1 + 3*(row sums) */
  kn_tensor *ia = kn_ones(KN_SHAPE(3, 4), KN_INT64), *ib = kn_ones(KN_SHAPE(4, 2), KN_INT64);
  EXPECT(kn_addmm(kn_ones(KN_SHAPE(3, 2), KN_INT64), ia, ib, kn_int(2), kn_int(3)),
         KN_SHAPE(3, 2), 0, 14, 14, 14, 14, 14, 14);
  /* transposed mat2 and a bfloat16 run */
  EXPECT(kn_addmm(bias, a, nt_colmajor(b), kn_int(1), kn_int(1)), KN_SHAPE(2, 2), 0, 59, 63,
         140, 153);
}

Test(nn_mm, addmm_errors) {
  kn_tensor *a = kn_ones(KN_SHAPE(3, 4), KN_FLOAT32), *b = kn_ones(KN_SHAPE(4, 2), KN_FLOAT32);
  EXPECT_ERR(kn_addmm(kn_ones(KN_SHAPE(2, 2), KN_FLOAT32), a, b, kn_int(1), kn_int(1)),
             KN_ESHAPE,
             "The expanded size of the tensor (3) must match the existing size (2) at "
             "non-singleton dimension 0.  Target sizes: [3, 2].  Tensor sizes: [2, 2]");
  EXPECT_ERR(kn_addmm(kn_ones(KN_SHAPE(3, 2), KN_FLOAT32), kn_ones(KN_SHAPE(4), KN_FLOAT32), b,
                      kn_int(1), kn_int(1)),
             KN_ESHAPE, "mat1 must be a matrix, got 1-D tensor");
  EXPECT_ERR(kn_addmm(kn_ones(KN_SHAPE(3, 2), KN_FLOAT32), a, kn_ones(KN_SHAPE(5, 2), KN_FLOAT32),
                      kn_int(1), kn_int(1)),
             KN_ESHAPE, "mat1 and mat2 shapes cannot be multiplied (3x4 and 5x2)");
  EXPECT_ERR(kn_addmm(kn_ones(KN_SHAPE(3, 2), KN_FLOAT64), a, b, kn_int(1), kn_int(1)),
             KN_EDTYPE, "self and mat2 must have the same dtype");
  EXPECT_ERR(kn_addmm(kn_ones(KN_SHAPE(3, 2), KN_FLOAT32), kn_ones(KN_SHAPE(3, 4), KN_FLOAT64),
                      b, kn_int(1), kn_int(1)),
             KN_EDTYPE, "mat1 and mat2 must have the same dtype");
}

Test(nn_mm, dot_and_mv) {
  kn_tensor *x = NT(KN_FLOAT32, KN_SHAPE(3), 1, 2, 3);
  kn_tensor *y = NT(KN_FLOAT32, KN_SHAPE(3), 4, -5, 6);
  kn_tensor *d = kn_dot(x, y);
  EXPECT0(d, 0, 12);
  kn_tensor *m = nt_range(KN_FLOAT64, KN_SHAPE(2, 3), 1, 1);
  kn_tensor *v = NT(KN_FLOAT64, KN_SHAPE(3), 1, 0, -1);
  EXPECT(kn_mv(m, v), KN_SHAPE(2), 0, -2, -2);
  EXPECT(kn_mv(nt_swap(m, 0, 1), NT(KN_FLOAT64, KN_SHAPE(2), 1, 1)), KN_SHAPE(3), 0, 5, 7, 9);
  /* strided vector: every other element */
  kn_tensor *v6 = nt_range(KN_FLOAT64, KN_SHAPE(6), 1, 1);
  kn_tensor *vs = kn__autorelease(kn__make_view(v6, 1, (int64_t[]){3}, (int64_t[]){2}, 0));
  EXPECT0(kn_dot(vs, vs), 0, 1 + 9 + 25);
  EXPECT0(kn_dot(kn_ones(KN_SHAPE(4), KN_INT64), kn_ones(KN_SHAPE(4), KN_INT64)), 0, 4);
  EXPECT_ERR(kn_dot(x, kn_ones(KN_SHAPE(4), KN_FLOAT32)), KN_ESHAPE,
             "inconsistent tensor size, expected tensor [3] and src [4] to have the same number "
             "of elements, but got 3 and 4 elements respectively");
  EXPECT_ERR(kn_dot(m, v), KN_ESHAPE, "1D tensors expected, but got 2D and 1D tensors");
  EXPECT_ERR(kn_dot(x, v), KN_EDTYPE,
             "dot : expected both vectors to have same dtype, but found Float and Double");
  EXPECT_ERR(kn_mv(m, kn_ones(KN_SHAPE(5), KN_FLOAT64)), KN_ESHAPE, "size mismatch, got 2, 2x3,5");
  EXPECT_ERR(kn_mv(x, x), KN_ESHAPE, "vector + matrix @ vector expected, got 1, 1, 1");
}
