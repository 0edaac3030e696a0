/*
** examples/graph_break.c: a data-dependent branch. kn_is_true ends the
** first graph; the answer is recorded, the branch runs as a second graph,
** and a later call that answers differently adds the other branch. Run with
** KILN_LOGS=graph_breaks,graph_code to see the segments.
*/
#include <stdio.h>

#include "kiln/compile.h"
#include "kiln/kiln.h"

static kn_tensor *relu_or_neg(kn_tensor *x) {
  kn_tensor *r;
  if (kn_is_true(kn_gt_scalar(kn_sum(x), kn_int(0))))
    r = kn_relu(x);
  else
    r = kn_neg(x);
  return r;
}

int main(void) {
  kn_compile_counter cc = {0};
  kn_compile_options o = {.backend_fn = kn_compile_counter_backend, .backend_ud = &cc};
  kn_compiled *f = KN_COMPILE(relu_or_neg, &o);
  kn_scope_begin();
  double fills[] = {1, -1, 2, -2};
  for (int i = 0; i < 4; i++) {
    kn_tensor *y = kn_call_t(f, kn_full(KN_SHAPE(3), kn_float(fills[i]), KN_FLOAT32));
    if (!y) {
      fprintf(stderr, "error: %s\n", kn_last_error());
      return 1;
    }
    printf("fill %g -> %g (graphs compiled: %d)\n", fills[i], kn_get(y, (int64_t[]){0}),
           cc.frame_count);
  }
  kn_scope_end();
  kn_compiled_free(f);
  return 0;
}
