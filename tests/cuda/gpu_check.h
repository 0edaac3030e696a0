/*
** tests/cuda/gpu_check.h: the reporting of the GPU test programs (plain
** programs run on the GPU machine): one line per check,
** "CUDA-CHECK <name> ok" or "CUDA-CHECK <name> FAIL <detail>", and a
** summary line from kn__gpu_check_summary (its return value is the
** program's exit status: 0, or 1 after any FAIL).
*/
#ifndef KN_TESTS_GPU_CHECK_H
#define KN_TESTS_GPU_CHECK_H

#include <stdbool.h>
#include "kiln/core.h"

/* Report check name: ok when cond, else FAIL with the printf-style detail. */
void kn__gpu_check(const char *name, bool cond, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
#define CHECK(name, cond, ...) kn__gpu_check(name, (cond), __VA_ARGS__)
/* ok when s is KN_OK, else FAIL with kn_last_error() after the detail. */
#define CHECK_OK(name, s, detail) \
  kn__gpu_check(name, (s) == KN_OK, "%s%s", detail, kn_last_error())
int kn__gpu_check_summary(const char *program);

/* The GEMM checks (tests/cuda/gpu_gemm.c): kn__cuda_gemm against kiln's
** CPU matmul, every dtype, transposes, batches, alpha and beta. */
void kn__gpu_check_gemms(void);
/* The eager checks (tests/cuda/gpu_eager.c): ops on CUDA tensors through the
** dispatcher against the same ops on the CPU. */
void kn__gpu_check_eager(void);

#endif
