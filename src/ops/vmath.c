/*
** ops/vmath.c: the scalar (libm) vector-math table and the choice of the
** table in use (see ops/vmath.h). The choice is made once, at first use, from
** CPUID; kn__vmath_force overrides it (tests compare every ISA's table with
** the scalar one; the benchmark times them).
*/
#include <stdatomic.h>
#include <tgmath.h>

#include "core/error.h"
#include "ops/vmath.h"
#include "ops/vmath_softmax.h"

/* ---- the scalar table ----------------------------------------------------- */

#define KN_SC_TYPE(T, L)                                                        \
  static inline T s_exp_##L(T x) { return exp(x); }                            \
  static inline T s_exp2_##L(T x) { return exp2(x); }                          \
  static inline T s_expm1_##L(T x) { return expm1(x); }                        \
  static inline T s_log_##L(T x) { return log(x); }                            \
  static inline T s_log2_##L(T x) { return log2(x); }                          \
  static inline T s_log1p_##L(T x) { return log1p(x); }                        \
  static inline T s_sqrt_##L(T x) { return sqrt(x); }                          \
  static inline T s_rsqrt_##L(T x) { return (T)1 / sqrt(x); }                  \
  static inline T s_sin_##L(T x) { return sin(x); }                            \
  static inline T s_cos_##L(T x) { return cos(x); }                            \
  static inline T s_tan_##L(T x) { return tan(x); }                            \
  static inline T s_tanh_##L(T x) { return tanh(x); }                          \
  static inline T s_erf_##L(T x) { return erf(x); }                            \
  static inline T s_log10_##L(T x) { return log10(x); }                        \
  static inline T s_sinh_##L(T x) { return sinh(x); }                          \
  static inline T s_cosh_##L(T x) { return cosh(x); }                          \
  static inline T s_asin_##L(T x) { return asin(x); }                          \
  static inline T s_acos_##L(T x) { return acos(x); }                          \
  static inline T s_atan_##L(T x) { return atan(x); }                          \
  static inline T s_erfc_##L(T x) { return erfc(x); }                          \
  static inline T s_sigmoid_##L(T x) { return (T)1 / ((T)1 + exp(-x)); }       \
  static inline T s_silu_##L(T x) { return x / ((T)1 + exp(-x)); }             \
  static inline T s_gelu_##L(T x) {                                            \
    return (T)0.5 * x * ((T)1 + erf(x * (T)KN__VM_SQRT1_2));                   \
  }                                                                            \
  static inline T s_gelu_tanh_##L(T x) {                                       \
    T inner = (T)KN__VM_BETA * (x + (T)KN__VM_KAPPA * x * x * x);              \
    return (T)0.5 * x * ((T)1 + tanh(inner));                                  \
  }                                                                            \
  static inline T s_pow_##L(T a, T b) { return pow(a, b); }                    \
  static inline T s_gelu_bw_##L(T g, T x) {                                    \
    T cdf = (T)0.5 * ((T)1 + erf(x * (T)KN__VM_SQRT1_2));                      \
    T pdf = exp((T)-0.5 * x * x) * (T)KN__VM_INVSQRT2PI;                       \
    return g * (cdf + x * pdf);                                                \
  }                                                                            \
  static inline T s_gelu_tanh_bw_##L(T g, T x) {                               \
    T inner = (T)KN__VM_BETA * (x + (T)KN__VM_KAPPA * x * x * x);              \
    T th = tanh(inner);                                                        \
    T dinner = (T)KN__VM_BETA * ((T)1 + (T)3 * (T)KN__VM_KAPPA * x * x);       \
    return g * ((T)0.5 * ((T)1 + th) + (T)0.5 * x * ((T)1 - th * th) * dinner); \
  }

#define KN_SC_ARRAY1(NAME, T, L)                                                \
  static void a_##NAME##_##L(T *y, const T *x, int64_t n) {                    \
    for (int64_t i = 0; i < n; i++) y[i] = s_##NAME##_##L(x[i]);               \
  }
#define KN_SC_ARRAY2(NAME, T, L)                                                \
  static void a_##NAME##_##L(T *y, const T *a, const T *b, int64_t n) {        \
    for (int64_t i = 0; i < n; i++) y[i] = s_##NAME##_##L(a[i], b[i]);         \
  }

#define KN_SC_ALL(T, L)                                                         \
  KN_SC_TYPE(T, L)                                                             \
  KN_SC_ARRAY1(exp, T, L) KN_SC_ARRAY1(exp2, T, L) KN_SC_ARRAY1(expm1, T, L)   \
  KN_SC_ARRAY1(log, T, L) KN_SC_ARRAY1(log2, T, L) KN_SC_ARRAY1(log1p, T, L)   \
  KN_SC_ARRAY1(sqrt, T, L) KN_SC_ARRAY1(rsqrt, T, L) KN_SC_ARRAY1(sin, T, L)   \
  KN_SC_ARRAY1(cos, T, L) KN_SC_ARRAY1(tan, T, L) KN_SC_ARRAY1(tanh, T, L)     \
  KN_SC_ARRAY1(erf, T, L) KN_SC_ARRAY1(sigmoid, T, L) KN_SC_ARRAY1(silu, T, L) \
  KN_SC_ARRAY1(gelu, T, L) KN_SC_ARRAY1(gelu_tanh, T, L)                       \
  KN_SC_ARRAY1(log10, T, L) KN_SC_ARRAY1(sinh, T, L) KN_SC_ARRAY1(cosh, T, L)  \
  KN_SC_ARRAY1(asin, T, L) KN_SC_ARRAY1(acos, T, L) KN_SC_ARRAY1(atan, T, L)   \
  KN_SC_ARRAY1(erfc, T, L)                                                     \
  KN_SC_ARRAY2(pow, T, L) KN_SC_ARRAY2(gelu_bw, T, L)                          \
  KN_SC_ARRAY2(gelu_tanh_bw, T, L)

KN_SC_ALL(float, f)
KN_SC_ALL(double, d)


static void softmax_bwd_f(float *gi, const float *g, const float *y, int64_t n, bool log_) {
  double s = 0;
  for (int64_t k = 0; k < n; k++) s += log_ ? (double)g[k] : (double)g[k] * (double)y[k];
  const float sh = (float)s, sl = (float)(s - (double)sh); /* the vector tables' split */
  for (int64_t k = 0; k < n; k++) {
    float e = log_ ? expf(y[k]) : 0;
    gi[k] = log_ ? (g[k] - e * sh) - e * sl : y[k] * ((g[k] - sh) - sl);
  }
}

static void softplus_f(float *y, const float *x, int64_t n, float beta, float thr) {
  for (int64_t i = 0; i < n; i++) {
    float t = x[i] * beta, r = log1pf(expf(t));
    y[i] = t > thr ? x[i] : r / beta;
  }
}

/* exp(x[i] - c), t and the exp stored where asked */
static float expsum_one(float *e, float *d, const float *x, float c, int64_t i) {
  float t = x[i] - c, v = s_exp_f(t);
  if (d) d[i] = t;
  if (e) e[i] = v;
  return v;
}

/* lane l's float sum of the group of 64 at i: (e0 + e1) + (e2 + e3) */
static float expsum_four(float *e, float *d, const float *x, float c, int64_t i, int l) {
  enum { L = KN__VM_SUM_LANES };
  float v0 = expsum_one(e, d, x, c, i + l), v1 = expsum_one(e, d, x, c, i + L + l);
  float v2 = expsum_one(e, d, x, c, i + 2 * L + l), v3 = expsum_one(e, d, x, c, i + 3 * L + l);
  return (v0 + v1) + (v2 + v3);
}

/* kn__vm_expsum_f32's groups of 256, of 64, then one by one (the vector
** tables compute the lanes in that order, a vector at a time); also the
** table's expsum_max_f32 (the same function: no shortcut to take here). */
static void expsum_f(float *e, float *d, const float *x, float c, int64_t n, double *acc,
                     const float *ahead) {
  enum { L = KN__VM_SUM_LANES };
  (void)ahead; /* no prefetch in the scalar table */
  int64_t i = 0;
  for (; i + 16 * L <= n; i += 16 * L)
    for (int l = 0; l < L; l++) {
      float s[4];
      for (int g = 0; g < 4; g++) s[g] = expsum_four(e, d, x, c, i + g * 4 * L, l);
      acc[l] += (double)((s[0] + s[1]) + (s[2] + s[3]));
    }
  for (; i + 4 * L <= n; i += 4 * L)
    for (int l = 0; l < L; l++) acc[l] += (double)expsum_four(e, d, x, c, i, l);
  for (; i < n; i++) acc[i % L] += (double)expsum_one(e, d, x, c, i);
}

static float rowmax_f(const float *x, int64_t n, int *nan) {
  float m = -INFINITY;
  for (int64_t i = 0; i < n; i++) {
    m = x[i] > m ? x[i] : m;
    if (x[i] != x[i]) *nan = 1;
  }
  return m;
}

/* kn__vm_softmax_f32: the generated row kernel's softmax (ops/vmath_softmax.h)
** from this table's own functions. */
static void softmax_f(float *y, const float *x, int64_t n, bool log_) {
  kn__vm_softmax_row(y, x, n, log_, rowmax_f, expsum_f, a_exp_f, a_log_f);
}

const kn__vmath kn__vmath_scalar = {"scalar",       KN__VM_ROW1(f), KN__VM_ROW1(d),
                                    KN__VM_ROW2(f), KN__VM_ROW2(d), softmax_f,
                                    softmax_bwd_f,  softplus_f,     expsum_f,
                                    rowmax_f,       expsum_f};

/* ---- selection ---------------------------------------------------------------- */

static bool cpu_has(kn__isa isa) {
#if defined(__x86_64__)
  __builtin_cpu_init();
  switch (isa) {
  case KN__ISA_SSE4: return __builtin_cpu_supports("sse4.1");
  case KN__ISA_AVX2: return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  case KN__ISA_AVX512: return __builtin_cpu_supports("avx512f");
  default: return isa == KN__ISA_SCALAR;
  }
#else
  return isa == KN__ISA_SCALAR;
#endif
}

const kn__vmath *kn__vmath_table(kn__isa isa) {
  if (isa < 0 || isa >= KN__ISA_COUNT || !cpu_has(isa)) return NULL;
#if defined(__x86_64__)
  static const kn__vmath *const tables[KN__ISA_COUNT] = {
      &kn__vmath_scalar, &kn__vmath_sse4, &kn__vmath_avx2, &kn__vmath_avx512};
  return tables[isa];
#else
  return &kn__vmath_scalar;
#endif
}

kn__isa kn__vmath_best(void) {
  for (int i = KN__ISA_COUNT - 1; i > 0; i--)
    if (cpu_has((kn__isa)i)) return (kn__isa)i;
  return KN__ISA_SCALAR;
}

/* The table in use; NULL until the first call picks one. */
static _Atomic(const kn__vmath *) current;

const kn__vmath *kn__vmath_get(void) {
  const kn__vmath *t = atomic_load_explicit(&current, memory_order_acquire);
  if (t) return t;
  t = kn__vmath_table(kn__vmath_best());
  atomic_store_explicit(&current, t, memory_order_release);
  return t;
}

kn_status kn__vmath_force(kn__isa isa) {
  if (isa == KN__ISA_COUNT) {
    atomic_store(&current, kn__vmath_table(kn__vmath_best()));
    return KN_OK;
  }
  const kn__vmath *t = kn__vmath_table(isa);
  if (!t)
    return kn__error(KN_EINVAL, "vector ISA %s is not supported by this CPU or build",
                     kn__isa_name(isa));
  atomic_store(&current, t);
  return KN_OK;
}

const char *kn__vm_exact_c(kn__vmop op) { return op == KN__VM_SQRT ? "sqrt(a)" : NULL; }

const char *kn__isa_name(kn__isa isa) {
  static const char *const names[KN__ISA_COUNT] = {"scalar", "sse4", "avx2", "avx512"};
  return isa >= 0 && isa < KN__ISA_COUNT ? names[isa] : "?";
}
