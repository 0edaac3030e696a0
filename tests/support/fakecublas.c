/*
** tests/support/fakecublas.c: the cuBLAS entry points kiln calls
** (src/cuda/cuda_int.h), in the fake driver's library, so that tests point
** KILN_CUDA_CUBLAS at libkn_fakecuda.so too. Each product is computed on
** the host from the definition, column-major as cuBLAS defines it:
**   C = alpha * op(A) * op(B) + beta * C   (C not read when beta is 0),
** op(X) = X or its transpose, float16/bfloat16 elements widened to float,
** sums in double. A product is host work of the fake driver
** (fake_host_work): run at once, or recorded while a stream is captured and
** run again by each replay of the graph.
*/
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "support/fakecuda.h"

#pragma GCC diagnostic ignored "-Wmissing-prototypes"
#define API __attribute__((visibility("default")))

enum { OK = 0, NOT_INITIALIZED = 1, INVALID_VALUE = 7, NOT_SUPPORTED = 15 };
enum { R_32F = 0, R_64F = 1, R_16F = 2, R_16BF = 14 };

typedef struct gemm {
  int ta, tb, m, n, k, lda, ldb, ldc, batch, type;
  long long sa, sb, sc;
  double alpha, beta;
  const void *a, *b;
  void *c;
} gemm;

static int handle_token; /* the handle's address: any non-NULL pointer */

API int cublasCreate_v2(void **h) {
  if (!h) return INVALID_VALUE;
  *h = &handle_token;
  return OK;
}
API int cublasDestroy_v2(void *h) { return h == &handle_token ? OK : NOT_INITIALIZED; }
API int cublasSetStream_v2(void *h, void *s) {
  (void)s;
  return h == &handle_token ? OK : NOT_INITIALIZED;
}
API int cublasSetWorkspace_v2(void *h, void *w, size_t n) {
  (void)w, (void)n;
  return h == &handle_token ? OK : NOT_INITIALIZED;
}
API int cublasGetVersion_v2(void *h, int *v) {
  (void)h;
  *v = 99999;
  return OK;
}
API const char *cublasGetStatusName(int s) {
  return s == OK ? "CUBLAS_STATUS_SUCCESS" : s == NOT_SUPPORTED ? "CUBLAS_STATUS_NOT_SUPPORTED"
                                                                : "CUBLAS_STATUS_INVALID_VALUE";
}

/* ---- the product ---- */
static float half_to_float(uint16_t h) {
  unsigned e = (h >> 10) & 31u, m = h & 1023u;
  float f = e == 0 ? ldexpf((float)m, -24) : e == 31 ? (m ? NAN : INFINITY)
                                                     : ldexpf((float)(m | 1024u), (int)e - 25);
  return (h & 0x8000u) ? -f : f;
}

static uint16_t float_to_half(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  uint16_t s = (uint16_t)((u >> 16) & 0x8000u);
  u &= 0x7fffffffu;
  if (u > 0x7f800000u) return s | 0x7e00u;
  if (u >= 0x477ff000u) return s | 0x7c00u;
  if (u < 0x38800000u) {
    float a;
    memcpy(&a, &u, 4);
    return s | (uint16_t)nearbyintf(a * 16777216.0f);
  }
  u -= 0x38000000u;
  return s | (uint16_t)((u + 0xfffu + ((u >> 13) & 1u)) >> 13);
}

static float bf16_to_float(uint16_t b) {
  uint32_t u = (uint32_t)b << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}

static uint16_t float_to_bf16(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40u);
  return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

static double load(int type, const void *p, long long i) {
  switch (type) {
  case R_64F: return ((const double *)p)[i];
  case R_16F: return half_to_float(((const uint16_t *)p)[i]);
  case R_16BF: return bf16_to_float(((const uint16_t *)p)[i]);
  default: return ((const float *)p)[i];
  }
}

static void store(int type, void *p, long long i, double v) {
  switch (type) {
  case R_64F: ((double *)p)[i] = v; break;
  case R_16F: ((uint16_t *)p)[i] = float_to_half((float)v); break;
  case R_16BF: ((uint16_t *)p)[i] = float_to_bf16((float)v); break;
  default: ((float *)p)[i] = (float)v; break;
  }
}

static void run_gemm(const void *args) {
  const gemm *g = args;
  for (int q = 0; q < g->batch; q++) {
    const long long oa = q * g->sa, ob = q * g->sb, oc = q * g->sc;
    for (int j = 0; j < g->n; j++)
      for (int i = 0; i < g->m; i++) {
        double acc = 0;
        for (int p = 0; p < g->k; p++) {
          long long ia = g->ta ? p + (long long)i * g->lda : i + (long long)p * g->lda;
          long long ib = g->tb ? j + (long long)p * g->ldb : p + (long long)j * g->ldb;
          acc += load(g->type, g->a, oa + ia) * load(g->type, g->b, ob + ib);
        }
        long long ic = oc + i + (long long)j * g->ldc;
        double v = g->alpha * acc;
        if (g->beta != 0) v += g->beta * load(g->type, g->c, ic);
        store(g->type, g->c, ic, v);
      }
  }
}

static int submit(void *h, gemm *g) {
  if (h != &handle_token) return NOT_INITIALIZED;
  if (g->m < 0 || g->n < 0 || g->k < 0 || g->batch < 1) return INVALID_VALUE;
  if ((g->type != R_32F && g->type != R_64F && g->type != R_16F && g->type != R_16BF))
    return NOT_SUPPORTED;
  return fake_host_work(run_gemm, g, sizeof *g) == FAKE_SUCCESS ? OK : INVALID_VALUE;
}

API int cublasSgemm_v2(void *h, int ta, int tb, int m, int n, int k, const float *alpha,
                       const float *a, int lda, const float *b, int ldb, const float *beta,
                       float *c, int ldc) {
  gemm g = {ta, tb, m, n, k, lda, ldb, ldc, 1, R_32F, 0, 0, 0, *alpha, *beta, a, b, c};
  return submit(h, &g);
}

API int cublasDgemm_v2(void *h, int ta, int tb, int m, int n, int k, const double *alpha,
                       const double *a, int lda, const double *b, int ldb, const double *beta,
                       double *c, int ldc) {
  gemm g = {ta, tb, m, n, k, lda, ldb, ldc, 1, R_64F, 0, 0, 0, *alpha, *beta, a, b, c};
  return submit(h, &g);
}

API int cublasSgemmStridedBatched(void *h, int ta, int tb, int m, int n, int k,
                                  const float *alpha, const float *a, int lda, long long sa,
                                  const float *b, int ldb, long long sb, const float *beta,
                                  float *c, int ldc, long long sc, int batch) {
  gemm g = {ta, tb, m, n, k, lda, ldb, ldc, batch, R_32F, sa, sb, sc, *alpha, *beta, a, b, c};
  return submit(h, &g);
}

API int cublasDgemmStridedBatched(void *h, int ta, int tb, int m, int n, int k,
                                  const double *alpha, const double *a, int lda, long long sa,
                                  const double *b, int ldb, long long sb, const double *beta,
                                  double *c, int ldc, long long sc, int batch) {
  gemm g = {ta, tb, m, n, k, lda, ldb, ldc, batch, R_64F, sa, sb, sc, *alpha, *beta, a, b, c};
  return submit(h, &g);
}

/* The Ex forms: one element type for A, B and C, float alpha/beta
** (COMPUTE_32F), as kiln calls them. */
API int cublasGemmEx(void *h, int ta, int tb, int m, int n, int k, const void *alpha,
                     const void *a, int atype, int lda, const void *b, int btype, int ldb,
                     const void *beta, void *c, int ctype, int ldc, int compute, int algo) {
  (void)compute, (void)algo;
  if (atype != btype || atype != ctype) return NOT_SUPPORTED;
  gemm g = {ta, tb, m, n, k, lda, ldb, ldc, 1, atype, 0, 0, 0,
            *(const float *)alpha, *(const float *)beta, a, b, c};
  return submit(h, &g);
}

API int cublasGemmStridedBatchedEx(void *h, int ta, int tb, int m, int n, int k,
                                   const void *alpha, const void *a, int atype, int lda,
                                   long long sa, const void *b, int btype, int ldb, long long sb,
                                   const void *beta, void *c, int ctype, int ldc, long long sc,
                                   int batch, int compute, int algo) {
  (void)compute, (void)algo;
  if (atype != btype || atype != ctype) return NOT_SUPPORTED;
  gemm g = {ta, tb, m, n, k, lda, ldb, ldc, batch, atype, sa, sb, sc,
            *(const float *)alpha, *(const float *)beta, a, b, c};
  return submit(h, &g);
}
