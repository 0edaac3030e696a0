/*
** test_symcache_threads.c: the symbolizer and its disk cache
** (core/symbolize.h, core/symcache.h) used from several threads at once:
** first lookups of the same and of different addresses, reading the
** module's file and writing it (kn__symbolize_save) race, and every thread
** gets the call sites' function, file and line.
*/
#pragma GCC optimize("no-optimize-sibling-calls")
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/symbolize.h"

#define NTHREADS 8

__attribute__((noinline)) static void *here(void) {
  void *r = __builtin_return_address(0);
  __asm__ volatile("" ::: "memory");
  return r;
}

/* Four call sites of here(), each on its own line. */
enum { SITE_LINE = __LINE__ + 2 };
__attribute__((noinline)) static void sites(void **out) {
  out[0] = here();
  out[1] = here();
  out[2] = here();
  out[3] = here();
}

static void *worker(void *arg) {
  int *bad = arg;
  for (int it = 0; it < 50; it++) {
    void *a[4];
    sites(a);
    for (int k = 0; k < 4; k++) {
      kn__srcframe f = kn__symbolize(a[k]);
      bool ok = f.func && !strcmp(f.func, "sites") && f.file && !strcmp(f.file, __FILE__) &&
                f.line == SITE_LINE + k;
      if (!ok) (*bad)++;
    }
    if (it % 10 == 0) kn__symbolize_save();
  }
  return NULL;
}

Test(symcache_threads, concurrent_lookups_and_saves) {
  char dir[] = "/tmp/kiln-symcache-thr-XXXXXX";
  cr_assert(mkdtemp(dir));
  setenv("KILN_CACHE_DIR", dir, 1);
  if (!kn__symbolize_available()) cr_skip_test("libdw is not installed");
  pthread_t t[NTHREADS];
  int bad[NTHREADS] = {0};
  for (int i = 0; i < NTHREADS; i++) cr_assert_eq(pthread_create(&t[i], NULL, worker, &bad[i]), 0);
  for (int i = 0; i < NTHREADS; i++) pthread_join(t[i], NULL);
  for (int i = 0; i < NTHREADS; i++) cr_expect_eq(bad[i], 0, "thread %d: %d wrong frames", i, bad[i]);
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  cr_expect_eq(system(cmd), 0);
}
