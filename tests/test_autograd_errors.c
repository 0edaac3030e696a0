/*
** test_autograd_errors.c: autograd misuse gets PyTorch's messages as error
** values, leaves no leaks; grad mode (no_grad, set_grad_enabled), detach,
** the version-counter check and freed saved tensors.
*/
#include <criterion/criterion.h>
#include <string.h>

#include "autograd/autograd.h"
#include "core/error.h"
#include "kiln/kiln.h"
#include "support/leakcheck.h"

TestSuite(misuse, .init = kn_test_leakcheck_begin, .fini = kn_test_leakcheck_end);
TestSuite(gradmode, .init = kn_test_leakcheck_begin, .fini = kn_test_leakcheck_end);

static kn_tensor *leaf(int nd, const int64_t *sz, const double *v) {
  kn_tensor *t = kn_from_doubles(v, nd, sz);
  cr_assert_eq(kn_set_requires_grad(t, true), KN_OK);
  return t;
}
static kn_tensor *val(int nd, const int64_t *sz, const double *v) {
  return kn_from_doubles(v, nd, sz);
}
static void expect_error(kn_status st, kn_status want, const char *msg) {
  cr_assert_eq(st, want, "status %d, want %d (%s)", st, want, kn_last_error());
  cr_assert_str_eq(kn_last_error(), msg);
}

Test(misuse, backward_of_non_scalar_without_grad) {
  kn_tensor *x = leaf(KN_SHAPE(2, 1), (double[]){1, 2});
  kn_tensor *y = kn_mm(val(KN_SHAPE(2, 2), (double[]){1, 2, 3, 4}), x);
  expect_error(kn_backward(y, NULL), KN_EAUTOGRAD,
               "grad can be implicitly created only for scalar outputs");
  cr_assert_null(kn_grad(x));
}

Test(misuse, backward_of_tensor_without_grad_fn) {
  kn_tensor *c = val(KN_SHAPE(1), (double[]){1});
  expect_error(kn_backward(c, NULL), KN_EAUTOGRAD,
               "element 0 of tensors does not require grad and does not have a grad_fn");
  kn_tensor *x = leaf(KN_SHAPE(1, 1), (double[]){1});
  kn_tensor *outs[2] = {kn_mm(x, x), c}, *g;
  expect_error(kn_autograd_grad(outs, 2, &x, 1, NULL, false, false, false, &g), KN_EAUTOGRAD,
               "element 1 of tensors does not require grad and does not have a grad_fn");
  cr_assert_null(g);
  /* the last error did not produce a NULL tensor: it is not quoted */
  expect_error(kn_backward(NULL, NULL), KN_EINVAL, "backward: output 0 is NULL");
}

Test(misuse, grad_output_shape_mismatch) {
  kn_tensor *x = leaf(KN_SHAPE(3, 1), (double[]){1, 2, 3});
  kn_tensor *y = kn_t(x);
  expect_error(kn_backward(y, val(KN_SHAPE(2), (double[]){1, 1})), KN_ESHAPE,
               "Mismatch in shape: grad_output[0] has a shape of torch.Size([2]) and "
               "output[0] has a shape of torch.Size([1, 3]).");
}

static const char *const freed =
    "Trying to backward through the graph a second time (or directly access saved tensors "
    "after they have already been freed). Saved intermediate values of the graph are freed "
    "when you call .backward() or autograd.grad(). Specify retain_graph=True if you need to "
    "backward through the graph a second time or if you need to access saved tensors after "
    "calling backward.";

Test(misuse, backward_twice_without_retain_graph) {
  kn_tensor *x = leaf(KN_SHAPE(2, 1), (double[]){1, 2});
  kn_tensor *f = kn_mm(kn_t(x), x); /* MmBackward0 needs the saved values */
  cr_assert_eq(kn_backward(f, NULL), KN_OK, "%s", kn_last_error());
  expect_error(kn_backward(f, NULL), KN_EAUTOGRAD, freed);
  const double *g = kn_data(kn_grad(x));
  cr_assert(g[0] == 2 && g[1] == 4, "the failed call must not change .grad");
  kn_tensor *gg;
  expect_error(kn_autograd_grad(&f, 1, &x, 1, NULL, false, false, false, &gg), KN_EAUTOGRAD,
               freed);
  cr_assert_null(gg);
}

/* Nodes that only need shapes work twice (PyTorch's TBackward0 too). */
Test(misuse, shape_only_nodes_survive_freeing) {
  kn_tensor *x = leaf(KN_SHAPE(2, 1), (double[]){1, 2});
  kn_tensor *y = kn_t(x);
  kn_tensor *go = val(KN_SHAPE(1, 2), (double[]){1, 1});
  cr_assert_eq(kn_backward(y, go), KN_OK, "%s", kn_last_error());
  cr_assert_eq(kn_backward(y, go), KN_OK, "%s", kn_last_error());
  const double *g = kn_data(kn_grad(x));
  cr_assert(g[0] == 2 && g[1] == 2);
}

Test(misuse, saved_tensor_modified_in_place) {
  kn_tensor *x = leaf(KN_SHAPE(2, 1), (double[]){1, 2});
  kn_tensor *w = val(KN_SHAPE(1, 2), (double[]){3, 4});
  kn_tensor *a = kn_mm(w, x);                /* saves w (version 0) and x */
  kn__bump_version(w);                       /* as an in-place op on w would */
  expect_error(kn_backward(a, NULL), KN_EAUTOGRAD,
               "one of the variables needed for gradient computation has been modified by an "
               "inplace operation: [torch.DoubleTensor [1, 2]] is at version 1; expected "
               "version 0 instead. Hint: the tensor was modified in place after it was saved "
               "for backward; use the out-of-place op, or clone the tensor before modifying it.");
  cr_assert_null(kn_grad(x));
}

Test(misuse, saved_non_leaf_modified_names_its_grad_fn) {
  kn_tensor *x = leaf(KN_SHAPE(2, 1), (double[]){1, 2});
  kn_tensor *xt = kn_t(x);                   /* output 0 of TBackward0 */
  kn_tensor *f = kn_mm(xt, x);               /* dx needs xt's values */
  kn__bump_version(xt);
  kn__bump_version(xt);
  kn_status st = kn_backward(f, NULL);
  cr_assert_eq(st, KN_EAUTOGRAD);
  cr_assert(strstr(kn_last_error(), "[torch.DoubleTensor [1, 2]], which is output 0 of "
                                    "TBackward0, is at version 2; expected version 0 instead.") !=
                NULL, "%s", kn_last_error());
}

/* A node that saved a tensor but only needs its shape does not complain. */
Test(misuse, modified_tensor_only_needed_for_shape) {
  kn_tensor *x = leaf(KN_SHAPE(2, 1), (double[]){1, 2});
  kn_tensor *y = kn_t(x);
  kn__bump_version(x);
  cr_assert_eq(kn_backward(y, val(KN_SHAPE(1, 2), (double[]){5, 6})), KN_OK, "%s",
               kn_last_error());
  const double *g = kn_data(kn_grad(x));
  cr_assert(g[0] == 5 && g[1] == 6);
}

Test(misuse, in_place_on_leaf_requiring_grad) {
  kn_tensor *x = leaf(KN_SHAPE(2), (double[]){1, 2});
  kn__call c = {.op = &kn__ops[KN_OP_MM], .nargs = 1, .args = {KN_A_T(x)}};
  expect_error(kn__autograd_check_inplace(&c), KN_EAUTOGRAD,
               "a leaf Variable that requires grad is being used in an in-place operation.");
  kn_tensor *d = kn_detach(x);
  c.args[0] = KN_A_T(d);
  cr_assert_eq(kn__autograd_check_inplace(&c), KN_OK, "a detached alias may be modified");
}

Test(misuse, autograd_grad_bad_arguments) {
  kn_tensor *x = leaf(KN_SHAPE(1, 1), (double[]){1});
  kn_tensor *f = kn_mm(x, x), *g = NULL;
  expect_error(kn_autograd_grad(&f, 1, &x, 0, NULL, false, false, false, &g), KN_EINVAL,
               "grad requires at least one output and one input (got 1 and 0)");
  kn_tensor *nul = NULL;
  expect_error(kn_autograd_grad(&f, 1, &nul, 1, NULL, false, false, false, &g), KN_EINVAL,
               "grad: input 0 is NULL");
}

/* ---- grad mode and detach ------------------------------------------------------- */

Test(gradmode, no_grad_scope_records_nothing) {
  kn_tensor *x = leaf(KN_SHAPE(2, 1), (double[]){1, 2});
  cr_assert(kn_is_grad_enabled());
  bool prev = kn_no_grad_begin();
  cr_assert(prev);
  cr_assert_not(kn_is_grad_enabled());
  kn_tensor *y = kn_mm(kn_t(x), x);
  bool inner = kn_no_grad_begin(); /* nested */
  cr_assert_not(inner);
  kn_no_grad_end(inner);
  cr_assert_not(kn_is_grad_enabled(), "the nested end restores the outer no_grad");
  kn_no_grad_end(prev);
  cr_assert(kn_is_grad_enabled());
  cr_assert_not(kn_requires_grad(y));
  cr_assert_null(kn_grad_fn_name(y));
  cr_assert(kn_is_leaf(y));
  expect_error(kn_backward(y, NULL), KN_EAUTOGRAD,
               "element 0 of tensors does not require grad and does not have a grad_fn");
}

Test(gradmode, set_grad_enabled_returns_previous) {
  cr_assert(kn_set_grad_enabled(false));
  cr_assert_not(kn_set_grad_enabled(false));
  cr_assert_not(kn_set_grad_enabled(true));
  cr_assert(kn_set_grad_enabled(true));
  cr_assert(kn_is_grad_enabled());
}

Test(gradmode, detach_shares_storage_without_history) {
  kn_tensor *x = leaf(KN_SHAPE(2, 1), (double[]){1, 2});
  kn_tensor *y = kn_t(x);
  kn_tensor *d = kn_detach(y);
  cr_assert_not_null(d);
  cr_assert(kn_same_storage(d, x));
  cr_assert_not(kn_requires_grad(d));
  cr_assert(kn_is_leaf(d));
  cr_assert_null(kn_grad_fn_name(d));
  cr_assert_eq(kn_ndim(d), 2);
  cr_assert_eq(kn_size(d, 1), 2);
  cr_assert_eq(kn_get(d, (int64_t[]){0, 1}), 2.0);
  uint64_t v = kn_tensor_version(x);
  kn__bump_version(d);
  cr_assert_eq(kn_tensor_version(x), v + 1, "detach shares the version counter");
  /* ops on the detached tensor record nothing */
  cr_assert_not(kn_requires_grad(kn_mm(d, x)) && kn_grad_fn_name(kn_mm(d, d)));
  cr_assert_null(kn_detach(NULL));
  cr_assert_eq(kn_last_status(), KN_EINVAL);
}

Test(gradmode, grad_mode_is_restored_after_backward) {
  kn_tensor *x = leaf(KN_SHAPE(1, 1), (double[]){3});
  kn_tensor *f = kn_mm(x, x);
  cr_assert_eq(kn_backward_ex(f, NULL, true, false), KN_OK);
  cr_assert(kn_is_grad_enabled());
  bool prev = kn_no_grad_begin();
  cr_assert_eq(kn_backward_ex(f, NULL, false, false), KN_OK, "backward works under no_grad");
  cr_assert_not(kn_is_grad_enabled());
  kn_no_grad_end(prev);
  cr_assert_eq(((double *)kn_data(kn_grad(x)))[0], 12.0);
}

/* A backward (here a custom one) returning the wrong shape is caught. */
static kn_status bad_shape(void *ctx, kn_tensor *const *go, int nout, kn_tensor **gi,
                           const bool *needs, int nin, bool cg) {
  (void)ctx, (void)go, (void)nout, (void)needs, (void)nin, (void)cg;
  gi[0] = kn_zeros(KN_SHAPE(3), KN_FLOAT64);
  return KN_OK;
}

Test(misuse, invalid_gradient_shape_from_a_node) {
  kn_tensor *x = leaf(KN_SHAPE(2, 1), (double[]){1, 2});
  kn_tensor *y = kn_detach(x);
  kn__node *n = kn__node_new_custom("BadBackward", bad_shape, NULL, NULL, &x, 1, 1);
  cr_assert_eq(kn__node_set_output(n, y, 0), KN_OK);
  kn__node_release(n);
  expect_error(kn_backward(y, val(KN_SHAPE(2, 1), (double[]){1, 1})), KN_EAUTOGRAD,
               "Function BadBackward returned an invalid gradient at index 0 - got [3] but "
               "expected shape compatible with [2, 1]");
  cr_assert_null(kn_grad(x));
}

/* Errors inside a run release every buffer (the suite checks live tensors). */
static kn_status fails(void *ctx, kn_tensor *const *go, int nout, kn_tensor **gi,
                       const bool *needs, int nin, bool cg) {
  (void)ctx, (void)go, (void)nout, (void)gi, (void)needs, (void)nin, (void)cg;
  return kn__error(KN_EUNSUPPORTED, "this backward always fails");
}

Test(misuse, failing_backward_leaks_nothing) {
  kn_tensor *x = leaf(KN_SHAPE(2, 1), (double[]){1, 2});
  kn_tensor *y = kn_detach(x);
  kn__node *n = kn__node_new_custom("FailBackward", fails, NULL, NULL, &x, 1, 1);
  cr_assert_eq(kn__node_set_output(n, y, 0), KN_OK);
  kn__node_release(n);
  kn_tensor *z = kn_mm(kn_t(y), kn_t(kn_t(y))); /* several nodes above the failing one */
  expect_error(kn_backward(z, NULL), KN_EUNSUPPORTED, "this backward always fails");
  kn_tensor *g = NULL;
  z = kn_mm(kn_t(y), kn_t(kn_t(y))); /* nodes that ran were freed: a fresh graph */
  expect_error(kn_autograd_grad(&z, 1, &x, 1, NULL, true, true, false, &g), KN_EUNSUPPORTED,
               "this backward always fails");
  cr_assert_null(g);
}
