/*
** test_aot_observe.c: what AOT autograd writes about a compile: the seed's
** aot-stage events of test_example_training_fn (literal list), the
** torch._functorch.config artifact, chromium events of the AOT phases in
** order, the AOT times in compilation_metrics, and the AOT cache (miss, hit
** skipping the joint trace, bypass for symbolic sizes) with its artifacts.
*/
#include <criterion/criterion.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "aot/aot.h"
#include "kiln/compile.h"
#include "kiln/kiln.h"
#include "kiln/trace.h"
#include "support/dynamo_util.h"
#include "support/trace_util.h"

static char *dir;
static void setup(void) {
  kn_reset();
  unsetenv("KILN_CACHE_DIR");
  setenv("KILN_AOT_DISK_CACHE", "0", 1); /* the memory cache alone */
  dir = kn_test_trace_start();
}
static void teardown(void) {
  kn_trace_disable();
  kn_test_rmdir(dir);
  unsetenv("KILN_AOT_PARTITIONER");
  kn_reset();
}
TestSuite(aot_observe, .init = setup, .fini = teardown);

#define CTX(f, c, a) "\"frame_id\": " #f ", \"frame_compile_id\": " #c ", \"attempt\": " #a

/* The seed's example_training_fn as test_dynamo_trace.c ports it: graph
** breaks where the seed creates a leaf and calls backward(). */
static kn_tensor *example_training_fn(kn_tensor *a) {
  kn_graph_break();
  kn_tensor *output = kn_name(kn_mul(a, kn_ones(KN_SHAPE(1000, 1000), KN_FLOAT32)), "output");
  output = kn_name(kn_add(output, kn_ones(KN_SHAPE(1000, 1000), KN_FLOAT32)), "output");
  kn_tensor *s = kn_sum(output);
  kn_graph_break();
  (void)s;
  return output;
}

/* Lines of text containing one of names[], in order (owned). */
static char *lines_with(const char *text, const char *const *names, int n) {
  size_t len = strlen(text);
  char *out = calloc(len + 1, 1);
  for (const char *p = text; *p;) {
    const char *e = strchr(p, '\n');
    size_t l = e ? (size_t)(e - p + 1) : strlen(p);
    bool keep = false;
    for (int i = 0; i < n && !keep; i++) keep = memmem(p, l, names[i], strlen(names[i])) != NULL;
    if (keep) strncat(out, p, l);
    p += l;
  }
  return out;
}

static const char *const aot_names[] = {"{\"dynamo_output_graph\"", "pre_grad_graph\"", "aotautograd_cache_",
                                        "{\"aot_", "torch._functorch.config",
                                        "aot_forward_graph_fw_metadata"};

static void run_training_fn(void) {
  kn_compile_options o = {.backend = "aot_eager"};
  kn_compiled *f = KN_COMPILE(example_training_fn, &o);
  kn_scope_begin();
  kn_tensor *a = kn_ones(KN_SHAPE(1000, 1000), KN_FLOAT32);
  kn_set_requires_grad(a, true);
  kn_tensor *y = kn_call_t(f, a);
  cr_assert(y, "%s", kn_last_error());
  cr_expect_eq(kn_get(y, (int64_t[]){3, 3}), 2.0);
  cr_expect_str_eq(kn_grad_fn_name(y), "CompiledFunctionBackward");
  kn_scope_end();
  kn_compiled_free(f);
}

/* The seed's test_example_training_fn (frame 2 there, 1 here: the port's
** first break has no leaf-creating frame), aot stages: the records from
** dynamo_output_graph on that this layer writes, in the seed's order. */
Test(aot_observe, example_training_fn_aot_events_in_seed_order) {
  run_training_fn();
  uint64_t defects = 99;
  char *got = kn_test_dyn_trace(false, &defects);
  cr_expect_eq(defects, 0);
  char *aot = lines_with(got, aot_names, 6);
  cr_expect_str_eq(aot,
      "{\"dynamo_output_graph\": {\"sizes\": {\"l_stack0_\": [1000, 1000], \"ones\": [1000, 1000], "
      "\"output\": [1000, 1000], \"ones_1\": [1000, 1000], \"output_1\": [1000, 1000], \"sum_1\": []}}, "
      CTX(1, 0, 1) ", \"has_payload\": \"HASH\"}\n"
      "{\"artifact\": {\"name\": \"before_pre_grad_graph\", \"encoding\": \"string\"}, " CTX(1, 0, 1) ", \"has_payload\": \"HASH\"}\n"
      "{\"artifact\": {\"name\": \"after_pre_grad_graph\", \"encoding\": \"string\"}, " CTX(1, 0, 1) ", \"has_payload\": \"HASH\"}\n"
      "{\"artifact\": {\"name\": \"aotautograd_cache_miss\", \"encoding\": \"json\"}, " CTX(1, 0, 1) ", \"has_payload\": \"HASH\"}\n"
      "{\"aot_joint_graph\": {}, " CTX(1, 0, 1) ", \"has_payload\": \"HASH\"}\n"
      "{\"artifact\": {\"name\": \"torch._functorch.config\", \"encoding\": \"string\"}, " CTX(1, 0, 1) ", \"has_payload\": \"HASH\"}\n"
      "{\"artifact\": {\"name\": \"aot_forward_graph_fw_metadata\", \"encoding\": \"string\"}, " CTX(1, 0, 1) ", \"has_payload\": \"HASH\"}\n"
      "{\"aot_forward_graph\": {}, " CTX(1, 0, 1) ", \"has_payload\": \"HASH\"}\n"
      "{\"aot_backward_graph\": {}, " CTX(1, 0, 1) ", \"has_payload\": \"HASH\"}\n");
  char *cfg = kn_test_dyn_payload("torch._functorch.config", 0);
  cr_expect(cfg && strstr(cfg, "partitioner = 'default'\n"), "%s", cfg);
  free(cfg);
  free(aot);
  free(got);
}

/* name:ph of the chromium events of compile id cid, one per line (owned). */
static char *chromium_of(const char *cid) {
  char *out = calloc(1, 8192);
  for (int i = 0;; i++) {
    char *p = kn_test_dyn_payload("chromium_event", i);
    if (!p) break;
    json_t *j = json_loads(p, 0, NULL);
    free(p);
    cr_assert(j);
    const char *c = json_string_value(json_object_get(json_object_get(j, "args"), "compile_id"));
    if (c && !strcmp(c, cid))
      snprintf(out + strlen(out), 8192 - strlen(out), "%s:%s\n",
               json_string_value(json_object_get(j, "name")), json_string_value(json_object_get(j, "ph")));
    json_decref(j);
  }
  return out;
}

/* Each AOT phase is a chromium B/E pair inside backend_compile. */
Test(aot_observe, chromium_events_of_the_aot_phases) {
  run_training_fn();
  free(kn_test_dyn_trace(false, NULL));
  char *ev = chromium_of("1/0");
  cr_expect_str_eq(ev,
      "dynamo:B\nentire_frame_compile:B\nbackend_compile:B\ncreate_aot_dispatcher_function:B\n"
      "aot_trace_joint_graph:B\naot_trace_joint_graph:E\naot_partition:B\naot_partition:E\n"
      "aot_compile_fw:B\naot_compile_fw:E\naot_compile_bw:B\naot_compile_bw:E\n"
      "create_aot_dispatcher_function:E\nbackend_compile:E\nentire_frame_compile:E\ndynamo:E\n");
  free(ev);
}

static int64_t metric(int n, const char *field) {
  char *m = kn_test_dyn_metadata("compilation_metrics", n);
  cr_assert(m, "no compilation_metrics %d", n);
  json_t *j = json_loads(m, 0, NULL);
  free(m);
  json_t *v = json_object_get(j, field);
  int64_t r = json_is_integer(v) ? json_integer_value(v) : -1;
  json_decref(j);
  return r;
}

/* compilation_metrics of the frame that compiled: the AOT time (all of
** create_aot_dispatcher_function) and within it the backward compile. */
Test(aot_observe, aot_times_in_compilation_metrics) {
  run_training_fn();
  int64_t aot = metric(1, "aot_autograd_cumulative_compile_time_us");
  int64_t bw = metric(1, "backward_cumulative_compile_time_us");
  int64_t dyn = metric(1, "dynamo_cumulative_compile_time_us");
  cr_expect_gt(aot, 0);
  cr_expect_geq(bw, 0);
  cr_expect_leq(bw, aot);
  cr_expect_leq(aot, dyn);
  cr_expect_eq(metric(0, "aot_autograd_cumulative_compile_time_us"), 0, "no graph, no AOT");
  cr_expect_eq(metric(0, "backward_cumulative_compile_time_us"), -1, "null without AOT");
  /* each phase is a row of the compile-times table */
  char *tab = kn_compile_times(true);
  cr_assert(tab);
  const char *rows[] = {"create_aot_dispatcher_function", "aot_trace_joint_graph", "aot_partition",
                        "aot_compile_fw", "aot_compile_bw"};
  for (int i = 0; i < 5; i++) cr_expect(strstr(tab, rows[i]), "no row %s in:\n%s", rows[i], tab);
  free(tab);
}

/* ---- the AOT cache ------------------------------------------------------------------ */
static kn_tensor *sin_mul(kn_tensor *x, kn_tensor *y) { return kn_mul(kn_sin(x), y); }

static kn_tensor *leaf(bool rg, uint64_t seed) {
  kn_generator *g = kn_generator_new(seed);
  kn_tensor *t = kn_randn(KN_SHAPE(3, 4), g, KN_FLOAT64);
  kn_generator_free(g);
  if (rg) kn_set_requires_grad(t, true);
  return t;
}

static char *json_field(const char *artifact, int n, const char *field) {
  char *p = kn_test_dyn_payload(artifact, n);
  cr_assert(p, "no %s %d", artifact, n);
  json_t *j = json_loads(p, 0, NULL);
  free(p);
  const char *v = json_string_value(json_object_get(j, field));
  char *r = v ? strdup(v) : NULL;
  json_decref(j);
  return r;
}

/* Two handles of sin_mul (two frames) on the same inputs: the second
** compile hits the cache (same key, no joint trace) and computes the same
** gradients. */
Test(aot_observe, second_compile_hits_the_cache) {
  kn_compile_options o = {.backend = "aot_eager", .dynamic = KN_DYNAMIC_FALSE};
  kn_compiled *f = KN_COMPILE(sin_mul, &o), *g = KN_COMPILE(sin_mul, &o);
  kn_scope_begin();
  kn_tensor *x1 = leaf(true, 1), *x2 = leaf(true, 1), *y = leaf(false, 2);
  cr_assert_eq(kn_backward(kn_sum(kn_call_t(f, x1, y)), NULL), KN_OK, "%s", kn_last_error());
  cr_assert_eq(kn_backward(kn_sum(kn_call_t(g, x2, y)), NULL), KN_OK, "%s", kn_last_error());
  double d = -1;
  kn_item_double(kn_amax(kn_abs(kn_sub(kn_grad(x1), kn_grad(x2))), NULL, 0, false), &d);
  cr_expect_eq(d, 0.0);
  kn_scope_end();
  int entries = -1, hits = -1;
  kn__aot_cache_stats(&entries, &hits);
  cr_expect_eq(entries, 1);
  cr_expect_eq(hits, 1);
  char *got = kn_test_dyn_trace(false, NULL);
  char *aot = lines_with(got, aot_names + 1, 4);
  cr_expect_str_eq(aot,
      "{\"artifact\": {\"name\": \"before_pre_grad_graph\", \"encoding\": \"string\"}, " CTX(0, 0, 0) ", \"has_payload\": \"HASH\"}\n"
      "{\"artifact\": {\"name\": \"after_pre_grad_graph\", \"encoding\": \"string\"}, " CTX(0, 0, 0) ", \"has_payload\": \"HASH\"}\n"
      "{\"artifact\": {\"name\": \"aotautograd_cache_miss\", \"encoding\": \"json\"}, " CTX(0, 0, 0) ", \"has_payload\": \"HASH\"}\n"
      "{\"aot_joint_graph\": {}, " CTX(0, 0, 0) ", \"has_payload\": \"HASH\"}\n"
      "{\"artifact\": {\"name\": \"torch._functorch.config\", \"encoding\": \"string\"}, " CTX(0, 0, 0) ", \"has_payload\": \"HASH\"}\n"
      "{\"aot_forward_graph\": {}, " CTX(0, 0, 0) ", \"has_payload\": \"HASH\"}\n"
      "{\"aot_backward_graph\": {}, " CTX(0, 0, 0) ", \"has_payload\": \"HASH\"}\n"
      "{\"artifact\": {\"name\": \"before_pre_grad_graph\", \"encoding\": \"string\"}, " CTX(1, 0, 0) ", \"has_payload\": \"HASH\"}\n"
      "{\"artifact\": {\"name\": \"after_pre_grad_graph\", \"encoding\": \"string\"}, " CTX(1, 0, 0) ", \"has_payload\": \"HASH\"}\n"
      "{\"artifact\": {\"name\": \"aotautograd_cache_hit\", \"encoding\": \"json\"}, " CTX(1, 0, 0) ", \"has_payload\": \"HASH\"}\n"
      "{\"artifact\": {\"name\": \"torch._functorch.config\", \"encoding\": \"string\"}, " CTX(1, 0, 0) ", \"has_payload\": \"HASH\"}\n"
      "{\"aot_forward_graph\": {}, " CTX(1, 0, 0) ", \"has_payload\": \"HASH\"}\n"
      "{\"aot_backward_graph\": {}, " CTX(1, 0, 0) ", \"has_payload\": \"HASH\"}\n");
  char *k1 = json_field("aotautograd_cache_miss", 0, "key"), *k2 = json_field("aotautograd_cache_hit", 0, "key");
  char *r1 = json_field("aotautograd_cache_miss", 0, "reason"), *r2 = json_field("aotautograd_cache_hit", 0, "reason");
  cr_expect(k1 && k2 && strlen(k1) == 64 && !strcmp(k1, k2), "%s %s", k1, k2);
  cr_expect_str_eq(r1, "not in cache");
  cr_expect_str_eq(r2, "found in memory");
  char *ev = chromium_of("1/0");
  cr_expect(!strstr(ev, "aot_trace_joint_graph") && !strstr(ev, "aot_partition"), "%s", ev);
  cr_expect(strstr(ev, "aot_compile_bw:E"), "%s", ev);
  free(ev);
  free(k1), free(k2), free(r1), free(r2);
  free(aot);
  free(got);
  kn_compiled_free(f);
  kn_compiled_free(g);
}

/* What shapes the graphs is in the key: another partitioner, another
** requires_grad, another dtype miss. */
Test(aot_observe, key_covers_partitioner_requires_grad_and_dtype) {
  kn_compile_options o = {.backend = "aot_eager", .dynamic = KN_DYNAMIC_FALSE};
  kn_compiled *f[4];
  kn_scope_begin();
  for (int i = 0; i < 4; i++) {
    if (i == 1) setenv("KILN_AOT_PARTITIONER", "min_cut", 1);
    f[i] = KN_COMPILE(sin_mul, &o);
    kn_tensor *x = leaf(true, 1), *y = leaf(i == 2, 2);
    if (i == 3) x = kn_detach(kn_to(x, KN_FLOAT32)), kn_set_requires_grad(x, true);
    if (i == 3) y = kn_to(y, KN_FLOAT32);
    cr_assert(kn_call_t(f[i], x, y), "%s", kn_last_error());
  }
  kn_scope_end();
  int entries = -1, hits = -1;
  kn__aot_cache_stats(&entries, &hits);
  cr_expect_eq(entries, 4);
  cr_expect_eq(hits, 0);
  for (int i = 0; i < 4; i++) kn_compiled_free(f[i]);
}

/* Symbolic sizes bypass the cache, with the reason. */
Test(aot_observe, symbolic_sizes_bypass_the_cache) {
  kn_compile_options o = {.backend = "aot_eager", .dynamic = KN_DYNAMIC_TRUE};
  kn_compiled *f = KN_COMPILE(sin_mul, &o);
  kn_scope_begin();
  cr_assert(kn_call_t(f, leaf(true, 1), leaf(true, 2)), "%s", kn_last_error());
  kn_scope_end();
  int entries = -1;
  kn__aot_cache_stats(&entries, NULL);
  cr_expect_eq(entries, 0);
  char *got = kn_test_dyn_trace(false, NULL);
  cr_expect_eq(kn_test_count_sub(got, "aotautograd_cache_bypass"), 1, "%s", got);
  cr_expect_eq(kn_test_count_sub(got, "aotautograd_cache_miss"), 0, "%s", got);
  char *r = json_field("aotautograd_cache_bypass", 0, "reason");
  cr_expect_str_eq(r, "graph has symbolic sizes (the joint trace adds guards on them)");
  free(r);
  free(got);
  kn_compiled_free(f);
}

/* Inference: cache miss, aot_inference_graph, then the configuration (the
** seed's test_schedule order). */
Test(aot_observe, inference_events_in_seed_order) {
  kn_compile_options o = {.backend = "aot_eager"};
  kn_compiled *f = KN_COMPILE(sin_mul, &o);
  kn_scope_begin();
  cr_assert(kn_call_t(f, leaf(false, 1), leaf(false, 2)), "%s", kn_last_error());
  kn_scope_end();
  char *got = kn_test_dyn_trace(false, NULL);
  char *aot = lines_with(got, aot_names + 1, 4);
  cr_expect_str_eq(aot,
      "{\"artifact\": {\"name\": \"before_pre_grad_graph\", \"encoding\": \"string\"}, " CTX(0, 0, 0) ", \"has_payload\": \"HASH\"}\n"
      "{\"artifact\": {\"name\": \"after_pre_grad_graph\", \"encoding\": \"string\"}, " CTX(0, 0, 0) ", \"has_payload\": \"HASH\"}\n"
      "{\"artifact\": {\"name\": \"aotautograd_cache_miss\", \"encoding\": \"json\"}, " CTX(0, 0, 0) ", \"has_payload\": \"HASH\"}\n"
      "{\"aot_inference_graph\": {}, " CTX(0, 0, 0) ", \"has_payload\": \"HASH\"}\n"
      "{\"artifact\": {\"name\": \"torch._functorch.config\", \"encoding\": \"string\"}, " CTX(0, 0, 0) ", \"has_payload\": \"HASH\"}\n");
  char *ev = chromium_of("0/0");
  cr_expect(strstr(ev, "create_aot_dispatcher_function:B\naot_trace_inference_graph:B\n"
                       "aot_trace_inference_graph:E\naot_compile_fw:B\naot_compile_fw:E\n"
                       "create_aot_dispatcher_function:E\n"), "%s", ev);
  free(ev);
  free(aot);
  free(got);
  kn_compiled_free(f);
}

/* KILN_AOT_PARTITIONER=min_cut reaches the compile: the configuration says
** so and the backward graph recomputes sin from the saved input. */
Test(aot_observe, setting_selects_min_cut_for_a_compile) {
  setenv("KILN_AOT_PARTITIONER", "min_cut", 1);
  kn_compile_options o = {.backend = "aot_eager"};
  kn_compiled *f = KN_COMPILE(sin_mul, &o);
  kn_scope_begin();
  cr_assert(kn_call_t(f, leaf(true, 1), leaf(true, 2)), "%s", kn_last_error());
  kn_scope_end();
  free(kn_test_dyn_trace(false, NULL));
  char *cfg = kn_test_dyn_payload("torch._functorch.config", 0);
  char *bw = kn_test_dyn_payload("aot_backward_graph", 0);
  cr_expect(cfg && strstr(cfg, "partitioner = 'min_cut'\npartitioner_from = 'KILN_AOT_PARTITIONER'\n"),
            "%s", cfg);
  cr_expect(bw && strstr(bw, "kiln.ops.sin(primals_1)"), "%s", bw);
  free(cfg);
  free(bw);
  kn_compiled_free(f);
}

/* The pre-grad passes: common-subexpression and dead-code elimination on
** the captured graph (before_pre_grad_graph keeps both sin calls and the
** unused cos, after_pre_grad_graph has one sin and no cos). */
static kn_tensor *twice_sin(kn_tensor *x) {
  (void)kn_cos(x);
  return kn_add(kn_sin(x), kn_sin(x));
}

Test(aot_observe, pre_grad_passes_merge_and_drop) {
  kn_compile_options o = {.backend = "aot_eager"};
  kn_compiled *f = KN_COMPILE(twice_sin, &o);
  kn_scope_begin();
  kn_tensor *x = leaf(true, 1);
  kn_tensor *y = kn_call_t(f, x);
  cr_assert(y, "%s", kn_last_error());
  kn_tensor *want = kn_mul_scalar(kn_sin(x), kn_float(2.0));
  cr_expect_eq(kn_get(y, (int64_t[]){1, 2}), kn_get(want, (int64_t[]){1, 2}));
  kn_scope_end();
  char *before = kn_test_dyn_payload("before_pre_grad_graph", 0);
  char *after = kn_test_dyn_payload("after_pre_grad_graph", 0);
  cr_assert(before && after);
  cr_expect(strstr(before, "sin_1") && strstr(before, "kiln.ops.cos"), "%s", before);
  cr_expect(!strstr(after, "sin_1") && !strstr(after, "kiln.ops.cos"), "%s", after);
  cr_expect(strstr(after, "kiln.ops.add(sin, sin)"), "%s", after);
  free(before);
  free(after);
  kn_compiled_free(f);
}
