/*
** examples/recompiles.c: why a compiled function compiles again. Each call
** with a new dtype fails the dtype guard of the cached entries and
** recompiles; KILN_LOGS=recompiles prints the reason. After the cache limit
** (2 here) new inputs run eagerly while the compiled versions stay in use.
*/
#include <stdio.h>

#include "kiln/compile.h"
#include "kiln/kiln.h"
#include "kiln/log.h"

static kn_tensor *scale(kn_tensor *x) {
  kn_tensor *r = kn_mul_scalar(x, kn_float(2));
  return r;
}

int main(void) {
  kn_set_logs_str("recompiles");
  kn_compile_counter cc = {0};
  kn_compile_options o = {.cache_size_limit = 2, .backend_fn = kn_compile_counter_backend,
                          .backend_ud = &cc};
  kn_compiled *f = KN_COMPILE(scale, &o);
  kn_dtype dts[] = {KN_FLOAT32, KN_FLOAT64, KN_FLOAT16, KN_FLOAT32};
  kn_scope_begin();
  for (int i = 0; i < 4; i++) {
    kn_tensor *y = kn_call_t(f, kn_ones(KN_SHAPE(4), dts[i]));
    if (!y) {
      fprintf(stderr, "error: %s\n", kn_last_error());
      return 1;
    }
    printf("call %d (%s): %g, graphs compiled so far: %d\n", i, kn_dtype_name(dts[i]),
           kn_get(y, (int64_t[]){0}), cc.frame_count);
  }
  kn_scope_end();
  kn_compiled_free(f);
  return 0;
}
