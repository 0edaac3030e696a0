/*
** test_aot.c: AOT autograd ("aot_eager"): the joint graph and the default
** partition of a small known graph (literal graph code and saved values),
** outputs and gradients of compiled functions equal to eager (the same
** function run without compiling), one CompiledFunctionBackward node, the
** double-backward error, the inference graph, and an MLP trained for five
** SGD steps with the same losses and gradients as eager. The op sweep is
** test_aot_sweep.c.
*/
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "aot/aot.h"
#include "kiln/compile.h"
#include "kiln/kiln.h"
#include "support/dynamo_util.h"
#include "support/trace_util.h"

/* The AOT cache in memory only (KILN_AOT_DISK_CACHE=0): an entry on disk
** from an earlier run would turn a miss these tests expect in the trace
** into a hit. */
static void setup(void) {
  unsetenv("KILN_CACHE_DIR");
  setenv("KILN_AOT_DISK_CACHE", "0", 1);
  kn_test_dynamo_setup();
}

TestSuite(aot, .init = setup, .fini = kn_test_dynamo_teardown);

static kn_tensor *sin_mul(kn_tensor *x, kn_tensor *y) { return kn_mul(kn_sin(x), y); }

static kn_tensor *leaf(int64_t n, int64_t m, bool rg, uint64_t seed) {
  kn_generator *g = kn_generator_new(seed);
  kn_tensor *t = kn_randn(KN_SHAPE(n, m), g, KN_FLOAT64);
  kn_generator_free(g);
  if (rg) kn_set_requires_grad(t, true);
  return t;
}

static double max_diff(kn_tensor *a, kn_tensor *b) {
  cr_assert(a && b, "missing tensor (%s)", kn_last_error());
  double v = INFINITY;
  cr_assert_eq(kn_item_double(kn_amax(kn_abs(kn_sub(a, b)), NULL, 0, false), &v), KN_OK, "%s", kn_last_error());
  return v;
}

Test(aot, sin_mul_outputs_and_grads_equal_eager) {
  kn_scope_begin();
  kn_compile_options o = {.backend = "aot_eager"};
  kn_compiled *f = KN_COMPILE(sin_mul, &o);
  kn_tensor *x = leaf(3, 4, true, 1), *y = leaf(3, 4, true, 2);
  kn_tensor *got = kn_call_t(f, x, y);
  cr_assert(got, "%s", kn_last_error());
  cr_expect_str_eq(kn_grad_fn_name(got), "CompiledFunctionBackward");
  cr_assert_eq(kn_backward(kn_sum(got), NULL), KN_OK, "%s", kn_last_error());
  kn_tensor *gx = kn_retain(kn_grad(x)), *gy = kn_retain(kn_grad(y));
  kn_tensor *x2 = leaf(3, 4, true, 1), *y2 = leaf(3, 4, true, 2);
  kn_tensor *want = sin_mul(x2, y2);
  kn_backward(kn_sum(want), NULL);
  cr_expect_leq(max_diff(got, want), 0.0);
  cr_expect_leq(max_diff(gx, kn_grad(x2)), 1e-15);
  cr_expect_leq(max_diff(gy, kn_grad(y2)), 1e-15);
  kn_release(gx);
  kn_release(gy);
  kn_compiled_free(f);
  kn_scope_end();
}

/* ---- the joint graph and the default partition of a known graph ---------------- */

static kn__graph *grabbed;
static kn_status grab(kn_graph_module *gm, kn_tensor *const *ex, int n, void *ud,
                      kn_compiled_graph *out) {
  (void)ud;
  kn__graph_free(grabbed);
  grabbed = kn__graph_copy(kn__graph_module_graph(gm));
  return kn__aot_eager_compile(gm, ex, n, NULL, out);
}

static char *code_of(const kn__graph *g) {
  char *c = kn__graph_code(g, NULL);
  cr_assert(c);
  return c;
}

#define PH2 "primals_1: \"f64[3, 4][4, 1]cpu\", primals_2: \"f64[3, 4][4, 1]cpu\""
#define T34 ": \"f64[3, 4][4, 1]cpu\" = "

/* sin(x) * y: forward sin, mul; backward mul(t, y) * cos(x) and mul(t, sin).
** The default partitioner computes cos(x) in the forward (it reads no
** tangent) and saves primals_2, sin and cos, as PyTorch's default
** partition does. */
Test(aot, joint_and_default_partition_of_sin_mul) {
  kn_scope_begin();
  kn_compile_options o = {.backend_fn = grab, .dynamic = KN_DYNAMIC_FALSE};
  kn_compiled *f = KN_COMPILE(sin_mul, &o);
  cr_assert(kn_call_t(f, leaf(3, 4, true, 1), leaf(3, 4, true, 2)), "%s", kn_last_error());
  cr_assert(grabbed);
  bool rg[2] = {true, true};
  kn__aot_joint j;
  cr_assert_eq(kn__aot_trace_joint(grabbed, rg, 2, false, &j), KN_OK, "%s", kn_last_error());
  char *jc = code_of(j.g);
  cr_expect_str_eq(jc,
      "class GraphModule(torch.nn.Module):\n"
      "    def forward(self, " PH2 ", tangents_1: \"f64[3, 4][4, 1]cpu\"):\n"
      "        sin" T34 "kiln.ops.sin(primals_1)\n"
      "        mul" T34 "kiln.ops.mul(sin, primals_2)\n"
      "        mul_1" T34 "kiln.ops.mul(tangents_1, primals_2);  primals_2 = None\n"
      "        mul_2" T34 "kiln.ops.mul(tangents_1, sin);  tangents_1 = sin = None\n"
      "        cos" T34 "kiln.ops.cos(primals_1);  primals_1 = None\n"
      "        mul_3" T34 "kiln.ops.mul(mul_1, cos);  mul_1 = cos = None\n"
      "        return (mul, mul_3, mul_2)\n        ");
  cr_expect_eq(j.ngrads, 2);
  cr_expect_eq(j.grad_input[0], 0);
  cr_expect_eq(j.grad_input[1], 1);
  kn__aot_parts p;
  cr_assert_eq(kn__aot_partition(&j, &p), KN_OK, "%s", kn_last_error());
  cr_expect_eq(p.nsaved, 3);
  char *fc = code_of(p.fw), *bc = code_of(p.bw);
  cr_expect_str_eq(fc,
      "class GraphModule(torch.nn.Module):\n"
      "    def forward(self, " PH2 "):\n"
      "        sin" T34 "kiln.ops.sin(primals_1)\n"
      "        mul" T34 "kiln.ops.mul(sin, primals_2)\n"
      "        cos" T34 "kiln.ops.cos(primals_1);  primals_1 = None\n"
      "        return (mul, primals_2, sin, cos)\n        ");
  cr_expect_str_eq(bc,
      "class GraphModule(torch.nn.Module):\n"
      "    def forward(self, primals_2: \"f64[3, 4][4, 1]cpu\", sin: \"f64[3, 4][4, 1]cpu\", "
      "cos: \"f64[3, 4][4, 1]cpu\", tangents_1: \"f64[3, 4][4, 1]cpu\"):\n"
      "        mul" T34 "kiln.ops.mul(tangents_1, primals_2);  primals_2 = None\n"
      "        mul_1" T34 "kiln.ops.mul(tangents_1, sin);  tangents_1 = sin = None\n"
      "        mul_2" T34 "kiln.ops.mul(mul, cos);  mul = cos = None\n"
      "        return (mul_2, mul_1)\n        ");
  free(jc);
  free(fc);
  free(bc);
  kn__aot_parts_fini(&p);
  kn__aot_joint_fini(&j);
  kn__graph_free(grabbed);
  grabbed = NULL;
  kn_compiled_free(f);
  kn_scope_end();
}

/* Only y requires grad: x gets no gradient output, and the backward of
** sin(x) * y needs only sin (the saved values are what backward reads). */
Test(aot, saves_only_what_backward_reads) {
  kn_scope_begin();
  kn_compile_options o = {.backend_fn = grab, .dynamic = KN_DYNAMIC_FALSE};
  kn_compiled *f = KN_COMPILE(sin_mul, &o);
  cr_assert(kn_call_t(f, leaf(3, 4, false, 1), leaf(3, 4, true, 2)), "%s", kn_last_error());
  bool rg[2] = {false, true};
  kn__aot_joint j;
  cr_assert_eq(kn__aot_trace_joint(grabbed, rg, 2, false, &j), KN_OK, "%s", kn_last_error());
  cr_expect_eq(j.ngrads, 1);
  cr_expect_eq(j.grad_input[0], 1);
  kn__aot_parts p;
  cr_assert_eq(kn__aot_partition(&j, &p), KN_OK, "%s", kn_last_error());
  cr_expect_eq(p.nsaved, 1);
  cr_expect_str_eq(kn__graph_input(p.bw, 0)->name, "sin");
  cr_expect_str_eq(kn__graph_input(p.bw, 1)->name, "tangents_1");
  kn__aot_parts_fini(&p);
  kn__aot_joint_fini(&j);
  kn__graph_free(grabbed);
  grabbed = NULL;
  kn_compiled_free(f);
  kn_scope_end();
}

/* ---- the runtime ------------------------------------------------------------------- */

/* eager node -> compiled node -> eager node: kn_backward crosses all three. */
Test(aot, backward_through_eager_and_compiled_nodes) {
  kn_scope_begin();
  kn_compile_options o = {.backend = "aot_eager"};
  kn_compiled *f = KN_COMPILE(sin_mul, &o);
  kn_tensor *w = leaf(3, 4, true, 3), *w2 = leaf(3, 4, true, 3);
  kn_tensor *y = leaf(3, 4, false, 4);
  kn_tensor *got = kn_mul_scalar(kn_call_t(f, kn_exp(w), y), kn_float(3.0));
  kn_tensor *want = kn_mul_scalar(sin_mul(kn_exp(w2), y), kn_float(3.0));
  cr_assert_eq(kn_backward(kn_sum(got), NULL), KN_OK, "%s", kn_last_error());
  cr_assert_eq(kn_backward(kn_sum(want), NULL), KN_OK, "%s", kn_last_error());
  cr_expect_leq(max_diff(kn_grad(w), kn_grad(w2)), 1e-14);
  cr_expect_null(kn_grad(y));
  kn_compiled_free(f);
  kn_scope_end();
}

static kn_tensor *sin_exp(kn_tensor *x) { return kn_exp(kn_sin(x)); }

/* The seed's test_double_backward_errors, second half (the double backward
** outside the compiled function): the first backward with create_graph
** works, the second fails with PyTorch's text. */
Test(aot, double_backward_fails_with_pytorch_text) {
  kn_scope_begin();
  kn_compile_options o = {.backend = "aot_eager"};
  kn_compiled *f = KN_COMPILE(sin_exp, &o);
  kn_tensor *x = leaf(1, 3, true, 5);
  kn_tensor *y = kn_sum(kn_call_t(f, x));
  kn_tensor *gx = NULL;
  cr_assert_eq(kn_autograd_grad(&y, 1, &x, 1, NULL, true, true, false, &gx), KN_OK, "%s",
               kn_last_error());
  kn_tensor *x2 = leaf(1, 3, true, 5), *gx2 = NULL, *y2 = kn_sum(sin_exp(x2));
  kn_autograd_grad(&y2, 1, &x2, 1, NULL, true, true, false, &gx2);
  cr_expect_leq(max_diff(gx, gx2), 1e-15);
  kn_tensor *s = kn_sum(gx), *ggx = NULL;
  cr_expect_neq(kn_autograd_grad(&s, 1, &x, 1, NULL, false, false, false, &ggx), KN_OK);
  cr_expect(strstr(kn_last_error(),
                   "torch.compile with aot_autograd does not currently support double backward"),
            "%s", kn_last_error());
  cr_expect_null(ggx);
  kn_compiled_free(f);
  kn_scope_end();
}

/* ---- inference ---------------------------------------------------------------------- */

static int count_of(const char *s, const char *what) {
  int n = 0;
  for (const char *p = s; (p = strstr(p, what)); p++) n++;
  return n;
}

/* The normalized trace of body(), and the payload of its first `event`. */
static char *trace_of(void (*body)(void), const char *event, char **payload) {
  char *dir = kn_test_trace_start();
  body();
  uint64_t defects = 99;
  char *got = kn_test_dyn_trace(false, &defects);
  *payload = kn_test_dyn_payload(event, 0);
  cr_expect_eq(defects, 0);
  kn_trace_disable();
  kn_test_rmdir(dir);
  return got;
}

static kn_tensor *inference_out;
static void run_inference(void) {
  kn_compile_options o = {.backend = "aot_eager"};
  kn_compiled *f = KN_COMPILE(sin_mul, &o);
  inference_out = kn_retain(kn_call_t(f, leaf(3, 4, false, 1), leaf(3, 4, false, 2)));
  kn_compiled_free(f);
}

/* No input requires grad: one aot_inference_graph (the seed's event for an
** inference compile, right after dynamo_output_graph) and no backward. */
Test(aot, inference_graph_when_nothing_requires_grad) {
  kn_scope_begin();
  char *payload = NULL;
  char *t = trace_of(run_inference, "aot_inference_graph", &payload);
  cr_assert(inference_out, "%s", kn_last_error());
  cr_expect_null(kn_grad_fn_name(inference_out));
  cr_expect_leq(max_diff(inference_out, sin_mul(leaf(3, 4, false, 1), leaf(3, 4, false, 2))), 0.0);
  cr_expect_eq(count_of(t, "{\"aot_inference_graph\": {}"), 1, "%s", t);
  cr_expect_eq(count_of(t, "aot_joint_graph"), 0);
  cr_expect_eq(count_of(t, "aot_backward_graph"), 0);
  const char *dog = strstr(t, "dynamo_output_graph"), *inf = strstr(t, "aot_inference_graph");
  const char *guards = strstr(t, "dynamo_cpp_guards_str");
  cr_expect(dog && inf && guards && dog < inf && inf < guards, "%s", t);
  cr_expect(payload && strstr(payload, "kiln.ops.sin(primals_1)"), "%s", payload);
  free(payload);
  free(t);
  kn_release(inference_out);
  kn_scope_end();
}

static void run_no_grad(void) {
  kn_compile_options o = {.backend = "aot_eager"};
  kn_compiled *f = KN_COMPILE(sin_mul, &o);
  bool prev = kn_no_grad_begin();
  inference_out = kn_retain(kn_call_t(f, leaf(3, 4, true, 1), leaf(3, 4, true, 2)));
  kn_no_grad_end(prev);
  kn_compiled_free(f);
}

Test(aot, inference_graph_under_no_grad) {
  kn_scope_begin();
  char *payload = NULL;
  char *t = trace_of(run_no_grad, "aot_inference_graph", &payload);
  free(payload);
  cr_assert(inference_out, "%s", kn_last_error());
  cr_expect_null(kn_grad_fn_name(inference_out));
  cr_expect_eq(count_of(t, "{\"aot_inference_graph\": {}"), 1, "%s", t);
  cr_expect_eq(count_of(t, "aot_backward_graph"), 0);
  free(t);
  kn_release(inference_out);
  kn_scope_end();
}

/* A training compile: the seed's order of events (test_structured_trace's
** training graph): dynamo_output_graph, aot_joint_graph, aot_forward_graph,
** aot_backward_graph, then the guards (dynamo_cpp_guards_str). */
static void run_training(void) {
  kn_compile_options o = {.backend = "aot_eager"};
  kn_compiled *f = KN_COMPILE(sin_mul, &o);
  inference_out = kn_retain(kn_call_t(f, leaf(3, 4, true, 1), leaf(3, 4, true, 2)));
  kn_compiled_free(f);
}

Test(aot, training_graph_events_in_seed_order) {
  kn_scope_begin();
  char *bw = NULL;
  char *t = trace_of(run_training, "aot_backward_graph", &bw);
  const char *ev[] = {"{\"dynamo_output_graph\"", "{\"aot_joint_graph\": {}", "{\"aot_forward_graph\": {}",
                      "{\"aot_backward_graph\": {}", "{\"dynamo_cpp_guards_str\""};
  const char *at = t;
  for (int i = 0; i < 5; i++) {
    const char *p = strstr(at, ev[i]);
    cr_expect(p, "%s not after the previous event in:\n%s", ev[i], t);
    if (p) at = p;
  }
  cr_expect_eq(count_of(t, "aot_inference_graph"), 0);
  cr_expect(bw && strstr(bw, "tangents_1"), "%s", bw);
  free(bw);
  free(t);
  kn_release(inference_out);
  kn_scope_end();
}

/* ---- an MLP trained for five SGD steps ------------------------------------------------ */

static kn_tensor *mlp_loss(kn_tensor *x, kn_tensor *w1, kn_tensor *b1, kn_tensor *w2, kn_tensor *b2,
                           kn_tensor *target) {
  kn_tensor *h = kn_relu(kn_linear(x, w1, b1));
  return kn_mse_loss(kn_linear(h, w2, b2), target, KN_REDUCTION_MEAN);
}

static kn_tensor *param(int ndim, const int64_t *sizes, uint64_t seed) {
  kn_generator *g = kn_generator_new(seed);
  kn_tensor *t = kn_mul_scalar(kn_randn(ndim, sizes, g, KN_FLOAT64), kn_float(0.5));
  kn_generator_free(g);
  kn_set_requires_grad(t, true);
  return t;
}

/* params[4] -> loss; params replaced by p - lr * grad (new leaves). */
static double sgd_step(kn_compiled *f, kn_tensor *x, kn_tensor *target, kn_tensor **p, kn_tensor **grads) {
  kn_tensor *loss = f ? kn_call_t(f, x, p[0], p[1], p[2], p[3], target)
                      : mlp_loss(x, p[0], p[1], p[2], p[3], target);
  cr_assert(loss, "%s", kn_last_error());
  cr_assert_eq(kn_backward(loss, NULL), KN_OK, "%s", kn_last_error());
  double v = NAN;
  kn_item_double(loss, &v);
  for (int i = 0; i < 4; i++) {
    grads[i] = kn_grad(p[i]);
    cr_assert(grads[i], "no gradient for parameter %d", i);
    kn_tensor *np = kn_detach(kn_sub(kn_detach(p[i]), kn_mul_scalar(grads[i], kn_float(0.1))));
    kn_set_requires_grad(np, true);
    p[i] = np;
  }
  return v;
}

Test(aot, mlp_five_sgd_steps_equal_eager) {
  kn_scope_begin();
  kn_compile_counter cc = {.inner = "aot_eager"};
  kn_compile_options o = {.backend_fn = kn_compile_counter_backend, .backend_ud = &cc};
  kn_compiled *f = KN_COMPILE(mlp_loss, &o);
  kn_generator *g = kn_generator_new(7);
  kn_tensor *x = kn_randn(KN_SHAPE(16, 4), g, KN_FLOAT64), *target = kn_randn(KN_SHAPE(16, 3), g, KN_FLOAT64);
  kn_generator_free(g);
  kn_tensor *pc[4] = {param(KN_SHAPE(8, 4), 1), param(KN_SHAPE(8), 2), param(KN_SHAPE(3, 8), 3),
                      param(KN_SHAPE(3), 4)};
  kn_tensor *pe[4];
  for (int i = 0; i < 4; i++) {
    pe[i] = kn_detach(pc[i]);
    kn_set_requires_grad(pe[i], true);
  }
  double first = 0, last = 0;
  for (int step = 0; step < 5; step++) {
    kn_tensor *gc[4], *ge[4];
    double lc = sgd_step(f, x, target, pc, gc), le = sgd_step(NULL, x, target, pe, ge);
    cr_expect(fabs(lc - le) <= 1e-12 * fabs(le), "step %d: loss %.17g, eager %.17g", step, lc, le);
    for (int i = 0; i < 4; i++)
      cr_expect_leq(max_diff(gc[i], ge[i]), 1e-12, "step %d, parameter %d", step, i);
    if (step == 0) first = le;
    last = le;
  }
  cr_expect_lt(last, first, "the loss decreases (%g -> %g)", first, last);
  cr_expect_eq(cc.frame_count, 1, "one compile for five steps, got %d", cc.frame_count);
  kn_compiled_free(f);
  kn_scope_end();
}

/* ---- dynamic sizes: a rule's int equal to a size is not taken for it ----------- */
/* sum over dim 2 of a [s0, 3, 4] input traced at s0 = 2: sum's derivative
** unsqueezes at dim 2, the same value as s0's hint. Called again at s0 = 5
** the gradient must still be eager's (a graph recording that dim as s0
** would unsqueeze at dim 5). */
static kn_tensor *sum_last(kn_tensor *x) {
  return kn_mul(kn_sum_dims(x, (int64_t[]){2}, 1, false), kn_ones(KN_SHAPE(1, 3), KN_FLOAT64));
}

static kn_tensor *leaf3(int64_t a, uint64_t seed) {
  kn_generator *g = kn_generator_new(seed);
  kn_tensor *t = kn_randn(KN_SHAPE(a, 3, 4), g, KN_FLOAT64);
  kn_generator_free(g);
  kn_set_requires_grad(t, true);
  return t;
}

Test(aot, dynamic_sizes_never_confuse_a_dim_with_a_size) {
  kn_scope_begin();
  kn_compile_options o = {.backend = "aot_eager", .dynamic = KN_DYNAMIC_TRUE};
  kn_compiled *f = KN_COMPILE(sum_last, &o);
  for (int64_t a = 2; a <= 5; a += 3) {
    kn_tensor *x = leaf3(a, 7), *x2 = leaf3(a, 7);
    kn_tensor *got = kn_call_t(f, x);
    cr_assert(got, "size %lld: %s", (long long)a, kn_last_error());
    cr_assert_eq(kn_backward(kn_sum(kn_mul(got, got)), NULL), KN_OK, "%s", kn_last_error());
    kn_tensor *want = sum_last(x2);
    cr_assert_eq(kn_backward(kn_sum(kn_mul(want, want)), NULL), KN_OK, "%s", kn_last_error());
    cr_expect_leq(max_diff(got, want), 1e-12, "size %lld", (long long)a);
    cr_expect_leq(max_diff(kn_grad(x), kn_grad(x2)), 1e-12, "size %lld", (long long)a);
  }
  kn_compiled_free(f);
  kn_scope_end();
}
