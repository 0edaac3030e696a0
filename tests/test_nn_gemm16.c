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
#include <string.h>

#include "kiln/kiln.h"
#include "ops/nn_dnnl.h"
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
  }
}

Test(nn_gemm16, implementation_is_reported) {
  char impl[96];
  cr_assert_eq(kn__dnnl_gemm16_impl(KN_BFLOAT16, 64, 64, 64, impl, sizeof impl), KN_OK, "%s",
               kn_last_error());
  cr_assert(impl[0]);
  bool avx512 = !strncmp(kn__dnnl_isa_name(), "avx512", 6);
  if (!avx512) /* oneDNN 2.6: no bfloat16 matmul below AVX-512 */
    cr_assert(strstr(impl, "(not used)"), "%s", impl);
  cr_log_info("bfloat16 matmul: %s (oneDNN ISA %s)", impl, kn__dnnl_isa_name());
}
