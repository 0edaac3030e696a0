/*
** test_shape_grad.c: finite-difference gradient checks in float64 (first
** and second order) for every differentiable shape op, and the grad_fn
** names torch 1.13 shows for them.
*/
#include <criterion/criterion.h>
#include <string.h>

#include "kiln/kiln.h"
#include "support/gradcheck.h"

static int64_t live0;
static void start(void) {
  live0 = kn_live_tensors();
  kn_scope_begin();
}
static void finish(void) {
  kn_scope_end();
  cr_assert_eq(kn_live_tensors(), live0, "leaked %lld tensors",
               (long long)(kn_live_tensors() - live0));
}
TestSuite(shape_grad, .init = start, .fini = finish);

/* A float64 leaf with distinct values (0.5 + 0.37 i mod 3 - 1), requiring grad. */
static kn_tensor *leaf(int n, const int64_t *sizes) {
  kn_tensor *t = kn_empty(n, sizes, KN_FLOAT64);
  double *p = kn_data(t);
  for (int64_t i = 0; i < kn_numel(t); i++) p[i] = 0.5 + (double)((i * 37) % 300) / 100.0 - 1;
  kn_set_requires_grad(t, true);
  return t;
}

typedef kn_tensor *(*unary)(kn_tensor *x);

static kn_tensor *call_unary(kn_tensor *const *in, int n, void *ud) {
  (void)n;
  return ((unary)ud)(in[0]);
}

static void check1(const char *what, unary f, kn_tensor *x, bool second) {
  char why[512];
  kn_tensor *in[] = {x};
  cr_assert(kn_gradcheck(call_unary, in, 1, (void *)f, why, sizeof why), "%s: %s", what, why);
  if (second)
    cr_assert(kn_gradgradcheck(call_unary, in, 1, (void *)f, why, sizeof why), "%s (2nd): %s",
              what, why);
}

static void expect_fn(const kn_tensor *t, const char *name) {
  cr_assert_not_null(t, "%s", kn_last_error());
  const char *got = kn_grad_fn_name(t);
  cr_assert_str_eq(got ? got : "(none)", name);
}

/* ---- the ops under test, as unary functions of x ---------------------------------- */
static kn_tensor *f_view(kn_tensor *x) { return kn_view(x, KN_SHAPE(3, -1)); }
static kn_tensor *f_reshape_alias(kn_tensor *x) { return kn_reshape(x, KN_SHAPE(-1)); }
static kn_tensor *f_reshape_copy(kn_tensor *x) { return kn_reshape(kn_t(x), KN_SHAPE(2, 6)); }
static kn_tensor *f_permute(kn_tensor *x) {
  return kn_permute(kn_view(x, KN_SHAPE(2, 2, 3)), KN_SHAPE(2, 0, 1));
}
static kn_tensor *f_transpose(kn_tensor *x) { return kn_transpose(x, -1, 0); }
static kn_tensor *f_t(kn_tensor *x) { return kn_t(x); }
static kn_tensor *f_expand(kn_tensor *x) {
  return kn_expand(kn_slice(x, 1, 0, 1, 1), KN_SHAPE(2, 3, 4));
}
static kn_tensor *f_unsqueeze(kn_tensor *x) { return kn_unsqueeze(x, -2); }
static kn_tensor *f_squeeze(kn_tensor *x) { return kn_squeeze(kn_unsqueeze(x, 1)); }
static kn_tensor *f_squeeze_dim(kn_tensor *x) { return kn_squeeze_dim(kn_unsqueeze(x, 0), 0); }
static kn_tensor *f_flatten(kn_tensor *x) { return kn_flatten(kn_transpose(x, 0, 1), 0, 1); }
static kn_tensor *f_slice(kn_tensor *x) { return kn_slice(x, 1, -3, KN_SLICE_END, 2); }
static kn_tensor *f_narrow(kn_tensor *x) { return kn_narrow(x, 0, 1, 2); }
static kn_tensor *f_select(kn_tensor *x) { return kn_select(x, 1, -1); }
static kn_tensor *f_diagonal(kn_tensor *x) { return kn_diagonal(x, 1, 1, 0); }
static kn_tensor *f_as_strided(kn_tensor *x) {
  return kn_as_strided(x, KN_SHAPE(3, 3), (const int64_t[]){2, 1}, 1); /* overlapping */
}
static kn_tensor *f_unbind(kn_tensor *x) {
  kn_tensor *o[4];
  return kn_unbind(x, 1, o, 4) == 4 ? o[2] : NULL;
}
static kn_tensor *f_split(kn_tensor *x) {
  kn_tensor *o[4];
  return kn_split(x, 2, 0, o, 4) == 2 ? o[1] : NULL;
}
static kn_tensor *f_split_sizes(kn_tensor *x) {
  kn_tensor *o[4];
  return kn_split_sizes(x, KN_SHAPE(1, 3), 1, o, 4) == 2 ? o[1] : NULL;
}
static kn_tensor *f_chunk(kn_tensor *x) {
  kn_tensor *o[4];
  if (kn_chunk(x, 2, 1, o, 4) != 2) return NULL;
  kn_tensor *both[] = {o[1], o[0]};
  return kn_cat(both, 2, 0);
}
static kn_tensor *f_cat(kn_tensor *x) {
  kn_tensor *e = kn_zeros(KN_SHAPE(0), KN_FLOAT64);
  kn_tensor *l[] = {kn_slice(x, 0, 1, KN_SLICE_END, 1), e, x};
  return kn_cat(l, 3, 0);
}
static kn_tensor *f_stack(kn_tensor *x) {
  kn_tensor *l[] = {x, kn_t(kn_view(x, KN_SHAPE(4, 3)))};
  return kn_stack(l, 2, -1);
}

/* x is [3, 4] for every case. */
static const struct {
  const char *name;
  unary f;
  const char *grad_fn;
} cases[] = {
    {"view", f_view, "ViewBackward0"},
    {"reshape_alias", f_reshape_alias, "ReshapeAliasBackward0"},
    {"reshape_copy", f_reshape_copy, "UnsafeViewBackward0"},
    {"permute", f_permute, "PermuteBackward0"},
    {"transpose", f_transpose, "TransposeBackward0"},
    {"t", f_t, "TBackward0"},
    {"expand", f_expand, "ExpandBackward0"},
    {"unsqueeze", f_unsqueeze, "UnsqueezeBackward0"},
    {"squeeze", f_squeeze, "SqueezeBackward0"},
    {"squeeze_dim", f_squeeze_dim, "SqueezeBackward1"},
    {"flatten", f_flatten, "UnsafeViewBackward0"},
    {"slice", f_slice, "SliceBackward0"},
    {"narrow", f_narrow, "SliceBackward0"},
    {"select", f_select, "SelectBackward0"},
    {"diagonal", f_diagonal, "DiagonalBackward0"},
    {"as_strided", f_as_strided, "AsStridedBackward0"},
    {"unbind", f_unbind, "UnbindBackward0"},
    {"split", f_split, "SplitBackward0"},
    {"split_with_sizes", f_split_sizes, "SplitWithSizesBackward0"},
    {"chunk", f_chunk, "CatBackward0"},
    {"cat", f_cat, "CatBackward0"},
    {"stack", f_stack, "StackBackward0"},
};

Test(shape_grad, first_and_second_order_and_grad_fn_names) {
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    kn_scope_begin();
    kn_tensor *x = leaf(KN_SHAPE(3, 4));
    expect_fn(cases[i].f(x), cases[i].grad_fn);
    check1(cases[i].name, cases[i].f, x, true);
    kn_scope_end();
  }
}

Test(shape_grad, chunk_outputs_are_split_views) {
  kn_tensor *x = leaf(KN_SHAPE(3, 4));
  kn_tensor *o[4];
  cr_assert_eq(kn_chunk(x, 2, 1, o, 4), 2);
  expect_fn(o[0], "SplitBackward0");
  expect_fn(kn_flatten(x, 0, -1), "ReshapeAliasBackward0");
}

/* Binary ops: gradients of both inputs. */
static kn_tensor *call_scatter(kn_tensor *const *in, int n, void *ud) {
  (void)n;
  switch ((int)(intptr_t)ud) {
  case 0: return kn_slice_scatter(in[0], in[1], 1, 1, KN_SLICE_END, 2);
  case 1: return kn_select_scatter(in[0], in[1], 0, -1);
  default: return kn_diagonal_scatter(in[0], in[1], -1, 0, 1);
  }
}

Test(shape_grad, view_scatter_ops) {
  const int64_t src_sizes[3][2] = {{3, 2}, {4, 0}, {2, 0}};
  const int src_nd[3] = {2, 1, 1};
  const char *names[3] = {"SliceScatterBackward0", "SelectScatterBackward0",
                          "DiagonalScatterBackward0"};
  for (int k = 0; k < 3; k++) {
    kn_tensor *in[] = {leaf(KN_SHAPE(3, 4)), leaf(src_nd[k], src_sizes[k])};
    expect_fn(call_scatter(in, 2, (void *)(intptr_t)k), names[k]);
    char why[512];
    cr_assert(kn_gradcheck(call_scatter, in, 2, (void *)(intptr_t)k, why, sizeof why), "%d: %s",
              k, why);
    cr_assert(kn_gradgradcheck(call_scatter, in, 2, (void *)(intptr_t)k, why, sizeof why),
              "%d: %s", k, why);
  }
}

Test(shape_grad, backward_through_views_accumulates_into_the_base) {
  kn_tensor *x = leaf(KN_SHAPE(2, 3));
  kn_tensor *y = kn_expand(kn_unsqueeze(kn_select(x, 0, 1), 0), KN_SHAPE(4, 3));
  cr_assert_eq(kn_backward(y, kn_ones(KN_SHAPE(4, 3), KN_FLOAT64)), KN_OK, "%s", kn_last_error());
  kn_tensor *g = kn_grad(x);
  cr_assert_not_null(g);
  const double want[2][3] = {{0, 0, 0}, {4, 4, 4}};
  for (int i = 0; i < 2; i++)
    for (int j = 0; j < 3; j++)
      cr_assert_eq(kn_get(g, (int64_t[]){i, j}), want[i][j]);
}
