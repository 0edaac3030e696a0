/*
** test_shape_view.c: view, reshape, permute, transpose, t, expand,
** unsqueeze, squeeze, flatten: values, geometry (sizes, strides and offsets
** as torch 1.13 reports them), storage sharing, version counters, meta
** inputs, zero-size inputs and error messages.
*/
#include <criterion/criterion.h>
#include <string.h>

#include "kiln/kiln.h"
#include "support/leakcheck.h"
#include "support/shape_util.h"


static void expect_err(const kn_tensor *t, kn_status st, const char *msg) {
  cr_assert_null(t);
  cr_assert_eq(kn_last_status(), st, "status %d (%s)", kn_last_status(), kn_last_error());
  cr_assert_str_eq(kn_last_error(), msg);
}


TestSuite(view, .init = kn_test_leakcheck_begin, .fini = kn_test_leakcheck_end);

static float at(const kn_tensor *t, const int64_t *idx) { return (float)kn_get(t, idx); }

Test(view, infers_minus_one_and_shares_storage) {
  kn_tensor *a = kn_test_seq(KN_SHAPE(2, 6));
  kn_tensor *v = kn_view(a, KN_SHAPE(3, -1));
  cr_assert_not_null(v, "%s", kn_last_error());
  G(v, 2, SZ(3, 4), SZ(4, 1), 0);
  cr_assert(kn_same_storage(a, v));
  cr_assert_eq(at(v, SZ(2, 1)), 9.0f);
  /* a write through the view is visible in the base, and bumps the shared
  ** version counter */
  uint64_t ver = kn_tensor_version(a);
  ((float *)kn_data(v))[5] = 100.0f;
  cr_assert_eq(at(a, SZ(0, 5)), 100.0f);
  cr_assert_eq(kn_tensor_version(v), ver);
  cr_assert_str_eq(kn_grad_fn_name(v) ? kn_grad_fn_name(v) : "", "");
}

Test(view, of_a_non_contiguous_tensor_when_strides_allow) {
  /* x = arange(24).view(2,3,4).permute(1,0,2) (sizes [3,2,4], strides [4,12,1]);
  ** x.view(3,2,2,2) -> strides (4, 12, 2, 1) per torch */
  kn_tensor *a = kn_test_seq(KN_SHAPE(2, 3, 4));
  kn_tensor *p = kn_permute(a, KN_SHAPE(1, 0, 2));
  G(p, 3, SZ(3, 2, 4), SZ(4, 12, 1), 0);
  kn_tensor *v = kn_view(p, KN_SHAPE(3, 2, 2, 2));
  cr_assert_not_null(v, "%s", kn_last_error());
  G(v, 4, SZ(3, 2, 2, 2), SZ(4, 12, 2, 1), 0);
  cr_assert_eq(at(v, SZ(2, 1, 1, 0)), 22.0f);
  kn_tensor *bad = kn_view(p, KN_SHAPE(6, 4));
  expect_err(bad, KN_ESHAPE,
             "view size is not compatible with input tensor's size and stride (at least one "
             "dimension spans across two contiguous subspaces). Use .reshape(...) instead.");
}

Test(view, errors) {
  kn_tensor *a = kn_test_seq(KN_SHAPE(3, 4));
  expect_err(kn_view(a, KN_SHAPE(3, 5)), KN_ESHAPE, "shape '[3, 5]' is invalid for input of size 12");
  expect_err(kn_view(a, KN_SHAPE(-1, -1)), KN_ESHAPE, "only one dimension can be inferred");
  expect_err(kn_view(a, KN_SHAPE(-2, 6)), KN_ESHAPE, "invalid shape dimension -2");
  expect_err(kn_view(a, KN_SHAPE(5, -1)), KN_ESHAPE, "shape '[5, -1]' is invalid for input of size 12");
  expect_err(kn_view(a, KN_SHAPE(0, -1)), KN_ESHAPE, "shape '[0, -1]' is invalid for input of size 12");
  cr_assert_null(kn_view(NULL, KN_SHAPE(1)));
  cr_assert_eq(kn_last_status(), KN_EINVAL);
}

Test(view, zero_size_and_scalars) {
  kn_tensor *z = kn_zeros(KN_SHAPE(0, 3), KN_FLOAT32);
  kn_tensor *v = kn_view(z, KN_SHAPE(3, 0, -1));
  expect_err(v, KN_ESHAPE, "cannot reshape tensor of 0 elements into shape [3, 0, -1] because "
             "the unspecified dimension size -1 can be any value and is ambiguous");
  v = kn_view(z, KN_SHAPE(3, 0));
  G(v, 2, SZ(3, 0), SZ(1, 1), 0); /* torch: stride (1, 1) */
  kn_tensor *s = kn_full(0, NULL, kn_float(7), KN_FLOAT32);
  kn_tensor *s1 = kn_view(s, KN_SHAPE(1, 1));
  G(s1, 2, SZ(1, 1), SZ(1, 1), 0);
  kn_tensor *s0 = kn_view(s1, 0, NULL);
  cr_assert_eq(kn_ndim(s0), 0);
  cr_assert_eq(((float *)kn_data(s0))[0], 7.0f);
}

Test(view, reshape_views_or_copies) {
  kn_tensor *a = kn_test_seq(KN_SHAPE(2, 3));
  kn_tensor *r = kn_reshape(a, KN_SHAPE(-1));
  G(r, 1, SZ(6), SZ(1), 0);
  cr_assert(kn_same_storage(a, r));
  kn_tensor *t = kn_t(a);
  G(t, 2, SZ(3, 2), SZ(1, 3), 0);
  kn_tensor *c = kn_reshape(t, KN_SHAPE(6));
  cr_assert_not_null(c, "%s", kn_last_error());
  cr_assert(!kn_same_storage(a, c));
  G(c, 1, SZ(6), SZ(1), 0);
  const float want[] = {0, 3, 1, 4, 2, 5};
  for (int i = 0; i < 6; i++) cr_assert_eq(((float *)kn_data(c))[i], want[i]);
  expect_err(kn_reshape(t, KN_SHAPE(4)), KN_ESHAPE, "shape '[4]' is invalid for input of size 6");
}

Test(view, permute_transpose_t_geometry_and_errors) {
  kn_tensor *a = kn_test_seq(KN_SHAPE(2, 3, 4));
  G(kn_permute(a, KN_SHAPE(2, 0, 1)), 3, SZ(4, 2, 3), SZ(1, 12, 4), 0);
  G(kn_permute(a, KN_SHAPE(-1, -3, 1)), 3, SZ(4, 2, 3), SZ(1, 12, 4), 0);
  G(kn_transpose(a, 0, -1), 3, SZ(4, 3, 2), SZ(1, 4, 12), 0);
  cr_assert_eq(at(kn_transpose(a, 0, -1), SZ(3, 2, 1)), 23.0f);
  expect_err(kn_permute(a, KN_SHAPE(0, 1)), KN_ESHAPE,
             "permute(sparse_coo): number of dimensions in the tensor input does not match the "
             "length of the desired ordering of dimensions i.e. input.dim() = 3 is not equal to "
             "len(dims) = 2");
  expect_err(kn_permute(a, KN_SHAPE(0, 1, 1)), KN_EINVAL, "permute(): duplicate dims are not allowed.");
  expect_err(kn_transpose(a, 0, 3), KN_ERANGE,
             "Dimension out of range (expected to be in range of [-3, 2], but got 3)");
  expect_err(kn_t(a), KN_ESHAPE, "t() expects a tensor with <= 2 dimensions, but self is 3D");
  kn_tensor *v = kn_test_seq(KN_SHAPE(3));
  G(kn_t(v), 1, SZ(3), SZ(1), 0);
  kn_tensor *s = kn_full(0, NULL, kn_int(1), KN_INT64);
  cr_assert_eq(kn_ndim(kn_t(s)), 0);
  cr_assert_eq(kn_ndim(kn_transpose(s, 0, -1)), 0);
}

Test(view, expand) {
  kn_tensor *a = kn_test_seq(KN_SHAPE(3, 1));
  kn_tensor *e = kn_expand(a, KN_SHAPE(2, -1, 4));
  cr_assert_not_null(e, "%s", kn_last_error());
  G(e, 3, SZ(2, 3, 4), SZ(0, 1, 0), 0);
  cr_assert_eq(at(e, SZ(1, 2, 3)), 2.0f);
  cr_assert(kn_same_storage(a, e));
  kn_tensor *s = kn_full(0, NULL, kn_float(2), KN_FLOAT32);
  G(kn_expand(s, KN_SHAPE(2, 2)), 2, SZ(2, 2), SZ(0, 0), 0);
  G(kn_expand(s, KN_SHAPE(1)), 1, SZ(1), SZ(0), 0);
  G(kn_expand(kn_test_seq(KN_SHAPE(3)), KN_SHAPE(1, 1, 3)), 3, SZ(1, 1, 3), SZ(3, 3, 1), 0);
  kn_tensor *v = kn_test_seq(KN_SHAPE(2));
  expect_err(kn_expand(v, KN_SHAPE(2, 3)), KN_ESHAPE,
             "The expanded size of the tensor (3) must match the existing size (2) at "
             "non-singleton dimension 1.  Target sizes: [2, 3].  Tensor sizes: [2]");
  kn_tensor *m = kn_test_seq(KN_SHAPE(2, 3));
  expect_err(kn_expand(m, KN_SHAPE(3)), KN_ESHAPE,
             "expand(torch.FloatTensor{[2, 3]}, size=[3]): the number of sizes provided (1) must "
             "be greater or equal to the number of dimensions in the tensor (2)");
  expect_err(kn_expand(m, KN_SHAPE(-1, 2, 3)), KN_ESHAPE,
             "The expanded size of the tensor (-1) isn't allowed in a leading, non-existing "
             "dimension 0");
  /* expand of a size-1 dim to 0 */
  G(kn_expand(a, KN_SHAPE(3, 0)), 2, SZ(3, 0), SZ(1, 0), 0);
}

Test(view, unsqueeze_squeeze_flatten) {
  kn_tensor *a = kn_test_seq(KN_SHAPE(2, 3));
  G(kn_unsqueeze(a, 0), 3, SZ(1, 2, 3), SZ(6, 3, 1), 0);
  G(kn_unsqueeze(a, 1), 3, SZ(2, 1, 3), SZ(3, 3, 1), 0);
  G(kn_unsqueeze(a, -1), 3, SZ(2, 3, 1), SZ(3, 1, 1), 0);
  expect_err(kn_unsqueeze(a, 3), KN_ERANGE,
             "Dimension out of range (expected to be in range of [-3, 2], but got 3)");
  kn_tensor *b = kn_view(kn_test_seq(KN_SHAPE(6)), KN_SHAPE(1, 2, 1, 3, 1));
  G(kn_squeeze(b), 2, SZ(2, 3), SZ(3, 1), 0);
  G(kn_squeeze_dim(b, 2), 4, SZ(1, 2, 3, 1), SZ(6, 3, 1, 1), 0);
  G(kn_squeeze_dim(b, 1), 5, SZ(1, 2, 1, 3, 1), SZ(6, 3, 3, 1, 1), 0);
  G(kn_squeeze_dim(b, -1), 4, SZ(1, 2, 1, 3), SZ(6, 3, 3, 1), 0);
  expect_err(kn_squeeze_dim(a, 2), KN_ERANGE,
             "Dimension out of range (expected to be in range of [-2, 1], but got 2)");
  kn_tensor *c = kn_test_seq(KN_SHAPE(2, 3, 4));
  G(kn_flatten(c, 0, -1), 1, SZ(24), SZ(1), 0);
  G(kn_flatten(c, 1, 2), 2, SZ(2, 12), SZ(12, 1), 0);
  G(kn_flatten(c, 1, 1), 3, SZ(2, 3, 4), SZ(12, 4, 1), 0);
  kn_tensor *ft = kn_flatten(kn_transpose(c, 0, 1), 0, 1); /* must copy */
  G(ft, 2, SZ(6, 4), SZ(4, 1), 0);
  cr_assert_eq(at(ft, SZ(1, 0)), 12.0f);
  cr_assert(!kn_same_storage(c, ft));
  expect_err(kn_flatten(c, 2, 1), KN_EINVAL,
             "flatten() has invalid args: start_dim cannot come after end_dim");
  G(kn_flatten(kn_full(0, NULL, kn_int(1), KN_INT32), 0, -1), 1, SZ(1), SZ(1), 0);
}

Test(view, meta_inputs_get_view_geometry) {
  kn_tensor *m = kn_empty_meta(KN_SHAPE(4, 5, 6), KN_FLOAT64);
  kn_tensor *p = kn_permute(m, KN_SHAPE(2, 0, 1));
  cr_assert_eq(kn_tensor_device(p), KN_META);
  G(p, 3, SZ(6, 4, 5), SZ(1, 30, 6), 0);
  G(kn_reshape(p, KN_SHAPE(6, 20)), 2, SZ(6, 20), SZ(1, 6), 0);
  kn_tensor *c = kn_reshape(p, KN_SHAPE(-1)); /* not viewable: a fresh meta tensor */
  cr_assert_eq(kn_tensor_device(c), KN_META);
  cr_assert_eq(kn_tensor_dtype(c), KN_FLOAT64);
  G(c, 1, SZ(120), SZ(1), 0);
  G(kn_expand(kn_unsqueeze(m, 0), KN_SHAPE(3, 4, 5, 6)), 4, SZ(3, 4, 5, 6), SZ(0, 30, 6, 1), 0);
  expect_err(kn_view(m, KN_SHAPE(7, -1)), KN_ESHAPE, "shape '[7, -1]' is invalid for input of size 120");
}

Test(view, dtypes_are_kept) {
  kn_tensor *a = kn_full(KN_SHAPE(2, 2), kn_int(3), KN_INT16);
  kn_tensor *v = kn_t(kn_view(a, KN_SHAPE(4, 1)));
  cr_assert_eq(kn_tensor_dtype(v), KN_INT16);
  cr_assert_eq(kn_get(v, SZ(0, 3)), 3.0);
}
