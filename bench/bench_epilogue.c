/*
** bench/bench_epilogue.c: GEMMs with a pointwise chain after them, compiled
** with "inductor" (the chain runs as the GEMM's epilogue, over blocks of its
** output while they are in cache) against the same function run eagerly.
** One thread, medians of thread CPU time (the machine is shared).
**
**   RATIO epilogue_<case>_compiled_vs_eager (no goal): eager time over
**   compiled time, for
**     linear_relu      relu(x @ w^T + b)           (an MLP layer)
**     mm_bias_gelu_mul gelu(x @ w^T + b) * y       (bias add, activation, a product)
**     residual         relu(x @ w^T + b) + r       (a residual add)
**     threshold_bw     threshold_backward(g @ w, h, 0)  (relu's backward after
**                      the grad-input GEMM)
**   over x [512, 512], w [512, 512], float32.
*/
#include <stdio.h>
#include <stdlib.h>

#include "../bench/bench_util.h"
#include "kiln/compile.h"
#include "kiln/kiln.h"
#include "kiln/threads.h"

#define REPS 15
#define M 512
#define K 512
#define N 512

static volatile float sink;

static void die(const char *what) {
  fprintf(stderr, "bench_epilogue: %s: %s\n", what, kn_last_error());
  exit(1);
}

typedef kn_tensor *(*fn4)(kn_tensor *, kn_tensor *, kn_tensor *, kn_tensor *);

static kn_tensor *linear_relu(kn_tensor *x, kn_tensor *w, kn_tensor *b, kn_tensor *r) {
  (void)r;
  return kn_relu(kn_linear(x, w, b));
}
static kn_tensor *mm_bias_gelu_mul(kn_tensor *x, kn_tensor *w, kn_tensor *b, kn_tensor *r) {
  return kn_mul(kn_gelu(kn_add(kn_mm(x, kn_t(w)), b), KN_GELU_TANH), r);
}
static kn_tensor *residual(kn_tensor *x, kn_tensor *w, kn_tensor *b, kn_tensor *r) {
  return kn_add(kn_relu(kn_linear(x, w, b)), r);
}
static kn_tensor *threshold_bw(kn_tensor *x, kn_tensor *w, kn_tensor *b, kn_tensor *r) {
  (void)b;
  return kn_threshold_backward(kn_mm(x, w), r, kn_float(0));
}

/* Median thread CPU time of one call of f (compiled: c; else eagerly). */
static double time_fn(fn4 f, kn_compiled *c, kn_tensor **in, int inner) {
  double t[REPS];
  for (int r = -1; r < REPS; r++) { /* r = -1: warm up (compiles) */
    double t0 = kn_bench_cpu_s();
    for (int i = 0; i < inner; i++) {
      kn_scope_begin();
      kn_tensor *y = c ? kn_call_t(c, in[0], in[1], in[2], in[3]) : f(in[0], in[1], in[2], in[3]);
      if (!y) die("call");
      sink += ((float *)kn_data(y))[0];
      kn_scope_end();
    }
    if (r >= 0) t[r] = (kn_bench_cpu_s() - t0) / inner;
  }
  return kn_bench_median(t, REPS);
}

static void bench_case(const char *name, fn4 f, kn_tensor **in) {
  kn_compile_options o = {.backend = "inductor"};
  kn_compiled *c = kn_compile_tensor_fn((void (*)(void))f, 4, name, __FILE__, __LINE__, &o);
  if (!c) die("compile");
  double tc = time_fn(f, c, in, 4), te = time_fn(f, NULL, in, 4);
  printf("BENCH epilogue_%s_compiled_us %.1f\nBENCH epilogue_%s_eager_us %.1f\n", name, tc * 1e6,
         name, te * 1e6);
  printf("RATIO epilogue_%s_compiled_vs_eager %.2f\n", name, te / tc);
  kn_compiled_free(c);
}

int main(void) {
  char dir[] = "/tmp/kiln-bench-epilogue-XXXXXX";
  if (!mkdtemp(dir)) die("mkdtemp");
  setenv("KILN_CACHE_DIR", dir, 1);
  if (kn_set_num_threads(1) != KN_OK) die("threads");
  kn_tensor *in[4] = {kn_randn(KN_SHAPE(M, K), NULL, KN_FLOAT32), kn_randn(KN_SHAPE(N, K), NULL, KN_FLOAT32),
                      kn_randn(KN_SHAPE(N), NULL, KN_FLOAT32), kn_randn(KN_SHAPE(M, N), NULL, KN_FLOAT32)};
  bench_case("linear_relu", linear_relu, in);
  bench_case("mm_bias_gelu_mul", mm_bias_gelu_mul, in);
  bench_case("residual", residual, in);
  bench_case("threshold_bw", threshold_bw, in);
  for (int i = 0; i < 4; i++) kn_release(in[i]);
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  return system(cmd) == 0 ? 0 : 1;
}
