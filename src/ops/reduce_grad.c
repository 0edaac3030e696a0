/*
** ops/reduce_grad.c: derivative rules of the reductions, written with public
** ops only so they also run under tracing and are themselves differentiable.
*/
#include "core/error.h"
#include "ops/reduce.h"

kn_status kn__bw_sum(kn__bwctx *ctx) {
  return kn__error(KN_EUNSUPPORTED, "%s: derivative not available yet", ctx->call->op->name);
}
kn_status kn__bw_mean(kn__bwctx *ctx) {
  return kn__error(KN_EUNSUPPORTED, "%s: derivative not available yet", ctx->call->op->name);
}
kn_status kn__bw_prod(kn__bwctx *ctx) {
  return kn__error(KN_EUNSUPPORTED, "%s: derivative not available yet", ctx->call->op->name);
}
kn_status kn__bw_amax(kn__bwctx *ctx) {
  return kn__error(KN_EUNSUPPORTED, "%s: derivative not available yet", ctx->call->op->name);
}
kn_status kn__bw_var(kn__bwctx *ctx) {
  return kn__error(KN_EUNSUPPORTED, "%s: derivative not available yet", ctx->call->op->name);
}
kn_status kn__bw_std(kn__bwctx *ctx) {
  return kn__error(KN_EUNSUPPORTED, "%s: derivative not available yet", ctx->call->op->name);
}
kn_status kn__bw_cumsum(kn__bwctx *ctx) {
  return kn__error(KN_EUNSUPPORTED, "%s: derivative not available yet", ctx->call->op->name);
}
kn_status kn__bw_softmax(kn__bwctx *ctx) {
  return kn__error(KN_EUNSUPPORTED, "%s: derivative not available yet", ctx->call->op->name);
}
kn_status kn__bw_log_softmax(kn__bwctx *ctx) {
  return kn__error(KN_EUNSUPPORTED, "%s: derivative not available yet", ctx->call->op->name);
}
kn_status kn__bw_softmax_bwd(kn__bwctx *ctx) {
  return kn__error(KN_EUNSUPPORTED, "%s: derivative not available yet", ctx->call->op->name);
}
kn_status kn__bw_log_softmax_bwd(kn__bwctx *ctx) {
  return kn__error(KN_EUNSUPPORTED, "%s: derivative not available yet", ctx->call->op->name);
}
