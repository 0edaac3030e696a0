/*
** test_aot_symbolic.c: joint graphs under dynamic shapes stay symbolic.
** Derivative rules pass sizes as symbolic ints, so a size a rule reads is
** the size's symbol (or an expression of it) in the joint, forward and
** backward graphs (literal graph code of a known graph), one compile serves
** several sizes with eager's results (an MLP trained at two batch sizes),
** the graphs in the aot_graphs trace events carry the symbols, and a rule
** that still reads a size as a plain int (cat's backward) specialises the
** joint graph: a recompile at another size, never a wrong result. Also:
** cat, embedding + layer norm and conv2d backwards stay symbolic, and both
** graphs compiled by the code generator evaluate the symbols per call.
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

TestSuite(aot_symbolic, .init = kn_test_dynamo_setup, .fini = kn_test_dynamo_teardown);

/* ---- a backend that keeps the joint, forward and backward graph code ---------- */

static char *joint_code, *fw_code, *bw_code;
static bool specialised;
static int ncompiles;

static void forget(void) {
  free(joint_code);
  free(fw_code);
  free(bw_code);
  joint_code = fw_code = bw_code = NULL;
}

static kn_status grab(kn_graph_module *gm, kn_tensor *const *ex, int n, void *ud,
                      kn_compiled_graph *out) {
  (void)ud;
  bool rg[8] = {false};
  for (int i = 0; i < n && i < 8; i++) rg[i] = kn_requires_grad(ex[i]);
  kn__aot_joint j;
  kn_status st = kn__aot_trace_joint(kn__graph_module_graph(gm), rg, n, false, &j);
  if (st != KN_OK) return st;
  kn__aot_parts p;
  st = kn__aot_partition(&j, &p);
  if (st == KN_OK) {
    forget();
    joint_code = kn__graph_code(j.g, NULL);
    fw_code = kn__graph_code(p.fw, NULL);
    bw_code = kn__graph_code(p.bw, NULL);
    specialised = j.specialised;
    ncompiles++;
    kn__aot_parts_fini(&p);
  }
  kn__aot_joint_fini(&j);
  return st == KN_OK ? kn__aot_eager_compile(gm, ex, n, NULL, out) : st;
}

static kn_tensor *leaf(int64_t n, int64_t m, uint64_t seed) {
  kn_generator *g = kn_generator_new(seed);
  kn_tensor *t = kn_randn(KN_SHAPE(n, m), g, KN_FLOAT64);
  kn_generator_free(g);
  kn_set_requires_grad(t, true);
  return t;
}

static double max_diff(kn_tensor *a, kn_tensor *b) {
  cr_assert(a && b, "missing tensor (%s)", kn_last_error());
  double v = INFINITY;
  cr_assert_eq(kn_item_double(kn_amax(kn_abs(kn_sub(a, b)), NULL, 0, false), &v), KN_OK, "%s",
               kn_last_error());
  return v;
}

/* ---- the graphs of mean(relu(x) * b), b broadcast ------------------------------ */

static kn_tensor *mean_mul(kn_tensor *x, kn_tensor *b) { return kn_mean(kn_mul(kn_relu(x), b)); }

#define X "\"f64[s0, s1][s1, 1]cpu\""
#define B "\"f64[1, s2][s2, 1]cpu\""
#define XS ": " X " = "

/* mean's rule expands the tangent to x's sizes [s0, s1] and divides by the
** symbolic count s0*s1; mul's rule sums b's gradient over the broadcast dim
** (sum_to_size of [1, s1]). No size is a constant, no size is guarded. */
Test(aot_symbolic, joint_forward_and_backward_graphs_hold_symbols) {
  kn_scope_begin();
  kn_compile_options o = {.backend_fn = grab, .dynamic = KN_DYNAMIC_TRUE};
  kn_compiled *f = KN_COMPILE(mean_mul, &o);
  cr_assert(kn_call_t(f, leaf(4, 3, 1), leaf(1, 3, 2)), "%s", kn_last_error());
  cr_assert(joint_code && fw_code && bw_code);
  cr_expect_str_eq(joint_code,
      "class GraphModule(torch.nn.Module):\n"
      "    def forward(self, primals_1: " X ", primals_2: " B ", tangents_1: \"f64[][]cpu\"):\n"
      "        relu" XS "kiln.ops.relu(primals_1);  primals_1 = None\n"
      "        mul" XS "kiln.ops.mul(relu, primals_2)\n"
      "        mean: \"f64[][]cpu\" = kiln.ops.mean(mul);  mul = None\n"
      "        unsqueeze: \"f64[1][1]cpu\" = kiln.ops.unsqueeze(tangents_1, 0);  tangents_1 = None\n"
      "        unsqueeze_1: \"f64[1, 1][1, 1]cpu\" = kiln.ops.unsqueeze(unsqueeze, 1);  unsqueeze = None\n"
      "        expand: \"f64[s0, s1][0, 0]cpu\" = kiln.ops.expand(unsqueeze_1, [s0, s1]);  unsqueeze_1 = None\n"
      "        div" XS "kiln.ops.div(expand, s0*s1);  expand = None\n"
      "        mul_1" XS "kiln.ops.mul(div, primals_2);  primals_2 = None\n"
      "        mul_2" XS "kiln.ops.mul(div, relu);  div = None\n"
      "        sum_1: \"f64[1, s1][s1, 1]cpu\" = kiln.ops.sum(mul_2, [0], True);  mul_2 = None\n"
      "        threshold_backward" XS "kiln.ops.threshold_backward(mul_1, relu, 0);  mul_1 = relu = None\n"
      "        return (mean, threshold_backward, sum_1)\n        ");
  cr_expect_str_eq(fw_code,
      "class GraphModule(torch.nn.Module):\n"
      "    def forward(self, primals_1: " X ", primals_2: " B "):\n"
      "        relu" XS "kiln.ops.relu(primals_1)\n"
      "        mul" XS "kiln.ops.mul(relu, primals_2)\n"
      "        mean: \"f64[][]cpu\" = kiln.ops.mean(mul);  mul = None\n"
      "        return (mean, primals_1, primals_2, relu)\n        ");
  cr_expect_str_eq(bw_code,
      "class GraphModule(torch.nn.Module):\n"
      "    def forward(self, primals_1: " X ", primals_2: " B ", relu: " X ", tangents_1: \"f64[][]cpu\"):\n"
      "        unsqueeze: \"f64[1][1]cpu\" = kiln.ops.unsqueeze(tangents_1, 0);  tangents_1 = None\n"
      "        unsqueeze_1: \"f64[1, 1][1, 1]cpu\" = kiln.ops.unsqueeze(unsqueeze, 1);  unsqueeze = None\n"
      "        expand: \"f64[s0, s1][0, 0]cpu\" = kiln.ops.expand(unsqueeze_1, [s0, s1]);  unsqueeze_1 = None\n"
      "        div" XS "kiln.ops.div(expand, s0*s1);  expand = None\n"
      "        mul" XS "kiln.ops.mul(div, primals_2);  primals_2 = None\n"
      "        mul_1" XS "kiln.ops.mul(div, relu);  div = None\n"
      "        sum_1: \"f64[1, s1][s1, 1]cpu\" = kiln.ops.sum(mul_1, [0], True);  mul_1 = None\n"
      "        threshold_backward" XS "kiln.ops.threshold_backward(mul, relu, 0);  mul = relu = None\n"
      "        return (threshold_backward, sum_1)\n        ");
  cr_expect_not(specialised);
  forget();
  kn_compiled_free(f);
  kn_scope_end();
}

/* The same function at three sizes: one compile, eager's values and grads
** (the division by s0*s1 evaluated at each call's sizes). */
Test(aot_symbolic, one_compile_serves_three_sizes_with_eager_results) {
  kn_scope_begin();
  kn_compile_counter cc = {.inner = "aot_eager"};
  kn_compile_options o = {.backend_fn = kn_compile_counter_backend, .backend_ud = &cc,
                          .dynamic = KN_DYNAMIC_TRUE};
  kn_compiled *f = KN_COMPILE(mean_mul, &o);
  const int64_t sz[3][2] = {{4, 3}, {7, 5}, {2, 9}};
  for (int k = 0; k < 3; k++) {
    kn_tensor *x = leaf(sz[k][0], sz[k][1], 10 + k), *b = leaf(1, sz[k][1], 20 + k);
    kn_tensor *x2 = kn_detach(x), *b2 = kn_detach(b);
    kn_set_requires_grad(x2, true);
    kn_set_requires_grad(b2, true);
    kn_tensor *got = kn_call_t(f, x, b), *want = mean_mul(x2, b2);
    cr_assert(got && want, "%s", kn_last_error());
    cr_assert_eq(kn_backward(got, NULL), KN_OK, "%s", kn_last_error());
    cr_assert_eq(kn_backward(want, NULL), KN_OK, "%s", kn_last_error());
    cr_expect_leq(max_diff(got, want), 1e-15, "size %d", k);
    cr_expect_leq(max_diff(kn_grad(x), kn_grad(x2)), 1e-15, "size %d", k);
    cr_expect_leq(max_diff(kn_grad(b), kn_grad(b2)), 1e-15, "size %d", k);
  }
  cr_expect_eq(cc.frame_count, 1, "one compile for three sizes, got %d", cc.frame_count);
  kn_compiled_free(f);
  kn_scope_end();
}

/* ---- an MLP trained at two batch sizes with one compile ------------------------- */

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

/* One SGD step (lr 0.1) on p[4]: returns the loss; p becomes new leaves. */
static double sgd_step(kn_compiled *f, kn_tensor *x, kn_tensor *target, kn_tensor **p) {
  kn_tensor *loss = f ? kn_call_t(f, x, p[0], p[1], p[2], p[3], target)
                      : mlp_loss(x, p[0], p[1], p[2], p[3], target);
  cr_assert(loss, "%s", kn_last_error());
  cr_assert_eq(kn_backward(loss, NULL), KN_OK, "%s", kn_last_error());
  double v = NAN;
  kn_item_double(loss, &v);
  for (int i = 0; i < 4; i++) {
    cr_assert(kn_grad(p[i]), "no gradient for parameter %d", i);
    kn_tensor *np = kn_detach(kn_sub(kn_detach(p[i]), kn_mul_scalar(kn_grad(p[i]), kn_float(0.1))));
    kn_set_requires_grad(np, true);
    p[i] = np;
  }
  return v;
}

Test(aot_symbolic, mlp_trained_at_two_batch_sizes_with_one_compile_and_eager_losses) {
  kn_scope_begin();
  kn_compile_counter cc = {.inner = "aot_eager"};
  kn_compile_options o = {.backend_fn = kn_compile_counter_backend, .backend_ud = &cc,
                          .dynamic = KN_DYNAMIC_TRUE};
  kn_compiled *f = KN_COMPILE(mlp_loss, &o);
  kn_tensor *pc[4] = {param(KN_SHAPE(8, 4), 1), param(KN_SHAPE(8), 2), param(KN_SHAPE(3, 8), 3),
                      param(KN_SHAPE(3), 4)};
  kn_tensor *pe[4];
  for (int i = 0; i < 4; i++) {
    pe[i] = kn_detach(pc[i]);
    kn_set_requires_grad(pe[i], true);
  }
  const int64_t batch[4] = {16, 16, 11, 11};
  for (int step = 0; step < 4; step++) {
    kn_generator *g = kn_generator_new(30 + (uint64_t)step);
    kn_tensor *x = kn_randn(KN_SHAPE(batch[step], 4), g, KN_FLOAT64);
    kn_tensor *target = kn_randn(KN_SHAPE(batch[step], 3), g, KN_FLOAT64);
    kn_generator_free(g);
    double lc = sgd_step(f, x, target, pc), le = sgd_step(NULL, x, target, pe);
    cr_expect(fabs(lc - le) <= 1e-12 * fabs(le), "step %d: loss %.17g, eager %.17g", step, lc, le);
    for (int i = 0; i < 4; i++)
      cr_expect_leq(max_diff(pc[i], pe[i]), 1e-12, "step %d, parameter %d", step, i);
  }
  cr_expect_eq(cc.frame_count, 1, "one compile for batches 16 and 11, got %d", cc.frame_count);
  kn_compiled_free(f);
  kn_scope_end();
}

/* ---- aot_graphs: the forward and backward graphs carry the symbols -------------- */

static void run_dynamic(void) {
  kn_compile_options o = {.backend = "aot_eager", .dynamic = KN_DYNAMIC_TRUE};
  kn_compiled *f = KN_COMPILE(mean_mul, &o);
  kn_tensor *r = kn_call_t(f, leaf(4, 3, 1), leaf(1, 3, 2));
  cr_assert(r, "%s", kn_last_error());
  kn_compiled_free(f);
}

Test(aot_symbolic, traced_forward_and_backward_graphs_print_symbolic_sizes) {
  kn_scope_begin();
  char *dir = kn_test_trace_start();
  run_dynamic();
  uint64_t defects = 99;
  char *all = kn_test_dyn_trace(false, &defects);
  char *fw = kn_test_dyn_payload("aot_forward_graph", 0);
  char *bw = kn_test_dyn_payload("aot_backward_graph", 0);
  kn_trace_disable();
  kn_test_rmdir(dir);
  cr_expect_eq(defects, 0);
  cr_assert(fw && bw, "%s", all);
  cr_expect(strstr(fw, "primals_1: " X), "%s", fw);
  cr_expect(strstr(bw, "kiln.ops.expand(unsqueeze_1, [s0, s1])"), "%s", bw);
  cr_expect(strstr(bw, "kiln.ops.div(expand, s0*s1)"), "%s", bw);
  free(fw);
  free(bw);
  free(all);
  kn_scope_end();
}

/* ---- a rule that reads a size as a plain int specialises --------------------------- */

/* as_strided's rule passes its input's sizes and strides as plain ints
** (_as_strided_backward's SymInt[] arguments): the joint graph is
** specialised to the traced sizes, so another size recompiles, and both
** sizes give eager's gradients. Without the specialisation the graph would
** hand back a gradient of the first size's shape at the second size. */
static kn_tensor *strided_sin(kn_tensor *x) {
  return kn_sin(kn_as_strided(x, 2, (int64_t[]){2, 2}, (int64_t[]){1, 2}, 1));
}

/* as_strided's rule passes its input's geometry as symbolic ints
** (_as_strided_backward(grad, [s0, s1], [s1, 1], 0, [2, 2], [1, 2], 1)):
** the joint graph is not specialised, one compile serves both sizes with
** eager's values and gradients. (It read the input's sizes as plain ints,
** specialised the joint graph and recompiled at the second size.) */
Test(aot_symbolic, as_strided_backward_stays_symbolic) {
  kn_scope_begin();
  ncompiles = 0;
  kn_compile_options o = {.backend_fn = grab, .dynamic = KN_DYNAMIC_TRUE};
  kn_compiled *f = KN_COMPILE(strided_sin, &o);
  for (int64_t n = 3; n <= 5; n += 2) {
    kn_tensor *x = leaf(n, 4, 1);
    kn_tensor *x2 = kn_detach(x);
    kn_set_requires_grad(x2, true);
    kn_tensor *got = kn_call_t(f, x), *want = strided_sin(x2);
    cr_assert(got && want, "%s", kn_last_error());
    cr_assert_eq(kn_backward(kn_sum(kn_mul(got, got)), NULL), KN_OK, "%s", kn_last_error());
    cr_assert_eq(kn_backward(kn_sum(kn_mul(want, want)), NULL), KN_OK, "%s", kn_last_error());
    cr_expect_leq(max_diff(got, want), 1e-15, "n = %lld", (long long)n);
    cr_expect_leq(max_diff(kn_grad(x), kn_grad(x2)), 1e-15, "n = %lld", (long long)n);
  }
  cr_expect_not(specialised, "the joint graph is not specialised");
  cr_expect_eq(ncompiles, 1, "one compile for both sizes, got %d", ncompiles);
  cr_assert(bw_code);
  cr_expect(strstr(bw_code, "kiln.ops._as_strided_backward(mul, [s0, s1], [s1, 1], 0, [2, 2], [1, 2], 1)"),
            "%s", bw_code);
  forget();
  kn_compiled_free(f);
  kn_scope_end();
}

/* cat's rule slices the gradient at offsets that are sums of symbolic sizes:
** one compile for two sizes, eager's gradients. */
static kn_tensor *cat_sin(kn_tensor *x, kn_tensor *y) {
  kn_tensor *v[2] = {x, y};
  return kn_sin(kn_cat(v, 2, 0));
}

Test(aot_symbolic, cat_backward_slices_at_symbolic_offsets) {
  kn_scope_begin();
  ncompiles = 0;
  kn_compile_options o = {.backend_fn = grab, .dynamic = KN_DYNAMIC_TRUE};
  kn_compiled *f = KN_COMPILE(cat_sin, &o);
  for (int64_t n = 3; n <= 5; n += 2) {
    kn_tensor *x = leaf(n, 4, 1), *y = leaf(n + 1, 4, 2);
    kn_tensor *x2 = kn_detach(x), *y2 = kn_detach(y);
    kn_set_requires_grad(x2, true);
    kn_set_requires_grad(y2, true);
    kn_tensor *got = kn_call_t(f, x, y), *want = cat_sin(x2, y2);
    cr_assert(got && want, "%s", kn_last_error());
    cr_assert_eq(kn_backward(kn_sum(kn_mul(got, got)), NULL), KN_OK, "%s", kn_last_error());
    cr_assert_eq(kn_backward(kn_sum(kn_mul(want, want)), NULL), KN_OK, "%s", kn_last_error());
    cr_expect_leq(max_diff(kn_grad(x), kn_grad(x2)), 1e-15, "n = %lld", (long long)n);
    cr_expect_leq(max_diff(kn_grad(y), kn_grad(y2)), 1e-15, "n = %lld", (long long)n);
  }
  cr_expect_not(specialised);
  cr_expect(bw_code && strstr(bw_code, "kiln.ops.slice(mul, 0, s0, s0 + s2, 1)"), "%s", bw_code);
  cr_expect_eq(ncompiles, 1, "one compile for two sizes, got %d", ncompiles);
  forget();
  kn_compiled_free(f);
  kn_scope_end();
}

/* narrow from the end: the composite passes the negative start on to slice
** (resolved over the symbolic size), so slice's rule, which forwards its
** bounds as known values, scatters at s0 - 2 at every size. */
static kn_tensor *narrow_end(kn_tensor *x) { return kn_sin(kn_narrow(x, 0, -2, 2)); }

Test(aot_symbolic, narrow_from_the_end_stays_symbolic) {
  kn_scope_begin();
  ncompiles = 0;
  kn_compile_options o = {.backend_fn = grab, .dynamic = KN_DYNAMIC_TRUE};
  kn_compiled *f = KN_COMPILE(narrow_end, &o);
  for (int64_t n = 3; n <= 6; n += 3) {
    kn_tensor *x = leaf(n, 4, 1);
    kn_tensor *x2 = kn_detach(x);
    kn_set_requires_grad(x2, true);
    kn_tensor *got = kn_call_t(f, x), *want = narrow_end(x2);
    cr_assert(got && want, "%s", kn_last_error());
    cr_assert_eq(kn_backward(kn_sum(kn_mul(got, got)), NULL), KN_OK, "%s", kn_last_error());
    cr_assert_eq(kn_backward(kn_sum(kn_mul(want, want)), NULL), KN_OK, "%s", kn_last_error());
    cr_expect_leq(max_diff(got, want), 1e-15, "n = %lld", (long long)n);
    cr_expect_leq(max_diff(kn_grad(x), kn_grad(x2)), 1e-15, "n = %lld", (long long)n);
  }
  cr_expect_not(specialised);
  cr_expect_eq(ncompiles, 1, "one compile for two sizes, got %d", ncompiles);
  forget();
  kn_compiled_free(f);
  kn_scope_end();
}

/* embedding's rule passes the weight's row count as a symbol and layer
** norm's rule forwards its normalized shape as a known constant: the table
** of rows grows from 3 to 5 with one compile and eager's gradients. */
static kn_tensor *embed_norm(kn_tensor *w, kn_tensor *idx) {
  kn_tensor *e = kn_embedding(idx, w, KN_NO_PADDING_IDX, false);
  return kn_sin(kn_layer_norm(e, 1, (int64_t[]){4}, NULL, NULL, 1e-5));
}

Test(aot_symbolic, embedding_and_layer_norm_rules_stay_symbolic) {
  kn_scope_begin();
  ncompiles = 0;
  kn_compile_options o = {.backend_fn = grab, .dynamic = KN_DYNAMIC_TRUE};
  kn_compiled *f = KN_COMPILE(embed_norm, &o);
  kn_tensor *idx = kn_from_array((int64_t[]){0, 2, 2}, KN_SHAPE(3), KN_INT64);
  for (int64_t n = 3; n <= 5; n += 2) {
    kn_tensor *w = leaf(n, 4, 1);
    kn_tensor *w2 = kn_detach(w);
    kn_set_requires_grad(w2, true);
    kn_tensor *got = kn_call_t(f, w, idx), *want = embed_norm(w2, idx);
    cr_assert(got && want, "%s", kn_last_error());
    cr_assert_eq(kn_backward(kn_sum(kn_mul(got, got)), NULL), KN_OK, "%s", kn_last_error());
    cr_assert_eq(kn_backward(kn_sum(kn_mul(want, want)), NULL), KN_OK, "%s", kn_last_error());
    cr_expect_leq(max_diff(got, want), 1e-15, "n = %lld", (long long)n);
    cr_expect_leq(max_diff(kn_grad(w), kn_grad(w2)), 1e-14, "n = %lld", (long long)n);
  }
  cr_expect_not(specialised);
  cr_expect(bw_code && strstr(bw_code, "kiln.ops.embedding_dense_backward("), "%s", bw_code);
  cr_expect_eq(ncompiles, 1, "one compile for two table sizes, got %d", ncompiles);
  forget();
  kn_compiled_free(f);
  kn_scope_end();
}

/* batch_norm's and embedding's meta functions give their outputs the
** input's symbolic sizes ([s0, s1] and [3, s1] for x of [s0, s1]), so the
** joint graph needs no guard on them (constant [5, 6] outputs met x's
** gradient [s0, s1] in an add: a guard on s0, s1, a recompile at 7 x 9). */
static kn_tensor *norm_embed(kn_tensor *x, kn_tensor *idx) {
  kn_tensor *bn = kn_batch_norm(x, NULL, NULL, NULL, NULL, true, 0.1, 1e-5);
  return kn_mul(bn, kn_sum(kn_sin(kn_embedding(idx, x, KN_NO_PADDING_IDX, false))));
}

Test(aot_symbolic, batch_norm_and_embedding_outputs_keep_symbolic_sizes) {
  kn_scope_begin();
  ncompiles = 0;
  kn_compile_options o = {.backend_fn = grab, .dynamic = KN_DYNAMIC_TRUE};
  kn_compiled *f = KN_COMPILE(norm_embed, &o);
  kn_tensor *idx = kn_from_array((int64_t[]){0, 2, 2}, KN_SHAPE(3), KN_INT64);
  static const int64_t sz[2][2] = {{5, 6}, {7, 9}};
  for (int k = 0; k < 2; k++) {
    kn_tensor *x = leaf(sz[k][0], sz[k][1], 60 + k), *x2 = kn_detach(x);
    kn_set_requires_grad(x2, true);
    kn_tensor *got = kn_call_t(f, x, idx), *want = norm_embed(x2, idx);
    cr_assert(got && want, "size %d: %s", k, kn_last_error());
    cr_assert_eq(kn_backward(kn_sum(kn_mul(got, got)), NULL), KN_OK, "%s", kn_last_error());
    cr_assert_eq(kn_backward(kn_sum(kn_mul(want, want)), NULL), KN_OK, "%s", kn_last_error());
    cr_expect_leq(max_diff(got, want), 1e-12, "size %d", k);
    cr_expect_leq(max_diff(kn_grad(x), kn_grad(x2)), 1e-12, "size %d", k);
  }
  cr_expect_eq(ncompiles, 1, "one compile for both sizes, got %d", ncompiles);
  cr_assert(fw_code);
  cr_expect(strstr(fw_code, "getitem: \"f64[s0, s1][s1, 1]cpu\" = native_batch_norm[0]"), "%s", fw_code);
  cr_expect(strstr(fw_code, "embedding: \"f64[s2, s1][s1, 1]cpu\" = kiln.ops.embedding("), "%s", fw_code);
  forget();
  kn_compiled_free(f);
  kn_scope_end();
}

/* layer_norm over the last dim of x [s0, 6]: its meta function gives the
** output x's symbolic sizes and mean/rstd [s0, 1], one compile for 5 and 7
** rows. */
static kn_tensor *norm_rows(kn_tensor *x) {
  kn_tensor *ln = kn_layer_norm(x, 1, (int64_t[]){6}, NULL, NULL, 1e-5);
  return kn_mul(ln, kn_sum(kn_sin(x)));
}

Test(aot_symbolic, layer_norm_outputs_keep_symbolic_sizes) {
  kn_scope_begin();
  ncompiles = 0;
  kn_compile_options o = {.backend_fn = grab, .dynamic = KN_DYNAMIC_TRUE};
  kn_compiled *f = KN_COMPILE(norm_rows, &o);
  for (int64_t n = 5; n <= 7; n += 2) {
    kn_tensor *x = leaf(n, 6, 70 + n), *x2 = kn_detach(x);
    kn_set_requires_grad(x2, true);
    kn_tensor *got = kn_call_t(f, x), *want = norm_rows(x2);
    cr_assert(got && want, "n = %lld: %s", (long long)n, kn_last_error());
    cr_assert_eq(kn_backward(kn_sum(kn_mul(got, got)), NULL), KN_OK, "%s", kn_last_error());
    cr_assert_eq(kn_backward(kn_sum(kn_mul(want, want)), NULL), KN_OK, "%s", kn_last_error());
    cr_expect_leq(max_diff(got, want), 1e-12, "n = %lld", (long long)n);
    cr_expect_leq(max_diff(kn_grad(x), kn_grad(x2)), 1e-12, "n = %lld", (long long)n);
  }
  cr_expect_eq(ncompiles, 1, "one compile for both sizes, got %d", ncompiles);
  cr_assert(fw_code);
  cr_expect(strstr(fw_code, "getitem_1: \"f64[s0, 1][1, 1]cpu\" = native_layer_norm[1]"), "%s", fw_code);
  forget();
  kn_compiled_free(f);
  kn_scope_end();
}

/* A convolution with a bias trained at batch sizes 2 and 3: convolution's
** rule passes the bias size as a symbol and forwards its padding as known
** constants, so one compile serves both batches with eager's gradients. */
static kn_tensor *conv_sum(kn_tensor *x, kn_tensor *w, kn_tensor *b) {
  const int64_t one[2] = {1, 1};
  return kn_sum(kn_sin(kn_conv2d(x, w, b, one, one, one, 1)));
}

static kn_tensor *leaf_nd(int nd, const int64_t *sz, uint64_t seed) {
  kn_generator *g = kn_generator_new(seed);
  kn_tensor *t = kn_randn(nd, sz, g, KN_FLOAT64);
  kn_generator_free(g);
  kn_set_requires_grad(t, true);
  return t;
}

static kn_tensor *twin(kn_tensor *t) {
  kn_tensor *c = kn_detach(t);
  kn_set_requires_grad(c, true);
  return c;
}

Test(aot_symbolic, conv2d_serves_two_batch_sizes_with_one_compile) {
  kn_scope_begin();
  ncompiles = 0;
  kn_compile_options o = {.backend_fn = grab, .dynamic = KN_DYNAMIC_TRUE};
  kn_compiled *f = KN_COMPILE(conv_sum, &o);
  kn_tensor *w = leaf_nd(KN_SHAPE(3, 2, 3, 3), 5), *b = leaf_nd(KN_SHAPE(3), 6);
  for (int64_t n = 2; n <= 3; n++) {
    kn_tensor *x = leaf_nd(KN_SHAPE(n, 2, 5, 5), 7);
    kn_tensor *x2 = twin(x), *w2 = twin(w), *b2 = twin(b);
    kn_tensor *got = kn_call_t(f, x, w, b), *want = conv_sum(x2, w2, b2);
    cr_assert(got && want, "%s", kn_last_error());
    kn_tensor *in[3] = {x, w, b}, *in2[3] = {x2, w2, b2}, *gr[3], *gr2[3];
    cr_assert_eq(kn_autograd_grad(&got, 1, in, 3, NULL, false, false, false, gr), KN_OK, "%s",
                 kn_last_error());
    cr_assert_eq(kn_autograd_grad(&want, 1, in2, 3, NULL, false, false, false, gr2), KN_OK, "%s",
                 kn_last_error());
    cr_expect_leq(max_diff(got, want), 1e-12, "n = %lld", (long long)n);
    for (int i = 0; i < 3; i++)
      cr_expect_leq(max_diff(gr[i], gr2[i]), 1e-12, "n = %lld, input %d", (long long)n, i);
  }
  cr_expect_not(specialised);
  cr_expect_eq(ncompiles, 1, "one compile for two batch sizes, got %d", ncompiles);
  forget();
  kn_compiled_free(f);
  kn_scope_end();
}

/* ---- both graphs compiled by the code generator --------------------------------- */

#include "inductor/inductor.h"

static kn_status aot_inductor(kn_graph_module *gm, kn_tensor *const *ex, int n, void *ud,
                              kn_compiled_graph *out) {
  (void)ud;
  kn__aot_config cfg = {.fw_compiler = kn__inductor_compile, .bw_compiler = kn__inductor_compile};
  ncompiles++;
  return kn__aot_compile(gm, ex, n, &cfg, out);
}

/* The backward graph divides by s0*s1 (a symbolic int in div's Scalar
** argument): compiled code evaluates it at each call's sizes. */
Test(aot_symbolic, inductor_runs_the_symbolic_graphs_at_two_sizes) {
  kn_scope_begin();
  ncompiles = 0;
  kn_compile_options o = {.backend_fn = aot_inductor, .dynamic = KN_DYNAMIC_TRUE};
  kn_compiled *f = KN_COMPILE(mean_mul, &o);
  for (int k = 0; k < 2; k++) {
    kn_tensor *x = leaf(4 + 3 * k, 3 + k, 10 + k), *b = leaf(1, 3 + k, 20 + k);
    kn_tensor *x2 = kn_detach(x), *b2 = kn_detach(b);
    kn_set_requires_grad(x2, true);
    kn_set_requires_grad(b2, true);
    kn_tensor *got = kn_call_t(f, x, b), *want = mean_mul(x2, b2);
    cr_assert(got && want, "%s", kn_last_error());
    cr_assert_eq(kn_backward(got, NULL), KN_OK, "%s", kn_last_error());
    cr_assert_eq(kn_backward(want, NULL), KN_OK, "%s", kn_last_error());
    cr_expect_leq(max_diff(got, want), 1e-15, "size %d", k);
    cr_expect_leq(max_diff(kn_grad(x), kn_grad(x2)), 1e-15, "size %d", k);
    cr_expect_leq(max_diff(kn_grad(b), kn_grad(b2)), 1e-15, "size %d", k);
  }
  cr_expect_eq(ncompiles, 1);
  kn_compiled_free(f);
  kn_scope_end();
}

/* x[argmax(x, 0)] * sum(sin(x)): the index has x's column count, the result
** [s1, s1]. Compiled at [5, 6] and called at [7, 9]: eager's values and
** gradients at both sizes, one compile. */
static kn_tensor *index_chain(kn_tensor *x) {
  kn_tensor *i = kn_argmax_dim(x, 0, false);
  return kn_mul(kn_index(x, &i, 1), kn_sum(kn_sin(x)));
}

Test(aot_symbolic, inductor_runs_an_index_chain_at_two_sizes) {
  kn_scope_begin();
  ncompiles = 0;
  kn_compile_options o = {.backend_fn = aot_inductor, .dynamic = KN_DYNAMIC_TRUE};
  kn_compiled *f = KN_COMPILE(index_chain, &o);
  static const int64_t sz[2][2] = {{5, 6}, {7, 9}};
  for (int k = 0; k < 2; k++) {
    kn_tensor *x = leaf(sz[k][0], sz[k][1], 30 + k), *x2 = kn_detach(x);
    kn_set_requires_grad(x2, true);
    kn_tensor *got = kn_call_t(f, x), *want = index_chain(x2);
    cr_assert(got && want, "size %d: %s", k, kn_last_error());
    cr_assert_eq(kn_backward(kn_sum(kn_mul(got, got)), NULL), KN_OK, "%s", kn_last_error());
    cr_assert_eq(kn_backward(kn_sum(kn_mul(want, want)), NULL), KN_OK, "%s", kn_last_error());
    cr_expect_leq(max_diff(got, want), 1e-12, "size %d", k);
    cr_expect_leq(max_diff(kn_grad(x), kn_grad(x2)), 1e-12, "size %d", k);
  }
  cr_expect_eq(ncompiles, 1);
  kn_compiled_free(f);
  kn_scope_end();
}
/* ---- size lists of the functional graph, replayed by the joint trace -------- */

/* Functionalize, trace the joint graph of the functional graph and keep its
** code, then compile with aot_eager (which traces again and adds the guards). */
static kn_status grab_functional(kn_graph_module *gm, kn_tensor *const *ex, int n, void *ud,
                                 kn_compiled_graph *out) {
  kn__graph *fg = NULL;
  kn__aot_plan plan;
  kn_status st = kn__aot_functionalize(kn__graph_module_graph(gm), &fg, &plan);
  if (st != KN_OK) return st;
  bool rg[8] = {false};
  for (int i = 0; i < n && i < 8; i++) rg[i] = kn_requires_grad(ex[i]);
  kn__aot_joint j;
  st = kn__aot_trace_joint(fg, rg, n, false, &j);
  if (st == KN_OK) {
    forget();
    joint_code = kn__graph_code(j.g, NULL);
    ncompiles++;
    kn__aot_joint_fini(&j);
  }
  kn__aot_plan_fini(&plan);
  kn__graph_free(fg);
  return st == KN_OK ? kn__aot_eager_compile(gm, ex, n, ud, out) : st;
}

/* c[:, 1:3] = v with v of [1, 2]: functionalization broadcasts v with
** expand(v, [s0, 2]), a size list of the functional graph. The joint trace
** replays that graph with the interpreter on symbolic tensors, which passes
** the list with its symbols: the joint graph keeps [s0, 2] (the traced
** [5, 2] made slice_scatter guard s0 == 5, and so a recompile at 7 rows). */
static kn_tensor *setitem_row(kn_tensor *x, kn_tensor *y) {
  kn_tensor *c = kn_clone(x);
  if (kn_setitem_slice(c, 1, 1, 3, 1, kn_narrow(y, 1, 0, 2)) != KN_OK) return NULL;
  return kn_mul(c, c);
}

Test(aot_symbolic, a_functional_size_list_stays_symbolic_in_the_joint_graph) {
  kn_scope_begin();
  ncompiles = 0;
  kn_compile_options o = {.backend_fn = grab_functional, .dynamic = KN_DYNAMIC_TRUE};
  kn_compiled *f = KN_COMPILE(setitem_row, &o);
  static const int64_t sz[2][2] = {{5, 6}, {7, 9}};
  for (int k = 0; k < 2; k++) {
    kn_tensor *x = leaf(sz[k][0], sz[k][1], 40 + k), *y = leaf(1, sz[k][1], 50 + k);
    kn_tensor *x2 = kn_detach(x), *y2 = kn_detach(y);
    kn_set_requires_grad(x2, true);
    kn_set_requires_grad(y2, true);
    kn_tensor *got = kn_call_t(f, x, y), *want = setitem_row(x2, y2);
    cr_assert(got && want, "size %d: %s", k, kn_last_error());
    cr_assert_eq(kn_backward(kn_sum(got), NULL), KN_OK, "%s", kn_last_error());
    cr_assert_eq(kn_backward(kn_sum(want), NULL), KN_OK, "%s", kn_last_error());
    cr_expect_leq(max_diff(got, want), 1e-15, "size %d", k);
    cr_expect_leq(max_diff(kn_grad(x), kn_grad(x2)), 1e-15, "size %d", k);
    cr_expect_leq(max_diff(kn_grad(y), kn_grad(y2)), 1e-15, "size %d", k);
  }
  cr_expect_eq(ncompiles, 1, "one compile serves both sizes, got %d", ncompiles);
  cr_assert(joint_code);
  cr_expect(strstr(joint_code, "kiln.ops.expand(slice_1, [s0, 2])"), "%s", joint_code);
  cr_expect(strstr(joint_code, "kiln.ops.full([s0, 2], 0"), "%s", joint_code);
  forget();
  kn_compiled_free(f);
  kn_scope_end();
}
