/*
** test_reduce_ref.c: the reduction family against torch 1.13 references
** (tests/fixtures/reduce.json, written by tools/ref/gen_reduce.py): outputs
** of every case and, for differentiable cases, the gradients of sum() of
** the output.
*/
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "kiln/kiln.h"
#include "support/fixture.h"

#ifndef KN_REDUCE_REF_GRADS
#define KN_REDUCE_REF_GRADS 1
#endif

static int nnew; /* cases of any/all, logsumexp and the norm run */

/* The case's "ord" (a number, or "inf" / "-inf"). */
static double ord_of(const json_t *c) {
  const json_t *o = kn_fixture_param(c, "ord");
  if (json_is_string(o)) return json_string_value(o)[0] == '-' ? -INFINITY : INFINITY;
  return o ? json_number_value(o) : 2.0;
}

/* any/all, logsumexp and the vector norm (NULL op: not one of them). */
static bool run_new(const json_t *c, const char *op, kn_tensor *x, kn_tensor **y) {
  int64_t dims[8];
  int nd = kn_fixture_param_ints(c, "dims", dims, 8);
  bool kd = kn_fixture_param_bool(c, "keepdim", false);
  int64_t dim = kn_fixture_param_int(c, "dim", 0);
  const json_t *dt = kn_fixture_param(c, "dtype");
  kn_dtype dtype = KN_FLOAT32;
  if (!strcmp(op, "any")) *y = kn_any(x);
  else if (!strcmp(op, "any.dim")) *y = kn_any_dim(x, dim, kd);
  else if (!strcmp(op, "all")) *y = kn_all(x);
  else if (!strcmp(op, "all.dim")) *y = kn_all_dim(x, dim, kd);
  else if (!strcmp(op, "logsumexp")) *y = kn_logsumexp(x, dims, nd < 0 ? 0 : nd, kd);
  else if (!strcmp(op, "linalg_vector_norm") && dt && kn_fixture_dtype(json_string_value(dt), &dtype))
    *y = kn_linalg_vector_norm_dtype(x, ord_of(c), dims, nd < 0 ? 0 : nd, kd, dtype);
  else if (!strcmp(op, "linalg_vector_norm"))
    *y = kn_linalg_vector_norm(x, ord_of(c), dims, nd < 0 ? 0 : nd, kd);
  else return false;
  return true;
}

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
  kn_tensor *y = NULL;
  if (run_new(c, op, x, &y)) return nnew++, y;
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
  cr_assert_geq(nnew, 150, "only %d cases of any/all, logsumexp and norms ran", nnew);
  kn_fixture_free(f);
}
