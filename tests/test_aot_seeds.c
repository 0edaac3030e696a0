/*
** test_aot_seeds.c: test_aot_autograd.py's tests that call AOT autograd
** from a backend or on an exported graph, ported to C:
**   test_aot_export_joint_simple_repro: a backend that exports the inference
**     graph (the joint trace without autograd) and runs it, on a Linear;
**   test_call_fn_with_non_const_inputs_aot_safe: a convolution whose
**     parameters are passed as arguments, exported, then compiled by AOT;
**   test_call_fn_with_non_const_inputs_aot_unsafe_control_flow: a branch on
**     a value in the middle (a graph break), counted by a compile counter;
**   test_multiple_aot_autograd_calls_dupe_args (and its test_compile
**     backend): the captured graph split in two, each part compiled by its
**     own AOT call, the second writing in place;
**   test_split_with_sizes_aot_autograd_cleans_up_traceback_meta: after a
**     backward through a multi-output node, no node's sequence number is
**     left as the current one (what a joint trace would stamp on new ops).
** Every result is compared with the same computation run eagerly.
*/
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "aot/aot.h"
#include "autograd/autograd.h"
#include "core/error.h"
#include "kiln/compile.h"
#include "kiln/kiln.h"
#include "kiln/nn.h"
#include "support/dynamo_util.h"

static void setup(void) {
  unsetenv("KILN_CACHE_DIR");
  setenv("KILN_AOT_DISK_CACHE", "0", 1); /* the AOT cache in memory only */
  kn_test_dynamo_setup();
}

TestSuite(aot_seeds, .init = setup, .fini = kn_test_dynamo_teardown);

static kn_tensor *randn(int ndim, const int64_t *sizes, uint64_t seed) {
  kn_generator *g = kn_generator_new(seed);
  kn_tensor *t = kn_randn(ndim, sizes, g, KN_FLOAT32);
  kn_generator_free(g);
  return t;
}

/* |a - b| <= tol everywhere, same sizes. */
static void expect_close(kn_tensor *a, kn_tensor *b, double tol, const char *what) {
  cr_assert(a && b, "%s: missing tensor (%s)", what, kn_last_error());
  cr_assert_eq(kn_ndim(a), kn_ndim(b), "%s: rank", what);
  for (int d = 0; d < kn_ndim(a); d++)
    cr_assert_eq(kn_size(a, d), kn_size(b, d), "%s: size of dim %d", what, d);
  double v = INFINITY;
  kn_tensor *diff = kn_abs(kn_sub(kn_to(kn_detach(a), KN_FLOAT64), kn_to(kn_detach(b), KN_FLOAT64)));
  cr_assert_eq(kn_item_double(kn_amax(diff, NULL, 0, false), &v), KN_OK, "%s", kn_last_error());
  cr_expect_leq(v, tol, "%s: values differ by %g", what, v);
}

/* ---- test_aot_export_joint_simple_repro ------------------------------------------------ */

typedef struct exported {
  kn_graph_module *gm; /* the exported inference graph (kept while it runs) */
  int calls;
  int ntangents, ngrads;
} exported;

/* mini_backend: AOT's joint trace without autograd (aot_export_joint_simple
** with trace_joint=False): the inference graph, run by the interpreter. */
static kn_status mini_backend(kn_graph_module *gm, kn_tensor *const *ex, int n, void *ud,
                              kn_compiled_graph *out) {
  (void)ex;
  exported *e = ud;
  kn__aot_joint j;
  kn_status st = kn__aot_trace_joint(kn__graph_module_graph(gm), NULL, n, true, &j);
  if (st != KN_OK) return st;
  e->calls++;
  e->ntangents = j.ntangents;
  e->ngrads = j.ngrads;
  kn__graph *g = j.g;
  j.g = NULL;
  kn__aot_joint_fini(&j);
  st = kn__graph_module_new(g, &e->gm);
  return st == KN_OK ? kn__eager_compile(e->gm, out) : st;
}

static kn_value linear_fwd(const kn_value *args, int nargs, void *ud) {
  (void)nargs, (void)ud;
  return kn_vtensor(kn_nn_forward(args[0].u.m, args[1].u.t));
}

Test(aot_seeds, test_aot_export_joint_simple_repro) {
  kn_generator *g = kn_generator_new(5);
  kn_module *model = kn_nn_linear(5, 7, true, g);
  kn_generator_free(g);
  exported e = {0};
  kn_compile_options o = {.backend_fn = mini_backend, .backend_ud = &e};
  kn_compiled *f = kn_compile_fn(linear_fwd, NULL, 2, "Mod.forward", __FILE__, __LINE__, &o);
  kn_scope_begin();
  kn_generator *r = kn_generator_new(6);
  kn_tensor *x = kn_rand(KN_SHAPE(3, 4, 5), r, KN_FLOAT32);
  kn_generator_free(r);
  kn_tensor *out_ref = kn_nn_forward(model, x);
  kn_value args[2] = {kn_vmodule(model), kn_vtensor(x)};
  kn_value v;
  cr_assert_eq(kn_call(f, args, 2, &v), KN_OK, "%s", kn_last_error());
  cr_assert_eq(v.kind, KN_VTENSOR);
  expect_close(v.u.t, out_ref, 0, "Linear(5, 7) on [3, 4, 5]");
  cr_expect_eq(e.calls, 1);
  cr_expect_eq(e.ntangents, 0, "an inference graph has no tangents");
  cr_expect_eq(e.ngrads, 0);
  kn_value_release(v);
  kn_scope_end();
  kn_compiled_free(f);
  kn_graph_module_free(e.gm);
  kn_module_free(model);
}

/* ---- test_call_fn_with_non_const_inputs_aot_safe ------------------------------------ */

/* The module's _conv_forward: the convolution with its parameters passed in. */
static kn_tensor *conv_forward(kn_tensor *x, kn_tensor *weight, kn_tensor *bias) {
  return kn_conv2d(x, weight, bias, NULL, NULL, NULL, 1);
}

Test(aot_seeds, test_call_fn_with_non_const_inputs_aot_safe) {
  kn_generator *g = kn_generator_new(7);
  kn_module *conv = kn_nn_conv2d(3, 20, 5, 5, NULL, g);
  kn_generator_free(g);
  kn_scope_begin();
  kn_tensor *w = kn_module_get(conv, "weight"), *b = kn_module_get(conv, "bias");
  kn_tensor *rx = randn(KN_SHAPE(3, 10, 10), 8);
  kn_tensor *real = conv_forward(rx, w, b);
  kn_compiled *f = KN_COMPILE(conv_forward, NULL);
  kn_value xa[3] = {kn_vtensor(rx), kn_vtensor(w), kn_vtensor(b)};
  kn_graph_module *gm = kn_export(f, xa, 3);
  cr_assert(gm, "%s", kn_last_error());
  cr_assert_eq(kn_graph_module_num_inputs(gm), 3);
  kn_tensor *in[3] = {rx, w, b}, *got = NULL;
  cr_assert_eq(kn_graph_module_call(gm, in, 3, &got, 1), KN_OK, "%s", kn_last_error());
  expect_close(got, real, 0, "the exported graph");
  /* aot_eager on the exported graph: a training graph (the parameters
  ** require grad), forward and backward */
  kn_compiled_graph cg;
  cr_assert_eq(kn__aot_eager_compile(gm, in, 3, NULL, &cg), KN_OK, "%s", kn_last_error());
  kn_tensor *out[1] = {NULL};
  cr_assert_eq(cg.run(cg.state, in, 3, out, 1), KN_OK, "%s", kn_last_error());
  expect_close(out[0], real, 0, "aot_eager");
  cr_assert_eq(kn_backward(kn_sum(out[0]), NULL), KN_OK, "%s", kn_last_error());
  kn_tensor *gw = kn_clone(kn_grad(w));
  kn_nn_zero_grad(conv);
  cr_assert_eq(kn_backward(kn_sum(real), NULL), KN_OK, "%s", kn_last_error());
  expect_close(gw, kn_grad(w), 1e-4, "weight gradient");
  cg.free_state(cg.state);
  kn_graph_module_free(gm);
  kn_compiled_free(f);
  kn_scope_end();
  kn_module_free(conv);
}

/* ---- test_call_fn_with_non_const_inputs_aot_unsafe_control_flow ----------------------- */

/* _some_bad_fwd: a branch on y[0][0], a value (a graph break). */
static kn_tensor *some_bad_fwd(kn_tensor *param, kn_tensor *y) {
  if (kn_is_true(kn_lt_scalar(kn_select(kn_select(y, 0, 0), 0, 0), kn_int(3))))
    return kn_add(y, param);
  return kn_mul(param, y);
}

static kn_tensor *special_fwd(kn_tensor *x, kn_tensor *y) {
  kn_tensor *a = kn_mul(x, y);
  a = some_bad_fwd(a, a);
  kn_tensor *b = kn_add(x, y);
  return kn_mul(a, b);
}

/* The seed counts 4 frames and 7 ops: PyTorch compiles forward's first
** graph, _some_bad_fwd's graph up to the branch, its resume and forward's
** resume. A C helper is not a frame of its own: kiln's graphs are the one
** up to the branch (mul, select, select, lt) and the one after it (add,
** add, mul): 2 frames, the same 7 ops. */
Test(aot_seeds, test_call_fn_with_non_const_inputs_aot_unsafe_control_flow) {
  kn_scope_begin();
  kn_tensor *x = randn(KN_SHAPE(2, 2), 11), *y = randn(KN_SHAPE(2, 2), 12);
  cr_assert_eq(kn_set_requires_grad(x, true), KN_OK);
  kn_tensor *real = special_fwd(x, y);
  kn_compile_counter cc = {.inner = "aot_eager"};
  kn_compile_options o = {.backend_fn = kn_compile_counter_backend, .backend_ud = &cc};
  kn_compiled *f = KN_COMPILE(special_fwd, &o);
  kn_tensor *got = kn_call_t(f, x, y);
  expect_close(got, real, 0, "compiled");
  cr_expect_eq(cc.frame_count, 2);
  cr_expect_eq(cc.op_count, 7);
  kn_compiled_free(f);
  kn_scope_end();
}

/* ---- test_multiple_aot_autograd_calls_dupe_args / test_compile ----------------------- */

/* The seed's f(a) with maybe_dupe_op written in C: b = a + 1, c = b when a
** has fewer than 5 elements (the duplicate), else a + 2; then b.mul_(c). */
static kn_tensor *dupe_fn(kn_tensor *a) {
  kn_tensor *b = kn_add_scalar(a, kn_int(1));
  kn_tensor *c = kn_numel(a) < 5 ? b : kn_add_scalar(a, kn_int(2));
  return kn_mul_(b, c) == KN_OK ? b : NULL;
}

/* test_compile: the graph split as split_module does (the calls whose op is
** mul go to the second part), each part compiled by its own AOT call; the
** compiled graph runs part 0 on the inputs, then part 1 on the values it
** reads from part 0 (matched by name), and returns part 1's outputs. */
typedef struct part {
  kn_graph_module *gm;
  kn_compiled_graph cg;
  int nin, nout;
} part;
typedef struct split {
  part p[2];
} split;

static bool in_part1(const kn__gnode *n) {
  return n->op == KN__GN_CALL && n->opdef && !strncmp(n->opdef->name, "mul", 3);
}

/* The subgraph of g's calls in part `which` (owned). */
static kn__graph *part_graph(const kn__graph *g, int which) {
  kn__gnode *sel[64];
  int n = 0;
  for (int i = 0; i < kn__graph_num_nodes(g) && n < 64; i++) {
    kn__gnode *node = kn__graph_node(g, i);
    if (node->op == KN__GN_CALL && in_part1(node) == (which == 1)) sel[n++] = node;
  }
  return kn__graph_subgraph(g, sel, n);
}

/* Compile sub (taken) with AOT autograd on example inputs ex. */
static kn_status compile_part(kn__graph *sub, kn_tensor *const *ex, part *p) {
  if (!sub) return kn_last_status();
  p->nin = kn__graph_num_inputs(sub);
  p->nout = kn__graph_output_node(sub)->nargs;
  kn_status st = kn__graph_module_new(sub, &p->gm);
  return st == KN_OK ? kn__aot_eager_compile(p->gm, ex, p->nin, NULL, &p->cg) : st;
}

/* The input of part 1 named `name`: part 0's output of that name. */
static kn_tensor *from_part0(const part *p0, kn_tensor *const *outs0, const char *name) {
  const kn__gnode *o = kn__graph_output_node(kn__graph_module_graph(p0->gm));
  for (int k = 0; k < o->nargs; k++)
    if (!strcmp(o->args[k].u.t.node->name, name)) return outs0[k];
  return NULL;
}

static kn_status split_run(void *state, kn_tensor *const *in, int nin, kn_tensor **out, int nout) {
  split *s = state;
  (void)nin;
  kn_tensor *outs0[8] = {0}, *in1[8] = {0};
  kn_status st = s->p[0].cg.run(s->p[0].cg.state, in, s->p[0].nin, outs0, s->p[0].nout);
  const kn__graph *g1 = kn__graph_module_graph(s->p[1].gm);
  for (int i = 0; st == KN_OK && i < s->p[1].nin; i++)
    if (!(in1[i] = from_part0(&s->p[0], outs0, kn__graph_input(g1, i)->source)))
      st = kn__error(KN_EINTERNAL, "split: no value for %s", kn__graph_input(g1, i)->source);
  if (st == KN_OK) st = s->p[1].cg.run(s->p[1].cg.state, in1, s->p[1].nin, out, nout);
  return st; /* outputs of a run are in the caller's open scope */
}

static void split_free(void *state) {
  split *s = state;
  for (int k = 0; k < 2; k++) {
    if (s->p[k].cg.free_state) s->p[k].cg.free_state(s->p[k].cg.state);
    kn_graph_module_free(s->p[k].gm);
  }
  free(s);
}

static kn_status test_compile(kn_graph_module *gm, kn_tensor *const *ex, int n, void *ud,
                              kn_compiled_graph *out) {
  (void)n;
  const kn__graph *g = kn__graph_module_graph(gm);
  split *s = calloc(1, sizeof *s);
  if (!s) return KN_ENOMEM;
  kn__graph *g1 = part_graph(g, 1);
  kn_status st = compile_part(part_graph(g, 0), ex, &s->p[0]);
  /* part 1's example inputs: part 0 run on the example inputs */
  kn_tensor *outs0[8] = {0}, *ex1[8] = {0};
  kn_scope_begin();
  if (st == KN_OK) st = s->p[0].cg.run(s->p[0].cg.state, ex, s->p[0].nin, outs0, s->p[0].nout);
  for (int i = 0; st == KN_OK && g1 && i < kn__graph_num_inputs(g1) && i < 8; i++)
    ex1[i] = from_part0(&s->p[0], outs0, kn__graph_input(g1, i)->source);
  if (st == KN_OK) st = compile_part(g1, ex1, &s->p[1]);
  else kn__graph_free(g1);
  kn_scope_end();
  if (st != KN_OK) {
    split_free(s);
    return st;
  }
  (*(int *)ud)++;
  *out = (kn_compiled_graph){split_run, s, split_free};
  return KN_OK;
}

/* Two calls, 4 and 6 elements: two compiles, each two AOT calls; the result
** is eager's, and the input is left as it was. kiln has no opaque custom
** ops (torch.library): `c` is `b` itself in the graph, so part 1 reads one
** value where PyTorch's reads two that alias; AOT given one tensor twice is
** test_aot_guards.c's test_arg_dupe_via_dynamo_recompiles. */
Test(aot_seeds, test_multiple_aot_autograd_calls_dupe_args) {
  int compiles = 0;
  kn_compile_options o = {.backend_fn = test_compile, .backend_ud = &compiles,
                          .dynamic = KN_DYNAMIC_FALSE};
  kn_compiled *f = KN_COMPILE(dupe_fn, &o);
  kn_scope_begin();
  for (int64_t len = 4; len <= 6; len += 2) {
    kn_tensor *a = kn_ones(1, &len, KN_FLOAT32);
    kn_tensor *got = kn_call_t(f, a);
    kn_tensor *want = dupe_fn(kn_ones(1, &len, KN_FLOAT32));
    expect_close(got, want, 0, len == 4 ? "b * b" : "b * c");
    cr_expect_eq(kn_get(got, (int64_t[]){0}), len == 4 ? 4.0 : 6.0);
    cr_expect_eq(kn_get(a, (int64_t[]){0}), 1.0, "the input is not written");
  }
  cr_expect_eq(compiles, 2);
  kn_scope_end();
  kn_compiled_free(f);
}

/* ---- test_split_with_sizes_aot_autograd_cleans_up_traceback_meta ------------------- */

/* PyTorch's hooks put the running grad_fn's sequence number in
** fx_traceback's current meta during backward; kiln keeps it per thread
** (kn__autograd_current_seq: what the joint trace stamps on the ops a
** derivative rule makes). After a backward through split_with_sizes'
** three outputs, none is left current, and the gradient is right. */
Test(aot_seeds, test_split_with_sizes_aot_autograd_cleans_up_traceback_meta) {
  kn_scope_begin();
  kn_tensor *result = randn(KN_SHAPE(32), 13);
  cr_assert_eq(kn_set_requires_grad(result, true), KN_OK);
  const int64_t split_sizes[3] = {7, 16, 9};
  kn_tensor *outs[3] = {0};
  cr_assert_eq(kn_split_sizes(result, 3, split_sizes, 0, outs, 3), 3, "%s", kn_last_error());
  cr_expect_eq(kn__autograd_current_seq(), -1);
  kn_tensor *loss = kn_add(kn_add(kn_sum(outs[0]), kn_sum(outs[1])), kn_sum(outs[2]));
  cr_assert_eq(kn_backward(loss, NULL), KN_OK, "%s", kn_last_error());
  cr_expect_eq(kn__autograd_current_seq(), -1, "a node's sequence number is left current");
  expect_close(kn_grad(result), kn_ones(KN_SHAPE(32), KN_FLOAT32), 0, "gradient");
  kn_scope_end();
}
