/*
** ops/vmath_isa.h: the body of one ISA's vector-math table, included once
** by each of vmath_sse4.c, vmath_avx2.c and vmath_avx512.c after they define
**   KN_VM_ISA    SLEEF's ISA suffix (sse4, avx2, avx512f)
**   KN_VM_WF/WD  float and double lanes per vector
**   kn_vf, kn_vd the vector types (__m128 ... __m512d)
**   KN_VM_SQRTF/SQRTD(v)  the ISA's correctly rounded square root
**   KN_VM_ANY_GTF/GTD(v, c)  is any lane of v above c?
**   KN_VM_TABLE, KN_VM_NAME  the table's symbol and name
** and are compiled with that ISA's flags. Formulas match the scalar table
** (vmath.c) operation for operation; only the transcendental functions
** differ (SLEEF's 1.0-ULP versions instead of libm's).
*/
#include <sleef.h>
#include <string.h>

#include "ops/vmath.h"

#define KN_VM_CAT_(a, b, c, d, e, f) a##b##c##d##e##f
#define KN_VM_CAT(a, b, c, d, e, f) KN_VM_CAT_(a, b, c, d, e, f)
/* SLEEF's 1.0-ULP function: SL(exp, f, 16) = Sleef_expf16_u10avx512f */
#define SL(fn, L, W) KN_VM_CAT(Sleef_, fn, L, W, _u10, KN_VM_ISA)

/* Per element type: loads/stores, the SLEEF functions, the composites. */
#define KN_VM_TYPE(T, V, W, L, SQRT, ANY_GT, BIG)                                         \
  static inline V ld_##L(const T *p) {                                         \
    V v;                                                                       \
    memcpy(&v, p, sizeof v);                                                   \
    return v;                                                                  \
  }                                                                            \
  static inline void st_##L(T *p, V v) { memcpy(p, &v, sizeof v); }            \
  static inline V v_exp_##L(V x) { return SL(exp, L, W)(x); }                 \
  static inline V v_exp2_##L(V x) { return SL(exp2, L, W)(x); }               \
  static inline V v_expm1_##L(V x) { return SL(expm1, L, W)(x); }             \
  static inline V v_log_##L(V x) { return SL(log, L, W)(x); }                 \
  static inline V v_log2_##L(V x) { return SL(log2, L, W)(x); }               \
  /* SLEEF's log1p returns inf above 1e38 (float) / 1e307 (double), where  \
  ** log1p(x) rounds to log(x): those lanes take log. */                     \
  static inline V v_log1p_##L(V x) {                                           \
    V r = SL(log1p, L, W)(x);                                                  \
    if (!ANY_GT(x, BIG)) return r;                                             \
    T xs[W], rs[W], ls[W];                                                     \
    st_##L(xs, x);                                                             \
    st_##L(rs, r);                                                             \
    st_##L(ls, SL(log, L, W)(x));                                              \
    for (int k = 0; k < W; k++) rs[k] = xs[k] > BIG ? ls[k] : rs[k];           \
    return ld_##L(rs);                                                         \
  }                                                                            \
  static inline V v_sin_##L(V x) { return SL(sin, L, W)(x); }                 \
  static inline V v_cos_##L(V x) { return SL(cos, L, W)(x); }                 \
  static inline V v_tan_##L(V x) { return SL(tan, L, W)(x); }                 \
  static inline V v_tanh_##L(V x) { return SL(tanh, L, W)(x); }               \
  static inline V v_erf_##L(V x) { return SL(erf, L, W)(x); }                 \
  static inline V v_sqrt_##L(V x) { return SQRT(x); }                         \
  static inline V v_rsqrt_##L(V x) { return (T)1 / SQRT(x); }                 \
  static inline V v_sigmoid_##L(V x) { return (T)1 / ((T)1 + v_exp_##L(-x)); } \
  static inline V v_silu_##L(V x) { return x / ((T)1 + v_exp_##L(-x)); }      \
  static inline V v_gelu_##L(V x) {                                            \
    return (T)0.5 * x * ((T)1 + v_erf_##L(x * (T)KN__VM_SQRT1_2));             \
  }                                                                            \
  static inline V v_gelu_tanh_##L(V x) {                                       \
    V inner = (T)KN__VM_BETA * (x + (T)KN__VM_KAPPA * x * x * x);              \
    return (T)0.5 * x * ((T)1 + v_tanh_##L(inner));                            \
  }                                                                            \
  static inline V v_pow_##L(V a, V b) { return SL(pow, L, W)(a, b); }         \
  static inline V v_gelu_bw_##L(V g, V x) {                                    \
    V cdf = (T)0.5 * ((T)1 + v_erf_##L(x * (T)KN__VM_SQRT1_2));                \
    V pdf = v_exp_##L((T)-0.5 * x * x) * (T)KN__VM_INVSQRT2PI;                 \
    return g * (cdf + x * pdf);                                                \
  }                                                                            \
  static inline V v_gelu_tanh_bw_##L(V g, V x) {                               \
    V inner = (T)KN__VM_BETA * (x + (T)KN__VM_KAPPA * x * x * x);              \
    V th = v_tanh_##L(inner);                                                  \
    V dinner = (T)KN__VM_BETA * ((T)1 + (T)3 * (T)KN__VM_KAPPA * x * x);       \
    return g * ((T)0.5 * ((T)1 + th) + (T)0.5 * x * ((T)1 - th * th) * dinner); \
  }

/* An array function over a vector function; the tail runs zero-padded. */
#define KN_VM_ARRAY1(NAME, T, V, W, L)                                          \
  static void a_##NAME##_##L(T *y, const T *x, int64_t n) {                    \
    int64_t i = 0;                                                             \
    for (; i + W <= n; i += W) st_##L(y + i, v_##NAME##_##L(ld_##L(x + i)));   \
    if (i < n) {                                                               \
      T b[W] = {0};                                                            \
      memcpy(b, x + i, (size_t)(n - i) * sizeof(T));                           \
      st_##L(b, v_##NAME##_##L(ld_##L(b)));                                    \
      memcpy(y + i, b, (size_t)(n - i) * sizeof(T));                           \
    }                                                                          \
  }

#define KN_VM_ARRAY2(NAME, T, V, W, L)                                          \
  static void a_##NAME##_##L(T *y, const T *a, const T *b, int64_t n) {        \
    int64_t i = 0;                                                             \
    for (; i + W <= n; i += W)                                                 \
      st_##L(y + i, v_##NAME##_##L(ld_##L(a + i), ld_##L(b + i)));             \
    if (i < n) {                                                               \
      T ba[W] = {0}, bb[W] = {0};                                              \
      memcpy(ba, a + i, (size_t)(n - i) * sizeof(T));                          \
      memcpy(bb, b + i, (size_t)(n - i) * sizeof(T));                          \
      st_##L(ba, v_##NAME##_##L(ld_##L(ba), ld_##L(bb)));                      \
      memcpy(y + i, ba, (size_t)(n - i) * sizeof(T));                          \
    }                                                                          \
  }

#define KN_VM_ALL(T, V, W, L)                                                   \
  KN_VM_ARRAY1(exp, T, V, W, L) KN_VM_ARRAY1(exp2, T, V, W, L)                 \
  KN_VM_ARRAY1(expm1, T, V, W, L) KN_VM_ARRAY1(log, T, V, W, L)                \
  KN_VM_ARRAY1(log2, T, V, W, L) KN_VM_ARRAY1(log1p, T, V, W, L)               \
  KN_VM_ARRAY1(sqrt, T, V, W, L) KN_VM_ARRAY1(rsqrt, T, V, W, L)               \
  KN_VM_ARRAY1(sin, T, V, W, L) KN_VM_ARRAY1(cos, T, V, W, L)                  \
  KN_VM_ARRAY1(tan, T, V, W, L) KN_VM_ARRAY1(tanh, T, V, W, L)                 \
  KN_VM_ARRAY1(erf, T, V, W, L) KN_VM_ARRAY1(sigmoid, T, V, W, L)              \
  KN_VM_ARRAY1(silu, T, V, W, L) KN_VM_ARRAY1(gelu, T, V, W, L)                \
  KN_VM_ARRAY1(gelu_tanh, T, V, W, L) KN_VM_ARRAY2(pow, T, V, W, L)            \
  KN_VM_ARRAY2(gelu_bw, T, V, W, L) KN_VM_ARRAY2(gelu_tanh_bw, T, V, W, L)

KN_VM_TYPE(float, kn_vf, KN_VM_WF, f, KN_VM_SQRTF, KN_VM_ANY_GTF, 1e30f)
KN_VM_TYPE(double, kn_vd, KN_VM_WD, d, KN_VM_SQRTD, KN_VM_ANY_GTD, 1e300)
KN_VM_ALL(float, kn_vf, KN_VM_WF, f)
KN_VM_ALL(double, kn_vd, KN_VM_WD, d)

#define KN_VM_ROW1(L)                                                           \
  {[KN__VM_EXP] = a_exp_##L, [KN__VM_EXP2] = a_exp2_##L, [KN__VM_EXPM1] = a_expm1_##L, \
   [KN__VM_LOG] = a_log_##L, [KN__VM_LOG2] = a_log2_##L, [KN__VM_LOG1P] = a_log1p_##L, \
   [KN__VM_SQRT] = a_sqrt_##L, [KN__VM_RSQRT] = a_rsqrt_##L, [KN__VM_SIN] = a_sin_##L, \
   [KN__VM_COS] = a_cos_##L, [KN__VM_TAN] = a_tan_##L, [KN__VM_TANH] = a_tanh_##L,     \
   [KN__VM_ERF] = a_erf_##L, [KN__VM_SIGMOID] = a_sigmoid_##L,                        \
   [KN__VM_SILU] = a_silu_##L, [KN__VM_GELU] = a_gelu_##L,                            \
   [KN__VM_GELU_TANH] = a_gelu_tanh_##L}
#define KN_VM_ROW2(L)                                                           \
  {[KN__VM_POW] = a_pow_##L, [KN__VM_GELU_BW] = a_gelu_bw_##L,                 \
   [KN__VM_GELU_TANH_BW] = a_gelu_tanh_bw_##L}

const kn__vmath KN_VM_TABLE = {KN_VM_NAME, KN_VM_ROW1(f), KN_VM_ROW1(d), KN_VM_ROW2(f),
                               KN_VM_ROW2(d)};
