/*
** test_dynamo_sizes.c: user code that reads a symbolic size as a plain
** integer (kn_size, kn_sizes, kn_numel) gets that size specialised with a
** guard, so a compiled entry never replays a baked-in size for inputs of
** another size. Ops themselves keep sizes symbolic.
*/
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#pragma GCC optimize("no-optimize-sibling-calls")

#include "kiln/kiln.h"
#include "kiln/compile.h"

/* Scales by the number of rows, read by the user as a plain integer: the
** value becomes a constant of the graph, so it must be guarded. */
static kn_tensor *scale_by_rows(kn_tensor *a) {
  return kn_mul_scalar(a, kn_float((double)kn_size(a, 0)));
}

static char reasons[4][256];
static int nreasons;
static void on_fail(const kn_guard_failure *f, void *ud) {
  (void)ud;
  if (nreasons < 4) snprintf(reasons[nreasons++], sizeof reasons[0], "%s", f->reason);
}

Test(sizes, reading_a_symbolic_size_specialises_it) {
  kn_reset();
  kn_compile_counter cc = {0, 0, "eager"};
  kn_compile_options o = {.dynamic = KN_DYNAMIC_TRUE, .backend_fn = kn_compile_counter_backend,
                          .backend_ud = &cc, .guard_fail_fn = on_fail};
  kn_compiled *f = KN_COMPILE(scale_by_rows, &o);
  nreasons = 0;
  kn_scope_begin();
  kn_tensor *y1 = kn_call_t(f, kn_ones(KN_SHAPE(2, 3), KN_FLOAT32));
  cr_assert_not_null(y1, "%s", kn_last_error());
  cr_assert_eq(kn_get(y1, (int64_t[]){1, 2}), 2.0);
  kn_tensor *y2 = kn_call_t(f, kn_ones(KN_SHAPE(4, 5), KN_FLOAT32));
  cr_assert_not_null(y2, "%s", kn_last_error());
  cr_assert_eq(kn_get(y2, (int64_t[]){3, 4}), 4.0, "a baked-in size was replayed");
  cr_assert_eq(cc.frame_count, 2, "the second size needs its own entry");
  cr_assert_eq(nreasons, 1);
  cr_assert(strstr(reasons[0], "L['a'].size()[0]") != NULL, "%s", reasons[0]);
  /* the same sizes again hit the cache */
  cr_assert_not_null(kn_call_t(f, kn_ones(KN_SHAPE(4, 5), KN_FLOAT32)));
  cr_assert_eq(cc.frame_count, 2);
  kn_scope_end();
  kn_compiled_free(f);
  kn_reset();
  cr_assert_eq(kn_live_tensors(), 0);
}

/* Ops keep symbols: no specialisation when only ops touch the sizes. */
static kn_tensor *flatten_by_op(kn_tensor *a) { return kn_mul_scalar(kn_flatten(a, 0, -1), kn_float(2)); }

static kn_tensor *sum_rows(kn_tensor *a) { return kn_sum_dims(a, (int64_t[]){1}, 1, false); }

Test(sizes, ops_alone_keep_sizes_symbolic) {
  kn_reset();
  kn_compile_counter cc = {0, 0, "eager"};
  kn_compile_options o = {.dynamic = KN_DYNAMIC_TRUE, .backend_fn = kn_compile_counter_backend,
                          .backend_ud = &cc};
  kn_compiled *f = KN_COMPILE(sum_rows, &o);
  kn_scope_begin();
  for (int64_t n = 2; n < 6; n++) {
    kn_tensor *y = kn_call_t(f, kn_ones(KN_SHAPE(n, n + 1), KN_FLOAT32));
    cr_assert_not_null(y, "%s", kn_last_error());
    cr_assert_eq(kn_size(y, 0), n);
    cr_assert_eq(kn_get(y, (int64_t[]){0}), (double)(n + 1));
  }
  cr_assert_eq(cc.frame_count, 1, "one graph serves every size");
  kn_scope_end();
  kn_compiled_free(f);
  (void)flatten_by_op;
  kn_reset();
  cr_assert_eq(kn_live_tensors(), 0);
}
