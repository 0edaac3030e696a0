/*
** ops/cvt16.c: the scalar conversion table and the choice of table (see
** ops/cvt16.h).
*/
#include <stdatomic.h>

#include "ops/cvt16.h"
#include "tensor/tensor.h"

static void s_bf16_to_f32(float *y, const uint16_t *x, int64_t n) {
  for (int64_t i = 0; i < n; i++) y[i] = kn__bf16_to_float(x[i]);
}
static void s_f32_to_bf16(uint16_t *y, const float *x, int64_t n) {
  for (int64_t i = 0; i < n; i++) y[i] = kn__float_to_bf16(x[i]);
}
static void s_f16_to_f32(float *y, const uint16_t *x, int64_t n) {
  for (int64_t i = 0; i < n; i++) y[i] = kn__half_to_float(x[i]);
}
static void s_f32_to_f16(uint16_t *y, const float *x, int64_t n) {
  for (int64_t i = 0; i < n; i++) y[i] = kn__float_to_half(x[i]);
}

const kn__cvt16 kn__cvt16_scalar = {"scalar", s_bf16_to_f32, s_f32_to_bf16, s_f16_to_f32,
                                    s_f32_to_f16};

const kn__cvt16 *kn__cvt16_table(kn__isa isa) {
#if defined(__x86_64__)
  __builtin_cpu_init();
  if (isa == KN__ISA_AVX512 && __builtin_cpu_supports("avx512f")) return &kn__cvt16_avx512;
  if (isa == KN__ISA_AVX2 && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("f16c"))
    return &kn__cvt16_avx2;
#endif
  return isa == KN__ISA_SCALAR ? &kn__cvt16_scalar : NULL;
}

static _Atomic(const kn__cvt16 *) current;

const kn__cvt16 *kn__cvt16_get(void) {
  const kn__cvt16 *t = atomic_load_explicit(&current, memory_order_acquire);
  if (t) return t;
  t = kn__cvt16_table(KN__ISA_AVX512);
  if (!t) t = kn__cvt16_table(KN__ISA_AVX2);
  if (!t) t = &kn__cvt16_scalar;
  atomic_store_explicit(&current, t, memory_order_release);
  return t;
}

bool kn__cvt16_run(void *y, kn_dtype dt, const void *x, kn_dtype st, int64_t n) {
  const kn__cvt16 *t = kn__cvt16_get();
  if (dt == KN_FLOAT32 && st == KN_BFLOAT16) t->bf16_to_f32(y, x, n);
  else if (dt == KN_BFLOAT16 && st == KN_FLOAT32) t->f32_to_bf16(y, x, n);
  else if (dt == KN_FLOAT32 && st == KN_FLOAT16) t->f16_to_f32(y, x, n);
  else if (dt == KN_FLOAT16 && st == KN_FLOAT32) t->f32_to_f16(y, x, n);
  else return false;
  return true;
}
