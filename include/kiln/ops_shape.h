/*
** kiln/ops_shape.h: views (view, reshape, permute, transpose, expand, slice,
** select, squeeze, ...), joining and splitting (cat, stack, split, chunk),
** indexing (index_select, gather, scatter, masked_fill, index_put, setitem).
** Ownership and errors: see kiln/tensor.h and kiln/ops.h. Views share their
** input's storage and version counter (kn_same_storage is true); writes
** through a view are visible in its base. Dims may be negative (counted from
** the end); sizes are (n, array) pairs as in kiln/ops_factory.h.
*/
#ifndef KILN_OPS_SHAPE_H
#define KILN_OPS_SHAPE_H

#include "kiln/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- views ------------------------------------------------------------- */
/* View with new sizes (one may be -1, inferred). KN_ESHAPE when the sizes do
** not match numel, or when no strides can express the view ("... Use
** .reshape(...) instead."). */
KN_API kn_tensor *kn_view(kn_tensor *t, int n, const int64_t *size);
/* A view when t's strides allow it (grad_fn ReshapeAliasBackward0), else a
** contiguous copy (UnsafeViewBackward0), as torch.reshape. */
KN_API kn_tensor *kn_reshape(kn_tensor *t, int n, const int64_t *size);
/* Reorder dimensions: dims is a permutation of t's n dims. */
KN_API kn_tensor *kn_permute(kn_tensor *t, int n, const int64_t *dims);
KN_API kn_tensor *kn_transpose(kn_tensor *t, int64_t dim0, int64_t dim1);
/* Transpose of a tensor with at most 2 dims. */
KN_API kn_tensor *kn_t(kn_tensor *t);
/* Broadcast size-1 dims (stride 0) and add leading dims; -1 keeps a size. */
KN_API kn_tensor *kn_expand(kn_tensor *t, int n, const int64_t *size);
KN_API kn_tensor *kn_unsqueeze(kn_tensor *t, int64_t dim);
/* Drop every size-1 dim / dim `dim` if it has size 1. */
KN_API kn_tensor *kn_squeeze(kn_tensor *t);
KN_API kn_tensor *kn_squeeze_dim(kn_tensor *t, int64_t dim);
/* Merge dims start_dim..end_dim into one (reshape semantics). */
KN_API kn_tensor *kn_flatten(kn_tensor *t, int64_t start_dim, int64_t end_dim);
/* Split dim `dim` into n dims of the given sizes (torch.unflatten; one size
** may be -1: inferred); a view. The other dims keep their sizes, which stay
** symbolic inside a compiled function: [B, L, E] -> kn_unflatten(t, 2, 2,
** (int64_t[]){heads, -1}) needs no guard on B or L, where kn_view with sizes
** read by kn_size would specialise them. */
KN_API kn_tensor *kn_unflatten(kn_tensor *t, int64_t dim, int n, const int64_t *sizes);

/* Python-style slice [start:end:step] of dim: negative start/end count from
** the end, both are clamped to the size; step must be positive. Use
** KN_SLICE_END for an open end. */
#define KN_SLICE_END INT64_MAX
KN_API kn_tensor *kn_slice(kn_tensor *t, int64_t dim, int64_t start, int64_t end, int64_t step);
/* length elements of dim from start (start may be negative). */
KN_API kn_tensor *kn_narrow(kn_tensor *t, int64_t dim, int64_t start, int64_t length);
/* Element `index` of dim (negative counts from the end); drops the dim. */
KN_API kn_tensor *kn_select(kn_tensor *t, int64_t dim, int64_t index);
/* The diagonal of dims dim1/dim2 (offset > 0: above), appended as last dim. */
KN_API kn_tensor *kn_diagonal(kn_tensor *t, int64_t offset, int64_t dim1, int64_t dim2);
/* Arbitrary geometry over t's storage; storage_offset < 0 keeps t's offset.
** KN_ERANGE when the view reaches past the storage. */
KN_API kn_tensor *kn_as_strided(kn_tensor *t, int n, const int64_t *size, const int64_t *stride,
                                int64_t storage_offset);

/* ---- multi-output views: fill outs[0..k) (each a new reference in the
** current scope) and return k, or -1 on error (also when k > cap). */
/* One view per index of dim (select). */
KN_API int kn_unbind(kn_tensor *t, int64_t dim, kn_tensor **outs, int cap);
/* Pieces of split_size along dim (the last may be smaller). */
KN_API int kn_split(kn_tensor *t, int64_t split_size, int64_t dim, kn_tensor **outs, int cap);
/* Pieces of the given sizes (which must sum to the size of dim). */
KN_API int kn_split_sizes(kn_tensor *t, int n, const int64_t *sizes, int64_t dim,
                          kn_tensor **outs, int cap);
/* `chunks` pieces of ceil(size / chunks) (fewer when the size runs out). */
KN_API int kn_chunk(kn_tensor *t, int64_t chunks, int64_t dim, kn_tensor **outs, int cap);

/* ---- joining ------------------------------------------------------------- */
/* Concatenate along dim; 1-D empty tensors are skipped (legacy rule), the
** result dtype is the promotion of all inputs. */
KN_API kn_tensor *kn_cat(kn_tensor *const *tensors, int n, int64_t dim);
/* Stack equal-sized tensors along a new dim. */
KN_API kn_tensor *kn_stack(kn_tensor *const *tensors, int n, int64_t dim);

/* ---- writing into views, out of place ----------------------------------- */
/* A copy of self with src written into self[slice] / select / diagonal; src
** must have exactly that view's sizes. */
KN_API kn_tensor *kn_slice_scatter(kn_tensor *self, kn_tensor *src, int64_t dim, int64_t start,
                                   int64_t end, int64_t step);
KN_API kn_tensor *kn_select_scatter(kn_tensor *self, kn_tensor *src, int64_t dim, int64_t index);
KN_API kn_tensor *kn_diagonal_scatter(kn_tensor *self, kn_tensor *src, int64_t offset,
                                      int64_t dim1, int64_t dim2);

/* ---- indexing ------------------------------------------------------------ */
/* Rows of dim picked by a 1-D int32/int64 index. */
KN_API kn_tensor *kn_index_select(kn_tensor *t, int64_t dim, kn_tensor *index);
/* A copy of t with source's rows added at index along dim (index_add). */
KN_API kn_tensor *kn_index_add(kn_tensor *t, int64_t dim, kn_tensor *index, kn_tensor *source);
/* out[i][j] = t[index[i][j]][j] for dim 0 (and so on); int64 index with t's
** rank; the result has index's shape. */
KN_API kn_tensor *kn_gather(kn_tensor *t, int64_t dim, kn_tensor *index);
/* A copy of t with src's elements (or value) written at index along dim. */
KN_API kn_tensor *kn_scatter(kn_tensor *t, int64_t dim, kn_tensor *index, kn_tensor *src);
KN_API kn_tensor *kn_scatter_value(kn_tensor *t, int64_t dim, kn_tensor *index, kn_scalar value);
/* The same, adding instead of writing. */
KN_API kn_tensor *kn_scatter_add(kn_tensor *t, int64_t dim, kn_tensor *index, kn_tensor *src);
/* value where mask (bool, broadcast with t), else t. The tensor overload
** takes a 0-dim value tensor (differentiable). In-place variants keep t's
** shape. */
KN_API kn_tensor *kn_masked_fill(kn_tensor *t, kn_tensor *mask, kn_scalar value);
KN_API kn_tensor *kn_masked_fill_tensor(kn_tensor *t, kn_tensor *mask, kn_tensor *value);
KN_API kn_status kn_masked_fill_(kn_tensor *t, kn_tensor *mask, kn_scalar value);
KN_API kn_status kn_masked_fill_tensor_(kn_tensor *t, kn_tensor *mask, kn_tensor *value);
/* Advanced indexing t[i0, i1, ...] with n index tensors over t's leading
** dims: integer tensors (negative values count from the end) broadcast
** together, a bool mask covers as many dims as it has (its true entries).
** The result has shape broadcast(indices) + t's remaining sizes. */
KN_API kn_tensor *kn_index(kn_tensor *t, kn_tensor *const *indices, int n);
/* A copy of t with values (broadcast to the indexing result's shape, same
** dtype as t) written at t[indices], or added when accumulate. */
KN_API kn_tensor *kn_index_put(kn_tensor *t, kn_tensor *const *indices, int n,
                               kn_tensor *values, bool accumulate);
KN_API kn_status kn_index_put_(kn_tensor *t, kn_tensor *const *indices, int n,
                               kn_tensor *values, bool accumulate);
/* t[..., start:end:step (along dim), ...] = value, in place (value broadcasts
** to the slice; any dtype). Bumps t's version; differentiable for t and
** value (grad_fn CopySlices). */
KN_API kn_status kn_setitem_slice(kn_tensor *t, int64_t dim, int64_t start, int64_t end,
                                  int64_t step, kn_tensor *value);
/* The same with a scalar value (converted to t's dtype). */
KN_API kn_status kn_setitem_slice_scalar(kn_tensor *t, int64_t dim, int64_t start, int64_t end,
                                         int64_t step, kn_scalar value);
/* t.select(dim, index) = value, in place. */
KN_API kn_status kn_setitem_select(kn_tensor *t, int64_t dim, int64_t index, kn_tensor *value);
/* The int64 [n, t.ndim] coordinates of t's nonzero elements (NaN counts),
** row-major order, as torch.nonzero. Not differentiable. The output shape
** depends on the data: KN_EUNSUPPORTED for meta tensors; inside a compiled
** function it is a graph break (the op runs eagerly on the real values). */
KN_API kn_tensor *kn_nonzero(kn_tensor *t);

#ifdef __cplusplus
}
#endif
#endif
