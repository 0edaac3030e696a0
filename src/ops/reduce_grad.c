/*
** ops/reduce_grad.c: derivative rules of the reductions, scans and softmax,
** written with public ops only, so they also run under tracing and are
** themselves differentiable (second order). Gradients of reduced outputs
** are restored to the input's shape by unsqueezing the reduced dims (when
** keepdim was false) and expanding, as torch's restore_reduced_dims. Sizes
** and counts are read as symbolic ints (ops/symsize.h), never as plain ints.
*/
#include <math.h>

#include "core/error.h"
#include "kiln/ops.h"
#include "ops/reduce.h"
#include "ops/symsize.h"

/* The reduced-dims mask of a reduction call whose dims argument is argi
** (-1: all dims). */
static void call_mask(const kn__call *c, int argi, bool *mask) {
  const kn_tensor *t = c->args[0].u.t;
  kn__arg all = KN_A_NONE;
  kn__reduce_mask(c->op->name, t, argi < 0 ? &all : &c->args[argi], mask);
}

/* g (a reduction's output shape) unsqueezed back to rank and expanded. */
static kn_tensor *restore(kn_tensor *g, const kn_tensor *self, const bool *mask, bool keepdim) {
  if (!keepdim)
    for (int d = 0; g && d < self->ndim; d++)
      if (mask[d]) g = kn_unsqueeze(g, d);
  return g ? kn__expand_like(g, self) : NULL;
}

/* t expanded to like's shape (binary ops then never broadcast an operand
** that may need a gradient). */
static kn_tensor *full(kn_tensor *t, const kn_tensor *like) { return kn__expand_like(t, like); }

static kn_status set_grad(kn__bwctx *ctx, int k, kn_tensor *g) {
  ctx->grad_inputs[k] = g;
  return g ? KN_OK : kn_last_status();
}

/* Layout of sum/mean/prod rows: dim rows are (self, dims, keepdim, dtype?). */
static bool dim_row(const kn__call *c) { return c->nargs >= 3 && c->args[2].kind == KN__A_BOOL; }

kn_status kn__bw_sum(kn__bwctx *ctx) {
  if (!ctx->needs_input_grad[0]) return KN_OK;
  const kn_tensor *self = ctx->call->args[0].u.t;
  bool mask[KN_MAX_DIMS], dr = dim_row(ctx->call);
  call_mask(ctx->call, dr ? 1 : -1, mask);
  return set_grad(ctx, 0, restore(ctx->grad_outputs[0], self, mask, dr && ctx->call->args[2].u.b));
}

kn_status kn__bw_mean(kn__bwctx *ctx) {
  if (!ctx->needs_input_grad[0]) return KN_OK;
  const kn_tensor *self = ctx->call->args[0].u.t;
  bool mask[KN_MAX_DIMS], dr = dim_row(ctx->call);
  call_mask(ctx->call, dr ? 1 : -1, mask);
  kn_tensor *g = restore(ctx->grad_outputs[0], self, mask, dr && ctx->call->args[2].u.b);
  return set_grad(ctx, 0, kn__div_symint(g, kn__count_sym(self, mask)));
}

/* d prod / d x_i = product of the others, also when x has zeros: with z the
** zeros and p the product of the non-zero elements of each reduced group,
** the gradient is p / x where the group has no zero, p at the single zero of
** a group with one zero, and 0 elsewhere. */
kn_status kn__bw_prod(kn__bwctx *ctx) {
  if (!ctx->needs_input_grad[0]) return KN_OK;
  kn_tensor *x = ctx->call->args[0].u.t;
  bool mask[KN_MAX_DIMS], dr = dim_row(ctx->call);
  bool keep = dr && ctx->call->args[2].u.b;
  call_mask(ctx->call, dr ? 1 : -1, mask);
  int64_t dims[KN_MAX_DIMS];
  int nd = 0;
  for (int d = 0; d < x->ndim; d++)
    if (mask[d]) dims[nd++] = d;
  kn_tensor *g = restore(ctx->grad_outputs[0], x, mask, keep);
  kn_tensor *one = kn_ones(0, NULL, x->dtype), *zero = kn_zeros(0, NULL, x->dtype);
  kn_tensor *z = kn_eq_scalar(x, kn_int(0));
  kn_tensor *xs = kn_where(z, one, x);
  kn_tensor *p = !dr ? kn_prod(xs) : x->ndim == 0 ? xs : kn_prod_dim(xs, dims[0], true);
  kn_tensor *nz = kn_sum_dims(z, dims, nd, true);
  kn_tensor *none = kn_eq_scalar(nz, kn_int(0));
  kn_tensor *lone = kn_logical_and(z, kn_eq_scalar(nz, kn_int(1)));
  kn_tensor *val = kn_where(z, p, kn_div(p, xs));
  kn_tensor *r = kn_where(kn_logical_or(none, lone), val, zero);
  return set_grad(ctx, 0, kn_mul(g, r));
}

/* amax/amin(self, dims, keepdim): the gradient is shared evenly among the
** elements equal to the result. */
kn_status kn__bw_amax(kn__bwctx *ctx) {
  if (!ctx->needs_input_grad[0]) return KN_OK;
  kn_tensor *x = ctx->call->args[0].u.t;
  bool mask[KN_MAX_DIMS], keep = ctx->call->args[2].u.b;
  call_mask(ctx->call, 1, mask);
  int64_t dims[KN_MAX_DIMS];
  int nd = 0;
  for (int d = 0; d < x->ndim; d++)
    if (mask[d]) dims[nd++] = d;
  kn_tensor *hit = kn_eq(x, restore(ctx->outputs[0], x, mask, keep));
  kn_tensor *cnt = kn_sum_dims(hit, dims, nd, true);
  kn_tensor *g = restore(ctx->grad_outputs[0], x, mask, keep);
  return set_grad(ctx, 0, kn_mul(kn_div(g, kn__expand_like(cnt, x)), hit));
}

/* var/std(self, dims?, correction?, keepdim) */
static kn_tensor *var_grad(kn__bwctx *ctx, kn_tensor *g, bool *mask, bool keep) {
  kn_tensor *x = ctx->call->args[0].u.t;
  int64_t corr = ctx->call->args[2].kind == KN__A_INT ? ctx->call->args[2].u.i : 1;
  int64_t dims[KN_MAX_DIMS];
  int nd = 0;
  for (int d = 0; d < x->ndim; d++)
    if (mask[d]) dims[nd++] = d;
  kn_sym n = kn__sym_sub(kn__count_sym(x, mask), kn__sym_const(corr));
  kn_tensor *mean = kn_mean_dims(x, dims, nd, true);
  kn_tensor *dev = kn_sub(x, kn__expand_like(mean, x));
  kn_tensor *r = kn_mul_scalar(restore(g, x, mask, keep), kn_float(2.0));
  /* 2 / (n - correction), and 2 / 0 = inf when there are too few elements */
  if (kn__sym_guard(n, KN__SYM_LE, kn__sym_const(0))) r = kn_div_scalar(r, kn_float(0));
  else r = kn__div_symint(r, n);
  return kn_mul(r, dev);
}

kn_status kn__bw_var(kn__bwctx *ctx) {
  if (!ctx->needs_input_grad[0]) return KN_OK;
  bool mask[KN_MAX_DIMS];
  call_mask(ctx->call, 1, mask);
  return set_grad(ctx, 0, var_grad(ctx, ctx->grad_outputs[0], mask, ctx->call->args[3].u.b));
}

/* std = sqrt(var): grad_var = grad / (2 std), 0 where std is 0 (as torch). */
kn_status kn__bw_std(kn__bwctx *ctx) {
  if (!ctx->needs_input_grad[0]) return KN_OK;
  bool mask[KN_MAX_DIMS];
  call_mask(ctx->call, 1, mask);
  kn_tensor *s = ctx->outputs[0];
  kn_tensor *gv = kn_div(ctx->grad_outputs[0], kn_mul_scalar(s, kn_int(2))); /* same shapes */
  gv = kn_where(kn_eq_scalar(s, kn_int(0)), kn_zeros(0, NULL, kn_tensor_dtype(s)), gv);
  return set_grad(ctx, 0, var_grad(ctx, gv, mask, ctx->call->args[3].u.b));
}

/* logsumexp(self, dims, keepdim): grad * exp(self - result). */
kn_status kn__bw_logsumexp(kn__bwctx *ctx) {
  if (!ctx->needs_input_grad[0]) return KN_OK;
  kn_tensor *x = ctx->call->args[0].u.t;
  bool mask[KN_MAX_DIMS], keep = ctx->call->args[2].u.b;
  call_mask(ctx->call, 1, mask);
  kn_tensor *g = restore(ctx->grad_outputs[0], x, mask, keep);
  kn_tensor *r = restore(ctx->outputs[0], x, mask, keep);
  return set_grad(ctx, 0, kn_mul(g, kn_exp(kn_sub(x, r))));
}

/* v with 0 where the norm is 0. */
static kn_tensor *zero_at(kn_tensor *v, kn_tensor *norm) {
  return kn_masked_fill(v, kn_eq_scalar(norm, kn_int(0)), kn_int(0));
}

/* inf-norms: sign(x) * grad shared evenly among the elements whose |x| is
** the norm, or NaN. */
static kn_tensor *inf_norm_grad(kn_tensor *x, kn_tensor *g, kn_tensor *nrm, const bool *mask) {
  int64_t dims[KN_MAX_DIMS];
  int nd = 0;
  for (int d = 0; d < x->ndim; d++)
    if (mask[d]) dims[nd++] = d;
  kn_tensor *ax = kn_abs(x);
  kn_tensor *hit = kn_logical_or(kn_eq(ax, nrm), kn_ne(ax, ax));
  kn_tensor *cnt = kn__expand_like(kn_sum_dims(hit, dims, nd, true), x);
  return kn_mul(kn_sgn(x), kn_mul(kn_div(g, cnt), hit));
}

/* torch's norm_backward with g and the norm restored to x's shape. */
static kn_tensor *norm_grad(kn_tensor *x, double p, kn_tensor *g, kn_tensor *nrm,
                            const bool *mask) {
  if (p == 0) return kn__expand_like(kn_zeros(0, NULL, kn_tensor_dtype(g)), x);
  if (p == 1) return kn_mul(kn_sgn(x), g);
  if (p == 2) return kn_mul(g, zero_at(kn_div(x, nrm), nrm));
  if (isinf(p)) return inf_norm_grad(x, g, nrm, mask);
  kn_tensor *pw = kn_pow_scalar(kn_abs(x), kn_float(p < 2 ? p - 1 : p - 2));
  if (p < 1) {
    kn_tensor *ss = kn_mul(kn_sgn(x), kn_masked_fill(pw, kn_eq_scalar(x, kn_int(0)), kn_int(0)));
    return kn_mul(kn_mul(ss, g), kn_pow_scalar(nrm, kn_float(1 - p)));
  }
  kn_tensor *ss = p < 2 ? kn_mul(kn_sgn(x), pw) : kn_mul(x, pw);
  return kn_mul(ss, zero_at(kn_div(g, kn_pow_scalar(nrm, kn_float(p - 1))), nrm));
}

/* linalg_vector_norm(self, ord, dims?, keepdim, dtype?) */
kn_status kn__bw_vector_norm(kn__bwctx *ctx) {
  if (!ctx->needs_input_grad[0]) return KN_OK;
  kn_tensor *x = ctx->call->args[0].u.t;
  bool mask[KN_MAX_DIMS], keep = ctx->call->args[3].u.b;
  call_mask(ctx->call, 2, mask);
  kn_tensor *g = restore(ctx->grad_outputs[0], x, mask, keep);
  kn_tensor *nrm = restore(ctx->outputs[0], x, mask, keep);
  kn_tensor *r = norm_grad(x, kn__vector_norm_ord(ctx->call), g, nrm, mask);
  if (r && kn_tensor_dtype(r) != x->dtype) r = kn_to(r, x->dtype);
  return set_grad(ctx, 0, r);
}

/* cumsum(self, dim, dtype?): the reversed cumulative sum of the gradient,
** sum(g) - cumsum(g) + g, cast back to the input's dtype. */
kn_status kn__bw_cumsum(kn__bwctx *ctx) {
  if (!ctx->needs_input_grad[0]) return KN_OK;
  kn_tensor *x = ctx->call->args[0].u.t, *g = ctx->grad_outputs[0];
  int64_t dim = ctx->call->args[1].u.i;
  if (x->ndim == 0) return set_grad(ctx, 0, kn_to(g, x->dtype));
  kn_tensor *tot = kn_sum_dims(g, &dim, 1, true);
  tot = kn__expand_like(tot, g);
  kn_tensor *r = kn_add(kn_sub(tot, kn_cumsum(g, dim)), g);
  if (r && kn_tensor_dtype(r) != x->dtype) r = kn_to(r, x->dtype);
  return set_grad(ctx, 0, r);
}

kn_status kn__bw_softmax(kn__bwctx *ctx) {
  if (!ctx->needs_input_grad[0]) return KN_OK;
  return set_grad(ctx, 0, kn_softmax_backward_data(ctx->grad_outputs[0], ctx->outputs[0],
                                                   ctx->call->args[1].u.i));
}

kn_status kn__bw_log_softmax(kn__bwctx *ctx) {
  if (!ctx->needs_input_grad[0]) return KN_OK;
  return set_grad(ctx, 0, kn_log_softmax_backward_data(ctx->grad_outputs[0], ctx->outputs[0],
                                                       ctx->call->args[1].u.i));
}

/* r = y * (g - sum(g y)): dr/dg . h = y (h - sum(h y)) and
** dr/dy . h = h (g - sum(g y)) - g sum(h y). */
kn_status kn__bw_softmax_bwd(kn__bwctx *ctx) {
  kn_tensor *g = ctx->call->args[0].u.t, *y = ctx->call->args[1].u.t, *h = ctx->grad_outputs[0];
  int64_t dim = ctx->call->args[2].u.i;
  kn_status st = KN_OK;
  if (ctx->needs_input_grad[0]) st = set_grad(ctx, 0, kn_softmax_backward_data(h, y, dim));
  if (st == KN_OK && ctx->needs_input_grad[1]) {
    kn_tensor *sgy = full(kn_sum_dims(kn_mul(g, y), &dim, 1, true), g);
    kn_tensor *shy = full(kn_sum_dims(kn_mul(h, y), &dim, 1, true), g);
    st = set_grad(ctx, 1, kn_sub(kn_mul(h, kn_sub(g, sgy)), kn_mul(g, shy)));
  }
  return st;
}

/* r = g - exp(y) sum(g): dr/dg . h = h - sum(h exp(y)) and
** dr/dy . h = -h exp(y) sum(g). */
kn_status kn__bw_log_softmax_bwd(kn__bwctx *ctx) {
  kn_tensor *g = ctx->call->args[0].u.t, *y = ctx->call->args[1].u.t, *h = ctx->grad_outputs[0];
  int64_t dim = ctx->call->args[2].u.i;
  kn_tensor *e = kn_exp(y);
  kn_status st = KN_OK;
  if (ctx->needs_input_grad[0])
    st = set_grad(ctx, 0, kn_sub(h, full(kn_sum_dims(kn_mul(h, e), &dim, 1, true), g)));
  if (st == KN_OK && ctx->needs_input_grad[1])
    st = set_grad(ctx, 1, kn_neg(kn_mul(kn_mul(h, e), full(kn_sum_dims(g, &dim, 1, true), g))));
  return st;
}
