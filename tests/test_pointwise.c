/*
** test_pointwise.c: binary arithmetic of the pointwise family: literal
** values, alpha, broadcasting and its error message, type promotion (incl.
** scalar rules and true division), rounding division, in-place variants and
** their cast/shape errors, non-contiguous, zero-size and meta inputs,
** float16/bfloat16.
*/
#include "test_pointwise_util.h"

TestSuite(arith, .init = pw_setup, .fini = pw_teardown);

Test(arith, add_sub_mul_div_literals) {
  kn_tensor *a = TV(KN_FLOAT32, (2, 2), 1, 2, 3, 4);
  kn_tensor *b = TV(KN_FLOAT32, (2, 2), 0.5, -1, 2, 8);
  EXPECT(kn_add(a, b), KN_FLOAT32, (2, 2), 1.5, 1, 5, 12);
  EXPECT(kn_sub(a, b), KN_FLOAT32, (2, 2), 0.5, 3, 1, -4);
  EXPECT(kn_mul(a, b), KN_FLOAT32, (2, 2), 0.5, -2, 6, 32);
  EXPECT(kn_div(a, b), KN_FLOAT32, (2, 2), 2, -2, 1.5, 0.5);
  EXPECT(kn_add_scaled(a, b, kn_int(2)), KN_FLOAT32, (2, 2), 2, 0, 7, 20);
  EXPECT(kn_sub_scaled(a, b, kn_float(0.5)), KN_FLOAT32, (2, 2), 0.75, 2.5, 2, 0);
  EXPECT(kn_add_scalar(a, kn_int(10)), KN_FLOAT32, (2, 2), 11, 12, 13, 14);
  EXPECT(kn_sub_scalar(a, kn_float(0.5)), KN_FLOAT32, (2, 2), 0.5, 1.5, 2.5, 3.5);
  EXPECT(kn_mul_scalar(a, kn_float(-2)), KN_FLOAT32, (2, 2), -2, -4, -6, -8);
  EXPECT(kn_div_scalar(a, kn_int(4)), KN_FLOAT32, (2, 2), 0.25, 0.5, 0.75, 1);
}

Test(arith, float64_and_division_by_zero) {
  kn_tensor *a = TV(KN_FLOAT64, (4), 1, -1, 0, 1e300);
  kn_tensor *z = TV(KN_FLOAT64, (4), 0, 0, 0, 1e-300);
  EXPECT(kn_div(a, z), KN_FLOAT64, (4), INFINITY, -INFINITY, NAN, INFINITY);
  EXPECT(kn_mul(a, a), KN_FLOAT64, (4), 1, 1, 0, INFINITY);
}

Test(arith, broadcasting_row_and_column) {
  kn_tensor *col = TV(KN_FLOAT32, (3, 1), 1, 2, 3);
  kn_tensor *row = TV(KN_FLOAT32, (4), 10, 20, 30, 40);
  EXPECT(kn_add(col, row), KN_FLOAT32, (3, 4), 11, 21, 31, 41, 12, 22, 32, 42, 13, 23, 33, 43);
  EXPECT(kn_sub(row, col), KN_FLOAT32, (3, 4), 9, 19, 29, 39, 8, 18, 28, 38, 7, 17, 27, 37);
  kn_tensor *s = TV(KN_FLOAT32, (), 2);
  EXPECT(kn_mul(s, col), KN_FLOAT32, (3, 1), 2, 4, 6);
}

Test(arith, broadcast_error_names_both_shapes) {
  /* The seed's dynamo_error_fn: 1000x1000 + 10x10. */
  kn_tensor *a = kn_ones(KN_SHAPE(1000, 1000), KN_FLOAT32);
  kn_tensor *b = kn_ones(KN_SHAPE(10, 10), KN_FLOAT32);
  kn_tensor *r = kn_add(a, b);
  expect_error(r, KN_ESHAPE,
               "The size of tensor a (1000) must match the size of tensor b (10) at "
               "non-singleton dimension 1");
  cr_assert(strstr(kn_last_error(), "[1000, 1000]") && strstr(kn_last_error(), "[10, 10]"),
            "%s", kn_last_error());
  /* the same through meta tensors: the error comes from the meta function */
  kn_tensor *ma = kn_empty_meta(KN_SHAPE(1000, 1000), KN_FLOAT32);
  kn_tensor *mb = kn_empty_meta(KN_SHAPE(10, 10), KN_FLOAT32);
  expect_error(kn_mul(ma, mb), KN_ESHAPE, "must match the size of tensor b (10)");
}

Test(arith, promotion_tensor_tensor) {
  kn_tensor *u8 = TV(KN_UINT8, (2), 200, 3);
  kn_tensor *i8 = TV(KN_INT8, (2), -1, 100);
  EXPECT(kn_add(u8, i8), KN_INT16, (2), 199, 103);
  kn_tensor *i32 = TV(KN_INT32, (2), 7, -7);
  kn_tensor *f16 = TV(KN_FLOAT16, (2), 0.5, 0.25);
  EXPECT(kn_mul(i32, f16), KN_FLOAT16, (2), 3.5, -1.75);
  kn_tensor *f32 = TV(KN_FLOAT32, (2), 1, 2);
  kn_tensor *f64 = TV(KN_FLOAT64, (2), 0.5, 0.5);
  EXPECT(kn_add(f32, f64), KN_FLOAT64, (2), 1.5, 2.5);
  /* a zero-dim tensor only wins with a higher category */
  kn_tensor *z64 = TV(KN_FLOAT64, (), 0.5);
  EXPECT(kn_add(f32, z64), KN_FLOAT32, (2), 1.5, 2.5);
  kn_tensor *i64 = TV(KN_INT64, (2), 1, 2);
  EXPECT(kn_add(i64, z64), KN_FLOAT64, (2), 1.5, 2.5);
  kn_tensor *zi = TV(KN_INT64, (), 5);
  EXPECT(kn_add(i8, zi), KN_INT8, (2), 4, 105);
  kn_tensor *b = TV(KN_BOOL, (2), 1, 0);
  EXPECT(kn_add(b, b), KN_BOOL, (2), 1, 0);
  EXPECT(kn_mul(b, u8), KN_UINT8, (2), 200, 0);
  kn_tensor *bf = TV(KN_BFLOAT16, (2), 1, 2);
  EXPECT(kn_add(bf, f16), KN_FLOAT32, (2), 1.5, 2.25);
}

Test(arith, promotion_scalars) {
  kn_tensor *i32 = TV(KN_INT32, (3), 1, 2, 3);
  EXPECT(kn_add_scalar(i32, kn_float(0.5)), KN_FLOAT32, (3), 1.5, 2.5, 3.5);
  EXPECT(kn_add_scalar(i32, kn_int(1)), KN_INT32, (3), 2, 3, 4);
  kn_tensor *f16 = TV(KN_FLOAT16, (3), 1, 2, 3);
  EXPECT(kn_mul_scalar(f16, kn_float(1.5)), KN_FLOAT16, (3), 1.5, 3, 4.5);
  kn_tensor *b = TV(KN_BOOL, (2), 1, 0);
  EXPECT(kn_add_scalar(b, kn_int(2)), KN_INT64, (2), 3, 2);
  EXPECT(kn_mul_scalar(b, kn_float(2.5)), KN_FLOAT32, (2), 2.5, 0);
  EXPECT(kn_add_scalar(b, kn_bool(true)), KN_BOOL, (2), 1, 1);
  kn_tensor *u8 = TV(KN_UINT8, (2), 250, 5);
  EXPECT(kn_add_scalar(u8, kn_int(10)), KN_UINT8, (2), 4, 15); /* wraps like torch */
}

Test(arith, true_division_of_integers_gives_float) {
  kn_tensor *a = TV(KN_INT64, (4), 7, -7, 1, 0);
  kn_tensor *b = TV(KN_INT32, (4), 2, 2, 3, 5);
  EXPECT(kn_div(a, b), KN_FLOAT32, (4), 3.5, -3.5, 1.0 / 3, 0);
  EXPECT(kn_div_scalar(a, kn_int(2)), KN_FLOAT32, (4), 3.5, -3.5, 0.5, 0);
  kn_tensor *b8 = TV(KN_BOOL, (2), 1, 0);
  EXPECT(kn_div(b8, b8), KN_FLOAT32, (2), 1, NAN);
}

Test(arith, rounding_division) {
  kn_tensor *a = TV(KN_INT64, (4), 7, -7, 7, -7);
  kn_tensor *b = TV(KN_INT64, (4), 2, 2, -2, -2);
  EXPECT(kn_div_mode(a, b, KN_ROUND_TRUNC), KN_INT64, (4), 3, -3, -3, 3);
  EXPECT(kn_div_mode(a, b, KN_ROUND_FLOOR), KN_INT64, (4), 3, -4, -4, 3);
  kn_tensor *f = TV(KN_FLOAT32, (4), 7.5, -7.5, 5, -0.5);
  EXPECT(kn_div_scalar_mode(f, kn_int(2), KN_ROUND_TRUNC), KN_FLOAT32, (4), 3, -3, 2, -0.0);
  EXPECT(kn_div_scalar_mode(f, kn_int(2), KN_ROUND_FLOOR), KN_FLOAT32, (4), 3, -4, 2, -1);
  EXPECT(kn_div_scalar_mode(f, kn_float(-0.75), KN_ROUND_FLOOR), KN_FLOAT32, (4), -10, 10, -7, 0);
  EXPECT(kn_div_mode(f, f, KN_ROUND_NONE), KN_FLOAT32, (4), 1, 1, 1, 1);
  kn_tensor *z = TV(KN_INT64, (4), 1, 0, 1, 1);
  expect_error(kn_div_mode(a, z, KN_ROUND_TRUNC), KN_EINVAL, "ZeroDivisionError");
  expect_error(kn_div_mode(a, b, (kn_rounding_mode)7), KN_EINVAL, "rounding_mode");
}

Test(arith, integer_arithmetic_wraps) {
  kn_tensor *a = TV(KN_INT64, (2), 0, -5);
  ((int64_t *)kn_data(a))[0] = INT64_MAX;
  kn_tensor *one = TV(KN_INT64, (1), 1);
  kn_tensor *r = kn_add(a, one);
  cr_assert_eq(((int64_t *)kn_data(r))[0], INT64_MIN);
  kn_tensor *i8 = TV(KN_INT8, (2), 100, -100);
  EXPECT(kn_mul_scalar(i8, kn_int(2)), KN_INT8, (2), -56, 56);
}

Test(arith, alpha_and_bool_errors) {
  kn_tensor *i = TV(KN_INT64, (2), 1, 2);
  kn_tensor *b = TV(KN_BOOL, (2), 1, 0);
  expect_error(kn_add_scaled(i, i, kn_float(1.5)), KN_EDTYPE,
               "For integral input tensors, argument alpha must not be a floating point number.");
  expect_error(kn_add_scaled(i, i, kn_bool(true)), KN_EDTYPE,
               "Boolean alpha only supported for Boolean results.");
  expect_error(kn_sub(b, b), KN_EDTYPE,
               "Subtraction, the `-` operator, with two bool tensors is not supported.");
  expect_error(kn_sub(b, i), KN_EDTYPE, "with a bool tensor is not supported");
  expect_error(kn_add(i, NULL), KN_EINVAL, "NULL tensor");
}

Test(arith, inplace_values_version_and_errors) {
  kn_tensor *a = TV(KN_FLOAT32, (2, 2), 1, 2, 3, 4);
  kn_tensor *row = TV(KN_FLOAT32, (2), 10, 20);
  uint64_t v0 = kn_tensor_version(a);
  cr_assert_eq(kn_add_(a, row), KN_OK);
  EXPECT(a, KN_FLOAT32, (2, 2), 11, 22, 13, 24);
  cr_assert_eq(kn_tensor_version(a), v0 + 1);
  cr_assert_eq(kn_mul_scalar_(a, kn_int(2)), KN_OK);
  cr_assert_eq(kn_sub_scalar_(a, kn_float(2)), KN_OK);
  cr_assert_eq(kn_div_(a, row), KN_OK);
  EXPECT(a, KN_FLOAT32, (2, 2), 2, 2.1, 2.4, 2.3);
  cr_assert_eq(kn_add_scaled_(a, row, kn_float(-0.1)), KN_OK);
  EXPECT(a, KN_FLOAT32, (2, 2), 1, 0.1, 1.4, 0.3);
  cr_assert_eq(kn_tensor_version(a), v0 + 5);

  kn_tensor *l = TV(KN_INT64, (2), 1, 2);
  cr_assert_eq(kn_add_scalar_(l, kn_float(1.5)), KN_EDTYPE);
  cr_assert_str_eq(kn_last_error(), "result type Float can't be cast to the desired output type Long");
  cr_assert_eq(kn_div_scalar_(l, kn_int(2)), KN_EDTYPE);
  cr_assert_eq(kn_div_mode_(l, l, KN_ROUND_FLOOR), KN_OK);
  EXPECT(l, KN_INT64, (2), 1, 1);
  kn_tensor *i32 = TV(KN_INT32, (2), 5, 6);
  cr_assert_eq(kn_add_(i32, l), KN_OK); /* int64 result cast into int32 self */
  EXPECT(i32, KN_INT32, (2), 6, 7);
  kn_tensor *small = TV(KN_FLOAT32, (2), 1, 2);
  cr_assert_eq(kn_add_(small, a), KN_ESHAPE);
  cr_assert_str_eq(kn_last_error(), "output with shape [2] doesn't match the broadcast shape [2, 2]");
  kn_tensor *bl = TV(KN_BOOL, (2), 1, 0);
  cr_assert_eq(kn_add_(bl, l), KN_EDTYPE);
  cr_assert_str_eq(kn_last_error(), "result type Long can't be cast to the desired output type Bool");
}

Test(arith, non_contiguous_inputs) {
  kn_tensor *a = TV(KN_FLOAT32, (2, 3), 1, 2, 3, 4, 5, 6);
  kn_tensor *t = kn__autorelease(kn__make_view(a, 2, (int64_t[]){3, 2}, (int64_t[]){1, 3}, 0));
  kn_tensor *b = TV(KN_FLOAT32, (3, 2), 10, 20, 30, 40, 50, 60);
  EXPECT(kn_add(t, b), KN_FLOAT32, (3, 2), 11, 24, 32, 45, 53, 66);
  kn_tensor *d = TV(KN_FLOAT64, (3, 2), 1, 1, 1, 1, 1, 1);
  EXPECT(kn_mul(t, d), KN_FLOAT64, (3, 2), 1, 4, 2, 5, 3, 6);
  /* every other element of a row */
  kn_tensor *s = kn__autorelease(kn__make_view(a, 1, (int64_t[]){2}, (int64_t[]){2}, 3));
  EXPECT(kn_sub_scalar(s, kn_int(1)), KN_FLOAT32, (2), 3, 5);
  cr_assert_eq(kn_mul_scalar_(t, kn_int(10)), KN_OK); /* in place through the view */
  EXPECT(a, KN_FLOAT32, (2, 3), 10, 20, 30, 40, 50, 60);
}

Test(arith, zero_size_and_meta_inputs) {
  kn_tensor *e = kn_zeros(KN_SHAPE(0, 3), KN_FLOAT32);
  kn_tensor *r = kn_add(e, TV(KN_FLOAT32, (3), 1, 2, 3));
  cr_assert_not_null(r);
  cr_assert_eq(kn_size(r, 0), 0);
  cr_assert_eq(kn_size(r, 1), 3);
  kn_tensor *m = kn_empty_meta(KN_SHAPE(4, 1, 5), KN_INT32);
  kn_tensor *n = kn_empty_meta(KN_SHAPE(3, 1), KN_FLOAT16);
  kn_tensor *q = kn_div(m, n);
  cr_assert_not_null(q, "%s", kn_last_error());
  cr_assert_eq(kn_tensor_device(q), KN_META);
  cr_assert_eq(kn_tensor_dtype(q), KN_FLOAT16);
  cr_assert_eq(kn_ndim(q), 3);
  cr_assert_eq(kn_size(q, 0), 4);
  cr_assert_eq(kn_size(q, 1), 3);
  cr_assert_eq(kn_size(q, 2), 5);
  cr_assert_null(kn_data(q));
  kn_tensor *c = kn_lt_scalar(m, kn_float(0.5));
  cr_assert_eq(kn_tensor_dtype(c), KN_BOOL);
  cr_assert_eq(kn_tensor_device(c), KN_META);
}

Test(arith, half_precision_rounds_once) {
  /* 2049 is not representable in float16: 2048 + 1 rounds to even (2048);
  ** bfloat16 keeps 8 bits of mantissa. */
  kn_tensor *h = TV(KN_FLOAT16, (2), 2048, 0.1);
  EXPECT(kn_add_scalar(h, kn_int(1)), KN_FLOAT16, (2), 2048, 1.099609375);
  kn_tensor *bf = TV(KN_BFLOAT16, (2), 256, 3);
  EXPECT(kn_add_scalar(bf, kn_int(1)), KN_BFLOAT16, (2), 256, 4);
  EXPECT(kn_mul(bf, bf), KN_BFLOAT16, (2), 65536, 9);
}

Test(arith, large_tensors_use_every_path) {
  /* above the parallel threshold, contiguous and broadcast rows */
  int64_t n = 300000;
  kn_tensor *a = kn_full(KN_SHAPE(3, n / 3), kn_float(1.5), KN_FLOAT32);
  kn_tensor *b = kn_full(KN_SHAPE(n / 3), kn_float(2), KN_FLOAT32);
  kn_tensor *r = kn_mul(a, b);
  const float *p = kn_data(r);
  for (int64_t i = 0; i < n; i += 997) cr_assert_eq(p[i], 3.0f);
  cr_assert_eq(p[n - 1], 3.0f);
  kn_tensor *t = kn__autorelease(kn__make_view(a, 2, (int64_t[]){n / 3, 3}, (int64_t[]){1, n / 3}, 0));
  kn_tensor *r2 = kn_add_scalar(t, kn_int(1));
  const float *q = kn_data(r2);
  for (int64_t i = 0; i < n; i += 991) cr_assert_eq(q[i], 2.5f);
  /* compute-bound ops go parallel above KN__PAR_GRAIN: one long row split in
  ** chunks, and many strided rows */
  kn_tensor *e = kn_exp(a);
  const float *pe = kn_data(e);
  for (int64_t i = 0; i < n; i += 997) cr_assert_eq(pe[i], expf(1.5f));
  cr_assert_eq(pe[n - 1], expf(1.5f));
  float *pa = kn_data(a);
  for (int64_t i = 0; i < n; i++) pa[i] = (float)(i % 7) * 0.25f;
  kn_tensor *s = kn_sigmoid(t); /* t is a's transpose: [n/3, 3] */
  const float *ps = kn_data(s);
  for (int64_t i = 0; i < n / 3; i += 101)
    for (int64_t j = 0; j < 3; j++) {
      float x = pa[j * (n / 3) + i];
      cr_assert_eq(ps[i * 3 + j], 1.0f / (1.0f + expf(-x)), "at %lld,%lld", (long long)i, (long long)j);
    }
}

Test(arith, inplace_reading_another_view_of_self) {
  /* a += a.T reads elements it has already written unless it copies first */
  kn_tensor *a = TV(KN_FLOAT32, (2, 2), 1, 2, 3, 4);
  kn_tensor *t = kn__autorelease(kn__make_view(a, 2, (int64_t[]){2, 2}, (int64_t[]){1, 2}, 0));
  cr_assert_eq(kn_add_(a, t), KN_OK);
  EXPECT(a, KN_FLOAT32, (2, 2), 2, 5, 5, 8);
  /* shifted view: b[1:] *= b[:-1] */
  kn_tensor *b = TV(KN_INT64, (4), 1, 2, 3, 4);
  kn_tensor *hi = kn__autorelease(kn__make_view(b, 1, (int64_t[]){3}, (int64_t[]){1}, 1));
  kn_tensor *lo = kn__autorelease(kn__make_view(b, 1, (int64_t[]){3}, (int64_t[]){1}, 0));
  cr_assert_eq(kn_mul_(hi, lo), KN_OK);
  EXPECT(b, KN_INT64, (4), 1, 2, 6, 12);
  /* a meta self: metadata only, alias of self */
  kn_tensor *m = kn_empty_meta(KN_SHAPE(3, 4), KN_FLOAT32);
  cr_assert_eq(kn_add_scalar_(m, kn_int(1)), KN_OK);
  cr_assert_eq(kn_mul_(m, kn_empty_meta(KN_SHAPE(4), KN_INT32)), KN_OK);
  cr_assert_eq(kn_mul_(m, kn_empty_meta(KN_SHAPE(2, 3, 4), KN_FLOAT32)), KN_ESHAPE);
  cr_assert_eq(kn_mul_(m, kn_empty_meta(KN_SHAPE(4), KN_FLOAT64)), KN_OK);
  cr_assert_eq(kn_tensor_dtype(m), KN_FLOAT32);
}

Test(arith, every_integer_dtype) {
  kn_dtype dts[] = {KN_UINT8, KN_INT8, KN_INT16, KN_INT32, KN_INT64};
  for (size_t i = 0; i < sizeof dts / sizeof *dts; i++) {
    kn_tensor *a = TV(dts[i], (3), 9, 4, 1);
    kn_tensor *b = TV(dts[i], (3), 2, 4, 3);
    EXPECT(kn_add(a, b), dts[i], (3), 11, 8, 4);
    EXPECT(kn_mul(a, b), dts[i], (3), 18, 16, 3);
    EXPECT(kn_sub(a, b), dts[i], (3), 7, 0, dts[i] == KN_UINT8 ? 254 : -2);
    EXPECT(kn_div_mode(a, b, KN_ROUND_FLOOR), dts[i], (3), 4, 1, 0);
    EXPECT(kn_div(a, b), KN_FLOAT32, (3), 4.5, 1, 1.0 / 3);
    EXPECT(kn_maximum(a, b), dts[i], (3), 9, 4, 3);
    EXPECT(kn_ge(a, b), KN_BOOL, (3), 1, 1, 0);
    EXPECT(kn_pow_scalar(a, kn_int(2)), dts[i], (3), 81, 16, 1);
  }
}

/* One-element operands of a vector-math formula run the vector function on
** the elements in place: the value is libm's, and the same as the element's
** in a longer row. */
Test(arith, one_element_vector_math_rows) {
  kn_tensor *a = TV(KN_FLOAT32, (1), 1.7), *b = TV(KN_FLOAT32, (1), 2.3);
  EXPECT(kn_pow(a, b), KN_FLOAT32, (1), pow(1.7, 2.3));
  kn_tensor *a64 = TV(KN_FLOAT64, (1, 1), 0.3), *b64 = TV(KN_FLOAT64, (1, 1), -1.25);
  EXPECT_TOL(kn_pow(a64, b64), KN_FLOAT64, 1e-15, (1, 1), pow(0.3, -1.25));
  kn_tensor *row = TV(KN_FLOAT32, (5), 1.7, 1.7, 1.7, 1.7, 1.7);
  float one = *(float *)kn_data(kn_pow(a, b)), many = ((float *)kn_data(kn_pow(row, b)))[4];
  cr_assert_eq(one, many, "one element %.9g, in a row %.9g", one, many);
  kn_tensor *g = TV(KN_FLOAT32, (1), 0.5), *x = TV(KN_FLOAT32, (1), 0.8);
  /* gelu'(x) = Phi(x) + x phi(x) */
  double d = 0.5 * (1 + erf(0.8 / sqrt(2))) + 0.8 * exp(-0.32) / sqrt(2 * M_PI);
  EXPECT(kn_gelu_backward(g, x, KN_GELU_NONE), KN_FLOAT32, (1), 0.5 * d);
}

/* Two tensors with dims of one floating dtype give that dtype whatever the
** scalars and zero-dim tensors beside them (torch.result_type). */
Test(arith, promotion_same_floating_pair) {
  kn_tensor *h = TV(KN_FLOAT16, (2), 1, 2);
  EXPECT(kn_add_scaled(h, h, kn_float(0.5)), KN_FLOAT16, (2), 1.5, 3);
  kn_tensor *bf = TV(KN_BFLOAT16, (1), 4);
  EXPECT(kn_sub_scaled(bf, bf, kn_int(3)), KN_BFLOAT16, (1), -8);
  kn_tensor *z = TV(KN_FLOAT16, (), 2), *z64 = TV(KN_FLOAT64, (), 0.25);
  EXPECT(kn_add_scaled(z, z, kn_float(0.5)), KN_FLOAT16, (), 3);
  EXPECT(kn_add(h, z64), KN_FLOAT16, (2), 1.25, 2.25);
  kn_tensor *i = TV(KN_INT32, (2), 1, 2);
  EXPECT(kn_add_scaled(i, i, kn_int(2)), KN_INT32, (2), 3, 6);
}

/* The backward helper ops on integer tensors (torch 1.13): threshold_backward
** computes in the integer type, the threshold truncated to it; the others
** have floating kernels only and name them. */

Test(arith, backward_helpers_on_integer_tensors) {
  kn_tensor *g = TV(KN_INT64, (5), 10, 20, 30, 40, 50), *x = TV(KN_INT64, (5), -1, 0, 1, 2, 3);
  EXPECT(kn_threshold_backward(g, x, kn_int(1)), KN_INT64, (5), 0, 0, 0, 40, 50);
  EXPECT(kn_threshold_backward(g, x, kn_float(1.5)), KN_INT64, (5), 0, 0, 0, 40, 50);
  kn_tensor *g32 = kn_to(g, KN_INT32), *x32 = kn_to(x, KN_INT32);
  EXPECT(kn_threshold_backward(g32, x32, kn_int(0)), KN_INT32, (5), 0, 0, 30, 40, 50);
  /* mixed: promoted to float32 */
  EXPECT(kn_threshold_backward(kn_to(g, KN_FLOAT32), x, kn_float(0.5)), KN_FLOAT32, (5), 0, 0, 30,
         40, 50);
  expect_error(kn_sigmoid_backward(g, x), KN_EDTYPE,
               "\"sigmoid_backward_cpu\" not implemented for 'Long'");
  expect_error(kn_tanh_backward(g32, x32), KN_EDTYPE,
               "\"tanh_backward_cpu\" not implemented for 'Int'");
  expect_error(kn_gelu_backward(g, x, KN_GELU_NONE), KN_EDTYPE,
               "\"GeluBackwardKernelImpl\" not implemented for 'Long'");
  kn_tensor *b = kn_to(x, KN_BOOL);
  expect_error(kn_threshold_backward(b, b, kn_int(0)), KN_EDTYPE,
               "\"threshold_cpu\" not implemented for 'Bool'");
}

/* The same through the code generator: an integer threshold_backward
** compiled equals eager. */
static kn_tensor *thr_fn(kn_tensor *g, kn_tensor *x) {
  return kn_threshold_backward(kn_add(g, g), x, kn_int(1));
}

Test(arith, integer_threshold_backward_compiled) {
  kn_tensor *g = TV(KN_INT64, (6), 1, 2, 3, 4, 5, 6), *x = TV(KN_INT64, (6), 3, -2, 1, 0, 2, 5);
  kn_compiled *f = KN_COMPILE(thr_fn, NULL);
  kn_tensor *y = kn_call_t(f, g, x);
  EXPECT(y, KN_INT64, (6), 2, 0, 0, 0, 10, 12);
  kn_compiled_free(f);
}
