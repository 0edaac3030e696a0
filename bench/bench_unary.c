/*
** bench_unary.c: float32 transcendental pointwise ops, one thread, 4M
** elements, against a scalar libm loop, numpy and torch on the same inputs:
**   BENCH_INFO vector_isa <the ISA whose vector-math table kiln picked>
**   BENCH unary_<op>_ms <kiln's time> (scalar libm <time>)
**   RATIO unary_<op>_vs_scalar <libm loop time / kiln time>
**   BENCH unary_<op>_numpy_ms, unary_<op>_torch_ms
**   RATIO unary_<op>_vs_numpy <numpy time / kiln time>
**   RATIO unary_<op>_vs_torch <torch time / kiln time>
** The goals (bench/goals.txt) are >= 1 for each ratio. numpy and torch are
** Debian's python3-numpy and python3-torch (the /usr/bin/python3 the
** other benchmarks use), timed by a Python script in the same run: without
** them the bench says so and prints no vs_numpy/vs_torch line. numpy has
** no erf, erfc, rsqrt, sigmoid, silu, gelu or softplus: those ops print no
** vs_numpy line. Inputs are the same array in the three: a deterministic
** spread over each op's range (computed exactly in double, rounded to
** float32, the same in C and Python; a checksum compares them), or for
** log1p_absnormal |N(0,1)| samples written to a file Python reads.
** Times are thread CPU time: kiln's includes its op call and output
** allocation, numpy's and torch's a call into a preallocated output (out=)
** where the function takes one. Kiln, numpy and torch take turns (Python
** runs beside the benchmark and times its calls on request), REPS turns
** after a warm-up one; a turn is TURN calls in a row of which the fastest
** counts, and each time printed is the median over the turns. Timed one
** after the other, 10 s apart, ratios moved 0.8-1.6x between runs on a
** shared 2-vCPU VM whose speed changes from second to second; in turns
** the three see the same moments, and the fastest of a turn drops the
** calls slowed by the other process's work before them (kiln's sin: 3.3
** ms for a call after other work, 2.1 for calls in a row).
*/
#include <math.h>
#include <omp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "kiln/kiln.h"

#include "bench_util.h"
#include "ops/vmath.h"

#define REPS 11
#define TURN 3 /* calls of one op in a turn, the fastest timed */
#define N ((int64_t)1 << 22)
#define CHECK_MOD 1000000007ULL

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
  float lo, hi;        /* input range; lo > hi: |N(0,1)| samples */
  const char *numpy;   /* numpy's function (called with out=), or "" */
  const char *torch;   /* a Python expression of x and o (the output) */
} ucase;

#define TO(f) "torch." f "(x, out=o)"
static const ucase cases[] = {
    {"exp", kn_exp, expf, -10, 10, "exp", TO("exp")},
    {"expm1", kn_expm1, expm1f, -10, 10, "expm1", TO("expm1")},
    {"exp2", kn_exp2, exp2f, -10, 10, "exp2", TO("exp2")},
    {"log", kn_log, logf, 0.01f, 100, "log", TO("log")},
    {"log1p", kn_log1p, log1pf, 0, 100, "log1p", TO("log1p")},
    {"log1p_absnormal", kn_log1p, log1pf, 1, 0, "log1p", TO("log1p")},
    {"log2", kn_log2, log2f, 0.01f, 100, "log2", TO("log2")},
    {"log10", kn_log10, log10f, 0.01f, 100, "log10", TO("log10")},
    {"sin", kn_sin, sinf, -10, 10, "sin", TO("sin")},
    {"cos", kn_cos, cosf, -10, 10, "cos", TO("cos")},
    {"tan", kn_tan, tanf, -1.5f, 1.5f, "tan", TO("tan")},
    {"tanh", kn_tanh, tanhf, -5, 5, "tanh", TO("tanh")},
    {"sinh", kn_sinh, sinhf, -5, 5, "sinh", TO("sinh")},
    {"cosh", kn_cosh, coshf, -5, 5, "cosh", TO("cosh")},
    {"asin", kn_asin, asinf, -1, 1, "arcsin", TO("asin")},
    {"acos", kn_acos, acosf, -1, 1, "arccos", TO("acos")},
    {"atan", kn_atan, atanf, -10, 10, "arctan", TO("atan")},
    {"sqrt", kn_sqrt, sqrtf, 0, 100, "sqrt", TO("sqrt")},
    {"rsqrt", kn_rsqrt, s_rsqrt, 0.01f, 100, "", TO("rsqrt")},
    {"erf", kn_erf, erff, -3, 3, "", TO("erf")},
    {"erfc", kn_erfc, erfcf, -3, 3, "", TO("erfc")},
    {"sigmoid", kn_sigmoid, s_sigmoid, -10, 10, "", TO("sigmoid")},
    {"silu", kn_silu, s_silu, -10, 10, "", "F.silu(x)"},
    {"gelu", k_gelu, s_gelu, -5, 5, "", "F.gelu(x)"},
    {"gelu_tanh", k_gelu_tanh, s_gelu_tanh, -5, 5, "", "F.gelu(x, approximate='tanh')"},
    {"softplus", k_softplus, s_softplus, -10, 30, "", "F.softplus(x)"},
};
#define NCASES ((int)(sizeof cases / sizeof cases[0]))

/* The Python side: a process that builds each case's input as kiln does
** (the spread computed the same way, or the file), answers "case <i>" with
** the input's checksum and "rep" with one numpy and one torch call's thread
** CPU time (-1 for no numpy function), so that the three are timed in
** turns. */
static const char py_body[] =
    "import sys, time, numpy as np, torch\n"
    "import torch.nn.functional as F\n"
    "torch.set_num_threads(1)\n"
    "k = (np.arange(N, dtype=np.int64) * 7919) % N\n"
    "def setup(lo, w, path, npf, tf):\n"
    "    if path: x = np.fromfile(path, dtype=np.float32)\n"
    "    else: x = (np.float64(np.float32(lo)) + np.float64(np.float32(w)) * k / N)"
    ".astype(np.float32)\n"
    "    cs = int(x.view(np.uint32).sum(dtype=np.uint64)) % M\n"
    "    o = np.empty_like(x)\n"
    "    fn = (lambda: getattr(np, npf)(x, out=o)) if npf else None\n"
    "    env = {'torch': torch, 'F': F, 'x': torch.from_numpy(x), 'o': torch.from_numpy(o)}\n"
    "    return cs, fn, eval('lambda: ' + tf, env)\n"
    "def once(f):\n"
    "    if f is None: return -1.0\n"
    "    b = 1e9\n"
    "    for q in range(T):\n"
    "        t0 = time.thread_time(); f(); b = min(b, time.thread_time() - t0)\n"
    "    return b\n"
    "fn = ft = None\n"
    "for line in sys.stdin:\n"
    "    a = line.split()\n"
    "    if a[0] == 'case':\n"
    "        cs, fn, ft = setup(*cases[int(a[1])]); print(cs, flush=True)\n"
    "    else: print(once(fn), once(ft), flush=True)\n";

static uint64_t checksum(const float *x) {
  uint64_t s = 0;
  for (int64_t i = 0; i < N; i++) {
    uint32_t b;
    memcpy(&b, &x[i], sizeof b);
    s += b;
  }
  return s % CHECK_MOD;
}

/* |N(0,1)| by Box-Muller over a fixed xorshift stream. */
static void fill_absnormal(float *x) {
  uint64_t s = 0x9E3779B97F4A7C15ULL;
  for (int64_t i = 0; i < N; i++) {
    double u[2];
    for (int j = 0; j < 2; j++) {
      s ^= s << 13, s ^= s >> 7, s ^= s << 17;
      u[j] = ((double)(s >> 11) + 0.5) / 9007199254740992.0;
    }
    x[i] = (float)fabs(sqrt(-2 * log(u[0])) * cos(2 * M_PI * u[1]));
  }
}

/* The spread over [lo, hi): exact in double up to the one rounding of the
** sum (w has 24 bits, the index 22), so Python computes the same floats. */
static void fill_spread(float *x, float lo, float hi) {
  float w = hi - lo;
  for (int64_t i = 0; i < N; i++)
    x[i] = (float)((double)lo + (double)w * (double)((i * 7919) % N) / (double)N);
}

static kn_tensor *input_of(const ucase *c) {
  kn_tensor *x = kn_empty(KN_SHAPE(N), KN_FLOAT32);
  if (!x) return NULL;
  if (c->lo > c->hi) fill_absnormal(kn_data(x));
  else fill_spread(kn_data(x), c->lo, c->hi);
  return x;
}

/* One call of kiln's op on x: its thread CPU time. */
static double kiln_once(const ucase *c, kn_tensor *x, int r) {
  double t0 = kn_bench_cpu_s();
  kn_tensor *out = c->op(x);
  double t = kn_bench_cpu_s() - t0;
  if (!out) {
    fprintf(stderr, "bench_unary: %s failed: %s\n", c->name, kn_last_error());
    exit(1);
  }
  sink = ((float *)kn_data(out))[r];
  kn_release(out);
  return t;
}

/* The fastest of TURN calls in a row. */
static double kiln_turn(const ucase *c, kn_tensor *x, int r) {
  double best = kiln_once(c, x, r);
  for (int q = 1; q < TURN; q++) {
    double t = kiln_once(c, x, r);
    best = t < best ? t : best;
  }
  return best;
}

static void print_vs(int i, const char *lib, double *t, double kiln) {
  double m = kn_bench_median(t, REPS);
  printf("BENCH unary_%s_%s_ms %.2f ms\n", cases[i].name, lib, m * 1e3);
  printf("RATIO unary_%s_vs_%s %.2f (%s time / kiln time, in turns)\n", cases[i].name, lib,
         m / kiln, lib);
}

/* Whether Python has case i's input; false (and a message) when it is gone
** or computed another input. */
static bool python_case(kn_bench_py *py, int i, uint64_t check) {
  char req[32];
  double cs;
  snprintf(req, sizeof req, "case %d", i);
  if (kn_bench_py_ask(py, req, &cs, 1) != 1) return false;
  if ((uint64_t)cs == check) return true;
  printf("BENCH_INFO unary_%s_vs_numpy_torch skipped: Python's input differs from kiln's "
         "(checksum %.0f, expected %llu)\n", cases[i].name, cs, (unsigned long long)check);
  return false;
}

/* Case i: kiln and (py non-NULL) numpy and torch in turns, a warm-up call
** each, then REPS of each; then the scalar loop's REPS back to back. */
static void bench_case(int i, float *y, kn_bench_py *py) {
  const ucase *c = &cases[i];
  kn_tensor *x = input_of(c);
  if (!x) {
    fprintf(stderr, "bench_unary: no input for %s: %s\n", c->name, kn_last_error());
    exit(1);
  }
  const float *xv = kn_data(x);
  bool vs = py && python_case(py, i, checksum(xv));
  double tk[REPS], ts[REPS], tn[REPS], tt[REPS], v[2];
  for (int r = -1; r < REPS && vs; r++) {
    double k = kiln_turn(c, x, r + 1);
    if (kn_bench_py_ask(py, "rep", v, 2) != 2) vs = false;
    if (r >= 0) tk[r] = k, tn[r] = v[0], tt[r] = v[1];
  }
  for (int r = 0; r < REPS && !vs; r++) tk[r] = kiln_turn(c, x, r);
  for (int r = 0; r < REPS; r++) {
    double t0 = kn_bench_cpu_s();
    for (int64_t j = 0; j < N; j++) y[j] = c->scalar(xv[j]);
    ts[r] = kn_bench_cpu_s() - t0;
    sink = y[r];
  }
  double mk = kn_bench_median(tk, REPS), ms = kn_bench_median(ts, REPS);
  printf("BENCH unary_%s_ms %.2f ms (scalar libm %.2f ms)\n", c->name, mk * 1e3, ms * 1e3);
  printf("RATIO unary_%s_vs_scalar %.2f\n", c->name, ms / mk);
  if (vs && c->numpy[0]) print_vs(i, "numpy", tn, mk);
  if (vs) print_vs(i, "torch", tt, mk);
  kn_release(x);
}

/* Writes the |N(0,1)| input for Python; returns false on failure. */
static bool write_absnormal(const char *path, float *buf) {
  fill_absnormal(buf);
  FILE *f = fopen(path, "wb");
  bool ok = f && fwrite(buf, sizeof *buf, (size_t)N, f) == (size_t)N;
  if (f && fclose(f) != 0) ok = false;
  return ok;
}

/* The script: N, M and the cases, then py_body. Returns a malloc'd string
** (the caller frees it), or NULL. */
static char *python_script(const char *absnormal_path) {
  size_t cap = 16384, len;
  char *s = malloc(cap);
  if (!s) return NULL;
  len = (size_t)snprintf(s, cap, "N, M, T = %lld, %llu, %d\ncases = [\n",
                         (long long)N, (unsigned long long)CHECK_MOD, TURN);
  for (int i = 0; i < NCASES && len < cap; i++) {
    const ucase *c = &cases[i];
    bool file = c->lo > c->hi;
    len += (size_t)snprintf(s + len, cap - len, "  (%.9g, %.9g, '%s', '%s', \"%s\"),\n",
                            (double)c->lo, (double)(c->hi - c->lo), file ? absnormal_path : "",
                            c->numpy, c->torch);
  }
  if (len < cap) len += (size_t)snprintf(s + len, cap - len, "]\n%s", py_body);
  if (len >= cap) {
    free(s);
    return NULL;
  }
  return s;
}

int main(void) {
  omp_set_num_threads(1);
  printf("BENCH_INFO vector_isa %s\n", kn__vmath_get()->name);
  printf("BENCH_INFO unary_size %lld float32 elements, 1 thread, median of %d\n", (long long)N,
         REPS);
  float *y = malloc((size_t)N * sizeof *y);
  if (!y) return 1;
  char path[64];
  snprintf(path, sizeof path, "/tmp/kn_bench_unary_%d.f32", (int)getpid());
  char *script = write_absnormal(path, y) ? python_script(path) : NULL;
  kn_bench_py py = {0};
  double ok;
  bool have = script && kn_bench_py_start(&py, script, "OMP_NUM_THREADS", "1", false) &&
              kn_bench_py_ask(&py, "case 0", &ok, 1) == 1;
  if (!have)
    printf("BENCH_INFO unary_vs_numpy_torch skipped: /usr/bin/python3 with numpy and torch "
           "(python3-numpy, python3-torch) is not available\n");
  for (int i = 0; i < NCASES; i++) bench_case(i, y, have ? &py : NULL);
  kn_bench_py_stop(&py);
  free(script);
  remove(path);
  free(y);
  return 0;
}
