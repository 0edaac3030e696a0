/*
** test_aot_sweep.c: the AOT op sweep with backend "aot_eager" (cases, layouts
** and the comparison in support/aot_sweep.c). Every differentiable row of
** the op table is called by a case or left out with a written reason
** (complete_over_the_op_table). float64 with atol = rtol = 1e-12 and
** float32 with 1e-5 (the graphs call the same kernels as eager code, in the
** same order per value; the bound leaves room for a different summation
** order of gradients that meet). Layouts contiguous, transposed and
** broadcast, static and dynamic sizes, zero-size inputs, and the min-cut
** partitioner (KILN_AOT_PARTITIONER=min_cut).
*/
#include <criterion/criterion.h>
#include <stdlib.h>

#include "support/aot_sweep.h"
#include "support/dynamo_util.h"

TestSuite(aot_sweep, .init = kn_test_dynamo_setup, .fini = kn_test_dynamo_teardown, .timeout = 300);

static void sweep(kn_dtype dt, kn_sweep_layout l, bool dynamic, int64_t rows) {
  kn_sweep_opts o = {"aot_eager", dt, dt == KN_FLOAT32 ? 1e-5 : 1e-12, l, dynamic, rows, true, false};
  int failures = kn_test_aot_sweep(&o);
  cr_expect_eq(failures, 0, "%d op cases differ from eager (listed on stderr)", failures);
}

Test(aot_sweep, complete_over_the_op_table) {
  int bad = kn_test_aot_sweep_uncovered();
  cr_expect_eq(bad, 0, "%d differentiable ops without a sweep case or a reason (listed on stderr)", bad);
  cr_expect_geq(kn_test_aot_sweep_cases(), 150);
}

Test(aot_sweep, contiguous_static) { sweep(KN_FLOAT64, KN_SWEEP_CONTIG, false, 5); }
Test(aot_sweep, transposed_static) { sweep(KN_FLOAT64, KN_SWEEP_TRANSPOSED, false, 5); }
Test(aot_sweep, broadcast_static) { sweep(KN_FLOAT64, KN_SWEEP_BROADCAST, false, 5); }
Test(aot_sweep, contiguous_dynamic) { sweep(KN_FLOAT64, KN_SWEEP_CONTIG, true, 5); }
Test(aot_sweep, transposed_dynamic) { sweep(KN_FLOAT64, KN_SWEEP_TRANSPOSED, true, 5); }
Test(aot_sweep, broadcast_dynamic) { sweep(KN_FLOAT64, KN_SWEEP_BROADCAST, true, 5); }

Test(aot_sweep, contiguous_static_float32) { sweep(KN_FLOAT32, KN_SWEEP_CONTIG, false, 5); }
Test(aot_sweep, transposed_static_float32) { sweep(KN_FLOAT32, KN_SWEEP_TRANSPOSED, false, 5); }
Test(aot_sweep, broadcast_static_float32) { sweep(KN_FLOAT32, KN_SWEEP_BROADCAST, false, 5); }
Test(aot_sweep, contiguous_dynamic_float32) { sweep(KN_FLOAT32, KN_SWEEP_CONTIG, true, 5); }
Test(aot_sweep, zero_size_contiguous) { sweep(KN_FLOAT64, KN_SWEEP_CONTIG, false, 0); }
Test(aot_sweep, zero_size_transposed) { sweep(KN_FLOAT64, KN_SWEEP_TRANSPOSED, false, 0); }
Test(aot_sweep, zero_size_broadcast) { sweep(KN_FLOAT64, KN_SWEEP_BROADCAST, false, 0); }
Test(aot_sweep, zero_size_float32) { sweep(KN_FLOAT32, KN_SWEEP_CONTIG, false, 0); }

static void sweep_min_cut(kn_sweep_layout l, bool dynamic) {
  setenv("KILN_AOT_PARTITIONER", "min_cut", 1);
  sweep(KN_FLOAT64, l, dynamic, 5);
  unsetenv("KILN_AOT_PARTITIONER");
}

Test(aot_sweep, contiguous_static_min_cut) { sweep_min_cut(KN_SWEEP_CONTIG, false); }
Test(aot_sweep, transposed_static_min_cut) { sweep_min_cut(KN_SWEEP_TRANSPOSED, false); }
Test(aot_sweep, broadcast_static_min_cut) { sweep_min_cut(KN_SWEEP_BROADCAST, false); }
Test(aot_sweep, contiguous_dynamic_min_cut) { sweep_min_cut(KN_SWEEP_CONTIG, true); }
