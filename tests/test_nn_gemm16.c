/*
** test_nn_gemm16.c: bfloat16/float16 matrix products on oneDNN's matmul
** primitive against the conversion path (operands widened to float32,
** sgemm, one rounding): both accumulate exact products in float32, so they
** differ at most by the rounding of differently ordered sums (compared with
** rtol 2^-7, one bfloat16 ulp, and atol 2^-7 times the row's magnitude).
** On CPUs without bfloat16 instructions oneDNN has only its reference
** implementation, which the automatic mode declines: the test forces it.
** oneDNN 2.6 on an AVX2-only CPU has no bfloat16/float16 matmul at all
** ("unimplemented"): there the forced mode falls back too, which the test
** checks by the implementation it reports.
*/
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kiln/kiln.h"
#include "ops/nn.h"
#include "ops/nn_dnnl.h"
#include "tensor/tensor.h"
#include "support/fixture.h"

static void fini(void) { kn__gemm16_set_mode(KN__GEMM16_AUTO); }
TestSuite(nn_gemm16, .init = kn_scope_begin, .fini = fini);

typedef kn_tensor *(*prod_fn)(kn_tensor *a, kn_tensor *b, kn_tensor *bias);
static kn_tensor *mm(kn_tensor *a, kn_tensor *b, kn_tensor *bias) { (void)bias; return kn_mm(a, b); }
static kn_tensor *mm_t(kn_tensor *a, kn_tensor *b, kn_tensor *bias) {
  (void)bias;
  return kn_mm(kn_t(kn_contiguous(kn_t(a))), kn_t(kn_contiguous(kn_t(b))));
}
static kn_tensor *addmm(kn_tensor *a, kn_tensor *b, kn_tensor *bias) {
  return kn_addmm(bias, a, b, kn_float(0.5), kn_float(2.0));
}
/* linear: addmm with a bias row, alpha 1 and beta 1 (oneDNN adds the bias) */
static kn_tensor *linear(kn_tensor *a, kn_tensor *b, kn_tensor *bias) {
  return kn_linear(a, kn_t(b), kn_select(bias, 0, 0));
}

static void compare(kn_dtype dt, prod_fn f, int64_t M, int64_t K, int64_t N) {
  kn_tensor *a = kn_to(kn_randn(2, (int64_t[]){M, K}, NULL, KN_FLOAT32), dt);
  kn_tensor *b = kn_to(kn_randn(2, (int64_t[]){K, N}, NULL, KN_FLOAT32), dt);
  kn_tensor *bias = kn_to(kn_randn(2, (int64_t[]){M, N}, NULL, KN_FLOAT32), dt);
  kn__gemm16_set_mode(KN__GEMM16_CONVERT);
  kn_tensor *want = f(a, b, bias);
  kn__gemm16_set_mode(KN__GEMM16_ONEDNN);
  kn_tensor *got = f(a, b, bias);
  kn__gemm16_set_mode(KN__GEMM16_AUTO);
  cr_assert(want && got, "%s", kn_last_error());
  cr_assert_eq(kn_tensor_dtype(got), dt);
  char why[256];
  double atol = 0.0078125 * 2 * (double)K / 8;
  cr_assert(kn_tensors_close(got, want, 0.0078125, atol, true, why, sizeof why),
            "%s %lldx%lldx%lld: %s", kn_dtype_name(dt), (long long)M, (long long)K, (long long)N,
            why);
}

Test(nn_gemm16, onednn_matches_the_conversion_path) {
  kn_dtype dts[2] = {KN_BFLOAT16, KN_FLOAT16};
  for (int i = 0; i < 2; i++) {
    compare(dts[i], mm, 17, 33, 9);
    compare(dts[i], mm_t, 8, 16, 24);
    compare(dts[i], addmm, 5, 7, 3);
    compare(dts[i], linear, 6, 40, 24);
  }
}

Test(nn_gemm16, implementation_is_reported) {
  char impl[96];
  cr_assert_eq(kn__dnnl_gemm16_impl(KN_BFLOAT16, 64, 64, 64, impl, sizeof impl), KN_OK, "%s",
               kn_last_error());
  cr_assert(impl[0]);
  /* bfloat16 takes oneDNN's kernel only on AMX tiles: without them the
  ** conversion to float32 is faster (and below AVX-512 oneDNN has only its
  ** reference kernel) */
  bool amx = strstr(impl, "amx") != NULL;
  cr_assert_eq(strstr(impl, "(not used)") == NULL, amx, "%s", impl);
  cr_log_info("bfloat16 matmul: %s (oneDNN ISA %s)", impl, kn__dnnl_isa_name());
}

/* The end of a 16-bit product (ops/nn.h kn__gemm16_store: vector
** conversions, rows in parallel above 2^16 elements) against the scalar
** formula it replaced, element by element: (float)(alpha * acc + beta * C)
** in double unless alpha is 1 and beta 0, then the scalar rounding to dt. Bit for bit, NaN and
** infinities included, with C's rows wider than N (ldc > N). */
static uint16_t to16(kn_dtype dt, float f) {
  return dt == KN_BFLOAT16 ? kn__float_to_bf16(f) : kn__float_to_half(f);
}

static void check_store(kn_dtype dt, int64_t M, int64_t N, double alpha, double beta) {
  int64_t ldc = N + 3;
  float *acc = malloc(sizeof(float) * (size_t)(M * N));
  uint16_t *C = malloc(2 * (size_t)(M * ldc)), *want = malloc(2 * (size_t)(M * ldc));
  cr_assert(acc && C && want);
  uint32_t r = 12345;
  for (int64_t i = 0; i < M * ldc; i++) {
    r = r * 1664525u + 1013904223u;
    C[i] = to16(dt, (float)((int32_t)r >> 8) / 4096.0f);
  }
  for (int64_t i = 0; i < M * N; i++) {
    r = r * 1664525u + 1013904223u;
    acc[i] = (float)((int32_t)r >> 4) / 65536.0f;
  }
  acc[0] = NAN, acc[1] = INFINITY, acc[2] = -0.0f, acc[3] = 1e-40f;
  memcpy(want, C, 2 * (size_t)(M * ldc));
  for (int64_t i = 0; i < M; i++)
    for (int64_t j = 0; j < N; j++) {
      uint16_t *o = &want[i * ldc + j];
      double old = dt == KN_BFLOAT16 ? kn__bf16_to_float(*o) : kn__half_to_float(*o);
      float v = acc[i * N + j]; /* alpha 1, beta 0: as it is (-0 stays -0) */
      if (alpha != 1 || beta != 0) v = (float)(alpha * v + (beta == 0 ? 0.0 : beta * old));
      *o = to16(dt, v);
    }
  kn__gemm16_store(dt, M, N, acc, C, ldc, alpha, beta);
  for (int64_t i = 0; i < M * ldc; i++)
    cr_assert_eq(C[i], want[i], "%s %lldx%lld alpha %g beta %g: element %lld: %#x, want %#x",
                 kn_dtype_name(dt), (long long)M, (long long)N, alpha, beta, (long long)i, C[i],
                 want[i]);
  free(acc), free(C), free(want);
}

Test(nn_gemm16, result_store_matches_the_scalar_formula) {
  kn_dtype dts[2] = {KN_BFLOAT16, KN_FLOAT16};
  double ab[][2] = {{1, 0}, {1, 1}, {0.5, 2}, {-1.25, 0}};
  for (int i = 0; i < 2; i++)
    for (int k = 0; k < 4; k++) {
      check_store(dts[i], 3, 517, ab[k][0], ab[k][1]);   /* serial, blocks of 256 + tail */
      check_store(dts[i], 300, 300, ab[k][0], ab[k][1]); /* rows in parallel */
    }
}

/* The conversion path widens an operand stored column by column (a
** transposed view) to float32 with the vector conversions, keeping its
** layout: the product is the float32 product of the same transposed views
** of the widened operands, rounded once. */
Test(nn_gemm16, transposed_operands_convert_exactly) {
  kn__gemm16_set_mode(KN__GEMM16_CONVERT);
  for (int i = 0; i < 2; i++) {
    kn_dtype dt = i ? KN_FLOAT16 : KN_BFLOAT16;
    kn_tensor *a = kn_to(kn_randn(2, (int64_t[]){300, 70}, NULL, KN_FLOAT32), dt);
    kn_tensor *b = kn_to(kn_randn(2, (int64_t[]){300, 260}, NULL, KN_FLOAT32), dt);
    kn_tensor *bc = kn_contiguous(kn_t(b));
    kn_tensor *at = kn_t(a), *bt = kn_t(bc); /* [70, 300], [300, 260], column by column */
    kn_tensor *got = kn_mm(at, bt);
    kn_tensor *want = kn_to(kn_mm(kn_t(kn_to(a, KN_FLOAT32)), kn_t(kn_to(bc, KN_FLOAT32))), dt);
    char why[256];
    cr_assert(got && want, "%s", kn_last_error());
    cr_assert(kn_tensors_close(got, want, 0, 0, true, why, sizeof why), "%s: %s",
              kn_dtype_name(dt), why);
  }
}
