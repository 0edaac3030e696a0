/*
** tensor/dtype.c: dtype names, sizes, categories, PyTorch's promotion lattice
** and element conversions (including float16 and bfloat16).
*/
#include <math.h>
#include <string.h>

#include "core/error.h"
#include "tensor/tensor.h"

static const struct { const char *name; size_t size; char kind; } info[KN_DTYPE_COUNT] = {
#define KN__DTYPE_INFO(e, name, size, kind) [e] = {name, size, kind},
    KN_DTYPE_MAP(KN__DTYPE_INFO)
#undef KN__DTYPE_INFO
};

const char *kn_dtype_name(kn_dtype dt) {
  return (unsigned)dt < KN_DTYPE_COUNT ? info[dt].name : "invalid";
}
size_t kn_dtype_size(kn_dtype dt) { return kn__dtype_size(dt); }
bool kn_dtype_is_floating(kn_dtype dt) { return (unsigned)dt < KN_DTYPE_COUNT && info[dt].kind == 'f'; }
bool kn_dtype_is_integral(kn_dtype dt, bool include_bool) {
  if ((unsigned)dt >= KN_DTYPE_COUNT) return false;
  char k = info[dt].kind;
  return k == 'i' || k == 'u' || (include_bool && k == 'b');
}
kn_dtype kn_default_dtype(void) { return KN_FLOAT32; }

/* torch.promote_types: bool < integers < floats; uint8 with int8 gives int16;
** unsigned with a wider signed gives the signed; float16 with bfloat16 gives
** float32; an integer with a float gives the float. */
kn_dtype kn_promote_types(kn_dtype a, kn_dtype b) {
  if ((unsigned)a >= KN_DTYPE_COUNT || (unsigned)b >= KN_DTYPE_COUNT) {
    kn__error(KN_EDTYPE, "promote_types: invalid dtype %d", (unsigned)a >= KN_DTYPE_COUNT ? a : b);
    return KN_DTYPE_COUNT;
  }
  if (a == b) return a;
  if (a == KN_BOOL) return b;
  if (b == KN_BOOL) return a;
  char ka = info[a].kind, kb = info[b].kind;
  if (ka == 'f' && kb == 'f') {
    if ((a == KN_FLOAT16 && b == KN_BFLOAT16) || (a == KN_BFLOAT16 && b == KN_FLOAT16))
      return KN_FLOAT32;
    return a > b ? a : b;
  }
  if (ka == 'f') return a;
  if (kb == 'f') return b;
  if (ka == 'u' || kb == 'u') {
    kn_dtype s = ka == 'u' ? b : a; /* the signed one */
    return s == KN_INT8 ? KN_INT16 : s;
  }
  return a > b ? a : b;
}

/* ---- float16 / bfloat16 ---------------------------------------------------- */

float kn__half_to_float(uint16_t h) {
  uint32_t sign = (uint32_t)(h >> 15) << 31, exp = (h >> 10) & 0x1f, man = h & 0x3ff;
  uint32_t bits;
  if (exp == 0) {
    if (man == 0) {
      bits = sign;
    } else { /* subnormal: renormalise */
      int e = -1;
      do { e++; man <<= 1; } while (!(man & 0x400));
      bits = sign | ((uint32_t)(127 - 15 - e) << 23) | ((man & 0x3ff) << 13);
    }
  } else if (exp == 0x1f) {
    bits = sign | 0x7f800000u | (man << 13);
  } else {
    bits = sign | ((exp + 127 - 15) << 23) | (man << 13);
  }
  float f;
  memcpy(&f, &bits, 4);
  return f;
}

/* Round to nearest even, with overflow to infinity and subnormals. */
uint16_t kn__float_to_half(float f) {
  uint32_t x;
  memcpy(&x, &f, 4);
  uint16_t sign = (uint16_t)((x >> 16) & 0x8000);
  uint32_t ax = x & 0x7fffffffu;
  if (ax >= 0x7f800000u) /* inf or nan */
    return (uint16_t)(sign | 0x7c00 | (ax > 0x7f800000u ? 0x200 : 0));
  if (ax >= 0x477ff000u) return (uint16_t)(sign | 0x7c00); /* rounds past max */
  if (ax < 0x38800000u) { /* subnormal half or zero */
    float a;
    memcpy(&a, &ax, 4);
    float scaled = a * 16777216.0f; /* 2^24: units of the smallest subnormal */
    uint32_t r = (uint32_t)lrintf(scaled);
    return (uint16_t)(sign | r);
  }
  uint32_t e = ((ax >> 23) - 127 + 15), m = ax & 0x7fffff;
  uint32_t h = (e << 10) | (m >> 13);
  uint32_t rest = m & 0x1fff;
  if (rest > 0x1000 || (rest == 0x1000 && (h & 1))) h++;
  return (uint16_t)(sign | h);
}

float kn__bf16_to_float(uint16_t h) {
  uint32_t bits = (uint32_t)h << 16;
  float f;
  memcpy(&f, &bits, 4);
  return f;
}

uint16_t kn__float_to_bf16(float f) {
  uint32_t x;
  memcpy(&x, &f, 4);
  if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 0x40); /* nan */
  uint32_t lsb = (x >> 16) & 1;
  x += 0x7fff + lsb;
  return (uint16_t)(x >> 16);
}

/* ---- generic loads and stores ------------------------------------------------ */

double kn__load_double(const void *p, kn_dtype dt) {
  switch (dt) {
  case KN_BOOL: return *(const bool *)p ? 1.0 : 0.0;
  case KN_UINT8: return *(const uint8_t *)p;
  case KN_INT8: return *(const int8_t *)p;
  case KN_INT16: return *(const int16_t *)p;
  case KN_INT32: return *(const int32_t *)p;
  case KN_INT64: return (double)*(const int64_t *)p;
  case KN_FLOAT16: return kn__half_to_float(*(const uint16_t *)p);
  case KN_BFLOAT16: return kn__bf16_to_float(*(const uint16_t *)p);
  case KN_FLOAT32: return *(const float *)p;
  case KN_FLOAT64: return *(const double *)p;
  default: return NAN;
  }
}

/* Float to integer conversion truncates toward zero like a C cast; values
** out of range (and NaN) give 0 instead of undefined behaviour. */
static int64_t f2i(double v) {
  if (!(v > -9223372036854775808.0 && v < 9223372036854775808.0)) return 0;
  return (int64_t)v;
}

void kn__store_double(void *p, kn_dtype dt, double v) {
  switch (dt) {
  case KN_BOOL: *(bool *)p = v != 0.0; break;
  case KN_UINT8: *(uint8_t *)p = (uint8_t)f2i(v); break;
  case KN_INT8: *(int8_t *)p = (int8_t)f2i(v); break;
  case KN_INT16: *(int16_t *)p = (int16_t)f2i(v); break;
  case KN_INT32: *(int32_t *)p = (int32_t)f2i(v); break;
  case KN_INT64: *(int64_t *)p = f2i(v); break;
  case KN_FLOAT16: *(uint16_t *)p = kn__float_to_half((float)v); break;
  case KN_BFLOAT16: *(uint16_t *)p = kn__float_to_bf16((float)v); break;
  case KN_FLOAT32: *(float *)p = (float)v; break;
  case KN_FLOAT64: *(double *)p = v; break;
  default: break;
  }
}

int64_t kn__load_int(const void *p, kn_dtype dt) {
  switch (dt) {
  case KN_BOOL: return *(const bool *)p;
  case KN_UINT8: return *(const uint8_t *)p;
  case KN_INT8: return *(const int8_t *)p;
  case KN_INT16: return *(const int16_t *)p;
  case KN_INT32: return *(const int32_t *)p;
  case KN_INT64: return *(const int64_t *)p;
  default: return f2i(kn__load_double(p, dt));
  }
}

void kn__store_int(void *p, kn_dtype dt, int64_t v) {
  switch (dt) {
  case KN_BOOL: *(bool *)p = v != 0; break;
  case KN_UINT8: *(uint8_t *)p = (uint8_t)v; break;
  case KN_INT8: *(int8_t *)p = (int8_t)v; break;
  case KN_INT16: *(int16_t *)p = (int16_t)v; break;
  case KN_INT32: *(int32_t *)p = (int32_t)v; break;
  case KN_INT64: *(int64_t *)p = v; break;
  default: kn__store_double(p, dt, (double)v); break;
  }
}
