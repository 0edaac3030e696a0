/*
** bench/bench_util.h: the clocks and the median every benchmark uses.
** Thread CPU time for single-threaded paths (on a shared machine wall time
** mostly measures the other processes), monotonic wall time for the rest.
*/
#ifndef KN_BENCH_UTIL_H
#define KN_BENCH_UTIL_H

#include <stdlib.h>
#include <time.h>

static inline double kn_bench_clock(clockid_t id) {
  struct timespec ts;
  clock_gettime(id, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* CPU time of the calling thread, in seconds. */
static inline double kn_bench_cpu_s(void) { return kn_bench_clock(CLOCK_THREAD_CPUTIME_ID); }
/* Monotonic wall time, in seconds. */
static inline double kn_bench_wall_s(void) { return kn_bench_clock(CLOCK_MONOTONIC); }

static inline int kn_bench_cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* The median of v[0..n) (sorts v). */
static inline double kn_bench_median(double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, kn_bench_cmp_double);
  return v[n / 2];
}

#endif
