/*
** ops/vmath_f64_log.h: kiln's own float64 log, log2, log10 and log1p on
** AVX-512F (kn_vd an 8-lane __m512d) and AVX2+FMA (a 4-lane __m256d),
** included by vmath_isa.h after vmath_f64.h; SSE4.1 keeps SLEEF's u10
** functions. Defines KN_VM_LOG_D when it has kernels for the ISA.
**
** x = 2^e m with m in [0.75, 1.5) from vgetmantpd and e from vgetexppd
** (denormals included). The top 4 fraction bits of m pick one of 16
** intervals (entries 0..7: m in [1 + j/16, 1 + (j+1)/16); entries 8..15: m in
** [0.75 + j/32, 0.75 + (j+1)/32), where vgetexppd's e is one below m's
** exponent, so those entries carry an extra log_b 2). Each entry holds invc
** near 1 / the interval's centre and T = -log_b(invc) (+ log_b 2) as hi + lo,
** hi a multiple of 2^-42, looked up from two registers with vpermt2pd. invc
** has at most 6 bits, so that r = m invc - 1 is exact with one FMA (|r| <=
** 1/16; the two entries next to 1 have invc = 1 and T = 0 or log_b 2, so
** near x = 1 the result is the polynomial of the exact x - 1), and
**   log_b x = (e log_b(2)hi + Thi) + r / ln b + (e log_b(2)lo + Tlo + r^2 P(r))
** where the first term is exact (e <= 1075, both multiples of 2^-42), its
** sum with r / ln b is kept in two parts (Fast2Sum: the first term is 0 or
** larger than |r|), and P is a degree-9 Chebyshev fit of (log_b(1 + r) - r /
** ln b) / r^2 on [-1/32, 1/16] (error below 2^-56). The largest errors
** measured are in tests/test_vmath.c. Special values (0, negative, inf, NaN)
** are set by one vfixupimmpd from x's class. No fast-math.
**
** On AVX2 the same kernels run in generic vectors: the split by integer
** arithmetic on the bits (denormals scaled by 2^52 first), the tables
** gathered (vgatherqpd), log1p's correction c / u divided, and special values
** set only in vectors that have any.
*/
#if defined(KN_VM_D512)

#define KN_VM_LOG_D 1
typedef __m512i kn_lgi; /* table indices, one per lane (low 4 bits) */

/* t[i] for a 16-entry table held in two registers. */
static inline kn_vd lg_tab(const double *t, kn_lgi i) {
  return _mm512_permutex2var_pd(_mm512_loadu_pd(t), i, _mm512_loadu_pd(t + 8));
}

/* x = 2^e m (see the banner): returns m (NaN for negative x) with e and the
** entry index. */
static inline kn_vd lg_split(kn_vd x, kn_vd *e, kn_lgi *i) {
  kn_vd m = _mm512_getmant_pd(x, _MM_MANT_NORM_p75_1p5, _MM_MANT_SIGN_nan);
  *e = _mm512_getexp_pd(x);
  *i = _mm512_srli_epi64(_mm512_castpd_si512(m), 48);
  return m;
}

/* vfixupimmpd tables, one nibble per class of the classified operand (QNaN,
** SNaN, +-0, +1, -inf, +inf, negative, positive): 0 keeps the result, 1 takes
** the operand, 2 its quiet NaN, 3 the default NaN, 4 -inf, 5 +inf. */
#define KN_LOG_FIX 0x03530422 /* NaN, NaN, -inf, keep, NaN, +inf, NaN, keep */
#define KN_ZERO_FIX 0x00000100 /* +-0 stay themselves */

/* y, or log's special value where x is 0, negative, inf or NaN. */
static inline kn_vd lg_log_fix(kn_vd x, kn_vd y) {
  return _mm512_fixupimm_pd(y, x, _mm512_set1_epi64(KN_LOG_FIX), 0);
}

#elif KN_VM_HAS_FMA && KN_VM_WD == 4

#define KN_VM_LOG_D 1
typedef kn_vdi kn_lgi;
typedef uint64_t kn_lgu __attribute__((vector_size(sizeof(kn_vd))));

static inline kn_vd lg_tab(const double *t, kn_lgi i) {
  return _mm256_i64gather_pd(t, (__m256i)i, 8);
}

/* lane by lane: a where k is set, else b */
static inline kn_vd lg_sel(kn_vdi k, kn_vd a, kn_vd b) {
  return (kn_vd)(((kn_vdi)a & k) | ((kn_vdi)b & ~k));
}

/* The split of vgetexppd/vgetmantpd for positive finite x (other lanes give
** garbage, replaced by lg_special): m's exponent field is x's less the
** exponent ep of the interval [0.75, 1.5) 2^ep that holds x; e = ep - 1 when
** m < 1. e converts through the 1.5 * 2^52 shifter. */
static inline kn_vd lg_split(kn_vd x, kn_vd *e, kn_lgi *i) {
  kn_vdi den = x < 0x1p-1022;
  kn_lgu b = (kn_lgu)lg_sel(den, x * 0x1p52, x); /* unsigned: wraps, no overflow */
  kn_vdi ep = (kn_vdi)(b - 0x3fe8000000000000u) >> 52;
  kn_vdi mb = (kn_vdi)(b - ((kn_lgu)ep << 52));
  kn_vdi er = ep + ((mb >> 52) - 1023) - (den & 52);
  *e = (kn_vd)(er + 0x4338000000000000) - 0x1.8p52;
  *i = (mb >> 48) & 15;
  return (kn_vd)mb;
}

/* y where x is positive and finite and keep is clear; else log's special
** value of x (NaN for negative x and NaN, -inf for +-0, +inf for +inf), or
** kv where keep is set (log1p's zeros). */
static inline kn_vd lg_special(kn_vd x, kn_vd y, kn_vdi keep, kn_vd kv) {
  kn_vdi ok = (x > 0.0) & (x < (double)INFINITY) & ~keep;
  if (_mm256_movemask_pd((kn_vd)ok) == 0xf) return y;
  kn_vd sp = lg_sel(x < 0.0, (kn_vd){0} + (double)NAN, x + x);
  sp = lg_sel(x == 0.0, (kn_vd){0} - (double)INFINITY, sp);
  return lg_sel(ok, y, lg_sel(keep, kv, sp));
}
static inline kn_vd lg_log_fix(kn_vd x, kn_vd y) {
  return lg_special(x, y, (kn_vdi){0}, x);
}

#endif

#ifdef KN_VM_LOG_D

#define LGV(c) ((kn_vd){0} + (double)(c))

static inline kn_vd lg_fma(kn_vd a, kn_vd b, kn_vd c) {
#ifdef KN_VM_D512
  return _mm512_fmadd_pd(a, b, c);
#else
  return _mm256_fmadd_pd(a, b, c);
#endif
}

static const double lg_log_invc[16] = {
    0x1p+0, 0x1.ep-1, 0x1.cp-1, 0x1.bp-1,
    0x1.9p-1, 0x1.8p-1, 0x1.7p-1, 0x1.6p-1,
    0x1.5p+0, 0x1.4p+0, 0x1.38p+0, 0x1.28p+0,
    0x1.2p+0, 0x1.18p+0, 0x1.1p+0, 0x1p+0};
static const double lg_log_thi[16] = {
    0, 0x1.08598b59e4p-4, 0x1.1178e8227ep-3,
    0x1.5bf406b544p-3, 0x1.f991c6cb3cp-3, 0x1.269621134ep-2,
    0x1.522ae0738ap-2, 0x1.7fafa3bd81p-2, 0x1.af5295248dp-2,
    0x1.e148a1a272p-2, 0x1.fb358af7a5p-2, 0x1.188ee40f24p-1,
    0x1.269621134d8p-1, 0x1.35028ad9d9p-1, 0x1.43d9ff2f92p-1,
    0x1.62e42fefa38p-1};
static const double lg_log_tlo[16] = {
    0, -0x1.7e5dd7009902cp-46, 0x1.1ef78ce2d07f2p-45,
    -0x1.27023eb68981cp-46, -0x1.90d04cd7cc834p-44, -0x1.1b61f10522625p-44,
    0x1.ebe708164c759p-45, 0x1.46fb79bf6d4cbp-44, -0x1.17cc552774458p-45,
    0x1.b36537e3375b2p-44, -0x1.def40b87d36d9p-44, -0x1.accec41d52e6cp-44,
    0x1.c93c1df5bb3b6p-44, -0x1.bd1f01ab60655p-44, 0x1.e267b0b7efae1p-44,
    0x1.ef35793c7673p-45};
static const double lg_log_p[10] = {
    -0x1p-1, 0x1.555555555555dp-2, -0x1.0000000000ccap-2,
    0x1.9999999988d8ap-3, -0x1.5555553b09264p-3, 0x1.2492488c5629p-3,
    -0x1.00008c6171281p-3, 0x1.c72ede3d314c7p-4, -0x1.9808b4e863b47p-4,
    0x1.447cbbafa4886p-4};
static const double lg_log2_thi[16] = {
    0, 0x1.7d60496cfcp-4, 0x1.8a8980abfcp-3,
    0x1.f5fd8a9064p-3, 0x1.6cb0f6865dp-2, 0x1.a8ff971811p-2,
    0x1.e7df5fe539p-2, 0x1.14c560fe688p-1, 0x1.37222bb7078p-1,
    0x1.5b2c3da197p-1, 0x1.6ddfc2a79p-1, 0x1.94c287492c8p-1,
    0x1.a8ff9718108p-1, 0x1.bdce9dcc96p-1, 0x1.d338120a6ep-1,
    0x1p+0};
static const double lg_log2_tlo[16] = {
    0, -0x1.2ce6312ebb81dp-46, -0x1.66cccab240e9p-46,
    -0x1.cb6f70109b0f1p-47, -0x1.c57f2495fb7fap-44, -0x1.6879fa00b120ap-44,
    -0x1.532c412ba94dbp-44, 0x1.7c407050799bfp-44, -0x1.c22d2cad415aep-44,
    0x1.1d406db502403p-44, -0x1.ce60916e52e91p-44, -0x1.927dfc23d978p-44,
    0x1.2f0c0bfe9dbecp-44, 0x1.871a7610e40bdp-45, -0x1.3167ccc538261p-44,
    0};
static const double lg_log2_p[10] = {
    -0x1.71547652b82fep-1, 0x1.ec709dc3a0408p-2, -0x1.71547652b9572p-2,
    0x1.2776c50eedaa1p-2, -0x1.ec709d9dafc2dp-3, 0x1.a61761cc0d092p-3,
    -0x1.715540d97d26p-3, 0x1.48585e0ce78acp-3, -0x1.2655961b17dbbp-3,
    0x1.d422d97019b7fp-4};
static const double lg_log10_thi[16] = {
    0, 0x1.cb38fccd9p-6, 0x1.db11ed7668p-5,
    0x1.2e3a740b78p-4, 0x1.b721cd1714p-4, 0x1.ffbfc2bbc8p-4,
    0x1.25ba8215bp-3, 0x1.4d43f8275ap-3, 0x1.76a45cbb7ep-3,
    0x1.a209a84fbcp-3, 0x1.b88e67cf98p-3, 0x1.e76124046cp-3,
    0x1.ffbfc2bbc8p-3, 0x1.0c6711d6acp-2, 0x1.194b3bdef7p-2,
    0x1.34413509f8p-2};
static const double lg_log10_tlo[16] = {
    0, -0x1.00925a535ae72p-44, 0x1.5fa196e1e0ddap-44,
    0x1.d288560689912p-53, 0x1.7e295f660b9dap-44, -0x1.ff229f20ed3d2p-46,
    -0x1.007bf2d8bf07ap-44, 0x1.20ca9a2bcc728p-45, 0x1.bfb1de334b1cbp-45,
    0x1.fef311f12b358p-44, -0x1.a01b9bb0ebf1bp-45, -0x1.81a1e23fe0fb6p-44,
    -0x1.ff229f20ed3d2p-45, -0x1.42d6ae59e7d9cp-45, -0x1.1881d6fbdee94p-44,
    -0x1.80433b83b532ap-44};
static const double lg_log10_p[10] = {
    -0x1.bcb7b1526e50ep-3, 0x1.287a7636f4365p-3, -0x1.bcb7b1526fb46p-4,
    0x1.63c6277516802p-4, -0x1.287a76201cb5cp-4, 0x1.fc3fa50c9ad84p-5,
    -0x1.bcb8a5302976dp-5, 0x1.8b5df39e7c082p-5, -0x1.6269f14ee35fcp-5,
    0x1.19d895b8c2bbep-5};

/* log_b 2 = hi + lo (hi a multiple of 2^-42) and 1 / ln b = kh + kl */
#define KN_LN2H42 0x1.62e42fefa38p-1
#define KN_LN2L42 0x1.ef35793c7673p-45
#define KN_LG2H42 0x1.34413509f8p-2
#define KN_LG2L42 -0x1.80433b83b532ap-44
#define KN_INVLN2H 0x1.71547652b82fep+0
#define KN_INVLN2L 0x1.777d0ffda0d24p-56
#define KN_INVLN10H 0x1.bcb7b1526e50ep-2
#define KN_INVLN10L 0x1.95355baaafad3p-57

/* p[0] + p[1] r + ... + p[9] r^9 (Horner). */
static inline kn_vd lg_poly10(kn_vd r, const double *p) {
  kn_vd q = lg_fma(LGV(p[9]), r, LGV(p[8]));
  q = lg_fma(q, r, LGV(p[7]));
  q = lg_fma(q, r, LGV(p[6]));
  q = lg_fma(q, r, LGV(p[5]));
  q = lg_fma(q, r, LGV(p[4]));
  q = lg_fma(q, r, LGV(p[3]));
  q = lg_fma(q, r, LGV(p[2]));
  q = lg_fma(q, r, LGV(p[1]));
  return lg_fma(q, r, LGV(p[0]));
}

/* x's split, entry and r = m invc - 1 (exact). */
static inline kn_vd lg_reduce(kn_vd x, kn_vd *e, kn_lgi *i) {
  kn_vd m = lg_split(x, e, i);
  return lg_fma(m, lg_tab(lg_log_invc, *i), LGV(-1));
}

/* hi + rh + lo with hi + rh kept in two parts (Fast2Sum: hi is 0 or at
** least |rh|), so that the result rounds once, in the last addition. */
static inline kn_vd lg_sum(kn_vd hi, kn_vd rh, kn_vd lo) {
  kn_vd w = hi + rh;
  return w + (((hi - w) + rh) + lo);
}

/* ln of 2^e m with m's entry i and r = m invc - 1: e ln2 + T + log1p(r),
** with e ln2lo + Tlo in lo. */
static inline kn_vd lg_ln_lo(kn_vd e, kn_lgi i) {
  return lg_fma(e, LGV(KN_LN2L42), lg_tab(lg_log_tlo, i));
}
static inline kn_vd lg_ln_core(kn_vd e, kn_lgi i, kn_vd r, kn_vd lo) {
  kn_vd hi = lg_fma(e, LGV(KN_LN2H42), lg_tab(lg_log_thi, i));
  return lg_sum(hi, r, lg_fma(r * r, lg_poly10(r, lg_log_p), lo));
}

/* log x. At most 1 ULP (tests/test_vmath.c measures the maximum). */
static inline kn_vd v_log_own_d(kn_vd x) {
  kn_vd e;
  kn_lgi i;
  kn_vd r = lg_reduce(x, &e, &i);
  return lg_log_fix(x, lg_ln_core(e, i, r, lg_ln_lo(e, i)));
}

/* log_b(1 + r) = r kh + (r kl + r^2 P(r)) with 1 / ln b = kh + kl: returns
** rh = r kh rounded and adds its rounding error (exact by FMA) and r (kl + r
** P(r)) to lo. */
static inline kn_vd lg_scale(kn_vd r, double kh, double kl, const double *p, kn_vd *lo) {
  kn_vd rh = r * kh;
  *lo = lg_fma(r, lg_fma(r, lg_poly10(r, p), LGV(kl)), lg_fma(r, LGV(kh), -rh) + *lo);
  return rh;
}

/* log2 x = (e + Thi) + r / ln 2 + (Tlo + r^2 P(r)). At most 1 ULP. */
static inline kn_vd v_log2_own_d(kn_vd x) {
  kn_vd e;
  kn_lgi i;
  kn_vd r = lg_reduce(x, &e, &i);
  kn_vd hi = e + lg_tab(lg_log2_thi, i), lo = lg_tab(lg_log2_tlo, i);
  kn_vd rh = lg_scale(r, KN_INVLN2H, KN_INVLN2L, lg_log2_p, &lo);
  return lg_log_fix(x, lg_sum(hi, rh, lo));
}

/* log10 x = (e lg2hi + Thi) + r / ln 10 + (e lg2lo + Tlo + r^2 P(r)). At
** most 1 ULP. */
static inline kn_vd v_log10_own_d(kn_vd x) {
  kn_vd e;
  kn_lgi i;
  kn_vd r = lg_reduce(x, &e, &i);
  kn_vd hi = lg_fma(e, LGV(KN_LG2H42), lg_tab(lg_log10_thi, i));
  kn_vd lo = lg_fma(e, LGV(KN_LG2L42), lg_tab(lg_log10_tlo, i));
  kn_vd rh = lg_scale(r, KN_INVLN10H, KN_INVLN10L, lg_log10_p, &lo);
  return lg_log_fix(x, lg_sum(hi, rh, lo));
}

/* log1p x = log(u + c) = log u + c / u + O((c / u)^2) with u = 1 + x rounded
** and c = x - (u - 1) exactly (Fast2Sum for |x| < 2, Sterbenz above); c / u
** (at most 2^-53 relative) joins the low part. On AVX2 it is one division;
** on AVX-512, with u = 2^e' m, c / u = c 2^-e' invc / (1 + r), taken as
** d (1 - r + r^2) with d = c 2^-e' invc (vscalefpd; -e' = getexp(m) -
** getexp(u)), within r^3 of it. Special values from u's class (u = 0: x =
** -1); x = -0 stays. At most 1 ULP. */
static inline kn_vd v_log1p_own_d(kn_vd x) {
  kn_vd u = 1.0 + x, c = x - (u - 1.0), e;
  kn_lgi i;
#ifdef KN_VM_D512
  kn_vd m = lg_split(u, &e, &i), ic = lg_tab(lg_log_invc, i);
  kn_vd r = lg_fma(m, ic, LGV(-1));
  kn_vd d = _mm512_scalef_pd(c, _mm512_getexp_pd(m) - e) * ic;
  kn_vd y = lg_ln_core(e, i, r, lg_fma(d, r * r - r, d) + lg_ln_lo(e, i));
  y = _mm512_fixupimm_pd(y, u, _mm512_set1_epi64(KN_LOG_FIX), 0);
  return _mm512_fixupimm_pd(y, x, _mm512_set1_epi64(KN_ZERO_FIX), 0);
#else
  kn_vd r = lg_reduce(u, &e, &i);
  kn_vd y = lg_ln_core(e, i, r, c / u + lg_ln_lo(e, i));
  return lg_special(u, y, x == 0.0, x);
#endif
}

#endif
