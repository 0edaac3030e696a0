/*
** tests/inductor_util.h: helpers of the inductor tests: a private cache
** directory per test, and comparing a compiled result with the eager one
** under a stated tolerance (NaNs must sit at the same places).
*/
#ifndef KN_TESTS_INDUCTOR_UTIL_H
#define KN_TESTS_INDUCTOR_UTIL_H

#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kiln/compile.h"
#include "kiln/ops.h"

/* A fresh KILN_CACHE_DIR under /tmp (into dir[cap]); returns dir. */
static inline const char *ind_cache_dir(char *dir, size_t cap) {
  snprintf(dir, cap, "/tmp/kiln-ind-test-XXXXXX");
  cr_assert(mkdtemp(dir));
  setenv("KILN_CACHE_DIR", dir, 1);
  return dir;
}

/* Number of files in dir/inductor ending with suffix. */
static inline int ind_count(const char *dir, const char *suffix) {
  char cmd[600];
  snprintf(cmd, sizeof cmd, "ls %s/inductor 2>/dev/null | grep -c -- '%s$'", dir, suffix);
  FILE *p = popen(cmd, "r");
  int n = -1;
  if (p && fscanf(p, "%d", &n) != 1) n = -1;
  if (p) pclose(p);
  return n;
}

static inline void ind_rm(const char *dir) {
  char cmd[600];
  snprintf(cmd, sizeof cmd, "chmod -R u+w %s 2>/dev/null; rm -rf %s", dir, dir);
  cr_expect_eq(system(cmd), 0);
}

/* |got - want| <= atol + rtol * |want| elementwise, same sizes and dtype. */
static inline bool ind_close(kn_tensor *got, kn_tensor *want, double rtol, double atol,
                             const char *what) {
  if (!got || !want) {
    cr_log_error("%s: missing result (%s)", what, kn_last_error());
    return false;
  }
  if (kn_ndim(got) != kn_ndim(want) || kn_numel(got) != kn_numel(want) ||
      kn_tensor_dtype(got) != kn_tensor_dtype(want)) {
    cr_log_error("%s: shape or dtype differs", what);
    return false;
  }
  kn_tensor *g = kn_contiguous(kn_to(got, KN_FLOAT64)), *w = kn_contiguous(kn_to(want, KN_FLOAT64));
  const double *a = kn_data(g), *b = kn_data(w);
  for (int64_t i = 0; i < kn_numel(g); i++) {
    if (isnan(a[i]) && isnan(b[i])) continue;
    if (isinf(b[i]) && a[i] == b[i]) continue;
    if (!(fabs(a[i] - b[i]) <= atol + rtol * fabs(b[i]))) {
      cr_log_error("%s: element %lld: compiled %.17g, eager %.17g", what, (long long)i, a[i], b[i]);
      return false;
    }
  }
  return true;
}

#endif
