/*
** test_nn_grad.c: finite-difference gradient checks (float64) of the nn
** ops' derivative rules: mm, bmm, addmm, dot, mv, matmul, linear, conv2d;
** second order for mm, matmul and linear; grad_fn names as torch 1.13.
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
TestSuite(nn_grad, .init = setup, .fini = teardown);

/* A float64 leaf that requires grad, with distinct values. */
static kn_tensor *leaf(int ndim, const int64_t *sizes, double start) {
  kn_tensor *t = nt_range(KN_FLOAT64, ndim, sizes, start, 0.173);
  double *p = kn_data(t);
  for (int64_t i = 0; i < kn_numel(t); i++) p[i] = sin(start + 1.37 * (double)i) + 0.01 * (double)i;
  cr_assert_eq(kn_set_requires_grad(t, true), KN_OK);
  return t;
}

#define CHECK1(fn, ud, ...)                                                           \
  do {                                                                                \
    kn_tensor *in_[] = {__VA_ARGS__};                                                 \
    char why_[1024] = "";                                                             \
    cr_assert(kn_gradcheck(fn, in_, (int)(sizeof in_ / sizeof in_[0]), ud, why_,      \
                           sizeof why_), "%s: %s", #fn, why_);                        \
  } while (0)
#define CHECK2(fn, ud, ...)                                                           \
  do {                                                                                \
    kn_tensor *in_[] = {__VA_ARGS__};                                                 \
    char why_[1024] = "";                                                             \
    cr_assert(kn_gradgradcheck(fn, in_, (int)(sizeof in_ / sizeof in_[0]), ud, why_,  \
                               sizeof why_), "%s: %s", #fn, why_);                    \
  } while (0)

static kn_tensor *f_mm(kn_tensor *const *x, int n, void *ud) {
  (void)n, (void)ud;
  return kn_mm(x[0], x[1]);
}
static kn_tensor *f_mm_t(kn_tensor *const *x, int n, void *ud) { /* transposed operands */
  (void)n, (void)ud;
  return kn_mm(kn_t(x[0]), kn_t(x[1]));
}
static kn_tensor *f_bmm(kn_tensor *const *x, int n, void *ud) {
  (void)n, (void)ud;
  return kn_bmm(x[0], kn_transpose(x[1], 1, 2));
}
static kn_tensor *f_addmm(kn_tensor *const *x, int n, void *ud) {
  (void)n, (void)ud;
  return kn_addmm(x[0], x[1], x[2], kn_int(1), kn_int(1));
}
static kn_tensor *f_dot(kn_tensor *const *x, int n, void *ud) {
  (void)n, (void)ud;
  return kn_dot(x[0], x[1]);
}
static kn_tensor *f_mv(kn_tensor *const *x, int n, void *ud) {
  (void)n, (void)ud;
  return kn_mv(x[0], x[1]);
}
static kn_tensor *f_matmul(kn_tensor *const *x, int n, void *ud) {
  (void)n, (void)ud;
  return kn_matmul(x[0], x[1]);
}
static kn_tensor *f_linear(kn_tensor *const *x, int n, void *ud) {
  (void)ud;
  return kn_linear(x[0], x[1], n > 2 ? x[2] : NULL);
}

Test(nn_grad, mm_family_first_order) {
  CHECK1(f_mm, NULL, leaf(KN_SHAPE(3, 4), 0), leaf(KN_SHAPE(4, 2), 1));
  CHECK1(f_mm_t, NULL, leaf(KN_SHAPE(4, 3), 0), leaf(KN_SHAPE(2, 4), 1));
  CHECK1(f_bmm, NULL, leaf(KN_SHAPE(2, 3, 4), 0), leaf(KN_SHAPE(2, 2, 4), 1));
  CHECK1(f_addmm, NULL, leaf(KN_SHAPE(3, 2), 2), leaf(KN_SHAPE(3, 4), 0), leaf(KN_SHAPE(4, 2), 1));
  CHECK1(f_addmm, NULL, leaf(KN_SHAPE(2), 2), leaf(KN_SHAPE(3, 4), 0), leaf(KN_SHAPE(4, 2), 1));
  CHECK1(f_addmm, NULL, leaf(KN_SHAPE(3, 1), 2), leaf(KN_SHAPE(3, 4), 0), leaf(KN_SHAPE(4, 2), 1));
  CHECK1(f_dot, NULL, leaf(KN_SHAPE(5), 0), leaf(KN_SHAPE(5), 1));
  CHECK1(f_mv, NULL, leaf(KN_SHAPE(3, 4), 0), leaf(KN_SHAPE(4), 1));
}

Test(nn_grad, matmul_every_dispatch_path) {
  CHECK1(f_matmul, NULL, leaf(KN_SHAPE(4), 0), leaf(KN_SHAPE(4), 1));
  CHECK1(f_matmul, NULL, leaf(KN_SHAPE(3, 4), 0), leaf(KN_SHAPE(4), 1));
  CHECK1(f_matmul, NULL, leaf(KN_SHAPE(4), 0), leaf(KN_SHAPE(4, 2), 1));
  CHECK1(f_matmul, NULL, leaf(KN_SHAPE(2, 3, 4), 0), leaf(KN_SHAPE(4, 2), 1));
  CHECK1(f_matmul, NULL, leaf(KN_SHAPE(2, 3, 4), 0), leaf(KN_SHAPE(4), 1));
  CHECK1(f_matmul, NULL, leaf(KN_SHAPE(1, 2, 3), 0), leaf(KN_SHAPE(2, 1, 3, 2), 1));
  CHECK1(f_matmul, NULL, leaf(KN_SHAPE(3), 0), leaf(KN_SHAPE(2, 3, 2), 1));
}

Test(nn_grad, linear_with_and_without_bias) {
  CHECK1(f_linear, NULL, leaf(KN_SHAPE(3, 4), 0), leaf(KN_SHAPE(2, 4), 1), leaf(KN_SHAPE(2), 2));
  CHECK1(f_linear, NULL, leaf(KN_SHAPE(2, 3, 4), 0), leaf(KN_SHAPE(2, 4), 1), leaf(KN_SHAPE(2), 2));
  CHECK1(f_linear, NULL, leaf(KN_SHAPE(4), 0), leaf(KN_SHAPE(2, 4), 1), leaf(KN_SHAPE(2), 2));
  CHECK1(f_linear, NULL, leaf(KN_SHAPE(3, 4), 0), leaf(KN_SHAPE(2, 4), 1));
}

Test(nn_grad, second_order_mm_matmul_linear) {
  CHECK2(f_mm, NULL, leaf(KN_SHAPE(3, 4), 0), leaf(KN_SHAPE(4, 2), 1));
  CHECK2(f_matmul, NULL, leaf(KN_SHAPE(2, 3, 4), 0), leaf(KN_SHAPE(2, 4, 2), 1));
  CHECK2(f_linear, NULL, leaf(KN_SHAPE(3, 4), 0), leaf(KN_SHAPE(2, 4), 1), leaf(KN_SHAPE(2), 2));
  CHECK2(f_dot, NULL, leaf(KN_SHAPE(3), 0), leaf(KN_SHAPE(3), 1));
  CHECK2(f_mv, NULL, leaf(KN_SHAPE(3, 4), 0), leaf(KN_SHAPE(4), 1));
}

Test(nn_grad, grad_fn_names_match_torch) {
  kn_tensor *a = leaf(KN_SHAPE(3, 4), 0), *b = leaf(KN_SHAPE(4, 2), 1);
  cr_assert_str_eq(kn_grad_fn_name(kn_mm(a, b)), "MmBackward0");
  cr_assert_str_eq(kn_grad_fn_name(kn_matmul(a, b)), "MmBackward0");
  cr_assert_str_eq(kn_grad_fn_name(kn_matmul(a, kn_ones(KN_SHAPE(4), KN_FLOAT64))), "MvBackward0");
  cr_assert_str_eq(kn_grad_fn_name(kn_linear(a, kn_t(b), leaf(KN_SHAPE(2), 3))), "AddmmBackward0");
  cr_assert_str_eq(kn_grad_fn_name(kn_bmm(kn_unsqueeze(a, 0), kn_unsqueeze(b, 0))), "BmmBackward0");
  kn_tensor *x = leaf(KN_SHAPE(1, 1, 3, 3), 0), *w = leaf(KN_SHAPE(1, 1, 2, 2), 1);
  cr_assert_str_eq(kn_grad_fn_name(kn_conv2d(x, w, NULL, NULL, NULL, NULL, 1)), "ConvolutionBackward0");
}

/* conv2d with parameters passed through ud. */
typedef struct convp {
  int64_t s[2], p[2], d[2], g;
} convp;
static kn_tensor *f_conv(kn_tensor *const *x, int n, void *ud) {
  const convp *q = ud;
  return kn_conv2d(x[0], x[1], n > 2 ? x[2] : NULL, q->s, q->p, q->d, q->g);
}

Test(nn_grad, conv2d_first_order) {
  convp q1 = {{1, 1}, {0, 0}, {1, 1}, 1};
  CHECK1(f_conv, &q1, leaf(KN_SHAPE(1, 2, 4, 4), 0), leaf(KN_SHAPE(2, 2, 2, 2), 1), leaf(KN_SHAPE(2), 2));
  convp q2 = {{2, 1}, {1, 1}, {1, 2}, 2};
  CHECK1(f_conv, &q2, leaf(KN_SHAPE(2, 2, 5, 4), 0), leaf(KN_SHAPE(2, 1, 3, 2), 1), leaf(KN_SHAPE(2), 2));
  convp q3 = {{1, 1}, {1, 0}, {1, 1}, 1};
  CHECK1(f_conv, &q3, leaf(KN_SHAPE(1, 3, 3), 0), leaf(KN_SHAPE(2, 1, 2, 2), 1));
}

Test(nn_grad, backward_accumulates_into_leaves) {
  /* y = x @ w^T + b, backward with ones for a 2x3 input: db = [2, 2], dw = column sums of x */
  kn_tensor *x = NT(KN_FLOAT64, KN_SHAPE(2, 3), 1, 2, 3, 4, 5, 6);
  kn_tensor *w = NT(KN_FLOAT64, KN_SHAPE(2, 3), 1, 1, 1, 2, 2, 2);
  kn_tensor *b = NT(KN_FLOAT64, KN_SHAPE(2), 0, 0);
  kn_set_requires_grad(w, true);
  kn_set_requires_grad(b, true);
  kn_tensor *y = kn_linear(x, w, b);
  cr_assert_eq(kn_backward(y, kn_ones(KN_SHAPE(2, 2), KN_FLOAT64)), KN_OK, "%s", kn_last_error());
  EXPECT(kn_grad(b), KN_SHAPE(2), 0, 2, 2);
  EXPECT(kn_grad(w), KN_SHAPE(2, 3), 0, 5, 7, 9, 5, 7, 9);
  kn_set_grad(w, NULL);
  kn_set_grad(b, NULL);
}
