/*
** kiln/ops_factory.h: tensors from nothing: empty, zeros, ones, full.
** `dtype` arguments take a kn_dtype; sizes are an array of ndim entries.
*/
#ifndef KILN_OPS_FACTORY_H
#define KILN_OPS_FACTORY_H

#include "kiln/random.h"
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

/* Uniform in [0, 1), standard normal, and integers in [low, high). gen may
** be NULL (the default generator). dtype must be floating for rand/randn. */
KN_API kn_tensor *kn_rand(int ndim, const int64_t *sizes, kn_generator *gen, kn_dtype dtype);
KN_API kn_tensor *kn_randn(int ndim, const int64_t *sizes, kn_generator *gen, kn_dtype dtype);
KN_API kn_tensor *kn_randint(int64_t low, int64_t high, int ndim, const int64_t *sizes,
                             kn_generator *gen, kn_dtype dtype);
/* [start, end) by step: int64 when all three are ints, else float32. */
KN_API kn_tensor *kn_arange(kn_scalar start, kn_scalar end, kn_scalar step);
KN_API kn_tensor *kn_arange_dtype(kn_scalar start, kn_scalar end, kn_scalar step, kn_dtype dtype);
/* steps values evenly spaced from start to end inclusive. */
KN_API kn_tensor *kn_linspace(double start, double end, int64_t steps, kn_dtype dtype);
/* n x m identity. */
KN_API kn_tensor *kn_eye(int64_t n, int64_t m, kn_dtype dtype);
/* A new contiguous tensor holding a copy of `data` (ndim/sizes in row-major
** order, elements of dtype's C type: float, double, int64_t, bool, uint16_t
** bits for float16/bfloat16 ...). */
KN_API kn_tensor *kn_from_array(const void *data, int ndim, const int64_t *sizes, kn_dtype dtype);
/* Convenience: float32 and float64 and int64 from C arrays. */
KN_API kn_tensor *kn_from_floats(const float *data, int ndim, const int64_t *sizes);
KN_API kn_tensor *kn_from_doubles(const double *data, int ndim, const int64_t *sizes);
KN_API kn_tensor *kn_from_ints(const int64_t *data, int ndim, const int64_t *sizes);
/* A zero-dim tensor holding one value. */
KN_API kn_tensor *kn_scalar_tensor(kn_scalar value, kn_dtype dtype);

/* Sizes written inline: kn_zeros(KN_SHAPE(2, 3), KN_FLOAT32). */
#define KN_SHAPE(...) \
  (int)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)), (const int64_t[]){__VA_ARGS__}

#ifdef __cplusplus
}
#endif
#endif
