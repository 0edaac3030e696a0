/*
** bench_guard.c: the per-call overhead of a compiled function: guard checks
** and dispatch to the cached program, for a trivial function of two tensor
** arguments (one add on 1-element tensors), against calling the same
** function directly. Prints
**   BENCH guard_overhead_ns <ns> ns        (compiled call - direct call)
**   BENCH guard_check_ns <ns> ns           (the guard check alone)
**   RATIO guard_call_vs_direct_call <x>
** Goal: guard_overhead_ns <= 1000.
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
  return 0;
}
