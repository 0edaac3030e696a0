/*
** test_inductor_trace.c: the structured trace of the seeds' test_example_fn
** and test_example_training_fn (test_structured_trace.py) under backend
** "inductor": every record, AOT's and the code generator's included, against
** the seed's literal sequence after the seed's normalization (STACK, HASH,
** METRICS, ID, VIEW_FUNC, FILENAME). What differs from the seed, and why,
** is listed in docs/SEEDS.md. Also: the joint-graph pass's before/after
** payloads, and inductor_output_code's filename / file_path; the seeds'
** test_schedule (its CPU records), test_inductor_error (a compile that fails
** inside inductor: its records and the WON'T CONVERT log) and test_logging's
** test_schedule / test_fusion (record counts of those logs).
*/
/* Keep the frames of functions that end in a tail call to a kiln op, so
** traced ops have their exact source lines (see docs/DYNAMO.md). */
#pragma GCC optimize("no-optimize-sibling-calls")
#include <criterion/criterion.h>
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "inductor_util.h"
#include "kiln/compile.h"
#include "kiln/kiln.h"
#include "kiln/trace.h"
#include "support/dynamo_util.h"
#include "support/log_capture.h"
#include "support/trace_util.h"

static char cache[64];
static char *tdir;
/* -O0: generated code compiles faster, with the same results */
static void setup(void) {
  kn_test_dynamo_setup();
  setenv("KILN_CFLAGS", "-O0 -fopenmp -ffp-contract=off", 1);
  ind_cache_dir(cache, sizeof cache);
  tdir = kn_test_trace_start();
}
static void teardown(void) {
  kn_trace_disable();
  kn_test_rmdir(tdir);
  ind_rm(cache);
  kn_test_dynamo_teardown();
}
TestSuite(inductor_trace, .init = setup, .fini = teardown, .timeout = 300);

#define CTX(f, c, a) "\"frame_id\": " #f ", \"frame_compile_id\": " #c ", \"attempt\": " #a
#define REC(ev, f, c, a) "{\"" ev "\": {}, " CTX(f, c, a) ", \"has_payload\": \"HASH\"}\n"
#define ART(name, enc, f, c, a)                                                          \
  "{\"artifact\": {\"name\": \"" name "\", \"encoding\": \"" enc "\"}, " CTX(f, c, a) \
  ", \"has_payload\": \"HASH\"}\n"
#define DESC(f, c, a, extra, src)                                                               \
  "{\"describe_storage\": {\"id\": 0, \"describer_id\": \"ID\", \"size\": 4000000}, " CTX(f, c, a) "}\n" \
  "{\"describe_tensor\": {\"id\": 0, \"ndim\": 2, \"dtype\": \"torch.float32\", \"device\": "       \
  "\"device(type='cpu')\", \"size\": [1000, 1000], \"dynamo_hint_overrides\": {}, " extra          \
  "\"stride\": [1000, 1], \"storage\": 0, \"view_func\": \"VIEW_FUNC\", \"describer_id\": \"ID\"}, " \
  CTX(f, c, a) "}\n"                                                                             \
  "{\"describe_source\": {\"describer_id\": \"ID\", \"id\": 0, \"source\": \"" src "\"}, " CTX(f, c, a) "}\n"
#define START(f, c, a) "{\"dynamo_start\": {\"stack\": \"STACK\"}, " CTX(f, c, a) "}\n"
#define METRICS(f, c, a) "{\"compilation_metrics\": \"METRICS\", " CTX(f, c, a) "}\n"
/* one graph through the code generator: from fx_graph_runnable to the cache artifact */
#define CODEGEN(f, c, a)                                                                    \
  ART("fx_graph_runnable", "string", f, c, a) ART("before_post_grad_graph", "string", f, c, a) \
  ART("inductor_post_grad_graph", "string", f, c, a)                                        \
  "{\"inductor_output_code\": {\"filename\": \"FILENAME\", \"file_path\": \"FILENAME\"}, "  \
  CTX(f, c, a) ", \"has_payload\": \"HASH\"}\n" ART("fx_graph_cache_miss", "json", f, c, a)

static kn_tensor *example_fn(kn_tensor *a) {
  kn_tensor *output = kn_name(kn_mul(a, kn_ones(KN_SHAPE(1000, 1000), KN_FLOAT32)), "output");
  output = kn_name(kn_add(output, kn_ones(KN_SHAPE(1000, 1000), KN_FLOAT32)), "output");
  return output;
}

static char *trace_now(void) {
  uint64_t defects = 99;
  char *got = kn_test_dyn_trace(false, &defects);
  cr_expect_eq(defects, 0, "strict reader defects: %llu", (unsigned long long)defects);
  return got;
}

/* The seed's sequence for an inference compile, record for record:
** before_joint_graph / after_joint_graph between the AOT config and
** fx_graph_runnable, inductor_output_code with filename and file_path. */
Test(inductor_trace, example_fn_records_are_the_seeds) {
  kn_compile_options o = {.backend = "inductor"};
  kn_compiled *f = KN_COMPILE(example_fn, &o);
  kn_scope_begin();
  kn_tensor *y = kn_call_t(f, kn_ones(KN_SHAPE(1000, 1000), KN_FLOAT32));
  cr_assert(y, "%s", kn_last_error());
  cr_expect_eq(kn_get(y, (int64_t[]){5, 7}), 2.0);
  kn_scope_end();
  char *got = trace_now();
  cr_expect_str_eq(got,
      START(0, 0, 0)
      DESC(0, 0, 0, "\"is_leaf\": true, ", "L['a']")
      "{\"dynamo_output_graph\": {\"sizes\": {\"l_a_\": [1000, 1000], \"ones\": [1000, 1000], "
      "\"output\": [1000, 1000], \"ones_1\": [1000, 1000], \"output_1\": [1000, 1000]}}, "
      CTX(0, 0, 0) ", \"has_payload\": \"HASH\"}\n"
      ART("before_pre_grad_graph", "string", 0, 0, 0)
      ART("after_pre_grad_graph", "string", 0, 0, 0)
      ART("aotautograd_cache_miss", "json", 0, 0, 0)
      ART("aot_forward_graph_fw_metadata", "string", 0, 0, 0)
      REC("aot_inference_graph", 0, 0, 0)
      ART("torch._functorch.config", "string", 0, 0, 0)
      ART("before_joint_graph", "string", 0, 0, 0)
      ART("after_joint_graph", "string", 0, 0, 0)
      CODEGEN(0, 0, 0)
      REC("dynamo_cpp_guards_str", 0, 0, 0)
      METRICS(0, 0, 0));
  free(got);
  kn_compiled_free(f);
}

/* The joint-graph pass on example_fn's inference graph: a * ones is a, so
** the graph inductor compiles is a + ones (PyTorch's remove_no_ops). */
Test(inductor_trace, joint_graph_pass_removes_the_multiply_by_ones) {
  kn_compile_options o = {.backend = "inductor"};
  kn_compiled *f = KN_COMPILE(example_fn, &o);
  kn_scope_begin();
  kn_generator *g = kn_generator_new(3);
  kn_tensor *a = kn_randn(KN_SHAPE(1000, 1000), g, KN_FLOAT32);
  kn_generator_free(g);
  kn_tensor *y = kn_call_t(f, a);
  cr_assert(y, "%s", kn_last_error());
  kn_tensor *want = example_fn(a);
  cr_expect(ind_close(y, want, 0, 0, "example_fn"), "compiled differs from eager");
  kn_scope_end();
  char *before = kn_test_dyn_payload("before_joint_graph", 0);
  char *after = kn_test_dyn_payload("after_joint_graph", 0);
  cr_assert(before && after);
  cr_expect(strstr(before, " = kiln.ops.mul(primals_1, full);"), "%s", before);
  cr_expect(strstr(before, " = kiln.ops.add(mul, full);"), "%s", before);
  cr_expect_str_eq(after,
      "class GraphModule(torch.nn.Module):\n"
      "    def forward(self, primals_1: \"f32[1000, 1000][1000, 1]cpu\"):\n"
      "        full: \"f32[1000, 1000][1000, 1]cpu\" = kiln.ops.full([1000, 1000], 1, dtype = kiln.float32)\n"
      "        add: \"f32[1000, 1000][1000, 1]cpu\" = kiln.ops.add(primals_1, full);  primals_1 = full = None\n"
      "        return (add,)\n"
      "        ");
  /* the graph inductor compiled is the one after the pass */
  char *post = kn_test_dyn_payload("inductor_post_grad_graph", 0);
  cr_expect(post && !strstr(post, "kiln.ops.mul"), "%s", post);
  free(post);
  free(before);
  free(after);
  kn_compiled_free(f);
}

/* file_path is the absolute path of the source file, as os.path.abspath
** makes it ("x/.." dropped): KILN_CACHE_DIR here has a "sub/.." segment (a
** relative KILN_CACHE_DIR is refused by the trust rules). */
Test(inductor_trace, output_code_file_path_is_absolute) {
  char *real = realpath(cache, NULL);
  cr_assert(real);
  char dir[4096], sub[4200];
  snprintf(sub, sizeof sub, "%s/sub", real);
  cr_assert_eq(mkdir(sub, 0700), 0);
  snprintf(dir, sizeof dir, "%s/sub/../rel", real);
  setenv("KILN_CACHE_DIR", dir, 1);
  kn_compile_options o = {.backend = "inductor"};
  kn_compiled *f = KN_COMPILE(example_fn, &o);
  kn_scope_begin();
  cr_assert(kn_call_t(f, kn_ones(KN_SHAPE(1000, 1000), KN_FLOAT32)), "%s", kn_last_error());
  kn_scope_end();
  char *md = kn_test_dyn_metadata("inductor_output_code", 0);
  cr_assert(md);
  json_t *j = json_loads(md, 0, NULL);
  const char *fn = json_string_value(json_object_get(j, "filename"));
  const char *fp = json_string_value(json_object_get(j, "file_path"));
  cr_assert(fn && fp, "%s", md);
  const char *base = strrchr(fn, '/');
  cr_assert(base, "%s", fn);
  char want[4400];
  snprintf(want, sizeof want, "%s/rel/inductor%s", real, base);
  cr_expect_str_eq(fp, want);
  cr_expect_eq(access(fp, R_OK), 0, "%s is not the source file", fp);
  free(real);
  json_decref(j);
  free(md);
  kn_compiled_free(f);
}

/* The seed's example_training_fn, its two graph breaks written as kiln
** writes them (see test_dynamo_trace.c). */
static kn_tensor *example_training_fn(kn_tensor *a) {
  kn_graph_break();
  kn_tensor *output = kn_name(kn_mul(a, kn_ones(KN_SHAPE(1000, 1000), KN_FLOAT32)), "output");
  output = kn_name(kn_add(output, kn_ones(KN_SHAPE(1000, 1000), KN_FLOAT32)), "output");
  kn_tensor *s = kn_sum(output);
  kn_graph_break();
  (void)s;
  return output;
}

/* The seed's sequence for the training function, record for record, with
** the differences docs/SEEDS.md lists: frames 0, 1, 2 here are the seed's
** 0, 2, 4 (kiln creates the leaf with the inputs, so the seed's frames 1 and
** 3 do not exist); the backward graph is compiled right after the forward
** (no bwd_compilation_metrics); the resume segment that only returns
** `output` describes it (as L['___stack0']: C locals have no names) and
** writes no guards, as the seed's frame 4. */
Test(inductor_trace, example_training_fn_records_are_the_seeds) {
  kn_compile_options o = {.backend = "inductor"};
  kn_compiled *f = KN_COMPILE(example_training_fn, &o);
  kn_scope_begin();
  kn_tensor *a = kn_ones(KN_SHAPE(1000, 1000), KN_FLOAT32);
  cr_assert_eq(kn_set_requires_grad(a, true), KN_OK);
  kn_tensor *y = kn_call_t(f, a);
  cr_assert(y, "%s", kn_last_error());
  cr_expect_eq(kn_get(y, (int64_t[]){3, 3}), 2.0);
  cr_expect_str_eq(kn_grad_fn_name(y), "CompiledFunctionBackward");
  kn_scope_end();
  char *got = trace_now();
  cr_expect_str_eq(got,
      START(0, 0, 0)
      DESC(0, 0, 0, "\"is_leaf\": true, \"requires_grad\": true, ", "L['a']")
      ART("dynamo_graph_break_reason", "string", 0, 0, 0)
      DESC(0, 0, 1, "\"is_leaf\": true, \"requires_grad\": true, ", "L['a']")
      REC("dynamo_cpp_guards_str", 0, 0, 1)
      METRICS(0, 0, 1)
      START(1, 0, 0)
      DESC(1, 0, 0, "\"is_leaf\": true, \"requires_grad\": true, ", "L['___stack0']")
      ART("dynamo_graph_break_reason", "string", 1, 0, 0)
      DESC(1, 0, 1, "\"is_leaf\": true, \"requires_grad\": true, ", "L['___stack0']")
      "{\"dynamo_output_graph\": {\"sizes\": {\"l_stack0_\": [1000, 1000], \"ones\": [1000, 1000], "
      "\"output\": [1000, 1000], \"ones_1\": [1000, 1000], \"output_1\": [1000, 1000], \"sum_1\": []}}, "
      CTX(1, 0, 1) ", \"has_payload\": \"HASH\"}\n"
      ART("before_pre_grad_graph", "string", 1, 0, 1)
      ART("after_pre_grad_graph", "string", 1, 0, 1)
      ART("aotautograd_cache_miss", "json", 1, 0, 1)
      REC("aot_joint_graph", 1, 0, 1)
      ART("torch._functorch.config", "string", 1, 0, 1)
      ART("aot_forward_graph_fw_metadata", "string", 1, 0, 1)
      REC("aot_forward_graph", 1, 0, 1)
      REC("aot_backward_graph", 1, 0, 1)
      CODEGEN(1, 0, 1)
      CODEGEN(1, 0, 1)
      REC("dynamo_cpp_guards_str", 1, 0, 1)
      METRICS(1, 0, 1)
      START(2, 0, 0)
      DESC(2, 0, 0, "\"requires_grad\": true, ", "L['___stack0']")
      METRICS(2, 0, 0));
  free(got);
  kn_compiled_free(f);
}

/* ---- the seeds' test_schedule, test_inductor_error, test_fusion ---------------------- */

static kn_tensor *inductor_schedule_fn(kn_tensor *a) {
  kn_tensor *output = kn_name(kn_add(a, kn_ones(KN_SHAPE(1000, 1000), KN_FLOAT32)), "output");
  return output;
}

/* test_structured_trace's test_schedule on the CPU: the seed's sequence
** without its GPU records (triton_kernel_info, compilation_metrics_runtime:
** issue #25). */
Test(inductor_trace, schedule_fn_records_on_cpu) {
  kn_compile_options o = {.backend = "inductor"};
  kn_compiled *f = KN_COMPILE(inductor_schedule_fn, &o);
  kn_scope_begin();
  kn_tensor *y = kn_call_t(f, kn_ones(KN_SHAPE(1000, 1000), KN_FLOAT32));
  cr_assert(y, "%s", kn_last_error());
  cr_expect_eq(kn_get(y, (int64_t[]){999, 0}), 2.0);
  kn_scope_end();
  char *got = trace_now();
  cr_expect_str_eq(got,
      START(0, 0, 0)
      DESC(0, 0, 0, "\"is_leaf\": true, ", "L['a']")
      "{\"dynamo_output_graph\": {\"sizes\": {\"l_a_\": [1000, 1000], \"ones\": [1000, 1000], "
      "\"output\": [1000, 1000]}}, " CTX(0, 0, 0) ", \"has_payload\": \"HASH\"}\n"
      ART("before_pre_grad_graph", "string", 0, 0, 0)
      ART("after_pre_grad_graph", "string", 0, 0, 0)
      ART("aotautograd_cache_miss", "json", 0, 0, 0)
      ART("aot_forward_graph_fw_metadata", "string", 0, 0, 0)
      REC("aot_inference_graph", 0, 0, 0)
      ART("torch._functorch.config", "string", 0, 0, 0)
      ART("before_joint_graph", "string", 0, 0, 0)
      ART("after_joint_graph", "string", 0, 0, 0)
      CODEGEN(0, 0, 0)
      REC("dynamo_cpp_guards_str", 0, 0, 0)
      METRICS(0, 0, 0));
  free(got);
  kn_compiled_free(f);
}

static kn_tensor *inductor_error_fn(kn_tensor *a) {
  kn_tensor *output = kn_name(kn_round(a), "output");
  return output;
}

/* Compile inductor_error_fn on a leaf that requires grad with a C compiler
** that fails (`false`): an error inside inductor, as the seed's patched
** round lowering. The call fails with BackendCompilerFailed. */
static void compile_failing(bool suppress) {
  setenv("KILN_CC", "false", 1);
  kn_compile_options o = {.backend = "inductor", .suppress_errors = suppress};
  kn_compiled *f = KN_COMPILE(inductor_error_fn, &o);
  kn_scope_begin();
  kn_tensor *a = kn_ones(KN_SHAPE(1000, 1000), KN_FLOAT32);
  cr_assert_eq(kn_set_requires_grad(a, true), KN_OK);
  kn_tensor *y = kn_call_t(f, a);
  if (suppress) {
    cr_expect(y, "suppress_errors: runs eagerly (%s)", kn_last_error());
  } else {
    cr_expect_null(y);
    cr_expect(strstr(kn_last_error(), "BackendCompilerFailed: backend='inductor' raised:\n"
                                      "inductor: the C compiler 'false' failed (exit status 1)"),
              "%s", kn_last_error());
  }
  kn_scope_end();
  kn_compiled_free(f);
  unsetenv("KILN_CC");
}

/* test_structured_trace's test_inductor_error: the seed's records up to
** inductor_post_grad_graph, then dynamo_error and the metrics. The seed's
** error is in a lowering, before any code exists; kiln's is the C
** compiler's, so the output code and the cache miss come first. */
Test(inductor_trace, inductor_error_records) {
  compile_failing(false);
  char *got = trace_now();
  cr_expect_str_eq(got,
      START(0, 0, 0)
      DESC(0, 0, 0, "\"is_leaf\": true, \"requires_grad\": true, ", "L['a']")
      "{\"dynamo_output_graph\": {\"sizes\": {\"l_a_\": [1000, 1000], \"output\": [1000, 1000]}}, "
      CTX(0, 0, 0) ", \"has_payload\": \"HASH\"}\n"
      ART("before_pre_grad_graph", "string", 0, 0, 0)
      ART("after_pre_grad_graph", "string", 0, 0, 0)
      ART("aotautograd_cache_miss", "json", 0, 0, 0)
      REC("aot_joint_graph", 0, 0, 0)
      ART("torch._functorch.config", "string", 0, 0, 0)
      ART("aot_forward_graph_fw_metadata", "string", 0, 0, 0)
      REC("aot_forward_graph", 0, 0, 0)
      REC("aot_backward_graph", 0, 0, 0)
      CODEGEN(0, 0, 0)
      ART("dynamo_error", "string", 0, 0, 0)
      METRICS(0, 0, 0));
  free(got);
  char *err = kn_test_dyn_payload("dynamo_error", 0);
  cr_expect(err && strstr(err, "kiln.BackendCompilerFailed: backend='inductor' raised:\n"
                               "inductor: the C compiler 'false' failed (exit status 1)"), "%s", err);
  free(err);
}

/* test_logging's test_inductor_error: the WON'T CONVERT record names the
** function and its line, then the backend's failure. */
static void wont_convert_body(const kn_test_records *r, void *ud) {
  (void)ud;
  compile_failing(true);
  const kn_test_record *rec = kn_test_get_record(r, "WON'T CONVERT");
  cr_assert(rec, "expected one WON'T CONVERT record");
  char want[400];
  snprintf(want, sizeof want, "WON'T CONVERT inductor_error_fn %s line ", __FILE__);
  cr_expect(!strncmp(rec->message, want, strlen(want)), "%s", rec->message);
  cr_expect(strstr(rec->message, " \ndue to: \nTraceback (most recent call last):\n"
                                 "kiln.BackendCompilerFailed: backend='inductor' raised:\n"
                                 "inductor: the C compiler 'false' failed (exit status 1):"),
            "%s", rec->message);
}

Test(inductor_trace, inductor_error_wont_convert) {
  kn_test_logging_twice(NULL, 0, wont_convert_body, NULL);
}

/* test_logging's test_schedule and test_fusion on the CPU: a few records
** each (the seed: 0 < n < 5 and 0 < n < 8). */
static void sched_body(const kn_test_records *r, void *ud) {
  const char *art = ud;
  kn_compile_options o = {.backend = "inductor"};
  kn_compiled *f = KN_COMPILE(inductor_schedule_fn, &o);
  kn_scope_begin();
  cr_assert(kn_call_t(f, kn_ones(KN_SHAPE(1000, 1000), KN_FLOAT32)), "%s", kn_last_error());
  kn_scope_end();
  kn_compiled_free(f);
  size_t n = kn_test_count_artifact(r, art);
  cr_expect_gt(n, 0, "%s records: %zu", art, n);
  cr_expect_lt(n, !strcmp(art, "schedule") ? 5u : 8u, "%s records: %zu", art, n);
  cr_expect_eq(r->n, n, "only %s records (%zu of %zu)", art, n, r->n);
}

Test(inductor_trace, schedule_log) {
  kn_log_setting s[] = {KN_LOG_FLAG("schedule", 1)};
  kn_test_logging_twice(s, 1, sched_body, (void *)(uintptr_t)"schedule");
}

Test(inductor_trace, fusion_log) {
  kn_log_setting s[] = {KN_LOG_FLAG("fusion", 1)};
  kn_test_logging_twice(s, 1, sched_body, (void *)(uintptr_t)"fusion");
}
