/* tests/cuda/gpu_check.c: see gpu_check.h. */
#include <stdarg.h>
#include <stdio.h>

#include "gpu_check.h"

static int n_ok, n_fail;

void kn__gpu_check(const char *name, bool cond, const char *fmt, ...) {
  if (cond) {
    n_ok++;
    printf("CUDA-CHECK %s ok\n", name);
  } else {
    n_fail++;
    printf("CUDA-CHECK %s FAIL ", name);
    va_list ap;
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    printf("\n");
  }
  fflush(stdout);
}

int kn__gpu_check_summary(const char *program) {
  printf("CUDA-SUMMARY %s: %d ok, %d failed\n", program, n_ok, n_fail);
  return n_fail ? 1 : 0;
}
