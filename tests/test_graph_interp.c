/*
** test_graph_interp.c: the graph interpreter (the eager backend's program)
** against the same ops run eagerly and against values computed by hand;
** symbolic sizes bound from the inputs; multi-output ops and constants;
** errors without leaks; concurrent runs; autograd through a run; the public
** graph module; serialization and hash stability.
*/
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "graph_util.h"
#include "kiln/autograd.h"
#include "kiln/graph.h"
#include "kiln/kiln.h"
#include "kiln/ops_nn.h"
#include "kiln/ops_pointwise.h"

static kn_tensor *ramp(int64_t n, int64_t m) {
  float *v = malloc((size_t)(n * m) * sizeof *v);
  for (int64_t i = 0; i < n * m; i++) v[i] = (float)i * 0.25f - 3.0f;
  kn_tensor *t = kn_from_floats(v, 2, (int64_t[]){n, m});
  free(v);
  return t;
}

static void assert_same(const kn_tensor *a, const kn_tensor *b) {
  cr_assert_eq(kn_ndim(a), kn_ndim(b));
  for (int d = 0; d < kn_ndim(a); d++) cr_assert_eq(kn_size(a, d), kn_size(b, d));
  cr_assert_eq(kn_tensor_dtype(a), kn_tensor_dtype(b));
  int64_t n = kn_numel(a), idx[KN_MAX_DIMS] = {0};
  for (int64_t e = 0; e < n; e++) {
    cr_assert_eq(kn_get(a, idx), kn_get(b, idx), "element %lld", (long long)e);
    for (int d = kn_ndim(a) - 1; d >= 0; d--) {
      if (++idx[d] < kn_size(a, d)) break;
      idx[d] = 0;
    }
  }
}

Test(graph_interp, example_fn_matches_eager_and_hand_values) {
  int64_t live = kn_live_tensors();
  kn__graph *g = example_graph(4);
  kn__gprog *p;
  cr_assert_eq(kn__gprog_new(g, &p), KN_OK, "%s", kn_last_error());
  cr_assert_eq(kn__gprog_num_inputs(p), 1);
  cr_assert_eq(kn__gprog_num_outputs(p), 1);
  kn_tensor *a = ramp(4, 4), *out = NULL;
  for (int rep = 0; rep < 3; rep++) {
    cr_assert_eq(kn__gprog_run(p, &a, 1, &out, 1), KN_OK, "%s", kn_last_error());
    for (int64_t i = 0; i < 16; i++) /* a * 1 + 1, by hand */
      cr_assert_eq(((float *)kn_data(out))[i], (float)i * 0.25f - 3.0f + 1.0f);
    kn_scope_begin();
    kn_tensor *eager = kn_add(kn_mul(a, kn_ones(KN_SHAPE(4, 4), KN_FLOAT32)),
                              kn_ones(KN_SHAPE(4, 4), KN_FLOAT32));
    assert_same(out, eager);
    kn_scope_end();
    kn_release(out);
  }
  kn_release(a);
  kn__gprog_free(p);
  kn__graph_free(g);
  cr_assert_eq(kn_live_tensors(), live);
}

/* a @ b with sizes (s0, s1) @ (s1, s3); hints 5x10 @ 10x15. */
static kn__graph *dyn_matmul(void) {
  kn_sym s[4];
  kn__gnode *mm;
  kn__vmeta mo;
  kn__graph *g = dyn_matmul_graph(kn__shape_env_new(), s, &mm, &mo);
  /* ones of size (s0, s3): symbolic int list argument */
  kn_sym sz[2] = {s[0], s[3]};
  kn__garg fa[3] = {KN_GA_INTS(sz, 2), KN_GA_S(kn_int(1)), KN_GA_DT(KN_FLOAT32)};
  kn__gnode *ones = kn__graph_call(g, &kn__ops[KN_OP_FULL], 3, fa, 1, &mo);
  kn__garg aa[3] = {KN_GA_T(mm), KN_GA_T(ones), KN_GA_S(kn_int(1))};
  kn__gnode *add = kn__graph_call(g, &kn__ops[KN_OP_ADD], 3, aa, 1, &mo);
  kn__gref r = {add, 0};
  kn__graph_output(g, 1, &r);
  return g;
}

Test(graph_interp, symbolic_sizes_bind_from_inputs) {
  int64_t live = kn_live_tensors();
  kn__graph *g = dyn_matmul();
  kn__gprog *p;
  cr_assert_eq(kn__gprog_new(g, &p), KN_OK, "%s", kn_last_error());
  static const int64_t shapes[][3] = {{5, 10, 15}, {3, 10, 2}, {7, 4, 9}};
  for (int k = 0; k < 3; k++) {
    int64_t n = shapes[k][0], c = shapes[k][1], m = shapes[k][2];
    kn_scope_begin();
    kn_tensor *in[2] = {ramp(n, c), ramp(c, m)}, *out;
    cr_assert_eq(kn__gprog_run(p, in, 2, &out, 1), KN_OK, "%s", kn_last_error());
    cr_assert_eq(kn_size(out, 0), n);
    cr_assert_eq(kn_size(out, 1), m);
    kn_tensor *eager = kn_add_scalar(kn_matmul(in[0], in[1]), kn_int(1));
    assert_same(out, eager);
    kn_release(out);
    kn_scope_end();
  }
  kn__gprog_free(p);
  kn__graph_free(g);
  cr_assert_eq(kn_live_tensors(), live);
}

Test(graph_interp, unbound_symbols_are_refused) {
  kn__shape_env *env = kn__shape_env_new();
  kn_sym s0;
  kn__shape_env_create_symbol(env, 3, 2, &s0);
  kn__graph *g = kn__graph_new();
  kn__graph_set_shape_env(g, env, true);
  kn_sym sz[1] = {s0};
  kn__garg fa[3] = {KN_GA_INTS(sz, 1), KN_GA_S(kn_int(1)), KN_GA_NONE};
  kn__vmeta m = tmeta(KN_FLOAT32, 1, (int64_t[]){3});
  m.sizes[0] = s0;
  kn__gnode *o = kn__graph_call(g, &kn__ops[KN_OP_FULL], 3, fa, 1, &m);
  kn__gref r = {o, 0};
  kn__graph_output(g, 1, &r);
  kn__gprog *p = (kn__gprog *)1;
  cr_assert_eq(kn__gprog_new(g, &p), KN_EUNSUPPORTED);
  cr_assert_null(p);
  cr_assert_str_eq(kn_last_error(), "graph program: argument s0 of node 'full' uses a symbol "
                                    "that is not the size of any input");
  kn__graph_free(g);
}

static kn__graph *split_graph(kn_tensor *constant) {
  kn__graph *g = kn__graph_new();
  kn__vmeta m = tmeta(KN_FLOAT32, 2, (int64_t[]){4, 3});
  kn__vmeta h[2] = {tmeta(KN_FLOAT32, 2, (int64_t[]){2, 3}), tmeta(KN_FLOAT32, 2, (int64_t[]){2, 3})};
  kn__gnode *x = kn__graph_placeholder(g, "L['x']", &m);
  kn__garg sargs[3] = {KN_GA_T(x), KN_GA_I(2), KN_GA_I(0)};
  kn__gnode *sp = kn__graph_call(g, &kn__ops[KN_OP_SPLIT], 3, sargs, 2, h);
  kn__gref g0 = kn__graph_value(g, sp, 0), g1 = kn__graph_value(g, sp, 1);
  kn__gnode *k = kn__graph_get_attr(g, "_tensor_constant0", constant);
  kn__garg a1[3] = {KN_GA_REF(g0), KN_GA_REF(g1), KN_GA_S(kn_float(0.5))};
  kn__gnode *ad = kn__graph_call(g, &kn__ops[KN_OP_ADD], 3, a1, 1, &h[0]);
  kn__garg a2[2] = {KN_GA_T(ad), KN_GA_T(k)};
  kn__gnode *mu = kn__graph_call(g, &kn__ops[KN_OP_MUL], 2, a2, 1, &h[0]);
  kn__gref outs[3] = {{mu, 0}, {x, 0}, g1};
  kn__graph_output(g, 3, outs);
  return g;
}

Test(graph_interp, multi_output_constants_and_returned_inputs) {
  int64_t live = kn_live_tensors();
  kn_tensor *c = kn_from_floats((float[]){1, 2, 3}, 1, (int64_t[]){3});
  kn__graph *g = split_graph(c);
  kn_release(c);
  kn__gprog *p;
  cr_assert_eq(kn__gprog_new(g, &p), KN_OK, "%s", kn_last_error());
  kn_tensor *x = ramp(4, 3), *out[3];
  cr_assert_eq(kn__gprog_run(p, &x, 1, out, 3), KN_OK, "%s", kn_last_error());
  const float *xv = kn_data(x);
  for (int i = 0; i < 2; i++)
    for (int j = 0; j < 3; j++) /* (x[i] + 0.5 * x[i + 2]) * c[j] */
      cr_assert_eq(kn_get(out[0], (int64_t[]){i, j}),
                   (double)((xv[i * 3 + j] + 0.5f * xv[(i + 2) * 3 + j]) * (float)(j + 1)));
  cr_assert_eq(out[1], x, "a returned input is the input itself (new reference)");
  cr_assert(kn_same_storage(out[2], x), "getitem of a split is a view of the input");
  cr_assert_eq(kn_get(out[2], (int64_t[]){0, 0}), (double)xv[6]);
  for (int i = 0; i < 3; i++) kn_release(out[i]);
  kn_release(x);
  kn__gprog_free(p);
  kn__graph_free(g);
  cr_assert_eq(kn_live_tensors(), live);
}

Test(graph_interp, errors_leave_nothing_behind) {
  int64_t live = kn_live_tensors();
  kn__graph *g = example_graph(4);
  kn__gprog *p;
  cr_assert_eq(kn__gprog_new(g, &p), KN_OK);
  kn_tensor *bad = ramp(4, 3), *out = (kn_tensor *)1;
  cr_assert_eq(kn__gprog_run(p, &bad, 1, &out, 1), KN_ESHAPE);
  cr_assert(strstr(kn_last_error(), "while running graph node 'output'"), "%s", kn_last_error());
  cr_assert(strstr(kn_last_error(), "must match the size of tensor b (4)"), "%s", kn_last_error());
  cr_assert_eq(out, (kn_tensor *)1, "no output on failure");
  kn_tensor *r3 = kn_ones(KN_SHAPE(4, 4, 1), KN_FLOAT32);
  cr_assert_eq(kn__gprog_run(p, &r3, 1, &out, 1), KN_ESHAPE);
  cr_assert_str_eq(kn_last_error(), "graph input 0 ('L_a_'): expected a tensor of rank 2, got "
                                    "rank 3");
  cr_assert_eq(kn__gprog_run(p, &bad, 2, &out, 1), KN_EINVAL);
  cr_assert_str_eq(kn_last_error(), "graph program: expected 1 inputs and 1 outputs, got 2 "
                                    "inputs and 1 outputs");
  kn_tensor *null_in = NULL;
  cr_assert_eq(kn__gprog_run(p, &null_in, 1, &out, 1), KN_EINVAL);
  cr_assert_str_eq(kn_last_error(), "graph input 0 ('L_a_') is NULL");
  kn_release(bad);
  kn_release(r3);
  kn__gprog_free(p);
  kn__graph_free(g);
  cr_assert_eq(kn_live_tensors(), live);
}

Test(graph_interp, graphs_that_do_not_verify_have_no_program) {
  kn__graph *g = kn__graph_new();
  kn__graph_placeholder(g, "L['a']", NULL);
  kn__gprog *p = NULL;
  cr_assert_eq(kn__gprog_new(g, &p), KN_EINVAL);
  cr_assert_null(p);
  kn_graph_module *gm = (kn_graph_module *)1;
  cr_assert_eq(kn__graph_module_new(g, &gm), KN_EINVAL, "graph is consumed even on failure");
  cr_assert_null(gm);
}

Test(graph_interp, autograd_records_through_a_run) {
  int64_t live = kn_live_tensors();
  kn__graph *g = example_graph(2);
  kn__gprog *p;
  cr_assert_eq(kn__gprog_new(g, &p), KN_OK);
  kn_tensor *a = ramp(2, 2), *out;
  kn_set_requires_grad(a, true);
  cr_assert_eq(kn__gprog_run(p, &a, 1, &out, 1), KN_OK, "%s", kn_last_error());
  cr_assert(kn_requires_grad(out));
  cr_assert_str_eq(kn_grad_fn_name(out), "AddBackward0");
  kn_tensor *go = kn_ones(KN_SHAPE(2, 2), KN_FLOAT32);
  cr_assert_eq(kn_backward(out, go), KN_OK, "%s", kn_last_error());
  for (int i = 0; i < 2; i++)
    for (int j = 0; j < 2; j++) /* d(a*1+1)/da = 1 */
      cr_assert_eq(kn_get(kn_grad(a), (int64_t[]){i, j}), 1.0);
  kn_release(go);
  kn_release(out);
  kn_release(a);
  kn__gprog_free(p);
  kn__graph_free(g);
  cr_assert_eq(kn_live_tensors(), live);
}

/* Per-node attributes replayed by the interpreter: a node traced with grad
** mode off runs with it off (whatever the caller's mode), a node made to
** require grad gives a leaf that requires grad; both change the hash. */
Test(graph_interp, node_grad_mode_and_requires_grad_are_replayed) {
  int64_t live = kn_live_tensors();
  kn__graph *g = example_graph(2);
  char h0[65], h1[65], h2[65];
  cr_assert_eq(kn__graph_hash(g, h0), KN_OK);
  kn__gnode *last = NULL, *ones = NULL;
  for (int i = 0; i < kn__graph_num_nodes(g); i++) {
    kn__gnode *n = kn__graph_node(g, i);
    if (n->op != KN__GN_CALL) continue;
    if (!ones) ones = n;
    last = n;
  }
  cr_assert(last && ones && last != ones);
  for (int i = 0; i < kn__graph_num_nodes(g); i++)
    if (kn__graph_node(g, i)->op == KN__GN_CALL) kn__graph_node(g, i)->grad_mode = 0;
  cr_assert_eq(kn__graph_hash(g, h1), KN_OK);
  cr_expect_str_neq(h0, h1);
  kn__gprog *p;
  cr_assert_eq(kn__gprog_new(g, &p), KN_OK);
  kn_tensor *a = ramp(2, 2), *out;
  kn_set_requires_grad(a, true);
  cr_assert_eq(kn__gprog_run(p, &a, 1, &out, 1), KN_OK, "%s", kn_last_error());
  cr_expect_not(kn_requires_grad(out), "ran with grad mode off: no history");
  cr_expect(kn_is_grad_enabled(), "the caller's grad mode is restored");
  kn_release(out);
  kn__gprog_free(p);
  ones->grad_mode = -1;
  ones->set_requires_grad = true;
  cr_assert_eq(kn__graph_hash(g, h2), KN_OK);
  cr_expect_str_neq(h1, h2);
  for (int i = 0; i < kn__graph_num_nodes(g); i++)
    if (kn__graph_node(g, i)->op == KN__GN_CALL) kn__graph_node(g, i)->grad_mode = -1;
  cr_assert_eq(kn__gprog_new(g, &p), KN_OK);
  kn_set_requires_grad(a, false);
  cr_assert_eq(kn__gprog_run(p, &a, 1, &out, 1), KN_OK, "%s", kn_last_error());
  cr_expect(kn_requires_grad(out), "the ones node's output requires grad: history recorded");
  kn_release(out);
  kn_release(a);
  kn__gprog_free(p);
  kn__graph_free(g);
  cr_assert_eq(kn_live_tensors(), live);
}

typedef struct runner { kn__gprog *p; kn_tensor *a; int bad; } runner;

static void *run_many(void *arg) {
  runner *r = arg;
  for (int i = 0; i < 300; i++) {
    kn_tensor *out;
    if (kn__gprog_run(r->p, &r->a, 1, &out, 1) != KN_OK) {
      r->bad++;
      continue;
    }
    for (int64_t k = 0; k < 16; k++)
      if (((float *)kn_data(out))[k] != (float)k * 0.25f - 2.0f) r->bad++;
    kn_release(out);
  }
  return NULL;
}

Test(graph_interp, concurrent_runs_share_one_program) {
  int64_t live = kn_live_tensors();
  kn__graph *g = example_graph(4);
  kn__gprog *p;
  cr_assert_eq(kn__gprog_new(g, &p), KN_OK);
  kn_tensor *a = ramp(4, 4);
  runner r[3] = {{p, a, 0}, {p, a, 0}, {p, a, 0}};
  pthread_t th[3];
  for (int i = 0; i < 3; i++) pthread_create(&th[i], NULL, run_many, &r[i]);
  for (int i = 0; i < 3; i++) pthread_join(th[i], NULL);
  for (int i = 0; i < 3; i++) cr_assert_eq(r[i].bad, 0);
  kn_release(a);
  kn__gprog_free(p);
  kn__graph_free(g);
  cr_assert_eq(kn_live_tensors(), live);
}

/* ---- the public graph module ------------------------------------------------ */

Test(graph_module, call_code_and_scope_ownership) {
  int64_t live = kn_live_tensors();
  kn_graph_module *gm;
  cr_assert_eq(kn__graph_module_new(example_graph(3), &gm), KN_OK, "%s", kn_last_error());
  cr_assert_eq(kn_graph_module_num_inputs(gm), 1);
  cr_assert_eq(kn_graph_module_num_outputs(gm), 1);
  cr_assert_eq(kn_graph_module_num_inputs(NULL), -1);
  char *code = kn_graph_module_code(gm), *direct = kn__graph_code(kn__graph_module_graph(gm), NULL);
  cr_assert_str_eq(code, direct);
  cr_assert(strncmp(code, "class GraphModule(torch.nn.Module):\n", 36) == 0);
  free(code);
  free(direct);
  kn_scope_begin();
  kn_tensor *a = kn_full(KN_SHAPE(3, 3), kn_float(2.0), KN_FLOAT32), *out;
  cr_assert_eq(kn_graph_module_call(gm, &a, 1, &out, 1), KN_OK, "%s", kn_last_error());
  cr_assert_eq(kn_get(out, (int64_t[]){2, 1}), 3.0);
  kn_scope_end(); /* releases a and out */
  cr_assert_eq(kn_live_tensors(), live);
  cr_assert_eq(kn_graph_module_call(gm, NULL, 0, &out, 1), KN_EINVAL);
  cr_assert_eq(kn_graph_module_call(NULL, NULL, 0, NULL, 0), KN_EINVAL);
  kn_graph_module_free(gm);
  kn_graph_module_free(NULL);
  cr_assert_eq(kn_live_tensors(), live);
}

/* ---- canonical serialization and hash ---------------------------------------- */

/* Hash of g (which is freed); each call gets its own buffer (up to 16). */
static char *hash_of(kn__graph *g) {
  static char hex[16][65];
  static int k;
  char *h = hex[k++ % 16];
  cr_assert_eq(kn__graph_hash(g, h), KN_OK);
  kn__graph_free(g);
  return h;
}

Test(graph_hash, serialization_text) {
  kn__graph *g = example_graph(2);
  char *s = kn__graph_serialize(g);
  cr_assert_str_eq(s, "kiln-graph 1 nodes=6 inputs=1\n"
                      "%0 placeholder :float32[2,2][2,1]+0\n"
                      "%1 call_function full. (is:[2,2], s:i:1, dt:float32) :float32[2,2][2,1]+0\n"
                      "%2 call_function mul.Tensor (t:%0.0, t:%1.0) :float32[2,2][2,1]+0\n"
                      "%3 call_function full. (is:[2,2], s:i:1, dt:float32) :float32[2,2][2,1]+0\n"
                      "%4 call_function add.Tensor (t:%2.0, t:%3.0, s:i:1) :float32[2,2][2,1]+0\n"
                      "%5 output (t:%4.0)\n");
  free(s);
  kn__graph_free(g);
}

Test(graph_hash, stable_and_sensitive) {
  char *h1 = hash_of(example_graph(4)), *h2 = hash_of(example_graph(4));
  cr_assert_eq(strlen(h1), 64);
  cr_assert_str_eq(h1, h2, "same graph, same hash");
  /* names, sources and locations do not matter */
  kn__graph *g = example_graph(4);
  kn__graph_node_set_name_hint(kn__graph_find(g, "output"), "renamed");
  kn__gframe fr = {"other.c", 99, "g"};
  kn__graph_node_set_stack(kn__graph_find(g, "ones"), &fr, 1, "x");
  cr_assert_str_eq(hash_of(g), h1);
  /* a changed constant (the fill value of the second ones) changes it */
  g = example_graph(4);
  kn__garg *fa = (kn__garg *)kn__graph_find(g, "ones_1")->args;
  fa[1].u.s = kn_int(2);
  cr_assert_str_neq(hash_of(g), h1);
  /* so does a size */
  cr_assert_str_neq(hash_of(example_graph(5)), h1);
  /* and a float scalar whose value differs in the last bit */
  g = example_graph(4);
  fa = (kn__garg *)kn__graph_find(g, "ones_1")->args;
  fa[1].u.s = kn_float(1.0);
  char *hf = hash_of(g);
  g = example_graph(4);
  fa = (kn__garg *)kn__graph_find(g, "ones_1")->args;
  fa[1].u.s = kn_float(1.0000000000000002);
  cr_assert_str_neq(hash_of(g), hf);
  cr_assert_str_neq(hf, h1, "int 1 and float 1.0 are different constants");
}

Test(graph_hash, get_attr_data_counts) {
  int64_t live = kn_live_tensors();
  kn_tensor *c1 = kn_from_floats((float[]){1, 2, 3}, 1, (int64_t[]){3});
  kn_tensor *c2 = kn_from_floats((float[]){1, 2, 4}, 1, (int64_t[]){3});
  kn__graph *g1 = split_graph(c1), *g2 = split_graph(c2), *g3 = split_graph(c1);
  char *s = kn__graph_serialize(g1);
  cr_assert(strstr(s, "%4 get_attr :float32[3][1]+0 data:0000803f0000004000004040\n"), "%s", s);
  free(s);
  char a[65], b[65], c[65];
  kn__graph_hash(g1, a);
  kn__graph_hash(g2, b);
  kn__graph_hash(g3, c);
  cr_assert_str_neq(a, b);
  cr_assert_str_eq(a, c);
  kn__graph_free(g1);
  kn__graph_free(g2);
  kn__graph_free(g3);
  kn_release(c1);
  kn_release(c2);
  cr_assert_eq(kn_live_tensors(), live);
}

Test(graph_interp, tensor_lists_and_symbolic_int_printing) {
  int64_t live = kn_live_tensors();
  /* cat([split[1], split[0]], 0) of split(x, 2): the halves swapped */
  kn__graph *g = kn__graph_new();
  kn__vmeta m = tmeta(KN_FLOAT32, 2, (int64_t[]){4, 3});
  kn__vmeta h[2] = {tmeta(KN_FLOAT32, 2, (int64_t[]){2, 3}), tmeta(KN_FLOAT32, 2, (int64_t[]){2, 3})};
  kn__gnode *x = kn__graph_placeholder(g, "L['x']", &m);
  kn__garg sargs[3] = {KN_GA_T(x), KN_GA_I(2), KN_GA_I(0)};
  kn__gnode *sp = kn__graph_call(g, &kn__ops[KN_OP_SPLIT], 3, sargs, 2, h);
  kn__gref parts[2] = {kn__graph_value(g, sp, 1), kn__graph_value(g, sp, 0)};
  kn__garg cargs[2] = {KN_GA_TS(parts, 2), KN_GA_I(0)};
  kn__gnode *cat = kn__graph_call(g, &kn__ops[KN_OP_CAT], 2, cargs, 1, &m);
  kn__gref r = {cat, 0};
  kn__graph_output(g, 1, &r);
  char *code = kn__graph_code(g, NULL);
  /* getitem nodes are named in creation order: output 1 was asked for first */
  cr_assert(strstr(code, "        getitem: \"f32[2, 3][3, 1]cpu\" = split[1]\n"
                         "        getitem_1: \"f32[2, 3][3, 1]cpu\" = split[0];  split = None\n"
                         "        cat: \"f32[4, 3][3, 1]cpu\" = kiln.ops.cat([getitem, getitem_1], "
                         "0);  getitem = getitem_1 = None\n"), "%s", code);
  free(code);
  kn__gprog *p;
  cr_assert_eq(kn__gprog_new(g, &p), KN_OK, "%s", kn_last_error());
  kn_tensor *in = ramp(4, 3), *out;
  cr_assert_eq(kn__gprog_run(p, &in, 1, &out, 1), KN_OK, "%s", kn_last_error());
  for (int i = 0; i < 4; i++)
    for (int j = 0; j < 3; j++)
      cr_assert_eq(kn_get(out, (int64_t[]){i, j}), kn_get(in, (int64_t[]){(i + 2) % 4, j}));
  kn_release(out);
  kn_release(in);
  kn__gprog_free(p);
  kn__graph_free(g);

  /* symbolic int lists print and serialize with their symbols */
  g = dyn_matmul();
  code = kn__graph_code(g, NULL);
  cr_assert(strstr(code, " = kiln.ops.full([s0, s3], 1, dtype = kiln.float32)\n"), "%s", code);
  free(code);
  char *s = kn__graph_serialize(g);
  cr_assert(strstr(s, "%3 call_function full. (is:[{s0},{s3}], s:i:1, dt:float32) "
                      ":float32[{s0},{s3}][{s3},1]+0\n"), "%s", s);
  free(s);
  kn__graph_free(g);
  cr_assert_eq(kn_live_tensors(), live);
}
