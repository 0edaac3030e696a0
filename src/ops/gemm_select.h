/*
** ops/gemm_select.h: which library runs a float32 GEMM (internal).
**
** Every float32 product of the eager kernels and of compiled graphs (mm,
** bmm, addmm, linear, matmul, dot, mv, the im2col convolution, attention's
** blocks, the LSTM's steps) ends in kn__nn_sgemm, which picks oneDNN's
** dnnl_sgemm or OpenBLAS's cblas_sgemm per call from the shape (M, N, K,
** transposes), kiln's thread count and the CPU (kn__gemm_choose: a fixed
** rule from measurements, docs/KERNELS.md "float32 GEMM: the library per
** shape"), so a shape always runs in the same library on one machine and
** thread count. KILN_GEMM=auto|onednn|openblas overrides the rule.
**
** OpenBLAS runs single-threaded inside kiln's OpenMP team: its own thread
** count is kept at 1 (its pthread workers never wake), and kiln splits the
** product into blocks of rows (or of columns when M is small), one a
** thread, so its threads are kiln's (kn_set_num_threads, KILN_NUM_THREADS)
** and no OpenBLAS thread spins beside kiln's kernels afterwards. float64
** (cblas_dgemm) runs the same way.
*/
#ifndef KN_OPS_GEMM_SELECT_H
#define KN_OPS_GEMM_SELECT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kiln/core.h"

typedef enum kn__gemm_lib { KN__GEMM_LIB_ONEDNN, KN__GEMM_LIB_OPENBLAS } kn__gemm_lib;

/* KILN_GEMM's values: the measured rule, or one library for every call. */
typedef enum kn__gemm_mode { KN__GEMM_AUTO, KN__GEMM_ONEDNN, KN__GEMM_OPENBLAS } kn__gemm_mode;

/* What the rule knows of the machine: whether OpenBLAS has tuned kernels
** for this CPU (its core is not the generic "Prescott"/"Core2"/... fallback)
** and whether oneDNN's widest ISA is AVX2 (the class the rule was measured
** on; wider ISAs keep oneDNN, unmeasured). */
typedef struct kn__gemm_cpu {
  bool openblas_tuned, onednn_avx2;
} kn__gemm_cpu;

/* One product's call shape: op(A) [M, K] @ op(B) [K, N]; ta/tb: A or B is
** read transposed (stored column-major). */
typedef struct kn__gemm_shape {
  bool ta, tb;
  int64_t M, N, K;
} kn__gemm_shape;

/* A choice: the library and the number of threads it runs on (1: the
** calling thread). */
typedef struct kn__gemm_plan {
  kn__gemm_lib lib;
  int team;
} kn__gemm_plan;

/* Parse a KILN_GEMM value ("auto", "onednn", "openblas"; surrounding blanks
** allowed): true with *m set, else false with why (n bytes) naming the
** expected and the found value. */
bool kn__gemm_parse(const char *v, kn__gemm_mode *m, char *why, size_t n);

/* The mode in force: KILN_GEMM read once (a malformed value logs the parse
** message as a warning and means auto), unless kn__gemm_set_mode was
** called. */
kn__gemm_mode kn__gemm_mode_get(void);
/* Set the mode process-wide (tests, benchmarks); overrides KILN_GEMM. */
void kn__gemm_set_mode(kn__gemm_mode m);

/* This machine's facts, probed once (oneDNN's ISA, OpenBLAS's core). */
const kn__gemm_cpu *kn__gemm_cpu_get(void);

/* The rule: a pure function of its arguments. threads: the OpenMP team
** kiln's kernels use on the calling thread (kn_get_num_threads). The team
** follows KN__GRAIN_MAC (ops/threads.h) for both libraries. */
kn__gemm_plan kn__gemm_choose(kn__gemm_mode mode, const kn__gemm_cpu *cpu, kn__gemm_shape s,
                              int threads);

/* kn__gemm_choose for a call on this thread now: the mode in force, this
** machine, kiln's thread count (1 inside an OpenMP parallel region). */
kn__gemm_plan kn__gemm_plan_for(bool ta, bool tb, int64_t M, int64_t N, int64_t K);

/* "onednn:avx2" or "openblas:Zen": the library and its kernels' ISA/core
** (a static string, not owned by the caller). */
const char *kn__gemm_lib_name(kn__gemm_lib lib);

/* Row-major C = alpha * op(A) @ op(B) + beta * C (op = transpose when
** ta/tb), A [M, K] after op with leading dimension lda, likewise B and C;
** float32 in the library kn__gemm_choose picks for this call (or `plan`
** when it is not NULL: kn__gemm_plan_for's, or a test's), float64 on
** OpenBLAS. M, N, K >= 1 and every
** leading dimension valid (at least the stored row length, at most
** INT_MAX). */
kn_status kn__nn_sgemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha,
                       const float *A, int64_t lda, const float *B, int64_t ldb, float beta,
                       float *C, int64_t ldc);
kn_status kn__nn_sgemm_plan(const kn__gemm_plan *plan, bool ta, bool tb, int64_t M, int64_t N,
                            int64_t K, float alpha, const float *A, int64_t lda,
                            const float *B, int64_t ldb, float beta, float *C, int64_t ldc);
void kn__nn_dgemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, double alpha,
                  const double *A, int64_t lda, const double *B, int64_t ldb, double beta,
                  double *C, int64_t ldc);

/* Recording the choices (benchmarks print them): while on, every float32
** call adds to a process-wide table of up to KN__GEMM_REC_MAX distinct
** (shape, threads, plan) with a call count (later shapes beyond it are
** counted in `dropped`). kn__gemm_record(true) clears the table. */
enum { KN__GEMM_REC_MAX = 64 };
typedef struct kn__gemm_rec {
  kn__gemm_shape s;
  int threads;
  kn__gemm_plan plan;
  int64_t calls;
} kn__gemm_rec;
void kn__gemm_record(bool on);
/* Adds one call to the record when it is on (kn__nn_sgemm calls it). */
void kn__gemm_note(kn__gemm_shape s, int threads, kn__gemm_plan p);
/* Copies up to max entries into out (in first-seen order); returns how many;
** *dropped (may be NULL): calls not recorded for want of room. */
int kn__gemm_recorded(kn__gemm_rec *out, int max, int64_t *dropped);

#endif
