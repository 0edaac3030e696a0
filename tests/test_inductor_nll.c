/*
** tests/test_inductor_nll.c: nll_loss and cross_entropy under backend
** "inductor". nll_loss_forward / nll_loss2d_forward, nll_loss_backward and
** _log_softmax_backward_data are decomposed into pointwise ops and sums
** (the target check stays an extern call, _nll_loss_target), so a
** cross_entropy is one row-reduction kernel plus the batch's final sums
** forward, and one kernel backward.
**
** Expectations: the eager ops on the same inputs (a second
** implementation) for every variant (reductions none/mean/sum, with and
** without a class weight, ignore_index outside and inside [0, C), inputs
** [C], [N, C] and [N, C, d1, d2], float32 and float64, dynamic batch sizes,
** an empty batch); the schedule artifact as a literal (which nodes share a
** kernel, the extern calls); torch's error text for a bad target.
**
** Tolerances (|compiled - eager| <= atol + rtol * |eager|): float32 rtol
** 1e-5, atol 1e-6 (the eager kernels compute in double and round once,
** generated code computes each element in float: a few ulps), float64
** 1e-12 and 1e-12 (sums in another order).
*/
#include "inductor_util.h"
#include "kiln/kiln.h"
#include "kiln/log.h"
#include "support/files.h"
#include "support/log_capture.h"

static char cache[64];

/* -O0: generated code compiles faster, with the same results. */
static void setup(void) {
  ind_cache_dir(cache, sizeof cache);
  setenv("KILN_CFLAGS", "-O0 -fopenmp -ffp-contract=off", 1);
  kn_manual_seed(5);
}
static void teardown(void) {
  if (!getenv("KN_TEST_KEEP_CACHE")) ind_rm(cache);
  unsetenv("KILN_CFLAGS");
}

TestSuite(inductor_nll, .init = setup, .fini = teardown, .timeout = 300);

static double rtol_of(kn_dtype dt) { return dt == KN_FLOAT32 ? 1e-5 : 1e-12; }
static double atol_of(kn_dtype dt) { return dt == KN_FLOAT32 ? 1e-6 : 1e-12; }

/* ---- the functions -------------------------------------------------------------------- */
/* The variant the next compile traces (constants of its graph). */
static kn_reduction g_red;
static int64_t g_ignore;
static bool g_weight;

static kn_tensor *nll_fn(kn_tensor *x, kn_tensor *t, kn_tensor *w) {
  return kn_nll_loss(x, t, g_weight ? w : NULL, g_red, g_ignore);
}
static kn_tensor *ce_fn(kn_tensor *x, kn_tensor *t, kn_tensor *w) {
  return kn_cross_entropy(x, t, g_weight ? w : NULL, g_red, g_ignore, 0.0);
}
typedef kn_tensor *(*loss3)(kn_tensor *, kn_tensor *, kn_tensor *);

static kn_compiled *compile3(loss3 fn, kn_dynamic dyn) {
  kn_compile_options o = {.backend = "inductor", .dynamic = dyn};
  kn_compiled *f = kn_compile_tensor_fn((void (*)(void))fn, 3, "nll", __FILE__, __LINE__, &o);
  cr_assert_not_null(f, "%s", kn_last_error());
  return f;
}

/* ---- inputs ------------------------------------------------------------------------------- */
typedef struct shape {
  int ndim;
  int64_t s[4];
} shape;

static kn_tensor *input(const shape *sh, kn_dtype dt, uint64_t seed, bool grad) {
  kn_generator *g = kn_generator_new(seed);
  kn_tensor *x = kn_mul_scalar(kn_randn(sh->ndim, sh->s, g, dt), kn_float(2.0));
  kn_generator_free(g);
  if (grad) kn_set_requires_grad(x, true);
  return x;
}

/* Targets in [0, C) of x's target shape (x's sizes without dim 1). */
static kn_tensor *targets(const shape *sh, uint64_t seed) {
  int64_t ts[4], c = sh->ndim == 1 ? sh->s[0] : sh->s[1];
  int n = 0;
  for (int d = 0; d < sh->ndim; d++)
    if (d != (sh->ndim == 1 ? 0 : 1)) ts[n++] = sh->s[d];
  kn_generator *g = kn_generator_new(seed);
  kn_tensor *t = kn_randint(0, c, n, ts, g, KN_INT64);
  kn_generator_free(g);
  return t;
}

static kn_tensor *class_weight(const shape *sh, kn_dtype dt) {
  int64_t c = sh->ndim == 1 ? sh->s[0] : sh->s[1];
  kn_generator *g = kn_generator_new(77);
  kn_tensor *w = kn_add_scalar(kn_rand(1, &c, g, dt), kn_float(0.25));
  kn_generator_free(g);
  return w;
}

/* ---- variants --------------------------------------------------------------------------- */
typedef struct variant {
  bool weight;
  int64_t ignore; /* -100: nothing ignored; 2: class 2's targets ignored */
} variant;
static const variant variants[] = {{false, -100}, {true, -100}, {false, 2}, {true, 2}};
static const kn_reduction reds[] = {KN_REDUCTION_NONE, KN_REDUCTION_MEAN, KN_REDUCTION_SUM};

static void describe(char *buf, size_t n, const char *what, const shape *sh, kn_dtype dt,
                     const variant *v) {
  snprintf(buf, n, "%s %s ndim %d red %d weight %d ignore %lld", what, kn_dtype_name(dt), sh->ndim,
           (int)g_red, v->weight, (long long)v->ignore);
}

/* Forward only (no input requires grad: the inference graph). */
static void forward_case(loss3 fn, const shape *sh, kn_dtype dt, const variant *v) {
  g_weight = v->weight;
  g_ignore = v->ignore;
  kn_compiled *f = compile3(fn, KN_DYNAMIC_FALSE);
  kn_scope_begin();
  kn_tensor *x = input(sh, dt, 1, false), *t = targets(sh, 2), *w = class_weight(sh, dt);
  char what[160];
  describe(what, sizeof what, "forward", sh, dt, v);
  kn_tensor *got = kn_call_t(f, x, t, w);
  cr_expect(ind_close(got, fn(x, t, w), rtol_of(dt), atol_of(dt), what), "%s: %s", what,
            kn_last_error());
  kn_scope_end();
  kn_compiled_free(f);
}

/* Training: the loss and x's gradient for a random output gradient. */
static void training_case(loss3 fn, const shape *sh, kn_dtype dt, const variant *v) {
  g_weight = v->weight;
  g_ignore = v->ignore;
  kn_compiled *f = compile3(fn, KN_DYNAMIC_FALSE);
  kn_scope_begin();
  kn_tensor *x = input(sh, dt, 1, true), *xe = input(sh, dt, 1, true);
  kn_tensor *t = targets(sh, 2), *w = class_weight(sh, dt);
  char what[160];
  describe(what, sizeof what, "training", sh, dt, v);
  kn_tensor *y = kn_call_t(f, x, t, w), *ye = fn(xe, t, w);
  cr_assert_not_null(y, "%s: %s", what, kn_last_error());
  cr_expect_str_eq(kn_grad_fn_name(y), "CompiledFunctionBackward", "%s", what);
  kn_generator *g = kn_generator_new(9);
  kn_tensor *go = kn_randn(kn_ndim(ye), kn_sizes(ye), g, dt);
  kn_generator_free(g);
  cr_assert_eq(kn_backward(y, go), KN_OK, "%s: %s", what, kn_last_error());
  cr_assert_eq(kn_backward(ye, go), KN_OK, "%s: %s", what, kn_last_error());
  cr_expect(ind_close(y, ye, rtol_of(dt), atol_of(dt), what), "%s: loss", what);
  cr_expect(ind_close(kn_grad(x), kn_grad(xe), rtol_of(dt), atol_of(dt), what), "%s: grad", what);
  kn_scope_end();
  kn_compiled_free(f);
}

static void all_variants(void (*run)(loss3, const shape *, kn_dtype, const variant *), loss3 fn,
                         const shape *sh, kn_dtype dt) {
  for (size_t r = 0; r < sizeof reds / sizeof reds[0]; r++)
    for (size_t v = 0; v < sizeof variants / sizeof variants[0]; v++) {
      g_red = reds[r];
      run(fn, sh, dt, &variants[v]);
    }
}

static const shape rows2d = {2, {13, 7}}, spatial4d = {4, {3, 5, 4, 2}}, single1d = {1, {7}};

Test(inductor_nll, cross_entropy_2d_float32) { all_variants(training_case, ce_fn, &rows2d, KN_FLOAT32); }
Test(inductor_nll, cross_entropy_2d_float64) { all_variants(training_case, ce_fn, &rows2d, KN_FLOAT64); }
Test(inductor_nll, cross_entropy_4d_float32) { all_variants(training_case, ce_fn, &spatial4d, KN_FLOAT32); }
Test(inductor_nll, cross_entropy_4d_float64) { all_variants(training_case, ce_fn, &spatial4d, KN_FLOAT64); }
Test(inductor_nll, cross_entropy_1d) {
  all_variants(training_case, ce_fn, &single1d, KN_FLOAT32);
  all_variants(training_case, ce_fn, &single1d, KN_FLOAT64);
}

/* nll_loss of raw scores (not log-probabilities), forward and backward. */
Test(inductor_nll, nll_loss_alone) {
  all_variants(training_case, nll_fn, &rows2d, KN_FLOAT64);
  all_variants(forward_case, nll_fn, &spatial4d, KN_FLOAT32);
  all_variants(forward_case, nll_fn, &single1d, KN_FLOAT32);
}

/* Captured records whose message starts with prefix. */
static int count_messages(const kn_test_records *r, const char *prefix) {
  int n = 0;
  for (size_t i = 0; i < r->n; i++)
    n += strncmp(r->v[i].message, prefix, strlen(prefix)) == 0;
  return n;
}

/* ---- sizes ------------------------------------------------------------------------------------ */
/* Dynamic batch sizes: one compile serves N = 5 and N = 9 (the same
** generated code, the batch a size argument). The target's batch size is
** a symbol of its own (equal to the input's by a guard); the checked
** target has the input's, so the fusion is the static one: two kernels
** forward, one backward. */
Test(inductor_nll, dynamic_batch_size) {
  kn_dtype dts[2] = {KN_FLOAT32, KN_FLOAT64};
  kn_test_records r = {0};
  kn_set_logs_str("schedule");
  kn_test_capture_begin(&r);
  for (int k = 0; k < 2; k++) {
    g_red = KN_REDUCTION_MEAN;
    g_weight = true;
    g_ignore = 2;
    kn_compile_counter cc = {.inner = "inductor"};
    kn_compile_options o = {.backend_fn = kn_compile_counter_backend, .backend_ud = &cc,
                            .dynamic = KN_DYNAMIC_TRUE};
    kn_compiled *f = kn_compile_tensor_fn((void (*)(void))ce_fn, 3, "nll", __FILE__, __LINE__, &o);
    cr_assert_not_null(f, "%s", kn_last_error());
    for (int64_t n = 5; n <= 9; n += 4) {
      kn_scope_begin();
      shape sh = {2, {n, 7}};
      kn_tensor *x = input(&sh, dts[k], 1, true), *xe = input(&sh, dts[k], 1, true);
      kn_tensor *t = targets(&sh, 2), *w = class_weight(&sh, dts[k]);
      kn_tensor *y = kn_call_t(f, x, t, w), *ye = ce_fn(xe, t, w);
      cr_assert_not_null(y, "%s", kn_last_error());
      cr_assert_eq(kn_backward(y, NULL), KN_OK, "%s", kn_last_error());
      cr_assert_eq(kn_backward(ye, NULL), KN_OK, "%s", kn_last_error());
      cr_expect(ind_close(y, ye, rtol_of(dts[k]), atol_of(dts[k]), "dynamic loss"), "N %lld", (long long)n);
      cr_expect(ind_close(kn_grad(x), kn_grad(xe), rtol_of(dts[k]), atol_of(dts[k]), "dynamic grad"),
                "N %lld", (long long)n);
      kn_scope_end();
    }
    cr_expect_eq(cc.frame_count, 1, "one compile for both batch sizes");
    kn_compiled_free(f);
  }
  kn_test_capture_end(&r);
  kn_set_logs_str("");
  cr_expect_eq(kn_test_count_artifact(&r, "schedule"), 4);
  cr_expect_eq(count_messages(&r, "schedule: 2 kernels, 1 extern calls,"), 2, "forward");
  cr_expect_eq(count_messages(&r, "schedule: 1 kernels, 1 extern calls,"), 2, "backward");
  kn_test_records_free(&r);
}

/* An empty batch: the mean is 0 / 0 = nan (as eager), the sum 0, none an
** empty loss; the gradient is empty. */
Test(inductor_nll, empty_batch) {
  static const shape empty2d = {2, {0, 7}}, empty4d = {4, {0, 5, 4, 2}};
  for (size_t r = 0; r < sizeof reds / sizeof reds[0]; r++) {
    g_red = reds[r];
    training_case(ce_fn, &empty2d, KN_FLOAT32, &variants[1]);
    training_case(ce_fn, &empty4d, KN_FLOAT64, &variants[0]);
  }
}

/* ---- the schedule -------------------------------------------------------------------------- */
/* cross_entropy's forward: log_softmax and the picking of each row's target
** are one kernel (one row loop, a few passes per row; sub_1, the
** log-probabilities, saved for the backward), the count of targets not
** ignored, the batch's sums and their quotient a second; the target check
** is the only extern call.
** Backward: softmax minus the one-hot target, scaled, one kernel. */
Test(inductor_nll, cross_entropy_schedule) {
  kn_test_records r = {0};
  kn_set_logs_str("schedule");
  kn_test_capture_begin(&r);
  g_red = KN_REDUCTION_MEAN;
  g_weight = false;
  g_ignore = -100;
  kn_compiled *f = compile3(ce_fn, KN_DYNAMIC_FALSE);
  kn_scope_begin();
  shape sh = {2, {4, 6}};
  kn_tensor *x = input(&sh, KN_FLOAT32, 1, true);
  kn_tensor *y = kn_call_t(f, x, targets(&sh, 2), class_weight(&sh, KN_FLOAT32));
  cr_assert_not_null(y, "%s", kn_last_error());
  cr_assert_eq(kn_backward(y, NULL), KN_OK, "%s", kn_last_error());
  kn_scope_end();
  kn_compiled_free(f);
  kn_test_capture_end(&r);
  kn_set_logs_str("");
  cr_assert_eq(kn_test_count_artifact(&r, "schedule"), 2);
  const kn_test_record *fw = kn_test_get_record(&r, "schedule: 2 kernels");
  const kn_test_record *bw = kn_test_get_record(&r, "schedule: 1 kernels");
  cr_assert(fw && bw, "forward and backward schedules");
  cr_expect_str_eq(fw->message,
                   "schedule: 2 kernels, 1 extern calls, 14 nodes fused, 2 reduction groups\n"
                   "  extern _nll_loss_target (kiln.ops._nll_loss_target)\n"
                   "  kernel16: reduction group over [4, 6] reducing dims 1: amax(reduction) sub "
                   "exp sum_1(reduction) log(row) sub_1* eq neg where sum_2(reduction)*  "
                   "(* written to memory)\n"
                   "  kernel21: reduction group over [4, 1] reducing dims 0 1: ne _to_copy "
                   "sum_3(reduction)* sum_4(reduction) div(row)*  (* written to memory)\n");
  cr_expect_str_eq(bw->message,
                   "schedule: 1 kernels, 1 extern calls, 10 nodes fused, 1 reduction groups\n"
                   "  extern _nll_loss_target (kiln.ops._nll_loss_target)\n"
                   "  kernel17: reduction group over [4, 6] reducing dims 1: eq add neg div where "
                   "sum_1(reduction) exp mul sub*  (* written to memory)\n");
  kn_test_records_free(&r);
}

/* ---- the one-hot pick ------------------------------------------------------------------------ */
/* The double reference of one row's loss: -(x[t] - max - log(sum(exp(x - max)))),
** 0 for an ignored row (t == -100). */
static double ref_row_loss(const float *x, int64_t c, int64_t t) {
  if (t == -100) return 0;
  double mx = -INFINITY, s = 0;
  bool nan = false;
  for (int64_t j = 0; j < c; j++) {
    nan |= isnan(x[j]);
    if (x[j] > mx) mx = x[j];
  }
  if (nan) return NAN;
  for (int64_t j = 0; j < c; j++) s += exp((double)x[j] - mx);
  return -((double)x[t] - mx - log(s));
}

/* The row's special values: row 3 +inf at its target, row 4 NaN away from
** its target (at the target when the row has one class), row 5 -inf away
** from its target. */
static void special_rows(float *x, int64_t c, const int64_t *t) {
  x[3 * c + t[3]] = INFINITY;
  x[4 * c + (c > 1 ? c - 1 : 0)] = NAN;
  if (c > 1) x[5 * c + (t[5] + 1) % c] = -INFINITY;
}

/* A row's loss is its one element at the target: generated code reads x
** there (one-hot pick) instead of comparing every class with the target.
** Row lengths 1 .. 9000 (one class; below, at and above a 16-lane block;
** above a 256-element block; long rows), one dynamic compile: the first
** and last class, an ignored row, inf and NaN at and away from the target
** give eager's losses and gradients and the double reference's losses. */
Test(inductor_nll, one_hot_pick_rows) {
  g_red = KN_REDUCTION_NONE, g_weight = false, g_ignore = -100;
  kn_compiled *f = compile3(ce_fn, KN_DYNAMIC_TRUE);
  const int64_t lens[] = {1, 2, 15, 16, 17, 257, 1024, 9000};
  for (size_t k = 0; k < sizeof lens / sizeof lens[0]; k++) {
    kn_scope_begin();
    int64_t c = lens[k];
    shape sh = {2, {6, c}};
    const int64_t tv[6] = {c - 1, 0, -100, c / 2, 0, c / 3};
    kn_tensor *x = input(&sh, KN_FLOAT32, 3 + k, true), *xe = input(&sh, KN_FLOAT32, 3 + k, true);
    kn_tensor *t = kn_from_ints(tv, 1, (const int64_t[]){6}), *w = class_weight(&sh, KN_FLOAT32);
    special_rows(kn_data(x), c, tv);
    special_rows(kn_data(xe), c, tv);
    char what[64];
    snprintf(what, sizeof what, "C %lld", (long long)c);
    kn_tensor *y = kn_call_t(f, x, t, w), *ye = ce_fn(xe, t, w);
    cr_assert_not_null(y, "%s: %s", what, kn_last_error());
    cr_expect(ind_close(y, ye, 1e-5, 1e-6, what), "%s: loss", what);
    const float *xd = kn_data(x), *yd = kn_data(kn_contiguous(y));
    for (int r = 0; r < 6; r++) {
      double want = ref_row_loss(xd + r * c, c, tv[r]), got = yd[r];
      bool ok = isnan(want) ? isnan(got) : fabs(got - want) <= 1e-5 + 1e-5 * fabs(want);
      cr_expect(ok, "%s row %d: compiled %.9g, double reference %.17g", what, r, got, want);
    }
    kn_generator *g = kn_generator_new(11);
    kn_tensor *go = kn_randn(1, (const int64_t[]){6}, g, KN_FLOAT32);
    kn_generator_free(g);
    cr_assert_eq(kn_backward(y, go), KN_OK, "%s: %s", what, kn_last_error());
    cr_assert_eq(kn_backward(ye, go), KN_OK, "%s: %s", what, kn_last_error());
    cr_expect(ind_close(kn_grad(x), kn_grad(xe), 1e-5, 1e-6, what), "%s: grad", what);
    kn_scope_end();
  }
  kn_compiled_free(f);
  /* the loss and the gradient's sum are picks; the class indices are read
  ** as the row loop's index, not loaded */
  char *src = kn_test_inductor_sources(cache);
  cr_expect_gt(kn_test_count_of(src, "one-hot: the element"), 1, "%s", src);
  cr_expect_gt(kn_test_count_of(src, "((int64_t)(j0)) =="), 0, "%s", src);
  free(src);
}

/* ---- errors ------------------------------------------------------------------------------------ */
/* A target outside [0, C) fails with eager's message, compiled or not
** (no read outside the row; the compiled call names the extern node that
** checks the targets); ignore_index is exempt. */
Test(inductor_nll, bad_target_is_eagers_error) {
  g_red = KN_REDUCTION_MEAN;
  g_weight = false;
  g_ignore = -100;
  kn_compiled *f = compile3(ce_fn, KN_DYNAMIC_FALSE);
  shape sh = {2, {4, 5}};
  const int64_t bad[][4] = {{1, 5, 0, 2}, {1, 0, -1, 2}, {7, 0, 0, 0}};
  const char *want[] = {"Target 5 is out of bounds.", "Target -1 is out of bounds.",
                        "Target 7 is out of bounds."};
  for (int k = 0; k < 3; k++) {
    kn_scope_begin();
    kn_tensor *x = input(&sh, KN_FLOAT32, 1, false), *w = class_weight(&sh, KN_FLOAT32);
    kn_tensor *t = kn_from_ints(bad[k], 1, (const int64_t[]){4});
    cr_expect_null(ce_fn(x, t, w));
    cr_expect_str_eq(kn_last_error(), want[k], "eager");
    cr_expect_null(kn_call_t(f, x, t, w));
    char full[128];
    snprintf(full, sizeof full, "while running graph node '_nll_loss_target': %s", want[k]);
    cr_expect_str_eq(kn_last_error(), full, "compiled");
    kn_scope_end();
  }
  kn_scope_begin();
  kn_tensor *x = input(&sh, KN_FLOAT32, 1, false), *w = class_weight(&sh, KN_FLOAT32);
  kn_tensor *t = kn_from_ints((const int64_t[]){1, -100, 0, 4}, 1, (const int64_t[]){4});
  cr_expect(ind_close(kn_call_t(f, x, t, w), ce_fn(x, t, w), 1e-5, 1e-6, "ignored"), "%s",
            kn_last_error());
  kn_scope_end();
  kn_compiled_free(f);
}

/* ---- composites and layouts ------------------------------------------------------------------ */
static kn_tensor *ce_smooth_fn(kn_tensor *x, kn_tensor *t, kn_tensor *w) {
  return kn_cross_entropy(x, t, g_weight ? w : NULL, g_red, g_ignore, 0.1);
}
static kn_tensor *ce_transposed_fn(kn_tensor *x, kn_tensor *t, kn_tensor *w) {
  return kn_cross_entropy(kn_t(kn_contiguous(kn_t(x))), t, g_weight ? w : NULL, g_red, g_ignore, 0.0);
}

/* Label smoothing (cross_entropy's blend of the nll and a smoothing term
** built from nll_loss_forward's outputs) and logits read through strides
** (a transposed copy) give eager's values too. */
Test(inductor_nll, label_smoothing_and_strided_logits) {
  for (size_t r = 0; r < sizeof reds / sizeof reds[0]; r++) {
    g_red = reds[r];
    training_case(ce_smooth_fn, &rows2d, KN_FLOAT64, &variants[3]);
    training_case(ce_transposed_fn, &rows2d, KN_FLOAT32, &variants[3]);
  }
}

/* At the C target's own flags (-O3 -march=native ... -fno-trapping-math,
** not the suite's -O0): the row's pick of the target (a where over the
** row, which gcc vectorises once it may compute both sides), the weights,
** ignore_index and label smoothing give eager's loss and gradient for each
** reduction, rows longer than a vector block. */
Test(inductor_nll, cross_entropy_at_the_targets_flags) {
  unsetenv("KILN_CFLAGS");
  const shape wide = {2, {9, 70}};
  g_red = KN_REDUCTION_MEAN;
  training_case(ce_fn, &wide, KN_FLOAT32, &variants[3]);
  /* The forward keeps x - max in its log-probabilities while the exps
  ** compute (the blocks' fused exp-and-sum call and the remainder's loop),
  ** read back by the pick (one element at the target) and the last pass;
  ** the backward keeps nothing: the nll gradient's sum is one element too,
  ** and the last pass computes the gradient's few compares again. The
  ** loss, the row weight and the gradient's sum are each one-hot picks
  ** (forward: 2, backward: 1). */
  char *src = kn_test_inductor_sources(cache);
  cr_expect_eq(kn_test_count_of(src, "expsum_max_f32((float *)0, out0 + o"), 1, "%s", src);
  cr_expect_eq(kn_test_count_of(src, "kept for a later pass"), 1, "%s", src);
  cr_expect_eq(kn_test_count_of(src, "kept by an earlier pass"), 2, "%s", src);
  cr_expect_eq(kn_test_count_of(src, "one-hot: the element"), 3, "%s", src);
  free(src);
  for (size_t r = 0; r < sizeof reds / sizeof reds[0]; r++) {
    g_red = reds[r];
    training_case(ce_fn, &wide, KN_FLOAT32, &variants[3]);
    training_case(ce_smooth_fn, &wide, KN_FLOAT32, &variants[1]);
  }
}
