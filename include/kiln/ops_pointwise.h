/*
** kiln/ops_pointwise.h: elementwise math, comparisons, logical ops, where,
** clamp, pow, casts and copies, in-place variants, and the backward helper
** ops derivative rules use.
** Ownership and errors: see kiln/tensor.h and kiln/ops.h. Tensor arguments
** are borrowed. Functions returning kn_tensor* return a new reference (also
** recorded in the open scope) or NULL; in-place functions (ending in `_`)
** modify self, bump its version counter and return KN_OK or an error.
** Binary ops broadcast (a mismatch names both shapes: "The size of tensor a
** (1000) must match the size of tensor b (10) at non-singleton dimension 1")
** and promote types as PyTorch (result_type, incl. its scalar rules). In-place
** ops fail with "result type Float can't be cast to the desired output type
** Long" when the promoted type cannot be cast to self's dtype, and when the
** broadcast shape differs from self's.
*/
#ifndef KILN_OPS_POINTWISE_H
#define KILN_OPS_POINTWISE_H

#include "kiln/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* div's rounding_mode: none = true division (integers -> float32). */
typedef enum kn_rounding_mode { KN_ROUND_NONE = 0, KN_ROUND_TRUNC = 1, KN_ROUND_FLOOR = 2 } kn_rounding_mode;
/* gelu's approximate: exact (erf) or the tanh approximation. */
typedef enum kn_gelu_approx { KN_GELU_NONE = 0, KN_GELU_TANH = 1 } kn_gelu_approx;

/* ---- arithmetic: a (+ - * /) b, with b a tensor or a scalar ------------- */
KN_API kn_tensor *kn_add(kn_tensor *a, kn_tensor *b);
/* a + alpha * b (alpha must be integral for integral results). */
KN_API kn_tensor *kn_add_scaled(kn_tensor *a, kn_tensor *b, kn_scalar alpha);
KN_API kn_tensor *kn_add_scalar(kn_tensor *a, kn_scalar b);
KN_API kn_tensor *kn_sub(kn_tensor *a, kn_tensor *b);
/* a - alpha * b. Bool operands are an error (use logical ops). */
KN_API kn_tensor *kn_sub_scaled(kn_tensor *a, kn_tensor *b, kn_scalar alpha);
KN_API kn_tensor *kn_sub_scalar(kn_tensor *a, kn_scalar b);
KN_API kn_tensor *kn_mul(kn_tensor *a, kn_tensor *b);
KN_API kn_tensor *kn_mul_scalar(kn_tensor *a, kn_scalar b);
/* True division: integer operands give float32. */
KN_API kn_tensor *kn_div(kn_tensor *a, kn_tensor *b);
KN_API kn_tensor *kn_div_scalar(kn_tensor *a, kn_scalar b);
/* Division rounded toward zero or down, in the promoted type (integers
** stay integers; an integer division by zero is KN_EINVAL "ZeroDivisionError"). */
KN_API kn_tensor *kn_div_mode(kn_tensor *a, kn_tensor *b, kn_rounding_mode mode);
KN_API kn_tensor *kn_div_scalar_mode(kn_tensor *a, kn_scalar b, kn_rounding_mode mode);
/* Elementwise max/min; NaN propagates. */
KN_API kn_tensor *kn_maximum(kn_tensor *a, kn_tensor *b);
KN_API kn_tensor *kn_minimum(kn_tensor *a, kn_tensor *b);
/* a ** b for tensor/tensor, tensor/scalar and scalar/tensor. Integer tensors
** to negative integer scalar powers are an error. */
KN_API kn_tensor *kn_pow(kn_tensor *a, kn_tensor *b);
KN_API kn_tensor *kn_pow_scalar(kn_tensor *a, kn_scalar exponent);
KN_API kn_tensor *kn_scalar_pow(kn_scalar base, kn_tensor *exponent);

/* ---- comparisons (bool results, computed in the promoted type) ---------- */
KN_API kn_tensor *kn_eq(kn_tensor *a, kn_tensor *b);
KN_API kn_tensor *kn_ne(kn_tensor *a, kn_tensor *b);
KN_API kn_tensor *kn_lt(kn_tensor *a, kn_tensor *b);
KN_API kn_tensor *kn_le(kn_tensor *a, kn_tensor *b);
KN_API kn_tensor *kn_gt(kn_tensor *a, kn_tensor *b);
KN_API kn_tensor *kn_ge(kn_tensor *a, kn_tensor *b);
KN_API kn_tensor *kn_eq_scalar(kn_tensor *a, kn_scalar b);
KN_API kn_tensor *kn_ne_scalar(kn_tensor *a, kn_scalar b);
KN_API kn_tensor *kn_lt_scalar(kn_tensor *a, kn_scalar b);
KN_API kn_tensor *kn_le_scalar(kn_tensor *a, kn_scalar b);
KN_API kn_tensor *kn_gt_scalar(kn_tensor *a, kn_scalar b);
KN_API kn_tensor *kn_ge_scalar(kn_tensor *a, kn_scalar b);
/* Logical ops on truthiness (nonzero, NaN = true); bool results. */
KN_API kn_tensor *kn_logical_and(kn_tensor *a, kn_tensor *b);
KN_API kn_tensor *kn_logical_or(kn_tensor *a, kn_tensor *b);
KN_API kn_tensor *kn_logical_not(kn_tensor *a);

/* ---- unary math (integer inputs give float32 where the result is
** fractional: exp, log, sqrt, sigmoid, ...; neg/abs/sgn/relu/rounding keep
** the dtype) ------------------------------------------------------------------ */
KN_API kn_tensor *kn_neg(kn_tensor *a);
KN_API kn_tensor *kn_abs(kn_tensor *a);
KN_API kn_tensor *kn_sgn(kn_tensor *a);
KN_API kn_tensor *kn_reciprocal(kn_tensor *a);
KN_API kn_tensor *kn_exp(kn_tensor *a);
KN_API kn_tensor *kn_exp2(kn_tensor *a);
KN_API kn_tensor *kn_log(kn_tensor *a);
KN_API kn_tensor *kn_log2(kn_tensor *a);
KN_API kn_tensor *kn_log1p(kn_tensor *a);
KN_API kn_tensor *kn_expm1(kn_tensor *a);
KN_API kn_tensor *kn_sqrt(kn_tensor *a);
KN_API kn_tensor *kn_rsqrt(kn_tensor *a);
KN_API kn_tensor *kn_sin(kn_tensor *a);
KN_API kn_tensor *kn_cos(kn_tensor *a);
KN_API kn_tensor *kn_tan(kn_tensor *a);
KN_API kn_tensor *kn_tanh(kn_tensor *a);
KN_API kn_tensor *kn_sigmoid(kn_tensor *a);
KN_API kn_tensor *kn_relu(kn_tensor *a);
KN_API kn_tensor *kn_gelu(kn_tensor *a, kn_gelu_approx approximate);
KN_API kn_tensor *kn_silu(kn_tensor *a);
KN_API kn_tensor *kn_erf(kn_tensor *a);
KN_API kn_tensor *kn_log10(kn_tensor *a);
KN_API kn_tensor *kn_sinh(kn_tensor *a);
KN_API kn_tensor *kn_cosh(kn_tensor *a);
KN_API kn_tensor *kn_asin(kn_tensor *a);
KN_API kn_tensor *kn_acos(kn_tensor *a);
KN_API kn_tensor *kn_atan(kn_tensor *a);
KN_API kn_tensor *kn_erfc(kn_tensor *a);
/* log(1 + exp(beta x)) / beta, and x itself where beta x > threshold
** (torch.nn.functional.softplus; defaults beta 1, threshold 20). */
KN_API kn_tensor *kn_softplus(kn_tensor *a, kn_scalar beta, kn_scalar threshold);
/* Round half to even. */
KN_API kn_tensor *kn_round(kn_tensor *a);
KN_API kn_tensor *kn_trunc(kn_tensor *a);
KN_API kn_tensor *kn_floor(kn_tensor *a);
KN_API kn_tensor *kn_ceil(kn_tensor *a);
/* Clamp to [min, max]; either bound may be NULL (omitted). The result dtype
** is result_type(a, min, max). */
KN_API kn_tensor *kn_clamp(kn_tensor *a, const kn_scalar *min, const kn_scalar *max);

/* ---- where, casts, copies ------------------------------------------------ */
/* cond ? a : b elementwise; cond must be bool; all three broadcast. */
KN_API kn_tensor *kn_where(kn_tensor *cond, kn_tensor *a, kn_tensor *b);
/* A fresh contiguous copy. */
KN_API kn_tensor *kn_clone(kn_tensor *a);
/* a itself (a new reference) when already contiguous, else a clone. */
KN_API kn_tensor *kn_contiguous(kn_tensor *a);
/* a itself (a new reference) when it already has dtype, else a copy
** converted to dtype (_to_copy). */
KN_API kn_tensor *kn_to(kn_tensor *a, kn_dtype dtype);
/* Always a converted copy (aten::_to_copy). */
KN_API kn_tensor *kn_to_copy(kn_tensor *a, kn_dtype dtype);

/* ---- backward helper ops (the ops derivative rules record) --------------- */
/* grad where self > threshold, else 0 (relu's backward). */
KN_API kn_tensor *kn_threshold_backward(kn_tensor *grad, kn_tensor *self, kn_scalar threshold);
/* grad * output * (1 - output). */
KN_API kn_tensor *kn_sigmoid_backward(kn_tensor *grad, kn_tensor *output);
/* grad * (1 - output^2). */
KN_API kn_tensor *kn_tanh_backward(kn_tensor *grad, kn_tensor *output);
/* grad * gelu'(self). */
KN_API kn_tensor *kn_gelu_backward(kn_tensor *grad, kn_tensor *self, kn_gelu_approx approximate);

/* ---- in-place variants --------------------------------------------------- */
KN_API kn_status kn_add_(kn_tensor *self, kn_tensor *other);
KN_API kn_status kn_add_scaled_(kn_tensor *self, kn_tensor *other, kn_scalar alpha);
KN_API kn_status kn_add_scalar_(kn_tensor *self, kn_scalar other);
KN_API kn_status kn_sub_(kn_tensor *self, kn_tensor *other);
KN_API kn_status kn_sub_scaled_(kn_tensor *self, kn_tensor *other, kn_scalar alpha);
KN_API kn_status kn_sub_scalar_(kn_tensor *self, kn_scalar other);
KN_API kn_status kn_mul_(kn_tensor *self, kn_tensor *other);
KN_API kn_status kn_mul_scalar_(kn_tensor *self, kn_scalar other);
KN_API kn_status kn_div_(kn_tensor *self, kn_tensor *other);
KN_API kn_status kn_div_scalar_(kn_tensor *self, kn_scalar other);
KN_API kn_status kn_div_mode_(kn_tensor *self, kn_tensor *other, kn_rounding_mode mode);
KN_API kn_status kn_pow_scalar_(kn_tensor *self, kn_scalar exponent);
KN_API kn_status kn_neg_(kn_tensor *self);
KN_API kn_status kn_exp_(kn_tensor *self);
KN_API kn_status kn_tanh_(kn_tensor *self);
KN_API kn_status kn_sigmoid_(kn_tensor *self);
KN_API kn_status kn_relu_(kn_tensor *self);
KN_API kn_status kn_trunc_(kn_tensor *self);
KN_API kn_status kn_abs_(kn_tensor *self);
KN_API kn_status kn_reciprocal_(kn_tensor *self);
KN_API kn_status kn_log_(kn_tensor *self);
KN_API kn_status kn_sqrt_(kn_tensor *self);
KN_API kn_status kn_round_(kn_tensor *self);
KN_API kn_status kn_floor_(kn_tensor *self);
KN_API kn_status kn_ceil_(kn_tensor *self);
KN_API kn_status kn_clamp_(kn_tensor *self, const kn_scalar *min, const kn_scalar *max);
/* Copy src into self (src broadcasts to self's shape; any dtype). */
KN_API kn_status kn_copy_(kn_tensor *self, kn_tensor *src);
KN_API kn_status kn_fill_(kn_tensor *self, kn_scalar value);
KN_API kn_status kn_zero_(kn_tensor *self);

#ifdef __cplusplus
}
#endif
#endif
