/*
** support/reduce_test_util.c: helpers of reduce_test_util.h.
*/
#include "support/reduce_test_util.h"

#include <criterion/criterion.h>
#include <math.h>

#include "tensor/tensor.h"

kn_tensor *rt_from(kn_dtype dt, int ndim, const int64_t *sizes, const double *vals) {
  kn_tensor *t = kn_empty(ndim, sizes, dt);
  cr_assert_not_null(t, "%s", kn_last_error());
  char *p = kn_data(t);
  size_t es = kn_dtype_size(dt);
  for (int64_t i = 0; i < kn_numel(t); i++) kn__store_double(p + (size_t)i * es, dt, vals[i]);
  return t;
}

kn_tensor *rt_arange(kn_dtype dt, int ndim, const int64_t *sizes) {
  kn_tensor *t = kn_empty(ndim, sizes, dt);
  cr_assert_not_null(t, "%s", kn_last_error());
  char *p = kn_data(t);
  size_t es = kn_dtype_size(dt);
  for (int64_t i = 0; i < kn_numel(t); i++) kn__store_double(p + (size_t)i * es, dt, (double)i);
  return t;
}

kn_tensor *rt_transpose(kn_tensor *t) {
  int64_t sz[2] = {t->sizes[1], t->sizes[0]}, st[2] = {t->strides[1], t->strides[0]};
  return kn__autorelease(kn__make_view(t, 2, sz, st, t->offset));
}

void rt_expect(kn_tensor *t, const double *exp, double tol) {
  cr_assert_not_null(t, "%s", kn_last_error());
  int nd = kn_ndim(t);
  int64_t n = kn_numel(t), idx[KN_MAX_DIMS] = {0};
  for (int64_t i = 0; i < n; i++) {
    int64_t r = i;
    for (int d = nd - 1; d >= 0; d--) {
      idx[d] = r % kn_size(t, d);
      r /= kn_size(t, d);
    }
    double v = kn_get(t, idx);
    bool ok = (isnan(exp[i]) && isnan(v)) || v == exp[i] ||
              fabs(v - exp[i]) <= tol * (1 + fabs(exp[i]));
    cr_assert(ok, "element %lld: got %.17g, expected %.17g", (long long)i, v, exp[i]);
  }
}
