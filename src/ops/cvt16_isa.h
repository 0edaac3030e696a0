/*
** ops/cvt16_isa.h: the tails of a vector conversion table (included by
** cvt16_avx2.c and cvt16_avx512.c after their vector loops): the elements
** past the last whole vector go through the scalar conversions.
*/
#include "tensor/tensor.h"

static void tail_bf16_to_f32(float *y, const uint16_t *x, int64_t i, int64_t n) {
  for (; i < n; i++) y[i] = kn__bf16_to_float(x[i]);
}
static void tail_f32_to_bf16(uint16_t *y, const float *x, int64_t i, int64_t n) {
  for (; i < n; i++) y[i] = kn__float_to_bf16(x[i]);
}
static void tail_f16_to_f32(float *y, const uint16_t *x, int64_t i, int64_t n) {
  for (; i < n; i++) y[i] = kn__half_to_float(x[i]);
}
static void tail_f32_to_f16(uint16_t *y, const float *x, int64_t i, int64_t n) {
  for (; i < n; i++) y[i] = kn__float_to_half(x[i]);
}
