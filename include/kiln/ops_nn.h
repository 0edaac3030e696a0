/*
** kiln/ops_nn.h: matmul family (mm, bmm, addmm, dot, mv, matmul, linear),
** conv2d, pooling, batch_norm, layer_norm, dropout, embedding.
** Ownership and errors: see kiln/tensor.h and kiln/ops.h. Matrix products
** need operands of one dtype (float32/float64 through OpenBLAS, bfloat16,
** integers; float16 and bool fail as in PyTorch on CPU); any strides work.
*/
#ifndef KILN_OPS_NN_H
#define KILN_OPS_NN_H

#include "kiln/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- matrix products ------------------------------------------------------- */
/* [n, m] @ [m, p] -> [n, p]. KN_ESHAPE "mat1 and mat2 shapes cannot be
** multiplied (3x4 and 5x6)"; KN_EDTYPE on mixed dtypes. */
KN_API kn_tensor *kn_mm(kn_tensor *self, kn_tensor *mat2);
/* Batched: [b, n, m] @ [b, m, p] -> [b, n, p] (no broadcasting). */
KN_API kn_tensor *kn_bmm(kn_tensor *self, kn_tensor *mat2);
/* beta * self + alpha * (mat1 @ mat2); self broadcasts to [n, p]. With
** beta == 0 self's values are ignored. */
KN_API kn_tensor *kn_addmm(kn_tensor *self, kn_tensor *mat1, kn_tensor *mat2, kn_scalar beta,
                           kn_scalar alpha);
/* Inner product of two 1-D tensors of equal length -> 0-d tensor. */
KN_API kn_tensor *kn_dot(kn_tensor *self, kn_tensor *other);
/* Matrix [n, m] times vector [m] -> [n]. */
KN_API kn_tensor *kn_mv(kn_tensor *self, kn_tensor *vec);
/* PyTorch's matmul: 1-D.1-D dot, 2-D.1-D mv, 1-D.2-D and 2-D.2-D mm, N-D with
** broadcast batch dims (bmm). Errors as PyTorch (both ranks or shapes named). */
KN_API kn_tensor *kn_matmul(kn_tensor *self, kn_tensor *other);
/* input [..., in] @ weight[out, in]^T + bias[out] (bias may be NULL). */
KN_API kn_tensor *kn_linear(kn_tensor *input, kn_tensor *weight, kn_tensor *bias);

/* ---- convolution ------------------------------------------------------------ */
/* 2-D convolution: input [N, C, H, W] (or unbatched [C, H, W]), weight
** [O, C/groups, kh, kw], bias [O] or NULL. stride/padding/dilation point at
** 2 values (height, width) or are NULL for 1/0/1. Output [N, O, OH, OW].
** Errors (channels, groups, bias size, kernel larger than the padded input,
** non-positive stride...) use PyTorch's texts. */
KN_API kn_tensor *kn_conv2d(kn_tensor *input, kn_tensor *weight, kn_tensor *bias,
                            const int64_t *stride, const int64_t *padding,
                            const int64_t *dilation, int64_t groups);

#ifdef __cplusplus
}
#endif
#endif
