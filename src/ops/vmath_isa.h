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
#include <math.h>
#include <sleef.h>
#include <string.h>

#include "ops/vmath.h"
#include "ops/vmath_softmax.h"

#include <stdint.h>

#define KN_VM_CAT_(a, b, c, d, e, f) a##b##c##d##e##f
#define KN_VM_CAT(a, b, c, d, e, f) KN_VM_CAT_(a, b, c, d, e, f)
/* SLEEF's 1.0-ULP function: SL(exp, f, 16) = Sleef_expf16_u10avx512f */
#define SL(fn, L, W) KN_VM_CAT(Sleef_, fn, L, W, _u10, KN_VM_ISA)
/* erfc has no 1.0-ULP version; SLEEF's is 1.5 ULP (ATen uses it too) */
#define SL15(fn, L, W) KN_VM_CAT(Sleef_, fn, L, W, _u15, KN_VM_ISA)

#include "ops/vmath_f32.h"
#include "ops/vmath_f64.h"
#include "ops/vmath_f64_log.h"
#include "ops/vmath_f64_trig.h"

/* Float functions of kiln's own (vmath_f32.h and below), SLEEF's for double
** but exp, exp2, expm1, sinh, cosh and tanh on AVX-512 (vmath_f64.h) and
** log, log2, log10 and log1p on AVX-512 and AVX2 (vmath_f64_log.h). */
#define KN_VM_EXP_f(x) v_exp_own_f(x)
#ifdef KN_VM_D512
#define KN_VM_EXP_d(x) v_exp_own_d(x)
#else
#define KN_VM_EXP_d(x) v_exp_sleef_d(x)
#endif
#define KN_VM_EXP2_f(x) v_exp2_own_f(x)
#ifdef KN_VM_D512
#define KN_VM_EXP2_d(x) v_exp2_own_d(x)
#else
#define KN_VM_EXP2_d(x) SL(exp2, d, KN_VM_WD)(x)
#endif
#define KN_VM_EXPM1_f(x) v_expm1_own_f(x)
#ifdef KN_VM_D512
#define KN_VM_EXPM1_d(x) v_expm1_own_d(x)
#else
#define KN_VM_EXPM1_d(x) SL(expm1, d, KN_VM_WD)(x)
#endif
#define KN_VM_LOG_f(x) v_log_own_f(x)
#define KN_VM_LOG2_f(x) v_log2_own_f(x)
#define KN_VM_LOG10_f(x) v_log10_own_f(x)
#define KN_VM_LOG1P_f(x) v_log1p_own_f(x)
#ifdef KN_VM_LOG_D /* vmath_f64_log.h */
#define KN_VM_LOG_d(x) v_log_own_d(x)
#define KN_VM_LOG2_d(x) v_log2_own_d(x)
#define KN_VM_LOG10_d(x) v_log10_own_d(x)
#define KN_VM_LOG1P_d(x) v_log1p_own_d(x)
#else
#define KN_VM_LOG_d(x) SL(log, d, KN_VM_WD)(x)
#define KN_VM_LOG2_d(x) SL(log2, d, KN_VM_WD)(x)
#define KN_VM_LOG10_d(x) SL(log10, d, KN_VM_WD)(x)
#define KN_VM_LOG1P_d(x) v_log1p_sleef_d(x)
#endif
#define KN_VM_SINH_f(x) v_sinh_own_f(x)
/* Lanes beyond the kernels' range (big_lanes_f/_d below); AVX-512's float
** sinh and cosh cover every float themselves. */
#ifdef KN_VM_X512
#define KN_VM_BIG_f(x, r, f) (r)
#else
#define KN_VM_BIG_f(x, r, f) big_lanes_f(x, r, f)
#endif
#define KN_VM_BIG_d(x, r, f) big_lanes_d(x, r, f)
#ifdef KN_VM_D512
#define KN_VM_SINH_d(x) v_sinh_own_d(x)
#else
#define KN_VM_SINH_d(x) SL(sinh, d, KN_VM_WD)(x)
#endif
#define KN_VM_COSH_f(x) v_cosh_own_f(x)
#ifdef KN_VM_D512
#define KN_VM_COSH_d(x) v_cosh_own_d(x)
#else
#define KN_VM_COSH_d(x) SL(cosh, d, KN_VM_WD)(x)
#endif
#if KN_VM_HAS_FMA
static inline kn_vf sl_sin_f(kn_vf x) { return SL(sin, f, KN_VM_WF)(x); }
static inline kn_vf sl_cos_f(kn_vf x) { return SL(cos, f, KN_VM_WF)(x); }
static inline kn_vf sl_tan_f(kn_vf x) { return SL(tan, f, KN_VM_WF)(x); }
#define KN_VM_SIN_f(x) v_sin_own_f(x, sl_sin_f)
#define KN_VM_COS_f(x) v_cos_own_f(x, sl_cos_f)
#define KN_VM_TAN_f(x) v_tan_own_f(x, sl_tan_f)
#else
#define KN_VM_SIN_f(x) SL(sin, f, KN_VM_WF)(x)
#define KN_VM_COS_f(x) SL(cos, f, KN_VM_WF)(x)
#define KN_VM_TAN_f(x) SL(tan, f, KN_VM_WF)(x)
#endif
#if KN_VM_HAS_FMA
#define KN_VM_ASIN_f(x) v_asin_own_f(x)
#define KN_VM_ACOS_f(x) v_acos_own_f(x)
#define KN_VM_ATAN_f(x) v_atan_own_f(x)
#else
#define KN_VM_ASIN_f(x) SL(asin, f, KN_VM_WF)(x)
#define KN_VM_ACOS_f(x) SL(acos, f, KN_VM_WF)(x)
#define KN_VM_ATAN_f(x) SL(atan, f, KN_VM_WF)(x)
#endif
/* float64 sin, cos, tan, asin, acos and atan: kiln's own on AVX-512
** (vmath_f64_trig.h; lanes with |x| > 2^20 of the first three SLEEF's). */
#ifdef KN_VM_D512_TRIG
#define KN_VM_ASIN_d(x) v_asin_own_d(x)
#define KN_VM_ACOS_d(x) v_acos_own_d(x)
#define KN_VM_ATAN_d(x) v_atan_own_d(x)
#else
#define KN_VM_ASIN_d(x) SL(asin, d, KN_VM_WD)(x)
#define KN_VM_ACOS_d(x) SL(acos, d, KN_VM_WD)(x)
#define KN_VM_ATAN_d(x) SL(atan, d, KN_VM_WD)(x)
#endif
#ifdef KN_VM_D512_TRIG
static inline kn_vd sl_sin_d(kn_vd x) { return SL(sin, d, KN_VM_WD)(x); }
static inline kn_vd sl_cos_d(kn_vd x) { return SL(cos, d, KN_VM_WD)(x); }
static inline kn_vd sl_tan_d(kn_vd x) { return SL(tan, d, KN_VM_WD)(x); }
#define KN_VM_SIN_d(x) v_sin_own_d(x, sl_sin_d)
#define KN_VM_COS_d(x) v_cos_own_d(x, sl_cos_d)
#define KN_VM_TAN_d(x) v_tan_own_d(x, sl_tan_d)
#else
#define KN_VM_SIN_d(x) SL(sin, d, KN_VM_WD)(x)
#define KN_VM_COS_d(x) SL(cos, d, KN_VM_WD)(x)
#define KN_VM_TAN_d(x) SL(tan, d, KN_VM_WD)(x)
#endif

/* SLEEF's double log1p returns inf above 1e307, where log1p(x) rounds to
** log(x): those lanes take log. */
static inline kn_vd v_log1p_sleef_d(kn_vd x) {
  kn_vd r = SL(log1p, d, KN_VM_WD)(x);
  if (!KN_VM_ANY_GTD(x, 1e300)) return r;
  double xs[KN_VM_WD], rs[KN_VM_WD], ls[KN_VM_WD];
  memcpy(xs, &x, sizeof xs);
  memcpy(rs, &r, sizeof rs);
  kn_vd l = SL(log, d, KN_VM_WD)(x);
  memcpy(ls, &l, sizeof ls);
  for (int k = 0; k < KN_VM_WD; k++) rs[k] = xs[k] > 1e300 ? ls[k] : rs[k];
  memcpy(&r, rs, sizeof r);
  return r;
}
#ifndef KN_VM_D512
/* SLEEF's double exp overflows to inf from 0x1.62e42fefa31efp+9, about 2000
** doubles before e^x does (ln(DBL_MAX) = 0x1.62e42fefa39efp+9): lanes above
** 709.78 take libm's. */
static inline kn_vd v_exp_sleef_d(kn_vd x) {
  kn_vd r = SL(exp, d, KN_VM_WD)(x);
  if (!KN_VM_ANY_GTD(x, 709.78)) return r;
  double xs[KN_VM_WD], rs[KN_VM_WD];
  memcpy(xs, &x, sizeof xs);
  memcpy(rs, &r, sizeof rs);
  for (int k = 0; k < KN_VM_WD; k++) rs[k] = xs[k] > 709.78 ? exp(xs[k]) : rs[k];
  memcpy(&r, rs, sizeof r);
  return r;
}
#endif
#define KN_VM_TANH_f(x) v_tanh_poly_f(x)
#ifdef KN_VM_D512
#define KN_VM_TANH_d(x) v_tanh_own_d(x)
#else
#define KN_VM_TANH_d(x) SL(tanh, d, KN_VM_WD)(x)
#endif
#define KN_VM_ERF_f(x) v_erf_poly_f(x)
#define KN_VM_ERF_d(x) SL(erf, d, KN_VM_WD)(x)
/* rsqrt: 1 / sqrt(x), on AVX-512 for float the refined vrsqrt14ps estimate */
#ifdef KN_VM_X512
#define KN_VM_RSQRT_f(x, SQRT) x5_rsqrt_f(x)
#else
#define KN_VM_RSQRT_f(x, SQRT) (1.0f / SQRT(x))
#endif
#define KN_VM_RSQRT_d(x, SQRT) (1.0 / SQRT(x))

/* Per element type: loads/stores, the SLEEF functions, the composites. */
#define KN_VM_TYPE(T, V, W, L, SQRT, ANY_GT, EXP_MAX, SINH, COSH)                  \
  static inline V ld_##L(const T *p) {                                         \
    V v;                                                                       \
    memcpy(&v, p, sizeof v);                                                   \
    return v;                                                                  \
  }                                                                            \
  static inline void st_##L(T *p, V v) { memcpy(p, &v, sizeof v); }            \
  /* a streaming store to p, aligned to a whole vector */                   \
  static inline void stnt_##L(T *p, V v) { KN_VM_STREAM_##L(p, v); }          \
  static inline V v_exp_##L(V x) { return KN_VM_EXP_##L(x); }                \
  static inline V v_exp2_##L(V x) { return KN_VM_EXP2_##L(x); }              \
  static inline V v_expm1_##L(V x) { return KN_VM_EXPM1_##L(x); }            \
  static inline V v_log_##L(V x) { return KN_VM_LOG_##L(x); }                \
  static inline V v_log2_##L(V x) { return KN_VM_LOG2_##L(x); }              \
  static inline V v_log1p_##L(V x) { return KN_VM_LOG1P_##L(x); }            \
  static inline V v_sin_##L(V x) { return KN_VM_SIN_##L(x); }                \
  static inline V v_cos_##L(V x) { return KN_VM_COS_##L(x); }                \
  static inline V v_tan_##L(V x) { return KN_VM_TAN_##L(x); }                \
  static inline V v_tanh_##L(V x) { return KN_VM_TANH_##L(x); }              \
  static inline V v_erf_##L(V x) { return KN_VM_ERF_##L(x); }                \
  static inline V v_log10_##L(V x) { return KN_VM_LOG10_##L(x); }             \
  /* SLEEF's sinh/cosh overflow where exp(|x|) does, a little before the   \
  ** results do: those (rare) lanes take libm's. */                         \
  static inline V big_lanes_##L(V x, V r, T (*f)(T)) {                         \
    if (!ANY_GT(abs_##L(x), EXP_MAX)) return r;                                \
    T xs[W], rs[W];                                                            \
    st_##L(xs, x);                                                             \
    st_##L(rs, r);                                                             \
    for (int k = 0; k < W; k++)                                                \
      if (xs[k] > EXP_MAX || -xs[k] > EXP_MAX) rs[k] = f(xs[k]);               \
    return ld_##L(rs);                                                         \
  }                                                                            \
  static inline V v_sinh_##L(V x) { return KN_VM_BIG_##L(x, KN_VM_SINH_##L(x), SINH); } \
  static inline V v_cosh_##L(V x) { return KN_VM_BIG_##L(x, KN_VM_COSH_##L(x), COSH); } \
  static inline V v_asin_##L(V x) { return KN_VM_ASIN_##L(x); }              \
  static inline V v_acos_##L(V x) { return KN_VM_ACOS_##L(x); }              \
  static inline V v_atan_##L(V x) { return KN_VM_ATAN_##L(x); }              \
  static inline V v_erfc_##L(V x) { return SL15(erfc, L, W)(x); }             \
  static inline V v_sqrt_##L(V x) { return SQRT(x); }                         \
  static inline V v_rsqrt_##L(V x) { return KN_VM_RSQRT_##L(x, SQRT); }       \
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

/* float32 tanh without SLEEF's (slow) tanhf: for |x| < 0.625 an odd
** polynomial x + x^3 P(x^2) (least-squares fit, relative weight; 0.68 ULP
** measured), above it 1 - 2 / (e + 1) with e = exp(2|x|) from kiln's exp
** steps, |x| clamped to 10 so that no lane needs exp's range checks
** (2 / (e + 1) <= 0.45 there, so the subtraction loses nothing), sign
** restored; at most 1.3 ULP. NaN takes the exp branch; +-inf give +-1; -0 stays -0.
** AVX-512 evaluates piecewise polynomials from register tables instead
** (x5_tanh_f). */
static inline kn_vf v_tanh_poly_f(kn_vf x) {
#ifdef KN_VM_X512
  return x5_tanh_f(x);
#else
  kn_vf z = x * x;
  kn_vf p = fma_f(VF(2.142803743e-03f), z, VF(-8.177093230e-03f));
  p = fma_f(p, z, VF(2.170050144e-02f));
  p = fma_f(p, z, VF(-5.394670367e-02f));
  p = fma_f(p, z, VF(1.333320588e-01f));
  p = fma_f(p, z, VF(-3.333333135e-01f));
  kn_vf small = fma_f(x, z * p, x);
  kn_vfi sgn = (kn_vfi)x & INT32_MIN;
  kn_vf a = (kn_vf)((kn_vfi)x ^ sgn);
  /* e^(2 |x|) with |x| clamped to 10 (tanh rounds to 1 from 9.01): n <= 29,
  ** so 2^n scales directly */
  kn_vf ac = sel_f(a > 10.0f, VF(10), a), n = rint_f((ac + ac) * KN_LOG2E);
  kn_vf s = pow2i_f(toint_f(n));
  kn_vf e = fma_f(em1_short_f(exp_reduce_f(ac + ac, n)), s, s);
  kn_vf big = fma_f(VF(-2), recip_f(e + 1.0f), VF(1));
  kn_vfi m = a < 0.625f; /* all ones in lanes that take the polynomial */
  /* the polynomial has x's sign already, except for -0 */
  return (kn_vf)((((kn_vfi)small & m) | ((kn_vfi)big & ~m)) | sgn);
#endif
}

/* e^u for u in [-16, 0] (erf's -x^2 with |x| <= 4; NaN stays NaN): the
** steps of v_exp_own_f without its clamp and range check (2^n is a normal
** power of two here), and e^r - 1 by the same Taylor terms in Estrin's order
** (c2 + c3 r) + r^2 (c4 + c5 r) + r^4 (c6 + c7 r), which shortens the chain
** of dependent operations that bounds erf's and gelu's throughput. */
static inline kn_vf exp_neg16_f(kn_vf u) {
  kn_vf n = rint_f(u * KN_LOG2E);
  kn_vf r = exp_reduce_f(u, n), r2 = r * r;
  kn_vf lo = fma_f(r, VF(1.0 / 6), VF(0.5)), mid = fma_f(r, VF(1.0 / 120), VF(1.0 / 24));
  kn_vf hi = fma_f(r, VF(1.0 / 5040), VF(1.0 / 720));
  kn_vf q = fma_f(r2 * r2, hi, fma_f(r2, mid, lo));
  kn_vf s = pow2i_f(toint_f(n));
  return fma_f(fma_f(r2, q, r), s, s);
}

/* float32 erf without SLEEF's (slow) erff, in |x| (sign restored): below
** 0.875, x + x P(x^2); above, 1 - exp(-x^2) Q(|x| - 0.875) with |x|
** clamped to 4, where erf rounds to 1 (least-squares fits with relative
** weights; 0.8 and 0.86 ULP with an exact exp, 1.1 measured with kiln's).
** Q is evaluated in Estrin's order (powers t^2, t^4, t^8 side by side, not
** ten dependent steps). The exp side is computed for every lane; the
** polynomial side only when some lane takes it (each lane's bits are the
** same either way): a vector of N(0,1) activations nearly always has such a
** lane (a predictable branch), a sorted or wide-ranged run mostly has none.
** Skipping the exp side too was slower on random data (mispredictions).
** NaN stays NaN. AVX-512 evaluates piecewise polynomials from register
** tables instead (x5_erf_f: 0.62 ULP, no exp). */
static inline kn_vf erf_small_f(kn_vf a) {
  kn_vf z = a * a;
  kn_vf p = fma_f(VF(-6.218503113e-04f), z, VF(5.035122391e-03f));
  p = fma_f(p, z, VF(-2.679345198e-02f));
  p = fma_f(p, z, VF(1.128251031e-01f));
  p = fma_f(p, z, VF(-3.761255443e-01f));
  p = fma_f(p, z, VF(1.283791512e-01f));
  return fma_f(a, p, a);
}

static inline kn_vf v_erf_poly_f(kn_vf x) {
#ifdef KN_VM_X512
  return x5_erf_f(x);
#else
  kn_vfi bits = (kn_vfi)x, sgn = bits & INT32_MIN;
  kn_vf a = (kn_vf)(bits ^ sgn);
  kn_vfi over = a > 4.0f;
  kn_vf four = (kn_vf){0} + 4.0f;
  kn_vf ac = (kn_vf)(((kn_vfi)a & ~over) | ((kn_vfi)four & over));
  kn_vf t = ac - 0.875f, t2 = t * t, t4 = t2 * t2, t8 = t4 * t4;
  kn_vf q01 = fma_f(t, VF(-3.158338070e-01f), VF(4.643115699e-01f));
  kn_vf q23 = fma_f(t, VF(-1.008875594e-01f), VF(1.879543960e-01f));
  kn_vf q45 = fma_f(t, VF(-2.249682508e-02f), VF(4.968651012e-02f));
  kn_vf q67 = fma_f(t, VF(-3.091333667e-03f), VF(9.120049886e-03f));
  kn_vf q89 = fma_f(t, VF(-1.264200400e-04f), VF(7.839610334e-04f));
  kn_vf q03 = fma_f(t2, q23, q01), q47 = fma_f(t2, q67, q45);
  kn_vf q8a = fma_f(t2, VF(9.423242773e-06f), q89);
  kn_vf q = fma_f(t8, q8a, fma_f(t4, q47, q03));
  kn_vf big = fma_f(-exp_neg16_f(-(ac * ac)), q, VF(1));
  kn_vfi m = a < 0.875f;
  if (!KN_VM_ANYI(m)) return (kn_vf)((kn_vfi)big | sgn);
  kn_vf small = erf_small_f(a);
  return (kn_vf)((((kn_vfi)small & m) | ((kn_vfi)big & ~m)) | sgn);
#endif
}

/* Outputs of at least this many bytes (one call's) are written with
** non-temporal (streaming) stores, when the output does not alias the input:
** a plain store first reads each output line into the cache (a third memory
** stream) and then evicts lines the input still needs. Over 4M floats
** (16 MB out) on an AMD EPYC with 32 MB of L3 a sqrt loop took 1.7 ms
** instead of 2.1, and a sum reading the output back was as fast after either
** store; at 8 MB the op gained ~0.15 ms and the read-back lost ~0.06; at 4 MB
** the read-back lost more than the op gained (the output stays in L3 after
** plain stores), so smaller outputs keep them. */
#define KN_VM_NT_MIN ((int64_t)8 << 20)

static inline bool nt_worth(const void *y, const void *x, int64_t bytes, size_t es) {
  return bytes >= KN_VM_NT_MIN && y != x && (uintptr_t)y % es == 0;
}

/* Elements before y + h is aligned to a whole vector of vbytes (< a vector). */
static inline int64_t nt_head(const void *y, size_t vbytes, size_t es) {
  size_t mis = (uintptr_t)y % vbytes;
  return mis ? (int64_t)((vbytes - mis) / es) : 0;
}

/* An array function over a vector function; the tail (and, before
** streaming stores, the head up to the output's vector alignment) runs
** zero-padded. Lanes are independent, so every element gets the same bits
** whichever path computes it. */
#define KN_VM_ARRAY1(NAME, T, V, W, L)                                          \
  static void part_##NAME##_##L(T *y, const T *x, int64_t m) {                 \
    T b[W] = {0};                                                              \
    memcpy(b, x, (size_t)m * sizeof(T));                                       \
    st_##L(b, v_##NAME##_##L(ld_##L(b)));                                      \
    memcpy(y, b, (size_t)m * sizeof(T));                                       \
  }                                                                            \
  static void a_##NAME##_##L(T *y, const T *x, int64_t n) {                    \
    int64_t i = 0;                                                             \
    if (nt_worth(y, x, n * (int64_t)sizeof(T), sizeof(T))) {                   \
      i = nt_head(y, sizeof(V), sizeof(T));                                    \
      if (i > 0) part_##NAME##_##L(y, x, i);                                   \
      for (; i + W <= n; i += W) stnt_##L(y + i, v_##NAME##_##L(ld_##L(x + i))); \
      _mm_sfence();                                                            \
    }                                                                          \
    for (; i + W <= n; i += W) st_##L(y + i, v_##NAME##_##L(ld_##L(x + i)));   \
    if (i < n) part_##NAME##_##L(y + i, x + i, n - i);                         \
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
  KN_VM_ARRAY1(log10, T, V, W, L) KN_VM_ARRAY1(sinh, T, V, W, L)               \
  KN_VM_ARRAY1(cosh, T, V, W, L) KN_VM_ARRAY1(asin, T, V, W, L)                \
  KN_VM_ARRAY1(acos, T, V, W, L) KN_VM_ARRAY1(atan, T, V, W, L)                \
  KN_VM_ARRAY1(erfc, T, V, W, L)                                               \
  KN_VM_ARRAY2(gelu_bw, T, V, W, L) KN_VM_ARRAY2(gelu_tanh_bw, T, V, W, L)

KN_VM_TYPE(float, kn_vf, KN_VM_WF, f, KN_VM_SQRTF, KN_VM_ANY_GTF, 88.0f, sinhf, coshf)
KN_VM_TYPE(double, kn_vd, KN_VM_WD, d, KN_VM_SQRTD, KN_VM_ANY_GTD, 709.0, sinh, cosh)
KN_VM_ALL(float, kn_vf, KN_VM_WF, f)
KN_VM_ALL(double, kn_vd, KN_VM_WD, d)


/* ---- float32 softmax lines (see kn__vm_softmax_f32) ---------------------- */

/* Half a float vector, and its lanes in double: the sums of exps are kept
** in two of these (as wide as a float vector each) rather than in one
** vector of KN_VM_WF doubles, which gcc splits through the stack and
** general registers (AVX2: a third of eager softmax's time on AMD Zen 3). */
typedef float kn_vfh __attribute__((vector_size(KN_VM_WF / 2 * sizeof(float))));
typedef double kn_vfdh __attribute__((vector_size(KN_VM_WF / 2 * sizeof(double))));

/* acc[0] += the low half of the KN_VM_WF floats at p, acc[1] += the high
** half, each lane in double (lane j of the two, in order, is lane j of p). */
static inline void acc_halves(kn_vfdh *acc, const float *p) {
#if KN_VM_WF == 8 && defined(__AVX__)
  /* one vcvtps2pd per half: gcc lowers the generic conversion below as two
  ** 2-lane conversions and an insert per half (AVX2 on AMD Zen 3: a fifth
  ** of eager float32 log_softmax's time) */
  acc[0] += (kn_vfdh)_mm256_cvtps_pd(_mm_loadu_ps(p));
  acc[1] += (kn_vfdh)_mm256_cvtps_pd(_mm_loadu_ps(p + 4));
#elif KN_VM_WF == 16 && defined(__AVX512F__)
  acc[0] += (kn_vfdh)_mm512_cvtps_pd(_mm256_loadu_ps(p));
  acc[1] += (kn_vfdh)_mm512_cvtps_pd(_mm256_loadu_ps(p + 8));
#else
  kn_vfh lo, hi;
  memcpy(&lo, p, sizeof lo);
  memcpy(&hi, p + KN_VM_WF / 2, sizeof hi);
  acc[0] += __builtin_convertvector(lo, kn_vfdh);
  acc[1] += __builtin_convertvector(hi, kn_vfdh);
#endif
}

/* acc_halves of the float vector v in a register. */
static inline void acc_halves_v(kn_vfdh *acc, kn_vf v) {
#if KN_VM_WF == 16 && defined(__AVX512F__)
  acc[0] += (kn_vfdh)_mm512_cvtps_pd(_mm512_castps512_ps256((__m512)v));
  acc[1] += (kn_vfdh)_mm512_cvtps_pd(
      _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd((__m512)v), 1)));
#elif KN_VM_WF == 8 && defined(__AVX__)
  acc[0] += (kn_vfdh)_mm256_cvtps_pd(_mm256_castps256_ps128((__m256)v));
  acc[1] += (kn_vfdh)_mm256_cvtps_pd(_mm256_extractf128_ps((__m256)v, 1));
#else
  float b[KN_VM_WF];
  st_f(b, v);
  acc_halves(acc, b);
#endif
}

/* a > m ? a : m, lane by lane (NaN in a never taken): the ISA's maxps,
** which computes exactly that, where the table file names it. */
static inline kn_vf vmax_f(kn_vf a, kn_vf m) {
#ifdef KN_VM_MAXF
  return KN_VM_MAXF(a, m);
#else
  kn_vfi gt = a > m;
  return (kn_vf)(((kn_vfi)a & gt) | ((kn_vfi)m & ~gt));
#endif
}

/* NaN lanes seen, accumulated over a row (nanq_add4_f: four vectors). On
** AVX-512 a mask: two unordered compares of two vectors each, where the
** four a != a compares and their conversion to a vector made the row's max
** take 30% longer (294 against 227 us for 4096 rows of 1024 in L2, Xeon,
** 2026-11-28). */
#ifdef KN_VM_X512
typedef __mmask16 kn_nanq;
static inline kn_nanq nanq_add4_f(kn_nanq q, kn_vf a, kn_vf b, kn_vf c, kn_vf d) {
  return q | _mm512_cmp_ps_mask(a, b, _CMP_UNORD_Q) | _mm512_cmp_ps_mask(c, d, _CMP_UNORD_Q);
}
static inline kn_nanq nanq_add_f(kn_nanq q, kn_vf a) {
  return q | _mm512_cmp_ps_mask(a, a, _CMP_UNORD_Q);
}
static inline bool nanq_any(kn_nanq q) { return q != 0; }
#else
typedef kn_vfi kn_nanq;
static inline kn_nanq nanq_add4_f(kn_nanq q, kn_vf a, kn_vf b, kn_vf c, kn_vf d) {
  return q | (a != a) | (b != b) | (c != c) | (d != d);
}
static inline kn_nanq nanq_add_f(kn_nanq q, kn_vf a) { return q | (a != a); }
static inline bool nanq_any(kn_nanq q) {
  int32_t qs[KN_VM_WF], any = 0;
  memcpy(qs, &q, sizeof qs);
  for (int j = 0; j < KN_VM_WF; j++) any |= qs[j];
  return any != 0;
}
#endif

/* The largest element of x (NaN skipped; -inf when none); *nan set to 1
** when x holds a NaN (kn__vm_rowmax_f32). Four running maxima instead of
** one chain of dependent max/blend steps: eager float32 softmax over 4096
** rows of 1024 held in L2 lost about 0.2 of its 2.2 ms on an AVX-512 Xeon.
** The maximum does not depend on the grouping (apart from the sign of a
** zero maximum, which softmax cannot see: x - 0 and x + 0 round alike and
** exp(+-0) is 1). */
static float line_max_f(const float *x, int64_t n, int *nan) {
  kn_vf m0 = (kn_vf){0} - INFINITY, m1 = m0, m2 = m0, m3 = m0;
  kn_nanq q = {0};
  int64_t k = 0;
  for (; k + 4 * KN_VM_WF <= n; k += 4 * KN_VM_WF) {
    kn_vf a = ld_f(x + k), b = ld_f(x + k + KN_VM_WF), c = ld_f(x + k + 2 * KN_VM_WF),
          d = ld_f(x + k + 3 * KN_VM_WF);
    m0 = vmax_f(a, m0), m1 = vmax_f(b, m1), m2 = vmax_f(c, m2), m3 = vmax_f(d, m3);
    q = nanq_add4_f(q, a, b, c, d);
  }
  for (; k + KN_VM_WF <= n; k += KN_VM_WF) {
    kn_vf a = ld_f(x + k);
    m0 = vmax_f(a, m0);
    q = nanq_add_f(q, a);
  }
  m0 = vmax_f(vmax_f(m1, m0), vmax_f(m3, m2));
  float ms[KN_VM_WF], mx = -INFINITY;
  st_f(ms, m0);
  for (int j = 0; j < KN_VM_WF; j++) mx = ms[j] > mx ? ms[j] : mx;
  int any = nanq_any(q);
  for (; k < n; k++) {
    mx = x[k] > mx ? x[k] : mx;
    any |= x[k] != x[k];
  }
  if (any) *nan = 1;
  return mx;
}

/* kn__vm_softmax_bwd_f32: the sums in double in plain loops that `omp simd`
** vectorises (the lanes' sums combined in a fixed order); the gradient in
** float from the sum split into two floats, s = sh + sl (sh the float
** nearest s): softmax (g - sh) - sl, exact or rounded once, then times y;
** log_softmax (g - e * sh) - e * sl with the exps in float through v_exp_f,
** a vector at a time beside the formula (the tail padded with zeros).
** Computing the gradient in double cost four conversions of a float vector
** and two back per vector: compiled softmax backward over 4096 rows of 1024
** (an extern call of this) and eager log_softmax backward took 7-25% less
** time in float (one thread, AVX-512 Xeon, both in turns in one process);
** softmax's gradient is within 2.5 ULP of the formula on the float inputs
** (0.5 in double; tests/test_vmath.c). */
static void softmax_bwd_f(float *restrict gi, const float *restrict g, const float *restrict y,
                          int64_t n, bool log_) {
  double s = 0;
  if (!log_) {
#pragma omp simd reduction(+ : s)
    for (int64_t k = 0; k < n; k++) s += (double)g[k] * (double)y[k];
    const float sh = (float)s, sl = (float)(s - (double)sh);
#pragma omp simd
    for (int64_t k = 0; k < n; k++) gi[k] = y[k] * ((g[k] - sh) - sl);
    return;
  }
#pragma omp simd reduction(+ : s)
  for (int64_t k = 0; k < n; k++) s += (double)g[k];
  const float sh = (float)s, sl = (float)(s - (double)sh);
  /* one pass: each vector's exps kept in L1 beside the formula (a pass
  ** writing them to gi and another reading them back cost a sweep more) */
  float e[KN_VM_WF] __attribute__((aligned(64)));
  for (int64_t k = 0; k < n; k += KN_VM_WF) {
    int64_t m = n - k < KN_VM_WF ? n - k : KN_VM_WF;
    if (m == KN_VM_WF) {
      st_f(e, v_exp_f(ld_f(y + k)));
    } else { /* the tail, padded with zeros */
      memset(e, 0, sizeof e);
      memcpy(e, y + k, (size_t)m * sizeof *e);
      st_f(e, v_exp_f(ld_f(e)));
    }
#pragma omp simd
    for (int64_t j = 0; j < m; j++) gi[k + j] = (g[k + j] - e[j] * sh) - e[j] * sl;
  }
}

/* ---- float32 softplus (see kn__vm_softplus_f32) --------------------------- */

static inline kn_vf v_softplus_f(kn_vf x, float beta, float thr, bool div) {
  kn_vf t = x * beta, r = v_log1p_f(v_exp_f(t));
  if (div) r = r / beta; /* r / 1 == r: beta 1 divides nothing */
  return sel_f(t > thr, x, r);
}

static void softplus_part_f(float *y, const float *x, int64_t m, float beta, float thr) {
  float b[KN_VM_WF] = {0};
  memcpy(b, x, (size_t)m * sizeof *b);
  st_f(b, v_softplus_f(ld_f(b), beta, thr, beta != 1));
  memcpy(y, b, (size_t)m * sizeof *y);
}

static void softplus_f(float *y, const float *x, int64_t n, float beta, float thr) {
  const bool div = beta != 1;
  int64_t i = 0;
  if (nt_worth(y, x, n * (int64_t)sizeof *y, sizeof *y)) {
    i = nt_head(y, sizeof(kn_vf), sizeof *y);
    if (i > 0) softplus_part_f(y, x, i, beta, thr);
    for (; i + KN_VM_WF <= n; i += KN_VM_WF)
      stnt_f(y + i, v_softplus_f(ld_f(x + i), beta, thr, div));
    _mm_sfence();
  }
  for (; i + KN_VM_WF <= n; i += KN_VM_WF) st_f(y + i, v_softplus_f(ld_f(x + i), beta, thr, div));
  if (i < n) softplus_part_f(y + i, x + i, n - i, beta, thr);
}

/* ---- float32 exp(x - c) and its sum (see kn__vm_expsum_f32) ------------- */

/* Groups of KN_VM_ES_BIG = 16 x 16 elements first, then of KN_VM_ES_GROUP =
** 4 x 16 (kn__vm_expsum_f32's contract): a vector's exps stay in registers,
** each lane's exps of a group are added in float, pairwise, and the sum
** once in double, so that the conversions and double additions (seven
** operations per 16 lanes on AVX-512) come once per 16 exps instead of
** once per exp. Adding every exp in double was done a chunk of 256 exps
** at a time, stored and then summed from L1: on AMD Zen 3 (AVX2) adding
** each vector's exps from the register as they were computed was slower
** (fewer exps in flight while the additions waited on each), and so it was
** on the AVX-512 Xeon (1.97-2.01 against 1.86-1.92 ms for softmax); four
** exps a lane per conversion cut compiled softmax, log_softmax and
** cross_entropy by 7-13% (one thread, 4096 rows of 1024), sixteen the
** exp-and-sum by a further 8-11% (docs/INDUCTOR.md). While a group computes, the caller's block
** ahead (two rows on) is fetched, a line per 16 elements, between the
** arithmetic rather than in a burst after the call. The rest (< 64
** elements) adds each exp in double: whole sets of 16 lanes from registers,
** then the last elements (< 16) in zero-padded vectors, one by one.
** expsum_max_f takes the lanes' exps from v_exp_le0_f (c at least every x:
** the same bits, one operation fewer on AVX-512). */
#define KN_VM_ES_GROUP (4 * KN__VM_SUM_LANES)
#define KN_VM_ES_BIG (16 * KN__VM_SUM_LANES)
/* exp(x[o] - c) of one vector, t and the exp stored where asked */
static inline kn_vf expsum_one(float *e, float *d, const float *x, float c, int64_t o,
                               bool le0) {
  kn_vf t = ld_f(x + o) - c, v;
  if (d) st_f(d + o, t);
  v = le0 ? v_exp_le0_f(t) : v_exp_f(t);
  if (e) st_f(e + o, v);
  return v;
}

/* The float sums of nf (1 or 2) groups of 64 lanes from o (each sum[g]
** the lanes of one vector's 16 at o + g * 64 + its offset: (e0 + e1) +
** (e2 + e3)). On AVX-512 the 4 nf exps are computed interleaved
** (x5_exp_fn), the same bits; eight in turns ran 6% faster than four. */
static inline void expsum_fours(float *e, float *d, const float *x, float c, int64_t o,
                                bool le0, kn_vf *sum, int nf) {
#if defined(KN_VM_X512) && KN__VM_SUM_LANES == KN_VM_WF
  kn_vf v[KN_X5_MAX];
  for (int k = 0; k < 4 * nf; k++) {
    v[k] = ld_f(x + o + k * KN_VM_WF) - c;
    if (d) st_f(d + o + k * KN_VM_WF, v[k]);
  }
  x5_exp_fn(v, 4 * nf, le0);
  for (int k = 0; k < 4 * nf; k++)
    if (e) st_f(e + o + k * KN_VM_WF, v[k]);
  for (int g = 0; g < nf; g++)
    sum[g] = (v[4 * g] + v[4 * g + 1]) + (v[4 * g + 2] + v[4 * g + 3]);
#else
  for (int g = 0; g < nf; g++) {
    int64_t p = o + g * KN_VM_ES_GROUP;
    kn_vf v0 = expsum_one(e, d, x, c, p, le0);
    kn_vf v1 = expsum_one(e, d, x, c, p + KN__VM_SUM_LANES, le0);
    kn_vf v2 = expsum_one(e, d, x, c, p + 2 * KN__VM_SUM_LANES, le0);
    kn_vf v3 = expsum_one(e, d, x, c, p + 3 * KN__VM_SUM_LANES, le0);
    sum[g] = (v0 + v1) + (v2 + v3);
  }
#endif
}

static inline void expsum_fetch(const float *ahead, int64_t i, int64_t n) {
  for (int64_t l = i; l < n; l += 16) __builtin_prefetch(ahead + l);
}

/* The 16 lanes as 32 / KN_VM_WF halves of a float vector's width (lane l in
** half l / (KN_VM_WF / 2)), in registers through the loop. */
#define KN_VM_NHALF (2 * KN__VM_SUM_LANES / KN_VM_WF)
#define KN_VM_NG (KN__VM_SUM_LANES / KN_VM_WF) /* vectors per 16 lanes */
__attribute__((always_inline)) static inline void
expsum_body(float *e, float *d, const float *x, float c, int64_t n, double *acc,
            const float *ahead, bool le0) {
  kn_vfdh a[KN_VM_NHALF];
  memcpy(a, acc, sizeof a);
  int64_t i = 0;
  for (; i + KN_VM_ES_BIG <= n; i += KN_VM_ES_BIG)
    for (int q = 0; q < KN_VM_NG; q++) {
      kn_vf s[4];
      for (int g = 0; g < 4; g += 2) {
        int64_t o = i + g * KN_VM_ES_GROUP;
        if (ahead && q == 0) expsum_fetch(ahead, o, o + 2 * KN_VM_ES_GROUP);
        expsum_fours(e, d, x, c, o + q * KN_VM_WF, le0, s + g, 2);
      }
      acc_halves_v(a + 2 * q, (s[0] + s[1]) + (s[2] + s[3]));
    }
  for (; i + KN_VM_ES_GROUP <= n; i += KN_VM_ES_GROUP) {
    if (ahead) expsum_fetch(ahead, i, i + KN_VM_ES_GROUP);
    for (int q = 0; q < KN_VM_NG; q++) {
      kn_vf s;
      expsum_fours(e, d, x, c, i + q * KN_VM_WF, le0, &s, 1);
      acc_halves_v(a + 2 * q, s);
    }
  }
  if (ahead) expsum_fetch(ahead, i, n);
  for (; i + KN__VM_SUM_LANES <= n; i += KN__VM_SUM_LANES)
    for (int q = 0; q < KN_VM_NG; q++)
      acc_halves_v(a + 2 * q, expsum_one(e, d, x, c, i + q * KN_VM_WF, le0));
  memcpy(acc, a, sizeof a);
  for (; i < n; i += KN_VM_WF) {
    int m = n - i < KN_VM_WF ? (int)(n - i) : KN_VM_WF;
    float b[KN_VM_WF] = {0};
    memcpy(b, x + i, (size_t)m * sizeof *b);
    kn_vf t = ld_f(b) - c;
    if (d) {
      st_f(b, t);
      memcpy(d + i, b, (size_t)m * sizeof *d);
    }
    st_f(b, v_exp_f(t)); /* the padding lanes (0 - c) may exceed 0 */
    if (e) memcpy(e + i, b, (size_t)m * sizeof *e);
    for (int j = 0; j < m; j++) acc[(i + j) % KN__VM_SUM_LANES] += (double)b[j];
  }
}

static void expsum_f(float *e, float *d, const float *x, float c, int64_t n, double *acc,
                     const float *ahead) {
  expsum_body(e, d, x, c, n, acc, ahead, false);
}

static void expsum_max_f(float *e, float *d, const float *x, float c, int64_t n, double *acc,
                         const float *ahead) {
  expsum_body(e, d, x, c, n, acc, ahead, true);
}

/* kn__vm_softmax_f32: the generated row kernel's softmax (ops/vmath_softmax.h)
** from this table's own functions. */
static void softmax_f(float *y, const float *x, int64_t n, bool log_) {
  kn__vm_softmax_row(y, x, n, log_, line_max_f, expsum_max_f, a_exp_f, a_log_f);
}

const kn__vmath KN_VM_TABLE = {KN_VM_NAME,     KN__VM_ROW1(f), KN__VM_ROW1(d),
                               KN__VM_ROW2(f), KN__VM_ROW2(d), softmax_f,
                               softmax_bwd_f,  softplus_f,     expsum_f,
                               line_max_f,     expsum_max_f};
