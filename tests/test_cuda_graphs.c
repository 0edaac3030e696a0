/*
** test_cuda_graphs.c: mode "reduce-overhead" (CUDA graphs) and compiled
** CUDA programs end to end, without a GPU: the fake NVRTC
** (tests/support/fakenvrtc.c) hands the CUDA source to the fake driver
** (tests/support/fakecuda.c, fakecuda_exec.c), which builds it for the host
** with g++ and the shim, runs its kernels on the host, records captured
** launches and replays them. The fake's counters (fakecuda_exec_counters:
** kernels run through cuLaunchKernel, graph launches, kernels replayed by
** graphs) are the independent record of what reached the driver, and every
** result is compared with eager kiln on the CPU.
*/
#pragma GCC optimize("no-optimize-sibling-calls")
#include <criterion/criterion.h>
#include <dlfcn.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "inductor_util.h"
#include "kiln/compile.h"
#include "kiln/kiln.h"
#include "kiln/nn.h"
#include "kiln/optim.h"
#include "kiln/trace.h"
#include "logging/log.h"
#include "tensor/tensor.h"
#include "support/dynamo_util.h"
#include "support/log_capture.h"
#include "support/ten_ops.h"
#include "support/trace_util.h"

static char cache[64];
static char *tdir;

static void setup(void) {
  setenv("KILN_CUDA_DRIVER", KN_FAKECUDA_PATH, 1);
  setenv("KILN_CUDA_NVRTC", KN_FAKENVRTC_PATH, 1);
  kn_test_dynamo_setup();
  ind_cache_dir(cache, sizeof cache);
  tdir = NULL;
}

static void teardown(void) {
  if (tdir) {
    kn_trace_disable();
    kn_test_rmdir(tdir);
  }
  ind_rm(cache);
  kn_test_dynamo_teardown();
}

TestSuite(cudagraphs, .init = setup, .fini = teardown, .timeout = 300);

/* ---- helpers ------------------------------------------------------------------------ */

typedef struct counts {
  long kernels, graphs, replayed;
} counts;

static counts fake_counts(void) {
  cr_assert(kn_cuda_is_available(), "%s", kn_last_error());
  void *lib = dlopen(KN_FAKECUDA_PATH, RTLD_NOW | RTLD_NOLOAD);
  cr_assert_not_null(lib, "the fake driver is loaded");
  int (*fn)(long *, long *, long *) =
      (int (*)(long *, long *, long *))(uintptr_t)dlsym(lib, "fakecuda_exec_counters");
  cr_assert_not_null(fn);
  counts c;
  fn(&c.kernels, &c.graphs, &c.replayed);
  dlclose(lib);
  return c;
}

static kn_tensor *to_dev(kn_tensor *t, kn_device d) {
  kn_tensor *o = NULL;
  cr_assert_eq(kn_to_device(t, d, &o), KN_OK, "%s", kn_last_error());
  return o;
}

/* Inputs with values depending on seed. */
static kn_tensor *input(int64_t r, int64_t c, double seed) {
  kn_tensor *t = kn_arange_dtype(kn_float(0), kn_float((double)(r * c)), kn_float(1), KN_FLOAT32);
  t = kn_reshape(t, 2, (int64_t[]){r, c});
  return kn_add_scalar(kn_mul_scalar(kn_sin(t), kn_float(seed)), kn_float(seed / 4));
}


/* f(a, b) on the device equals eager on the CPU. */
static void expect_eager(kn_tensor *got_dev, kn_tensor *a, kn_tensor *b, const char *what) {
  kn_tensor *want = ten_ops(a, b), *got = to_dev(got_dev, KN_CPU);
  cr_assert_eq(kn_numel(got), kn_numel(want), "%s", what);
  const float *g = kn_data(got), *w = kn_data(kn_contiguous(want));
  for (int64_t i = 0; i < kn_numel(got); i++)
    cr_assert(fabsf(g[i] - w[i]) <= 1e-5f + 1e-5f * fabsf(w[i]), "%s: element %lld: %g, eager %g",
              what, (long long)i, g[i], w[i]);
}

/* One call of f on CPU inputs a, b copied to the device. */
static kn_tensor *call_dev(kn_compiled *f, kn_tensor *a, kn_tensor *b) {
  kn_tensor *y = kn_call_t(f, to_dev(a, KN_CUDA), to_dev(b, KN_CUDA));
  cr_assert_not_null(y, "%s", kn_last_error());
  cr_expect_eq(kn_tensor_device(y), KN_CUDA);
  return y;
}

static kn_compiled *compile_ten(const char *mode) {
  kn_compile_options o = {.backend = "inductor", .mode = mode};
  kn_compiled *f = KN_COMPILE(ten_ops, &o);
  cr_assert_not_null(f, "%s", kn_last_error());
  return f;
}

/* ---- the mode option ------------------------------------------------------------------ */

Test(cudagraphs, an_unknown_mode_is_refused_naming_the_modes) {
  kn_compile_options o = {.backend = "inductor", .mode = "reduce_overhead"};
  kn_compiled *f = KN_COMPILE(ten_ops, &o);
  cr_expect_null(f);
  cr_expect_str_eq(kn_last_error(), "kn_compile: Unrecognized mode=reduce_overhead, should be one "
                                    "of: default, reduce-overhead");
}

/* ---- compiled CUDA programs on the fake ------------------------------------------------ */

/* mode default: every call runs the program's launches (no graph). */
Test(cudagraphs, default_mode_launches_each_call) {
  kn_compiled *f = compile_ten(NULL);
  kn_scope_begin();
  long per_call = -1;
  counts c0 = fake_counts();
  for (int k = 0; k < 3; k++) {
    kn_tensor *a = input(4, 8, 1.0 + k), *b = input(4, 8, -0.5 - k);
    counts before = fake_counts();
    expect_eager(call_dev(f, a, b), a, b, "default mode");
    long n = fake_counts().kernels - before.kernels;
    cr_expect(n > 0 && (per_call < 0 || n == per_call), "call %d launched %ld kernels", k, n);
    per_call = n;
  }
  cr_expect_eq(fake_counts().graphs, c0.graphs, "no graph in mode default");
  kn_scope_end();
  kn_compiled_free(f);
}

/* The flat float32 kernels' float4 path runs when the count is a multiple
** of 4 and every buffer is 16-byte aligned; the scalar loop otherwise: a
** count of 15, and inputs starting one element into their storage. */
Test(cudagraphs, float4_and_scalar_paths_agree_with_eager) {
  kn_compiled *f = compile_ten(NULL);
  kn_scope_begin();
  kn_tensor *a = input(3, 5, 1.5), *b = input(3, 5, -2.0);
  expect_eager(call_dev(f, a, b), a, b, "15 elements");
  kn_tensor *a2 = input(1, 33, 0.7), *b2 = input(1, 33, 1.1);
  kn_tensor *da = kn_narrow(to_dev(a2, KN_CUDA), 1, 1, 32);
  kn_tensor *db = kn_narrow(to_dev(b2, KN_CUDA), 1, 1, 32);
  kn_tensor *y = kn_call_t(f, da, db);
  cr_assert_not_null(y, "%s", kn_last_error());
  expect_eager(y, kn_narrow(a2, 1, 1, 32), kn_narrow(b2, 1, 1, 32), "inputs at offset 1");
  kn_tensor *a3 = input(8, 8, 0.3), *b3 = input(8, 8, 0.9);
  expect_eager(call_dev(f, a3, b3), a3, b3, "64 aligned elements");
  kn_scope_end();
  kn_compiled_free(f);
}

/* reduce-overhead: call 1 warms up (the program launches), call 2 records
** (the capture launches nothing; the graph's replay computes the result),
** later calls replay: the host launch path never runs again. */
Test(cudagraphs, warm_up_record_then_replay_without_host_launches) {
  kn_compiled *f = compile_ten("reduce-overhead");
  kn_scope_begin();
  counts c0 = fake_counts();
  kn_tensor *a = input(4, 8, 1.0), *b = input(4, 8, 2.0);
  expect_eager(call_dev(f, a, b), a, b, "warm-up");
  counts c1 = fake_counts();
  long per_call = c1.kernels - c0.kernels;
  cr_expect_gt(per_call, 0, "the warm-up runs the program");
  cr_expect_eq(c1.graphs, c0.graphs, "no graph yet");
  for (int k = 0; k < 4; k++) {
    a = input(4, 8, 3.0 + k);
    b = input(4, 8, -1.0 - k);
    expect_eager(call_dev(f, a, b), a, b, k ? "replay" : "recording");
  }
  counts c2 = fake_counts();
  cr_expect_eq(c2.kernels, c1.kernels, "no launch through the host program after the warm-up");
  cr_expect_eq(c2.graphs - c1.graphs, 4, "one graph launch per call");
  cr_expect_eq(c2.replayed - c1.replayed, 4 * per_call, "each replay runs the %ld captured "
               "kernels: %ld replayed", per_call, c2.replayed - c1.replayed);
  kn_scope_end();
  kn_compiled_free(f);
}

/* Inputs passed again at the same addresses get a recording of their own
** that reads them in place (no copy into static buffers): its outputs are
** its own, it sees in-place changes of its inputs, and other inputs still
** replay the copying recording. No call after the warm-up runs the host
** program. */
Test(cudagraphs, inputs_passed_again_are_read_in_place) {
  kn_compiled *f = compile_ten("reduce-overhead");
  kn_scope_begin();
  kn_tensor *a = input(4, 8, 1.0), *b = input(4, 8, 2.0);
  kn_tensor *ad = to_dev(a, KN_CUDA), *bd = to_dev(b, KN_CUDA);
  expect_eager(kn_call_t(f, ad, bd), a, b, "warm-up");
  counts c0 = fake_counts();
  kn_tensor *y1 = kn_call_t(f, ad, bd); /* records the copying graph */
  expect_eager(y1, a, b, "recording");
  kn_tensor *y2 = kn_call_t(f, ad, bd); /* same places: records the in-place one */
  expect_eager(y2, a, b, "in-place recording");
  cr_expect_not(kn_same_storage(y1, y2), "the in-place recording has outputs of its own");
  kn_tensor *y3 = kn_call_t(f, ad, bd);
  cr_expect(kn_same_storage(y2, y3), "replayed");
  counts c1 = fake_counts();
  cr_expect_eq(c1.kernels, c0.kernels, "no launch through the host program after the warm-up");
  cr_expect_eq(c1.graphs - c0.graphs, 3, "one graph launch per call");
  cr_assert_eq(kn_mul_scalar_(ad, kn_float(2)), KN_OK, "%s", kn_last_error()); /* eager */
  kn_tensor *a2 = kn_mul_scalar(a, kn_float(2)), *a3 = input(4, 8, -4.0), *a3d = to_dev(a3, KN_CUDA);
  counts c2 = fake_counts();
  expect_eager(kn_call_t(f, ad, bd), a2, b, "an in-place change of the input is read");
  kn_tensor *y5 = kn_call_t(f, a3d, bd);
  expect_eager(y5, a3, b, "other inputs");
  cr_expect(kn_same_storage(y1, y5), "other inputs replay the copying recording");
  counts c3 = fake_counts();
  cr_expect_eq(c3.kernels, c2.kernels, "replays only");
  cr_expect_eq(c3.graphs - c2.graphs, 2, "one graph launch per call");
  kn_scope_end();
  kn_compiled_free(f);
}

/* The documented output semantics: outputs alias the static outputs, and the
** next replay overwrites them (a clone keeps its values). */
Test(cudagraphs, outputs_alias_static_buffers_that_the_next_replay_overwrites) {
  kn_compiled *f = compile_ten("reduce-overhead");
  kn_scope_begin();
  kn_tensor *a1 = input(4, 8, 1.0), *b1 = input(4, 8, 2.0);
  kn_tensor *a2 = input(4, 8, 5.0), *b2 = input(4, 8, -3.0);
  call_dev(f, a1, b1); /* warm-up */
  kn_tensor *y1 = call_dev(f, a1, b1);
  kn_tensor *kept = kn_clone(y1);
  kn_tensor *y2 = call_dev(f, a2, b2);
  cr_expect(y1 != y2, "each call returns a new tensor");
  cr_expect(kn_same_storage(y1, y2), "both alias the static output");
  expect_eager(y2, a2, b2, "second replay");
  expect_eager(y1, a2, b2, "the first output now holds the second call's values");
  expect_eager(kept, a1, b1, "a clone keeps the first call's values");
  kn_scope_end();
  kn_compiled_free(f);
}

/* Dynamic shapes: each concrete size warms up, records once, and replays
** its own graph later. The second size recompiles the function with a
** dynamic size (automatic dynamic), and the later calls of 4 rows go to that
** graph (newest cache entry first), which warms up for 4 rows again. */
Test(cudagraphs, each_size_records_its_own_graph) {
  kn_compiled *f = compile_ten("reduce-overhead");
  kn_scope_begin();
  int64_t rows[] = {4, 4, 6, 6, 5, 5, 6, 4, 4, 5};
  bool host[] = {true, false, true, false, true, false, false, true, false, false};
  for (int k = 0; k < 10; k++) {
    counts c0 = fake_counts();
    kn_tensor *a = input(rows[k], 8, 1.0 + k), *b = input(rows[k], 8, 0.25 * k);
    char what[64];
    snprintf(what, sizeof what, "call %d (%lld rows)", k, (long long)rows[k]);
    expect_eager(call_dev(f, a, b), a, b, what);
    counts c1 = fake_counts();
    cr_expect_eq(c1.kernels > c0.kernels, host[k], "%s: host launches %ld", what,
                 c1.kernels - c0.kernels);
    cr_expect_eq(c1.graphs - c0.graphs, !host[k], "%s: graph launches", what);
  }
  kn_scope_end();
  kn_compiled_free(f);
}

/* ---- graphs that are not captured ---------------------------------------------------- */

static kn_tensor *add_into(kn_tensor *a, kn_tensor *b) {
  cr_assert_eq(kn_add_(a, b), KN_OK);
  return kn_mul_scalar(a, kn_float(2));
}

static void set_logs(const char *logs) {
  setenv("KILN_LOGS", logs, 1);
  kn__log_reset_for_tests();
}

/* A graph that mutates an input runs normally, the reason logged once. */
Test(cudagraphs, a_graph_mutating_an_input_runs_without_graphs) {
  set_logs("perf_hints,cudagraphs");
  kn_compile_options o = {.backend = "inductor", .mode = "reduce-overhead"};
  kn_compiled *f = KN_COMPILE(add_into, &o);
  kn_scope_begin();
  kn_test_records r = {0};
  kn_test_capture_begin(&r);
  counts c0 = fake_counts();
  kn_tensor *a = to_dev(input(4, 8, 1.0), KN_CUDA), *b = to_dev(input(4, 8, 0.5), KN_CUDA);
  kn_tensor *want = to_dev(input(4, 8, 1.0), KN_CPU);
  for (int k = 0; k < 3; k++) {
    kn_tensor *y = kn_call_t(f, a, b);
    cr_assert_not_null(y, "%s", kn_last_error());
    want = kn_add(want, to_dev(input(4, 8, 0.5), KN_CPU));
    kn_tensor *ya = to_dev(a, KN_CPU), *yy = to_dev(y, KN_CPU);
    for (int64_t i = 0; i < 32; i++) {
      cr_assert_float_eq(((float *)kn_data(ya))[i], ((float *)kn_data(want))[i], 1e-5);
      cr_assert_float_eq(((float *)kn_data(yy))[i], 2 * ((float *)kn_data(want))[i], 1e-5);
    }
  }
  kn_test_capture_end(&r);
  cr_expect_eq(fake_counts().graphs, c0.graphs, "no graph");
  cr_expect_eq(kn_test_count_artifact(&r, "perf_hints"), 1, "logged once to perf_hints");
  cr_expect_eq(kn_test_count_artifact(&r, "cudagraphs"), 1, "and once to cudagraphs");
  for (size_t i = 0; i < r.n; i++) {
    cr_expect_str_eq(r.v[i].message, "skipping cudagraphs due to mutated inputs (1 instances)");
    if (!strcmp(r.v[i].artifact ? r.v[i].artifact : "", "perf_hints"))
      cr_expect_eq(r.v[i].level, KN_WARNING);
  }
  kn_test_records_free(&r);
  kn_scope_end();
  kn_compiled_free(f);
  unsetenv("KILN_LOGS");
}

static kn_value drop_twice(const kn_value *args, int nargs, void *ud) {
  (void)nargs, (void)ud;
  return kn_vtensor(kn_mul_scalar(kn_dropout(args[0].u.t, 0.5, true, NULL), kn_float(2)));
}

/* A graph with dropout runs without graphs (its generator's counter lives
** on the host: a replay would drop the same elements every call): each
** call draws a new mask, the one eager draws from the same seed. */
Test(cudagraphs, a_graph_with_a_random_op_runs_without_graphs) {
  set_logs("perf_hints");
  kn_compile_options o = {.backend = "inductor", .mode = "reduce-overhead"};
  kn_compiled *f = KN_COMPILE(drop_twice, &o);
  cr_assert_not_null(f, "%s", kn_last_error());
  kn_scope_begin();
  kn_test_records r = {0};
  kn_test_capture_begin(&r);
  counts c0 = fake_counts();
  kn_tensor *x = input(4, 8, 1.0), *xd = to_dev(x, KN_CUDA);
  for (int k = 0; k < 4; k++) {
    kn_manual_seed(100 + (uint64_t)k);
    kn_tensor *y = to_dev(kn_call_t(f, xd), KN_CPU);
    kn_manual_seed(100 + (uint64_t)k);
    kn_tensor *want = kn_mul_scalar(kn_dropout(x, 0.5, true, NULL), kn_float(2));
    cr_assert(ind_close(y, want, 0, 0, "call"), "call %d draws the mask of its seed", k);
  }
  kn_test_capture_end(&r);
  cr_expect_eq(fake_counts().graphs, c0.graphs, "no graph");
  cr_assert_eq(kn_test_count_artifact(&r, "perf_hints"), 1, "logged once");
  cr_expect(strstr(r.v[0].message, "skipping cudagraphs due to a random op (aten.native_dropout"),
            "%s", r.v[0].message);
  kn_test_records_free(&r);
  kn_scope_end();
  kn_compiled_free(f);
  unsetenv("KILN_LOGS");
}

/* A CPU graph with mode reduce-overhead runs as in default mode. */
Test(cudagraphs, a_cpu_graph_runs_normally) {
  set_logs("perf_hints");
  kn_compiled *f = compile_ten("reduce-overhead");
  kn_scope_begin();
  kn_test_records r = {0};
  kn_test_capture_begin(&r);
  for (int k = 0; k < 3; k++) {
    kn_tensor *a = input(4, 8, 1.0 + k), *b = input(4, 8, 2.0);
    kn_tensor *y = kn_call_t(f, a, b);
    cr_assert_not_null(y, "%s", kn_last_error());
    cr_expect_eq(kn_tensor_device(y), KN_CPU);
    expect_eager(to_dev(y, KN_CUDA), a, b, "cpu graph");
  }
  kn_test_capture_end(&r);
  cr_expect_eq(r.n, 1, "once per compiled graph");
  for (size_t i = 0; i < r.n; i++)
    cr_expect_str_eq(r.v[i].message, "skipping cudagraphs due to cpu device (l_a_)");
  kn_test_records_free(&r);
  kn_scope_end();
  kn_compiled_free(f);
  unsetenv("KILN_LOGS");
}

/* A user backend whose callable computes on the host (copies to and from
** the CPU): the capture refuses the copy, so the graph runs without CUDA
** graphs, with the reason logged. */
static kn_status host_run(void *state, kn_tensor *const *in, int nin, kn_tensor **out, int nout) {
  (void)state, (void)nin, (void)nout;
  kn_tensor *h = NULL;
  kn_status st = kn_to_device(in[0], KN_CPU, &h);
  if (st != KN_OK) return st;
  kn_tensor *d = NULL;
  st = kn_to_device(kn_mul_scalar(h, kn_float(3)), KN_CUDA, &d);
  if (st == KN_OK) out[0] = d; /* autoreleased, as outputs are */
  return st;
}

static kn_status host_backend(kn_graph_module *gm, kn_tensor *const *ex, int n, void *ud,
                              kn_compiled_graph *out) {
  (void)gm, (void)ex, (void)n, (void)ud;
  *out = (kn_compiled_graph){host_run, NULL, NULL};
  return KN_OK;
}

static kn_tensor *triple(kn_tensor *a) { return kn_mul_scalar(a, kn_float(3)); }

Test(cudagraphs, a_step_that_cannot_be_captured_falls_back) {
  set_logs("cudagraphs");
  kn_compile_options o = {.backend_fn = host_backend, .mode = "reduce-overhead"};
  kn_compiled *f = KN_COMPILE(triple, &o);
  kn_scope_begin();
  kn_test_records r = {0};
  kn_test_capture_begin(&r);
  counts c0 = fake_counts();
  for (int k = 0; k < 4; k++) {
    kn_tensor *a = input(4, 8, 1.0 + k);
    kn_tensor *y = kn_call_t(f, to_dev(a, KN_CUDA));
    cr_assert_not_null(y, "%s", kn_last_error());
    kn_tensor *got = to_dev(y, KN_CPU), *want = kn_mul_scalar(a, kn_float(3));
    for (int64_t i = 0; i < 32; i++)
      cr_assert_float_eq(((float *)kn_data(got))[i], ((float *)kn_data(want))[i], 1e-6);
  }
  kn_test_capture_end(&r);
  cr_expect_eq(fake_counts().graphs, c0.graphs, "no graph");
  cr_expect_eq(r.n, 2, "the warm-up, then the reason once");
  cr_expect(r.n > 0 && strstr(r.v[0].message, "warming up the compiled graph"), "%s",
            r.n ? r.v[0].message : "");
  for (size_t i = 1; i < r.n; i++)
    cr_expect(strstr(r.v[i].message, "skipping cudagraphs due to a step that cannot be captured: "
                                     "a copy to the host during CUDA graph capture"),
              "%s", r.v[i].message);
  kn_test_records_free(&r);
  kn_scope_end();
  kn_compiled_free(f);
  unsetenv("KILN_LOGS");
}

/* ---- the seed's test_cudagraphs ---------------------------------------------------- */

#define CTX(f, c, a) "\"frame_id\": " #f ", \"frame_compile_id\": " #c ", \"attempt\": " #a
#define ART(name, enc)                                                                     \
  "{\"artifact\": {\"name\": \"" name "\", \"encoding\": \"" enc "\"}, " CTX(0, 0, 0)    \
  ", \"has_payload\": \"HASH\"}\n"
#define REC(ev) "{\"" ev "\": {}, " CTX(0, 0, 0) ", \"has_payload\": \"HASH\"}\n"

/* The seed's inductor_schedule_fn, `a.add(torch.ones(1000, 1000,
** device="cuda"))`: kiln's factories make CPU tensors, so the ones on the
** device are a.pow(0) (exactly 1 everywhere), named as the seed's node. */
static kn_tensor *inductor_schedule_fn(kn_tensor *a) {
  kn_tensor *ones = kn_name(kn_pow_scalar(a, kn_float(0)), "ones");
  kn_tensor *output = kn_name(kn_add(a, ones), "output");
  return output;
}

/* test_structured_trace's test_cudagraphs: one call under reduce-overhead
** writes the seed's records, the GPU kernels' triton_kernel_info after the
** output code, and compilation_metrics_runtime (no attempt) last. */
Test(cudagraphs, one_call_writes_the_records_of_seed_test_cudagraphs) {
  tdir = kn_test_trace_start();
  kn_compile_options o = {.mode = "reduce-overhead"};
  kn_compiled *f = KN_COMPILE(inductor_schedule_fn, &o);
  kn_scope_begin();
  kn_tensor *y = kn_call_t(f, to_dev(kn_ones(2, (int64_t[]){1000, 1000}, KN_FLOAT32), KN_CUDA));
  cr_assert_not_null(y, "%s", kn_last_error());
  cr_expect_eq(kn_get(y, (int64_t[]){999, 0}), 2.0);
  kn_scope_end();
  uint64_t defects = 99;
  char *got = kn_test_dyn_trace(false, &defects);
  cr_expect_eq(defects, 0, "strict reader defects: %llu", (unsigned long long)defects);
  cr_expect_str_eq(got,
      "{\"dynamo_start\": {\"stack\": \"STACK\"}, " CTX(0, 0, 0) "}\n"
      "{\"describe_storage\": {\"id\": 0, \"describer_id\": \"ID\", \"size\": 4000000}, "
      CTX(0, 0, 0) "}\n"
      "{\"describe_tensor\": {\"id\": 0, \"ndim\": 2, \"dtype\": \"torch.float32\", \"device\": "
      "\"device(type='cuda', index=0)\", \"size\": [1000, 1000], \"dynamo_hint_overrides\": {}, "
      "\"is_leaf\": true, \"stride\": [1000, 1], \"storage\": 0, \"view_func\": \"VIEW_FUNC\", "
      "\"describer_id\": \"ID\"}, " CTX(0, 0, 0) "}\n"
      "{\"describe_source\": {\"describer_id\": \"ID\", \"id\": 0, \"source\": \"L['a']\"}, "
      CTX(0, 0, 0) "}\n"
      "{\"dynamo_output_graph\": {\"sizes\": {\"l_a_\": [1000, 1000], \"ones\": [1000, 1000], "
      "\"output\": [1000, 1000]}}, " CTX(0, 0, 0) ", \"has_payload\": \"HASH\"}\n"
      ART("before_pre_grad_graph", "string") ART("after_pre_grad_graph", "string")
      ART("aotautograd_cache_miss", "json") ART("aot_forward_graph_fw_metadata", "string")
      REC("aot_inference_graph") ART("torch._functorch.config", "string")
      ART("before_joint_graph", "string") ART("after_joint_graph", "string")
      ART("fx_graph_runnable", "string") ART("before_post_grad_graph", "string")
      ART("inductor_post_grad_graph", "string")
      "{\"inductor_output_code\": {\"filename\": \"FILENAME\", \"file_path\": \"FILENAME\"}, "
      CTX(0, 0, 0) ", \"has_payload\": \"HASH\"}\n"
      ART("triton_kernel_info", "json") ART("fx_graph_cache_miss", "json")
      REC("dynamo_cpp_guards_str")
      "{\"compilation_metrics\": \"METRICS\", " CTX(0, 0, 0) "}\n"
      "{\"compilation_metrics_runtime\": \"METRICS\", \"frame_id\": 0, \"frame_compile_id\": 0}\n");
  free(got);
  kn_compiled_free(f);
}

/* test_logging's test_cudagraphs: with KILN_LOGS=cudagraphs, one call
** under reduce-overhead logs more than 0 and fewer than 8 records (the
** warm-up's). */
Test(cudagraphs, seed_logging_one_call_logs_a_few_records) {
  set_logs("cudagraphs");
  kn_compile_options o = {.mode = "reduce-overhead"};
  kn_compiled *f = KN_COMPILE(inductor_schedule_fn, &o);
  kn_scope_begin();
  kn_test_records r = {0};
  kn_test_capture_begin(&r);
  kn_tensor *y = kn_call_t(f, to_dev(kn_ones(2, (int64_t[]){1000, 1000}, KN_FLOAT32), KN_CUDA));
  kn_test_capture_end(&r);
  cr_assert_not_null(y, "%s", kn_last_error());
  size_t n = kn_test_count_artifact(&r, "cudagraphs");
  cr_expect(n > 0 && n < 8, "%zu cudagraphs records", n);
  cr_expect_not_null(kn_test_get_record(&r, "warming up the compiled graph"));
  kn_test_records_free(&r);
  kn_scope_end();
  kn_compiled_free(f);
  unsetenv("KILN_LOGS");
}

/* ---- training steps ------------------------------------------------------------------ */
static kn_value mlp_loss(const kn_value *args, int nargs, void *ud) {
  (void)nargs, (void)ud;
  kn_tensor *logits = kn_nn_forward(args[0].u.m, args[1].u.t);
  return kn_vtensor(kn_cross_entropy(logits, args[2].u.t, NULL, KN_REDUCTION_MEAN, -100, 0.0));
}

typedef struct trainer {
  kn_module *m;
  kn_optimizer *opt;
  kn_tensor *x, *x2, *y; /* on the trainer's device, owned */
  kn_compiled *f;        /* NULL: eager */
} trainer;

static void trainer_new(trainer *t, kn_device d, const char *mode) {
  kn_generator *g = kn_generator_new(9);
  t->m = kn_nn_sequential(3, (kn_module *[]){kn_nn_linear(6, 5, true, g), kn_nn_relu(),
                                              kn_nn_linear(5, 3, true, g)});
  cr_assert_eq(kn_module_to_device(t->m, d), KN_OK, "%s", kn_last_error());
  kn_scope_begin();
  t->x = kn_retain(to_dev(kn_randn(2, (int64_t[]){8, 6}, g, KN_FLOAT32), d));
  t->x2 = kn_retain(to_dev(kn_randn(2, (int64_t[]){8, 6}, g, KN_FLOAT32), d));
  kn_tensor *y = kn_from_ints((int64_t[]){0, 2, 1, 1, 0, 2, 2, 1}, 1, (int64_t[]){8});
  t->y = kn_retain(to_dev(y, d));
  kn_scope_end();
  kn_tensor **p = NULL;
  int n = kn_nn_parameters(t->m, &p);
  t->opt = kn_sgd(p, n, &(kn_optim_options){.lr = 0.1});
  free(p);
  t->f = NULL;
  if (mode) {
    kn_compile_options o = {.backend = "inductor", .mode = mode};
    t->f = KN_COMPILE(mlp_loss, &o);
    cr_assert_not_null(t->f, "%s", kn_last_error());
  }
  kn_generator_free(g);
}

static void trainer_free(trainer *t) {
  if (t->f) kn_compiled_free(t->f);
  kn_optim_free(t->opt);
  kn_module_free(t->m);
  kn_release(t->x), kn_release(t->x2), kn_release(t->y);
}

/* The loss of x (a tensor of the current scope). */
static kn_tensor *loss_of(trainer *t, kn_tensor *x) {
  kn_value args[3] = {kn_vmodule(t->m), kn_vtensor(x), kn_vtensor(t->y)}, out;
  if (!t->f) return mlp_loss(args, 3, NULL).u.t;
  cr_assert_eq(kn_call(t->f, args, 3, &out), KN_OK, "%s", kn_last_error());
  return kn__autorelease(out.u.t);
}

/* One SGD step on the loss of x (and of x2 when twice: two forwards before
** one backward, as gradient accumulation does); returns the loss. */
static double train_step(trainer *t, bool twice) {
  kn_optim_zero_grad(t->opt);
  kn_scope_begin();
  kn_tensor *l = loss_of(t, t->x);
  if (twice) l = kn_add(l, loss_of(t, t->x2));
  double v = 0;
  cr_assert_eq(kn_item_double(l, &v), KN_OK, "%s", kn_last_error());
  cr_assert_eq(kn_backward(l, NULL), KN_OK, "%s", kn_last_error());
  cr_assert_eq(kn_optim_step(t->opt), KN_OK, "%s", kn_last_error());
  kn_scope_end();
  return v;
}

static kn_status param_close(void *ud, const char *path, kn_tensor *t) {
  kn_module *cpu = ud;
  kn_scope_begin();
  cr_expect(ind_close(to_dev(t, KN_CPU), kn_module_get(cpu, path), 1e-5, 1e-6, path), "%s", path);
  kn_scope_end();
  return KN_OK;
}

/* reduce-overhead around training: the forward and the backward graph are
** each recorded (after a warm-up) and replayed, two graph launches a step;
** the losses and parameters follow eager training on the CPU. A step that
** runs two forwards before its backward finds the first forward's saved
** activations still in use: its second forward runs without the graph (a
** replay would overwrite them), as does the second backward call (the
** first one's gradients are in use), the result stays right, and later
** steps replay again. */
Test(cudagraphs, training_steps_replay_forward_and_backward) {
  setenv("KILN_CUDA_CUBLAS", KN_FAKECUDA_PATH, 1); /* the fake driver's cuBLAS */
  set_logs("cudagraphs");
  trainer cpu, gpu;
  trainer_new(&cpu, KN_CPU, NULL);
  trainer_new(&gpu, KN_CUDA, "reduce-overhead");
  kn_test_records r = {0};
  kn_test_capture_begin(&r);
  counts c0 = fake_counts();
  for (int k = 0; k < 7; k++) {
    bool twice = k == 4;
    if (k == 1) c0 = fake_counts();
    double want = train_step(&cpu, twice), got = train_step(&gpu, twice);
    cr_expect(fabs(got - want) <= 1e-5 * fabs(want) + 1e-6, "step %d: loss %g, cpu %g", k, got,
              want);
  }
  counts c1 = fake_counts();
  kn_test_capture_end(&r);
  /* steps 1-6 launch the forward's and the backward's graph once each; in step 4 the
  ** second forward and the second backward call run without theirs */
  cr_expect_eq(c1.graphs - c0.graphs, 12, "two graph launches a step: %ld",
               c1.graphs - c0.graphs);
  kn_nn_named_tensors(gpu.m, true, param_close, cpu.m);
  /* the forward's second call, and the backward's second call in that step (the first's
  ** gradients are being accumulated), each noted once per graph */
  size_t recorded = 0, busy = 0;
  for (size_t i = 0; i < r.n; i++) {
    recorded += strstr(r.v[i].message, "recorded a CUDA graph") != NULL;
    busy += strstr(r.v[i].message, "outputs of the graph's last replay are still in use") != NULL;
  }
  cr_expect_eq(recorded, 2, "the forward's and the backward's recording");
  cr_expect_eq(busy, 2, "one in-use note per graph");
  kn_test_records_free(&r);
  trainer_free(&cpu);
  trainer_free(&gpu);
  unsetenv("KILN_LOGS");
}
