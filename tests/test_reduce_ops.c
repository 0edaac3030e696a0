/*
** test_reduce_ops.c: amax/amin, argmax/argmin, var/std, cumsum and softmax
** beyond the torch fixtures: empty reductions and their errors, NaN, meta
** inputs, non-contiguous inputs, dtype rules, error messages.
*/
#include <criterion/criterion.h>
#include <math.h>

#include "kiln/kiln.h"
#include "support/reduce_test_util.h"

static int64_t live0;
static void setup(void) { live0 = kn_live_tensors(); kn_scope_begin(); }
static void teardown(void) {
  kn_scope_end();
  cr_assert_eq(kn_live_tensors(), live0);
}
TestSuite(rops, .init = setup, .fini = teardown);

Test(rops, amax_amin_literals_nan_and_dtypes) {
  kn_tensor *a = rt_from(KN_FLOAT32, KN_SHAPE(2, 3), (double[]){1, 7, -3, NAN, 0, 2});
  rt_expect(kn_amax(a, (int64_t[]){1}, 1, false), (double[]){7, NAN}, 0);
  rt_expect(kn_amin(a, (int64_t[]){-1}, 1, true), (double[]){-3, NAN}, 0);
  rt_expect(kn_amax(a, (int64_t[]){0}, 1, false), (double[]){NAN, 7, 2}, 0);
  kn_tensor *b = rt_from(KN_BOOL, KN_SHAPE(3), (double[]){0, 1, 0});
  kn_tensor *mb = kn_amax(b, NULL, 0, false);
  cr_assert_eq(kn_tensor_dtype(mb), KN_BOOL);
  rt_expect(mb, (double[]){1}, 0);
  kn_tensor *u = rt_from(KN_UINT8, KN_SHAPE(3), (double[]){200, 3, 255});
  rt_expect(kn_amin(u, NULL, 0, false), (double[]){3}, 0);
  rt_expect(kn_argmax(u), (double[]){2}, 0);
  kn_tensor *i = rt_from(KN_INT64, KN_SHAPE(3), (double[]){-5, -5, 9});
  rt_expect(kn_argmin(i), (double[]){0}, 0); /* first of the ties */
  kn_tensor *am = kn_argmax_dim(a, 1, false);
  cr_assert_eq(kn_tensor_dtype(am), KN_INT64);
  rt_expect(am, (double[]){1, 0}, 0); /* NaN counts as the maximum */
}

Test(rops, empty_reductions_error_like_torch) {
  kn_tensor *e = kn_zeros(KN_SHAPE(0, 3), KN_FLOAT32);
  cr_assert_null(kn_amax(e, NULL, 0, false));
  cr_assert_str_eq(kn_last_error(), "amax(): Expected reduction dim to be specified for "
                   "input.numel() == 0. Specify the reduction dim with the 'dim' argument.");
  cr_assert_null(kn_amin(e, (int64_t[]){0}, 1, false));
  cr_assert_str_eq(kn_last_error(), "amin(): Expected reduction dim 0 to have non-zero size.");
  cr_assert_eq(kn_last_status(), KN_ERANGE);
  kn_tensor *ok = kn_amax(e, (int64_t[]){1}, 1, false);
  cr_assert_not_null(ok);
  cr_assert_eq(kn_numel(ok), 0);
  cr_assert_null(kn_argmax(e));
  cr_assert_str_eq(kn_last_error(), "argmax(): Expected reduction dim to be specified for "
                   "input.numel() == 0.");
  cr_assert_null(kn_argmin_dim(e, -2, false));
  cr_assert_str_eq(kn_last_error(), "argmin(): Expected reduction dim 0 to have non-zero size.");
  double v;
  cr_assert_eq(kn_item_double(kn_var(kn_zeros(KN_SHAPE(0), KN_FLOAT64), NULL, 0, 1, false), &v),
               KN_OK);
  cr_assert(isnan(v));
  kn_tensor *c = kn_cumsum(e, 0);
  cr_assert_eq(kn_numel(c), 0);
  cr_assert_eq(kn_size(c, 1), 3);
}

Test(rops, var_std_literals_and_corrections) {
  kn_tensor *a = rt_from(KN_FLOAT64, KN_SHAPE(2, 4), (double[]){1, 2, 3, 4, 2, 2, 2, 2});
  rt_expect(kn_var(a, (int64_t[]){1}, 1, 1, false), (double[]){5.0 / 3.0, 0}, 1e-14);
  rt_expect(kn_var(a, (int64_t[]){1}, 1, 0, true), (double[]){1.25, 0}, 1e-14);
  rt_expect(kn_std(a, (int64_t[]){-1}, 1, 0, false), (double[]){sqrt(1.25), 0}, 1e-14);
  /* correction >= N divides by zero: inf (or nan for 0/0), as in torch */
  rt_expect(kn_var(a, (int64_t[]){1}, 1, 4, false), (double[]){INFINITY, NAN}, 0);
  kn_tensor *one = rt_from(KN_FLOAT32, KN_SHAPE(1), (double[]){3});
  double v;
  cr_assert_eq(kn_item_double(kn_var(one, NULL, 0, 1, false), &v), KN_OK);
  cr_assert(isnan(v));
  kn_tensor *i = rt_arange(KN_INT32, KN_SHAPE(3));
  cr_assert_null(kn_var(i, NULL, 0, 1, false));
  cr_assert_str_eq(kn_last_error(), "std and var only support floating point and complex dtypes");
  cr_assert_null(kn_std(i, NULL, 0, 1, false));
  /* accuracy where a one-pass formula cancels: large offset, tiny spread */
  kn_tensor *big = rt_from(KN_FLOAT32, KN_SHAPE(4), (double[]){1e4 + 1, 1e4 + 2, 1e4 + 3, 1e4 + 4});
  rt_expect(kn_var(big, NULL, 0, 1, false), (double[]){5.0 / 3.0}, 1e-6);
}

Test(rops, cumsum_dtypes_and_strides) {
  kn_tensor *b = rt_from(KN_BOOL, KN_SHAPE(4), (double[]){1, 0, 1, 1});
  kn_tensor *cb = kn_cumsum(b, 0);
  cr_assert_eq(kn_tensor_dtype(cb), KN_INT64);
  rt_expect(cb, (double[]){1, 1, 2, 3}, 0);
  kn_tensor *a = rt_arange(KN_FLOAT32, KN_SHAPE(2, 3));
  kn_tensor *t = rt_transpose(a); /* [[0,3],[1,4],[2,5]] */
  rt_expect(kn_cumsum(t, 0), (double[]){0, 3, 1, 7, 3, 12}, 0);
  rt_expect(kn_cumsum(t, -1), (double[]){0, 3, 1, 5, 2, 7}, 0);
  kn_tensor *cd = kn_cumsum_dtype(a, 1, KN_FLOAT64);
  cr_assert_eq(kn_tensor_dtype(cd), KN_FLOAT64);
  rt_expect(cd, (double[]){0, 1, 3, 3, 7, 12}, 0);
  kn_tensor *ci = kn_cumsum_dtype(rt_from(KN_FLOAT32, KN_SHAPE(3), (double[]){1.7, 1.7, -0.5}), 0,
                                  KN_INT32);
  cr_assert_eq(kn_tensor_dtype(ci), KN_INT32);
  rt_expect(ci, (double[]){1, 2, 2}, 0); /* converted (truncated) first, then summed */
  cr_assert_null(kn_cumsum(a, 2));
  cr_assert_str_eq(kn_last_error(), "Dimension out of range (expected to be in range of [-2, 1], but got 2)");
  kn_tensor *s = rt_from(KN_FLOAT64, 0, NULL, (double[]){2.5});
  rt_expect(kn_cumsum(s, 0), (double[]){2.5}, 0);
}

Test(rops, softmax_stable_rows_and_errors) {
  kn_tensor *a = rt_from(KN_FLOAT32, KN_SHAPE(2, 3),
                         (double[]){1000, 1000, 1000, -INFINITY, 0, -INFINITY});
  rt_expect(kn_softmax(a, 1), (double[]){1.0 / 3, 1.0 / 3, 1.0 / 3, 0, 1, 0}, 1e-7);
  rt_expect(kn_log_softmax(a, 1), (double[]){-log(3.0), -log(3.0), -log(3.0), -INFINITY, 0,
                                             -INFINITY}, 1e-6);
  /* non-contiguous: softmax over dim 0 of the transpose = rows of a */
  kn_tensor *x = rt_from(KN_FLOAT64, KN_SHAPE(2, 2), (double[]){0, log(3.0), 1, 1});
  rt_expect(kn_softmax(rt_transpose(x), 0), (double[]){0.25, 0.5, 0.75, 0.5}, 1e-14);
  kn_tensor *i = rt_arange(KN_INT64, KN_SHAPE(3));
  cr_assert_null(kn_softmax(i, 0));
  cr_assert_str_eq(kn_last_error(), "\"softmax_lastdim_kernel_impl\" not implemented for 'Long'");
  cr_assert_null(kn_log_softmax(x, 2));
  cr_assert_eq(kn_last_status(), KN_ERANGE);
  kn_tensor *n = rt_from(KN_FLOAT32, KN_SHAPE(2, 2), (double[]){1, NAN, 2, 3});
  rt_expect(kn_softmax(n, 1), (double[]){NAN, NAN, 1 / (1 + exp(1.0)), 1 / (1 + exp(-1.0))}, 1e-6);
  rt_expect(kn_log_softmax(n, 1), (double[]){NAN, NAN, -log1p(exp(1.0)), -log1p(exp(-1.0))}, 1e-6);
  kn_tensor *h = rt_from(KN_FLOAT16, KN_SHAPE(2), (double[]){0, 0});
  rt_expect(kn_softmax(h, 0), (double[]){0.5, 0.5}, 0);
}

Test(rops, softmax_backward_data_literals) {
  kn_tensor *y = rt_from(KN_FLOAT64, KN_SHAPE(1, 2), (double[]){0.25, 0.75});
  kn_tensor *g = rt_from(KN_FLOAT64, KN_SHAPE(1, 2), (double[]){1, 3});
  /* s = 0.25 + 2.25 = 2.5; y * (g - s) */
  rt_expect(kn_softmax_backward_data(g, y, 1), (double[]){-0.375, 0.375}, 1e-15);
  kn_tensor *ly = rt_from(KN_FLOAT64, KN_SHAPE(1, 2), (double[]){log(0.25), log(0.75)});
  /* g - exp(y) * sum(g) = g - p * 4 */
  rt_expect(kn_log_softmax_backward_data(g, ly, -1), (double[]){0, 0}, 1e-15);
  cr_assert_null(kn_softmax_backward_data(g, rt_arange(KN_FLOAT64, KN_SHAPE(2)), 0));
  cr_assert_eq(kn_last_status(), KN_ESHAPE);
}

Test(rops, sums_over_outer_dims_take_the_row_path) {
  /* [5, 3, 40] summed over dims 0 and 1 (inner dim kept, contiguous) and
  ** over dim 0 of a transposed view (inner dim strided: column path) */
  kn_tensor *a = rt_arange(KN_FLOAT32, KN_SHAPE(5, 3, 40));
  kn_tensor *s = kn_sum_dims(a, (int64_t[]){0, 1}, 2, false);
  kn_tensor *m = kn_mean_dims(a, (int64_t[]){0}, 1, true);
  for (int k = 0; k < 40; k++) {
    double want = 0, want_m = 0;
    for (int i = 0; i < 5; i++)
      for (int j = 0; j < 3; j++) want += i * 120 + j * 40 + k;
    for (int i = 0; i < 5; i++) want_m += (i * 120 + 2 * 40 + k) / 5.0;
    cr_assert_eq(((float *)kn_data(s))[k], (float)want);
    cr_assert_float_eq(((float *)kn_data(m))[2 * 40 + k], (float)want_m, 1e-4);
  }
  kn_tensor *d = rt_arange(KN_FLOAT64, KN_SHAPE(3, 700)); /* more than one chunk */
  kn_tensor *c = kn_sum_dims(d, (int64_t[]){0}, 1, false);
  for (int k = 0; k < 700; k += 7) cr_assert_eq(((double *)kn_data(c))[k], 3.0 * k + 2100);
}

Test(rops, meta_inputs) {
  kn_tensor *m = kn_empty_meta(KN_SHAPE(4, 5, 6), KN_FLOAT32);
  kn_tensor *r = kn_amax(m, (int64_t[]){0, 2}, 2, true);
  cr_assert_eq(kn_tensor_device(r), KN_META);
  cr_assert_eq(kn_ndim(r), 3);
  cr_assert_eq(kn_size(r, 1), 5);
  cr_assert_eq(kn_size(r, 2), 1);
  kn_tensor *am = kn_argmax_dim(m, 1, false);
  cr_assert_eq(kn_tensor_dtype(am), KN_INT64);
  cr_assert_eq(kn_ndim(am), 2);
  kn_tensor *v = kn_std(m, (int64_t[]){-1}, 1, 1, false);
  cr_assert_eq(kn_size(v, 1), 5);
  kn_tensor *c = kn_cumsum(kn_empty_meta(KN_SHAPE(3), KN_INT8), 0);
  cr_assert_eq(kn_tensor_dtype(c), KN_INT64);
  kn_tensor *s = kn_log_softmax(m, 1);
  cr_assert_eq(kn_tensor_device(s), KN_META);
  cr_assert_eq(kn_size(s, 2), 6);
  kn_tensor *am_all = kn_argmax(m);
  cr_assert_eq(kn_ndim(am_all), 0);
}

Test(rops, large_inputs_use_threads_and_stay_correct) {
  int64_t rows = 512, cols = 256;
  kn_tensor *a = kn_empty(KN_SHAPE(rows, cols), KN_FLOAT32);
  float *p = kn_data(a);
  for (int64_t i = 0; i < rows * cols; i++) p[i] = (float)((i * 7919) % 1000) / 100.0f;
  kn_tensor *mx = kn_amax(a, (int64_t[]){1}, 1, false);
  kn_tensor *sm = kn_softmax(a, 1);
  kn_tensor *rs = kn_sum_dims(sm, (int64_t[]){1}, 1, false);
  kn_tensor *cs = kn_cumsum(a, 1);
  for (int64_t r = 0; r < rows; r += 37) {
    float best = p[r * cols];
    double run = 0;
    for (int64_t k = 0; k < cols; k++) {
      if (p[r * cols + k] > best) best = p[r * cols + k];
      run += p[r * cols + k];
    }
    cr_assert_eq(((float *)kn_data(mx))[r], best);
    cr_assert_float_eq(((float *)kn_data(rs))[r], 1.0f, 1e-5);
    cr_assert_float_eq(((float *)kn_data(cs))[r * cols + cols - 1], (float)run, 1e-3);
  }
}

#include <stdlib.h>

#include "dynamic/sym.h"
#include "tensor/tensor.h"

/* A meta tensor [s0, 5] whose first size is the symbol s0 (hint 8). */
static kn_tensor *sym_meta(kn_sym s0, kn_dtype dt) {
  kn_tensor *t = kn_empty_meta(KN_SHAPE(8, 5), dt);
  t->sym = calloc(1, sizeof *t->sym);
  t->sym->sizes[0] = s0;
  t->sym->sizes[1] = kn__sym_const(5);
  t->sym->strides[0] = kn__sym_const(5);
  t->sym->strides[1] = kn__sym_const(1);
  t->sym->offset = kn__sym_const(0);
  return t;
}

Test(rops, meta_functions_keep_symbolic_sizes) {
  kn__shape_env *env = kn__shape_env_new();
  kn__shape_env *prev = kn__shape_env_set_current(env);
  kn_sym s0;
  cr_assert_eq(kn__shape_env_create_symbol(env, 8, 2, &s0), KN_OK);
  kn_tensor *x = sym_meta(s0, KN_FLOAT32);
  kn_tensor *r = kn_sum_dims(x, (int64_t[]){1}, 1, true);
  cr_assert_not_null(r, "%s", kn_last_error());
  cr_assert_not_null(r->sym);
  cr_assert_eq(r->sym->sizes[0].e, s0.e); /* still s0, not the hint */
  cr_assert_eq(kn_size(r, 1), 1);
  kn_tensor *sm = kn_log_softmax(x, 1);
  cr_assert_eq(sm->sym->sizes[0].e, s0.e);
  kn_tensor *t = kn_empty_meta(KN_SHAPE(8), KN_INT64);
  t->sym = calloc(1, sizeof *t->sym);
  t->sym->sizes[0] = s0;
  t->sym->strides[0] = kn__sym_const(1);
  kn_tensor *l = kn_nll_loss(x, t, NULL, KN_REDUCTION_NONE, -100);
  cr_assert_not_null(l, "%s", kn_last_error());
  cr_assert_eq(l->sym->sizes[0].e, s0.e);
  /* a constant batch of the hint's size matches s0 only under a guard */
  kn_tensor *t8 = kn_empty_meta(KN_SHAPE(8), KN_INT64);
  cr_assert_not_null(kn_nll_loss(x, t8, NULL, KN_REDUCTION_MEAN, -100));
  cr_assert_geq(kn__shape_env_nguards(env), 1);
  cr_assert_str_eq(kn__shape_env_guard_str(env, kn__shape_env_nguards(env) - 1), "Eq(s0, 8)");
  kn__shape_env_set_current(prev);
  kn_scope_end();
  kn_scope_begin();
  kn__shape_env_free(env);
}
