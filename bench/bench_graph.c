/*
** bench_graph.c: cost of running a captured graph with the interpreter (the
** "eager" backend's program) against calling the same ops directly. Prints
**   BENCH graph_interp_overhead_ns (one-node graph a + b on 1-element
**     tensors, per run, minus the direct kn_add call), BENCH direct_add_ns,
**   RATIO graph_interp_vs_direct_call,
**   BENCH example_fn_graph_us / example_fn_direct_us (the seed's example_fn
**     on 1000x1000) and RATIO graph_vs_direct_example_fn.
** Medians of several repetitions; runs in about a second.
*/
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "graph/graph.h"
#include "kiln/kiln.h"
#include "kiln/ops_pointwise.h"

#include "bench_util.h"

#define REPS 9

static kn__vmeta meta_of(kn_tensor *t) {
  kn__vmeta m;
  kn__vmeta_from_tensor(t, &m);
  return m;
}

static kn__graph *add_graph(kn_tensor *a) {
  kn__graph *g = kn__graph_new();
  kn__vmeta m = meta_of(a);
  kn__gnode *x = kn__graph_placeholder(g, "L['a']", &m);
  kn__gnode *y = kn__graph_placeholder(g, "L['b']", &m);
  kn__garg args[3] = {KN_GA_T(x), KN_GA_T(y), KN_GA_S(kn_int(1))};
  kn__gnode *s = kn__graph_call(g, &kn__ops[KN_OP_ADD], 3, args, 1, &m);
  kn__gref r = {s, 0};
  kn__graph_output(g, 1, &r);
  return g;
}

static kn__graph *example_graph(kn_tensor *a) {
  kn__graph *g = kn__graph_new();
  kn__vmeta m = meta_of(a);
  kn__gnode *x = kn__graph_placeholder(g, "L['a']", &m);
  kn_sym sz[2];
  kn__garg fa[3] = {kn__garg_ints64(kn_sizes(a), 2, sz), KN_GA_S(kn_int(1)), KN_GA_DT(KN_FLOAT32)};
  kn__gnode *o1 = kn__graph_call(g, &kn__ops[KN_OP_FULL], 3, fa, 1, &m);
  kn__garg ma[2] = {KN_GA_T(x), KN_GA_T(o1)};
  kn__gnode *mu = kn__graph_call(g, &kn__ops[KN_OP_MUL], 2, ma, 1, &m);
  kn__gnode *o2 = kn__graph_call(g, &kn__ops[KN_OP_FULL], 3, fa, 1, &m);
  kn__garg aa[3] = {KN_GA_T(mu), KN_GA_T(o2), KN_GA_S(kn_int(1))};
  kn__gnode *ad = kn__graph_call(g, &kn__ops[KN_OP_ADD], 3, aa, 1, &m);
  kn__gref r = {ad, 0};
  kn__graph_output(g, 1, &r);
  return g;
}

static void small(void) {
  kn_tensor *in[2] = {kn_ones(KN_SHAPE(1), KN_FLOAT32), kn_ones(KN_SHAPE(1), KN_FLOAT32)};
  kn__graph *g = add_graph(in[0]);
  kn__gprog *p;
  if (kn__gprog_new(g, &p) != KN_OK) {
    fprintf(stderr, "bench_graph: %s\n", kn_last_error());
    exit(1);
  }
  enum { N = 100000 };
  double tg[REPS], td[REPS];
  for (int r = 0; r < REPS; r++) {
    double t0 = kn_bench_wall_s();
    for (int i = 0; i < N; i++) {
      kn_tensor *out;
      kn__gprog_run(p, in, 2, &out, 1);
      kn_release(out);
    }
    double t1 = kn_bench_wall_s();
    for (int i = 0; i < N; i++) kn_release(kn_add(in[0], in[1]));
    double t2 = kn_bench_wall_s();
    tg[r] = (t1 - t0) / N * 1e9;
    td[r] = (t2 - t1) / N * 1e9;
  }
  double g_ns = kn_bench_median(tg, REPS), d_ns = kn_bench_median(td, REPS);
  printf("BENCH graph_interp_overhead_ns %.1f\n", g_ns - d_ns);
  printf("BENCH direct_add_ns %.1f\n", d_ns);
  printf("RATIO graph_interp_vs_direct_call %.3f\n", g_ns / d_ns);
  kn__gprog_free(p);
  kn__graph_free(g);
  kn_release(in[0]);
  kn_release(in[1]);
}

static void example(void) {
  kn_tensor *a = kn_ones(KN_SHAPE(1000, 1000), KN_FLOAT32);
  kn__graph *g = example_graph(a);
  kn__gprog *p;
  if (kn__gprog_new(g, &p) != KN_OK) exit(1);
  double tg[REPS], td[REPS];
  for (int r = 0; r < REPS; r++) {
    double t0 = kn_bench_wall_s();
    kn_tensor *out;
    kn__gprog_run(p, &a, 1, &out, 1);
    kn_release(out);
    double t1 = kn_bench_wall_s();
    kn_scope_begin();
    kn_add(kn_mul(a, kn_ones(KN_SHAPE(1000, 1000), KN_FLOAT32)),
           kn_ones(KN_SHAPE(1000, 1000), KN_FLOAT32));
    kn_scope_end();
    double t2 = kn_bench_wall_s();
    tg[r] = (t1 - t0) * 1e6;
    td[r] = (t2 - t1) * 1e6;
  }
  double g_us = kn_bench_median(tg, REPS), d_us = kn_bench_median(td, REPS);
  printf("BENCH example_fn_graph_us %.1f\n", g_us);
  printf("BENCH example_fn_direct_us %.1f\n", d_us);
  printf("RATIO graph_vs_direct_example_fn %.3f\n", g_us / d_us);
  kn__gprog_free(p);
  kn__graph_free(g);
  kn_release(a);
}

int main(void) {
  small();
  example();
  return 0;
}
