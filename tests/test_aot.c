/*
** test_aot.c: AOT autograd ("aot_eager"): the joint graph and the default
** partition of a small known graph (literal graph code and saved values),
** outputs and gradients of compiled functions equal to eager (the same
** function run without compiling), one CompiledFunctionBackward node, the
** double-backward error, the inference graph, and an MLP trained for five
** SGD steps with the same losses and gradients as eager. The op sweep is
** test_aot_sweep.c.
*/
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "aot/aot.h"
#include "kiln/compile.h"
#include "kiln/kiln.h"
#include "support/dynamo_util.h"

TestSuite(aot, .init = kn_test_dynamo_setup, .fini = kn_test_dynamo_teardown);

static kn_tensor *sin_mul(kn_tensor *x, kn_tensor *y) { return kn_mul(kn_sin(x), y); }

static kn_tensor *leaf(int64_t n, int64_t m, bool rg, uint64_t seed) {
  kn_generator *g = kn_generator_new(seed);
  kn_tensor *t = kn_randn(KN_SHAPE(n, m), g, KN_FLOAT64);
  kn_generator_free(g);
  if (rg) kn_set_requires_grad(t, true);
  return t;
}

static double max_diff(kn_tensor *a, kn_tensor *b) {
  cr_assert(a && b, "missing tensor (%s)", kn_last_error());
  double v = INFINITY;
  cr_assert_eq(kn_item_double(kn_amax(kn_abs(kn_sub(a, b)), NULL, 0, false), &v), KN_OK, "%s", kn_last_error());
  return v;
}

Test(aot, sin_mul_outputs_and_grads_equal_eager) {
  kn_scope_begin();
  kn_compile_options o = {.backend = "aot_eager"};
  kn_compiled *f = KN_COMPILE(sin_mul, &o);
  kn_tensor *x = leaf(3, 4, true, 1), *y = leaf(3, 4, true, 2);
  kn_tensor *got = kn_call_t(f, x, y);
  cr_assert(got, "%s", kn_last_error());
  cr_expect_str_eq(kn_grad_fn_name(got), "CompiledFunctionBackward");
  cr_assert_eq(kn_backward(kn_sum(got), NULL), KN_OK, "%s", kn_last_error());
  kn_tensor *gx = kn_retain(kn_grad(x)), *gy = kn_retain(kn_grad(y));
  kn_tensor *x2 = leaf(3, 4, true, 1), *y2 = leaf(3, 4, true, 2);
  kn_tensor *want = sin_mul(x2, y2);
  kn_backward(kn_sum(want), NULL);
  cr_expect_leq(max_diff(got, want), 0.0);
  cr_expect_leq(max_diff(gx, kn_grad(x2)), 1e-15);
  cr_expect_leq(max_diff(gy, kn_grad(y2)), 1e-15);
  kn_release(gx);
  kn_release(gy);
  kn_compiled_free(f);
  kn_scope_end();
}
