/*
** examples/dynamic_shapes.c: automatic dynamic shapes. The first call
** specialises every size; a call with another batch size recompiles once
** with that dimension as a symbol (s0), and later sizes reuse that graph.
** Run with KILN_LOGS=graph_sizes,recompiles,dynamic to watch it happen.
*/
#include <stdio.h>

#include "kiln/compile.h"
#include "kiln/kiln.h"

static kn_tensor *mm(kn_tensor *a, kn_tensor *b) {
  kn_tensor *r = kn_matmul(a, b);
  return r;
}

int main(void) {
  kn_compile_counter cc = {0};
  kn_compile_options o = {.backend_fn = kn_compile_counter_backend, .backend_ud = &cc};
  kn_compiled *f = KN_COMPILE(mm, &o);
  kn_scope_begin();
  kn_tensor *w = kn_ones(KN_SHAPE(3, 4), KN_FLOAT32);
  for (int64_t batch = 2; batch <= 6; batch++) {
    kn_tensor *y = kn_call_t(f, kn_ones(KN_SHAPE(batch, 3), KN_FLOAT32), w);
    if (!y) {
      fprintf(stderr, "error: %s\n", kn_last_error());
      return 1;
    }
    printf("batch %lld -> [%lld, %lld], graphs compiled: %d\n", (long long)batch,
           (long long)kn_size(y, 0), (long long)kn_size(y, 1), cc.frame_count);
  }
  kn_scope_end();
  kn_compiled_free(f);
  return 0;
}
