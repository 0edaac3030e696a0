/*
** kiln/ops_reduce.h: reductions (sum, mean, prod, amax/amin, argmax/argmin, var/std), cumsum, softmax/log_softmax, losses.
** Ownership and errors: see kiln/tensor.h and kiln/ops.h.
*/
#ifndef KILN_OPS_REDUCE_H
#define KILN_OPS_REDUCE_H

#include "kiln/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

#ifdef __cplusplus
}
#endif
#endif
