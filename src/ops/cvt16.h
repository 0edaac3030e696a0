/*
** ops/cvt16.h: float32 <-> bfloat16 / float16 conversion of contiguous
** arrays, vectorised (internal).
**
** One table per instruction set, like ops/vmath.h: scalar (the per-element
** conversions of tensor/dtype.c), AVX2 (+F16C for float16) and AVX-512F,
** each in its own translation unit compiled with that ISA's flags
** (cvt16_avx2.c, cvt16_avx512.c); the widest the CPU has is chosen at first
** use. Every table gives the same bits: round to nearest even, NaN stays NaN
** (a bfloat16 NaN keeps the float's upper bits with the quiet bit set),
** float16 overflow gives infinity, subnormals are kept.
*/
#ifndef KN_OPS_CVT16_H
#define KN_OPS_CVT16_H

#include <stdbool.h>
#include <stdint.h>

#include "kiln/tensor.h"
#include "ops/vmath.h"

typedef struct kn__cvt16 {
  const char *name; /* "scalar", "avx2", "avx512" */
  void (*bf16_to_f32)(float *y, const uint16_t *x, int64_t n);
  void (*f32_to_bf16)(uint16_t *y, const float *x, int64_t n);
  void (*f16_to_f32)(float *y, const uint16_t *x, int64_t n);
  void (*f32_to_f16)(uint16_t *y, const float *x, int64_t n);
} kn__cvt16;

extern const kn__cvt16 kn__cvt16_scalar;
#if defined(__x86_64__)
extern const kn__cvt16 kn__cvt16_avx2;
extern const kn__cvt16 kn__cvt16_avx512;
#endif

/* The table in use (chosen on first call). Static. */
const kn__cvt16 *kn__cvt16_get(void);
/* The table of one ISA (KN__ISA_SSE4 has none: NULL), or NULL when the CPU
** lacks it (AVX2 also needs F16C). Static. */
const kn__cvt16 *kn__cvt16_table(kn__isa isa);

/* y = x converted, for n contiguous elements; dt/st: KN_FLOAT32 and one of
** KN_BFLOAT16 / KN_FLOAT16 (either way round). false for any other pair
** (nothing written). */
bool kn__cvt16_run(void *y, kn_dtype dt, const void *x, kn_dtype st, int64_t n);

#endif
