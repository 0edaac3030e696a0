/*
** kiln/ops_factory.h: tensors from nothing: empty, zeros, ones, full.
** `dtype` arguments take a kn_dtype; sizes are an array of ndim entries.
*/
#ifndef KILN_OPS_FACTORY_H
#define KILN_OPS_FACTORY_H

#include "kiln/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Uninitialised contiguous tensor. */
KN_API kn_tensor *kn_empty(int ndim, const int64_t *sizes, kn_dtype dtype);
KN_API kn_tensor *kn_zeros(int ndim, const int64_t *sizes, kn_dtype dtype);
KN_API kn_tensor *kn_ones(int ndim, const int64_t *sizes, kn_dtype dtype);
/* Filled with value, converted to dtype. */
KN_API kn_tensor *kn_full(int ndim, const int64_t *sizes, kn_scalar value, kn_dtype dtype);
/* Metadata-only tensor (device meta): no data is allocated. */
KN_API kn_tensor *kn_empty_meta(int ndim, const int64_t *sizes, kn_dtype dtype);

/* Sizes written inline: kn_zeros(KN_SHAPE(2, 3), KN_FLOAT32). */
#define KN_SHAPE(...) \
  (int)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)), (const int64_t[]){__VA_ARGS__}

#ifdef __cplusplus
}
#endif
#endif
