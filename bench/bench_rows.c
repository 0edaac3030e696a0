/*
** bench_rows.c: row-shaped eager work against plain C loops doing the same
** memory traffic, measured in the same run. Prints
**   BENCH select_backward_ms, BENCH select_backward_rule_path_ms,
**   RATIO select_backward_vs_fused_loop (goal >= 0.8): the backward of 64
**     selects of one [64, 32, 1024] float32 tensor (an LSTM's per-step input)
**     through kn_autograd_grad, against a C loop that zero-fills one buffer
**     and adds each step's gradient into its slice; the rule path is what the
**     engine used to do per select (a zero tensor, select_scatter, a sum);
**   BENCH_INFO norm_rows_kernel <ISA of layer_norm's row kernels>,
**   RATIO layer_norm_eager_vs_copy_floor_{1T,allT} (goal >= 0.5),
**   RATIO layer_norm_backward_eager_vs_copy_floor_{1T,allT} (goal >= 0.4):
**     layer_norm over 4096 rows of 1024 floats with weight and bias, forward
**     and backward (input, weight and bias gradients), against a C loop
**     moving the rows the op must read and write (forward: x -> y; backward:
**     x and the output gradient -> the input gradient). Ratio = floor time /
**     kiln time. 1T: one OpenMP thread (thread CPU time); allT: every thread
**     (wall time).
** Each number is the median of several repetitions.
*/
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kiln/kiln.h"

#include "bench_util.h"
#include "ops/norm_rows.h"

#define REPS 9
#define T 64
#define B 32
#define H 1024

static volatile float sink;

static void die(const char *what) {
  fprintf(stderr, "bench_rows: %s: %s\n", what, kn_last_error());
  exit(1);
}

/* The fused loop: one zero-filled buffer, each step's gradient added into
** its [B, H] slice. */
static void fused_select_backward(float *buf, float *const *g) {
  memset(buf, 0, (size_t)T * B * H * sizeof *buf);
  for (int t = 0; t < T; t++) {
    float *restrict o = buf + (size_t)t * B * H;
    const float *restrict x = g[t];
    for (int64_t i = 0; i < B * H; i++) o[i] += x[i];
  }
}

/* What the select derivative rule does for each use, summed as the engine
** summed gradients before it accumulated selects into one buffer. */
static kn_tensor *rule_path(kn_tensor *x, kn_tensor *const *g) {
  kn_tensor *acc = NULL;
  for (int t = 0; t < T; t++) {
    kn_tensor *z = kn_zeros(3, kn_sizes(x), KN_FLOAT32);
    kn_tensor *s = kn_select_scatter(z, g[t], 0, t);
    acc = acc ? kn_add(acc, s) : s;
  }
  return acc;
}

static void bench_select_backward(void) {
  kn_tensor *x = kn_zeros(KN_SHAPE(T, B, H), KN_FLOAT32);
  if (!x || kn_set_requires_grad(x, true) != KN_OK) die("select setup");
  kn_tensor *g[T], *outs[T];
  float *gp[T];
  for (int t = 0; t < T; t++) {
    g[t] = kn_full(KN_SHAPE(B, H), kn_float(t * 0.5), KN_FLOAT32);
    gp[t] = kn_data(g[t]);
  }
  float *buf = malloc((size_t)T * B * H * sizeof *buf);
  double tk[REPS], tf[REPS], tr[REPS];
  for (int r = 0; r < REPS; r++) {
    kn_scope_begin();
    for (int t = 0; t < T; t++) outs[t] = kn_select(x, 0, t);
    kn_tensor *gx;
    double t0 = kn_bench_cpu_s();
    if (kn_autograd_grad(outs, T, &x, 1, g, false, false, false, &gx) != KN_OK) die("grad");
    tk[r] = kn_bench_cpu_s() - t0;
    sink = ((float *)kn_data(gx))[r];
    t0 = kn_bench_cpu_s();
    kn_tensor *rp = rule_path(x, g);
    tr[r] = kn_bench_cpu_s() - t0;
    sink = ((float *)kn_data(rp))[r];
    kn_scope_end();
    t0 = kn_bench_cpu_s();
    fused_select_backward(buf, gp);
    tf[r] = kn_bench_cpu_s() - t0;
    sink = buf[r];
  }
  double k = kn_bench_median(tk, REPS), f = kn_bench_median(tf, REPS);
  printf("BENCH select_backward_ms %.3f ms (64 selects of [64, 32, 1024] float32)\n", k * 1e3);
  printf("BENCH select_backward_rule_path_ms %.3f ms\n", kn_bench_median(tr, REPS) * 1e3);
  printf("BENCH select_backward_fused_loop_ms %.3f ms\n", f * 1e3);
  printf("RATIO select_backward_vs_fused_loop %.3f (goal >= 0.8)\n", f / k);
  free(buf);
  kn_release(x);
  for (int t = 0; t < T; t++) kn_release(g[t]);
}

#define LM 4096
#define LD 1024

static void floor_fwd(float *restrict y, const float *restrict x) {
#pragma omp parallel for schedule(static) if (omp_get_max_threads() > 1)
  for (int64_t r = 0; r < LM; r++)
    for (int64_t i = 0; i < LD; i++) y[r * LD + i] = x[r * LD + i];
}

static void floor_bwd(float *restrict gi, const float *restrict x, const float *restrict go) {
#pragma omp parallel for schedule(static) if (omp_get_max_threads() > 1)
  for (int64_t r = 0; r < LM; r++)
    for (int64_t i = 0; i < LD; i++) gi[r * LD + i] = x[r * LD + i] + go[r * LD + i];
}

static double now(bool one) { return one ? kn_bench_cpu_s() : kn_bench_wall_s(); }

static void bench_layer_norm(bool one) {
  int prev = omp_get_max_threads();
  if (one) omp_set_num_threads(1);
  kn_generator *gen = kn_generator_new(1);
  kn_tensor *x = kn_randn(KN_SHAPE(LM, LD), gen, KN_FLOAT32);
  kn_tensor *w = kn_randn(KN_SHAPE(LD), gen, KN_FLOAT32), *b = kn_randn(KN_SHAPE(LD), gen, KN_FLOAT32);
  kn_tensor *go = kn_randn(KN_SHAPE(LM, LD), gen, KN_FLOAT32);
  float *fy = malloc((size_t)LM * LD * sizeof *fy);
  if (!x || !w || !b || !go || !fy) die("layer_norm setup");
  const int64_t ns[1] = {LD};
  double tf[REPS], tb[REPS], cf[REPS], cb[REPS];
  for (int r = 0; r < REPS; r++) {
    kn_scope_begin();
    double t0 = now(one);
    kn_tensor *y = kn_layer_norm(x, 1, ns, w, b, 1e-5);
    tf[r] = now(one) - t0;
    if (!y) die("layer_norm");
    sink = ((float *)kn_data(y))[r];
    kn_scope_end();
    t0 = now(one);
    floor_fwd(fy, kn_data(x));
    cf[r] = now(one) - t0;
    sink = fy[r];
  }
  kn_tensor *ins[3] = {x, w, b};
  for (int i = 0; i < 3; i++) kn_set_requires_grad(ins[i], true);
  kn_scope_begin();
  kn_tensor *y = kn_layer_norm(x, 1, ns, w, b, 1e-5);
  for (int r = 0; r < REPS; r++) {
    kn_scope_begin();
    kn_tensor *g[3];
    double t0 = now(one);
    if (kn_autograd_grad(&y, 1, ins, 3, &go, true, false, false, g) != KN_OK) die("ln backward");
    tb[r] = now(one) - t0;
    sink = ((float *)kn_data(g[0]))[r];
    kn_scope_end();
    t0 = now(one);
    floor_bwd(fy, kn_data(x), kn_data(go));
    cb[r] = now(one) - t0;
    sink = fy[r];
  }
  kn_scope_end();
  const char *tag = one ? "1T" : "allT";
  double f = kn_bench_median(tf, REPS), bw = kn_bench_median(tb, REPS);
  printf("BENCH layer_norm_eager_ms_%s %.3f ms (%d threads; copy floor %.3f ms)\n", tag, f * 1e3,
         omp_get_max_threads(), kn_bench_median(cf, REPS) * 1e3);
  printf("BENCH layer_norm_backward_eager_ms_%s %.3f ms (copy floor %.3f ms)\n", tag, bw * 1e3,
         kn_bench_median(cb, REPS) * 1e3);
  printf("RATIO layer_norm_eager_vs_copy_floor_%s %.3f (goal >= 0.5)\n", tag,
         kn_bench_median(cf, REPS) / f);
  printf("RATIO layer_norm_backward_eager_vs_copy_floor_%s %.3f (goal >= 0.4)\n", tag,
         kn_bench_median(cb, REPS) / bw);
  free(fy);
  kn_release(x), kn_release(w), kn_release(b), kn_release(go);
  kn_generator_free(gen);
  omp_set_num_threads(prev);
}

int main(void) {
  bench_select_backward();
  printf("BENCH_INFO norm_rows_kernel %s\n", kn__norm_rows_get()->name);
  bench_layer_norm(true);
  bench_layer_norm(false);
  printf("BENCH_INFO timer 1T thread_cputime, allT wall, median_of %d\n", REPS);
  return 0;
}
