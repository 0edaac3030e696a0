/*
** ten_ops.h: the 10-op pointwise graph of the CUDA-graphs tests (one fused
** kernel when compiled): (-(sin((a*b + a - b) * 0.5)^2 + 1)).exp() + b.
** Shared by tests/test_cuda_graphs.c (fake driver) and
** tests/cuda/gpu_graphs.c (a real GPU). Returns a new tensor (the caller's
** scope owns it), or NULL with kiln's last error set.
*/
#ifndef KN_TEST_TEN_OPS_H
#define KN_TEST_TEN_OPS_H

#include "kiln/kiln.h"

static inline kn_tensor *ten_ops(kn_tensor *a, kn_tensor *b) {
  kn_tensor *t = kn_mul(a, b);
  t = kn_add(t, a);
  t = kn_sub(t, b);
  t = kn_mul_scalar(t, kn_float(0.5));
  t = kn_sin(t);
  t = kn_mul(t, t);
  t = kn_add_scalar(t, kn_float(1));
  t = kn_neg(t);
  t = kn_exp(t);
  return kn_add(t, b);
}

#endif
