/*
** test_gemm_select.c: the float32 GEMM's library per call shape
** (ops/gemm_select.h). Every library and team (oneDNN; OpenBLAS on one
** thread and cut into row or column blocks over kiln's team) against a
** double-precision loop written here, over transposes, strided leading
** dimensions, M/N/K = 1 and a product with a 64-byte aligned B and M < 384
** (oneDNN's slow case); the rule's choices against the table of
** docs/KERNELS.md; its determinism; KILN_GEMM and its error message; and
** OpenBLAS's threads following kiln's count.
**
** Tolerance: a float32 dot product of K terms summed in any order (FMA or
** not) is within (K + 2) * 2^-24 * sum |a_ik b_kj| of the exact one
** (Higham's gamma_K bound, with room for alpha/beta's rounding); the test
** allows twice that plus |beta c0| * 2^-22.
*/
#include <criterion/criterion.h>
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "kiln/kiln.h"
#include "ops/gemm_select.h"
#include "ops/nn.h"
#include "ops/threads.h"
#include "support/log_capture.h"

int openblas_get_num_threads(void);
void openblas_set_num_threads(int n);

/* Deterministic, irregular values in [-1, 1]. */
static void fill(float *p, int64_t n, double seed) {
  for (int64_t i = 0; i < n; i++) p[i] = (float)sin(seed + 0.731 * (double)i);
}

/* op(X)[i, k] of a row-major matrix with leading dimension ld. */
static double at(const float *x, bool t, int64_t ld, int64_t i, int64_t k) {
  return t ? x[k * ld + i] : x[i * ld + k];
}

/* One product with every operand in its own buffer, ld = row length + pad,
** B's buffer 64-byte aligned. */
typedef struct prod {
  bool ta, tb;
  int64_t M, N, K, lda, ldb, ldc;
  float *A, *B, *C, *C0;
} prod;

static void prod_init(prod *p, bool ta, bool tb, int64_t M, int64_t N, int64_t K, int64_t pad) {
  *p = (prod){ta, tb, M, N, K, (ta ? M : K) + pad, (tb ? K : N) + pad, N + pad, 0, 0, 0, 0};
  int64_t na = (ta ? K : M) * p->lda, nb = (tb ? N : K) * p->ldb, nc = M * p->ldc;
  p->A = malloc((size_t)na * sizeof(float));
  p->B = aligned_alloc(64, (size_t)((nb * 4 + 63) / 64 * 64));
  p->C = malloc((size_t)nc * sizeof(float));
  p->C0 = malloc((size_t)nc * sizeof(float));
  cr_assert(p->A && p->B && p->C && p->C0);
  fill(p->A, na, 0.1 * (double)M);
  fill(p->B, nb, 1.3 + 0.1 * (double)N);
  fill(p->C0, nc, 2.7);
}

static void prod_free(prod *p) {
  free(p->A), free(p->B), free(p->C), free(p->C0);
}

/* Run p with plan (NULL: the rule) and check every element of C. */
static void prod_check(prod *p, const kn__gemm_plan *plan, float alpha, float beta) {
  memcpy(p->C, p->C0, (size_t)(p->M * p->ldc) * sizeof(float));
  kn_status st = kn__nn_sgemm_plan(plan, p->ta, p->tb, p->M, p->N, p->K, alpha, p->A, p->lda,
                                   p->B, p->ldb, beta, p->C, p->ldc);
  cr_assert_eq(st, KN_OK, "%s", kn_last_error());
  for (int64_t i = 0; i < p->M; i++)
    for (int64_t j = 0; j < p->ldc; j++) {
      double c0 = p->C0[i * p->ldc + j], got = p->C[i * p->ldc + j];
      if (j >= p->N) { /* padding: untouched */
        cr_assert_eq(got, c0, "column %lld of the padding was written", (long long)j);
        continue;
      }
      double s = 0, mag = 0;
      for (int64_t k = 0; k < p->K; k++) {
        double x = at(p->A, p->ta, p->lda, i, k) * at(p->B, p->tb, p->ldb, k, j);
        s += x;
        mag += fabs(x);
      }
      double want = alpha * s + beta * c0;
      double tol = 2 * (double)(p->K + 2) * ldexp(1, -24) * fabs(alpha) * mag +
                   fabs(beta * c0) * ldexp(1, -22) + 1e-30;
      cr_assert(fabs(got - want) <= tol,
                "%c%c %lldx%lldx%lld lib %d team %d: C[%lld, %lld] = %.9g, want %.9g (tol %.3g)",
                p->ta ? 'T' : 'N', p->tb ? 'T' : 'N', (long long)p->M, (long long)p->N,
                (long long)p->K, plan ? (int)plan->lib : -1, plan ? plan->team : -1,
                (long long)i, (long long)j, got, want, tol);
    }
}

TestSuite(gemm_select);

/* Every library and team, every transpose pair, on a grid of shapes. */
Test(gemm_select, every_library_and_team_matches_a_double_reference) {
  static const int64_t shapes[][3] = {{1, 1, 1},   {1, 37, 19},   {29, 1, 45}, {17, 23, 1},
                                      {5, 700, 33}, {130, 70, 90}, {64, 96, 300}};
  static const kn__gemm_plan plans[] = {{KN__GEMM_LIB_ONEDNN, 1},   {KN__GEMM_LIB_ONEDNN, 2},
                                        {KN__GEMM_LIB_OPENBLAS, 1}, {KN__GEMM_LIB_OPENBLAS, 2},
                                        {KN__GEMM_LIB_OPENBLAS, 3}};
  for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
    for (int t = 0; t < 4; t++)
      for (int pad = 0; pad <= 3; pad += 3) {
        prod p;
        prod_init(&p, t & 1, t & 2, shapes[s][0], shapes[s][1], shapes[s][2], pad);
        for (size_t k = 0; k < sizeof plans / sizeof plans[0]; k++)
          prod_check(&p, &plans[k], k % 2 ? 1.0f : -0.75f, k % 2 ? 0.0f : 0.5f);
        prod_check(&p, NULL, 1.0f, 1.0f);
        prod_free(&p);
      }
}

/* oneDNN 2.6's slow case (B 64-byte aligned, N = K = 512, M < 384), both
** libraries, and the rule's choice for it. */
Test(gemm_select, aligned_wide_b_with_small_m) {
  prod p;
  prod_init(&p, false, false, 37, 512, 512, 0);
  cr_assert_eq((uintptr_t)p.B % 64, 0);
  prod_check(&p, &(kn__gemm_plan){KN__GEMM_LIB_ONEDNN, 2}, 1.0f, 0.0f);
  prod_check(&p, &(kn__gemm_plan){KN__GEMM_LIB_OPENBLAS, 2}, 1.0f, 0.0f);
  prod_check(&p, NULL, 1.0f, 0.0f);
  prod_free(&p);
}

/* The rule against the table in docs/KERNELS.md, on an AVX2 machine with a
** tuned OpenBLAS; wider ISAs and OpenBLAS's generic kernels keep oneDNN. */
Test(gemm_select, the_rule_follows_the_measured_table) {
  kn__gemm_cpu avx2 = {true, true}, avx512 = {true, false}, generic = {false, true};
  static const struct {
    bool ta, tb;
    int64_t M, N, K;
    kn__gemm_lib want;
  } rows[] = {
      {false, false, 512, 512, 512, KN__GEMM_LIB_OPENBLAS},     /* square 512 */
      {false, false, 256, 512, 784, KN__GEMM_LIB_OPENBLAS},     /* the MLP's first layer */
      {false, false, 256, 1024, 1024, KN__GEMM_LIB_OPENBLAS},   /* the DDP case */
      {false, false, 2048, 1024, 256, KN__GEMM_LIB_ONEDNN},     /* large M */
      {false, false, 32, 256, 1024, KN__GEMM_LIB_ONEDNN},       /* narrow: LSTM backward */
      {false, true, 2048, 768, 256, KN__GEMM_LIB_ONEDNN},       /* x W^T */
      {false, true, 32, 1024, 256, KN__GEMM_LIB_ONEDNN},        /* LSTM step */
      {true, false, 1024, 256, 2048, KN__GEMM_LIB_OPENBLAS},    /* weight gradient */
      {true, false, 256, 1024, 2048, KN__GEMM_LIB_OPENBLAS},
      {true, false, 32, 256, 256, KN__GEMM_LIB_ONEDNN},         /* small A^T B */
      {true, false, 256, 64, 1024, KN__GEMM_LIB_ONEDNN},        /* narrow A^T B */
      {true, true, 256, 1024, 1024, KN__GEMM_LIB_ONEDNN},
  };
  for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
    kn__gemm_shape s = {rows[i].ta, rows[i].tb, rows[i].M, rows[i].N, rows[i].K};
    kn__gemm_plan p = kn__gemm_choose(KN__GEMM_AUTO, &avx2, s, 2);
    cr_assert_eq(p.lib, rows[i].want, "row %zu", i);
    cr_assert_eq(p.team, 2, "row %zu: a large product takes every thread", i);
    cr_assert_eq(kn__gemm_choose(KN__GEMM_AUTO, &avx512, s, 2).lib, KN__GEMM_LIB_ONEDNN);
    cr_assert_eq(kn__gemm_choose(KN__GEMM_AUTO, &generic, s, 2).lib, KN__GEMM_LIB_ONEDNN);
    cr_assert_eq(kn__gemm_choose(KN__GEMM_OPENBLAS, &generic, s, 2).lib, KN__GEMM_LIB_OPENBLAS);
    cr_assert_eq(kn__gemm_choose(KN__GEMM_ONEDNN, &avx2, s, 2).lib, KN__GEMM_LIB_ONEDNN);
  }
  /* teams: one thread a KN__GRAIN_MAC of multiply-adds, at most the count,
  ** and for OpenBLAS at most one block of 16 rows or columns a thread */
  kn__gemm_shape small = {false, false, 64, 64, 64}, mid = {false, false, 128, 128, 192};
  cr_assert_eq(kn__gemm_choose(KN__GEMM_AUTO, &avx2, small, 8).team, 1);
  cr_assert_eq(kn__gemm_choose(KN__GEMM_AUTO, &avx2, mid, 8).team, 3);
  kn__gemm_shape thin = {false, false, 16, 40, 8192};
  cr_assert_eq(kn__gemm_choose(KN__GEMM_OPENBLAS, &avx2, thin, 8).team, 2);
  cr_assert_eq(kn__gemm_choose(KN__GEMM_ONEDNN, &avx2, thin, 8).team, 5);
}

/* Same shape, same threads, same machine: same plan and the same bits. */
Test(gemm_select, the_choice_and_the_result_are_deterministic) {
  cr_assert_eq(kn_set_num_threads(2), KN_OK);
  kn__gemm_plan first = kn__gemm_plan_for(false, false, 256, 1024, 1024);
  for (int i = 0; i < 50; i++) {
    kn__gemm_plan p = kn__gemm_plan_for(false, false, 256, 1024, 1024);
    cr_assert(p.lib == first.lib && p.team == first.team);
  }
  prod p;
  prod_init(&p, true, false, 96, 200, 160, 1);
  size_t n = (size_t)(p.M * p.ldc);
  float *again = malloc(n * sizeof(float));
  cr_assert_eq(kn__nn_sgemm(p.ta, p.tb, p.M, p.N, p.K, 1, p.A, p.lda, p.B, p.ldb, 0, p.C, p.ldc),
               KN_OK);
  memcpy(again, p.C, n * sizeof(float));
  for (int r = 0; r < 3; r++) {
    cr_assert_eq(kn__nn_sgemm(p.ta, p.tb, p.M, p.N, p.K, 1, p.A, p.lda, p.B, p.ldb, 0, p.C,
                              p.ldc), KN_OK);
    cr_assert_eq(memcmp(again, p.C, n * sizeof(float)), 0, "run %d differs", r);
  }
  free(again);
  prod_free(&p);
}

Test(gemm_select, kiln_gemm_values_parse_and_malformed_ones_name_what_was_expected) {
  kn__gemm_mode m = KN__GEMM_AUTO;
  char why[160] = "";
  cr_assert(kn__gemm_parse("openblas", &m, why, sizeof why) && m == KN__GEMM_OPENBLAS);
  cr_assert(kn__gemm_parse(" onednn\n", &m, why, sizeof why) && m == KN__GEMM_ONEDNN);
  cr_assert(kn__gemm_parse("auto", &m, why, sizeof why) && m == KN__GEMM_AUTO);
  static const char *const bad[] = {"mkl", "", "OpenBLAS", "onednn,openblas", "autox"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    cr_assert_not(kn__gemm_parse(bad[i], &m, why, sizeof why), "'%s' accepted", bad[i]);
    char want[160];
    snprintf(want, sizeof want, "KILN_GEMM: expected one of auto, onednn, openblas; found "
             "'%s'; using auto", bad[i]);
    cr_assert_str_eq(why, want);
  }
}

/* Runs c = a @ b for a shape the rule gives to oneDNN and reports the
** library that ran it. */
static kn__gemm_lib lib_of_one_mm(void) {
  kn_tensor *a = kn_ones(KN_SHAPE(8, 16), KN_FLOAT32), *b = kn_ones(KN_SHAPE(16, 8), KN_FLOAT32);
  kn__gemm_record(true);
  kn_tensor *c = kn_mm(a, b);
  kn__gemm_rec r[4];
  int n = kn__gemm_recorded(r, 4, NULL);
  kn__gemm_record(false);
  cr_assert_not_null(c, "%s", kn_last_error());
  cr_assert_eq(((float *)kn_data(c))[0], 16.0f);
  cr_assert_eq(n, 1);
  cr_assert(r[0].s.M == 8 && r[0].s.N == 8 && r[0].s.K == 16 && r[0].calls == 1);
  kn_release(a), kn_release(b), kn_release(c);
  return r[0].plan.lib;
}

Test(gemm_select, kiln_gemm_in_the_environment_forces_a_library) {
  setenv("KILN_GEMM", "openblas", 1);
  cr_assert_eq(kn__gemm_mode_get(), KN__GEMM_OPENBLAS);
  cr_assert_eq(lib_of_one_mm(), KN__GEMM_LIB_OPENBLAS);
  kn__gemm_set_mode(KN__GEMM_AUTO);
  cr_assert_eq(lib_of_one_mm(), KN__GEMM_LIB_ONEDNN);
}

Test(gemm_select, a_malformed_kiln_gemm_warns_and_means_auto) {
  setenv("KILN_GEMM", "fastest", 1);
  kn_test_log_clean();
  kn_test_records r = {0};
  kn_test_capture_begin(&r);
  kn__gemm_mode m = kn__gemm_mode_get();
  kn_test_capture_end(&r);
  cr_assert_eq(m, KN__GEMM_AUTO);
  const kn_test_record *w = kn_test_get_record(&r, "KILN_GEMM");
  cr_assert(w, "expected a warning naming KILN_GEMM, got %zu records", r.n);
  cr_assert(strstr(w->message, "expected one of auto, onednn, openblas; found 'fastest'"), "%s",
            w->message);
  cr_assert_eq(w->level, KN_WARNING);
  kn_test_records_free(&r);
}

/* OpenBLAS's threads are kiln's: its own pool stays at one thread and the
** team of a large product is kiln's count. */
Test(gemm_select, openblas_runs_on_kilns_thread_count) {
  kn__gemm_set_mode(KN__GEMM_OPENBLAS);
  for (int n = 1; n <= 3; n++) {
    cr_assert_eq(kn_set_num_threads(n), KN_OK);
    openblas_set_num_threads(4); /* as a program calling OpenBLAS itself may */
    kn_tensor *a = kn_ones(KN_SHAPE(256, 256), KN_FLOAT32);
    kn__gemm_record(true);
    kn_tensor *c = kn_mm(a, a);
    kn__gemm_rec r[2];
    int got = kn__gemm_recorded(r, 2, NULL);
    kn__gemm_record(false);
    cr_assert_not_null(c, "%s", kn_last_error());
    cr_assert_eq(((float *)kn_data(c))[256 * 256 - 1], 256.0f);
    cr_assert_eq(got, 1);
    cr_assert_eq(r[0].plan.lib, KN__GEMM_LIB_OPENBLAS);
    cr_assert_eq(r[0].threads, n);
    cr_assert_eq(r[0].plan.team, n, "threads %d", n);
    cr_assert_eq(openblas_get_num_threads(), 1, "OpenBLAS's own pool is not used");
    kn_release(a), kn_release(c);
  }
  kn__gemm_set_mode(KN__GEMM_AUTO);
}

/* float64 runs on OpenBLAS cut over kiln's team too (rows and columns). */
Test(gemm_select, float64_products_over_the_team) {
  cr_assert_eq(kn_set_num_threads(3), KN_OK);
  static const int64_t shapes[][3] = {{300, 90, 100}, {9, 800, 400}};
  for (int s = 0; s < 2; s++) {
    int64_t M = shapes[s][0], N = shapes[s][1], K = shapes[s][2];
    double *A = malloc((size_t)(M * K) * 8), *B = malloc((size_t)(K * N) * 8),
           *C = malloc((size_t)(M * N) * 8);
    for (int64_t i = 0; i < M * K; i++) A[i] = sin(0.3 + 0.731 * (double)i);
    for (int64_t i = 0; i < K * N; i++) B[i] = cos(0.7 + 0.513 * (double)i);
    kn__nn_dgemm(false, false, M, N, K, 1.0, A, K, B, N, 0.0, C, N);
    for (int64_t i = 0; i < M; i++)
      for (int64_t j = 0; j < N; j++) {
        double want = 0, mag = 0;
        for (int64_t k = 0; k < K; k++) {
          want += A[i * K + k] * B[k * N + j];
          mag += fabs(A[i * K + k] * B[k * N + j]);
        }
        cr_assert(fabs(C[i * N + j] - want) <= (double)(K + 2) * ldexp(1, -52) * mag,
                  "C[%lld, %lld]", (long long)i, (long long)j);
      }
    free(A), free(B), free(C);
  }
}

/* A product computed in blocks of rows (a compiled graph's GEMM with an
** epilogue) takes the whole product's library, so it has the eager
** product's bits: here the whole (1024 rows) goes to oneDNN and a block of
** 256 rows alone would go to OpenBLAS. */
Test(gemm_select, row_blocks_round_as_the_whole_product) {
  cr_assert_eq(kn_set_num_threads(2), KN_OK);
  kn__gemm_set_mode(KN__GEMM_AUTO);
  int64_t M = 1024, N = 512, K = 96;
  float *A = malloc((size_t)(M * K) * 4), *B = malloc((size_t)(K * N) * 4);
  float *whole = malloc((size_t)(M * N) * 4), *blocks = malloc((size_t)(M * N) * 4);
  fill(A, M * K, 0.4);
  fill(B, K * N, 1.9);
  kn__mat a = {A, K, 1}, b = {B, N, 1};
  cr_assert_eq(kn__nn_gemm("mm", KN_FLOAT32, M, N, K, a, b, whole, N, 1, 0), KN_OK);
  for (int64_t r0 = 0; r0 < M; r0 += 256) {
    kn__mat ab = {A + r0 * K, K, 1};
    cr_assert_eq(kn__nn_gemm_rows("mm", KN_FLOAT32, 256, N, K, ab, b, blocks + r0 * N, N, 1, 0,
                                  M), KN_OK);
  }
  cr_assert_eq(memcmp(whole, blocks, (size_t)(M * N) * 4), 0);
  free(A), free(B), free(whole), free(blocks);
}
