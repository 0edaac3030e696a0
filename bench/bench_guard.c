/*
** bench_guard.c: the per-call overhead of a compiled function: guard checks
** and dispatch to the cached program, for a trivial function of two tensor
** arguments (one add on 1-element tensors), against calling the same
** function directly. Prints
**   BENCH guard_overhead_ns <ns> ns        (compiled call - direct call)
**   BENCH guard_check_ns <ns> ns           (the guard check alone)
**   RATIO guard_call_vs_direct_call <x>
** Goal (bench/goals.txt): guard_overhead_ns <= 1000.
**
** Then the same for issue 26's dynamic-shape program, a gated pooling over
** [B, S, 16] inputs (two linear layers, a sigmoid gate, a mean over S, and
** three per-sample gates that view one sample's gate as S*64 = 1024 values),
** compiled with every size dynamic and the eager backend (the graph
** interpreter, so the call's own work is the eager ops' and the difference
** is the guards and the dispatch), called with B = 3..10. It prints the
** number of compiles, the guards of the entry that serves the last call
** (all, and the shape-env ones), the guard check alone (the entries tried
** before the hit included) and the compiled call's overhead over the direct
** call (the fastest of many short interleaved batches):
**   BENCH gated_pool_compiles <n>
**   BENCH gated_pool_guard_count <n>
**   BENCH gated_pool_shape_guards <n>
**   BENCH gated_pool_guard_check_ns <ns> ns
**   BENCH gated_pool_direct_call_ns <ns> ns
**   BENCH gated_pool_compiled_call_ns <ns> ns
**   BENCH gated_pool_guard_overhead_ns <ns> ns
*/
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "dynamo/dynamo.h"
#include "kiln/compile.h"
#include "kiln/kiln.h"

#define N 200000

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static kn_tensor *add_fn(kn_tensor *a, kn_tensor *b) {
  kn_tensor *r = kn_add(a, b);
  return r;
}

static double best_of(double (*run)(void *), void *ud) {
  double best = 1e30;
  for (int r = 0; r < 5; r++) {
    double t = run(ud);
    if (t < best) best = t;
  }
  return best;
}

static kn_tensor *A, *B;

static double direct(void *ud) {
  (void)ud;
  double t0 = now();
  for (int i = 0; i < N; i++) {
    kn_scope_begin();
    (void)add_fn(A, B);
    kn_scope_end();
  }
  return (now() - t0) * 1e9 / N;
}

static double compiled(void *ud) {
  kn_compiled *f = ud;
  double t0 = now();
  for (int i = 0; i < N; i++) {
    kn_scope_begin();
    (void)kn_call_t(f, A, B);
    kn_scope_end();
  }
  return (now() - t0) * 1e9 / N;
}

static volatile bool sink;
static double guards_only(void *ud) {
  kn_compiled *f = ud;
  kn_value args[2] = {kn_vtensor(A), kn_vtensor(B)};
  double t0 = now();
  for (int i = 0; i < N; i++) sink = kn__guards_check(&f->entries->guards, args, 2);
  return (now() - t0) * 1e9 / N;
}

/* ---- a dynamic-shape program ------------------------------------------------ */
static kn_tensor *W, *Bias, *Wg, *X;

static kn_tensor *gated_pool(kn_tensor *x, kn_tensor *w, kn_tensor *b, kn_tensor *wg) {
  kn_tensor *h = kn_relu(kn_linear(x, w, b));           /* [B, S, 64] */
  kn_tensor *gate = kn_sigmoid(kn_linear(x, wg, NULL)); /* [B, S, 64] */
  kn_tensor *r = kn_mean_dims(kn_mul(h, gate), (int64_t[]){1}, 1, false);
  for (int64_t k = 0; k < 3; k++)
    r = kn_add(r, kn_sum(kn_view(kn_select(gate, 0, k), 1, (int64_t[]){1024})));
  return r;
}

/* Short batches, the fastest of many: on a busy machine a long run mostly
** measures the other processes. */
#define POOL_BATCH 50
#define POOL_REPS 300

static double pool_direct(void) {
  double t0 = now();
  for (int i = 0; i < POOL_BATCH; i++) {
    kn_scope_begin();
    (void)gated_pool(X, W, Bias, Wg);
    kn_scope_end();
  }
  return (now() - t0) * 1e9 / POOL_BATCH;
}

static double pool_compiled(kn_compiled *f) {
  double t0 = now();
  for (int i = 0; i < POOL_BATCH; i++) {
    kn_scope_begin();
    (void)kn_call_t(f, X, W, Bias, Wg);
    kn_scope_end();
  }
  return (now() - t0) * 1e9 / POOL_BATCH;
}

/* The guard checks a call makes: every entry up to the one that accepts. */
static double pool_guards(void *ud) {
  kn_compiled *f = ud;
  kn_value args[4] = {kn_vtensor(X), kn_vtensor(W), kn_vtensor(Bias), kn_vtensor(Wg)};
  double t0 = now();
  for (int i = 0; i < N; i++)
    for (kn__entry *e = f->entries; e; e = e->next)
      if ((sink = kn__guards_check(&e->guards, args, 4))) break;
  return (now() - t0) * 1e9 / N;
}

static int bench_gated_pool(void) {
  W = kn_randn(KN_SHAPE(64, 16), NULL, KN_FLOAT32);
  Bias = kn_randn(KN_SHAPE(64), NULL, KN_FLOAT32);
  Wg = kn_randn(KN_SHAPE(64, 16), NULL, KN_FLOAT32);
  kn_compile_counter cc = {0, 0, "eager"};
  kn_compile_options o = {.backend_fn = kn_compile_counter_backend, .backend_ud = &cc,
                          .dynamic = KN_DYNAMIC_TRUE,
                          .arg_names = (const char *[]){"x", "w", "b", "wg", NULL}};
  kn_compiled *f = KN_COMPILE(gated_pool, &o);
  for (int64_t bs = 3; bs <= 10; bs++) {
    kn_release(X);
    X = kn_randn(KN_SHAPE(bs, 16, 16), NULL, KN_FLOAT32);
    kn_scope_begin();
    kn_tensor *y = kn_call_t(f, X, W, Bias, Wg);
    kn_scope_end();
    if (!y) {
      fprintf(stderr, "gated_pool failed: %s\n", kn_last_error());
      return 1;
    }
  }
  kn_value args[4] = {kn_vtensor(X), kn_vtensor(W), kn_vtensor(Bias), kn_vtensor(Wg)};
  const kn__entry *hit = f->entries;
  while (hit && !kn__guards_check(&hit->guards, args, 4)) hit = hit->next;
  if (!hit) {
    fprintf(stderr, "no entry serves the last shape\n");
    return 1;
  }
  double d = 1e30, c = 1e30;
  for (int r = 0; r < POOL_REPS; r++) { /* interleaved: both see the same load */
    double x = pool_direct(), y = pool_compiled(f);
    d = x < d ? x : d;
    c = y < c ? y : c;
  }
  double g = best_of(pool_guards, f);
  int count = kn__guards_count(&hit->guards);
  printf("BENCH gated_pool_compiles %d\n", cc.frame_count);
  printf("BENCH gated_pool_guard_count %d\n", count);
  printf("BENCH gated_pool_shape_guards %d\n", count - hit->guards.n);
  printf("BENCH gated_pool_guard_check_ns %.1f ns\n", g);
  printf("BENCH gated_pool_direct_call_ns %.1f ns\n", d);
  printf("BENCH gated_pool_compiled_call_ns %.1f ns\n", c);
  printf("BENCH gated_pool_guard_overhead_ns %.1f ns\n", c - d);
  kn_compiled_free(f);
  kn_release(X), kn_release(W), kn_release(Bias), kn_release(Wg);
  return 0;
}

int main(void) {
  A = kn_ones(KN_SHAPE(1), KN_FLOAT32);
  B = kn_ones(KN_SHAPE(1), KN_FLOAT32);
  kn_compiled *f = KN_COMPILE(add_fn, NULL);
  kn_scope_begin();
  kn_tensor *y = kn_call_t(f, A, B);
  if (!y) {
    fprintf(stderr, "compile failed: %s\n", kn_last_error());
    return 1;
  }
  kn_scope_end();
  double d = best_of(direct, NULL);
  double c = best_of(compiled, f);
  double g = best_of(guards_only, f);
  printf("BENCH guard_overhead_ns %.1f ns\n", c - d);
  printf("BENCH guard_check_ns %.1f ns\n", g);
  printf("BENCH direct_call_ns %.1f ns\n", d);
  printf("BENCH compiled_call_ns %.1f ns\n", c);
  printf("RATIO guard_call_vs_direct_call %.2f\n", c / d);
  kn_compiled_free(f);
  kn_release(A);
  kn_release(B);
  return bench_gated_pool();
}
