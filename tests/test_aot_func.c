/*
** test_aot_func.c: functionalization and the runtime plan of AOT autograd
** ("aot_eager"), with the seed test_aot_autograd.py's cases ported to C
** (each test is named after its seed test). Every case runs the function
** eagerly on copies of the inputs and compares: the outputs, the caller's
** tensors after the call (mutated inputs written back exactly once: one
** version bump per mutated input), gradients, grad_fns, and, where the seed
** shows them, literal functional graphs and the plan.
*/
#include <criterion/criterion.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "aot/aot.h"
#include "kiln/compile.h"
#include "kiln/kiln.h"
#include "support/dynamo_util.h"
#include "support/trace_util.h"
#include "tensor/tensor.h"

/* The AOT cache in memory only (KILN_AOT_DISK_CACHE=0): an entry on disk
** from an earlier run would turn a miss these tests expect in the trace
** into a hit. */
static void setup(void) {
  unsetenv("KILN_CACHE_DIR");
  setenv("KILN_AOT_DISK_CACHE", "0", 1);
  kn_test_dynamo_setup();
}

TestSuite(aot_func, .init = setup, .fini = kn_test_dynamo_teardown);

static const kn_compile_options aot = {.backend = "aot_eager"};

static kn_tensor *randn(int ndim, const int64_t *sizes, uint64_t seed) {
  kn_generator *g = kn_generator_new(seed);
  kn_tensor *t = kn_randn(ndim, sizes, g, KN_FLOAT32);
  kn_generator_free(g);
  return t;
}

static kn_tensor *copy_of(kn_tensor *t) { return kn_detach(kn_clone(t)); }

static kn_tensor *as_f64(kn_tensor *t) { return kn_to(kn_detach(t), KN_FLOAT64); }

static void expect_equal(kn_tensor *a, kn_tensor *b, const char *what) {
  cr_assert(a && b, "%s: missing tensor (%s)", what, kn_last_error());
  cr_assert_eq(a->ndim, b->ndim, "%s: rank", what);
  for (int d = 0; d < a->ndim; d++) cr_assert_eq(a->sizes[d], b->sizes[d], "%s: size %d", what, d);
  double v = INFINITY;
  kn_tensor *d = kn_sub(as_f64(a), as_f64(b));
  cr_assert_eq(kn_item_double(kn_amax(kn_abs(d), NULL, 0, false), &v), KN_OK, "%s", kn_last_error());
  cr_expect_eq(v, 0.0, "%s: values differ by %g", what, v);
}

static unsigned long version_of(const kn_tensor *t) { return atomic_load(&t->storage->version); }

/* ---- the functional graph and plan of a captured graph ------------------------------ */

static kn__graph *grabbed;
static kn_status grab(kn_graph_module *gm, kn_tensor *const *ex, int n, void *ud,
                      kn_compiled_graph *out) {
  (void)ud;
  kn__graph_free(grabbed);
  grabbed = kn__graph_copy(kn__graph_module_graph(gm));
  return kn__aot_eager_compile(gm, ex, n, NULL, out);
}

/* Functionalize the last graph grab() saw: its code (owned) and plan. */
static char *functional_code(kn__aot_plan *plan) {
  cr_assert(grabbed);
  kn__graph *fg = NULL;
  cr_assert_eq(kn__aot_functionalize(grabbed, &fg, plan), KN_OK, "%s", kn_last_error());
  kn__gprint_opts po = {false, false};
  char *c = kn__graph_code(fg, &po);
  kn__graph_free(fg);
  kn__graph_free(grabbed);
  grabbed = NULL;
  return c;
}

/* ---- test_mutation ------------------------------------------------------------------- */

/* param.add_(y) under no_grad on a parameter (a leaf that requires grad). */
static kn_tensor *mutate_param(kn_tensor *param, kn_tensor *y) {
  bool prev = kn_set_grad_enabled(false);
  kn_add_(param, y);
  kn_set_grad_enabled(prev);
  return y;
}

Test(aot_func, test_mutation) {
  kn_scope_begin();
  kn_tensor *y = randn(KN_SHAPE(4), 1), *x = randn(KN_SHAPE(4), 2);
  kn_set_requires_grad(x, true);
  kn_tensor *xe = copy_of(x), *ye = copy_of(y);
  kn_set_requires_grad(xe, true);
  kn_tensor *want = mutate_param(xe, ye);
  unsigned long v0 = version_of(x);
  kn_compiled *f = KN_COMPILE(mutate_param, &aot);
  kn_tensor *got = kn_call_t(f, x, y);
  cr_assert(got, "%s", kn_last_error()); /* no error: a leaf mutated under no_grad */
  expect_equal(x, xe, "param after the call");
  expect_equal(got, want, "output");
  cr_expect_eq(got, y, "the output is the input y itself, as eagerly");
  cr_expect_eq(version_of(x), v0 + 1, "one write-back");
  cr_expect(x->requires_grad);
  cr_expect_null(kn_grad_fn_name(x), "still a leaf");
  kn_compiled_free(f);
  kn_scope_end();
}

/* Graph code without the source-location comments, the placeholder
** bindings and blank lines. */
static char *strip_locations(char *code) {
  char *w = code, line[1024];
  for (char *p = code; *p;) {
    char *nl = strchr(p, '\n');
    size_t n = nl ? (size_t)(nl - p) + 1 : strlen(p);
    snprintf(line, sizeof line, "%.*s", (int)n, p);
    bool keep = strspn(line, " \n") < n && !strstr(line, "# File:") && !strstr(line, "# No stack") &&
                !strstr(line, "= L_");
    if (keep) {
      memmove(w, p, n);
      w += n;
    }
    p += n;
  }
  *w = 0;
  return code;
}

/* The seed's fn returns y (an input: dynamo returns it without the graph);
** the graph holds the mutation alone: add + a write-back of input 0 under
** no_grad. */
Test(aot_func, test_mutation_functional_graph_and_plan) {
  kn_scope_begin();
  kn_tensor *y = randn(KN_SHAPE(4), 1), *x = randn(KN_SHAPE(4), 2);
  kn_set_requires_grad(x, true);
  kn_compile_options o = {.backend_fn = grab, .dynamic = KN_DYNAMIC_FALSE};
  kn_compiled *f = KN_COMPILE(mutate_param, &o);
  cr_assert(kn_call_t(f, x, y), "%s", kn_last_error());
  kn__aot_plan plan;
  char *code = strip_locations(functional_code(&plan));
  cr_expect_str_eq(code, "class GraphModule(torch.nn.Module):\n"
                         "    def forward(self, L_a_: \"f32[4]\", L_b_: \"f32[4]\"):\n"
                         "        add: \"f32[4]\" = kiln.ops.add(l_a_, l_b_);  l_a_ = l_b_ = None\n"
                         "        return (add,)\n");
  cr_expect_eq(plan.nmutated, 1);
  cr_expect_eq(plan.mutations[0].input, 0);
  cr_expect_not(plan.mutations[0].with_grad);
  cr_expect(plan.inputs[0].mutates_data);
  cr_expect(plan.inputs[0].mutated_under_no_grad);
  cr_expect_not(plan.inputs[1].mutates_data);
  cr_expect_eq(plan.nuser, 0);
  char *dump = kn__aot_plan_str(&plan, true);
  cr_expect_str_eq(dump,
      "ViewAndMutationMeta(input_info=[InputAliasInfo(mutates_data=True, mutates_metadata=False, "
      "mutations_under_no_grad_or_inference_mode=True),\n"
      "                                InputAliasInfo(mutates_data=False, mutates_metadata=False, "
      "mutations_under_no_grad_or_inference_mode=False)],\n"
      "                    output_info=[],\n"
      "                    write_backs=[input 0 <- copy_(under no_grad)],\n"
      "                    num_mutated_inp_runtime_indices=1,\n"
      "                    num_intermediate_bases=0,\n"
      "                    is_train=True)\n");
  free(dump);
  free(code);
  kn__aot_plan_fini(&plan);
  kn_compiled_free(f);
  kn_scope_end();
}

/* ---- test_mutation1 / test_negative_testing_mutation ---------------------------------- */

/* getitem = scores[:, :, :256, :257]; stack0[:, :-1, :, 256:] = getitem;
** return stack0.view(1, 12, 1024, 513). */
static kn_tensor *setitem_then_view(kn_tensor *stack0, kn_tensor *scores, bool sin_first) {
  kn_tensor *getitem = kn_slice(kn_slice(scores, 2, 0, 256, 1), 3, 0, 257, 1);
  if (sin_first) stack0 = kn_sin(stack0);
  kn_setitem_slice(kn_slice(stack0, 1, 0, -1, 1), 3, 256, KN_SLICE_END, 1, getitem);
  return kn_view(stack0, KN_SHAPE(1, 12, 1024, 513));
}
static kn_tensor *mutation1(kn_tensor *s, kn_tensor *d) { return setitem_then_view(s, d, false); }
static kn_tensor *negative_mutation(kn_tensor *s, kn_tensor *d) { return setitem_then_view(s, d, true); }

static void run_setitem_case(kn_tensor *(*fn)(kn_tensor *, kn_tensor *), bool mutates) {
  kn_scope_begin();
  kn_tensor *x = randn(KN_SHAPE(12, 4, 256, 513), 3), *y = randn(KN_SHAPE(12, 3, 512, 513), 4);
  kn_tensor *xe = copy_of(x), *ye = copy_of(y), *x0 = copy_of(x);
  kn_tensor *want = fn(xe, ye);
  unsigned long v0 = version_of(x);
  kn_compiled *f = KN_COMPILE(fn, &aot);
  kn_tensor *got = kn_call_t(f, x, y);
  expect_equal(got, want, "output");
  expect_equal(x, xe, "stack0 after the call");
  cr_expect_eq(version_of(x), v0 + (mutates ? 1 : 0));
  if (mutates) cr_expect(kn_same_storage(got, x), "the output is a view of the input, as eagerly");
  else expect_equal(x, x0, "stack0 unchanged");
  kn_compiled_free(f);
  kn_scope_end();
}

Test(aot_func, test_mutation1) { run_setitem_case(mutation1, true); }
Test(aot_func, test_negative_testing_mutation) { run_setitem_case(negative_mutation, false); }

/* The write into a slice of a slice of an input is replayed on the input
** with nested slice_scatter ops (a literal graph at small sizes). */
static kn_tensor *nested_setitem(kn_tensor *x, kn_tensor *v) {
  kn_setitem_slice(kn_slice(x, 0, 0, -1, 1), 1, 1, KN_SLICE_END, 1, v);
  return kn_mul_scalar(x, kn_float(2));
}

Test(aot_func, mutation_through_views_uses_scatter_ops) {
  kn_scope_begin();
  kn_compile_options o = {.backend_fn = grab, .dynamic = KN_DYNAMIC_FALSE};
  kn_compiled *f = KN_COMPILE(nested_setitem, &o);
  kn_tensor *x = randn(KN_SHAPE(3, 4), 5), *v = randn(KN_SHAPE(2, 3), 6);
  kn_tensor *xe = copy_of(x), *want = nested_setitem(xe, v);
  expect_equal(kn_call_t(f, x, v), want, "output");
  expect_equal(x, xe, "x after the call");
  kn__aot_plan plan;
  char *code = strip_locations(functional_code(&plan));
  cr_expect_str_eq(code,
      "class GraphModule(torch.nn.Module):\n"
      "    def forward(self, L_a_: \"f32[3, 4]\", L_b_: \"f32[2, 3]\"):\n"
      "        slice_1: \"f32[2, 4]\" = kiln.ops.slice(l_a_, 0, 0, -1, 1)\n"
      "        _to_copy: \"f32[2, 3]\" = kiln.ops._to_copy(l_b_, dtype = kiln.float32);  l_b_ = None\n"
      "        slice_scatter: \"f32[2, 4]\" = kiln.ops.slice_scatter(slice_1, _to_copy, 1, 1, "
      "9223372036854775807, 1);  slice_1 = _to_copy = None\n"
      "        slice_scatter_1: \"f32[3, 4]\" = kiln.ops.slice_scatter(l_a_, slice_scatter, 0, 0, -1, 1);  "
      "l_a_ = slice_scatter = None\n"
      "        mul: \"f32[3, 4]\" = kiln.ops.mul(slice_scatter_1, 2.0)\n"
      "        return (slice_scatter_1, mul)\n");
  cr_expect_eq(plan.nmutated, 1);
  free(code);
  kn__aot_plan_fini(&plan);
  kn_compiled_free(f);
  kn_scope_end();
}

/* ---- test_negative_testing ------------------------------------------------------------- */

static kn_tensor *sin_add_(kn_tensor *x, kn_tensor *y) {
  kn_tensor *s = kn_sin(x);
  kn_add_(s, y);
  return s;
}

Test(aot_func, test_negative_testing) {
  kn_scope_begin();
  kn_tensor *x = randn(KN_SHAPE(4), 7), *y = randn(KN_SHAPE(4), 8), *x0 = copy_of(x);
  kn_compiled *f = KN_COMPILE(sin_add_, &aot);
  unsigned long v0 = version_of(x);
  expect_equal(kn_call_t(f, x, y), sin_add_(copy_of(x), y), "output");
  expect_equal(x, x0, "x unchanged");
  cr_expect_eq(version_of(x), v0);
  kn_compiled_free(f);
  kn_scope_end();
}

/* ---- test_aot_grad_mode_mutation ---------------------------------------------------------- */

/* y = x * x; torch.set_grad_enabled(False); return (y.clone(), y): the
** grad mode stays off after the call, on every call (the entry replays it),
** and the clone is the node traced without grad. The three backends against
** eager: test_dynamo_vs_eager.c. */
static kn_value grad_mode_fn(const kn_value *args, int nargs, void *ud) {
  (void)nargs, (void)ud;
  kn_tensor *x = args[0].u.t, *y = kn_mul(x, x);
  kn_set_grad_enabled(false);
  kn_value items[2] = {kn_vtensor(kn_clone(y)), kn_vtensor(y)};
  return kn_tuple(2, items);
}

static kn_tensor *x_times_3(kn_tensor **leaf_out) {
  kn_tensor *leaf = kn_ones(KN_SHAPE(3), KN_FLOAT32);
  kn_set_requires_grad(leaf, true);
  *leaf_out = leaf;
  return kn_mul_scalar(leaf, kn_float(3));
}

Test(aot_func, test_aot_grad_mode_mutation) {
  kn_scope_begin();
  kn_tensor *leaf_e, *leaf_c;
  kn_tensor *xe = x_times_3(&leaf_e), *xc = x_times_3(&leaf_c);
  kn_value a = kn_vtensor(xe), want = grad_mode_fn(&a, 1, NULL), got;
  cr_expect(!kn_is_grad_enabled());
  kn_set_grad_enabled(true);
  kn_compiled *f = KN_COMPILE(grad_mode_fn, &aot);
  kn_value b = kn_vtensor(xc);
  cr_assert_eq(kn_call(f, &b, 1, &got), KN_OK, "%s", kn_last_error());
  cr_assert_eq(got.kind, KN_VTUPLE);
  cr_expect(!kn_is_grad_enabled(), "the compiled call leaves grad mode off, as eagerly");
  kn_set_grad_enabled(true);
  for (int i = 0; i < 2; i++) expect_equal(got.u.items[i].u.t, want.u.items[i].u.t, "output");
  cr_expect_null(kn_grad_fn_name(want.u.items[0].u.t));
  cr_expect_null(kn_grad_fn_name(got.u.items[0].u.t), "the clone ran without grad");
  cr_expect_str_eq(kn_grad_fn_name(got.u.items[1].u.t), "CompiledFunctionBackward");
  kn_tensor *g = kn_from_floats((float[]){-1, 2, 0}, KN_SHAPE(3));
  cr_assert_eq(kn_backward(want.u.items[1].u.t, g), KN_OK, "%s", kn_last_error());
  cr_assert_eq(kn_backward(got.u.items[1].u.t, g), KN_OK, "%s", kn_last_error());
  expect_equal(kn_grad(leaf_c), kn_grad(leaf_e), "gradient");
  kn_value_release(got);
  kn_compiled_free(f);
  kn_scope_end();
}

/* ---- test_aot_autograd_expand_mutation_* ------------------------------------------------- */

/* y = x.expand(3, *x.shape); y[0, 0].add_(5); return y */
static kn_tensor *expand_add_(kn_tensor *x) {
  kn_tensor *y = kn_expand(x, KN_SHAPE(3, 6));
  kn_add_scalar_(kn_select(kn_select(y, 0, 0), 0, 0), kn_int(5));
  return y;
}

Test(aot_func, test_aot_autograd_expand_mutation_functionalizes) {
  kn_scope_begin();
  kn_tensor *x = kn_arange(kn_int(0), kn_int(6), kn_int(1)), *xo = copy_of(x);
  kn_tensor *want = expand_add_(x);
  kn_compiled *f = KN_COMPILE(expand_add_, &aot);
  unsigned long v0 = version_of(xo);
  kn_tensor *got = kn_call_t(f, xo);
  expect_equal(got, want, "output");
  expect_equal(xo, x, "x after the call");
  cr_expect_eq(version_of(xo), v0 + 1);
  cr_expect(kn_same_storage(got, xo), "the output is a view of x, as eagerly");
  kn_compiled_free(f);
  kn_scope_end();
}

/* y = x.expand(3, *x.shape); y[1, 1].mul_(5); return y * z */
static kn_tensor *expand_mul_(kn_tensor *x, kn_tensor *z) {
  kn_tensor *y = kn_expand(x, KN_SHAPE(3, 6));
  kn_mul_scalar_(kn_select(kn_select(y, 0, 1), 0, 1), kn_int(5));
  return kn_mul(y, z);
}

Test(aot_func, test_aot_autograd_expand_mutation_backwards) {
  kn_scope_begin();
  kn_tensor *x = kn_arange_dtype(kn_int(0), kn_int(6), kn_int(1), KN_FLOAT32);
  kn_tensor *z = copy_of(x), *xo = copy_of(x), *zo = copy_of(x);
  kn_set_requires_grad(z, true);
  kn_set_requires_grad(zo, true);
  kn_tensor *want = expand_mul_(x, z);
  kn_compiled *f = KN_COMPILE(expand_mul_, &aot);
  kn_tensor *got = kn_call_t(f, xo, zo);
  expect_equal(got, want, "output");
  cr_assert_eq(kn_backward(kn_sum(want), NULL), KN_OK, "%s", kn_last_error());
  cr_assert_eq(kn_backward(kn_sum(got), NULL), KN_OK, "%s", kn_last_error());
  expect_equal(xo, x, "x after the call");
  expect_equal(kn_grad(zo), kn_grad(z), "z's gradient");
  kn_compiled_free(f);
  kn_scope_end();
}

/* y[0:3, 0].add_(5): three elements of the written-to view share x[0]. */
static kn_tensor *expand_overlap_add_(kn_tensor *x) {
  kn_tensor *y = kn_expand(x, KN_SHAPE(3, 6));
  kn_add_scalar_(kn_select(kn_slice(y, 0, 0, 3, 1), 1, 0), kn_int(5));
  return y;
}

Test(aot_func, test_aot_autograd_expand_mutation_error) {
  kn_scope_begin();
  const char *msg = "unsupported operation: more than one element of the written-to tensor "
                    "refers to a single memory location";
  kn_tensor *x = kn_arange(kn_int(0), kn_int(6), kn_int(1)), *xo = copy_of(x), *x0 = copy_of(x);
  kn_tensor *y = kn_expand(x, KN_SHAPE(3, 6));
  cr_expect_neq(kn_add_scalar_(kn_select(kn_slice(y, 0, 0, 3, 1), 1, 0), kn_int(5)), KN_OK);
  cr_expect(strstr(kn_last_error(), msg), "eager: %s", kn_last_error());
  kn_compiled *f = KN_COMPILE(expand_overlap_add_, &aot);
  cr_expect_null(kn_call_t(f, xo));
  cr_expect(strstr(kn_last_error(), msg), "compiled: %s", kn_last_error());
  expect_equal(xo, x0, "x unchanged");
  kn_compiled_free(f);
  kn_scope_end();
}

/* The write through select(select(expand(x))) has no scatter op for
** expand: it becomes an index_put at the view's storage positions of x. */
Test(aot_func, expand_mutation_functional_graph) {
  kn_scope_begin();
  kn_compile_options o = {.backend_fn = grab, .dynamic = KN_DYNAMIC_FALSE};
  kn_compiled *f = KN_COMPILE(expand_add_, &o);
  cr_assert(kn_call_t(f, kn_arange(kn_int(0), kn_int(6), kn_int(1))), "%s", kn_last_error());
  kn__aot_plan plan;
  char *code = strip_locations(functional_code(&plan));
  cr_expect_str_eq(code,
      "class GraphModule(torch.nn.Module):\n"
      "    def forward(self, L_a_: \"i64[6]\"):\n"
      "        expand: \"i64[3, 6]\" = kiln.ops.expand(l_a_, [3, 6])\n"
      "        select: \"i64[6]\" = kiln.ops.select(expand, 0, 0);  expand = None\n"
      "        select_1: \"i64[]\" = kiln.ops.select(select, 0, 0);  select = None\n"
      "        add: \"i64[]\" = kiln.ops.add(select_1, 5, 1);  select_1 = None\n"
      "        _tensor_constant0: \"i64[1]\" = self._tensor_constant0\n"
      "        reshape: \"i64[6]\" = kiln.ops.reshape(l_a_, [-1]);  l_a_ = None\n"
      "        reshape_1: \"i64[1]\" = kiln.ops.reshape(add, [-1]);  add = None\n"
      "        index_put: \"i64[6]\" = kiln.ops.index_put(reshape, [_tensor_constant0], reshape_1, False);  "
      "reshape = _tensor_constant0 = reshape_1 = None\n"
      "        view: \"i64[6]\" = kiln.ops.view(index_put, [6]);  index_put = None\n"
      "        expand_1: \"i64[3, 6]\" = kiln.ops.expand(view, [3, 6])\n"
      "        return (view, expand_1)\n");
  cr_expect_eq(plan.nmutated, 1);
  cr_expect_eq(plan.outs[0].kind, KN__AOT_OUT_ALIAS_OF_INPUT);
  char *dump = kn__aot_plan_str(&plan, false);
  cr_expect(strstr(dump, "output_info=[OutputAliasInfo(output_type=<OutputType.alias_of_input: 2>, "
                         "base_idx=0, view=as_strided(size=[3, 6], stride=[0, 1], storage_offset=0))]"),
            "%s", dump);
  free(dump);
  free(code);
  kn__aot_plan_fini(&plan);
  kn_compiled_free(f);
  kn_scope_end();
}

/* ---- test_call_fn_with_non_const_inputs_aot_unsafe ---------------------------------------- */

/* The module's forward mutates its parameter under no_grad; exported, then
** the graph module is compiled with aot_eager and called. */
static kn_value module_bad_fwd(const kn_value *args, int nargs, void *ud) {
  (void)nargs, (void)ud;
  kn_tensor *param = args[0].u.t, *y = args[1].u.t;
  bool prev = kn_set_grad_enabled(false);
  kn_add_(param, y);
  kn_set_grad_enabled(prev);
  return kn_vtensor(kn_mul_scalar(y, kn_float(1)));
}

Test(aot_func, test_call_fn_with_non_const_inputs_aot_unsafe) {
  kn_scope_begin();
  kn_tensor *x = randn(KN_SHAPE(4), 9), *y = randn(KN_SHAPE(4), 10);
  kn_set_requires_grad(x, true);
  kn_tensor *xe = copy_of(x);
  kn_set_requires_grad(xe, true);
  kn_value ea[2] = {kn_vtensor(xe), kn_vtensor(y)};
  kn_tensor *want = module_bad_fwd(ea, 2, NULL).u.t;
  kn_tensor *xg = copy_of(x);
  kn_set_requires_grad(xg, true);
  kn_compiled *f = KN_COMPILE(module_bad_fwd, NULL);
  kn_value xa[2] = {kn_vtensor(xg), kn_vtensor(y)};
  kn_graph_module *gm = kn_export(f, xa, 2);
  cr_assert(gm, "%s", kn_last_error());
  kn_tensor *ex[2] = {x, y};
  kn_compiled_graph cg;
  cr_assert_eq(kn__aot_eager_compile(gm, ex, 2, NULL, &cg), KN_OK, "%s", kn_last_error());
  unsigned long v0 = version_of(x);
  kn_tensor *out[1] = {NULL};
  cr_assert_eq(cg.run(cg.state, ex, 2, out, 1), KN_OK, "%s", kn_last_error()); /* no error */
  expect_equal(out[0], want, "output");
  expect_equal(x, xe, "param after the call");
  cr_expect_eq(version_of(x), v0 + 1);
  cr_expect_null(kn_grad_fn_name(x));
  cg.free_state(cg.state);
  kn_graph_module_free(gm);
  kn_compiled_free(f);
  kn_scope_end();
}

/* ---- outputs that alias inputs or each other -------------------------------------------- */

/* (x * y, y): the second output is the input y itself; backward through
** both reaches y (test_grad_inputs_alias_inputs: an output and a gradient
** that are inputs). */
static kn_value mul_and_input(const kn_value *args, int nargs, void *ud) {
  (void)nargs, (void)ud;
  kn_value items[2] = {kn_vtensor(kn_mul(args[0].u.t, args[1].u.t)), args[1]};
  return kn_tuple(2, items);
}

Test(aot_func, test_grad_inputs_alias_inputs) {
  kn_scope_begin();
  kn_tensor *x = kn_ones(KN_SHAPE(1), KN_FLOAT32), *y = kn_ones(KN_SHAPE(1), KN_FLOAT32);
  kn_set_requires_grad(x, true);
  kn_set_requires_grad(y, true);
  kn_compiled *f = KN_COMPILE(mul_and_input, &aot);
  kn_value a[2] = {kn_vtensor(x), kn_vtensor(y)}, got;
  cr_assert_eq(kn_call(f, a, 2, &got), KN_OK, "%s", kn_last_error());
  cr_expect_eq(got.u.items[1].u.t, y, "the output is y itself");
  kn_tensor *s = kn_add(kn_sum(got.u.items[0].u.t), kn_sum(got.u.items[1].u.t));
  cr_assert_eq(kn_backward(s, NULL), KN_OK, "%s", kn_last_error());
  double gx = 0, gy = 0;
  kn_item_double(kn_grad(x), &gx);
  kn_item_double(kn_grad(y), &gy);
  cr_expect_eq(gx, 1.0); /* d/dx (x*y) = y */
  cr_expect_eq(gy, 2.0); /* x + 1 */
  kn_value_release(got);
  kn_compiled_free(f);
  kn_scope_end();
}

/* (a, a.view(-1)) with a = x * 2, and x.t(): outputs regenerated as views
** (of output 0 and of input x), so writing into one shows in the other
** as eagerly. */
static kn_value views_out(const kn_value *args, int nargs, void *ud) {
  (void)nargs, (void)ud;
  kn_tensor *a = kn_mul_scalar(args[0].u.t, kn_float(2));
  kn_value items[3] = {kn_vtensor(a), kn_vtensor(kn_view(a, KN_SHAPE(-1))),
                       kn_vtensor(kn_t(args[0].u.t))};
  return kn_tuple(3, items);
}

Test(aot_func, outputs_alias_inputs_and_each_other) {
  kn_scope_begin();
  kn_tensor *x = randn(KN_SHAPE(2, 3), 11);
  kn_set_requires_grad(x, true);
  kn_compiled *f = KN_COMPILE(views_out, &aot);
  kn_value a = kn_vtensor(x), got, want = views_out(&a, 1, NULL);
  cr_assert_eq(kn_call(f, &a, 1, &got), KN_OK, "%s", kn_last_error());
  for (int i = 0; i < 3; i++) expect_equal(got.u.items[i].u.t, want.u.items[i].u.t, "output");
  kn_tensor *o0 = got.u.items[0].u.t, *o1 = got.u.items[1].u.t, *o2 = got.u.items[2].u.t;
  cr_expect(kn_same_storage(o0, o1), "output 1 is a view of output 0");
  cr_expect(kn_same_storage(o2, x), "output 2 is a view of x");
  cr_expect_str_eq(kn_grad_fn_name(o0), "CompiledFunctionBackward");
  kn_tensor *s = kn_add(kn_sum(o1), kn_sum(o2));
  cr_assert_eq(kn_backward(s, NULL), KN_OK, "%s", kn_last_error());
  kn_tensor *three = kn_full(KN_SHAPE(2, 3), kn_float(3), KN_FLOAT32);
  expect_equal(kn_grad(x), three, "gradient through both views (2 + 1)");
  bool prev = kn_no_grad_begin();
  kn_add_scalar_(o0, kn_int(1));
  kn_no_grad_end(prev);
  expect_equal(o1, kn_view(o0, KN_SHAPE(-1)), "a write into output 0 shows in output 1");
  kn_value_release(got);
  kn_compiled_free(f);
  kn_scope_end();
}

/* ---- test_alias_inputs --------------------------------------------------------------- */

/* a = ones(1) (torch.tensor([1])); a = a[0:1]; b = a.squeeze(); a[0] = 0; if a[0] < 1e5:
** pass (a graph break); a[0] = 2; return b: b sees both writes. */
static kn_value alias_inputs_fn(const kn_value *args, int nargs, void *ud) {
  (void)args, (void)nargs, (void)ud;
  kn_tensor *a = kn_slice(kn_ones(KN_SHAPE(1), KN_INT64), 0, 0, 1, 1);
  kn_tensor *b = kn_squeeze(a);
  kn_fill_(kn_select(a, 0, 0), kn_int(0));
  if (kn_item(kn_select(a, 0, 0)) < 1e5) b = kn_squeeze(b);
  kn_fill_(kn_select(a, 0, 0), kn_int(2));
  return kn_vtensor(b);
}

Test(aot_func, test_alias_inputs) {
  kn_scope_begin();
  kn_value want = alias_inputs_fn(NULL, 0, NULL), got;
  kn_compiled *f = KN_COMPILE(alias_inputs_fn, &aot);
  for (int call = 0; call < 2; call++) {
    cr_assert_eq(kn_call(f, NULL, 0, &got), KN_OK, "%s", kn_last_error());
    expect_equal(got.u.t, want.u.t, "b");
    kn_value_release(got);
  }
  kn_compiled_free(f);
  kn_scope_end();
}

/* ---- the plan in the trace: aot_forward_graph_fw_metadata --------------------------------- */

static bool train_compile;
static void run_for_trace(void) {
  kn_compiled *f = KN_COMPILE(mutate_param, &aot);
  kn_tensor *x = randn(KN_SHAPE(4), 12), *y = randn(KN_SHAPE(4), 13);
  kn_set_requires_grad(x, train_compile);
  kn_set_requires_grad(y, train_compile);
  cr_expect(kn_call_t(f, x, kn_mul_scalar(y, kn_float(2))), "%s", kn_last_error());
  kn_compiled_free(f);
}

static char *trace_of(bool train, char **payload) {
  train_compile = train;
  char *dir = kn_test_trace_start();
  run_for_trace();
  uint64_t defects = 99;
  char *got = kn_test_dyn_trace(false, &defects);
  *payload = kn_test_dyn_payload("aot_forward_graph_fw_metadata", 0);
  cr_expect_eq(defects, 0);
  kn_trace_disable();
  kn_test_rmdir(dir);
  return got;
}

static void expect_order(const char *t, const char *const *ev, int n) {
  const char *at = t;
  for (int i = 0; i < n; i++) {
    const char *p = strstr(at, ev[i]);
    cr_expect(p, "%s not after the previous event in:\n%s", ev[i], t);
    if (p) at = p;
  }
}

#define FW_META "{\"artifact\": {\"name\": \"aot_forward_graph_fw_metadata\", \"encoding\": \"string\"}"

/* As test_structured_trace's sequences: training: aot_joint_graph, (the
** configuration artifact), aot_forward_graph_fw_metadata, aot_forward_graph;
** inference: aot_forward_graph_fw_metadata right before aot_inference_graph. */
Test(aot_func, fw_metadata_artifact_in_seed_order) {
  kn_scope_begin();
  char *payload = NULL, *t = trace_of(true, &payload);
  const char *train[] = {"{\"dynamo_output_graph\"", "{\"aot_joint_graph\": {}", FW_META,
                         "{\"aot_forward_graph\": {}", "{\"aot_backward_graph\": {}"};
  expect_order(t, train, 5);
  cr_expect(payload && strstr(payload, "write_backs=[input 0 <- copy_(under no_grad)]") &&
                strstr(payload, "is_train=True"), "%s", payload);
  free(payload);
  free(t);
  t = trace_of(false, &payload);
  const char *inf[] = {"{\"dynamo_output_graph\"", FW_META, "{\"aot_inference_graph\": {}"};
  expect_order(t, inf, 3);
  cr_expect(payload && strstr(payload, "is_train=False"), "%s", payload);
  free(payload);
  free(t);
  kn_scope_end();
}

/* ---- threads ----------------------------------------------------------------------------- */

/* One compiled function with an input mutation called from four threads,
** each on its own tensors: every caller sees its own write-back once. */
static kn_compiled *shared_fn;
static void *thread_body(void *arg) {
  intptr_t k = (intptr_t)arg;
  int ok = 1;
  kn_scope_begin();
  for (int it = 0; it < 20; it++) {
    kn_tensor *x = kn_full(KN_SHAPE(8), kn_float((double)k), KN_FLOAT32);
    kn_tensor *y = kn_full(KN_SHAPE(8), kn_float(1), KN_FLOAT32);
    kn_tensor *out = kn_call_t(shared_fn, x, y);
    double v = -1, o = -1;
    ok &= out && kn_item_double(kn_sum(x), &v) == KN_OK && kn_item_double(kn_sum(out), &o) == KN_OK;
    ok &= v == 8.0 * ((double)k + 1) && o == 16.0;
  }
  kn_scope_end();
  return (void *)(intptr_t)ok;
}

static kn_tensor *mutate_and_double(kn_tensor *x, kn_tensor *y) {
  kn_add_(x, y);
  return kn_mul_scalar(y, kn_float(2));
}

Test(aot_func, mutation_write_back_from_several_threads) {
  shared_fn = KN_COMPILE(mutate_and_double, &aot);
  pthread_t th[4];
  for (intptr_t k = 0; k < 4; k++) pthread_create(&th[k], NULL, thread_body, (void *)k);
  for (int k = 0; k < 4; k++) {
    void *ok = NULL;
    pthread_join(th[k], &ok);
    cr_expect(ok == (void *)1, "thread %d saw a wrong value", k);
  }
  kn_compiled_free(shared_fn);
}

/* ---- dynamic sizes ------------------------------------------------------------------------ */

/* x[1:] += y[1:] through a view, under dynamic sizes: at every size the
** output and the caller's x are what eager code gives (the functional graph
** keeps the sizes symbolic; the joint graph specialises them, docs/AOT.md). */
static kn_tensor *slice_add_(kn_tensor *x, kn_tensor *y) {
  kn_add_(kn_slice(x, 0, 1, KN_SLICE_END, 1), kn_slice(y, 0, 1, KN_SLICE_END, 1));
  return kn_sum(x);
}

Test(aot_func, mutation_through_a_slice_under_dynamic_sizes) {
  kn_scope_begin();
  kn_compile_options o = {.backend = "aot_eager", .dynamic = KN_DYNAMIC_TRUE};
  kn_compiled *f = KN_COMPILE(slice_add_, &o);
  for (int64_t n = 5; n <= 7; n++) {
    kn_tensor *x = randn(KN_SHAPE(n), (uint64_t)(20 + n)), *y = randn(KN_SHAPE(n), (uint64_t)(40 + n));
    kn_tensor *xe = copy_of(x), *want = slice_add_(xe, y);
    expect_equal(kn_call_t(f, x, y), want, "output");
    expect_equal(x, xe, "x after the call");
  }
  kn_compiled_free(f);
  kn_scope_end();
}

/* A clone written by copy_ from a broadcast row, and one filled, returned
** with nothing that would compare their sizes with the input's: the results
** have the input's sizes at every size, under both backends
** (functionalized into where(true, src, dst); a size list was replayed at
** the first size, returning 5 rows for an input of 7, without a guard). */
static kn_tensor *copy_row_and_fill(kn_tensor *x, kn_tensor *row) {
  kn_tensor *c = kn_clone(x), *d = kn_clone(x);
  if (kn_copy_(c, row) != KN_OK || kn_fill_(d, kn_float(0.5)) != KN_OK) return NULL;
  return kn_cat((kn_tensor *[]){kn_exp(c), kn_exp(d)}, 2, 1);
}

Test(aot_func, copy_and_fill_keep_dynamic_sizes) {
  const char *backends[] = {"aot_eager", "inductor"};
  for (int b = 0; b < 2; b++) {
    kn_scope_begin();
    kn_compile_options o = {.backend = backends[b], .dynamic = KN_DYNAMIC_TRUE};
    kn_compiled *f = KN_COMPILE(copy_row_and_fill, &o);
    for (int64_t n = 5; n <= 7; n += 2) {
      kn_tensor *x = randn(KN_SHAPE(n, 6), (uint64_t)(50 + n));
      kn_tensor *row = randn(KN_SHAPE(1, 6), 60), *rowe = copy_of(row);
      kn_set_requires_grad(row, true);
      kn_set_requires_grad(rowe, true);
      kn_tensor *got = kn_call_t(f, x, row), *want = copy_row_and_fill(x, rowe);
      cr_assert(got, "%s: %s", backends[b], kn_last_error());
      expect_equal(got, want, "output");
      cr_assert_eq(kn_backward(kn_sum(got), NULL), KN_OK, "%s", kn_last_error());
      cr_assert_eq(kn_backward(kn_sum(want), NULL), KN_OK, "%s", kn_last_error());
      expect_equal(kn_grad(row), kn_grad(rowe), "grad row");
    }
    kn_compiled_free(f);
    kn_scope_end();
  }
}

/* ---- a mutation with grad on ----------------------------------------------------------- */

/* x.mul_(3) on a non-leaf input that requires grad, then x.sum(): the
** write-back runs under grad, so x gets history through the compiled node
** and gradients reach the leaf as eagerly (3 through the sum, and through a
** later use of x). */
static kn_tensor *mul_input_(kn_tensor *x) {
  kn_mul_scalar_(x, kn_float(3));
  return kn_sum(x);
}

Test(aot_func, mutation_with_grad_gives_the_input_history) {
  kn_scope_begin();
  kn_tensor *le = randn(KN_SHAPE(4), 30), *lc = copy_of(le);
  kn_set_requires_grad(le, true);
  kn_set_requires_grad(lc, true);
  kn_tensor *xe = kn_mul_scalar(le, kn_float(1)), *xc = kn_mul_scalar(lc, kn_float(1));
  kn_tensor *want = mul_input_(xe);
  kn_compiled *f = KN_COMPILE(mul_input_, &aot);
  unsigned long v0 = version_of(xc);
  kn_tensor *got = kn_call_t(f, xc);
  expect_equal(got, want, "output");
  expect_equal(xc, xe, "x after the call");
  cr_expect_eq(version_of(xc), v0 + 1);
  cr_expect(kn_grad_fn_name(xc), "x has history after the write-back");
  kn_tensor *se = kn_add(want, kn_sum(kn_mul(xe, xe))), *sc = kn_add(got, kn_sum(kn_mul(xc, xc)));
  cr_assert_eq(kn_backward(se, NULL), KN_OK, "%s", kn_last_error());
  cr_assert_eq(kn_backward(sc, NULL), KN_OK, "%s", kn_last_error());
  expect_equal(kn_grad(lc), kn_grad(le), "the leaf's gradient");
  kn_compiled_free(f);
  kn_scope_end();
}

/* ---- a captured constant mutated ---------------------------------------------------------- */

static kn_tensor *buffer;
static kn_tensor *accumulate_into_buffer(kn_tensor *x) {
  kn_add_(buffer, x);
  return kn_mul_scalar(x, kn_float(2));
}

/* The write-back goes into the captured tensor on every call (never while
** compiling): after two calls it holds 2 * x, as after two eager calls. */
Test(aot_func, captured_constant_written_back_once_per_call) {
  kn_scope_begin();
  kn_tensor *x = randn(KN_SHAPE(3), 50);
  buffer = kn_zeros(KN_SHAPE(3), KN_FLOAT32);
  kn_compiled *f = KN_COMPILE(accumulate_into_buffer, &aot);
  for (int i = 0; i < 2; i++) cr_assert(kn_call_t(f, x), "%s", kn_last_error());
  expect_equal(buffer, kn_mul_scalar(x, kn_float(2)), "buffer after two calls");
  kn_compiled_free(f);
  buffer = NULL;
  kn_scope_end();
}

/* The plan of views_out: a fresh output, a view of it, a view of input 0. */
Test(aot_func, plan_of_aliasing_outputs) {
  kn_scope_begin();
  kn_compile_options o = {.backend_fn = grab, .dynamic = KN_DYNAMIC_FALSE};
  kn_compiled *f = KN_COMPILE(views_out, &o);
  kn_tensor *x = randn(KN_SHAPE(2, 3), 11);
  kn_value a = kn_vtensor(x), got;
  cr_assert_eq(kn_call(f, &a, 1, &got), KN_OK, "%s", kn_last_error());
  kn_value_release(got);
  kn__aot_plan plan;
  free(functional_code(&plan));
  char *dump = kn__aot_plan_str(&plan, false);
  cr_expect(strstr(dump,
      "output_info=[OutputAliasInfo(output_type=<OutputType.non_alias: 1>, base_idx=None),\n"
      "                                 OutputAliasInfo(output_type=<OutputType."
      "alias_of_intermediate_base_is_user_output: 6>, base_idx=0, view=as_strided(size=[6], "
      "stride=[1], storage_offset=0)),\n"
      "                                 OutputAliasInfo(output_type=<OutputType.alias_of_input: 2>, "
      "base_idx=0, view=as_strided(size=[3, 2], stride=[1, 3], storage_offset=0))],\n"), "%s", dump);
  free(dump);
  kn__aot_plan_fini(&plan);
  kn_compiled_free(f);
  kn_scope_end();
}

/* Functionalization runs the program on meta tensors only: a factory call
** (full, no tensor input) allocates nothing either, so a full far larger
** than memory (2^48 float32 elements) functionalizes into the same graph. */
Test(aot_func, factory_calls_functionalize_without_data) {
  const char *code =
      "class GraphModule(torch.nn.Module):\n"
      "    def forward(self, x: \"f32[16777216, 16777216][16777216, 1]cpu\"):\n"
      "        full: \"f32[16777216, 16777216][16777216, 1]cpu\" = "
      "kiln.ops.full([16777216, 16777216], 1, dtype = kiln.float32)\n"
      "        add: \"f32[16777216, 16777216][16777216, 1]cpu\" = kiln.ops.add(x, full);  "
      "x = full = None\n"
      "        return (add,)\n";
  kn__graph *g = kn__graph_parse(code, NULL, 0);
  cr_assert(g, "%s", kn_last_error());
  kn__graph *fg = NULL;
  kn__aot_plan plan;
  cr_assert_eq(kn__aot_functionalize(g, &fg, &plan), KN_OK, "%s", kn_last_error());
  kn__gprint_opts po = {false, false};
  char *c = kn__graph_code(fg, &po);
  cr_assert(c && strstr(c, "kiln.ops.full([16777216, 16777216], 1, dtype = kiln.float32)") &&
                strstr(c, "kiln.ops.add(x, full)"),
            "functional graph:\n%s", c ? c : "(none)");
  cr_expect_eq(plan.nmutated, 0);
  cr_expect_eq(plan.nuser, 1);
  free(c);
  kn__aot_plan_fini(&plan);
  kn__graph_free(fg);
  kn__graph_free(g);
}
