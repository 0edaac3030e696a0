/*
** support/leakcheck.c: per-test scope and live-tensor check.
*/
#include <criterion/criterion.h>

#include "kiln/tensor.h"
#include "support/leakcheck.h"

static int64_t live_at_start;

void kn_test_leakcheck_begin(void) {
  live_at_start = kn_live_tensors();
  kn_scope_begin();
}

void kn_test_leakcheck_end(void) {
  kn_scope_end();
  cr_assert_eq(kn_live_tensors(), live_at_start, "leaked %lld tensors",
               (long long)(kn_live_tensors() - live_at_start));
}
