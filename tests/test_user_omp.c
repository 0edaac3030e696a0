/*
** test_user_omp.c: kiln called from the user's own OpenMP threads.
**
** A program that runs `#pragma omp parallel` and calls kiln in each thread
** (each on its own tensors) must get each call's whole result. Kernels that
** share their loop with an orphaned `omp for` (ops/threads.h,
** KN__PAR_REGION) bound it to the user's team instead and computed a share
** of each thread's own result: softmax, cumsum and the layer_norm backward
** called from four threads returned wrong values. Each op here runs on the
** main thread first (its reference, checked independently where a plain
** loop can: softmax rows sum to 1, cumsum's last column is the row's sum in
** double), then in four user threads at once, each on its own input, and
** each thread's result must equal the reference bit for bit.
*/
#include <criterion/criterion.h>
#include <math.h>
#include <omp.h>
#include <string.h>

#include "kiln/compile.h"
#include "kiln/kiln.h"

#define NT 4

typedef struct job {
  kn_tensor *x;   /* [rows, cols] float32, requires grad */
  kn_tensor *go;  /* output gradient, x's shape */
  kn_tensor *out[8];
} job;

static kn_tensor *w_;

/* The ops of one job, results to j->out (kept past the scope). */
static void run_ops(job *j) {
  kn_scope_begin();
  const int64_t d = kn_size(j->x, 1);
  kn_tensor *idx = NULL, *gx = NULL, *ly = kn_layer_norm(j->x, 1, &d, w_, NULL, 1e-5);
  kn_tensor *r[8] = {kn_softmax(j->x, 1), kn_log_softmax(j->x, 1), kn_cumsum(j->x, 1),
                     kn_topk(j->x, 3, 1, true, true, &idx), ly, NULL, NULL, NULL};
  if (kn_autograd_grad(&ly, 1, &j->x, 1, &j->go, true, false, false, &gx) != KN_OK) gx = NULL;
  r[5] = gx;
  const double eps = 1e-6;
  kn_tensor *ry = kn_rms_norm(j->x, 1, &d, w_, &eps), *rg = NULL;
  if (kn_autograd_grad(&ry, 1, &j->x, 1, &j->go, false, false, false, &rg) != KN_OK) rg = NULL;
  r[6] = rg;
  kn_tensor *q = kn_reshape(j->x, KN_SHAPE(1, 2, kn_size(j->x, 0) / 2, d));
  r[7] = kn_scaled_dot_product_attention(q, q, q, NULL, 0.0, true, NULL, NULL);
  for (int k = 0; k < 8; k++) j->out[k] = r[k] ? kn_retain(r[k]) : NULL;
  kn_scope_end();
}

static void release_job(job *j) {
  for (int k = 0; k < 8; k++) kn_release(j->out[k]);
  kn_release(j->x);
  kn_release(j->go);
}

static bool same_bits(const kn_tensor *a, const kn_tensor *b) {
  return a && b && kn_numel(a) == kn_numel(b) &&
         !memcmp(kn_data(a), kn_data(b), (size_t)kn_numel(a) * sizeof(float));
}

static void check_reference(const job *j) {
  int64_t rows = kn_size(j->x, 0), cols = kn_size(j->x, 1);
  const float *x = kn_data(j->x), *sm = kn_data(j->out[0]), *cs = kn_data(j->out[2]);
  for (int64_t r = 0; r < rows; r++) {
    double s = 0, c = 0;
    for (int64_t i = 0; i < cols; i++) s += sm[r * cols + i], c += x[r * cols + i];
    cr_assert(fabs(s - 1) < 1e-5, "softmax row %lld sums to %g", (long long)r, s);
    cr_assert(fabs(cs[r * cols + cols - 1] - c) < 1e-4 * (1 + fabs(c)),
              "cumsum row %lld ends at %g, its sum is %g", (long long)r,
              cs[r * cols + cols - 1], c);
  }
}

static job make_job(kn_generator *g, int64_t rows, int64_t cols) {
  job j = {kn_randn(KN_SHAPE(rows, cols), g, KN_FLOAT32),
           kn_randn(KN_SHAPE(rows, cols), g, KN_FLOAT32), {NULL}};
  cr_assert(j.x && j.go && kn_set_requires_grad(j.x, true) == KN_OK);
  return j;
}

static void eager_from_user_threads(int64_t rows, int64_t cols) {
  kn_generator *g = kn_generator_new(7);
  w_ = kn_randn(KN_SHAPE(cols), g, KN_FLOAT32);
  job ref[NT], got[NT];
  for (int t = 0; t < NT; t++) {
    ref[t] = make_job(g, rows, cols);
    run_ops(&ref[t]);
    check_reference(&ref[t]);
    got[t] = (job){kn_retain(ref[t].x), kn_retain(ref[t].go), {NULL}};
  }
  int threads = 0;
#pragma omp parallel num_threads(NT) reduction(+ : threads)
  {
    run_ops(&got[omp_get_thread_num()]);
    threads = 1;
  }
  cr_assert_eq(threads, NT, "the test needs %d user threads, OpenMP gave %d", NT, threads);
  const char *names[8] = {"softmax", "log_softmax", "cumsum", "topk", "layer_norm",
                          "layer_norm backward", "rms_norm backward", "attention"};
  for (int t = 0; t < NT; t++)
    for (int k = 0; k < 8; k++)
      cr_expect(same_bits(got[t].out[k], ref[t].out[k]), "%s [%lld, %lld] in user thread %d",
                names[k], (long long)rows, (long long)cols, t);
  for (int t = 0; t < NT; t++) release_job(&ref[t]), release_job(&got[t]);
  kn_release(w_);
  kn_generator_free(g);
}

/* Small inputs: one grain each (no region of kiln's own outside). */
Test(user_omp, small_eager_kernels_give_each_user_thread_its_whole_result) {
  eager_from_user_threads(8, 64);
}

/* Inputs that open a region of every thread when called alone. */
Test(user_omp, large_eager_kernels_give_each_user_thread_its_whole_result) {
  eager_from_user_threads(64, 4096);
}

static kn_tensor *cw_;
static kn_tensor *compiled_fn(kn_tensor *x) {
  const int64_t d = kn_size(x, 1);
  return kn_softmax(kn_layer_norm(kn_add(x, x), 1, &d, cw_, NULL, 1e-5), 1);
}

/* A compiled function called from the user's threads: each gets eager's
** result for its own input. */
Test(user_omp, compiled_function_in_user_threads) {
  kn_generator *g = kn_generator_new(9);
  cw_ = kn_randn(KN_SHAPE(300), g, KN_FLOAT32);
  kn_compile_options o = {.backend = "inductor"};
  kn_compiled *f = kn_compile_tensor_fn((void (*)(void))compiled_fn, 1, "user_omp", __FILE__,
                                        __LINE__, &o);
  cr_assert(f, "%s", kn_last_error());
  kn_tensor *x[NT], *want[NT], *got[NT] = {NULL};
  for (int t = 0; t < NT; t++) {
    x[t] = kn_randn(KN_SHAPE(256, 300), g, KN_FLOAT32); /* two grains */
    kn_scope_begin();
    want[t] = kn_retain(compiled_fn(x[t]));
    cr_assert(kn_call_t(f, x[t]), "%s", kn_last_error()); /* compiled before the threads */
    kn_scope_end();
  }
#pragma omp parallel num_threads(NT)
  {
    int t = omp_get_thread_num();
    kn_scope_begin();
    kn_tensor *y = kn_call_t(f, x[t]);
    got[t] = y ? kn_retain(y) : NULL;
    kn_scope_end();
  }
  for (int t = 0; t < NT; t++) {
    cr_assert(got[t], "user thread %d: %s", t, kn_last_error());
    const float *a = kn_data(got[t]), *b = kn_data(want[t]);
    double worst = 0;
    for (int64_t i = 0; i < kn_numel(got[t]); i++) worst = fmax(worst, fabs(a[i] - b[i]));
    cr_expect(worst < 1e-6, "user thread %d: compiled differs from eager by %g", t, worst);
    kn_release(got[t]), kn_release(want[t]), kn_release(x[t]);
  }
  kn_compiled_free(f);
  kn_release(cw_);
  kn_generator_free(g);
}
