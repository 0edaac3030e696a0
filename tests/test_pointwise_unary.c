/*
** test_pointwise_unary.c: unary math, comparisons, logical ops, where,
** clamp, pow, maximum/minimum, copies, casts and fills: literal values
** (computed independently with libm / by hand), dtype rules, errors.
*/
#include "test_pointwise_util.h"

TestSuite(unary, .init = pw_setup, .fini = pw_teardown);
TestSuite(compare, .init = pw_setup, .fini = pw_teardown);
TestSuite(copy, .init = pw_setup, .fini = pw_teardown);

Test(unary, math_literals_float32) {
  kn_tensor *x = TV(KN_FLOAT32, (4), -2, -0.5, 0.5, 3);
  EXPECT(kn_neg(x), KN_FLOAT32, (4), 2, 0.5, -0.5, -3);
  EXPECT(kn_abs(x), KN_FLOAT32, (4), 2, 0.5, 0.5, 3);
  EXPECT(kn_sgn(x), KN_FLOAT32, (4), -1, -1, 1, 1);
  EXPECT(kn_reciprocal(x), KN_FLOAT32, (4), -0.5, -2, 2, 1.0 / 3);
  EXPECT(kn_exp(x), KN_FLOAT32, (4), exp(-2), exp(-0.5), exp(0.5), exp(3));
  EXPECT(kn_exp2(x), KN_FLOAT32, (4), 0.25, exp2(-0.5), exp2(0.5), 8);
  EXPECT(kn_expm1(x), KN_FLOAT32, (4), expm1(-2), expm1(-0.5), expm1(0.5), expm1(3));
  EXPECT(kn_tanh(x), KN_FLOAT32, (4), tanh(-2), tanh(-0.5), tanh(0.5), tanh(3));
  EXPECT(kn_sigmoid(x), KN_FLOAT32, (4), 1 / (1 + exp(2)), 1 / (1 + exp(0.5)),
         1 / (1 + exp(-0.5)), 1 / (1 + exp(-3)));
  EXPECT(kn_relu(x), KN_FLOAT32, (4), 0, 0, 0.5, 3);
  EXPECT(kn_sin(x), KN_FLOAT32, (4), sin(-2), sin(-0.5), sin(0.5), sin(3));
  EXPECT(kn_cos(x), KN_FLOAT32, (4), cos(-2), cos(-0.5), cos(0.5), cos(3));
  EXPECT(kn_tan(x), KN_FLOAT32, (4), tan(-2), tan(-0.5), tan(0.5), tan(3));
  EXPECT(kn_erf(x), KN_FLOAT32, (4), erf(-2), erf(-0.5), erf(0.5), erf(3));
  EXPECT(kn_silu(x), KN_FLOAT32, (4), -2 / (1 + exp(2)), -0.5 / (1 + exp(0.5)),
         0.5 / (1 + exp(-0.5)), 3 / (1 + exp(-3)));
  /* gelu: exact 0.5 x (1 + erf(x / sqrt 2)); tanh form */
  EXPECT(kn_gelu(x, KN_GELU_NONE), KN_FLOAT32, (4), -0.04550026389635842, -0.15426877840538948,
         0.34573122159461053, 2.9959502000697);
  EXPECT_TOL(kn_gelu(x, KN_GELU_TANH), KN_FLOAT32, 1e-6, (4), -0.04540230591222, -0.15428599,
             0.34571401, 2.99636306);
  kn_tensor *p = TV(KN_FLOAT32, (3), 0.25, 1, 4);
  EXPECT(kn_log(p), KN_FLOAT32, (3), log(0.25), 0, log(4));
  EXPECT(kn_log2(p), KN_FLOAT32, (3), -2, 0, 2);
  EXPECT(kn_log1p(p), KN_FLOAT32, (3), log1p(0.25), log(2), log(5));
  EXPECT(kn_sqrt(p), KN_FLOAT32, (3), 0.5, 1, 2);
  EXPECT(kn_rsqrt(p), KN_FLOAT32, (3), 2, 1, 0.5);
  EXPECT(kn_log(TV(KN_FLOAT32, (2), 0, -1)), KN_FLOAT32, (2), -INFINITY, NAN);
}

Test(unary, inverse_trig_hyperbolic_log10_erfc) {
  kn_tensor *x = TV(KN_FLOAT32, (4), -0.9, -0.25, 0.5, 1);
  EXPECT(kn_asin(x), KN_FLOAT32, (4), asin(-0.9), asin(-0.25), asin(0.5), M_PI / 2);
  EXPECT(kn_acos(x), KN_FLOAT32, (4), acos(-0.9), acos(-0.25), acos(0.5), 0);
  EXPECT(kn_atan(x), KN_FLOAT32, (4), atan(-0.9), atan(-0.25), atan(0.5), M_PI / 4);
  EXPECT(kn_sinh(x), KN_FLOAT32, (4), sinh(-0.9), sinh(-0.25), sinh(0.5), sinh(1));
  EXPECT(kn_cosh(x), KN_FLOAT32, (4), cosh(-0.9), cosh(-0.25), cosh(0.5), cosh(1));
  EXPECT(kn_erfc(x), KN_FLOAT32, (4), erfc(-0.9), erfc(-0.25), erfc(0.5), erfc(1));
  EXPECT(kn_asin(TV(KN_FLOAT64, (2), 2, -1)), KN_FLOAT64, (2), NAN, -M_PI / 2);
  EXPECT(kn_log10(TV(KN_FLOAT64, (4), 1000, 0.01, 0, -1)), KN_FLOAT64, (4), 3, -2, -INFINITY,
         NAN);
  /* integer inputs compute in the default float dtype */
  EXPECT(kn_log10(TV(KN_INT64, (2), 10, 100)), KN_FLOAT32, (2), 1, 2);
  EXPECT(kn_erfc(TV(KN_FLOAT64, (2), 10, -10)), KN_FLOAT64, (2), erfc(10.0), 2);
  kn_tensor *leaf = TV(KN_FLOAT32, (1), 0.5);
  cr_assert_eq(kn_set_requires_grad(leaf, true), KN_OK);
  cr_assert_str_eq(kn_grad_fn_name(kn_atan(leaf)), "AtanBackward0");
}

Test(unary, softplus) {
  kn_tensor *x = TV(KN_FLOAT32, (4), -2, 0, 1, 30);
  EXPECT(kn_softplus(x, kn_int(1), kn_int(20)), KN_FLOAT32, (4), log1p(exp(-2.0)), log(2.0),
         log1p(exp(1.0)), 30);
  kn_tensor *y = TV(KN_FLOAT64, (3), 0.25, 0.6, -40);
  EXPECT(kn_softplus(y, kn_float(2), kn_int(1)), KN_FLOAT64, (3), log1p(exp(0.5)) / 2, 0.6,
         log1p(exp(-80.0)) / 2);
  cr_assert_null(kn_softplus(TV(KN_INT64, (1), 1), kn_int(1), kn_int(20)));
  cr_assert_str_eq(kn_last_error(), "\"softplus_cpu\" not implemented for 'Long'");
}

Test(unary, rounding_and_nan_rules) {
  kn_tensor *x = TV(KN_FLOAT64, (6), -2.5, -1.5, -0.5, 0.5, 1.5, 2.7);
  EXPECT(kn_round(x), KN_FLOAT64, (6), -2, -2, -0.0, 0, 2, 3); /* half to even */
  EXPECT(kn_trunc(x), KN_FLOAT64, (6), -2, -1, -0.0, 0, 1, 2);
  EXPECT(kn_floor(x), KN_FLOAT64, (6), -3, -2, -1, 0, 1, 2);
  EXPECT(kn_ceil(x), KN_FLOAT64, (6), -2, -1, -0.0, 1, 2, 3);
  kn_tensor *n = TV(KN_FLOAT32, (3), NAN, -0.0, -1);
  EXPECT(kn_relu(n), KN_FLOAT32, (3), NAN, 0, 0);
  EXPECT(kn_sgn(n), KN_FLOAT32, (3), 0, 0, -1);
  kn_tensor *y = kn_clone(x), *z = kn_clone(x), *w = kn_clone(x);
  cr_assert_eq(kn_trunc_(x), KN_OK);
  EXPECT(x, KN_FLOAT64, (6), -2, -1, -0.0, 0, 1, 2);
  cr_assert_eq(kn_round_(y), KN_OK);
  EXPECT(y, KN_FLOAT64, (6), -2, -2, -0.0, 0, 2, 3);
  cr_assert_eq(kn_floor_(z), KN_OK);
  EXPECT(z, KN_FLOAT64, (6), -3, -2, -1, 0, 1, 2);
  cr_assert_eq(kn_ceil_(w), KN_OK);
  EXPECT(w, KN_FLOAT64, (6), -2, -1, -0.0, 1, 2, 3);
  cr_assert_eq(kn_abs_(w), KN_OK);
  EXPECT(w, KN_FLOAT64, (6), 2, 1, 0, 1, 2, 3);
  kn_tensor *p = TV(KN_FLOAT32, (3), 4, 0.25, 1);
  cr_assert_eq(kn_sqrt_(p), KN_OK);
  EXPECT(p, KN_FLOAT32, (3), 2, 0.5, 1);
  cr_assert_eq(kn_reciprocal_(p), KN_OK);
  EXPECT(p, KN_FLOAT32, (3), 0.5, 2, 1);
  cr_assert_eq(kn_log_(p), KN_OK);
  EXPECT(p, KN_FLOAT32, (3), log(0.5), log(2), 0);
  kn_tensor *iv = TV(KN_INT32, (2), 4, 9);
  cr_assert_eq(kn_sqrt_(iv), KN_EDTYPE);
  cr_assert_eq(kn_floor_(iv), KN_OK);
  EXPECT(iv, KN_INT32, (2), 4, 9);
}

Test(unary, integer_inputs) {
  kn_tensor *i = TV(KN_INT64, (3), -3, 0, 4);
  EXPECT(kn_exp(i), KN_FLOAT32, (3), exp(-3), 1, exp(4));
  EXPECT(kn_sqrt(i), KN_FLOAT32, (3), NAN, 0, 2);
  EXPECT(kn_neg(i), KN_INT64, (3), 3, 0, -4);
  EXPECT(kn_abs(i), KN_INT64, (3), 3, 0, 4);
  EXPECT(kn_relu(i), KN_INT64, (3), 0, 0, 4);
  EXPECT(kn_sgn(i), KN_INT64, (3), -1, 0, 1);
  EXPECT(kn_round(i), KN_INT64, (3), -3, 0, 4);
  kn_tensor *b = TV(KN_BOOL, (2), 1, 0);
  EXPECT(kn_exp(b), KN_FLOAT32, (2), exp(1), 1);
  expect_error(kn_neg(b), KN_EDTYPE, "Negation, the `-` operator, on a bool tensor is not supported.");
  expect_error(kn_abs(b), KN_EDTYPE, "\"abs_cpu\" not implemented for 'Bool'");
  expect_error(kn_relu(b), KN_EDTYPE, "Boolean inputs not supported for relu");
  cr_assert_eq(kn_exp_(i), KN_EDTYPE);
  cr_assert_str_eq(kn_last_error(), "result type Float can't be cast to the desired output type Long");
  cr_assert_eq(kn_neg_(i), KN_OK);
  EXPECT(i, KN_INT64, (3), 3, 0, -4);
  cr_assert_eq(kn_relu_(i), KN_OK);
  EXPECT(i, KN_INT64, (3), 3, 0, 0);
}

Test(unary, half_types_and_inplace) {
  kn_tensor *h = TV(KN_FLOAT16, (2), 1, -1);
  EXPECT_TOL(kn_exp(h), KN_FLOAT16, 1e-3, (2), 2.71875, 0.36767578125);
  kn_tensor *bf = TV(KN_BFLOAT16, (2), 0.5, -0.5);
  EXPECT_TOL(kn_sigmoid(bf), KN_BFLOAT16, 1e-2, (2), 0.62109375, 0.376953125);
  kn_tensor *f = TV(KN_FLOAT32, (3), -1, 0, 1);
  cr_assert_eq(kn_exp_(f), KN_OK);
  EXPECT(f, KN_FLOAT32, (3), exp(-1), 1, exp(1));
  cr_assert_eq(kn_tanh_(f), KN_OK);
  cr_assert_eq(kn_sigmoid_(f), KN_OK);
  EXPECT(f, KN_FLOAT32, (3), 1 / (1 + exp(-tanh(exp(-1)))), 1 / (1 + exp(-tanh(1.0))),
         1 / (1 + exp(-tanh(exp(1)))));
  kn_tensor *m = kn_empty_meta(KN_SHAPE(2, 7), KN_INT16);
  kn_tensor *me = kn_exp(m);
  cr_assert_eq(kn_tensor_dtype(me), KN_FLOAT32);
  cr_assert_eq(kn_tensor_device(me), KN_META);
  cr_assert_eq(kn_size(me, 1), 7);
}

Test(unary, clamp) {
  kn_tensor *x = TV(KN_FLOAT32, (5), -2, -0.5, 0.5, 3, NAN);
  kn_scalar lo = kn_float(-1), hi = kn_int(1);
  EXPECT(kn_clamp(x, &lo, &hi), KN_FLOAT32, (5), -1, -0.5, 0.5, 1, NAN);
  EXPECT(kn_clamp(x, NULL, &hi), KN_FLOAT32, (5), -2, -0.5, 0.5, 1, NAN);
  EXPECT(kn_clamp(x, &lo, NULL), KN_FLOAT32, (5), -1, -0.5, 0.5, 3, NAN);
  kn_tensor *i = TV(KN_INT32, (3), -5, 0, 5);
  kn_scalar ilo = kn_int(-1), flo = kn_float(-1.5);
  EXPECT(kn_clamp(i, &ilo, &hi), KN_INT32, (3), -1, 0, 1);
  EXPECT(kn_clamp(i, &flo, NULL), KN_FLOAT32, (3), -1.5, 0, 5);
  cr_assert_eq(kn_clamp_(i, &flo, NULL), KN_EDTYPE);
  cr_assert_eq(kn_clamp_(i, &ilo, &hi), KN_OK);
  EXPECT(i, KN_INT32, (3), -1, 0, 1);
  expect_error(kn_clamp(x, NULL, NULL), KN_EINVAL, "At least one of 'min' or 'max' must not be None");
}

Test(unary, pow_forms) {
  kn_tensor *x = TV(KN_FLOAT32, (3), 2, 0.5, -3);
  kn_tensor *e = TV(KN_FLOAT32, (3), 3, -1, 2);
  EXPECT(kn_pow(x, e), KN_FLOAT32, (3), 8, 2, 9);
  EXPECT(kn_pow_scalar(x, kn_int(2)), KN_FLOAT32, (3), 4, 0.25, 9);
  EXPECT(kn_pow_scalar(x, kn_float(0.5)), KN_FLOAT32, (3), sqrt(2), sqrt(0.5), NAN);
  EXPECT(kn_scalar_pow(kn_int(2), e), KN_FLOAT32, (3), 8, 0.5, 4);
  kn_tensor *i = TV(KN_INT64, (3), 2, -3, 1);
  EXPECT(kn_pow_scalar(i, kn_int(3)), KN_INT64, (3), 8, -27, 1);
  EXPECT(kn_pow(i, TV(KN_INT64, (3), -1, 2, -2)), KN_INT64, (3), 0, 9, 1);
  EXPECT(kn_pow_scalar(i, kn_float(0.5)), KN_FLOAT32, (3), sqrt(2), NAN, 1);
  EXPECT(kn_scalar_pow(kn_float(2), i), KN_FLOAT32, (3), 4, 0.125, 2);
  expect_error(kn_pow_scalar(i, kn_int(-1)), KN_EINVAL,
               "Integers to negative integer powers are not allowed.");
  cr_assert_eq(kn_pow_scalar_(x, kn_int(2)), KN_OK);
  EXPECT(x, KN_FLOAT32, (3), 4, 0.25, 9);
}

Test(compare, comparisons_and_promotion) {
  kn_tensor *a = TV(KN_FLOAT32, (4), 1, 2, NAN, 4);
  kn_tensor *b = TV(KN_INT64, (4), 1, 3, 0, 3);
  EXPECT(kn_eq(a, b), KN_BOOL, (4), 1, 0, 0, 0);
  EXPECT(kn_ne(a, b), KN_BOOL, (4), 0, 1, 1, 1);
  EXPECT(kn_lt(a, b), KN_BOOL, (4), 0, 1, 0, 0);
  EXPECT(kn_le(a, b), KN_BOOL, (4), 1, 1, 0, 0);
  EXPECT(kn_gt(a, b), KN_BOOL, (4), 0, 0, 0, 1);
  EXPECT(kn_ge(a, b), KN_BOOL, (4), 1, 0, 0, 1);
  EXPECT(kn_lt_scalar(b, kn_float(2.5)), KN_BOOL, (4), 1, 0, 1, 0); /* compared as float */
  EXPECT(kn_eq_scalar(b, kn_int(3)), KN_BOOL, (4), 0, 1, 0, 1);
  EXPECT(kn_ge_scalar(a, kn_int(2)), KN_BOOL, (4), 0, 1, 0, 1);
  EXPECT(kn_gt_scalar(a, kn_int(1)), KN_BOOL, (4), 0, 1, 0, 1);
  EXPECT(kn_le_scalar(a, kn_int(1)), KN_BOOL, (4), 1, 0, 0, 0);
  EXPECT(kn_ne_scalar(a, kn_int(1)), KN_BOOL, (4), 0, 1, 1, 1);
  kn_tensor *u8 = TV(KN_UINT8, (2), 255, 1);
  kn_tensor *i8 = TV(KN_INT8, (2), -1, 1);
  EXPECT(kn_eq(u8, i8), KN_BOOL, (2), 0, 1); /* compared as int16: 255 != -1 */
  kn_tensor *col = TV(KN_INT32, (2, 1), 1, 2);
  EXPECT(kn_lt(col, TV(KN_INT32, (3), 0, 1, 2)), KN_BOOL, (2, 3), 0, 0, 1, 0, 0, 0);
}

Test(compare, logical_and_maximum) {
  kn_tensor *a = TV(KN_FLOAT32, (4), 0, 0.5, NAN, -2);
  kn_tensor *b = TV(KN_INT64, (4), 0, 0, 3, 1);
  EXPECT(kn_logical_and(a, b), KN_BOOL, (4), 0, 0, 1, 1);
  EXPECT(kn_logical_or(a, b), KN_BOOL, (4), 0, 1, 1, 1);
  EXPECT(kn_logical_not(a), KN_BOOL, (4), 1, 0, 0, 0);
  EXPECT(kn_maximum(a, b), KN_FLOAT32, (4), 0, 0.5, NAN, 1);
  EXPECT(kn_minimum(a, b), KN_FLOAT32, (4), 0, 0, NAN, -2);
  kn_tensor *i = TV(KN_INT32, (2), 5, -5);
  EXPECT(kn_maximum(i, TV(KN_INT32, (1), 0)), KN_INT32, (2), 5, 0);
}

Test(compare, where) {
  kn_tensor *c = TV(KN_BOOL, (2, 1), 1, 0);
  kn_tensor *a = TV(KN_FLOAT32, (3), 1, 2, 3);
  kn_tensor *b = TV(KN_INT64, (2, 3), -1, -2, -3, -4, -5, -6);
  EXPECT(kn_where(c, a, b), KN_FLOAT32, (2, 3), 1, 2, 3, -4, -5, -6);
  kn_tensor *h = TV(KN_FLOAT16, (1), 0.5);
  EXPECT(kn_where(c, h, b), KN_FLOAT16, (2, 3), 0.5, 0.5, 0.5, -4, -5, -6);
  expect_error(kn_where(a, a, b), KN_EDTYPE,
               "where expected condition to be a boolean tensor, but got a tensor with dtype Float");
}

Test(copy, clone_contiguous_to) {
  kn_tensor *a = TV(KN_FLOAT32, (2, 3), 1, 2, 3, 4, 5, 6);
  kn_tensor *c = kn_clone(a);
  cr_assert(!kn_same_storage(a, c));
  EXPECT(c, KN_FLOAT32, (2, 3), 1, 2, 3, 4, 5, 6);
  kn_tensor *same = kn_contiguous(a);
  cr_assert_eq(same, a); /* already contiguous: a itself, a new reference */
  kn_tensor *t = kn__autorelease(kn__make_view(a, 2, (int64_t[]){3, 2}, (int64_t[]){1, 3}, 0));
  kn_tensor *tc = kn_contiguous(t);
  cr_assert(tc != t && kn_is_contiguous(tc) && !kn_same_storage(tc, a));
  EXPECT(tc, KN_FLOAT32, (3, 2), 1, 4, 2, 5, 3, 6);
  cr_assert_eq(kn_to(a, KN_FLOAT32), a);
  EXPECT(kn_to(t, KN_INT32), KN_INT32, (3, 2), 1, 4, 2, 5, 3, 6);
  EXPECT(kn_to_copy(TV(KN_FLOAT32, (3), -1.7, 0.5, 300), KN_UINT8), KN_UINT8, (3), 255, 0, 44);
  EXPECT(kn_to(TV(KN_FLOAT32, (2), 0.1, 65504), KN_FLOAT16), KN_FLOAT16, (2), 0.0999755859375, 65504);
  EXPECT(kn_to(TV(KN_FLOAT32, (3), 0, -0.5, NAN), KN_BOOL), KN_BOOL, (3), 0, 1, 1);
  kn_tensor *m = kn_empty_meta(KN_SHAPE(5, 2), KN_FLOAT32);
  kn_tensor *mc = kn_to(m, KN_FLOAT64);
  cr_assert_eq(kn_tensor_dtype(mc), KN_FLOAT64);
  cr_assert_eq(kn_tensor_device(mc), KN_META);
}

Test(copy, copy_fill_zero) {
  kn_tensor *dst = kn_zeros(KN_SHAPE(2, 3), KN_INT32);
  uint64_t v0 = kn_tensor_version(dst);
  cr_assert_eq(kn_copy_(dst, TV(KN_FLOAT64, (3), 1.9, -2.9, 3)), KN_OK); /* broadcast + cast */
  EXPECT(dst, KN_INT32, (2, 3), 1, -2, 3, 1, -2, 3);
  cr_assert_eq(kn_tensor_version(dst), v0 + 1);
  cr_assert_eq(kn_copy_(dst, TV(KN_FLOAT64, (2), 1, 2)), KN_ESHAPE);
  cr_assert_eq(kn_fill_(dst, kn_float(2.5)), KN_OK);
  EXPECT(dst, KN_INT32, (2, 3), 2, 2, 2, 2, 2, 2);
  /* copy into a transposed view, and overlapping copy within one storage */
  kn_tensor *a = TV(KN_FLOAT32, (2, 2), 1, 2, 3, 4);
  kn_tensor *t = kn__autorelease(kn__make_view(a, 2, (int64_t[]){2, 2}, (int64_t[]){1, 2}, 0));
  cr_assert_eq(kn_copy_(a, t), KN_OK);
  EXPECT(a, KN_FLOAT32, (2, 2), 1, 3, 2, 4);
  kn_tensor *row1 = kn__autorelease(kn__make_view(a, 1, (int64_t[]){2}, (int64_t[]){1}, 2));
  cr_assert_eq(kn_fill_(row1, kn_int(7)), KN_OK);
  EXPECT(a, KN_FLOAT32, (2, 2), 1, 3, 7, 7);
  cr_assert_eq(kn_zero_(t), KN_OK);
  EXPECT(a, KN_FLOAT32, (2, 2), 0, 0, 0, 0);
  kn_tensor *h = kn_empty(KN_SHAPE(3), KN_BFLOAT16);
  cr_assert_eq(kn_fill_(h, kn_float(1.0)), KN_OK);
  cr_assert_eq(((uint16_t *)kn_data(h))[2], 0x3f80);
  kn_tensor *bl = kn_empty(KN_SHAPE(2), KN_BOOL);
  cr_assert_eq(kn_fill_(bl, kn_int(3)), KN_OK);
  EXPECT(bl, KN_BOOL, (2), 1, 1);
}

/* Strided copies of every element size (1, 2, 4 and 8 bytes: fixed-size
** moves) give the transposed values. */
Test(copy, strided_copies_of_each_element_size) {
  kn_dtype dts[] = {KN_UINT8, KN_BFLOAT16, KN_INT16, KN_FLOAT32, KN_INT64, KN_FLOAT64};
  for (size_t i = 0; i < sizeof dts / sizeof dts[0]; i++) {
    kn_tensor *a = kn_reshape(kn_arange_dtype(kn_int(0), kn_int(35), kn_int(1), dts[i]), 2,
                              (int64_t[]){5, 7});
    kn_tensor *tc = kn_contiguous(kn_t(a));
    cr_assert(tc && kn_is_contiguous(tc), "%s: %s", kn_dtype_name(dts[i]), kn_last_error());
    for (int64_t r = 0; r < 7; r++)
      for (int64_t c = 0; c < 5; c++) {
        double v;
        kn_tensor *e = kn_select(kn_select(tc, 0, r), 0, c);
        cr_assert_eq(kn_item_double(e, &v), KN_OK, "%s", kn_last_error());
        cr_assert_eq(v, (double)(c * 7 + r), "%s [%lld, %lld]", kn_dtype_name(dts[i]),
                     (long long)r, (long long)c);
      }
  }
}
