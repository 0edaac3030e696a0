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

/* One statement for each of m vectors (m a constant after inlining, at most
** KN_X5_MAX): a step of every vector before the next step of any. */
#define KN_X5_MAX 8
#define KN_X5_EACH(m) _Pragma("GCC unroll 8") for (int k = 0; k < (m); k++)

/* e^r for |r| <= ln2 / 2 as 1 + r (1 + r P(r)), P of degree 4 (least-squares
** fit, relative weight; 0.07 ULP), in Horner's order: six FMAs. m vectors in
** place, interleaved step by step: one vector's six dependent FMAs (and the
** exp's twelve steps around them) would fill the scheduler with waiting
** work, so that the next vector's steps issue late; written in turns, the
** steps of eight vectors come eight instructions apart (the exp-and-sum
** 12-16% faster on an AVX-512 Xeon, four vectors 8-9%; the same bits). */
__attribute__((always_inline)) static inline void x5_exp_poly_fn(kn_vf *r, int m) {
  kn_vf p[KN_X5_MAX];
  KN_X5_EACH(m) p[k] = fma_f(VF(0x1.687c02p-10f), r[k], VF(0x1.123b9ap-7f));
  KN_X5_EACH(m) p[k] = fma_f(p[k], r[k], VF(0x1.555b58p-5f));
  KN_X5_EACH(m) p[k] = fma_f(p[k], r[k], VF(0x1.55548ep-3f));
  KN_X5_EACH(m) p[k] = fma_f(p[k], r[k], VF(0x1.fffff8p-2f));
  KN_X5_EACH(m) p[k] = fma_f(p[k], r[k], VF(1));
  KN_X5_EACH(m) r[k] = fma_f(p[k], r[k], VF(1));
}

static inline kn_vf x5_exp_poly_f(kn_vf r) {
  x5_exp_poly_fn(&r, 1);
  return r;
}

/* e^x: x clamped to [-104, 89] (vminps/vmaxps return x when it is NaN), n =
** rint(x / ln2) from one FMA, x / ln2 + 1.5 * 2^23 rounded to an integer in
** the low bits (for |x / ln2| < 2^22; n = t - 1.5 * 2^23 exactly), e^x =
** 2^n e^r with vscalefps doing the scaling, overflow to inf and the rounding
** into denormals. At most 0.91 ULP from e^x over every float (checked
** exhaustively against the double exp; 1.01 with the product x / ln2
** rounded before vrndscaleps and 1 + (r + r^2 P) before, which took 15-18%
** longer on an AVX-512 Xeon). m clamped vectors in place, interleaved as
** x5_exp_poly_fn's. */
__attribute__((always_inline)) static inline void x5_exp_in_fn(kn_vf *xc, int m) {
  kn_vf n[KN_X5_MAX];
  KN_X5_EACH(m) n[k] = fma_f(xc[k], VF(KN_LOG2E), VF(0x1.8p23f)) - VF(0x1.8p23f);
  KN_X5_EACH(m) xc[k] = exp_reduce_f(xc[k], n[k]);
  x5_exp_poly_fn(xc, m);
  KN_X5_EACH(m) xc[k] = _mm512_scalef_ps(xc[k], n[k]);
}

static inline kn_vf x5_exp_in_f(kn_vf xc) {
  x5_exp_in_fn(&xc, 1);
  return xc;
}

static inline kn_vf x5_exp_f(kn_vf x) {
  return x5_exp_in_f(_mm512_max_ps(VF(-104), _mm512_min_ps(VF(89), x)));
}

/* x5_exp_f of m vectors in place (x5_exp_le0_f of them when le0). */
__attribute__((always_inline)) static inline void x5_exp_fn(kn_vf *x, int m, bool le0) {
  KN_X5_EACH(m) x[k] = _mm512_max_ps(VF(-104), le0 ? x[k] : _mm512_min_ps(VF(89), x[k]));
  x5_exp_in_fn(x, m);
}

/* x5_exp_f of lanes <= 0 or NaN (the same bits): the lower clamp alone. */
static inline kn_vf x5_exp_le0_f(kn_vf x) { return x5_exp_in_f(_mm512_max_ps(VF(-104), x)); }

/* 2^x = 2^n (1 + f q(f)) with n = rint(x) and f = x - n exact (|f| <= 1/2),
** q(f) ~ (2^f - 1) / f a degree-5 polynomial whose first coefficient is ln 2
** rounded (least-squares fit with relative weight of the rest to it, 0.06
** ULP), vscalefps doing the scaling, overflow and the rounding into
** denormals (integers give exact powers of two). No clamps: for |x| >= 2^23
** f is 0 and the scaling alone overflows or underflows; +-inf (f = NaN) get
** +inf and +0 from vfixupimmps. At most 1 ULP. */
static inline kn_vf x5_exp2_f(kn_vf x) {
  kn_vf n = rint_f(x), f = x - n;
  kn_vf q = fma_f(VF(0x1.415fc6p-13f), f, VF(0x1.5f0934p-10f));
  q = fma_f(q, f, VF(0x1.3b2dfap-7f));
  q = fma_f(q, f, VF(0x1.c6af7ap-5f));
  q = fma_f(q, f, VF(0x1.ebfbdcp-3f));
  q = fma_f(q, f, VF(0x1.62e43p-1f));
  kn_vf r = _mm512_scalef_ps(fma_f(f, q, VF(1)), n);
  /* classes -inf and +inf (tokens 4 and 5) get +0 (8) and +inf (5) */
  return _mm512_fixupimm_ps(r, x, _mm512_set1_epi32(0x580000), 0);
}

/* e^x - 1 = 2^n expm1(r) + (2^n - 1) with n = rint(x / ln2 - 0.35 sign(x)), so
** that r is in [-0.59, 0.59] and the two terms have the same sign (for x > 0
** r >= -0.104 keeps them so): nothing cancels. expm1(r) = r + r^2 P(r), P a
** degree-5 polynomial with P(0) = 1/2 (least-squares fit, relative weight,
** 0.02 ULP), 2^n from vscalefps, x clamped to [-30, 80] (-1 below; e^x, whose
** -1 is below half an ULP, above), the sign of x copied last (-0 stays -0).
** At most 1.5 ULP. */
static inline kn_vf x5_expm1_f(kn_vf x) {
  kn_vf xc = _mm512_max_ps(VF(-30), _mm512_min_ps(VF(80), x));
  __m512i sgn = _mm512_set1_epi32(INT32_MIN);
  kn_vf sh = _mm512_castsi512_ps(_mm512_ternarylogic_epi32(
      _mm512_castps_si512(VF(0.35f)), _mm512_castps_si512(x), sgn, 0xd8));
  kn_vf n = rint_f(_mm512_fmsub_ps(xc, VF(KN_LOG2E), sh)), r = exp_reduce_f(xc, n);
  kn_vf q = fma_f(VF(0x1.a06a7ap-16f), r, VF(0x1.a3e4aap-13f));
  q = fma_f(q, r, VF(0x1.6c1a1cp-10f));
  q = fma_f(q, r, VF(0x1.110e1cp-7f));
  q = fma_f(q, r, VF(0x1.55555p-5f));
  q = fma_f(q, r, VF(0x1.555558p-3f));
  q = fma_f(q, r, VF(0x1p-1f));
  kn_vf m = fma_f(r * r, q, r), t = _mm512_scalef_ps(VF(1), n);
  kn_vf res = fma_f(t, m, t - 1.0f); /* n = 0: t = 1, exactly m */
  res = _mm512_castsi512_ps(
      _mm512_ternarylogic_epi32(_mm512_castps_si512(res), _mm512_castps_si512(x), sgn, 0xd8));
  __mmask16 big = _mm512_cmp_ps_mask(x, VF(80), _CMP_GT_OQ);
  return big ? _mm512_mask_mov_ps(res, big, x5_exp_f(x)) : res;
}

/* tanh on 30 quarter-octave pieces of |x| (x clamped to 9.5, where tanh
** rounds to 1): [2^k, 1.25 2^k), ..., [1.75 2^k, 2^(k+1)) for k = -4..3 and
** [0, 0.078125) below, each with a degree-5 polynomial in y = |x| - b, b a
** float near the piece's centre (so that y is exact, Sterbenz) whose tanh is
** within 0.005 ULP of a float, taken as c0. The piece is bits 21..25 of
** max(|x|, 2^-4), and its b and coefficients come from 32-entry tables held
** in two registers each (vpermt2ps). Coefficients: least-squares fits with
** relative weight (numpy, against mpmath's tanh; iteratively reweighted to
** the minimax error), rounded to float one at a time, the later ones refitted
** to the rounded earlier ones; the first piece has c0 = 0 and c1 = 1. Fit
** errors below 0.23 ULP; no division and no exp. */
static const float x5_tanh_tab[7][32] = {
    {/* b */
     0x1.231aap+1f, 0x1.5d0624p+1f, 0x1.a1e76cp+1f, 0x1.de8f5cp+1f, 0x1.1e76c8p+2f, 0x1.605e36p+2f,
     0x1.a21cacp+2f, 0x1.e0d4fep+2f, 0x1.15999ap+3f, 0, 0, 0,
     0, 0x1.5d999ap-4f, 0x1.a0d916p-4f, 0x1.e1fbe8p-4f, 0x1.206666p-3f, 0x1.61a5e4p-3f,
     0x1.a06e98p-3f, 0x1.dd999ap-3f, 0x1.219582p-2f, 0x1.5cd916p-2f, 0x1.a0fdf4p-2f, 0x1.dda1cap-2f,
     0x1.1deb86p-1f, 0x1.60e56p-1f, 0x1.a0d0e6p-1f, 0x1.df126ep-1f, 0x1.1dc6a8p+0f, 0x1.61ba5ep+0f,
     0x1.a1b22ep+0f, 0x1.dfd2f2p+0f},
    {/* c0 */
     0x1.f546c4p-1f, 0x1.fba278p-1f, 0x1.fe81fep-1f, 0x1.ff6bccp-1f, 0x1.ffde1p-1f, 0x1.fffbacp-1f,
     0x1.ffff72p-1f, 0x1.ffffecp-1f, 0x1.fffffep-1f, 0, 0, 0,
     0, 0x1.5cc0e8p-4f, 0x1.9f6a32p-4f, 0x1.dfc58ap-4f, 0x1.1e8236p-3f, 0x1.5e2ca4p-3f,
     0x1.9ac942p-3f, 0x1.d5205cp-3f, 0x1.1a1a7ep-2f, 0x1.4ff37p-2f, 0x1.8b600ep-2f, 0x1.bdc394p-2f,
     0x1.037d8cp-1f, 0x1.31eb84p-1f, 0x1.57fbbap-1f, 0x1.776a86p-1f, 0x1.9cd10ep-1f, 0x1.c33f54p-1f,
     0x1.da4308p-1f, 0x1.e87086p-1f},
    {/* c1 */
     0x1.538fa8p-5f, 0x1.1630fp-6f, 0x1.7d73bap-8f, 0x1.283d02p-9f, 0x1.0f74f6p-11f, 0x1.1501dap-14f,
     0x1.1c0848p-17f, 0x1.4008a8p-20f, 0x1.f5336ap-24f, 0, 0, 0,
     0x1p+0f, 0x1.fc49c6p-1f, 0x1.fabbcep-1f, 0x1.f8f9b6p-1f, 0x1.f5fac6p-1f, 0x1.f1081p-1f,
     0x1.eb66b6p-1f, 0x1.e52284p-1f, 0x1.d92434p-1f, 0x1.c8e42p-1f, 0x1.b3abcep-1f, 0x1.9ef9dp-1f,
     0x1.7c7c5cp-1f, 0x1.49367cp-1f, 0x1.18e5bep-1f, 0x1.d976cp-2f, 0x1.664e72p-2f, 0x1.c92f9ap-3f,
     0x1.22c768p-3f, 0x1.704b3ep-4f},
    {/* c2 */
     -0x1.4c70a6p-5f, -0x1.13ce76p-6f, -0x1.7c5096p-8f, -0x1.27e1f8p-9f, -0x1.0f136cp-11f, -0x1.14a402p-14f,
     -0x1.1ba9c4p-17f, -0x1.3ff6f2p-20f, -0x1.a104fcp-24f, 0, 0, 0,
     0x1.01e53ep-25f, -0x1.5a36fcp-4f, -0x1.9b1d76p-4f, -0x1.d9308ap-4f, -0x1.18e6cap-3f, -0x1.53ef9ap-3f,
     -0x1.8a41cap-3f, -0x1.bc8258p-3f, -0x1.04b19ap-2f, -0x1.2bca5cp-2f, -0x1.506ee2p-2f, -0x1.694a8cp-2f,
     -0x1.81ac6cp-2f, -0x1.8968eep-2f, -0x1.796feep-2f, -0x1.5b28f4p-2f, -0x1.20e5e8p-2f, -0x1.92f09p-3f,
     -0x1.0d58e8p-3f, -0x1.5f58c6p-4f},
    {/* c3 */
     0x1.a8813ep-6f, 0x1.699aaep-7f, 0x1.f7f74ep-9f, 0x1.89b72ap-10f, 0x1.6a044ep-12f, 0x1.70985cp-15f,
     0x1.78e69ap-18f, 0x1.a9e4e8p-21f, 0x1.3b23fp-24f, 0, 0, 0,
     -0x1.55563cp-2f, -0x1.4b9d7ap-2f, -0x1.48cb68p-2f, -0x1.42301ep-2f, -0x1.3ad088p-2f, -0x1.2e9b64p-2f,
     -0x1.201f3p-2f, -0x1.10d69cp-2f, -0x1.e73bbp-3f, -0x1.9cac2ep-3f, -0x1.4114d2p-3f, -0x1.ddd986p-4f,
     -0x1.d168c2p-5f, 0x1.f245f8p-7f, 0x1.09421cp-4f, 0x1.82ddcap-4f, 0x1.c5f024p-4f, 0x1.957ea4p-4f,
     0x1.312696p-4f, 0x1.a8d5cap-5f},
    {/* c4 */
     -0x1.86118cp-7f, -0x1.5ff69p-8f, -0x1.f77816p-10f, -0x1.8c39d8p-11f, -0x1.79e188p-13f, -0x1.82c4e8p-16f,
     -0x1.8bf064p-19f, -0x1.ba26c2p-22f, -0x1.554a6ep-24f, 0, 0, 0,
     0x1.e899e4p-14f, 0x1.83631p-7f, -0x1.76b378p-5f, 0x1.3e7232p-4f, 0x1.6dfa7ep-4f, 0x1.a7b92cp-4f,
     0x1.d9bfe6p-4f, 0x1.078b5ep-3f, 0x1.355fa2p-3f, 0x1.4daa04p-3f, 0x1.5cf9acp-3f, 0x1.57c45cp-3f,
     0x1.3bdd8ap-3f, 0x1.e7c342p-4f, 0x1.44c50ep-4f, 0x1.6696dp-5f, 0x1.4c15fap-8f, -0x1.5f2baep-6f,
     -0x1.9aedc6p-6f, -0x1.55d26p-6f},
    {/* c5 */
     0x1.049c52p-8f, 0x1.f6463ap-10f, 0x1.945112p-11f, 0x1.332c36p-12f, 0x1.1fb25cp-14f, 0x1.38b9f2p-17f,
     0x1.52d17p-20f, 0x1.6cfcf2p-23f, 0x1.1b28dep-25f, 0, 0, 0,
     0x1.0e5e62p-3f, 0x1.30cfa4p+1f, 0x1.b9f7b6p+3f, -0x1.a33c7p+2f, -0x1.cf379cp-2f, 0x1.e3547cp-1f,
     0x1.e1f02cp-3f, 0x1.1fb00cp+0f, 0x1.150d14p-4f, 0x1.b54386p-4f, 0x1.41bc1ep-9f, 0x1.9f465ap-5f,
     -0x1.75dadap-5f, -0x1.e1673ap-5f, -0x1.01dd94p-4f, -0x1.a27adcp-5f, -0x1.073666p-5f, -0x1.392a5ep-7f,
     0x1.62bf4p-10f, 0x1.2b155p-8f},
};

static inline kn_vf x5_tab32_f(__m512i i, const float *t) {
  return _mm512_permutex2var_ps(_mm512_loadu_ps(t), i, _mm512_loadu_ps(t + 16));
}

/* c1 + c2 y + ... + c5 y^4 of the pieces i of a table of rows b, c0, ..., c5
** (x5_tanh_tab's layout), in Horner's order: the caller's last step is
** its own (p y + c0, or another addend). */
static inline kn_vf x5_tab_poly_f(__m512i i, const float (*t)[32], kn_vf y) {
  kn_vf p = fma_f(x5_tab32_f(i, t[6]), y, x5_tab32_f(i, t[5]));
  p = fma_f(p, y, x5_tab32_f(i, t[4]));
  p = fma_f(p, y, x5_tab32_f(i, t[3]));
  return fma_f(p, y, x5_tab32_f(i, t[2]));
}

/* tanh x: the sign of x is copied last (NaN stays NaN, +-inf give +-1, -0
** stays -0). At most 1 ULP. */
static inline kn_vf x5_tanh_f(kn_vf x) {
  kn_vf a = _mm512_min_ps(VF(9.5f), _mm512_abs_ps(x)); /* NaN stays */
  __m512i i = _mm512_srli_epi32(_mm512_castps_si512(_mm512_max_ps(VF(0x1p-4f), a)), 21);
  kn_vf y = a - x5_tab32_f(i, x5_tanh_tab[0]);
  kn_vf p = fma_f(x5_tab_poly_f(i, x5_tanh_tab, y), y, x5_tab32_f(i, x5_tanh_tab[1]));
  return _mm512_castsi512_ps(_mm512_ternarylogic_epi32(
      _mm512_castps_si512(p), _mm512_castps_si512(x), _mm512_set1_epi32(INT32_MIN), 0xd8));
}

/* erf on 29 pieces of z = |x| (clamped to 3.96875, where erf rounds to 1),
** the same scheme as x5_tanh_f's: quarter octaves [2^k, 1.25 2^k), ...,
** [1.75 2^k, 2^(k+1)) for k = -4..0 (table entries 12..31, bits 21..25 of
** max(z, 2^-4)), eighths of [2, 4) (entries 0..7, bits 20..24: erf's
** higher derivatives there need the narrower pieces) and [0, 0.078125)
** below (entry 12, b = 0), each a degree-5 polynomial in y = z - b, b a
** float near the piece's centre whose erf is within 0.002 ULP of a float,
** taken as c0. The first piece computes z + z P(z), P odd (c2 = c4 = 0; its
** c1 is 2 / sqrt(pi) - 1), so that erf(z) ~ 1.128 z keeps the exact z
** instead of 2 / sqrt(pi) rounded (0.85 ULP lost near 2^-8 otherwise).
** Coefficients: least-squares fits with relative weight against double erf
** (numpy; iteratively reweighted towards the minimax error), rounded to float
** one at a time, the later ones refitted to the earlier rounded ones
** (scripts/fit-erf-f32.py). No exp, no division: 0.62 ULP at most over every
** float (checked exhaustively against the double erf); the exp-based kernel
** it replaced (0.96 ULP over every 7th float) took 1.5-1.7 times as long
** over 4M floats. */
static const float x5_erf_tab[7][32] = {
    {/* b */
     0x1.0fffb8p+1f, 0x1.2fff48p+1f, 0x1.4fff6p+1f, 0x1.6fff22p+1f, 0x1.900132p+1f, 0x1.b0464p+1f,
     0x1.cfd592p+1f, 0x1.ea8f96p+1f, 0, 0, 0, 0,
     0, 0x1.5ffffap-4f, 0x1.9fffp-4f, 0x1.e000d4p-4f, 0x1.200082p-3f, 0x1.5fff78p-3f,
     0x1.a00084p-3f, 0x1.e00064p-3f, 0x1.20001ep-2f, 0x1.5fff8cp-2f, 0x1.a000bcp-2f, 0x1.dfff9cp-2f,
     0x1.1fff7cp-1f, 0x1.5ffedp-1f, 0x1.a0004cp-1f, 0x1.dfff44p-1f, 0x1.2000c2p+0f, 0x1.5fff2cp+0f,
     0x1.9ffee4p+0f, 0x1.dffec8p+0f},
    {/* c0 */
     0x1.fea41ep-1f, 0x1.ff995ep-1f, 0x1.ffe514p-1f, 0x1.fff9bap-1f, 0x1.fffeb4p-1f, 0x1.ffffc4p-1f,
     0x1.fffff6p-1f, 0x1.fffffep-1f, 0, 0, 0, 0,
     0, 0x1.8c36b8p-4f, 0x1.d3cadap-4f, 0x1.0d9406p-3f, 0x1.42d88cp-3f, 0x1.894f7cp-3f,
     0x1.cf07fcp-3f, 0x1.09ef0cp-2f, 0x1.3c9ac8p-2f, 0x1.7e152p-2f, 0x1.bcd0ap-2f, 0x1.f86f5p-2f,
     0x1.25b83cp-1f, 0x1.56916ep-1f, 0x1.7fb9ecp-1f, 0x1.a154c2p-1f, 0x1.c6db4ep-1f, 0x1.e57644p-1f,
     0x1.f4f666p-1f, 0x1.fbe60ap-1f},
    {/* c1 */
     0x1.946614p-7f, 0x1.06988cp-8f, 0x1.2cf056p-10f, 0x1.305f7ep-12f, 0x1.0f8e6ap-14f, 0x1.a5bb76p-17f,
     0x1.2c38acp-19f, 0x1.fa3f9ap-22f, 0, 0, 0, 0,
     0x1.06eba8p-3f, 0x1.1ebd56p+0f, 0x1.1de69cp+0f, 0x1.1cecd8p+0f, 0x1.1b356cp+0f, 0x1.1874e4p+0f,
     0x1.153062p+0f, 0x1.116cd2p+0f, 0x1.0ae54cp+0f, 0x1.00abe4p+0f, 0x1.e9d56p-1f, 0x1.cfc448p-1f,
     0x1.a507c8p-1f, 0x1.682118p-1f, 0x1.2a8d86p-1f, 0x1.dfcb72p-2f, 0x1.45e77p-2f, 0x1.5ce8bp-3f,
     0x1.49a1eap-4f, 0x1.12d39ap-5f},
    {/* c2 */
     -0x1.adab4ep-6f, -0x1.37d168p-7f, -0x1.8af2fep-9f, -0x1.b577aap-11f, -0x1.a8361ap-13f, -0x1.63eeep-15f,
     -0x1.0fd562p-17f, -0x1.e509p-20f, 0, 0, 0, 0,
     0, -0x1.8a4356p-4f, -0x1.d0942ep-4f, -0x1.0b1e6cp-3f, -0x1.3e9c58p-3f, -0x1.81a068p-3f,
     -0x1.c26faep-3f, -0x1.0056a6p-2f, -0x1.2c4232p-2f, -0x1.60ebeap-2f, -0x1.8dfdfp-2f, -0x1.b2c7b2p-2f,
     -0x1.d9a7ep-2f, -0x1.ef2bd6p-2f, -0x1.e52656p-2f, -0x1.c1cep-2f, -0x1.6ea5c2p-2f, -0x1.dfc00cp-3f,
     -0x1.0bd39ep-3f, -0x1.01a62cp-4f},
    {/* c3 */
     0x1.0ea736p-5f, 0x1.c1f5bep-7f, 0x1.4083a8p-8f, 0x1.89e5d6p-10f, 0x1.a34a9cp-12f, 0x1.7f05dcp-14f,
     0x1.3bf2bep-16f, 0x1.2c5014p-18f, 0, 0, 0, 0,
     -0x1.8126fep-2f, -0x1.7af1bap-2f, -0x1.7718d6p-2f, -0x1.7181a6p-2f, -0x1.6a7dd2p-2f, -0x1.5fab0cp-2f,
     -0x1.53fa96p-2f, -0x1.43dc74p-2f, -0x1.2bbf26p-2f, -0x1.058aaep-2f, -0x1.b59044p-3f, -0x1.5a75fp-3f,
     -0x1.9c4064p-4f, -0x1.a42894p-7f, 0x1.fe3974p-5f, 0x1.e4bd1cp-4f, 0x1.4cb4p-3f, 0x1.43761cp-3f,
     0x1.d6691cp-4f, 0x1.1441c8p-4f},
    {/* c4 */
     -0x1.b08762p-6f, -0x1.b0a5eep-7f, -0x1.6608c2p-8f, -0x1.f3e6c8p-10f, -0x1.29712cp-11f, -0x1.2c81b4p-13f,
     -0x1.0ef866p-15f, -0x1.0da5eep-17f, 0, 0, 0, 0,
     0, 0x1.a09678p-6f, 0x1.b27afcp-6f, 0x1.fb4a94p-5f, 0x1.2ec562p-4f, 0x1.8466fap-4f,
     0x1.c8b318p-4f, 0x1.07906cp-3f, 0x1.1d69f8p-3f, 0x1.45320ep-3f, 0x1.61042ep-3f, 0x1.7362eap-3f,
     0x1.75539ap-3f, 0x1.52e314p-3f, 0x1.0f8ad8p-3f, 0x1.7447f6p-4f, 0x1.cfc234p-6f, -0x1.ebcbe8p-6f,
     -0x1.94c04ap-5f, -0x1.59787ap-5f},
    {/* c5 */
     0x1.97b8acp-7f, 0x1.11ee8p-7f, 0x1.15c7d6p-8f, 0x1.c54722p-10f, 0x1.32b3e8p-11f, 0x1.5ded94p-13f,
     0x1.542afcp-15f, 0x1.384f2p-17f, 0, 0, 0, 0,
     0x1.cce542p-4f, 0x1.b90b3cp+4f, 0x1.4efce8p+4f, 0x1.17ceb2p-1f, -0x1.cb282ep-2f, -0x1.ae2c98p-2f,
     0x1.7078a4p+1f, -0x1.cea794p+0f, 0x1.ba7dc4p-3f, 0x1.a6ef98p-3f, 0x1.7f9dcep-5f, -0x1.60aba6p-5f,
     -0x1.761642p-7f, -0x1.5bcfd4p-5f, -0x1.0d985cp-4f, -0x1.155316p-4f, -0x1.f4a12cp-5f, -0x1.f69bcap-6f,
     -0x1.34767ap-9f, 0x1.72b206p-7f},
};

/* erf x: the sign of x is copied last (NaN stays NaN, +-inf give +-1, -0
** stays -0). */
static inline kn_vf x5_erf_f(kn_vf x) {
  kn_vf z = _mm512_min_ps(VF(0x1.fcp+1f), _mm512_abs_ps(x)); /* NaN stays */
  __m512i zi = _mm512_castps_si512(_mm512_max_ps(VF(0x1p-4f), z));
  /* shift by 20 from z >= 2 on (bit 30 set), else 21 */
  __m512i sh = _mm512_sub_epi32(_mm512_set1_epi32(21), _mm512_srli_epi32(zi, 30));
  __m512i i = _mm512_srlv_epi32(zi, sh);
  kn_vf y = z - x5_tab32_f(i, x5_erf_tab[0]);
  __mmask16 first = _mm512_cmp_ps_mask(z, VF(0.078125f), _CMP_LT_OQ);
  kn_vf c0 = _mm512_mask_mov_ps(x5_tab32_f(i, x5_erf_tab[1]), first, y);
  kn_vf p = fma_f(x5_tab_poly_f(i, x5_erf_tab, y), y, c0);
  return _mm512_castsi512_ps(_mm512_ternarylogic_epi32(
      _mm512_castps_si512(p), _mm512_castps_si512(x), _mm512_set1_epi32(INT32_MIN), 0xd8));
}

/* e^|x| / 2 as h = 2^(n-1) e^r (no clamps but |x| <= 89.5: h overflows
** where cosh does, from 89.42), with 1 / h from the refined reciprocal of h
** capped at 2^100 (the Newton step needs it finite). */
static inline kn_vf x5_exph_f(kn_vf a, kn_vf *q) {
  kn_vf n = rint_f(a * KN_LOG2E);
  kn_vf h = _mm512_scalef_ps(x5_exp_poly_f(exp_reduce_f(a, n)), n - 1.0f);
  *q = x5_recip_f(_mm512_min_ps(h, VF(0x1p100f)));
  return h;
}

/* sinh x = sign(x) sinh(n ln2 + r) = sign(x) (sinh(n ln2) cosh r + cosh(n ln2)
** sinh r), one formula for every |x| (clamped to 89.5, where sinh overflows;
** NaN stays): n = rint(|x| / ln2 - 0.35) keeps r in [-0.104, 0.59], so the
** two terms never cancel much (at most 1.2x); cosh r = 1 + r^2 P(r^2) and
** sinh r = r + r^3 Q(r^2) (least-squares fits with relative weight, 0.08 and
** 0.02 ULP), and sinh(n ln2), cosh(n ln2) = 2^n (c, c + 2^(-2n)) with c = 1/2 -
** 2^(-2n) / 2, the 2^n applied last by vscalefps (overflow and all). The
** exact c is added last, to r^2 P c + sinh r (c + 2^(-2n)). For n = 0 the
** result is sinh r itself (denormals exact). At most 1.5 ULP. */
static inline kn_vf x5_sinh_f(kn_vf x) {
  kn_vf a = _mm512_min_ps(VF(89.5f), _mm512_abs_ps(x));
  kn_vf n = rint_f(fma_f(a, VF(KN_LOG2E), VF(-0.35f))), r = exp_reduce_f(a, n), z = r * r;
  kn_vf ch = fma_f(fma_f(VF(0x1.706abp-10f), z, VF(0x1.554e6ep-5f)), z, VF(0x1.000006p-1f));
  kn_vf sh = fma_f(fma_f(VF(0x1.a3f84p-13f), z, VF(0x1.110df4p-7f)), z, VF(0x1.555558p-3f));
  sh = fma_f(r * z, sh, r);
  kn_vf u = _mm512_scalef_ps(VF(0.5f), n * -2.0f), c = 0.5f - u; /* exact */
  kn_vf v = _mm512_scalef_ps(fma_f(ch * z, c, sh * (0.5f + u)) + c, n);
  return _mm512_castsi512_ps(_mm512_ternarylogic_epi32(
      _mm512_castps_si512(v), _mm512_castps_si512(x), _mm512_set1_epi32(INT32_MIN), 0xd8));
}

/* cosh x = h + 1 / (4 h), h = e^|x| / 2 (|x| clamped to 89.5; NaN stays).
** At most 1.5 ULP. */
static inline kn_vf x5_cosh_f(kn_vf x) {
  kn_vf q, h = x5_exph_f(_mm512_min_ps(VF(89.5f), _mm512_abs_ps(x)), &q);
  return fma_f(VF(0.25f), q, h);
}

/* ---- atan ------------------------------------------------------------------------- */

/* atan on t = |x|, or t = 1 / |x| above 1 (|x| capped at 2^100, where atan
** rounds to pi/2; the refined reciprocal), in 16 pieces of t: [0, 0.078125)
** and quarter octaves [2^k, 1.25 2^k), ..., [1.75 2^k, 2^(k+1)) for k = -4..-1;
** the pieces for |x| <= 1 give atan t, the ones for |x| > 1 pi/2 - atan t
** directly (no subtraction at run time), each a degree-5 polynomial in y = t -
** b, b a float near the piece's centre whose value is within 0.03 ULP of a float
** (taken as c0; y exact by Sterbenz but in the first piece). The piece is bits
** 21..24 of t clamped to [2^-4, 1) and bit 4 says |x| > 1: the b and
** coefficients come from 32-entry tables held in two registers each
** (vpermt2ps). Coefficients fitted as tanh's (relative weight, mpmath's atan,
** rounded one at a time; the first direct piece has c0 = 0, c1 = 1); fit errors
** below 0.01 ULP. */
static const float x5_atan_tab[7][32] = {
    {/* b */
     0x1.1d26eap-3f, 0x1.60418ap-3f, 0x1.a13b64p-3f, 0x1.ddc6a8p-3f, 0x1.211688p-2f, 0x1.5e0832p-2f,
     0x1.a06666p-2f, 0x1.de7efap-2f, 0x1.1d6c8cp-1f, 0x1.6170a4p-1f, 0x1.9d1eb8p-1f, 0x1.e19db2p-1f,
     0, 0x1.61ae14p-4f, 0x1.a249bap-4f, 0x1.dddf3cp-4f, 0x1.1ed916p-3f, 0x1.5eac08p-3f,
     0x1.a072bp-3f, 0x1.de72bp-3f, 0x1.22c49cp-2f, 0x1.5ff3b6p-2f, 0x1.9ef9dcp-2f, 0x1.e06a7ep-2f,
     0x1.215c28p-1f, 0x1.5d8106p-1f, 0x1.a1cedap-1f, 0x1.e0d4fep-1f, 0x1.566666p-5f, 0x1.5d4bc6p-4f,
     0x1.9d8938p-4f, 0x1.df8d5p-4f},
    {/* c0 */
     0x1.6eb522p+0f, 0x1.6684bep+0f, 0x1.5eac88p+0f, 0x1.577384p+0f, 0x1.4baf5cp+0f, 0x1.3dcdb4p+0f,
     0x1.2f4088p+0f, 0x1.2237d8p+0f, 0x1.0feec4p+0f, 0x1.eee66ap-1f, 0x1.c8a426p-1f, 0x1.a1c68ap-1f,
     0, 0x1.60ce0ep-4f, 0x1.a0d7ccp-4f, 0x1.dbb8acp-4f, 0x1.1cfe78p-3f, 0x1.5b4dd2p-3f,
     0x1.9ad8b2p-3f, 0x1.d604aep-3f, 0x1.1b4f8ep-2f, 0x1.52ffdcp-2f, 0x1.8a43bep-2f, 0x1.c13298p-2f,
     0x1.076016p-1f, 0x1.32ac2p-1f, 0x1.5e6eeap-1f, 0x1.820e5p-1f, 0x1.876e1ap+0f, 0x1.7c5876p+0f,
     0x1.785d7ap+0f, 0x1.7449a6p+0f},
    {/* c1 */
     -0x1.f64356p-1f, -0x1.f149cap-1f, -0x1.eb98b6p-1f, -0x1.e592c2p-1f, -0x1.da34a4p-1f, -0x1.ca6f04p-1f,
     -0x1.b759bap-1f, -0x1.a43d68p-1f, -0x1.869c14p-1f, -0x1.5ac236p-1f, -0x1.361b3p-1f, -0x1.0fa456p-1f,
     0x1p+0f, 0x1.fc35f8p-1f, 0x1.fab732p-1f, 0x1.f91fe2p-1f, 0x1.f6262ap-1f, 0x1.f16a9ep-1f,
     0x1.ebab8cp-1f, 0x1.e580b2p-1f, 0x1.d9cc48p-1f, 0x1.c9e81ap-1f, 0x1.b7c6ccp-1f, 0x1.a3a298p-1f,
     0x1.840e02p-1f, 0x1.5d4152p-1f, 0x1.33571p-1f, 0x1.100eb2p-1f, -0x1.ff1b6cp-1f, -0x1.fc4db2p-1f,
     -0x1.fad574p-1f, -0x1.f913a8p-1f},
    {/* c2 */
     0x1.126a92p-3f, 0x1.4c4dcap-3f, 0x1.809f2ep-3f, 0x1.adb88ap-3f, 0x1.eff7c6p-3f, 0x1.189ec2p-2f,
     0x1.329df2p-2f, 0x1.425a96p-2f, 0x1.4c4p-2f, 0x1.443c42p-2f, 0x1.2f19e2p-2f, 0x1.0f226cp-2f,
     0x1.53430ep-24f, -0x1.5c7478p-4f, -0x1.99b49ep-4f, -0x1.d11d8ap-4f, -0x1.13ea18p-3f, -0x1.4afbf2p-3f,
     -0x1.80086cp-3f, -0x1.ae3522p-3f, -0x1.f1fe26p-3f, -0x1.19831ap-2f, -0x1.3228bep-2f, -0x1.42b752p-2f,
     -0x1.4c70eep-2f, -0x1.454214p-2f, -0x1.2d18a6p-2f, -0x1.0f8598p-2f, 0x1.55346p-5f, 0x1.584cdep-4f,
     0x1.954814p-4f, 0x1.d272d8p-4f},
    {/* c3 */
     0x1.2fa79cp-2f, 0x1.1d754ap-2f, 0x1.087c36p-2f, 0x1.e7c364p-3f, 0x1.9c7814p-3f, 0x1.3e6b7cp-3f,
     0x1.b2a5c6p-4f, 0x1.04175p-4f, 0x1.48c74ap-7f, -0x1.6c6e2ep-5f, -0x1.212c16p-4f, -0x1.5157dcp-4f,
     -0x1.5557b4p-2f, -0x1.458116p-2f, -0x1.409fa8p-2f, -0x1.3aa294p-2f, -0x1.2ec246p-2f, -0x1.1d5a3ep-2f,
     -0x1.093846p-2f, -0x1.e65c2ap-3f, -0x1.9a41dap-3f, -0x1.3b455cp-3f, -0x1.b68cf8p-4f, -0x1.fec33cp-5f,
     -0x1.8d75c4p-8f, 0x1.5900d6p-5f, 0x1.2694cap-4f, 0x1.5123a2p-4f, 0x1.51d074p-2f, 0x1.460356p-2f,
     0x1.422722p-2f, 0x1.3bdd8p-2f},
    {/* c4 */
     -0x1.209aa2p-3f, -0x1.325ebcp-3f, -0x1.0583fp-3f, -0x1.4b872cp-3f, -0x1.874046p-3f, -0x1.8a1908p-3f,
     -0x1.7d4a92p-3f, -0x1.534fbp-3f, -0x1.09d4e4p-3f, -0x1.37d1bap-4f, -0x1.37a762p-5f, -0x1.1cb9aep-7f,
     0x1.4175dp-12f, 0x1.326f0ep-5f, 0x1.06b7dcp-3f, 0x1.2774bap-4f, 0x1.f883bcp-4f, 0x1.41ce58p-3f,
     0x1.52dap-3f, 0x1.6d3ee6p-3f, 0x1.87c012p-3f, 0x1.8c8118p-3f, 0x1.798934p-3f, 0x1.5127ap-3f,
     0x1.04046ap-3f, 0x1.43cfap-4f, 0x1.23055p-5f, 0x1.25d538p-7f, -0x1.5172b2p-5f, -0x1.b54ed2p-3f,
     -0x1.30bf6p-2f, 0x1.903234p-1f},
    {/* c5 */
     -0x1.6f0846p-2f, -0x1.9dccc6p+0f, 0x1.b3377ap-3f, -0x1.ed7c1ap-1f, 0x1.9d8d3ap-5f, -0x1.b02214p-5f,
     0x1.fb9494p-5f, 0x1.095bdcp-3f, 0x1.4811e8p-4f, 0x1.348f16p-4f, 0x1.c9aee2p-5f, 0x1.0da608p-5f,
     0x1.927de4p-3f, -0x1.522ee6p+3f, 0x1.0855bp+1f, 0x1.ccd13p+1f, -0x1.60b01ap-1f, -0x1.b51bb4p-3f,
     0x1.76c05ap+0f, -0x1.0b542ep-1f, 0x1.3c744cp-4f, -0x1.058bd2p-6f, -0x1.f8067cp-4f, -0x1.051f86p-4f,
     -0x1.57fd94p-4f, -0x1.3ef83cp-4f, -0x1.a584dap-5f, -0x1.1311a2p-5f, -0x1.b444e2p-3f, 0x1.58acb2p+3f,
     -0x1.c4cc8cp+2f, -0x1.66280cp+4f},
};

/* atan x with x's sign copied last (NaN stays NaN, +-inf give +-pi/2, -0
** stays -0). At most 1.5 ULP. */
static inline kn_vf x5_atan_f(kn_vf x) {
  kn_vf a = _mm512_abs_ps(x);
  __mmask16 big = _mm512_cmp_ps_mask(a, VF(1), _CMP_GT_OQ);
  kn_vf t = _mm512_mask_mov_ps(a, big, x5_recip_f(_mm512_min_ps(a, VF(0x1p100f))));
  kn_vf ti = _mm512_max_ps(_mm512_min_ps(t, VF(0x1.fffffep-1f)), VF(0x1p-4f));
  __m512i i = _mm512_srli_epi32(_mm512_castps_si512(ti), 21);
  i = _mm512_mask_xor_epi32(i, big, i, _mm512_set1_epi32(16));
  kn_vf y = t - x5_tab32_f(i, x5_atan_tab[0]);
  kn_vf p = fma_f(x5_tab_poly_f(i, x5_atan_tab, y), y, x5_tab32_f(i, x5_atan_tab[1]));
  return _mm512_castsi512_ps(_mm512_ternarylogic_epi32(
      _mm512_castps_si512(p), _mm512_castps_si512(x), _mm512_set1_epi32(INT32_MIN), 0xd8));
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
