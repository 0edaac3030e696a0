/*
** support/shape_util.c: helpers for view and indexing tests.
*/
#include <criterion/criterion.h>

#include "kiln/ops_factory.h"
#include "support/shape_util.h"

kn_tensor *kn_test_seq(int n, const int64_t *sizes) {
  kn_tensor *t = kn_empty(n, sizes, KN_FLOAT32);
  cr_assert_not_null(t, "%s", kn_last_error());
  float *p = kn_data(t);
  for (int64_t i = 0; i < kn_numel(t); i++) p[i] = (float)i;
  return t;
}

void kn_test_expect_geom(int line, const kn_tensor *t, int nd, const int64_t *sz,
                         const int64_t *st, int64_t off) {
  cr_assert_not_null(t, "line %d: %s", line, kn_last_error());
  cr_assert_eq(kn_ndim(t), nd, "line %d: ndim %d, expected %d", line, kn_ndim(t), nd);
  for (int d = 0; d < nd; d++) {
    cr_assert_eq(kn_sizes(t)[d], sz[d], "line %d: size[%d] = %lld, expected %lld", line, d,
                 (long long)kn_sizes(t)[d], (long long)sz[d]);
    cr_assert_eq(kn_strides(t)[d], st[d], "line %d: stride[%d] = %lld, expected %lld", line, d,
                 (long long)kn_strides(t)[d], (long long)st[d]);
  }
  cr_assert_eq(kn_storage_offset(t), off, "line %d: offset %lld, expected %lld", line,
               (long long)kn_storage_offset(t), (long long)off);
}
