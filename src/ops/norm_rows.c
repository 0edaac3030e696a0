/*
** ops/norm_rows.c: layer_norm's row loops (see norm_rows.h): the baseline
** kernels, the choice of ISA, and the OpenMP drivers.
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

const kn__norm_rows kn__norm_rows_baseline = {"baseline", fwd_f32_base, fwd_f64_base,
                                              bwd_f32_base, bwd_f64_base};

const kn__norm_rows *kn__norm_rows_get(void) {
  const char *isa = kn__vmath_get()->name;
  bool wide = !strcmp(isa, "avx2") || !strcmp(isa, "avx512");
  return wide && kn__norm_rows_avx2.name ? &kn__norm_rows_avx2 : &kn__norm_rows_baseline;
}

void kn__layer_norm_rows(kn_dtype dt, const void *x, void *y, int64_t M, int64_t D, double eps,
                         const void *w, const void *b, void *mean, void *rstd) {
  const kn__norm_rows *k = kn__norm_rows_get();
  if (dt == KN_FLOAT32) {
    KN__PAR_FOR(kn__par_team(M * D, M, KN__GRAIN), for (int64_t r = 0; r < M; r++) {
      k->fwd_f32((const float *)x + r * D, (float *)y + r * D, D, eps, w, b,
                 (float *)mean + r, (float *)rstd + r);
    });
  } else {
    KN__PAR_FOR(kn__par_team(M * D, M, KN__GRAIN), for (int64_t r = 0; r < M; r++) {
      k->fwd_f64((const double *)x + r * D, (double *)y + r * D, D, eps, w, b,
                 (double *)mean + r, (double *)rstd + r);
    });
  }
}

static double ld(const void *p, kn_dtype dt, int64_t i) {
  return dt == KN_FLOAT32 ? (double)((const float *)p)[i] : ((const double *)p)[i];
}

/* Rows [r0, r1) of the backward; acc: 2 * D doubles (gw, gb) or NULL. */
static void bwd_rows(const kn__norm_rows *k, kn_dtype dt, const void *x, const void *go,
                     int64_t r0, int64_t r1, int64_t D, const void *mean, const void *rstd,
                     const void *w, void *gi, double *acc) {
  double *gw = acc, *gb = acc ? acc + D : NULL;
  for (int64_t r = r0; r < r1; r++) {
    double m = ld(mean, dt, r), rs = ld(rstd, dt, r);
    if (dt == KN_FLOAT32)
      k->bwd_f32((const float *)x + r * D, (const float *)go + r * D, D, m, rs, w,
                 gi ? (float *)gi + r * D : NULL, gw, gb);
    else
      k->bwd_f64((const double *)x + r * D, (const double *)go + r * D, D, m, rs, w,
                 gi ? (double *)gi + r * D : NULL, gw, gb);
  }
}

static void store_sum(kn_dtype dt, void *out, const double *acc, int nt, int64_t D, int64_t off) {
  if (!out) return;
  for (int64_t i = 0; i < D; i++) {
    double s = 0;
    for (int t = 0; t < nt; t++) s += acc[(int64_t)t * 2 * D + off + i];
    if (dt == KN_FLOAT32) ((float *)out)[i] = (float)s;
    else ((double *)out)[i] = s;
  }
}

kn_status kn__layer_norm_rows_backward(kn_dtype dt, const void *x, const void *go, int64_t M,
                                       int64_t D, const void *mean, const void *rstd,
                                       const void *w, void *gi, void *gw, void *gb) {
  const kn__norm_rows *k = kn__norm_rows_get();
  int nt = kn__par_team(M * D, M, KN__GRAIN);
  bool want = gw || gb;
  double *acc = NULL;
  if (want && !(acc = calloc((size_t)nt * 2 * (size_t)(D ? D : 1), sizeof *acc)))
    return kn__oom();
  KN__PAR_REGION(nt, {
    int t = omp_get_thread_num(), n = omp_get_num_threads();
    int64_t r0 = M * t / n, r1 = M * (t + 1) / n;
    bwd_rows(k, dt, x, go, r0, r1, D, mean, rstd, w, gi, acc ? acc + (int64_t)t * 2 * D : NULL);
  });
  if (want) {
    store_sum(dt, gw, acc, nt, D, 0);
    store_sum(dt, gb, acc, nt, D, D);
  }
  free(acc);
  return KN_OK;
}
