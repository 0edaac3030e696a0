/*
** test_aot_sweep_inductor.c: the AOT op sweep (support/aot_sweep.c) with
** backend "inductor": the same cases, compiled to C through AOT, compared
** with eager values and gradients. Tolerances (atol = rtol): float64 1e-12,
** float32 1e-5, the same as aot_eager's (the cases pass them). With
** dynamic sizes each case also compiles exactly as often as with the
** "eager" backend (one program for both sizes).
**
** Every case is two compiled C graphs (forward and backward), about 0.2 s
** of compiler time each on a cold code cache. Without KILN_TEST_SWEEP_ALL
** the run sweeps the two-op chains (each op inside a chain, as a fused
** kernel sees it) on contiguous float64 inputs and skips the other tests;
** KILN_TEST_SWEEP_ALL=1 adds the op alone and the transposed, broadcast,
** dynamic-size, zero-size and float32 sweeps (minutes each on a cold cache,
** seconds on a warm one). ctest runs each test as an entry of its own
** (tests/CMakeLists.txt): with KILN_TEST_SWEEP_ALL=1 in the plain build,
** without it under the sanitizers, where the skipped ones show as skipped.
*/
#include <criterion/criterion.h>
#include <stdlib.h>

#include "support/aot_sweep.h"
#include "support/dynamo_util.h"

TestSuite(aot_sweep_inductor, .init = kn_test_dynamo_setup, .fini = kn_test_dynamo_teardown,
          .timeout = 900);

static bool all(void) {
  const char *v = getenv("KILN_TEST_SWEEP_ALL");
  return v && *v && *v != '0';
}

static void sweep(kn_dtype dt, kn_sweep_layout l, bool dynamic, int64_t rows) {
  kn_sweep_opts o = {"inductor", dt, dt == KN_FLOAT32 ? 1e-5 : 1e-12, l, dynamic, rows, dynamic, !all()};
  int failures = kn_test_aot_sweep(&o);
  cr_expect_eq(failures, 0, "%d op cases differ from eager (listed on stderr)", failures);
}

Test(aot_sweep_inductor, contiguous_static) { sweep(KN_FLOAT64, KN_SWEEP_CONTIG, false, 5); }

static void sweep_all(kn_dtype dt, kn_sweep_layout l, bool dynamic, int64_t rows) {
  if (all()) sweep(dt, l, dynamic, rows);
  else cr_skip_test("KILN_TEST_SWEEP_ALL is not set");
}

Test(aot_sweep_inductor, transposed_static) { sweep_all(KN_FLOAT64, KN_SWEEP_TRANSPOSED, false, 5); }
Test(aot_sweep_inductor, broadcast_static) { sweep_all(KN_FLOAT64, KN_SWEEP_BROADCAST, false, 5); }
Test(aot_sweep_inductor, contiguous_dynamic) { sweep_all(KN_FLOAT64, KN_SWEEP_CONTIG, true, 5); }
Test(aot_sweep_inductor, zero_size) { sweep_all(KN_FLOAT64, KN_SWEEP_CONTIG, false, 0); }
Test(aot_sweep_inductor, contiguous_static_float32) { sweep_all(KN_FLOAT32, KN_SWEEP_CONTIG, false, 5); }
