/*
** ops/iter.h: strided n-dimensional iteration shared by kernels.
**
** kn__iter walks the elements of up to KN__ITER_MAX operands that share one
** iteration shape (operands already broadcast: a broadcast dimension has
** stride 0). Dimensions are coalesced where every operand is contiguous
** across them, and the innermost dimension is handed out as a whole row, so
** kernels write a tight inner loop over `n` elements with byte strides:
**
**   kn__iter it;
**   kn__iter_init(&it, ndim, sizes);
**   kn__iter_add(&it, out);  kn__iter_add_broadcast(&it, a);  ...
**   kn__iter_start(&it);
**   char *p[KN__ITER_MAX]; int64_t n;
**   while (kn__iter_next(&it, p, &n)) { ... it.inner_stride[k] ... }
**
** Kernels never call public ops (that would re-enter the dispatcher and
** record autograd nodes); they use these helpers and kn__copy_into.
*/
#ifndef KN_OPS_ITER_H
#define KN_OPS_ITER_H

#include "ops/threads.h"
#include "tensor/tensor.h"

#define KN__ITER_MAX 6

typedef struct kn__iter {
  int ndim, nops;
  int64_t sizes[KN_MAX_DIMS];
  int64_t strides[KN__ITER_MAX][KN_MAX_DIMS]; /* bytes */
  char *base[KN__ITER_MAX];
  int64_t inner_stride[KN__ITER_MAX];         /* bytes, innermost dim */
  int64_t inner_n;
  int64_t idx[KN_MAX_DIMS];
  int64_t remaining;                          /* rows left */
  char *ptr[KN__ITER_MAX];
} kn__iter;

/* Set the iteration shape. */
void kn__iter_init(kn__iter *it, int ndim, const int64_t *sizes);
/* Add an operand whose shape equals the iteration shape. */
void kn__iter_add(kn__iter *it, const kn_tensor *t);
/* Add an operand broadcast to the iteration shape (missing leading dims and
** size-1 dims get stride 0). The caller has checked broadcastability. */
void kn__iter_add_broadcast(kn__iter *it, const kn_tensor *t);
/* Add an operand with explicit per-dimension element strides. */
void kn__iter_add_raw(kn__iter *it, void *base, const int64_t *elem_strides, size_t elsize);
/* Coalesce dimensions and get ready; call after adding all operands. */
void kn__iter_start(kn__iter *it);
/* Next row: p[k] points at operand k's first element of the row, *n is the
** row length (with inner_stride[k] byte strides). false when done. */
bool kn__iter_next(kn__iter *it, char **p, int64_t *n);
/* Total number of elements. */
int64_t kn__iter_numel(const kn__iter *it);

/* A row function: p[k] and s[k] are operand k's row start and byte stride,
** n the row length, ctx the caller's data. */
typedef void (*kn__iter_row_fn)(char **p, const int64_t *s, int64_t n, const void *ctx);
/* Pointers of row r (0 <= r < number of rows) after kn__iter_start. */
void kn__iter_row_ptrs(const kn__iter *it, int64_t r, char **p);
/* Start the iterator and call fn on every row. With at least `grain`
** elements in total (0: never) the rows, or chunks of a single long row, are
** spread over OpenMP threads, so fn must only touch its own row. */
void kn__iter_run(kn__iter *it, kn__iter_row_fn fn, const void *ctx, int64_t grain);
/* The grains (ops/threads.h, kn__par_team) of elementwise kernels:
** compute-bound loops (exp, tanh, pow, ...) KN__GRAIN, memory-bound ones
** (add, copy, compare, fill) and copies converting dtypes (the casts of
** mixed precision) KN__GRAIN_MEM. */
#define KN__PAR_GRAIN KN__GRAIN
#define KN__PAR_GRAIN_MEM KN__GRAIN_MEM
#define KN__PAR_GRAIN_CVT KN__GRAIN_MEM

/* Copy src into dst (same shape, or src broadcastable to dst), converting
** dtypes. Works on any strides; fast for contiguous same-dtype data. Does not
** dispatch, record autograd or bump versions. dst must not overlap src
** unless they are identical. */
kn_status kn__copy_into(kn_tensor *dst, const kn_tensor *src);
/* n elements of es bytes from s to d, ss and ds bytes apart: fixed-size moves
** for sizes 1, 2, 4 and 8 (a memcpy call per element costs more than the
** move). */
void kn__strided_copy(char *d, int64_t ds, const char *s, int64_t ss, size_t es, int64_t n);

/* A new contiguous copy of t (dtype dt). Owned; NULL on error. No dispatch. */
kn_tensor *kn__contiguous_copy(const kn_tensor *t, kn_dtype dt);

/* 16-bit floating tensors through a float32 kernel (the inputs widened once,
** the results rounded once: attention, convolution without oneDNN 16-bit
** kernels). kn__is16: bfloat16 or float16. kn__widen16: t itself, or for a
** 16-bit t a float32 contiguous copy kept in *keep (owned by the caller);
** NULL (and *keep NULL) on error. kn__stand_in16: the tensor a kernel writes
** t's values into: t itself, or for a 16-bit t a new float32 tensor of its
** sizes kept in *keep; NULL on error. kn__narrow16: when st is KN_OK and
** keep is non-NULL, rounds keep into t; releases keep; returns st or the
** copy's error. */
bool kn__is16(kn_dtype dt);
const kn_tensor *kn__widen16(const kn_tensor *t, kn_tensor **keep);
kn_tensor *kn__stand_in16(kn_tensor *t, kn_tensor **keep);
kn_status kn__narrow16(kn_status st, kn_tensor *t, kn_tensor *keep);

#endif
