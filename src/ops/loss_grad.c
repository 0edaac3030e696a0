/*
** ops/loss_grad.c: derivative rules of the losses, written with public ops
** only (they run under tracing too and are differentiable themselves).
*/
#include "core/error.h"
#include "ops/loss.h"

kn_status kn__k_l1_loss(const kn__call *c, kn__outs *out) {
  (void)out;
  return kn__error(KN_EUNSUPPORTED, "%s: not available yet", c->op->name);
}

kn_tensor *kn__cross_entropy_smooth(kn_tensor *nll, kn_tensor *lp, kn_tensor *target,
                                    kn_tensor *weight, kn_reduction reduction,
                                    int64_t ignore_index, double ls) {
  (void)nll; (void)lp; (void)target; (void)weight; (void)reduction; (void)ignore_index; (void)ls;
  kn__error(KN_EUNSUPPORTED, "cross_entropy: label smoothing is not available yet");
  return NULL;
}
kn_status kn__bw_mse_loss(kn__bwctx *ctx) {
  return kn__error(KN_EUNSUPPORTED, "%s: derivative not available yet", ctx->call->op->name);
}
kn_status kn__bw_bce(kn__bwctx *ctx) {
  return kn__error(KN_EUNSUPPORTED, "%s: derivative not available yet", ctx->call->op->name);
}
kn_status kn__bw_nll_loss(kn__bwctx *ctx) {
  return kn__error(KN_EUNSUPPORTED, "%s: derivative not available yet", ctx->call->op->name);
}
kn_status kn__bw_nll_loss_bwd(kn__bwctx *ctx) {
  return kn__error(KN_EUNSUPPORTED, "%s: derivative not available yet", ctx->call->op->name);
}
