/*
** ops/threads.c: kiln's thread count (kiln/threads.h, ops/threads.h).
**
** want is 0 until KILN_NUM_THREADS or kn_set_num_threads gives a value;
** then every thread applies it to its OpenMP data environment at its next
** entry into kiln (kn__threads_sync). The generation starts at 1 and each thread's
** last-applied one at 0, so every thread's first entry reads the
** environment (once per process) and applies it. OpenBLAS runs
** single-threaded on kiln's OpenMP team (ops/gemm_blas.c), so the same
** count reaches it.
*/
#include <ctype.h>
#include <errno.h>
#include <omp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>

#include "core/error.h"
#include "kiln/threads.h"
#include "logging/log.h"
#include "ops/threads.h"

_Atomic unsigned kn__threads_gen = 1;
_Thread_local unsigned kn__threads_seen;
static _Atomic int want;
static pthread_once_t env_once = PTHREAD_ONCE_INIT;

bool kn__threads_parse(const char *v, int *n, char *why, size_t len) {
  const char *p = v ? v : "";
  while (isspace((unsigned char)*p)) p++;
  char *end = NULL;
  errno = 0;
  long x = isdigit((unsigned char)*p) ? strtol(p, &end, 10) : 0;
  while (end && isspace((unsigned char)*end)) end++;
  if (end && !*end && !errno && x >= 1 && x <= KN_MAX_THREADS) {
    *n = (int)x;
    return true;
  }
  snprintf(why, len, "KILN_NUM_THREADS: expected a whole number of threads from 1 to %d, found "
           "'%.60s'; using OpenMP's default", KN_MAX_THREADS, v ? v : "");
  return false;
}

static void read_env(void) {
  const char *v = getenv("KILN_NUM_THREADS");
  char why[160];
  int n;
  if (!v) return;
  if (!kn__threads_parse(v, &n, why, sizeof why)) {
    KN_LOG(KN_LOG_KILN, KN_WARNING, "%s", why);
    return;
  }
  atomic_store(&want, n);
}

void kn__threads_sync_slow(void) {
  pthread_once(&env_once, read_env);
  unsigned g = atomic_load(&kn__threads_gen);
  int n = atomic_load(&want);
  if (n > 0) omp_set_num_threads(n);
  kn__threads_seen = g;
}

kn_status kn_set_num_threads(int n) {
  if (n < 1 || n > KN_MAX_THREADS)
    return kn__error(KN_EINVAL, "kn_set_num_threads: expected a number of threads from 1 to %d, "
                     "found %d", KN_MAX_THREADS, n);
  pthread_once(&env_once, read_env);
  atomic_store(&want, n);
  atomic_fetch_add(&kn__threads_gen, 1);
  kn__threads_sync_slow();
  return KN_OK;
}

int kn_get_num_threads(void) {
  kn__threads_sync();
  int n = atomic_load(&want);
  return n > 0 ? n : omp_get_max_threads();
}

int kn__par_team(int64_t work, int64_t units, int64_t grain) {
  if (grain <= 0) return 1;
  int64_t t = work / grain;
  if (t > units) t = units;
  if (t < 2 || omp_in_parallel()) return 1;
  int m = omp_get_max_threads();
  return t < m ? (int)t : m;
}

int kn__par_parts(int nt, int64_t work, int64_t units, int64_t grain) {
  int64_t p = (int64_t)nt * KN__PAR_PARTS, q = work / (grain / 4 > 0 ? grain / 4 : 1);
  if (p > q) p = q;
  if (p > units) p = units;
  return p < nt ? nt : (int)p;
}

int kn__par_threads(int team) { return team < 2 ? 1 : omp_get_max_threads(); }

int kn__par_limit_team(int team) {
  int m = omp_get_max_threads();
  if (team > 1 || m < 2) return 0; /* the whole count: a smaller region ends threads */
  omp_set_num_threads(1);
  return m;
}

int kn__par_limit(int64_t work, int64_t grain) {
  return kn__par_limit_team(kn__par_team(work, INT64_MAX, grain));
}

double kn__par_sum_blocks(int64_t n, int64_t blk, int64_t grain,
                          double (*fn)(const void *ctx, int64_t lo, int64_t hi), const void *ctx) {
  int64_t nb = (n + blk - 1) / blk;
  double *part = malloc((size_t)(nb ? nb : 1) * sizeof *part), total = 0;
  if (!part) {
    for (int64_t lo = 0; lo < n; lo += blk) total += fn(ctx, lo, lo + blk < n ? lo + blk : n);
    return total;
  }
  KN__PAR_FOR(kn__par_team(n, nb, grain), for (int64_t b = 0; b < nb; b++) {
    int64_t lo = b * blk;
    part[b] = fn(ctx, lo, lo + blk < n ? lo + blk : n);
  });
  for (int64_t b = 0; b < nb; b++) total += part[b];
  free(part);
  return total;
}

void kn__par_restore(int prev) {
  if (prev > 0) omp_set_num_threads(prev);
}

static int64_t now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

void kn__par_enter(kn__join *j) {
  if (omp_get_thread_num() == 0) j->t0 = now_ns();
  else atomic_fetch_add_explicit(&j->started, 1, memory_order_relaxed);
}

bool kn__par_wait_rule(int nt, int started, int arrived, int64_t part, int64_t waited) {
  return arrived < nt - 1 && started == nt - 1 && waited <= part;
}

void kn__par_join(kn__join *j) {
  int nt = omp_get_num_threads();
  if (omp_get_thread_num() != 0) {
    atomic_fetch_add_explicit(&j->arrived, 1, memory_order_release);
    return;
  }
  int64_t t = now_ns(), part = t - j->t0;
  for (int64_t waited = 0;; waited = now_ns() - t) {
    int started = atomic_load_explicit(&j->started, memory_order_relaxed);
    int arrived = atomic_load_explicit(&j->arrived, memory_order_acquire);
    if (!kn__par_wait_rule(nt, started, arrived, part, waited)) return;
    for (int k = 0; k < 32; k++) {
#if defined(__x86_64__) || defined(__i386__)
      __builtin_ia32_pause();
#endif
    }
  }
}

int kn__threads_team_size(void) {
  kn__threads_sync();
  int size = 1;
#pragma omp parallel
  {
#pragma omp single
    size = omp_get_num_threads();
  }
  return size;
}
