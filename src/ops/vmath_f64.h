/*
** ops/vmath_f64.h: kiln's own float64 vector kernels for exp, exp2, expm1, sinh,
** cosh and tanh on AVX-512F (kn_vd an 8-lane __m512d), included by vmath_isa.h after
** vmath_f32.h; other ISAs keep SLEEF's u10 functions. Defines KN_VM_D512.
**
** exp takes a 16-entry table of 2^(j/16) in two doubles (hi + lo) held in
** four registers and looked up with vpermt2pd: x = (16 k + j) ln2 / 16 + r
** with |r| <= ln2 / 32, e^x = 2^k (T_j + (T_j p(r) + lo_j)) with p(r) = e^r -
** 1 by Taylor terms to r^7 (remainder 1e-18 relative), the last addition the
** only rounding that matters; vscalefpd scales by 2^k (k = floor(n / 16),
** which is what vscalefpd takes of n / 16), overflowing to inf and rounding
** into denormals. The rounding to n is the 1.5 * 2^52 shifter, whose low
** mantissa bits are n mod 16, the table index. No fast-math; special values
** exact. sinh takes e^|x| and e^-|x| from one reduction (x5d_exp_pm), cosh
** 1 / (2 e^|x|) by a division. tests/test_vmath.c checks the
** bounds. Also |x| for every ISA.
*/
typedef int64_t kn_vdi __attribute__((vector_size(sizeof(kn_vd))));

/* |x| lane by lane (every ISA; big_lanes_f/d in vmath_isa.h). */
static inline kn_vd abs_d(kn_vd x) { return (kn_vd)((kn_vdi)x & INT64_MAX); }
static inline kn_vf abs_f(kn_vf x) { return (kn_vf)((kn_vfi)x & INT32_MAX); }

#if defined(KN_VM_X512) && KN_VM_WD == 8

#define KN_VM_D512 1

#define VD(c) ((kn_vd){0} + (double)(c))

static inline kn_vd fma_d(kn_vd a, kn_vd b, kn_vd c) { return _mm512_fmadd_pd(a, b, c); }

/* 2^(j/16) = x5d_t_hi[j] + x5d_t_lo[j] */
static const double x5d_t_hi[16] = {
    0x1p+0,          0x1.0b5586cf9890fp+0, 0x1.172b83c7d517bp+0, 0x1.2387a6e756238p+0,
    0x1.306fe0a31b715p+0, 0x1.3dea64c123422p+0, 0x1.4bfdad5362a27p+0, 0x1.5ab07dd485429p+0,
    0x1.6a09e667f3bcdp+0, 0x1.7a11473eb0187p+0, 0x1.8ace5422aa0dbp+0, 0x1.9c49182a3f09p+0,
    0x1.ae89f995ad3adp+0, 0x1.c199bdd85529cp+0, 0x1.d5818dcfba487p+0, 0x1.ea4afa2a490dap+0};
static const double x5d_t_lo[16] = {
    0,          0x1.8a8p-54, -0x1.19p-55, 0x1.9bp-54,  0x1.6fp-55,  0x1.aep-55,
    0x1.d4p-56, 0x1.63p-54,  -0x1.bep-54, -0x1.42p-55, 0x1.6e8p-54, 0x1.c8p-56,
    0x1.7ap-54, 0x1.11p-55,  0x1.2fp-55,  -0x1.eap-54};

/* ln 2 / 16 = KN_L2H16 + KN_L2L16, KN_L2H16 with 32 bits (n KN_L2H16 exact) */
#define KN_L2H16 0x1.62e42feep-5
#define KN_L2L16 0x1.a39ef35793c76p-37
#define KN_SHIFT52 0x1.8p52

/* x = n ln2 / 16 + r: returns p = e^r - 1 (Taylor terms to r^7), with n in
** *n and the table entries 2^(j/16) = *th + *tl (j = n mod 16). */
static inline kn_vd x5d_exp_reduce(kn_vd x, kn_vd *n, kn_vd *th, kn_vd *tl) {
  kn_vd t = fma_d(x, VD(0x1.71547652b82fep+4), VD(KN_SHIFT52));
  *n = t - KN_SHIFT52;
  kn_vd r = fma_d(*n, VD(-KN_L2L16), fma_d(*n, VD(-KN_L2H16), x));
  kn_vd q = fma_d(r, VD(1.0 / 5040), VD(1.0 / 720));
  q = fma_d(q, r, VD(1.0 / 120));
  q = fma_d(q, r, VD(1.0 / 24));
  q = fma_d(q, r, VD(1.0 / 6));
  q = fma_d(q, r, VD(0.5));
  __m512i j = _mm512_castpd_si512(t);
  *th = _mm512_permutex2var_pd(_mm512_loadu_pd(x5d_t_hi), j, _mm512_loadu_pd(x5d_t_hi + 8));
  *tl = _mm512_permutex2var_pd(_mm512_loadu_pd(x5d_t_lo), j, _mm512_loadu_pd(x5d_t_lo + 8));
  return fma_d(r * r, q, r);
}

/* e^x for finite |x| <= 745.2 (no clamps; see the banner). At most 1 ULP. */
static inline kn_vd x5d_exp_core(kn_vd x) {
  kn_vd n, th, tl, p = x5d_exp_reduce(x, &n, &th, &tl);
  return _mm512_scalef_pd(th + fma_d(th, p, tl), n * 0.0625);
}

/* 2^x = 2^k 2^(j/16) e^r with n = 16 k + j = rint(16 x), r = (x - n/16) ln 2
** (x - n/16 exact, |r| <= ln2 / 32, its rounding below 0.02 ULP), the table and
** scaling of exp; x clamped to [-1080, 1025] (0 and inf beyond; NaN stays).
** Integers give exact powers of two. At most 1 ULP. */
static inline kn_vd v_exp2_own_d(kn_vd x) {
  kn_vd xc = _mm512_max_pd(VD(-1080), _mm512_min_pd(VD(1025), x));
  kn_vd t = fma_d(xc, VD(16), VD(KN_SHIFT52)), n = t - KN_SHIFT52;
  kn_vd f = fma_d(n, VD(-0.0625), xc);
  kn_vd r = f * 0x1.62e42fefa39efp-1;
  kn_vd q = fma_d(r, VD(1.0 / 5040), VD(1.0 / 720));
  q = fma_d(q, r, VD(1.0 / 120));
  q = fma_d(q, r, VD(1.0 / 24));
  q = fma_d(q, r, VD(1.0 / 6));
  q = fma_d(q, r, VD(0.5));
  kn_vd p = fma_d(r * r, q, r);
  __m512i j = _mm512_castpd_si512(t);
  kn_vd th = _mm512_permutex2var_pd(_mm512_loadu_pd(x5d_t_hi), j, _mm512_loadu_pd(x5d_t_hi + 8));
  kn_vd tl = _mm512_permutex2var_pd(_mm512_loadu_pd(x5d_t_lo), j, _mm512_loadu_pd(x5d_t_lo + 8));
  return _mm512_scalef_pd(th + fma_d(th, p, tl), n * 0.0625);
}

/* e^x - 1 for |x| < 1/8: x + x^2 (1/2 + x/6 + ... + x^10/12!) (remainder
** 3e-21 relative); -0 stays. */
static inline kn_vd x5d_expm1_small(kn_vd x) {
  kn_vd q = fma_d(x, VD(1.0 / 479001600), VD(1.0 / 39916800));
  q = fma_d(q, x, VD(1.0 / 3628800));
  q = fma_d(q, x, VD(1.0 / 362880));
  q = fma_d(q, x, VD(1.0 / 40320));
  q = fma_d(q, x, VD(1.0 / 5040));
  q = fma_d(q, x, VD(1.0 / 720));
  q = fma_d(q, x, VD(1.0 / 120));
  q = fma_d(q, x, VD(1.0 / 24));
  q = fma_d(q, x, VD(1.0 / 6));
  q = fma_d(q, x, VD(0.5));
  kn_vd r = fma_d(x * x, q, x);
  return _mm512_mask_mov_pd(r, _mm512_cmp_pd_mask(x, VD(0), _CMP_EQ_OQ), x); /* -0 */
}

/* e^x - 1 = (s - 1) + 2^k (T_j p + lo_j) with s = 2^k T_j: for |x| >= 1/8
** the second term is at most a sixth of the result, and s - 1 is exact for
** s in [1/2, 2], else rounded once more. Lanes below 1/8 take the Taylor
** polynomial (computed only when a vector has such lanes), lanes above 709
** e^x. x clamped to [-40, 709.79] (-1 below, inf above ln(DBL_MAX)); NaN
** stays. At most 1.5 ULP (1.03 measured). */
static inline kn_vd v_expm1_own_d(kn_vd x) {
  kn_vd xc = _mm512_max_pd(VD(-40), _mm512_min_pd(VD(709.79), x));
  kn_vd n, th, tl, p = x5d_exp_reduce(xc, &n, &th, &tl), k = n * 0.0625;
  kn_vd res = (_mm512_scalef_pd(th, k) - 1.0) + _mm512_scalef_pd(fma_d(th, p, tl), k);
  __mmask8 small = _mm512_cmp_pd_mask(_mm512_abs_pd(x), VD(0.125), _CMP_LT_OQ);
  if (small) res = _mm512_mask_mov_pd(res, small, x5d_expm1_small(x));
  __mmask8 big = _mm512_cmp_pd_mask(x, VD(709), _CMP_GT_OQ);
  return big ? _mm512_mask_mov_pd(res, big, x5d_exp_core(xc)) : res;
}

/* tanh x = sign(x) u / (u + 2) with u = expm1(2 |x|) (no cancellation: u
** >= 0), |x| clamped to 20, where tanh rounds to 1; NaN and -0 stay. u + 2
** is kept in two parts (Fast2Sum) and the quotient corrected by its residual,
** so that u's error is about the only one. At most 2 ULP (1.49 measured). */
static inline kn_vd v_tanh_own_d(kn_vd x) {
  kn_vd ac = _mm512_min_pd(VD(20), _mm512_abs_pd(x)); /* NaN stays */
  kn_vd u = v_expm1_own_d(ac + ac);
  kn_vd dh = u + 2.0, dl = (2.0 - dh) + u; /* u <= 2 or dl is below dh's ulp */
  kn_vd q = _mm512_div_pd(u, dh);
  kn_vd e = fma_d(-q, dl, fma_d(-q, dh, u));
  q = fma_d(e, _mm512_rcp14_pd(dh), q);
  return (kn_vd)((kn_vdi)q | ((kn_vdi)x & INT64_MIN));
}

/* e^x: x clamped to [-746, 710] (0 and inf beyond; vminpd/vmaxpd keep NaN). */
static inline kn_vd v_exp_own_d(kn_vd x) {
  return x5d_exp_core(_mm512_max_pd(VD(-746), _mm512_min_pd(VD(710), x)));
}

/* e^a / 2 and e^-a / 2 for a = |x| from one reduction a = n ln2 / 16 + r:
** e^+-a / 2 = 2^(+-k - 1) T(+-j) (1 + E(r) +- O(r)), E and O the even and
** odd parts of e^r - 1 (Taylor terms to r^7), -n = 16 k' + j' (the index j'
** is the negated shifter bits, the scaling floor(-n / 16)). Returns S =
** 2^(k-1) T_hi(j); *s2 is 2^(k'-1) T_hi(j'), *lo1 and *lo2 the table lo
** parts scaled the same, *e E, *rh r rounded and *o O(r) - *rh (with r's
** rounding error, from Fast2Sum). */
static inline kn_vd x5d_exp_pm(kn_vd x, kn_vd *s2, kn_vd *lo1, kn_vd *lo2, kn_vd *e, kn_vd *rh,
                              kn_vd *o) {
  kn_vd a = _mm512_abs_pd(x);
  kn_vd t = fma_d(a, VD(0x1.71547652b82fep+4), VD(KN_SHIFT52)), n = t - KN_SHIFT52;
  kn_vd r1 = fma_d(n, VD(-KN_L2H16), a), nl = n * -KN_L2L16; /* r1 exact */
  kn_vd r = r1 + nl, z = r * r;
  kn_vd po = fma_d(fma_d(z, VD(1.0 / 5040), VD(1.0 / 120)), z, VD(1.0 / 6));
  *rh = r;
  *o = fma_d(r * z, po, (r1 - r) + nl); /* r's rounding error by Fast2Sum */
  *e = fma_d(fma_d(z, VD(1.0 / 720), VD(1.0 / 24)), z, VD(0.5)) * z;
  __m512i j = _mm512_castpd_si512(t), j2 = _mm512_sub_epi64(_mm512_setzero_si512(), j);
  kn_vd h0 = _mm512_loadu_pd(x5d_t_hi), h1 = _mm512_loadu_pd(x5d_t_hi + 8);
  kn_vd l0 = _mm512_loadu_pd(x5d_t_lo), l1 = _mm512_loadu_pd(x5d_t_lo + 8);
  kn_vd k1 = fma_d(n, VD(0.0625), VD(-1)), k2 = fma_d(n, VD(-0.0625), VD(-1));
  *s2 = _mm512_scalef_pd(_mm512_permutex2var_pd(h0, j2, h1), k2);
  *lo1 = _mm512_scalef_pd(_mm512_permutex2var_pd(l0, j, l1), k1);
  *lo2 = _mm512_scalef_pd(_mm512_permutex2var_pd(l0, j2, l1), k2);
  return _mm512_scalef_pd(_mm512_permutex2var_pd(h0, j, h1), k1);
}

/* cosh x = E / 4 + 1 / E with E = 2 e^|x| (the exp's reduction and table,
** scaled by 2^(k+1); e^r - 1 = r + r^2 Q(r), Q a Chebyshev fit of degree 4,
** 3e-17 absolute) and 1 / E by one vdivpd (fewer operations than the
** 2^-14 estimate and two Newton steps, and the divider is idle otherwise).
** |x| > 709: the caller's. At most 1.5 ULP. */
static inline kn_vd v_cosh_own_d(kn_vd x) {
  kn_vd a = _mm512_abs_pd(x);
  kn_vd t = fma_d(a, VD(0x1.71547652b82fep+4), VD(KN_SHIFT52)), n = t - KN_SHIFT52;
  kn_vd r = fma_d(n, VD(-KN_L2L16), fma_d(n, VD(-KN_L2H16), a));
  kn_vd q = fma_d(r, VD(0x1.6c17c057d3d84p-10), VD(0x1.11120ffce45e0p-7));
  q = fma_d(q, r, VD(0x1.5555555516dd1p-5));
  q = fma_d(q, r, VD(0x1.55555554d864cp-3));
  q = fma_d(q, r, VD(0.5));
  kn_vd p = fma_d(r * r, q, r);
  __m512i j = _mm512_castpd_si512(t);
  kn_vd th = _mm512_permutex2var_pd(_mm512_loadu_pd(x5d_t_hi), j, _mm512_loadu_pd(x5d_t_hi + 8));
  kn_vd tl = _mm512_permutex2var_pd(_mm512_loadu_pd(x5d_t_lo), j, _mm512_loadu_pd(x5d_t_lo + 8));
  kn_vd e2 = _mm512_scalef_pd(th + fma_d(th, p, tl), fma_d(n, VD(0.0625), VD(1)));
  return fma_d(VD(0.25), e2, _mm512_div_pd(VD(1), e2));
}

/* sinh x = sign(x) (e^a - e^-a) / 2, a = |x|, from x5d_exp_pm: with S and
** S2 the table parts, D = S - S2 (exact up to a = ln2 / 2 by Sterbenz,
** above the result's own size) and sinh a = D + (D E + (S + S2) O + S_lo -
** S2_lo); at n = 0 that is O itself, with no cancellation anywhere. |x| >
** 709: the caller's. At most 2 ULP. */
static inline kn_vd v_sinh_own_d(kn_vd x) {
  kn_vd s2, lo1, lo2, e, rh, o, s = x5d_exp_pm(x, &s2, &lo1, &lo2, &e, &rh, &o);
  kn_vd d = s - s2, sum = s + s2;
  kn_vd r = d + fma_d(sum, rh, fma_d(d, e, fma_d(sum, o, lo1 - lo2)));
  return (kn_vd)((kn_vdi)r | ((kn_vdi)x & INT64_MIN));
}

#endif
