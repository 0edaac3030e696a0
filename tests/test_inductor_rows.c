/*
** tests/test_inductor_rows.c: row kernels whose passes call the vector-math
** table on a block of a buffer read at the element (log_softmax's and
** cross_entropy's backward: exp of the saved log-probabilities). The table
** reads such an operand in place from the buffer (no copy into a block on
** the stack) when the buffer runs with stride 1 along the innermost reduced
** dim; other layouts copy it. A sum's lanes likewise read such a buffer, or
** the block the table computed, in place; a sum of exp(x - max) (softmax,
** log_softmax) is one fused table call per block, bit for bit the element
** loops it replaced, and the row's rest (< 16 elements) one more vector
** call. Checked against the formula in double (an
** independent expectation) and against eager, for rows of 1, 7, 1023, 1025
** and 9000 elements, float32 and float64, rows with a stride of their own
** (a narrowed tensor), a transposed input, two reduced dims, and dynamic
** row lengths under one compile.
*/
#include "inductor_util.h"
#include "kiln/autograd.h"
#include "kiln/threads.h"
#include "ops/vmath.h"
#include "support/files.h"

static char cache[64];

static void setup(void) {
  ind_cache_dir(cache, sizeof cache);
  kn_manual_seed(5);
}
static void teardown(void) {
  if (!getenv("KN_TEST_KEEP_CACHE")) ind_rm(cache);
}

TestSuite(inductor_rows, .init = setup, .fini = teardown, .timeout = 300);

/* x - exp(x) * sum(x) over the last dim: log_softmax's backward shape (the
** exp read by the last pass, its operand a buffer). */
static kn_tensor *exp_after_sum(kn_tensor *x) {
  const int64_t d = -1;
  return kn_sub(x, kn_mul(kn_exp(x), kn_sum_dims(x, &d, 1, true)));
}

/* x - log(sum(exp(x))) over dims 1 and 2 of a 3-d input: the sum's pass
** computes the exp of a buffer. */
static kn_tensor *log_sum_exp2(kn_tensor *x) {
  const int64_t d[2] = {1, 2};
  return kn_sub(x, kn_log(kn_sum_dims(kn_exp(x), d, 2, true)));
}

/* The formula in double (exp_after_sum's, or log_sum_exp2's when lse) over
** rows of n elements of a contiguous copy of x: whether got (same layout)
** is within the float rounding of each term. */
static bool matches_f64(kn_tensor *x, kn_tensor *got, int64_t n, bool lse, const char *what) {
  kn_tensor *xc = kn_contiguous(kn_to(x, KN_FLOAT64)), *gc = kn_contiguous(kn_to(got, KN_FLOAT64));
  bool f32 = kn_tensor_dtype(got) == KN_FLOAT32;
  double eps = f32 ? 1e-6 : 1e-14;
  const double *a = kn_data(xc), *g = kn_data(gc);
  for (int64_t r = 0; r < kn_numel(xc) / n; r++) {
    const double *xr = a + r * n;
    double s = 0, sa = 0, se = 0;
    for (int64_t j = 0; j < n; j++) s += xr[j], sa += fabs(xr[j]), se += exp(xr[j]);
    for (int64_t j = 0; j < n; j++) {
      double e = exp(xr[j]), want = lse ? xr[j] - log(se) : xr[j] - e * s;
      double tol = lse ? 4 * eps * (fabs(xr[j]) + fabs(log(se)) + 1)
                       : eps * (fabs(xr[j]) + e * (fabs(s) + sa));
      if (!(fabs(g[r * n + j] - want) <= tol)) {
        cr_log_error("%s: row %lld element %lld: compiled %.17g, expected %.17g", what,
                     (long long)r, (long long)j, g[r * n + j], want);
        return false;
      }
    }
  }
  return true;
}

static const int64_t lens[5] = {1, 7, 1023, 1025, 9000};

/* Contiguous rows of every length, float32 and float64: the formula in
** double and eager's result; rows of 1025 read the exp's operand in place
** (the address of the block's first element) with no block on the stack. */
Test(inductor_rows, vector_math_reads_its_operand_in_place) {
  for (int d = 0; d < 2; d++) {
    kn_dtype dt = d ? KN_FLOAT64 : KN_FLOAT32;
    for (int i = 0; i < 5; i++) {
      kn_compile_options o = {.backend = "inductor", .dynamic = KN_DYNAMIC_FALSE};
      kn_compiled *f = KN_COMPILE(exp_after_sum, &o);
      kn_scope_begin();
      kn_tensor *x = kn_randn(KN_SHAPE(lens[i] > 1024 ? 3 : 6, lens[i]), NULL, dt);
      kn_tensor *y = kn_call_t(f, x);
      char w[48];
      snprintf(w, sizeof w, "%s rows of %lld", kn_dtype_name(dt), (long long)lens[i]);
      cr_assert_not_null(y, "%s: %s", w, kn_last_error());
      cr_expect(matches_f64(x, y, lens[i], false, w));
      cr_expect(ind_close(y, exp_after_sum(x), 1e-6, 1e-6, w));
      kn_scope_end();
      kn_compiled_free(f);
      char *src = kn_test_inductor_sources(cache);
      if (lens[i] == 1025) {
        cr_expect_eq(kn_test_count_of(src, "in0 + o0 + jb, bn)"), 1, "%s:\n%s", w, src);
        cr_expect_eq(kn_test_count_of(src, " vmi"), 0, "%s: no operand block:\n%s", w, src);
        /* the sum's lanes read x's block in place too */
        cr_expect_eq(kn_test_count_of(src, "*tmp = in0 + o0 + jb;"), 1, "%s:\n%s", w, src);
      }
      free(src);
      ind_rm(cache);
      ind_cache_dir(cache, sizeof cache);
    }
  }
}

/* Rows with a stride of their own (columns 3 .. 3 + n of wider rows) read
** in place from each row's offset; a transposed input (element stride not
** 1) copies its operand into a block; both as the formula and eager. */
Test(inductor_rows, strided_rows_and_transposed_input) {
  kn_compile_options o = {.backend = "inductor", .dynamic = KN_DYNAMIC_FALSE};
  kn_compiled *f = KN_COMPILE(exp_after_sum, &o);
  kn_scope_begin();
  kn_tensor *wide = kn_randn(KN_SHAPE(5, 1100), NULL, KN_FLOAT32);
  kn_tensor *x = kn_narrow(wide, 1, 3, 1025);
  kn_tensor *y = kn_call_t(f, x);
  cr_assert_not_null(y, "%s", kn_last_error());
  cr_expect(matches_f64(x, y, 1025, false, "narrowed rows"));
  cr_expect(ind_close(y, exp_after_sum(x), 1e-6, 1e-6, "narrowed rows"));
  kn_scope_end();
  kn_compiled_free(f);
  char *src = kn_test_inductor_sources(cache);
  cr_expect_eq(kn_test_count_of(src, "in0 + o0 + jb, bn)"), 1, "%s", src);
  free(src);
  ind_rm(cache);
  ind_cache_dir(cache, sizeof cache);
  f = KN_COMPILE(exp_after_sum, &o);
  kn_scope_begin();
  kn_tensor *xt = kn_t(kn_randn(KN_SHAPE(1023, 4), NULL, KN_FLOAT32));
  y = kn_call_t(f, xt);
  cr_assert_not_null(y, "%s", kn_last_error());
  cr_expect(matches_f64(xt, y, 1023, false, "transposed"));
  cr_expect(ind_close(y, exp_after_sum(xt), 1e-6, 1e-6, "transposed"));
  kn_scope_end();
  kn_compiled_free(f);
  src = kn_test_inductor_sources(cache);
  cr_expect_eq(kn_test_count_of(src, "in0 + o0 + jb, bn)"), 0, "%s", src);
  cr_expect_geq(kn_test_count_of(src, "vmi"), 1, "%s", src);
  free(src);
}

/* Two reduced dims ([4, 5, 300] over dims 1 and 2): the sum's pass reads
** each block of the inner dim in place from the outer level's offset. */
Test(inductor_rows, two_reduced_dims) {
  kn_compile_options o = {.backend = "inductor", .dynamic = KN_DYNAMIC_FALSE};
  kn_compiled *f = KN_COMPILE(log_sum_exp2, &o);
  kn_scope_begin();
  kn_tensor *x = kn_randn(KN_SHAPE(4, 5, 300), NULL, KN_FLOAT32);
  kn_tensor *y = kn_call_t(f, x);
  cr_assert_not_null(y, "%s", kn_last_error());
  cr_expect(matches_f64(x, y, 1500, true, "dims 1 and 2"));
  cr_expect(ind_close(y, log_sum_exp2(x), 1e-6, 1e-6, "dims 1 and 2"));
  kn_scope_end();
  kn_compiled_free(f);
  char *src = kn_test_inductor_sources(cache);
  cr_expect_eq(kn_test_count_of(src, "in0 + p0_0 + jb, bn)"), 1, "%s", src);
  cr_expect_eq(kn_test_count_of(src, "*tmp = vmo"), 1, "the sum reads the exps' block:\n%s", src);
  free(src);
}

/* Dynamic row lengths: one compile for rows of 7, 1025 and 9000. */
Test(inductor_rows, dynamic_row_lengths) {
  kn_compile_options o = {.backend = "inductor", .dynamic = KN_DYNAMIC_TRUE};
  kn_compiled *f = KN_COMPILE(exp_after_sum, &o);
  kn_scope_begin();
  for (int i = 1; i < 5; i += i == 1 ? 2 : 1) {
    kn_tensor *x = kn_randn(KN_SHAPE(2 + i, lens[i]), NULL, KN_FLOAT32);
    kn_tensor *y = kn_call_t(f, x);
    char w[48];
    snprintf(w, sizeof w, "dynamic rows of %lld", (long long)lens[i]);
    cr_assert_not_null(y, "%s: %s", w, kn_last_error());
    cr_expect(matches_f64(x, y, lens[i], false, w));
    cr_expect(ind_close(y, exp_after_sum(x), 1e-6, 1e-6, w));
  }
  kn_scope_end();
  kn_compiled_free(f);
  cr_expect_eq(ind_count(cache, ".so"), 1, "one compile for every length");
}

static kn_tensor *softmax_last(kn_tensor *x) { return kn_softmax(x, 1); }
static kn_tensor *log_softmax_last(kn_tensor *x) { return kn_log_softmax(x, 1); }

/* softmax (lse false) or log_softmax in double over rows of n of x: whether
** got is within 2e-6 relative (and 1e-6 of the row's log-sum). */
static bool softmax_matches_f64(kn_tensor *x, kn_tensor *got, int64_t n, bool log_,
                                const char *what) {
  kn_tensor *xc = kn_contiguous(kn_to(x, KN_FLOAT64)), *gc = kn_contiguous(kn_to(got, KN_FLOAT64));
  const double *a = kn_data(xc), *g = kn_data(gc);
  for (int64_t r = 0; r < kn_numel(xc) / n; r++) {
    const double *xr = a + r * n;
    double mx = -INFINITY, se = 0;
    for (int64_t j = 0; j < n; j++) mx = xr[j] > mx ? xr[j] : mx;
    for (int64_t j = 0; j < n; j++) se += exp(xr[j] - mx);
    for (int64_t j = 0; j < n; j++) {
      double want = log_ ? xr[j] - mx - log(se) : exp(xr[j] - mx) / se;
      double tol = log_ ? 2e-6 * (fabs(want) + log(se) + 1) : 2e-6 * want + 1e-30;
      if (!(fabs(g[r * n + j] - want) <= tol)) {
        cr_log_error("%s: row %lld element %lld: compiled %.17g, expected %.17g", what,
                     (long long)r, (long long)j, g[r * n + j], want);
        return false;
      }
    }
  }
  return true;
}

/* The sum of exp(x - max) is one fused table call per block (exp, its sum
** into the lanes): softmax's call writes the exps into the output, where the
** last pass scales them, log_softmax's writes x - max there, where the last
** pass subtracts log(sum); neither copies a block to the stack or sums a
** block of stored exps. Values as the formula in double and as eager for
** every row length. */
Test(inductor_rows, softmax_sums_read_the_exps_in_place) {
  for (int lg = 0; lg < 2; lg++) {
    for (int i = 0; i < 5; i++) {
      kn_compile_options o = {.backend = "inductor", .dynamic = KN_DYNAMIC_FALSE};
      kn_compiled *f = lg ? KN_COMPILE(log_softmax_last, &o) : KN_COMPILE(softmax_last, &o);
      kn_scope_begin();
      kn_tensor *x = kn_mul_scalar(kn_randn(KN_SHAPE(4, lens[i]), NULL, KN_FLOAT32), kn_float(3));
      kn_tensor *y = kn_call_t(f, x);
      char w[48];
      snprintf(w, sizeof w, "%s rows of %lld", lg ? "log_softmax" : "softmax", (long long)lens[i]);
      cr_assert_not_null(y, "%s: %s", w, kn_last_error());
      cr_expect(softmax_matches_f64(x, y, lens[i], lg, w));
      cr_expect(ind_close(y, lg ? kn_log_softmax(x, 1) : kn_softmax(x, 1), 1e-6, 1e-7, w));
      kn_scope_end();
      kn_compiled_free(f);
      char *src = kn_test_inductor_sources(cache);
      if (lens[i] == 1025) {
        const char *call = lg ? "expsum_max_f32((float *)0, out0 + o1 + jb, in0 + o0 + jb, ((float)v1), bn"
                              : "expsum_max_f32(out0 + o1 + jb, (float *)0, in0 + o0 + jb, ((float)v1), bn";
        cr_expect_eq(kn_test_count_of(src, call), 1, "%s: the fused call:\n%s", w, src);
        cr_expect_eq(kn_test_count_of(src, "*tmp = "), 0, "%s: no summing loop:\n%s", w, src);
        cr_expect_eq(kn_test_count_of(src, " vmi"), 0, "%s: no operand block:\n%s", w, src);
        cr_expect_eq(kn_test_count_of(src, "f32[0](vmo"), 0, "%s: no exp block:\n%s", w, src);
      }
      free(src);
      ind_rm(cache);
      ind_cache_dir(cache, sizeof cache);
    }
  }
}

/* The bits a float32 softmax (log_softmax) row of n gets from the fused
** exp-and-sum calls (blocks of 256 from the row's start, the last one the
** rest rounded down to a multiple of 16), computed here with the table in
** use: the max, t = x - max in float, the table's exp of t; in every whole
** group of 64 within the blocks lane l adds the float sum (e[g+l] +
** e[g+16+l]) + (e[g+32+l] + e[g+48+l]) in double, the other elements of
** the blocks are added in double to lane j % 16 and the last n % 16 to lane
** 0, the lanes added in order and rounded to float; then e * (1 / sum)
** (t - log(sum), the table's log). Into y. */
static void softmax_row_bits(const float *x, int64_t n, bool log_, float *y) {
  const kn__vmath *t = kn__vmath_get();
  float mx = -INFINITY, *d = malloc((size_t)n * sizeof *d), *e = malloc((size_t)n * sizeof *e);
  cr_assert(d && e);
  bool nan = false;
  for (int64_t j = 0; j < n; j++) mx = x[j] > mx ? x[j] : mx, nan |= x[j] != x[j];
  if (nan) mx = NAN;
  for (int64_t j = 0; j < n; j++) d[j] = x[j] - mx;
  t->f32[KN__VM_EXP](e, d, n);
  double lane[16] = {0};
  int64_t blocks = n & ~(int64_t)15, g = 0;
#define F64(i) ((e[(i) + l] + e[(i) + 16 + l]) + (e[(i) + 32 + l] + e[(i) + 48 + l]))
  for (; g + 256 <= blocks; g += 256) /* blocks are 256 long but the last: groups align */
    for (int l = 0; l < 16; l++)
      lane[l] += (double)((F64(g) + F64(g + 64)) + (F64(g + 128) + F64(g + 192)));
  for (; g + 64 <= blocks; g += 64)
    for (int l = 0; l < 16; l++) lane[l] += (double)F64(g);
#undef F64
  for (; g < n; g++) lane[g < blocks ? g % 16 : 0] += (double)e[g];
  double acc = lane[0];
  for (int l = 1; l < 16; l++) acc = acc + lane[l];
  float sum = (float)acc, ls, inv = (float)1 / sum;
  t->f32[KN__VM_LOG](&ls, &sum, 1);
  for (int64_t j = 0; j < n; j++) y[j] = log_ ? d[j] - ls : e[j] * inv;
  free(d), free(e);
}

/* softmax and log_softmax rows through the fused call give the bits of its
** contract (softmax_row_bits), compiled and eager alike (eager's float32
** rows compute as the generated kernel: ops/vmath_softmax.h): rows of 7 (no block), 1000 (a last block
** with groups and a rest), 1025 and 9000, one of N(0, 1) values and two of
** wide-ranged values (exps that underflow), a row with -inf and
** one with NaN; NaN matches NaN. */
Test(inductor_rows, fused_exp_sum_keeps_the_bits) {
  const int64_t ns[4] = {7, 1000, 1025, 9000};
  for (int lg = 0; lg < 2; lg++) {
    for (int i = 0; i < 4; i++) {
      kn_compile_options o = {.backend = "inductor", .dynamic = KN_DYNAMIC_FALSE};
      kn_compiled *f = lg ? KN_COMPILE(log_softmax_last, &o) : KN_COMPILE(softmax_last, &o);
      kn_scope_begin();
      int64_t n = ns[i];
      kn_tensor *x = kn_contiguous(kn_mul_scalar(kn_randn(KN_SHAPE(3, n), NULL, KN_FLOAT32),
                                                 kn_float(30)));
      float *xv = kn_data(x), *want = malloc((size_t)n * sizeof *want);
      cr_assert(want);
      for (int64_t j = 0; j < n; j++) xv[j] /= 30; /* row 0 of one size: sums round by order */
      xv[n + n / 2] = -INFINITY, xv[2 * n + 3] = NAN;
      const float *got = kn_data(kn_contiguous(kn_call_t(f, x)));
      cr_assert_not_null(got, "%s", kn_last_error());
      const float *eager = kn_data(lg ? kn_log_softmax(x, 1) : kn_softmax(x, 1));
      cr_assert_not_null(eager, "%s", kn_last_error());
      for (int64_t r = 0; r < 3; r++) {
        softmax_row_bits(xv + r * n, n, lg, want);
        for (int k = 0; k < 2; k++) { /* compiled, then eager (the same row computation) */
          const float *v = (k ? eager : got) + r * n;
          int64_t bad = -1;
          for (int64_t j = 0; j < n && bad < 0; j++)
            if (memcmp(&v[j], &want[j], sizeof *want) && !(isnan(v[j]) && isnan(want[j])))
              bad = j;
          cr_expect(bad < 0, "%s row %lld of %lld: element %lld %s %a, loops %a",
                    lg ? "log_softmax" : "softmax", (long long)r, (long long)n, (long long)bad,
                    k ? "eager" : "compiled", bad < 0 ? 0 : v[bad], bad < 0 ? 0 : want[bad]);
        }
      }
      free(want);
      kn_scope_end();
      kn_compiled_free(f);
      ind_rm(cache);
      ind_cache_dir(cache, sizeof cache);
    }
  }
}

/* mean(exp(x - amax(x))) over the last dim: a MEAN member of the fused
** call, its rest (n % 16 elements) one vector (codegen_expsum.c). */
static kn_tensor *mean_exp_shifted(kn_tensor *x) {
  const int64_t d = 1;
  return kn_mean_dims(kn_exp(kn_sub(x, kn_amax(x, &d, 1, true))), &d, 1, false);
}

/* The rest of a fused row as one vector, for every remainder length (rows
** of 16 to 31 elements, and 3 and 1000): the compiled mean within 1e-6 of
** the formula in double, and the generated code makes one table call for
** it. */
Test(inductor_rows, fused_row_rest_is_one_vector) {
  for (int64_t n = 1; n <= 33; n++) {
    int64_t len = n <= 16 ? 15 + n : n == 17 ? 3 : n == 18 ? 1000 : 0;
    if (!len) break;
    kn_compile_options o = {.backend = "inductor", .dynamic = KN_DYNAMIC_FALSE};
    kn_compiled *f = KN_COMPILE(mean_exp_shifted, &o);
    kn_scope_begin();
    kn_tensor *x = kn_contiguous(kn_mul_scalar(kn_randn(KN_SHAPE(5, len), NULL, KN_FLOAT32),
                                               kn_float(4)));
    kn_tensor *y = kn_contiguous(kn_call_t(f, x));
    cr_assert_not_null(y, "%s", kn_last_error());
    const float *xv = kn_data(x), *yv = kn_data(y);
    for (int64_t r = 0; r < 5; r++) {
      double m = -INFINITY, s = 0;
      for (int64_t j = 0; j < len; j++) m = xv[r * len + j] > m ? xv[r * len + j] : m;
      for (int64_t j = 0; j < len; j++) s += exp((double)xv[r * len + j] - m);
      s /= (double)len;
      cr_expect(fabs(yv[r] - s) <= 1e-6 * s, "rows of %lld, row %lld: compiled %.9g, double %.9g",
                (long long)len, (long long)r, yv[r], s);
    }
    kn_scope_end();
    kn_compiled_free(f);
    char *src = kn_test_inductor_sources(cache);
    if (len % 16)
      cr_expect_eq(kn_test_count_of(src, "KN_VMT()->f32[0]((float *)&t_"), 1, "rows of %lld:\n%s",
                   (long long)len, src);
    free(src);
    ind_rm(cache);
    ind_cache_dir(cache, sizeof cache);
  }
}

/* log_softmax's backward on the CPU: where its gradient is an input of the
** backward graph (log_softmax ends the compiled forward) the generated code
** calls the eager row kernel (the same bits as eager); where it comes from
** nll_loss's backward (cross_entropy) it is decomposed and fused (no extern
** call of it). Gradients against eager. */
static kn_tensor *log_softmax_rows(kn_tensor *x) { return kn_log_softmax(x, 1); }
static kn_tensor *g_target;
static kn_tensor *cross_entropy_rows(kn_tensor *x) {
  return kn_cross_entropy(x, g_target, NULL, KN_REDUCTION_MEAN, -100, 0.0);
}

Test(inductor_rows, log_softmax_backward_extern_only_without_a_producer) {
  for (int k = 0; k < 2; k++) {
    kn_compile_options o = {.backend = "inductor", .dynamic = KN_DYNAMIC_FALSE};
    kn_compiled *f = k ? KN_COMPILE(cross_entropy_rows, &o) : KN_COMPILE(log_softmax_rows, &o);
    kn_scope_begin();
    g_target = kn_randint(0, 1000, 1, (const int64_t[]){6}, NULL, KN_INT64);
    kn_tensor *x = kn_randn(KN_SHAPE(6, 1000), NULL, KN_FLOAT32), *xe = kn_detach(x);
    kn_set_requires_grad(x, true), kn_set_requires_grad(xe, true);
    kn_tensor *go = k ? NULL : kn_randn(KN_SHAPE(6, 1000), NULL, KN_FLOAT32);
    kn_tensor *y = kn_call_t(f, x), *ye = k ? cross_entropy_rows(xe) : log_softmax_rows(xe);
    cr_assert_not_null(y, "%s", kn_last_error());
    kn_tensor *gx = NULL, *gxe = NULL;
    cr_assert_eq(kn_autograd_grad(&y, 1, &x, 1, k ? NULL : &go, false, false, false, &gx), KN_OK,
                 "%s", kn_last_error());
    cr_assert_eq(kn_autograd_grad(&ye, 1, &xe, 1, k ? NULL : &go, false, false, false, &gxe),
                 KN_OK, "%s", kn_last_error());
    /* the extern is the eager kernel: equal bits; the fused form within rounding */
    cr_expect(ind_close(gx, gxe, k ? 1e-5 : 0, k ? 1e-7 : 0, k ? "cross_entropy" : "log_softmax"));
    kn_scope_end();
    kn_compiled_free(f);
    char *src = kn_test_inductor_sources(cache);
    cr_expect_eq(kn_test_count_of(src, "extern kiln.ops._log_softmax_backward_data"), k ? 0 : 1,
                 "%s:\n%s", k ? "cross_entropy" : "log_softmax", src);
    free(src);
    ind_rm(cache);
    ind_cache_dir(cache, sizeof cache);
  }
}

/* sum(exp(x - c)) over the last dim with shifts that are not the row's
** maximum of x: amax(x) - 3 (every x - c up to 3) and amax(2x) (x - c > 0
** where x < 0). */
static kn_tensor *sum_exp_below_max(kn_tensor *x) {
  const int64_t d = 1;
  kn_tensor *c = kn_sub_scalar(kn_amax(x, &d, 1, true), kn_float(3));
  return kn_sum_dims(kn_exp(kn_sub(x, c)), &d, 1, false);
}
static kn_tensor *sum_exp_other_max(kn_tensor *x) {
  const int64_t d = 1;
  return kn_sum_dims(kn_exp(kn_sub(x, kn_amax(kn_mul_scalar(x, kn_float(2)), &d, 1, true))), &d,
                     1, false);
}

/* Only a shift that is the row's maximum of the same values takes the
** table's expsum_max_f32 (whose exp skips its upper range check); other
** shifts, under which exps exceed 1, call expsum_f32: each compiled sum
** within 1e-6 of the sum in double over rows of 1025 (a block of 256
** four times, then the rest). */
Test(inductor_rows, only_the_rows_maximum_takes_the_max_shift_call) {
  kn_tensor *(*fns[2])(kn_tensor *) = {sum_exp_below_max, sum_exp_other_max};
  for (int k = 0; k < 2; k++) {
    kn_compile_options o = {.backend = "inductor", .dynamic = KN_DYNAMIC_FALSE};
    kn_compiled *f = k ? KN_COMPILE(sum_exp_other_max, &o) : KN_COMPILE(sum_exp_below_max, &o);
    kn_scope_begin();
    kn_tensor *x = kn_contiguous(kn_randn(KN_SHAPE(4, 1025), NULL, KN_FLOAT32));
    kn_tensor *y = kn_contiguous(kn_call_t(f, x));
    cr_assert_not_null(y, "%s", kn_last_error());
    const float *xv = kn_data(x), *yv = kn_data(y);
    for (int64_t r = 0; r < 4; r++) {
      double m = -INFINITY, s = 0;
      for (int64_t j = 0; j < 1025; j++) {
        double v = k ? 2.0 * xv[r * 1025 + j] : xv[r * 1025 + j];
        m = v > m ? v : m;
      }
      if (!k) m -= 3;
      for (int64_t j = 0; j < 1025; j++) s += exp((double)xv[r * 1025 + j] - m);
      cr_expect(fabs(yv[r] - s) <= 1e-6 * s, "shift %d row %lld: compiled %.9g, double %.9g", k,
                (long long)r, yv[r], s);
    }
    cr_expect(ind_close(y, fns[k](x), 1e-6, 1e-6, "eager"));
    kn_scope_end();
    kn_compiled_free(f);
    char *src = kn_test_inductor_sources(cache);
    cr_expect_eq(kn_test_count_of(src, "KN_VMT()->expsum_f32("), 1, "shift %d:\n%s", k, src);
    cr_expect_eq(kn_test_count_of(src, "expsum_max_f32("), 0, "shift %d:\n%s", k, src);
    free(src);
    ind_rm(cache);
    ind_cache_dir(cache, sizeof cache);
  }
}

static kn_tensor *softmax_first(kn_tensor *x) { return kn_softmax(x, 0); }

/* softmax over dim 0: the exps' block is on the stack (the output is not
** contiguous along the reduced dim) and the last pass reads them back from
** the output, so the sum's pass stores them there element by element: its
** lanes read the copy in tmp[], not the block (they once read the block
** and left the output unwritten: NaN). The formula in double on the
** transposed rows, and eager. */
Test(inductor_rows, softmax_over_dim0_keeps_its_exps) {
  const int64_t rows[3] = {37, 1025, 7};
  for (int i = 0; i < 3; i++) {
    kn_compile_options o = {.backend = "inductor", .dynamic = KN_DYNAMIC_FALSE};
    kn_compiled *f = KN_COMPILE(softmax_first, &o);
    kn_scope_begin();
    kn_tensor *x = kn_randn(KN_SHAPE(rows[i], 45), NULL, KN_FLOAT32);
    kn_tensor *y = kn_call_t(f, x);
    char w[48];
    snprintf(w, sizeof w, "softmax over dim 0 of %lld rows", (long long)rows[i]);
    cr_assert_not_null(y, "%s: %s", w, kn_last_error());
    cr_expect(softmax_matches_f64(kn_t(x), kn_t(y), rows[i], false, w));
    cr_expect(ind_close(y, kn_softmax(x, 0), 1e-6, 1e-7, w));
    kn_scope_end();
    kn_compiled_free(f);
    ind_rm(cache);
    ind_cache_dir(cache, sizeof cache);
  }
}

/* (x - mean(x)) * rsqrt(mean((x - mean(x))^2) + 1e-5) over the last dim:
** layer_norm's forward without weight and bias, two sums a row. */
static kn_tensor *normalize_last(kn_tensor *x) {
  const int64_t d = -1;
  kn_tensor *c = kn_sub(x, kn_mean_dims(x, &d, 1, true));
  kn_tensor *v = kn_mean_dims(kn_mul(c, c), &d, 1, true);
  return kn_mul(c, kn_rsqrt(kn_add_scalar(v, kn_float(1e-5))));
}

/* Rows pipelined (codegen_pipe.c): row o + 1's first sum is added up in
** row o's second pass. The same sums in the same order: compiled bit for
** bit eager's ops, where rows stop having a next one (the end of a part
** of the row range, of the innermost kept dim of a 3-d input), rows with a
** rest (lengths not a multiple of 16), rows 1009 elements apart (a
** narrowed input), at 1 and 2 threads; and the generated code hands the
** next row's lanes on. */
Test(inductor_rows, pipelined_rows_keep_the_bits) {
  const int64_t shapes[5][3] = {{3, 5, 7}, {2, 37, 1025}, {4, 50, 1000}, {1, 3, 16}, {150, 1009, 1000}};
  int threads = kn_get_num_threads();
  for (int i = 0; i < 5; i++) {
    kn_compile_options o = {.backend = "inductor", .dynamic = KN_DYNAMIC_FALSE};
    kn_compiled *f = KN_COMPILE(normalize_last, &o);
    kn_scope_begin();
    const int64_t *s = shapes[i];
    kn_tensor *x = i < 4 ? kn_randn(KN_SHAPE(s[0], s[1], s[2]), NULL, KN_FLOAT32)
                         : kn_narrow(kn_randn(KN_SHAPE(s[0], s[1]), NULL, KN_FLOAT32), 1, 4, s[2]);
    x = kn_add_scalar(kn_mul_scalar(x, kn_float(3)), kn_float(i)); /* rows off zero */
    for (int nt = 1; nt <= 2; nt++) {
      cr_assert_eq(kn_set_num_threads(nt), KN_OK);
      char w[64];
      snprintf(w, sizeof w, "shape %d at %d threads", i, nt);
      kn_tensor *y = kn_call_t(f, x);
      cr_assert_not_null(y, "%s: %s", w, kn_last_error());
      cr_expect(ind_close(y, normalize_last(x), 0, 0, w));
    }
    kn_scope_end();
    kn_compiled_free(f);
    char *src = kn_test_inductor_sources(cache);
    cr_expect_eq(kn_test_count_of(src, "nxh_ = nx_;"), 1, "shape %d:\n%s", i, src);
    free(src);
    ind_rm(cache);
    ind_cache_dir(cache, sizeof cache);
  }
  kn_set_num_threads(threads);
}
