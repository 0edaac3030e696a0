/*
** tests/nn_util.h: small helpers for the nn op tests: tensors from literal
** values, transposed views, element-wise comparison. Header-only (static)
** so every test_nn*.c can include it.
*/
#ifndef KN_TESTS_NN_UTIL_H
#define KN_TESTS_NN_UTIL_H

#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "kiln/kiln.h"
#include "ops/iter.h"
#include "tensor/tensor.h"

/* A new contiguous tensor of dtype dt holding vals (row-major). Owned by the
** open scope (or the caller when none is open). */
static inline kn_tensor *nt_from(kn_dtype dt, int ndim, const int64_t *sizes,
                                 const double *vals) {
  kn_tensor *t = kn_empty(ndim, sizes, dt);
  cr_assert_not_null(t, "%s", kn_last_error());
  size_t es = kn_dtype_size(dt);
  for (int64_t i = 0; i < kn_numel(t); i++)
    kn__store_double((char *)kn_data(t) + (size_t)i * es, dt, vals[i]);
  return t;
}
#define NT(dt, shape, ...) nt_from(dt, shape, (const double[]){__VA_ARGS__})

/* Tensor with values start, start+step, ... */
static inline kn_tensor *nt_range(kn_dtype dt, int ndim, const int64_t *sizes, double start,
                                  double step) {
  kn_tensor *t = kn_empty(ndim, sizes, dt);
  size_t es = kn_dtype_size(dt);
  for (int64_t i = 0; i < kn_numel(t); i++)
    kn__store_double((char *)kn_data(t) + (size_t)i * es, dt, start + step * (double)i);
  return t;
}

/* A view of t with dims d0 and d1 swapped (built directly; no op). */
static inline kn_tensor *nt_swap(kn_tensor *t, int d0, int d1) {
  int64_t sz[KN_MAX_DIMS], st[KN_MAX_DIMS];
  for (int d = 0; d < t->ndim; d++) sz[d] = t->sizes[d], st[d] = t->strides[d];
  sz[d0] = t->sizes[d1], sz[d1] = t->sizes[d0];
  st[d0] = t->strides[d1], st[d1] = t->strides[d0];
  return kn__autorelease(kn__make_view(t, t->ndim, sz, st, t->offset));
}

/* A contiguous copy of t's transpose, viewed back as the transpose: same
** values as t, but column-major strides. */
static inline kn_tensor *nt_colmajor(kn_tensor *t) {
  kn_tensor *tt = nt_swap(t, t->ndim - 2, t->ndim - 1);
  kn_tensor *c = kn__autorelease(kn__contiguous_copy(tt, t->dtype));
  return nt_swap(c, t->ndim - 2, t->ndim - 1);
}

/* Element i (flat, row-major over sizes) of any tensor, as double. */
static inline double nt_at(const kn_tensor *t, int64_t flat) {
  int64_t idx[KN_MAX_DIMS];
  for (int d = t->ndim - 1; d >= 0; d--) {
    idx[d] = t->sizes[d] ? flat % t->sizes[d] : 0;
    flat = t->sizes[d] ? flat / t->sizes[d] : 0;
  }
  return kn_get(t, idx);
}

/* Assert shape and values (|got - want| <= tol). */
static inline void nt_expect(const kn_tensor *t, int ndim, const int64_t *sizes,
                             const double *want, double tol) {
  cr_assert_not_null(t, "%s", kn_last_error());
  cr_assert_eq(kn_ndim(t), ndim, "ndim %d, want %d", kn_ndim(t), ndim);
  for (int d = 0; d < ndim; d++)
    cr_assert_eq(kn_size(t, d), sizes[d], "size %d: %lld, want %lld", d,
                 (long long)kn_size(t, d), (long long)sizes[d]);
  for (int64_t i = 0; i < kn_numel(t); i++) {
    double g = nt_at(t, i);
    cr_assert(fabs(g - want[i]) <= tol || (isnan(g) && isnan(want[i])),
              "element %lld: got %.9g, want %.9g", (long long)i, g, want[i]);
  }
}
#define EXPECT(t, shape, tol, ...) nt_expect(t, shape, (const double[]){__VA_ARGS__}, tol)
#define EXPECT0(t, tol, v) nt_expect(t, 0, NULL, (const double[]){v}, tol)

/* Assert that the last call failed with status st and a message containing
** text. */
#define EXPECT_ERR(r, st, text)                                                        \
  do {                                                                                 \
    cr_assert_null(r);                                                                 \
    cr_assert_eq(kn_last_status(), st, "status %d: %s", kn_last_status(), kn_last_error()); \
    cr_assert(strstr(kn_last_error(), text) != NULL, "message: %s", kn_last_error());  \
  } while (0)

#endif
