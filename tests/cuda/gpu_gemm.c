/*
** tests/cuda/gpu_gemm.c: kn__cuda_gemm (cuBLAS) against kiln's CPU matmul
** on the same inputs: float32, float64, float16 and bfloat16, each
** transpose combination, one matrix and a strided batch, alpha and beta,
** and a batch sharing one B (stride 0). See gpu_check.h.
*/
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda/cuda.h"
#include "gpu_check.h"
#include "kiln/kiln.h"

/* A device copy of t's elements (contiguous); NULL on failure. */
static void *upload(kn_tensor *t) {
  kn_tensor *c = kn_contiguous(t);
  size_t bytes = (size_t)kn_numel(c) * kn_dtype_size(kn_tensor_dtype(c));
  void *d = NULL;
  if (kn__cuda_alloc(bytes, &d) != KN_OK ||
      kn__cuda_memcpy(d, KN_CUDA, kn_data(c), KN_CPU, bytes) != KN_OK) {
    kn__cuda_free(d);
    d = NULL;
  }
  return d;
}

/* The device buffer d holding a tensor of sizes (3 dims) and dtype dt, as
** float64 values (malloc'd). */
static double *download(void *d, const int64_t *sizes, kn_dtype dt) {
  int64_t n = sizes[0] * sizes[1] * sizes[2];
  size_t bytes = (size_t)n * kn_dtype_size(dt);
  void *h = malloc(bytes);
  double *out = NULL;
  if (kn__cuda_memcpy(h, KN_CPU, d, KN_CUDA, bytes) == KN_OK) {
    kn_tensor *t = kn_to(kn_from_array(h, 3, sizes, dt), KN_FLOAT64);
    out = malloc(sizeof(double) * (size_t)n);
    memcpy(out, kn_data(t), sizeof(double) * (size_t)n);
  }
  free(h);
  return out;
}

static void tolerance(kn_dtype dt, double *atol, double *rtol) {
  switch (dt) {
  case KN_FLOAT64: *atol = 1e-10, *rtol = 1e-10; break;
  case KN_FLOAT32: *atol = 1e-4, *rtol = 1e-5; break;
  case KN_FLOAT16: *atol = 2e-2, *rtol = 4e-3; break;
  default: *atol = 1.5e-1, *rtol = 2e-2; break;
  }
}

typedef struct gemm_case {
  kn_dtype dt;
  bool ta, tb, shared_b;
  int64_t batch, m, n, k;
  double alpha, beta;
} gemm_case;

/* The worst |got - want| / (atol + rtol |want|) (<= 1 passes). */
static double worst(const double *got, kn_tensor *want, int64_t n, kn_dtype dt) {
  double atol, rtol, w = 0;
  tolerance(dt, &atol, &rtol);
  const double *ref = kn_data(kn_contiguous(want));
  for (int64_t i = 0; i < n; i++) {
    double e = fabs(got[i] - ref[i]) / (atol + rtol * fabs(ref[i]));
    if (!(e <= w)) w = e; /* NaN stays */
  }
  return w;
}

static void run_case(const gemm_case *g) {
  kn_scope_begin();
  int64_t sa[3] = {g->batch, g->m, g->k}, sb[3] = {g->shared_b ? 1 : g->batch, g->k, g->n};
  int64_t sc[3] = {g->batch, g->m, g->n};
  kn_tensor *a = kn_to(kn_randn(3, sa, NULL, KN_FLOAT32), g->dt);
  kn_tensor *b = kn_to(kn_randn(3, sb, NULL, KN_FLOAT32), g->dt);
  kn_tensor *c0 = kn_to(kn_randn(3, sc, NULL, KN_FLOAT32), g->dt);
  /* the reference: kiln's CPU matmul (broadcasting a shared B), then the
  ** alpha/beta combination in float64 */
  kn_tensor *ab = kn_to(kn_matmul(a, g->shared_b ? kn_squeeze_dim(b, 0) : b), KN_FLOAT64);
  kn_tensor *want = kn_add(kn_mul(ab, kn_scalar_tensor(kn_float(g->alpha), KN_FLOAT64)),
                           kn_mul(kn_to(c0, KN_FLOAT64), kn_scalar_tensor(kn_float(g->beta), KN_FLOAT64)));
  void *da = upload(g->ta ? kn_transpose(a, 1, 2) : a);
  void *db = upload(g->tb ? kn_transpose(b, 1, 2) : b);
  void *dc = upload(c0);
  kn_status s = da && db && dc ? KN_OK : KN_EINTERNAL;
  if (s == KN_OK)
    s = kn__cuda_gemm(g->dt, g->ta, g->tb, g->m, g->n, g->k, g->alpha, da, g->ta ? g->m : g->k,
                      g->m * g->k, db, g->tb ? g->k : g->n, g->shared_b ? 0 : g->k * g->n, g->beta,
                      dc, g->n, g->m * g->n, g->batch);
  double *got = s == KN_OK ? download(dc, sc, g->dt) : NULL;
  double w = got ? worst(got, want, kn_numel(want), g->dt) : INFINITY;
  char name[96];
  snprintf(name, sizeof name, "gemm_%s%s%s_b%lld%s%s", kn_dtype_name(g->dt), g->ta ? "_ta" : "",
           g->tb ? "_tb" : "", (long long)g->batch, g->shared_b ? "_sharedB" : "",
           g->beta != 0 ? "_beta" : "");
  CHECK(name, s == KN_OK && w <= 1, "%s worst error %.3g of the tolerance",
        s == KN_OK ? "" : kn_last_error(), w);
  free(got);
  kn__cuda_free(da);
  kn__cuda_free(db);
  kn__cuda_free(dc);
  kn_scope_end();
}

void kn__gpu_check_gemms(void) {
  kn_manual_seed(7);
  kn_dtype dts[] = {KN_FLOAT32, KN_FLOAT64, KN_FLOAT16, KN_BFLOAT16};
  for (int d = 0; d < 4; d++)
    for (int t = 0; t < 4; t++)
      for (int batch = 1; batch <= 3; batch += 2) {
        gemm_case g = {dts[d], t & 1, t >> 1, false, batch, 67, 45, 129, 1.0, 0.0};
        if (t == 3) g.alpha = 1.5, g.beta = 0.5;
        run_case(&g);
      }
  gemm_case shared = {KN_FLOAT32, false, true, true, 4, 33, 70, 64, 1.0, 1.0};
  run_case(&shared);
  gemm_case empty_k = {KN_FLOAT32, false, false, false, 2, 5, 6, 0, 1.0, 0.5};
  run_case(&empty_k);
  kn_status s = kn__cuda_gemm(KN_INT64, false, false, 2, 2, 2, 1, NULL, 2, 0, NULL, 2, 0, 0, NULL,
                              2, 0, 1);
  CHECK("gemm_int64_refused", s == KN_EDTYPE && strstr(kn_last_error(), "int64"), "status %d: %s",
        s, kn_last_error());
}
