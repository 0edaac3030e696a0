/*
** bench_mm.c: kiln mm against a direct cblas_sgemm call in the same process.
** 512x512x512 float32; kiln allocates a fresh output every call (through the
** public API and the dispatcher). Prints the median GFLOP/s of both, their
** ratio (goal >= 0.95) and which OpenBLAS core is in use. Also times a mixed
** loop that alternates kiln's OpenMP kernels (avg_pool2d) with BLAS calls
** (mm), where OpenMP and OpenBLAS thread pools could fight over the cores.
*/
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "kiln/kiln.h"

char *openblas_get_corename(void);
int openblas_get_num_threads(void);

#define N 512
#define REPS 41

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static double median(double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, cmp);
  return v[n / 2];
}

int main(void) {
  const char *ct = getenv("OPENBLAS_CORETYPE");
  printf("BENCH_INFO openblas_core %s\n", openblas_get_corename());
  if (ct) printf("BENCH_INFO OPENBLAS_CORETYPE %s\n", ct);
  const char *wp = getenv("OMP_WAIT_POLICY");
  printf("BENCH_INFO omp_wait_policy %s\n", wp ? wp : "default");
  printf("BENCH_INFO openblas_threads %d\n", openblas_get_num_threads());
  kn_tensor *a = kn_ones(KN_SHAPE(N, N), KN_FLOAT32);
  kn_tensor *b = kn_ones(KN_SHAPE(N, N), KN_FLOAT32);
  float *c = malloc(sizeof(float) * N * N);
  if (!a || !b || !c) {
    fprintf(stderr, "bench_mm: %s\n", kn_last_error());
    return 1;
  }
  float *pa = kn_data(a), *pb = kn_data(b);
  for (int i = 0; i < N * N; i++) pa[i] = (float)(i % 7) * 0.1f, pb[i] = (float)(i % 5) * 0.2f;
  double tk[REPS], tb[REPS];
  for (int warm = 0; warm < 3; warm++) {
    kn_release(kn_mm(a, b));
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, N, N, N, 1.0f, pa, N, pb, N, 0.0f, c, N);
  }
  /* interleave (alternating which goes first) so both see the same machine
  ** conditions */
  for (int r = 0; r < REPS; r++) {
    for (int k = 0; k < 2; k++) {
      if ((k == 0) == (r % 2 == 0)) {
        double t0 = now();
        kn_tensor *o = kn_mm(a, b);
        tk[r] = now() - t0;
        if (!o) {
          fprintf(stderr, "bench_mm: %s\n", kn_last_error());
          return 1;
        }
        kn_release(o);
      } else {
        double t0 = now();
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, N, N, N, 1.0f, pa, N, pb, N,
                    0.0f, c, N);
        tb[r] = now() - t0;
      }
    }
  }
  /* mixed: an OpenMP kernel, then BLAS, back to back */
  kn_tensor *img = kn_ones(KN_SHAPE(8, 32, 64, 64), KN_FLOAT32);
  double tm[REPS];
  for (int r = 0; r < REPS; r++) {
    double t0 = now();
    for (int k = 0; k < 4; k++) {
      kn_release(kn_avg_pool2d(img, (int64_t[]){2, 2}, NULL, NULL, false, true, 0));
      kn_release(kn_mm(a, b));
    }
    tm[r] = now() - t0;
  }
  kn_release(img);
  printf("BENCH mixed_pool_mm_4x %.1f us\n", median(tm, REPS) * 1e6);
  double flops = 2.0 * N * N * N;
  double gk = flops / median(tk, REPS) * 1e-9, gb = flops / median(tb, REPS) * 1e-9;
  printf("BENCH mm_512_f32_kiln %.2f GFLOP/s\n", gk);
  printf("BENCH mm_512_f32_cblas %.2f GFLOP/s\n", gb);
  printf("RATIO eager_mm_vs_cblas %.3f\n", gk / gb);
  kn_release(a);
  kn_release(b);
  free(c);
  return 0;
}
