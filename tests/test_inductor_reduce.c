/*
** tests/test_inductor_reduce.c: every reduction of the op table lowers
** through the reduction table (ops/reduce_table.h): sum, mean, prod,
** amax/amin, argmax/argmin (index-carrying lanes) and var/std (two passes
** in one kernel), compiled against eager on random inputs holding NaN and
** inf, with keepdim, several dims, float64, dynamic sizes, fused with a
** producer and a consumer; a walk over the op table fails for any op
** flagged as a reduction without a row or a lowering; a few results are
** checked against plain C loops (an independent expectation).
*/
#include "inductor_util.h"
#include "kiln/autograd.h"
#include "ops/opdef.h"
#include "ops/reduce_table.h"
#include "support/files.h"

static char cache[64];

static void setup(void) {
  ind_cache_dir(cache, sizeof cache);
  kn_manual_seed(11);
}
static void teardown(void) {
  if (!getenv("KN_TEST_KEEP_CACHE")) ind_rm(cache);
}

TestSuite(inductor_reduce, .init = setup, .fini = teardown, .timeout = 300);

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

/* randn with NaN, +inf and -inf planted at fixed places (row r of a [R, C]
** view gets a NaN when r % 5 == 1, an inf when r % 7 == 2, ...). */
static kn_tensor *special(int ndim, const int64_t *sizes, kn_dtype dt) {
  kn_tensor *x = kn_contiguous(kn_randn(ndim, sizes, NULL, dt));
  int64_t n = kn_numel(x);
  for (int64_t i = 0; i < n; i++) {
    double v = i % 53 == 7 ? NAN : i % 61 == 3 ? INFINITY : i % 67 == 5 ? -INFINITY : NAN;
    if (!(i % 53 == 7 || i % 61 == 3 || i % 67 == 5)) continue;
    if (dt == KN_FLOAT32) ((float *)kn_data(x))[i] = (float)v;
    else ((double *)kn_data(x))[i] = v;
  }
  return x;
}

/* ---- the op table walk ---------------------------------------------------------------- */
static int walk_op;

/* op walk_op over dim 1 (or all dims) of x with keepdim, as its row lays out
** its arguments. */
static kn_tensor *any_reduction(kn_tensor *x) {
  const kn__red_use *u = kn__red_for_op(walk_op);
  kn__arg a[6] = {KN_A_T(x), KN_A_NONE, KN_A_NONE, KN_A_NONE, KN_A_NONE, KN_A_NONE};
  static const int64_t one[1] = {1};
  int n = 1;
  if (u->dims >= 0) a[u->dims] = u->one_dim ? KN_A_I(1) : KN_A_INTS(one, 1), n = u->dims + 1;
  if (u->keepdim >= 0) a[u->keepdim] = KN_A_B(true), n = n > u->keepdim ? n : u->keepdim + 1;
  if (u->corr >= 0) a[u->corr] = KN_A_I(1), n = n > u->corr ? n : u->corr + 1;
  if (u->dtype >= 0) n = n > u->dtype ? n : u->dtype + 1;
  return kn__invoke((kn__opid)walk_op, n, a);
}

Test(inductor_reduce, every_reduction_op_has_a_row_and_lowers) {
  int seen = 0;
  for (int id = 0; id < KN__OP_COUNT; id++) {
    if (!(kn__ops[id].flags & KN_OPF_REDUCTION)) continue;
    const kn__red_use *u = kn__red_for_op(id);
    cr_expect_not_null(u, "%s.%s is a reduction without a row of the reduction table",
                       kn__ops[id].name, kn__ops[id].overload);
    if (!u) continue;
    seen++;
    walk_op = id;
    kn_compile_options o = {.backend = "inductor"};
    kn_compiled *f = KN_COMPILE(any_reduction, &o);
    kn_scope_begin();
    kn_tensor *x = special(KN_SHAPE(6, 37), KN_FLOAT32);
    char what[96];
    snprintf(what, sizeof what, "%s.%s", kn__ops[id].name, kn__ops[id].overload);
    cr_expect(ind_close(kn_call_t(f, x), any_reduction(x), 1e-6, 1e-6, what), "%s", what);
    kn_scope_end();
    kn_compiled_free(f);
    expect_code(1, 0, what); /* one generated kernel, no extern call */
  }
  cr_expect_eq(seen, 18);
}

Test(inductor_reduce, every_row_is_whole) {
  for (int k = 0; k < KN__RED_COUNT; k++) {
    const kn__red_row *r = &kn__red_rows[k];
    cr_expect_eq((int)r->kind, k);
    cr_expect(r->name && r->combine && r->finalize && r->init_text && r->prep, "row %d", k);
    cr_expect(!r->ordered || r->acc == KN__RACC_INPUT, "%s: ordered rows keep the input type",
              r->name);
  }
}

/* ---- every op against eager: NaN/inf, keepdim, several dims, float64 ---------------- */
static const int64_t d02[2] = {0, 2}, d1[1] = {1}, dlast[1] = {-1};

/* Each reduction over x [4, 9, 37] in several forms; out[0..) filled. */
static void forms(kn_tensor *x, kn_tensor **out) {
  int k = 0;
  out[k++] = kn_sum_dims(x, d02, 2, true);
  out[k++] = kn_mean_dims(x, dlast, 1, false);
  out[k++] = kn_prod_dim(kn_mul_scalar(x, kn_float(0.5)), 2, true);
  out[k++] = kn_prod(kn_add_scalar(kn_mul_scalar(kn_tanh(x), kn_float(0.01)), kn_float(1)));
  out[k++] = kn_amax(x, d02, 2, false);
  out[k++] = kn_amin(x, d1, 1, true);
  out[k++] = kn_argmax_dim(x, 2, false);
  out[k++] = kn_argmin_dim(x, 1, true);
  out[k++] = kn_argmax(x);
  out[k++] = kn_argmin(kn_neg(x));
  out[k++] = kn_var(x, dlast, 1, 1, false);
  out[k++] = kn_std(x, d02, 2, 0, true);
  out[k++] = kn_var(x, NULL, 0, 1, false);
}
#define NFORMS 13
static const ind_forms all_forms = {forms, NFORMS};

/* NaN, inf and -inf in the rows; float32 and float64; no extern call. */
Test(inductor_reduce, every_form_matches_eager) {
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
    expect_code(-1, 0, "forms");
  }
}

/* Dynamic sizes: the lengths of the rows are symbols of the kernel. */
Test(inductor_reduce, dynamic_sizes_match_eager) {
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

/* ---- fusion ------------------------------------------------------------------------------ */
/* A producer (exp of a product) and a consumer (x - argmax + std) around
** each reduction: one kernel, no extern call, no intermediate buffer. */
static kn_tensor *fused(kn_tensor *x) {
  kn_tensor *p = kn_exp(kn_mul_scalar(x, kn_float(0.1)));
  kn_tensor *a = kn_std(p, dlast, 1, 1, true);
  kn_tensor *b = kn_amin(p, dlast, 1, true);
  kn_tensor *c = kn_prod_dim(p, -1, true);
  kn_tensor *i = kn_argmax_dim(p, -1, true);
  kn_tensor *r = kn_add(kn_sub(x, kn_mul(a, b)), kn_to(i, KN_FLOAT32));
  return kn_add(r, kn_tanh(c));
}

Test(inductor_reduce, fused_with_producer_and_consumer) {
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

/* ---- an independent expectation: plain C loops ----------------------------------------- */
static kn_tensor *stats(kn_tensor *x) {
  kn_tensor *v = kn_var(x, dlast, 1, 1, false), *s = kn_std(x, dlast, 1, 0, false);
  kn_tensor *p = kn_prod_dim(x, 1, false), *m = kn_amax(x, dlast, 1, false);
  kn_tensor *mi = kn_amin(x, dlast, 1, false), *mn = kn_mean_dims(x, dlast, 1, false);
  kn_tensor *ia = kn_to(kn_argmax_dim(x, 1, false), KN_FLOAT64);
  kn_tensor *ib = kn_to(kn_argmin_dim(x, 1, false), KN_FLOAT64);
  kn_tensor *parts[8] = {v, s, p, m, mi, mn, ia, ib};
  return kn_stack(parts, 8, 0); /* [8, rows] */
}

/* Rows with ties (the first index wins), a NaN after the extreme (NaN
** wins: first NaN), -inf, a single repeated value, and ordinary values. */
Test(inductor_reduce, results_match_plain_c_loops) {
  enum { R = 4, C = 6 };
  const double x[R][C] = {{3, 1, 3, -2, 1, -2},
                          {0.5, 7, NAN, 7, NAN, -1},
                          {-INFINITY, 2, 2, -INFINITY, 0.25, 1},
                          {4, 4, 4, 4, 4, 4}};
  double want[8][R];
  for (int r = 0; r < R; r++) {
    double sum = 0, prod = 1, mx = -INFINITY, mn = INFINITY, ss = 0;
    int imx = 0, imn = 0;
    bool nan = false;
    for (int c = 0; c < C; c++) {
      double v = x[r][c];
      sum += v;
      prod *= v;
      if (isnan(v) && !nan) nan = true, imx = imn = c;
      if (!nan && v > mx) mx = v, imx = c;
      if (!nan && v < mn) mn = v, imn = c;
    }
    double mean = sum / C;
    for (int c = 0; c < C; c++) ss += (x[r][c] - mean) * (x[r][c] - mean);
    double row[8] = {ss / (C - 1), sqrt(ss / C), prod, nan ? NAN : mx, nan ? NAN : mn, mean, imx, imn};
    for (int k = 0; k < 8; k++) want[k][r] = row[k];
  }
  kn_compile_options o = {.backend = "inductor", .dynamic = KN_DYNAMIC_FALSE};
  kn_compiled *f = KN_COMPILE(stats, &o);
  kn_scope_begin();
  kn_tensor *xt = kn_from_array(x, KN_SHAPE(R, C), KN_FLOAT64);
  kn_tensor *got = kn_contiguous(kn_call_t(f, xt));
  cr_assert_not_null(got, "%s", kn_last_error());
  const double *g = kn_data(got);
  for (int k = 0; k < 8; k++)
    for (int r = 0; r < R; r++) {
      double w = want[k][r], v = g[k * R + r];
      cr_expect(isnan(w) ? isnan(v) : (isinf(w) ? v == w : fabs(v - w) <= 1e-12 * (1 + fabs(w))),
                "statistic %d of row %d: compiled %.17g, expected %.17g", k, r, v, w);
    }
  kn_scope_end();
  kn_compiled_free(f);
  expect_code(-1, 1, "stats"); /* the stack only */
}

/* ---- vector math in the store pass ------------------------------------------------------ */
static kn_tensor *exp_after_sum(kn_tensor *x) {
  const int64_t d = 1;
  return kn_sub(x, kn_mul(kn_exp(x), kn_sum_dims(x, &d, 1, true)));
}

/* log_softmax's backward shape: the exp is read only by the last pass,
** which takes it for blocks of the row (one table call per block of up to
** 256, rows of 300: a partial block) instead of per element; results as
** eager's, the same on two calls. */
Test(inductor_reduce, store_pass_takes_vector_math_per_block) {
  kn_scope_begin();
  for (int d = 0; d < 2; d++) {
    kn_dtype dt = d ? KN_FLOAT64 : KN_FLOAT32;
    kn_compile_options o = {.backend = "inductor", .dynamic = KN_DYNAMIC_FALSE};
    kn_compiled *f = KN_COMPILE(exp_after_sum, &o);
    kn_tensor *x = special(KN_SHAPE(37, 300), dt);
    kn_tensor *a = kn_contiguous(kn_call_t(f, x)), *b = kn_contiguous(kn_call_t(f, x));
    cr_expect(ind_close(a, exp_after_sum(x), 1e-6, 1e-6, kn_dtype_name(dt)));
    cr_expect(a && b && memcmp(kn_data(a), kn_data(b), (size_t)kn_numel(a) * kn_dtype_size(dt)) == 0);
    kn_compiled_free(f);
    char *src = kn_test_inductor_sources(cache);
    const char *call = d ? "KN_VMT()->f64[" : "KN_VMT()->f32[", *elem = d ? "kn_vm_EXP_f64((" : "kn_vm_EXP_f32((";
    /* the group's row: its own function under OpenMP (kn_rows), else the kernel */
    char *k = strstr(src, "static void kn_rows");
    if (!k) k = strstr(src, "static void kernel");
    cr_expect(k && kn_test_count_of(k, call) == 1 && kn_test_count_of(k, elem) == 0, "%s", src);
    free(src);
    ind_rm(cache);
    ind_cache_dir(cache, sizeof cache);
  }
  kn_scope_end();
}

/* ---- a row value expanded back over its row: rms_norm's backward ---------------------- */
static kn_tensor *rms_norm(kn_tensor *x, kn_tensor *w) {
  const int64_t d = 1;
  kn_tensor *ms = kn_mean_dims(kn_mul(x, x), &d, 1, true);
  return kn_mul(kn_mul(x, kn_rsqrt(kn_add_scalar(ms, kn_float(1e-6)))), w);
}

/* The gradient of rms_norm's input by its formula in double: with
** r = 1 / sqrt(mean(x^2) + eps), dx_i = r w_i g_i - x_i r^3 / D sum_j g_j w_j x_j. */
static void rms_grad_f64(const float *x, const float *w, const float *g, int64_t rows, int64_t D,
                         double *dx) {
  for (int64_t r = 0; r < rows; r++) {
    const float *xr = x + r * D, *gr = g + r * D;
    double ss = 0, s = 0;
    for (int64_t j = 0; j < D; j++) ss += (double)xr[j] * xr[j], s += (double)gr[j] * w[j] * xr[j];
    double rs = 1 / sqrt(ss / (double)D + 1e-6);
    for (int64_t j = 0; j < D; j++)
      dx[r * D + j] = rs * w[j] * gr[j] - xr[j] * rs * rs * rs / (double)D * s;
  }
}

/* The mean's gradient is expanded over the row (expand, a BROADCAST lowering
** read with stride 0), so the backward is one row kernel with no extern call
** (it was five kernels and an extern expand). The gradient matches the
** formula in double and eager; the rows of x and of the output gradient are
** prefetched two rows ahead, and those of each kernel's per-element output
** for writing (forward: y, backward: the input gradient), the weight (the
** same row for all) is not. */
Test(inductor_reduce, rms_norm_backward_is_one_row_kernel) {
  enum { R = 40, D = 96 };
  kn_scope_begin();
  kn_tensor *w = kn_randn(KN_SHAPE(D), NULL, KN_FLOAT32);
  kn_tensor *x = kn_randn(KN_SHAPE(R, D), NULL, KN_FLOAT32);
  kn_tensor *go = kn_randn(KN_SHAPE(R, D), NULL, KN_FLOAT32), *gx = NULL, *ge = NULL;
  cr_assert_eq(kn_set_requires_grad(x, true), KN_OK);
  kn_compile_options o = {.backend = "inductor", .dynamic = KN_DYNAMIC_FALSE};
  kn_compiled *f = KN_COMPILE(rms_norm, &o);
  kn_tensor *y = kn_call_t(f, x, w), *ye = rms_norm(x, w);
  cr_assert(y && kn_autograd_grad(&y, 1, &x, 1, &go, false, false, false, &gx) == KN_OK,
            "%s", kn_last_error());
  cr_assert_eq(kn_autograd_grad(&ye, 1, &x, 1, &go, false, false, false, &ge), KN_OK);
  cr_expect(ind_close(gx, ge, 1e-5, 1e-5, "rms_norm backward"));
  double *want = malloc(sizeof(double) * R * D);
  rms_grad_f64(kn_data(x), kn_data(w), kn_data(go), R, D, want);
  kn_tensor *g = kn_contiguous(gx);
  for (int64_t i = 0; i < R * D; i++)
    cr_expect(fabs(((float *)kn_data(g))[i] - want[i]) <= 1e-5 * (1 + fabs(want[i])),
              "element %lld: %g, expected %g", (long long)i, ((float *)kn_data(g))[i], want[i]);
  free(want);
  kn_compiled_free(f);
  kn_scope_end();
  char *src = kn_test_inductor_sources(cache);
  cr_expect_eq(kn_test_count_of(src, "static void kernel"), 2, "forward, backward:\n%s", src);
  cr_expect_eq(kn_test_count_of(src, "__builtin_prefetch("), 5, "x, y; x, go and gx:\n%s", src);
  cr_expect_eq(kn_test_count_of(src, "jb + q, 1);"), 2, "y; gx:\n%s", src);
  free(src);
  expect_code(-1, 0, "rms_norm");
}

/* An expand the graph returns stays eager's view (an extern call): the output
** of an input's expand aliases the input, and an expand of a computed value
** has eager's strides (stride 0 over the expanded dims), not a copy. */
static kn_tensor *expand_input(kn_tensor *x) { return kn_expand(x, 2, (const int64_t[]){4, 3}); }
static kn_tensor *expand_exp(kn_tensor *x) {
  return kn_expand(kn_exp(x), 3, (const int64_t[]){2, 4, 3});
}

Test(inductor_reduce, returned_expand_stays_a_view) {
  kn_compile_options o = {.backend = "inductor", .dynamic = KN_DYNAMIC_FALSE};
  kn_compiled *f = KN_COMPILE(expand_input, &o), *g = KN_COMPILE(expand_exp, &o);
  kn_scope_begin();
  kn_tensor *x = kn_randn(KN_SHAPE(1, 3), NULL, KN_FLOAT32), *c = kn_randn(KN_SHAPE(4, 1), NULL, KN_FLOAT32);
  kn_tensor *a = kn_call_t(f, x), *b = kn_call_t(g, c), *be = expand_exp(c);
  cr_assert(a && b && be, "%s", kn_last_error());
  cr_expect(ind_close(a, expand_input(x), 0, 0, "expand of an input"));
  cr_expect(ind_close(b, be, 0, 0, "expand of exp"));
  cr_expect_eq(kn_data(a), kn_data(x), "the output aliases the input");
  cr_expect_eq(kn_strides(a)[0], 0);
  for (int d = 0; d < 3; d++)
    cr_expect_eq(kn_strides(b)[d], kn_strides(be)[d], "dim %d: stride %lld, eager's %lld", d,
                 (long long)kn_strides(b)[d], (long long)kn_strides(be)[d]);
  kn_scope_end();
  kn_compiled_free(f);
  kn_compiled_free(g);
  expect_code(-1, 2, "returned expands");
}

/* ---- log_softmax: the shifted row kept in the output ---------------------------------- */
static kn_tensor *log_softmax_last(kn_tensor *x) { return kn_log_softmax(x, 1); }
static kn_tensor *log_softmax_first(kn_tensor *x) { return kn_log_softmax(x, 0); }

/* log_softmax of each row of a [R, C] float32 array in double (the expectation). */
static void log_softmax_f64(const float *x, int64_t R, int64_t C, double *y) {
  for (int64_t r = 0; r < R; r++) {
    const float *xr = x + r * C;
    double m = -INFINITY, s = 0;
    for (int64_t j = 0; j < C; j++) m = xr[j] > m ? xr[j] : m;
    for (int64_t j = 0; j < C; j++) s += exp((double)xr[j] - m);
    for (int64_t j = 0; j < C; j++) y[r * C + j] = (double)xr[j] - m - log(s);
  }
}

/* The pass computing the exps writes x - max into the output, the last pass
** reads it back and subtracts log(sum) in place (the output's first write
** hidden behind the exps). Values: a plain C loop in double on finite
** inputs; eager's with NaN and inf planted, float32 and float64. */
Test(inductor_reduce, log_softmax_keeps_shifted_row_in_output) {
  enum { R = 37, C = 300 };
  kn_compile_options o = {.backend = "inductor", .dynamic = KN_DYNAMIC_FALSE};
  kn_compiled *f = KN_COMPILE(log_softmax_last, &o);
  kn_scope_begin();
  kn_tensor *x = kn_contiguous(kn_randn(KN_SHAPE(R, C), NULL, KN_FLOAT32));
  kn_tensor *y = kn_contiguous(kn_call_t(f, x));
  cr_assert(y, "%s", kn_last_error());
  double *want = malloc(sizeof(double) * R * C);
  log_softmax_f64(kn_data(x), R, C, want);
  for (int64_t i = 0; i < R * C; i++)
    cr_expect(fabs(((float *)kn_data(y))[i] - want[i]) <= 1e-5 * (1 + fabs(want[i])),
              "element %lld: %g, expected %g", (long long)i, ((float *)kn_data(y))[i], want[i]);
  free(want);
  kn_scope_end();
  kn_compiled_free(f);
  char *src = kn_test_inductor_sources(cache);
  /* the blocks' fused call writes x - max, the remainder's loop too */
  cr_expect_eq(kn_test_count_of(src, "expsum_max_f32((float *)0, out0 + o1 + jb"), 1, "block:\n%s",
               src);
  cr_expect_eq(kn_test_count_of(src, "kept for a later pass"), 1, "remainder:\n%s", src);
  cr_expect_eq(kn_test_count_of(src, "kept by an earlier pass"), 1, "the last pass:\n%s", src);
  free(src);
  expect_code(1, 0, "log_softmax");
  for (int d = 0; d < 2; d++) {
    kn_dtype dt = d ? KN_FLOAT64 : KN_FLOAT32;
    f = KN_COMPILE(log_softmax_last, &o);
    kn_scope_begin();
    kn_tensor *s = special(KN_SHAPE(R, C), dt);
    cr_expect(ind_close(kn_call_t(f, s), kn_log_softmax(s, 1), 1e-6, 1e-6, kn_dtype_name(dt)));
    kn_scope_end();
    kn_compiled_free(f);
  }
  expect_code(-1, 0, "log_softmax special values");
}

/* Other layouts: over dim 0, over the rows of a transposed input, and rows
** of dynamic lengths (one compile); each as eager's. */
Test(inductor_reduce, log_softmax_layouts_and_dynamic_rows) {
  kn_compile_options o = {.backend = "inductor", .dynamic = KN_DYNAMIC_FALSE};
  kn_compiled *f0 = KN_COMPILE(log_softmax_first, &o), *f1 = KN_COMPILE(log_softmax_last, &o);
  kn_scope_begin();
  kn_tensor *x = special(KN_SHAPE(300, 37), KN_FLOAT32), *xt = kn_t(x);
  cr_expect(ind_close(kn_call_t(f0, x), kn_log_softmax(x, 0), 1e-6, 1e-6, "dim 0"));
  cr_expect(ind_close(kn_call_t(f1, xt), kn_log_softmax(xt, 1), 1e-6, 1e-6, "transposed"));
  kn_scope_end();
  kn_compiled_free(f0);
  kn_compiled_free(f1);
  expect_code(-1, 0, "log_softmax layouts");
  o.dynamic = KN_DYNAMIC_TRUE;
  kn_compiled *f = KN_COMPILE(log_softmax_last, &o);
  kn_scope_begin();
  const int64_t lens[3] = {37, 50, 300};
  for (int i = 0; i < 3; i++) {
    kn_tensor *s = special(KN_SHAPE(5 + i, lens[i]), KN_FLOAT32);
    char w[32];
    snprintf(w, sizeof w, "dynamic %lld", (long long)lens[i]);
    cr_expect(ind_close(kn_call_t(f, s), kn_log_softmax(s, 1), 1e-6, 1e-6, w));
  }
  kn_scope_end();
  kn_compiled_free(f);
  cr_expect_eq(ind_count(cache, ".so"), 1, "one compile for every length");
  expect_code(-1, 0, "dynamic log_softmax");
}

/* A float32 maximum row read in place is one call of the table's row
** maximum (codegen_expsum.c): amax over the last dim, rows of 7, 1000 and
** 1031 (short, a multiple of nothing, past 1024) with NaN and +-inf
** planted (special()), equal to eager element for element (NaN where
** eager's is); a row of -inf only gives -inf. float64 rows and a prepared
** row (the inf-norm's |x|) keep the lanes' loop. */
static kn_tensor *amax_last(kn_tensor *x) { return kn_amax(x, dlast, 1, false); }
static kn_tensor *inf_norm_last(kn_tensor *x) {
  return kn_linalg_vector_norm(x, INFINITY, dlast, 1, false);
}
Test(inductor_reduce, float32_maximum_rows_call_the_table) {
  kn_compile_options o = {.backend = "inductor", .dynamic = KN_DYNAMIC_FALSE};
  const int64_t cols[] = {7, 1000, 1031};
  for (int c = 0; c < 3; c++) {
    kn_compiled *f = KN_COMPILE(amax_last, &o);
    kn_scope_begin();
    kn_tensor *x = special(KN_SHAPE(23, cols[c]), KN_FLOAT32);
    for (int64_t j = 0; j < cols[c]; j++) ((float *)kn_data(x))[4 * cols[c] + j] = -INFINITY;
    kn_tensor *got = kn_contiguous(kn_call_t(f, x)), *want = kn_contiguous(amax_last(x));
    cr_assert(got, "%s", kn_last_error());
    const float *g = kn_data(got), *w = kn_data(want);
    for (int r = 0; r < 23; r++)
      cr_expect(g[r] == w[r] || (isnan(g[r]) && isnan(w[r])), "cols %lld row %d: %a, eager %a",
                (long long)cols[c], r, g[r], w[r]);
    cr_expect(isinf(g[4]) && g[4] < 0, "a row of -inf: %a", g[4]);
    kn_scope_end();
    kn_compiled_free(f);
  }
  char *src = kn_test_inductor_sources(cache);
  cr_expect_eq(kn_test_count_of(src, "KN_VMT()->rowmax_f32(in0 + o0 + jb, "), 3, "%s", src);
  free(src);
  expect_code(3, 0, "amax");
  kn_compiled *f = KN_COMPILE(amax_last, &o), *h = KN_COMPILE(inf_norm_last, &o);
  kn_scope_begin();
  kn_tensor *x = special(KN_SHAPE(5, 300), KN_FLOAT64);
  cr_expect(ind_close(kn_call_t(f, x), amax_last(x), 0, 0, "amax float64"));
  kn_tensor *y = kn_randn(KN_SHAPE(5, 300), NULL, KN_FLOAT32);
  cr_expect(ind_close(kn_call_t(h, y), inf_norm_last(y), 0, 0, "inf-norm float32"));
  kn_scope_end();
  kn_compiled_free(f);
  kn_compiled_free(h);
  src = kn_test_inductor_sources(cache);
  cr_expect_eq(kn_test_count_of(src, "->rowmax_f32("), 0, "%s", src);
  cr_expect_eq(kn_test_count_of(src, "static void kernel"), 2, "%s", src);
  free(src);
  expect_code(-1, 0, "float64 amax and the inf-norm");
}
