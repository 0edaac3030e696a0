/*
** test_reduce.c: sum, mean, prod and sum_to_size: literal values, dims and
** keepdim, negative dims, empty reductions, non-contiguous and meta inputs,
** dtype rules, error messages, accuracy on 1e6 elements, leaks.
*/
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "kiln/kiln.h"
#include "ops/opdef.h"
#include "support/fixture.h"
#include "support/reduce_test_util.h"

static int64_t live0;
static void setup(void) { live0 = kn_live_tensors(); kn_scope_begin(); }
static void teardown(void) {
  kn_scope_end();
  cr_assert_eq(kn_live_tensors(), live0, "leaked %lld tensors",
               (long long)(kn_live_tensors() - live0));
}
TestSuite(reduce, .init = setup, .fini = teardown);

Test(reduce, sum_all_literal_and_dtype_rules) {
  kn_tensor *a = rt_from(KN_FLOAT32, KN_SHAPE(2, 3), (double[]){1, 2, 3, 4, 5, 6.5});
  kn_tensor *s = kn_sum(a);
  cr_assert_eq(kn_ndim(s), 0);
  cr_assert_eq(kn_tensor_dtype(s), KN_FLOAT32);
  rt_expect(s, (double[]){21.5}, 0);
  kn_tensor *i = rt_from(KN_INT32, KN_SHAPE(3), (double[]){1, -7, 100});
  kn_tensor *si = kn_sum(i);
  cr_assert_eq(kn_tensor_dtype(si), KN_INT64);
  rt_expect(si, (double[]){94}, 0);
  kn_tensor *b = rt_from(KN_BOOL, KN_SHAPE(4), (double[]){1, 0, 1, 1});
  kn_tensor *sb = kn_sum(b);
  cr_assert_eq(kn_tensor_dtype(sb), KN_INT64);
  rt_expect(sb, (double[]){3}, 0);
  kn_tensor *u = rt_from(KN_UINT8, KN_SHAPE(3), (double[]){200, 200, 200});
  rt_expect(kn_sum(u), (double[]){600}, 0); /* no uint8 overflow: int64 result */
  kn_tensor *h = rt_from(KN_FLOAT16, KN_SHAPE(3), (double[]){0.5, 0.25, 1});
  kn_tensor *sh = kn_sum(h);
  cr_assert_eq(kn_tensor_dtype(sh), KN_FLOAT16);
  rt_expect(sh, (double[]){1.75}, 0);
  kn_tensor *bf = rt_from(KN_BFLOAT16, KN_SHAPE(2), (double[]){2, 3});
  rt_expect(kn_sum(bf), (double[]){5}, 0);
  kn_tensor *d = kn_sum_dtype(i, NULL, 0, false, KN_FLOAT64);
  cr_assert_eq(kn_tensor_dtype(d), KN_FLOAT64);
  rt_expect(d, (double[]){94}, 0);
}

/* Expected sum over a dims mask of a [2,3,4] tensor holding 0..23, by loops. */
static void expect_sum_234(kn_tensor *r, const bool *mask, bool keepdim) {
  int64_t osz[3];
  int on = 0;
  for (int d = 0; d < 3; d++) {
    int64_t full = (int64_t[]){2, 3, 4}[d];
    if (!mask[d]) osz[on++] = full;
    else if (keepdim) osz[on++] = 1;
  }
  cr_assert_eq(kn_ndim(r), on);
  for (int d = 0; d < on; d++) cr_assert_eq(kn_size(r, d), osz[d]);
  double exp[24] = {0};
  int64_t strides[3] = {0}; /* output linear strides over the 3 input dims */
  int64_t acc = 1;
  for (int d = 2; d >= 0; d--) {
    if (mask[d]) continue;
    strides[d] = acc;
    acc *= (int64_t[]){2, 3, 4}[d];
  }
  for (int i = 0; i < 2; i++)
    for (int j = 0; j < 3; j++)
      for (int k = 0; k < 4; k++)
        exp[i * strides[0] + j * strides[1] + k * strides[2]] += i * 12 + j * 4 + k;
  rt_expect(r, exp, 0);
}

Test(reduce, sum_dims_keepdim_and_negative_dims) {
  kn_tensor *a = rt_arange(KN_FLOAT64, KN_SHAPE(2, 3, 4));
  static const int64_t lists[][3] = {{0}, {1}, {2}, {-1}, {0, 2}, {-3, -2}, {2, 0, 1}, {1, -1}};
  static const int lens[] = {1, 1, 1, 1, 2, 2, 3, 2};
  for (int l = 0; l < 8; l++)
    for (int kd = 0; kd < 2; kd++) {
      bool mask[3] = {false, false, false};
      for (int i = 0; i < lens[l]; i++) mask[(lists[l][i] + 3) % 3] = true;
      kn_tensor *r = kn_sum_dims(a, lists[l], lens[l], kd);
      cr_assert_not_null(r, "%s", kn_last_error());
      expect_sum_234(r, mask, kd);
    }
  /* empty list = all dims */
  kn_tensor *all = kn_sum_dims(a, NULL, 0, true);
  cr_assert_eq(kn_ndim(all), 3);
  rt_expect(all, (double[]){276}, 0);
}

Test(reduce, sum_of_empty_is_zero_and_zero_size_outputs) {
  kn_tensor *e = kn_zeros(KN_SHAPE(0), KN_FLOAT32);
  rt_expect(kn_sum(e), (double[]){0}, 0);
  kn_tensor *e2 = kn_zeros(KN_SHAPE(3, 0), KN_INT32);
  kn_tensor *r = kn_sum_dims(e2, (int64_t[]){1}, 1, false);
  cr_assert_eq(kn_size(r, 0), 3);
  rt_expect(r, (double[]){0, 0, 0}, 0);
  kn_tensor *r0 = kn_sum_dims(e2, (int64_t[]){0}, 1, false);
  cr_assert_eq(kn_ndim(r0), 1);
  cr_assert_eq(kn_size(r0, 0), 0);
  kn_tensor *p = kn_prod(e);
  rt_expect(p, (double[]){1}, 0);
  double m;
  cr_assert_eq(kn_item_double(kn_mean(e), &m), KN_OK);
  cr_assert(isnan(m));
}

Test(reduce, scalar_input_reduces_over_dim_0) {
  kn_tensor *s = rt_from(KN_FLOAT32, 0, NULL, (double[]){4.5});
  kn_tensor *r = kn_sum_dims(s, (int64_t[]){-1}, 1, false);
  cr_assert_eq(kn_ndim(r), 0);
  rt_expect(r, (double[]){4.5}, 0);
  cr_assert_null(kn_sum_dims(s, (int64_t[]){1}, 1, false));
  cr_assert_str_eq(kn_last_error(), "Dimension out of range (expected to be in range of [-1, 0], but got 1)");
}

Test(reduce, non_contiguous_input) {
  kn_tensor *a = rt_arange(KN_FLOAT32, KN_SHAPE(3, 4));
  kn_tensor *t = rt_transpose(a); /* [4, 3] */
  rt_expect(kn_sum_dims(t, (int64_t[]){1}, 1, false), (double[]){12, 15, 18, 21}, 0);
  rt_expect(kn_sum_dims(t, (int64_t[]){0}, 1, false), (double[]){6, 22, 38}, 0);
  rt_expect(kn_sum(t), (double[]){66}, 0);
  /* a strided slice: every second column */
  kn_tensor *s = kn__make_view(a, 2, (int64_t[]){3, 2}, (int64_t[]){4, 2}, 1);
  rt_expect(kn_sum_dims(s, (int64_t[]){0}, 1, true), (double[]){15, 21}, 0);
  kn_release(s);
}

Test(reduce, meta_inputs_give_shapes_and_dtypes) {
  kn_tensor *m = kn_empty_meta(KN_SHAPE(5, 6, 7), KN_INT16);
  kn_tensor *r = kn_sum_dims(m, (int64_t[]){1}, 1, true);
  cr_assert_not_null(r);
  cr_assert_eq(kn_tensor_device(r), KN_META);
  cr_assert_eq(kn_tensor_dtype(r), KN_INT64);
  cr_assert_eq(kn_ndim(r), 3);
  cr_assert_eq(kn_size(r, 1), 1);
  cr_assert_eq(kn_size(r, 2), 7);
  kn_tensor *mf = kn_empty_meta(KN_SHAPE(5, 6), KN_FLOAT32);
  kn_tensor *mm = kn_mean_dims(mf, (int64_t[]){0}, 1, false);
  cr_assert_eq(kn_ndim(mm), 1);
  cr_assert_eq(kn_size(mm, 0), 6);
  cr_assert_null(kn_mean(m));
}

Test(reduce, errors_match_torch) {
  kn_tensor *a = rt_arange(KN_FLOAT32, KN_SHAPE(2, 3));
  cr_assert_null(kn_sum_dims(a, (int64_t[]){0, -2}, 2, false));
  cr_assert_str_eq(kn_last_error(), "dim 0 appears multiple times in the list of dims");
  cr_assert_null(kn_sum_dims(a, (int64_t[]){2}, 1, false));
  cr_assert_eq(kn_last_status(), KN_ERANGE);
  cr_assert_str_eq(kn_last_error(), "Dimension out of range (expected to be in range of [-2, 1], but got 2)");
  kn_tensor *i = rt_arange(KN_INT64, KN_SHAPE(3));
  cr_assert_null(kn_mean(i));
  cr_assert_str_eq(kn_last_error(), "mean(): could not infer output dtype. Input dtype must be "
                                    "either a floating point or complex dtype. Got: Long");
  cr_assert_null(kn_mean_dtype(a, NULL, 0, false, KN_INT64));
  cr_assert_str_eq(kn_last_error(), "mean(): could not infer output dtype. Optional dtype must be "
                                    "either a floating point or complex dtype. Got: Long");
  cr_assert_null(kn_sum(NULL));
  cr_assert_eq(kn_last_status(), KN_EINVAL);
}

Test(reduce, mean_and_prod_literals) {
  kn_tensor *a = rt_from(KN_FLOAT32, KN_SHAPE(2, 3), (double[]){1, 2, 3, 4, 5, 6});
  rt_expect(kn_mean(a), (double[]){3.5}, 1e-7);
  rt_expect(kn_mean_dims(a, (int64_t[]){1}, 1, false), (double[]){2, 5}, 1e-7);
  rt_expect(kn_mean_dims(a, (int64_t[]){0}, 1, true), (double[]){2.5, 3.5, 4.5}, 1e-7);
  rt_expect(kn_prod(a), (double[]){720}, 0);
  rt_expect(kn_prod_dim(a, -1, false), (double[]){6, 120}, 0);
  kn_tensor *p0 = kn_prod_dim(a, 0, true);
  cr_assert_eq(kn_ndim(p0), 2);
  rt_expect(p0, (double[]){4, 10, 18}, 0);
  kn_tensor *i = rt_from(KN_INT8, KN_SHAPE(3), (double[]){-2, 100, 3});
  kn_tensor *pi = kn_prod(i);
  cr_assert_eq(kn_tensor_dtype(pi), KN_INT64);
  rt_expect(pi, (double[]){-600}, 0);
  kn_tensor *mi = kn_mean_dtype(i, NULL, 0, false, KN_FLOAT64);
  rt_expect(mi, (double[]){101.0 / 3.0}, 1e-12);
}

Test(reduce, half_precision_and_integer_wraparound) {
  kn_tensor *b = rt_from(KN_BFLOAT16, KN_SHAPE(2, 2), (double[]){1, 2, 3, 5});
  kn_tensor *m = kn_mean_dims(b, (int64_t[]){1}, 1, false);
  cr_assert_eq(kn_tensor_dtype(m), KN_BFLOAT16);
  rt_expect(m, (double[]){1.5, 4}, 0);
  kn_tensor *h = rt_from(KN_FLOAT16, KN_SHAPE(3), (double[]){1, 2, 4});
  rt_expect(kn_var(h, NULL, 0, 1, false), (double[]){7.0 / 3.0}, 1e-3); /* rounded to half */
  rt_expect(kn_cumsum(h, 0), (double[]){1, 3, 7}, 0);
  rt_expect(kn_amax(h, NULL, 0, false), (double[]){4}, 0);
  /* 1024 + 0.5 rounds back to 1024 in half: the sum is accumulated wide */
  kn_tensor *h2 = rt_from(KN_FLOAT16, KN_SHAPE(3), (double[]){1024, 0.5, 0.5});
  rt_expect(kn_sum(h2), (double[]){1025}, 0);
  kn_tensor *big = kn_full(KN_SHAPE(2), kn_int(INT64_MAX), KN_INT64);
  int64_t v;
  cr_assert_eq(kn_item_int(kn_sum(big), &v), KN_OK);
  cr_assert_eq(v, -2); /* wraps like torch's int64 arithmetic */
}

Test(reduce, float32_sum_of_a_million_matches_exact_sum) {
  int64_t n = 1000000;
  kn_tensor *a = kn_empty(KN_SHAPE(n), KN_FLOAT32);
  float *p = kn_data(a);
  long double exact = 0;
  uint32_t x = 12345;
  for (int64_t i = 0; i < n; i++) {
    x = x * 1664525u + 1013904223u;
    p[i] = (float)(x >> 8) / (float)(1 << 24) + 0.1f;
    exact += p[i];
  }
  double s;
  cr_assert_eq(kn_item_double(kn_sum(a), &s), KN_OK);
  cr_assert(fabs(s - (double)exact) <= 1e-6 * (double)exact, "%.9g vs %.9Lg", s, exact);
  double m;
  cr_assert_eq(kn_item_double(kn_mean(a), &m), KN_OK);
  cr_assert(fabs(m - (double)(exact / n)) <= 1e-6 * (double)(exact / n));
  /* over a dim: [1000, 1000] rows and columns */
  kn_tensor *v = kn__make_view(a, 2, (int64_t[]){1000, 1000}, (int64_t[]){1000, 1}, 0);
  kn_tensor *rows = kn_sum_dims(v, (int64_t[]){0}, 1, false);
  kn_tensor *tot = kn_sum(rows);
  cr_assert_eq(kn_item_double(tot, &s), KN_OK);
  cr_assert(fabs(s - (double)exact) <= 1e-5 * (double)exact);
  kn_release(v);
}

Test(reduce, sum_to_size_reduces_broadcast_dims) {
  kn_tensor *g = rt_arange(KN_FLOAT32, KN_SHAPE(2, 3));
  kn_tensor *r = kn_sum_to_size(g, KN_SHAPE(3));
  cr_assert_eq(kn_ndim(r), 1);
  rt_expect(r, (double[]){3, 5, 7}, 0);
  kn_tensor *r2 = kn_sum_to_size(g, KN_SHAPE(2, 1));
  cr_assert_eq(kn_ndim(r2), 2);
  cr_assert_eq(kn_size(r2, 1), 1);
  rt_expect(r2, (double[]){3, 12}, 0);
  kn_tensor *r3 = kn_sum_to_size(g, KN_SHAPE(1, 1));
  rt_expect(r3, (double[]){15}, 0);
  kn_tensor *r4 = kn_sum_to_size(g, 0, NULL);
  cr_assert_eq(kn_ndim(r4), 0);
  rt_expect(r4, (double[]){15}, 0);
  kn_tensor *g3 = rt_arange(KN_FLOAT64, KN_SHAPE(2, 3, 4));
  kn_tensor *r5 = kn_sum_to_size(g3, KN_SHAPE(3, 1));
  cr_assert_eq(kn_ndim(r5), 2);
  /* sum over i (dim 0) and k (dim 2) of i*12 + j*4 + k: 2*4*4j + 4*12 + 2*6 */
  rt_expect(r5, (double[]){60, 92, 124}, 0);
  kn_tensor *same = kn_sum_to_size(g, KN_SHAPE(2, 3));
  cr_assert_eq(same, g);
}

Test(reduce, sum_to_size_errors_and_meta) {
  kn_tensor *g = rt_arange(KN_FLOAT32, KN_SHAPE(2, 3));
  cr_assert_null(kn_sum_to_size(g, KN_SHAPE(4)));
  cr_assert_eq(kn_last_status(), KN_ESHAPE);
  cr_assert_str_eq(kn_last_error(), "size {[4]} is not expandable to size {[2, 3]}.");
  cr_assert_null(kn_sum_to_size(g, KN_SHAPE(1, 2, 3)));
  cr_assert_str_eq(kn_last_error(), "size {[1, 2, 3]} is not expandable to size {[2, 3]}.");
  kn_tensor *m = kn_empty_meta(KN_SHAPE(8, 5, 6), KN_FLOAT32);
  kn_tensor *r = kn_sum_to_size(m, KN_SHAPE(1, 6));
  cr_assert_eq(kn_tensor_device(r), KN_META);
  cr_assert_eq(kn_ndim(r), 2);
  cr_assert_eq(kn_size(r, 0), 1);
  cr_assert_eq(kn_size(r, 1), 6);
}

Test(reduce, sum_to_size_without_scope_does_not_leak) {
  kn_scope_end(); /* run with no scope open */
  int64_t before = kn_live_tensors();
  kn_tensor *g = kn_ones(KN_SHAPE(4, 2, 3), KN_FLOAT32);
  kn_tensor *r = kn_sum_to_size(g, KN_SHAPE(2, 1));
  rt_expect(r, (double[]){12, 12}, 0);
  kn_release(r);
  kn_release(g);
  cr_assert_eq(kn_live_tensors(), before);
  kn_scope_begin();
}

/* bfloat16/float16 sums over the outer dims (a bias gradient), the inner
** dim and everything take the vectorised 16-bit paths: each result is the
** exact (long double) sum of the 16-bit values rounded once to the dtype,
** as the per-element path gives (a double accumulator is exact enough
** here: 2^-40 relative, far below the 2^-9 half-ulp of the rounding). */
static void check_sum16(kn_dtype dt, int64_t R, int64_t C) {
  kn_tensor *x = kn_to(kn_randn(2, (int64_t[]){R, C}, NULL, KN_FLOAT32), dt);
  kn_tensor *xd = kn_to(x, KN_FLOAT64); /* the 16-bit values, exactly */
  const double *v = kn_data(xd);
  kn_tensor *cols = kn_sum_dims(x, (int64_t[]){0}, 1, false);
  kn_tensor *rows = kn_mean_dims(x, (int64_t[]){1}, 1, false);
  kn_tensor *all = kn_sum(x);
  cr_assert(cols && rows && all, "%s", kn_last_error());
  cr_assert(kn_tensor_dtype(cols) == dt && kn_tensor_dtype(all) == dt);
  double want[2048], got;
  for (int64_t j = 0; j < C; j++) {
    long double s = 0;
    for (int64_t i = 0; i < R; i++) s += v[i * C + j];
    want[j] = (double)s;
  }
  kn_tensor *wc = kn_to(rt_from(KN_FLOAT64, KN_SHAPE(C), want), dt);
  char why[256];
  cr_assert(kn_tensors_close(cols, wc, 0, 0, true, why, sizeof why),
            "%s column sums of [%lld, %lld]: %s", kn_dtype_name(dt), (long long)R, (long long)C,
            why);
  long double tot = 0;
  for (int64_t i = 0; i < R; i++) {
    long double s = 0;
    for (int64_t j = 0; j < C; j++) s += v[i * C + j];
    tot += s;
    kn_tensor *w = kn_to(rt_from(KN_FLOAT64, KN_SHAPE(1), (double[]){(double)(s / C)}), dt);
    cr_assert_eq(kn_item_double(kn_select(rows, 0, i), &got), KN_OK);
    double wv;
    cr_assert_eq(kn_item_double(w, &wv), KN_OK);
    cr_assert_eq(got, wv, "%s row %lld mean: %g vs %g", kn_dtype_name(dt), (long long)i, got, wv);
  }
  kn_tensor *wt = kn_to(rt_from(KN_FLOAT64, KN_SHAPE(1), (double[]){(double)tot}), dt);
  double wv;
  cr_assert_eq(kn_item_double(all, &got), KN_OK);
  cr_assert_eq(kn_item_double(wt, &wv), KN_OK);
  cr_assert_eq(got, wv, "%s total: %g vs %g", kn_dtype_name(dt), got, wv);
}

Test(reduce, half_precision_sums_are_the_exact_sums_rounded_once) {
  for (int i = 0; i < 2; i++) {
    kn_dtype dt = i ? KN_FLOAT16 : KN_BFLOAT16;
    check_sum16(dt, 37, 1300);  /* chunks of 512 + tail, conversion tails */
    check_sum16(dt, 600, 1024); /* parallel outputs, a whole-tensor sum in blocks */
  }
}

/* float32/float64 sums over the outer dims whose kept rows are too few to
** feed a 2-thread team (a bias gradient: [R, C] summed over R, one kept row
** of one 512-column chunk) split their columns into narrower chunks; each
** column still sums in memory order in double, so the result is that
** sequential double sum rounded once, bit for bit, at 1 and 2 threads. */
static void check_outer(kn_dtype dt, int64_t R, int64_t C) {
  kn_tensor *x = kn_to(kn_randn(2, (int64_t[]){R, C}, NULL, KN_FLOAT32), dt);
  kn_tensor *xd = kn_to(x, KN_FLOAT64);
  const double *v = kn_data(xd);
  double want[512];
  for (int64_t j = 0; j < C; j++) {
    double s = 0;
    for (int64_t i = 0; i < R; i++) s += v[i * C + j];
    want[j] = dt == KN_FLOAT32 ? (double)(float)s : s;
  }
  for (int nt = 1; nt <= 2; nt++) {
    cr_assert_eq(kn_set_num_threads(nt), KN_OK);
    kn_tensor *cols = kn_sum_dims(x, (int64_t[]){0}, 1, false);
    kn_tensor *c64 = kn_to(cols, KN_FLOAT64);
    const double *got = kn_data(c64);
    for (int64_t j = 0; j < C; j++)
      cr_assert_eq(got[j], want[j], "%s [%lld, %lld] column %lld at %d threads: %.17g vs %.17g",
                   kn_dtype_name(dt), (long long)R, (long long)C, (long long)j, nt, got[j],
                   want[j]);
  }
}

Test(reduce, outer_sums_split_columns_for_the_team_and_keep_the_order) {
  int prev = kn_get_num_threads();
  for (int i = 0; i < 2; i++) {
    kn_dtype dt = i ? KN_FLOAT64 : KN_FLOAT32;
    check_outer(dt, 2048, 256); /* two chunks of 128 at 2 threads */
    check_outer(dt, 1000, 100); /* chunks of 64 and a tail of 36 */
    check_outer(dt, 300, 16);   /* too narrow to split */
    check_outer(dt, 1003, 40);  /* rows four at a time, then a tail of 3 */
  }
  kn_set_num_threads(prev);
}
