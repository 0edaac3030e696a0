/*
** test_dynamo_breaks.c: graph breaks as a trace tree: segments and their
** frames, recorded answers checked on every call, a new branch on another
** answer, fullgraph errors, kn_print, the graph_breaks / trace_source /
** trace_call artifacts (logging seed test_logging.py), and the graph-break
** shape of the seed's test_example_training_fn in the structured trace.
*/
/* Keep the frames of functions that end in a tail call to a kiln op, so
** traced ops have their exact source lines (see docs/DYNAMO.md). */
#pragma GCC optimize("no-optimize-sibling-calls")
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kiln/compile.h"
#include "kiln/kiln.h"
#include "kiln/log.h"
#include "kiln/trace.h"
#include "support/dynamo_util.h"
#include "support/log_capture.h"
#include "support/trace_util.h"

TestSuite(breaks, .init = kn_test_dynamo_setup, .fini = kn_test_dynamo_teardown);

static kn_compile_counter cc;
static kn_compile_options counting(void) {
  kn_compile_counter_clear(&cc);
  return (kn_compile_options){.backend_fn = kn_compile_counter_backend, .backend_ud = &cc};
}

static kn_tensor *gb_fn(kn_tensor *x) {
  x = kn_mul_scalar(x, kn_float(2));
  kn_graph_break();
  x = kn_mul_scalar(x, kn_float(3));
  return x;
}

static void trace_call_body(const kn_test_records *r, void *ud) {
  (void)ud;
  kn_reset();
  kn_compiled *f = KN_COMPILE(gb_fn, NULL);
  kn_scope_begin();
  kn_tensor *y = kn_call_t(f, kn_ones(KN_SHAPE(3, 3), KN_FLOAT32));
  cr_assert(y, "%s", kn_last_error());
  cr_expect_eq(kn_get(y, (int64_t[]){2, 2}), 6.0);
  kn_scope_end();
  kn_compiled_free(f);
  cr_assert_eq(kn_test_count_artifact(r, "trace_call"), 3);
  const char *first = r->v[0].message, *last = r->v[r->n - 1].message;
  cr_expect(strstr(first, "TRACE FX call mul from "), "%s", first);
  /* the last two lines: the source line and the markers under the call */
  cr_expect(strstr(first, "\n  x = kn_mul_scalar(x, kn_float(2));\n      ~~~~~~~~~~~~~^^^^^^^^^^^^^^^^"), "%s", first);
  cr_expect(strstr(last, "\n  x = kn_mul_scalar(x, kn_float(3));\n      ~~~~~~~~~~~~~^^^^^^^^^^^^^^^^"), "%s", last);
}

Test(breaks, trace_call_graph_break) {
  kn_log_setting s[] = {KN_LOG_FLAG("trace_call", 1)};
  kn_test_logging_twice(s, 1, trace_call_body, NULL);
}

static void graph_breaks_body(const kn_test_records *r, void *ud) {
  (void)ud;
  kn_reset();
  kn_compiled *f = KN_COMPILE(gb_fn, NULL);
  kn_scope_begin();
  for (int i = 0; i < 3; i++) cr_assert(kn_call_t(f, kn_ones(KN_SHAPE(3, 3), KN_FLOAT32)));
  kn_scope_end();
  kn_compiled_free(f);
  cr_assert_eq(r->n, 1);
  cr_expect(strstr(r->v[0].message, "Graph break in user code at " __FILE__ ":"), "%s", r->v[0].message);
  cr_expect(strstr(r->v[0].message, "Graph Break Reason: Call to `kn_graph_break()`\n"
                                    "  Explanation: User-inserted graph break.\n"
                                    "  Hint: Remove the `kn_graph_break()` call.\n"
                                    "User code traceback:\n"),
            "%s", r->v[0].message);
  cr_expect(strstr(r->v[0].message, "in gb_fn\n    kn_graph_break();"), "%s", r->v[0].message);
}

Test(breaks, graph_breaks_one_record) {
  kn_log_setting s[] = {KN_LOG_FLAG("graph_breaks", 1)};
  kn_test_logging_twice(s, 1, graph_breaks_body, NULL);
}

Test(breaks, segments_run_on_cache_hits) {
  kn_compile_options o = counting();
  kn_compiled *f = KN_COMPILE(gb_fn, &o);
  kn_scope_begin();
  for (int i = 1; i <= 3; i++) {
    kn_tensor *y = kn_call_t(f, kn_full(KN_SHAPE(2, 2), kn_float(i), KN_FLOAT32));
    cr_assert(y, "%s", kn_last_error());
    cr_expect_eq(kn_get(y, (int64_t[]){1, 0}), 6.0 * i);
  }
  kn_scope_end();
  cr_expect_eq(cc.frame_count, 2); /* one graph per segment, compiled once */
  cr_expect_eq(cc.op_count, 2);
  kn_compiled_free(f);
}

static kn_tensor *if_fn(kn_tensor *x) {
  if (kn_is_true(kn_gt_scalar(kn_sum(x), kn_int(0)))) {
    return kn_mul_scalar(x, kn_float(2));
  }
  return kn_mul_scalar(x, kn_float(3));
}

static void if_body(const kn_test_records *r, void *ud) {
  (void)ud;
  kn_reset();
  kn_compile_options o = counting();
  kn_compiled *f = KN_COMPILE(if_fn, &o);
  kn_scope_begin();
  kn_tensor *y = kn_call_t(f, kn_ones(KN_SHAPE(3, 3), KN_FLOAT32));
  cr_assert(y);
  cr_expect_eq(kn_get(y, (int64_t[]){0, 0}), 2.0);
  bool x2 = false, x3 = false;
  for (size_t i = 0; i < r->n; i++) {
    if (strstr(r->v[i].message, "return kn_mul_scalar(x, kn_float(2));")) x2 = true;
    if (strstr(r->v[i].message, "return kn_mul_scalar(x, kn_float(3));")) x3 = true;
  }
  cr_expect(x2);
  cr_expect(!x3);
  /* the other answer: a new branch, not a new entry */
  kn_tensor *z = kn_call_t(f, kn_full(KN_SHAPE(3, 3), kn_float(-1), KN_FLOAT32));
  cr_assert(z, "%s", kn_last_error());
  cr_expect_eq(kn_get(z, (int64_t[]){1, 1}), -3.0);
  cr_expect_eq(cc.frame_count, 3); /* condition, then-branch, else-branch */
  kn_tensor *w = kn_call_t(f, kn_full(KN_SHAPE(3, 3), kn_float(5), KN_FLOAT32));
  cr_expect_eq(kn_get(w, (int64_t[]){1, 1}), 10.0);
  kn_tensor *v = kn_call_t(f, kn_full(KN_SHAPE(3, 3), kn_float(-2), KN_FLOAT32));
  cr_expect_eq(kn_get(v, (int64_t[]){1, 1}), -6.0);
  cr_expect_eq(cc.frame_count, 3);
  kn_scope_end();
  kn_compiled_free(f);
}

Test(breaks, trace_source_if_stmt_and_branches) {
  kn_log_setting s[] = {KN_LOG_FLAG("trace_source", 1)};
  kn_test_logging_twice(s, 1, if_body, NULL);
}

static kn_tensor *item_fn(kn_tensor *x) {
  double s = kn_item(kn_sum(x));
  return kn_mul_scalar(x, kn_float(s));
}

Test(breaks, item_answers_are_checked) {
  kn_compile_options o = counting();
  kn_compiled *f = KN_COMPILE(item_fn, &o);
  kn_scope_begin();
  double vals[] = {1, 1, 2, 1, 2};
  for (int i = 0; i < 5; i++) {
    kn_tensor *y = kn_call_t(f, kn_full(KN_SHAPE(2), kn_float(vals[i]), KN_FLOAT32));
    cr_assert(y, "%s", kn_last_error());
    cr_expect_eq(kn_get(y, (int64_t[]){0}), vals[i] * 2 * vals[i]);
  }
  kn_scope_end();
  cr_expect_eq(cc.frame_count, 3); /* sum; mul for answer 2; mul for answer 4 */
  kn_compiled_free(f);
}

Test(breaks, fullgraph_names_the_location) {
  kn_compile_options o = {.fullgraph = true};
  kn_compiled *f = KN_COMPILE(gb_fn, &o);
  kn_scope_begin();
  cr_expect_null(kn_call_t(f, kn_ones(KN_SHAPE(2), KN_FLOAT32)));
  cr_expect_eq(kn_last_status(), KN_EUNSUPPORTED);
  cr_expect(strstr(kn_last_error(), "graph break in user code at " __FILE__ ":"), "%s", kn_last_error());
  cr_expect(strstr(kn_last_error(), "fullgraph=true"), "%s", kn_last_error());
  kn_scope_end();
  kn_compiled_free(f);
}

static kn_tensor *print_fn(kn_tensor *x) {
  kn_tensor *y = kn_add_scalar(x, kn_int(1));
  kn_print(y);
  return kn_mul_scalar(y, kn_float(2));
}

static kn_compiled *pf;
static void call_print(void *ud) {
  kn_tensor *y = kn_call_t(pf, (kn_tensor *)ud);
  cr_expect(y);
}

Test(breaks, print_is_traced) {
  pf = KN_COMPILE(print_fn, NULL);
  kn_scope_begin();
  for (int i = 0; i < 2; i++) {
    kn_tensor *x = kn_full(KN_SHAPE(2), kn_float(i), KN_FLOAT32);
    char *out = kn_test_capture_stdout(call_print, x);
    char want[64];
    snprintf(want, sizeof want, "tensor([%d., %d.])\n", i + 1, i + 1);
    cr_expect_str_eq(out, want);
    free(out);
  }
  kn_scope_end();
  kn_compiled_free(pf);
}

__attribute__((noinline)) static kn_tensor *fn3(kn_tensor *x) {
  kn_tensor *r = kn_mul_scalar(x, kn_float(4));
  return r;
}
__attribute__((noinline)) static kn_tensor *fn2(kn_tensor *x) {
  x = fn3(x);
  kn_tensor *r = kn_mul_scalar(x, kn_float(3));
  return r;
}
__attribute__((noinline)) static kn_tensor *fn1(kn_tensor *x) {
  x = fn2(x);
  kn_tensor *r = kn_mul_scalar(x, kn_float(2));
  return r;
}

static void nested_body(const kn_test_records *r, void *ud) {
  (void)ud;
  kn_reset();
  kn_compiled *f = KN_COMPILE(fn1, NULL);
  kn_scope_begin();
  kn_tensor *y = kn_call_t(f, kn_ones(KN_SHAPE(3, 3), KN_FLOAT32));
  cr_expect_eq(kn_get(y, (int64_t[]){0, 0}), 24.0);
  kn_scope_end();
  kn_compiled_free(f);
  bool f2 = false, f3 = false, f4 = false;
  for (size_t i = 0; i < r->n; i++) {
    const char *m = r->v[i].message;
    if (strstr(m, "kn_float(2)")) {
      f2 = true;
      cr_expect(!strstr(m, "inline depth"), "%s", m);
    } else if (strstr(m, "kn_float(3)")) {
      f3 = true;
      cr_expect(strstr(m, "in fn2 (inline depth: 1)"), "%s", m);
    } else if (strstr(m, "kn_float(4)")) {
      f4 = true;
      cr_expect(strstr(m, "in fn3 (inline depth: 2)"), "%s", m);
    }
  }
  cr_expect(f2 && f3 && f4);
}

Test(breaks, trace_source_nested) {
  kn_log_setting s[] = {KN_LOG_FLAG("trace_source", 1)};
  kn_test_logging_twice(s, 1, nested_body, NULL);
}

static kn_tensor *dyn_branch(kn_tensor *x) {
  kn_tensor *r;
  if (kn_is_true(kn_gt_scalar(kn_sum(x), kn_int(0))))
    r = kn_sum_dims(x, (int64_t[]){0}, 1, false);
  else
    r = kn_neg(kn_sum_dims(x, (int64_t[]){0}, 1, false));
  return r;
}

Test(breaks, dynamic_sizes_in_branches) {
  kn_compile_options o = counting();
  o.dynamic = KN_DYNAMIC_TRUE;
  kn_compiled *f = KN_COMPILE(dyn_branch, &o);
  kn_scope_begin();
  for (int i = 0; i < 6; i++) {
    int64_t n = 2 + i, m = 3 + (i % 3);
    double fill = (i % 2) ? -1 : 1;
    kn_tensor *y = kn_call_t(f, kn_full(KN_SHAPE(n, m), kn_float(fill), KN_FLOAT32));
    cr_assert(y, "%s", kn_last_error());
    cr_expect_eq(kn_size(y, 0), m);
    cr_expect_eq(kn_get(y, (int64_t[]){m - 1}), (double)n); /* n * fill * sign(fill) */
  }
  kn_scope_end();
  cr_expect_eq(cc.frame_count, 3); /* condition, then-branch, else-branch */
  kn_compiled_free(f);
}

/* Branch B reads the (dynamic) size as a C int: its graph is specialised to
** that size (shape guard Eq(s0, n)) although the entry was traced through
** branch A, which needed no such guard. */
static kn_tensor *late_guard(kn_tensor *x) {
  if (kn_is_true(kn_gt_scalar(kn_sum(x), kn_int(0)))) return kn_mul_scalar(x, kn_int(2));
  int64_t n = kn_size(x, 0);
  return kn_add_scalar(x, kn_int(n));
}

static char late_reason[256];
static void late_fail(const kn_guard_failure *g, void *ud) {
  (void)ud;
  snprintf(late_reason, sizeof late_reason, "%s", g->reason);
}

Test(breaks, guards_of_later_branch_are_checked) {
  kn_compile_options o = counting();
  o.dynamic = KN_DYNAMIC_TRUE;
  o.guard_fail_fn = late_fail;
  late_reason[0] = 0;
  kn_compiled *f = KN_COMPILE(late_guard, &o);
  kn_scope_begin();
  /* 1: branch A, size 4 */
  kn_tensor *y = kn_call_t(f, kn_full(KN_SHAPE(4), kn_float(1), KN_FLOAT32));
  cr_assert(y, "%s", kn_last_error());
  cr_expect_eq(kn_get(y, (int64_t[]){0}), 2.0);
  /* 2: branch B traced with size 4: x + 4 */
  y = kn_call_t(f, kn_full(KN_SHAPE(4), kn_float(-1), KN_FLOAT32));
  cr_assert(y, "%s", kn_last_error());
  cr_expect_eq(kn_get(y, (int64_t[]){3}), 3.0);
  int frames = cc.frame_count;
  /* 3: branch B with size 5 violates B's Eq(s0, 4): x + 5, never x + 4 */
  y = kn_call_t(f, kn_full(KN_SHAPE(5), kn_float(-1), KN_FLOAT32));
  cr_assert(y, "%s", kn_last_error());
  cr_expect_eq(kn_size(y, 0), 5);
  cr_expect_eq(kn_get(y, (int64_t[]){4}), 4.0);
  cr_expect_gt(cc.frame_count, frames, "the violated branch must be recompiled");
  cr_expect_str_eq(late_reason, "Eq(L['a'].size()[0], 4)"); /* the branch's guard */
  /* 4: size 4 through branch B again is cached and right */
  frames = cc.frame_count;
  y = kn_call_t(f, kn_full(KN_SHAPE(4), kn_float(-1), KN_FLOAT32));
  cr_assert(y, "%s", kn_last_error());
  cr_expect_eq(kn_get(y, (int64_t[]){0}), 3.0);
  /* 5: size 7 through branch A is still right (the newest entry serves it) */
  y = kn_call_t(f, kn_full(KN_SHAPE(7), kn_float(1), KN_FLOAT32));
  cr_assert(y, "%s", kn_last_error());
  cr_expect_eq(kn_get(y, (int64_t[]){6}), 2.0);
  kn_scope_end();
  kn_compiled_free(f);
}

static void item_break_body(const kn_test_records *r, void *ud) {
  (void)ud;
  kn_reset();
  kn_compiled *f = KN_COMPILE(item_fn, NULL);
  kn_scope_begin();
  cr_assert(kn_call_t(f, kn_ones(KN_SHAPE(2), KN_FLOAT32)), "%s", kn_last_error());
  kn_scope_end();
  kn_compiled_free(f);
  cr_assert_eq(r->n, 1);
  /* the reason names the C function, not a Python method or config flag */
  cr_expect(strstr(r->v[0].message, "Graph Break Reason: Call to `kn_item()`\n"
                                    "  Explanation: kn_item() reads a tensor's data, which a "
                                    "traced graph does not have.\n"),
            "%s", r->v[0].message);
}

Test(breaks, item_reason_names_the_c_function) {
  kn_log_setting s[] = {KN_LOG_FLAG("graph_breaks", 1)};
  kn_test_logging_twice(s, 1, item_break_body, NULL);
}
