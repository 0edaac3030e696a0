/*
** ops/vmath_softmax.h: a contiguous float32 row's softmax or log_softmax
** from a vector-math table's own functions, computed as the code
** generator's row kernel computes it (inductor/codegen_expsum.c), so that
** eager and compiled give the same bits.
**
** The row's maximum c (rowmax; NaN when the row holds one), then the exps
** of x - c and their sum through expsum_max over the longest multiple of 16
** elements (its groups of 256, of 64, then one by one: ops/vmath.h), the
** last n % 16 elements through the array exp, each added to lane 0; the 16
** double lanes added in order, the sum rounded to float, s. softmax: the
** exps times 1 / s (in float); log_softmax: (x - c) minus the array log
** of s. Against adding every exp in double, the sum is within 4 x 2^-24 of
** the exact sum of the exps (ops/vmath.h), and the exps and the sum's
** conversions take one pass instead of two: eager softmax over 4096 rows of
** 1024 took ~20% less time (docs/KERNELS.md).
**
** A table's file includes this after its rowmax, expsum_max, array exp and
** array log, and passes them (constants: the calls inline).
*/
#ifndef KN_OPS_VMATH_SOFTMAX_H
#define KN_OPS_VMATH_SOFTMAX_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "ops/vmath.h"

/* Elements of a padded call of the array functions: one AVX-512 vector, as
** generated code's scalar calls (KN_VM_PAD in inductor/formula.c). */
#define KN__VM_SOFTMAX_PAD 16
typedef float kn__vm_pad16 __attribute__((vector_size(64), may_alias));

static inline void kn__vm_softmax_row(float *y, const float *x, int64_t n, bool log_,
                                      kn__vm_rowmax_f32 rowmax, kn__vm_expsum_f32 expsum,
                                      kn__vm_f32 exp_, kn__vm_f32 log_fn) {
  int nan = 0;
  float c = rowmax(x, n, &nan);
  if (nan) c = NAN;
  double lane[KN__VM_SUM_LANES] = {0};
  int64_t m = n & ~(int64_t)(KN__VM_SUM_LANES - 1);
  /* the row two on, as the generated kernels fetch it (never read) */
  if (m > 0) expsum(log_ ? NULL : y, log_ ? y : NULL, x, c, m, lane, x + 2 * n);
  if (m < n) {
    float b[KN__VM_SOFTMAX_PAD] = {0};
    for (int64_t k = m; k < n; k++) b[k - m] = x[k] - c;
    if (log_) memcpy(y + m, b, (size_t)(n - m) * sizeof *y);
    exp_(b, b, KN__VM_SOFTMAX_PAD);
    if (!log_) memcpy(y + m, b, (size_t)(n - m) * sizeof *y);
    for (int64_t k = m; k < n; k++) lane[0] += (double)b[k - m];
  }
  double acc = lane[0];
  for (int l = 1; l < KN__VM_SUM_LANES; l++) acc += lane[l];
  float s = (float)acc;
  if (log_) {
    /* built as one vector and stored whole: an array written element by
    ** element and read back as a vector stalled the table's load (store
    ** forwarding fails), three quarters of the log's time */
    kn__vm_pad16 b = {s};
    log_fn((float *)&b, (const float *)&b, KN__VM_SOFTMAX_PAD);
    const float ls = b[0];
    for (int64_t k = 0; k < n; k++) y[k] = y[k] - ls;
  } else {
    const float inv = 1.0f / s;
    for (int64_t k = 0; k < n; k++) y[k] = y[k] * inv;
  }
}

#endif
