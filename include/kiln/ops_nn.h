/*
** kiln/ops_nn.h: matmul family (mm, bmm, addmm, matmul, linear), conv2d, pooling, batch_norm, layer_norm, dropout, embedding.
** Ownership and errors: see kiln/tensor.h and kiln/ops.h.
*/
#ifndef KILN_OPS_NN_H
#define KILN_OPS_NN_H

#include "kiln/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

#ifdef __cplusplus
}
#endif
#endif
