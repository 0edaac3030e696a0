/*
** test_graph.c: graph IR construction: FX naming rules (compared with
** torch.fx's _Namespace results), placeholders from sources, getitem nodes,
** user counts, renames, erasure, dead-code elimination, and the verifier's
** errors.
*/
#include <criterion/criterion.h>
#include <string.h>

#include "core/error.h"
#include "graph_util.h"
#include "kiln/kiln.h"

/* Names torch.fx 1.13's _Namespace().create_name gives for this sequence of
** candidates (computed with torch; see the expected column). */
Test(graph_names, fx_namespace_sequence) {
  static const char *const cand[][2] = {
      {"ones", "ones"},         {"output", "output"},   {"ones", "ones_1"},
      {"output", "output_1"},   {"sum", "sum_1"},       {"sum", "sum_2"},
      {"input", "input_1"},     {"getitem", "getitem"}, {"getitem", "getitem_1"},
      {"add", "add"},           {"add_1", "add_1"},     {"add", "add_2"},
      {"for", "for_1"},         {"1abc", "_1abc"},      {"my-val", "my_val"},
      {"output_1", "output_2"}, {"x_0", "x_0"},         {"x", "x"},
      {"output", "output_3"},
  };
  kn__graph *g = kn__graph_new();
  int64_t sz[1] = {2};
  kn__vmeta m = tmeta(KN_FLOAT32, 1, sz);
  kn__gnode *a = kn__graph_placeholder(g, "L['a']", &m);
  for (size_t i = 0; i < sizeof cand / sizeof cand[0]; i++) {
    kn__garg args[1] = {KN_GA_T(a)};
    kn__gnode *n = kn__graph_call(g, &kn__ops[KN_OP_RELU], 1, args, 1, &m);
    cr_assert_not_null(n);
    cr_assert_eq(kn__graph_node_set_name_hint(n, cand[i][0]), KN_OK);
    cr_assert_str_eq(n->name, cand[i][1], "candidate %s: got %s, expected %s", cand[i][0],
                     n->name, cand[i][1]);
  }
  cr_assert_eq(kn__graph_verify(g) == KN_OK, false, "no output node yet");
  cr_assert(strstr(kn_last_error(), "no output node"));
  kn__graph_free(g);
}

Test(graph_names, placeholders_from_sources) {
  static const char *const src[][3] = {
      {"L['a']", "L_a_", "l_a_"},
      {"L['self']._modules['layers']._modules['0']._parameters['weight']",
       "L_self_modules_layers_modules_0_parameters_weight_",
       "l_self_modules_layers_modules_0_parameters_weight_"},
      {"L['___stack0']", "L_stack0_", "l_stack0_"},
      {"L['input']", "L_input_", "l_input_"},
      {"L['x']", "L_x_", "l_x_"},
      {"L['xY']", "L_xY_", "l_x_y_"}, /* FX's snake case */
  };
  kn__graph *g = kn__graph_new();
  for (size_t i = 0; i < sizeof src / sizeof src[0]; i++) {
    kn__gnode *p = kn__graph_placeholder(g, src[i][0], NULL);
    cr_assert_not_null(p);
    cr_assert_str_eq(p->target, src[i][1]);
    cr_assert_str_eq(p->name, src[i][2]);
    cr_assert_str_eq(p->source, src[i][0]);
    cr_assert_eq(p->op, KN__GN_PLACEHOLDER);
  }
  cr_assert_eq(kn__graph_num_inputs(g), 6);
  cr_assert_null(kn__graph_placeholder(g, "", NULL));
  cr_assert_eq(kn_last_status(), KN_EINVAL);
  kn__graph_free(g);
}

Test(graph_names, op_names_and_builtins) {
  kn__graph *g = kn__graph_new();
  int64_t sz[1] = {3};
  kn__vmeta m = tmeta(KN_FLOAT32, 1, sz);
  kn__gnode *a = kn__graph_placeholder(g, "L['a']", &m);
  kn__garg one[2] = {KN_GA_T(a), KN_GA_NONE};
  kn__vmeta m0 = tmeta(KN_FLOAT32, 0, NULL);
  kn__gnode *s1 = kn__graph_call(g, &kn__ops[KN_OP_SUM], 2, one, 1, &m0);
  kn__gnode *s2 = kn__graph_call(g, &kn__ops[KN_OP_SUM], 2, one, 1, &m0);
  kn__garg two[3] = {KN_GA_T(a), KN_GA_T(a), KN_GA_S(kn_int(1))};
  kn__gnode *d1 = kn__graph_call(g, &kn__ops[KN_OP_ADD], 3, two, 1, &m);
  kn__gnode *d2 = kn__graph_call(g, &kn__ops[KN_OP_ADD], 3, two, 1, &m);
  kn__gnode *d3 = kn__graph_call(g, &kn__ops[KN_OP_ADD], 3, two, 1, &m);
  cr_assert_str_eq(s1->name, "sum_1"); /* seed 001: the first sum is sum_1 */
  cr_assert_str_eq(s2->name, "sum_2");
  cr_assert_str_eq(d1->name, "add");
  cr_assert_str_eq(d2->name, "add_1");
  cr_assert_str_eq(d3->name, "add_2");
  cr_assert_str_eq(d1->target, "kiln.ops.add");
  cr_assert_eq(a->nusers, 2 + 3 * 2);
  kn__gref r = {d3, 0};
  kn__gnode *o = kn__graph_output(g, 1, &r);
  cr_assert_str_eq(o->name, "output");
  cr_assert_eq(kn__graph_op_count(g), 5);
  cr_assert_eq(kn__graph_find(g, "add_1"), d2);
  cr_assert_null(kn__graph_find(g, "add_7"));
  /* a node after the output node is refused */
  cr_assert_null(kn__graph_call(g, &kn__ops[KN_OP_ADD], 3, two, 1, &m));
  cr_assert_eq(kn_last_status(), KN_ESTATE);
  cr_assert_eq(kn__graph_verify(g), KN_OK, "%s", kn_last_error());
  /* dead code: sum_1, sum_2, add, add_1 are unused; add_2 is returned */
  cr_assert_eq(kn__graph_eliminate_dead_code(g), 4);
  cr_assert_eq(kn__graph_num_nodes(g), 3);
  cr_assert_str_eq(kn__graph_node(g, 1)->name, "add_2");
  cr_assert_eq(a->nusers, 2);
  cr_assert_eq(kn__graph_verify(g), KN_OK, "%s", kn_last_error());
  /* the freed names are available again */
  kn__gnode *late = kn__graph_placeholder(g, "L['b']", &m);
  cr_assert_null(late, "placeholders cannot follow the output node either");
  kn__graph_free(g);
}

Test(graph_names, rename_releases_old_name_and_erase) {
  kn__graph *g = kn__graph_new();
  int64_t sz[1] = {3};
  kn__vmeta m = tmeta(KN_FLOAT32, 1, sz);
  kn__gnode *a = kn__graph_placeholder(g, "L['a']", &m);
  kn__garg arg[1] = {KN_GA_T(a)};
  kn__gnode *r1 = kn__graph_call(g, &kn__ops[KN_OP_RELU], 1, arg, 1, &m);
  cr_assert_str_eq(r1->name, "relu");
  cr_assert_eq(kn__graph_node_set_name_hint(r1, "hidden"), KN_OK);
  cr_assert_str_eq(r1->name, "hidden");
  kn__gnode *r2 = kn__graph_call(g, &kn__ops[KN_OP_RELU], 1, arg, 1, &m);
  cr_assert_str_eq(r2->name, "relu", "the old name was released by the rename");
  cr_assert_eq(kn__graph_node_set_name_hint(r2, ""), KN_EINVAL);
  kn__garg arg2[1] = {KN_GA_T(r1)};
  kn__gnode *r3 = kn__graph_call(g, &kn__ops[KN_OP_RELU], 1, arg2, 1, &m);
  cr_assert_eq(kn__graph_erase_node(g, r1), KN_ESTATE, "r1 is used by r3");
  cr_assert(strstr(kn_last_error(), "'hidden' still has 1 users"), "%s", kn_last_error());
  cr_assert_eq(kn__graph_erase_node(g, r3), KN_OK);
  cr_assert_eq(kn__graph_erase_node(g, r1), KN_OK);
  cr_assert_eq(kn__graph_num_nodes(g), 2);
  cr_assert_eq(r2->index, 1);
  cr_assert_null(kn__graph_find(g, "hidden"));
  kn__graph_free(g);
}

Test(graph_nodes, getitem_for_multi_output_ops) {
  kn__graph *g = kn__graph_new();
  int64_t sz[2] = {4, 3}, half[2] = {2, 3};
  kn__vmeta m = tmeta(KN_FLOAT32, 2, sz);
  kn__vmeta outs[2] = {tmeta(KN_FLOAT32, 2, half), tmeta(KN_FLOAT32, 2, half)};
  outs[1].offset = kn__sym_const(6);
  kn__gnode *x = kn__graph_placeholder(g, "L['x']", &m);
  kn__garg args[3] = {KN_GA_T(x), KN_GA_I(2), KN_GA_I(0)};
  kn__gnode *sp = kn__graph_call(g, &kn__ops[KN_OP_SPLIT], 3, args, 2, outs);
  cr_assert_eq(sp->nout, 2);
  kn__gref v0 = kn__graph_value(g, sp, 0), v1 = kn__graph_value(g, sp, 1);
  cr_assert_str_eq(v0.node->name, "getitem");
  cr_assert_str_eq(v1.node->name, "getitem_1");
  cr_assert_eq(kn__graph_value(g, sp, 1).node, v1.node, "one getitem per output");
  cr_assert_eq(kn__graph_getitem(g, sp, 0), v0.node);
  cr_assert_null(kn__graph_getitem(g, sp, 2));
  cr_assert(strstr(kn_last_error(), "output 2 of 'split', which has 2"), "%s", kn_last_error());
  cr_assert_eq(v1.node->meta[0].offset.c, 6);
  cr_assert_eq(sp->nusers, 2);
  cr_assert_eq(kn__graph_value(g, x, 0).node, x, "single-output nodes are their own value");
  kn__gref both[2] = {v0, v1};
  kn__graph_output(g, 2, both);
  cr_assert_eq(kn__graph_verify(g), KN_OK, "%s", kn_last_error());
  cr_assert_eq(kn__graph_op_count(g), 1, "getitem is not an op");
  kn__graph_free(g);
}

Test(graph_nodes, bad_references_are_refused) {
  kn__graph *g = kn__graph_new(), *h = kn__graph_new();
  int64_t sz[1] = {3};
  kn__vmeta m = tmeta(KN_FLOAT32, 1, sz);
  kn__gnode *a = kn__graph_placeholder(g, "L['a']", &m);
  kn__gnode *b = kn__graph_placeholder(h, "L['b']", &m);
  kn__garg foreign[1] = {KN_GA_T(b)};
  cr_assert_null(kn__graph_call(g, &kn__ops[KN_OP_RELU], 1, foreign, 1, &m));
  cr_assert(strstr(kn_last_error(), "'l_b_' is not a node of this graph"), "%s",
            kn_last_error());
  kn__garg badidx[1] = {KN_GA_TI(a, 1)};
  cr_assert_null(kn__graph_call(g, &kn__ops[KN_OP_RELU], 1, badidx, 1, &m));
  cr_assert(strstr(kn_last_error(), "output 1 of 'l_a_', which has 1"), "%s", kn_last_error());
  cr_assert_null(kn__graph_call(g, NULL, 0, NULL, 1, &m));
  cr_assert_eq(kn_last_status(), KN_EINVAL);
  kn__gref none = {NULL, 0};
  cr_assert_null(kn__graph_output(g, 1, &none));
  cr_assert_null(kn__graph_get_attr(g, "c", NULL));
  cr_assert_eq(kn__graph_num_nodes(g), 1, "failed creations add nothing");
  kn__graph_free(g);
  kn__graph_free(h);
}

/* ---- verifier -------------------------------------------------------------- */

Test(graph_verify, example_graph_verifies) {
  kn__graph *g = example_graph(1000);
  cr_assert_eq(kn__graph_verify(g), KN_OK, "%s", kn_last_error());
  cr_assert_eq(kn__graph_num_nodes(g), 6);
  cr_assert_str_eq(kn__graph_output_node(g)->name, "output_2");
  kn__graph_free(g);
}

Test(graph_verify, tampered_graphs_fail_with_clear_messages) {
  kn__graph *g = example_graph(4);
  kn__gnode *mul = kn__graph_find(g, "output");
  kn__gnode *add = kn__graph_find(g, "output_1");
  kn__gnode *ones1 = kn__graph_find(g, "ones_1");

  /* a user count out of sync */
  mul->nusers++;
  cr_assert_eq(kn__graph_verify(g), KN_EINVAL);
  cr_assert_str_eq(kn_last_error(), "graph verify: node 'output' records 2 users, found 1");
  mul->nusers--;

  /* an argument that refers to a later node */
  kn__garg *margs = (kn__garg *)mul->args;
  kn__gref saved = margs[1].u.t;
  margs[1].u.t = (kn__gref){ones1, 0};
  cr_assert_eq(kn__graph_verify(g), KN_EINVAL);
  cr_assert_str_eq(kn_last_error(), "graph verify: node 'output' (#2) uses 'ones_1' (#3), "
                                    "which does not come before it");
  margs[1].u.t = saved;

  /* an output index that does not exist */
  margs[1].u.t.idx = 3;
  cr_assert_eq(kn__graph_verify(g), KN_EINVAL);
  cr_assert_str_eq(kn_last_error(),
                   "graph verify: node 'output' uses output 3 of 'ones', which has 1 output(s)");
  margs[1].u.t.idx = 0;

  /* inconsistent metadata */
  kn__vmeta *am = (kn__vmeta *)add->meta;
  am->ndim = KN_MAX_DIMS + 1;
  cr_assert_eq(kn__graph_verify(g), KN_EINVAL);
  cr_assert_str_eq(kn_last_error(),
                   "graph verify: node 'output_1' output 0: expected rank 0..8, got 9");
  am->ndim = 2;
  am->sizes[1] = kn__sym_const(-1);
  cr_assert_eq(kn__graph_verify(g), KN_EINVAL);
  cr_assert_str_eq(kn_last_error(),
                   "graph verify: node 'output_1' output 0: negative size -1 at dim 1");
  am->sizes[1] = kn__sym_const(4);
  cr_assert_eq(kn__graph_verify(g), KN_OK, "%s", kn_last_error());
  kn__graph_free(g);
}

Test(graph_verify, get_attr_and_getitem_metadata) {
  kn__graph *g = kn__graph_new();
  kn_tensor *c = kn_ones(KN_SHAPE(2, 3), KN_FLOAT32);
  kn__gnode *k = kn__graph_get_attr(g, "_tensor_constant0", c);
  cr_assert_str_eq(k->name, "_tensor_constant0");
  cr_assert_str_eq(k->target, "_tensor_constant0");
  kn__gnode *k2 = kn__graph_get_attr(g, "_tensor_constant0", c);
  cr_assert_str_eq(k2->name, "_tensor_constant0_1");
  kn_release(c); /* the graph holds its own references */
  kn__gref r = {k, 0};
  kn__graph_output(g, 1, &r);
  cr_assert_eq(kn__graph_verify(g), KN_OK, "%s", kn_last_error());
  ((kn__vmeta *)k->meta)->dtype = KN_FLOAT64;
  cr_assert_eq(kn__graph_verify(g), KN_EINVAL);
  cr_assert_str_eq(kn_last_error(), "graph verify: get_attr '_tensor_constant0': metadata does "
                                    "not match the constant it holds");
  kn__graph_free(g);
  cr_assert_eq(kn__graph_verify(NULL), KN_EINVAL);
}

Test(graph_verify, no_leaks_of_constants) {
  int64_t live = kn_live_tensors();
  kn__graph *g = kn__graph_new();
  kn_tensor *c = kn_zeros(KN_SHAPE(4), KN_INT64);
  kn__graph_get_attr(g, "w", c);
  kn_release(c);
  cr_assert_eq(kn_live_tensors(), live + 1);
  kn__graph_free(g);
  cr_assert_eq(kn_live_tensors(), live);
}

/* ---- recording dispatcher calls ------------------------------------------- */
typedef struct lookup_map {
  kn__graph *g;
  kn_tensor *t[4];
  kn__gnode *n[4];
  int k;
  bool refuse;
} lookup_map;

/* Known tensors map to their nodes; unknown ones become constants. */
static kn_status map_tensor(void *ud, kn_tensor *t, kn__gref *out) {
  lookup_map *m = ud;
  for (int i = 0; i < m->k; i++)
    if (m->t[i] == t) {
      *out = (kn__gref){m->n[i], 0};
      return KN_OK;
    }
  if (m->refuse) return kn__error(KN_EINVAL, "unknown tensor");
  kn__gnode *c = kn__graph_get_attr(m->g, "_tensor_constant0", t);
  if (!c) return kn_last_status();
  m->t[m->k] = t;
  m->n[m->k++] = c;
  *out = (kn__gref){c, 0};
  return KN_OK;
}

Test(graph_nodes, call_from_dispatcher_call) {
  int64_t live = kn_live_tensors();
  kn__graph *g = kn__graph_new();
  kn_tensor *x = kn_empty_meta(KN_SHAPE(2, 3), KN_FLOAT32);
  kn_tensor *w = kn_ones(KN_SHAPE(2, 3), KN_FLOAT32);
  kn__vmeta m;
  kn__vmeta_from_tensor(x, &m);
  lookup_map map = {.g = g};
  map.t[0] = x;
  map.n[0] = kn__graph_placeholder(g, "L['x']", &m);
  map.k = 1;
  kn__call c = {.op = &kn__ops[KN_OP_ADD], .nargs = 3,
                .args = {KN_A_T(x), KN_A_T(w), KN_A_S(kn_float(2.0))}};
  kn__gnode *n = kn__graph_call_from(g, &c, map_tensor, &map, 1, &m);
  cr_assert_not_null(n, "%s", kn_last_error());
  cr_assert_eq(n->args[0].u.t.node, map.n[0]);
  cr_assert_eq(n->args[1].u.t.node->op, KN__GN_GET_ATTR);
  cr_assert_eq(n->args[1].u.t.node->attr, w);
  cr_assert_eq(n->args[2].kind, KN__GA_SCALAR);
  cr_assert_eq(n->args[2].u.s.v.f, 2.0);
  int64_t sz[2] = {4, 5};
  kn__call f = {.op = &kn__ops[KN_OP_FULL], .nargs = 3,
                .args = {KN_A_INTS(sz, 2), KN_A_S(kn_int(0)), KN_A_NONE}};
  kn__gnode *fn = kn__graph_call_from(g, &f, map_tensor, &map, 0, NULL);
  sz[0] = 99; /* copied: the node does not see later changes */
  cr_assert_eq(fn->args[0].u.ints.n, 2);
  cr_assert_eq(fn->args[0].u.ints.v[0].c, 4);
  cr_assert_eq(fn->args[2].kind, KN__GA_NONE);
  map.refuse = true;
  kn_tensor *other = kn_zeros(KN_SHAPE(1), KN_FLOAT32);
  kn_tensor *list[2] = {x, other};
  kn__call cat = {.op = &kn__ops[KN_OP_ADD], .nargs = 1, .args = {KN_A_TS(list, 2)}};
  int before = kn__graph_num_nodes(g);
  cr_assert_null(kn__graph_call_from(g, &cat, map_tensor, &map, 0, NULL));
  cr_assert_str_eq(kn_last_error(), "unknown tensor");
  cr_assert_eq(kn__graph_num_nodes(g), before);
  kn_release(w); /* the graph keeps its own reference */
  kn_release(x);
  kn_release(other);
  cr_assert_eq(kn_live_tensors(), live + 1);
  kn__graph_free(g);
  cr_assert_eq(kn_live_tensors(), live);
}
