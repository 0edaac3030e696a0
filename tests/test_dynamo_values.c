/*
** test_dynamo_values.c: kiln values through compiled functions: tuple
** results, multi-output ops (getitem nodes), scalar and None results,
** constants captured from outside the function, in-place ops on inputs.
*/
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Keep the frames of functions that end in a tail call to a kiln op. */
#pragma GCC optimize("no-optimize-sibling-calls")

#include "kiln/compile.h"
#include "kiln/kiln.h"
#include "kiln/log.h"
#include "support/dynamo_util.h"
#include "support/log_capture.h"

TestSuite(values, .init = kn_test_dynamo_setup, .fini = kn_test_dynamo_teardown);

/* unbind rows, add the row index to each, return them as a tuple with the
** row count */
static kn_value rows(const kn_value *args, int n, void *ud) {
  (void)n;
  (void)ud;
  kn_tensor *parts[4];
  int k = kn_unbind(args[0].u.t, 0, parts, 4);
  if (k < 0) return kn_vtensor(NULL);
  kn_value items[5];
  for (int i = 0; i < k; i++) items[i] = kn_vtensor(kn_add_scalar(parts[i], kn_int(i)));
  items[k] = kn_vint(k);
  return kn_tuple(k + 1, items);
}

static void rows_body(const kn_test_records *r, void *ud) {
  (void)ud;
  kn_reset();
  kn_compile_counter cc = {0};
  kn_compile_options o = {.backend_fn = kn_compile_counter_backend, .backend_ud = &cc};
  kn_compiled *f = kn_compile_fn(rows, NULL, 1, "rows", __FILE__, __LINE__, &o);
  kn_scope_begin();
  for (int call = 0; call < 2; call++) {
    kn_value out;
    kn_tensor *x = kn_full(KN_SHAPE(3, 2), kn_float(10 * call), KN_FLOAT32);
    cr_assert_eq(kn_call(f, (kn_value[]){kn_vtensor(x)}, 1, &out), KN_OK, "%s", kn_last_error());
    cr_assert_eq(out.kind, KN_VTUPLE);
    cr_assert_eq(out.n, 4);
    for (int i = 0; i < 3; i++) {
      cr_assert_eq(out.u.items[i].kind, KN_VTENSOR);
      cr_expect_eq(kn_get(out.u.items[i].u.t, (int64_t[]){1}), 10.0 * call + i);
    }
    cr_expect_eq(out.u.items[3].kind, KN_VINT);
    cr_expect_eq(out.u.items[3].u.i, 3);
    kn_value_release(out);
  }
  kn_scope_end();
  cr_expect_eq(cc.frame_count, 1);
  cr_expect_eq(cc.op_count, 4); /* unbind and three adds; getitem is not an op */
  kn_compiled_free(f);
  const kn_test_record *g = kn_test_get_record(r, "class GraphModule");
  cr_assert(g);
  cr_expect(strstr(g->message, "getitem_2"), "%s", g->message);
  cr_expect(strstr(g->message, "return (add, add_1, add_2)"), "%s", g->message);
}

Test(values, tuples_and_multi_output_ops) {
  kn_log_setting s[] = {KN_LOG_FLAG("graph_code", 1)};
  kn_test_logging_twice(s, 1, rows_body, NULL);
}

static kn_tensor *captured;
static kn_tensor *uses_constant(kn_tensor *a) {
  kn_tensor *r = kn_mul(a, captured);
  return r;
}

Test(values, captured_constants) {
  captured = kn_full(KN_SHAPE(2), kn_float(7), KN_FLOAT32);
  kn_compiled *f = KN_COMPILE(uses_constant, NULL);
  kn_scope_begin();
  for (int i = 1; i <= 2; i++) {
    kn_tensor *y = kn_call_t(f, kn_full(KN_SHAPE(2), kn_float(i), KN_FLOAT32));
    cr_assert(y, "%s", kn_last_error());
    cr_expect_eq(kn_get(y, (int64_t[]){1}), 7.0 * i);
  }
  kn_scope_end();
  kn_compiled_free(f);
  kn_release(captured);
}

static kn_tensor *bump(kn_tensor *a) {
  kn_status st = kn_add_(a, kn_ones(KN_SHAPE(2), KN_FLOAT32));
  if (st != KN_OK) return NULL;
  kn_tensor *r = kn_mul_scalar(a, kn_float(2));
  return r;
}

Test(values, inplace_on_inputs) {
  kn_compiled *f = KN_COMPILE(bump, NULL);
  kn_scope_begin();
  kn_tensor *x = kn_zeros(KN_SHAPE(2), KN_FLOAT32);
  for (int i = 1; i <= 3; i++) {
    kn_tensor *y = kn_call_t(f, x);
    cr_assert(y, "%s", kn_last_error());
    cr_expect_eq(kn_get(x, (int64_t[]){0}), (double)i); /* the input was mutated */
    cr_expect_eq(kn_get(y, (int64_t[]){0}), 2.0 * i);
  }
  kn_scope_end();
  kn_compiled_free(f);
}

static kn_value returns_none(const kn_value *args, int n, void *ud) {
  (void)args;
  (void)n;
  (void)ud;
  return kn_vnone();
}

Test(values, none_result) {
  kn_compiled *f = kn_compile_fn(returns_none, NULL, 1, "returns_none", __FILE__, __LINE__, NULL);
  kn_value out;
  kn_scope_begin();
  cr_assert_eq(kn_call(f, (kn_value[]){kn_vtensor(kn_ones(KN_SHAPE(1), KN_FLOAT32))}, 1, &out), KN_OK,
               "%s", kn_last_error());
  cr_expect_eq(out.kind, KN_VNONE);
  kn_scope_end();
  kn_compiled_free(f);
}

static kn_tensor *noisy(kn_tensor *a) {
  kn_tensor *r = kn_add(a, kn_rand(KN_SHAPE(64), NULL, KN_FLOAT32));
  return r;
}

Test(values, random_ops_draw_on_every_call) {
  kn_compiled *f = KN_COMPILE(noisy, NULL);
  kn_scope_begin();
  kn_tensor *x = kn_zeros(KN_SHAPE(64), KN_FLOAT32);
  kn_tensor *y1 = kn_call_t(f, x), *y2 = kn_call_t(f, x), *y3 = kn_call_t(f, x);
  cr_assert(y1 && y2 && y3, "%s", kn_last_error());
  int same12 = 0, same23 = 0;
  for (int64_t i = 0; i < 64; i++) {
    double a = kn_get(y1, &i), b = kn_get(y2, &i), c = kn_get(y3, &i);
    cr_expect(a >= 0 && a < 1 && b >= 0 && b < 1);
    same12 += a == b;
    same23 += b == c;
  }
  cr_expect_lt(same12, 4);
  cr_expect_lt(same23, 4);
  kn_scope_end();
  kn_compiled_free(f);
}

static kn_value general(const kn_value *args, int n, void *ud) {
  (void)ud;
  kn_tensor *acc = args[0].u.t;
  for (int i = 1; i < n; i++) acc = kn_add(acc, args[i].u.t);
  return kn_vtensor(acc);
}

Test(values, compile_macro_takes_both_forms) {
  kn_compiled *g = KN_COMPILE(general, NULL); /* general form: any number of arguments */
  kn_compiled *t = KN_COMPILE(noisy, NULL);   /* tensor form: one tensor */
  cr_assert(g && t);
  kn_scope_begin();
  kn_tensor *x = kn_ones(KN_SHAPE(2), KN_FLOAT32);
  kn_value out;
  cr_assert_eq(kn_call(g, (kn_value[]){kn_vtensor(x), kn_vtensor(x), kn_vtensor(x)}, 3, &out), KN_OK);
  cr_expect_eq(kn_get(out.u.t, (int64_t[]){0}), 3.0);
  kn_value_release(out);
  cr_assert_eq(kn_call(g, (kn_value[]){kn_vtensor(x)}, 1, &out), KN_OK);
  cr_expect_eq(kn_get(out.u.t, (int64_t[]){0}), 1.0);
  kn_value_release(out);
  cr_expect_null(kn_call_t(t, x, x));
  cr_expect(strstr(kn_last_error(), "noisy: expected 1 arguments, got 2"), "%s", kn_last_error());
  kn_scope_end();
  kn_compiled_free(g);
  kn_compiled_free(t);
}

static kn_compiled *inner_c;
static kn_tensor *inner(kn_tensor *x) {
  kn_tensor *r = kn_add_scalar(x, kn_int(1));
  return r;
}
static kn_tensor *outer(kn_tensor *x) {
  kn_tensor *r = kn_mul_scalar(kn_call_t(inner_c, x), kn_float(2));
  return r;
}

static void nested_compiled_body(const kn_test_records *r, void *ud) {
  (void)ud;
  kn_reset();
  kn_compile_counter ci = {0}, co = {0};
  kn_compile_options oi = {.backend_fn = kn_compile_counter_backend, .backend_ud = &ci};
  kn_compile_options oo = {.backend_fn = kn_compile_counter_backend, .backend_ud = &co};
  inner_c = KN_COMPILE(inner, &oi);
  kn_compiled *f = KN_COMPILE(outer, &oo);
  kn_scope_begin();
  for (int i = 0; i < 2; i++) {
    kn_tensor *y = kn_call_t(f, kn_full(KN_SHAPE(2), kn_float(i), KN_FLOAT32));
    cr_assert(y, "%s", kn_last_error());
    cr_expect_eq(kn_get(y, (int64_t[]){0}), 2.0 * (i + 1));
  }
  kn_scope_end();
  cr_expect_eq(co.frame_count, 1);
  cr_expect_eq(co.op_count, 2);
  cr_expect_eq(ci.frame_count, 0); /* inlined into outer's graph */
  bool found = false;
  for (size_t i = 0; i < r->n; i++)
    if (strstr(r->v[i].message, "in inner (inline depth: 1)")) found = true;
  cr_expect(found);
  kn_compiled_free(f);
  kn_compiled_free(inner_c);
}

Test(values, nested_compiled_functions_are_inlined) {
  kn_log_setting s[] = {KN_LOG_FLAG("trace_source", 1)};
  kn_test_logging_twice(s, 1, nested_compiled_body, NULL);
}
