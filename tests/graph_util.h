/*
** tests/graph_util.h: helpers shared by the graph IR tests: example
** metadata, and the seed's example_fn graph built by hand
** (a.mul(ones(1000, 1000)).add(ones(1000, 1000))).
*/
#ifndef KN_TESTS_GRAPH_UTIL_H
#define KN_TESTS_GRAPH_UTIL_H

#include <string.h>

#include "graph/graph.h"

#define GRAPH_SRC KN_FIXTURE_DIR "/graph_user_src.c"

/* Contiguous float32 CPU metadata of the given sizes. */
static inline kn__vmeta tmeta(kn_dtype dt, int ndim, const int64_t *sizes) {
  kn__vmeta m;
  memset(&m, 0, sizeof m);
  m.kind = KN__V_TENSOR;
  m.dtype = dt;
  m.device = KN_CPU;
  m.ndim = ndim;
  int64_t st = 1;
  for (int d = ndim - 1; d >= 0; d--) {
    m.sizes[d] = kn__sym_const(sizes[d]);
    m.strides[d] = kn__sym_const(st);
    st *= sizes[d] > 1 ? sizes[d] : 1;
  }
  m.offset = kn__sym_const(0);
  return m;
}

static inline kn__gnode *ones_node(kn__graph *g, int64_t n, int64_t m, int line) {
  int64_t sz[2] = {n, m};
  kn_sym s[2];
  kn__garg args[3] = {kn__garg_ints64(sz, 2, s), KN_GA_S(kn_int(1)), KN_GA_DT(KN_FLOAT32)};
  kn__vmeta mt = tmeta(KN_FLOAT32, 2, sz);
  kn__gnode *o = kn__graph_call(g, &kn__ops[KN_OP_FULL], 3, args, 1, &mt);
  if (o) kn__graph_node_set_name_hint(o, "ones");
  kn__gframe fr = {GRAPH_SRC, line, "example_fn"};
  if (o) kn__graph_node_set_stack(o, &fr, 1, NULL);
  return o;
}

static inline kn__gnode *binary_node(kn__graph *g, kn__opid op, kn__gnode *a, kn__gnode *b,
                                     int line, const char *hint) {
  kn__garg args[3] = {KN_GA_T(a), KN_GA_T(b), KN_GA_S(kn_int(1))};
  int nargs = op == KN_OP_ADD ? 3 : 2;
  kn__gnode *o = kn__graph_call(g, &kn__ops[op], nargs, args, 1, a->meta);
  if (o && hint) kn__graph_node_set_name_hint(o, hint);
  kn__gframe fr = {GRAPH_SRC, line, "example_fn"};
  if (o) kn__graph_node_set_stack(o, &fr, 1, NULL);
  return o;
}

/* The seed's example_fn for an n x n input. Owned graph. */
static inline kn__graph *example_graph(int64_t n) {
  kn__graph *g = kn__graph_new();
  int64_t sz[2] = {n, n};
  kn__vmeta in = tmeta(KN_FLOAT32, 2, sz);
  kn__gnode *a = kn__graph_placeholder(g, "L['a']", &in);
  kn__gnode *o1 = ones_node(g, n, n, 3);
  kn__gnode *out = binary_node(g, KN_OP_MUL, a, o1, 3, "output");
  kn__gnode *o2 = ones_node(g, n, n, 4);
  kn__gnode *out1 = binary_node(g, KN_OP_ADD, out, o2, 4, "output");
  kn__gref r = {out1, 0};
  kn__graph_output(g, 1, &r);
  return g;
}

/* a @ b with sizes (s0, s1) @ (s1, s3), hints 5x10 @ 10x15, as seed
** test_graph_sizes_dynamic (s0..s3 exist, s2 was unified with s1). The
** graph owns env. The matmul node is not yet an output; *sym receives the
** four symbols and *out_meta the matmul's metadata. */
static inline kn__graph *dyn_matmul_graph(kn__shape_env *env, kn_sym *sym, kn__gnode **mm,
                                          kn__vmeta *out_meta) {
  int64_t hints[4] = {5, 10, 10, 15};
  for (int i = 0; i < 4; i++) kn__shape_env_create_symbol(env, hints[i], 2, &sym[i]);
  kn__graph *g = kn__graph_new();
  kn__graph_set_shape_env(g, env, true);
  kn__vmeta ma = tmeta(KN_FLOAT32, 2, (int64_t[]){5, 10});
  ma.sizes[0] = sym[0], ma.sizes[1] = sym[1], ma.strides[0] = sym[1];
  kn__vmeta mb = tmeta(KN_FLOAT32, 2, (int64_t[]){10, 15});
  mb.sizes[0] = sym[1], mb.sizes[1] = sym[3], mb.strides[0] = sym[3];
  *out_meta = tmeta(KN_FLOAT32, 2, (int64_t[]){5, 15});
  out_meta->sizes[0] = sym[0], out_meta->sizes[1] = sym[3], out_meta->strides[0] = sym[3];
  kn__gnode *a = kn__graph_placeholder(g, "L['a']", &ma);
  kn__gnode *b = kn__graph_placeholder(g, "L['b']", &mb);
  kn__garg args[2] = {KN_GA_T(a), KN_GA_T(b)};
  *mm = kn__graph_call(g, &kn__ops[KN_OP_MATMUL], 2, args, 1, out_meta);
  return g;
}

#endif
