/*
** test_vmath.c: the vector-math tables (ops/vmath.h) of every ISA this CPU
** has, against libm computed in a wider type (double for float32, long
** double for float64) and rounded: the error in ULPs over many inputs
** (edge values 0, -0, +-inf, NaN, denormals, huge; a log-uniform sweep of
** magnitudes; a dense sweep of [-10, 10]). Special values must match
** exactly (NaN for NaN, the same infinity, zeros of the same sign). Then
** the public ops, forced onto each ISA, must give that ISA's table results
** on contiguous and strided inputs.
**
** Bounds (ULPs from the correctly rounded result): SLEEF's u10 functions
** promise 1.0, glibc's float and double functions up to 2 (tanh, erf,
** expm1), so direct functions allow 2 (erfc 3: glibc's is off by 3 at
** places, SLEEF's promises 1.5); composites (sigmoid, silu, gelu)
** allow 4 plus, where the formula itself cancels (1 + erf(x) for x << 0,
** the same in torch), an absolute error of 4 ULPs of 1 (of |grad| for
** gelu's derivative).
*/
#include <criterion/criterion.h>
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kiln/kiln.h"
#include "ops/vmath.h"

TestSuite(vmath, .fini = NULL);

/* ---- reference formulas (wide type) -------------------------------------- */

typedef long double LD;
static LD r_exp(LD x) { return expl(x); }
static LD r_exp2(LD x) { return exp2l(x); }
static LD r_expm1(LD x) { return expm1l(x); }
static LD r_log(LD x) { return logl(x); }
static LD r_log2(LD x) { return log2l(x); }
static LD r_log1p(LD x) { return log1pl(x); }
static LD r_sqrt(LD x) { return sqrtl(x); }
static LD r_rsqrt(LD x) { return 1 / sqrtl(x); }
static LD r_sin(LD x) { return sinl(x); }
static LD r_cos(LD x) { return cosl(x); }
static LD r_tan(LD x) { return tanl(x); }
static LD r_tanh(LD x) { return tanhl(x); }
static LD r_erf(LD x) { return erfl(x); }
static LD r_log10(LD x) { return log10l(x); }
static LD r_sinh(LD x) { return sinhl(x); }
static LD r_cosh(LD x) { return coshl(x); }
static LD r_asin(LD x) { return asinl(x); }
static LD r_acos(LD x) { return acosl(x); }
static LD r_atan(LD x) { return atanl(x); }
static LD r_erfc(LD x) { return erfcl(x); }
static LD r_sigmoid(LD x) { return 1 / (1 + expl(-x)); }
static LD r_silu(LD x) { return x / (1 + expl(-x)); }
static LD r_gelu(LD x) { return 0.5L * x * (1 + erfl(x * 0.70710678118654752440L)); }
static LD r_gelu_tanh(LD x) {
  LD inner = 0.79788456080286535588L * (x + 0.044715L * x * x * x);
  return 0.5L * x * (1 + tanhl(inner));
}

typedef struct ucase {
  const char *name;
  kn__vmop op;
  LD (*ref)(LD);
  bool composite;
  kn_tensor *(*public_op)(kn_tensor *);
} ucase;

static kn_tensor *gelu_none(kn_tensor *x) { return kn_gelu(x, KN_GELU_NONE); }
static kn_tensor *gelu_tanh(kn_tensor *x) { return kn_gelu(x, KN_GELU_TANH); }

static const ucase cases[] = {
    {"exp", KN__VM_EXP, r_exp, false, kn_exp},
    {"exp2", KN__VM_EXP2, r_exp2, false, kn_exp2},
    {"expm1", KN__VM_EXPM1, r_expm1, false, kn_expm1},
    {"log", KN__VM_LOG, r_log, false, kn_log},
    {"log2", KN__VM_LOG2, r_log2, false, kn_log2},
    {"log1p", KN__VM_LOG1P, r_log1p, false, kn_log1p},
    {"sqrt", KN__VM_SQRT, r_sqrt, false, kn_sqrt},
    {"rsqrt", KN__VM_RSQRT, r_rsqrt, true, kn_rsqrt},
    {"sin", KN__VM_SIN, r_sin, false, kn_sin},
    {"cos", KN__VM_COS, r_cos, false, kn_cos},
    {"tan", KN__VM_TAN, r_tan, false, kn_tan},
    {"tanh", KN__VM_TANH, r_tanh, false, kn_tanh},
    {"erf", KN__VM_ERF, r_erf, false, kn_erf},
    {"sigmoid", KN__VM_SIGMOID, r_sigmoid, true, kn_sigmoid},
    {"silu", KN__VM_SILU, r_silu, true, kn_silu},
    {"gelu", KN__VM_GELU, r_gelu, true, gelu_none},
    {"gelu_tanh", KN__VM_GELU_TANH, r_gelu_tanh, true, gelu_tanh},
    {"log10", KN__VM_LOG10, r_log10, false, kn_log10},
    {"sinh", KN__VM_SINH, r_sinh, false, kn_sinh},
    {"cosh", KN__VM_COSH, r_cosh, false, kn_cosh},
    {"asin", KN__VM_ASIN, r_asin, false, kn_asin},
    {"acos", KN__VM_ACOS, r_acos, false, kn_acos},
    {"atan", KN__VM_ATAN, r_atan, false, kn_atan},
    {"erfc", KN__VM_ERFC, r_erfc, false, kn_erfc},
};
#define NCASES ((int)(sizeof cases / sizeof cases[0]))

/* The ULP bound of a case (see the banner). */
static int bound(const ucase *c) { return c->composite ? 4 : c->op == KN__VM_ERFC ? 3 : 2; }

/* ---- inputs ------------------------------------------------------------------ */

static uint64_t rng = 88172645463325252ull;
static double urand(void) { /* xorshift64 in [0, 1) */
  rng ^= rng << 13;
  rng ^= rng >> 7;
  rng ^= rng << 17;
  return (double)(rng >> 11) * 0x1.0p-53;
}

/* n inputs: edge values first, then sweeps. Owned by the caller. */
static double *make_inputs(int64_t *n, bool f32) {
  const double big = f32 ? FLT_MAX : DBL_MAX, tiny = f32 ? FLT_MIN : DBL_MIN;
  const double den = f32 ? 0x1p-149 : 0x1p-1074;
  const double edge[] = {0, -0.0, INFINITY, -INFINITY, NAN, -NAN, den, -den, tiny / 3, -tiny / 3,
                         tiny, -tiny, 1e-30, -1e-30, 1e-8, -1e-8, 0.5, -0.5, 1, -1, 2, -2,
                         88.72, 88.73, -87.3, -103.9, -104, -745, 709.7, 710, 1e4, -1e4,
                         1e30, -1e30, big, -big, 3.14159265, 1.5707963, -1.5707963, 0.6931,
                         9.5, -9.5, 1e-3, -1e-3};
  const int64_t ne = (int64_t)(sizeof edge / sizeof edge[0]), nlog = 40000, nlin = 20000;
  double *v = malloc((size_t)(ne + nlog + nlin) * sizeof *v);
  cr_assert_not_null(v);
  memcpy(v, edge, sizeof edge);
  for (int64_t i = 0; i < nlog; i++) { /* |x| in [1e-6, 1e4], both signs */
    double m = pow(10, -6 + 10 * urand());
    v[ne + i] = (i & 1) ? -m : m;
  }
  for (int64_t i = 0; i < nlin; i++) v[ne + nlog + i] = -10 + 20 * urand();
  if (f32)
    for (int64_t i = 0; i < ne + nlog + nlin; i++) v[i] = (double)(float)v[i];
  *n = ne + nlog + nlin;
  return v;
}

/* ---- ULP distance --------------------------------------------------------------- */

static int64_t ord32(float f) {
  int32_t i;
  memcpy(&i, &f, sizeof i);
  return i < 0 ? (int64_t)INT32_MIN - i : i;
}
static int64_t ord64(double f) {
  int64_t i;
  memcpy(&i, &f, sizeof i);
  return i < 0 ? INT64_MIN - i : i;
}

/* Does got match the reference want (rounded to the type)? */
static bool within(double got, LD want_wide, bool f32, bool composite, int max_ulps,
                   double scale, int64_t *ulps) {
  double want = f32 ? (double)(float)want_wide : (double)want_wide;
  *ulps = 0;
  if (isnan(want)) return isnan(got);
  if (isinf(want) || want == 0) {
    if (got == want && signbit(got) == signbit(want)) return true;
    if (!composite || isinf(want)) return false;
  }
  if (isnan(got) || isinf(got)) return false;
  int64_t d = f32 ? ord32((float)got) - ord32((float)want) : ord64(got) - ord64(want);
  *ulps = d < 0 ? -d : d;
  if (!composite) return *ulps <= max_ulps;
  double one_ulp = f32 ? FLT_EPSILON : DBL_EPSILON;
  return *ulps <= max_ulps || fabs(got - want) <= 4 * one_ulp * scale;
}

/* ---- the tables ---------------------------------------------------------------- */

static void check_table(const kn__vmath *t, bool f32) {
  int64_t n;
  double *in = make_inputs(&n, f32);
  float *xf = malloc((size_t)n * sizeof *xf), *yf = malloc((size_t)n * sizeof *yf);
  double *yd = malloc((size_t)n * sizeof *yd);
  for (int64_t i = 0; i < n; i++) xf[i] = (float)in[i];
  for (int c = 0; c < NCASES; c++) {
    if (f32) t->f32[cases[c].op](yf, xf, n);
    else t->f64[cases[c].op](yd, in, n);
    int64_t worst = 0, bad = 0;
    for (int64_t i = 0; i < n; i++) {
      double got = f32 ? (double)yf[i] : yd[i];
      LD want = cases[c].ref((LD)in[i]);
      int64_t u;
      if (!within(got, want, f32, cases[c].composite, bound(&cases[c]), 1, &u)) {
        if (bad++ < 3)
          cr_log_error("%s %s %s(%a) = %a, want %a (%lld ulps)", t->name,
                       f32 ? "float32" : "float64", cases[c].name, in[i], got, (double)want,
                       (long long)u);
      } else if (u <= bound(&cases[c])) {
        worst = u > worst ? u : worst;
      }
    }
    cr_expect_eq(bad, 0, "%s %s %s: %lld inputs out of bounds", t->name, f32 ? "f32" : "f64",
                 cases[c].name, (long long)bad);
    cr_log_info("%s %s %s: max %lld ulps", t->name, f32 ? "f32" : "f64", cases[c].name,
                (long long)worst);
  }
  free(in);
  free(xf);
  free(yf);
  free(yd);
}

Test(vmath, every_isa_within_ulp_bounds) {
  int tested = 0;
  for (int isa = 0; isa < KN__ISA_COUNT; isa++) {
    const kn__vmath *t = kn__vmath_table((kn__isa)isa);
    if (!t) continue;
    cr_assert_str_eq(t->name, kn__isa_name((kn__isa)isa));
    check_table(t, true);
    check_table(t, false);
    tested++;
  }
  cr_assert_geq(tested, 1);
  cr_assert_eq(kn__vmath_table(kn__vmath_best()), kn__vmath_get(),
               "the default table is the widest supported one");
}

/* ---- kiln's own float32 kernels: their branch points, then all magnitudes ---------- */

static const ucase *case_of(kn__vmop op) {
  for (int c = 0; c < NCASES; c++)
    if (cases[c].op == op) return &cases[c];
  return NULL;
}

/* Out-of-bound results of t's float function over n inputs (logged). */
static int64_t count_bad_f32(const kn__vmath *t, const ucase *c, const float *x, int64_t n) {
  float *y = malloc((size_t)n * sizeof *y);
  cr_assert_not_null(y);
  t->f32[c->op](y, x, n);
  int64_t bad = 0, u;
  for (int64_t i = 0; i < n; i++)
    if (!within(y[i], c->ref((LD)x[i]), true, c->composite, bound(c), 1, &u) && bad++ < 3)
      cr_log_error("%s float32 %s(%a) = %a, want %a (%lld ulps)", t->name, c->name, x[i], y[i],
                   (double)(float)c->ref((LD)x[i]), (long long)u);
  free(y);
  return bad;
}

/* Where the float kernels switch formula, range or scaling (vmath_f32.h and
** vmath_isa.h): 2048 consecutive floats on each side of each point. */
static const struct {
  kn__vmop op;
  float at;
} branch_points[] = {
    {KN__VM_EXP, 88.7228394f},   {KN__VM_EXP, -87.3365479f}, {KN__VM_EXP, -103.972076f},
    {KN__VM_EXP, 0.34657359f},   {KN__VM_EXP, -0.34657359f}, {KN__VM_EXP, 0},
    {KN__VM_EXPM1, 0.58918f},    {KN__VM_EXPM1, -0.34657359f}, {KN__VM_EXPM1, 80},
    {KN__VM_EXPM1, -30},         {KN__VM_EXPM1, 0},           {KN__VM_EXPM1, 1.2824f},
    {KN__VM_LOG, 0.70710678f},   {KN__VM_LOG, 1},             {KN__VM_LOG, FLT_MIN},
    {KN__VM_LOG2, 0.70710678f},  {KN__VM_LOG2, 1},            {KN__VM_LOG2, FLT_MIN},
    {KN__VM_LOG10, 0.70710678f}, {KN__VM_LOG10, 1},           {KN__VM_LOG10, 10},
    {KN__VM_LOG1P, -0.29289322f}, {KN__VM_LOG1P, 1},          {KN__VM_LOG1P, 0.41421356f},
    {KN__VM_LOG1P, 0},           {KN__VM_LOG1P, -1},          {KN__VM_SIN, 8192},
    {KN__VM_SIN, 0.78539816f},   {KN__VM_SIN, 3.14159265f},   {KN__VM_COS, 1.57079633f},
    {KN__VM_COS, -8192},         {KN__VM_COS, 2.35619449f},   {KN__VM_SINH, 1},
    {KN__VM_SINH, -88},          {KN__VM_COSH, 88},           {KN__VM_COSH, 0},
    {KN__VM_TANH, 0.625f},       {KN__VM_TANH, 10},           {KN__VM_TANH, 9.01f},
    {KN__VM_ERF, 0.875f},        {KN__VM_ERF, -4},
    {KN__VM_TAN, 4.71238898f},   {KN__VM_TAN, -8192},         {KN__VM_TAN, 0.78539816f},
    /* the AVX-512 logs' table: mantissa 0.75, 1.5 and the entries next to 1 */
    {KN__VM_LOG, 1.5f},          {KN__VM_LOG, 0.75f},         {KN__VM_LOG, 0.96875f},
    {KN__VM_LOG, 1.0625f},       {KN__VM_LOG2, 0.96875f},     {KN__VM_LOG2, 1.0625f},
    {KN__VM_LOG10, 0.96875f},    {KN__VM_LOG10, 1.0625f},     {KN__VM_LOG10, 1.5f},
    {KN__VM_LOG1P, 0.0625f},     {KN__VM_LOG1P, -0.03125f},   {KN__VM_LOG1P, 0.5f},
    {KN__VM_ASIN, 0.5f},         {KN__VM_ASIN, -1},           {KN__VM_ASIN, 1},
    {KN__VM_ACOS, 0.5f},         {KN__VM_ACOS, -0.5f},        {KN__VM_ACOS, 1},
    {KN__VM_ACOS, -1},           {KN__VM_ATAN, 1},            {KN__VM_ATAN, -0x1p100f},
    {KN__VM_RSQRT, 1},           {KN__VM_RSQRT, FLT_MIN},     {KN__VM_EXPM1, 0.24f},
    {KN__VM_EXP2, 128},          {KN__VM_EXP2, 129},          {KN__VM_EXP2, -126},
    {KN__VM_EXP2, -149},         {KN__VM_EXP2, -150},         {KN__VM_EXP2, -151},
    {KN__VM_EXP2, 0.5f},         {KN__VM_EXP2, -0.5f},        {KN__VM_EXP2, 0},
    /* AVX-512 tanh's pieces: quarter octaves from 2^-4, the clamp at 9.5 */
    {KN__VM_TANH, 0.078125f},    {KN__VM_TANH, 0.0625f},      {KN__VM_TANH, -0.25f},
    {KN__VM_TANH, 0.4375f},      {KN__VM_TANH, 1},            {KN__VM_TANH, -1.25f},
    {KN__VM_TANH, 1.75f},        {KN__VM_TANH, 2},            {KN__VM_TANH, 4},
    {KN__VM_TANH, -5},           {KN__VM_TANH, 8},            {KN__VM_TANH, 9.5f},
    /* AVX-512 atan's pieces: quarter octaves of |x| and of 1 / |x| from 2^-4 */
    {KN__VM_ATAN, 0.078125f},    {KN__VM_ATAN, 0.0625f},      {KN__VM_ATAN, -0.25f},
    {KN__VM_ATAN, 0.875f},       {KN__VM_ATAN, 12.8f},        {KN__VM_ATAN, -16},
    {KN__VM_ATAN, 2},            {KN__VM_ATAN, 8},            {KN__VM_ATAN, 1.14285714f},
    /* AVX-512 sinh's and cosh's scalings (n ln2 + r, r in [-0.104, 0.59]), overflow, clamp */
    {KN__VM_SINH, 0.58918f},     {KN__VM_SINH, -1.2824f},     {KN__VM_SINH, 8.896f},
    {KN__VM_SINH, 89.4159851f},  {KN__VM_SINH, -89.5f},       {KN__VM_COSH, 89.4159851f},
    {KN__VM_COSH, -89.5f},       {KN__VM_COSH, 0.34657359f},
    /* AVX-512 expm1's scalings for x < 0 (n = rint(x / ln2 + 0.35)); exp2 beyond 2^23 */
    {KN__VM_EXPM1, -0.58918f},   {KN__VM_EXPM1, -1.2824f},    {KN__VM_EXP2, 0x1p23f},
    {KN__VM_EXP2, -0x1p23f},
    /* exp's two paths (vmath_f32.h): |x| <= 87 takes the one without clamp */
    {KN__VM_EXP, 87},            {KN__VM_EXP, -87},
    /* erf: the generic kernel's switch at 0.875 and clamp at 4; AVX-512's
    ** pieces (the first one's end, quarter octaves from 2^-4, eighths of [2,
    ** 4), the clamp at 3.96875) */
    {KN__VM_ERF, 0.875f},        {KN__VM_ERF, 4},             {KN__VM_ERF, 0.078125f},
    {KN__VM_ERF, 0.0625f},       {KN__VM_ERF, -0.25f},        {KN__VM_ERF, 1},
    {KN__VM_ERF, 1.75f},         {KN__VM_ERF, 2},             {KN__VM_ERF, -2.25f},
    {KN__VM_ERF, 3.75f},         {KN__VM_ERF, 3.96875f},      {KN__VM_ERF, 0x1p-8f},
    {KN__VM_GELU, 2.828427f},    {KN__VM_GELU, -2.828427f},   {KN__VM_GELU, 0.110485f},
};

Test(vmath, float_kernels_at_branch_points) {
  enum { SIDE = 2048 };
  float x[2 * SIDE];
  for (int isa = 0; isa < KN__ISA_COUNT; isa++) {
    const kn__vmath *t = kn__vmath_table((kn__isa)isa);
    if (!t) continue;
    for (size_t b = 0; b < sizeof branch_points / sizeof branch_points[0]; b++) {
      for (int i = 0; i < 2 * SIDE; i++) /* nextafter steps through +-0 too */
        x[i] = (float)(branch_points[b].at + (double)(i - SIDE) * 0x1p-149 *
                                                  (branch_points[b].at == 0 ? 1 : 0));
      if (branch_points[b].at != 0) {
        x[SIDE] = branch_points[b].at;
        for (int i = SIDE + 1; i < 2 * SIDE; i++) x[i] = nextafterf(x[i - 1], INFINITY);
        for (int i = SIDE - 1; i >= 0; i--) x[i] = nextafterf(x[i + 1], -INFINITY);
      }
      const ucase *c = case_of(branch_points[b].op);
      cr_expect_eq(count_bad_f32(t, c, x, 2 * SIDE), 0, "%s %s near %a", t->name, c->name,
                   branch_points[b].at);
    }
  }
}

/* erf within one ULP of the correctly rounded result (the bound its
** kernels claim, tighter than the 2 of the banner) at every 97th float of
** [0, 4.5] and their negatives, on every ISA: each piece of AVX-512's table
** (x5_erf_f) is crossed thousands of times. */
Test(vmath, erf_within_one_ulp_dense) {
  const uint32_t top = 0x40900000u; /* 4.5f */
  const int64_t n = 2 * ((int64_t)top / 97 + 1);
  float *x = malloc((size_t)n * sizeof *x), *y = malloc((size_t)n * sizeof *y);
  cr_assert(x && y);
  for (int64_t i = 0; i < n / 2; i++) {
    uint32_t u = (uint32_t)(i * 97);
    memcpy(&x[2 * i], &u, sizeof u);
    x[2 * i + 1] = -x[2 * i];
  }
  for (int isa = 0; isa < KN__ISA_COUNT; isa++) {
    const kn__vmath *t = kn__vmath_table((kn__isa)isa);
    if (!t) continue;
    t->f32[KN__VM_ERF](y, x, n);
    int64_t bad = 0, u;
    for (int64_t i = 0; i < n; i++)
      if (!within(y[i], erfl((LD)x[i]), true, false, 1, 1, &u) && bad++ < 3)
        cr_log_error("%s float32 erf(%a) = %a, want %a (%lld ulps)", t->name, x[i], y[i],
                     (double)(float)erfl((LD)x[i]), (long long)u);
    cr_expect_eq(bad, 0, "%s erf: %lld inputs beyond 1 ULP", t->name, (long long)bad);
  }
  free(x);
  free(y);
}

/* Every 65521st float32 bit pattern (all signs, magnitudes, NaNs and
** infinities) through every unary function of every table. */
Test(vmath, float_kernels_over_all_magnitudes) {
  const int64_t n = ((int64_t)1 << 32) / 65521 + 1;
  float *x = malloc((size_t)n * sizeof *x);
  cr_assert_not_null(x);
  for (int64_t i = 0; i < n; i++) {
    uint32_t u = (uint32_t)(i * 65521);
    memcpy(&x[i], &u, sizeof u);
  }
  for (int isa = 0; isa < KN__ISA_COUNT; isa++) {
    const kn__vmath *t = kn__vmath_table((kn__isa)isa);
    if (!t) continue;
    for (int c = 0; c < NCASES; c++)
      cr_expect_eq(count_bad_f32(t, &cases[c], x, n), 0, "%s %s", t->name, cases[c].name);
  }
  free(x);
}

/* ---- kiln's own float64 kernels (AVX-512: exp, exp2, expm1, sinh, cosh, tanh, sin, cos, tan, asin, acos, atan) ---- */

/* Out-of-bound results of t's double function over n inputs (logged). */
static int64_t count_bad_f64(const kn__vmath *t, const ucase *c, const double *x, int64_t n) {
  double *y = malloc((size_t)n * sizeof *y);
  cr_assert_not_null(y);
  t->f64[c->op](y, x, n);
  int64_t bad = 0, u;
  for (int64_t i = 0; i < n; i++)
    if (!within(y[i], c->ref((LD)x[i]), false, c->composite, bound(c), 1, &u) && bad++ < 3)
      cr_log_error("%s float64 %s(%a) = %a, want %a (%lld ulps)", t->name, c->name, x[i], y[i],
                   (double)c->ref((LD)x[i]), (long long)u);
  free(y);
  return bad;
}

/* Where the float64 kernels switch formula or scaling (vmath_f64.h,
** vmath_f64_trig.h): 2048
** consecutive doubles on each side of each point. */
static const struct {
  kn__vmop op;
  double at;
} branch_points_f64[] = {
    {KN__VM_EXP, 0x1.62e42fefa39efp+9},  {KN__VM_EXP, -0x1.6232bdd7abcd2p+9}, /* overflow, DBL_MIN */
    {KN__VM_EXP, -0x1.74910d52d3051p+9}, {KN__VM_EXP, -745.2},  {KN__VM_EXP, 0},
    {KN__VM_EXP, 0x1.62e42fefa39efp-6},  {KN__VM_EXP, -0x1.62e42fefa39efp-6}, /* ln2 / 32 */
    {KN__VM_EXP, 0x1.62e42fefa39efp-5},  {KN__VM_EXP, 710},     {KN__VM_EXP, -746},
    {KN__VM_SINH, 1},                    {KN__VM_SINH, -1},     {KN__VM_SINH, 709},
    {KN__VM_SINH, -709},                 {KN__VM_SINH, 0},      {KN__VM_COSH, 709},
    {KN__VM_COSH, 0},                    {KN__VM_COSH, -1},
    /* AVX-512 sinh's shared e^a / e^-a table: n = 0 ends (ln2 / 32), D
    ** exact up to ln2 / 2, the index wrapping at ln2, 16 ln2 */
    {KN__VM_SINH, 0x1.62e42fefa39efp-6}, {KN__VM_SINH, -0x1.62e42fefa39efp-6},
    {KN__VM_SINH, 0x1.62e42fefa39efp-2}, {KN__VM_SINH, 0x1.62e42fefa39efp-1},
    {KN__VM_SINH, 0x1.62e42fefa39efp-5}, {KN__VM_SINH, 0x1.62e42fefa39efp+3},
    {KN__VM_EXPM1, 0},                   {KN__VM_EXPM1, 0.125},  {KN__VM_EXPM1, -0.125},
    {KN__VM_EXPM1, 0x1.62e42fefa39efp-6}, {KN__VM_EXPM1, -0x1.62e42fefa39efp-6}, /* n = 0 ends */
    {KN__VM_EXPM1, 0x1.62e42fefa39efp-1}, {KN__VM_EXPM1, -0x1.62e42fefa39efp-1}, /* s = 2, 1/2 */
    {KN__VM_EXPM1, -40},                 {KN__VM_EXPM1, 709},
    {KN__VM_EXPM1, 0x1.62e42fefa39efp+9}, {KN__VM_EXPM1, 709.79},
    {KN__VM_TANH, 0},                    {KN__VM_TANH, 0.0625},  {KN__VM_TANH, -0.0625},
    {KN__VM_TANH, 0x1.62e42fefa39efp-7}, {KN__VM_TANH, 20},      {KN__VM_TANH, -20},
    {KN__VM_TANH, 0x1.62e42fefa39efp-2},
    {KN__VM_EXP2, 1024},                 {KN__VM_EXP2, 1025},    {KN__VM_EXP2, -1022},
    {KN__VM_EXP2, -1074},                {KN__VM_EXP2, -1075},   {KN__VM_EXP2, -1080},
    {KN__VM_EXP2, 0},                    {KN__VM_EXP2, 0.03125}, {KN__VM_EXP2, -0.03125},
    /* the logs' table (vmath_f64_log.h): x = 1, the entries next to it,
    ** mantissa 0.75 and 1.5, the smallest normal and denormal */
    {KN__VM_LOG, 1},                     {KN__VM_LOG, 0.96875},  {KN__VM_LOG, 1.0625},
    {KN__VM_LOG, 0.75},                  {KN__VM_LOG, 1.5},      {KN__VM_LOG, 0x1p-1022},
    {KN__VM_LOG, 0x1p-1074},             {KN__VM_LOG, 0x1.8p+1023},
    {KN__VM_LOG2, 1},                    {KN__VM_LOG2, 0.96875}, {KN__VM_LOG2, 1.0625},
    {KN__VM_LOG2, 1.5},                  {KN__VM_LOG2, 0x1p-1022}, {KN__VM_LOG2, 0x1p-1074},
    {KN__VM_LOG10, 1},                   {KN__VM_LOG10, 0.96875}, {KN__VM_LOG10, 1.0625},
    {KN__VM_LOG10, 10},                  {KN__VM_LOG10, 0.75},   {KN__VM_LOG10, 0x1p-1074},
    {KN__VM_LOG1P, 0},                   {KN__VM_LOG1P, -1},     {KN__VM_LOG1P, 0.0625},
    {KN__VM_LOG1P, -0.03125},            {KN__VM_LOG1P, 1},      {KN__VM_LOG1P, 0.5},
    {KN__VM_LOG1P, -0.25},               {KN__VM_LOG1P, 0x1p-53}, {KN__VM_LOG1P, 0x1p+53},
    /* sin, cos, tan (vmath_f64_trig.h): SLEEF's lanes beyond 2^20, quadrant
    ** edges (n pi/2 +- pi/4), multiples of pi/2 (r near 0) */
    {KN__VM_SIN, 0x1p20},                {KN__VM_SIN, -0x1p20},  {KN__VM_SIN, 0},
    {KN__VM_SIN, 0x1.921fb54442d18p-1},  {KN__VM_SIN, 0x1.921fb54442d18p+1}, /* pi/4, pi */
    {KN__VM_SIN, -0x1.2d97c7f3321d2p+2}, {KN__VM_SIN, 0x1.921fb54442d18p+16}, /* -3pi/2 */
    {KN__VM_COS, 0x1p20},                {KN__VM_COS, 0x1.921fb54442d18p+0}, /* pi/2 */
    {KN__VM_COS, -0x1.2d97c7f3321d2p+1}, {KN__VM_COS, 0x1.2d97c7f3321d2p+2}, /* 3pi/4 */
    {KN__VM_COS, 0},                     {KN__VM_COS, 0x1.921fb54442d18p+19},
    {KN__VM_TAN, 0x1p20},                {KN__VM_TAN, -0x1p20},  {KN__VM_TAN, 0},
    {KN__VM_TAN, 0x1.921fb54442d18p-1},  {KN__VM_TAN, 0x1.921fb54442d18p+0},
    {KN__VM_TAN, -0x1.2d97c7f3321d2p+1}, {KN__VM_TAN, 0x1.921fb54442d18p+1},
    /* asin, acos: 1/2 (the square-root branch), +-1 */
    {KN__VM_ASIN, 0.5},                  {KN__VM_ASIN, -0.5},    {KN__VM_ASIN, 1},
    {KN__VM_ASIN, -1},                   {KN__VM_ASIN, 0},       {KN__VM_ACOS, 0.5},
    {KN__VM_ACOS, -0.5},                 {KN__VM_ACOS, 1},       {KN__VM_ACOS, -1},
    {KN__VM_ACOS, 0},
    /* atan: 1 (1/|x|), the table's switches j/8 + 1/16 and 8/(j + 1/2), 2^60 */
    {KN__VM_ATAN, 1},                    {KN__VM_ATAN, -1},      {KN__VM_ATAN, 0},
    {KN__VM_ATAN, 0.0625},               {KN__VM_ATAN, 0.4375},  {KN__VM_ATAN, 0.8125},
    {KN__VM_ATAN, 16},                   {KN__VM_ATAN, -3.2},    {KN__VM_ATAN, 1.2307692307692308},
    {KN__VM_ATAN, 0x1p60},               {KN__VM_ATAN, -0x1p60},
};

Test(vmath, float64_kernels_at_branch_points) {
  enum { SIDE = 2048 };
  double x[2 * SIDE];
  for (int isa = 0; isa < KN__ISA_COUNT; isa++) {
    const kn__vmath *t = kn__vmath_table((kn__isa)isa);
    if (!t) continue;
    for (size_t b = 0; b < sizeof branch_points_f64 / sizeof branch_points_f64[0]; b++) {
      x[SIDE] = branch_points_f64[b].at;
      for (int i = SIDE + 1; i < 2 * SIDE; i++) x[i] = nextafter(x[i - 1], INFINITY);
      for (int i = SIDE - 1; i >= 0; i--) x[i] = nextafter(x[i + 1], -INFINITY);
      const ucase *c = case_of(branch_points_f64[b].op);
      cr_expect_eq(count_bad_f64(t, c, x, 2 * SIDE), 0, "%s %s near %a", t->name, c->name,
                   branch_points_f64[b].at);
    }
  }
}

/* exp, exp2, expm1, sinh, cosh and tanh over 2^20 uniform doubles in [-750,
** 750] and in [-2, 2] (the exp table's 16 entries, every scaling, both sinh
** formulas). */
Test(vmath, float64_kernels_dense) {
  const int64_t n = (int64_t)1 << 20;
  double *x = malloc((size_t)n * sizeof *x);
  cr_assert_not_null(x);
  for (int64_t i = 0; i < n; i++) x[i] = (i & 1) ? -750 + 1500 * urand() : -2 + 4 * urand();
  const kn__vmop ops[] = {KN__VM_EXP,  KN__VM_EXP2, KN__VM_EXPM1,
                          KN__VM_SINH, KN__VM_COSH, KN__VM_TANH};
  for (int isa = 0; isa < KN__ISA_COUNT; isa++) {
    const kn__vmath *t = kn__vmath_table((kn__isa)isa);
    if (!t) continue;
    for (int k = 0; k < 6; k++)
      cr_expect_eq(count_bad_f64(t, case_of(ops[k]), x, n), 0, "%s %s", t->name,
                   case_of(ops[k])->name);
  }
  free(x);
}

/* ---- the float64 logs on AVX-512 and AVX2 (vmath_f64_log.h): within 1 ULP ------------ */

/* |got - want| in ULPs of the double nearest want (fractional; want finite). */
static double ulp_err(double got, LD want) {
  double w = (double)want, a = fabs(w);
  double ulp = a < DBL_MIN ? 0x1p-1074 : ldexp(1, ilogb(a) - 52);
  return (double)fabsl((LD)got - want) / ulp;
}

/* The largest error of t's function op over x (finite results only; the
** special values are checked above); errors above log_above are logged as
** errors (which fails the run). */
static double max_ulp_err_over(const kn__vmath *t, kn__vmop op, const double *x, int64_t n,
                               double log_above) {
  const ucase *c = case_of(op);
  double *y = malloc((size_t)n * sizeof *y), worst = 0;
  cr_assert_not_null(y);
  t->f64[op](y, x, n);
  for (int64_t i = 0; i < n; i++) {
    LD want = c->ref((LD)x[i]);
    if (!isfinite((double)want)) continue;
    double e = ulp_err(y[i], want);
    if (e > worst) {
      worst = e;
      if (e > log_above) cr_log_error("%s(%a) = %a, want %a: %.3f ulps", c->name, x[i], y[i], (double)want, e);
    }
  }
  free(y);
  return worst;
}

static double max_ulp_err(const kn__vmath *t, kn__vmop op, const double *x, int64_t n) {
  return max_ulp_err_over(t, op, x, n, 1);
}

/* 2^20 doubles: random bit patterns over every positive finite double
** (denormals included), and for log1p also over (-1, 0); 2^18 of them in
** [0.9, 1.1], where the result is smallest; 8192 consecutive doubles from 1
** down and up. The largest error must stay at or below 1 ULP. */
static void logs_within_one_ulp(const kn__vmath *t) {
  const int64_t n = (int64_t)1 << 20;
  double *x = malloc((size_t)n * sizeof *x);
  cr_assert_not_null(x);
  const kn__vmop ops[] = {KN__VM_LOG, KN__VM_LOG2, KN__VM_LOG10, KN__VM_LOG1P};
  for (int k = 0; k < 4; k++) {
    for (int64_t i = 0; i < n; i++) {
      urand(); /* the generator's whole 64-bit state as a bit pattern */
      uint64_t b = rng % 0x7ff0000000000000ull;
      memcpy(&x[i], &b, sizeof b);
      if (ops[k] == KN__VM_LOG1P && (i & 3) == 1) x[i] = -urand();
      if ((i & 3) == 2) x[i] = 0.9 + 0.2 * urand();
      if (ops[k] == KN__VM_LOG1P && (i & 3) == 2) x[i] -= 1;
    }
    for (int64_t i = 0; i < 8192; i++) {
      x[i] = i == 0 ? (ops[k] == KN__VM_LOG1P ? 0x1p-60 : 1) : nextafter(x[i - 1], 0);
      x[8192 + i] = i == 0 ? (ops[k] == KN__VM_LOG1P ? 0x1p-60 : 1) : nextafter(x[8191 + i], 2);
    }
    double worst = max_ulp_err(t, ops[k], x, n);
    cr_log_info("%s float64 %s: max %.3f ulps", t->name, case_of(ops[k])->name, worst);
    cr_expect_leq(worst, 1.0, "%s %s: %.3f ulps", t->name, case_of(ops[k])->name, worst);
  }
  free(x);
}

/* AVX-512 sinh (vmath_f64.h, e^a and e^-a from one reduction) within 1.1
** ULP and cosh (E / 4 + 1 / E) within 1.5 ULP over 2^20 doubles: uniform in
** [-2, 2] and [-40, 40], and magnitudes log-uniform in [2^-20, 2^5]. */
Test(vmath, float64_sinh_cosh_accuracy) {
  const kn__vmath *t = kn__vmath_table(KN__ISA_AVX512);
  if (!t) cr_skip_test("no AVX-512 on this CPU (the other tables are SLEEF's, checked above)");
  const int64_t n = (int64_t)1 << 20;
  double *x = malloc((size_t)n * sizeof *x);
  cr_assert_not_null(x);
  for (int64_t i = 0; i < n; i++) {
    double u = urand();
    x[i] = (i % 3 == 0) ? -2 + 4 * u : (i % 3 == 1) ? -40 + 80 * u : ldexp(1 + u, (int)(i % 25) - 20);
  }
  const kn__vmop ops[] = {KN__VM_SINH, KN__VM_COSH};
  const double limit[] = {1.1, 1.5};
  for (int k = 0; k < 2; k++) {
    double worst = max_ulp_err_over(t, ops[k], x, n, limit[k]);
    cr_log_info("avx512 float64 %s: max %.3f ulps", case_of(ops[k])->name, worst);
    cr_expect_leq(worst, limit[k], "%s: %.3f ulps", case_of(ops[k])->name, worst);
  }
  free(x);
}

/* sin, cos, tan, asin, acos and atan of the AVX-512 table (vmath_f64_trig.h;
** the other tables are SLEEF's) within 1 ULP of the correctly rounded result over
** 2^20 doubles in each of several ranges: uniform in [-10, 10], [-2^20,
** 2^20] (mixed with SLEEF's lanes up to 2^21), [-1, 1] and log-uniform
** magnitudes in [2^-30, 2^30], and the doubles nearest k pi/2 (k < 2^20)
** with a few ULPs around them, where r is tiny. */
static int64_t count_bad_f64_at(const kn__vmath *t, const ucase *c, const double *x, int64_t n,
                                int max_ulps) {
  double *y = malloc((size_t)n * sizeof *y);
  cr_assert_not_null(y);
  t->f64[c->op](y, x, n);
  int64_t bad = 0, u;
  for (int64_t i = 0; i < n; i++)
    if (!within(y[i], c->ref((LD)x[i]), false, false, max_ulps, 1, &u) && bad++ < 3)
      cr_log_error("%s float64 %s(%a) = %a, want %a (%lld ulps)", t->name, c->name, x[i], y[i],
                   (double)c->ref((LD)x[i]), (long long)u);
  free(y);
  return bad;
}

static void fill_trig_range(double *x, int64_t n, int range) {
  for (int64_t i = 0; i < n; i++) {
    double u = urand();
    switch (range) {
    case 0: x[i] = -10 + 20 * u; break;
    case 1: x[i] = (-1 + 2 * u) * (i % 8 == 0 ? 0x1p21 : 0x1p20); break;
    case 2: x[i] = -1 + 2 * u; break;
    case 3: x[i] = ldexp(1 + u, (int)(i % 61) - 30) * ((i & 64) ? -1 : 1); break;
    default: { /* nearest k pi/2, then up to 8 doubles away */
      double k = floor(u * 0x1p20), v = k * 0x1.921fb54442d18p+0;
      for (int64_t s = (int64_t)(i % 17) - 8; s > 0; s--) v = nextafter(v, INFINITY);
      for (int64_t s = (int64_t)(i % 17) - 8; s < 0; s++) v = nextafter(v, -INFINITY);
      x[i] = (i & 1) ? -v : v;
    }
    }
  }
}

Test(vmath, float64_trig_dense) {
  const int64_t n = (int64_t)1 << 20;
  double *x = malloc((size_t)n * sizeof *x);
  cr_assert_not_null(x);
  const kn__vmop ops[] = {KN__VM_SIN, KN__VM_COS, KN__VM_TAN, KN__VM_ASIN, KN__VM_ACOS, KN__VM_ATAN};
  const kn__vmath *t = kn__vmath_table(KN__ISA_AVX512);
  if (!t) {
    free(x);
    cr_skip_test("no AVX-512 on this CPU (the other tables are SLEEF's, checked above)");
  }
  for (int range = 0; range < 5; range++) {
    fill_trig_range(x, n, range);
    for (int k = 0; k < 6; k++) {
      if (range == 4 && k >= 3) continue; /* k pi/2 is for sin, cos, tan */
      cr_expect_eq(count_bad_f64_at(t, case_of(ops[k]), x, n, 1), 0, "%s range %d",
                   case_of(ops[k])->name, range);
    }
  }
  free(x);
}

Test(vmath, float64_logs_within_one_ulp) {
  int tested = 0;
  for (int isa = KN__ISA_AVX2; isa <= KN__ISA_AVX512; isa++) {
    const kn__vmath *t = kn__vmath_table((kn__isa)isa);
    if (!t) continue;
    logs_within_one_ulp(t);
    tested++;
  }
  if (!tested) cr_skip_test("no AVX2");
}

/* ---- binary functions ------------------------------------------------------------ */

static LD r_gelu_bw(LD g, LD x) {
  LD cdf = 0.5L * (1 + erfl(x * 0.70710678118654752440L));
  LD pdf = expl(-0.5L * x * x) * 0.39894228040143267794L;
  return g * (cdf + x * pdf);
}

static void check_binary(const kn__vmath *t, bool f32) {
  int64_t n;
  double *a = make_inputs(&n, f32), *b = malloc((size_t)n * sizeof *b), *y = malloc((size_t)n * sizeof *y);
  float *af = malloc((size_t)n * sizeof *af), *bf = malloc((size_t)n * sizeof *bf);
  float *yf = malloc((size_t)n * sizeof *yf);
  for (int64_t i = 0; i < n; i++) { /* exponents in [-8, 8], every 4th an integer */
    double e = -8 + 16 * urand();
    b[i] = (i % 4 == 0) ? round(e) : (f32 ? (double)(float)e : e);
    af[i] = (float)a[i];
    bf[i] = (float)b[i];
  }
  for (int op = 0; op < 2; op++) {
    int64_t bad = 0;
    if (f32) t->f32b[op ? KN__VM_GELU_BW : KN__VM_POW](yf, af, bf, n);
    else t->f64b[op ? KN__VM_GELU_BW : KN__VM_POW](y, a, b, n);
    for (int64_t i = 0; i < n; i++) {
      /* pow(a, b) and gelu_bw(grad = a, x = b) */
      LD want = op ? r_gelu_bw((LD)a[i], (LD)b[i]) : powl((LD)a[i], (LD)b[i]);
      double got = f32 ? (double)yf[i] : y[i];
      int64_t u;
      if (!within(got, want, f32, op == 1, op == 1 ? 4 : 2, fabs(a[i]), &u) && bad++ < 3)
        cr_log_error("%s %s(%a, %a) = %a, want %a", t->name, op ? "gelu_bw" : "pow", a[i], b[i],
                     got, (double)want);
    }
    cr_expect_eq(bad, 0, "%s %s %s: %lld inputs out of bounds", t->name, f32 ? "f32" : "f64",
                 op ? "gelu_bw" : "pow", (long long)bad);
  }
  free(a);
  free(b);
  free(y);
  free(af);
  free(bf);
  free(yf);
}

Test(vmath, binary_within_ulp_bounds) {
  for (int isa = 0; isa < KN__ISA_COUNT; isa++) {
    const kn__vmath *t = kn__vmath_table((kn__isa)isa);
    if (!t) continue;
    check_binary(t, true);
    check_binary(t, false);
  }
}

/* ---- the public ops run the forced ISA's table ------------------------------------- */

/* x: 3 x 333 float32 values in [-6, 6]; xt = its transpose (strided). */
static kn_tensor *sweep(kn_dtype dt) {
  kn_tensor *x = kn_empty(KN_SHAPE(3, 333), dt);
  for (int64_t i = 0; i < 999; i++) {
    double v = -6 + 12.0 * (double)i / 998;
    if (dt == KN_FLOAT32) ((float *)kn_data(x))[i] = (float)v;
    else ((double *)kn_data(x))[i] = v;
  }
  return x;
}

/* Every element of got (any strides) bit-equal to table fn applied to src. */
static void expect_table(const kn__vmath *t, kn__vmop op, kn_tensor *src, kn_tensor *got,
                         const char *what) {
  kn_tensor *s = kn_contiguous(src), *g = kn_contiguous(got);
  cr_assert_not_null(g, "%s: %s", what, kn_last_error());
  int64_t n = kn_numel(s);
  bool f32 = kn_tensor_dtype(s) == KN_FLOAT32;
  double *want = malloc((size_t)n * sizeof *want);
  if (f32) t->f32[op]((float *)want, kn_data(s), n);
  else t->f64[op](want, kn_data(s), n);
  for (int64_t i = 0; i < n; i++) {
    bool same = f32 ? memcmp((float *)want + i, (float *)kn_data(g) + i, 4) == 0
                    : memcmp(want + i, (double *)kn_data(g) + i, 8) == 0;
    cr_assert(same, "%s on %s: element %lld differs from the %s table", what,
              f32 ? "float32" : "float64", (long long)i, t->name);
  }
  free(want);
}

Test(vmath, public_ops_run_the_forced_isa) {
  kn_scope_begin();
  for (int isa = 0; isa < KN__ISA_COUNT; isa++) {
    const kn__vmath *t = kn__vmath_table((kn__isa)isa);
    if (!t) {
      cr_assert_eq(kn__vmath_force((kn__isa)isa), KN_EINVAL);
      continue;
    }
    cr_assert_eq(kn__vmath_force((kn__isa)isa), KN_OK);
    cr_assert_eq(kn__vmath_get(), t);
    for (int dt = 0; dt < 2; dt++) {
      kn_tensor *x = sweep(dt ? KN_FLOAT64 : KN_FLOAT32), *xt = kn_transpose(x, 0, 1);
      for (int c = 0; c < NCASES; c++) {
        expect_table(t, cases[c].op, x, cases[c].public_op(x), cases[c].name);
        expect_table(t, cases[c].op, xt, cases[c].public_op(xt), cases[c].name);
      }
    }
  }
  cr_assert_eq(kn__vmath_force(KN__ISA_COUNT), KN_OK);
  cr_assert_eq(kn__vmath_get(), kn__vmath_table(kn__vmath_best()));
  kn_scope_end();
}

/* ---- softmax family on every ISA ---------------------------------------------------- */

Test(vmath, log_softmax_on_every_isa) {
  kn_scope_begin();
  for (int isa = 0; isa < KN__ISA_COUNT; isa++) {
    if (kn__vmath_force((kn__isa)isa) != KN_OK) continue;
    kn_tensor *x = sweep(KN_FLOAT32), *ls = kn_log_softmax(x, 1), *sm = kn_softmax(x, 1);
    cr_assert_not_null(ls, "%s", kn_last_error());
    const float *xv = kn_data(x), *lv = kn_data(ls), *sv = kn_data(sm);
    for (int64_t r = 0; r < 3; r++) {
      LD mx = -INFINITY, sum = 0;
      for (int64_t k = 0; k < 333; k++) mx = fmaxl(mx, xv[r * 333 + k]);
      for (int64_t k = 0; k < 333; k++) sum += expl(xv[r * 333 + k] - mx);
      for (int64_t k = 0; k < 333; k++) {
        LD want = xv[r * 333 + k] - mx - logl(sum);
        cr_assert(fabsl(lv[r * 333 + k] - want) <= 4e-6L * (1 + fabsl(want)),
                  "%s log_softmax[%lld][%lld] = %.9g, want %.9Lg", kn__isa_name((kn__isa)isa),
                  (long long)r, (long long)k, lv[r * 333 + k], want);
        cr_assert(fabsl(sv[r * 333 + k] - expl(want)) <= 2e-7L * (1 + expl(want)),
                  "%s softmax[%lld][%lld]", kn__isa_name((kn__isa)isa), (long long)r,
                  (long long)k);
      }
    }
  }
  kn__vmath_force(KN__ISA_COUNT);
  kn_scope_end();
}

/* softmax and log_softmax over the rows of float32 x (2-D, contiguous) on
** every ISA against the float64 path (which runs through line buffers): NaN
** where it has NaN, infinities exact, else within 2e-6 relative. */
static void softmax_rows_match_float64(kn_tensor *x) {
  const int64_t n = kn_numel(x), len = kn_size(x, 1);
  kn_tensor *x64 = kn_to(x, KN_FLOAT64);
  for (int isa = 0; isa < KN__ISA_COUNT; isa++) {
    if (kn__vmath_force((kn__isa)isa) != KN_OK) continue;
    for (int lg = 0; lg < 2; lg++) {
      kn_tensor *got = lg ? kn_log_softmax(x, 1) : kn_softmax(x, 1);
      kn_tensor *want = lg ? kn_log_softmax(x64, 1) : kn_softmax(x64, 1);
      const float *g = kn_data(got);
      const double *w = kn_data(want);
      for (int64_t k = 0; k < n; k++) {
        bool ok = isnan(w[k]) ? isnan(g[k])
                  : isinf(w[k]) ? g[k] == (float)w[k]
                                : fabs(g[k] - w[k]) <= 2e-6 * (1 + fabs(w[k]));
        cr_assert(ok, "%s %s[%lld][%lld] = %g, want %g", kn__isa_name((kn__isa)isa),
                  lg ? "log_softmax" : "softmax", (long long)(k / len), (long long)(k % len),
                  (double)g[k], w[k]);
      }
    }
  }
  kn__vmath_force(KN__ISA_COUNT);
}

/* Special lines through the contiguous float32 softmax rows of every ISA
** agree with the float64 path (which runs through line buffers): a -inf
** element, a NaN (whole line NaN), an all -inf line, huge values. */
Test(vmath, softmax_special_lines_on_every_isa) {
  kn_scope_begin();
  const int64_t n = 37;
  kn_tensor *x = kn_empty(KN_SHAPE(4, 37), KN_FLOAT32);
  float *xv = kn_data(x);
  for (int64_t k = 0; k < 4 * n; k++) xv[k] = (float)((k * 7) % 23) - 11.0f;
  xv[3] = -INFINITY;
  xv[n + 20] = NAN;
  for (int64_t k = 0; k < n; k++) xv[2 * n + k] = -INFINITY;
  xv[3 * n + 1] = 1e30f;
  xv[3 * n + 2] = -1e30f;
  xv[3 * n + 36] = 1e30f;
  softmax_rows_match_float64(x);
  kn_scope_end();
}

/* The row maximum of the contiguous float32 softmax (four running maxima
** over blocks of four vectors, then single vectors, then a scalar tail) at
** every position of lines of 200, on every ISA: each line's largest
** element (100 above the others) moves one place further, so every running maximum, the single
** vectors and the tail each hold it once; a NaN inside the four-vector
** part still makes its line NaN. Against the float64 path. */
Test(vmath, softmax_row_maximum_at_every_position) {
  kn_scope_begin();
  const int64_t n = 200;
  kn_tensor *x = kn_empty(KN_SHAPE(201, 200), KN_FLOAT32);
  float *xv = kn_data(x);
  for (int64_t r = 0; r < 201; r++)
    for (int64_t k = 0; k < n; k++) xv[r * n + k] = (float)((k * 13 + r) % 29) / 4.0f - 30.0f;
  /* line r's max at r, far enough above the rest that exp(x - m) of a
  ** smaller m overflows: a maximum missed shows as inf or NaN */
  for (int64_t r = 0; r < n; r++) xv[r * n + r] = 100.0f + (float)(r % 3);
  xv[200 * n + 70] = NAN;
  softmax_rows_match_float64(x); /* the last line is NaN in float64 too */
  kn_scope_end();
}

/* The backward rows of contiguous float32 lines (the table's
** softmax_bwd_f32, lines of 333: a vector tail) on every ISA against the
** formulas in long double from the same float inputs, and against the
** line-buffer path of the same op over transposed (strided) lines. */
Test(vmath, softmax_backward_rows_on_every_isa) {
  kn_scope_begin();
  const int64_t n = 333;
  kn_generator *gen = kn_generator_new(7);
  kn_tensor *x = kn_randn(KN_SHAPE(3, 333), gen, KN_FLOAT32);
  kn_tensor *g = kn_randn(KN_SHAPE(3, 333), gen, KN_FLOAT32);
  kn_tensor *y[2] = {kn_softmax(x, 1), kn_log_softmax(x, 1)};
  kn_tensor *gt = kn_contiguous(kn_transpose(g, 0, 1));
  for (int isa = 0; isa < KN__ISA_COUNT; isa++) {
    if (kn__vmath_force((kn__isa)isa) != KN_OK) continue;
    for (int lg = 0; lg < 2; lg++) {
      kn_tensor *got = lg ? kn_log_softmax_backward_data(g, y[lg], 1)
                          : kn_softmax_backward_data(g, y[lg], 1);
      kn_tensor *yt = kn_contiguous(kn_transpose(y[lg], 0, 1));
      kn_tensor *strided = lg ? kn_log_softmax_backward_data(kn_transpose(gt, 0, 1),
                                                             kn_transpose(yt, 0, 1), 1)
                              : kn_softmax_backward_data(kn_transpose(gt, 0, 1),
                                                         kn_transpose(yt, 0, 1), 1);
      cr_assert(got && strided, "%s", kn_last_error());
      kn_tensor *sc = kn_contiguous(strided);
      const float *gv = kn_data(g), *yv = kn_data(y[lg]), *o = kn_data(got), *so = kn_data(sc);
      for (int64_t r = 0; r < 3; r++) {
        LD s = 0;
        for (int64_t k = 0; k < n; k++)
          s += lg ? (LD)gv[r * n + k] : (LD)gv[r * n + k] * yv[r * n + k];
        for (int64_t k = 0; k < n; k++) {
          int64_t i = r * n + k;
          LD want = lg ? gv[i] - expl(yv[i]) * s : yv[i] * (gv[i] - s);
          cr_assert(fabsl(o[i] - want) <= 2e-6L * (1 + fabsl(want)) &&
                        fabsl(so[i] - want) <= 2e-6L * (1 + fabsl(want)),
                    "%s %s_backward[%lld][%lld] = %.9g (strided %.9g), want %.9Lg",
                    kn__isa_name((kn__isa)isa), lg ? "log_softmax" : "softmax", (long long)r,
                    (long long)k, o[i], so[i], want);
        }
      }
    }
  }
  kn__vmath_force(KN__ISA_COUNT);
  kn_generator_free(gen);
  kn_scope_end();
}

/* log_softmax's backward row (the table's softmax_bwd_f32) bit for bit as
** (g - e * sh) - e * sl with e the table's own array exp of y, elementwise:
** rows of 1000 (AVX-512: seven blocks of eight vectors whose exps are
** interleaved, then single vectors and a padded tail). The gradients are
** multiples of 1/64 and a few of 3 * 2^-30, whose double sum is exact in
** any order, so that sh and sl (not 0) are known without the kernel's
** summation order. */
Test(vmath, log_softmax_backward_bits_from_the_table_exp) {
  kn_scope_begin();
  const int64_t n = 1000, M = 4;
  kn_generator *gen = kn_generator_new(5);
  kn_tensor *y = kn_log_softmax(kn_randn(KN_SHAPE(4, 1000), gen, KN_FLOAT32), 1);
  kn_tensor *g = kn_empty(KN_SHAPE(4, 1000), KN_FLOAT32);
  float *gv = kn_data(g), *e = malloc((size_t)n * sizeof *e);
  const float *yv = kn_data(y);
  cr_assert(y && g && e);
  for (int64_t i = 0; i < M * n; i++) /* a few tiny ones: sl is not 0 */
    gv[i] = i % 97 == 5 ? 0x3p-30f : (float)((i * 37) % 41 - 20) / 64.0f;
  for (int isa = 0; isa < KN__ISA_COUNT; isa++) {
    if (kn__vmath_force((kn__isa)isa) != KN_OK) continue;
    kn_tensor *got = kn_log_softmax_backward_data(g, y, 1);
    cr_assert_not_null(got, "%s", kn_last_error());
    const float *o = kn_data(got);
    for (int64_t r = 0; r < M; r++) {
      double s = 0;
      for (int64_t k = 0; k < n; k++) s += gv[r * n + k];
      const float sh = (float)s, sl = (float)(s - (double)sh);
      kn__vmath_get()->f32[KN__VM_EXP](e, yv + r * n, n);
      for (int64_t k = 0; k < n; k++) {
        float want = (gv[r * n + k] - e[k] * sh) - e[k] * sl;
        cr_assert(!memcmp(&want, o + r * n + k, sizeof want),
                  "%s log_softmax_backward[%lld][%lld] = %a, want %a",
                  kn__isa_name((kn__isa)isa), (long long)r, (long long)k, o[r * n + k], want);
      }
    }
  }
  kn__vmath_force(KN__ISA_COUNT);
  free(e);
  kn_generator_free(gen);
  kn_scope_end();
}

/* The softmax backward's gradient in float from the split sum (the table's
** softmax_bwd_f32, ops/vmath.h) on every ISA, 300 rows of 1000 (peaked
** rows: a few large probabilities, the rest tiny) against y * (g - s) in
** long double from the same float inputs: within 2.5 ULP of the exact
** value everywhere (0.5 in double; a gradient from s rounded to float alone
** misses it by about 2^-24 |y s| where g cancels s). */
Test(vmath, softmax_backward_within_ulps_on_every_isa) {
  kn_scope_begin();
  const int64_t n = 1000, M = 300;
  kn_generator *gen = kn_generator_new(11);
  kn_tensor *x = kn_mul_scalar(kn_randn(KN_SHAPE(300, 1000), gen, KN_FLOAT32), kn_float(3));
  kn_tensor *g = kn_randn(KN_SHAPE(300, 1000), gen, KN_FLOAT32);
  float *gv = kn_data(g);
  for (int64_t r = 0; r < M; r += 3) /* rows where g is close to the sum */
    for (int64_t k = 0; k < n; k++) gv[r * n + k] = 1.0f + gv[r * n + k] * 1e-3f;
  kn_tensor *y = kn_softmax(x, 1);
  const float *yv = kn_data(y);
  for (int isa = 0; isa < KN__ISA_COUNT; isa++) {
    if (kn__vmath_force((kn__isa)isa) != KN_OK) continue;
    kn_tensor *got = kn_softmax_backward_data(g, y, 1);
    cr_assert_not_null(got, "%s", kn_last_error());
    const float *o = kn_data(got);
    double worst = 0;
    int64_t at = -1;
    for (int64_t r = 0; r < M; r++) {
      LD s = 0;
      for (int64_t k = 0; k < n; k++) s += (LD)gv[r * n + k] * yv[r * n + k];
      for (int64_t k = 0; k < n; k++) {
        int64_t i = r * n + k;
        LD want = yv[i] * (gv[i] - s);
        float wf = (float)want;
        if (wf == 0 || !isfinite(wf)) continue;
        double ulp = (double)(nextafterf(fabsf(wf), INFINITY) - fabsf(wf));
        double e = (double)fabsl((LD)o[i] - want) / ulp;
        if (e > worst) worst = e, at = i;
      }
    }
    cr_expect(worst <= 2.5, "%s softmax_backward: %.2f ULP at %lld (got %a)",
              kn__isa_name((kn__isa)isa), worst, (long long)at, at < 0 ? 0 : o[at]);
  }
  kn__vmath_force(KN__ISA_COUNT);
  kn_generator_free(gen);
  kn_scope_end();
}

/* softplus (beta x, exp, log1p from the table, in blocks) on every ISA
** against the wide-type formula: composite bounds. */
Test(vmath, softplus_on_every_isa) {
  kn_scope_begin();
  for (int dt = 0; dt < 2; dt++) {
    bool f32 = dt == 0;
    int64_t n;
    double *in = make_inputs(&n, f32);
    kn_tensor *x = kn_empty(KN_SHAPE(n), f32 ? KN_FLOAT32 : KN_FLOAT64);
    for (int64_t i = 0; i < n; i++) {
      if (f32) ((float *)kn_data(x))[i] = (float)in[i];
      else ((double *)kn_data(x))[i] = in[i];
    }
    for (int isa = 0; isa < KN__ISA_COUNT; isa++) {
      if (kn__vmath_force((kn__isa)isa) != KN_OK) continue;
      kn_tensor *y = kn_softplus(x, kn_float(1.5), kn_int(20));
      cr_assert_not_null(y, "%s", kn_last_error());
      int64_t bad = 0;
      for (int64_t i = 0; i < n; i++) {
        LD bx = 1.5L * (LD)in[i], want = bx > 20 ? (LD)in[i] : log1pl(expl(bx)) / 1.5L;
        double got = f32 ? (double)((float *)kn_data(y))[i] : ((double *)kn_data(y))[i];
        int64_t u;
        if (!within(got, want, f32, true, 4, 1, &u) && bad++ < 3)
          cr_log_error("%s softplus(%a) = %a, want %a", kn__isa_name((kn__isa)isa), in[i], got,
                       (double)want);
      }
      cr_expect_eq(bad, 0, "%s %s softplus: %lld inputs out of bounds", kn__isa_name((kn__isa)isa),
                   f32 ? "f32" : "f64", (long long)bad);
    }
    free(in);
  }
  kn__vmath_force(KN__ISA_COUNT);
  kn_scope_end();
}

/* ---- large outputs: streaming stores (vmath_isa.h, KN_VM_NT_MIN) -------------------- */

/* Unary functions of every table (all share the array loop; these cover a
** bare instruction, kiln's own kernels and SLEEF's) over an output of more
** than 8 MB, written at an address one element past a vector boundary (a
** head before the aligned streaming stores, then a tail), out of place and
** in place: the same bits as the same function over blocks of 1000 elements
** (plain stores). */
Test(vmath, large_outputs_give_the_bits_of_small_blocks) {
  const int64_t n = ((int64_t)1 << 21) + 13, blk = 1000; /* 8 MB + 52 bytes of float */
  float *x = malloc((size_t)n * sizeof *x), *big = malloc((size_t)(n + 1) * sizeof *big);
  float *ref = malloc((size_t)n * sizeof *ref);
  double *xd = malloc((size_t)(n / 2 + 1) * sizeof *xd), *bigd = malloc((size_t)(n / 2 + 2) * sizeof *bigd);
  double *refd = malloc((size_t)(n / 2 + 1) * sizeof *refd);
  cr_assert(x && big && ref && xd && bigd && refd);
  const int64_t nd = n / 2 + 1; /* 8 MB + 8 bytes of double */
  for (int64_t i = 0; i < n; i++) x[i] = (float)(-12 + 24 * urand());
  for (int64_t i = 0; i < nd; i++) xd[i] = -12 + 24 * urand();
  x[5] = NAN, x[77] = -0.0f, x[n - 1] = INFINITY, xd[3] = -INFINITY;
  for (int isa = 0; isa < KN__ISA_COUNT; isa++) {
    const kn__vmath *t = kn__vmath_table((kn__isa)isa);
    if (!t) continue;
    const kn__vmop ops[] = {KN__VM_SQRT, KN__VM_EXP, KN__VM_GELU, KN__VM_ATAN};
    for (size_t k = 0; k < sizeof ops / sizeof ops[0]; k++) {
      kn__vmop op = ops[k];
      for (int64_t i = 0; i < n; i += blk) t->f32[op](ref + i, x + i, n - i < blk ? n - i : blk);
      t->f32[op](big + 1, x, n);
      cr_expect(memcmp(big + 1, ref, (size_t)n * sizeof *ref) == 0, "%s float32 op %d", t->name, op);
      memcpy(big, x, (size_t)n * sizeof *x);
      t->f32[op](big, big, n);
      cr_expect(memcmp(big, ref, (size_t)n * sizeof *ref) == 0, "%s float32 op %d in place",
                t->name, op);
      for (int64_t i = 0; i < nd; i += blk) t->f64[op](refd + i, xd + i, nd - i < blk ? nd - i : blk);
      t->f64[op](bigd + 1, xd, nd);
      cr_expect(memcmp(bigd + 1, refd, (size_t)nd * sizeof *refd) == 0, "%s float64 op %d",
                t->name, op);
    }
    for (int64_t i = 0; i < n; i += blk)
      t->softplus_f32(ref + i, x + i, n - i < blk ? n - i : blk, 1, 20);
    t->softplus_f32(big + 1, x, n, 1, 20);
    cr_expect(memcmp(big + 1, ref, (size_t)n * sizeof *ref) == 0, "%s softplus", t->name);
  }
  free(x), free(big), free(ref), free(xd), free(bigd), free(refd);
}

/* The fused float32 softplus of every table (kn__vm_softplus_f32): against
** the formula in long double (composite bounds), special values exact
** (softplus(-0) = log 2, +inf stays, -inf gives +0, NaN stays), with beta 1
** (no division) and 0.75, thresholds 20 and 1; and bit for bit what the
** eager op gives over a strided input (the block path through the table's
** exp and log1p). */
Test(vmath, fused_softplus_f32) {
  kn_scope_begin();
  int64_t n;
  double *in = make_inputs(&n, true);
  kn_tensor *x2 = kn_empty(KN_SHAPE(n, 2), KN_FLOAT32);
  float *xv = kn_data(x2), *y = malloc((size_t)n * sizeof *y), *xf = malloc((size_t)n * sizeof *xf);
  cr_assert(y && xf);
  for (int64_t i = 0; i < n; i++) xf[i] = xv[2 * i] = xv[2 * i + 1] = (float)in[i];
  kn_tensor *col = kn_select(x2, 1, 0); /* stride 2: the block path */
  const float betas[] = {1, 0.75f}, thrs[] = {20, 1};
  for (int isa = 0; isa < KN__ISA_COUNT; isa++) {
    const kn__vmath *t = kn__vmath_table((kn__isa)isa);
    if (!t) continue;
    kn__vmath_force((kn__isa)isa);
    for (int k = 0; k < 2; k++) {
      t->softplus_f32(y, xf, n, betas[k], thrs[k]);
      int64_t bad = 0, u;
      for (int64_t i = 0; i < n; i++) {
        LD bx = (LD)betas[k] * (LD)(float)in[i];
        LD want = bx > thrs[k] ? (LD)(float)in[i] : log1pl(expl(bx)) / (LD)betas[k];
        if (!within(y[i], want, true, true, 4, 1, &u) && bad++ < 3)
          cr_log_error("%s softplus(%a, beta %g) = %a, want %a", t->name, in[i],
                       (double)betas[k], y[i], (double)want);
      }
      cr_expect_eq(bad, 0, "%s softplus beta %g: %lld out of bounds", t->name, (double)betas[k],
                   (long long)bad);
      kn_tensor *s = kn_softplus(col, kn_float(betas[k]), kn_float(thrs[k]));
      cr_assert_not_null(s, "%s", kn_last_error());
      cr_expect(memcmp(kn_data(kn_contiguous(s)), y, (size_t)n * sizeof *y) == 0,
                "%s softplus beta %g: strided and fused differ", t->name, (double)betas[k]);
    }
    float sp[4] = {-0.0f, INFINITY, -INFINITY, NAN}, so[4];
    t->softplus_f32(so, sp, 4, 1, 20);
    cr_expect(so[0] == (float)log(2.0) && so[1] == INFINITY && so[2] == 0 && !signbit(so[2]) &&
                  isnan(so[3]),
              "%s softplus(-0, inf, -inf, nan) = %a %a %a %a", t->name, so[0], so[1], so[2], so[3]);
  }
  kn__vmath_force(KN__ISA_COUNT);
  free(in), free(y), free(xf);
  kn_scope_end();
}
