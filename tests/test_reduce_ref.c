/*
** test_reduce_ref.c: the reduction family against torch 1.13 references
** (tests/fixtures/reduce.json, written by tools/ref/gen_reduce.py): outputs
** of every case and, for differentiable cases, the gradients of sum() of
** the output.
*/
#include <criterion/criterion.h>
#include <string.h>

#include "kiln/kiln.h"
#include "support/fixture.h"

#ifndef KN_REDUCE_REF_GRADS
#define KN_REDUCE_REF_GRADS 1
#endif

/* Run the case's op on x with its params. New reference or NULL. */
static kn_tensor *run(const json_t *c, kn_tensor *x) {
  const char *op = kn_fixture_op(c);
  int64_t dims[8];
  int nd = kn_fixture_param_ints(c, "dims", dims, 8);
  bool kd = kn_fixture_param_bool(c, "keepdim", false);
  int64_t dim = kn_fixture_param_int(c, "dim", 0);
  bool has_dim = kn_fixture_param(c, "dim") != NULL;
  int64_t corr = kn_fixture_param_int(c, "correction", 1);
  if (!strcmp(op, "sum")) return kn_sum(x);
  if (!strcmp(op, "sum.dim_IntList")) return kn_sum_dims(x, dims, nd, kd);
  if (!strcmp(op, "mean")) return kn_mean(x);
  if (!strcmp(op, "mean.dim")) return kn_mean_dims(x, dims, nd, kd);
  if (!strcmp(op, "prod")) return kn_prod(x);
  if (!strcmp(op, "prod.dim_int")) return kn_prod_dim(x, dim, kd);
  if (!strcmp(op, "amax")) return kn_amax(x, dims, nd < 0 ? 0 : nd, kd);
  if (!strcmp(op, "amin")) return kn_amin(x, dims, nd < 0 ? 0 : nd, kd);
  if (!strcmp(op, "argmax")) return has_dim ? kn_argmax_dim(x, dim, kd) : kn_argmax(x);
  if (!strcmp(op, "argmin")) return has_dim ? kn_argmin_dim(x, dim, kd) : kn_argmin(x);
  if (!strcmp(op, "var.correction")) return kn_var(x, dims, nd < 0 ? 0 : nd, corr, kd);
  if (!strcmp(op, "std.correction")) return kn_std(x, dims, nd < 0 ? 0 : nd, corr, kd);
  if (!strcmp(op, "cumsum")) return kn_cumsum(x, dim);
  if (!strcmp(op, "_softmax")) return kn_softmax(x, dim);
  if (!strcmp(op, "_log_softmax")) return kn_log_softmax(x, dim);
  cr_assert_fail("unknown op %s", op);
  return NULL;
}

static double tol_for(kn_dtype dt) { return dt == KN_FLOAT32 ? 1e-5 : 1e-10; }

Test(reduce_ref, outputs_and_gradients_match_torch) {
  kn_fixture *f = kn_fixture_load_named("reduce.json");
  cr_assert_not_null(f, "%s", kn_last_error());
  int64_t live0 = kn_live_tensors();
  int ngrad = 0;
  for (int i = 0; i < kn_fixture_ncases(f); i++) {
    const json_t *c = kn_fixture_case(f, i);
    kn_scope_begin();
    kn_tensor *x = kn_fixture_tensor(kn_fixture_input(c, 0));
    cr_assert_not_null(x, "%s", kn_last_error());
    bool prev = kn_set_grad_enabled(KN_REDUCE_REF_GRADS);
    kn_tensor *y = run(c, x);
    kn_set_grad_enabled(prev);
    cr_assert_not_null(y, "%s: %s", kn_fixture_name(c), kn_last_error());
    char why[256];
    double tol = tol_for(kn_tensor_dtype(x));
    cr_assert(kn_fixture_close(y, kn_fixture_output(c, 0), tol, tol, why, sizeof why), "%s: %s",
              kn_fixture_name(c), why);
    const json_t *g = kn_fixture_grad(c, 0);
    if (g && KN_REDUCE_REF_GRADS) {
      kn_tensor *ones = kn_ones(kn_ndim(y), kn_sizes(y), kn_tensor_dtype(y));
      kn_tensor *gx = NULL;
      cr_assert_eq(kn_autograd_grad(&y, 1, &x, 1, &ones, false, false, false, &gx), KN_OK,
                   "%s: %s", kn_fixture_name(c), kn_last_error());
      cr_assert(kn_fixture_close(gx, g, 1e-10, 1e-10, why, sizeof why), "%s grad: %s",
                kn_fixture_name(c), why);
      ngrad++;
    }
    kn_scope_end();
  }
  cr_assert_eq(kn_live_tensors(), live0);
  cr_assert(ngrad > 0 || !KN_REDUCE_REF_GRADS);
  kn_fixture_free(f);
}
