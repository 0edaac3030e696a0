/*
** ops/nn.h: helpers shared by the nn op family (internal).
**
** kn__nn_gemm is the one matrix-multiply kernel behind mm, bmm, addmm, dot,
** mv and the im2col convolution: float32 goes to oneDNN's or OpenBLAS's
** sgemm, chosen per call shape (ops/gemm_select.h), float64 to OpenBLAS
** (cblas_dgemm), with transpose flags chosen from the
** operands' strides
** (operands that no BLAS layout describes are copied first), bfloat16 is
** computed in float32 and rounded on store, integer dtypes use a plain loop.
*/
#ifndef KN_OPS_NN_H
#define KN_OPS_NN_H

#include "ops/opdef.h"

/* A strided 2-D operand: element (i, j) at p[i * s0 + j * s1] (elements). */
typedef struct kn__mat {
  const void *p;
  int64_t s0, s1;
} kn__mat;

/* C = alpha * A @ B + beta * C for A [M, K], B [K, N] (any strides) and C
** [M, N] with row stride ldc and unit column stride, all of dtype dt. With
** beta == 0, C's old contents are ignored (NaN included). KN_EDTYPE for
** dtypes without a kernel (float16, bool), naming `opname` as PyTorch does
** ("addmm_impl_cpu_" not implemented for 'Half'). */
kn_status kn__nn_gemm(const char *opname, kn_dtype dt, int64_t M, int64_t N, int64_t K,
                      kn__mat A, kn__mat B, void *C, int64_t ldc, double alpha, double beta);

/* kn__nn_gemm on M rows of a product of full_M rows computed in row blocks
** (a compiled graph's GEMM with its epilogue, inductor/gemm.c): the float32
** library is the one the whole product takes (ops/gemm_select.h), so every
** block rounds as the eager product of all full_M rows does. */
kn_status kn__nn_gemm_rows(const char *opname, kn_dtype dt, int64_t M, int64_t N, int64_t K,
                           kn__mat A, kn__mat B, void *C, int64_t ldc, double alpha, double beta,
                           int64_t full_M);

/* The end of a bfloat16/float16 product computed in float32: C[i, j] (dtype
** dt, rows ldc elements apart) = alpha * acc[i, j] + beta * C[i, j] (C's old
** value unread when beta == 0), summed in double, rounded to float32, then
** once to dt. acc [M, N] (contiguous) is overwritten. Rows run in parallel
** on the OpenMP team when the matrix is large. */
void kn__gemm16_store(kn_dtype dt, int64_t M, int64_t N, float *acc, void *C, int64_t ldc,
                      double alpha, double beta);

/* C = A @ B + bias (bias: N elements of dt added to every row), for dt
** bfloat16/float16, summed in float32 and rounded once, when oneDNN has a
** kernel for it: returns true with *st its status; false (nothing written)
** when the caller must take kn__nn_gemm's path (C filled with the bias,
** beta 1). */
bool kn__nn_gemm16_bias(kn_dtype dt, int64_t M, int64_t N, int64_t K, kn__mat A, kn__mat B,
                        const void *bias, void *C, int64_t ldc, kn_status *st);

/* KN_OK when kn__nn_gemm has a kernel for dt, else its dtype error. */
kn_status kn__nn_gemm_check(const char *opname, kn_dtype dt);

/* PyTorch's sliding-window output size over a (possibly symbolic) input size:
** floor((in + 2p - d(k-1) - 1 [+ s-1 with ceil]) / s) + 1, one less with
** ceil when the last window would start past in + p (decided by a guard). */
kn_sym kn__nn_window_out(kn_sym in, int64_t k, int64_t s, int64_t p, int64_t d, bool ceil);

/* One element as double / stored from double, with float32 and float64
** fast paths (the other dtypes convert through kn__load/store_double). */
static inline double kn__nn_ld(const char *p, kn_dtype dt) {
  if (dt == KN_FLOAT32) return *(const float *)(const void *)p;
  if (dt == KN_FLOAT64) return *(const double *)(const void *)p;
  return kn__load_double(p, dt);
}
static inline void kn__nn_st(char *p, kn_dtype dt, double v) {
  if (dt == KN_FLOAT32) *(float *)(void *)p = (float)v;
  else if (dt == KN_FLOAT64) *(double *)(void *)p = v;
  else kn__store_double(p, dt, v);
}

/* layer_norm's and rms_norm's argument check (args: input,
** normalized_shape, weight?, then bias? for layer_norm): normalized_shape
** ends input's shape, weight and bias have its shape; *M rows of *D
** elements. The error names the expected and found shapes. */
kn_status kn__nn_norm_check(const kn__call *c, int64_t *M, int64_t *D);
/* The metas of a row norm over c's input (args: input, normalized_shape):
** the output (the input's sizes and dtype), then nstats statistics of
** dtype stat_dt, sized as the input with the normalized dims 1. */
kn_status kn__nn_norm_metas(const kn__call *c, kn__metas *out, kn_dtype stat_dt, int nstats);
/* t's data as contiguous elements of dtype dt: t itself, or a copy left in
** *tmp (owned; released by the caller; NULL when none). NULL on error. */
const void *kn__nn_dense(const kn_tensor *t, kn_dtype dt, kn_tensor **tmp);
/* w (or, when absent, D copies of fill) as D contiguous elements of dt; a
** copy or the filled row is left in *tmp as above. */
const void *kn__nn_row_param(const kn_tensor *w, kn_dtype dt, int64_t D, double fill,
                             kn_tensor **tmp);

/* The causal mask of scores like [..., L, S] as PyTorch's tril(ones(L, S)):
** bool [L, S], true where key j <= query i (top-left aligned, for L != S
** too), on like's device, built there from like by ops that run on the GPU
** (no host copy; symbolic sizes stay symbolic). like needs an element to
** build from (scores without any mask nothing: KN_EINVAL). A new tensor in
** the current scope, or NULL. */
kn_tensor *kn__causal_keep(kn_tensor *like);
/* scores with -inf where the bool mask keep (broadcastable to scores) is
** false: masked_fill(scores, ~keep, -inf) from ops that run on the GPU (a
** select of log(keep)). A new tensor in the current scope, or NULL. */
kn_tensor *kn__mask_scores(kn_tensor *scores, kn_tensor *keep);

/* The fused attention op (_scaled_dot_product_fused_attention) on its own:
** softmax(q k^T / sqrt(E) + mask) @ v with the causal mask and an
** attn_mask together (the public kn_scaled_dot_product_attention refuses
** both at once, as torch does; MultiheadAttention combines a padding mask
** with the causal one). Its output in the current scope, or NULL. */
kn_tensor *kn__sdpa_fused(kn_tensor *q, kn_tensor *k, kn_tensor *v, kn_tensor *mask, double p,
                          bool causal, kn_generator *gen);

/* PyTorch's ScalarType name of a dtype ("Float", "Double", "Long", ...). */
const char *kn__nn_scalar_type_name(kn_dtype dt);

#endif
