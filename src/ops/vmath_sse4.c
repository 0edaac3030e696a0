/*
** ops/vmath_sse4.c: the SSE4.1 vector-math table (see ops/vmath.h); compiled
** with that ISA's flags (CMakeLists.txt) and only used when CPUID says the
** CPU has it.
*/
#if defined(__x86_64__)
#include <immintrin.h>

typedef __m128 kn_vf;
typedef __m128d kn_vd;
#define KN_VM_ISA sse4
#define KN_VM_WF 4
#define KN_VM_WD 2
#define KN_VM_SQRTF _mm_sqrt_ps
#define KN_VM_SQRTD _mm_sqrt_pd
#define KN_VM_STREAM_f(p, v) _mm_stream_ps(p, v) /* non-temporal store, p aligned */
#define KN_VM_STREAM_d(p, v) _mm_stream_pd(p, v)
#define KN_VM_ANY_GTF(v, c) (_mm_movemask_ps(_mm_cmpgt_ps(v, _mm_set1_ps(c))) != 0)
#define KN_VM_ANY_GTD(v, c) (_mm_movemask_pd(_mm_cmpgt_pd(v, _mm_set1_pd(c))) != 0)
#define KN_VM_FMAF(a, b, c) ((a) * (b) + (c))
#define KN_VM_ANYI(m) (!_mm_testz_si128((__m128i)(m), (__m128i)(m))) /* any lane of an int mask set */
#define KN_VM_MINF _mm_min_ps /* NaN in the second operand is returned */
#define KN_VM_MAXF _mm_max_ps
#define KN_VM_HAS_FMA 0
#define KN_VM_TABLE kn__vmath_sse4
#define KN_VM_NAME "sse4"
#include "ops/vmath_isa.h"
#endif
