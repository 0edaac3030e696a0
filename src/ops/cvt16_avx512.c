/*
** ops/cvt16_avx512.c: the AVX-512F conversion table (see ops/cvt16.h);
** compiled with -mavx512f, used only when CPUID reports it.
*/
#if defined(__x86_64__)
#include <immintrin.h>

#include "ops/cvt16.h"
#include "ops/cvt16_isa.h"

static void bf16_to_f32(float *y, const uint16_t *x, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    __m512i w = _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)(x + i)));
    _mm512_storeu_si512(y + i, _mm512_slli_epi32(w, 16));
  }
  tail_bf16_to_f32(y, x, i, n);
}

/* Round to nearest even on the upper 16 bits; NaN: upper bits | quiet bit. */
static __m256i round_bf16(__m512i v) {
  __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(v, 16), _mm512_set1_epi32(1));
  __m512i r = _mm512_srli_epi32(
      _mm512_add_epi32(v, _mm512_add_epi32(_mm512_set1_epi32(0x7fff), lsb)), 16);
  __m512i abs = _mm512_and_si512(v, _mm512_set1_epi32(0x7fffffff));
  __mmask16 nan = _mm512_cmpgt_epu32_mask(abs, _mm512_set1_epi32(0x7f800000));
  __m512i q = _mm512_or_si512(_mm512_srli_epi32(v, 16), _mm512_set1_epi32(0x40));
  return _mm512_cvtepi32_epi16(_mm512_mask_mov_epi32(r, nan, q));
}

static void f32_to_bf16(uint16_t *y, const float *x, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16)
    _mm256_storeu_si256((__m256i *)(y + i), round_bf16(_mm512_loadu_si512(x + i)));
  tail_f32_to_bf16(y, x, i, n);
}

static void f16_to_f32(float *y, const uint16_t *x, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16)
    _mm512_storeu_ps(y + i, _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(x + i))));
  tail_f16_to_f32(y, x, i, n);
}

static void f32_to_f16(uint16_t *y, const float *x, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16)
    _mm256_storeu_si256((__m256i *)(y + i),
                        _mm512_cvtps_ph(_mm512_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT));
  tail_f32_to_f16(y, x, i, n);
}

const kn__cvt16 kn__cvt16_avx512 = {"avx512", bf16_to_f32, f32_to_bf16, f16_to_f32, f32_to_f16};
#endif
