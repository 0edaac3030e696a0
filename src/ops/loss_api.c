/*
** ops/loss_api.c: public wrappers of the losses (kiln/ops_reduce.h).
*/
#include "core/error.h"
#include "ops/loss.h"

/* An optional tensor: omitted (KN__A_NONE, so .u.t reads NULL) when NULL. */
static kn__arg opt(kn_tensor *t) { return t ? KN_A_T(t) : KN_A_NONE; }

kn_tensor *kn_mse_loss(kn_tensor *input, kn_tensor *target, kn_reduction reduction) {
  return kn__invoke(KN_OP_MSE_LOSS, 3,
                    (kn__arg[]){KN_A_T(input), KN_A_T(target), KN_A_I(reduction)});
}

kn_tensor *kn_l1_loss(kn_tensor *input, kn_tensor *target, kn_reduction reduction) {
  return kn__invoke(KN_OP_L1_LOSS, 3,
                    (kn__arg[]){KN_A_T(input), KN_A_T(target), KN_A_I(reduction)});
}

kn_tensor *kn_binary_cross_entropy(kn_tensor *input, kn_tensor *target, kn_tensor *weight,
                                   kn_reduction reduction) {
  return kn__invoke(KN_OP_BCE, 4, (kn__arg[]){KN_A_T(input), KN_A_T(target), opt(weight),
                                               KN_A_I(reduction)});
}

/* Both outputs of nll_loss_forward (registered in the open scope). */
int kn__nll_loss_forward(kn_tensor *input, kn_tensor *target, kn_tensor *weight,
                         kn_reduction reduction, int64_t ignore_index, kn_tensor **outs) {
  kn__opid id = input && kn_ndim(input) > 2 ? KN_OP_NLL_LOSS2D : KN_OP_NLL_LOSS;
  return kn__invoke_multi(id, 5,
                          (kn__arg[]){KN_A_T(input), KN_A_T(target), opt(weight),
                                      KN_A_I(reduction), KN_A_I(ignore_index)},
                          outs, 2);
}

int kn__nll_loss_target(kn_tensor *target, const kn_tensor *input, int64_t ignore_index,
                        kn_tensor **outs) {
  kn_sym s[KN_MAX_DIMS];
  int64_t h[KN_MAX_DIMS];
  kn__tensor_symsizes(input, s);
  for (int d = 0; d < input->ndim; d++) h[d] = kn__sym_hint(s[d]);
  return kn__invoke_multi(KN_OP_NLL_LOSS_TARGET, 3,
                          (kn__arg[]){KN_A_T(target), KN_A_SYMINTS(h, s, input->ndim),
                                      KN_A_I(ignore_index)},
                          outs, 2);
}

kn_tensor *kn_nll_loss(kn_tensor *input, kn_tensor *target, kn_tensor *weight,
                       kn_reduction reduction, int64_t ignore_index) {
  kn_scope_begin(); /* owns total_weight */
  kn_tensor *outs[2] = {NULL, NULL};
  int n = kn__nll_loss_forward(input, target, weight, reduction, ignore_index, outs);
  return kn_scope_end_keep(n == 2 ? outs[0] : NULL);
}

kn_tensor *kn_nll_loss_backward(kn_tensor *grad_output, kn_tensor *input, kn_tensor *target,
                                kn_tensor *weight, kn_reduction reduction, int64_t ignore_index,
                                kn_tensor *total_weight) {
  return kn__invoke(KN_OP_NLL_LOSS_BWD, 7,
                    (kn__arg[]){KN_A_T(grad_output), KN_A_T(input), KN_A_T(target), opt(weight),
                                KN_A_I(reduction), KN_A_I(ignore_index), KN_A_T(total_weight)});
}

kn_tensor *kn_cross_entropy(kn_tensor *input, kn_tensor *target, kn_tensor *weight,
                            kn_reduction reduction, int64_t ignore_index,
                            double label_smoothing) {
  return kn__invoke(KN_OP_CROSS_ENTROPY, 6,
                    (kn__arg[]){KN_A_T(input), KN_A_T(target), opt(weight), KN_A_I(reduction),
                                KN_A_I(ignore_index), KN_A_D(label_smoothing)});
}
