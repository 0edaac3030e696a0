/*
** tests/test_inductor_gemm.c: GEMM and convolution extern calls with fused
** activations. linear + relu/gelu/sigmoid/silu/tanh, mm + activation and
** convolution + relu compiled with "inductor" equal the same functions run
** eagerly (float64: 1e-12 relative and absolute, float32: 1e-5: the GEMM
** runs in blocks of rows, which may change oneDNN's summation order); the
** post-grad graph holds the fused node and the generated C no kernel of its
** own for the activation (the GEMM and its epilogue are one extern call).
** Sizes cover more than one block of rows (300 x 300 float32 rows are cut
** into blocks of 218), broadcast and full biases, transposed weights.
*/
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "inductor_util.h"
#include "kiln/compile.h"
#include "kiln/kiln.h"
#include "support/dynamo_util.h"
#include "support/trace_util.h"

TestSuite(inductor_gemm, .init = kn_test_dynamo_setup, .fini = kn_test_dynamo_teardown,
          .timeout = 300);

static kn_tensor *rnd(kn_dtype dt, uint64_t seed, int ndim, const int64_t *sizes) {
  kn_generator *g = kn_generator_new(seed);
  kn_tensor *t = kn_randn(ndim, sizes, g, dt);
  kn_generator_free(g);
  return t;
}

static kn_tensor *lin_relu(kn_tensor *x, kn_tensor *w, kn_tensor *b) { return kn_relu(kn_linear(x, w, b)); }
static kn_tensor *lin_gelu(kn_tensor *x, kn_tensor *w, kn_tensor *b) {
  return kn_gelu(kn_linear(x, w, b), KN_GELU_NONE);
}
static kn_tensor *lin_gelu_tanh(kn_tensor *x, kn_tensor *w, kn_tensor *b) {
  return kn_gelu(kn_linear(x, w, b), KN_GELU_TANH);
}
static kn_tensor *lin_sigmoid(kn_tensor *x, kn_tensor *w, kn_tensor *b) { return kn_sigmoid(kn_linear(x, w, b)); }
static kn_tensor *lin_silu(kn_tensor *x, kn_tensor *w, kn_tensor *b) { return kn_silu(kn_linear(x, w, b)); }
static kn_tensor *lin_tanh(kn_tensor *x, kn_tensor *w, kn_tensor *b) { return kn_tanh(kn_linear(x, w, b)); }
static kn_tensor *addmm_full(kn_tensor *x, kn_tensor *w, kn_tensor *b) {
  return kn_relu(kn_addmm(kn_expand(b, KN_SHAPE(kn_size(x, 0), kn_size(w, 0))), x, kn_t(w),
                          kn_float(0.5), kn_float(2.0)));
}
static kn_tensor *mm_relu(kn_tensor *x, kn_tensor *w, kn_tensor *b) {
  (void)b;
  return kn_relu(kn_mm(x, kn_t(w)));
}

typedef kn_tensor *(*fn3)(kn_tensor *, kn_tensor *, kn_tensor *);

/* f compiled on x [M, K], w [N, K], b [N]: equal to eager; the trace shows
** the fused node `fused` and no generated kernel. */
static void check(fn3 f, const char *name, const char *fused, kn_dtype dt, int64_t M, int64_t K,
                  int64_t N, double tol) {
  char dir[64];
  ind_cache_dir(dir, sizeof dir);
  kn_scope_begin();
  char *tdir = kn_test_trace_start();
  kn_compile_options o = {.backend = "inductor"};
  kn_compiled *c = kn_compile_tensor_fn((void (*)(void))f, 3, name, __FILE__, __LINE__, &o);
  kn_tensor *x = rnd(dt, 1, KN_SHAPE(M, K)), *w = rnd(dt, 2, KN_SHAPE(N, K)), *b = rnd(dt, 3, KN_SHAPE(N));
  kn_tensor *y = kn_call_t(c, x, w, b);
  cr_assert(y, "%s: %s", name, kn_last_error());
  cr_expect(ind_close(y, f(x, w, b), tol, tol, name), "%s", name);
  char *t = kn_test_trace_text();
  cr_assert(t);
  cr_expect(strstr(t, fused), "%s: no %s in the trace", name, fused);
  cr_expect(strstr(t, "int call(") && !strstr(t, "static void kernel"),
            "%s: a kernel was generated:\n%s", name, t);
  free(t);
  kn_trace_disable();
  kn_test_rmdir(tdir);
  kn_compiled_free(c);
  kn_scope_end();
  ind_rm(dir);
}

Test(inductor_gemm, linear_relu_float32_two_row_blocks) {
  check(lin_relu, "lin_relu", "_addmm_activation", KN_FLOAT32, 300, 70, 300, 1e-5);
}
Test(inductor_gemm, linear_relu_float64) {
  check(lin_relu, "lin_relu", "_addmm_activation", KN_FLOAT64, 33, 17, 9, 1e-12);
}
#define ACT_TEST(f) \
  Test(inductor_gemm, f##_float32) { check(f, #f, "_addmm_activation", KN_FLOAT32, 40, 30, 20, 1e-5); }
ACT_TEST(lin_gelu)
ACT_TEST(lin_gelu_tanh)
ACT_TEST(lin_sigmoid)
ACT_TEST(lin_silu)
ACT_TEST(lin_tanh)
Test(inductor_gemm, addmm_full_bias_alpha_beta_float64) {
  check(addmm_full, "addmm_full", "_addmm_activation", KN_FLOAT64, 21, 8, 13, 1e-12);
}
Test(inductor_gemm, mm_relu_float32) {
  check(mm_relu, "mm_relu", "_mm_activation", KN_FLOAT32, 130, 64, 700, 1e-5);
}

static kn_tensor *conv_relu(kn_tensor *x, kn_tensor *w, kn_tensor *b) {
  return kn_relu(kn_conv2d(x, w, b, (int64_t[]){1, 1}, (int64_t[]){1, 1}, (int64_t[]){1, 1}, 1));
}

Test(inductor_gemm, conv_relu_float32) {
  char dir[64];
  ind_cache_dir(dir, sizeof dir);
  kn_scope_begin();
  char *tdir = kn_test_trace_start();
  kn_compile_options o = {.backend = "inductor"};
  kn_compiled *c = KN_COMPILE(conv_relu, &o);
  kn_tensor *x = rnd(KN_FLOAT32, 1, KN_SHAPE(2, 3, 9, 7)), *w = rnd(KN_FLOAT32, 2, KN_SHAPE(5, 3, 3, 3));
  kn_tensor *b = rnd(KN_FLOAT32, 3, KN_SHAPE(5));
  kn_tensor *y = kn_call_t(c, x, w, b);
  cr_assert(y, "%s", kn_last_error());
  cr_expect(ind_close(y, conv_relu(x, w, b), 1e-5, 1e-5, "conv_relu"));
  char *t = kn_test_trace_text();
  cr_expect(t && strstr(t, "_convolution_activation"));
  free(t);
  kn_trace_disable();
  kn_test_rmdir(tdir);
  kn_compiled_free(c);
  kn_scope_end();
  ind_rm(dir);
}

/* Training: the forward graph's linear + relu is fused;
** relu's output is what the backward reads, so gradients equal eager's. */
static kn_tensor *loss_fn(kn_tensor *x, kn_tensor *w, kn_tensor *b) { return kn_sum(lin_relu(x, w, b)); }

Test(inductor_gemm, training_gradients_through_fused_forward) {
  char dir[64];
  ind_cache_dir(dir, sizeof dir);
  kn_scope_begin();
  kn_compile_options o = {.backend = "inductor"};
  kn_compiled *c = KN_COMPILE(loss_fn, &o);
  kn_tensor *p[3], *e[3];
  const int64_t sz[3][2] = {{17, 11}, {6, 11}, {6, 0}};
  for (int i = 0; i < 3; i++) {
    p[i] = rnd(KN_FLOAT64, (uint64_t)i + 1, i == 2 ? 1 : 2, sz[i]);
    e[i] = kn_detach(p[i]);
    kn_set_requires_grad(p[i], true);
    kn_set_requires_grad(e[i], true);
  }
  char *tdir = kn_test_trace_start();
  kn_tensor *l = kn_call_t(c, p[0], p[1], p[2]), *le = loss_fn(e[0], e[1], e[2]);
  cr_assert(l, "%s", kn_last_error());
  char *t = kn_test_trace_text();
  cr_expect(t && strstr(t, "_addmm_activation"), "the forward's linear (t + addmm, as AOT decomposes it) + relu is fused:\n%s", t);
  free(t);
  kn_trace_disable();
  kn_test_rmdir(tdir);
  cr_assert_eq(kn_backward(l, NULL), KN_OK, "%s", kn_last_error());
  cr_assert_eq(kn_backward(le, NULL), KN_OK);
  cr_expect(ind_close(l, le, 1e-12, 1e-12, "loss"));
  for (int i = 0; i < 3; i++) cr_expect(ind_close(kn_grad(p[i]), kn_grad(e[i]), 1e-12, 1e-12, "grad"));
  kn_compiled_free(c);
  kn_scope_end();
  ind_rm(dir);
}
