/*
** kiln/ops_nn.h: matmul family (mm, bmm, addmm, dot, mv, matmul, linear),
** conv2d, pooling, batch_norm, layer_norm, dropout, embedding.
** Ownership and errors: see kiln/tensor.h and kiln/ops.h. Matrix products
** need operands of one dtype (float32 through oneDNN, float64 through
** OpenBLAS, bfloat16, integers; float16 and bool fail as in PyTorch on CPU);
** any strides work.
*/
#ifndef KILN_OPS_NN_H
#define KILN_OPS_NN_H

#include "kiln/random.h"
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

/* ---- pooling ---------------------------------------------------------------------- */
/* Over the last two dims of [N, C, H, W] or [C, H, W]. kernel_size points at
** 2 values; stride NULL means kernel_size; padding NULL 0; dilation NULL 1.
** PyTorch's output sizes (ceil_mode included) and checks ("pad should be at
** most half of kernel size", "Output size is too small"). max_pool2d needs
** floating dtypes; *indices (may be NULL) gets the int64 flat h * W + w
** position of each maximum in its input plane. */
KN_API kn_tensor *kn_max_pool2d(kn_tensor *input, const int64_t *kernel_size,
                                const int64_t *stride, const int64_t *padding,
                                const int64_t *dilation, bool ceil_mode);
KN_API kn_tensor *kn_max_pool2d_with_indices(kn_tensor *input, const int64_t *kernel_size,
                                             const int64_t *stride, const int64_t *padding,
                                             const int64_t *dilation, bool ceil_mode,
                                             kn_tensor **indices);
/* Window means; count_include_pad counts padding zeros in the divisor;
** divisor_override (0 = none) replaces the divisor. Integers truncate. */
KN_API kn_tensor *kn_avg_pool2d(kn_tensor *input, const int64_t *kernel_size,
                                const int64_t *stride, const int64_t *padding, bool ceil_mode,
                                bool count_include_pad, int64_t divisor_override);

/* ---- normalisation ---------------------------------------------------------------- */
/* Batch norm over dim 1 of input [N, C, ...] (F.batch_norm's argument order).
** training: batch statistics, and running_mean/running_var (may be NULL)
** are updated in place: r = (1 - momentum) * r + momentum * stat, with the
** unbiased batch variance. eval: the running stats (required). weight and
** bias [C] are optional. */
KN_API kn_tensor *kn_batch_norm(kn_tensor *input, kn_tensor *running_mean,
                                kn_tensor *running_var, kn_tensor *weight, kn_tensor *bias,
                                bool training, double momentum, double eps);
/* Layer norm over the trailing dims normalized_shape[0..ndim) (which must end
** input's shape); weight and bias (shape normalized_shape) optional. */
KN_API kn_tensor *kn_layer_norm(kn_tensor *input, int ndim, const int64_t *normalized_shape,
                                kn_tensor *weight, kn_tensor *bias, double eps);
/* RMS norm over the trailing dims normalized_shape[0..ndim) (which must end
** input's shape), as torch.nn.functional.rms_norm: input * rsqrt(mean(
** input^2) + eps) * weight; weight (shape normalized_shape) optional; eps
** NULL for the machine epsilon of the computing type (float32's for
** float32, bfloat16 and float16; float64's for float64). Floating inputs;
** the result has input's dtype. Returns a new tensor in the current scope,
** or NULL. */
KN_API kn_tensor *kn_rms_norm(kn_tensor *input, int ndim, const int64_t *normalized_shape,
                              kn_tensor *weight, const double *eps);

/* ---- attention -------------------------------------------------------------------- */
/* softmax(query @ key^T * scale + mask) @ value, as torch 2's
** torch.nn.functional.scaled_dot_product_attention, computed by one fused
** kernel that never materialises the [L, S] weights (a blocked online
** softmax, FlashAttention's schedule; its backward recomputes them blockwise).
** query [..., L, E], key [..., S, E], value [..., S, Ev] with the same
** leading sizes, float32, float64, bfloat16 or float16 -> [..., L, Ev]
** (bfloat16 and float16 compute in float32 and round the result once).
** attn_mask (may be NULL): broadcastable to [..., L, S]; bool (true = the
** key takes part, as torch's SDPA; note MultiheadAttention's masks use the
** opposite convention) or of the query's dtype (added to the scores; it gets
** a gradient when it requires one).
** is_causal: key j is masked for query i when j > i (with attn_mask: an
** error, as torch). scale: NULL for 1 / sqrt(E).
** dropout_p in [0, 1): the weights are dropped with probability dropout_p
** (from gen; NULL = the default generator) and the rest scaled by
** 1 / (1 - dropout_p); pass 0 when not training. A query row whose every key
** is masked gives NaN. Returns a new tensor in the current scope, or NULL. */
KN_API kn_tensor *kn_scaled_dot_product_attention(kn_tensor *query, kn_tensor *key,
                                                  kn_tensor *value, kn_tensor *attn_mask,
                                                  double dropout_p, bool is_causal,
                                                  const double *scale, kn_generator *gen);

/* ---- dropout and embedding -------------------------------------------------------- */
/* Zeroes each element with probability p (drawn from gen; NULL = the default
** generator) and scales the rest by 1 / (1 - p). Not training, or p == 0:
** returns input itself (a new reference), as PyTorch does. */
KN_API kn_tensor *kn_dropout(kn_tensor *input, double p, bool training, kn_generator *gen);
/* The underlying op: also returns the keep mask (bool, may be NULL). */
KN_API kn_tensor *kn_native_dropout(kn_tensor *input, double p, bool training,
                                    kn_generator *gen, kn_tensor **mask);
/* Rows of weight [num, dim] picked by integer indices (int64/int32) of any
** shape -> [*indices.shape, dim]. padding_idx (negative counts from the end,
** KN_NO_PADDING_IDX for none) gets no gradient; scale_grad_by_freq divides
** each row's gradient by its count in indices. */
#define KN_NO_PADDING_IDX INT64_MIN
KN_API kn_tensor *kn_embedding(kn_tensor *input, kn_tensor *weight, int64_t padding_idx,
                               bool scale_grad_by_freq);

/* ---- recurrent cells ---------------------------------------------------------------- */
/* The pointwise part of one LSTM step (torch._thnn_fused_lstm_cell), one pass
** over the batch rows: gates = input_gates + hidden_gates (+ input_bias
** + hidden_bias, each [4H] or NULL), stacked [input | forget | cell | output]
** along dim 1 of [B, 4H]; i, f, o = sigmoid, g = tanh; c' = f * cx + i * g,
** h' = o * tanh(c'). cx is [B, H]; float32 or float64, one dtype. Returns h'
** [B, H]; *cy (may be NULL) gets c', *workspace (may be NULL) the activated
** gates [B, 4H] the backward reads. All results are in the current scope.
** Differentiable in every tensor argument (the backward is one fused pass,
** _thnn_fused_lstm_cell_backward_impl). */
KN_API kn_tensor *kn_fused_lstm_cell(kn_tensor *input_gates, kn_tensor *hidden_gates,
                                     kn_tensor *cx, kn_tensor *input_bias,
                                     kn_tensor *hidden_bias, kn_tensor **cy,
                                     kn_tensor **workspace);

/* A whole LSTM layer over precomputed input gates [B, T, 4H] (x @ W_ih^T plus
** the biases, every step at once), from h0, c0 [B, H], with weight_hh [4H, H]:
** per step gates = input_gates[:, t] + h @ weight_hh^T, then the cell of
** kn_fused_lstm_cell. Returns y [B, T, H] (every step's h); *h_n and *c_n (may
** be NULL) get the last step's h and c. The recurrence runs inside one op (a
** compiled graph holds one node per layer, whatever T); its backward is one
** op too (per step one fused cell pass and one GEMM, and one GEMM over all
** steps for weight_hh's gradient). Results are in the current scope. */
KN_API kn_tensor *kn_lstm_layer(kn_tensor *input_gates, kn_tensor *h0, kn_tensor *c0,
                                kn_tensor *weight_hh, kn_tensor **h_n, kn_tensor **c_n);

/* ---- kernels ------------------------------------------------------------------------ */
/* Which libraries and kernels run matrix products and convolutions, one line:
** "float32 conv, float32 gemm per shape: onednn 2.6.3 isa avx512_core or
** openblas (KILN_GEMM); float64 gemm: openblas core Haswell (OpenBLAS 0.3.21
** ...)" (the float32 GEMM's library is chosen per call shape; see
** docs/KERNELS.md). Static storage (not owned by the
** caller); computed on the first call. */
KN_API const char *kn_nn_kernel_info(void);

#ifdef __cplusplus
}
#endif
#endif
