/*
** tests/test_pointwise_util.h: small helpers for the pointwise tests:
** tensors from literal values, reading values back, approximate compare.
** Tensors returned are new references registered in the open scope (tests
** run each case inside kn_scope_begin/kn_scope_end).
*/
#ifndef KN_TEST_POINTWISE_UTIL_H
#define KN_TEST_POINTWISE_UTIL_H

#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "kiln/kiln.h"
#include "tensor/tensor.h"

/* A contiguous tensor of dtype dt holding vals (converted like a C cast). */
static inline kn_tensor *tv(kn_dtype dt, int nd, const int64_t *sizes, const double *vals) {
  kn_tensor *t = kn_empty(nd, sizes, dt);
  cr_assert_not_null(t, "%s", kn_last_error());
  int64_t n = kn_numel(t);
  char *p = kn_data(t);
  for (int64_t i = 0; i < n; i++) kn__store_double(p + i * (int64_t)kn_dtype_size(dt), dt, vals[i]);
  return t;
}
#define TV(dt, shape, ...) tv(dt, KN_SHAPE shape, (const double[]){__VA_ARGS__})

/* Element i (row-major over the logical shape) as double. */
static inline double at(const kn_tensor *t, int64_t i) {
  int64_t idx[KN_MAX_DIMS];
  int nd = kn_ndim(t);
  for (int d = nd - 1; d >= 0; d--) {
    idx[d] = i % kn_size(t, d);
    i /= kn_size(t, d);
  }
  return kn_get(t, idx);
}

static inline bool close_to(double got, double want, double tol) {
  if (isnan(want)) return isnan(got);
  if (isinf(want)) return got == want;
  return fabs(got - want) <= tol * (1 + fabs(want));
}

/* Assert t has dtype dt, the given shape and values (within tol). */
static inline void expect(const kn_tensor *t, kn_dtype dt, int nd, const int64_t *sizes,
                          const double *vals, double tol) {
  cr_assert_not_null(t, "%s", kn_last_error());
  cr_assert_eq(kn_tensor_dtype(t), dt, "dtype %s, want %s", kn_dtype_name(kn_tensor_dtype(t)),
               kn_dtype_name(dt));
  cr_assert_eq(kn_ndim(t), nd, "ndim %d, want %d", kn_ndim(t), nd);
  for (int d = 0; d < nd; d++) cr_assert_eq(kn_size(t, d), sizes[d], "size of dim %d", d);
  for (int64_t i = 0; i < kn_numel(t); i++)
    cr_assert(close_to(at(t, i), vals[i], tol), "element %lld: got %.9g, want %.9g", (long long)i,
              at(t, i), vals[i]);
}
#define EXPECT(t, dt, shape, ...) expect(t, dt, KN_SHAPE shape, (const double[]){__VA_ARGS__}, 1e-6)
#define EXPECT_TOL(t, dt, tol, shape, ...) \
  expect(t, dt, KN_SHAPE shape, (const double[]){__VA_ARGS__}, tol)

static inline void expect_error(const void *r, kn_status st, const char *needle) {
  cr_assert_null(r);
  cr_assert_eq(kn_last_status(), st, "status %s: %s", kn_status_name(kn_last_status()),
               kn_last_error());
  cr_assert(strstr(kn_last_error(), needle) != NULL, "message \"%s\" lacks \"%s\"",
            kn_last_error(), needle);
}

/* Every test body runs inside a scope and must leave no tensor alive. */
static int64_t pw_live0;
static inline void pw_setup(void) {
  pw_live0 = kn_live_tensors();
  kn_scope_begin();
}
static inline void pw_teardown(void) {
  kn_scope_end();
  cr_assert_eq(kn_live_tensors(), pw_live0, "leaked %lld tensors",
               (long long)(kn_live_tensors() - pw_live0));
}

#endif
