/*
** bench_aot.c: AOT autograd's compile-time work and what its partitioners
** save. Prints
**   BENCH aot_compile_ms and aot_compile_mincut_ms: tracing the joint graph
**     and partitioning it (with the default partitioner, and with min-cut)
**     for the training step of an MLP 784-512-10 (batch 64, float32, mean
**     squared error against a [64, 10] target), median of REPS runs, thread
**     CPU time (goal <= 5 ms each: PyTorch's AOT autograd takes tens to
**     hundreds of ms on graphs of this size);
**   RATIO saved_bytes_mincut_vs_default_mlp: bytes the forward saves for
**     the backward, min-cut / default, on that MLP (goal <= 1.0);
**   RATIO saved_bytes_mincut_vs_default_chain: the same on a chain of four
**     pointwise ops on a [1024, 1024] input (goal < 1.0: min-cut saves the
**     input alone and recomputes the chain).
** Runs in about a second.
*/
#include <stdio.h>
#include <stdlib.h>

#include "aot/aot.h"
#include "kiln/compile.h"
#include "kiln/kiln.h"

#include "bench_util.h"

#define REPS 9

static kn__graph *grabbed;
static kn_status grab(kn_graph_module *gm, kn_tensor *const *ex, int n, void *ud,
                      kn_compiled_graph *out) {
  (void)ud;
  kn__graph_free(grabbed);
  grabbed = kn__graph_copy(kn__graph_module_graph(gm));
  return kn__aot_eager_compile(gm, ex, n, NULL, out);
}

static kn_tensor *mlp_step(kn_tensor *x, kn_tensor *w1, kn_tensor *b1, kn_tensor *w2,
                           kn_tensor *b2, kn_tensor *target) {
  kn_tensor *h = kn_relu(kn_linear(x, w1, b1));
  return kn_mse_loss(kn_linear(h, w2, b2), target, KN_REDUCTION_MEAN);
}

static kn_tensor *chain(kn_tensor *x) { return kn_tanh(kn_exp(kn_cos(kn_sin(x)))); }

static void die(const char *what) {
  fprintf(stderr, "bench_aot: %s: %s\n", what, kn_last_error());
  exit(1);
}

static kn_tensor *param(int64_t n, int64_t m, kn_generator *g) {
  kn_tensor *t = m ? kn_randn(KN_SHAPE(n, m), g, KN_FLOAT32) : kn_randn(KN_SHAPE(n), g, KN_FLOAT32);
  kn_set_requires_grad(t, true);
  return t;
}

/* The captured graph of the MLP step (owned by `grabbed`) and which inputs
** require grad. */
static void capture_mlp(bool *rg) {
  kn_generator *g = kn_generator_new(1);
  kn_tensor *in[6] = {kn_randn(KN_SHAPE(64, 784), g, KN_FLOAT32), param(512, 784, g), param(512, 0, g),
                      param(10, 512, g), param(10, 0, g), kn_randn(KN_SHAPE(64, 10), g, KN_FLOAT32)};
  kn_generator_free(g);
  kn_compile_options o = {.backend_fn = grab, .dynamic = KN_DYNAMIC_FALSE};
  kn_compiled *f = KN_COMPILE(mlp_step, &o);
  if (!kn_call_tensors(f, in, 6)) die("compiling the MLP step");
  for (int i = 0; i < 6; i++) rg[i] = kn_requires_grad(in[i]);
  kn_compiled_free(f);
}

/* Median ms of tracing + partitioning with `how`; the saved bytes. */
static double time_aot(const bool *rg, int n, kn__aot_partitioner how, int64_t *saved) {
  double t[REPS];
  for (int r = 0; r < REPS; r++) {
    kn__aot_joint j;
    kn__aot_parts p;
    double t0 = kn_bench_cpu_s();
    if (kn__aot_trace_joint(grabbed, rg, n, false, &j) != KN_OK) die("joint trace");
    if (kn__aot_partition_with(&j, how, &p) != KN_OK) die("partition");
    t[r] = (kn_bench_cpu_s() - t0) * 1e3;
    *saved = p.saved_bytes;
    kn__aot_parts_fini(&p);
    kn__aot_joint_fini(&j);
  }
  return kn_bench_median(t, REPS);
}

int main(void) {
  kn_scope_begin();
  bool rg[6];
  capture_mlp(rg);
  int64_t sd = 0, sm = 0;
  double td = time_aot(rg, 6, KN__AOT_PART_DEFAULT, &sd);
  double tm = time_aot(rg, 6, KN__AOT_PART_MINCUT, &sm);
  printf("BENCH aot_compile_ms %.2f default partitioner (goal <= 5)\n", td);
  printf("BENCH aot_compile_mincut_ms %.2f min-cut partitioner (goal <= 5)\n", tm);
  printf("RATIO saved_bytes_mincut_vs_default_mlp %.3f (%lld / %lld bytes; goal <= 1.0)\n",
         (double)sm / (double)sd, (long long)sm, (long long)sd);
  kn_compile_options o = {.backend_fn = grab, .dynamic = KN_DYNAMIC_FALSE};
  kn_compiled *f = KN_COMPILE(chain, &o);
  kn_tensor *x = kn_randn(KN_SHAPE(1024, 1024), NULL, KN_FLOAT32);
  kn_set_requires_grad(x, true);
  if (!kn_call_t(f, x)) die("compiling the chain");
  bool rg1 = true;
  (void)time_aot(&rg1, 1, KN__AOT_PART_DEFAULT, &sd);
  (void)time_aot(&rg1, 1, KN__AOT_PART_MINCUT, &sm);
  printf("RATIO saved_bytes_mincut_vs_default_chain %.3f (%lld / %lld bytes; goal < 1.0)\n",
         (double)sm / (double)sd, (long long)sm, (long long)sd);
  kn_compiled_free(f);
  kn__graph_free(grabbed);
  kn_scope_end();
  return 0;
}
