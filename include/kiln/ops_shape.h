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

#ifdef __cplusplus
}
#endif
#endif
