/*
** ops/vmath_avx512.c: the AVX-512F vector-math table (see ops/vmath.h); compiled
** with that ISA's flags (CMakeLists.txt) and only used when CPUID says the
** CPU has it.
*/
#if defined(__x86_64__)
#include <immintrin.h>

typedef __m512 kn_vf;
typedef __m512d kn_vd;
#define KN_VM_ISA avx512f
#define KN_VM_WF 16
#define KN_VM_WD 8
/* float sqrt as two 256-bit vsqrtps: the 512-bit one issues more uops for
** the same 16 results (measured 8-10 % slower on the AVX512-FP16 Xeon of
** docs/KERNELS.md's tables); both are correctly rounded. */
static inline __m512 kn_sqrt16(__m512 x) {
  __m256 lo = _mm256_sqrt_ps(_mm512_castps512_ps256(x));
  __m256 hi = _mm256_sqrt_ps(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(x), 1)));
  return _mm512_castpd_ps(
      _mm512_insertf64x4(_mm512_castps_pd(_mm512_castps256_ps512(lo)), _mm256_castps_pd(hi), 1));
}
#define KN_VM_SQRTF kn_sqrt16
#define KN_VM_SQRTD _mm512_sqrt_pd
#define KN_VM_STREAM_f(p, v) _mm512_stream_ps(p, v) /* non-temporal store, p aligned */
#define KN_VM_STREAM_d(p, v) _mm512_stream_pd(p, v)
#define KN_VM_ANY_GTF(v, c) (_mm512_cmp_ps_mask(v, _mm512_set1_ps(c), _CMP_GT_OQ) != 0)
#define KN_VM_ANY_GTD(v, c) (_mm512_cmp_pd_mask(v, _mm512_set1_pd(c), _CMP_GT_OQ) != 0)
#define KN_VM_FMAF(a, b, c) _mm512_fmadd_ps(a, b, c)
#define KN_VM_MAXF _mm512_max_ps /* a > b ? a : b: NaN in the second operand is returned */
#define KN_VM_ANYI(m) (_mm512_test_epi32_mask((__m512i)(m), (__m512i)(m)) != 0) /* any lane of an int mask set */
#define KN_VM_HAS_FMA 1
#define KN_VM_TABLE kn__vmath_avx512
#define KN_VM_NAME "avx512"
#include "ops/vmath_isa.h"
#endif
