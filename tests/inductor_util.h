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

/* A list of forms a test compiles as one function: forms(x, out) writes
** n (at most 64) results computed from x, each checked against eager. */
typedef struct ind_forms {
  void (*forms)(kn_tensor *x, kn_tensor **out);
  int n;
} ind_forms;

static inline kn_value ind_forms_fn(const kn_value *args, int nargs, void *ud) {
  const ind_forms *fs = ud;
  kn_tensor *o[64];
  kn_value items[64];
  (void)nargs;
  fs->forms(args[0].u.t, o);
  for (int i = 0; i < fs->n; i++) items[i] = kn_vtensor(o[i]);
  return kn_tuple(fs->n, items);
}

/* The forms compiled by inductor as a function named "forms"; owned by the
** caller (kn_compiled_free). */
static inline kn_compiled *ind_compile_forms(const ind_forms *fs, kn_dynamic dyn) {
  kn_compile_options o = {.backend = "inductor", .dynamic = dyn};
  kn_compiled *f = kn_compile_fn(ind_forms_fn, (void *)fs, 1, "forms", __FILE__, __LINE__, &o);
  cr_assert_not_null(f, "%s", kn_last_error());
  return f;
}

/* Every form of f(x) within 1e-5 relative / 1e-6 absolute of eager. */
static inline void ind_check_forms(const ind_forms *fs, kn_compiled *f, kn_tensor *x,
                                   const char *what) {
  kn_value out, arg = kn_vtensor(x);
  cr_assert_eq(kn_call(f, &arg, 1, &out), KN_OK, "%s: %s", what, kn_last_error());
  cr_assert_eq(out.kind, KN_VTUPLE);
  cr_assert_eq(out.n, fs->n);
  kn_tensor *want[64];
  fs->forms(x, want);
  for (int i = 0; i < fs->n; i++) {
    char w[64];
    snprintf(w, sizeof w, "%s form %d", what, i);
    cr_expect(ind_close(out.u.items[i].u.t, want[i], 1e-5, 1e-6, w), "%s", w);
  }
  kn_value_release(out);
}

#endif
