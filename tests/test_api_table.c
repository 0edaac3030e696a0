/*
** test_api_table.c: every public function of the kiln headers that takes
** a tensor, called with a NULL tensor, answers with its error convention
** (NULL, a negative status or -1) and a message naming the NULL; then the
** negative counts, NULL arrays and overflowing sizes of the functions that
** take lists, and the NULL handles of the functions that take none. The
** table of NULL-tensor rows was generated from the headers' declarations.
*/
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "kiln/kiln.h"
#include "support/leakcheck.h"

TestSuite(api_table, .init = kn_test_leakcheck_begin, .fini = kn_test_leakcheck_end);

/* Arguments the rows share: a valid 2x2 tensor, a list of two, sizes, an
** output array and output scalars. */
static kn_tensor *X;
static kn_tensor *LIST[2];
static const int64_t SIZES[2] = {2, 2};
static kn_tensor *OUTS[4];
static double D;
static int64_t I;

static void make_args(void) {
  X = kn_ones(KN_SHAPE(2, 2), KN_FLOAT32);
  LIST[0] = LIST[1] = X;
  cr_assert_not_null(X);
}

/* Row i of a table: run it, say whether it failed by its convention, and
** name it in *expr. -1 past the last row. */
#define ROW_P(call) if (k++ == i) { *expr = #call; return (call) == NULL; }
#define ROW_S(call) if (k++ == i) { *expr = #call; return (call) < 0; }
#define ROW_I(call) if (k++ == i) { *expr = #call; return (call) < 0; }

static int null_tensor_row(int i, const char **expr) {
  int k = 0;
  ROW_P(kn_detach(NULL))
  ROW_S(kn_retain_grad(NULL))
  ROW_S(kn_backward(NULL, X))
  ROW_S(kn_backward_ex(NULL, X, false, false))
  ROW_S(kn_module_add_param(NULL, "x", NULL))
  ROW_S(kn_module_add_buffer(NULL, "x", NULL))
  ROW_S(kn_print(NULL))
  ROW_P(kn_mm(NULL, X))
  ROW_P(kn_bmm(NULL, X))
  ROW_P(kn_addmm(NULL, X, X, kn_int(1), kn_int(1)))
  ROW_P(kn_dot(NULL, X))
  ROW_P(kn_mv(NULL, X))
  ROW_P(kn_matmul(NULL, X))
  ROW_P(kn_linear(NULL, X, X))
  ROW_P(kn_conv2d(NULL, X, X, SIZES, SIZES, SIZES, 0))
  ROW_P(kn_max_pool2d(NULL, SIZES, SIZES, SIZES, SIZES, false))
  ROW_P(kn_avg_pool2d(NULL, SIZES, SIZES, SIZES, false, false, 0))
  ROW_P(kn_batch_norm(NULL, X, X, X, X, false, 0.5, 0.5))
  ROW_P(kn_layer_norm(NULL, 2, SIZES, X, X, 0.5))
  ROW_P(kn_rms_norm(NULL, 2, SIZES, X, NULL))
  ROW_P(kn_scaled_dot_product_attention(NULL, X, X, NULL, 0.0, false, NULL, NULL))
  ROW_P(kn_scaled_dot_product_attention(X, NULL, X, NULL, 0.0, false, NULL, NULL))
  ROW_P(kn_scaled_dot_product_attention(X, X, NULL, NULL, 0.0, false, NULL, NULL))
  ROW_P(kn_dropout(NULL, 0.5, false, NULL))
  ROW_P(kn_native_dropout(NULL, 0.5, false, NULL, OUTS))
  ROW_P(kn_embedding(NULL, X, 0, false))
  ROW_P(kn_add(NULL, X))
  ROW_P(kn_add_scaled(NULL, X, kn_int(1)))
  ROW_P(kn_add_scalar(NULL, kn_int(1)))
  ROW_P(kn_sub(NULL, X))
  ROW_P(kn_sub_scaled(NULL, X, kn_int(1)))
  ROW_P(kn_sub_scalar(NULL, kn_int(1)))
  ROW_P(kn_mul(NULL, X))
  ROW_P(kn_mul_scalar(NULL, kn_int(1)))
  ROW_P(kn_div(NULL, X))
  ROW_P(kn_div_scalar(NULL, kn_int(1)))
  ROW_P(kn_div_mode(NULL, X, 0))
  ROW_P(kn_div_scalar_mode(NULL, kn_int(1), 0))
  ROW_P(kn_maximum(NULL, X))
  ROW_P(kn_minimum(NULL, X))
  ROW_P(kn_pow(NULL, X))
  ROW_P(kn_pow_scalar(NULL, kn_int(1)))
  ROW_P(kn_scalar_pow(kn_int(1), NULL))
  ROW_P(kn_eq(NULL, X))
  ROW_P(kn_ne(NULL, X))
  ROW_P(kn_lt(NULL, X))
  ROW_P(kn_le(NULL, X))
  ROW_P(kn_gt(NULL, X))
  ROW_P(kn_ge(NULL, X))
  ROW_P(kn_eq_scalar(NULL, kn_int(1)))
  ROW_P(kn_ne_scalar(NULL, kn_int(1)))
  ROW_P(kn_lt_scalar(NULL, kn_int(1)))
  ROW_P(kn_le_scalar(NULL, kn_int(1)))
  ROW_P(kn_gt_scalar(NULL, kn_int(1)))
  ROW_P(kn_ge_scalar(NULL, kn_int(1)))
  ROW_P(kn_logical_and(NULL, X))
  ROW_P(kn_logical_or(NULL, X))
  ROW_P(kn_logical_not(NULL))
  ROW_P(kn_neg(NULL))
  ROW_P(kn_abs(NULL))
  ROW_P(kn_sgn(NULL))
  ROW_P(kn_reciprocal(NULL))
  ROW_P(kn_exp(NULL))
  ROW_P(kn_exp2(NULL))
  ROW_P(kn_log(NULL))
  ROW_P(kn_log2(NULL))
  ROW_P(kn_log1p(NULL))
  ROW_P(kn_expm1(NULL))
  ROW_P(kn_sqrt(NULL))
  ROW_P(kn_rsqrt(NULL))
  ROW_P(kn_sin(NULL))
  ROW_P(kn_cos(NULL))
  ROW_P(kn_tan(NULL))
  ROW_P(kn_tanh(NULL))
  ROW_P(kn_sigmoid(NULL))
  ROW_P(kn_relu(NULL))
  ROW_P(kn_gelu(NULL, 0))
  ROW_P(kn_silu(NULL))
  ROW_P(kn_erf(NULL))
  ROW_P(kn_round(NULL))
  ROW_P(kn_trunc(NULL))
  ROW_P(kn_floor(NULL))
  ROW_P(kn_ceil(NULL))
  ROW_P(kn_clamp(NULL, NULL, NULL))
  ROW_P(kn_where(NULL, X, X))
  ROW_P(kn_clone(NULL))
  ROW_P(kn_contiguous(NULL))
  ROW_P(kn_to(NULL, KN_FLOAT32))
  ROW_P(kn_to_copy(NULL, KN_FLOAT32))
  ROW_P(kn_threshold_backward(NULL, X, kn_int(1)))
  ROW_P(kn_sigmoid_backward(NULL, X))
  ROW_P(kn_tanh_backward(NULL, X))
  ROW_P(kn_gelu_backward(NULL, X, 0))
  ROW_S(kn_add_(NULL, X))
  ROW_S(kn_add_scaled_(NULL, X, kn_int(1)))
  ROW_S(kn_add_scalar_(NULL, kn_int(1)))
  ROW_S(kn_sub_(NULL, X))
  ROW_S(kn_sub_scaled_(NULL, X, kn_int(1)))
  ROW_S(kn_sub_scalar_(NULL, kn_int(1)))
  ROW_S(kn_mul_(NULL, X))
  ROW_S(kn_mul_scalar_(NULL, kn_int(1)))
  ROW_S(kn_div_(NULL, X))
  ROW_S(kn_div_scalar_(NULL, kn_int(1)))
  ROW_S(kn_div_mode_(NULL, X, 0))
  ROW_S(kn_pow_scalar_(NULL, kn_int(1)))
  ROW_S(kn_neg_(NULL))
  ROW_S(kn_exp_(NULL))
  ROW_S(kn_tanh_(NULL))
  ROW_S(kn_sigmoid_(NULL))
  ROW_S(kn_relu_(NULL))
  ROW_S(kn_trunc_(NULL))
  ROW_S(kn_abs_(NULL))
  ROW_S(kn_reciprocal_(NULL))
  ROW_S(kn_log_(NULL))
  ROW_S(kn_sqrt_(NULL))
  ROW_S(kn_round_(NULL))
  ROW_S(kn_floor_(NULL))
  ROW_S(kn_ceil_(NULL))
  ROW_S(kn_clamp_(NULL, NULL, NULL))
  ROW_S(kn_copy_(NULL, X))
  ROW_S(kn_fill_(NULL, kn_int(1)))
  ROW_S(kn_zero_(NULL))
  ROW_P(kn_sum(NULL))
  ROW_P(kn_sum_dims(NULL, SIZES, 0, false))
  ROW_P(kn_sum_dtype(NULL, SIZES, 0, false, KN_FLOAT32))
  ROW_P(kn_sum_to_size(NULL, 2, SIZES))
  ROW_P(kn_mean(NULL))
  ROW_P(kn_mean_dims(NULL, SIZES, 0, false))
  ROW_P(kn_mean_dtype(NULL, SIZES, 0, false, KN_FLOAT32))
  ROW_P(kn_prod(NULL))
  ROW_P(kn_prod_dim(NULL, 0, false))
  ROW_P(kn_amax(NULL, SIZES, 0, false))
  ROW_P(kn_amin(NULL, SIZES, 0, false))
  ROW_P(kn_argmax(NULL))
  ROW_P(kn_argmax_dim(NULL, 0, false))
  ROW_P(kn_argmin(NULL))
  ROW_P(kn_argmin_dim(NULL, 0, false))
  ROW_P(kn_var(NULL, SIZES, 0, 0, false))
  ROW_P(kn_any(NULL))
  ROW_P(kn_any_dim(NULL, 0, false))
  ROW_P(kn_all(NULL))
  ROW_P(kn_all_dim(NULL, 0, false))
  ROW_P(kn_logsumexp(NULL, SIZES, 0, false))
  ROW_P(kn_linalg_vector_norm(NULL, 2, SIZES, 0, false))
  ROW_P(kn_linalg_vector_norm_dtype(NULL, 2, SIZES, 0, false, KN_FLOAT32))
  ROW_P(kn_norm(NULL, 2, SIZES, 0, false))
  ROW_P(kn_std(NULL, SIZES, 0, 0, false))
  ROW_P(kn_cumsum(NULL, 0))
  ROW_P(kn_cumsum_dtype(NULL, 0, KN_FLOAT32))
  ROW_P(kn_topk(NULL, 1, 0, true, true, OUTS))
  ROW_P(kn_multinomial(NULL, 1, true, NULL))
  ROW_P(kn_softmax(NULL, 0))
  ROW_P(kn_log_softmax(NULL, 0))
  ROW_P(kn_softmax_backward_data(NULL, X, 0))
  ROW_P(kn_log_softmax_backward_data(NULL, X, 0))
  ROW_P(kn_mse_loss(NULL, X, 0))
  ROW_P(kn_l1_loss(NULL, X, 0))
  ROW_P(kn_binary_cross_entropy(NULL, X, X, 0))
  ROW_P(kn_nll_loss(NULL, X, X, 0, 0))
  ROW_P(kn_cross_entropy(NULL, X, X, 0, 0, 0.5))
  ROW_P(kn_view(NULL, 2, SIZES))
  ROW_P(kn_reshape(NULL, 2, SIZES))
  ROW_P(kn_permute(NULL, 2, SIZES))
  ROW_P(kn_transpose(NULL, 0, 0))
  ROW_P(kn_t(NULL))
  ROW_P(kn_expand(NULL, 2, SIZES))
  ROW_P(kn_unsqueeze(NULL, 0))
  ROW_P(kn_squeeze(NULL))
  ROW_P(kn_squeeze_dim(NULL, 0))
  ROW_P(kn_flatten(NULL, 0, 0))
  ROW_P(kn_unflatten(NULL, 0, 2, SIZES))
  ROW_P(kn_slice(NULL, 0, 0, 0, 0))
  ROW_P(kn_narrow(NULL, 0, 0, 0))
  ROW_P(kn_select(NULL, 0, 0))
  ROW_P(kn_diagonal(NULL, 0, 0, 0))
  ROW_P(kn_as_strided(NULL, 2, SIZES, SIZES, 0))
  ROW_I(kn_unbind(NULL, 0, OUTS, 4))
  ROW_I(kn_split(NULL, 0, 0, OUTS, 4))
  ROW_I(kn_split_sizes(NULL, 2, SIZES, 0, OUTS, 4))
  ROW_I(kn_chunk(NULL, 0, 0, OUTS, 4))
  ROW_P(kn_slice_scatter(NULL, X, 0, 0, 0, 0))
  ROW_P(kn_select_scatter(NULL, X, 0, 0))
  ROW_P(kn_diagonal_scatter(NULL, X, 0, 0, 0))
  ROW_P(kn_index_select(NULL, 0, X))
  ROW_P(kn_index_add(NULL, 0, X, X))
  ROW_P(kn_gather(NULL, 0, X))
  ROW_P(kn_scatter(NULL, 0, X, X))
  ROW_P(kn_scatter_value(NULL, 0, X, kn_int(1)))
  ROW_P(kn_scatter_add(NULL, 0, X, X))
  ROW_P(kn_masked_fill(NULL, X, kn_int(1)))
  ROW_P(kn_masked_fill_tensor(NULL, X, X))
  ROW_S(kn_masked_fill_(NULL, X, kn_int(1)))
  ROW_S(kn_masked_fill_tensor_(NULL, X, X))
  ROW_P(kn_index(NULL, LIST, 2))
  ROW_P(kn_index_put(NULL, LIST, 2, X, false))
  ROW_S(kn_index_put_(NULL, LIST, 2, X, false))
  ROW_S(kn_setitem_slice(NULL, 0, 0, 0, 0, X))
  ROW_S(kn_setitem_slice_scalar(NULL, 0, 0, 0, 0, kn_int(1)))
  ROW_S(kn_setitem_select(NULL, 0, 0, X))
  ROW_P(kn_nonzero(NULL))
  ROW_P(kn_sizes(NULL))
  ROW_P(kn_strides(NULL))
  ROW_P(kn_data(NULL))
  ROW_S(kn_item_double(NULL, &D))
  ROW_S(kn_item_int(NULL, &I))
  ROW_S(kn_set_requires_grad(NULL, false))
  return -1;
}

/* Every row fails with a message; `needle` (if any) must be in it. */
static void run_table(int (*row)(int, const char **), const char *needle) {
  make_args();
  int n = 0;
  for (int i = 0;; i++) {
    const char *expr = "";
    kn_clear_error();
    int failed = row(i, &expr);
    if (failed < 0) break;
    n++;
    cr_expect(failed, "%s did not fail", expr);
    cr_expect_neq(kn_last_status(), KN_OK, "%s: no status", expr);
    cr_expect(kn_last_error()[0] != '\0', "%s: no message", expr);
    if (needle)
      cr_expect(strstr(kn_last_error(), needle) != NULL, "%s: '%s' not in: %s", expr, needle,
                kn_last_error());
  }
  cr_log_info("%d rows", n);
  cr_assert_gt(n, 0);
}

Test(api_table, null_tensors) { run_table(null_tensor_row, "NULL"); }

/* ---- negative counts, NULL arrays, overflowing sizes and dims ---------------------- */

#define H32 (INT64_C(1) << 32)
#define BIG (INT64_C(1) << 62)
static const int64_t HUGE2[2] = {BIG, BIG};
static const int64_t MAX2[2] = {INT64_MAX, INT64_MAX};
static const int64_t MIN1[1] = {INT64_MIN};
static const float DATA[4] = {1, 2, 3, 4};

static int bad_list_row(int i, const char **expr) {
  int k = 0;
  kn_tensor *x11 = kn_ones(KN_SHAPE(1, 1), KN_FLOAT32);
  kn_tensor *x4 = kn_ones(KN_SHAPE(1, 1, 4, 4), KN_FLOAT32);
  kn_tensor *idx = kn_zeros(KN_SHAPE(2, 2), KN_INT64);
  /* negative counts and NULL arrays */
  ROW_P(kn_empty(-1, SIZES, KN_FLOAT32))
  ROW_P(kn_empty(2, NULL, KN_FLOAT32))
  ROW_P(kn_zeros(9, (int64_t[9]){1, 1, 1, 1, 1, 1, 1, 1, 1}, KN_FLOAT32))
  ROW_P(kn_full(-1, SIZES, kn_int(1), KN_FLOAT32))
  ROW_P(kn_empty_meta(-1, SIZES, KN_FLOAT32))
  ROW_P(kn_empty_meta(2, NULL, KN_FLOAT32))
  ROW_P(kn_rand(-1, SIZES, NULL, KN_FLOAT32))
  ROW_P(kn_randn(2, NULL, NULL, KN_FLOAT32))
  ROW_P(kn_randint(0, 5, -1, SIZES, NULL, KN_INT64))
  ROW_P(kn_from_array(DATA, -1, SIZES, KN_FLOAT32))
  ROW_P(kn_from_floats(DATA, 2, NULL))
  ROW_P(kn_from_floats(NULL, 2, SIZES))
  ROW_P(kn_view(X, -1, SIZES))
  ROW_P(kn_view(X, 2, NULL))
  ROW_P(kn_reshape(X, -1, SIZES))
  ROW_P(kn_permute(X, -1, SIZES))
  ROW_P(kn_permute(X, 2, NULL))
  ROW_P(kn_expand(X, -1, SIZES))
  ROW_P(kn_unflatten(X, 0, -1, SIZES))
  ROW_P(kn_unflatten(X, 0, 2, NULL))
  ROW_P(kn_as_strided(X, -1, NULL, NULL, 0))
  ROW_P(kn_as_strided(X, 2, SIZES, NULL, 0))
  ROW_I(kn_split_sizes(X, -1, SIZES, 0, OUTS, 4))
  ROW_I(kn_split_sizes(X, 2, NULL, 0, OUTS, 4))
  ROW_I(kn_unbind(X, 0, OUTS, -1))
  ROW_I(kn_unbind(X, 0, NULL, 4))
  ROW_I(kn_split(X, 1, 0, NULL, 4))
  ROW_I(kn_chunk(X, 2, 0, NULL, 4))
  ROW_P(kn_cat(LIST, -1, 0))
  ROW_P(kn_cat(NULL, 2, 0))
  ROW_P(kn_stack(LIST, -1, 0))
  ROW_P(kn_stack(NULL, 2, 0))
  ROW_P(kn_index(X, LIST, -1))
  ROW_P(kn_index(X, NULL, 1))
  ROW_P(kn_index_put(X, LIST, -1, X, false))
  ROW_S(kn_index_put_(X, NULL, 1, X, false))
  ROW_P(kn_sum_dims(X, SIZES, -3, false))
  ROW_P(kn_sum_dims(X, NULL, 2, false))
  ROW_P(kn_sum_dtype(X, NULL, 1, false, KN_FLOAT64))
  ROW_P(kn_mean_dims(X, SIZES, -1, false))
  ROW_P(kn_mean_dtype(X, NULL, 1, false, KN_FLOAT64))
  ROW_P(kn_amax(X, SIZES, -1, false))
  ROW_P(kn_amin(X, NULL, 1, false))
  ROW_P(kn_var(X, SIZES, -1, 1, false))
  ROW_P(kn_std(X, NULL, 2, 1, false))
  ROW_P(kn_logsumexp(X, SIZES, -1, false))
  ROW_P(kn_logsumexp(X, NULL, 1, false))
  ROW_P(kn_linalg_vector_norm(X, 2, SIZES, -1, false))
  ROW_P(kn_linalg_vector_norm_dtype(X, 2, NULL, 1, false, KN_FLOAT32))
  ROW_P(kn_norm(X, 1, NULL, 2, false))
  ROW_P(kn_sum_to_size(X, -1, SIZES))
  ROW_P(kn_sum_to_size(X, 2, NULL))
  ROW_P(kn_layer_norm(X, -1, SIZES, NULL, NULL, 1e-5))
  ROW_P(kn_layer_norm(X, 1, NULL, NULL, NULL, 1e-5))
  ROW_P(kn_rms_norm(X, -1, SIZES, NULL, NULL))
  ROW_P(kn_rms_norm(X, 1, NULL, NULL, NULL))
  ROW_P(kn_max_pool2d(x4, NULL, NULL, NULL, NULL, false))
  ROW_P(kn_avg_pool2d(x4, NULL, NULL, NULL, false, true, 0))
  ROW_S(kn_autograd_grad(LIST, -1, LIST, 1, NULL, false, false, false, OUTS))
  ROW_S(kn_autograd_grad(NULL, 1, LIST, 1, NULL, false, false, false, OUTS))
  ROW_S(kn_autograd_grad(LIST, 1, LIST, -1, NULL, false, false, false, OUTS))
  ROW_S(kn_autograd_grad(LIST, 1, NULL, 1, NULL, false, false, false, OUTS))
  ROW_S(kn_autograd_grad(LIST, 1, LIST, 1, NULL, false, false, false, NULL))
  /* sizes whose element or byte count overflows */
  ROW_P(kn_empty(2, HUGE2, KN_FLOAT32))
  ROW_P(kn_full(KN_SHAPE(BIG), kn_int(1), KN_INT64))
  ROW_P(kn_randint(0, 1, KN_SHAPE(H32, H32), NULL, KN_INT64))
  ROW_P(kn_from_array(DATA, KN_SHAPE(H32, H32), KN_FLOAT32))
  ROW_P(kn_arange(kn_int(0), kn_int(INT64_MAX), kn_int(1)))
  ROW_P(kn_arange(kn_int(INT64_MIN), kn_int(INT64_MAX), kn_int(1)))
  ROW_P(kn_arange(kn_float(0), kn_float(1e300), kn_float(1e-300)))
  ROW_P(kn_linspace(0, 1, INT64_MAX, KN_FLOAT32))
  ROW_P(kn_eye(INT64_MAX, 2, KN_FLOAT32))
  ROW_P(kn_expand(x11, KN_SHAPE(H32, H32)))
  ROW_P(kn_expand(x11, KN_SHAPE(INT64_MAX, INT64_MAX, 4)))
  ROW_P(kn_view(X, 2, HUGE2))
  ROW_P(kn_view(X, KN_SHAPE(-1, BIG, BIG)))
  ROW_P(kn_reshape(X, 2, MAX2))
  ROW_P(kn_unflatten(X, 0, 2, HUGE2))
  ROW_P(kn_as_strided(X, 2, SIZES, HUGE2, 0))
  ROW_P(kn_as_strided(X, 2, HUGE2, HUGE2, 0))
  ROW_P(kn_as_strided(X, KN_SHAPE(3), (int64_t[]){INT64_MAX}, INT64_MAX - 2))
  ROW_P(kn_as_strided(X, KN_SHAPE(1), (int64_t[]){1}, INT64_MAX))
  ROW_P(kn_narrow(X, 0, INT64_MAX, INT64_MAX))
  ROW_P(kn_narrow(X, 0, INT64_MIN, 1))
  ROW_P(kn_select(X, 0, INT64_MIN))
  ROW_P(kn_slice(X, 0, 0, 2, INT64_MIN))
  ROW_P(kn_unsqueeze(X, INT64_MIN))
  ROW_P(kn_transpose(X, INT64_MIN, 0))
  ROW_P(kn_flatten(X, INT64_MIN, INT64_MAX))
  ROW_P(kn_unflatten(X, INT64_MIN, 2, SIZES))
  ROW_P(kn_sum_dims(X, MIN1, 1, false))
  ROW_P(kn_softmax(X, INT64_MIN))
  ROW_P(kn_cumsum(X, INT64_MAX))
  ROW_P(kn_topk(X, 1, INT64_MIN, true, true, NULL))
  ROW_P(kn_topk(X, INT64_MAX, 0, true, true, NULL))
  ROW_P(kn_multinomial(X, INT64_MAX, false, NULL))
  ROW_P(kn_gather(X, INT64_MIN, idx))
  ROW_P(kn_diagonal(X, 0, INT64_MIN, 1))
  ROW_P(kn_conv2d(x4, x4, NULL, MAX2, MAX2, NULL, 1))
  ROW_P(kn_conv2d(x4, x4, NULL, NULL, HUGE2, NULL, 1))
  ROW_P(kn_conv2d(x4, x4, NULL, NULL, NULL, MAX2, 1))
  ROW_P(kn_conv2d(x4, x4, NULL, NULL, NULL, NULL, INT64_MIN))
  ROW_P(kn_max_pool2d(x4, MAX2, NULL, NULL, NULL, false))
  ROW_P(kn_max_pool2d(x4, SIZES, MAX2, (int64_t[]){1, 1}, MAX2, true))
  ROW_P(kn_avg_pool2d(x4, SIZES, MAX2, (int64_t[]){1, 1}, true, true, INT64_MIN))
  ROW_P(kn_avg_pool2d(x4, MAX2, SIZES, NULL, false, true, 0))
  /* enum values out of range */
  ROW_P(kn_empty(KN_SHAPE(2), (kn_dtype)99))
  ROW_P(kn_to(X, (kn_dtype)-1))
  ROW_P(kn_full(KN_SHAPE(2), ((kn_scalar){(kn_scalar_kind)9, {.i = 1}}), KN_FLOAT32))
  ROW_P(kn_add_scalar(X, ((kn_scalar){(kn_scalar_kind)9, {.i = 1}})))
  ROW_P(kn_gelu(X, (kn_gelu_approx)9))
  ROW_P(kn_gelu_backward(X, X, (kn_gelu_approx)-1))
  ROW_P(kn_div_mode(X, X, (kn_rounding_mode)9))
  ROW_P(kn_mse_loss(X, X, (kn_reduction)9))
  ROW_P(kn_chunk(X, 0, 0, OUTS, 4) < 0 ? NULL : X)
  ROW_P(kn_split(X, 0, 0, OUTS, 4) < 0 ? NULL : X)
  ROW_P(kn_split_sizes(X, 1, (int64_t[]){BIG}, 0, OUTS, 4) < 0 ? NULL : X)
  ROW_P(kn_split_sizes(X, 2, (int64_t[]){BIG, -BIG + 2}, 0, OUTS, 4) < 0 ? NULL : X)
  return -1;
}

Test(api_table, bad_lists_and_sizes) { run_table(bad_list_row, NULL); }

/* ---- NULL handles and strings of the functions that take no tensor ------------------ */

static kn_value one_arg(const kn_value *args, int nargs, void *ud) {
  (void)nargs;
  (void)ud;
  return args[0];
}
static kn_tensor *ident(kn_tensor *a) { return a; }
static void sink(const kn_log_record *r, void *ud) { (void)r, (void)ud; }

static kn_module *M;
static kn_compiled *F;

static int null_handle_row(int i, const char **expr) {
  int k = 0;
  kn_logger_id id;
  kn_value out, arg = kn_vtensor(X), bad = kn_vlist(-1, NULL);
  kn_compile_options neg = {.narg_names = -1}, neg_cache = {.cache_size_limit = -1};
  ROW_S(kn_module_add_param(M, NULL, X))
  ROW_S(kn_module_add_param(M, "w", NULL))
  ROW_S(kn_module_add_buffer(M, NULL, X))
  ROW_S(kn_module_add_child(NULL, "c", NULL))
  ROW_S(kn_module_add_child(M, "c", NULL))
  ROW_S(kn_module_add_child(M, NULL, NULL))
  ROW_P(kn_module_get(NULL, "w"))
  ROW_P(kn_module_get(M, NULL))
  ROW_S(kn_set_logs(NULL, 3))
  ROW_S(kn_set_logs_str(NULL))
  ROW_S(kn_log_get_logger(NULL, &id))
  ROW_S(kn_log_get_logger("kiln.table_test", NULL))
  ROW_S(kn_log_register_artifact(NULL, "kiln.dynamo", "d", 0, &id))
  ROW_S(kn_log_register_artifact("table_art", NULL, "d", 0, &id))
  ROW_S(kn_log_register_artifact("table_art", "kiln.dynamo", "d", 0, NULL))
  ROW_S(kn_log_add_sink(NULL, NULL, 0))
  ROW_P(kn_log_format_record(NULL))
  ROW_S(kn_trace_enable(NULL))
  ROW_S(kn_trace_enable(""))
  ROW_P(kn_compile_fn(NULL, NULL, 1, "f", __FILE__, __LINE__, NULL))
  ROW_P(kn_compile_fn(one_arg, NULL, 1, NULL, __FILE__, __LINE__, NULL))
  ROW_P(kn_compile_fn(one_arg, NULL, -2, "f", __FILE__, __LINE__, NULL))
  ROW_P(kn_compile_fn(one_arg, NULL, 1, "f", __FILE__, __LINE__, &neg))
  ROW_P(kn_compile_fn(one_arg, NULL, 1, "f", __FILE__, __LINE__, &neg_cache))
  ROW_P(kn_compile_tensor_fn(NULL, 1, "f", __FILE__, __LINE__, NULL))
  ROW_P(kn_compile_tensor_fn((void (*)(void))ident, 9, "f", __FILE__, __LINE__, NULL))
  ROW_S(kn_call(NULL, &arg, 1, &out))
  ROW_S(kn_call(F, NULL, 1, &out))
  ROW_S(kn_call(F, &arg, -1, &out))
  ROW_S(kn_call(F, &arg, 1, NULL))
  ROW_S(kn_call(F, &bad, 1, &out))
  ROW_P(kn_call_tensors(NULL, LIST, 1))
  ROW_P(kn_call_tensors(F, NULL, 1))
  ROW_P(kn_call_tensors(F, LIST, -1))
  ROW_P(kn_export(NULL, &arg, 1))
  ROW_P(kn_export(F, NULL, 1))
  ROW_P(kn_export(F, &arg, -1))
  ROW_S(kn_graph_module_call(NULL, LIST, 1, OUTS, 1))
  ROW_P(kn_graph_module_code(NULL))
  ROW_S(kn_compile_counter_backend(NULL, NULL, 0, NULL, NULL))
  ROW_S(kn_print(NULL))
  ROW_S(kn_print_tensor(NULL, NULL))
  ROW_S(kn_set_requires_grad(NULL, true))
  ROW_S(kn_retain_grad(NULL))
  ROW_I(kn_tuple(-1, NULL).kind == KN_VNONE ? -1 : 0)
  ROW_I(kn_tuple(2, NULL).kind == KN_VNONE ? -1 : 0)
  return -1;
}

Test(api_table, null_handles) {
  M = kn_module_new();
  F = kn_compile_fn(one_arg, NULL, 1, "one_arg", __FILE__, __LINE__, NULL);
  cr_assert(M && F);
  kn_log_add_sink(sink, NULL, KN_LOG_SINK_EXCLUSIVE);
  run_table(null_handle_row, NULL);
  kn_log_remove_sink(sink, NULL);
  kn_compiled_free(F);
  kn_module_free(M);
  kn_reset();
}

/* ---- accessors without a status: a documented value and a message ------------------ */

Test(api_table, accessors_of_a_null_tensor) {
  /* NULL passes through where the header says so */
  cr_assert_null(kn_retain(NULL));
  cr_assert_null(kn_scope_end_keep(NULL));
  cr_assert_null(kn_name(NULL, "x"));
  char *text = kn_tensor_to_string(NULL);
  cr_assert_null(text);
  cr_assert(strstr(kn_last_error(), "kn_tensor_to_string: expected a tensor, got NULL"), "%s",
            kn_last_error());
  cr_assert_eq(kn_print_tensor(NULL, NULL), KN_EINVAL);
  cr_assert(strstr(kn_last_error(), "kn_print_tensor: expected a tensor, got NULL"), "%s",
            kn_last_error());
  cr_assert_eq(kn_ndim(NULL), -1);
  cr_assert(strstr(kn_last_error(), "kn_ndim: expected a tensor, got NULL"), "%s",
            kn_last_error());
  cr_assert_eq(kn_size(NULL, 0), -1);
  cr_assert_eq(kn_stride(NULL, 0), -1);
  cr_assert_eq(kn_numel(NULL), -1);
  cr_assert(isnan(kn_item(NULL)));
  cr_assert(!kn_is_true(NULL));
  cr_assert(!kn_requires_grad(NULL));
  cr_assert(!kn_is_leaf(NULL));
  cr_assert_null(kn_grad(NULL));
  cr_assert_null(kn_grad_fn_name(NULL));
  kn_release(NULL); /* documented: ignored */
  struct { const char *name; bool ok; } cases[] = {
    {"kn_sizes", kn_sizes(NULL) == NULL},
    {"kn_strides", kn_strides(NULL) == NULL},
    {"kn_storage_offset", kn_storage_offset(NULL) == -1},
    {"kn_tensor_dtype", kn_tensor_dtype(NULL) == KN_DTYPE_COUNT},
    {"kn_tensor_device", kn_tensor_device(NULL) == KN_META},
    {"kn_is_contiguous", !kn_is_contiguous(NULL)},
    {"kn_data", kn_data(NULL) == NULL},
    {"kn_get", isnan(kn_get(NULL, SIZES))},
    {"kn_tensor_version", kn_tensor_version(NULL) == 0},
    {"kn_same_storage", !kn_same_storage(NULL, NULL)},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
    cr_expect(cases[i].ok, "%s(NULL) returned the wrong value", cases[i].name);
  /* each call above set the message; the last one is checked */
  cr_assert(strstr(kn_last_error(), "kn_same_storage: expected a tensor, got NULL"), "%s",
            kn_last_error());
  kn_clear_error();
  kn_set_grad(NULL, NULL);
  cr_assert(strstr(kn_last_error(), "kn_set_grad"), "%s", kn_last_error());
  cr_assert_eq(kn_promote_types((kn_dtype)99, KN_FLOAT32), KN_DTYPE_COUNT); /* read past a table */
  cr_assert(strstr(kn_last_error(), "promote_types: invalid dtype 99"), "%s", kn_last_error());
}
