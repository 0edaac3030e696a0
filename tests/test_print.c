/*
** test_print.c: tensor printing. Expected strings are what torch 1.13 prints
** for the same tensors (with kiln's dtype names: "float64", not
** "torch.float64").
*/
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>

#include "kiln/kiln.h"

static void check(kn_tensor *t, const char *expected) {
  char *s = kn_tensor_to_string(t);
  cr_assert_str_eq(s, expected);
  free(s);
  kn_release(t);
}

Test(print, layouts_match_torch) {
  check(kn_from_floats((float[]){1, 2, 3, 4}, KN_SHAPE(2, 2)),
        "tensor([[1., 2.],\n        [3., 4.]])");
  check(kn_from_floats((float[]){1.5f, -2.25f, 3}, KN_SHAPE(3)), "tensor([ 1.5000, -2.2500,  3.0000])");
  check(kn_from_floats((float[]){1e-5f, 1, 100}, KN_SHAPE(3)),
        "tensor([1.0000e-05, 1.0000e+00, 1.0000e+02])");
  check(kn_from_ints((int64_t[]){1, 2, 3}, KN_SHAPE(3)), "tensor([1, 2, 3])");
  check(kn_from_array((bool[]){true, false}, KN_SHAPE(2), KN_BOOL), "tensor([ True, False])");
  check(kn_scalar_tensor(kn_float(3.5), KN_FLOAT32), "tensor(3.5000)");
  check(kn_zeros(KN_SHAPE(2, 0), KN_FLOAT32), "tensor([], size=(2, 0))");
  check(kn_from_floats((float[]){NAN, INFINITY, 1}, KN_SHAPE(3)), "tensor([nan, inf, 1.])");
  check(kn_from_array((int32_t[]){1, 2}, KN_SHAPE(2), KN_INT32), "tensor([1, 2], dtype=int32)");
}

Test(print, requires_grad_and_dtype_suffixes) {
  kn_tensor *t = kn_from_doubles((double[]){1, 2}, KN_SHAPE(2));
  kn_set_requires_grad(t, true);
  check(t, "tensor([1., 2.], dtype=float64, requires_grad=True)");
}

Test(print, three_dims_and_summaries) {
  kn_tensor *a = kn_arange_dtype(kn_int(0), kn_int(24), kn_int(1), KN_FLOAT32);
  float *p = kn_data(a);
  kn_tensor *t = kn_from_floats(p, KN_SHAPE(2, 3, 4));
  kn_release(a);
  check(t, "tensor([[[ 0.,  1.,  2.,  3.],\n"
           "         [ 4.,  5.,  6.,  7.],\n"
           "         [ 8.,  9., 10., 11.]],\n"
           "\n"
           "        [[12., 13., 14., 15.],\n"
           "         [16., 17., 18., 19.],\n"
           "         [20., 21., 22., 23.]]])");
  check(kn_arange_dtype(kn_int(0), kn_int(2000), kn_int(1), KN_FLOAT32),
        "tensor([0.0000e+00, 1.0000e+00, 2.0000e+00,  ..., 1.9970e+03, 1.9980e+03,\n"
        "        1.9990e+03])");
}
