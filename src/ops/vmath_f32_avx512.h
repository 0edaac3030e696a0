/*
** ops/vmath_f32_avx512.h: AVX-512F building blocks of kiln's float32 kernels,
** included by vmath_f32.h (after its generic helpers) when kn_vf is a
** 16-lane __m512 compiled with AVX-512F. Defines KN_VM_X512; vmath_f32.h's
** exp, the logs, the reciprocal and rsqrt then take these versions, which
** use instructions the generic vector code cannot reach:
**   vscalefps  2^n scaling with overflow and underflow handled (exp),
**   vgetexpps/vgetmantps  exponent and mantissa, denormals included (logs),
**   vpermps    a 16-entry table held in one register (logs),
**   vrcp14ps/vrsqrt14ps  14-bit estimates refined by one Newton step.
** Same accuracy contract as the generic kernels (tests/test_vmath.c checks
** both); no fast-math.
*/
#include <immintrin.h>

#define KN_VM_X512 1

/* 1 / d within 0.6 ULP: the 2^-14 estimate and one Newton step (the error
** squares to 2^-28, then one rounding). For finite nonzero d whose
** reciprocal is normal; other lanes give NaN or 0 (callers select). */
static inline kn_vf x5_recip_f(kn_vf d) {
  kn_vf y = _mm512_rcp14_ps(d);
  return fma_f(y, fma_f(-d, y, VF(1)), y);
}

/* 1 / sqrt(x): the 2^-14 estimate and one Newton step y (1 + (1 - x y^2) / 2);
** at most 1.2 ULP. Lanes where the step is NaN (0, inf, negative, NaN) keep
** the estimate, which is exact there (inf, 0, NaN). */
static inline kn_vf x5_rsqrt_f(kn_vf x) {
  kn_vf y = _mm512_rsqrt14_ps(x);
  kn_vf e = fma_f(-(x * y), y, VF(1));
  kn_vf r = fma_f(y * 0.5f, e, y);
  return _mm512_mask_mov_ps(r, _mm512_cmp_ps_mask(e, e, _CMP_UNORD_Q), y);
}

/* sqrt z = s + *lo within 2^-27 (s itself within 2^-14) for z >= 0: s = z y
** with the 2^-14 estimate y of 1 / sqrt z, lo = (z - s^2) y / 2 (the residual
** exact by FMA) for z = 0 or z >= 2^-76; 0 gives 0 and 0, negative z NaN. Cheaper than vsqrtps plus
** a residual. */
static inline kn_vf x5_sqrt2_f(kn_vf z, kn_vf *lo) {
  kn_vf y = _mm512_rsqrt14_ps(z + 0x1p-100f); /* the same for z >= 2^-76; finite at 0 */
  kn_vf s = z * y;
  *lo = fma_f(-s, s, z) * (y * 0.5f);
  return s;
}

/* ---- exp ----------------------------------------------------------------------- */

/* e^r for |r| <= ln2 / 2 as 1 + (r + r^2 P(r)) (least-squares fit, relative
** weight; 0.07 ULP). */
static inline kn_vf x5_exp_poly_f(kn_vf r) {
  kn_vf p = fma_f(VF(0x1.687c02p-10f), r, VF(0x1.123b9ap-7f));
  p = fma_f(p, r, VF(0x1.555b58p-5f));
  p = fma_f(p, r, VF(0x1.55548ep-3f));
  p = fma_f(p, r, VF(0x1.fffff8p-2f));
  return 1.0f + fma_f(r * r, p, r);
}

/* e^x: x clamped to [-104, 89] (vminps/vmaxps return x when it is NaN), n =
** rint(x / ln2), e^x = 2^n e^r with vscalefps doing the scaling, overflow to
** inf and the rounding into denormals. At most 1 ULP (0.55 measured). */
static inline kn_vf x5_exp_f(kn_vf x) {
  kn_vf xc = _mm512_max_ps(VF(-104), _mm512_min_ps(VF(89), x));
  kn_vf n = rint_f(xc * KN_LOG2E);
  return _mm512_scalef_ps(x5_exp_poly_f(exp_reduce_f(xc, n)), n);
}

/* 2^x as vmath_f32.h's generic exp2 (n = rint(x), r = (x - n) ln 2), with
** x clamped to [-151, 129] and vscalefps scaling, rounding into denormals
** once. At most 1.1 ULP (1.0 measured). */
static inline kn_vf x5_exp2_f(kn_vf x) {
  kn_vf xc = _mm512_max_ps(VF(-151), _mm512_min_ps(VF(129), x));
  kn_vf n = rint_f(xc), f = xc - n;
  kn_vf r = fma_f(f, VF(0x1.62e43p-1f), f * -0x1.05c61p-29f);
  return _mm512_scalef_ps(x5_exp_poly_f(r), n);
}

/* e^x - 1 as vmath_f32.h's generic expm1 (n = rint(x / ln2 - 0.35) for x > 0,
** so that 2^n expm1(r) + (2^n - 1) never cancels much), with a shorter
** polynomial for expm1(r), r in [-0.35, 0.59] (least-squares fit, relative
** weight, 0.05 ULP), 2^n from vscalefps and the clamps from vminps/vmaxps.
** At most 1.5 ULP. */
static inline kn_vf x5_expm1_f(kn_vf x) {
  kn_vf xc = _mm512_max_ps(VF(-30), _mm512_min_ps(VF(80), x));
  kn_vf sh = _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(xc, VF(0), _CMP_GT_OQ), VF(0.35f));
  kn_vf n = rint_f(xc * KN_LOG2E - sh), r = exp_reduce_f(xc, n);
  kn_vf q = fma_f(VF(0x1.cd5a56p-13f), r, VF(0x1.6cb47ap-10f));
  q = fma_f(q, r, VF(0x1.10eef2p-7f));
  q = fma_f(q, r, VF(0x1.55556cp-5f));
  q = fma_f(q, r, VF(0x1.55556ep-3f));
  q = fma_f(q, r, VF(0x1p-1f));
  kn_vf m = fma_f(r * r, q, r), t = _mm512_scalef_ps(VF(1), n);
  kn_vf res = fma_f(t, m, t - 1.0f); /* n = 0: t = 1, exactly m */
  res = _mm512_mask_mov_ps(res, _mm512_cmp_ps_mask(x, VF(0), _CMP_EQ_OQ), x); /* -0 */
  __mmask16 big = _mm512_cmp_ps_mask(x, VF(80), _CMP_GT_OQ);
  return big ? _mm512_mask_mov_ps(res, big, x5_exp_f(x)) : res;
}

/* e^x without x5_exp_f's clamps (tanh, erf, sinh, cosh): the same for finite
** |x| < 2^22 (far outside [-104, 89] r is not exact, but the scaling still
** gives 0 or inf); +-inf give NaN. */
static inline kn_vf x5_exp_mid_f(kn_vf x) {
  kn_vf n = rint_f(x * KN_LOG2E);
  return _mm512_scalef_ps(x5_exp_poly_f(exp_reduce_f(x, n)), n);
}

/* tanh as vmath_isa.h's v_tanh_poly_f (the same polynomial below 0.625, 1 -
** 2 / (e + 1) with e = e^(2 min(|x|, 10)) above), with vminps for the clamp,
** the refined reciprocal and mask moves for the selection. */
static inline kn_vf x5_tanh_f(kn_vf x, kn_vf small) {
  kn_vf a = _mm512_abs_ps(x), ac = _mm512_min_ps(VF(10), a); /* NaN stays */
  kn_vf big = fma_f(VF(-2), x5_recip_f(x5_exp_mid_f(ac + ac) + 1.0f), VF(1));
  kn_vf r = _mm512_mask_mov_ps(big, _mm512_cmp_ps_mask(a, VF(0.625f), _CMP_LT_OQ), small);
  return (kn_vf)((kn_vfi)r | ((kn_vfi)x & INT32_MIN)); /* small has x's sign but for -0 */
}

/* sinh x = sign(x) (e / 2 - 1 / (2 e)), e = e^|x|, for |x| >= 1 (no clamps:
** |x| > 88, inf and NaN lanes are the caller's), below 1 |x| + |x|^3 P(x^2)
** (least-squares fit, relative weight, 0.1 ULP). At most 1.5 ULP. */
static inline kn_vf x5_sinh_f(kn_vf x) {
  kn_vf a = _mm512_abs_ps(x), e = x5_exp_mid_f(a), z = a * a;
  kn_vf r = fma_f(VF(0.5), e, -0.5f * x5_recip_f(e));
  kn_vf p = fma_f(VF(0x1.7a01c8p-19f), z, VF(0x1.9fff3p-13f));
  p = fma_f(p, z, VF(0x1.111134p-7f));
  p = fma_f(p, z, VF(0x1.555556p-3f));
  r = _mm512_mask_mov_ps(r, _mm512_cmp_ps_mask(a, VF(1), _CMP_LT_OQ), fma_f(a * z, p, a));
  return (kn_vf)((kn_vfi)r | ((kn_vfi)x & INT32_MIN));
}

/* ---- logarithms ------------------------------------------------------------------- */

/* x = 2^e m with m in [0.75, 1.5) (vgetmantps; negative x, -inf and NaN give
** NaN; +-0 give m = +-1 and e = -inf, so the logs come out -inf). Bits 19..22
** of m pick one of 16 intervals (entries 0..7: [1 + j/16, 1 + (j+1)/16),
** entries 8..15: [0.75 + j/32, 0.75 + (j+1)/32)), each with a float invc near
** 1 / its centre and logc = -log_b(invc) in float. Returns r = m invc - 1
** (|r| <= 1/16; one rounding), with e and logc. The two entries next to 1 have
** invc = 1 and logc = 0, so near x = 1 the result is the polynomial of the exact
** x - 1; the other invc were searched so that logc is within 1/128 ULP of
** -log_b(invc) (the table's own rounding costs nothing). */
static inline kn_vf x5_log_reduce_f(kn_vf x, const float *invc, const float *logc, kn_vf *e,
                                    kn_vf *lc) {
  kn_vf m = _mm512_getmant_ps(x, _MM_MANT_NORM_p75_1p5, _MM_MANT_SIGN_nan);
  kn_vf ex = _mm512_getexp_ps(x);
  *e = _mm512_mask_add_ps(ex, _mm512_cmp_ps_mask(m, VF(1), _CMP_LT_OQ), ex, VF(1));
  __m512i i = _mm512_srli_epi32(_mm512_castps_si512(m), 19);
  *lc = _mm512_permutexvar_ps(i, _mm512_loadu_ps(logc));
  return fma_f(m, _mm512_permutexvar_ps(i, _mm512_loadu_ps(invc)), VF(-1));
}

static const float x5_log_invc[16] = {
    0x1p+0f,        0x1.d4178cp-1f, 0x1.bacf8cp-1f, 0x1.a41fcp-1f,  0x1.8fa0f8p-1f, 0x1.7d09f4p-1f,
    0x1.6c196p-1f,  0x1.5c9498p-1f, 0x1.4e5dfep+0f, 0x1.4144f8p+0f, 0x1.352456p+0f, 0x1.29e418p+0f,
    0x1.1f7328p+0f, 0x1.15b54ep+0f, 0x1.0c94e2p+0f, 0x1p+0f};
static const float x5_log_logc[16] = {
    0,               0x1.6f3f2p-4f,   0x1.295548p-3f,  0x1.950ae2p-3f,  0x1.fb789p-3f,
    0x1.2e836cp-2f,  0x1.5d147ep-2f,  0x1.89aebap-2f,  -0x1.1178c2p-2f, -0x1.d11b2cp-3f,
    -0x1.824cdp-3f,  -0x1.365ffp-3f,  -0x1.da9b7p-4f,  -0x1.4d6354p-4f, -0x1.89078ep-5f, 0};
static const float x5_log2_invc[16] = {
    0x1p+0f,        0x1.d41d6ep-1f, 0x1.bacfbp-1f,  0x1.a41a5cp-1f, 0x1.8f9cc2p-1f, 0x1.7d0616p-1f,
    0x1.6c168p-1f,  0x1.5c983ap-1f, 0x1.4e5dfap+0f, 0x1.4141cap+0f, 0x1.3521dcp+0f, 0x1.29e3fep+0f,
    0x1.1f70acp+0f, 0x1.15b1fep+0f, 0x1.0c9518p+0f, 0x1p+0f};
static const float x5_log2_logc[16] = {
    0,               0x1.08c472p-3f,  0x1.acf516p-3f,  0x1.24401ep-2f,  0x1.6e1facp-2f,
    0x1.b47e3cp-2f,  0x1.f7a96p-2f,   0x1.1bf3acp-1f,  -0x1.8a8938p-2f, -0x1.4f723p-2f,
    -0x1.169c4p-2f,  -0x1.bfc5aep-3f, -0x1.5641c8p-3f, -0x1.e0b3aep-4f, -0x1.1b876cp-4f, 0};
static const float x5_log10_invc[16] = {
    0x1p+0f,        0x1.d41ba2p-1f, 0x1.bacf6ap-1f, 0x1.a41a82p-1f, 0x1.8f9b7cp-1f, 0x1.7d0602p-1f,
    0x1.6c16fcp-1f, 0x1.5c98a8p-1f, 0x1.4e5d5ep+0f, 0x1.414158p+0f, 0x1.3521f6p+0f, 0x1.29e3f2p+0f,
    0x1.1f704cp+0f, 0x1.15b21ap+0f, 0x1.0c972cp+0f, 0x1p+0f};
static const float x5_log10_logc[16] = {
    0,               0x1.3edd72p-5f,  0x1.02432ap-4f,  0x1.5fe6f4p-4f,  0x1.b8e108p-4f,
    0x1.06cbb6p-3f,  0x1.2f3adap-3f,  0x1.55e866p-3f,  -0x1.db0e58p-4f, -0x1.93e85cp-4f,
    -0x1.4f7b8ap-4f, -0x1.0d95aap-4f, -0x1.9c19aep-5f, -0x1.216ab6p-5f, -0x1.559e34p-6f, 0};

/* log1p(r) - r for r in [-1/32, 1/16], as r^2 P(r) with P times k (k = 1,
** 1 / ln 2, 1 / ln 10; least-squares fits, relative weight, 0.08 ULP). */
static inline kn_vf x5_log_poly_f(kn_vf r, const float c[4]) {
  kn_vf p = fma_f(VF(c[3]), r, VF(c[2]));
  p = fma_f(p, r, VF(c[1]));
  return fma_f(p, r, VF(c[0]));
}
static const float x5_log_p[4] = {-0x1p-1f, 0x1.555854p-2f, -0x1.000b7ep-2f, 0x1.816188p-3f};
static const float x5_log2_p[4] = {-0x1.715476p-1f, 0x1.ec74fp-2f, -0x1.71650ap-2f,
                                   0x1.15fe5ep-2f};
static const float x5_log10_p[4] = {-0x1.bcb7b2p-3f, 0x1.287d1p-3f, -0x1.bccba8p-4f,
                                    0x1.4ebcd8p-4f};

/* log x = e ln2hi + (logc + (e ln2lo + s)) with s = r + r^2 P(r) and e ln2hi
** exact, so that the largest term is added in the last, single rounding
** (1.0 ULP measured). */
static inline kn_vf x5_log_sum_f(kn_vf e, kn_vf lc, kn_vf s) {
  return fma_f(e, VF(KN_LN2HI), lc + fma_f(e, VF(KN_LN2LO), s));
}

static inline kn_vf x5_log_f(kn_vf x) {
  kn_vf e, lc, r = x5_log_reduce_f(x, x5_log_invc, x5_log_logc, &e, &lc);
  return x5_log_sum_f(e, lc, fma_f(r * r, x5_log_poly_f(r, x5_log_p), r));
}

/* r / ln b + r^2 P(r) / ln b with 1 / ln b = kh + kl, so that the leading
** term rounds once. */
static inline kn_vf x5_log_scaled_f(kn_vf r, const float p[4], float kh, float kl) {
  kn_vf u = fma_f(r, x5_log_poly_f(r, p), VF(kl));
  return fma_f(r, VF(kh), r * u);
}

/* log2 x = (e + logc) + r / ln 2 + ... At most 1 ULP. */
static inline kn_vf x5_log2_f(kn_vf x) {
  kn_vf e, lc, r = x5_log_reduce_f(x, x5_log2_invc, x5_log2_logc, &e, &lc);
  return (e + lc) + x5_log_scaled_f(r, x5_log2_p, 0x1.715476p+0f, 0x1.4ae0cp-26f);
}

/* log10 x = e lg2h + (logc + (e lg2l + r / ln 10 + ...)), log10(2) = lg2h +
** lg2l with e lg2h exact (lg2l > 0, so e = -inf stays -inf). At most 1 ULP. */
static inline kn_vf x5_log10_f(kn_vf x) {
  kn_vf e, lc, r = x5_log_reduce_f(x, x5_log10_invc, x5_log10_logc, &e, &lc);
  kn_vf s = x5_log_scaled_f(r, x5_log10_p, 0x1.bcb7b2p-2f, -0x1.5b235ep-27f);
  return fma_f(e, VF(0x1.344p-2f), lc + fma_f(e, VF(0x1.3509f8p-18f), s));
}

/* log1p x = log u + c / u with u = 1 + x rounded and c = 1 + x - u exactly;
** c / u (below half an ULP of the result) from the refined reciprocal, added
** to the polynomial's part, so r (exact near 0) is added in one rounding. Lanes not in (-1, inf) \ {0} take their special
** value. At most 1 ULP. */
static inline kn_vf x5_log1p_f(kn_vf x) {
  kn_vf u = 1.0f + x;
  kn_vf c = sel_f(x > 1.0f, 1.0f - (u - x), x - (u - 1.0f));
  kn_vf q = c * x5_recip_f(u);
  kn_vf e, lc, r = x5_log_reduce_f(u, x5_log_invc, x5_log_logc, &e, &lc);
  kn_vf s = r + fma_f(r * r, x5_log_poly_f(r, x5_log_p), q);
  kn_vf res = x5_log_sum_f(e, lc, s);
  return log_special_f(x, res, (x > -1.0f) & (x < INFINITY) & (x != 0.0f), -1.0f);
}
