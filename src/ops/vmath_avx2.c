/*
** ops/vmath_avx2.c: the AVX2+FMA vector-math table (see ops/vmath.h); compiled
** with that ISA's flags (CMakeLists.txt) and only used when CPUID says the
** CPU has it.
*/
#if defined(__x86_64__)
#include <immintrin.h>

typedef __m256 kn_vf;
typedef __m256d kn_vd;
#define KN_VM_ISA avx2
#define KN_VM_WF 8
#define KN_VM_WD 4
#define KN_VM_SQRTF _mm256_sqrt_ps
#define KN_VM_SQRTD _mm256_sqrt_pd
#define KN_VM_STREAM_f(p, v) _mm256_stream_ps(p, v) /* non-temporal store, p aligned */
#define KN_VM_STREAM_d(p, v) _mm256_stream_pd(p, v)
#define KN_VM_ANY_GTF(v, c) (_mm256_movemask_ps(_mm256_cmp_ps(v, _mm256_set1_ps(c), _CMP_GT_OQ)) != 0)
#define KN_VM_ANY_GTD(v, c) (_mm256_movemask_pd(_mm256_cmp_pd(v, _mm256_set1_pd(c), _CMP_GT_OQ)) != 0)
#define KN_VM_FMAF(a, b, c) _mm256_fmadd_ps(a, b, c)
#define KN_VM_ANYI(m) (!_mm256_testz_si256((__m256i)(m), (__m256i)(m))) /* any lane of an int mask set */
#define KN_VM_MINF _mm256_min_ps /* NaN in the second operand is returned */
#define KN_VM_MAXF _mm256_max_ps
#define KN_VM_HAS_FMA 1
#define KN_VM_TABLE kn__vmath_avx2
#define KN_VM_NAME "avx2"
#include "ops/vmath_isa.h"
#endif
