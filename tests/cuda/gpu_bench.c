/*
** tests/cuda/gpu_bench.c: the code generator's CUDA kernels timed on a GPU
** (device time through kn__cuda_timer; the same run, the same device):
**   - the seed's example_fn (a * ones(1000, 1000) + ones(1000, 1000), one
**     fused kernel reading a and writing the result) against a
**     device-to-device copy of the same bytes: "RATIO
**     example_fn_cuda_vs_copy_bandwidth" = copy time / kernel time (goal
**     >= 0.7), and the same at 8192 x 8192 (past the L2 cache);
**   - the per-call cost of a 10-op pointwise graph on 16 elements: host
**     program, launch and a synchronisation, in microseconds of wall time;
**   - the same graph through kn_compile, mode default against mode
**     "reduce-overhead" (CUDA graphs) in the same run: wall time per call
**     (kn_call_t + kn_cuda_synchronize, the input copied into the static
**     buffer on each replay), "BENCH ten_op_graph_compiled_per_call ..."
**     and "RATIO ten_op_graph_reduce_overhead_vs_default" (default time /
**     reduce-overhead time; goal: reduce-overhead below 10 us).
** Each result is also checked against the CPU ("CUDA-CHECK bench.*").
** Arguments name the parts to run (example_fn, example_fn_8192, overhead,
** modes); none: all.
** Exit 77 without a CUDA driver or GPU.
*/
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "cuda/cuda.h"
#include "gpu_check.h"
#include "gpu_prog.h"
#include "kiln/cuda.h"
#include "kiln/kiln.h"

static kn_tensor *example_fn(kn_tensor *a) {
  int64_t sz[2] = {1000, 1000};
  return kn_add(kn_mul(a, kn_ones(2, sz, KN_FLOAT32)), kn_ones(2, sz, KN_FLOAT32));
}
static kn_tensor *example_fn_big(kn_tensor *a) {
  int64_t sz[2] = {8192, 8192};
  return kn_add(kn_mul(a, kn_ones(2, sz, KN_FLOAT32)), kn_ones(2, sz, KN_FLOAT32));
}
static kn_tensor *ten_ops(kn_tensor *a) {
  kn_tensor *x = kn_add_scalar(a, kn_float(1));
  x = kn_mul(x, a);
  x = kn_exp(kn_neg(x));
  x = kn_sub(x, a);
  x = kn_tanh(kn_mul_scalar(x, kn_float(0.5)));
  x = kn_maximum(x, a);
  x = kn_relu(kn_add(x, a));
  return x;
}

static double now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec * 1e-3;
}

/* Device ms of iters calls of r, or -1. */
static double time_calls(gpu_run *r, int iters) {
  double ms = -1;
  kn_status st = gpu_run_call(r); /* warm up */
  if (st == KN_OK) st = kn__cuda_timer_start();
  for (int i = 0; st == KN_OK && i < iters; i++) st = gpu_run_call(r);
  if (st == KN_OK) st = kn__cuda_timer_stop(&ms);
  return st == KN_OK ? ms : -1;
}

/* Device ms of iters copies of nbytes, or -1. */
static double time_copies(size_t nbytes, int iters) {
  void *a = NULL, *b = NULL;
  double ms = -1;
  kn_status st = kn__cuda_alloc(nbytes, &a);
  if (st == KN_OK) st = kn__cuda_alloc(nbytes, &b);
  if (st == KN_OK) st = kn__cuda_memset0(a, nbytes);
  if (st == KN_OK) st = kn__cuda_memcpy(b, KN_CUDA, a, KN_CUDA, nbytes);
  if (st == KN_OK) st = kn__cuda_timer_start();
  for (int i = 0; st == KN_OK && i < iters; i++) st = kn__cuda_memcpy(b, KN_CUDA, a, KN_CUDA, nbytes);
  if (st == KN_OK) st = kn__cuda_timer_stop(&ms);
  kn__cuda_free(a);
  kn__cuda_free(b);
  return st == KN_OK ? ms : -1;
}

static bool same_result(gpu_run *r, kn_tensor *want) {
  kn_tensor *got = gpu_run_output(r, 0);
  bool ok = got && kn_numel(got) == kn_numel(want);
  kn_tensor *g = ok ? kn_contiguous(got) : NULL, *w = kn_contiguous(want);
  for (int64_t i = 0; ok && i < kn_numel(w); i++) {
    float a = ((const float *)kn_data(g))[i], b = ((const float *)kn_data(w))[i];
    ok = fabsf(a - b) <= 1e-5f + 1e-5f * fabsf(b);
  }
  if (got) kn_release(got);
  return ok;
}

static void bench_example(const char *tag, kn_tensor *(*fn)(kn_tensor *), int64_t n, int iters) {
  kn_scope_begin();
  kn_tensor *a = kn_randn(2, (int64_t[]){n, n}, NULL, KN_FLOAT32);
  gpu_prog p;
  gpu_run r = {0};
  char check[96];
  snprintf(check, sizeof check, "bench.%s", tag);
  kn_status st = gpu_prog_build((void (*)(void))fn, 1, (kn_tensor *[]){a}, &p);
  if (st == KN_OK) st = gpu_run_begin(&p, (kn_tensor *[]){a}, 1, &r);
  double tk = st == KN_OK ? time_calls(&r, iters) : -1;
  double tc = time_copies((size_t)(n * n) * sizeof(float), iters);
  bool ok = tk > 0 && tc > 0 && same_result(&r, fn(a));
  CHECK(check, ok, "%s", kn_last_error());
  if (ok) {
    double gbs = 2.0 * (double)(n * n) * 4 * iters / (tk * 1e-3) / 1e9;
    printf("CUDA-BENCH %s: kernel %.3f ms, copy %.3f ms per call; kernel %.1f GB/s\n", tag,
           tk / iters, tc / iters, gbs);
    printf("RATIO %s_cuda_vs_copy_bandwidth %.3f (copy time / kernel time, %lldx%lld float32; "
           "goal >= 0.7)\n", tag, tc / tk, (long long)n, (long long)n);
  }
  gpu_run_end(&r);
  gpu_prog_free(&p);
  kn_scope_end();
}

static void bench_overhead(void) {
  kn_scope_begin();
  kn_tensor *a = kn_randn(1, (int64_t[]){16}, NULL, KN_FLOAT32);
  gpu_prog p;
  gpu_run r = {0};
  kn_status st = gpu_prog_build((void (*)(void))ten_ops, 1, (kn_tensor *[]){a}, &p);
  if (st == KN_OK) st = gpu_run_begin(&p, (kn_tensor *[]){a}, 1, &r);
  for (int i = 0; st == KN_OK && i < 10; i++) st = gpu_run_call(&r);
  if (st == KN_OK) st = kn__cuda_synchronize();
  const int iters = 2000;
  double t0 = now_us();
  for (int i = 0; st == KN_OK && i < iters; i++) {
    st = gpu_run_call(&r);
    if (st == KN_OK) st = kn__cuda_synchronize();
  }
  double us = (now_us() - t0) / iters;
  bool ok = st == KN_OK && same_result(&r, ten_ops(a));
  CHECK("bench.ten_op_graph", ok, "%s", kn_last_error());
  if (ok)
    printf("CUDA-BENCH ten_op_graph_per_call %.2f us (%d kernel launch(es), call + synchronize; "
           "wall time)\n", us, p.plan.nkernels);
  gpu_run_end(&r);
  gpu_prog_free(&p);
  kn_scope_end();
}

/* Wall us per call of f on x (call + synchronize, each in its own scope),
** after 20 calls of warm-up (the reduce-overhead recording among them). */
static double per_call_us(kn_compiled *f, kn_tensor *x, int iters, kn_tensor *want, bool *ok) {
  kn_status st = KN_OK;
  for (int i = 0; st == KN_OK && i < 20; i++) {
    kn_scope_begin();
    kn_tensor *y = kn_call_t(f, x);
    st = y ? kn_cuda_synchronize() : kn_last_status();
    kn_tensor *h = NULL;
    if (st == KN_OK && i == 19) st = kn_to_device(y, KN_CPU, &h);
    if (st == KN_OK && i == 19) {
      for (int64_t k = 0; *ok && k < kn_numel(want); k++) {
        float a = ((const float *)kn_data(h))[k], b = ((const float *)kn_data(want))[k];
        *ok = fabsf(a - b) <= 1e-5f + 1e-5f * fabsf(b);
      }
    }
    kn_scope_end();
  }
  *ok = *ok && st == KN_OK;
  double t0 = now_us();
  for (int i = 0; *ok && i < iters; i++) {
    kn_scope_begin();
    *ok = kn_call_t(f, x) && kn_cuda_synchronize() == KN_OK;
    kn_scope_end();
  }
  return (now_us() - t0) / iters;
}

static void bench_modes(void) {
  kn_scope_begin();
  kn_tensor *a = kn_randn(1, (int64_t[]){16}, NULL, KN_FLOAT32), *x = NULL;
  bool ok = kn_to_device(a, KN_CUDA, &x) == KN_OK;
  kn_compiled *fd = KN_COMPILE(ten_ops, &(kn_compile_options){.backend = "inductor"});
  kn_compiled *fr = KN_COMPILE(ten_ops, &(kn_compile_options){.backend = "inductor",
                                                              .mode = "reduce-overhead"});
  bool okd = ok && fd, okr = ok && fr;
  kn_tensor *want = kn_contiguous(ten_ops(a));
  const int iters = 2000;
  double ud = okd ? per_call_us(fd, x, iters, want, &okd) : -1;
  double ur = okr ? per_call_us(fr, x, iters, want, &okr) : -1;
  CHECK("bench.ten_op_compiled_default", okd, "%s", kn_last_error());
  CHECK("bench.ten_op_compiled_reduce_overhead", okr, "%s", kn_last_error());
  if (okd && okr) {
    printf("BENCH ten_op_graph_compiled_per_call default %.2f us, reduce-overhead %.2f us "
           "(kn_call_t + kn_cuda_synchronize, wall time; goal: reduce-overhead < 10 us)\n", ud,
           ur);
    printf("RATIO ten_op_graph_reduce_overhead_vs_default %.3f (default / reduce-overhead per-call "
           "time)\n", ud / ur);
  }
  kn_compiled_free(fd);
  kn_compiled_free(fr);
  kn_scope_end();
}

/* Whether part `name` runs: all of them without arguments, else those named. */
static bool wanted(int argc, char **argv, const char *name) {
  for (int i = 1; i < argc; i++)
    if (!strcmp(argv[i], name)) return true;
  return argc < 2;
}

int main(int argc, char **argv) {
  if (kn__cuda_init() != KN_OK) {
    printf("SKIP: %s\n", kn_last_error());
    return strstr(kn_last_error(), "no CUDA driver/GPU found") ? 77 : 1;
  }
  printf("device: %s, sm_%d, %d SMs\n", kn__cuda_device_name(), kn__cuda_arch(),
         kn__cuda_sm_count());
  kn_manual_seed(3);
  if (wanted(argc, argv, "example_fn")) bench_example("example_fn", example_fn, 1000, 200);
  if (wanted(argc, argv, "example_fn_8192"))
    bench_example("example_fn_8192", example_fn_big, 8192, 20);
  if (wanted(argc, argv, "overhead")) bench_overhead();
  if (wanted(argc, argv, "modes")) bench_modes();
  return kn__gpu_check_summary("gpu_bench");
}
