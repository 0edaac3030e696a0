/*
** test_nn_layout.c: memory layouts (strides) of gradients, against torch
** 1.13.1 (Debian's python3-torch, float32 leaves, a contiguous grad_output;
** the literals below are the strides it printed). Two views per case:
**   rule:  what the derivative rules return (torch.autograd.grad), where
**          PyTorch keeps a column-major mm operand's gradient column-major
**          and view ops hand back views;
**   grad:  the leaf's .grad after backward, which always follows the
**          leaf's layout (contiguous for contiguous leaves).
** The cases cover the matmul / linear / conv / bmm family (including
** linear's weight, whose gradient used to arrive as a transposed view) and
** common pointwise, reduction, shape, normalization, pooling and loss ops.
*/
#include "nn_util.h"
#include "support/leakcheck.h"

TestSuite(nn_layout, .init = kn_test_leakcheck_begin, .fini = kn_test_leakcheck_end);

typedef kn_tensor *(*case_fn)(kn_tensor **x);

static const int64_t s2[2] = {2, 2}, p1[2] = {1, 1};

static kn_tensor *f_mm(kn_tensor **x) { return kn_mm(x[0], x[1]); }
static kn_tensor *f_mm_colmajor_b(kn_tensor **x) { return kn_mm(x[0], x[1]); }
static kn_tensor *f_mm_colmajor_a(kn_tensor **x) { return kn_mm(x[0], x[1]); }
static kn_tensor *f_addmm(kn_tensor **x) {
  return kn_addmm(x[0], x[1], x[2], kn_int(1), kn_int(1));
}
static kn_tensor *f_addmm_scaled(kn_tensor **x) {
  return kn_addmm(x[0], x[1], x[2], kn_int(3), kn_int(2));
}
static kn_tensor *f_linear(kn_tensor **x) { return kn_linear(x[0], x[1], x[2]); }
static kn_tensor *f_linear_3d(kn_tensor **x) { return kn_linear(x[0], x[1], x[2]); }
static kn_tensor *f_linear_nobias(kn_tensor **x) { return kn_linear(x[0], x[1], NULL); }
static kn_tensor *f_bmm(kn_tensor **x) { return kn_bmm(x[0], x[1]); }
static kn_tensor *f_matmul_3d_2d(kn_tensor **x) { return kn_matmul(x[0], x[1]); }
static kn_tensor *f_matmul_broadcast(kn_tensor **x) { return kn_matmul(x[0], x[1]); }
static kn_tensor *f_matmul_1d_2d(kn_tensor **x) { return kn_matmul(x[0], x[1]); }
static kn_tensor *f_mv(kn_tensor **x) { return kn_mv(x[0], x[1]); }
static kn_tensor *f_dot(kn_tensor **x) { return kn_dot(x[0], x[1]); }
static kn_tensor *f_conv2d(kn_tensor **x) { return kn_conv2d(x[0], x[1], x[2], s2, p1, NULL, 2); }
static kn_tensor *f_conv2d_nobias(kn_tensor **x) {
  return kn_conv2d(x[0], x[1], NULL, NULL, NULL, NULL, 1);
}
static kn_tensor *f_add_broadcast(kn_tensor **x) { return kn_add(x[0], x[1]); }
static kn_tensor *f_mul(kn_tensor **x) { return kn_mul(x[0], x[1]); }
static kn_tensor *f_tanh(kn_tensor **x) { return kn_tanh(x[0]); }
static kn_tensor *f_relu(kn_tensor **x) { return kn_relu(x[0]); }
static kn_tensor *f_sigmoid(kn_tensor **x) { return kn_sigmoid(x[0]); }
static kn_tensor *f_softmax(kn_tensor **x) { return kn_softmax(x[0], 1); }
static kn_tensor *f_log_softmax(kn_tensor **x) { return kn_log_softmax(x[0], 0); }
static kn_tensor *f_sum_dim0(kn_tensor **x) { return kn_sum_dims(x[0], (int64_t[]){0}, 1, false); }
static kn_tensor *f_mean(kn_tensor **x) { return kn_mean(x[0]); }
static kn_tensor *f_transpose(kn_tensor **x) { return kn_transpose(x[0], 0, 1); }
static kn_tensor *f_transpose_scaled(kn_tensor **x) { /* a fresh transposed view reaches x */
  return kn_mul_scalar(kn_transpose(x[0], 0, 1), kn_int(2));
}
static kn_tensor *f_permute(kn_tensor **x) { return kn_permute(x[0], KN_SHAPE(2, 0, 1)); }
static kn_tensor *f_expand(kn_tensor **x) { return kn_expand(x[0], KN_SHAPE(3, 4)); }
static kn_tensor *f_reshape(kn_tensor **x) { return kn_reshape(x[0], KN_SHAPE(4, 3)); }
static kn_tensor *f_cat(kn_tensor **x) { return kn_cat(x, 2, 0); }
static kn_tensor *f_layer_norm(kn_tensor **x) {
  return kn_layer_norm(x[0], 1, (int64_t[]){4}, x[1], x[2], 1e-5);
}
static kn_tensor *f_batch_norm(kn_tensor **x) {
  return kn_batch_norm(x[0], NULL, NULL, x[1], x[2], true, 0.1, 1e-5);
}
static kn_tensor *f_max_pool2d(kn_tensor **x) {
  return kn_max_pool2d(x[0], s2, NULL, NULL, NULL, false);
}
static kn_tensor *f_avg_pool2d(kn_tensor **x) {
  return kn_avg_pool2d(x[0], s2, NULL, NULL, false, true, 0);
}
static kn_tensor *f_cross_entropy(kn_tensor **x) {
  kn_tensor *t = NT(KN_INT64, KN_SHAPE(4), 1, 0, 4, 2);
  return kn_cross_entropy(x[0], t, NULL, KN_REDUCTION_MEAN, -100, 0.0);
}
static kn_tensor *f_embedding(kn_tensor **x) {
  kn_tensor *idx = NT(KN_INT64, KN_SHAPE(2, 3), 1, 2, 1, 0, 9, 2);
  return kn_embedding(idx, x[0], KN_NO_PADDING_IDX, false);
}
static kn_tensor *f_index_select(kn_tensor **x) {
  return kn_index_select(x[0], 0, NT(KN_INT64, KN_SHAPE(2), 4, 1));
}

/* One input: shape, stored column-major or not, torch's strides of its
** gradient from the rule and in .grad. */
typedef struct lin {
  int ndim;
  int64_t sizes[4];
  bool colmajor;
  int64_t rule[4], grad[4];
} lin;

typedef struct lcase {
  const char *name;
  case_fn f;
  int n;
  lin in[3];
} lcase;

static const lcase cases[] = {
    {"mm", f_mm, 2, {{2, {3, 4}, false, {4, 1}, {4, 1}}, {2, {4, 5}, false, {5, 1}, {5, 1}}}},
    {"mm_colmajor_b", f_mm_colmajor_b, 2,
     {{2, {3, 4}, false, {4, 1}, {4, 1}},
      {2, {4, 5}, true, {1, 4}, {1, 4}}}},
    {"mm_colmajor_a", f_mm_colmajor_a, 2,
     {{2, {3, 4}, true, {1, 3}, {1, 3}},
      {2, {4, 5}, false, {5, 1}, {5, 1}}}},
    {"addmm", f_addmm, 3,
     {{1, {5}, false, {1}, {1}},
      {2, {3, 4}, false, {4, 1}, {4, 1}},
      {2, {4, 5}, false, {5, 1}, {5, 1}}}},
    {"addmm_scaled", f_addmm_scaled, 3,
     {{2, {3, 5}, false, {5, 1}, {5, 1}},
      {2, {3, 4}, false, {4, 1}, {4, 1}},
      {2, {4, 5}, false, {5, 1}, {5, 1}}}},
    {"linear", f_linear, 3,
     {{2, {6, 4}, false, {4, 1}, {4, 1}},
      {2, {5, 4}, false, {4, 1}, {4, 1}},
      {1, {5}, false, {1}, {1}}}},
    {"linear_3d", f_linear_3d, 3,
     {{3, {2, 3, 4}, false, {12, 4, 1}, {12, 4, 1}},
      {2, {5, 4}, false, {4, 1}, {4, 1}},
      {1, {5}, false, {1}, {1}}}},
    {"linear_nobias", f_linear_nobias, 2,
     {{2, {6, 4}, false, {4, 1}, {4, 1}},
      {2, {5, 4}, false, {4, 1}, {4, 1}}}},
    {"bmm", f_bmm, 2,
     {{3, {2, 3, 4}, false, {12, 4, 1}, {12, 4, 1}},
      {3, {2, 4, 5}, false, {20, 5, 1}, {20, 5, 1}}}},
    {"matmul_3d_2d", f_matmul_3d_2d, 2,
     {{3, {2, 3, 4}, false, {12, 4, 1}, {12, 4, 1}},
      {2, {4, 5}, false, {5, 1}, {5, 1}}}},
    {"matmul_broadcast", f_matmul_broadcast, 2,
     {{4, {2, 1, 3, 4}, false, {12, 12, 4, 1}, {12, 12, 4, 1}},
      {3, {5, 4, 6}, false, {24, 6, 1}, {24, 6, 1}}}},
    {"matmul_1d_2d", f_matmul_1d_2d, 2,
     {{1, {4}, false, {1}, {1}},
      {2, {4, 5}, false, {5, 1}, {5, 1}}}},
    {"mv", f_mv, 2, {{2, {3, 4}, false, {4, 1}, {4, 1}}, {1, {4}, false, {1}, {1}}}},
    {"dot", f_dot, 2, {{1, {4}, false, {1}, {1}}, {1, {4}, false, {1}, {1}}}},
    {"conv2d", f_conv2d, 3,
     {{4, {2, 4, 7, 7}, false, {196, 49, 7, 1}, {196, 49, 7, 1}},
      {4, {6, 2, 3, 3}, false, {18, 9, 3, 1}, {18, 9, 3, 1}},
      {1, {6}, false, {1}, {1}}}},
    {"conv2d_nobias", f_conv2d_nobias, 2,
     {{4, {1, 3, 5, 5}, false, {75, 25, 5, 1}, {75, 25, 5, 1}},
      {4, {4, 3, 3, 3}, false, {27, 9, 3, 1}, {27, 9, 3, 1}}}},
    {"add_broadcast", f_add_broadcast, 2,
     {{2, {3, 4}, false, {4, 1}, {4, 1}},
      {1, {4}, false, {1}, {1}}}},
    {"mul", f_mul, 2, {{2, {3, 4}, false, {4, 1}, {4, 1}}, {2, {3, 4}, false, {4, 1}, {4, 1}}}},
    {"tanh", f_tanh, 1, {{2, {3, 4}, false, {4, 1}, {4, 1}}}},
    {"relu", f_relu, 1, {{2, {3, 4}, false, {4, 1}, {4, 1}}}},
    {"sigmoid", f_sigmoid, 1, {{2, {3, 4}, false, {4, 1}, {4, 1}}}},
    {"softmax", f_softmax, 1, {{2, {3, 4}, false, {4, 1}, {4, 1}}}},
    {"log_softmax", f_log_softmax, 1, {{2, {3, 4}, false, {4, 1}, {4, 1}}}},
    {"sum_dim0", f_sum_dim0, 1, {{2, {3, 4}, false, {0, 1}, {4, 1}}}},
    {"mean", f_mean, 1, {{2, {3, 4}, false, {4, 1}, {4, 1}}}},
    {"transpose", f_transpose, 1, {{2, {3, 4}, false, {1, 3}, {4, 1}}}},
    {"transpose_scaled", f_transpose_scaled, 1, {{2, {3, 4}, false, {1, 3}, {4, 1}}}},
    {"permute", f_permute, 1, {{3, {2, 3, 4}, false, {3, 1, 6}, {12, 4, 1}}}},
    {"expand", f_expand, 1, {{2, {3, 1}, false, {1, 1}, {1, 1}}}},
    {"reshape", f_reshape, 1, {{2, {3, 4}, false, {4, 1}, {4, 1}}}},
    {"cat", f_cat, 2, {{2, {2, 3}, false, {3, 1}, {3, 1}}, {2, {4, 3}, false, {3, 1}, {3, 1}}}},
    {"layer_norm", f_layer_norm, 3,
     {{3, {2, 3, 4}, false, {12, 4, 1}, {12, 4, 1}},
      {1, {4}, false, {1}, {1}},
      {1, {4}, false, {1}, {1}}}},
    {"batch_norm", f_batch_norm, 3,
     {{4, {4, 3, 2, 2}, false, {12, 4, 2, 1}, {12, 4, 2, 1}},
      {1, {3}, false, {1}, {1}},
      {1, {3}, false, {1}, {1}}}},
    {"max_pool2d", f_max_pool2d, 1, {{4, {1, 2, 5, 5}, false, {50, 25, 5, 1}, {50, 25, 5, 1}}}},
    {"avg_pool2d", f_avg_pool2d, 1, {{4, {1, 2, 5, 5}, false, {50, 25, 5, 1}, {50, 25, 5, 1}}}},
    {"cross_entropy", f_cross_entropy, 1, {{2, {4, 5}, false, {5, 1}, {5, 1}}}},
    {"embedding", f_embedding, 1, {{2, {10, 3}, false, {3, 1}, {3, 1}}}},
    {"index_select", f_index_select, 1, {{2, {5, 3}, false, {3, 1}, {3, 1}}}},
};

/* A float32 leaf with irregular values, column-major when asked. */
static kn_tensor *leaf(const lin *l, double seed) {
  int64_t sz[4];
  for (int d = 0; d < l->ndim; d++) sz[d] = l->sizes[d];
  if (l->colmajor) sz[0] = l->sizes[1], sz[1] = l->sizes[0];
  kn_tensor *t = kn_empty(l->ndim, sz, KN_FLOAT32);
  float *p = kn_data(t);
  for (int64_t i = 0; i < kn_numel(t); i++) p[i] = (float)sin(seed + 0.37 * (double)i);
  if (l->colmajor) t = nt_swap(t, 0, 1);
  cr_assert_eq(kn_set_requires_grad(t, true), KN_OK, "%s", kn_last_error());
  return t;
}

static void expect_strides(const char *cname, const char *what, int k, const kn_tensor *g,
                           const lin *l, const int64_t *want) {
  cr_assert_not_null(g, "%s: no %s gradient for input %d", cname, what, k);
  cr_assert_eq(kn_ndim(g), l->ndim);
  for (int d = 0; d < l->ndim; d++)
    cr_assert_eq(kn_strides(g)[d], want[d],
                 "%s: %s gradient of input %d: stride %d is %lld, torch has %lld", cname, what,
                 k, d, (long long)kn_strides(g)[d], (long long)want[d]);
}

/* The case's output and a contiguous grad_output with irregular values. */
static kn_tensor *run_case(const lcase *c, kn_tensor **x, kn_tensor **gy) {
  kn_tensor *y = c->f(x);
  cr_assert_not_null(y, "%s: %s", c->name, kn_last_error());
  *gy = kn_empty(kn_ndim(y), kn_sizes(y), KN_FLOAT32);
  float *p = kn_data(*gy);
  for (int64_t i = 0; i < kn_numel(*gy); i++) p[i] = (float)cos(0.9 * (double)i);
  return y;
}

Test(nn_layout, derivative_rule_outputs_match_torch) {
  for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
    const lcase *c = &cases[ci];
    kn_scope_begin();
    kn_tensor *x[3], *gy, *g[3];
    for (int k = 0; k < c->n; k++) x[k] = leaf(&c->in[k], (double)k);
    kn_tensor *y = run_case(c, x, &gy);
    cr_assert_eq(kn_autograd_grad(&y, 1, x, c->n, &gy, false, false, false, g), KN_OK, "%s: %s",
                 c->name, kn_last_error());
    for (int k = 0; k < c->n; k++)
      expect_strides(c->name, "rule", k, g[k], &c->in[k], c->in[k].rule);
    kn_scope_end();
  }
}

Test(nn_layout, leaf_grads_follow_their_leaf) {
  for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
    const lcase *c = &cases[ci];
    kn_scope_begin();
    kn_tensor *x[3], *gy;
    for (int k = 0; k < c->n; k++) x[k] = leaf(&c->in[k], (double)k);
    kn_tensor *y = run_case(c, x, &gy);
    cr_assert_eq(kn_backward(y, gy), KN_OK, "%s: %s", c->name, kn_last_error());
    for (int k = 0; k < c->n; k++)
      expect_strides(c->name, ".grad", k, kn_grad(x[k]), &c->in[k], c->in[k].grad);
    kn_scope_end();
  }
}
