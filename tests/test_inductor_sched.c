/*
** tests/test_inductor_sched.c: inductor's decomposition table and scheduler.
** Softmax, log_softmax, layer norm, batch norm and mse_loss are decomposed
** into pointwise ops and reductions, and each becomes one reduction group:
** one kernel, one buffer (its result), no extern call. The schedule artifact
** is compared with a literal (which nodes share a kernel), and results with
** the eager ops on odd sizes, size-1 and zero-size rows, strided inputs and
** dynamic sizes. The trace holds before_post_grad_graph and
** inductor_post_grad_graph (the graph after decomposition) between
** fx_graph_runnable and inductor_output_code, as in the seeds.
**
** Tolerances (|compiled - eager| <= atol + rtol * |eager|): float32 rtol
** 1e-5, atol 1e-6 (the same exp as eager, bit for bit, but sums in
** another order, and the reciprocal of the sum rounded to float before
** it is taken where eager takes it in double); float64 rtol 1e-12,
** atol 1e-12.
*/
#include "inductor_util.h"
#include "kiln/log.h"
#include "kiln/trace.h"
#include "support/log_capture.h"
#include "support/trace_util.h"
#include "support/files.h"
#include "trace/reader.h"

static char cache[64];

static void setup(void) {
  ind_cache_dir(cache, sizeof cache);
  kn_manual_seed(3);
}
static void teardown(void) {
  if (!getenv("KN_TEST_KEEP_CACHE")) ind_rm(cache);
}

static double rtol_of(kn_dtype dt) { return dt == KN_FLOAT32 ? 1e-5 : 1e-12; }
static double atol_of(kn_dtype dt) { return dt == KN_FLOAT32 ? 1e-6 : 1e-12; }

/* Kernels, buffers allocated and extern calls in the generated code. */
static void expect_code(int kernels, int allocs, int exts) {
  char *src = kn_test_inductor_sources(cache);
  cr_expect_eq(kn_test_count_of(src, "static void kernel"), kernels, "kernels in\n%s", src);
  cr_expect_eq(kn_test_count_of(src, "rt->alloc("), allocs, "buffers in\n%s", src);
  cr_expect_eq(kn_test_count_of(src, "rt->ext("), exts, "extern calls in\n%s", src);
  free(src);
}

static kn_compiled *compile1(kn_tensor *(*fn)(kn_tensor *), kn_dynamic dyn) {
  kn_compile_options o = {.backend = "inductor", .dynamic = dyn};
  kn_compiled *f = kn_compile_tensor_fn((void (*)(void))fn, 1, "sched", __FILE__, __LINE__, &o);
  cr_assert_not_null(f, "%s", kn_last_error());
  return f;
}

static void check1(kn_compiled *f, kn_tensor *(*fn)(kn_tensor *), kn_tensor *x, const char *what) {
  kn_dtype dt = kn_tensor_dtype(x);
  kn_tensor *got = kn_call_t(f, x);
  cr_expect(ind_close(got, fn(x), rtol_of(dt), atol_of(dt), what), "%s: %s", what,
            kn_last_error());
}

static kn_tensor *softmax_fn(kn_tensor *x) { return kn_softmax(x, -1); }
static kn_tensor *softmax_mid(kn_tensor *x) { return kn_softmax(x, 1); }
static kn_tensor *log_softmax_fn(kn_tensor *x) { return kn_log_softmax(x, -1); }
static kn_tensor *mse_fn(kn_tensor *x) { return kn_mse_loss(x, kn_mul_scalar(x, kn_float(0.5)), KN_REDUCTION_MEAN); }

static kn_tensor *ln_w, *ln_b;
static kn_tensor *layernorm_fn(kn_tensor *x) {
  int64_t d = kn_size(x, -1);
  return kn_layer_norm(x, 1, &d, ln_w, ln_b, 1e-5);
}
static kn_tensor *bn_w, *bn_b, *bn_rm, *bn_rv;
static kn_tensor *batchnorm_train(kn_tensor *x) {
  return kn_batch_norm(x, NULL, NULL, bn_w, bn_b, true, 0.1, 1e-5);
}
static kn_tensor *batchnorm_eval(kn_tensor *x) {
  return kn_batch_norm(x, bn_rm, bn_rv, bn_w, bn_b, false, 0.1, 1e-5);
}

/* The sizes of every case: odd, one column, one row, no rows. */
static const int64_t cases[][2] = {{37, 129}, {5, 1}, {1, 7}, {0, 16}, {3, 1000}};

static void rows_against_eager(kn_tensor *(*fn)(kn_tensor *), kn_dtype dt) {
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    kn_compiled *f = compile1(fn, KN_DYNAMIC_FALSE);
    kn_scope_begin();
    char what[64];
    snprintf(what, sizeof what, "%s %lldx%lld", kn_dtype_name(dt), (long long)cases[c][0],
             (long long)cases[c][1]);
    check1(f, fn, kn_randn(2, cases[c], NULL, dt), what);
    kn_scope_end();
    kn_compiled_free(f);
  }
}

/* Softmax is one kernel (max, exp and sum, divide: exp through the eager
** kernels' vector math on blocks of the row) and one buffer, its result;
** log_softmax too. */
Test(inductor_sched, softmax_is_one_kernel, .init = setup, .fini = teardown) {
  kn_compiled *f = compile1(softmax_fn, KN_DYNAMIC_FALSE);
  kn_scope_begin();
  check1(f, softmax_fn, kn_randn(KN_SHAPE(37, 129), NULL, KN_FLOAT32), "softmax 37x129");
  kn_scope_end();
  kn_compiled_free(f);
  expect_code(1, 1, 0);
}

Test(inductor_sched, log_softmax_is_one_kernel, .init = setup, .fini = teardown) {
  kn_compiled *f = compile1(log_softmax_fn, KN_DYNAMIC_FALSE);
  kn_scope_begin();
  check1(f, log_softmax_fn, kn_randn(KN_SHAPE(37, 129), NULL, KN_FLOAT32), "log_softmax 37x129");
  kn_scope_end();
  kn_compiled_free(f);
  expect_code(1, 1, 0);
}

Test(inductor_sched, softmax_sizes_and_dtypes, .init = setup, .fini = teardown) {
  rows_against_eager(softmax_fn, KN_FLOAT32);
  rows_against_eager(softmax_fn, KN_FLOAT64);
  rows_against_eager(log_softmax_fn, KN_FLOAT32);
  rows_against_eager(log_softmax_fn, KN_FLOAT64);
}

/* Rows of length 0 (amax of nothing): softmax stays the eager op. */
Test(inductor_sched, empty_rows_stay_extern, .init = setup, .fini = teardown) {
  kn_compiled *f = compile1(softmax_fn, KN_DYNAMIC_FALSE);
  kn_scope_begin();
  check1(f, softmax_fn, kn_randn(KN_SHAPE(4, 0), NULL, KN_FLOAT32), "softmax 4x0");
  kn_scope_end();
  kn_compiled_free(f);
  expect_code(0, 0, 1);
}

/* A reduction over a middle dim, a transposed input and NaN/inf rows. */
Test(inductor_sched, softmax_layouts_and_specials, .init = setup, .fini = teardown) {
  kn_compiled *f = compile1(softmax_mid, KN_DYNAMIC_FALSE);
  kn_scope_begin();
  check1(f, softmax_mid, kn_randn(KN_SHAPE(3, 5, 7), NULL, KN_FLOAT64), "softmax dim 1 of 3x5x7");
  kn_scope_end();
  kn_compiled_free(f);
  f = compile1(softmax_fn, KN_DYNAMIC_FALSE);
  kn_scope_begin();
  check1(f, softmax_fn, kn_t(kn_randn(KN_SHAPE(33, 6), NULL, KN_FLOAT32)), "softmax transposed");
  kn_scope_end();
  kn_compiled_free(f);
  f = compile1(softmax_fn, KN_DYNAMIC_FALSE);
  kn_scope_begin();
  float v[12] = {1, NAN, 2, 3, -INFINITY, -INFINITY, -INFINITY, -INFINITY, 0, 1, 2, INFINITY};
  kn_tensor *x = kn_from_floats(v, KN_SHAPE(3, 4));
  check1(f, softmax_fn, x, "softmax NaN, -inf and inf rows");
  kn_scope_end();
  kn_compiled_free(f);
}

/* Rows 9, 11, 14: the second call compiles a program with a symbolic row
** count, the third reuses it. */
Test(inductor_sched, dynamic_rows, .init = setup, .fini = teardown) {
  kn_compiled *f = compile1(softmax_fn, KN_DYNAMIC_AUTO);
  kn_scope_begin();
  int64_t rows[3] = {9, 11, 14};
  for (int i = 0; i < 3; i++) {
    int64_t sz[2] = {rows[i], 40};
    check1(f, softmax_fn, kn_randn(2, sz, NULL, KN_FLOAT32), "dynamic softmax");
  }
  kn_scope_end();
  kn_compiled_free(f);
  cr_expect_eq(ind_count(cache, ".so"), 2);
}

/* Two calls on the same input give the same bits (reductions in a fixed
** order, also under OpenMP). */
Test(inductor_sched, reproducible, .init = setup, .fini = teardown) {
  kn_compiled *f = compile1(softmax_fn, KN_DYNAMIC_FALSE);
  kn_scope_begin();
  kn_tensor *x = kn_randn(KN_SHAPE(300, 301), NULL, KN_FLOAT32);
  cr_expect(ind_close(kn_call_t(f, x), kn_call_t(f, x), 0, 0, "run to run"));
  kn_scope_end();
  kn_compiled_free(f);
}

Test(inductor_sched, layernorm_is_one_kernel, .init = setup, .fini = teardown) {
  kn_dtype dts[2] = {KN_FLOAT32, KN_FLOAT64};
  for (int i = 0; i < 2; i++) {
    ln_w = kn_randn(KN_SHAPE(33), NULL, dts[i]);
    ln_b = kn_randn(KN_SHAPE(33), NULL, dts[i]);
    kn_compiled *f = compile1(layernorm_fn, KN_DYNAMIC_FALSE);
    kn_scope_begin();
    check1(f, layernorm_fn, kn_randn(KN_SHAPE(17, 33), NULL, dts[i]), "layernorm 17x33");
    check1(f, layernorm_fn, kn_randn(KN_SHAPE(1, 33), NULL, dts[i]), "layernorm 1x33");
    kn_scope_end();
    kn_compiled_free(f);
    kn_release(ln_w);
    kn_release(ln_b);
  }
  expect_code(4, 4, 0); /* one kernel and one buffer per program: 17 rows, 1 row (size 1
                        ** is specialised), in float32 and float64 */
}

Test(inductor_sched, batchnorm_train_and_eval, .init = setup, .fini = teardown) {
  kn_dtype dts[2] = {KN_FLOAT32, KN_FLOAT64};
  for (int i = 0; i < 2; i++) {
    kn_dtype dt = dts[i];
    bn_w = kn_randn(KN_SHAPE(3), NULL, dt);
    bn_b = kn_randn(KN_SHAPE(3), NULL, dt);
    bn_rm = kn_randn(KN_SHAPE(3), NULL, dt);
    kn_tensor *u = kn_rand(KN_SHAPE(3), NULL, dt);
    bn_rv = kn_add_scalar(u, kn_float(0.5));
    kn_release(u);
    kn_compiled *ft = compile1(batchnorm_train, KN_DYNAMIC_FALSE);
    kn_compiled *fe = compile1(batchnorm_eval, KN_DYNAMIC_FALSE);
    kn_scope_begin();
    kn_tensor *x = kn_randn(KN_SHAPE(8, 3, 5, 7), NULL, dt);
    check1(ft, batchnorm_train, x, "batch norm, training");
    check1(fe, batchnorm_eval, x, "batch norm, eval");
    check1(ft, batchnorm_train, kn_randn(KN_SHAPE(6, 3), NULL, dt), "batch norm 1d, training");
    kn_scope_end();
    kn_compiled_free(ft);
    kn_compiled_free(fe);
    kn_release(bn_w);
    kn_release(bn_b);
    kn_release(bn_rm);
    kn_release(bn_rv);
  }
}

Test(inductor_sched, mse_loss_is_one_kernel, .init = setup, .fini = teardown) {
  kn_compiled *f = compile1(mse_fn, KN_DYNAMIC_FALSE);
  kn_scope_begin();
  check1(f, mse_fn, kn_randn(KN_SHAPE(19, 23), NULL, KN_FLOAT64), "mse_loss");
  kn_scope_end();
  kn_compiled_free(f);
  expect_code(1, 1, 0);
}

/* The schedule: one group holding every node of softmax, only the result in
** memory; the fusion log gives each decision its reason. */
Test(inductor_sched, schedule_and_fusion_logs, .init = setup, .fini = teardown) {
  kn_test_records r = {0};
  kn_set_logs_str("schedule,fusion");
  kn_test_capture_begin(&r);
  kn_compiled *f = compile1(softmax_fn, KN_DYNAMIC_FALSE);
  kn_scope_begin();
  cr_assert_not_null(kn_call_t(f, kn_randn(KN_SHAPE(4, 6), NULL, KN_FLOAT32)));
  kn_scope_end();
  kn_compiled_free(f);
  kn_test_capture_end(&r);
  kn_set_logs_str("");
  cr_expect_eq(kn_test_count_artifact(&r, "schedule"), 1);
  const kn_test_record *s = kn_test_get_record(&r, "schedule: ");
  cr_assert_not_null(s);
  cr_expect_str_eq(s->message,
                   "schedule: 1 kernels, 0 extern calls, 5 nodes fused, 1 reduction groups\n"
                   "  kernel6: reduction group over [4, 6] reducing dims 1: amax(reduction) sub exp "
                   "sum_1(reduction) reciprocal(row) mul*  (* written to memory)\n");
  cr_expect_eq(kn_test_count_artifact(&r, "fusion"), 6);
  cr_expect_not_null(kn_test_get_record(&r, "fusion: amax starts group of amax (kernel 0)"));
  cr_expect_not_null(kn_test_get_record(
      &r, "fusion: exp fused into group of amax (kernel 0): reads a member, per element"));
  cr_expect_not_null(kn_test_get_record(
      &r, "fusion: sum_1 fused into group of amax (kernel 0): reduces a member, once per row"));
  cr_expect_not_null(kn_test_get_record(
      &r, "fusion: reciprocal fused into group of amax (kernel 0): reads a member, once per row"));
  cr_expect_not_null(kn_test_get_record(
      &r, "fusion: mul fused into group of amax (kernel 0): reads a member, per element"));
  kn_test_records_free(&r);
}

/* A node read by an extern call between it and the group's end cannot
** join the group (it would be written too late). */
static kn_tensor *blocked_fn(kn_tensor *x) {
  kn_tensor *e = kn_exp(x);
  kn_tensor *m = kn_mm(e, kn_t(e));          /* reads e before the sum */
  kn_tensor *s = kn_sum_dims(kn_mul(e, x), (const int64_t[]){1}, 1, true);
  return kn_add(kn_sum_dims(m, (const int64_t[]){1}, 1, true), s);
}

Test(inductor_sched, order_constraint_keeps_results, .init = setup, .fini = teardown) {
  kn_compiled *f = compile1(blocked_fn, KN_DYNAMIC_FALSE);
  kn_scope_begin();
  check1(f, blocked_fn, kn_randn(KN_SHAPE(6, 6), NULL, KN_FLOAT64), "extern between");
  kn_scope_end();
  kn_compiled_free(f);
}

/* Every payload of artifact `name` and the order of the inductor events. */
static int artifacts(const char *name, char **out, int cap, char *order, size_t ocap) {
  char *path = kn_trace_file_path();
  cr_assert_not_null(path);
  kn__trace_reader_opts o = {.strict = true};
  kn__trace_reader *r = kn__trace_reader_open(path, &o);
  cr_assert_not_null(r, "%s", kn_last_error());
  int n = 0;
  order[0] = 0;
  const kn__trace_record *rec;
  while (kn__trace_reader_next(r, &rec) == KN_OK && rec) {
    json_t *nm = strcmp(rec->event, "artifact") ? NULL : json_object_get(rec->value, "name");
    const char *ev = nm ? json_string_value(nm) : rec->event;
    if (strstr(ev, "post_grad") || strstr(ev, "runnable") || strstr(ev, "output_code"))
      snprintf(order + strlen(order), ocap - strlen(order), "%s ", ev);
    if (nm && !strcmp(ev, name) && n < cap) out[n++] = strdup(rec->payload);
  }
  kn__trace_reader_close(r);
  free(path);
  return n;
}

Test(inductor_sched, post_grad_graph_artifacts, .init = setup, .fini = teardown) {
  char *tdir = kn_test_trace_start();
  kn_compiled *f = compile1(softmax_fn, KN_DYNAMIC_FALSE);
  kn_scope_begin();
  cr_assert_not_null(kn_call_t(f, kn_randn(KN_SHAPE(4, 6), NULL, KN_FLOAT32)));
  kn_scope_end();
  kn_compiled_free(f);
  char *before[2], *after[2], order[512];
  int nb = artifacts("before_post_grad_graph", before, 2, order, sizeof order);
  int na = artifacts("inductor_post_grad_graph", after, 2, order, sizeof order);
  kn_trace_disable();
  cr_assert_eq(nb, 1);
  cr_assert_eq(na, 1);
  cr_expect_str_eq(order, "fx_graph_runnable before_post_grad_graph inductor_post_grad_graph "
                          "inductor_output_code ");
  cr_expect_not_null(strstr(before[0], "kiln.ops._softmax(primals_1, -1, False)"), "%s", before[0]);
  cr_expect_null(strstr(after[0], "_softmax"), "%s", after[0]);
  cr_expect_not_null(strstr(after[0], "kiln.ops.amax(primals_1, [-1], True)"), "%s", after[0]);
  cr_expect_not_null(strstr(after[0], "kiln.ops.mul(exp, reciprocal)"), "%s", after[0]);
  free(before[0]);
  free(after[0]);
  kn_test_rmdir(tdir);
}

/* Softmaxes over the same rows chain: both are one group (one kernel, one
** buffer: the first's result is kept in the output between passes); over
** dims 1, 0, 1, three kernels run on two allocations (the first buffer,
** dead, is taken over by the third kernel's output); a value read by an
** extern call is never reused. */
static kn_tensor *softmax3(kn_tensor *x) { return kn_softmax(kn_softmax(kn_softmax(x, 1), 0), 1); }
static kn_tensor *softmax_chain(kn_tensor *x) { return kn_softmax(kn_softmax(x, 1), 1); }

Test(inductor_sched, softmax_chain_shares_groups, .init = setup, .fini = teardown) {
  kn_compiled *f = compile1(softmax_chain, KN_DYNAMIC_FALSE);
  kn_scope_begin();
  check1(f, softmax_chain, kn_randn(KN_SHAPE(6, 11), NULL, KN_FLOAT64), "softmax of softmax");
  kn_scope_end();
  kn_compiled_free(f);
  expect_code(1, 1, 0);
}

Test(inductor_sched, dead_buffers_are_reused, .init = setup, .fini = teardown) {
  kn_compiled *f = compile1(softmax3, KN_DYNAMIC_FALSE);
  kn_scope_begin();
  check1(f, softmax3, kn_randn(KN_SHAPE(5, 9), NULL, KN_FLOAT64), "softmax of softmax of softmax");
  kn_scope_end();
  kn_compiled_free(f);
  char *src = kn_test_inductor_sources(cache);
  cr_expect_eq(kn_test_count_of(src, "static void kernel"), 3, "%s", src);
  cr_expect_eq(kn_test_count_of(src, "rt->alloc("), 2, "%s", src);
  cr_expect_eq(kn_test_count_of(src, "rt->reuse("), 1, "%s", src);
  free(src);
}

static kn_tensor *view_between(kn_tensor *x) {
  kn_tensor *a = kn_softmax(x, -1);
  kn_tensor *b = kn_softmax(kn_t(a), -1); /* a is read through an extern view */
  return kn_softmax(kn_softmax(b, -1), -1);
}

Test(inductor_sched, viewed_buffers_are_not_reused, .init = setup, .fini = teardown) {
  kn_compiled *f = compile1(view_between, KN_DYNAMIC_FALSE);
  kn_scope_begin();
  check1(f, view_between, kn_randn(KN_SHAPE(7, 7), NULL, KN_FLOAT64), "softmaxes around a view");
  kn_scope_end();
  kn_compiled_free(f);
  char *src = kn_test_inductor_sources(cache);
  cr_expect_eq(kn_test_count_of(src, "rt->reuse(0,"), 0);
  cr_expect_eq(kn_test_count_of(src, "rt->reuse(ctx, 1,"), 0, "%s", src);
  free(src);
}
