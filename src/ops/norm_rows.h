/*
** ops/norm_rows.h: layer_norm's and rms_norm's row kernels (internal).
** Each row of D contiguous elements is normalised by vectorised passes over
** data held in L1: a sum, a sum of squared deviations (two-pass variance,
** accumulated in double), and the scaled output, whose pass also adds up the
** next row's sum (the next row streams in while this one computes); the
** backward reads a row of x and of the
** output gradient once for the two row sums and once for the input gradient,
** adding the weight and bias gradients into per-thread double rows (the
** next row's sums pipelined into this row's gradient pass). Rows are
** spread over a team of one thread per KN__GRAIN elements (ops/threads.h;
** the weight and bias gradients' sums then depend on the team). rms_norm
** likewise: a sum of squares (in double) and the scaled output; backward, a
** pass for sum(go * w * x) and one for the input gradient with the weight
** gradient added beside it. float32 and float64; compiled for baseline
** x86-64, for AVX2+FMA (norm_rows_avx2.c) and for AVX-512F
** (norm_rows_avx512.c), picked with the vector-math table (ops/vmath.h).
*/
#ifndef KN_OPS_NORM_ROWS_H
#define KN_OPS_NORM_ROWS_H

#include <stdbool.h>
#include <stdint.h>

#include "kiln/core.h"
#include "kiln/tensor.h"

/* One ISA's row kernels. w and b are D contiguous elements of the row
** dtype (never NULL: callers pass ones and zeros). Backward: gi may be NULL
** (no input gradient); gw and gb (D doubles each, added to) may be NULL. */
typedef struct kn__norm_rows {
  const char *name; /* "avx2", "baseline" */
  /* forward of n consecutive rows (row r's mean and rstd to mean[r], rstd[r]) */
  void (*fwd_f32)(const float *x, float *y, int64_t n, int64_t D, double eps, const float *w,
                  const float *b, float *mean, float *rstd);
  void (*fwd_f64)(const double *x, double *y, int64_t n, int64_t D, double eps,
                  const double *w, const double *b, double *mean, double *rstd);
  /* backward of n consecutive rows (mean[r], rstd[r] row r's); the row
  ** after the last is never read */
  void (*bwd_f32)(const float *x, const float *go, int64_t n, int64_t D, const float *mean,
                  const float *rstd, const float *w, float *gi, double *gw, double *gb);
  void (*bwd_f64)(const double *x, const double *go, int64_t n, int64_t D, const double *mean,
                  const double *rstd, const double *w, double *gi, double *gw, double *gb);
  /* rms_norm over n rows: rstd = 1 / sqrt(mean(x^2) + eps); backward gw (D
  ** doubles, added to) may be NULL, gi too. */
  void (*rms_fwd_f32)(const float *x, float *y, int64_t n, int64_t D, double eps,
                      const float *w, float *rstd);
  void (*rms_fwd_f64)(const double *x, double *y, int64_t n, int64_t D, double eps,
                      const double *w, double *rstd);
  void (*rms_bwd_f32)(const float *x, const float *go, int64_t n, int64_t D, const float *rstd,
                      const float *w, float *gi, double *gw);
  void (*rms_bwd_f64)(const double *x, const double *go, int64_t n, int64_t D,
                      const double *rstd, const double *w, double *gi, double *gw);
} kn__norm_rows;

extern const kn__norm_rows kn__norm_rows_baseline;
extern const kn__norm_rows kn__norm_rows_avx2;
extern const kn__norm_rows kn__norm_rows_avx512; /* name NULL where not built */

/* The kernels in use: AVX-512 when the vector-math table in use is, AVX2
** when it is AVX2, else baseline. Static. */
const kn__norm_rows *kn__norm_rows_get(void);

/* layer_norm forward over M rows of D contiguous elements of dtype dt
** (float32 or float64): y, mean[M], rstd[M]; w and b as above. */
void kn__layer_norm_rows(kn_dtype dt, const void *x, void *y, int64_t M, int64_t D, double eps,
                         const void *w, const void *b, void *mean, void *rstd);
/* layer_norm backward over M rows: gi (or NULL), gw and gb (D elements of dt
** each, or NULL) from x, go, the saved mean and rstd (M elements of dt) and
** w (D elements, never NULL). KN_ENOMEM when the per-thread rows cannot be
** allocated. */
kn_status kn__layer_norm_rows_backward(kn_dtype dt, const void *x, const void *go, int64_t M,
                                       int64_t D, const void *mean, const void *rstd,
                                       const void *w, void *gi, void *gw, void *gb);

/* rms_norm forward over M rows of D contiguous elements (float32 or
** float64): y and rstd[M]; w as above. */
void kn__rms_norm_rows(kn_dtype dt, const void *x, void *y, int64_t M, int64_t D, double eps,
                       const void *w, void *rstd);
/* rms_norm backward over M rows: gi (or NULL) and gw (D elements, or NULL)
** from x, go, the saved rstd (M elements) and w (never NULL). KN_ENOMEM
** when the per-thread rows cannot be allocated. */
kn_status kn__rms_norm_rows_backward(kn_dtype dt, const void *x, const void *go, int64_t M,
                                     int64_t D, const void *rstd, const void *w, void *gi,
                                     void *gw);

#endif
