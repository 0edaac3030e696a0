/*
** tests/cache_cpu/probe.c: compile sigmoid(a) * b + 0.5 with inductor (the
** cache from KILN_CACHE_DIR) and check it against the same computed by hand.
** Prints the CPU target and "ok"; exit status 0 when right. run.sh runs it
** natively and under qemu-x86_64 with another CPU model.
*/
#include <math.h>
#include <stdio.h>

#include "core/cputarget.h"
#include "kiln/compile.h"
#include "kiln/ops.h"

static kn_tensor *fn(kn_tensor *a, kn_tensor *b) {
  return kn_add_scalar(kn_mul(kn_sigmoid(a), b), kn_float(0.5));
}

int main(void) {
  kn_compile_options o = {.backend = "inductor"};
  kn_compiled *f = KN_COMPILE(fn, &o);
  kn_tensor *a = kn_randn(KN_SHAPE(64, 33), NULL, KN_FLOAT32);
  kn_tensor *b = kn_randn(KN_SHAPE(64, 33), NULL, KN_FLOAT32);
  kn_tensor *y = kn_call_t(f, a, b);
  if (!y) {
    fprintf(stderr, "probe: %s\n", kn_last_error());
    return 1;
  }
  const float *g = kn_data(y), *x = kn_data(a), *z = kn_data(b);
  for (int64_t i = 0; i < kn_numel(a); i++) {
    float want = (1.0f / (1.0f + expf(-x[i]))) * z[i] + 0.5f;
    if (fabsf(g[i] - want) > 1e-6f * (1 + fabsf(want))) {
      fprintf(stderr, "probe: element %lld: %g, expected %g\n", (long long)i, g[i], want);
      return 1;
    }
  }
  printf("%s ok\n", kn__cpu_target());
  return 0;
}
