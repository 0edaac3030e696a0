/*
** examples/guard_failure.c: a guard_fail_fn callback receives the reason
** each cached entry rejected a call (most recently used entry first).
*/
#include <stdio.h>

#include "kiln/compile.h"
#include "kiln/kiln.h"

static kn_tensor *add_one(kn_tensor *x) {
  kn_tensor *r = kn_add_scalar(x, kn_int(1));
  return r;
}

static void on_guard_fail(const kn_guard_failure *g, void *ud) {
  (void)ud;
  printf("  entry %s of %s rejected the call: %s\n", g->compile_id, g->fn_name, g->reason);
}

int main(void) {
  kn_compile_options o = {.dynamic = KN_DYNAMIC_FALSE, .guard_fail_fn = on_guard_fail};
  kn_compiled *f = KN_COMPILE(add_one, &o);
  kn_scope_begin();
  for (int64_t n = 8; n <= 10; n++) {
    printf("call with size %lld\n", (long long)n);
    if (!kn_call_t(f, kn_ones(KN_SHAPE(n), KN_FLOAT32))) {
      fprintf(stderr, "error: %s\n", kn_last_error());
      return 1;
    }
  }
  kn_tensor *g = kn_ones(KN_SHAPE(8), KN_FLOAT32);
  kn_set_requires_grad(g, true);
  printf("call with requires_grad\n");
  if (!kn_call_t(f, g)) return 1;
  kn_scope_end();
  kn_compiled_free(f);
  return 0;
}
