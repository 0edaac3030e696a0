/*
** tests/test_inductor_reduce_fold.c: any/all, logsumexp and the vector
** norms (every order's row) lower through the reduction table: compiled
** against eager on inputs holding NaN, inf, -inf and zeros, with keepdim,
** several dims, float32 and float64, dynamic sizes, on the "c" and the plain
** "c_scalar" targets; fused with a producer and a consumer into one kernel;
** and a few rows checked against plain C loops (an independent
** expectation).
*/
#include "inductor_util.h"
#include "support/files.h"

static char cache[64];

static void setup(void) {
  ind_cache_dir(cache, sizeof cache);
  kn_manual_seed(12);
}
static void teardown(void) {
  if (!getenv("KN_TEST_KEEP_CACHE")) ind_rm(cache);
  unsetenv("KILN_INDUCTOR_TARGET");
}

TestSuite(inductor_reduce_fold, .init = setup, .fini = teardown, .timeout = 300);

/* Kernels and extern calls in the sources generated so far (then cleared). */
static void expect_code(int kernels, int exts, const char *what) {
  char *src = kn_test_inductor_sources(cache);
  if (kernels >= 0)
    cr_expect_eq(kn_test_count_of(src, "static void kernel"), kernels, "%s: kernels in\n%s",
                 what, src);
  cr_expect_eq(kn_test_count_of(src, "rt->ext("), exts, "%s: extern calls in\n%s", what, src);
  free(src);
  ind_rm(cache);
  ind_cache_dir(cache, sizeof cache);
}

/* randn with NaN, inf, -inf and zeros planted at fixed places. */
static kn_tensor *special(int ndim, const int64_t *sizes, kn_dtype dt) {
  kn_tensor *x = kn_contiguous(kn_randn(ndim, sizes, NULL, dt));
  int64_t n = kn_numel(x);
  for (int64_t i = 0; i < n; i++) {
    double v = i % 53 == 7 ? NAN : i % 61 == 3 ? INFINITY : i % 67 == 5 ? -INFINITY : 0.0;
    if (!(i % 53 == 7 || i % 61 == 3 || i % 67 == 5 || i % 11 == 4)) continue;
    if (dt == KN_FLOAT32) ((float *)kn_data(x))[i] = (float)v;
    else ((double *)kn_data(x))[i] = v;
  }
  return x;
}

/* ---- every form against eager --------------------------------------------------------- */
static const int64_t d02[2] = {0, 2}, dlast[1] = {-1};
static const double ords[] = {2, 1, INFINITY, -INFINITY, 0, 3, 0.5, -1.5};
#define NORDS 8
#define NFORMS (7 + 2 * NORDS)

/* Each reduction over x [4, 9, 37] in several forms; out[0..) filled. */
static void forms(kn_tensor *x, kn_tensor **out) {
  int k = 0;
  out[k++] = kn_any_dim(x, 2, false);
  out[k++] = kn_all_dim(kn_sub_scalar(x, kn_float(0.25)), 1, true);
  out[k++] = kn_any(kn_mul_scalar(x, kn_float(0.0)));
  out[k++] = kn_all(x);
  out[k++] = kn_logsumexp(x, dlast, 1, false);
  out[k++] = kn_logsumexp(x, d02, 2, true);
  out[k++] = kn_logsumexp(kn_mul_scalar(x, kn_float(-1.0)), NULL, 0, false);
  for (int o = 0; o < NORDS; o++) {
    out[k++] = kn_linalg_vector_norm(x, ords[o], dlast, 1, false);
    out[k++] = kn_linalg_vector_norm(x, ords[o], d02, 2, true);
  }
}

static const ind_forms all_forms = {forms, NFORMS};

static void forms_on(const char *target) {
  setenv("KILN_INDUCTOR_TARGET", target, 1);
  kn_dtype dts[2] = {KN_FLOAT32, KN_FLOAT64};
  for (int d = 0; d < 2; d++) {
    kn_compiled *f = ind_compile_forms(&all_forms, KN_DYNAMIC_FALSE);
    kn_scope_begin();
    const char *what = d ? "float64" : "float32";
    ind_check_forms(&all_forms, f, special(KN_SHAPE(4, 9, 37), dts[d]), what);
    what = d ? "float64 finite" : "finite";
    ind_check_forms(&all_forms, f, kn_randn(KN_SHAPE(4, 9, 37), NULL, dts[d]), what);
    kn_scope_end();
    kn_compiled_free(f);
    expect_code(-1, 0, target);
  }
  unsetenv("KILN_INDUCTOR_TARGET");
}

Test(inductor_reduce_fold, every_form_matches_eager) { forms_on("c"); }

/* The differential reference: the plain scalar C target. */
Test(inductor_reduce_fold, every_form_matches_eager_on_the_scalar_target) { forms_on("c_scalar"); }

/* Dynamic sizes: one compile for every length of the rows. */
Test(inductor_reduce_fold, dynamic_sizes_match_eager) {
  kn_compiled *f = ind_compile_forms(&all_forms, KN_DYNAMIC_TRUE);
  kn_scope_begin();
  int64_t lens[3] = {37, 50, 300};
  for (int i = 0; i < 3; i++) {
    int64_t sz[3] = {4 + i, 9, lens[i]};
    char w[32];
    snprintf(w, sizeof w, "dynamic %lld", (long long)lens[i]);
    ind_check_forms(&all_forms, f, special(3, sz, KN_FLOAT32), w);
  }
  kn_scope_end();
  kn_compiled_free(f);
  cr_expect_eq(ind_count(cache, ".so"), 1, "one compile for every size");
  expect_code(-1, 0, "dynamic forms");
}

/* ---- fusion ---------------------------------------------------------------------------- */
/* A producer (exp of a product) and a consumer around each reduction: one
** kernel, no extern call, no intermediate buffer. */
static kn_tensor *fused(kn_tensor *x) {
  kn_tensor *p = kn_exp(kn_mul_scalar(x, kn_float(0.1)));
  kn_tensor *l = kn_logsumexp(p, dlast, 1, true);
  kn_tensor *n2 = kn_linalg_vector_norm(p, 2, dlast, 1, true);
  kn_tensor *np = kn_linalg_vector_norm(p, 3, dlast, 1, true);
  kn_tensor *ni = kn_norm(p, INFINITY, dlast, 1, true);
  kn_tensor *a = kn_any_dim(kn_sub_scalar(p, kn_float(1.5)), -1, true);
  kn_tensor *r = kn_sub(kn_mul(x, l), kn_div(n2, kn_add(np, ni)));
  return kn_where(a, r, kn_neg(r));
}

Test(inductor_reduce_fold, fused_with_producer_and_consumer) {
  kn_compile_options o = {.backend = "inductor", .dynamic = KN_DYNAMIC_FALSE};
  kn_compiled *f = KN_COMPILE(fused, &o);
  kn_scope_begin();
  kn_tensor *x = special(KN_SHAPE(12, 70), KN_FLOAT32);
  cr_expect(ind_close(kn_call_t(f, x), fused(x), 1e-5, 1e-5, "fused"));
  kn_scope_end();
  kn_compiled_free(f);
  char *src = kn_test_inductor_sources(cache);
  cr_expect_eq(kn_test_count_of(src, "static void kernel"), 1, "one kernel in\n%s", src);
  cr_expect_eq(kn_test_count_of(src, "rt->ext("), 0);
  cr_expect_eq(kn_test_count_of(src, "rt->alloc("), 1, "only the result:\n%s", src);
  free(src);
}

/* ---- an independent expectation: plain C loops --------------------------------------- */
enum { R = 5, C = 6, NSTAT = 9 };

static kn_tensor *stats(kn_tensor *x) {
  kn_tensor *parts[NSTAT] = {
      kn_logsumexp(x, dlast, 1, false),
      kn_linalg_vector_norm(x, 2, dlast, 1, false),
      kn_linalg_vector_norm(x, 1, dlast, 1, false),
      kn_linalg_vector_norm(x, INFINITY, dlast, 1, false),
      kn_linalg_vector_norm(x, -INFINITY, dlast, 1, false),
      kn_linalg_vector_norm(x, 0, dlast, 1, false),
      kn_linalg_vector_norm(x, 3, dlast, 1, false),
      kn_to(kn_any_dim(x, 1, false), KN_FLOAT64),
      kn_to(kn_all_dim(x, 1, false), KN_FLOAT64),
  };
  return kn_stack(parts, NSTAT, 0); /* [NSTAT, rows] */
}

/* One row's statistics as stats() lays them out. */
static void row_stats(const double *x, double *s) {
  double mx = -INFINITY, e = 0, s2 = 0, s1 = 0, hi = 0, lo = INFINITY, nz = 0, p3 = 0;
  bool nan = false, any = false, all = true;
  for (int c = 0; c < C; c++) mx = isnan(x[c]) || x[c] > mx ? x[c] : mx;
  double m = isinf(mx) ? 0 : mx;
  for (int c = 0; c < C; c++) {
    double a = fabs(x[c]);
    nan |= isnan(x[c]);
    e += exp(x[c] - m), s2 += x[c] * x[c], s1 += a, p3 += a * a * a, nz += x[c] != 0;
    hi = a > hi ? a : hi, lo = a < lo ? a : lo;
    any |= x[c] != 0, all &= x[c] != 0;
  }
  double out[NSTAT] = {log(e) + m, sqrt(s2), s1, nan ? NAN : hi, nan ? NAN : lo, nz,
                       cbrt(p3), any, all};
  for (int k = 0; k < NSTAT; k++) s[k] = out[k];
}

/* Rows of -inf, with +inf, with NaN, zeros, and ordinary values. */
Test(inductor_reduce_fold, results_match_plain_c_loops) {
  const double x[R][C] = {{-INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY},
                          {1, INFINITY, -2, 0, 3, 0.5},
                          {0.5, NAN, 2, -7, 0, 1},
                          {0, 0, 0, 0, 0, 0},
                          {3, -1, 2.5, -4, 0.25, 1000}};
  kn_compile_options o = {.backend = "inductor", .dynamic = KN_DYNAMIC_FALSE};
  kn_compiled *f = KN_COMPILE(stats, &o);
  kn_scope_begin();
  kn_tensor *xt = kn_from_array(x, KN_SHAPE(R, C), KN_FLOAT64);
  kn_tensor *got = kn_contiguous(kn_call_t(f, xt));
  cr_assert_not_null(got, "%s", kn_last_error());
  const double *g = kn_data(got);
  for (int r = 0; r < R; r++) {
    double want[NSTAT];
    row_stats(x[r], want);
    for (int k = 0; k < NSTAT; k++) {
      double w = want[k], v = g[k * R + r];
      cr_expect(isnan(w) ? isnan(v) : (isinf(w) ? v == w : fabs(v - w) <= 1e-12 * (1 + fabs(w))),
                "statistic %d of row %d: compiled %.17g, expected %.17g", k, r, v, w);
    }
  }
  kn_scope_end();
  kn_compiled_free(f);
  expect_code(-1, 1, "stats"); /* the stack only */
}

/* logsumexp decomposes into softmax's group (amax, exp, sum) where its
** reduced dims are not a constant 0; over an empty dim the table's own
** two-pass row lowers it (its shift needs no element): -inf, no extern. */
static kn_tensor *lse_last(kn_tensor *x) { return kn_logsumexp(x, dlast, 1, false); }

Test(inductor_reduce_fold, logsumexp_over_nothing_lowers_through_its_row) {
  kn_compile_options o = {.backend = "inductor", .dynamic = KN_DYNAMIC_FALSE};
  kn_compiled *f = KN_COMPILE(lse_last, &o);
  kn_scope_begin();
  kn_tensor *y = kn_contiguous(kn_call_t(f, kn_zeros(KN_SHAPE(3, 0), KN_FLOAT64)));
  cr_assert_not_null(y, "%s", kn_last_error());
  cr_assert_eq(kn_numel(y), 3);
  for (int i = 0; i < 3; i++) cr_expect(isinf(((double *)kn_data(y))[i]) && ((double *)kn_data(y))[i] < 0);
  kn_scope_end();
  kn_compiled_free(f);
  char *src = kn_test_inductor_sources(cache);
  cr_expect_eq(kn_test_count_of(src, "= (double)kn_red_fin_LSE(acc"), 1, "the row's finalize in\n%s", src);
  cr_expect_eq(kn_test_count_of(src, "rt->ext("), 0);
  free(src);
}
