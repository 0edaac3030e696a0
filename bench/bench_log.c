/*
** bench_log.c: the cost of a disabled log call (the common case: default
** settings, a DEBUG line in a hot path) against an empty loop of the same
** shape. Prints
**   BENCH log_disabled_ns <ns> ns
**   BENCH loop_baseline_ns <ns> ns
**   RATIO log_disabled/baseline <x>
*/
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "logging/log.h"

#define N 200000000L

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static volatile long sink;

static double run_log(void) {
  double t0 = now();
  for (long i = 0; i < N; i++) {
    KN_LOG(KN_LOG_DYNAMO, KN_DEBUG, "iteration %ld of %ld", i, N);
    __asm__ volatile("" ::: "memory");
  }
  return (now() - t0) * 1e9 / (double)N;
}

static double run_empty(void) {
  double t0 = now();
  for (long i = 0; i < N; i++) __asm__ volatile("" ::: "memory");
  return (now() - t0) * 1e9 / (double)N;
}

int main(void) {
  unsetenv("KILN_LOGS");
  KN_LOG(KN_LOG_DYNAMO, KN_DEBUG, "warm up"); /* reads the settings once */
  double best_log = 1e9, best_empty = 1e9;
  for (int rep = 0; rep < 3; rep++) {
    double a = run_log(), b = run_empty();
    if (a < best_log) best_log = a;
    if (b < best_empty) best_empty = b;
  }
  sink = (long)best_log;
  printf("BENCH log_disabled_ns %.3f ns\n", best_log);
  printf("BENCH loop_baseline_ns %.3f ns\n", best_empty);
  printf("RATIO log_disabled/baseline %.2f\n", best_log / best_empty);
  return best_log <= 5.0 ? 0 : 1;
}
