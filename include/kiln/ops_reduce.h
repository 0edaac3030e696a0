/*
** kiln/ops_reduce.h: reductions (sum, mean, prod, amax/amin, argmax/argmin,
** var/std, any/all, logsumexp, vector norms), cumsum, softmax/log_softmax, topk, multinomial and losses.
** Ownership and errors: see kiln/tensor.h and kiln/ops.h. Dims are
** (const int64_t *dims, int ndims, bool keepdim): negative dims count from
** the end, and NULL / an empty list means all dims. Dtype rules follow
** torch: sum/prod of integer or bool tensors give int64; mean, var and std
** need floating tensors.
*/
#ifndef KILN_OPS_REDUCE_H
#define KILN_OPS_REDUCE_H

#include "kiln/random.h"
#include "kiln/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- sum, mean, prod ----------------------------------------------------- */
/* Sum of all elements (a 0-dim tensor). Empty input sums to 0. */
KN_API kn_tensor *kn_sum(kn_tensor *t);
/* Sum over dims (size 1 there with keepdim). KN_ERANGE on a bad dim,
** KN_EINVAL on a repeated dim. */
KN_API kn_tensor *kn_sum_dims(kn_tensor *t, const int64_t *dims, int ndims, bool keepdim);
/* The same, converting the input to dtype first (the result has dtype). */
KN_API kn_tensor *kn_sum_dtype(kn_tensor *t, const int64_t *dims, int ndims, bool keepdim,
                               kn_dtype dtype);
/* Reduce a broadcast gradient back to sizes: sums the leading extra dims and
** (keeping them) the dims where sizes has 1. Returns t itself (a new
** reference) when the shapes already match. KN_ESHAPE "size {[4]} is not
** expandable to size {[2, 3]}." when t's shape is not a broadcast of sizes. */
KN_API kn_tensor *kn_sum_to_size(kn_tensor *t, int ndim, const int64_t *sizes);
/* Mean of all elements / over dims; floating inputs only (KN_EDTYPE
** otherwise, or pass a floating dtype). The mean of nothing is nan. */
KN_API kn_tensor *kn_mean(kn_tensor *t);
KN_API kn_tensor *kn_mean_dims(kn_tensor *t, const int64_t *dims, int ndims, bool keepdim);
KN_API kn_tensor *kn_mean_dtype(kn_tensor *t, const int64_t *dims, int ndims, bool keepdim,
                                kn_dtype dtype);
/* Product of all elements / over one dim (torch's prod takes one dim). */
KN_API kn_tensor *kn_prod(kn_tensor *t);
KN_API kn_tensor *kn_prod_dim(kn_tensor *t, int64_t dim, bool keepdim);

/* ---- amax/amin, argmax/argmin --------------------------------------------- */
/* Largest / smallest value over dims (NaN if a reduced value is NaN); same
** dtype. Empty reductions fail as in torch ("amax(): Expected reduction dim
** 0 to have non-zero size."). Gradients go evenly to tied maxima. */
KN_API kn_tensor *kn_amax(kn_tensor *t, const int64_t *dims, int ndims, bool keepdim);
KN_API kn_tensor *kn_amin(kn_tensor *t, const int64_t *dims, int ndims, bool keepdim);
/* int64 index of the first max / min of the flattened tensor, or along dim.
** Not differentiable. */
KN_API kn_tensor *kn_argmax(kn_tensor *t);
KN_API kn_tensor *kn_argmax_dim(kn_tensor *t, int64_t dim, bool keepdim);
KN_API kn_tensor *kn_argmin(kn_tensor *t);
KN_API kn_tensor *kn_argmin_dim(kn_tensor *t, int64_t dim, bool keepdim);

/* ---- var/std ----------------------------------------------------------------- */
/* Variance / standard deviation over dims, dividing by max(0, N - correction)
** (torch's default correction is 1). Floating inputs only. */
KN_API kn_tensor *kn_var(kn_tensor *t, const int64_t *dims, int ndims, int64_t correction,
                         bool keepdim);
KN_API kn_tensor *kn_std(kn_tensor *t, const int64_t *dims, int ndims, int64_t correction,
                         bool keepdim);

/* ---- any/all, logsumexp, vector norms ------------------------------------------- */
/* Is any / every element true (not 0; NaN is true), over all dims or one
** dim? Any dtype; the result is bool (uint8 for uint8 inputs, as torch).
** any of nothing is false, all of nothing true. Not differentiable. */
KN_API kn_tensor *kn_any(kn_tensor *t);
KN_API kn_tensor *kn_any_dim(kn_tensor *t, int64_t dim, bool keepdim);
KN_API kn_tensor *kn_all(kn_tensor *t);
KN_API kn_tensor *kn_all_dim(kn_tensor *t, int64_t dim, bool keepdim);
/* log(sum(exp(t))) over dims, computed as m + log(sum(exp(t - m))) with m
** the largest element (0 when it is infinite): rows of -inf give -inf, a
** +inf gives +inf, NaN propagates. Integer and bool inputs give the default
** float dtype. Gradient: grad * exp(t - result). */
KN_API kn_tensor *kn_logsumexp(kn_tensor *t, const int64_t *dims, int ndims, bool keepdim);
/* torch.linalg.vector_norm: the ord-norm over dims (all dims when none):
** ord 2 sqrt(sum x^2), 1 sum |x|, INFINITY max |x|, -INFINITY min |x| (NaN
** wins in both), 0 the count of non-zero elements (NaN counts), any other p
** (sum |x|^p)^(1/p). Floating inputs only (KN_EDTYPE). Negative orders and
** inf refuse an empty reduced dim (KN_EINVAL), as torch. Gradients follow
** torch (0 at a zero norm for ord 2, sign(x) for ord 1, shared evenly among
** ties for +-inf). _dtype computes and returns in dtype, a floating type t
** converts to without narrowing. kn_norm is torch's x.norm(p, dim, keepdim)
** spelled through the same op. */
KN_API kn_tensor *kn_linalg_vector_norm(kn_tensor *t, double ord, const int64_t *dims, int ndims,
                                        bool keepdim);
KN_API kn_tensor *kn_linalg_vector_norm_dtype(kn_tensor *t, double ord, const int64_t *dims,
                                              int ndims, bool keepdim, kn_dtype dtype);
KN_API kn_tensor *kn_norm(kn_tensor *t, double p, const int64_t *dims, int ndims, bool keepdim);

/* ---- cumsum, softmax ----------------------------------------------------------- */
/* Cumulative sum along dim; integer/bool inputs give int64. _dtype converts
** the input to dtype first. */
KN_API kn_tensor *kn_cumsum(kn_tensor *t, int64_t dim);
KN_API kn_tensor *kn_cumsum_dtype(kn_tensor *t, int64_t dim, kn_dtype dtype);
/* softmax / log_softmax along dim (floating inputs; numerically stable). */
KN_API kn_tensor *kn_softmax(kn_tensor *t, int64_t dim);
KN_API kn_tensor *kn_log_softmax(kn_tensor *t, int64_t dim);
/* Their backward ops, given the forward output: output * (grad - sum(grad *
** output, dim)) and grad - exp(output) * sum(grad, dim). Same shapes. */
KN_API kn_tensor *kn_softmax_backward_data(kn_tensor *grad_output, kn_tensor *output,
                                           int64_t dim);
KN_API kn_tensor *kn_log_softmax_backward_data(kn_tensor *grad_output, kn_tensor *output,
                                               int64_t dim);

/* ---- topk, multinomial ------------------------------------------------------ */
/* torch.topk: the k largest (largest = true) or smallest elements of t along
** dim (negative counts from the end), sorted: values come first in their
** order, NaN counting as larger than every number and equal values in index
** order (sorted = false gives the same order; torch leaves it unspecified).
** Returns the values (t's dtype, size k at dim); *indices (may be NULL)
** receives their int64 positions along dim. Differentiable in t (the
** gradient flows back to the selected positions). KN_ERANGE "selected index
** k out of range" unless 0 <= k <= size of dim; a 0-dim t is its own top
** element (k 0 or 1). */
KN_API kn_tensor *kn_topk(kn_tensor *t, int64_t k, int64_t dim, bool largest, bool sorted,
                          kn_tensor **indices);
/* torch.multinomial: num_samples category indices (int64) per row of probs
** ([C] gives [num_samples], [R, C] gives [R, num_samples]), drawn with
** probability proportional to the row's weights (they need not sum to 1),
** with or without replacement, from gen (NULL: the default generator). The
** same seed and generator position give the same samples. Without
** replacement a row gives distinct indices in the order drawn, and needs at
** least num_samples positive weights. Errors (KN_EINVAL unless said): a
** non-floating probs (KN_EDTYPE), not 1 or 2 dims (KN_ESHAPE), num_samples
** <= 0, more samples than categories without replacement, more than 2^24
** categories, a weight that is negative, inf or NaN ("probability tensor
** contains either `inf`, `nan` or element < 0"), a row summing to 0 ("invalid
** multinomial distribution (sum of probabilities <= 0)"), too few positive
** weights without replacement (torch's CPU op then returns zero-weight
** categories; its documentation requires enough positive ones). Nothing is
** drawn when a row fails. Not differentiable. */
KN_API kn_tensor *kn_multinomial(kn_tensor *probs, int64_t num_samples, bool replacement,
                                 kn_generator *gen);

/* ---- losses ---------------------------------------------------------------- */
/* torch's at::Reduction values. */
typedef enum kn_reduction {
  KN_REDUCTION_NONE = 0,  /* per-element losses */
  KN_REDUCTION_MEAN = 1,  /* mean (nan for no elements) */
  KN_REDUCTION_SUM = 2
} kn_reduction;

/* (input - target)^2, broadcasting input and target, reduced. */
KN_API kn_tensor *kn_mse_loss(kn_tensor *input, kn_tensor *target, kn_reduction reduction);
/* |input - target| reduced (composite: sub, abs, mean/sum). */
KN_API kn_tensor *kn_l1_loss(kn_tensor *input, kn_tensor *target, kn_reduction reduction);
/* -weight * (t log(x) + (1 - t) log(1 - x)), each log clamped to >= -100 as
** in torch. target has input's shape and dtype; weight (optional) broadcasts
** to it. Inputs outside [0, 1] fail with "all elements of input should be
** between 0 and 1". */
KN_API kn_tensor *kn_binary_cross_entropy(kn_tensor *input, kn_tensor *target,
                                          kn_tensor *weight, kn_reduction reduction);
/* Negative log likelihood of log-probabilities input ([C], [N, C] or
** [N, C, d1, ...]) at int64 class indices target ([], [N] or [N, d1, ...]);
** weight is optional ([C]);
** targets equal to ignore_index (torch's default is -100) are skipped; the
** mean divides by the total weight of the counted targets. KN_ERANGE
** "Target 5 is out of bounds." for a class outside [0, C). */
KN_API kn_tensor *kn_nll_loss(kn_tensor *input, kn_tensor *target, kn_tensor *weight,
                              kn_reduction reduction, int64_t ignore_index);
/* nll_loss of log_softmax(input) over the class dim (dim 1, or 0 for [C]), with optional label
** smoothing in [0, 1] (as torch's cross_entropy with class indices). */
KN_API kn_tensor *kn_cross_entropy(kn_tensor *input, kn_tensor *target, kn_tensor *weight,
                                   kn_reduction reduction, int64_t ignore_index,
                                   double label_smoothing);
/* The gradient op of nll_loss (torch's nll_loss_backward); total_weight is
** the second output of the forward (the sum of the counted weights). */
KN_API kn_tensor *kn_nll_loss_backward(kn_tensor *grad_output, kn_tensor *input,
                                       kn_tensor *target, kn_tensor *weight,
                                       kn_reduction reduction, int64_t ignore_index,
                                       kn_tensor *total_weight);

#ifdef __cplusplus
}
#endif
#endif
