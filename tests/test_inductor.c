/*
** tests/test_inductor.c: the "inductor" backend end to end: the seed's
** example_fn gives eager's result (bit for bit), an 8-op pointwise chain is
** one kernel with one buffer, a view inside the graph is read through its
** strides, an op without a lowering (mm) runs as an extern call followed by
** the fused epilogue, and user labels reach the generated source escaped.
** The op sweep is test_inductor_sweep.c; caches, failures and threads are
** test_inductor_cache.c.
*/
#include "inductor_util.h"
#include "kiln/log.h"
#include "support/log_capture.h"
#include "support/files.h"

static kn_tensor *example_fn(kn_tensor *a) {
  kn_tensor *out = kn_mul(a, kn_ones(KN_SHAPE(1000, 1000), KN_FLOAT32));
  return kn_add(out, kn_ones(KN_SHAPE(1000, 1000), KN_FLOAT32));
}

static kn_compile_options ind_opts(void) {
  return (kn_compile_options){.backend = "inductor"};
}

Test(inductor, example_fn_matches_eager) {
  char dir[64];
  ind_cache_dir(dir, sizeof dir);
  kn_compile_options o = ind_opts();
  kn_compiled *f = KN_COMPILE(example_fn, &o);
  kn_scope_begin();
  kn_tensor *a = kn_randn(KN_SHAPE(1000, 1000), NULL, KN_FLOAT32);
  kn_tensor *got = kn_call_t(f, a);
  cr_expect(ind_close(got, example_fn(a), 0, 0, "example_fn"));
  kn_scope_end();
  kn_compiled_free(f);
  cr_expect_eq(ind_count(dir, ".so"), 1);
  ind_rm(dir);
}

static kn_tensor *chain8(kn_tensor *x) {
  kn_tensor *t = kn_mul_scalar(x, kn_float(1.5));
  t = kn_add_scalar(t, kn_float(0.25));
  t = kn_sigmoid(t);
  t = kn_mul(t, x);
  t = kn_sub_scalar(t, kn_float(0.5));
  t = kn_tanh(t);
  t = kn_relu(t);
  return kn_add(t, x);
}

/* Eight pointwise ops whose intermediates have one consumer: one loop, one
** buffer (the result), no intermediates. */
Test(inductor, chain_of_eight_is_one_kernel) {
  char dir[64];
  ind_cache_dir(dir, sizeof dir);
  kn_compile_options o = ind_opts();
  kn_compiled *f = KN_COMPILE(chain8, &o);
  kn_scope_begin();
  kn_tensor *x = kn_randn(KN_SHAPE(64, 33), NULL, KN_FLOAT64);
  cr_expect(ind_close(kn_call_t(f, x), chain8(x), 1e-12, 1e-12, "chain8"));
  kn_scope_end();
  kn_compiled_free(f);
  char *src = kn_test_inductor_sources(dir);
  cr_expect_eq(kn_test_count_of(src, "static void kernel"), 1, "%s", src);
  cr_expect_eq(kn_test_count_of(src, "rt->alloc("), 1);
  cr_expect_eq(kn_test_count_of(src, "rt->ext("), 0);
  free(src);
  ind_rm(dir);
}

static kn_tensor *view_fn(kn_tensor *x, kn_tensor *y) {
  return kn_add_scalar(kn_relu(kn_mul(kn_t(x), y)), kn_float(1.0));
}

/* A transpose inside the graph is an extern view (no copy); the kernel reads
** it through its strides (a row loop), broadcasting y's single row. */
Test(inductor, view_in_graph_read_through_strides) {
  char dir[64];
  ind_cache_dir(dir, sizeof dir);
  kn_compile_options o = ind_opts();
  kn_compiled *f = KN_COMPILE(view_fn, &o);
  kn_scope_begin();
  kn_tensor *x = kn_randn(KN_SHAPE(9, 5), NULL, KN_FLOAT32), *y = kn_randn(KN_SHAPE(1, 9), NULL, KN_FLOAT32);
  cr_expect(ind_close(kn_call_t(f, x, y), view_fn(x, y), 0, 0, "view"));
  kn_scope_end();
  kn_compiled_free(f);
  char *src = kn_test_inductor_sources(dir);
  cr_expect_eq(kn_test_count_of(src, "rt->ext("), 1, "the transpose");
  cr_expect_eq(kn_test_count_of(src, "(row loop"), 1, "%s", src);
  free(src);
  ind_rm(dir);
}

static kn_tensor *mm_fn(kn_tensor *a, kn_tensor *b) {
  return kn_relu(kn_add_scalar(kn_mm(a, b), kn_float(-0.5)));
}

/* mm has no lowering: an extern call of the eager op (logged), with the
** pointwise chain after it as its epilogue (one call: rt->ext_epi). */
Test(inductor, unlowered_op_is_extern_call) {
  char dir[64];
  ind_cache_dir(dir, sizeof dir);
  kn_test_records r = {0};
  kn_set_logs_str("+inductor");
  kn_test_capture_begin(&r);
  kn_compile_options o = ind_opts();
  kn_compiled *f = KN_COMPILE(mm_fn, &o);
  kn_scope_begin();
  kn_tensor *a = kn_randn(KN_SHAPE(6, 7), NULL, KN_FLOAT64), *b = kn_randn(KN_SHAPE(7, 3), NULL, KN_FLOAT64);
  cr_expect(ind_close(kn_call_t(f, a, b), mm_fn(a, b), 0, 0, "mm"));
  kn_scope_end();
  kn_compiled_free(f);
  kn_test_capture_end(&r);
  cr_expect_not_null(kn_test_get_record(&r, "no lowering for kiln.ops.mm"));
  kn_test_records_free(&r);
  char *src = kn_test_inductor_sources(dir);
  cr_expect_eq(kn_test_count_of(src, "rt->ext("), 0);
  cr_expect_eq(kn_test_count_of(src, "rt->ext_epi("), 1);
  cr_expect_eq(kn_test_count_of(src, "static void kernel"), 1);
  free(src);
  ind_rm(dir);
}

static kn_tensor *named_fn(kn_tensor *x) {
  return kn_name(kn_neg(kn_name(kn_exp(x), "x */ int evil; /*")), "y\n#include <evil.h>");
}

/* User labels reach the source only as [A-Za-z0-9_.] in comments. */
Test(inductor, user_names_escaped) {
  char dir[64];
  ind_cache_dir(dir, sizeof dir);
  kn_compile_options o = ind_opts();
  kn_compiled *f = KN_COMPILE(named_fn, &o);
  kn_scope_begin();
  kn_tensor *x = kn_randn(KN_SHAPE(3), NULL, KN_FLOAT32);
  cr_expect(ind_close(kn_call_t(f, x), named_fn(x), 0, 0, "named"));
  kn_scope_end();
  kn_compiled_free(f);
  char *src = kn_test_inductor_sources(dir);
  cr_expect_null(strstr(src, "evil;"));
  cr_expect_null(strstr(src, "<evil.h>"));
  free(src);
  ind_rm(dir);
}
