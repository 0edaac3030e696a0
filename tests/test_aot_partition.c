/*
** test_aot_partition.c: the partitioners on known joint graphs. Literal
** expectations: which values each partitioner saves (names and bytes), the
** min-cut forward and backward graphs of sin(x) * y, min-cut saving no more
** bytes than the default on every test graph and strictly fewer on a
** pointwise chain, random and matmul ops never recomputed, the
** KILN_AOT_PARTITIONER setting, and compiled results equal to eager under
** min-cut.
*/
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "aot/aot.h"
#include "kiln/compile.h"
#include "kiln/kiln.h"
#include "support/dynamo_util.h"

TestSuite(aot_partition, .init = kn_test_dynamo_setup, .fini = kn_test_dynamo_teardown);

static kn__graph *grabbed;
static kn_status grab(kn_graph_module *gm, kn_tensor *const *ex, int n, void *ud,
                      kn_compiled_graph *out) {
  (void)ud;
  kn__graph_free(grabbed);
  grabbed = kn__graph_copy(kn__graph_module_graph(gm));
  return kn__aot_eager_compile(gm, ex, n, NULL, out);
}

static kn_tensor *leaf(int64_t n, int64_t m, bool rg, uint64_t seed) {
  kn_generator *g = kn_generator_new(seed);
  kn_tensor *t = kn_randn(KN_SHAPE(n, m), g, KN_FLOAT64);
  kn_generator_free(g);
  if (rg) kn_set_requires_grad(t, true);
  return t;
}

/* Both partitions of fn's joint graph on args (all of which require grad). */
typedef struct both {
  kn__aot_joint j;
  kn__aot_parts dflt, mincut;
} both;

static void partition_both(kn_compiled *f, kn_tensor *const *args, int n, both *b) {
  cr_assert(kn_call_tensors(f, args, n), "%s", kn_last_error());
  cr_assert(grabbed);
  bool rg[8];
  for (int i = 0; i < n; i++) rg[i] = kn_requires_grad(args[i]);
  cr_assert_eq(kn__aot_trace_joint(grabbed, rg, n, false, &b->j), KN_OK, "%s", kn_last_error());
  cr_assert_eq(kn__aot_partition_with(&b->j, KN__AOT_PART_DEFAULT, &b->dflt), KN_OK, "%s",
               kn_last_error());
  cr_assert_eq(kn__aot_partition_with(&b->j, KN__AOT_PART_MINCUT, &b->mincut), KN_OK, "%s",
               kn_last_error());
  cr_expect_eq(b->mincut.used, KN__AOT_PART_MINCUT);
  cr_expect_leq(b->mincut.saved_bytes, b->dflt.saved_bytes, "min-cut saves %lld bytes, default %lld",
                (long long)b->mincut.saved_bytes, (long long)b->dflt.saved_bytes);
}

static void both_fini(both *b) {
  kn__aot_parts_fini(&b->dflt);
  kn__aot_parts_fini(&b->mincut);
  kn__aot_joint_fini(&b->j);
  kn__graph_free(grabbed);
  grabbed = NULL;
}

/* The backward graph's saved inputs, comma-separated (owned). */
static char *saved_names(const kn__aot_parts *p) {
  char *s = calloc(1, 1024);
  for (int i = 0; i < p->nsaved; i++) {
    if (i) strcat(s, ",");
    strncat(s, kn__graph_input(p->bw, i)->name, 1000 - strlen(s));
  }
  return s;
}

static int graph_calls(const kn__graph *g, const char *op) {
  int k = 0;
  for (int i = 0; i < kn__graph_num_nodes(g); i++) {
    const kn__gnode *n = kn__graph_node(g, i);
    k += n->op == KN__GN_CALL && n->opdef && !strcmp(n->opdef->name, op);
  }
  return k;
}

static kn_tensor *sin_mul(kn_tensor *x, kn_tensor *y) { return kn_mul(kn_sin(x), y); }

#define T34 ": \"f64[3, 4][4, 1]cpu\""

/* sin(x) * y: default saves y, sin(x), cos(x) (3 x 96 bytes); min-cut saves
** the two inputs (192 bytes) and recomputes sin and cos in the backward. */
Test(aot_partition, sin_mul_saved_values) {
  kn_scope_begin();
  kn_compile_options o = {.backend_fn = grab, .dynamic = KN_DYNAMIC_FALSE};
  kn_compiled *f = KN_COMPILE(sin_mul, &o);
  both b;
  partition_both(f, (kn_tensor *[]){leaf(3, 4, true, 1), leaf(3, 4, true, 2)}, 2, &b);
  char *d = saved_names(&b.dflt), *m = saved_names(&b.mincut);
  cr_expect_str_eq(d, "primals_2,sin,cos");
  cr_expect_eq(b.dflt.saved_bytes, 3 * 96);
  cr_expect_str_eq(m, "primals_1,primals_2");
  cr_expect_eq(b.mincut.saved_bytes, 2 * 96);
  cr_expect_eq(b.mincut.nrecomputed, 2);
  char *fc = kn__graph_code(b.mincut.fw, NULL), *bc = kn__graph_code(b.mincut.bw, NULL);
  cr_expect_str_eq(fc,
      "class GraphModule(torch.nn.Module):\n"
      "    def forward(self, primals_1" T34 ", primals_2" T34 "):\n"
      "        sin" T34 " = kiln.ops.sin(primals_1)\n"
      "        mul" T34 " = kiln.ops.mul(sin, primals_2);  sin = None\n"
      "        return (mul, primals_1, primals_2)\n        ");
  cr_expect_str_eq(bc,
      "class GraphModule(torch.nn.Module):\n"
      "    def forward(self, primals_1" T34 ", primals_2" T34 ", tangents_1" T34 "):\n"
      "        sin" T34 " = kiln.ops.sin(primals_1)\n"
      "        mul" T34 " = kiln.ops.mul(tangents_1, primals_2);  primals_2 = None\n"
      "        mul_1" T34 " = kiln.ops.mul(tangents_1, sin);  tangents_1 = sin = None\n"
      "        cos" T34 " = kiln.ops.cos(primals_1);  primals_1 = None\n"
      "        mul_2" T34 " = kiln.ops.mul(mul, cos);  mul = cos = None\n"
      "        return (mul_2, mul_1)\n        ");
  free(fc);
  free(bc);
  free(d);
  free(m);
  both_fini(&b);
  kn_compiled_free(f);
  kn_scope_end();
}

/* ---- a pointwise chain: strictly fewer bytes ------------------------------------------ */
static kn_tensor *chain(kn_tensor *x) { return kn_exp(kn_cos(kn_sin(x))); }

/* The default partition saves what the derivative rules read: exp's result,
** and sin(sin(x)) and cos(x) computed in the forward (the rules of cos and sin
** read their inputs); min-cut saves x alone and recomputes the chain. */
Test(aot_partition, pointwise_chain_saves_strictly_fewer_bytes) {
  kn_scope_begin();
  kn_compile_options o = {.backend_fn = grab, .dynamic = KN_DYNAMIC_FALSE};
  kn_compiled *f = KN_COMPILE(chain, &o);
  both b;
  partition_both(f, (kn_tensor *[]){leaf(3, 4, true, 1)}, 1, &b);
  char *d = saved_names(&b.dflt), *m = saved_names(&b.mincut);
  cr_expect_str_eq(d, "exp,sin_1,cos_1");
  cr_expect_eq(b.dflt.saved_bytes, 3 * 96);
  cr_expect_str_eq(m, "primals_1");
  cr_expect_eq(b.mincut.saved_bytes, 96);
  cr_expect_lt(b.mincut.saved_bytes, b.dflt.saved_bytes);
  free(d);
  free(m);
  both_fini(&b);
  kn_compiled_free(f);
  kn_scope_end();
}

/* ---- an MLP: matmuls are never recomputed --------------------------------------------- */
static kn_tensor *mlp(kn_tensor *x, kn_tensor *w1, kn_tensor *w2) {
  return kn_sum(kn_mm(kn_relu(kn_mm(x, w1)), w2));
}

static kn_tensor *mat(int64_t n, int64_t m, bool rg, uint64_t seed) { return leaf(n, m, rg, seed); }

/* x[16, 8] @ w1[8, 32] -> relu -> @ w2[32, 4] -> sum, all f64. Default:
** relu's result and the four transposes the mm rules make in the forward
** (4096 + 1024 + 2048 + 1024 + 4096 bytes); min-cut: the three inputs and
** relu's result (1024 + 2048 + 1024 + 4096), recomputing the transposes,
** never an mm (the backward has the default's four). Saving the first
** mm's result instead costs the same bytes; the tie goes to the value
** downstream of the GEMM, so the forward's mm + relu stays fusable and the
** backward does not recompute relu. */
Test(aot_partition, mlp_never_recomputes_mm) {
  kn_scope_begin();
  kn_compile_options o = {.backend_fn = grab, .dynamic = KN_DYNAMIC_FALSE};
  kn_compiled *f = KN_COMPILE(mlp, &o);
  both b;
  partition_both(f, (kn_tensor *[]){mat(16, 8, true, 1), mat(8, 32, true, 2), mat(32, 4, true, 3)}, 3, &b);
  char *d = saved_names(&b.dflt), *m = saved_names(&b.mincut);
  cr_expect_str_eq(d, "relu,transpose,transpose_1,transpose_2,transpose_3");
  cr_expect_eq(b.dflt.saved_bytes, 4096 + 1024 + 2048 + 1024 + 4096);
  cr_expect_str_eq(m, "primals_1,primals_2,primals_3,relu");
  cr_expect_eq(b.mincut.saved_bytes, 1024 + 2048 + 1024 + 4096);
  cr_expect_eq(graph_calls(b.dflt.bw, "mm"), 4);
  cr_expect_eq(graph_calls(b.mincut.bw, "mm"), 4);
  cr_expect_eq(graph_calls(b.mincut.fw, "mm"), 2);
  cr_expect_eq(graph_calls(b.mincut.bw, "relu"), 0, "relu is not recomputed");
  cr_expect_eq(graph_calls(b.mincut.fw, "relu"), 1);
  free(d);
  free(m);
  both_fini(&b);
  kn_compiled_free(f);
  kn_scope_end();
}

/* ---- random ops are never recomputed ---------------------------------------------------- */
static kn_tensor *drop_sin(kn_tensor *x) { return kn_sin(kn_dropout(kn_exp(x), 0.5, true, NULL)); }

/* exp -> dropout -> sin: recomputing dropout would draw another mask, so
** min-cut saves dropout's result and mask (its getitems; the mask is bool,
** 12 bytes) and x (exp is recomputed from it for exp's rule): the backward
** has no native_dropout. */
Test(aot_partition, dropout_is_never_recomputed) {
  kn_scope_begin();
  kn_compile_options o = {.backend_fn = grab, .dynamic = KN_DYNAMIC_FALSE};
  kn_compiled *f = KN_COMPILE(drop_sin, &o);
  both b;
  partition_both(f, (kn_tensor *[]){leaf(3, 4, true, 1)}, 1, &b);
  char *m = saved_names(&b.mincut);
  cr_expect_str_eq(m, "primals_1,getitem,getitem_1");
  cr_expect_eq(b.mincut.saved_bytes, 96 + 96 + 12);
  cr_expect_eq(graph_calls(b.mincut.bw, "native_dropout"), 0);
  cr_expect_eq(graph_calls(b.mincut.fw, "native_dropout"), 1);
  free(m);
  both_fini(&b);
  kn_compiled_free(f);
  kn_scope_end();
}

/* ---- the setting, and results equal to eager under min-cut -------------------------- */

static double max_diff(kn_tensor *a, kn_tensor *b) {
  cr_assert(a && b, "missing tensor (%s)", kn_last_error());
  double v = INFINITY;
  cr_assert_eq(kn_item_double(kn_amax(kn_abs(kn_sub(a, b)), NULL, 0, false), &v), KN_OK, "%s",
               kn_last_error());
  return v;
}

static kn_tensor *mlp_loss(kn_tensor *x, kn_tensor *w1, kn_tensor *b1, kn_tensor *w2) {
  return kn_mean(kn_tanh(kn_mm(kn_relu(kn_add(kn_mm(x, w1), b1)), w2)));
}

/* KILN_AOT_PARTITIONER=min_cut: aot_eager compiles with min-cut; outputs and
** gradients equal eager's on the chain and an MLP step. */
Test(aot_partition, min_cut_results_equal_eager) {
  setenv("KILN_AOT_PARTITIONER", "min_cut", 1);
  kn_scope_begin();
  kn_compile_options o = {.backend = "aot_eager"};
  kn_compiled *f = KN_COMPILE(chain, &o), *g = KN_COMPILE(mlp_loss, &o);
  kn_tensor *x = leaf(3, 4, true, 1), *x2 = leaf(3, 4, true, 1);
  kn_tensor *got = kn_call_t(f, x), *want = chain(x2);
  cr_assert_eq(kn_backward(kn_sum(got), NULL), KN_OK, "%s", kn_last_error());
  cr_assert_eq(kn_backward(kn_sum(want), NULL), KN_OK, "%s", kn_last_error());
  cr_expect_leq(max_diff(got, want), 0.0);
  cr_expect_leq(max_diff(kn_grad(x), kn_grad(x2)), 1e-15);
  kn_tensor *in[4] = {leaf(16, 8, false, 3), leaf(8, 32, true, 4), leaf(1, 32, true, 5),
                      leaf(32, 4, true, 6)};
  kn_tensor *in2[4];
  for (int i = 0; i < 4; i++) {
    in2[i] = kn_detach(in[i]);
    kn_set_requires_grad(in2[i], i > 0);
  }
  got = kn_call_t(g, in[0], in[1], in[2], in[3]);
  want = mlp_loss(in2[0], in2[1], in2[2], in2[3]);
  cr_assert_eq(kn_backward(got, NULL), KN_OK, "%s", kn_last_error());
  cr_assert_eq(kn_backward(want, NULL), KN_OK, "%s", kn_last_error());
  cr_expect_leq(max_diff(got, want), 1e-15);
  for (int i = 1; i < 4; i++) cr_expect_leq(max_diff(kn_grad(in[i]), kn_grad(in2[i])), 1e-15, "input %d", i);
  kn_compiled_free(f);
  kn_compiled_free(g);
  kn_scope_end();
  unsetenv("KILN_AOT_PARTITIONER");
}

Test(aot_partition, setting_overrides_the_backend) {
  kn__aot_config cfg = {.partitioner = KN__AOT_PART_MINCUT};
  const char *from = NULL;
  unsetenv("KILN_AOT_PARTITIONER");
  cr_expect_eq(kn__aot_partitioner_resolve(&cfg, &from), KN__AOT_PART_MINCUT);
  cr_expect_str_eq(from, "backend");
  setenv("KILN_AOT_PARTITIONER", "default", 1);
  cr_expect_eq(kn__aot_partitioner_resolve(&cfg, &from), KN__AOT_PART_DEFAULT);
  cr_expect_str_eq(from, "KILN_AOT_PARTITIONER");
  setenv("KILN_AOT_PARTITIONER", "mincut", 1); /* not a partitioner: the backend's, warned */
  cr_expect_eq(kn__aot_partitioner_resolve(&cfg, &from), KN__AOT_PART_MINCUT);
  cr_expect_str_eq(from, "backend");
  char *txt = kn__aot_config_text(kn__aot_partitioner_resolve(&cfg, &from), from);
  cr_expect_str_eq(txt, "autograd_cache = True\nfunctionalize = True\npartitioner = 'min_cut'\n"
                        "partitioner_from = 'backend'\nsymbolic_joint_graphs = True\n");
  free(txt);
  unsetenv("KILN_AOT_PARTITIONER");
}
