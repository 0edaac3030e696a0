/*
** test_index_rows.c: index_select and gather over contiguous tensors (the
** threaded row kernels of ops/index_rows.c), and scatter / scatter_add (their
** column split), against the general kernels of
** ops/index.c, reached with the same values in a non-contiguous tensor:
** every dim, dtypes of 1, 2, 4 and 8 bytes, repeated indices, sizes that
** split over 2 threads and sizes that do not, and the errors of a bad index.
*/
#include <criterion/criterion.h>
#include <string.h>

#include "kiln/kiln.h"
#include "support/leakcheck.h"

TestSuite(index_rows, .init = kn_test_leakcheck_begin, .fini = kn_test_leakcheck_end);

/* The values of t in a non-contiguous tensor (a narrowed wider buffer). */
static kn_tensor *strided_copy(kn_tensor *t) {
  int nd = kn_ndim(t);
  int64_t wide[8];
  memcpy(wide, kn_sizes(t), (size_t)nd * sizeof *wide);
  wide[nd - 1] += 3;
  kn_tensor *w = kn_zeros(nd, wide, kn_tensor_dtype(t));
  kn_tensor *v = kn_narrow(w, nd - 1, 1, kn_sizes(t)[nd - 1]);
  cr_assert(v && !kn_is_contiguous(v));
  cr_assert_eq(kn_copy_(v, t), KN_OK, "%s", kn_last_error());
  return v;
}

static void expect_same_bytes(const kn_tensor *a, const kn_tensor *b, const char *what) {
  cr_assert(a && b, "%s: %s", what, kn_last_error());
  cr_assert_eq(kn_numel(a), kn_numel(b), "%s", what);
  cr_assert(kn_is_contiguous(a) && kn_is_contiguous(b), "%s", what);
  size_t n = (size_t)kn_numel(a) * kn_dtype_size(kn_tensor_dtype(a));
  cr_assert(!memcmp(kn_data((kn_tensor *)a), kn_data((kn_tensor *)b), n), "%s differs", what);
}

/* A [4, 130, 600] tensor of dtype dt (312000 elements: 2 threads' worth of
** rows along any dim) with distinct values. */
static kn_tensor *source(kn_dtype dt, kn_generator *g) {
  kn_tensor *x = kn_randn(3, (int64_t[]){4, 130, 600}, g, KN_FLOAT32);
  return dt == KN_FLOAT32 ? x : kn_to(kn_mul_scalar(x, kn_float(100)), dt);
}

static void check_index_select(kn_dtype dt, int nthreads) {
  kn_scope_begin();
  kn_set_num_threads(nthreads);
  kn_generator *g = kn_generator_new(5);
  kn_tensor *x = source(dt, g), *xs = strided_copy(x);
  for (int d = 0; d < 3; d++) {
    int64_t size = kn_sizes(x)[d], n = 2 * size + 1;
    kn_tensor *idx = kn_randint(0, size, 1, &n, g, d == 1 ? KN_INT32 : KN_INT64);
    char what[64];
    snprintf(what, sizeof what, "index_select dim %d dtype %d threads %d", d, (int)dt, nthreads);
    expect_same_bytes(kn_index_select(x, d, idx), kn_index_select(xs, d, idx), what);
  }
  kn_generator_free(g);
  kn_set_num_threads(0);
  kn_scope_end();
}

static void check_gather(kn_dtype dt, int nthreads) {
  kn_scope_begin();
  kn_set_num_threads(nthreads);
  kn_generator *g = kn_generator_new(6);
  kn_tensor *x = source(dt, g), *xs = strided_copy(x);
  for (int d = 0; d < 3; d++) {
    int64_t sz[3] = {4, 130, 600};
    int64_t size = sz[d];
    sz[d] = d == 2 ? 7 : 3 * size; /* fewer and more entries than the dim holds */
    kn_tensor *idx = kn_randint(0, size, 3, sz, g, KN_INT64);
    char what[64];
    snprintf(what, sizeof what, "gather dim %d dtype %d threads %d", d, (int)dt, nthreads);
    expect_same_bytes(kn_gather(x, d, idx), kn_gather(xs, d, idx), what);
  }
  kn_generator_free(g);
  kn_set_num_threads(0);
  kn_scope_end();
}

Test(index_rows, index_select_matches_the_general_kernel) {
  kn_dtype dts[] = {KN_FLOAT32, KN_FLOAT64, KN_BFLOAT16, KN_INT64, KN_BOOL};
  for (size_t i = 0; i < sizeof dts / sizeof dts[0]; i++) {
    check_index_select(dts[i], 1);
    check_index_select(dts[i], 2);
  }
}

Test(index_rows, gather_matches_the_general_kernel) {
  kn_dtype dts[] = {KN_FLOAT32, KN_FLOAT64, KN_BFLOAT16, KN_INT32, KN_BOOL};
  for (size_t i = 0; i < sizeof dts / sizeof dts[0]; i++) {
    check_gather(dts[i], 1);
    check_gather(dts[i], 2);
  }
}

/* scatter (src and value) and scatter_add with many duplicate indices:
** the general kernel is reached through a strided src (or index). */
static void check_scatter(kn_dtype dt, int nthreads) {
  kn_scope_begin();
  kn_set_num_threads(nthreads);
  kn_generator *g = kn_generator_new(8);
  kn_tensor *x = source(dt, g);
  for (int d = 0; d < 3; d++) {
    int64_t sz[3] = {4, 130, 600};
    int64_t size = sz[d];
    sz[d] = d == 2 ? 900 : 2 * size; /* every output element hit about twice */
    kn_tensor *idx = kn_randint(0, size, 3, sz, g, KN_INT64), *idxs = strided_copy(idx);
    kn_tensor *src = kn_to(kn_randn(3, sz, g, KN_FLOAT32), dt), *srcs = strided_copy(src);
    char what[80];
    snprintf(what, sizeof what, "scatter dim %d dtype %d threads %d", d, (int)dt, nthreads);
    expect_same_bytes(kn_scatter(x, d, idx, src), kn_scatter(x, d, idx, srcs), what);
    snprintf(what, sizeof what, "scatter_add dim %d dtype %d threads %d", d, (int)dt, nthreads);
    expect_same_bytes(kn_scatter_add(x, d, idx, src), kn_scatter_add(x, d, idx, srcs), what);
    snprintf(what, sizeof what, "scatter value dim %d dtype %d threads %d", d, (int)dt, nthreads);
    expect_same_bytes(kn_scatter_value(x, d, idx, kn_float(-3.5)),
                      kn_scatter_value(x, d, idxs, kn_float(-3.5)), what);
  }
  kn_generator_free(g);
  kn_set_num_threads(0);
  kn_scope_end();
}

Test(index_rows, scatter_matches_the_general_kernel) {
  kn_dtype dts[] = {KN_FLOAT32, KN_FLOAT64, KN_BFLOAT16, KN_INT64};
  for (size_t i = 0; i < sizeof dts / sizeof dts[0]; i++) {
    check_scatter(dts[i], 1);
    check_scatter(dts[i], 2);
  }
}

/* Small shapes and literal values (torch 1.13): one element per row, a
** 1-d tensor, an empty index. */
Test(index_rows, small_literals) {
  kn_scope_begin();
  kn_tensor *x = kn_from_floats((const float[]){0, 1, 2, 3, 4, 5}, 2, (int64_t[]){2, 3});
  kn_tensor *i = kn_from_ints((const int64_t[]){2, 0, 2}, 1, (int64_t[]){3});
  kn_tensor *s = kn_index_select(x, 1, i);
  const float want[] = {2, 0, 2, 5, 3, 5};
  for (int k = 0; k < 6; k++) cr_assert_eq(((float *)kn_data(s))[k], want[k]);
  kn_tensor *gi = kn_from_ints((const int64_t[]){1, 1, 0, 0, 2, 1}, 2, (int64_t[]){2, 3});
  kn_tensor *gx = kn_gather(x, 1, gi);
  const float wg[] = {1, 1, 0, 3, 5, 4};
  for (int k = 0; k < 6; k++) cr_assert_eq(((float *)kn_data(gx))[k], wg[k]);
  kn_tensor *v = kn_from_floats((const float[]){7, 8, 9}, 1, (int64_t[]){3});
  kn_tensor *vs = kn_index_select(v, 0, kn_from_ints((const int64_t[]){1}, 1, (int64_t[]){1}));
  cr_assert_eq(kn_numel(vs), 1);
  cr_assert_eq(((float *)kn_data(vs))[0], 8);
  kn_tensor *e = kn_index_select(x, 0, kn_zeros(1, (int64_t[]){0}, KN_INT64));
  cr_assert(e && kn_sizes(e)[0] == 0 && kn_sizes(e)[1] == 3);
  /* torch.zeros(2, 3).scatter_add_(1, [[0, 0, 2], [1, 1, 1]], x) */
  kn_tensor *sa = kn_scatter_add(kn_zeros(2, (int64_t[]){2, 3}, KN_FLOAT32), 1,
                                 kn_from_ints((const int64_t[]){0, 0, 2, 1, 1, 1}, 2,
                                              (int64_t[]){2, 3}), x);
  const float wsa[] = {1, 0, 2, 0, 12, 0};
  for (int k = 0; k < 6; k++) cr_assert_eq(((float *)kn_data(sa))[k], wsa[k], "element %d", k);
  kn_scope_end();
}

/* A bad index fails with the general kernels' messages before any write. */
Test(index_rows, bad_index_errors) {
  kn_scope_begin();
  kn_tensor *x = kn_zeros(2, (int64_t[]){600, 600}, KN_FLOAT32);
  int64_t n = 1000;
  kn_tensor *i = kn_zeros(1, &n, KN_INT64);
  ((int64_t *)kn_data(i))[700] = 600;
  cr_assert_null(kn_index_select(x, 0, i));
  cr_assert_str_eq(kn_last_error(), "INDICES element is out of DATA bounds, id=600 axis_dim=600");
  kn_tensor *gi = kn_zeros(2, (int64_t[]){600, 600}, KN_INT64);
  ((int64_t *)kn_data(gi))[1234] = -1;
  cr_assert_null(kn_gather(x, 1, gi));
  cr_assert_str_eq(kn_last_error(), "index -1 is out of bounds for dimension 1 with size 600");
  cr_assert_null(kn_scatter_add(x, 1, gi, x));
  cr_assert_str_eq(kn_last_error(), "index -1 is out of bounds for dimension 1 with size 600");
  kn_scope_end();
}
