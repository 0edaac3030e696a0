/*
** test_cuda_attention.c: scaled_dot_product_attention with is_causal on CUDA
** tensors, on the fake driver (tests/support/fakecuda*.c runs the generated
** kernels and cuBLAS's products on the host). The GPU computes PyTorch's
** math form with the causal mask built on the device; every output and
** gradient is compared with the CPU's fused kernel (ops/nn_attention_body.h,
** which masks by position: an independent implementation), for L == S and
** L != S, float32 and float64, eagerly, compiled (dynamo capture, AOT
** autograd, the CUDA target) and through MultiheadAttention and
** TransformerEncoderLayer; the device mask itself against tril(ones(L, S))
** written out here; and is_causal with an attn_mask is refused as on the CPU.
*/
#pragma GCC optimize("no-optimize-sibling-calls")
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "inductor_util.h"
#include "cuda_fake_util.h"
#include "kiln/compile.h"
#include "kiln/cuda.h"
#include "kiln/kiln.h"
#include "kiln/nn.h"
#include "ops/nn.h"

TestSuite(cuda_attention, .init = cuda_fake_setup, .fini = cuda_fake_teardown, .timeout = 600);

/* A leaf on device d that requires grad, with t's values. */
static kn_tensor *leaf(kn_tensor *t, kn_device d) {
  kn_tensor *x = d == KN_CPU ? kn_clone(t) : dev(t, d);
  cr_assert_not_null(x, "%s", kn_last_error());
  cr_assert_eq(kn_set_requires_grad(x, true), KN_OK, "%s", kn_last_error());
  return x;
}

static double tol(kn_dtype dt) { return dt == KN_FLOAT64 ? 1e-12 : 2e-5; }

static void expect_close(kn_tensor *got, kn_tensor *want, kn_dtype dt, const char *what) {
  cr_assert_not_null(got, "%s: %s", what, kn_last_error());
  cr_expect_eq(kn_tensor_device(got), KN_CUDA, "%s on the device", what);
  cr_expect(ind_close(dev(got, KN_CPU), want, tol(dt), tol(dt), what), "%s", what);
}

/* query [2, 2, L, 4], key and value [2, 2, S, 4] and an upstream gradient. */
typedef struct qkv {
  kn_tensor *t[4];
} qkv;

static qkv make_qkv(int64_t l, int64_t s, kn_dtype dt, uint64_t seed) {
  kn_generator *g = kn_generator_new(seed);
  qkv r;
  int64_t len[4] = {l, s, s, l};
  for (int i = 0; i < 4; i++) r.t[i] = kn_randn(4, (int64_t[]){2, 2, len[i], 4}, g, dt);
  kn_generator_free(g);
  return r;
}

typedef kn_tensor *(*attn_fn)(kn_tensor *q, kn_tensor *k, kn_tensor *v);

static kn_tensor *causal_attention(kn_tensor *q, kn_tensor *k, kn_tensor *v) {
  return kn_scaled_dot_product_attention(q, k, v, NULL, 0.0, true, NULL, NULL);
}

/* fn(q, k, v) and the gradients of sum(out * up) on device d: out[0] the
** output, out[1..3] the gradients of q, k, v. call: NULL for fn itself. */
static void run(attn_fn fn, kn_compiled *call, const qkv *in, kn_device d, kn_tensor **out) {
  kn_tensor *x[3];
  for (int i = 0; i < 3; i++) x[i] = leaf(in->t[i], d);
  out[0] = call ? kn_call_t(call, x[0], x[1], x[2]) : fn(x[0], x[1], x[2]);
  cr_assert_not_null(out[0], "%s", kn_last_error());
  kn_tensor *loss = kn_sum(kn_mul(out[0], d == KN_CPU ? in->t[3] : dev(in->t[3], d)));
  cr_assert_eq(kn_backward(loss, NULL), KN_OK, "%s", kn_last_error());
  for (int i = 0; i < 3; i++) out[1 + i] = kn_grad(x[i]);
}

/* The GPU's output and gradients equal the CPU's is_causal result. */
static void check_against_cpu(kn_compiled *call, int64_t l, int64_t s, kn_dtype dt) {
  kn_scope_begin();
  qkv in = make_qkv(l, s, dt, (uint64_t)(l * 100 + s));
  kn_tensor *want[4], *got[4];
  run(causal_attention, NULL, &in, KN_CPU, want);
  run(causal_attention, call, &in, KN_CUDA, got);
  const char *names[4] = {"output", "grad q", "grad k", "grad v"};
  for (int i = 0; i < 4; i++) {
    char what[96];
    snprintf(what, sizeof what, "%s, L=%lld S=%lld %s", names[i], (long long)l, (long long)s,
             kn_dtype_name(dt));
    expect_close(got[i], want[i], dt, what);
  }
  kn_scope_end();
}

/* ---- the mask built on the device ---------------------------------------------------------- */

Test(cuda_attention, the_device_mask_is_tril_of_ones_top_left_aligned) {
  static const int64_t shapes[][2] = {{1, 1}, {1, 4}, {4, 1}, {3, 5}, {5, 3}, {4, 4}};
  kn_scope_begin();
  for (size_t c = 0; c < sizeof shapes / sizeof shapes[0]; c++) {
    int64_t l = shapes[c][0], s = shapes[c][1];
    kn_tensor *scores = dev(kn_zeros(3, (int64_t[]){2, l, s}, KN_FLOAT32), KN_CUDA);
    kn_tensor *keep = kn__causal_keep(scores);
    cr_assert_not_null(keep, "%s", kn_last_error());
    cr_expect_eq(kn_tensor_device(keep), KN_CUDA);
    cr_assert_eq(kn_ndim(keep), 2);
    kn_tensor *h = kn_contiguous(dev(keep, KN_CPU));
    const bool *k = kn_data(h);
    for (int64_t i = 0; i < l; i++)
      for (int64_t j = 0; j < s; j++)
        cr_expect_eq(k[i * s + j], j <= i, "L=%lld S=%lld: keep[%lld][%lld] = %d",
                     (long long)l, (long long)s, (long long)i, (long long)j, k[i * s + j]);
  }
  /* scores without elements have nothing to build from */
  kn_tensor *empty = dev(kn_zeros(2, (int64_t[]){0, 3}, KN_FLOAT32), KN_CUDA);
  cr_expect_null(kn__causal_keep(empty));
  cr_expect(strstr(kn_last_error(), "with at least one element, found 2D with 0 elements"), "%s",
            kn_last_error());
  kn_scope_end();
}

/* ---- eager ------------------------------------------------------------------------------- */

Test(cuda_attention, eager_is_causal_matches_the_cpu_float32) {
  check_against_cpu(NULL, 5, 5, KN_FLOAT32);
  check_against_cpu(NULL, 3, 6, KN_FLOAT32);
  check_against_cpu(NULL, 6, 3, KN_FLOAT32);
}

Test(cuda_attention, eager_is_causal_matches_the_cpu_float64) {
  check_against_cpu(NULL, 5, 5, KN_FLOAT64);
  check_against_cpu(NULL, 3, 6, KN_FLOAT64);
  check_against_cpu(NULL, 6, 3, KN_FLOAT64);
}

Test(cuda_attention, is_causal_with_an_attn_mask_is_an_error_as_on_the_cpu) {
  kn_scope_begin();
  qkv in = make_qkv(3, 3, KN_FLOAT32, 7);
  kn_tensor *mask = kn_ones(2, (int64_t[]){3, 3}, KN_BOOL);
  kn_tensor *r[2];
  const char *want = "scaled_dot_product_attention: Explicit attn_mask should not be set when "
                     "is_causal=True";
  for (int d = 0; d < 2; d++) {
    kn_device dv = d ? KN_CUDA : KN_CPU;
    r[d] = kn_scaled_dot_product_attention(dev(in.t[0], dv), dev(in.t[1], dv), dev(in.t[2], dv),
                                           dev(mask, dv), 0.0, true, NULL, NULL);
    cr_expect_null(r[d], "%s", d ? "cuda" : "cpu");
    cr_expect_eq(kn_last_status(), KN_EINVAL);
    cr_expect_str_eq(kn_last_error(), want);
  }
  kn_scope_end();
}

/* A bool attn_mask (true = attend) on the GPU: the select that applies the
** causal mask applies it too (masked_fill has no GPU kernel). */
Test(cuda_attention, a_bool_attn_mask_matches_the_cpu) {
  kn_scope_begin();
  qkv in = make_qkv(4, 5, KN_FLOAT32, 11);
  kn_generator *g = kn_generator_new(5);
  kn_tensor *mask = kn_gt(kn_randn(2, (int64_t[]){4, 5}, g, KN_FLOAT32),
                          kn_scalar_tensor(kn_float(-0.5), KN_FLOAT32));
  mask = kn_logical_or(mask, kn_eq_scalar(kn_zeros(2, (int64_t[]){4, 5}, KN_FLOAT32), kn_int(1)));
  kn_generator_free(g);
  kn_tensor *want = kn_scaled_dot_product_attention(in.t[0], in.t[1], in.t[2], mask, 0.0, false,
                                                    NULL, NULL);
  kn_tensor *got = kn_scaled_dot_product_attention(dev(in.t[0], KN_CUDA), dev(in.t[1], KN_CUDA),
                                                   dev(in.t[2], KN_CUDA), dev(mask, KN_CUDA), 0.0,
                                                   false, NULL, NULL);
  expect_close(got, want, KN_FLOAT32, "bool attn_mask");
  kn_scope_end();
}

/* ---- compiled ----------------------------------------------------------------------------- */

Test(cuda_attention, compiled_is_causal_matches_the_cpu) {
  kn_compiled *f = KN_COMPILE(causal_attention, &(kn_compile_options){.backend = "inductor"});
  cr_assert_not_null(f, "%s", kn_last_error());
  check_against_cpu(f, 5, 5, KN_FLOAT32);
  check_against_cpu(f, 3, 6, KN_FLOAT64);
  kn_compiled_free(f);
}

/* ---- nn modules --------------------------------------------------------------------------- */

static kn_tensor *encoder_causal(kn_module *m, kn_tensor *x) {
  kn_attention_mask mk = {.is_causal = true};
  return kn_nn_transformer_encoder_layer_forward(m, x, &mk);
}

static kn_value encoder_causal_fn(const kn_value *args, int nargs, void *ud) {
  (void)nargs, (void)ud;
  return kn_vtensor(encoder_causal(args[0].u.m, args[1].u.t));
}

/* MultiheadAttention with is_causal (the fused path, and the weights path
** with a key padding mask) and TransformerEncoderLayer with is_causal,
** eagerly and compiled, on the GPU against the same modules on the CPU. */
Test(cuda_attention, modules_with_is_causal_match_the_cpu) {
  kn_generator *g = kn_generator_new(3), *g2 = kn_generator_new(3);
  kn_module *mha = kn_nn_multihead_attention(8, 2, 0.0, true, g);
  kn_module *mha_d = kn_nn_multihead_attention(8, 2, 0.0, true, g2);
  kn_module *enc = kn_nn_transformer_encoder_layer(8, 2, 16, 0.0, true, g);
  kn_module *enc_d = kn_nn_transformer_encoder_layer(8, 2, 16, 0.0, true, g2);
  cr_assert_eq(kn_module_to_device(mha_d, KN_CUDA), KN_OK, "%s", kn_last_error());
  cr_assert_eq(kn_module_to_device(enc_d, KN_CUDA), KN_OK, "%s", kn_last_error());
  kn_nn_train(enc, false), kn_nn_train(enc_d, false);
  kn_scope_begin();
  kn_tensor *x = kn_randn(3, (int64_t[]){2, 5, 8}, g, KN_FLOAT32), *xd = dev(x, KN_CUDA);
  kn_tensor *pad = kn_zeros(2, (int64_t[]){2, 5}, KN_BOOL);
  pad = kn_logical_or(pad, kn_gt_scalar(kn_randn(2, (int64_t[]){2, 5}, g, KN_FLOAT32), kn_float(1)));
  kn_attention_mask causal = {.is_causal = true}, with_pad = {.key_padding_mask = pad,
                                                              .is_causal = true};
  kn_attention_mask with_pad_d = {.key_padding_mask = dev(pad, KN_CUDA), .is_causal = true};
  kn_tensor *w = NULL, *wd = NULL;
  expect_close(kn_nn_multihead_attention_forward(mha_d, xd, NULL, NULL, &causal, NULL),
               kn_nn_multihead_attention_forward(mha, x, NULL, NULL, &causal, NULL), KN_FLOAT32,
               "MultiheadAttention, is_causal");
  kn_tensor *o = kn_nn_multihead_attention_forward(mha, x, NULL, NULL, &with_pad, &w);
  kn_tensor *od = kn_nn_multihead_attention_forward(mha_d, xd, NULL, NULL, &with_pad_d, &wd);
  expect_close(od, o, KN_FLOAT32, "MultiheadAttention, is_causal and padding, need_weights");
  expect_close(wd, w, KN_FLOAT32, "MultiheadAttention's weights, is_causal and padding");
  kn_tensor *want = encoder_causal(enc, x);
  expect_close(encoder_causal(enc_d, xd), want, KN_FLOAT32, "TransformerEncoderLayer, eager");
  kn_compiled *f = KN_COMPILE(encoder_causal_fn, &(kn_compile_options){.backend = "inductor"});
  cr_assert_not_null(f, "%s", kn_last_error());
  kn_value args[2] = {kn_vmodule(enc_d), kn_vtensor(xd)}, out;
  cr_assert_eq(kn_call(f, args, 2, &out), KN_OK, "%s", kn_last_error());
  cr_assert_eq(out.kind, KN_VTENSOR);
  expect_close(out.u.t, want, KN_FLOAT32, "TransformerEncoderLayer, compiled");
  kn_value_release(out);
  kn_compiled_free(f);
  kn_scope_end();
  kn_module_free(mha), kn_module_free(mha_d), kn_module_free(enc), kn_module_free(enc_d);
  kn_generator_free(g), kn_generator_free(g2);
}
