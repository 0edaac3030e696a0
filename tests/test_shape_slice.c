/*
** test_shape_slice.c: slice, narrow, select, diagonal, as_strided, unbind,
** split, split_with_sizes, chunk, cat, stack and the *_scatter ops: values,
** geometry as torch 1.13 reports it, storage sharing, errors, meta inputs.
*/
#include <criterion/criterion.h>
#include <string.h>

#include "kiln/kiln.h"
#include "support/leakcheck.h"
#include "support/shape_util.h"


static void expect_err_st(kn_status got, kn_status st, const char *msg) {
  cr_assert_eq(got, st, "status %d (%s)", got, kn_last_error());
  cr_assert_str_eq(kn_last_error(), msg);
}
static void expect_err(const kn_tensor *t, kn_status st, const char *msg) {
  cr_assert_null(t);
  expect_err_st(kn_last_status(), st, msg);
}

TestSuite(slice, .init = kn_test_leakcheck_begin, .fini = kn_test_leakcheck_end);
TestSuite(join, .init = kn_test_leakcheck_begin, .fini = kn_test_leakcheck_end);

static void expect_values(const kn_tensor *t, const float *want, int64_t n) {
  cr_assert_eq(kn_numel(t), n);
  int nd = kn_ndim(t);
  int64_t idx[8] = {0};
  for (int64_t i = 0; i < n; i++) {
    cr_assert_float_eq(kn_get(t, idx), want[i], 1e-6, "element %lld: %g != %g", (long long)i,
                       kn_get(t, idx), want[i]);
    for (int d = nd - 1; d >= 0 && ++idx[d] == kn_sizes(t)[d]; d--) idx[d] = 0;
  }
}
#define V(t, ...) expect_values(t, (const float[]){__VA_ARGS__}, \
                                (int64_t)(sizeof((float[]){__VA_ARGS__}) / sizeof(float)))

Test(slice, python_style_bounds_and_steps) {
  kn_tensor *a = kn_test_seq(KN_SHAPE(2, 3, 4));
  G(kn_slice(a, 1, 1, KN_SLICE_END, 1), 3, SZ(2, 2, 4), SZ(12, 4, 1), 4);
  G(kn_slice(a, -1, 0, KN_SLICE_END, 2), 3, SZ(2, 3, 2), SZ(12, 4, 2), 0);
  G(kn_slice(a, 1, -2, KN_SLICE_END, 1), 3, SZ(2, 2, 4), SZ(12, 4, 1), 4);
  G(kn_slice(a, 1, -100, 100, 1), 3, SZ(2, 3, 4), SZ(12, 4, 1), 0);
  G(kn_slice(a, 1, 5, 7, 1), 3, SZ(2, 0, 4), SZ(12, 4, 1), 12);
  G(kn_slice(a, 1, 2, 1, 1), 3, SZ(2, 0, 4), SZ(12, 4, 1), 8);
  kn_tensor *s = kn_slice(kn_slice(a, 1, 1, -1, 1), 2, 1, KN_SLICE_END, 3);
  G(s, 3, SZ(2, 1, 1), SZ(12, 4, 3), 5);
  V(s, 5, 17);
  cr_assert(kn_same_storage(a, s));
  expect_err(kn_slice(a, 1, 0, 2, 0), KN_EINVAL, "slice step must be positive");
  expect_err(kn_slice(kn_full(0, NULL, kn_float(1), KN_FLOAT32), 0, 0, 1, 1), KN_EINVAL,
             "slice() cannot be applied to a 0-dim tensor.");
  expect_err(kn_slice(a, 3, 0, 1, 1), KN_ERANGE,
             "Dimension out of range (expected to be in range of [-3, 2], but got 3)");
}

Test(slice, writes_through_views_reach_the_base) {
  kn_tensor *a = kn_zeros(KN_SHAPE(3, 4), KN_FLOAT64);
  kn_tensor *col = kn_select(kn_slice(a, 0, 1, KN_SLICE_END, 1), 1, -1);
  G(col, 1, SZ(2), SZ(4), 7);
  double *p = kn_data(col);
  p[0] = 5;
  p[4] = 6;
  cr_assert_eq(kn_get(a, SZ(1, 3)), 5.0);
  cr_assert_eq(kn_get(a, SZ(2, 3)), 6.0);
  cr_assert(kn_same_storage(a, col));
  cr_assert_eq(kn_tensor_version(a), kn_tensor_version(col));
}

Test(slice, narrow_select_diagonal) {
  kn_tensor *a = kn_test_seq(KN_SHAPE(2, 3, 4));
  G(kn_narrow(a, 2, -3, 2), 3, SZ(2, 3, 2), SZ(12, 4, 1), 1);
  G(kn_narrow(a, 1, 3, 0), 3, SZ(2, 0, 4), SZ(12, 4, 1), 12);
  expect_err(kn_narrow(a, 1, 2, 2), KN_ERANGE, "start (2) + length (2) exceeds dimension size (3).");
  expect_err(kn_narrow(a, 1, 0, -1), KN_ERANGE, "start (0) + length (-1) exceeds dimension size (3).");
  expect_err(kn_narrow(a, 1, 4, 0), KN_ERANGE,
             "Dimension out of range (expected to be in range of [-3, 2], but got 4)");
  expect_err(kn_narrow(kn_full(0, NULL, kn_float(1), KN_FLOAT32), 0, 0, 1), KN_EINVAL,
             "narrow() cannot be applied to a 0-dim tensor.");
  G(kn_select(a, 1, -1), 2, SZ(2, 4), SZ(12, 1), 8);
  G(kn_select(a, 0, 1), 2, SZ(3, 4), SZ(4, 1), 12);
  G(kn_select(a, 2, 3), 2, SZ(2, 3), SZ(12, 4), 3);
  V(kn_select(a, 2, 3), 3, 7, 11, 15, 19, 23);
  kn_tensor *v = kn_test_seq(KN_SHAPE(3));
  expect_err(kn_select(v, 0, 5), KN_ERANGE,
             "select(): index 5 out of range for tensor of size [3] at dimension 0");
  expect_err(kn_select(v, 0, -4), KN_ERANGE,
             "select(): index -4 out of range for tensor of size [3] at dimension 0");
  expect_err(kn_select(kn_full(0, NULL, kn_float(1), KN_FLOAT32), 0, 0), KN_EINVAL,
             "select() cannot be applied to a 0-dim tensor.");
  G(kn_diagonal(a, 0, 0, 1), 2, SZ(4, 2), SZ(1, 16), 0);
  G(kn_diagonal(a, 1, 1, 2), 2, SZ(2, 3), SZ(12, 5), 1);
  G(kn_diagonal(a, -1, 2, 1), 2, SZ(2, 3), SZ(12, 5), 1);
  G(kn_diagonal(a, 5, 1, 2), 2, SZ(2, 0), SZ(12, 5), 0);
  G(kn_diagonal(a, -2, -1, 0), 2, SZ(3, 2), SZ(4, 13), 2);
  V(kn_diagonal(a, 1, 1, 2), 1, 6, 11, 13, 18, 23);
  expect_err(kn_diagonal(a, 0, 0, 0), KN_EINVAL, "diagonal dimensions cannot be identical 0, 0");
}

Test(slice, as_strided) {
  kn_tensor *a = kn_test_seq(KN_SHAPE(12));
  kn_tensor *w = kn_as_strided(a, KN_SHAPE(3, 3), SZ(1, 1), 2);
  G(w, 2, SZ(3, 3), SZ(1, 1), 2);
  V(w, 2, 3, 4, 3, 4, 5, 4, 5, 6);
  cr_assert(kn_same_storage(a, w));
  kn_tensor *b = kn_as_strided(kn_slice(a, 0, 3, KN_SLICE_END, 1), KN_SHAPE(2), SZ(2), -1);
  G(b, 1, SZ(2), SZ(2), 3); /* keeps the input's storage offset */
  kn_tensor *f = kn_full(KN_SHAPE(2, 3), kn_float(0), KN_FLOAT32);
  expect_err(kn_as_strided(f, KN_SHAPE(2), SZ(-1), 0), KN_EINVAL,
             "as_strided: Negative strides are not supported at the moment, got strides: [-1]");
  expect_err(kn_as_strided(f, KN_SHAPE(7), SZ(1), 0), KN_ERANGE,
             "setStorage: sizes [7], strides [1], storage offset 0, and itemsize 4 requiring a "
             "storage size of 28 are out of bounds for storage of size 24");
  G(kn_as_strided(f, KN_SHAPE(0, 9), SZ(100, 100), 5), 2, SZ(0, 9), SZ(100, 100), 5);
}

Test(slice, unbind_split_chunk) {
  kn_tensor *a = kn_test_seq(KN_SHAPE(2, 3, 4));
  kn_tensor *o[8];
  cr_assert_eq(kn_unbind(a, 1, o, 8), 3);
  for (int i = 0; i < 3; i++) G(o[i], 2, SZ(2, 4), SZ(12, 1), 4 * i);
  V(o[2], 8, 9, 10, 11, 20, 21, 22, 23);
  cr_assert(kn_same_storage(a, o[1]));
  cr_assert_eq(kn_split(a, 3, 2, o, 8), 2);
  G(o[0], 3, SZ(2, 3, 3), SZ(12, 4, 1), 0);
  G(o[1], 3, SZ(2, 3, 1), SZ(12, 4, 1), 3);
  cr_assert_eq(kn_split_sizes(a, KN_SHAPE(1, 2), 1, o, 8), 2);
  G(o[0], 3, SZ(2, 1, 4), SZ(12, 4, 1), 0);
  G(o[1], 3, SZ(2, 2, 4), SZ(12, 4, 1), 4);
  cr_assert_eq(kn_split(a, 5, 0, o, 8), 1);
  G(o[0], 3, SZ(2, 3, 4), SZ(12, 4, 1), 0);
  cr_assert_eq(kn_chunk(a, 3, -1, o, 8), 2);
  G(o[1], 3, SZ(2, 3, 2), SZ(12, 4, 1), 2);
  cr_assert_eq(kn_chunk(kn_test_seq(KN_SHAPE(5)), 4, 0, o, 8), 3);
  G(o[2], 1, SZ(1), SZ(1), 4);
  kn_tensor *z = kn_zeros(KN_SHAPE(0, 2), KN_FLOAT32);
  cr_assert_eq(kn_chunk(z, 3, 0, o, 8), 3);
  for (int i = 0; i < 3; i++) G(o[i], 2, SZ(0, 2), SZ(2, 1), 0);
  cr_assert_eq(kn_split(z, 0, 0, o, 8), 1);
  cr_assert_eq(kn_split(a, 1, 1, o, 2), -1); /* 3 outputs, room for 2 */
  cr_assert_eq(kn_last_status(), KN_ERANGE);
  cr_assert_eq(kn_split(a, 0, 1, o, 8), -1);
  cr_assert_str_eq(kn_last_error(),
                   "split_size can only be 0 if dimension size is 0, but got dimension size of 3");
  cr_assert_eq(kn_split(a, -1, 1, o, 8), -1);
  cr_assert_str_eq(kn_last_error(), "split expects split_size be non-negative, but got split_size=-1");
  cr_assert_eq(kn_split_sizes(a, KN_SHAPE(1, 1), 1, o, 8), -1);
  cr_assert_str_eq(kn_last_error(), "split_with_sizes expects split_sizes to sum exactly to 3 "
                                    "(input tensor's size at dimension 1), but got split_sizes=[1, 1]");
  cr_assert_eq(kn_split_sizes(a, KN_SHAPE(-1, 4), 1, o, 8), -1);
  cr_assert_str_eq(kn_last_error(), "split_with_sizes expects split_sizes have only non-negative "
                                    "entries, but got split_sizes=[-1, 4]");
  cr_assert_eq(kn_chunk(a, 0, 0, o, 8), -1);
  cr_assert_str_eq(kn_last_error(), "chunk expects `chunks` to be greater than 0, got: 0");
  kn_tensor *s = kn_full(0, NULL, kn_float(1), KN_FLOAT32);
  cr_assert_eq(kn_unbind(s, 0, o, 8), -1);
  cr_assert_str_eq(kn_last_error(), "Dimension specified as 0 but tensor has no dimensions");
  cr_assert_eq(kn_split(s, 1, 0, o, 8), -1);
  cr_assert_str_eq(kn_last_error(), "split expects at least a 1-dimensional tensor");
  cr_assert_eq(kn_chunk(s, 1, 0, o, 8), -1);
  cr_assert_str_eq(kn_last_error(), "chunk expects at least a 1-dimensional tensor");
}

Test(slice, meta_inputs) {
  kn_tensor *m = kn_empty_meta(KN_SHAPE(5, 6), KN_FLOAT32);
  kn_tensor *s = kn_slice(m, 1, 1, KN_SLICE_END, 2);
  cr_assert_eq(kn_tensor_device(s), KN_META);
  G(s, 2, SZ(5, 3), SZ(6, 2), 1);
  G(kn_diagonal(m, 1, 0, 1), 1, SZ(5), SZ(7), 1);
  kn_tensor *o[8];
  cr_assert_eq(kn_split(m, 2, 1, o, 8), 3);
  G(o[2], 2, SZ(5, 2), SZ(6, 1), 4);
  kn_tensor *parts[] = {m, m};
  kn_tensor *c = kn_cat(parts, 2, 1);
  cr_assert_eq(kn_tensor_device(c), KN_META);
  G(c, 2, SZ(5, 12), SZ(12, 1), 0);
  G(kn_stack(parts, 2, 1), 3, SZ(5, 2, 6), SZ(12, 6, 1), 0);
  G(kn_slice_scatter(m, s, 1, 1, KN_SLICE_END, 2), 2, SZ(5, 6), SZ(6, 1), 0);
}

Test(join, cat_values_dtypes_and_legacy_empty) {
  kn_tensor *a = kn_test_seq(KN_SHAPE(2, 3));
  kn_tensor *b = kn_full(KN_SHAPE(1, 3), kn_int(7), KN_INT64);
  kn_tensor *e = kn_zeros(KN_SHAPE(0), KN_FLOAT64);
  kn_tensor *l[] = {a, e, b};
  kn_tensor *c = kn_cat(l, 3, 0);
  cr_assert_not_null(c, "%s", kn_last_error());
  cr_assert_eq(kn_tensor_dtype(c), KN_FLOAT64); /* promoted over all, even the skipped one */
  G(c, 2, SZ(3, 3), SZ(3, 1), 0);
  V(c, 0, 1, 2, 3, 4, 5, 7, 7, 7);
  kn_tensor *l2[] = {kn_t(a), kn_t(a)};
  kn_tensor *c2 = kn_cat(l2, 2, -1);
  G(c2, 2, SZ(3, 4), SZ(4, 1), 0);
  V(c2, 0, 3, 0, 3, 1, 4, 1, 4, 2, 5, 2, 5);
  kn_tensor *ee[] = {e, kn_zeros(KN_SHAPE(0), KN_INT32)};
  G(kn_cat(ee, 2, 0), 1, SZ(0), SZ(1), 0);
  kn_tensor *bad[] = {a, kn_test_seq(KN_SHAPE(3, 2))};
  expect_err(kn_cat(bad, 2, 1), KN_ESHAPE,
             "Sizes of tensors must match except in dimension 1. Expected size 2 but got size 3 "
             "for tensor number 1 in the list.");
  kn_tensor *bad2[] = {a, kn_test_seq(KN_SHAPE(2))};
  expect_err(kn_cat(bad2, 2, 0), KN_ESHAPE, "Tensors must have same number of dimensions: got 2 and 1");
  expect_err(kn_cat(NULL, 0, 0), KN_EINVAL, "torch.cat(): expected a non-empty list of Tensors");
  kn_tensor *zd[] = {kn_full(0, NULL, kn_float(1), KN_FLOAT32)};
  expect_err(kn_cat(zd, 1, 0), KN_ESHAPE, "zero-dimensional tensor (at position 0) cannot be concatenated");
  expect_err(kn_cat(l2, 2, 2), KN_ERANGE,
             "Dimension out of range (expected to be in range of [-2, 1], but got 2)");
  kn_tensor *zs[] = {kn_zeros(KN_SHAPE(2, 0), KN_FLOAT32), kn_zeros(KN_SHAPE(2, 0), KN_FLOAT32)};
  G(kn_cat(zs, 2, 0), 2, SZ(4, 0), SZ(1, 1), 0);
}

Test(join, stack) {
  kn_tensor *a = kn_test_seq(KN_SHAPE(3));
  kn_tensor *b = kn_full(KN_SHAPE(3), kn_int(9), KN_INT32);
  kn_tensor *l[] = {a, b};
  kn_tensor *s = kn_stack(l, 2, -1);
  cr_assert_eq(kn_tensor_dtype(s), KN_FLOAT32);
  G(s, 2, SZ(3, 2), SZ(2, 1), 0);
  V(s, 0, 9, 1, 9, 2, 9);
  G(kn_stack(l, 2, 0), 2, SZ(2, 3), SZ(3, 1), 0);
  kn_tensor *bad[] = {kn_test_seq(KN_SHAPE(2, 3)), kn_test_seq(KN_SHAPE(3, 2))};
  expect_err(kn_stack(bad, 2, 0), KN_ESHAPE,
             "stack expects each tensor to be equal size, but got [2, 3] at entry 0 and [3, 2] at "
             "entry 1");
  expect_err(kn_stack(NULL, 0, 0), KN_EINVAL, "stack expects a non-empty TensorList");
  expect_err(kn_stack(l, 2, 2), KN_ERANGE,
             "Dimension out of range (expected to be in range of [-2, 1], but got 2)");
}

Test(join, scatter_into_views) {
  kn_tensor *x = kn_zeros(KN_SHAPE(3, 4), KN_FLOAT32);
  kn_tensor *r = kn_slice_scatter(x, kn_ones(KN_SHAPE(3, 2), KN_FLOAT32), 1, 1, 4, 2);
  V(r, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1);
  cr_assert(!kn_same_storage(x, r));
  cr_assert_eq(kn_get(x, SZ(0, 1)), 0.0); /* self untouched */
  expect_err(kn_slice_scatter(x, kn_ones(KN_SHAPE(3, 3), KN_FLOAT32), 1, 1, 4, 2), KN_ESHAPE,
             "expected src to have a size equal to the slice of self. src size = [3, 3], slice "
             "size = [3, 2]");
  V(kn_select_scatter(x, kn_test_seq(KN_SHAPE(3)), 1, -1), 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 2);
  V(kn_diagonal_scatter(x, kn_test_seq(KN_SHAPE(3)), 1, 0, 1), 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 2);
}

Test(slice, as_strided_and_views_of_meta_and_dtypes) {
  kn_tensor *m = kn_empty_meta(KN_SHAPE(4, 5), KN_FLOAT16);
  G(kn_as_strided(m, KN_SHAPE(2, 2), SZ(5, 1), 3), 2, SZ(2, 2), SZ(5, 1), 3);
  cr_assert_null(kn_as_strided(m, KN_SHAPE(30), SZ(1), 0));
  cr_assert_eq(kn_last_status(), KN_ERANGE);
  kn_tensor *o[8];
  cr_assert_eq(kn_unbind(m, -1, o, 8), 5);
  G(o[4], 1, SZ(4), SZ(5), 4);
  cr_assert_eq(kn_tensor_device(o[4]), KN_META);
  /* views keep the dtype and read through to the base */
  kn_tensor *b = kn_full(KN_SHAPE(2, 3), kn_bool(true), KN_BOOL);
  kn_tensor *s = kn_select(kn_t(b), 0, 2);
  cr_assert_eq(kn_tensor_dtype(s), KN_BOOL);
  G(s, 1, SZ(2), SZ(3), 2);
  cr_assert_eq(kn_get(s, SZ(1)), 1.0);
}
