/*
** ops/vmath_f32.h: kiln's own float32 vector kernels for exp, exp2, expm1, log,
** log2, log10, log1p, sinh, cosh and (on ISAs with FMA) sin, cos, tan, asin,
** acos and atan, included by vmath_isa.h (which defines kn_vf, KN_VM_WF and
** the ISA macros KN_VM_FMAF, KN_VM_ANYI, KN_VM_HAS_FMA, and KN_VM_SQRTF, which
** may be left out: lanes then take __builtin_sqrtf). SLEEF's u10 float
** functions carry double-float arithmetic that float32 does not need at 1
** ULP; these use classic range reductions and plain float polynomials
** instead (Taylor coefficients or least-squares fits that meet float
** accuracy on the reduced ranges), with no fast-math and with special values
** (0, -0, +-inf, NaN, denormals) exact. Compiled for AVX-512F with 16 lanes,
** exp, expm1, the logs, sinh, cosh and the reciprocal take the versions of
** vmath_f32_avx512.h. Error bounds measured over every float in their
** ranges while developing them are in the comments; tests/test_vmath.c
** checks them on every ISA.
*/
#include <float.h>
#include <math.h>
#if defined(__AVX512F__) && KN_VM_WF == 16
#include <immintrin.h>
#endif

typedef int32_t kn_vfi __attribute__((vector_size(sizeof(kn_vf))));
typedef uint32_t kn_vfu __attribute__((vector_size(sizeof(kn_vf))));

#define VF(c) ((kn_vf){0} + (float)(c))

static inline kn_vf sel_f(kn_vfi m, kn_vf a, kn_vf b) { /* m ? a : b, lane by lane */
  return (kn_vf)(((kn_vfi)a & m) | ((kn_vfi)b & ~m));
}
static inline kn_vf fma_f(kn_vf a, kn_vf b, kn_vf c) { return KN_VM_FMAF(a, b, c); }
/* Round to nearest integer, for |v| < 2^22 (NaN and inf stay; AVX-512: one
** vrndscaleps). */
static inline kn_vf rint_f(kn_vf v) {
#if defined(__AVX512F__) && KN_VM_WF == 16
  return _mm512_roundscale_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
#else
  return (v + 0x1.8p23f) - 0x1.8p23f;
#endif
}
/* x clamped to [lo, hi], NaN kept. With KN_VM_MINF/KN_VM_MAXF (minps and
** maxps, which return their second operand when either is NaN) two
** instructions; sel_f's compares and blends cost the AVX2 exp a fifth of
** its time on AMD Zen 3 (0.65 -> 0.50 ns per element). */
static inline kn_vf clamp_f(kn_vf x, float lo, float hi) {
#ifdef KN_VM_MINF
  return KN_VM_MINF(VF(hi), KN_VM_MAXF(VF(lo), x));
#else
  kn_vf c = sel_f(x > hi, VF(hi), x);
  return sel_f(c < lo, VF(lo), c);
#endif
}
/* 2^n for integer lanes n in [-126, 127] */
static inline kn_vf pow2i_f(kn_vfi n) { return (kn_vf)(((kn_vfu)n + 127u) << 23); }
static inline kn_vfi toint_f(kn_vf v) { return __builtin_convertvector(v, kn_vfi); }

#define KN_LN2HI 0x1.62e4p-1f /* 15 bits: n * KN_LN2HI is exact */
#define KN_LN2LO 0x1.7f7d1cp-20f
#define KN_LOG2E 0x1.715476p+0f

/* Lanes that are not finite and positive (log: > 0; log1p: > -1) take
** their special value: at the pole -inf, below it NaN, else x itself
** (inf, NaN, and for log1p +-0). */
static inline kn_vf log_special_f(kn_vf x, kn_vf r, kn_vfi ok, float pole) {
  if (!KN_VM_ANYI(~ok)) return r;
  kn_vf sp = sel_f(x == pole, VF(-INFINITY), sel_f(x < pole, VF(NAN), x));
  return sel_f(ok, r, sp);
}

/* ---- exp and expm1 -------------------------------------------------------- */

/* expm1(r) = r + r^2 (1/2 + r/6 + ... ) for r in [-0.35, 0.59], Taylor
** terms to r^9 (remainder below 2e-9 relative). */
static inline kn_vf em1_poly_f(kn_vf r) {
  kn_vf q = fma_f(r, VF(1.0 / 3628800), VF(1.0 / 362880));
  q = fma_f(q, r, VF(1.0 / 40320));
  q = fma_f(q, r, VF(1.0 / 5040));
  q = fma_f(q, r, VF(1.0 / 720));
  q = fma_f(q, r, VF(1.0 / 120));
  q = fma_f(q, r, VF(1.0 / 24));
  q = fma_f(q, r, VF(1.0 / 6));
  q = fma_f(q, r, VF(0.5));
  return fma_f(r, r * q, r);
}

/* e^r - 1 for |r| <= 0.35: Taylor terms to r^7 (remainder 6e-9). */
static inline kn_vf em1_short_f(kn_vf r) {
  kn_vf q = fma_f(r, VF(1.0 / 5040), VF(1.0 / 720));
  q = fma_f(q, r, VF(1.0 / 120));
  q = fma_f(q, r, VF(1.0 / 24));
  q = fma_f(q, r, VF(1.0 / 6));
  q = fma_f(q, r, VF(0.5));
  return fma_f(r, r * q, r);
}

/* r = x - n ln2 in two steps (n * KN_LN2HI exact). */
static inline kn_vf exp_reduce_f(kn_vf x, kn_vf n) {
  return fma_f(n, VF(-KN_LN2LO), fma_f(n, VF(-KN_LN2HI), x));
}

/* (1 + m) 2^n, rounded once, for integer lanes n in [-150, 129]: one
** scaling when all lanes are normal powers of two, else two (the second
** rounds only results that underflow or overflow). */
static inline kn_vf scale1p_f(kn_vf m, kn_vfi n) {
  kn_vfi out = (kn_vfi)((kn_vfu)(n + 126) > 253u);
  if (!KN_VM_ANYI(out)) {
    kn_vf s = pow2i_f(n);
    return fma_f(m, s, s);
  }
  kn_vfi h = n >> 1;
  kn_vf s = pow2i_f(h);
  return fma_f(m, s, s) * pow2i_f(n - h);
}

#if defined(__AVX512F__) && KN_VM_WF == 16
#include "ops/vmath_f32_avx512.h"
static inline kn_vf recip_f(kn_vf d) { return x5_recip_f(d); }
#else
/* 1 / d (AVX-512: a refined estimate, within 0.6 ULP). */
static inline kn_vf recip_f(kn_vf d) { return 1.0f / d; }
#endif

/* e^x: x clamped to [-104, 89] (0 and inf beyond; NaN stays), n = rint(x /
** ln2), e^x = 2^n (1 + expm1(r)). At most 1 ULP (0.51 measured). */
static inline kn_vf v_exp_wide_f(kn_vf x) {
  kn_vf xc = clamp_f(x, -104.0f, 89.0f);
  kn_vf n = rint_f(xc * KN_LOG2E);
  return scale1p_f(em1_short_f(exp_reduce_f(xc, n)), toint_f(n));
}

#if KN_VM_HAS_FMA
/* e^r - 1 for |r| <= 0.347: r + r^2 q(r), q of degree 4 fitted on
** Chebyshev nodes to (e^r - 1 - r) / r^2 (error below 7e-8 on q, so 8e-9
** on e^r). */
static inline kn_vf em1_fit_f(kn_vf r) {
  kn_vf q = fma_f(r, VF(0x1.6d113cp-10f), VF(0x1.120ba2p-7f));
  q = fma_f(q, r, VF(0x1.55551ap-5f));
  q = fma_f(q, r, VF(0x1.5554dcp-3f));
  q = fma_f(q, r, VF(0.5f));
  return fma_f(r, r * q, r);
}

/* e^x where every lane has |x| <= 87, so n = rint(x / ln2) is in [-126, 126]
** and 2^n a normal float: x / ln2 + 1.5 * 2^23 rounded once puts n in the
** low bits of t (t - 1.5 * 2^23 = n exactly; t's bits shifted by 23 are n
** << 23, the exponent field of 2^n less its bias), e^x = 2^n (1 + expm1(r))
** rounded once. No clamp, no integer conversion and no range check per
** lane: 0.41 -> 0.275 ns per element on AMD EPYC (Zen 3) AVX2. */
static inline kn_vf exp_mid_f(kn_vf x) {
  kn_vf t = fma_f(x, VF(KN_LOG2E), VF(0x1.8p23f));
  kn_vf n = t - VF(0x1.8p23f);
  kn_vf m = em1_fit_f(exp_reduce_f(x, n));
  kn_vf s = (kn_vf)(((kn_vfu)t << 23) + 0x3f800000u);
  return fma_f(m, s, s);
}
#endif

/* e^x. Without FMA or with a lane beyond |x| <= 87, v_exp_wide_f; else
** exp_mid_f (a NaN lane too: NaN flows through its arithmetic). Both within 1 ULP of the correctly rounded result over
** every float (checked exhaustively; 1.08 ULP from e^x at most, the wide
** one 1.06). */
static inline kn_vf v_exp_own_f(kn_vf x) {
#ifdef KN_VM_X512
  return x5_exp_f(x);
#elif KN_VM_HAS_FMA
  kn_vfi wide = (kn_vfi)((kn_vf)((kn_vfi)x & INT32_MAX) > 87.0f);
  if (__builtin_expect(!KN_VM_ANYI(wide), 1)) return exp_mid_f(x);
  return v_exp_wide_f(x);
#else
  return v_exp_wide_f(x);
#endif
}

/* v_exp_own_f of lanes that are <= 0 or NaN (x - c with c at least every x),
** the same bits for less work: no upper clamp on AVX-512, a one-sided range
** check with FMA. Other lanes: unspecified. */
static inline kn_vf v_exp_le0_f(kn_vf x) {
#ifdef KN_VM_X512
  return x5_exp_le0_f(x);
#elif KN_VM_HAS_FMA
  kn_vfi wide = (kn_vfi)(x < -87.0f); /* |x| > 87 for such lanes; NaN is not */
  if (__builtin_expect(!KN_VM_ANYI(wide), 1)) return exp_mid_f(x);
  return v_exp_wide_f(x);
#else
  return v_exp_wide_f(x);
#endif
}

/* ln 2 = KN_LN2F + KN_LN2FLO (KN_LN2F the float nearest ln 2). */
#define KN_LN2F 0x1.62e43p-1f
#define KN_LN2FLO -0x1.05c61p-29f

/* 2^x: x clamped to [-150, 129] (0 and inf beyond; NaN stays), n = rint(x),
** f = x - n exact (|f| <= 1/2), 2^x = 2^n e^r with r = f ln 2 rounded once
** (|r| <= ln2 / 2, the rounding costs under 0.2 ULP). Integers give exact
** powers of two. At most 1.1 ULP (1.06 measured with FMA). */
static inline kn_vf v_exp2_own_f(kn_vf x) {
#ifdef KN_VM_X512
  return x5_exp2_f(x);
#else
  kn_vf xc = sel_f(x > 129.0f, VF(129), x);
  xc = sel_f(xc < -150.0f, VF(-150), xc);
  kn_vf n = rint_f(xc), f = xc - n;
  kn_vf r = fma_f(f, VF(KN_LN2F), f * KN_LN2FLO);
  return scale1p_f(em1_short_f(r), toint_f(n));
#endif
}

/* e^x - 1 = 2^n expm1(r) + (2^n - 1). For x > 0, n = rint(x / ln2 - 0.35)
** keeps r >= -0.104, so the first term never cancels the second much; for
** x < 0 the usual |r| <= ln2 / 2. x < -30 gives -1; x > 80, e^x (the -1 is
** below half an ULP). At most 1.5 ULP (measured). */
static inline kn_vf v_expm1_own_f(kn_vf x) {
#ifdef KN_VM_X512
  return x5_expm1_f(x);
#else
  kn_vf xc = sel_f(x < -30.0f, VF(-30), x);
  xc = sel_f(xc > 80.0f, VF(80), xc);
  kn_vf n = rint_f(xc * KN_LOG2E - sel_f(xc > 0.0f, VF(0.35f), VF(0)));
  kn_vf m = em1_poly_f(exp_reduce_f(xc, n));
  kn_vf t = pow2i_f(toint_f(n));
  kn_vf r = sel_f(n == 0.0f, m, fma_f(t, m, t - 1.0f));
  r = sel_f(x == 0.0f, x, r); /* -0 */
  if (KN_VM_ANYI(x > 80.0f)) r = sel_f(x > 80.0f, v_exp_own_f(x), r);
  return r;
#endif
}

/* sinh(x) = sign(x) (e / 2 - 1 / (2 e)) with e = e^|x| for |x| >= 1 (the
** second term is at most 0.135 of the first, so the difference loses under
** a quarter bit); |x| > 88 is left to the caller (the result overflows a
** little after e^|x| does). */
static inline kn_vf v_sinh_own_f(kn_vf x) {
#ifdef KN_VM_X512
  return x5_sinh_f(x);
#else
  kn_vfi sgn = (kn_vfi)x & INT32_MIN;
  kn_vf a = (kn_vf)((kn_vfi)x ^ sgn), e = v_exp_own_f(a);
  kn_vf r = fma_f(VF(0.5), e, -0.5f * recip_f(e));
  /* below 1: x + x^3 (1/3! + x^2/5! + ... + x^10/13!) (remainder 2e-10) */
  kn_vf z = a * a, p = fma_f(z, VF(1.0 / 6227020800), VF(1.0 / 39916800));
  p = fma_f(p, z, VF(1.0 / 362880));
  p = fma_f(p, z, VF(1.0 / 5040));
  p = fma_f(p, z, VF(1.0 / 120));
  p = fma_f(p, z, VF(1.0 / 6));
  r = sel_f(a < 1.0f, fma_f(a * z, p, a), r);
  return (kn_vf)((kn_vfi)r | sgn);
#endif
}

/* cosh(x) = e / 2 + 1 / (2 e) with e = e^|x| (|x| > 88: the caller's). */
static inline kn_vf v_cosh_own_f(kn_vf x) {
#ifdef KN_VM_X512
  return x5_cosh_f(x);
#else
  kn_vf e = v_exp_own_f((kn_vf)((kn_vfi)x & INT32_MAX));
  return fma_f(VF(0.5), e, 0.5f * recip_f(e));
#endif
}

/* ---- logarithms ------------------------------------------------------------- */

/* x = 2^e (1 + f) with 1 + f in [sqrt(1/2), sqrt(2)), for finite x > 0
** (denormals scaled first). */
static inline kn_vf log_split_f(kn_vf x, kn_vf *e) {
  kn_vfi den = x < FLT_MIN;
  x = sel_f(den, x * 0x1p23f, x);
  /* unsigned arithmetic: wraps (negative x, NaN) instead of overflowing */
  kn_vfi k = (kn_vfi)((kn_vfu)x - 0x3f3504f3u) >> 23;
  *e = __builtin_convertvector(k, kn_vf) - sel_f(den, VF(23), VF(0));
  return (kn_vf)((kn_vfu)x - ((kn_vfu)k << 23)) - 1.0f;
}

/* log(1 + f) = f - (hfsq - s (hfsq + R)), s = f / (2 + f), hfsq = f^2 / 2,
** R = 2 (z/3 + z^2/5 + z^3/7 + z^4/9), z = s^2 (the atanh series; |s| <=
** 0.172). Returns the part s (hfsq + R) - hfsq; f is exact. */
static inline kn_vf log_tail_f(kn_vf f, kn_vf *hfsq) {
  kn_vf s = f / (2.0f + f), z = s * s;
  kn_vf r = fma_f(z, VF(2.0 / 9), VF(2.0 / 7));
  r = fma_f(r, z, VF(2.0 / 5));
  r = fma_f(r, z, VF(2.0 / 3));
  r = r * z;
  *hfsq = 0.5f * f * f;
  return s * (*hfsq + r);
}

/* At most 1 ULP (0.8 measured). */
static inline kn_vf v_log_own_f(kn_vf x) {
#ifdef KN_VM_X512
  return x5_log_f(x);
#else
  kn_vf e, hfsq, f = log_split_f(x, &e);
  kn_vf t = log_tail_f(f, &hfsq);
  kn_vf r = fma_f(e, VF(KN_LN2HI), f - (hfsq - fma_f(e, VF(KN_LN2LO), t)));
  return log_special_f(x, r, (x > 0.0f) & (x < INFINITY), 0.0f);
#endif
}

/* hi + lo = f - hfsq + t, hi with 12 significant bits (so hi * c is exact
** for constants c of 12 bits). */
static inline kn_vf log_hilo_f(kn_vf f, kn_vf hfsq, kn_vf t, kn_vf *lo) {
  kn_vf hi = f - hfsq;
  hi = (kn_vf)((kn_vfi)hi & (int32_t)0xfffff000);
  *lo = (f - hi) - hfsq + t;
  return hi;
}

/* log2 x = e + (hi + lo) / ln 2 with 1/ln 2 split in two: at most 1 ULP. */
static inline kn_vf v_log2_own_f(kn_vf x) {
#ifdef KN_VM_X512
  return x5_log2_f(x);
#else
  kn_vf e, hfsq, lo, f = log_split_f(x, &e);
  kn_vf t = log_tail_f(f, &hfsq), hi = log_hilo_f(f, hfsq, t, &lo);
  const float ih = 0x1.714p+0f, il = 0x1.47652cp-12f; /* 1 / ln 2 */
  kn_vf vlo = (lo + hi) * il + lo * ih, vhi = hi * ih;
  kn_vf w = e + vhi;
  vlo += (e - w) + vhi;
  return log_special_f(x, vlo + w, (x > 0.0f) & (x < INFINITY), 0.0f);
#endif
}

/* log10 x = e log10(2) + (hi + lo) / ln 10, constants split in two. */
static inline kn_vf v_log10_own_f(kn_vf x) {
#ifdef KN_VM_X512
  return x5_log10_f(x);
#else
  kn_vf e, hfsq, lo, f = log_split_f(x, &e);
  kn_vf t = log_tail_f(f, &hfsq), hi = log_hilo_f(f, hfsq, t, &lo);
  const float ih = 0x1.bcap-2f, il = 0x1.7b1526p-14f;  /* 1 / ln 10 */
  const float lh = 0x1.344p-2f, ll = 0x1.3509f8p-18f; /* log10(2) */
  kn_vf r = e * ll + (lo + hi) * il + lo * ih + hi * ih + e * lh;
  return log_special_f(x, r, (x > 0.0f) & (x < INFINITY), 0.0f);
#endif
}

/* log1p x = log u + c / u with u = 1 + x rounded and c = 1 + x - u exactly
** (1 - (u - x) above 1, x - (u - 1) below). */
static inline kn_vf v_log1p_own_f(kn_vf x) {
#ifdef KN_VM_X512
  return x5_log1p_f(x);
#else
  kn_vf u = 1.0f + x;
  kn_vf c = sel_f(x > 1.0f, 1.0f - (u - x), x - (u - 1.0f)) / u;
  kn_vf e, hfsq, f = log_split_f(u, &e);
  kn_vf t = log_tail_f(f, &hfsq);
  kn_vf r = fma_f(e, VF(KN_LN2HI), f - (hfsq - (fma_f(e, VF(KN_LN2LO), c) + t)));
  return log_special_f(x, r, (x > -1.0f) & (x < INFINITY) & (x != 0.0f), -1.0f);
#endif
}

/* ---- sin, cos, tan (FMA only: the reduction needs exact products) ------------ */

#if KN_VM_HAS_FMA
/* |x| up to this reduce with three float parts of pi/2; larger lanes (and
** inf) take SLEEF's. */
#define KN_TRIG_MAX 8192.0f

/* x = q pi/2 + r, |r| <= pi/4 (about); returns r, q in *qi. */
static inline kn_vf trig_reduce_f(kn_vf x, kn_vfi *qi) {
  kn_vf q = rint_f(x * 0x1.45f306p-1f);
  kn_vf r = fma_f(q, VF(-0x1.921fb6p+0f), x);
  r = fma_f(q, VF(0x1.777a5cp-25f), r);
  r = fma_f(q, VF(0x1.ee59dap-50f), r);
  *qi = toint_f(q);
  return r;
}

/* sin r and cos r for |r| <= pi/4: Taylor terms to r^11 and r^12. */
static inline kn_vf sin_poly_f(kn_vf r, kn_vf z) {
  kn_vf p = fma_f(z, VF(-1.0 / 39916800), VF(1.0 / 362880));
  p = fma_f(p, z, VF(-1.0 / 5040));
  p = fma_f(p, z, VF(1.0 / 120));
  p = fma_f(p, z, VF(-1.0 / 6));
  return fma_f(r * z, p, r);
}
static inline kn_vf cos_poly_f(kn_vf z) {
  kn_vf p = fma_f(z, VF(1.0 / 479001600), VF(-1.0 / 3628800));
  p = fma_f(p, z, VF(1.0 / 40320));
  p = fma_f(p, z, VF(-1.0 / 720));
  p = fma_f(p, z, VF(1.0 / 24));
  p = fma_f(p, z, VF(-0.5));
  return fma_f(z, p, VF(1));
}

/* Lanes beyond KN_TRIG_MAX (and inf) from SLEEF; sin and tan keep -0. */
static inline kn_vf trig_fix_f(kn_vf x, kn_vf r, kn_vf (*slow)(kn_vf), bool odd) {
  if (odd) r = sel_f(x == 0.0f, x, r);
  kn_vfi big = (kn_vfi)((kn_vf)((kn_vfi)x & INT32_MAX) > KN_TRIG_MAX);
  return KN_VM_ANYI(big) ? sel_f(big, slow(x), r) : r;
}

#ifdef KN_VM_X512
/* sin (c = 0) and cos (c = 1) as below with masks: vptestmd picks the
** polynomial, the quadrant's bit 1 shifted to the sign flips it in one
** vpternlogd, +-0 (sin) by vfixupimmps, lanes beyond KN_TRIG_MAX (and inf)
** from slow after one test. */
static inline kn_vf x5_sincos_f(kn_vf x, kn_vf (*slow)(kn_vf), int c) {
  kn_vfi q;
  kn_vf r = trig_reduce_f(x, &q), z = r * r;
  __m512i qi = _mm512_add_epi32((__m512i)q, _mm512_set1_epi32(c));
  kn_vf v = _mm512_mask_mov_ps(sin_poly_f(r, z),
                               _mm512_test_epi32_mask(qi, _mm512_set1_epi32(1)), cos_poly_f(z));
  v = _mm512_castsi512_ps(_mm512_ternarylogic_epi32(
      _mm512_castps_si512(v), _mm512_slli_epi32(qi, 30), _mm512_set1_epi32(INT32_MIN), 0x78));
  if (!c) v = _mm512_fixupimm_ps(v, x, _mm512_set1_epi32(0x100), 0); /* class zero (2): x */
  __mmask16 big = _mm512_cmp_ps_mask(_mm512_abs_ps(x), VF(KN_TRIG_MAX), _CMP_NLE_UQ);
  return big ? _mm512_mask_mov_ps(v, big, slow(x)) : v;
}
#endif

/* sin: quadrant q picks sin or cos of r and the sign. */
static inline kn_vf v_sin_own_f(kn_vf x, kn_vf (*slow)(kn_vf)) {
#ifdef KN_VM_X512
  return x5_sincos_f(x, slow, 0);
#else
  kn_vfi q;
  kn_vf r = trig_reduce_f(x, &q), z = r * r;
  kn_vf v = sel_f((q & 1) != 0, cos_poly_f(z), sin_poly_f(r, z));
  v = (kn_vf)((kn_vfu)v ^ ((kn_vfu)(q & 2) << 30));
  return trig_fix_f(x, v, slow, true);
#endif
}

static inline kn_vf v_cos_own_f(kn_vf x, kn_vf (*slow)(kn_vf)) {
#ifdef KN_VM_X512
  return x5_sincos_f(x, slow, 1);
#else
  kn_vfi q;
  kn_vf r = trig_reduce_f(x, &q), z = r * r;
  q += 1;
  kn_vf v = sel_f((q & 1) != 0, cos_poly_f(z), sin_poly_f(r, z));
  v = (kn_vf)((kn_vfu)v ^ ((kn_vfu)(q & 2) << 30));
  return trig_fix_f(x, v, slow, false);
#endif
}

#ifdef KN_VM_X512
/* tan as v_tan_own_f below with fewer steps: r + rlo from Fast2Sum (exact
** unless r is tiny, where rlo hardly matters), rlo scaled by 1 + r^2 only,
** and -1 / t in odd quadrants by a masked vdivps (correctly rounded) instead
** of the refined reciprocal. Lanes beyond KN_TRIG_MAX are the caller's. At
** most 2 ULP (1.6 measured over every 7th float up to 8192). */
static inline kn_vf x5_tan_f(kn_vf x) {
  kn_vf q = rint_f(x * 0x1.45f306p-1f);
  kn_vf r1 = fma_f(q, VF(-0x1.921fb6p+0f), x);
  kn_vf ph = q * 0x1.777a5cp-25f, pl = fma_f(q, VF(0x1.777a5cp-25f), -ph);
  kn_vf r = r1 + ph;
  kn_vf rlo = (ph - (r - r1)) + fma_f(q, VF(0x1.ee59dap-50f), pl);
  kn_vf z = r * r;
  kn_vf p = fma_f(z, VF(0x1.1dc6d4p-8f), VF(0x1.ff54dep-14f));
  p = fma_f(p, z, VF(0x1.6238p-7f));
  p = fma_f(p, z, VF(0x1.5cda24p-6f));
  p = fma_f(p, z, VF(0x1.bad7d4p-5f));
  p = fma_f(p, z, VF(0x1.110da4p-3f));
  p = fma_f(p, z, VF(0x1.55556p-2f));
  kn_vf t = r + fma_f(r * z, p, fma_f(rlo, z, rlo));
  __mmask16 odd = _mm512_test_epi32_mask(_mm512_cvtps_epi32(q), _mm512_set1_epi32(1));
  t = _mm512_mask_div_ps(t, odd, VF(-1), t);
  return _mm512_fixupimm_ps(t, x, _mm512_set1_epi32(0x100), 0); /* class zero (2): x */
}
#endif

/* tan r = r + r^3 P(r^2) on |r| <= pi/4 (P: least-squares fit, relative
** weight, 2e-9 relative error); odd quadrants -1 / tan r. Here r = r2 +
** rlo carries the reduction's rounding error too (tan'(r) = 1 + r^2 +
** 2 r^4 / 3 + ... scales it), so the result rounds about once: at most 1.5
** ULP (1.3 measured). */
static inline kn_vf v_tan_own_f(kn_vf x, kn_vf (*slow)(kn_vf)) {
#ifdef KN_VM_X512
  kn_vf v = x5_tan_f(x);
  __mmask16 big = _mm512_cmp_ps_mask(_mm512_abs_ps(x), VF(KN_TRIG_MAX), _CMP_GT_OQ);
  return big ? _mm512_mask_mov_ps(v, big, slow(x)) : v;
#else
  kn_vf q = rint_f(x * 0x1.45f306p-1f);
  kn_vf r1 = fma_f(q, VF(-0x1.921fb6p+0f), x);
  /* r + rlo = r1 + q c2 + q c3 exactly but for the last term (TwoSum) */
  kn_vf ph = q * 0x1.777a5cp-25f, pl = fma_f(q, VF(0x1.777a5cp-25f), -ph);
  kn_vf r = r1 + ph, bb = r - r1;
  kn_vf rlo = ((r1 - (r - bb)) + (ph - bb)) + fma_f(q, VF(0x1.ee59dap-50f), pl);
  kn_vf z = r * r;
  kn_vf p = fma_f(z, VF(0x1.1dc6d4p-8f), VF(0x1.ff54dep-14f));
  p = fma_f(p, z, VF(0x1.6238p-7f));
  p = fma_f(p, z, VF(0x1.5cda24p-6f));
  p = fma_f(p, z, VF(0x1.bad7d4p-5f));
  p = fma_f(p, z, VF(0x1.110da4p-3f));
  p = fma_f(p, z, VF(0x1.55556p-2f));
  kn_vf c = rlo * fma_f(z, fma_f(z, VF(2.0f / 3), VF(1)), VF(1));
  kn_vf t = r + fma_f(r * z, p, c);
  kn_vf v = sel_f((toint_f(q) & 1) != 0, -recip_f(t), t);
  return trig_fix_f(x, v, slow, true);
#endif
}

/* ---- asin, acos, atan (FMA only, like the trigonometric ones) --------------------- */

#ifdef KN_VM_SQRTF
static inline kn_vf sqrt_f(kn_vf x) { return KN_VM_SQRTF(x); }
#else
static inline kn_vf sqrt_f(kn_vf x) {
  for (int k = 0; k < KN_VM_WF; k++) x[k] = __builtin_sqrtf(x[k]);
  return x;
}
#endif

#define KN_PIO2HI 0x1.921fb6p+0f /* pi/2 = KN_PIO2HI + KN_PIO2LO */
#define KN_PIO2LO -0x1.777a5cp-25f

/* pi/2 - h + l with h in [0, pi/2]: the difference pi/2hi - h and its exact
** rounding error (Fast2Sum) go with l into one last rounding. */
static inline kn_vf pio2_minus_f(kn_vf h, kn_vf l) {
  kn_vf d = VF(KN_PIO2HI) - h;
  return d + ((KN_PIO2LO + l) + ((VF(KN_PIO2HI) - d) - h));
}

/* The tail s z P(z) of asin s = s + s z P(z), z = s^2 <= 1/4 (least-squares
** fit, relative weight, 0.11 ULP). */
static inline kn_vf asin_tail_f(kn_vf s, kn_vf z) {
  kn_vf p = fma_f(VF(0x1.5678aep-5f), z, VF(0x1.8fd3p-6f));
  p = fma_f(p, z, VF(0x1.741936p-5f));
  p = fma_f(p, z, VF(0x1.33063cp-4f));
  p = fma_f(p, z, VF(0x1.5555bap-3f));
  return s * z * p;
}

/* asin |x| = s + w: for |x| <= 1/2, s = |x|; above, asin |x| = pi/2 - 2 asin s
** with s = sqrt((1 - |x|) / 2) (1 - |x| is exact) in two parts: s, and
** (z - s^2) / (2 s) added to the tail w (AVX-512: s from the 14-bit
** estimate, see x5_sqrt2_f; else s rounded). Returns the
** mask of lanes above 1/2. |x| > 1 makes z negative and s NaN. */
static inline kn_vfi asin_core_f(kn_vf a, kn_vf *s, kn_vf *w) {
  kn_vfi big = a > 0.5f;
  kn_vf z = sel_f(big, (1.0f - a) * 0.5f, a * a), lo;
#ifdef KN_VM_X512
  kn_vf sq = x5_sqrt2_f(z, &lo);
#else
  kn_vf sq = sqrt_f(z);
  lo = fma_f(-sq, sq, z) / (sq + sq + 0x1p-100f);
#endif
  lo = (kn_vf)((kn_vfi)lo & big);
  *s = sel_f(big, sq, a);
  *w = asin_tail_f(*s + lo, z) + lo;
  return big;
}

#ifdef KN_VM_X512
/* asin_core_f with masks and 2 asin s computed as a whole for |x| > 1/2:
** 2 asin s = S + S z P(z) with S = 2 s = sqrt(2 (1 - |x|)) = (1 - |x|) y, y
** the 14-bit estimate of 1 / sqrt z (z = (1 - |x|) / 2), and its residual
** part (2 (1 - |x|) - S^2) y / 4 in the tail. Returns the mask of lanes
** above 1/2; their asin |x| = pi/2 - (S + T), the others' S + T. */
static inline __mmask16 x5_asin_core_f(kn_vf a, kn_vf *s, kn_vf *t) {
  __mmask16 big = _mm512_cmp_ps_mask(a, VF(0.5f), _CMP_GT_OQ);
  kn_vf w = 1.0f - a, z = _mm512_mask_mul_ps(a * a, big, w, VF(0.5f));
  kn_vf y = _mm512_rsqrt14_ps(z + 0x1p-100f); /* the same for z >= 2^-76; finite at 0 */
  kn_vf sb = w * y;
  kn_vf lo = _mm512_maskz_mul_ps(big, fma_f(-sb, sb, w + w), y * 0.25f);
  *s = _mm512_mask_mov_ps(a, big, sb);
  *t = asin_tail_f(*s + lo, z) + lo;
  return big;
}

/* asin x: above 1/2, pi/2 - (S + T) by pio2_minus_f. At most 1 ULP. */
static inline kn_vf x5_asin_f(kn_vf x) {
  kn_vf s, t, a = _mm512_abs_ps(x);
  __mmask16 big = x5_asin_core_f(a, &s, &t);
  kn_vf r = _mm512_mask_mov_ps(s + t, big, pio2_minus_f(s, -t));
  return _mm512_castsi512_ps(_mm512_ternarylogic_epi32(
      _mm512_castps_si512(r), _mm512_castps_si512(x), _mm512_set1_epi32(INT32_MIN), 0xd8));
}

/* acos x: pi/2 - asin x up to 1/2, S + T above, (pi_hi - S) + (pi_lo - T)
** below -1/2. At most 1.5 ULP. */
static inline kn_vf x5_acos_f(kn_vf x) {
  kn_vf s, t, a = _mm512_abs_ps(x);
  __mmask16 big = x5_asin_core_f(a, &s, &t);
  __mmask16 neg = _mm512_mask_cmp_ps_mask(big, x, VF(0), _CMP_LT_OQ);
  kn_vf h = s + t;
  kn_vf hs = _mm512_castsi512_ps(_mm512_ternarylogic_epi32(
      _mm512_castps_si512(h), _mm512_castps_si512(x), _mm512_set1_epi32(INT32_MIN), 0xd8));
  kn_vf r = _mm512_mask_mov_ps(KN_PIO2HI - (hs - KN_PIO2LO), big, h);
  return _mm512_mask_mov_ps(r, neg, (2 * KN_PIO2HI - s) + (2 * KN_PIO2LO - t));
}
#endif

/* asin x: above 1/2, pi/2 - 2 s - 2 w. At most 1 ULP. */
static inline kn_vf v_asin_own_f(kn_vf x) {
#ifdef KN_VM_X512
  return x5_asin_f(x);
#else
  kn_vfi sgn = (kn_vfi)x & INT32_MIN;
  kn_vf s, w, a = (kn_vf)((kn_vfi)x ^ sgn);
  kn_vfi big = asin_core_f(a, &s, &w);
  kn_vf r = sel_f(big, pio2_minus_f(2.0f * s, -2.0f * w), s + w);
  return (kn_vf)((kn_vfi)r ^ sgn);
#endif
}

/* acos x: pi/2 - asin x up to 1/2, 2 asin s above, pi - 2 asin s below -1/2.
** At most 1 ULP. */
static inline kn_vf v_acos_own_f(kn_vf x) {
#ifdef KN_VM_X512
  return x5_acos_f(x);
#else
  kn_vfi sgn = (kn_vfi)x & INT32_MIN;
  kn_vf s, w, a = (kn_vf)((kn_vfi)x ^ sgn);
  kn_vfi big = asin_core_f(a, &s, &w);
  kn_vf small = VF(KN_PIO2HI) - ((kn_vf)((kn_vfi)(s + w) ^ sgn) - KN_PIO2LO);
  kn_vf neg = (VF(2 * KN_PIO2HI) - 2.0f * s) + (2 * KN_PIO2LO - 2.0f * w);
  return sel_f(big, sel_f(sgn != 0, neg, 2.0f * (s + w)), small);
#endif
}

/* atan x: t = |x|, or 1 / |x| above 1 (atan = pi/2 - atan t there; |x| is
** capped at 2^100, where atan rounds to pi/2), then t + t^3 P(t^2)
** (least-squares fit, relative weight, 0.15 ULP). At most 1.5 ULP. */
static inline kn_vf v_atan_own_f(kn_vf x) {
#ifdef KN_VM_X512
  return x5_atan_f(x);
#else
  kn_vfi sgn = (kn_vfi)x & INT32_MIN;
  kn_vf a = (kn_vf)((kn_vfi)x ^ sgn);
  kn_vfi big = a > 1.0f;
  kn_vf t = sel_f(big, recip_f(sel_f(a > 0x1p100f, VF(0x1p100f), a)), a), z = t * t;
  kn_vf p = fma_f(VF(-0x1.d4ff3cp-10f), z, VF(0x1.651adep-7f));
  p = fma_f(p, z, VF(-0x1.fe7272p-6f));
  p = fma_f(p, z, VF(0x1.daaff8p-5f));
  p = fma_f(p, z, VF(-0x1.5834fep-4f));
  p = fma_f(p, z, VF(0x1.c09dacp-4f));
  p = fma_f(p, z, VF(-0x1.242282p-3f));
  p = fma_f(p, z, VF(0x1.99922p-3f));
  p = fma_f(p, z, VF(-0x1.55554p-2f));
  kn_vf tail = t * z * p;
  kn_vf r = sel_f(big, pio2_minus_f(t, -tail), t + tail);
  return (kn_vf)((kn_vfi)r ^ sgn);
#endif
}
#endif
