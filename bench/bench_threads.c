/*
** bench_threads.c: what a second thread costs small work and gains large
** work (docs/KERNELS.md, "Threads"). Wall-clock medians, each measured at
** 1 and at 2 threads (kn_set_num_threads) in this one run. Prints
**   BENCH threads_region_wake_us: one empty OpenMP region of 2 threads
**     after 2 ms without one (with kiln's passive wait policy the other
**     thread sleeps, and an idle virtual CPU has halted: waking it, what
**     the first kernel after a pause pays), and threads_region_warm_us:
**     the same region right after another (kernels issued one after
**     another); with the per-element times below, the grain each implies
**     (BENCH threads_breakeven_elems_*: the elements a thread must get to
**     pay for the region: its time / ns per element; _warm for the warm
**     region) beside KN__GRAIN and KN__GRAIN_MEM;
**   BENCH threads_call_overhead_us_{1T,2T} and RATIO call_overhead_2T_vs_1T
**     (goal >= 0.9): a compiled a + b on one-element tensors
**     (bench_inductor's call_overhead_ns, in wall time);
**   BENCH threads_cnn_infer_b1_us_{1T,2T} and RATIO cnn_infer_b1_2T_vs_1T
**     (goal >= 0.9: a second thread never makes small work slower): the
**     digits CNN (examples/digits.c) forward on one 8x8 image, compiled,
**     without gradients;
**   BENCH threads_small_eager_us_{1T,2T} and RATIO small_eager_2T_vs_1T
**     (goal >= 0.9): eager add, tanh, sum, softmax and layer_norm of 8 x 64.
** The machine's other load changes every figure: run it on a quiet one.
*/
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "kiln/kiln.h"
#include "ops/threads.h"

#include "bench_util.h"

#define REPS 15

static volatile float sink;

static void die(const char *what) {
  fprintf(stderr, "bench_threads: %s: %s\n", what, kn_last_error());
  exit(1);
}

/* Median wall seconds per call of fn(ud) over REPS runs of inner calls. */
static double per_call(void (*fn)(void *), void *ud, int inner) {
  double t[REPS];
  fn(ud);
  for (int r = 0; r < REPS; r++) {
    double t0 = kn_bench_wall_s();
    for (int i = 0; i < inner; i++) fn(ud);
    t[r] = (kn_bench_wall_s() - t0) / inner;
  }
  return kn_bench_median(t, REPS);
}

static void empty_region(void *ud) {
  (void)ud;
#pragma omp parallel num_threads(2)
  sink = (float)omp_get_thread_num();
}

typedef struct unary { kn_tensor *(*op)(kn_tensor *); kn_tensor *x; } unary;

static void run_unary(void *ud) {
  unary *u = ud;
  kn_tensor *y = u->op(u->x);
  if (!y) die("op");
  sink = ((float *)kn_data(y))[0];
  kn_release(y);
}

static kn_tensor *add_self(kn_tensor *x) { return kn_add(x, x); }

/* Median wall seconds of an empty region of 2 threads entered after
** `idle_us` microseconds without one (the master sleeping meanwhile). */
static double region_after(int idle_us) {
  double t[REPS * 4];
  empty_region(NULL);
  for (int r = 0; r < REPS * 4; r++) {
    struct timespec d = {0, idle_us * 1000L};
    if (idle_us) nanosleep(&d, NULL);
    double t0 = kn_bench_wall_s();
    empty_region(NULL);
    t[r] = kn_bench_wall_s() - t0;
  }
  return kn_bench_median(t, REPS * 4);
}

/* The wake-up of a team of 2 (cold and warm) and the single-thread time per
** element of a compute-bound (tanh) and a memory-bound (add) kernel on 2^14
** elements. */
static void bench_breakeven(void) {
  double wake = region_after(2000), warm = region_after(0);
  printf("BENCH threads_region_wake_us %.2f us\n", wake * 1e6);
  printf("BENCH threads_region_warm_us %.2f us\n", warm * 1e6);
  kn_set_num_threads(1);
  const int64_t n = 1 << 14;
  unary u[2] = {{kn_tanh, kn_rand(KN_SHAPE(n), NULL, KN_FLOAT32)},
                {add_self, kn_rand(KN_SHAPE(n), NULL, KN_FLOAT32)}};
  const char *names[2] = {"tanh", "add"};
  int64_t grains[2] = {KN__GRAIN, KN__GRAIN_MEM};
  for (int k = 0; k < 2; k++) {
    double ns = per_call(run_unary, &u[k], 200) * 1e9 / (double)n;
    printf("BENCH threads_%s_ns_per_elem %.3f ns\n", names[k], ns);
    printf("BENCH threads_breakeven_elems_%s %.0f (KN__GRAIN%s %lld)\n", names[k],
           wake * 1e9 / ns, k ? "_MEM" : "", (long long)grains[k]);
    printf("BENCH threads_breakeven_elems_%s_warm %.0f\n", names[k], warm * 1e9 / ns);
    kn_release(u[k].x);
  }
}

static kn_tensor *add2(kn_tensor *a, kn_tensor *b) { return kn_add(a, b); }

typedef struct call2 { kn_compiled *f; kn_tensor *a, *b; } call2;

static void run_call2(void *ud) {
  call2 *c = ud;
  kn_tensor *y = kn_call_t(c->f, c->a, c->b);
  if (!y) die("call");
  kn_release(y);
}

static kn_value cnn_fn(const kn_value *args, int nargs, void *ud) {
  (void)nargs, (void)ud;
  return kn_vtensor(kn_nn_forward(args[0].u.m, args[1].u.t));
}

typedef struct infer { kn_compiled *f; kn_module *m; kn_tensor *x; } infer;

static void run_infer(void *ud) {
  infer *c = ud;
  kn_value args[2] = {kn_vmodule(c->m), kn_vtensor(c->x)}, out;
  if (kn_call(c->f, args, 2, &out) != KN_OK) die("cnn");
  kn_value_release(out);
}

/* The ratio 1T / 2T of fn, printed as BENCH and RATIO lines under name:
** medians of REPS runs of inner calls, 1 and 2 threads taking turns (so
** that a change in the machine's load falls on both). */
static void compare(const char *name, void (*fn)(void *), void *ud, int inner) {
  double t[2][REPS];
  for (int k = 0; k < 2; k++) {
    kn_set_num_threads(k + 1);
    fn(ud); /* set-up (a compile at this thread count) apart */
  }
  for (int r = 0; r < REPS; r++)
    for (int k = 0; k < 2; k++) {
      kn_set_num_threads(k + 1);
      double t0 = kn_bench_wall_s();
      for (int i = 0; i < inner; i++) fn(ud);
      t[k][r] = (kn_bench_wall_s() - t0) / inner;
    }
  double t1 = kn_bench_median(t[0], REPS), t2 = kn_bench_median(t[1], REPS);
  printf("BENCH threads_%s_us_1T %.1f us 2T %.1f us\n", name, t1 * 1e6, t2 * 1e6);
  printf("RATIO %s_2T_vs_1T %.2f (goal >= 0.9)\n", name, t1 / t2);
}

static void bench_call_overhead(void) {
  kn_compile_options o = {.backend = "inductor"};
  call2 c = {KN_COMPILE(add2, &o), kn_ones(KN_SHAPE(1), KN_FLOAT32), kn_ones(KN_SHAPE(1), KN_FLOAT32)};
  if (!c.f) die("compile");
  compare("call_overhead", run_call2, &c, 2000);
  kn_compiled_free(c.f);
  kn_release(c.a), kn_release(c.b);
}

static void bench_cnn(void) {
  kn_generator *g = kn_generator_new(0);
  kn_conv2d_options same = {.padding_same = true};
  infer c = {kn_compile_fn(cnn_fn, NULL, 2, "cnn_fn", __FILE__, __LINE__, NULL),
             kn_nn_sequential(
                 8, (kn_module *[]){kn_nn_conv2d(1, 16, 3, 3, &same, g), kn_nn_relu(),
                                    kn_nn_maxpool2d(2, 0, 0), kn_nn_conv2d(16, 32, 3, 3, &same, g),
                                    kn_nn_relu(), kn_nn_maxpool2d(2, 0, 0), kn_nn_flatten(1, -1),
                                    kn_nn_linear(32 * 2 * 2, 10, true, g)}),
             kn_rand(KN_SHAPE(1, 1, 8, 8), g, KN_FLOAT32)};
  bool prev = kn_no_grad_begin();
  compare("cnn_infer_b1", run_infer, &c, 500);
  kn_no_grad_end(prev);
  kn_release(c.x);
  kn_compiled_free(c.f);
  kn_module_free(c.m);
  kn_generator_free(g);
}

static void small_eager(void *ud) {
  kn_tensor *x = ((kn_tensor **)ud)[0], *w = ((kn_tensor **)ud)[1];
  kn_scope_begin();
  kn_tensor *y = kn_layer_norm(kn_softmax(kn_tanh(kn_add(x, x)), 1), 1, (int64_t[]){64}, w, NULL,
                               1e-5);
  if (!y || !kn_sum(y)) die("small eager ops");
  kn_scope_end();
}

int main(void) {
  bench_breakeven();
  bench_call_overhead();
  bench_cnn();
  kn_tensor *xw[2] = {kn_rand(KN_SHAPE(8, 64), NULL, KN_FLOAT32), kn_ones(KN_SHAPE(64), KN_FLOAT32)};
  compare("small_eager", small_eager, xw, 2000);
  kn_release(xw[0]), kn_release(xw[1]);
  return 0;
}
