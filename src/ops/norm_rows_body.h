/*
** ops/norm_rows_body.h: the row kernels of ops/norm_rows.h for one element
** type, included by norm_rows.c (baseline), norm_rows_avx2.c (compiled with
** -mavx2 -mfma) and norm_rows_avx512.c (-mavx512f) after defining
**   NR_T     the element type (float or double)
**   NR_NAME(n)  the kernel's name (n ## _f32_avx2 ...)
** The loops are plain C with `omp simd` reductions, so the compiler
** vectorises them for the file's ISA without reassociating anything else.
*/

/* Starts loading the row after this one (the D elements after x; a
** prefetch past the end of an array is harmless) before a forward row's
** last pass, which runs from L1: the next row's first pass then finds it in
** cache instead of waiting on memory with nothing to compute (layer_norm
** forward 9% faster on AMD Zen 3; the backward's two rows of x and the
** output gradient run slower so, and are left to the hardware). */
static inline void NR_NAME(prefetch_next)(const NR_T *x, int64_t D) {
  for (int64_t i = 0; i < D; i += 64 / (int64_t)sizeof(NR_T)) __builtin_prefetch(x + D + i);
}

static void NR_NAME(fwd)(const NR_T *restrict x, NR_T *restrict y, int64_t D, double eps,
                         const NR_T *restrict w, const NR_T *restrict b, NR_T *mean,
                         NR_T *rstd) {
  double s = 0, ss = 0;
#pragma omp simd reduction(+ : s)
  for (int64_t i = 0; i < D; i++) s += (double)x[i];
  double m = s / (double)D;
#pragma omp simd reduction(+ : ss)
  for (int64_t i = 0; i < D; i++) {
    double d = (double)x[i] - m;
    ss += d * d;
  }
  double rs = 1.0 / sqrt(ss / (double)D + eps);
  NR_NAME(prefetch_next)(x, D);
#pragma omp simd
  for (int64_t i = 0; i < D; i++)
    y[i] = (NR_T)(((double)x[i] - m) * rs * (double)w[i] + (double)b[i]);
  *mean = (NR_T)m;
  *rstd = (NR_T)rs;
}

static void NR_NAME(bwd)(const NR_T *restrict x, const NR_T *restrict go, int64_t D,
                         double m, double rs, const NR_T *restrict w, NR_T *restrict gi,
                         double *restrict gw, double *restrict gb) {
  if (!gi) {
    if (!gw) return;
#pragma omp simd
    for (int64_t i = 0; i < D; i++) {
      gw[i] += (double)go[i] * (((double)x[i] - m) * rs);
      gb[i] += (double)go[i];
    }
    return;
  }
  double sg = 0, sgx = 0;
#pragma omp simd reduction(+ : sg, sgx)
  for (int64_t i = 0; i < D; i++) {
    double g = (double)go[i] * (double)w[i];
    sg += g;
    sgx += g * (((double)x[i] - m) * rs);
  }
  double k = rs / (double)D, dd = (double)D;
  if (gw) { /* the weight and bias gradients in the input gradient's pass */
#pragma omp simd
    for (int64_t i = 0; i < D; i++) {
      double o = (double)go[i], xh = ((double)x[i] - m) * rs, g = o * (double)w[i];
      gi[i] = (NR_T)(k * (dd * g - sg - xh * sgx));
      gw[i] += o * xh;
      gb[i] += o;
    }
    return;
  }
#pragma omp simd
  for (int64_t i = 0; i < D; i++) {
    double g = (double)go[i] * (double)w[i], xh = ((double)x[i] - m) * rs;
    gi[i] = (NR_T)(k * (dd * g - sg - xh * sgx));
  }
}

/* rms_norm: y = x * rs * w with rs = 1 / sqrt(mean(x^2) + eps), the sum of
** squares in double, y rounded once. */
static void NR_NAME(rms_fwd)(const NR_T *restrict x, NR_T *restrict y, int64_t D, double eps,
                             const NR_T *restrict w, NR_T *rstd) {
  double ss = 0;
#pragma omp simd reduction(+ : ss)
  for (int64_t i = 0; i < D; i++) ss += (double)x[i] * (double)x[i];
  double rs = 1.0 / sqrt(ss / (double)D + eps);
  NR_NAME(prefetch_next)(x, D);
#pragma omp simd
  for (int64_t i = 0; i < D; i++) y[i] = (NR_T)((double)x[i] * rs * (double)w[i]);
  *rstd = (NR_T)rs;
}

/* rms_norm's backward of one row: with g = go * w and s = sum(g * x),
** gi = rs * g - x * (rs^3 * s / D); gw += go * x * rs. The weight gradient
** is added in the same pass as the input gradient (the row in L1). */
static void NR_NAME(rms_bwd)(const NR_T *restrict x, const NR_T *restrict go, int64_t D,
                             double rs, const NR_T *restrict w, NR_T *restrict gi,
                             double *restrict gw) {
  if (!gi) {
    if (!gw) return;
#pragma omp simd
    for (int64_t i = 0; i < D; i++) gw[i] += (double)go[i] * (double)x[i] * rs;
    return;
  }
  double s = 0;
#pragma omp simd reduction(+ : s)
  for (int64_t i = 0; i < D; i++) s += (double)go[i] * (double)w[i] * (double)x[i];
  double c = rs * rs * rs * s / (double)D;
  if (gw) {
#pragma omp simd
    for (int64_t i = 0; i < D; i++) {
      double xi = (double)x[i], gi_ = (double)go[i];
      gi[i] = (NR_T)(rs * gi_ * (double)w[i] - xi * c);
      gw[i] += gi_ * xi * rs;
    }
    return;
  }
#pragma omp simd
  for (int64_t i = 0; i < D; i++)
    gi[i] = (NR_T)(rs * (double)go[i] * (double)w[i] - (double)x[i] * c);
}
