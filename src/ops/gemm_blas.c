/*
** ops/gemm_blas.c: running a float32 GEMM in the library chosen for it
** (ops/gemm_select.h), and float64 on OpenBLAS.
**
** oneDNN runs on the OpenMP team it is given: the whole count, or the
** calling thread alone for a product under two grains (onednn_sgemm).
** OpenBLAS runs on kiln's OpenMP team too: its own count is set to 1
** before its first use (and
** again whenever something else raised it: a program comparing libraries),
** and the product is cut into one block of rows (or, when M is small
** against N, of columns) a thread, each block one single-threaded OpenBLAS
** call. Each element of C is still one library call's dot product over the
** whole K, so the cut changes no rounding.
*/
#include <cblas.h>
#include <oneapi/dnnl/dnnl.h>
#include <omp.h>
#include <pthread.h>

#include "ops/gemm_select.h"
#include "ops/nn_dnnl.h"
#include "ops/threads.h"

int openblas_get_num_threads(void);
void openblas_set_num_threads(int n);

/* OpenBLAS single-threaded: kiln's team provides the threads. */
static void blas_one_thread(void) {
  if (openblas_get_num_threads() != 1) openblas_set_num_threads(1);
}

/* One block of a team's product: rows [r0, r1) of C, or columns [c0, c1). */
typedef struct gemm_args {
  bool ta, tb, dbl;
  int64_t M, N, K, lda, ldb, ldc;
  double alpha, beta;
  const void *A, *B;
  void *C;
} gemm_args;

static void blas_call(const gemm_args *g, int64_t r0, int64_t r1, int64_t c0, int64_t c1) {
  enum CBLAS_TRANSPOSE ta = g->ta ? CblasTrans : CblasNoTrans;
  enum CBLAS_TRANSPOSE tb = g->tb ? CblasTrans : CblasNoTrans;
  int64_t ao = g->ta ? r0 : r0 * g->lda, bo = g->tb ? c0 * g->ldb : c0, co = r0 * g->ldc + c0;
  int m = (int)(r1 - r0), n = (int)(c1 - c0);
  if (g->dbl)
    cblas_dgemm(CblasRowMajor, ta, tb, m, n, (int)g->K, g->alpha, (const double *)g->A + ao,
                (int)g->lda, (const double *)g->B + bo, (int)g->ldb, g->beta,
                (double *)g->C + co, (int)g->ldc);
  else
    cblas_sgemm(CblasRowMajor, ta, tb, m, n, (int)g->K, (float)g->alpha,
                (const float *)g->A + ao, (int)g->lda, (const float *)g->B + bo, (int)g->ldb,
                (float)g->beta, (float *)g->C + co, (int)g->ldc);
}

/* Thread t of nt: its block (rows when by_rows, else columns) in steps of
** 16, the last thread taking the remainder. */
static void blas_block(const gemm_args *g, bool by_rows, int t, int nt) {
  int64_t len = by_rows ? g->M : g->N;
  int64_t per = ((len + nt - 1) / nt + 15) / 16 * 16;
  int64_t b0 = t * per, b1 = b0 + per < len ? b0 + per : len;
  if (b0 >= b1) return;
  if (by_rows) blas_call(g, b0, b1, 0, g->N);
  else blas_call(g, 0, g->M, b0, b1);
}

static void blas_team(const gemm_args *g, int team) {
  blas_one_thread();
  if (team <= 1) {
    blas_call(g, 0, g->M, 0, g->N);
    return;
  }
  /* rows unless M is small against N (each row block reads all of B) */
  bool by_rows = g->M >= g->N || g->M >= 64 * team;
  KN__PAR_FOR(team, for (int t = 0; t < team; t++) blas_block(g, by_rows, t, team););
}

/* oneDNN on the calling thread for a team of one, else on the whole count
** (kn__par_threads: a smaller region would end threads of libgomp's pool). */
static kn_status onednn_sgemm(const gemm_args *g, int team) {
  int prev = kn__par_limit_team(team);
  dnnl_status_t s = dnnl_sgemm(g->ta ? 'T' : 'N', g->tb ? 'T' : 'N', g->M, g->N, g->K,
                               (float)g->alpha, g->A, g->lda, g->B, g->ldb, (float)g->beta,
                               g->C, g->ldc);
  kn__par_restore(prev);
  return kn__dnnl_status(s, "sgemm");
}

static int team_threads(void) { return omp_in_parallel() ? 1 : omp_get_max_threads(); }

kn__gemm_plan kn__gemm_plan_for(bool ta, bool tb, int64_t M, int64_t N, int64_t K) {
  kn__gemm_shape s = {ta, tb, M, N, K};
  return kn__gemm_choose(kn__gemm_mode_get(), kn__gemm_cpu_get(), s, team_threads());
}

kn_status kn__nn_sgemm_plan(const kn__gemm_plan *plan, bool ta, bool tb, int64_t M, int64_t N,
                            int64_t K, float alpha, const float *A, int64_t lda,
                            const float *B, int64_t ldb, float beta, float *C, int64_t ldc) {
  kn__gemm_shape s = {ta, tb, M, N, K};
  int threads = team_threads();
  kn__gemm_plan p = plan ? *plan : kn__gemm_choose(kn__gemm_mode_get(), kn__gemm_cpu_get(), s,
                                                   threads);
  kn__gemm_note(s, threads, p);
  gemm_args g = {ta, tb, false, M, N, K, lda, ldb, ldc, alpha, beta, A, B, C};
  if (p.lib == KN__GEMM_LIB_ONEDNN) return onednn_sgemm(&g, p.team);
  blas_team(&g, p.team);
  return KN_OK;
}

kn_status kn__nn_sgemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha,
                       const float *A, int64_t lda, const float *B, int64_t ldb, float beta,
                       float *C, int64_t ldc) {
  return kn__nn_sgemm_plan(NULL, ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

void kn__nn_dgemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, double alpha,
                  const double *A, int64_t lda, const double *B, int64_t ldb, double beta,
                  double *C, int64_t ldc) {
  kn__gemm_shape s = {ta, tb, M, N, K};
  kn__gemm_plan p = kn__gemm_choose(KN__GEMM_OPENBLAS, kn__gemm_cpu_get(), s, team_threads());
  gemm_args g = {ta, tb, true, M, N, K, lda, ldb, ldc, alpha, beta, A, B, C};
  blas_team(&g, p.team);
}
