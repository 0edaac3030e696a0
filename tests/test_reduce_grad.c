/*
** test_reduce_grad.c: finite-difference gradient checks (float64) of every
** differentiable op of the reduction family and the losses, with
** second-order checks where the rule is itself differentiable; also the
** grad_fn names torch 1.13 shows and gradients on non-contiguous inputs.
*/
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "kiln/kiln.h"
#include "support/gradcheck.h"
#include "support/reduce_test_util.h"

typedef enum {
  G_SUM, G_SUM_DIMS, G_MEAN, G_MEAN_DIMS, G_PROD, G_PROD_DIM, G_AMAX, G_AMIN, G_VAR, G_STD,
  G_CUMSUM, G_SOFTMAX, G_LOG_SOFTMAX, G_MSE, G_L1, G_BCE, G_NLL, G_CE
} gop;

typedef struct gcase {
  const char *name;
  gop op;
  int64_t dims[3];
  int nd;
  bool keepdim;
  int64_t arg;        /* dim / correction / reduction */
  bool second;        /* also check second order */
  bool weight;        /* losses: use a weight */
  double smoothing;   /* cross_entropy */
} gcase;

static kn_tensor *target_idx(void) {
  return rt_from(KN_INT64, KN_SHAPE(3), (double[]){2, 0, -100});
}

static kn_tensor *fn(kn_tensor *const *in, int n, void *ud) {
  (void)n;
  const gcase *c = ud;
  kn_tensor *x = in[0];
  switch (c->op) {
  case G_SUM: return kn_sum(x);
  case G_SUM_DIMS: return kn_sum_dims(x, c->dims, c->nd, c->keepdim);
  case G_MEAN: return kn_mean(x);
  case G_MEAN_DIMS: return kn_mean_dims(x, c->dims, c->nd, c->keepdim);
  case G_PROD: return kn_prod(x);
  case G_PROD_DIM: return kn_prod_dim(x, c->arg, c->keepdim);
  case G_AMAX: return kn_amax(x, c->dims, c->nd, c->keepdim);
  case G_AMIN: return kn_amin(x, c->dims, c->nd, c->keepdim);
  case G_VAR: return kn_var(x, c->dims, c->nd, c->arg, c->keepdim);
  case G_STD: return kn_std(x, c->dims, c->nd, c->arg, c->keepdim);
  case G_CUMSUM: return kn_cumsum(x, c->arg);
  case G_SOFTMAX: return kn_softmax(x, c->arg);
  case G_LOG_SOFTMAX: return kn_log_softmax(x, c->arg);
  case G_MSE: return kn_mse_loss(x, in[1], (kn_reduction)c->arg);
  case G_L1: return kn_l1_loss(x, in[1], (kn_reduction)c->arg);
  case G_BCE: return kn_binary_cross_entropy(x, in[1], c->weight ? in[2] : NULL,
                                             (kn_reduction)c->arg);
  case G_NLL:
    return kn_nll_loss(x, target_idx(), c->weight ? in[1] : NULL, (kn_reduction)c->arg, -100);
  case G_CE:
    return kn_cross_entropy(x, target_idx(), c->weight ? in[1] : NULL, (kn_reduction)c->arg,
                            -100, c->smoothing);
  }
  return NULL;
}

static uint32_t seed = 7;
static double rnd(void) {
  seed = seed * 1664525u + 1013904223u;
  return (double)(seed >> 8) / (double)(1u << 24);
}

/* A float64 input requiring grad with values in [lo, hi). */
static kn_tensor *input(int ndim, const int64_t *sizes, double lo, double hi) {
  kn_tensor *t = kn_empty(ndim, sizes, KN_FLOAT64);
  double *p = kn_data(t);
  for (int64_t i = 0; i < kn_numel(t); i++) p[i] = lo + (hi - lo) * rnd();
  kn_set_requires_grad(t, true);
  return t;
}

static void check(const gcase *c) {
  kn_scope_begin();
  kn_tensor *in[3] = {NULL, NULL, NULL};
  int n = 1;
  if (c->op == G_BCE) {
    in[0] = input(KN_SHAPE(3, 4), 0.1, 0.9);
    in[1] = input(KN_SHAPE(3, 4), 0, 1);
    n = 2;
    if (c->weight) {
      in[2] = rt_from(KN_FLOAT64, KN_SHAPE(4), (double[]){1, 0.5, 2, 1.5});
      n = 3;
    }
  } else if (c->op == G_NLL || c->op == G_CE) {
    in[0] = input(KN_SHAPE(3, 4), -2, 2);
    if (c->weight) in[1] = rt_from(KN_FLOAT64, KN_SHAPE(4), (double[]){0.5, 2, 1, 0.25});
    n = c->weight ? 2 : 1;
  } else if (c->op == G_MSE || c->op == G_L1) {
    in[0] = input(KN_SHAPE(3, 4), -1, 1);
    in[1] = input(KN_SHAPE(4), 2, 3); /* a broadcast target, far from x (l1's kink) */
    n = 2;
  } else {
    in[0] = input(KN_SHAPE(3, 4, 2), -2, 2);
    if (c->op == G_PROD || c->op == G_PROD_DIM) ((double *)kn_data(in[0]))[5] = 0; /* a zero */
  }
  char why[512] = "";
  cr_assert(kn_gradcheck(fn, in, n, (void *)c, why, sizeof why), "%s: %s", c->name, why);
  if (c->second)
    cr_assert(kn_gradgradcheck(fn, in, n, (void *)c, why, sizeof why), "%s (2nd order): %s",
              c->name, why);
  kn_scope_end();
}

static const gcase cases[] = {
    {"sum", G_SUM, {0}, 0, false, 0, true, false, 0},
    {"sum_d1", G_SUM_DIMS, {1}, 1, false, 0, true, false, 0},
    {"sum_d02_kd", G_SUM_DIMS, {0, -1}, 2, true, 0, true, false, 0},
    {"mean", G_MEAN, {0}, 0, false, 0, true, false, 0},
    {"mean_d2", G_MEAN_DIMS, {2}, 1, false, 0, true, false, 0},
    {"mean_d01_kd", G_MEAN_DIMS, {0, 1}, 2, true, 0, true, false, 0},
    {"prod_zero", G_PROD, {0}, 0, false, 0, false, false, 0},
    {"prod_d1_zero", G_PROD_DIM, {0}, 0, false, 1, false, false, 0},
    {"prod_d2_kd", G_PROD_DIM, {0}, 0, true, -1, false, false, 0},
    {"amax_d1", G_AMAX, {1}, 1, false, 0, true, false, 0},
    {"amax_all", G_AMAX, {0}, 0, false, 0, false, false, 0},
    {"amin_d02_kd", G_AMIN, {0, 2}, 2, true, 0, false, false, 0},
    {"var_d1", G_VAR, {1}, 1, false, 1, true, false, 0},
    {"var_all_c0", G_VAR, {0}, 0, false, 0, true, false, 0},
    {"var_d02_kd_c2", G_VAR, {0, 2}, 2, true, 2, false, false, 0},
    {"std_d1", G_STD, {1}, 1, false, 1, true, false, 0},
    {"std_all_kd", G_STD, {0}, 0, true, 1, false, false, 0},
    {"cumsum_d1", G_CUMSUM, {0}, 0, false, 1, true, false, 0},
    {"cumsum_d0", G_CUMSUM, {0}, 0, false, 0, false, false, 0},
    {"softmax_d1", G_SOFTMAX, {0}, 0, false, 1, true, false, 0},
    {"softmax_dlast", G_SOFTMAX, {0}, 0, false, -1, true, false, 0},
    {"log_softmax_d0", G_LOG_SOFTMAX, {0}, 0, false, 0, true, false, 0},
    {"log_softmax_dlast", G_LOG_SOFTMAX, {0}, 0, false, -1, true, false, 0},
    {"mse_mean", G_MSE, {0}, 0, false, KN_REDUCTION_MEAN, true, false, 0},
    {"mse_sum", G_MSE, {0}, 0, false, KN_REDUCTION_SUM, true, false, 0},
    {"mse_none", G_MSE, {0}, 0, false, KN_REDUCTION_NONE, true, false, 0},
    {"l1_mean", G_L1, {0}, 0, false, KN_REDUCTION_MEAN, false, false, 0},
    {"l1_none", G_L1, {0}, 0, false, KN_REDUCTION_NONE, false, false, 0},
    {"bce_mean", G_BCE, {0}, 0, false, KN_REDUCTION_MEAN, true, false, 0},
    {"bce_w_none", G_BCE, {0}, 0, false, KN_REDUCTION_NONE, false, true, 0},
    {"bce_w_sum", G_BCE, {0}, 0, false, KN_REDUCTION_SUM, false, true, 0},
    {"nll_mean", G_NLL, {0}, 0, false, KN_REDUCTION_MEAN, true, false, 0},
    {"nll_w_none", G_NLL, {0}, 0, false, KN_REDUCTION_NONE, true, true, 0},
    {"nll_w_sum", G_NLL, {0}, 0, false, KN_REDUCTION_SUM, false, true, 0},
    {"ce_mean", G_CE, {0}, 0, false, KN_REDUCTION_MEAN, true, false, 0},
    {"ce_w_none", G_CE, {0}, 0, false, KN_REDUCTION_NONE, false, true, 0},
    {"ce_ls_w_mean", G_CE, {0}, 0, false, KN_REDUCTION_MEAN, true, true, 0.2},
    {"ce_ls_sum", G_CE, {0}, 0, false, KN_REDUCTION_SUM, false, false, 0.1},
};

Test(reduce_grad, finite_differences_first_and_second_order) {
  int64_t live = kn_live_tensors();
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) check(&cases[i]);
  cr_assert_eq(kn_live_tensors(), live);
}

Test(reduce_grad, grad_fn_names_match_torch) {
  kn_scope_begin();
  kn_tensor *x = input(KN_SHAPE(2, 3), -1, 1);
  kn_tensor *t = rt_from(KN_INT64, KN_SHAPE(2), (double[]){0, 2});
  struct { kn_tensor *y; const char *name; } want[] = {
      {kn_sum(x), "SumBackward0"},
      {kn_sum_dims(x, (int64_t[]){1}, 1, false), "SumBackward1"},
      {kn_mean(x), "MeanBackward0"},
      {kn_mean_dims(x, (int64_t[]){0}, 1, false), "MeanBackward1"},
      {kn_prod(x), "ProdBackward0"},
      {kn_prod_dim(x, 1, false), "ProdBackward1"},
      {kn_amax(x, (int64_t[]){1}, 1, false), "AmaxBackward0"},
      {kn_amin(x, NULL, 0, false), "AminBackward0"},
      {kn_var(x, (int64_t[]){1}, 1, 1, false), "VarBackward0"},
      {kn_std(x, NULL, 0, 1, false), "StdBackward0"},
      {kn_cumsum(x, 1), "CumsumBackward0"},
      {kn_softmax(x, 1), "SoftmaxBackward0"},
      {kn_log_softmax(x, 1), "LogSoftmaxBackward0"},
      {kn_mse_loss(x, kn_zeros(KN_SHAPE(2, 3), KN_FLOAT64), KN_REDUCTION_MEAN), "MseLossBackward0"},
      {kn_l1_loss(x, kn_zeros(KN_SHAPE(2, 3), KN_FLOAT64), KN_REDUCTION_MEAN), "MeanBackward0"},
      {kn_nll_loss(x, t, NULL, KN_REDUCTION_MEAN, -100), "NllLossBackward0"},
      {kn_cross_entropy(x, t, NULL, KN_REDUCTION_MEAN, -100, 0), "NllLossBackward0"},
      {kn_cross_entropy(x, t, NULL, KN_REDUCTION_MEAN, -100, 0.1), "AddBackward0"},
      {kn_nll_loss(kn_expand(kn_unsqueeze(kn_unsqueeze(x, 2), 3), 4, (int64_t[]){2, 3, 2, 2}),
                   kn_zeros(KN_SHAPE(2, 2, 2), KN_INT64), NULL, KN_REDUCTION_SUM, -100),
       "NllLoss2DBackward0"},
  };
  for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
    cr_assert_not_null(want[i].y, "%zu: %s", i, kn_last_error());
    cr_assert_str_eq(kn_grad_fn_name(want[i].y), want[i].name, "case %zu", i);
  }
  kn_tensor *am = kn_argmax_dim(x, 1, false);
  cr_assert_not(kn_requires_grad(am));
  cr_assert_null(kn_grad_fn_name(am));
  kn_tensor *p = kn_sigmoid(x);
  kn_tensor *b = kn_binary_cross_entropy(p, kn_zeros(KN_SHAPE(2, 3), KN_FLOAT64), NULL,
                                         KN_REDUCTION_SUM);
  cr_assert_str_eq(kn_grad_fn_name(b), "BinaryCrossEntropyBackward0");
  kn_scope_end();
}

Test(reduce_grad, backward_through_transposed_input_accumulates_into_leaf) {
  kn_scope_begin();
  kn_tensor *x = rt_from(KN_FLOAT64, KN_SHAPE(2, 3), (double[]){1, 2, 3, 4, 5, 6});
  kn_set_requires_grad(x, true);
  kn_tensor *xt = kn_transpose(x, 0, 1); /* [3, 2] */
  kn_tensor *s = kn_sum(kn_mul(kn_sum_dims(xt, (int64_t[]){0}, 1, false),
                               rt_from(KN_FLOAT64, KN_SHAPE(2), (double[]){1, 10})));
  cr_assert_eq(kn_backward(s, NULL), KN_OK, "%s", kn_last_error());
  rt_expect(kn_grad(x), (double[]){1, 1, 1, 10, 10, 10}, 0);
  kn_tensor *y = rt_from(KN_FLOAT64, KN_SHAPE(2, 2), (double[]){1, 3, 3, 2});
  kn_set_requires_grad(y, true);
  cr_assert_eq(kn_backward(kn_amax(y, NULL, 0, false), NULL), KN_OK);
  rt_expect(kn_grad(y), (double[]){0, 0.5, 0.5, 0}, 0); /* ties share evenly */
  kn_scope_end();
}
