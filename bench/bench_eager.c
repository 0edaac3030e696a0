/*
** bench_eager.c: eager pointwise performance, measured against baselines in
** the same process. Prints
**   BENCH eager_add_gbps / copy_loop_gbps, RATIO eager_add_vs_copy
**     (float32 add of two 4 MB tensors into a fresh output, 3 streams, over a
**     plain C copy loop, 2 streams),
**   BENCH dispatch_overhead_ns (1-element kn_add + kn_release, no scope;
**     goal <= 150 ns, see docs/KERNELS.md "The per-op path"),
**   BENCH example_fn_eager_us (the seed's a * ones(1000,1000) + ones(1000,1000)),
**   RATIO pointwise_eager_2T_vs_1T (and _tanh): wall time of a float32 add
**     (memory-bound) and tanh (compute-bound) over 1M elements on one thread
**     over the same on two (kn_set_num_threads), when the machine has two
**     cores or more (goal >= 1.8): one call a run, the fastest of 5 runs in
**     a row a turn, 1T and 2T turns alternating, the median of 21 turns,
**   BENCH_INFO openblas_core.
** Each number is the median of several repetitions of thread CPU time; the
** whole run takes a few seconds.
*/
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "kiln/kiln.h"

#include "bench_util.h"

#define REPS 15

/* Times are CPU time of this thread (kn_bench_cpu_s): every measured path
** runs on one thread (the sizes stay below the parallel thresholds), and on
** a shared machine wall time mostly measures the other processes. */

/* The baseline: a plain copy loop over n floats (kept from being removed by
** writing through a volatile-qualified sink afterwards). */
static void copy_loop(float *restrict dst, const float *restrict src, int64_t n) {
  for (int64_t i = 0; i < n; i++) dst[i] = src[i];
}

static volatile float sink;

static void bench_add_vs_copy(void) {
  const int64_t n = (4 << 20) / 4; /* 4 MB of float32 */
  kn_tensor *a = kn_full(KN_SHAPE(n), kn_float(1.5), KN_FLOAT32);
  kn_tensor *b = kn_full(KN_SHAPE(n), kn_float(2.0), KN_FLOAT32);
  float *src = malloc((size_t)n * sizeof *src), *dst = malloc((size_t)n * sizeof *dst);
  if (!a || !b || !src || !dst) {
    fprintf(stderr, "bench_eager: allocation failed: %s\n", kn_last_error());
    exit(1);
  }
  for (int64_t i = 0; i < n; i++) src[i] = (float)i;
  double tk[REPS], tc[REPS];
  const int inner = 20;
  for (int r = 0; r < REPS; r++) {
    double t0 = kn_bench_cpu_s();
    for (int i = 0; i < inner; i++) {
      kn_tensor *c = kn_add(a, b);
      sink = ((float *)kn_data(c))[n - 1];
      kn_release(c);
    }
    tk[r] = (kn_bench_cpu_s() - t0) / inner;
    t0 = kn_bench_cpu_s();
    for (int i = 0; i < inner; i++) {
      copy_loop(dst, src, n);
      sink = dst[n - 1 - i];
    }
    tc[r] = (kn_bench_cpu_s() - t0) / inner;
  }
  double bytes = (double)n * 4;
  double gk = 3 * bytes / kn_bench_median(tk, REPS) / 1e9;
  double gc = 2 * bytes / kn_bench_median(tc, REPS) / 1e9;
  printf("BENCH eager_add_gbps %.2f GB/s\n", gk);
  printf("BENCH copy_loop_gbps %.2f GB/s\n", gc);
  printf("RATIO eager_add_vs_copy %.3f\n", gk / gc);
  kn_release(a);
  kn_release(b);
  free(src);
  free(dst);
}

static void bench_dispatch(void) {
  kn_tensor *a = kn_ones(KN_SHAPE(1), KN_FLOAT32), *b = kn_ones(KN_SHAPE(1), KN_FLOAT32);
  double t[REPS];
  const int inner = 20000;
  for (int r = 0; r < REPS; r++) {
    double t0 = kn_bench_cpu_s();
    for (int i = 0; i < inner; i++) kn_release(kn_add(a, b));
    t[r] = (kn_bench_cpu_s() - t0) / inner;
  }
  printf("BENCH dispatch_overhead_ns %.0f ns (goal <= 150)\n", kn_bench_median(t, REPS) * 1e9);
  printf("BENCH_INFO dispatch_overhead_mode kn_add+kn_release_no_scope\n");
  kn_release(a);
  kn_release(b);
}

static void bench_example_fn(void) {
  kn_tensor *a = kn_full(KN_SHAPE(1000, 1000), kn_float(0.5), KN_FLOAT32);
  double t[REPS];
  for (int r = 0; r < REPS; r++) {
    double t0 = kn_bench_cpu_s();
    kn_scope_begin();
    kn_tensor *out = kn_add(kn_mul(a, kn_ones(KN_SHAPE(1000, 1000), KN_FLOAT32)),
                            kn_ones(KN_SHAPE(1000, 1000), KN_FLOAT32));
    if (!out) {
      fprintf(stderr, "bench_eager: example_fn failed: %s\n", kn_last_error());
      exit(1);
    }
    sink = ((float *)kn_data(out))[7];
    kn_scope_end();
    t[r] = kn_bench_cpu_s() - t0;
  }
  printf("BENCH example_fn_eager_us %.1f us\n", kn_bench_median(t, REPS) * 1e6);
  kn_release(a);
}

static kn_tensor *tanh2(kn_tensor *a, kn_tensor *b) { (void)b; return kn_tanh(a); }

/* One call of fn on `threads` threads, and its wall time (a side of
** kn_bench_turns). */
typedef struct thr_side {
  kn_tensor *(*fn)(kn_tensor *, kn_tensor *);
  kn_tensor *a, *b;
  int threads;
} thr_side;

static double thr_once(void *ud, int rep) {
  thr_side *s = ud;
  kn_set_num_threads(s->threads);
  double t0 = kn_bench_wall_s();
  kn_tensor *c = s->fn(s->a, s->b);
  double t = kn_bench_wall_s() - t0;
  if (!c) {
    fprintf(stderr, "bench_eager: %s\n", kn_last_error());
    exit(1);
  }
  sink = ((float *)kn_data(c))[rep];
  kn_release(c);
  return t;
}

/* 2 threads against 1 on the same 1M-element op (wall time), in alternating
** turns: on a VM whose vCPUs slow down for seconds at a time, the two
** timed one after the other read 1.03 once and 1.83-1.99 in the next four
** runs (tanh). */
static void bench_threads(void) {
  long cores = sysconf(_SC_NPROCESSORS_ONLN);
  if (cores < 2) {
    printf("BENCH_INFO pointwise_eager_2T_vs_1T skipped: %ld core\n", cores);
    return;
  }
  const int64_t n = 1 << 20;
  kn_tensor *a = kn_rand(KN_SHAPE(n), NULL, KN_FLOAT32), *b = kn_rand(KN_SHAPE(n), NULL, KN_FLOAT32);
  struct { const char *suffix; kn_tensor *(*fn)(kn_tensor *, kn_tensor *); } ops[] = {
      {"", kn_add}, {"_tanh", tanh2}};
  int before = kn_get_num_threads();
  for (size_t k = 0; k < sizeof ops / sizeof *ops; k++) {
    thr_side one = {ops[k].fn, a, b, 1}, two = {ops[k].fn, a, b, 2};
    double t1, t2;
    kn_bench_turns(21, 5, thr_once, &one, thr_once, &two, &t1, &t2);
    printf("BENCH pointwise_eager%s_1T_us %.1f us 2T_us %.1f us\n", ops[k].suffix, t1 * 1e6,
           t2 * 1e6);
    printf("RATIO pointwise_eager_2T_vs_1T%s %.2f (goal >= 1.8)\n", ops[k].suffix, t1 / t2);
  }
  kn_set_num_threads(before);
  kn_release(a);
  kn_release(b);
}

int main(void) {
  const char *env = getenv("OPENBLAS_CORETYPE");
  printf("BENCH_INFO openblas_core %s%s%s\n", openblas_get_corename(),
         env ? " OPENBLAS_CORETYPE=" : "", env ? env : "");
  printf("BENCH_INFO timer thread_cputime median_of %d\n", REPS);
  bench_add_vs_copy();
  bench_dispatch();
  bench_example_fn();
  bench_threads();
  return 0;
}
