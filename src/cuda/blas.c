/*
** cuda/blas.c: GEMMs through cuBLAS (loaded at first use). One handle on
** kiln's stream, used under a lock, with a workspace from the caching
** allocator (so that a GEMM inside a CUDA graph capture allocates nothing).
**
** Row-major to cuBLAS's column-major: a row-major m x n matrix C with
** leading dimension ldc is, read column-major, C^T (n x m). C = op(A) op(B)
** is then C^T = op(B)^T op(A)^T, so cuBLAS is asked for an n x m product of
** B (op tb) and A (op ta), with the leading dimensions unchanged.
*/
#include <limits.h>
#include <stdio.h>

#include "core/error.h"
#include "cuda/cuda_int.h"
#include "logging/log.h"

static pthread_once_t blas_once = PTHREAD_ONCE_INIT;
static pthread_mutex_t blas_mu = PTHREAD_MUTEX_INITIALIZER;
static kn__cublas_api blas;
static void *handle;
static kn_status blas_status;
static char blas_msg[1600];
static char blas_path[512];

#define WORKSPACE_BYTES ((size_t)32 << 20)

#define KN__FN_NAME(field, sym, req, ret, args) sym,
#define KN__FN_REQ(field, sym, req, ret, args) req,
static const char *const blas_names[] = {KN__CUBLAS_FUNCS(KN__FN_NAME)};
static const bool blas_req[] = {KN__CUBLAS_FUNCS(KN__FN_REQ)};
#undef KN__FN_NAME
#undef KN__FN_REQ

static const char *status_name(int st) {
  if (blas.GetStatusName) return blas.GetStatusName(st);
  switch (st) {
  case 1: return "CUBLAS_STATUS_NOT_INITIALIZED";
  case 3: return "CUBLAS_STATUS_ALLOC_FAILED";
  case 7: return "CUBLAS_STATUS_INVALID_VALUE";
  case 8: return "CUBLAS_STATUS_ARCH_MISMATCH";
  case 11: return "CUBLAS_STATUS_MAPPING_ERROR";
  case 13: return "CUBLAS_STATUS_EXECUTION_FAILED";
  case 14: return "CUBLAS_STATUS_INTERNAL_ERROR";
  case 15: return "CUBLAS_STATUS_NOT_SUPPORTED";
  default: return "CUBLAS_STATUS_(unknown)";
  }
}

static void blas_fail(kn_status s, const char *what, const char *detail) {
  snprintf(blas_msg, sizeof blas_msg, "%.500s: %.1000s", what, detail);
  blas_status = s;
}

static void blas_load(void) {
  static const char *const sonames[] = {"libcublas.so.13", "libcublas.so.12", "libcublas.so",
                                        NULL};
  char why[1200];
  blas_status = kn__cuda_enter();
  if (blas_status != KN_OK) {
    blas_fail(blas_status, "cuBLAS", kn_last_error());
    return;
  }
  void *lib = kn__cuda_dlopen("KILN_CUDA_CUBLAS", sonames, blas_path, sizeof blas_path, why,
                              sizeof why);
  if (!lib) {
    blas_fail(KN_EUNSUPPORTED, "cannot load cuBLAS", why);
    return;
  }
  if (!kn__cuda_dlsyms(lib, (void **)&blas, blas_names, blas_req,
                       sizeof blas_names / sizeof *blas_names, why, sizeof why)) {
    blas_fail(KN_EUNSUPPORTED, blas_path, why);
    return;
  }
  int st = blas.Create(&handle);
  if (st) {
    blas_fail(KN_EINTERNAL, "cublasCreate_v2", status_name(st));
    return;
  }
  st = blas.SetStream(handle, kn__cuda_rt_get()->stream);
  if (st) {
    blas_fail(KN_EINTERNAL, "cublasSetStream_v2", status_name(st));
    return;
  }
  void *ws = NULL;
  if (blas.SetWorkspace && kn__cuda_alloc(WORKSPACE_BYTES, &ws) == KN_OK &&
      blas.SetWorkspace(handle, ws, WORKSPACE_BYTES) != 0)
    kn__cuda_free(ws);
  int version = 0;
  if (blas.GetVersion) blas.GetVersion(handle, &version);
  KN_LOG(KN_LOG_CUDA, KN_INFO, "cuBLAS %d (%s)", version, blas_path);
}

kn_status kn__cublas_get(const kn__cublas_api **api, void **h) {
  pthread_once(&blas_once, blas_load);
  *api = &blas;
  *h = handle;
  return blas_status == KN_OK ? KN_OK : kn__error(blas_status, "%s", blas_msg);
}

const char *kn__cuda_cublas_path(void) { return handle ? blas_path : ""; }

typedef struct gemm_args {
  int ta, tb, m, n, k, lda, ldb, ldc, batch;
  long long sa, sb, sc;
} gemm_args;

enum { OP_N = 0, OP_T = 1, R_32F = 0, R_16F = 2, R_16BF = 14, COMPUTE_32F = 68, ALGO_DEFAULT = -1 };

/* The cuBLAS call, operands swapped (see the top of the file). */
static int gemm_call(kn_dtype dt, const gemm_args *g, double alpha, const void *a, const void *b,
                     double beta, void *c) {
  float fa = (float)alpha, fb = (float)beta;
  int bt = g->tb ? OP_T : OP_N, at = g->ta ? OP_T : OP_N;
  if (dt == KN_FLOAT64)
    return g->batch == 1
               ? blas.Dgemm(handle, bt, at, g->n, g->m, g->k, &alpha, b, g->ldb, a, g->lda, &beta,
                            c, g->ldc)
               : blas.DgemmSB(handle, bt, at, g->n, g->m, g->k, &alpha, b, g->ldb, g->sb, a,
                              g->lda, g->sa, &beta, c, g->ldc, g->sc, g->batch);
  if (dt == KN_FLOAT32)
    return g->batch == 1
               ? blas.Sgemm(handle, bt, at, g->n, g->m, g->k, &fa, b, g->ldb, a, g->lda, &fb, c,
                            g->ldc)
               : blas.SgemmSB(handle, bt, at, g->n, g->m, g->k, &fa, b, g->ldb, g->sb, a, g->lda,
                              g->sa, &fb, c, g->ldc, g->sc, g->batch);
  int ty = dt == KN_FLOAT16 ? R_16F : R_16BF;
  return g->batch == 1
             ? blas.GemmEx(handle, bt, at, g->n, g->m, g->k, &fa, b, ty, g->ldb, a, ty, g->lda,
                           &fb, c, ty, g->ldc, COMPUTE_32F, ALGO_DEFAULT)
             : blas.GemmSBEx(handle, bt, at, g->n, g->m, g->k, &fa, b, ty, g->ldb, g->sb, a, ty,
                             g->lda, g->sa, &fb, c, ty, g->ldc, g->sc, g->batch, COMPUTE_32F,
                             ALGO_DEFAULT);
}

/* The dtype's name (the tensor layer above owns kn_dtype_name). */
static const char *dtype_name(kn_dtype dt) {
#define KN__DT_NAME(e, name, size, kind) name,
  static const char *const names[] = {KN_DTYPE_MAP(KN__DT_NAME)};
#undef KN__DT_NAME
  return (unsigned)dt < KN_DTYPE_COUNT ? names[dt] : "(invalid dtype)";
}

static bool fits_int(int64_t v) { return v >= 0 && v <= INT_MAX; }

static kn_status check_args(kn_dtype dt, int64_t m, int64_t n, int64_t k, int64_t lda,
                            int64_t ldb, int64_t ldc, int64_t batch) {
  if (dt != KN_FLOAT32 && dt != KN_FLOAT64 && dt != KN_FLOAT16 && dt != KN_BFLOAT16)
    return kn__error(KN_EDTYPE, "kn__cuda_gemm: expected float32, float64, float16 or bfloat16, "
                                "got %s", dtype_name(dt));
  if (!fits_int(m) || !fits_int(n) || !fits_int(k) || !fits_int(lda) || !fits_int(ldb) ||
      !fits_int(ldc) || !fits_int(batch))
    return kn__error(KN_ERANGE, "kn__cuda_gemm: sizes m=%lld n=%lld k=%lld batch=%lld and leading "
                                "dimensions must be in [0, %d]", (long long)m, (long long)n,
                     (long long)k, (long long)batch, INT_MAX);
  return KN_OK;
}

kn_status kn__cuda_gemm(kn_dtype dt, bool ta, bool tb, int64_t m, int64_t n, int64_t k,
                        double alpha, const void *a, int64_t lda, int64_t sa, const void *b,
                        int64_t ldb, int64_t sb, double beta, void *c, int64_t ldc, int64_t sc,
                        int64_t batch) {
  kn_status s = check_args(dt, m, n, k, lda, ldb, ldc, batch);
  if (s != KN_OK || m == 0 || n == 0 || batch == 0) return s;
  const kn__cublas_api *api = NULL;
  void *h = NULL;
  if ((s = kn__cuda_enter()) != KN_OK || (s = kn__cublas_get(&api, &h)) != KN_OK) return s;
  /* cuBLAS wants leading dimensions >= 1 even for empty operands */
  gemm_args g = {ta, tb, (int)m, (int)n, (int)k, lda ? (int)lda : 1, ldb ? (int)ldb : 1,
                 ldc ? (int)ldc : 1, (int)batch, sa, sb, sc};
  int pr = kn__cuda_prof_begin();
  pthread_mutex_lock(&blas_mu);
  int st = gemm_call(dt, &g, alpha, a, b, beta, c);
  pthread_mutex_unlock(&blas_mu);
  if (pr >= 0) {
    char label[128];
    snprintf(label, sizeof label, "cuBLAS %s GEMM %lldx%lldx%lld%s%s%s", dtype_name(dt),
             (long long)m, (long long)n, (long long)k, batch > 1 ? " batched" : "",
             ta ? " A^T" : "", tb ? " B^T" : "");
    kn__cuda_prof_end(pr, NULL, label);
  }
  if (st == 0) return KN_OK;
  return kn__error(KN_EINTERNAL, "cuBLAS GEMM (%s, m=%lld n=%lld k=%lld batch=%lld%s%s) failed: %s",
                   dtype_name(dt), (long long)m, (long long)n, (long long)k, (long long)batch,
                   ta ? ", A transposed" : "", tb ? ", B transposed" : "", status_name(st));
}
