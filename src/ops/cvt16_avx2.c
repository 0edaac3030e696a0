/*
** ops/cvt16_avx2.c: the AVX2 (+F16C) conversion table (see ops/cvt16.h);
** compiled with -mavx2 -mf16c, used only when CPUID reports both.
*/
#if defined(__x86_64__)
#include <immintrin.h>

#include "ops/cvt16.h"
#include "ops/cvt16_isa.h"

static void bf16_to_f32(float *y, const uint16_t *x, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(x + i)));
    _mm256_storeu_si256((__m256i *)(y + i), _mm256_slli_epi32(w, 16));
  }
  tail_bf16_to_f32(y, x, i, n);
}

/* Round to nearest even on the upper 16 bits; NaN: upper bits | quiet bit. */
static __m128i round_bf16(__m256i v) {
  const __m256i one = _mm256_set1_epi32(1), bias = _mm256_set1_epi32(0x7fff);
  __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(v, 16), one);
  __m256i r = _mm256_srli_epi32(_mm256_add_epi32(v, _mm256_add_epi32(bias, lsb)), 16);
  __m256i abs = _mm256_and_si256(v, _mm256_set1_epi32(0x7fffffff));
  __m256i nan = _mm256_cmpgt_epi32(abs, _mm256_set1_epi32(0x7f800000));
  __m256i q = _mm256_or_si256(_mm256_srli_epi32(v, 16), _mm256_set1_epi32(0x40));
  r = _mm256_blendv_epi8(r, q, nan);
  __m256i p = _mm256_permute4x64_epi64(_mm256_packus_epi32(r, r), 0xd8);
  return _mm256_castsi256_si128(p);
}

static void f32_to_bf16(uint16_t *y, const float *x, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm_storeu_si128((__m128i *)(y + i),
                     round_bf16(_mm256_loadu_si256((const __m256i *)(x + i))));
  tail_f32_to_bf16(y, x, i, n);
}

static void f16_to_f32(float *y, const uint16_t *x, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(y + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(x + i))));
  tail_f16_to_f32(y, x, i, n);
}

static void f32_to_f16(uint16_t *y, const float *x, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm_storeu_si128((__m128i *)(y + i),
                     _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT));
  tail_f32_to_f16(y, x, i, n);
}

const kn__cvt16 kn__cvt16_avx2 = {"avx2", bf16_to_f32, f32_to_bf16, f16_to_f32, f32_to_f16};
#endif
