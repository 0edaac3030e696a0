/*
** ops/norm_rows.c: layer_norm's and rms_norm's row loops (see
** norm_rows.h): the baseline kernels, the choice of ISA, and the OpenMP
** drivers.
*/
#include <math.h>
#include <omp.h>
#include <string.h>

#include "core/error.h"
#include "ops/norm_rows.h"
#include "ops/threads.h"
#include "ops/vmath.h"

#define NR_T float
#define NR_NAME(n) n##_f32_base
#include "ops/norm_rows_body.h"
#undef NR_T
#undef NR_NAME
#define NR_T double
#define NR_NAME(n) n##_f64_base
#include "ops/norm_rows_body.h"

const kn__norm_rows kn__norm_rows_baseline = {
    "baseline",       fwd_f32_base,     fwd_f64_base,     bwd_f32_base,    bwd_f64_base,
    rms_fwd_f32_base, rms_fwd_f64_base, rms_bwd_f32_base, rms_bwd_f64_base};

const kn__norm_rows *kn__norm_rows_get(void) {
  const char *isa = kn__vmath_get()->name;
  if (!strcmp(isa, "avx512") && kn__norm_rows_avx512.name) return &kn__norm_rows_avx512;
  bool wide = !strcmp(isa, "avx2") || !strcmp(isa, "avx512");
  return wide && kn__norm_rows_avx2.name ? &kn__norm_rows_avx2 : &kn__norm_rows_baseline;
}

/* Rows [r0, r1) of layer_norm's (rms false) or rms_norm's forward. */
static void fwd_rows(const kn__norm_rows *k, bool rms, kn_dtype dt, const void *x, void *y,
                     int64_t r0, int64_t r1, int64_t D, double eps, const void *w,
                     const void *b, void *mean, void *rstd) {
  int64_t n = r1 - r0, o = r0 * D;
  if (dt == KN_FLOAT32) {
    const float *xf = (const float *)x + o;
    float *yf = (float *)y + o, *rf = (float *)rstd + r0;
    if (rms) k->rms_fwd_f32(xf, yf, n, D, eps, w, rf);
    else k->fwd_f32(xf, yf, n, D, eps, w, b, (float *)mean + r0, rf);
    return;
  }
  const double *xd = (const double *)x + o;
  double *yd = (double *)y + o, *rd = (double *)rstd + r0;
  if (rms) k->rms_fwd_f64(xd, yd, n, D, eps, w, rd);
  else k->fwd_f64(xd, yd, n, D, eps, w, b, (double *)mean + r0, rd);
}

/* The forward over M rows on a team, each thread a contiguous range. */
static void fwd_drive(bool rms, kn_dtype dt, const void *x, void *y, int64_t M, int64_t D,
                      double eps, const void *w, const void *b, void *mean, void *rstd) {
  const kn__norm_rows *k = kn__norm_rows_get();
  KN__PAR_REGION(kn__par_team(M * D, M, KN__GRAIN), {
    int t = omp_get_thread_num(), n = omp_get_num_threads();
    fwd_rows(k, rms, dt, x, y, M * t / n, M * (t + 1) / n, D, eps, w, b, mean, rstd);
  });
}

void kn__layer_norm_rows(kn_dtype dt, const void *x, void *y, int64_t M, int64_t D, double eps,
                         const void *w, const void *b, void *mean, void *rstd) {
  fwd_drive(false, dt, x, y, M, D, eps, w, b, mean, rstd);
}

/* Rows [r0, r1) of layer_norm's (rms false; acc: 2 * D doubles, gw and gb)
** or rms_norm's (acc: D doubles, gw) backward; acc may be NULL. mean is
** unused for rms_norm. */
static void bwd_rows(const kn__norm_rows *k, bool rms, kn_dtype dt, const void *x,
                     const void *go, int64_t r0, int64_t r1, int64_t D, const void *mean,
                     const void *rstd, const void *w, void *gi, double *acc) {
  double *gw = acc, *gb = acc && !rms ? acc + D : NULL;
  int64_t n = r1 - r0, o = r0 * D;
  if (dt == KN_FLOAT32) {
    const float *xf = (const float *)x + o, *gf = (const float *)go + o;
    float *if_ = gi ? (float *)gi + o : NULL;
    if (rms) k->rms_bwd_f32(xf, gf, n, D, (const float *)rstd + r0, w, if_, gw);
    else k->bwd_f32(xf, gf, n, D, (const float *)mean + r0, (const float *)rstd + r0, w, if_, gw,
                    gb);
    return;
  }
  const double *xd = (const double *)x + o, *gd = (const double *)go + o;
  double *id = gi ? (double *)gi + o : NULL;
  if (rms) k->rms_bwd_f64(xd, gd, n, D, (const double *)rstd + r0, w, id, gw);
  else k->bwd_f64(xd, gd, n, D, (const double *)mean + r0, (const double *)rstd + r0, w, id, gw,
                  gb);
}

/* out[i] = the sum over the nt threads' rows (nacc * D doubles each, this
** sum at offset off), in thread order. */
static void store_sum(kn_dtype dt, void *out, const double *acc, int nt, int nacc, int64_t D,
                      int64_t off) {
  if (!out) return;
  for (int64_t i = 0; i < D; i++) {
    double s = 0;
    for (int t = 0; t < nt; t++) s += acc[(int64_t)t * nacc * D + off + i];
    if (dt == KN_FLOAT32) ((float *)out)[i] = (float)s;
    else ((double *)out)[i] = s;
  }
}

/* The backward over M rows on a team; gw and gb (gb: layer_norm only) from
** per-thread rows of doubles summed in thread order. */
static kn_status bwd_drive(bool rms, kn_dtype dt, const void *x, const void *go, int64_t M,
                           int64_t D, const void *mean, const void *rstd, const void *w,
                           void *gi, void *gw, void *gb) {
  const kn__norm_rows *k = kn__norm_rows_get();
  int nt = kn__par_threads(kn__par_team(M * D, M, KN__GRAIN)), nacc = rms ? 1 : 2;
  bool want = gw || gb;
  double *acc = NULL;
  if (want && !(acc = calloc((size_t)nt * (size_t)nacc * (size_t)(D ? D : 1), sizeof *acc)))
    return kn__oom();
  KN__PAR_REGION(nt, {
    int t = omp_get_thread_num(), n = omp_get_num_threads();
    int64_t r0 = M * t / n, r1 = M * (t + 1) / n;
    bwd_rows(k, rms, dt, x, go, r0, r1, D, mean, rstd, w, gi,
             acc ? acc + (int64_t)t * nacc * D : NULL);
  });
  if (want) {
    store_sum(dt, gw, acc, nt, nacc, D, 0);
    if (!rms) store_sum(dt, gb, acc, nt, nacc, D, D);
  }
  free(acc);
  return KN_OK;
}

kn_status kn__layer_norm_rows_backward(kn_dtype dt, const void *x, const void *go, int64_t M,
                                       int64_t D, const void *mean, const void *rstd,
                                       const void *w, void *gi, void *gw, void *gb) {
  return bwd_drive(false, dt, x, go, M, D, mean, rstd, w, gi, gw, gb);
}

void kn__rms_norm_rows(kn_dtype dt, const void *x, void *y, int64_t M, int64_t D, double eps,
                       const void *w, void *rstd) {
  fwd_drive(true, dt, x, y, M, D, eps, w, NULL, NULL, rstd);
}

kn_status kn__rms_norm_rows_backward(kn_dtype dt, const void *x, const void *go, int64_t M,
                                     int64_t D, const void *rstd, const void *w, void *gi,
                                     void *gw) {
  return bwd_drive(true, dt, x, go, M, D, NULL, rstd, w, gi, gw, NULL);
}
