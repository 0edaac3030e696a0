/*
** ops/loss_grad.c: derivative rules of the losses, written with public ops
** only (they run under tracing too and are differentiable themselves), and
** the composite pieces built from public ops: l1_loss and cross_entropy's
** label smoothing (torch 1.13's formulas).
*/
#include "core/error.h"
#include "kiln/ops.h"
#include "ops/loss.h"
#include "ops/symsize.h"

static kn_status set_grad(kn__bwctx *ctx, int k, kn_tensor *g) {
  ctx->grad_inputs[k] = g;
  return g ? KN_OK : kn_last_status();
}

static kn_tensor *reduce_as(kn_tensor *l, kn_reduction r) {
  return r == KN_REDUCTION_NONE ? l : r == KN_REDUCTION_MEAN ? kn_mean(l) : kn_sum(l);
}

/* l1_loss(self, target, reduction) = |self - target| reduced. */
kn_status kn__k_l1_loss(const kn__call *c, kn__outs *out) {
  kn_status st = kn__loss_check_reduction(c->args[2].u.i);
  if (st != KN_OK) return st;
  kn_scope_begin();
  kn_tensor *l = kn_abs(kn_sub(c->args[0].u.t, c->args[1].u.t));
  st = kn__loss_push(out, l ? reduce_as(l, (kn_reduction)c->args[2].u.i) : NULL);
  kn_scope_end();
  return st;
}

kn_tensor *kn__cross_entropy_smooth(kn_tensor *nll, kn_tensor *total_weight, kn_tensor *lp,
                                    kn_tensor *target, kn_tensor *weight, kn_reduction reduction,
                                    int64_t ignore_index, double ls) {
  int64_t cdim = kn_ndim(lp) == 1 ? 0 : 1;
  kn_tensor *wl = lp;
  if (weight) { /* weight [C] broadcast along the class dim */
    int64_t ws[KN_MAX_DIMS];
    int nd = kn_ndim(lp) > 2 ? kn_ndim(lp) - 1 : 1;
    ws[0] = kn_numel(weight);
    for (int d = 1; d < nd; d++) ws[d] = 1;
    wl = kn_mul(lp, kn_reshape(weight, nd, ws));
  }
  kn_tensor *smooth = kn_neg(kn_sum_dims(wl, &cdim, 1, false));
  kn_tensor *ign = kn_eq_scalar(target, kn_int(ignore_index));
  smooth = kn_where(ign, kn_zeros(0, NULL, kn_tensor_dtype(lp)), smooth);
  kn_tensor *ret = reduction == KN_REDUCTION_NONE ? smooth
                   : reduction == KN_REDUCTION_SUM ? kn_sum(smooth)
                                                   : kn_div(kn_sum(smooth), total_weight);
  double ncls = (double)kn_size(lp, (int)cdim);
  return kn_add(kn_mul_scalar(nll, kn_float(1 - ls)), kn_mul_scalar(ret, kn_float(ls / ncls)));
}

/* mse_loss(self, target, reduction): d = self - target; grad_self =
** 2 d g (/ N for mean), reduced to self's shape; grad_target its negation. */
kn_status kn__bw_mse_loss(kn__bwctx *ctx) {
  kn_tensor *x = ctx->call->args[0].u.t, *t = ctx->call->args[1].u.t;
  int64_t red = ctx->call->args[2].u.i;
  int nb = 0;
  kn_sym xs[KN_MAX_DIMS], ts[KN_MAX_DIMS], bs[KN_MAX_DIMS];
  kn__tensor_symsizes(x, xs);
  kn__tensor_symsizes(t, ts);
  kn_status st = kn__broadcast_shapes(x->ndim, xs, t->ndim, ts, &nb, bs);
  if (st != KN_OK) return st;
  /* operands expanded first, so no binary op has to reduce a broadcast */
  kn_tensor *d = kn_sub(kn__expand_sym(x, nb, bs), kn__expand_sym(t, nb, bs));
  kn_tensor *d2 = kn_mul_scalar(d, kn_float(2.0));
  if (red == KN_REDUCTION_MEAN) {
    kn_sym n = kn__sym_const(1);
    for (int k = 0; k < nb; k++) n = kn__sym_mul(n, bs[k]);
    d2 = kn__div_symint(d2, n);
  }
  kn_tensor *gx = kn_mul(d2, kn__expand_sym(ctx->grad_outputs[0], nb, bs));
  if (ctx->needs_input_grad[0]) st = set_grad(ctx, 0, kn__sum_to_like(gx, x));
  if (st == KN_OK && ctx->needs_input_grad[1]) st = set_grad(ctx, 1, kn__sum_to_like(kn_neg(gx), t));
  return st;
}

/* binary_cross_entropy(self, target, weight?, reduction), torch's formulas:
** grad_self = g w (x - t) / max(x (1 - x), 1e-12); grad_target =
** g w (log(1 - x) - log(x)); both / N for mean. weight gets no gradient. */
kn_status kn__bw_bce(kn__bwctx *ctx) {
  kn_tensor *x = ctx->call->args[0].u.t, *t = ctx->call->args[1].u.t;
  kn_tensor *w = ctx->call->args[2].u.t;
  int64_t red = ctx->call->args[3].u.i;
  kn_tensor *g = kn__expand_like(ctx->grad_outputs[0], x);
  if (red == KN_REDUCTION_MEAN) g = kn__div_symint(g, kn__numel_sym(x));
  if (w) g = kn_mul(g, w);
  kn_status st = KN_OK;
  if (ctx->needs_input_grad[0]) {
    kn_scalar eps = kn_float(1e-12);
    kn_tensor *den = kn_clamp(kn_mul(x, kn_add_scalar(kn_neg(x), kn_int(1))), &eps, NULL);
    st = set_grad(ctx, 0, kn_div(kn_mul(g, kn_sub(x, t)), den));
  }
  if (st == KN_OK && ctx->needs_input_grad[1])
    st = set_grad(ctx, 1, kn_mul(g, kn_sub(kn_log1p(kn_neg(x)), kn_log(x))));
  return st;
}

/* nll_loss_forward(self, target, weight?, reduction, ignore_index) */
kn_status kn__bw_nll_loss(kn__bwctx *ctx) {
  if (!ctx->needs_input_grad[0] || !ctx->grad_outputs[0]) return KN_OK;
  const kn__call *c = ctx->call;
  return set_grad(ctx, 0, kn_nll_loss_backward(ctx->grad_outputs[0], c->args[0].u.t,
                                               c->args[1].u.t, c->args[2].u.t,
                                               (kn_reduction)c->args[3].u.i, c->args[4].u.i,
                                               ctx->outputs[1]));
}

/* nll_loss_backward(grad_output, self, target, weight?, reduction,
** ignore_index, total_weight) is linear in grad_output, with adjoint
** nll_loss itself; it does not depend on self's values. */
kn_status kn__bw_nll_loss_bwd(kn__bwctx *ctx) {
  if (!ctx->needs_input_grad[0]) return KN_OK;
  const kn__call *c = ctx->call;
  return set_grad(ctx, 0, kn_nll_loss(ctx->grad_outputs[0], c->args[2].u.t, c->args[3].u.t,
                                      (kn_reduction)c->args[4].u.i, c->args[5].u.i));
}
