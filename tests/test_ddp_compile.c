/*
** test_ddp_compile.c: compiled DDP (PyTorch's DDPOptimizer) in one process:
** the seeds' test_ddp_graphs (test_structured_trace.py: the trace records of
** compiling the ToyModel, two Linear(1024, 1024) under DDP with
** bucket_cap_mb=4, in the seed's order; test_logging.py: four ddp_graphs
** records), the split count with the split on and off (optimize_ddp), and
** compiled results and gradients equal to the uncompiled model's. The
** 2-rank run is tests/distributed/ddp_check.c (mode ddp_compile).
*/
#pragma GCC optimize("no-optimize-sibling-calls")
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "inductor_util.h"
#include "kiln/distributed.h"
#include "kiln/kiln.h"
#include "kiln/trace.h"
#include "support/dynamo_util.h"
#include "support/log_capture.h"
#include "support/trace_util.h"

static char cache[64];
static char *tdir;

static void setup(void) {
  kn_test_dynamo_setup();
  setenv("KILN_CFLAGS", "-O0 -fopenmp -ffp-contract=off", 1);
  ind_cache_dir(cache, sizeof cache);
  unsetenv("OMPI_COMM_WORLD_RANK");
  unsetenv("OMPI_COMM_WORLD_SIZE");
  unsetenv("PMI_RANK");
  unsetenv("PMI_SIZE");
}

static void teardown(void) {
  kn_trace_disable();
  if (tdir) kn_test_rmdir(tdir);
  tdir = NULL;
  ind_rm(cache);
  kn_test_dynamo_teardown();
}
TestSuite(ddp_compile, .init = setup, .fini = teardown, .timeout = 300);

static bool need_mpi_build(void) {
  if (kn_dist_available()) return true;
  cr_skip_test("kiln was built without MPI");
  return false;
}

/* The seed's ToyModel: self.layers = Sequential(Linear(d, d), Linear(d, d)). */
static kn_module *toy_model(int64_t d, uint64_t seed) {
  kn_generator *g = kn_generator_new(seed);
  kn_module *m = kn_module_new();
  kn_module *layers = kn_nn_sequential(2, (kn_module *[]){kn_nn_linear(d, d, true, g),
                                                          kn_nn_linear(d, d, true, g)});
  cr_assert_eq(kn_module_add_child(m, "layers", layers), KN_OK);
  kn_generator_free(g);
  return m;
}

/* forward(self, x): self.layers(x) */
static kn_value toy_forward(const kn_value *args, int nargs, void *ud) {
  (void)nargs, (void)ud;
  return kn_vtensor(kn_nn_forward(kn_module_child(args[0].u.m, "layers"), args[1].u.t));
}

static kn_compiled *compile_toy(const char *backend) {
  kn_compile_options o = {.backend = backend, .arg_names = (const char *[]){"self", "x", NULL}};
  return kn_compile_fn(toy_forward, NULL, 2, "forward", __FILE__, __LINE__, &o);
}

static kn_tensor *call_toy(kn_compiled *f, kn_module *m, kn_tensor *x) {
  kn_value out;
  kn_value args[2] = {kn_vmodule(m), kn_vtensor(x)};
  if (kn_call(f, args, 2, &out) != KN_OK) return NULL;
  kn_tensor *t = kn_retain(out.u.t);
  kn_value_release(out);
  return t;
}

#define CTX "\"rank\": 0, \"frame_id\": 0, \"frame_compile_id\": 0, \"attempt\": 0"
#define REC(ev) "{\"" ev "\": {}, " CTX ", \"has_payload\": \"HASH\"}\n"
#define ART(name, enc) \
  "{\"artifact\": {\"name\": \"" name "\", \"encoding\": \"" enc "\"}, " CTX ", \"has_payload\": \"HASH\"}\n"
#define DESC(id, size, nd, sz, extra, stride, src)                                                 \
  "{\"describe_storage\": {\"id\": " #id ", \"describer_id\": \"ID\", \"size\": " #size "}, " CTX "}\n" \
  "{\"describe_tensor\": {\"id\": " #id ", \"ndim\": " #nd ", \"dtype\": \"torch.float32\", "        \
  "\"device\": \"device(type='cpu')\", \"size\": " sz ", \"dynamo_hint_overrides\": {}, " extra    \
  "\"stride\": " stride ", \"storage\": " #id ", \"view_func\": \"VIEW_FUNC\", \"describer_id\": "  \
  "\"ID\"}, " CTX "}\n"                                                                            \
  "{\"describe_source\": {\"describer_id\": \"ID\", \"id\": " #id ", \"source\": \"" src "\"}, " CTX "}\n"
#define PARAM "\"is_leaf\": true, \"requires_grad\": true, \"is_parameter\": true, "
#define LAYER(l, w, b)                                                                           \
  DESC(w, 4194304, 2, "[1024, 1024]", PARAM, "[1024, 1]",                                         \
       "L['self']._modules['layers']._modules['" l "']._parameters['weight']")                   \
  DESC(b, 4096, 1, "[1024]", PARAM, "[1]",                                                       \
       "L['self']._modules['layers']._modules['" l "']._parameters['bias']")
/* one graph through the code generator (a cache miss) */
#define CODEGEN                                                                                  \
  ART("fx_graph_runnable", "string") ART("before_post_grad_graph", "string")                    \
  ART("inductor_post_grad_graph", "string")                                                      \
  "{\"inductor_output_code\": {\"filename\": \"FILENAME\", \"file_path\": \"FILENAME\"}, " CTX    \
  ", \"has_payload\": \"HASH\"}\n" ART("fx_graph_cache_miss", "json")
/* AOT autograd on one piece, up to its compiled graphs */
#define AOT                                                                                      \
  ART("before_pre_grad_graph", "string") ART("after_pre_grad_graph", "string")                  \
  ART("aotautograd_cache_miss", "json") REC("aot_joint_graph")                                   \
  ART("torch._functorch.config", "string") ART("aot_forward_graph_fw_metadata", "string")        \
  REC("aot_forward_graph") REC("aot_backward_graph")

/* The seed's test_ddp_graphs (test_structured_trace.py) on the CPU: the
** ToyModel under DDP with bucket_cap_mb=4, compiled with inductor and
** called once on a 1024 x 1024 input. As in the seed: dynamo_output_graph,
** then optimize_ddp_split_graph and optimize_ddp_split_child for submod_0
** and submod_1, then each piece's AOT and inductor records in piece order,
** then the guards and the metrics. Differences from the seed's literal
** (docs/SEEDS.md): kiln lifts the parameters as graph inputs (the seed's
** inline_inbuilt_nn_modules form: they are described first and the graph's
** sizes name them), the pieces' examples are the graph's own (the seed
** describes L['x'] again before submod_0), AOT's cache records a miss where
** PyTorch bypasses its cache for module attributes, the backward is
** compiled at once (a second code generation per piece) and submod_1's
** forward is the code generator's cache hit (the same code as submod_0's). */
Test(ddp_compile, seed_records) {
  if (!need_mpi_build()) return;
  cr_assert_eq(kn_dist_init(), KN_OK, "%s", kn_last_error());
  tdir = kn_test_trace_start();
  kn_module *m = toy_model(1024, 0);
  kn_ddp_options o = kn_ddp_default_options();
  o.bucket_cap_mb = 4;
  kn_ddp *ddp = kn_ddp_wrap(m, &o);
  cr_assert_not_null(ddp, "%s", kn_last_error());
  kn_compiled *f = compile_toy("inductor");
  kn_scope_begin();
  kn_generator *g = kn_generator_new(3);
  kn_tensor *x = kn_randn(2, (int64_t[]){1024, 1024}, g, KN_FLOAT32);
  kn_tensor *y = call_toy(f, m, x);
  cr_assert_not_null(y, "%s", kn_last_error());
  cr_expect_str_eq(kn_grad_fn_name(y), "CompiledFunctionBackward");
  kn_release(y);
  kn_generator_free(g);
  kn_scope_end();
  uint64_t defects = 99;
  char *got = kn_test_dyn_trace(false, &defects);
  cr_expect_eq(defects, 0, "strict reader defects: %llu", (unsigned long long)defects);
  cr_expect_str_eq(got,
      "{\"dynamo_start\": {\"stack\": \"STACK\"}, " CTX "}\n"
      LAYER("0", 0, 1) LAYER("1", 2, 3)
      DESC(4, 4194304, 2, "[1024, 1024]", "\"is_leaf\": true, ", "[1024, 1]", "L['x']")
      "{\"dynamo_output_graph\": {\"sizes\": {"
      "\"l_self_modules_layers_modules_0_parameters_weight_\": [1024, 1024], "
      "\"l_self_modules_layers_modules_0_parameters_bias_\": [1024], "
      "\"l_self_modules_layers_modules_1_parameters_weight_\": [1024, 1024], "
      "\"l_self_modules_layers_modules_1_parameters_bias_\": [1024], \"l_x_\": [1024, 1024], "
      "\"nn_forward\": [1024, 1024], \"nn_forward_1\": [1024, 1024]}}, " CTX
      ", \"has_payload\": \"HASH\"}\n"
      /* the seed's three lines, verbatim but for the device */
      "{\"optimize_ddp_split_graph\": {}, " CTX ", \"has_payload\": \"HASH\"}\n"
      "{\"optimize_ddp_split_child\": {\"name\": \"submod_0\"}, " CTX ", \"has_payload\": \"HASH\"}\n"
      "{\"optimize_ddp_split_child\": {\"name\": \"submod_1\"}, " CTX ", \"has_payload\": \"HASH\"}\n"
      AOT CODEGEN CODEGEN /* submod_0: forward, backward */
      AOT ART("fx_graph_runnable", "string") ART("before_post_grad_graph", "string")
      ART("inductor_post_grad_graph", "string") ART("fx_graph_cache_hit", "json")
      CODEGEN /* submod_1: forward (submod_0's code), backward */
      REC("dynamo_cpp_guards_str")
      "{\"compilation_metrics\": \"METRICS\", " CTX "}\n");
  free(got);
  /* the payloads: the split graph calls the pieces in turn; each piece is
  ** one linear of the graph, its parameters its placeholders */
  char *split = kn_test_dyn_payload("optimize_ddp_split_graph", 0);
  cr_assert_not_null(split);
  cr_expect(strstr(split, "        submod_0 = self.submod_0(l_x_, "
                          "l_self_modules_layers_modules_0_parameters_weight_, "
                          "l_self_modules_layers_modules_0_parameters_bias_)\n"
                          "        submod_1 = self.submod_1(submod_0, "
                          "l_self_modules_layers_modules_1_parameters_weight_, "
                          "l_self_modules_layers_modules_1_parameters_bias_)\n"
                          "        return (submod_1,)\n"), "%s", split);
  cr_expect(strstr(split, "\n    class submod_1(torch.nn.Module):\n        def forward(self, "
                          "nn_forward: \"f32[1024, 1024][1024, 1]cpu\", "), "%s", split);
  free(split);
  char *c1 = kn_test_dyn_payload("optimize_ddp_split_child", 1);
  cr_assert_not_null(c1);
  cr_expect(strstr(c1, "nn_forward_1: \"f32[1024, 1024][1024, 1]cpu\" = kiln.ops.linear(nn_forward, "
                       "l_self_modules_layers_modules_1_parameters_weight_, "
                       "l_self_modules_layers_modules_1_parameters_bias_)"), "%s", c1);
  cr_expect_eq(kn_test_count_sub(c1, "kiln.ops."), 1);
  free(c1);
  kn_compiled_free(f);
  kn_ddp_free(ddp);
  kn_module_free(m);
  cr_assert_eq(kn_dist_finalize(), KN_OK);
}

/* The ToyModel under DDP compiled with a compile counter: how many graphs
** the backend got, and the pieces' records in the trace. */
static int pieces_compiled(bool optimize_ddp, double cap_mb, int *nchild) {
  cr_assert_eq(kn_dist_init(), KN_OK, "%s", kn_last_error());
  tdir = kn_test_trace_start();
  kn_module *m = toy_model(1024, 0);
  kn_ddp_options o = kn_ddp_default_options();
  o.bucket_cap_mb = cap_mb;
  o.optimize_ddp = optimize_ddp;
  kn_ddp *ddp = kn_ddp_wrap(m, &o);
  cr_assert_not_null(ddp, "%s", kn_last_error());
  kn_compile_counter cc = {.inner = "aot_eager"};
  kn_compile_options co = {.backend_fn = kn_compile_counter_backend, .backend_ud = &cc,
                           .arg_names = (const char *[]){"self", "x", NULL}};
  kn_compiled *f = kn_compile_fn(toy_forward, NULL, 2, "forward", __FILE__, __LINE__, &co);
  kn_scope_begin();
  kn_tensor *x = kn_ones(KN_SHAPE(8, 1024), KN_FLOAT32);
  kn_tensor *y = call_toy(f, m, x);
  cr_assert_not_null(y, "%s", kn_last_error());
  kn_release(y);
  kn_scope_end();
  uint64_t defects = 99;
  char *got = kn_test_dyn_trace(false, &defects);
  *nchild = kn_test_count_sub(got, "\"optimize_ddp_split_child\"");
  cr_expect_eq(kn_test_count_sub(got, "\"optimize_ddp_split_graph\""), *nchild ? 1 : 0);
  free(got);
  kn_trace_disable();
  kn_test_rmdir(tdir);
  tdir = NULL;
  kn_compiled_free(f);
  kn_ddp_free(ddp);
  kn_module_free(m);
  cr_assert_eq(kn_dist_finalize(), KN_OK);
  return cc.frame_count;
}

/* bucket_cap_mb=4: layer 1's 4 MiB + 4 KiB close the first bucket (over
** its 1 MiB), layer 0 makes the second: two pieces. optimize_ddp off: one
** graph. A cap above both layers (25 MiB, after the 1 MiB first bucket):
** still two. A first bucket over everything cannot be asked for, but one
** layer alone gives one bucket: no split. */
Test(ddp_compile, split_count_on_and_off) {
  if (!need_mpi_build()) return;
  int nchild;
  cr_expect_eq(pieces_compiled(true, 4, &nchild), 2);
  cr_expect_eq(nchild, 2);
  cr_expect_eq(pieces_compiled(false, 4, &nchild), 1);
  cr_expect_eq(nchild, 0);
  cr_expect_eq(pieces_compiled(true, 25, &nchild), 2);
  cr_expect_eq(nchild, 2);
}

static kn_module *hooked_layer0;
static bool layer0_ready_first;

/* Layer 1's weight got its gradient: has layer 0's backward run yet? */
static kn_status on_layer1(void *ud, kn_tensor *leaf) {
  (void)ud, (void)leaf;
  layer0_ready_first = kn_grad(kn_module_get(hooked_layer0, "weight")) != NULL;
  return KN_OK;
}

/* Compiled under DDP (one process), split: the forward and every gradient
** equal the uncompiled model's (the same seed), and layer 1's gradient
** lands (its bucket's all-reduce starts) before layer 0's backward ran:
** the overlap the split is for. */
Test(ddp_compile, split_results_equal_eager_and_overlap) {
  if (!need_mpi_build()) return;
  cr_assert_eq(kn_dist_init(), KN_OK, "%s", kn_last_error());
  kn_module *m = toy_model(256, 5), *plain = toy_model(256, 5);
  hooked_layer0 = kn_module_child(m, "layers.0");
  cr_assert_eq(kn_register_post_accumulate_grad_hook(kn_module_get(m, "layers.1.weight"),
                                                     on_layer1, NULL, NULL), KN_OK);
  kn_ddp_options o = kn_ddp_default_options();
  o.bucket_cap_mb = 0.25; /* 256 x 256 x 4 B = 0.25 MiB per weight: a bucket per layer */
  kn_ddp *ddp = kn_ddp_wrap(m, &o);
  cr_assert_not_null(ddp, "%s", kn_last_error());
  kn_compiled *f = compile_toy("inductor");
  kn_scope_begin();
  kn_generator *g = kn_generator_new(9);
  kn_tensor *x = kn_randn(2, (int64_t[]){16, 256}, g, KN_FLOAT32);
  for (int step = 0; step < 2; step++) { /* the second call runs the cached pieces */
    kn_tensor *y = call_toy(f, m, x);
    cr_assert_not_null(y, "%s", kn_last_error());
    kn_tensor *ye = kn_nn_forward(kn_module_child(plain, "layers"), x);
    cr_assert_eq(kn_backward(kn_sum(kn_tanh(y)), NULL), KN_OK, "%s", kn_last_error());
    cr_assert_eq(kn_backward(kn_sum(kn_tanh(ye)), NULL), KN_OK);
    cr_expect(!layer0_ready_first, "layer 0's gradient came before layer 1's was averaged");
    cr_expect_eq(kn_ddp_buckets_launched_in_backward(ddp), 2);
    kn_tensor *got[5] = {y, kn_grad(kn_module_get(m, "layers.0.weight")),
                         kn_grad(kn_module_get(m, "layers.0.bias")),
                         kn_grad(kn_module_get(m, "layers.1.weight")),
                         kn_grad(kn_module_get(m, "layers.1.bias"))};
    kn_tensor *want[5] = {ye, kn_grad(kn_module_get(plain, "layers.0.weight")),
                          kn_grad(kn_module_get(plain, "layers.0.bias")),
                          kn_grad(kn_module_get(plain, "layers.1.weight")),
                          kn_grad(kn_module_get(plain, "layers.1.bias"))};
    for (int i = 0; i < 5; i++) {
      cr_assert(got[i] && want[i] && kn_numel(got[i]) == kn_numel(want[i]), "value %d", i);
      const float *a = kn_data(got[i]), *b = kn_data(want[i]);
      for (int64_t k = 0; k < kn_numel(got[i]); k++)
        cr_assert(fabsf(a[k] - b[k]) <= 1e-5f * (1.0f + fabsf(b[k])),
                  "step %d value %d [%lld]: %g vs %g", step, i, (long long)k, a[k], b[k]);
    }
    kn_release(y);
    kn_nn_zero_grad(m);
    kn_nn_zero_grad(plain);
  }
  kn_generator_free(g);
  kn_scope_end();
  kn_compiled_free(f);
  kn_ddp_free(ddp);
  kn_module_free(m);
  kn_module_free(plain);
  cr_assert_eq(kn_dist_finalize(), KN_OK);
}

static void ddp_graphs_body(const kn_test_records *r, void *ud) {
  (void)ud;
  kn_reset();
  int nchild;
  cr_expect_eq(pieces_compiled(true, 4, &nchild), 2);
  /* test_logging.py's test_ddp_graphs: 4 records (the whole/split/piece
  ** graphs, each piece as it is compiled, the final graph) */
  cr_expect_eq(kn_test_count_artifact(r, "ddp_graphs"), 4);
  const kn_test_record *first = kn_test_get_record(r, "---orig graph---");
  cr_assert_not_null(first);
  cr_expect(strstr(first->message, "\n---split graph---\n"));
  cr_expect(strstr(first->message, "\n---submod_1 graph---\n"));
  cr_expect_not_null(kn_test_get_record(r, "---final graph---"));
}

Test(ddp_compile, ddp_graphs_log) {
  if (!need_mpi_build()) return;
  kn_log_setting s[] = {KN_LOG_FLAG("ddp_graphs", 1)};
  kn_test_logging_twice(s, 1, ddp_graphs_body, NULL);
}
