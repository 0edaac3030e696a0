/*
** ops/norm_rows_body.h: the row kernels of ops/norm_rows.h for one element
** type, included by norm_rows.c (baseline), norm_rows_avx2.c (compiled with
** -mavx2 -mfma) and norm_rows_avx512.c (-mavx512f) after defining
**   NR_T     the element type (float or double)
**   NR_NAME(n)  the kernel's name (n ## _f32_avx2 ...)
** The loops are plain C with `omp simd` reductions, so the compiler
** vectorises them for the file's ISA without reassociating anything else.
*/

/* The sum of a row in double (a forward's first pass). */
static inline double NR_NAME(row_sum)(const NR_T *restrict x, int64_t D) {
  double s = 0;
#pragma omp simd reduction(+ : s)
  for (int64_t i = 0; i < D; i++) s += (double)x[i];
  return s;
}

/* The sum of squares of a row in double (rms_norm's pass). */
static inline double NR_NAME(row_sumsq)(const NR_T *restrict x, int64_t D) {
  double s = 0;
#pragma omp simd reduction(+ : s)
  for (int64_t i = 0; i < D; i++) s += (double)x[i] * (double)x[i];
  return s;
}

/* The forward of n consecutive rows (row r's mean and rstd to mean[r],
** rstd[r]): a row's sum, its sum of squared deviations (two-pass variance in
** double, the row in L1), and the output in the row's type from the rounded
** mean and rstd (what the backward reads back too): float32 rows at the width
** of float vectors, within a few ULP of the same formula in double. The
** passes are pipelined: row r's variance pass also adds up row r + 1's sum,
** so the next row streams in from memory while this row's arithmetic runs,
** and the two chains of double adds overlap. Against a pass per row with a
** prefetch of the next row before its output pass (one thread, AVX-512
** Xeon, 4096 x 1024 floats in turns): rows of 64 0.53 -> 0.65 of the copy
** floor, 4096 0.62 -> 0.81, with the next sum in the output pass; moved
** into the variance pass (the output pass has no chain for it to overlap),
** rows of 1024 0.76-0.77 -> 0.87-0.90 (`bench_rows layer_norm 1T`, the
** two libraries in turns, 2-vCPU AVX-512 Xeon, load 1). */
static void NR_NAME(fwd)(const NR_T *restrict x, NR_T *restrict y, int64_t n, int64_t D,
                         double eps, const NR_T *restrict w, const NR_T *restrict b,
                         NR_T *mean, NR_T *rstd) {
  if (n <= 0) return;
  double s = NR_NAME(row_sum)(x, D);
  for (int64_t r = 0; r < n; r++) {
    const NR_T *xr = x + r * D, *xn = xr + D;
    NR_T *yr = y + r * D;
    double m = s / (double)D, ss = 0, sn = 0;
    if (r + 1 < n) {
#pragma omp simd reduction(+ : ss, sn)
      for (int64_t i = 0; i < D; i++) {
        double d = (double)xr[i] - m;
        ss += d * d;
        sn += (double)xn[i];
      }
    } else {
#pragma omp simd reduction(+ : ss)
      for (int64_t i = 0; i < D; i++) {
        double d = (double)xr[i] - m;
        ss += d * d;
      }
    }
    const NR_T mt = (NR_T)m, rt = (NR_T)(1.0 / sqrt(ss / (double)D + eps));
#pragma omp simd
    for (int64_t i = 0; i < D; i++) yr[i] = (xr[i] - mt) * rt * w[i] + b[i];
    mean[r] = mt, rstd[r] = rt;
    s = sn;
  }
}

/* layer_norm's backward row sums: sg = sum(go * w), sgx = sum(go * w * xh)
** with xh = (x - m) * rs, in double. */
static void NR_NAME(bwd_sums)(const NR_T *restrict x, const NR_T *restrict go, int64_t D,
                              double m, double rs, const NR_T *restrict w, double *sg_,
                              double *sgx_) {
  double sg = 0, sgx = 0;
#pragma omp simd reduction(+ : sg, sgx)
  for (int64_t i = 0; i < D; i++) {
    double g = (double)go[i] * (double)w[i];
    sg += g;
    sgx += g * (((double)x[i] - m) * rs);
  }
  *sg_ = sg, *sgx_ = sgx;
}

/* One element's input gradient in the row's type from its row constants:
** layer_norm's rstd * g - (b + c * xhat) and rms_norm's rstd * g - x * c,
** g = go * w, xhat = (x - mean) * rstd (see bwd and rms_bwd). */
static inline NR_T NR_NAME(ln_gx)(NR_T go, NR_T w, NR_T x, NR_T mt, NR_T rt, NR_T b, NR_T c) {
  return rt * (go * w) - (b + c * ((x - mt) * rt));
}
static inline NR_T NR_NAME(rms_gx)(NR_T go, NR_T w, NR_T x, NR_T rt, NR_T c) {
  return rt * (go * w) - x * c;
}

/* The backward of n rows (row r's mean and rstd at mean[r], rstd[r]). The
** row sums in double; the input gradient rs * g - (b + c * xh) in the row's
** type (g = go * w, xh = (x - mean) * rstd, b = rs * sg / D and c = rs * sgx
** / D rounded once a row), as torch computes it: in double it took more
** arithmetic than the pass's memory (float rows of 1024, one thread,
** AVX-512 Xeon: 2.13-2.69 ms in float against 3.15-4.00 in double, the two
** in turns in one process). The weight and bias gradients stay in double.
** A row's input gradient needs its two sums first, so each row is read twice:
** once from memory for the sums and once from L1 for the gradient. The
** loops are pipelined: row r's gradient pass also adds up row r + 1's sums,
** so the next row streams in from memory while this row's arithmetic runs
** (two separate passes left the core waiting on memory in the first and
** memory idle in the second: 0.55 of the copy floor on an AVX-512 Xeon,
** 0.75 pipelined). Each row's sums are the same reductions either way. */
static void NR_NAME(bwd)(const NR_T *restrict x, const NR_T *restrict go, int64_t n, int64_t D,
                         const NR_T *mean, const NR_T *rstd, const NR_T *restrict w,
                         NR_T *restrict gi, double *restrict gw, double *restrict gb) {
  if (!gi) {
    if (!gw) return;
    for (int64_t r = 0; r < n; r++) {
      const NR_T *xr = x + r * D, *gr = go + r * D;
      double m = (double)mean[r], rs = (double)rstd[r];
#pragma omp simd
      for (int64_t i = 0; i < D; i++) {
        gw[i] += (double)gr[i] * (((double)xr[i] - m) * rs);
        gb[i] += (double)gr[i];
      }
    }
    return;
  }
  if (n <= 0) return;
  double sg, sgx, dd = (double)D;
  NR_NAME(bwd_sums)(x, go, D, (double)mean[0], (double)rstd[0], w, &sg, &sgx);
  for (int64_t r = 0; r < n; r++) {
    const NR_T *xr = x + r * D, *gr = go + r * D, *xn = xr + D, *gn = gr + D;
    NR_T *ir = gi + r * D;
    double m = (double)mean[r], rs = (double)rstd[r];
    double mn = r + 1 < n ? (double)mean[r + 1] : 0, rn = r + 1 < n ? (double)rstd[r + 1] : 0;
    double sgn = 0, sgxn = 0;
    /* the gradient's row constants, rounded once: rs * g - (b + c * xh) */
    const NR_T mt = mean[r], rt = rstd[r], b = (NR_T)(rs * sg / dd), c = (NR_T)(rs * sgx / dd);
    if (r + 1 == n && gw) {
#pragma omp simd
      for (int64_t i = 0; i < D; i++) {
        ir[i] = NR_NAME(ln_gx)(gr[i], w[i], xr[i], mt, rt, b, c);
        double o = (double)gr[i];
        gw[i] += o * (((double)xr[i] - m) * rs);
        gb[i] += o;
      }
    } else if (r + 1 == n) {
#pragma omp simd
      for (int64_t i = 0; i < D; i++)
        ir[i] = NR_NAME(ln_gx)(gr[i], w[i], xr[i], mt, rt, b, c);
    } else if (gw) { /* the weight and bias gradients in the input gradient's pass */
#pragma omp simd reduction(+ : sgn, sgxn)
      for (int64_t i = 0; i < D; i++) {
        ir[i] = NR_NAME(ln_gx)(gr[i], w[i], xr[i], mt, rt, b, c);
        double o = (double)gr[i];
        gw[i] += o * (((double)xr[i] - m) * rs);
        gb[i] += o;
        double q = (double)gn[i] * (double)w[i];
        sgn += q;
        sgxn += q * (((double)xn[i] - mn) * rn);
      }
    } else {
#pragma omp simd reduction(+ : sgn, sgxn)
      for (int64_t i = 0; i < D; i++) {
        ir[i] = NR_NAME(ln_gx)(gr[i], w[i], xr[i], mt, rt, b, c);
        double q = (double)gn[i] * (double)w[i];
        sgn += q;
        sgxn += q * (((double)xn[i] - mn) * rn);
      }
    }
    sg = sgn, sgx = sgxn;
  }
}

/* rms_norm over n consecutive rows: y = x * rs * w with rs = 1 / sqrt(mean(x^2)
** + eps), the sum of squares in double, y rounded once; pipelined as the
** layer_norm forward (row r's output pass adds up row r + 1's squares). */
static void NR_NAME(rms_fwd)(const NR_T *restrict x, NR_T *restrict y, int64_t n, int64_t D,
                             double eps, const NR_T *restrict w, NR_T *rstd) {
  if (n <= 0) return;
  double ss = NR_NAME(row_sumsq)(x, D);
  for (int64_t r = 0; r < n; r++) {
    const NR_T *xr = x + r * D, *xn = xr + D;
    NR_T *yr = y + r * D;
    double rs = 1.0 / sqrt(ss / (double)D + eps), sn = 0;
    if (r + 1 < n) {
#pragma omp simd reduction(+ : sn)
      for (int64_t i = 0; i < D; i++) {
        yr[i] = (NR_T)((double)xr[i] * rs * (double)w[i]);
        sn += (double)xn[i] * (double)xn[i];
      }
    } else {
#pragma omp simd
      for (int64_t i = 0; i < D; i++) yr[i] = (NR_T)((double)xr[i] * rs * (double)w[i]);
    }
    rstd[r] = (NR_T)rs;
    ss = sn;
  }
}

/* rms_norm's backward of n rows (row r's rstd at rstd[r]): with g = go * w
** and s = sum(g * x), gi = rs * g - x * (rs^3 * s / D); gw += go * x * rs.
** s and gw in double, gi in the row's type from rs^3 * s / D rounded once a
** row (as layer_norm's above).
** The weight gradient is added in the input gradient's pass (the row in
** L1), and that pass also adds up the next row's s (pipelined as the
** layer_norm backward above). */
static void NR_NAME(rms_bwd)(const NR_T *restrict x, const NR_T *restrict go, int64_t n,
                             int64_t D, const NR_T *rstd, const NR_T *restrict w,
                             NR_T *restrict gi, double *restrict gw) {
  if (!gi) {
    if (!gw) return;
    for (int64_t r = 0; r < n; r++) {
      const NR_T *xr = x + r * D, *gr = go + r * D;
      double rs = (double)rstd[r];
#pragma omp simd
      for (int64_t i = 0; i < D; i++) gw[i] += (double)gr[i] * (double)xr[i] * rs;
    }
    return;
  }
  if (n <= 0) return;
  double s = 0;
#pragma omp simd reduction(+ : s)
  for (int64_t i = 0; i < D; i++) s += (double)go[i] * (double)w[i] * (double)x[i];
  for (int64_t r = 0; r < n; r++) {
    const NR_T *xr = x + r * D, *gr = go + r * D, *xn = xr + D, *gn = gr + D;
    NR_T *ir = gi + r * D;
    double rs = (double)rstd[r], c = rs * rs * rs * s / (double)D, sn = 0;
    const NR_T rt = rstd[r], ct = (NR_T)c; /* the gradient in the row's type */
    if (r + 1 == n && gw) {
#pragma omp simd
      for (int64_t i = 0; i < D; i++) {
        ir[i] = NR_NAME(rms_gx)(gr[i], w[i], xr[i], rt, ct);
        gw[i] += (double)gr[i] * (double)xr[i] * rs;
      }
    } else if (r + 1 == n) {
#pragma omp simd
      for (int64_t i = 0; i < D; i++) ir[i] = NR_NAME(rms_gx)(gr[i], w[i], xr[i], rt, ct);
    } else if (gw) {
#pragma omp simd reduction(+ : sn)
      for (int64_t i = 0; i < D; i++) {
        ir[i] = NR_NAME(rms_gx)(gr[i], w[i], xr[i], rt, ct);
        gw[i] += (double)gr[i] * (double)xr[i] * rs;
        sn += (double)gn[i] * (double)w[i] * (double)xn[i];
      }
    } else {
#pragma omp simd reduction(+ : sn)
      for (int64_t i = 0; i < D; i++) {
        ir[i] = NR_NAME(rms_gx)(gr[i], w[i], xr[i], rt, ct);
        sn += (double)gn[i] * (double)w[i] * (double)xn[i];
      }
    }
    s = sn;
  }
}
