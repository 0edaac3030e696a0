/*
** test_autograd_gradcheck.c: the finite-difference harness itself: it
** accepts correct rules (mm, matmul, views), rejects a deliberately wrong
** backward with a message naming the element, and checks second order.
*/
#include <criterion/criterion.h>
#include <string.h>

#include "autograd/autograd.h"
#include "ops/opdef.h"
#include "kiln/kiln.h"
#include "support/gradcheck.h"

static int64_t live0;
static void init(void) { live0 = kn_live_tensors(); }
static void fini(void) {
  cr_assert_eq(kn_live_tensors(), live0, "leaked %lld tensors",
               (long long)(kn_live_tensors() - live0));
}
TestSuite(gradcheck, .init = init, .fini = fini);

static kn_tensor *leaf(int nd, const int64_t *sz, const double *v) {
  kn_tensor *t = kn_from_doubles(v, nd, sz);
  cr_assert_eq(kn_set_requires_grad(t, true), KN_OK);
  return t;
}

static kn_tensor *f_mm(kn_tensor *const *in, int n, void *ud) {
  (void)n, (void)ud;
  return kn_mm(in[0], in[1]);
}

Test(gradcheck, accepts_mm) {
  kn_scope_begin();
  kn_tensor *in[2] = {leaf(KN_SHAPE(2, 3), (double[]){1, -2, 0.5, 3, 0.25, -1}),
                      leaf(KN_SHAPE(3, 2), (double[]){0.1, 0.2, -0.3, 0.4, 2, -1})};
  char why[512] = "";
  cr_assert(kn_gradcheck(f_mm, in, 2, NULL, why, sizeof why), "%s", why);
  /* only the second input differentiated */
  kn_tensor *c = kn_from_doubles((double[]){1, 2, 3, 4, 5, 6}, KN_SHAPE(2, 3));
  kn_tensor *in2[2] = {c, in[1]};
  cr_assert(kn_gradcheck(f_mm, in2, 2, NULL, why, sizeof why), "%s", why);
  kn_scope_end();
}

/* x^T A x through views: second order is A + A^T. */
static kn_tensor *f_quad(kn_tensor *const *in, int n, void *ud) {
  (void)n, (void)ud;
  return kn_mm(kn_t(in[0]), kn_mm(in[1], in[0]));
}

Test(gradcheck, accepts_views_and_non_contiguous_inputs) {
  kn_scope_begin();
  kn_tensor *base = leaf(KN_SHAPE(2, 3), (double[]){1, 2, 3, 4, 5, 6});
  kn_tensor *tb = kn_t(base); /* non-contiguous, not a leaf: use a detached leaf view */
  kn_tensor *x = kn_detach(tb);
  cr_assert_eq(kn_set_requires_grad(x, true), KN_OK);
  cr_assert_not(kn_is_contiguous(x));
  kn_tensor *w = leaf(KN_SHAPE(2, 2), (double[]){0.5, -1, 2, 0.25});
  kn_tensor *in[2] = {x, w};
  char why[512] = "";
  cr_assert(kn_gradcheck(f_mm, in, 2, NULL, why, sizeof why), "%s", why);
  cr_assert_eq(kn_get(base, (int64_t[]){1, 2}), 6.0, "inputs are restored");
  kn_scope_end();
}

Test(gradcheck, second_order_of_a_quadratic_form) {
  kn_scope_begin();
  kn_tensor *in[2] = {leaf(KN_SHAPE(2, 1), (double[]){1, -2}),
                      leaf(KN_SHAPE(2, 2), (double[]){1, 2, 3, 4})};
  char why[512] = "";
  cr_assert(kn_gradcheck(f_quad, in, 2, NULL, why, sizeof why), "%s", why);
  cr_assert(kn_gradgradcheck(f_quad, in, 2, NULL, why, sizeof why), "%s", why);
  kn_scope_end();
}

/* identity forward with a backward that triples the gradient: wrong. */
static kn_status wrong_backward(void *ctx, kn_tensor *const *go, int nout, kn_tensor **gi,
                                const bool *needs, int nin, bool cg) {
  (void)ctx, (void)nout, (void)nin, (void)cg;
  if (needs[0]) gi[0] = kn_mm(go[0], kn_full(KN_SHAPE(1, 1), kn_float(3), KN_FLOAT64));
  return KN_OK;
}

static kn_tensor *f_wrong(kn_tensor *const *in, int n, void *ud) {
  (void)n, (void)ud;
  kn_tensor *y = kn_mm(in[0], kn_full(KN_SHAPE(1, 1), kn_float(1), KN_FLOAT64));
  if (!kn_is_grad_enabled() || !kn_requires_grad(in[0])) return y;
  kn_tensor *out = kn_detach(y);
  kn__node *node = kn__node_new_custom("WrongBackward", wrong_backward, NULL, NULL, in, 1, 1);
  kn__node_set_output(node, out, 0);
  kn__node_release(node);
  return out;
}

Test(gradcheck, rejects_a_wrong_backward_naming_the_element) {
  kn_scope_begin();
  kn_tensor *x = leaf(KN_SHAPE(2, 1), (double[]){1, 2});
  char why[512] = "";
  cr_assert_not(kn_gradcheck(f_wrong, &x, 1, NULL, why, sizeof why));
  cr_assert(strstr(why, "Jacobian mismatch for differentiated input 0, output 0 element 0, "
                        "input element 0: numerical (expected) 1, analytical (got) 3") != NULL,
            "%s", why);
  kn_scope_end();
}

Test(gradcheck, rejects_bad_inputs) {
  kn_scope_begin();
  char why[512] = "";
  kn_tensor *f32 = kn_from_floats((float[]){1, 2}, KN_SHAPE(2, 1));
  cr_assert_eq(kn_set_requires_grad(f32, true), KN_OK);
  kn_tensor *in[2] = {kn_t(f32), f32};
  cr_assert_not(kn_gradcheck(f_mm, in, 2, NULL, why, sizeof why));
  cr_assert(strstr(why, "must be a float64 CPU tensor, got float32") != NULL, "%s", why);
  kn_tensor *c = kn_from_doubles((double[]){1}, KN_SHAPE(1, 1));
  kn_tensor *in2[2] = {c, c};
  cr_assert_not(kn_gradcheck(f_mm, in2, 2, NULL, why, sizeof why));
  cr_assert_str_eq(why, "no input requires grad");
  kn_scope_end();
}
