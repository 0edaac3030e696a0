/*
** test_autograd_ops.c: the engine with real pointwise ops: literal
** gradients (y = x*x + 3x at 2 -> 7; d2/dx2 x^3 = 6x), in-place ops (leaf
** check, history rebase, the pre-image of mul_, version counter), SGD-style
** updates under no_grad, and the gradcheck harness on pointwise ops.
*/
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "autograd/autograd.h"
#include "kiln/kiln.h"
#include "support/fixture.h"
#include "support/gradcheck.h"

static int64_t live0;
static void init(void) {
  live0 = kn_live_tensors();
  kn_scope_begin();
}
static void fini(void) {
  kn_scope_end();
  cr_assert_eq(kn_live_tensors(), live0, "leaked %lld tensors",
               (long long)(kn_live_tensors() - live0));
}
TestSuite(ops, .init = init, .fini = fini);

static kn_tensor *leaf(int nd, const int64_t *sz, const double *v) {
  kn_tensor *t = kn_from_doubles(v, nd, sz);
  cr_assert_eq(kn_set_requires_grad(t, true), KN_OK);
  return t;
}
static kn_tensor *val(int nd, const int64_t *sz, const double *v) {
  return kn_from_doubles(v, nd, sz);
}
static kn_tensor *kn_ones_like_dbl(const kn_tensor *t) {
  return kn_ones(kn_ndim(t), kn_sizes(t), KN_FLOAT64);
}
static void expect(const kn_tensor *t, int n, const double *want) {
  cr_assert_not_null(t, "tensor is NULL: %s", kn_last_error());
  cr_assert_eq(kn_numel(t), n);
  for (int i = 0; i < n; i++) {
    double d = kn_get(t, (int64_t[]){i});
    cr_assert_float_eq(d, want[i], 1e-12, "element %d: got %g, want %g", i, d, want[i]);
  }
}

/* y = x*x + 3x: dy/dx = 2x + 3 = 7 at x = 2. */
Test(ops, polynomial_literal) {
  kn_tensor *x = leaf(KN_SHAPE(1), (double[]){2});
  kn_tensor *y = kn_add(kn_mul(x, x), kn_mul_scalar(x, kn_float(3)));
  cr_assert_str_eq(kn_grad_fn_name(y), "AddBackward0");
  cr_assert_eq(kn_backward(y, NULL), KN_OK, "%s", kn_last_error());
  expect(kn_grad(x), 1, (double[]){7});
}

/* d/dx x^3 = 3x^2 = 27, d2/dx2 = 6x = 18 at x = 3; third order 6. */
Test(ops, third_order_of_cube) {
  kn_tensor *x = leaf(KN_SHAPE(1), (double[]){3});
  kn_tensor *y = kn_mul(kn_mul(x, x), x);
  kn_tensor *g1, *g2, *g3;
  cr_assert_eq(kn_autograd_grad(&y, 1, &x, 1, NULL, true, true, false, &g1), KN_OK, "%s",
               kn_last_error());
  expect(g1, 1, (double[]){27});
  cr_assert_eq(kn_autograd_grad(&g1, 1, &x, 1, NULL, true, true, false, &g2), KN_OK, "%s",
               kn_last_error());
  expect(g2, 1, (double[]){18});
  cr_assert_eq(kn_autograd_grad(&g2, 1, &x, 1, NULL, true, false, false, &g3), KN_OK, "%s",
               kn_last_error());
  expect(g3, 1, (double[]){6});
}

/* exp's rule uses its saved output: second order through the restored
** output: d2/dx2 exp(x) = exp(x). */
Test(ops, second_order_through_saved_output) {
  kn_tensor *x = leaf(KN_SHAPE(2), (double[]){0, 1});
  kn_tensor *y = kn_exp(x);
  kn_tensor *ones = val(KN_SHAPE(2), (double[]){1, 1});
  kn_tensor *g, *h;
  cr_assert_eq(kn_autograd_grad(&y, 1, &x, 1, &ones, true, true, false, &g), KN_OK, "%s",
               kn_last_error());
  expect(g, 2, (double[]){1, exp(1.0)});
  cr_assert(kn_requires_grad(g));
  cr_assert_eq(kn_autograd_grad(&g, 1, &x, 1, &ones, false, false, false, &h), KN_OK, "%s",
               kn_last_error());
  expect(h, 2, (double[]){1, exp(1.0)});
}

Test(ops, in_place_on_leaf_is_refused) {
  kn_tensor *x = leaf(KN_SHAPE(2), (double[]){1, 2});
  cr_assert_eq(kn_add_scalar_(x, kn_float(1)), KN_EAUTOGRAD);
  cr_assert_str_eq(kn_last_error(),
                   "a leaf Variable that requires grad is being used in an in-place operation.");
  expect(x, 2, (double[]){1, 2});
  cr_assert_eq(kn_tensor_version(x), 0);
  /* under no_grad it is the SGD update */
  bool prev = kn_no_grad_begin();
  cr_assert_eq(kn_sub_(x, val(KN_SHAPE(2), (double[]){0.5, 0.5})), KN_OK, "%s",
               kn_last_error());
  kn_no_grad_end(prev);
  expect(x, 2, (double[]){0.5, 1.5});
  cr_assert(kn_is_leaf(x));
  cr_assert_null(kn_grad_fn_name(x));
}

/* a = 3x; a *= w (in place): history rebased; dw needs a's old value.
** x = [1,2], w = [5,7]: a = [15,42]; dx = 3w = [15,21]; dw = 3x = [3,6]. */
Test(ops, in_place_rebases_history_and_saves_the_pre_image) {
  kn_tensor *x = leaf(KN_SHAPE(2), (double[]){1, 2});
  kn_tensor *w = leaf(KN_SHAPE(2), (double[]){5, 7});
  kn_tensor *a = kn_mul_scalar(x, kn_float(3));
  cr_assert_eq(kn_mul_(a, w), KN_OK, "%s", kn_last_error());
  cr_assert_str_eq(kn_grad_fn_name(a), "MulBackward0");
  expect(a, 2, (double[]){15, 42});
  cr_assert_eq(kn_backward(a, val(KN_SHAPE(2), (double[]){1, 1})), KN_OK, "%s",
               kn_last_error());
  expect(kn_grad(x), 2, (double[]){15, 21});
  expect(kn_grad(w), 2, (double[]){3, 6});
}

/* In-place on a tensor that did not require grad, with an operand that
** does: the tensor joins the graph (no longer a leaf). */
Test(ops, in_place_makes_a_plain_tensor_require_grad) {
  kn_tensor *x = leaf(KN_SHAPE(2), (double[]){1, 2});
  kn_tensor *buf = val(KN_SHAPE(2), (double[]){10, 20});
  cr_assert_eq(kn_add_(buf, x), KN_OK, "%s", kn_last_error());
  cr_assert(kn_requires_grad(buf));
  cr_assert_not(kn_is_leaf(buf));
  cr_assert_str_eq(kn_grad_fn_name(buf), "AddBackward0");
  cr_assert_eq(kn_backward(buf, val(KN_SHAPE(2), (double[]){1, 2})), KN_OK, "%s",
               kn_last_error());
  expect(kn_grad(x), 2, (double[]){1, 2});
}

Test(ops, version_counter_catches_modified_output) {
  kn_tensor *x = leaf(KN_SHAPE(3), (double[]){0, 1, 2});
  kn_tensor *y = kn_exp(x);             /* ExpBackward0 saves its output */
  cr_assert_eq(kn_add_scalar_(y, kn_float(1)), KN_OK, "%s", kn_last_error());
  kn_status st = kn_backward(y, val(KN_SHAPE(3), (double[]){1, 1, 1}));
  cr_assert_eq(st, KN_EAUTOGRAD);
  cr_assert(strstr(kn_last_error(),
                   "one of the variables needed for gradient computation has been modified by "
                   "an inplace operation: [torch.DoubleTensor [3]], which is output 0 of "
                   "ExpBackward0, is at version 1; expected version 0 instead. Hint:") ==
                kn_last_error(),
            "%s", kn_last_error());
  cr_assert_null(kn_grad(x));
}

Test(ops, version_counter_ignores_values_not_needed) {
  /* add saves nothing it needs: modifying its input is fine, as in PyTorch */
  kn_tensor *x = leaf(KN_SHAPE(2), (double[]){1, 2});
  kn_tensor *a = kn_mul_scalar(x, kn_float(2));
  kn_tensor *b = kn_add(a, val(KN_SHAPE(2), (double[]){1, 1}));
  bool prev = kn_no_grad_begin();
  cr_assert_eq(kn_add_scalar_(a, kn_float(100)), KN_OK);
  kn_no_grad_end(prev);
  cr_assert_eq(kn_backward(b, val(KN_SHAPE(2), (double[]){1, 1})), KN_OK, "%s",
               kn_last_error());
  expect(kn_grad(x), 2, (double[]){2, 2});
}

/* ---- the harness on pointwise ops ------------------------------------------------- */

static kn_tensor *f_mix(kn_tensor *const *in, int n, void *ud) {
  (void)n, (void)ud;
  return kn_mul(kn_tanh(in[0]), kn_add(kn_exp(in[1]), kn_mul(in[0], in[1])));
}

Test(ops, gradcheck_and_gradgradcheck_on_pointwise) {
  kn_tensor *in[2] = {leaf(KN_SHAPE(2, 2), (double[]){0.3, -0.7, 1.1, 0.2}),
                      leaf(KN_SHAPE(2, 2), (double[]){0.5, -0.25, 0.125, 2})};
  char why[512] = "";
  cr_assert(kn_gradcheck(f_mix, in, 2, NULL, why, sizeof why), "%s", why);
  cr_assert(kn_gradgradcheck(f_mix, in, 2, NULL, why, sizeof why), "%s", why);
}

/* Gradients are cast to the input's dtype (float64 product, float32 leaf). */
Test(ops, gradient_cast_to_input_dtype) {
  kn_tensor *x = kn_from_floats((float[]){1, 2}, KN_SHAPE(2));
  cr_assert_eq(kn_set_requires_grad(x, true), KN_OK);
  kn_tensor *c = val(KN_SHAPE(2), (double[]){3, 0.5});
  kn_tensor *y = kn_mul(x, c);
  cr_assert_eq(kn_tensor_dtype(y), KN_FLOAT64);
  cr_assert_eq(kn_backward(y, val(KN_SHAPE(2), (double[]){1, 1})), KN_OK, "%s",
               kn_last_error());
  cr_assert_eq(kn_tensor_dtype(kn_grad(x)), KN_FLOAT32);
  expect(kn_grad(x), 2, (double[]){3, 0.5});
}

Test(ops, in_place_on_views_with_history) {
  kn_tensor *x = leaf(KN_SHAPE(2, 2), (double[]){1, 2, 3, 4});
  kn_tensor *v = kn_t(x);
  cr_assert_eq(kn_mul_scalar_(v, kn_float(2)), KN_EAUTOGRAD);
  cr_assert_str_eq(kn_last_error(), "a view of a leaf Variable that requires grad is being "
                                    "used in an in-place operation.");
  const double *xd = kn_data(x);
  cr_assert(xd[0] == 1 && xd[1] == 2 && xd[2] == 3 && xd[3] == 4, "x unchanged");
  /* without grad mode it is a plain write */
  bool prev = kn_no_grad_begin();
  cr_assert_eq(kn_mul_scalar_(v, kn_float(2)), KN_OK);
  kn_no_grad_end(prev);
  cr_assert_eq(kn_get(x, (int64_t[]){1, 1}), 8.0);
}

/* x = [[1,2],[3,4]], y = 2x, r = y[1] = [6,8], r *= c (c = [10,100]):
** y = [[2,4],[60,800]]; with grad ones on y: dx = [[2,2],[20,200]],
** dc = old r = [6,8]. Through r alone: dx = [[0,0],[20,200]]. */
Test(ops, in_place_on_a_view_rewrites_the_base_history) {
  kn_tensor *x = leaf(KN_SHAPE(2, 2), (double[]){1, 2, 3, 4});
  kn_tensor *c = leaf(KN_SHAPE(2), (double[]){10, 100});
  kn_tensor *y = kn_mul_scalar(x, kn_float(2));
  kn_tensor *r = kn_select(y, 0, 1);
  cr_assert_eq(kn_mul_(r, c), KN_OK, "%s", kn_last_error());
  cr_assert_str_eq(kn_grad_fn_name(y), "CopySlices");
  cr_assert_str_eq(kn_grad_fn_name(r), "AsStridedBackward0");
  cr_assert_eq(kn_get(y, (int64_t[]){1, 1}), 800.0);
  cr_assert_eq(kn_backward_ex(y, kn_ones(KN_SHAPE(2, 2), KN_FLOAT64), true, false), KN_OK,
               "%s", kn_last_error());
  expect(kn_reshape(kn_grad(x), 1, (int64_t[]){4}), 4, (double[]){2, 2, 20, 200});
  expect(kn_grad(c), 2, (double[]){6, 8});
  kn_set_grad(x, NULL);
  kn_set_grad(c, NULL);
  cr_assert_eq(kn_backward(r, kn_ones(KN_SHAPE(2), KN_FLOAT64)), KN_OK, "%s", kn_last_error());
  expect(kn_reshape(kn_grad(x), 1, (int64_t[]){4}), 4, (double[]){0, 0, 20, 200});
  expect(kn_grad(c), 2, (double[]){6, 8});
}

static kn_tensor *f_setview(kn_tensor *const *in, int n, void *ud) {
  (void)n, (void)ud;
  kn_tensor *y = kn_sin(in[0]); /* sin saves its input, so y may change */
  kn_tensor *col = kn_select(kn_t(y), 0, 1); /* a strided view: column 1 */
  if (kn_mul_(col, kn_tanh(in[1])) != KN_OK) return NULL;
  return kn_mul(y, y);
}

Test(ops, gradcheck_through_copyslices) {
  kn_tensor *in[2] = {leaf(KN_SHAPE(2, 2), (double[]){0.1, -0.4, 0.7, 0.2}),
                      leaf(KN_SHAPE(2), (double[]){0.3, -0.9})};
  char why[512] = "";
  cr_assert(kn_gradcheck(f_setview, in, 2, NULL, why, sizeof why), "%s", why);
  kn_tensor *g = NULL;
  kn_tensor *out = f_setview(in, 2, NULL);
  cr_assert_eq(kn_autograd_grad(&out, 1, in, 1, (kn_tensor *[]){kn_ones_like_dbl(out)}, false,
                                true, false, &g),
               KN_EUNSUPPORTED);
  cr_assert(strstr(kn_last_error(), "double backward through CopySlices") != NULL, "%s",
            kn_last_error());
}

/* ---- end to end against torch 1.13 (tests/fixtures/autograd.json) ----------------- */

static kn_tensor *mlp_loss(kn_tensor *const *in, int n, void *ud) {
  (void)n, (void)ud;
  kn_tensor *h = kn_tanh(kn_linear(in[0], in[2], in[3]));
  return kn_mse_loss(kn_linear(h, in[4], in[5]), in[1], KN_REDUCTION_MEAN);
}

static kn_tensor *diamond(kn_tensor *const *in, int n, void *ud) {
  (void)n, (void)ud;
  kn_tensor *a = kn_exp(in[0]);
  kn_tensor *b = kn_mul(a, in[0]);
  kn_tensor *c = kn_tanh(a);
  return kn_sum_dims(kn_add(b, kn_mul(c, a)), (int64_t[]){1}, 1, false);
}

static void check_case(const json_t *c, kn_gc_fn fn) {
  int n = kn_fixture_ninputs(c);
  kn_tensor *in[8];
  for (int i = 0; i < n; i++) in[i] = kn_fixture_tensor(kn_fixture_input(c, i));
  kn_tensor *out = fn(in, n, NULL);
  char why[512];
  cr_assert(kn_fixture_close(out, kn_fixture_output(c, 0), 1e-10, 1e-12, why, sizeof why),
            "%s output: %s", kn_fixture_name(c), why);
  const json_t *go = kn_fixture_grad_output(c, 0);
  cr_assert_eq(kn_backward(out, go ? kn_fixture_tensor(go) : NULL), KN_OK, "%s",
               kn_last_error());
  for (int i = 0; i < n; i++) {
    const json_t *g = kn_fixture_grad(c, i);
    if (!g) {
      cr_assert_null(kn_grad(in[i]), "%s: input %d has no gradient", kn_fixture_name(c), i);
      continue;
    }
    cr_assert(kn_fixture_close(kn_grad(in[i]), g, 1e-10, 1e-12, why, sizeof why),
              "%s grad of input %d: %s", kn_fixture_name(c), i, why);
  }
  char gwhy[512] = "";
  cr_assert(kn_gradcheck(fn, in, n, NULL, gwhy, sizeof gwhy), "%s: %s", kn_fixture_name(c),
            gwhy);
}

Test(ops, matches_torch_on_composite_graphs) {
  kn_fixture *f = kn_fixture_load_named("autograd.json");
  cr_assert_not_null(f, "%s", kn_last_error());
  check_case(kn_fixture_find(f, "mlp_tanh_mse"), mlp_loss);
  check_case(kn_fixture_find(f, "diamond_exp_mul_tanh"), diamond);
  kn_fixture_free(f);
}

/* retain_grad follows an in-place rebase: y.grad is the gradient of the
** new y. x = [1,2], y = 2x, y *= 3, out = y * [1, 10]: y.grad = [1, 10],
** x.grad = 6 * [1, 10]. */
Test(ops, retain_grad_follows_in_place_rebase) {
  kn_tensor *x = leaf(KN_SHAPE(2), (double[]){1, 2});
  kn_tensor *y = kn_mul_scalar(x, kn_float(2));
  cr_assert_eq(kn_retain_grad(y), KN_OK);
  cr_assert_eq(kn_mul_scalar_(y, kn_float(3)), KN_OK, "%s", kn_last_error());
  kn_tensor *out = kn_mul(y, val(KN_SHAPE(2), (double[]){1, 10}));
  cr_assert_eq(kn_backward(out, val(KN_SHAPE(2), (double[]){1, 1})), KN_OK, "%s",
               kn_last_error());
  expect(kn_grad(y), 2, (double[]){1, 10});
  expect(kn_grad(x), 2, (double[]){6, 60});
}

/* Tensor-list inputs: cat only needs shapes, so a modified list entry is
** fine; stack(..) of a modified tensor whose values a rule needs is not.
** x = [0, 1]: c = cat(2x, exp(x)); dx = 2 + exp(x). */
Test(ops, saved_tensor_lists) {
  kn_tensor *x = leaf(KN_SHAPE(2), (double[]){0, 1});
  kn_tensor *a = kn_mul_scalar(x, kn_float(2));
  kn_tensor *c = kn_cat((kn_tensor *[]){a, kn_exp(x)}, 2, 0);
  bool prev = kn_no_grad_begin();
  cr_assert_eq(kn_add_scalar_(a, kn_float(5)), KN_OK);
  kn_no_grad_end(prev);
  cr_assert_eq(kn_backward(c, kn_ones(KN_SHAPE(4), KN_FLOAT64)), KN_OK, "%s", kn_last_error());
  expect(kn_grad(x), 2, (double[]){3, 2 + exp(1.0)});
  /* a product over a list member that was modified */
  kn_tensor *b = kn_mul_scalar(x, kn_float(1));
  kn_tensor *s = kn_stack((kn_tensor *[]){b, b}, 2, 0);
  kn_tensor *p = kn_mul(s, s); /* saves s */
  prev = kn_no_grad_begin();
  cr_assert_eq(kn_mul_scalar_(s, kn_float(2)), KN_OK);
  kn_no_grad_end(prev);
  cr_assert_eq(kn_backward(p, kn_ones(KN_SHAPE(2, 2), KN_FLOAT64)), KN_EAUTOGRAD);
  cr_assert(strstr(kn_last_error(), "which is output 0 of StackBackward0, is at version 1; "
                                    "expected version 0 instead") != NULL, "%s", kn_last_error());
}

/* A view taken before its base changed history in place is stale: refused
** (PyTorch would regenerate it). Taking the view again works. */
Test(ops, stale_view_after_base_in_place) {
  kn_tensor *x = leaf(KN_SHAPE(2), (double[]){1, 2});
  kn_tensor *y = kn_mul_scalar(x, kn_float(2));
  kn_tensor *q = kn_t(y);                        /* 1-d: same values, a view */
  cr_assert_eq(kn_mul_scalar_(y, kn_float(3)), KN_OK, "%s", kn_last_error());
  kn_status st = kn_backward(q, kn_ones(KN_SHAPE(2), KN_FLOAT64));
  cr_assert_eq(st, KN_EUNSUPPORTED);
  cr_assert(strstr(kn_last_error(), "the base of a view (output 0 of TBackward0) was modified "
                                    "by an in-place operation") != NULL, "%s", kn_last_error());
  kn_tensor *q2 = kn_t(y);
  cr_assert_eq(kn_backward(q2, kn_ones(KN_SHAPE(2), KN_FLOAT64)), KN_OK, "%s", kn_last_error());
  expect(kn_grad(x), 2, (double[]){6, 6});
}
