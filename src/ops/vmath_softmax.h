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
** of s. The sum is within 4 x 2^-24 of the exact sum of the exps
** (ops/vmath.h); against adding every exp in double (a conversion of each
** vector, which bounded the pass), the groups convert once per 16 vectors:
** eager softmax over 4096 rows of 1024 took ~20% less time
** (docs/KERNELS.md).
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
    /* the last 16 elements of the row as one vector (the tail in its last
    ** lanes; a row under 16 zero-padded), x - c and its exps stored whole:
    ** the table's load then never waits on element-wise stores (a failed
    ** store forwarding), and lanes are independent, so the tail's bits are
    ** the padded array's */
    kn__vm_pad16 t = {0};
    int64_t at = n >= KN__VM_SOFTMAX_PAD ? KN__VM_SOFTMAX_PAD - (n - m) : 0;
    memcpy(&t, x + m - at, (size_t)(at + n - m) * sizeof *x);
    t = t - c;
    if (log_) memcpy(y + m, (float *)&t + at, (size_t)(n - m) * sizeof *y);
    exp_((float *)&t, (const float *)&t, KN__VM_SOFTMAX_PAD);
    if (!log_) memcpy(y + m, (float *)&t + at, (size_t)(n - m) * sizeof *y);
    for (int64_t k = m; k < n; k++) lane[0] += (double)t[at + k - m];
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
