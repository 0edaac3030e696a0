/*
** examples/example_fn.c: the seeds' example_fn compiled with the eager
** backend: two calls, one compile. Run with KILN_LOGS=graph_code,guards to
** see the captured graph and its guards, KILN_TRACE=<dir> for a trace.
*/
/* Keep the frames of functions that end in a tail call to a kiln op, so
** traced ops have their exact source lines (see docs/DYNAMO.md). */
#pragma GCC optimize("no-optimize-sibling-calls")
#include <stdio.h>

#include "kiln/compile.h"
#include "kiln/kiln.h"

static kn_tensor *example_fn(kn_tensor *a) {
  kn_tensor *output = kn_name(kn_mul(a, kn_ones(KN_SHAPE(1000, 1000), KN_FLOAT32)), "output");
  output = kn_name(kn_add(output, kn_ones(KN_SHAPE(1000, 1000), KN_FLOAT32)), "output");
  return output;
}

int main(void) {
  kn_compiled *f = KN_COMPILE(example_fn, NULL);
  kn_scope_begin();
  kn_tensor *x = kn_full(KN_SHAPE(1000, 1000), kn_float(3), KN_FLOAT32);
  kn_tensor *y = kn_call_t(f, x); /* traced, compiled, run */
  kn_tensor *z = kn_call_t(f, x); /* guards pass: the cached program runs */
  if (!y || !z) {
    fprintf(stderr, "error: %s\n", kn_last_error());
    return 1;
  }
  printf("y[0][0] = %g, z[999][999] = %g\n", kn_get(y, (int64_t[]){0, 0}),
         kn_get(z, (int64_t[]){999, 999}));
  kn_scope_end();
  kn_compiled_free(f);
  return 0;
}
