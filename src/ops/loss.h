/*
** ops/loss.h: helpers shared by the loss ops (internal).
*/
#ifndef KN_OPS_LOSS_H
#define KN_OPS_LOSS_H

#include "ops/reduce.h"

/* Check a reduction argument (torch's at::Reduction values 0, 1, 2). */
kn_status kn__loss_check_reduction(int64_t r);
/* Push r (a public op's result, borrowed) into a composite's outputs as an
** owned reference; propagates r == NULL as the last error. */
kn_status kn__loss_push(kn__outs *out, kn_tensor *r);
/* "[2, 3]" of t's (hinted) sizes into buf. */
void kn__loss_shape_str(const kn_tensor *t, char *buf, size_t n);

/* Both outputs (loss, total_weight) of nll_loss_forward, registered in the
** open scope; returns 2, or -1 on error. */
int kn__nll_loss_forward(kn_tensor *input, kn_tensor *target, kn_tensor *weight,
                         kn_reduction reduction, int64_t ignore_index, kn_tensor **outs);
/* Both outputs (target, classes) of _nll_loss_target for `input` (only its
** symbolic sizes are read: the outputs keep them): the checked target with
** a 1 at the class dim, ignored entries -1, and the class indices;
** registered in the open scope. Returns 2, or -1 on error ("Target 5 is out
** of bounds." for a target outside [0, C) that is not ignore_index). */
int kn__nll_loss_target(kn_tensor *target, const kn_tensor *input, int64_t ignore_index,
                        kn_tensor **outs);
/* cross_entropy's label-smoothing blend: (1 - ls) * nll + ls / C * smooth
** term, from nll_loss_forward's outputs (loss, total_weight) and the
** log-probabilities lp. Result in the open scope. */
kn_tensor *kn__cross_entropy_smooth(kn_tensor *nll, kn_tensor *total_weight, kn_tensor *lp,
                                    kn_tensor *target, kn_tensor *weight, kn_reduction reduction,
                                    int64_t ignore_index, double ls);

#endif
