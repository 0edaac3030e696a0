/*
** bench_mm.c: kiln's float32 mm against the fastest library GEMM measured in
** the same run.
**
** For 1 and 2 threads and square (256..2048) and MLP-like shapes, times
** kn_mm (public API, fresh output each call), oneDNN's dnnl_sgemm and
** OpenBLAS's cblas_sgemm on the same data, interleaved so all three see the
** same machine conditions. Prints, per case,
**   BENCH mm_<shape>_t<threads> kiln <x> onednn <y> openblas <z> GFLOP/s
** and
**   RATIO mm_vs_best_library <geometric mean over the cases of kiln / max(onednn,
**         openblas)> (goal >= 0.9; lowest <case> <x>)
** plus BENCH_INFO lines naming the kernels in use (oneDNN version and ISA,
** OpenBLAS core and configuration). Also times a mixed loop that alternates
** one of kiln's OpenMP kernels (avg_pool2d) with mm, and the SGD update of a
** linear layer's weight (784 -> 512, batch 256) by its gradient, whose layout
** decides how fast that update walks memory.
*/
#include <cblas.h>
#include <math.h>
#include <oneapi/dnnl/dnnl.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kiln/kiln.h"
#include "ops/nn_dnnl.h"
#include "bench_util.h"

char *openblas_get_corename(void);
char *openblas_get_config(void);
void openblas_set_num_threads(int n);

#define MIN_REPS 3
#define MAX_REPS 15
#define BUDGET_S 0.4 /* per case, all three implementations together */

typedef struct shape {
  const char *name;
  int M, K, N;
} shape;

static const shape shapes[] = {
    {"256", 256, 256, 256},     {"512", 512, 512, 512},         {"1024", 1024, 1024, 1024},
    {"2048", 2048, 2048, 2048}, {"mlp_256x784x512", 256, 784, 512},
    {"mlp_256x512x10", 256, 512, 10},
};
#define NSHAPES ((int)(sizeof shapes / sizeof shapes[0]))

static void print_info(void) {
  const dnnl_version_t *v = dnnl_version();
  printf("BENCH_INFO onednn_version %d.%d.%d\n", v->major, v->minor, v->patch);
  printf("BENCH_INFO onednn_isa %s\n", kn__dnnl_isa_name());
  printf("BENCH_INFO openblas_core %s\n", openblas_get_corename());
  printf("BENCH_INFO openblas_config %s\n", openblas_get_config());
  const char *ct = getenv("OPENBLAS_CORETYPE");
  if (ct) printf("BENCH_INFO OPENBLAS_CORETYPE %s\n", ct);
  const char *wp = getenv("OMP_WAIT_POLICY"), *spin = getenv("GOMP_SPINCOUNT");
  printf("BENCH_INFO omp_wait_policy %s%s%s\n", wp ? wp : "default", spin ? ", GOMP_SPINCOUNT " : "",
         spin ? spin : "");
  printf("BENCH_INFO kiln_kernels %s\n", kn_nn_kernel_info());
}

/* One case's operands: kiln tensors and the raw buffers they hold. */
typedef struct mmcase {
  kn_tensor *a, *b;
  float *pa, *pb, *c;
} mmcase;

static int case_init(mmcase *m, const shape *s) {
  m->a = kn_empty(KN_SHAPE(s->M, s->K), KN_FLOAT32);
  m->b = kn_empty(KN_SHAPE(s->K, s->N), KN_FLOAT32);
  m->c = malloc(sizeof(float) * (size_t)s->M * (size_t)s->N);
  if (!m->a || !m->b || !m->c) return -1;
  m->pa = kn_data(m->a);
  m->pb = kn_data(m->b);
  for (int i = 0; i < s->M * s->K; i++) m->pa[i] = (float)(i % 7) * 0.1f - 0.3f;
  for (int i = 0; i < s->K * s->N; i++) m->pb[i] = (float)(i % 5) * 0.2f - 0.4f;
  return 0;
}

static void case_free(mmcase *m) {
  kn_release(m->a);
  kn_release(m->b);
  free(m->c);
}

/* Run implementation k (0 kiln, 1 oneDNN, 2 OpenBLAS) once; seconds or -1. */
static double run_one(int k, const shape *s, mmcase *m) {
  double t0 = kn_bench_wall_s();
  if (k == 0) {
    kn_tensor *o = kn_mm(m->a, m->b);
    if (!o) return -1;
    double t = kn_bench_wall_s() - t0;
    kn_release(o);
    return t;
  }
  if (k == 1)
    dnnl_sgemm('N', 'N', s->M, s->N, s->K, 1.0f, m->pa, s->K, m->pb, s->N, 0.0f, m->c, s->N);
  else {
    openblas_set_num_threads(omp_get_max_threads()); /* kiln keeps it at 1 */
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, s->M, s->N, s->K, 1.0f, m->pa, s->K,
                m->pb, s->N, 0.0f, m->c, s->N);
  }
  return kn_bench_wall_s() - t0;
}

/* kiln's result against OpenBLAS's (c holds the last library result). */
static int check(const shape *s, mmcase *m) {
  kn_tensor *o = kn_mm(m->a, m->b);
  if (!o) return -1;
  run_one(2, s, m);
  const float *po = kn_data(o);
  double worst = 0;
  for (int i = 0; i < s->M * s->N; i++) {
    double d = fabs((double)po[i] - (double)m->c[i]) / (1.0 + fabs((double)m->c[i]));
    if (d > worst) worst = d;
  }
  kn_release(o);
  if (worst > 1e-4) fprintf(stderr, "bench_mm: %s differs from cblas by %g\n", s->name, worst);
  return worst > 1e-4 ? -1 : 0;
}

/* Median seconds of each implementation on shape s; 0 on success. */
static int time_case(const shape *s, double med[3]) {
  mmcase m;
  if (case_init(&m, s) != 0 || check(s, &m) != 0) {
    case_free(&m);
    return -1;
  }
  double t[3][MAX_REPS], start = kn_bench_wall_s();
  int r = 0;
  for (; r < MAX_REPS && (r < MIN_REPS || kn_bench_wall_s() - start < BUDGET_S); r++)
    for (int j = 0; j < 3; j++) {
      int k = (j + r) % 3; /* rotate which goes first */
      if ((t[k][r] = run_one(k, s, &m)) < 0) {
        case_free(&m);
        return -1;
      }
    }
  for (int k = 0; k < 3; k++) med[k] = kn_bench_median(t[k], r);
  case_free(&m);
  return 0;
}

static void set_threads(int n) {
  omp_set_num_threads(n);
  kn_set_num_threads(n);
}

/* Every case at 1 and 2 threads; prints the ratio line. */
static int bench_cases(void) {
  double logsum = 0, lowest = 1e9;
  char lowest_name[64] = "";
  int ncases = 0;
  for (int th = 1; th <= 2; th++) {
    set_threads(th);
    for (int i = 0; i < NSHAPES; i++) {
      const shape *s = &shapes[i];
      double med[3], g[3], flops = 2.0 * s->M * s->N * s->K;
      kn__gemm_record(true);
      if (time_case(s, med) != 0) return -1;
      for (int k = 0; k < 3; k++) g[k] = flops / med[k] * 1e-9;
      double ratio = g[0] / (g[1] > g[2] ? g[1] : g[2]);
      printf("BENCH mm_%s_t%d kiln %.1f onednn %.1f openblas %.1f GFLOP/s (kiln/best %.3f)\n",
             s->name, th, g[0], g[1], g[2], ratio);
      kn_bench_gemm_choices(s->name);
      logsum += log(ratio);
      ncases++;
      if (ratio < lowest) {
        lowest = ratio;
        snprintf(lowest_name, sizeof lowest_name, "mm_%s_t%d", s->name, th);
      }
    }
  }
  printf("RATIO mm_vs_best_library %.3f (goal >= 0.9; geometric mean of %d cases, lowest %s "
         "%.3f)\n", exp(logsum / ncases), ncases, lowest_name, lowest);
  return 0;
}

/* An OpenMP kernel, then a GEMM, back to back. */
static int bench_mixed(void) {
  set_threads(2);
  kn_tensor *img = kn_ones(KN_SHAPE(8, 32, 64, 64), KN_FLOAT32);
  kn_tensor *a = kn_ones(KN_SHAPE(512, 512), KN_FLOAT32);
  if (!img || !a) return -1;
  double tm[15];
  for (int r = 0; r < 15; r++) {
    double t0 = kn_bench_wall_s();
    for (int k = 0; k < 4; k++) {
      kn_release(kn_avg_pool2d(img, (int64_t[]){2, 2}, NULL, NULL, false, true, 0));
      kn_release(kn_mm(a, a));
    }
    tm[r] = kn_bench_wall_s() - t0;
  }
  kn_release(img);
  kn_release(a);
  printf("BENCH mixed_pool_mm_4x %.1f us\n", kn_bench_median(tm, 15) * 1e6);
  return 0;
}

/* w -= 0.01 * w.grad after one linear backward; w.grad's layout matters. */
static int bench_sgd(void) {
  kn_scope_begin();
  kn_tensor *x = kn_ones(KN_SHAPE(256, 784), KN_FLOAT32);
  kn_tensor *w = kn_full(KN_SHAPE(512, 784), kn_float(0.01), KN_FLOAT32);
  kn_tensor *b = kn_zeros(KN_SHAPE(512), KN_FLOAT32);
  kn_set_requires_grad(w, true);
  kn_set_requires_grad(b, true);
  kn_tensor *y = kn_linear(x, w, b);
  if (!y || kn_backward(kn_sum(y), NULL) != KN_OK || !kn_grad(w)) return -1;
  printf("BENCH_INFO linear_weight_grad_contiguous %d\n", kn_is_contiguous(kn_grad(w)));
  bool prev = kn_no_grad_begin();
  double t[41];
  for (int r = 0; r < 41; r++) {
    double t0 = kn_bench_wall_s();
    kn_status st = kn_add_scaled_(w, kn_grad(w), kn_float(-0.01));
    t[r] = kn_bench_wall_s() - t0;
    if (st != KN_OK) return -1;
  }
  kn_no_grad_end(prev);
  printf("BENCH mlp_linear_weight_sgd_update %.1f us\n", kn_bench_median(t, 41) * 1e6);
  kn_scope_end();
  return 0;
}

int main(void) {
  print_info();
  if (bench_cases() != 0 || bench_mixed() != 0 || bench_sgd() != 0) {
    fprintf(stderr, "bench_mm: %s\n", kn_last_error());
    return 1;
  }
  return 0;
}
