/*
** test_reduce_fold.c: any/all, logsumexp and linalg_vector_norm eagerly:
** literal results (NaN counts as true, dtypes, empty reductions), torch
** 1.13's error messages, finite-difference gradients of logsumexp and of
** every norm order (and second order through the backward, written with
** public ops), the subgradients torch picks at zero norms and ties, and the
** grad_fn names. Outputs against torch itself: test_reduce_ref.c.
*/
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "kiln/kiln.h"
#include "support/gradcheck.h"

static int64_t live0;
static void init(void) { live0 = kn_live_tensors(); }
static void fini(void) {
  cr_assert_eq(kn_live_tensors(), live0, "leaked %lld tensors",
               (long long)(kn_live_tensors() - live0));
}
TestSuite(reduce_fold, .init = init, .fini = fini);

static kn_tensor *leaf(int nd, const int64_t *sz, const double *v) {
  kn_tensor *t = kn_from_doubles(v, nd, sz);
  cr_assert_eq(kn_set_requires_grad(t, true), KN_OK);
  return t;
}

/* t's values (any dtype) equal want (NaN matches NaN). */
static void expect_values(kn_tensor *t, const double *want, int64_t n, const char *what) {
  cr_assert_not_null(t, "%s: %s", what, kn_last_error());
  cr_assert_eq(kn_numel(t), n, "%s: %lld elements", what, (long long)kn_numel(t));
  kn_tensor *d = kn_contiguous(kn_to(kn_flatten(t, 0, -1), KN_FLOAT64));
  const double *v = kn_data(d);
  for (int64_t i = 0; i < n; i++)
    cr_expect(isnan(want[i]) ? isnan(v[i])
                             : v[i] == want[i] || fabs(v[i] - want[i]) <= 1e-12 * (1 + fabs(want[i])),
              "%s[%lld]: got %.17g, expected %.17g", what, (long long)i, v[i], want[i]);
}

/* ---- values ------------------------------------------------------------------------ */
Test(reduce_fold, any_all_count_nan_as_true_and_keep_uint8) {
  kn_scope_begin();
  kn_tensor *x = kn_from_doubles((double[]){0, NAN, 0, 0, 0, 0}, KN_SHAPE(2, 3));
  kn_tensor *a = kn_any_dim(x, 1, false);
  cr_assert_eq(kn_tensor_dtype(a), KN_BOOL);
  expect_values(a, (double[]){1, 0}, 2, "any(1)");
  expect_values(kn_all(kn_from_doubles((double[]){NAN, 1, -2}, KN_SHAPE(3))), (double[]){1}, 1,
                "all");
  kn_tensor *u = kn_to(kn_from_doubles((double[]){0, 4, 2, 9}, KN_SHAPE(2, 2)), KN_UINT8);
  kn_tensor *ua = kn_all_dim(u, 0, true);
  cr_assert_eq(kn_tensor_dtype(ua), KN_UINT8, "uint8 stays uint8, as torch");
  cr_assert_eq(kn_ndim(ua), 2);
  expect_values(ua, (double[]){0, 1}, 2, "all(uint8)");
  kn_tensor *e = kn_zeros(KN_SHAPE(0, 3), KN_INT32);
  expect_values(kn_all_dim(e, 0, false), (double[]){1, 1, 1}, 3, "all of nothing");
  expect_values(kn_any(e), (double[]){0}, 1, "any of nothing");
  kn_scope_end();
}

Test(reduce_fold, logsumexp_special_rows_and_integer_inputs) {
  kn_scope_begin();
  kn_tensor *x = kn_from_doubles((double[]){-INFINITY, -INFINITY, INFINITY, 1, NAN, 0, 1000, 1000},
                                 KN_SHAPE(4, 2));
  expect_values(kn_logsumexp(x, (int64_t[]){1}, 1, false),
                (double[]){-INFINITY, INFINITY, NAN, 1000 + log(2.0)}, 4, "logsumexp");
  kn_tensor *i = kn_to(kn_from_doubles((double[]){1, 2, 3}, KN_SHAPE(3)), KN_INT64);
  kn_tensor *li = kn_logsumexp(i, NULL, 0, true);
  cr_assert_eq(kn_tensor_dtype(li), KN_FLOAT32, "integers promote to the default float dtype");
  cr_expect_float_eq(kn_item(li), log(exp(1.0) + exp(2.0) + exp(3.0)), 1e-6);
  expect_values(kn_logsumexp(kn_zeros(KN_SHAPE(0), KN_FLOAT64), (int64_t[]){0}, 1, false),
                (double[]){-INFINITY}, 1, "logsumexp of nothing");
  kn_scope_end();
}

Test(reduce_fold, vector_norm_orders) {
  kn_scope_begin();
  kn_tensor *x = kn_from_doubles((double[]){3, -4, 0, 0, 0, 0, NAN, 1, -2}, KN_SHAPE(3, 3));
  const int64_t d1[1] = {1};
  expect_values(kn_linalg_vector_norm(x, 2, d1, 1, false), (double[]){5, 0, NAN}, 3, "2");
  expect_values(kn_linalg_vector_norm(x, 1, d1, 1, false), (double[]){7, 0, NAN}, 3, "1");
  expect_values(kn_linalg_vector_norm(x, INFINITY, d1, 1, false), (double[]){4, 0, NAN}, 3, "inf");
  expect_values(kn_linalg_vector_norm(x, -INFINITY, d1, 1, false), (double[]){0, 0, NAN}, 3,
                "-inf");
  expect_values(kn_linalg_vector_norm(x, 0, d1, 1, false), (double[]){2, 0, 3}, 3, "0");
  expect_values(kn_norm(x, 3, d1, 1, true), (double[]){cbrt(91.0), 0, NAN}, 3, "3");
  expect_values(kn_linalg_vector_norm(x, -1, d1, 1, false), (double[]){0, 0, NAN}, 3, "-1");
  kn_tensor *f = kn_to(x, KN_FLOAT32);
  kn_tensor *n64 = kn_linalg_vector_norm_dtype(f, 2, NULL, 0, false, KN_FLOAT64);
  cr_assert_eq(kn_tensor_dtype(n64), KN_FLOAT64);
  cr_expect(isnan(kn_item(n64)));
  kn_scope_end();
}

/* ---- errors ------------------------------------------------------------------------- */
static void expect_error(kn_tensor *t, kn_status st, const char *msg) {
  cr_expect_null(t);
  cr_expect_eq(kn_last_status(), st, "status of: %s", kn_last_error());
  cr_expect_str_eq(kn_last_error(), msg);
}

Test(reduce_fold, errors_match_torch) {
  kn_scope_begin();
  kn_tensor *l = kn_to(kn_from_doubles((double[]){1, 2, 3}, KN_SHAPE(3)), KN_INT64);
  kn_tensor *x = kn_from_doubles((double[]){1, 2, 3, 4}, KN_SHAPE(2, 2));
  kn_tensor *e = kn_zeros(KN_SHAPE(0, 3), KN_FLOAT32);
  expect_error(kn_linalg_vector_norm(l, 2, NULL, 0, false), KN_EDTYPE,
               "linalg.vector_norm: Expected a floating point or complex tensor as input. Got Long");
  expect_error(kn_linalg_vector_norm_dtype(x, 2, NULL, 0, false, KN_INT64), KN_EDTYPE,
               "linalg.vector_norm: dtype should be floating point or complex, but got Long");
  expect_error(kn_linalg_vector_norm_dtype(x, 2, NULL, 0, false, KN_FLOAT32), KN_EDTYPE,
               "linalg.vector_norm: the dtype of the input (Double) should be convertible "
               "without narrowing to the specified dtype (Float)");
  expect_error(kn_linalg_vector_norm(e, INFINITY, (int64_t[]){0}, 1, false), KN_EINVAL,
               "linalg.vector_norm cannot compute the inf norm on the dimension 0because this "
               "dimension is empty and the operation does not have an identity");
  expect_error(kn_linalg_vector_norm(e, -1, NULL, 0, false), KN_EINVAL,
               "linalg.vector_norm cannot compute the -1 norm on an empty tensor because the "
               "operation does not have an identity");
  cr_expect_not_null(kn_linalg_vector_norm(e, -1, (int64_t[]){1}, 1, false), "dim 1 is not empty");
  expect_error(kn_any_dim(x, 5, false), KN_ERANGE,
               "Dimension out of range (expected to be in range of [-2, 1], but got 5)");
  expect_error(kn_logsumexp(x, (int64_t[]){0, 0}, 2, false), KN_EINVAL,
               "dim 0 appears multiple times in the list of dims");
  kn_scope_end();
}

/* ---- gradients ---------------------------------------------------------------------- */
static const double x0[12] = {0.7, -1.3, 2.1, 0.4, -0.2, 1.9, -2.6, 0.9, 1.1, -0.55, 0.35, -1.7};

static kn_tensor *f_lse(kn_tensor *const *in, int n, void *ud) {
  (void)n, (void)ud;
  return kn_logsumexp(in[0], (int64_t[]){1}, 1, false);
}

static kn_tensor *f_norm(kn_tensor *const *in, int n, void *ud) {
  (void)n;
  return kn_linalg_vector_norm(in[0], *(const double *)ud, (int64_t[]){0, 2}, 2, true);
}

Test(reduce_fold, gradients_match_finite_differences) {
  kn_scope_begin();
  kn_tensor *in[1] = {leaf(KN_SHAPE(2, 3, 2), x0)};
  char why[512] = "";
  cr_assert(kn_gradcheck(f_lse, in, 1, NULL, why, sizeof why), "logsumexp: %s", why);
  cr_assert(kn_gradgradcheck(f_lse, in, 1, NULL, why, sizeof why), "logsumexp: %s", why);
  const double ords[] = {2, 1, INFINITY, -INFINITY, 3, 0.5, 1.5, -1, 2.5};
  for (size_t i = 0; i < sizeof ords / sizeof ords[0]; i++) {
    double o = ords[i];
    cr_assert(kn_gradcheck(f_norm, in, 1, &o, why, sizeof why), "ord %g: %s", o, why);
  }
  double two = 2, three = 3;
  cr_assert(kn_gradgradcheck(f_norm, in, 1, &two, why, sizeof why), "ord 2: %s", why);
  cr_assert(kn_gradgradcheck(f_norm, in, 1, &three, why, sizeof why), "ord 3: %s", why);
  kn_scope_end();
}

/* d sum(norm(x, ord, dim 1)) / dx as a flat array of 6. */
static void norm_grad(const double *v, double ord, double *g) {
  kn_tensor *x = leaf(KN_SHAPE(2, 3), v);
  kn_tensor *y = kn_sum(kn_linalg_vector_norm(x, ord, (int64_t[]){1}, 1, false));
  kn_tensor *gx = NULL;
  cr_assert_eq(kn_autograd_grad(&y, 1, &x, 1, NULL, false, false, false, &gx), KN_OK, "%s",
               kn_last_error());
  kn_tensor *c = kn_contiguous(gx);
  memcpy(g, kn_data(c), 6 * sizeof(double));
}

/* torch's choices: 0 at a zero norm (ord 2), sign(x) with sign(0) = 0 (ord 1),
** the gradient shared evenly among tied extremes of |x| (ord +-inf), zeros
** (ord 0). */
Test(reduce_fold, subgradients_at_zeros_and_ties) {
  kn_scope_begin();
  double g[6];
  norm_grad((double[]){0, 0, 0, 3, 0, -4}, 2, g);
  expect_values(kn_from_doubles(g, KN_SHAPE(6)), (double[]){0, 0, 0, 0.6, 0, -0.8}, 6, "ord 2");
  norm_grad((double[]){0, 2, -1, 3, 0, -4}, 1, g);
  expect_values(kn_from_doubles(g, KN_SHAPE(6)), (double[]){0, 1, -1, 1, 0, -1}, 6, "ord 1");
  norm_grad((double[]){-3, 3, 1, 2, -2, 2}, INFINITY, g);
  expect_values(kn_from_doubles(g, KN_SHAPE(6)),
                (double[]){-0.5, 0.5, 0, 1.0 / 3, -1.0 / 3, 1.0 / 3}, 6, "ord inf");
  norm_grad((double[]){-1, 3, 1, 2, -5, 7}, -INFINITY, g);
  expect_values(kn_from_doubles(g, KN_SHAPE(6)), (double[]){-0.5, 0, 0.5, 1, 0, 0}, 6, "ord -inf");
  norm_grad((double[]){-1, 3, 1, 2, -5, 7}, 0, g);
  expect_values(kn_from_doubles(g, KN_SHAPE(6)), (double[]){0, 0, 0, 0, 0, 0}, 6, "ord 0");
  kn_scope_end();
}

Test(reduce_fold, grad_fn_names_match_torch) {
  kn_scope_begin();
  kn_tensor *x = leaf(KN_SHAPE(2, 3), x0);
  cr_assert_str_eq(kn_grad_fn_name(kn_logsumexp(x, (int64_t[]){1}, 1, false)),
                   "LogsumexpBackward0");
  cr_assert_str_eq(kn_grad_fn_name(kn_linalg_vector_norm(x, 2, NULL, 0, false)),
                   "LinalgVectorNormBackward0");
  kn_tensor *a = kn_any_dim(x, 1, false);
  cr_assert_not(kn_requires_grad(a));
  cr_assert_null(kn_grad_fn_name(a));
  kn_scope_end();
}
