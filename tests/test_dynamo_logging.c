/*
** test_dynamo_logging.c: the capture frontend's log records, ported from the
** logging seed test_logging.py: record counts per artifact, WON'T CONVERT,
** the default logging preset, INFO progress lines, compile times.
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

static int64_t live0;
static void setup(void) {
  kn_reset();
  kn_test_log_clean();
  live0 = kn_live_tensors();
}
static void teardown(void) {
  kn_reset();
  kn_test_log_clean();
  cr_expect_eq(kn_live_tensors(), live0, "leaked tensors: %lld",
               (long long)(kn_live_tensors() - live0));
}
/* The capture layer's own traces/records: the interpreter backend, so no
** AOT or code-generator events mix in. */
static const kn_compile_options eager = {.backend = "eager"};

TestSuite(dynamo_logging, .init = setup, .fini = teardown);

static kn_tensor *example_fn(kn_tensor *a) {
  kn_tensor *output = kn_name(kn_mul(a, kn_ones(KN_SHAPE(1000, 1000), KN_FLOAT32)), "output");
  output = kn_name(kn_add(output, kn_ones(KN_SHAPE(1000, 1000), KN_FLOAT32)), "output");
  return output;
}

static kn_tensor *dynamo_error_fn(kn_tensor *a) {
  kn_tensor *output = kn_name(kn_mul(a, kn_ones(KN_SHAPE(1000, 1000), KN_FLOAT32)), "output");
  output = kn_name(kn_add(output, kn_ones(KN_SHAPE(10, 10), KN_FLOAT32)), "output");
  return output;
}

static void run_example(kn_tensor *(*fn)(kn_tensor *), const char *name, bool suppress) {
  kn_compile_options o = {.backend = "eager", .suppress_errors = suppress};
  kn_compiled *f = kn_compile_tensor_fn((void (*)(void))fn, 1, name, __FILE__, __LINE__, &o);
  kn_scope_begin();
  kn_tensor *a = kn_ones(KN_SHAPE(1000, 1000), KN_FLOAT32);
  kn_set_requires_grad(a, true);
  (void)kn_call_t(f, a);
  kn_scope_end();
  kn_compiled_free(f);
}

static void wont_convert_body(const kn_test_records *r, void *ud) {
  (void)ud;
  kn_reset();
  run_example(dynamo_error_fn, "dynamo_error_fn", true);
  const kn_test_record *rec = kn_test_get_record(r, "WON'T CONVERT");
  cr_assert(rec, "expected one WON'T CONVERT record");
  const char *m = rec->message;
  const char *want = "WON'T CONVERT dynamo_error_fn " __FILE__ " line ";
  cr_expect(!strncmp(m, want, strlen(want)), "%s", m);
  cr_expect(strstr(m, " \ndue to: \nTraceback (most recent call last):\n"
                      "kiln.shape_error: Failed running call_function"), "%s", m);
  cr_expect(strstr(m, "Failed running call_function kiln.ops.add(*(FakeTensor(..., size=(1000, 1000), "
                      "grad_fn=<MulBackward0>), FakeTensor(..., size=(10, 10))), **{}):\n"),
            "%s", m);
  cr_expect(strstr(m, "\n\nfrom user code:\n   File \"" __FILE__ "\", line "), "%s", m);
  cr_expect(strstr(m, ", in dynamo_error_fn\n    output = kn_name(kn_add(output, kn_ones(KN_SHAPE(10, 10), KN_FLOAT32)), \"output\");"), "%s", m);
  cr_expect_eq(rec->level, KN_WARNING);
}

Test(dynamo_logging, dynamo_error_wont_convert) {
  kn_test_logging_twice(NULL, 0, wont_convert_body, NULL);
}

static void recompiles_body(const kn_test_records *r, void *ud) {
  (void)ud;
  kn_reset();
  kn_compiled *f = KN_COMPILE(example_fn, &eager);
  kn_scope_begin();
  cr_assert(kn_call_t(f, kn_ones(KN_SHAPE(1000, 1000), KN_FLOAT32)));
  cr_assert(kn_call_t(f, kn_ones(KN_SHAPE(1000, 1000), KN_FLOAT64)));
  kn_scope_end();
  kn_compiled_free(f);
  cr_expect_eq(kn_test_count_artifact(r, "recompiles"), 1);
  const kn_test_record *rec = kn_test_get_record(r, "Recompiling function example_fn");
  cr_assert(rec);
  cr_expect(strstr(rec->message, "\n    triggered by the following guard failure(s):\n"
                                 "    - tensor 'L['a']' dtype mismatch. expected Float, actual Double"),
            "%s", rec->message);
  cr_expect_str_eq(rec->compile_id, "0/1");
}

Test(dynamo_logging, recompiles) {
  kn_log_setting s[] = {KN_LOG_FLAG("recompiles", 1)};
  kn_test_logging_twice(s, 1, recompiles_body, NULL);
}

static void info_body(const kn_test_records *r, void *ud) {
  (void)ud;
  kn_reset();
  run_example(example_fn, "example_fn", false);
  cr_expect(r->n >= 2 && r->n <= 10, "%zu records", r->n);
  cr_expect(kn_test_get_record(r, "Step 1: dynamo start tracing example_fn "));
  cr_expect(kn_test_get_record(r, "Step 1: dynamo done tracing example_fn (return)"));
  cr_expect(kn_test_get_record(r, "Step 2: calling compiler function eager"));
  cr_expect(kn_test_get_record(r, "Step 2: done compiler function eager"));
}

Test(dynamo_logging, dynamo_info) {
  kn_log_setting s[] = {KN_LOG_LEVEL("dynamo", KN_INFO)};
  kn_test_logging_twice(s, 1, info_body, NULL);
}

/* The progress lines speak kiln's words: no Python bytecode or module names. */
static void debug_body(const kn_test_records *r, void *ud) {
  (void)ud;
  kn_reset();
  run_example(example_fn, "example_fn", false);
  cr_expect(kn_test_get_record(r, "dynamo start compiling example_fn "));
  for (size_t i = 0; i < r->n; i++)
    cr_expect(!strstr(r->v[i].message, "torchdynamo") && !strstr(r->v[i].message, "RETURN_VALUE"),
              "%s", r->v[i].message);
}

Test(dynamo_logging, dynamo_debug_words) {
  kn_log_setting s[] = {KN_LOG_LEVEL("dynamo", KN_DEBUG)};
  kn_test_logging_twice(s, 1, debug_body, NULL);
}

static void graph_body(const kn_test_records *r, void *ud) {
  (void)ud;
  kn_reset();
  run_example(example_fn, "example_fn", false);
  cr_assert_eq(kn_test_count_artifact(r, "graph_code"), 1);
  cr_assert_eq(kn_test_count_artifact(r, "graph_sizes"), 1);
  cr_assert_eq(kn_test_count_artifact(r, "graph"), 1);
  const kn_test_record *code = kn_test_get_record(r, "class GraphModule");
  cr_assert(code);
  const char *want = "TRACED GRAPH\n ===== __compiled_fn_1 ===== " __FILE__
                     " class GraphModule(torch.nn.Module):\n";
  cr_expect(!strncmp(code->message, want, strlen(want)), "%s", code->message);
  const kn_test_record *sz = kn_test_get_record(r, "TRACED GRAPH TENSOR SIZES");
  cr_assert(sz);
  cr_expect(strstr(sz->message, "output_1: (1000, 1000)"), "%s", sz->message);
  static const char head[] = "TRACED GRAPH TENSOR SIZES\n===== __compiled_fn_";
  cr_expect(!strncmp(sz->message, head, strlen(head)) &&
                strstr(sz->message, " =====\nl_a_: (1000, 1000)\n") &&
                !strstr(sz->message, "===== ====="),
            "%s", sz->message);
}

Test(dynamo_logging, graph_artifacts) {
  kn_log_setting s[] = {KN_LOG_FLAG("graph_code", 1), KN_LOG_FLAG("graph_sizes", 1),
                        KN_LOG_FLAG("graph", 1)};
  kn_test_logging_twice(s, 3, graph_body, NULL);
}

static kn_tensor *default_fn(kn_tensor *a) {
  if (kn_is_true(kn_lt_scalar(kn_sum(a), kn_int(0)))) {
    a = kn_sin(a);
  } else {
    a = kn_cos(a);
  }
  kn_print(a);
  kn_tensor *r = kn_add_scalar(a, kn_int(1));
  return r;
}

static void call_default(void *ud) {
  kn_compiled *f = ud;
  kn_scope_begin();
  cr_assert(kn_call_t(f, kn_ones(KN_SHAPE(10, 10), KN_FLOAT32)), "%s", kn_last_error());
  cr_assert(kn_call_t(f, kn_neg(kn_ones(KN_SHAPE(10, 5), KN_FLOAT32))), "%s", kn_last_error());
  kn_scope_end();
}

static void default_body(const kn_test_records *r, void *ud) {
  (void)ud;
  kn_reset();
  kn_compiled *f = KN_COMPILE(default_fn, &eager);
  free(kn_test_capture_stdout(call_default, f));
  kn_compiled_free(f);
  cr_expect_gt(kn_test_count_artifact(r, "graph_breaks"), 0);
  cr_expect_gt(kn_test_count_artifact(r, "recompiles"), 0);
  cr_expect_gt(kn_test_count_name(r, "symbolic_shapes"), 0);
  cr_expect_gt(kn_test_count_artifact(r, "guards"), 0);
  size_t found = 0;
  for (size_t i = 0; i < r->n; i++)
    if (strstr(r->v[i].message, "kn_tensor *r = kn_add_scalar(a, kn_int(1));")) found++;
  cr_expect_gt(found, 0);
}

Test(dynamo_logging, default_logging) {
  kn_log_setting s[] = {KN_LOG_DEFAULT_LOGGING};
  kn_test_logging_twice(s, sizeof s / sizeof s[0], default_body, NULL);
}

Test(dynamo_logging, compile_times) {
  run_example(example_fn, "example_fn", false);
  char *t = kn_compile_times(true);
  cr_assert(t);
  cr_expect(strstr(t, "_compile.compile_inner"), "%s", t);
  cr_expect(strstr(t, "OutputGraph.call_user_compiler"), "%s", t);
  free(t);
}

static void dump_body(const kn_test_records *r, void *ud) {
  (void)ud;
  kn_reset();
  run_example(example_fn, "example_fn", false);
  kn_dump_compile_times();
  size_t n = 0;
  for (size_t i = 0; i < r->n; i++)
    if (strstr(r->v[i].message, "compilation metrics")) n++;
  cr_expect_eq(n, 1);
}

Test(dynamo_logging, dump_compile_times) {
  kn_log_setting s[] = {KN_LOG_LEVEL("kiln.dynamo.utils", KN_INFO)};
  kn_test_logging_twice(s, 1, dump_body, NULL);
}
