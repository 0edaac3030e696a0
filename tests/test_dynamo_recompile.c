/*
** test_dynamo_recompile.c: cache hits, guards and their failure reasons,
** recompiles, guard_fail_fn, the cache limit (the recompile-UX seed
** test_recompile_ux.py ported to C), automatic dynamic shapes.
*/
/* Keep the frames of functions that end in a tail call to a kiln op, so
** traced ops have their exact source lines (see docs/DYNAMO.md). */
#pragma GCC optimize("no-optimize-sibling-calls")
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dynamo/dynamo.h"
#include "kiln/autograd.h"
#include "kiln/compile.h"
#include "kiln/graph.h"
#include "kiln/kiln.h"
#include "kiln/log.h"
#include "support/dynamo_util.h"
#include "support/log_capture.h"
#include "support/trace_util.h"
#include "tensor/tensor.h"

TestSuite(recompile, .init = kn_test_dynamo_setup, .fini = kn_test_dynamo_teardown);

static kn_tensor *add4(kn_tensor *a) { kn_tensor *r = kn_add_scalar(a, kn_int(4)); return r; }

Test(recompile, cache_hit_counts_one_frame) {
  kn_compile_counter cc = {0};
  kn_compile_options o = {.backend_fn = kn_compile_counter_backend, .backend_ud = &cc};
  kn_compiled *f = KN_COMPILE(add4, &o);
  kn_scope_begin();
  for (int i = 0; i < 3; i++) {
    kn_tensor *x = kn_full(KN_SHAPE(2, 3), kn_float(i), KN_FLOAT32);
    kn_tensor *y = kn_call_t(f, x);
    cr_assert(y, "%s", kn_last_error());
    cr_expect_eq(kn_get(y, (int64_t[]){1, 2}), 4.0 + i);
  }
  kn_scope_end();
  cr_expect_eq(cc.frame_count, 1);
  cr_expect_eq(cc.op_count, 1);
  kn_compiled_free(f);
}

/* One call with `cached`, then `missed` under cache_size_limit=1: exactly one
** WARNING (the cache-limit warning) that contains the expected reason. */
static void cache_fail_test(kn_tensor *cached, kn_tensor *missed, const char *expected) {
  kn_reset();
  kn_compile_options o = {.cache_size_limit = 1};
  kn_compiled *f = KN_COMPILE(add4, &o);
  kn_scope_begin();
  cr_assert(kn_call_t(f, cached), "%s", kn_last_error());
  kn_test_records r = {0};
  kn_test_capture_begin(&r);
  kn_tensor *y = kn_call_t(f, missed);
  kn_test_capture_end(&r);
  cr_expect(y != NULL, "%s", kn_last_error());
  size_t warnings = 0;
  const kn_test_record *w = NULL;
  for (size_t i = 0; i < r.n; i++)
    if (r.v[i].level >= KN_WARNING) {
      warnings++;
      w = &r.v[i];
    }
  cr_expect_eq(warnings, 1);
  cr_assert(w);
  cr_expect(!strncmp(w->message, "kiln.dynamo hit config.cache_size_limit (1)", 43), "%s", w->message);
  cr_expect(strstr(w->message, "\nTo diagnose recompilation issues, see docs/DYNAMO.md, "
                               "\"Cache, recompiles and the limit\"."), "%s", w->message);
  cr_expect(strstr(w->message, expected) != NULL, "expected \"%s\" in \"%s\"", expected, w->message);
  kn_test_records_free(&r);
  kn_scope_end();
  kn_compiled_free(f);
}

Test(recompile, verbose_tensor_check) {
  kn_scope_begin();
  kn_tensor *a = kn_rand(KN_SHAPE(3, 4, 5), NULL, KN_FLOAT32);
  cache_fail_test(a, kn_rand(KN_SHAPE(2, 4, 5), NULL, KN_FLOAT32),
                  "tensor 'L['a']' size mismatch at index 0. expected 3, actual 2");
  kn_tensor *c = kn_clone(a);
  kn_tensor *strided = kn__make_view(c, 3, (int64_t[]){3, 4, 5}, (int64_t[]){1, 3, 12}, 0);
  cache_fail_test(a, strided, "tensor 'L['a']' stride mismatch at index 0. expected 20, actual 1");
  kn_release(strided);
  cache_fail_test(a, kn_rand(KN_SHAPE(4, 5), NULL, KN_FLOAT32),
                  "tensor 'L['a']' rank mismatch. expected 3, actual 2");
  cache_fail_test(a, kn_empty_meta(KN_SHAPE(3, 4, 5), KN_FLOAT32),
                  "tensor 'L['a']' dispatch key set mismatch.");
  cache_fail_test(a, kn_ones(KN_SHAPE(3, 4, 5), KN_FLOAT16),
                  "tensor 'L['a']' dtype mismatch. expected Float, actual Half");
  kn_tensor *g = kn_clone(a);
  cr_assert_eq(kn_set_requires_grad(g, true), KN_OK);
  cache_fail_test(a, g, "tensor 'L['a']' requires_grad mismatch. expected requires_grad=0");
  kn_scope_end();
}

static kn_value add_ab(const kn_value *args, int n, void *ud) {
  (void)n;
  (void)ud;
  if (args[1].kind == KN_VTENSOR) return kn_vtensor(kn_add(args[0].u.t, args[1].u.t));
  return kn_vtensor(kn_add_scalar(args[0].u.t, kn_int(args[1].u.i)));
}

Test(recompile, mismatched_type) {
  kn_compile_options o = {.cache_size_limit = 1};
  kn_compiled *f = kn_compile_fn(add_ab, NULL, 2, "func", __FILE__, __LINE__, &o);
  kn_scope_begin();
  kn_tensor *a = kn_rand(KN_SHAPE(3, 4, 5), NULL, KN_FLOAT32);
  kn_tensor *b = kn_rand(KN_SHAPE(3, 4, 5), NULL, KN_FLOAT32);
  kn_value out;
  cr_assert_eq(kn_call(f, (kn_value[]){kn_vtensor(a), kn_vtensor(b)}, 2, &out), KN_OK);
  kn_value_release(out);
  kn_test_records r = {0};
  kn_test_capture_begin(&r);
  cr_assert_eq(kn_call(f, (kn_value[]){kn_vtensor(a), kn_vint(1)}, 2, &out), KN_OK);
  kn_test_capture_end(&r);
  cr_expect_eq(kn_get(out.u.t, (int64_t[]){0, 0, 0}), kn_get(a, (int64_t[]){0, 0, 0}) + 1);
  kn_value_release(out);
  const kn_test_record *w = kn_test_get_record(&r, "hit config.cache_size_limit");
  cr_assert(w);
  cr_expect(strstr(w->message, "expected type of 'L['b']' to be a tensor type, ' but found <class 'int'>"),
            "%s", w->message);
  kn_test_records_free(&r);
  kn_scope_end();
  kn_compiled_free(f);
}

static char failures[8][256];
static int nfail;
static void on_fail(const kn_guard_failure *g, void *ud) {
  (void)ud;
  if (nfail < 8) snprintf(failures[nfail++], sizeof failures[0], "%s", g->reason);
}

static kn_tensor *relu_fn(kn_tensor *x) { kn_tensor *r = kn_relu(x); return r; }

Test(recompile, multiple_guard_fails) {
  kn_compile_options o = {.cache_size_limit = 32, .dynamic = KN_DYNAMIC_FALSE,
                          .guard_fail_fn = on_fail};
  kn_compiled *f = KN_COMPILE(relu_fn, &o);
  kn_scope_begin();
  for (int i = 0; i < 5; i++) {
    nfail = 0;
    cr_assert(kn_call_t(f, kn_randn(KN_SHAPE(8 + i), NULL, KN_FLOAT32)), "%s", kn_last_error());
  }
  kn_scope_end();
  cr_assert_eq(nfail, 4);
  for (int k = 0; k < 4; k++) {
    char want[128];
    snprintf(want, sizeof want, "tensor 'L['a']' size mismatch at index 0. expected %d, actual 12",
             11 - k);
    cr_expect_str_eq(failures[k], want);
  }
  kn_compiled_free(f);
}

/* f(x) = ones(len(x), x[-1]) over a list of ints */
static kn_value ones_len(const kn_value *args, int n, void *ud) {
  (void)n;
  (void)ud;
  kn_value x = args[0];
  return kn_vtensor(kn_ones(KN_SHAPE(x.n, x.u.items[x.n - 1].u.i), KN_FLOAT32));
}

Test(recompile, multiple_guard_fails_report_all) {
  cr_assert_eq(kn_set_logs_str("recompiles_verbose"), KN_OK);
  kn_compile_options o = {.cache_size_limit = 32, .guard_fail_fn = on_fail,
                          .arg_names = (const char *[]){"x", NULL}};
  kn_compiled *f = kn_compile_fn(ones_len, NULL, 1, "f", __FILE__, __LINE__, &o);
  kn_value out;
  nfail = 0;
  cr_assert_eq(kn_call(f, (kn_value[]){kn_vlist(3, (kn_value[]){kn_vint(4), kn_vint(5), kn_vint(6)})}, 1, &out), KN_OK);
  kn_value_release(out);
  cr_expect_eq(nfail, 0);
  cr_assert_eq(kn_call(f, (kn_value[]){kn_vlist(2, (kn_value[]){kn_vint(7), kn_vint(8)})}, 1, &out), KN_OK);
  cr_expect_eq(kn_size(out.u.t, 0), 2);
  cr_expect_eq(kn_size(out.u.t, 1), 8);
  kn_value_release(out);
  cr_assert_eq(nfail, 1);
  cr_expect(strstr(failures[0], "len(L['x']) == 3"), "%s", failures[0]);
  nfail = 0;
  cr_assert_eq(kn_call(f, (kn_value[]){kn_vlist(1, (kn_value[]){kn_vint(9)})}, 1, &out), KN_OK);
  kn_value_release(out);
  cr_assert_eq(nfail, 2);
  cr_expect(strstr(failures[0], "len(L['x']) == 2"), "%s", failures[0]);
  cr_expect(strstr(failures[1], "len(L['x']) == 3"), "%s", failures[1]);
  /* verbose: all failing checks of an entry */
  cr_expect(strstr(failures[1], "L['x'][0] == 4"), "%s", failures[1]);
  kn_compiled_free(f);
}

static kn_value loop_torture(const kn_value *args, int n, void *ud) {
  (void)n;
  (void)ud;
  kn_tensor *out = args[0].u.t;
  for (int64_t i = 0; i < args[1].u.i; i++) out = kn_add(out, args[0].u.t);
  return kn_vtensor(out);
}

Test(recompile, loop_torture) {
  kn_compile_counter cc = {0};
  kn_compile_options o = {.cache_size_limit = 1, .backend_fn = kn_compile_counter_backend,
                          .backend_ud = &cc};
  kn_compiled *f = kn_compile_fn(loop_torture, NULL, 2, "loop_torture", __FILE__, __LINE__, &o);
  kn_test_records r = {0};
  kn_test_capture_begin(&r);
  kn_scope_begin();
  for (int i = 0; i < 10; i++) {
    kn_value out;
    kn_tensor *x = kn_ones(KN_SHAPE(3), KN_FLOAT32);
    cr_assert_eq(kn_call(f, (kn_value[]){kn_vtensor(x), kn_vint(3 + i * 7)}, 2, &out), KN_OK);
    cr_expect_eq(kn_get(out.u.t, (int64_t[]){2}), 1 + 3 + i * 7);
    kn_value_release(out);
  }
  kn_scope_end();
  kn_test_capture_end(&r);
  cr_expect_eq(cc.frame_count, 1);
  cr_expect_eq(kn_test_count_name(&r, "convert_frame"), 1);
  kn_test_records_free(&r);
  kn_compiled_free(f);
}

/* The same with the loop count a 0-dim tensor read by kn_item: the answer of
** the graph break changes on every call. The first call compiles the frame
** after the break (the one before it has no ops); past cache_size_limit 1
** every other call runs eagerly from the break on: no new trace, no compile
** (inductor's C compiler never runs again), one warning. */
static kn_value loop_torture_item(const kn_value *args, int n, void *ud) {
  (void)n, (void)ud;
  kn_tensor *input = args[0].u.t, *out = input;
  int64_t iters = (int64_t)kn_item(args[1].u.t);
  for (int64_t i = 0; i < iters; i++) out = kn_add(out, input);
  return kn_vtensor(out);
}

static char *limit_warning_text(kn_compiled *f, const char *reason) {
  char *s = NULL;
  cr_assert(asprintf(&s, "kiln.dynamo hit config.cache_size_limit (1)\n"
                         "   function: '%s' (%s:%d)\n"
                         "   last reason: %s\n"
                         "To log all recompilation reasons, use KILN_LOGS=\"recompiles\".\n"
                         "Already compiled versions stay in use; new inputs run eagerly (raise "
                         "kn_compile_options.cache_size_limit to compile more).\n"
                         "To diagnose recompilation issues, see docs/DYNAMO.md, \"Cache, "
                         "recompiles and the limit\".",
                    f->frame.name, f->frame.file, f->frame.line, reason) > 0);
  return s;
}

/* The single WARNING record of r: the cache-limit warning, exactly. */
static void expect_one_limit_warning(const kn_test_records *r, const char *want) {
  size_t warnings = 0;
  for (size_t i = 0; i < r->n; i++)
    if (r->v[i].level >= KN_WARNING) {
      warnings++;
      cr_expect_str_eq(r->v[i].message, want);
      /* logged inside the compile that would have happened (spec 7) */
      cr_expect_str_eq(r->v[i].compile_id ? r->v[i].compile_id : "", "0/1");
    }
  cr_expect_eq(warnings, 1);
}

/* The end of a cache-limit test: exactly the limit warning (reason as given)
** in r, `starts` frame compiles in the trace (none past the limit); frees
** r, f, the trace and its folder. */
static void finish_limit_test(kn_compiled *f, kn_test_records *r, char *dir, const char *reason,
                              int starts) {
  char *want = limit_warning_text(f, reason);
  expect_one_limit_warning(r, want);
  char *text = kn_test_trace_text();
  int got = kn_test_count_sub(text, "\"dynamo_start\"");
  cr_expect_eq(got, starts, "%d frame compiles started (the first call's %d expected)", got,
               starts);
  free(text);
  free(want);
  kn_test_records_free(r);
  kn_compiled_free(f);
  kn_trace_disable();
  kn_test_rmdir(dir);
}

Test(recompile, loop_torture_item_runs_eagerly_past_the_limit) {
  char *dir = kn_test_trace_start();
  kn_compile_counter cc = {.inner = "inductor"};
  kn_compile_options o = {.cache_size_limit = 1, .backend_fn = kn_compile_counter_backend,
                          .backend_ud = &cc};
  kn_compiled *f = kn_compile_fn(loop_torture_item, NULL, 2, "loop_torture_item", __FILE__,
                                 __LINE__, &o);
  kn_test_records r = {0};
  kn_test_capture_begin(&r);
  kn_scope_begin();
  for (int i = 0; i < 10; i++) {
    kn_value out;
    kn_tensor *x = kn_randn(KN_SHAPE(3), NULL, KN_FLOAT32);
    kn_tensor *iters = kn_scalar_tensor(kn_int(3 + i * 7), KN_INT64);
    cr_assert_eq(kn_call(f, (kn_value[]){kn_vtensor(x), kn_vtensor(iters)}, 2, &out), KN_OK,
                 "call %d: %s", i, kn_last_error());
    for (int64_t k = 0; k < 3; k++) /* (iters + 1) * x, added up as eagerly */
      cr_expect_float_eq(kn_get(out.u.t, &k), (4 + i * 7) * kn_get(x, &k), 1e-4, "call %d", i);
    kn_value_release(out);
  }
  kn_scope_end();
  kn_test_capture_end(&r);
  cr_expect_eq(cc.frame_count, 1, "compiles: %d (the seed: 1 frame)", cc.frame_count);
  finish_limit_test(f, &r, dir, "0/0: a graph break answered differently (new branch): "
                                     "kn_item() at the end of 0/0 gave 10, recorded: 3", 2);
}

/* Past the limit, what the segments before the break did happens once per
** call (an input updated in place); the rest runs eagerly on their real
** values: its ops, kn_autograd_grad with respect to the input (a value from
** before the break) and a backward through values from both sides of the
** break (gradients as eagerly), a value from before the break returned. */
static kn_value update_then_loop(const kn_value *args, int n, void *ud) {
  (void)n, (void)ud;
  kn_tensor *x = args[0].u.t, *dx = NULL;
  kn_add_scalar_(args[2].u.t, kn_int(1));
  kn_tensor *y = kn_mul_scalar(x, kn_float(2));
  int64_t iters = (int64_t)kn_item(args[1].u.t);
  kn_tensor *out = kn_sum(y);
  for (int64_t i = 0; i < iters; i++) out = kn_add(out, kn_sum(kn_sin(x)));
  kn_autograd_grad(&out, 1, &x, 1, NULL, true, false, false, &dx);
  kn_backward(out, NULL);
  kn_value items[3] = {kn_vtensor(y), kn_vtensor(out), kn_vtensor(dx)};
  return kn_tuple(3, items);
}

Test(recompile, effects_once_and_eager_rest_past_the_limit) {
  char *dir = kn_test_trace_start();
  kn_compile_counter cc = {.inner = "aot_eager"};
  kn_compile_options o = {.cache_size_limit = 1, .backend_fn = kn_compile_counter_backend,
                          .backend_ud = &cc};
  kn_compiled *f = kn_compile_fn(update_then_loop, NULL, 3, "update_then_loop", __FILE__,
                                 __LINE__, &o);
  kn_test_records r = {0};
  kn_test_capture_begin(&r);
  kn_scope_begin();
  kn_tensor *acc = kn_zeros(KN_SHAPE(3), KN_FLOAT32);
  for (int i = 0; i < 6; i++) {
    int iters = 1 + i * 2;
    kn_tensor *x = kn_randn(KN_SHAPE(3), NULL, KN_FLOAT32);
    kn_set_requires_grad(x, true);
    kn_value out;
    kn_value a[3] = {kn_vtensor(x), kn_vtensor(kn_scalar_tensor(kn_int(iters), KN_INT64)),
                     kn_vtensor(acc)};
    cr_assert_eq(kn_call(f, a, 3, &out), KN_OK, "call %d: %s", i, kn_last_error());
    cr_assert_eq(out.kind, KN_VTUPLE);
    double sum = 0;
    for (int64_t k = 0; k < 3; k++) {
      double xv = kn_get(x, &k);
      sum += 2 * xv + iters * sin(xv);
      cr_expect_float_eq(kn_get(acc, &k), i + 1, 1e-6, "call %d: acc updated once", i);
      cr_expect_float_eq(kn_get(out.u.items[0].u.t, &k), 2 * xv, 1e-5, "call %d: y", i);
      cr_expect_float_eq(kn_get(out.u.items[2].u.t, &k), 2 + iters * cos(xv), 1e-4,
                         "call %d: kn_autograd_grad", i);
      cr_expect_float_eq(kn_get(kn_grad(x), &k), 2 + iters * cos(xv), 1e-4, "call %d: grad", i);
    }
    cr_expect_float_eq(kn_item(out.u.items[1].u.t), sum, 1e-4, "call %d: out", i);
    kn_value_release(out);
  }
  kn_scope_end();
  kn_test_capture_end(&r);
  /* the first call: the segment before the kn_item break and the one up to
  ** kn_autograd_grad (the two after it, up to the backward and to the
  ** return, have no ops); nothing after */
  cr_expect_eq(cc.frame_count, 2, "compiles: %d", cc.frame_count);
  finish_limit_test(f, &r, dir, "0/0: a graph break answered differently (new branch): "
                                     "kn_item() at the end of 0/0 gave 3, recorded: 1", 4);
}

/* Past the limit, what the rest of the function asks of values from before
** the break is answered from their real values: ops with tensor lists, a
** second data-dependent condition, a data-dependent op, kn_host_read. The
** call leaves the known segments at the first break or (the first answer
** as recorded) at the second. */
static void note_value(double v, void *ud) { *(double *)ud += v; }

static kn_value many_breaks(const kn_value *args, int n, void *ud) {
  (void)n;
  kn_tensor *x = args[0].u.t, *y = kn_mul_scalar(x, kn_float(2));
  double k = kn_item(args[1].u.t);
  kn_tensor *z = kn_cat((kn_tensor *[]){y, x}, 2, 0);
  if (kn_is_true(kn_gt_scalar(kn_sum(y), kn_int(0)))) z = kn_add_scalar(z, kn_int(1));
  kn_tensor *nz = kn_nonzero(kn_gt_scalar(z, kn_float(0.5)));
  kn_host_read(args[1].u.t, note_value, ud);
  kn_value items[3] = {kn_vtensor(kn_mul_scalar(z, kn_float(k))), kn_vtensor(nz), kn_vtensor(y)};
  return kn_tuple(3, items);
}

static void expect_same(kn_tensor *got, kn_tensor *want, int call, const char *what) {
  cr_assert(got && want, "call %d: %s missing: %s", call, what, kn_last_error());
  cr_assert_eq(kn_numel(got), kn_numel(want), "call %d: %s numel", call, what);
  if (kn_numel(want) == 0) return;
  double d = 1;
  kn_tensor *diff = kn_sub(kn_to(got, KN_FLOAT64), kn_to(want, KN_FLOAT64));
  cr_assert_eq(kn_item_double(kn_amax(kn_abs(diff), NULL, 0, false), &d), KN_OK);
  cr_expect_leq(d, 1e-5, "call %d: %s differs by %g", call, what, d);
}

Test(recompile, later_breaks_run_eagerly_past_the_limit) {
  double seen_e = 0, seen_c = 0;
  kn_compile_counter cc = {0};
  kn_compile_options o = {.cache_size_limit = 1, .backend_fn = kn_compile_counter_backend,
                          .backend_ud = &cc};
  kn_compiled *f = kn_compile_fn(many_breaks, &seen_c, 2, "many_breaks", __FILE__, __LINE__, &o);
  kn_scope_begin();
  for (int i = 0; i < 6; i++) {
    /* odd calls: the first answer as recorded, the second differs (x < 0) */
    kn_tensor *x = kn_abs(kn_randn(KN_SHAPE(4), NULL, KN_FLOAT32));
    if (i % 2) x = kn_neg(x);
    int k = i % 2 ? 1 : i + 1;
    kn_value a[2] = {kn_vtensor(x), kn_vtensor(kn_scalar_tensor(kn_int(k), KN_INT64))}, got;
    kn_value want = many_breaks(a, 2, &seen_e);
    cr_assert_eq(kn_call(f, a, 2, &got), KN_OK, "call %d: %s", i, kn_last_error());
    for (int j = 0; j < 3; j++) expect_same(got.u.items[j].u.t, want.u.items[j].u.t, i, "output");
    cr_expect_eq(seen_c, seen_e, "call %d: the host callback saw %g, eagerly %g", i, seen_c, seen_e);
    kn_value_release(got);
  }
  kn_scope_end();
  /* the first call's four segments with ops; the later ones added nothing */
  cr_expect_eq(cc.frame_count, 4, "compiles: %d", cc.frame_count);
  cr_expect_eq(f->nentries, 1);
  kn_compiled_free(f);
}

static kn_tensor *double_it(kn_tensor *input) { kn_tensor *r = kn_add(input, input); return r; }

Test(recompile, dynamic_input) {
  kn_compile_counter cc = {0};
  kn_compile_options o = {.cache_size_limit = 2, .dynamic = KN_DYNAMIC_FALSE,
                          .backend_fn = kn_compile_counter_backend, .backend_ud = &cc};
  kn_compiled *f = KN_COMPILE(double_it, &o);
  kn_test_records r = {0};
  kn_test_capture_begin(&r);
  kn_scope_begin();
  for (int i = 0; i < 10; i++)
    cr_assert(kn_call_t(f, kn_randn(KN_SHAPE(2 + i * 13, 3, 4), NULL, KN_FLOAT32)));
  kn_scope_end();
  kn_test_capture_end(&r);
  cr_expect_eq(cc.frame_count, 2);
  size_t warnings = 0;
  for (size_t i = 0; i < r.n; i++)
    if (r.v[i].level >= KN_WARNING) {
      warnings++;
      cr_expect(!strncmp(r.v[i].message, "kiln.dynamo hit config.cache_size_limit", 39));
    }
  cr_expect_eq(warnings, 1);
  kn_test_records_free(&r);
  kn_compiled_free(f);
}

/* drop_cache_on_limit: the compiled program is freed when the limit is hit */
static int freed;
static kn_status passthrough_run(void *st, kn_tensor *const *in, int nin, kn_tensor **out, int nout) {
  return kn_graph_module_call(st, in, nin, out, nout) == KN_OK ? KN_OK : kn_last_status();
}
static void note_free(void *st) {
  (void)st;
  freed++;
}
static kn_status tracking_backend(kn_graph_module *gm, kn_tensor *const *ex, int n, void *ud,
                                  kn_compiled_graph *out) {
  (void)ex;
  (void)n;
  (void)ud;
  *out = (kn_compiled_graph){passthrough_run, gm, note_free};
  return KN_OK;
}

static kn_value model(const kn_value *args, int n, void *ud) {
  (void)n;
  (void)ud;
  return kn_vtensor(kn_add_scalar(args[0].u.t, kn_int(args[1].u.i)));
}

Test(recompile, drop_cache_on_skip) {
  freed = 0;
  kn_compile_options o = {.cache_size_limit = 1, .drop_cache_on_limit = true,
                          .backend_fn = tracking_backend};
  kn_compiled *f = kn_compile_fn(model, NULL, 2, "model", __FILE__, __LINE__, &o);
  kn_scope_begin();
  kn_tensor *x = kn_randn(KN_SHAPE(2), NULL, KN_FLOAT32);
  for (int i = 0; i < 2; i++) {
    kn_value out;
    cr_assert_eq(kn_call(f, (kn_value[]){kn_vtensor(x), kn_vint(i)}, 2, &out), KN_OK);
    kn_value_release(out);
  }
  kn_scope_end();
  cr_expect_eq(freed, 1);
  kn_compiled_free(f);
}

static kn_tensor *abc(kn_tensor *a, kn_tensor *b, kn_tensor *c) {
  kn_tensor *r = kn_add(a, kn_mul(b, c));
  return r;
}

Test(recompile, views_and_permutations) {
  kn_compile_counter cc = {0};
  kn_compile_options o = {.cache_size_limit = 2, .backend_fn = kn_compile_counter_backend,
                          .backend_ud = &cc};
  kn_compiled *f = KN_COMPILE(abc, &o);
  kn_scope_begin();
  kn_tensor *a = kn_rand(KN_SHAPE(3, 4, 5), NULL, KN_FLOAT32);
  kn_tensor *b = kn_rand(KN_SHAPE(3, 4, 5), NULL, KN_FLOAT32);
  kn_tensor *c = kn_rand(KN_SHAPE(3, 4, 5), NULL, KN_FLOAT32);
  kn_tensor *b_v = kn_view(kn_rand(KN_SHAPE(3, 5, 4), NULL, KN_FLOAT32), KN_SHAPE(3, 4, 5));
  kn_tensor *b_p = kn_permute(kn_rand(KN_SHAPE(3, 5, 4), NULL, KN_FLOAT32), KN_SHAPE(0, 2, 1));
  cr_assert(kn_call_t(f, a, b, c));
  cr_expect_eq(cc.frame_count, 1);
  cr_assert(kn_call_t(f, a, b, c));
  cr_expect_eq(cc.frame_count, 1);
  cr_assert(kn_call_t(f, a, b_v, c));
  cr_expect_eq(cc.frame_count, 1);
  kn_tensor *y = kn_call_t(f, a, b_p, c);
  cr_assert(y);
  cr_expect_eq(cc.frame_count, 2);
  int64_t ix[3] = {2, 3, 1};
  cr_expect_float_eq(kn_get(y, ix), kn_get(a, ix) + kn_get(b_p, ix) * kn_get(c, ix), 1e-6);
  kn_scope_end();
  kn_compiled_free(f);
}

/* fn(x, ys, zs): for y, z in zip(ys, zs): x += y * z */
static kn_value zip_fn(const kn_value *args, int n, void *ud) {
  (void)n;
  (void)ud;
  kn_tensor *x = args[0].u.t;
  for (int i = 0; i < args[1].n && i < args[2].n; i++)
    x = kn_add_scalar(x, kn_float(args[1].u.items[i].u.d * args[2].u.items[i].u.d));
  return kn_vtensor(x);
}

static void guards_recompiles_body(const kn_test_records *r, void *ud) {
  (void)ud;
  kn_reset();
  kn_compile_options o = {.arg_names = (const char *[]){"x", "ys", "zs", NULL}};
  kn_compiled *f = kn_compile_fn(zip_fn, NULL, 3, "fn", __FILE__, __LINE__, &o);
  kn_scope_begin();
  kn_tensor *x = kn_ones(KN_SHAPE(1), KN_FLOAT32);
  kn_value ys[] = {kn_vdouble(1.0), kn_vdouble(2.0)}, zs[] = {kn_vdouble(3.0)};
  kn_value out;
  cr_assert_eq(kn_call(f, (kn_value[]){kn_vtensor(x), kn_vlist(2, ys), kn_vlist(1, zs)}, 3, &out), KN_OK);
  cr_expect_eq(kn_get(out.u.t, (int64_t[]){0}), 4.0);
  kn_value_release(out);
  cr_assert_eq(kn_call(f, (kn_value[]){kn_vtensor(x), kn_vlist(1, ys), kn_vlist(1, zs)}, 3, &out), KN_OK);
  kn_value_release(out);
  kn_scope_end();
  kn_compiled_free(f);
  char *all = NULL;
  size_t len = 0;
  FILE *m = open_memstream(&all, &len);
  for (size_t i = 0; i < r->n; i++) fprintf(m, "%s\n", r->v[i].message);
  fclose(m);
  /* the guard and the reason, padded to 60 columns then "  # " */
  char want_guard[160], want_reason[200];
  snprintf(want_guard, sizeof want_guard, "%-60s  # ", "L['zs'][0] == 3.0");
  snprintf(want_reason, sizeof want_reason,
           "    triggered by the following guard failure(s):\n    - %-60s  # ",
           "len(L['ys']) == 2");
  cr_expect(strstr(all, want_guard), "%s", all);
  cr_expect(strstr(all, want_reason), "%s", all);
  cr_expect(strstr(all, "Recompiling function fn in " __FILE__ ":"), "%s", all);
  free(all);
}

Test(recompile, guards_and_recompiles_logs) {
  kn_log_setting s[] = {KN_LOG_FLAG("guards", 1), KN_LOG_FLAG("recompiles", 1)};
  kn_test_logging_twice(s, 2, guards_recompiles_body, NULL);
}
