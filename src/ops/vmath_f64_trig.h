/*
** ops/vmath_f64_trig.h: kiln's own float64 sin, cos, tan, asin, acos and atan
** on AVX-512F (kn_vd an 8-lane __m512d), included by vmath_isa.h after
** vmath_f64.h (fma_d, VD, KN_SHIFT52); other ISAs keep SLEEF's u10
** functions. Defines KN_VM_D512_TRIG.
**
** sin, cos, tan: x = n pi/2 + r, n = rint(2x/pi) by the 1.5 * 2^52 shifter
** (whose low mantissa bits are n, the quadrant), r from pi/2 in three parts
** with FMA: x - n P1 and n P2 are exact, x - n P1 - n P2 is kept as r + rlo
** (Fast2Sum) and n P3 goes into rlo. |x| above KN_TRIG_MAX_D (and inf) take
** SLEEF's; below, the reduction is exact enough (pi/2 - P1 - P2 - P3 is
** below 2^-140) for r near 0 too. sin r = r + r^3 P(r^2) and cos r = 1 +
** r^2 Q(r^2) on |r| <= pi/4 (Chebyshev fits of degree 5 and 6, P of degree
** 6 for tan); the quadrant picks one and the sign; rlo enters through
** sin'(r) and cos'(r); tan is their quotient. asin, acos and atan: see each one.
** No fast-math; special values exact (tests/test_vmath.c checks the
** bounds, with the largest errors measured in docs/KERNELS.md).
*/
#if defined(KN_VM_D512)

#define KN_VM_D512_TRIG 1

/* |x| above this (and inf) take the caller's (SLEEF's) lanes. */
#define KN_TRIG_MAX_D 0x1p20

/* pi/2 = KN_PIO2_1 + KN_PIO2_2 + KN_PIO2_3 (to 2^-140); KN_PIO2_2 has 33
** bits, so that n KN_PIO2_2 is exact for n < 2^20 */
#define KN_PIO2_1 0x1.921fb54442d18p+0
#define KN_PIO2_2 0x1.1a626331p-54
#define KN_PIO2_3 0x1.1701b839a2520p-88

/* x = n pi/2 + r + rlo (|r| <= pi/4 about): returns r, the shifted n (its
** low mantissa bits are n) in *t, rlo in *rlo. x - n P1 is exact (FMA), n
** P2 too; r = (x - n P1) - n P2 rounded and its error by Fast2Sum (exact:
** x - n P1 is a multiple of 2^-52, n P2's ulp is far smaller), then n P3. */
static inline kn_vd x5d_trig_reduce(kn_vd x, kn_vd *t, kn_vd *rlo) {
  *t = fma_d(x, VD(0x1.45f306dc9c883p-1), VD(KN_SHIFT52));
  kn_vd n = *t - KN_SHIFT52;
  kn_vd r1 = fma_d(n, VD(-KN_PIO2_1), x), p2 = n * KN_PIO2_2;
  kn_vd r = r1 - p2;
  *rlo = fma_d(n, VD(-KN_PIO2_3), (r1 - r) - p2);
  return r;
}

/* sin(r + rlo) - r for |r| <= pi/4: r^3 P(z) + rlo (1 - z/2), z = r^2 (P
** of degree 6, 1e-20 relative; tan's). */
static inline kn_vd x5d_sin_tail(kn_vd r, kn_vd rlo, kn_vd z) {
  kn_vd p = fma_d(z, VD(-0x1.ab13654fd392ap-41), VD(0x1.61217781a8ccdp-33));
  p = fma_d(p, z, VD(-0x1.ae6454093c147p-26));
  p = fma_d(p, z, VD(0x1.71de3a545b148p-19));
  p = fma_d(p, z, VD(-0x1.a01a01a01990ap-13));
  p = fma_d(p, z, VD(0x1.1111111111110p-7));
  p = fma_d(p, z, VD(-0x1.5555555555555p-3));
  return fma_d(r * z, p, fma_d(rlo, z * -0.5, rlo));
}

/* cos(r + rlo) = w + *lo for |r| <= pi/4: w = 1 - z/2 rounded, *lo its
** exact rounding error plus z^2 R(z) (Chebyshev fit of degree 5, 2e-18
** relative), - r rlo and z's rounding error (zlo, from an FMA) / 2. */
static inline kn_vd x5d_cos_parts(kn_vd r, kn_vd rlo, kn_vd z, kn_vd *lo) {
  kn_vd q = fma_d(z, VD(-0x1.907999e6897e2p-37), VD(0x1.1eeb634b132cdp-29));
  q = fma_d(q, z, VD(-0x1.27e4fa1272706p-22));
  q = fma_d(q, z, VD(0x1.a01a019f4a826p-16));
  q = fma_d(q, z, VD(-0x1.6c16c16c16955p-10));
  q = fma_d(q, z, VD(0x1.5555555555555p-5));
  kn_vd zlo = fma_d(r, r, -z), hz = 0.5 * z, w = 1.0 - hz;
  *lo = ((1.0 - w) - hz) + fma_d(z * z, q, fma_d(zlo, VD(-0.5), -r * rlo));
  return w;
}

/* sin(r + rlo), shorter: P of degree 5 (2e-17 relative, under 0.1 ULP). */
static inline kn_vd x5d_sin_poly(kn_vd r, kn_vd rlo, kn_vd z) {
  kn_vd p = fma_d(z, VD(0x1.5e0711724951fp-33), VD(-0x1.ae5fffc91a3e2p-26));
  p = fma_d(p, z, VD(0x1.71de378bbd711p-19));
  p = fma_d(p, z, VD(-0x1.a01a019e7b518p-13));
  p = fma_d(p, z, VD(0x1.1111111110b8fp-7));
  p = fma_d(p, z, VD(-0x1.5555555555555p-3));
  return r + fma_d(r * z, p, fma_d(rlo, z * -0.5, rlo));
}

/* cos(r + rlo) for |r| <= pi/4, shorter: 1 + (z Q(z) - r rlo - zlo / 2)
** (Q a Chebyshev fit of degree 6, 3e-19 relative). */
static inline kn_vd x5d_cos_poly(kn_vd r, kn_vd rlo, kn_vd z) {
  kn_vd q = fma_d(z, VD(-0x1.8ff51fb0679f6p-37), VD(0x1.1eea7724feaf4p-29));
  q = fma_d(q, z, VD(-0x1.27e4f8da8357ap-22));
  q = fma_d(q, z, VD(0x1.a01a019dd5820p-16));
  q = fma_d(q, z, VD(-0x1.6c16c16c15d19p-10));
  q = fma_d(q, z, VD(0x1.5555555555551p-5));
  q = fma_d(q, z, VD(-0.5));
  kn_vd zlo = fma_d(r, r, -z); /* z's rounding error */
  return 1.0 + fma_d(z, q, fma_d(zlo, VD(-0.5), -r * rlo));
}

/* Quadrant n (low bits of t): n odd takes c, else s; bit 1 of n flips the
** sign. */
static inline kn_vd x5d_quadrant(kn_vd t, kn_vd s, kn_vd c) {
  __m512i ti = _mm512_castpd_si512(t);
  kn_vd v = _mm512_mask_mov_pd(s, _mm512_test_epi64_mask(ti, _mm512_set1_epi64(1)), c);
  __m512i sg = _mm512_and_si512(_mm512_slli_epi64(ti, 62), _mm512_set1_epi64(INT64_MIN));
  return _mm512_castsi512_pd(_mm512_xor_si512(_mm512_castpd_si512(v), sg));
}

/* Lanes with |x| > KN_TRIG_MAX_D (and inf) from slow (SLEEF's). */
static inline kn_vd x5d_trig_big(kn_vd x, kn_vd v, kn_vd (*slow)(kn_vd)) {
  __mmask8 big = _mm512_cmp_pd_mask(_mm512_abs_pd(x), VD(KN_TRIG_MAX_D), _CMP_GT_OQ);
  return big ? _mm512_mask_mov_pd(v, big, slow(x)) : v;
}

/* sin x: sin or cos of r by the quadrant; +-0 stay (vfixupimmpd: x's
** lanes where x is zero). At most 1 ULP. */
static inline kn_vd v_sin_own_d(kn_vd x, kn_vd (*slow)(kn_vd)) {
  kn_vd t, rlo, r = x5d_trig_reduce(x, &t, &rlo), z = r * r, c = x5d_cos_poly(r, rlo, z);
  kn_vd v = x5d_quadrant(t, x5d_sin_poly(r, rlo, z), c);
  v = _mm512_fixupimm_pd(v, x, _mm512_set1_epi64(0x100), 0);
  return x5d_trig_big(x, v, slow);
}

/* cos x: the quadrant n + 1 of sin's. At most 1 ULP. */
static inline kn_vd v_cos_own_d(kn_vd x, kn_vd (*slow)(kn_vd)) {
  kn_vd t, rlo, r = x5d_trig_reduce(x, &t, &rlo), z = r * r, c = x5d_cos_poly(r, rlo, z);
  kn_vd v = x5d_quadrant(t + 1.0, x5d_sin_poly(r, rlo, z), c);
  return x5d_trig_big(x, v, slow);
}

/* tan x = sin r / cos r, or -cos r / sin r for odd n, both kept in two parts
** (r + sin's tail, cos's two parts): the quotient from vdivpd is corrected by
** its residual, computed from the parts. +-0 stay. At most 1 ULP. */
static inline kn_vd v_tan_own_d(kn_vd x, kn_vd (*slow)(kn_vd)) {
  kn_vd t, rlo, r = x5d_trig_reduce(x, &t, &rlo), z = r * r;
  kn_vd cl, sl = x5d_sin_tail(r, rlo, z), ch = x5d_cos_parts(r, rlo, z, &cl);
  __mmask8 odd = _mm512_test_epi64_mask(_mm512_castpd_si512(t), _mm512_set1_epi64(1));
  kn_vd nh = _mm512_mask_sub_pd(r, odd, VD(0), ch), nl = _mm512_mask_sub_pd(sl, odd, VD(0), cl);
  kn_vd dh = _mm512_mask_mov_pd(ch, odd, r), dl = _mm512_mask_mov_pd(cl, odd, sl);
  kn_vd d = dh + dl, q = _mm512_div_pd(nh + nl, d);
  kn_vd e = fma_d(-q, dl, fma_d(-q, dh, nh) + nl);
  q = fma_d(e, _mm512_rcp14_pd(d), q);
  q = _mm512_fixupimm_pd(q, x, _mm512_set1_epi64(0x100), 0); /* +-0 */
  return x5d_trig_big(x, q, slow);
}

/* ---- asin, acos, atan ------------------------------------------------------ */

/* pi/2 in two parts (pi: twice each) */
#define KN_PIO2H_D 0x1.921fb54442d18p+0
#define KN_PIO2L_D 0x1.1a62633145c07p-54

/* (hi + lo) - (h + l) for |h| <= hi or hi = 0: hi - h and its exact
** rounding error (Fast2Sum) go with lo - l into one last rounding. */
static inline kn_vd x5d_minus(kn_vd hi, kn_vd lo, kn_vd h, kn_vd l) {
  kn_vd d = hi - h;
  return d + (((hi - d) - h) + (lo - l));
}

/* asin s = s + s z P(z), z = s^2 <= 1/4 (Chebyshev fit of degree 12,
** 4e-18 relative): returns s z P(z) + lo. */
static inline kn_vd x5d_asin_tail(kn_vd s, kn_vd z, kn_vd lo) {
  kn_vd p = fma_d(z, VD(0x1.d72b2bc8155f8p-6), VD(-0x1.e6aaa8a0a04ccp-7));
  p = fma_d(p, z, VD(0x1.1d189408314eep-6));
  p = fma_d(p, z, VD(0x1.65a9c4dfcf8b2p-8));
  p = fma_d(p, z, VD(0x1.52420b04b37bep-7));
  p = fma_d(p, z, VD(0x1.782651caa6547p-7));
  p = fma_d(p, z, VD(0x1.c9cf07674736ap-7));
  p = fma_d(p, z, VD(0x1.1c4d35cf95421p-6));
  p = fma_d(p, z, VD(0x1.6e8bb1c8209a2p-6));
  p = fma_d(p, z, VD(0x1.f1c71c1db0623p-6));
  p = fma_d(p, z, VD(0x1.6db6db6e31f13p-5));
  p = fma_d(p, z, VD(0x1.3333333332ecap-4));
  p = fma_d(p, z, VD(0x1.5555555555556p-3));
  return fma_d(s * z, p, lo);
}

/* asin a = s + w for a = |x| <= 1/2 (s = a); above, asin a = pi/2 - 2 (s +
** w) with s + lo = sqrt(z), z = (1 - a) / 2 exact, s correctly rounded and
** lo = (z - s^2) / (2 s) from the 2^-14 reciprocal estimate. Returns the
** mask of lanes above 1/2. a > 1 makes s NaN. */
static inline __mmask8 x5d_asin_core(kn_vd a, kn_vd *s, kn_vd *w) {
  __mmask8 big = _mm512_cmp_pd_mask(a, VD(0.5), _CMP_GT_OQ);
  kn_vd z = _mm512_mask_mov_pd(a * a, big, fma_d(a, VD(-0.5), VD(0.5)));
  kn_vd sq = _mm512_sqrt_pd(z);
  kn_vd rc = _mm512_rcp14_pd(fma_d(sq, VD(2), VD(0x1p-600))); /* s = 0 at |x| = 1 */
  kn_vd lo = _mm512_maskz_mul_pd(big, fma_d(-sq, sq, z), rc);
  *s = _mm512_mask_mov_pd(a, big, sq);
  *w = x5d_asin_tail(*s, z, lo);
  return big;
}

static inline kn_vd x5d_sign(kn_vd v, kn_vd x) { /* v with x's sign flipped in */
  return _mm512_castsi512_pd(_mm512_ternarylogic_epi64(_mm512_castpd_si512(v),
      _mm512_castpd_si512(x), _mm512_set1_epi64(INT64_MIN), 0x78));
}

/* asin x: s + w up to 1/2, pi/2 - 2 s - 2 w above; x's sign. At most 1 ULP. */
static inline kn_vd v_asin_own_d(kn_vd x) {
  kn_vd s, w;
  __mmask8 big = x5d_asin_core(_mm512_abs_pd(x), &s, &w);
  kn_vd r = _mm512_mask_mov_pd(s + w, big, x5d_minus(VD(KN_PIO2H_D), VD(KN_PIO2L_D), s + s, w + w));
  return x5d_sign(r, x);
}

/* acos x = H - (h + l): pi/2 - asin x up to 1/2 (H = pi/2, h + l = +-(s +
** w)), 2 asin s above (H = 0, h + l = -2 (s + w)), pi - 2 asin s below -1/2
** (H = pi): h = s m and l = w m with m = 1 or -2 and x's sign. At most 1
** ULP. */
static inline kn_vd v_acos_own_d(kn_vd x) {
  kn_vd s, w;
  __mmask8 big = x5d_asin_core(_mm512_abs_pd(x), &s, &w);
  __mmask8 neg = _mm512_cmp_pd_mask(x, VD(0), _CMP_LT_OQ);
  kn_vd m = _mm512_mask_mov_pd(VD(1), big, VD(-2));
  kn_vd hh = _mm512_mask_mov_pd(VD(KN_PIO2H_D), big, _mm512_maskz_mov_pd(neg, VD(2 * KN_PIO2H_D)));
  kn_vd hl = _mm512_mask_mov_pd(VD(KN_PIO2L_D), big, _mm512_maskz_mov_pd(neg, VD(2 * KN_PIO2L_D)));
  return x5d_minus(hh, hl, x5d_sign(s * m, x), x5d_sign(w * m, x));
}

/* atan(j/8) for k = j < 8, pi/2 - atan(j/8) for k = 15 - j >= 8, in two
** parts hi + lo (the lo of k >= 8 negated) */
static const double x5d_atan_hi[16] = {
    0, 0x1.fd5ba9aac2f6ep-4, 0x1.f5b75f92c80ddp-3, 0x1.6f61941e4def1p-2,
    0x1.dac670561bb4fp-2, 0x1.1e00babdefeb4p-1, 0x1.4978fa3269ee1p-1, 0x1.700a7c5784634p-1,
    0x1.b434ee31013fdp-1, 0x1.dac670561bb4fp-1, 0x1.031f57e54adbep+0, 0x1.1b6e192ebbe44p+0,
    0x1.3647503caf55cp+0, 0x1.5368c951e9cfdp+0, 0x1.7249faa996a21p+0, 0x1.921fb54442d18p+0};
static const double x5d_atan_lo[16] = {
    0, -0x1.cd37686760c17p-59, 0x1.8ab6e3cf7afbdp-57, -0x1.c63aae6f6e918p-56,
    0x1.a2b7f222f65e2p-56, -0x1.928df287a668fp-58, 0x1.2419a87f2a458p-56, -0x1.8c34d25aadef6p-56,
    0x1.0520d0701d877p-55, -0x1.a2b7f222f65e2p-55, -0x1.338b4259c0270p-54, -0x1.b1b466a88828ep-54,
    -0x1.17e21d9a42c9ap-55, 0x1.96f47948a99f1p-54, -0x1.a8cc1e7480c68p-54, -0x1.1a62633145c07p-54};

/* atan x, a = |x| (capped at 2^60, where atan rounds to pi/2): t = a, or 1/a
** above 1 (atan a = pi/2 - atan(1/a)), then c = j/8 nearest t (j <= 7) and
** atan t = atan c + atan u, u = (t - c) / (1 + t c), |u| <= 0.07: for a > 1,
** u = (1 - c a) / (a + c), subtracted. The numerator is exact, the
** denominator kept in two parts, u + ul by the quotient's residual; atan u =
** u + u^3 P(u^2) (Chebyshev fit of degree 4, 2e-18 relative); the table
** holds atan c and pi/2 - atan c in two parts. u + tail is rounded once
** before the table's hi part is added (|u| < atan c or c = 0): at most 1
** ULP (0.76 measured). */
static inline kn_vd v_atan_own_d(kn_vd x) {
  kn_vd a = _mm512_min_pd(VD(0x1p60), _mm512_abs_pd(x)); /* NaN stays */
  __mmask8 big = _mm512_cmp_pd_mask(a, VD(1), _CMP_GT_OQ);
  kn_vd v = _mm512_mask_mov_pd(a, big, _mm512_rcp14_pd(a));
  kn_vd c = _mm512_min_pd(_mm512_roundscale_pd(v, 0x30), VD(0.875)); /* j / 8 */
  __m512i k = _mm512_castpd_si512(fma_d(c, VD(8), VD(KN_SHIFT52)));
  k = _mm512_mask_xor_epi64(k, big, k, _mm512_set1_epi64(15));
  kn_vd q = _mm512_mask_mov_pd(VD(1), big, a), r = _mm512_mask_mov_pd(a, big, VD(1));
  kn_vd num = fma_d(-c, q, r), den = fma_d(c, r, q), dlo = fma_d(c, r, q - den);
  kn_vd u = _mm512_div_pd(num, den);
  kn_vd ul = fma_d(-u, dlo, fma_d(-u, den, num)) * _mm512_rcp14_pd(den), z = u * u;
  kn_vd p = fma_d(z, VD(-0x1.7087c9edf7927p-4), VD(0x1.c7183f10b6a21p-4));
  p = fma_d(p, z, VD(-0x1.2492483412ac0p-3));
  p = fma_d(p, z, VD(0x1.9999999973e82p-3));
  p = fma_d(p, z, VD(-0x1.555555555554ep-2));
  kn_vd tail = fma_d(u * z, p, ul);
  const double *hi = x5d_atan_hi, *lo = x5d_atan_lo;
  kn_vd th = _mm512_permutex2var_pd(_mm512_loadu_pd(hi), k, _mm512_loadu_pd(hi + 8));
  kn_vd tl = _mm512_permutex2var_pd(_mm512_loadu_pd(lo), k, _mm512_loadu_pd(lo + 8));
  kn_vd w = u + (tail + tl); /* tl is negated for k >= 8 */
  return x5d_sign(th + _mm512_mask_sub_pd(w, big, VD(0), w), x);
}

#endif
