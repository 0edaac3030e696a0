/*
** bench_unary.c: transcendental pointwise kernels against a scalar libm loop
** in the same run (4M float32 elements, one thread):
**   BENCH_INFO vector_isa <the ISA whose vector-math table kiln picked>
**   BENCH unary_<op>_ms <kiln's time>
**   RATIO unary_<op>_vs_scalar <libm loop time / kiln time> (goal >= 1)
** The real target is to be at least as fast as numpy and torch on the same
** machine; compare by hand with python3-numpy / python3-torch.
** Each time is the median of several repetitions of thread CPU time.
*/
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "kiln/kiln.h"

#include "bench_util.h"
#include "ops/vmath.h"

#define REPS 7
#define N ((int64_t)1 << 22)

static volatile float sink;

/* The scalar references: one libm call (or formula) per element. */
static float s_sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }
static float s_silu(float x) { return x / (1.0f + expf(-x)); }
static float s_gelu(float x) { return 0.5f * x * (1.0f + erff(x * (float)M_SQRT1_2)); }
static float s_gelu_tanh(float x) {
  return 0.5f * x * (1.0f + tanhf(0.7978845608f * (x + 0.044715f * x * x * x)));
}
static float s_rsqrt(float x) { return 1.0f / sqrtf(x); }
static float s_softplus(float x) { return x > 20.0f ? x : log1pf(expf(x)); }
static kn_tensor *k_softplus(kn_tensor *x) { return kn_softplus(x, kn_int(1), kn_int(20)); }
static kn_tensor *k_gelu(kn_tensor *x) { return kn_gelu(x, KN_GELU_NONE); }
static kn_tensor *k_gelu_tanh(kn_tensor *x) { return kn_gelu(x, KN_GELU_TANH); }

typedef struct ucase {
  const char *name;
  kn_tensor *(*op)(kn_tensor *);
  float (*scalar)(float);
  float lo, hi; /* input range */
} ucase;

static const ucase cases[] = {
    {"exp", kn_exp, expf, -10, 10},          {"expm1", kn_expm1, expm1f, -10, 10},
    {"exp2", kn_exp2, exp2f, -10, 10},       {"log", kn_log, logf, 0.01f, 100},
    {"log1p", kn_log1p, log1pf, 0, 100},     {"log2", kn_log2, log2f, 0.01f, 100},
    {"sin", kn_sin, sinf, -10, 10},          {"cos", kn_cos, cosf, -10, 10},
    {"tan", kn_tan, tanf, -1.5f, 1.5f},      {"tanh", kn_tanh, tanhf, -5, 5},
    {"erf", kn_erf, erff, -3, 3},            {"sqrt", kn_sqrt, sqrtf, 0, 100},
    {"rsqrt", kn_rsqrt, s_rsqrt, 0.01f, 100}, {"sigmoid", kn_sigmoid, s_sigmoid, -10, 10},
    {"silu", kn_silu, s_silu, -10, 10},      {"gelu", k_gelu, s_gelu, -5, 5},
    {"gelu_tanh", k_gelu_tanh, s_gelu_tanh, -5, 5}, {"log10", kn_log10, log10f, 0.01f, 100},
    {"sinh", kn_sinh, sinhf, -5, 5},         {"cosh", kn_cosh, coshf, -5, 5},
    {"asin", kn_asin, asinf, -1, 1},         {"acos", kn_acos, acosf, -1, 1},
    {"atan", kn_atan, atanf, -10, 10},       {"erfc", kn_erfc, erfcf, -3, 3},
    {"softplus", k_softplus, s_softplus, -10, 30},
};

static void bench_case(const ucase *c, float *y) {
  kn_tensor *x = kn_empty(KN_SHAPE(N), KN_FLOAT32);
  float *xv = kn_data(x);
  for (int64_t i = 0; i < N; i++) xv[i] = c->lo + (c->hi - c->lo) * (float)((i * 7919) % N) / N;
  double tk[REPS], ts[REPS];
  /* kiln's reps back to back, then the scalar loop's: alternating them
  ** would make each start with the other's data in the caches */
  for (int r = 0; r < REPS; r++) {
    double t0 = kn_bench_cpu_s();
    kn_tensor *out = c->op(x);
    tk[r] = kn_bench_cpu_s() - t0;
    if (!out) {
      fprintf(stderr, "bench_unary: %s failed: %s\n", c->name, kn_last_error());
      exit(1);
    }
    sink = ((float *)kn_data(out))[r];
    kn_release(out);
  }
  for (int r = 0; r < REPS; r++) {
    double t0 = kn_bench_cpu_s();
    for (int64_t i = 0; i < N; i++) y[i] = c->scalar(xv[i]);
    ts[r] = kn_bench_cpu_s() - t0;
    sink = y[r];
  }
  double mk = kn_bench_median(tk, REPS), ms = kn_bench_median(ts, REPS);
  printf("BENCH unary_%s_ms %.2f ms (scalar libm %.2f ms)\n", c->name, mk * 1e3, ms * 1e3);
  printf("RATIO unary_%s_vs_scalar %.2f (goal >= 1)\n", c->name, ms / mk);
  kn_release(x);
}

int main(void) {
  omp_set_num_threads(1);
  printf("BENCH_INFO vector_isa %s\n", kn__vmath_get()->name);
  printf("BENCH_INFO unary_size %lld float32 elements, 1 thread, median of %d\n", (long long)N,
         REPS);
  float *y = malloc((size_t)N * sizeof *y);
  if (!y) return 1;
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) bench_case(&cases[i], y);
  free(y);
  return 0;
}
