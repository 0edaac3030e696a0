/*
** test_dynamo_autograd.c: autograd and real-data entry points reached from
** inside a compiled function. kn_backward / kn_autograd_grad are graph
** breaks that run on the real values (gradients accumulate exactly as
** eagerly, on traced and cached calls, and a branch added later does not
** run them twice); kn_item_double / kn_print_tensor are breaks like
** kn_item / kn_print; kn_data / kn_get / kn_grad fail the compiled call
** with a message naming the call; kn_set_requires_grad on a value created
** inside is replayed; kn_host_read hands values to C code without
** recompiling per value. Expectations: the same function run eagerly, and
** closed-form gradients.
*/
#pragma GCC optimize("no-optimize-sibling-calls")
#include <criterion/criterion.h>
#include <math.h>
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

TestSuite(dyn_autograd, .init = kn_test_dynamo_setup, .fini = kn_test_dynamo_teardown);

static kn_compile_counter cc;
static kn_compile_options counting(void) {
  kn_compile_counter_clear(&cc);
  return (kn_compile_options){.backend_fn = kn_compile_counter_backend, .backend_ud = &cc};
}

static kn_tensor *filled(double v, bool rg) {
  kn_tensor *t = kn_full(KN_SHAPE(4, 4), kn_float(v), KN_FLOAT32);
  if (rg) kn_set_requires_grad(t, true);
  return t;
}

static void expect_all(const kn_tensor *t, double v, const char *what) {
  cr_assert(t, "%s: NULL (%s)", what, kn_last_error());
  for (int64_t i = 0; i < kn_numel(t); i++) {
    double got = kn_get(t, (int64_t[]){i / 4, i % 4});
    cr_assert_float_eq(got, v, 1e-6, "%s[%lld] = %g, expected %g", what, (long long)i, got, v);
  }
}

/* The seed's example_training_fn: a leaf created inside, backward inside. */
static kn_tensor *training_fn(kn_tensor *a) {
  kn_tensor *w = kn_full(KN_SHAPE(4, 4), kn_float(2), KN_FLOAT32);
  kn_set_requires_grad(w, true);
  kn_tensor *out = kn_mul(a, w);
  out = kn_add(out, kn_ones(KN_SHAPE(4, 4), KN_FLOAT32));
  kn_backward(kn_sum(out), NULL);
  return out;
}

Test(dyn_autograd, backward_inside_accumulates_like_eager) {
  kn_compile_options o = counting();
  kn_compiled *f = KN_COMPILE(training_fn, &o);
  kn_scope_begin();
  kn_tensor *a = filled(3, true), *b = filled(3, true);
  for (int i = 0; i < 3; i++) {
    kn_tensor *y = kn_call_t(f, a);
    expect_all(y, 7, "compiled output");
    expect_all(training_fn(b), 7, "eager output");
    expect_all(kn_grad(a), 2.0 * (i + 1), "compiled a.grad");
    expect_all(kn_grad(b), 2.0 * (i + 1), "eager a.grad");
  }
  /* one graph before the break; the segment after it has no op */
  cr_expect_eq(cc.frame_count, 1, "no recompile (%d graphs)", cc.frame_count);
  kn_scope_end();
  kn_compiled_free(f);
}

static void backward_logs_body(const kn_test_records *r, void *ud) {
  (void)ud;
  kn_reset();
  kn_compiled *f = KN_COMPILE(training_fn, NULL);
  kn_scope_begin();
  cr_assert(kn_call_t(f, filled(1, true)), "%s", kn_last_error());
  kn_scope_end();
  kn_compiled_free(f);
  cr_assert_eq(kn_test_count_artifact(r, "graph_breaks"), 1);
  const kn_test_record *br = kn_test_get_record(r, "Graph Break Reason");
  cr_assert(br);
  cr_expect(strstr(br->message, "Graph Break Reason: Unsupported Tensor.backward() call\n"),
            "%s", br->message);
  cr_expect(strstr(br->message, "kn_backward(kn_sum(out), NULL);"), "%s", br->message);
}

Test(dyn_autograd, backward_break_is_logged) {
  kn_log_setting s[] = {KN_LOG_FLAG("graph_breaks", 1)};
  kn_test_logging_twice(s, 1, backward_logs_body, NULL);
}

Test(dyn_autograd, backward_break_in_trace) {
  char *dir = kn_test_trace_start();
  kn_compiled *f = KN_COMPILE(training_fn, NULL);
  kn_scope_begin();
  cr_assert(kn_call_t(f, filled(1, true)), "%s", kn_last_error());
  kn_scope_end();
  kn_compiled_free(f);
  char *reason = kn_test_dyn_payload("dynamo_graph_break_reason", 0);
  cr_assert(reason);
  cr_expect(strstr(reason, "Unsupported Tensor.backward() call"), "%s", reason);
  /* the backward is not in any graph */
  char *text = kn_test_trace_text();
  cr_expect_null(strstr(text, "_tensor_constant"), "a constant was recorded: %s", text);
  cr_expect_null(strstr(text, "backward_ex"), "a backward call was recorded: %s", text);
  cr_expect_eq(kn_test_count_sub(text, "\"dynamo_start\""), 2);
  /* headers name the emitting source file and line (docs/TRACE_FORMAT.md) */
  cr_expect_null(strstr(text, " kiln:0] "), "%s", text);
  cr_expect(strstr(text, " src/dynamo/breaks.c:"), "%s", text);
  cr_expect(strstr(text, " src/dynamo/frame.c:"), "%s", text);
  free(reason);
  free(text);
  kn_trace_disable();
  kn_test_rmdir(dir);
}

/* kn_autograd_grad inside: the gradient is a value of the next graph. */
static kn_tensor *grad_fn(kn_tensor *a) {
  kn_tensor *y = kn_sum(kn_mul(a, a));
  kn_tensor *g = NULL;
  if (kn_autograd_grad(&y, 1, &a, 1, NULL, false, false, false, &g) != KN_OK) return NULL;
  return kn_add_scalar(g, kn_float(1));
}

Test(dyn_autograd, autograd_grad_inside) {
  kn_compile_options o = counting();
  kn_compiled *f = KN_COMPILE(grad_fn, &o);
  kn_scope_begin();
  for (int i = 1; i <= 3; i++) {
    kn_tensor *a = filled(i, true);
    expect_all(kn_call_t(f, a), 2.0 * i + 1, "2a + 1");
    cr_expect_null(kn_grad(a), "kn_autograd_grad does not touch .grad");
  }
  cr_expect_eq(cc.frame_count, 2);
  kn_scope_end();
  kn_compiled_free(f);
}

/* A branch added after the backward break: the cached run already did the
** backward; adding the branch must not do it again. */
static kn_tensor *backward_then_branch(kn_tensor *a, kn_tensor *flag) {
  kn_tensor *w = kn_full(KN_SHAPE(4, 4), kn_float(2), KN_FLOAT32);
  kn_backward(kn_sum(kn_mul(a, w)), NULL);
  if (kn_is_true(flag)) return kn_add_scalar(a, kn_float(1));
  return kn_add_scalar(a, kn_float(-1));
}

Test(dyn_autograd, new_branch_does_not_repeat_backward) {
  kn_compiled *f = KN_COMPILE(backward_then_branch, NULL);
  kn_scope_begin();
  kn_tensor *a = filled(3, true);
  kn_tensor *one = kn_scalar_tensor(kn_int(1), KN_INT64), *zero = kn_scalar_tensor(kn_int(0), KN_INT64);
  expect_all(kn_call_t(f, a, one), 4, "flag 1");
  expect_all(kn_grad(a), 2, "a.grad after one call");
  expect_all(kn_call_t(f, a, zero), 2, "flag 0 (new branch)");
  expect_all(kn_grad(a), 4, "a.grad after two calls");
  expect_all(kn_call_t(f, a, zero), 2, "flag 0 (cached)");
  expect_all(kn_grad(a), 6, "a.grad after three calls");
  kn_scope_end();
  kn_compiled_free(f);
}

/* ---- entry points that need data -------------------------------------------------- */
static kn_tensor *item_double_fn(kn_tensor *x) {
  double v = 0;
  if (kn_item_double(kn_sum(x), &v) != KN_OK) return NULL;
  return kn_mul_scalar(x, kn_float(v));
}

Test(dyn_autograd, item_double_is_a_break) {
  kn_compile_options o = counting();
  kn_compiled *f = KN_COMPILE(item_double_fn, &o);
  kn_scope_begin();
  expect_all(kn_call_t(f, filled(0.5, false)), 0.5 * 8, "x * sum(x)");
  expect_all(kn_call_t(f, filled(0.5, false)), 0.5 * 8, "cached");
  expect_all(kn_call_t(f, filled(0.25, false)), 0.25 * 4, "another answer");
  kn_scope_end();
  cr_expect_eq(cc.frame_count, 3, "a graph before the break, one per answer after it");
  kn_compiled_free(f);
}

static kn_tensor *print_tensor_fn(kn_tensor *x) {
  kn_tensor *s = kn_sum(x);
  if (kn_print_tensor(s, NULL) != KN_OK) return NULL;
  return kn_mul_scalar(x, kn_float(2));
}

static void call_print_twice(void *ud) {
  kn_compiled *f = ud;
  kn_scope_begin();
  cr_assert(kn_call_t(f, filled(1, false)), "%s", kn_last_error());
  cr_assert(kn_call_t(f, filled(2, false)), "%s", kn_last_error());
  kn_scope_end();
}

Test(dyn_autograd, print_tensor_prints_every_call) {
  kn_compiled *f = KN_COMPILE(print_tensor_fn, NULL);
  char *out = kn_test_capture_stdout(call_print_twice, f);
  cr_expect_str_eq(out, "tensor(16.)\ntensor(32.)\n");
  free(out);
  kn_compiled_free(f);
}

static kn_tensor *data_fn(kn_tensor *x) {
  float *p = kn_data(x);
  return p ? kn_mul_scalar(x, kn_float(p[0])) : kn_mul_scalar(x, kn_float(0));
}
static kn_tensor *get_fn(kn_tensor *x) {
  double v = kn_get(x, (int64_t[]){0, 0});
  return kn_mul_scalar(x, kn_float(isnan(v) ? 0 : v));
}
static kn_tensor *grad_read_fn(kn_tensor *x) {
  kn_tensor *g = kn_grad(x);
  return g ? kn_add(x, g) : kn_mul_scalar(x, kn_float(1));
}

static kn_tensor *detach_fn(kn_tensor *x) { return kn_detach(kn_mul_scalar(x, kn_float(2))); }
static kn_tensor *retain_grad_fn(kn_tensor *x) {
  kn_tensor *y = kn_mul_scalar(x, kn_float(2));
  kn_retain_grad(y);
  return y;
}

static void expect_refused(kn_compiled *f, const char *api, bool rg) {
  kn_scope_begin();
  kn_tensor *x = filled(3, rg);
  if (rg) kn_set_grad(x, filled(1, false));
  kn_tensor *y = kn_call_t(f, x);
  cr_expect_null(y, "%s on a traced tensor must fail the call", api);
  const char *e = kn_last_error();
  char want[128];
  snprintf(want, sizeof want, "%s at ", api);
  cr_expect(strstr(e, want), "%s", e);
  cr_expect(strstr(e, "test_dynamo_autograd.c:"), "names the call site: %s", e);
  cr_expect(strstr(e, "without data or gradients"), "%s", e);
  kn_scope_end();
}

Test(dyn_autograd, data_reads_fail_the_call) {
  kn_compiled *f = KN_COMPILE(data_fn, NULL);
  expect_refused(f, "kn_data", false);
  kn_compiled_free(f);
  f = KN_COMPILE(get_fn, NULL);
  expect_refused(f, "kn_get", false);
  kn_compiled_free(f);
  f = KN_COMPILE(grad_read_fn, NULL);
  expect_refused(f, "kn_grad", true);
  kn_compiled_free(f);
  f = KN_COMPILE(detach_fn, NULL);
  expect_refused(f, "kn_detach", true);
  kn_compiled_free(f);
  f = KN_COMPILE(retain_grad_fn, NULL);
  expect_refused(f, "kn_retain_grad", true);
  kn_compiled_free(f);
}

/* ---- requires_grad set on a value created inside ------------------------------------ */
static kn_tensor *set_rg_fn(kn_tensor *x) {
  kn_tensor *w = kn_full(KN_SHAPE(4, 4), kn_float(3), KN_FLOAT32);
  kn_set_requires_grad(w, true);
  return kn_mul(w, x);
}

/* The capture layer's replay (backend "eager"; through AOT the new leaf
** becomes an input: test_aot_guards.c, test_nn_parameter_construction). */
Test(dyn_autograd, set_requires_grad_inside_is_replayed) {
  kn_compile_options o = {.backend = "eager"};
  kn_compiled *f = KN_COMPILE(set_rg_fn, &o);
  kn_scope_begin();
  for (int i = 0; i < 3; i++) {
    kn_tensor *x = filled(1, false);
    kn_tensor *y = kn_call_t(f, x), *e = set_rg_fn(x);
    expect_all(y, 3, "w * x");
    cr_expect_eq(kn_requires_grad(y), kn_requires_grad(e), "call %d: requires_grad %d, eager %d",
                 i, kn_requires_grad(y), kn_requires_grad(e));
    cr_expect_str_eq(kn_grad_fn_name(y) ? kn_grad_fn_name(y) : "(none)", "MulBackward0");
  }
  kn_scope_end();
  kn_compiled_free(f);
}

/* ---- host reads ------------------------------------------------------------------------ */
typedef struct seen {
  int n;
  double v[8];
} seen;

static void on_loss(double v, void *ud) {
  seen *s = ud;
  if (s->n < 8) s->v[s->n] = v;
  s->n++;
}

static seen losses;
static kn_tensor *host_read_fn(kn_tensor *x) {
  kn_tensor *loss = kn_sum(kn_mul(x, x));
  kn_host_read(loss, on_loss, &losses);
  return kn_mul_scalar(x, kn_float(2));
}

static void host_read_body(const kn_test_records *r, void *ud) {
  (void)ud;
  kn_reset();
  memset(&losses, 0, sizeof losses);
  kn_compile_options o = counting();
  kn_compiled *f = KN_COMPILE(host_read_fn, &o);
  kn_scope_begin();
  for (int i = 1; i <= 5; i++) expect_all(kn_call_t(f, filled(i, false)), 2.0 * i, "2x");
  kn_scope_end();
  kn_compiled_free(f);
  cr_assert_eq(losses.n, 5, "the callback runs on every call");
  for (int i = 1; i <= 5; i++) cr_expect_float_eq(losses.v[i - 1], 16.0 * i * i, 1e-6);
  cr_expect_eq(cc.frame_count, 2, "no recompile per value");
  cr_expect_eq(kn_test_count_artifact(r, "recompiles"), 0);
}

Test(dyn_autograd, host_read_does_not_recompile) {
  kn_log_setting s[] = {KN_LOG_FLAG("recompiles", 1)};
  kn_test_logging_twice(s, 1, host_read_body, NULL);
}

/* kn_item for a value that changes: each new value is a new branch, and
** each is logged under `recompiles` with its reason. */
static kn_tensor *item_log_fn(kn_tensor *x) {
  double loss = kn_item(kn_sum(x));
  (void)loss;
  return kn_mul_scalar(x, kn_float(2));
}

static void item_recompiles_body(const kn_test_records *r, void *ud) {
  (void)ud;
  kn_reset();
  kn_compiled *f = KN_COMPILE(item_log_fn, NULL);
  kn_scope_begin();
  for (int i = 1; i <= 3; i++) cr_assert(kn_call_t(f, filled(i, false)), "%s", kn_last_error());
  kn_scope_end();
  kn_compiled_free(f);
  cr_assert_eq(kn_test_count_artifact(r, "recompiles"), 2);
  const kn_test_record *last = kn_test_get_record(r, "gave 48, recorded: 16, 32");
  cr_assert(last, "no record of the third call's branch");
  cr_expect(strstr(last->message, "Recompiling function item_log_fn in "), "%s", last->message);
  cr_expect(strstr(last->message, "    - a graph break answered differently (new branch): kn_item() "
                                  "at the end of 0/0 gave 48, recorded: 16, 32"),
            "%s", last->message);
  /* logged in the context of the compile it causes: the resume frame's third */
  cr_expect_str_eq(last->compile_id, "1/2");
}

Test(dyn_autograd, item_branches_are_logged_as_recompiles) {
  kn_log_setting s[] = {KN_LOG_FLAG("recompiles", 1)};
  kn_test_logging_twice(s, 1, item_recompiles_body, NULL);
}

/* The trace records why each branch was compiled: a recompile_reasons
** artifact in the resume frame's compiles 1/1 and 1/2 (what recompiles.html
** of kiln report shows for them). */
Test(dyn_autograd, item_branches_write_recompile_reasons) {
  kn_reset();
  char *dir = kn_test_trace_start();
  kn_compiled *f = KN_COMPILE(item_log_fn, NULL);
  kn_scope_begin();
  for (int i = 1; i <= 3; i++) cr_assert(kn_call_t(f, filled(i, false)), "%s", kn_last_error());
  kn_scope_end();
  kn_compiled_free(f);
  char *text = kn_test_trace_text();
  kn_trace_disable();
  int n = 0;
  for (const char *p = strstr(text, "\"name\": \"recompile_reasons\""); p;
       p = strstr(p + 1, "\"name\": \"recompile_reasons\""), n++) {
    const char *want = n == 0 ? "\"frame_id\": 1, \"frame_compile_id\": 1"
                              : "\"frame_id\": 1, \"frame_compile_id\": 2";
    const char *eol = strchr(p, '\n');
    cr_expect(eol && strstr(p, want) && strstr(p, want) < eol, "record %d: %.200s", n, p);
  }
  cr_expect_eq(n, 2);
  cr_expect(strstr(text, "kn_item() at the end of 0/0 gave 48, recorded: 16, 32"));
  free(text);
  kn_test_rmdir(dir);
}

/* ---- grad mode changed inside (seed test_mutation) ------------------------------------ */
static kn_tensor *mutation_fn(kn_tensor *param, kn_tensor *y) {
  bool prev = kn_set_grad_enabled(false);
  kn_add_(param, y);
  kn_set_grad_enabled(prev);
  return kn_mul_scalar(y, kn_float(1));
}

Test(dyn_autograd, grad_mode_change_inside_is_replayed) {
  kn_compile_options o = counting();
  kn_compiled *f = KN_COMPILE(mutation_fn, &o);
  kn_scope_begin();
  kn_tensor *x = filled(1, true), *y = filled(0.5, false);
  for (int i = 1; i <= 3; i++) {
    cr_assert(kn_call_t(f, x, y), "call %d: %s", i, kn_last_error());
    expect_all(x, 1 + 0.5 * i, "param after the in-place update");
    cr_expect(kn_is_leaf(x) && kn_requires_grad(x));
    cr_expect(kn_is_grad_enabled());
  }
  cr_expect_eq(cc.frame_count, 1, "no recompile (%d graphs)", cc.frame_count);
  kn_scope_end();
  kn_compiled_free(f);
}

/* An input that is a non-leaf (a clone of a tensor requiring grad): in-place
** ops on it work as they do eagerly, and gradients flow to the leaf. */
static kn_tensor *inplace_on_input(kn_tensor *a) {
  kn_mul_scalar_(a, kn_float(3));
  return kn_add_scalar(a, kn_float(1));
}

Test(dyn_autograd, non_leaf_input_traced_as_non_leaf) {
  kn_compiled *f = KN_COMPILE(inplace_on_input, NULL);
  kn_scope_begin();
  kn_tensor *leaf = filled(2, true), *leaf_e = filled(2, true);
  for (int i = 1; i <= 2; i++) {
    kn_tensor *y = kn_call_t(f, kn_clone(leaf));
    kn_tensor *e = inplace_on_input(kn_clone(leaf_e));
    expect_all(y, 7, "3a + 1");
    expect_all(e, 7, "eager 3a + 1");
    cr_assert_eq(kn_backward(kn_sum(y), NULL), KN_OK, "%s", kn_last_error());
    cr_assert_eq(kn_backward(kn_sum(e), NULL), KN_OK, "%s", kn_last_error());
    expect_all(kn_grad(leaf), 3.0 * i, "leaf.grad");
    expect_all(kn_grad(leaf_e), 3.0 * i, "eager leaf.grad");
  }
  kn_scope_end();
  kn_compiled_free(f);
}

/* Past the cache limit a new answer is not cached, but the call still does
** its backward once (it finishes from the break, not eagerly from the start). */
static kn_tensor *backward_then_item(kn_tensor *a, kn_tensor *s) {
  kn_tensor *w = kn_full(KN_SHAPE(4, 4), kn_float(2), KN_FLOAT32);
  kn_backward(kn_sum(kn_mul(a, w)), NULL);
  double k = kn_item(s);
  return kn_add_scalar(a, kn_float(k));
}

Test(dyn_autograd, backward_runs_once_past_the_cache_limit) {
  kn_compile_options o = {.cache_size_limit = 2};
  kn_compiled *f = KN_COMPILE(backward_then_item, &o);
  kn_scope_begin();
  kn_tensor *a = filled(1, true);
  for (int i = 1; i <= 5; i++) {
    kn_tensor *s = kn_scalar_tensor(kn_float(i), KN_FLOAT32);
    expect_all(kn_call_t(f, a, s), 1 + i, "a + s");
    expect_all(kn_grad(a), 2.0 * i, "a.grad");
  }
  kn_scope_end();
  kn_compiled_free(f);
}
