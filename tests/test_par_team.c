/*
** test_par_team.c: which kernels enter OpenMP and with how many threads.
**
** This program defines GOMP_parallel (libgomp's entry for every `omp
** parallel` region) and passes each call on to libgomp's, recording the
** team size asked for; the executable exports it (ENABLE_EXPORTS), so the
** generated code's shared objects call it too. Small eager and compiled
** kernels must not call it at all (ops/threads.h, kn__par_team); those of
** two grains and more ask for every thread set, whatever their team
** (kn__par_threads: a smaller region makes libgomp end threads of its
** pool). It defines pthread_create too, counting the threads libgomp
** starts: kernels of different team sizes in turn must start none. Results are
** compared across thread counts: bit for bit for elementwise and row-wise
** kernels and for the whole-tensor sum (its blocks are added in order),
** within 1e-12 relative for layer norm's weight gradient (per-thread sums).
** Nothing is timed.
*/
#include <criterion/criterion.h>
#include <dlfcn.h>
#include <math.h>
#include <omp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

#include "kiln/kiln.h"
#include "ops/threads.h"

typedef void (*gomp_parallel_fn)(void (*)(void *), void *, unsigned, unsigned);

static _Atomic int ncalls;
static _Atomic unsigned last_team;

void GOMP_parallel(void (*fn)(void *), void *data, unsigned num_threads, unsigned flags);
void GOMP_parallel(void (*fn)(void *), void *data, unsigned num_threads, unsigned flags) {
  static gomp_parallel_fn real;
  if (!real) *(void **)&real = dlsym(RTLD_NEXT, "GOMP_parallel");
  atomic_fetch_add(&ncalls, 1);
  atomic_store(&last_team, num_threads);
  real(fn, data, num_threads, flags);
}

typedef int (*pthread_create_fn)(pthread_t *, const pthread_attr_t *, void *(*)(void *), void *);
static _Atomic int nthreads_started;

int pthread_create(pthread_t *t, const pthread_attr_t *a, void *(*fn)(void *), void *arg) {
  static pthread_create_fn real;
  if (!real) *(void **)&real = dlsym(RTLD_NEXT, "pthread_create");
  atomic_fetch_add(&nthreads_started, 1);
  return real(t, a, fn, arg);
}

static void reset(void) {
  atomic_store(&ncalls, 0);
  atomic_store(&last_team, 0);
}

/* A tensor of n float32 values in (-2, 2), the same on every call. */
static kn_tensor *values(int64_t rows, int64_t cols) {
  kn_tensor *t = kn_empty(KN_SHAPE(rows, cols), KN_FLOAT32);
  float *p = kn_data(t);
  for (int64_t i = 0; i < rows * cols; i++) p[i] = (float)sin((double)i * 0.37) * 2.0f;
  return t;
}

static kn_tensor *add_fn(kn_tensor *a, kn_tensor *b) { return kn_add(kn_tanh(a), b); }
static kn_tensor *softmax_fn(kn_tensor *a) { return kn_softmax(kn_mul(a, a), 1); }

static bool same_bits(kn_tensor *a, kn_tensor *b) {
  return a && b && kn_numel(a) == kn_numel(b) &&
         memcmp(kn_data(a), kn_data(b), (size_t)kn_numel(a) * kn_dtype_size(kn_tensor_dtype(a))) == 0;
}

/* The eager ops of a CNN or transformer step on small tensors. */
static void small_eager_ops(void) {
  kn_tensor *x = values(8, 64), *w = kn_ones(KN_SHAPE(64), KN_FLOAT32);
  kn_tensor *idx = kn_zeros(KN_SHAPE(5), KN_INT64);
  kn_release(kn_add(x, x));
  kn_release(kn_tanh(x));
  kn_release(kn_sum(x));
  kn_release(kn_sum_dims(x, (int64_t[]){1}, 1, false));
  kn_release(kn_amax(x, (int64_t[]){0}, 1, false));
  kn_release(kn_softmax(x, 1));
  kn_release(kn_cumsum(x, 1));
  kn_release(kn_layer_norm(x, 1, (int64_t[]){64}, w, NULL, 1e-5));
  kn_release(kn_embedding(idx, x, -1, false));
  kn_release(kn_rand(KN_SHAPE(4096), NULL, KN_FLOAT32));
  kn_scope_begin(); /* LSTM cell, batch_norm and indexing results are the scope's */
  kn_tensor *gates = values(2, 64), *cx = values(2, 16);
  kn_fused_lstm_cell(gates, gates, cx, NULL, NULL, NULL, NULL);
  kn_batch_norm(values(4, 8), NULL, NULL, NULL, NULL, true, 0.1, 1e-5);
  kn_index_select(x, 0, idx);
  kn_gather(x, 1, kn_zeros(KN_SHAPE(8, 3), KN_INT64));
  kn_scope_end();
  kn_release(kn_logsumexp(x, (int64_t[]){1}, 1, false));
  kn_release(x);
  kn_release(w);
  kn_release(idx);
}

Test(par_team, small_eager_kernels_never_enter_openmp) {
  cr_assert_eq(kn_set_num_threads(2), KN_OK);
  small_eager_ops(); /* first calls: set-up (vector-math tables) apart */
  reset();
  small_eager_ops();
  cr_expect_eq(atomic_load(&ncalls), 0, "%d OpenMP regions for small ops", atomic_load(&ncalls));
}

/* One region asking for `team` threads, or none (team 0). */
static void expect_team(kn_tensor *(*op)(kn_tensor *), kn_tensor *x, unsigned team,
                        const char *what) {
  reset();
  kn_tensor *y = op(x);
  cr_assert(y, "%s: %s", what, kn_last_error());
  kn_release(y);
  cr_expect_eq(atomic_load(&ncalls), team ? 1 : 0, "%s: %d regions", what, atomic_load(&ncalls));
  if (team) cr_expect_eq(atomic_load(&last_team), team, "%s: team %u", what, atomic_load(&last_team));
}

static kn_tensor *sum_rows(kn_tensor *x) { return kn_sum_dims(x, (int64_t[]){1}, 1, false); }
static kn_tensor *sum_cols(kn_tensor *x) { return kn_sum_dims(x, (int64_t[]){0}, 1, false); }
static kn_tensor *softmax_rows(kn_tensor *x) { return kn_softmax(x, 1); }
static kn_tensor *add_self(kn_tensor *x) { return kn_add(x, x); }

/* Which kernels enter OpenMP: from two grains (one for every grain of
** work is the team, ops/threads.h), in a region of every thread set. */
Test(par_team, eager_kernels_of_two_grains_and_more_open_a_region_of_every_thread) {
  cr_assert_eq(kn_set_num_threads(4), KN_OK);
  kn_tensor *x = kn_ones(KN_SHAPE(1), KN_FLOAT32);
  kn_release(kn_tanh(x));
  kn_release(x);
  const int64_t g = KN__GRAIN, gm = KN__GRAIN_MEM;
  struct { int64_t rows, cols; kn_tensor *(*op)(kn_tensor *); unsigned team; const char *what; } c[] = {
      {1, g + g / 2, kn_tanh, 0, "tanh of 1.5 grains"},
      {1, 3 * g, kn_tanh, 4, "tanh of 3 grains"},
      {1, 40 * g, kn_tanh, 4, "tanh of 40 grains (4 threads set)"},
      {1, 3 * gm, add_self, 4, "add of 3 memory grains"},
      {1, gm, add_self, 0, "add of 1 memory grain"},
      {3, 4 * g, sum_rows, 4, "sum of 3 rows of 4 grains (one thread a row)"},
      {64, g / 16, sum_rows, 4, "sum of 64 rows, 4 grains"},
      {16, g / 16, softmax_rows, 0, "softmax of half a grain"},
      {512, g / 64, softmax_rows, 4, "softmax of 8 grains"},
      {2048, 256, sum_cols, 4, "bias-gradient sum of 16 grains, 256 columns (chunks of 64)"},
      {4096, 96, sum_cols, 4, "sum over rows of 96 columns (chunks of 64 and 32)"},
  };
  for (size_t i = 0; i < sizeof c / sizeof *c; i++) {
    x = values(c[i].rows, c[i].cols);
    expect_team(c[i].op, x, c[i].team, c[i].what);
    kn_release(x);
  }
}

/* Each op at 1 and at 2 threads, on sizes that split over 2. */
Test(par_team, eager_results_do_not_depend_on_the_thread_count) {
  kn_tensor *x = values(256, 4096), *w = kn_ones(KN_SHAPE(4096), KN_FLOAT32);
  kn_tensor *r[2][5];
  for (int k = 0; k < 2; k++) {
    cr_assert_eq(kn_set_num_threads(k + 1), KN_OK);
    r[k][0] = kn_tanh(x);
    r[k][1] = kn_add(x, x);
    r[k][2] = kn_sum(x);
    r[k][3] = kn_softmax(x, 1);
    r[k][4] = kn_layer_norm(x, 1, (int64_t[]){4096}, w, NULL, 1e-5);
  }
  const char *names[] = {"tanh", "add", "sum", "softmax", "layer_norm"};
  for (int i = 0; i < 5; i++) cr_expect(same_bits(r[0][i], r[1][i]), "%s differs", names[i]);
  for (int k = 0; k < 2; k++)
    for (int i = 0; i < 5; i++) kn_release(r[k][i]);
  kn_release(x);
  kn_release(w);
}

/* One long row (a contiguous tensor: the iterator's one row, cut into
** chunks the threads take as they finish; ops/iter.c) of a length that no
** chunk size divides, in place on copies of x: at 2 threads bit for bit
** what 1 thread gives, and every element done (tanh within 2e-6 of libm's,
** x + x exactly: an element left out would still hold x). */
Test(par_team, a_long_row_in_chunks_gives_the_same_bits) {
  const int64_t n = ((int64_t)1 << 20) + 37;
  kn_tensor *x = values(1, n), *r[2][2];
  for (int k = 0; k < 2; k++) {
    cr_assert_eq(kn_set_num_threads(k + 1), KN_OK);
    r[k][0] = kn_clone(x), r[k][1] = kn_clone(x);
    cr_assert(r[k][0] && r[k][1]);
    cr_assert_eq(kn_tanh_(r[k][0]), KN_OK, "%s", kn_last_error());
    cr_assert_eq(kn_add_(r[k][1], x), KN_OK, "%s", kn_last_error());
  }
  const float *xv = kn_data(x), *t = kn_data(r[1][0]), *a = kn_data(r[1][1]);
  for (int64_t i = 0; i < n; i++)
    cr_assert(fabsf(t[i] - tanhf(xv[i])) <= 2e-6f && a[i] == xv[i] + xv[i],
              "element %lld: tanh %a add %a of %a", (long long)i, t[i], a[i], xv[i]);
  cr_expect(same_bits(r[0][0], r[1][0]), "tanh differs");
  cr_expect(same_bits(r[0][1], r[1][1]), "add differs");
  for (int k = 0; k < 2; k++) kn_release(r[k][0]), kn_release(r[k][1]);
  kn_release(x);
}

/* The weight gradient of layer norm sums per-thread rows: close, not equal. */
Test(par_team, layer_norm_weight_gradient_within_tolerance) {
  kn_tensor *gw[2];
  for (int k = 0; k < 2; k++) {
    cr_assert_eq(kn_set_num_threads(k + 1), KN_OK);
    kn_scope_begin();
    kn_tensor *x = values(256, 1024), *w = kn_ones(KN_SHAPE(1024), KN_FLOAT64);
    kn_tensor *x64 = kn_to(x, KN_FLOAT64);
    kn_set_requires_grad(w, true);
    kn_tensor *y = kn_sum(kn_mul(kn_layer_norm(x64, 1, (int64_t[]){1024}, w, NULL, 1e-5), x64));
    cr_assert_eq(kn_backward(y, NULL), KN_OK, "%s", kn_last_error());
    gw[k] = kn_retain(kn_grad(w));
    kn_scope_end();
  }
  const double *a = kn_data(gw[0]), *b = kn_data(gw[1]);
  for (int i = 0; i < 1024; i++)
    cr_assert(fabs(a[i] - b[i]) <= 1e-12 * fabs(a[i]) + 1e-12, "gw[%d]: %.17g vs %.17g", i, a[i], b[i]);
  kn_release(gw[0]);
  kn_release(gw[1]);
}

/* Compiled: a small kernel runs on the calling thread, one of two
** KN_GRAIN (the generated code's, 2^15) and more in a region of every
** thread set; the results are the same at 1 and 3 threads. */
Test(par_team, generated_kernels_enter_openmp_only_when_large) {
  kn_compile_options o = {.backend = "inductor", .dynamic = KN_DYNAMIC_FALSE};
  kn_compiled *f = KN_COMPILE(add_fn, &o), *s = KN_COMPILE(softmax_fn, &o);
  cr_assert_eq(kn_set_num_threads(8), KN_OK);
  kn_tensor *a = values(8, 100), *b = values(8, 100);
  kn_release(kn_call_t(f, a, b)); /* compiles */
  kn_release(kn_call_t(s, a));
  reset();
  kn_tensor *y = kn_call_t(f, a, b), *z = kn_call_t(s, a);
  cr_assert(y && z, "%s", kn_last_error());
  cr_expect_eq(atomic_load(&ncalls), 0, "%d regions for 800 elements", atomic_load(&ncalls));
  kn_release(y), kn_release(z), kn_release(a), kn_release(b);
  a = values(5, KN__GRAIN), b = values(5, KN__GRAIN);
  kn_tensor *r[2][2];
  int threads[2] = {1, 3};
  for (int k = 0; k < 2; k++) {
    cr_assert_eq(kn_set_num_threads(threads[k]), KN_OK);
    reset();
    r[k][0] = kn_call_t(f, a, b);
    cr_expect_eq(atomic_load(&ncalls), k ? 1 : 0, "pointwise at %d threads", threads[k]);
    if (k) cr_expect_eq(atomic_load(&last_team), 3u, "team %u", atomic_load(&last_team));
    reset();
    r[k][1] = kn_call_t(s, a);
    cr_expect_eq(atomic_load(&ncalls), k ? 1 : 0, "softmax at %d threads", threads[k]);
    if (k) cr_expect_eq(atomic_load(&last_team), 3u, "team %u", atomic_load(&last_team));
  }
  cr_expect(same_bits(r[0][0], r[1][0]), "compiled pointwise differs across thread counts");
  cr_expect(same_bits(r[0][1], r[1][1]), "compiled softmax differs across thread counts");
  for (int k = 0; k < 2; k++) kn_release(r[k][0]), kn_release(r[k][1]);
  kn_release(a), kn_release(b);
  kn_compiled_free(f);
  kn_compiled_free(s);
}

/* Compiled kernels run their rows or elements in parts, eight a thread,
** taken as threads finish (codegen.c, run_parts): over 37 rows of 4096 (no
** part count divides them) at 2 threads every row and element is computed
** once and right: softmax bit for bit eager's (the same row kernel), tanh(a)
** + b within 2e-6 of eager's. */
Test(par_team, generated_kernels_in_parts_cover_every_row_once) {
  kn_compile_options o = {.backend = "inductor", .dynamic = KN_DYNAMIC_FALSE};
  kn_compiled *f = KN_COMPILE(add_fn, &o), *s = KN_COMPILE(softmax_fn, &o);
  cr_assert_eq(kn_set_num_threads(2), KN_OK);
  kn_scope_begin();
  kn_tensor *a = values(37, 4096), *b = kn_mul_scalar(values(37, 4096), kn_float(0.5));
  kn_tensor *y = kn_call_t(f, a, b), *z = kn_call_t(s, a);
  cr_assert(y && z, "%s", kn_last_error());
  kn_tensor *ye = add_fn(a, b), *ze = softmax_fn(a);
  cr_expect(same_bits(z, ze), "compiled softmax in parts differs from eager");
  const float *yv = kn_data(y), *yev = kn_data(ye);
  for (int64_t i = 0; i < 37 * 4096; i++)
    cr_assert(fabsf(yv[i] - yev[i]) <= 2e-6f * (1 + fabsf(yev[i])), "element %lld: %a vs %a",
              (long long)i, yv[i], yev[i]);
  kn_scope_end();
  kn_compiled_free(f);
  kn_compiled_free(s);
}

static kn_tensor *plain_add(kn_tensor *a, kn_tensor *b) { return kn_add(a, b); }

/* A generated loop without vector math moves data: its grain is
** KN_GRAIN_MEM (2^17, ops/threads.h's KN__GRAIN_MEM), 4 times the other:
** 3 x 2^15 elements stay on the calling thread, 3 x 2^17 do not. */
Test(par_team, generated_data_moving_kernels_take_the_larger_grain) {
  kn_compile_options o = {.backend = "inductor", .dynamic = KN_DYNAMIC_FALSE};
  kn_compiled *f = KN_COMPILE(plain_add, &o);
  cr_assert_eq(kn_set_num_threads(8), KN_OK);
  struct { int64_t rows, cols; unsigned team; } c[] = {
      {3, KN__GRAIN, 0}, {3, KN__GRAIN_MEM, 8}, {40, KN__GRAIN_MEM, 8}};
  for (size_t i = 0; i < sizeof c / sizeof *c; i++) {
    kn_tensor *a = values(c[i].rows, c[i].cols);
    kn_release(kn_call_t(f, a, a)); /* compiles (each size once: static) */
    reset();
    kn_tensor *y = kn_call_t(f, a, a);
    cr_assert(y, "%s", kn_last_error());
    cr_expect_eq(atomic_load(&ncalls), c[i].team ? 1 : 0, "%lld elements: %d regions",
                 (long long)(c[i].rows * c[i].cols), atomic_load(&ncalls));
    if (c[i].team) cr_expect_eq(atomic_load(&last_team), c[i].team, "team %u", atomic_load(&last_team));
    cr_expect_eq(((float *)kn_data(y))[7], 2 * ((float *)kn_data(a))[7]);
    kn_release(y);
    kn_release(a);
  }
  kn_compiled_free(f);
}

static kn_value cnn_fn(const kn_value *args, int nargs, void *ud) {
  (void)nargs, (void)ud;
  return kn_vtensor(kn_nn_forward(args[0].u.m, args[1].u.t));
}

/* The digits CNN (examples/digits.c) on one 8x8 image, compiled, without
** gradients: its convolutions and GEMM (oneDNN) are under a grain of
** multiply-adds, so nothing of it enters OpenMP at 2 threads; on a batch
** of 64 32x32 images the first convolution does, with the threads set. */
Test(par_team, batch_one_cnn_inference_never_enters_openmp) {
  kn_generator *g = kn_generator_new(0);
  kn_conv2d_options same = {.padding_same = true};
  kn_module *m = kn_nn_sequential(
      8, (kn_module *[]){kn_nn_conv2d(1, 16, 3, 3, &same, g), kn_nn_relu(),
                         kn_nn_maxpool2d(2, 0, 0), kn_nn_conv2d(16, 32, 3, 3, &same, g),
                         kn_nn_relu(), kn_nn_maxpool2d(2, 0, 0), kn_nn_flatten(1, -1),
                         kn_nn_linear(32 * 2 * 2, 10, true, g)});
  kn_compiled *f = kn_compile_fn(cnn_fn, NULL, 2, "cnn_fn", __FILE__, __LINE__, NULL);
  kn_tensor *x = kn_rand(KN_SHAPE(1, 1, 8, 8), g, KN_FLOAT32);
  bool prev = kn_no_grad_begin();
  cr_assert_eq(kn_set_num_threads(2), KN_OK);
  kn_value args[2] = {kn_vmodule(m), kn_vtensor(x)}, out[2];
  cr_assert_eq(kn_call(f, args, 2, &out[0]), KN_OK, "%s", kn_last_error()); /* compiles */
  reset();
  cr_assert_eq(kn_call(f, args, 2, &out[1]), KN_OK, "%s", kn_last_error());
  cr_expect_eq(atomic_load(&ncalls), 0, "%d OpenMP regions", atomic_load(&ncalls));
  cr_expect(same_bits(out[0].u.t, out[1].u.t));
  kn_value_release(out[0]), kn_value_release(out[1]);
  kn_tensor *big = kn_rand(KN_SHAPE(64, 1, 32, 32), g, KN_FLOAT32);
  kn_module *conv = kn_nn_conv2d(1, 16, 3, 3, &same, g);
  reset();
  kn_tensor *y = kn_nn_forward(conv, big);
  cr_assert(y, "%s", kn_last_error());
  cr_expect_geq(atomic_load(&ncalls), 1, "a 9.4M multiply-add convolution ran on one thread");
  cr_expect_eq(atomic_load(&last_team), 2u, "team %u", atomic_load(&last_team));
  kn_no_grad_end(prev);
  kn_release(y), kn_release(big), kn_release(x);
  kn_module_free(conv);
  kn_module_free(m);
  kn_compiled_free(f);
  kn_generator_free(g);
}

/* The digits CNN's training step at batch 64 (bench_digits): its second
** convolution, [64, 16, 4, 4] -> 32 channels (4.7M multiply-adds, under two
** KN__GRAIN_CONV), runs forward, input and weight gradients on the calling
** thread at 2 threads; four times its batch (18.9M) takes a team of 2. */
static int conv_regions(int64_t n, unsigned *team) {
  kn_scope_begin();
  kn_generator *g = kn_generator_new(1);
  kn_tensor *x = kn_randn(KN_SHAPE(n, 16, 4, 4), g, KN_FLOAT32);
  kn_tensor *w = kn_randn(KN_SHAPE(32, 16, 3, 3), g, KN_FLOAT32);
  kn_set_requires_grad(x, true), kn_set_requires_grad(w, true);
  kn_tensor *go = kn_randn(KN_SHAPE(n, 32, 4, 4), g, KN_FLOAT32), *ins[2] = {x, w}, *gr[2];
  const int64_t one[2] = {1, 1};
  reset();
  kn_tensor *y = kn_conv2d(x, w, NULL, one, one, one, 1);
  cr_assert(y, "%s", kn_last_error());
  cr_assert_eq(kn_autograd_grad(&y, 1, ins, 2, &go, false, false, false, gr), KN_OK, "%s",
               kn_last_error());
  int calls = atomic_load(&ncalls);
  *team = atomic_load(&last_team);
  kn_generator_free(g);
  kn_scope_end();
  return calls;
}

Test(par_team, convolutions_take_one_thread_per_conv_grain) {
  cr_assert_eq(kn_set_num_threads(2), KN_OK);
  unsigned team = 0;
  int small = conv_regions(64, &team);
  cr_expect_eq(small, 0, "a 4.7M multiply-add convolution entered OpenMP %d times", small);
  int big = conv_regions(256, &team);
  cr_expect_geq(big, 1, "an 18.9M multiply-add convolution ran on one thread");
  cr_expect_eq(team, 2u, "team %u", team);
}

/* bmm of 8 products of 128x128x64 (one KN__GRAIN_MAC each, so each
** product's own team is one thread): one region over the batch at 2
** threads, each product one library call on its thread; the same bits as
** at 1 thread, where they run one after another. */
Test(par_team, bmm_of_small_products_splits_the_batch_over_the_threads) {
  kn_generator *g = kn_generator_new(3);
  kn_tensor *a = kn_randn(KN_SHAPE(8, 128, 64), g, KN_FLOAT32);
  kn_tensor *b = kn_randn(KN_SHAPE(8, 128, 64), g, KN_FLOAT32), *bt = kn_transpose(b, 1, 2);
  kn_tensor *r[2];
  for (int k = 0; k < 2; k++) {
    cr_assert_eq(kn_set_num_threads(k + 1), KN_OK);
    kn_release(kn_bmm(a, bt)); /* set-up apart */
    reset();
    r[k] = kn_bmm(a, bt);
    cr_assert(r[k], "%s", kn_last_error());
    cr_expect_eq(atomic_load(&ncalls), k, "%d regions at %d threads", atomic_load(&ncalls), k + 1);
    if (k) cr_expect_eq(atomic_load(&last_team), 2u, "team %u", atomic_load(&last_team));
  }
  cr_expect(same_bits(r[0], r[1]), "bmm differs between 1 and 2 threads");
  const float *p = kn_data(r[1]), *pa = kn_data(a), *pb = kn_data(b);
  for (int i = 0; i < 8; i++) { /* one element of each product, in double */
    double want = 0;
    for (int k = 0; k < 64; k++)
      want += (double)pa[(i * 128 + 5) * 64 + k] * pb[(i * 128 + 7) * 64 + k];
    double got = p[(i * 128 + 5) * 128 + 7];
    cr_expect(fabs(got - want) <= 1e-4 * (1 + fabs(want)), "product %d: %g vs %g", i, got, want);
  }
  kn_release(r[0]), kn_release(r[1]), kn_release(a), kn_release(b), kn_release(bt);
  kn_generator_free(g);
}

/* Kernels whose teams differ, in turn, at 4 threads (2 on the test
** machine: libgomp runs more threads than CPUs as well): tanh of 40
** grains (a team of 4), of 2 grains (2), an add of 3 memory grains (3), a
** softmax of 8 grains, a layer_norm of 16, a compiled add of 3 memory
** grains (3).
** Every region asks for the 4 threads set, and after the first round
** libgomp starts no thread: a region smaller than the one before would
** end its surplus threads and the next larger one start them again. */
Test(par_team, kernels_of_different_teams_in_turn_start_no_thread) {
  cr_assert_eq(kn_set_num_threads(4), KN_OK);
  const int64_t g = KN__GRAIN;
  kn_tensor *big = values(1, 40 * g), *two = values(1, 2 * g), *mem = values(1, 3 * KN__GRAIN_MEM);
  kn_tensor *rows = values(512, g / 64), *ln = values(512, g / 32);
  kn_tensor *w = kn_ones(KN_SHAPE(g / 32), KN_FLOAT32);
  kn_compile_options o = {.backend = "inductor", .dynamic = KN_DYNAMIC_FALSE};
  kn_compiled *f = KN_COMPILE(plain_add, &o);
  int started = 0;
  for (int round = 0; round < 6; round++) {
    if (round == 1) started = atomic_load(&nthreads_started);
    reset();
    kn_tensor *r[6] = {kn_tanh(big), kn_tanh(two), kn_add(mem, mem), kn_softmax(rows, 1),
                       kn_layer_norm(ln, 1, (int64_t[]){g / 32}, w, NULL, 1e-5),
                       kn_call_t(f, mem, mem)};
    for (int i = 0; i < 6; i++) cr_assert(r[i], "kernel %d: %s", i, kn_last_error());
    cr_expect_eq(atomic_load(&ncalls), 6, "round %d: %d regions", round, atomic_load(&ncalls));
    cr_expect_eq(atomic_load(&last_team), 4u, "round %d: the last region asked for %u", round,
                 atomic_load(&last_team));
    for (int i = 0; i < 6; i++) kn_release(r[i]);
  }
  cr_expect_eq(atomic_load(&nthreads_started) - started, 0,
               "libgomp started %d threads in 5 rounds of kernels of teams 4, 2, 3, 4, 4, 3",
               atomic_load(&nthreads_started) - started);
  kn_compiled_free(f);
  kn_release(big), kn_release(two), kn_release(mem);
  kn_release(rows), kn_release(ln), kn_release(w);
}

/* The calling thread's wait at a region's close (kn__par_join): only while
** a thread has not joined, every other thread has started its part, and
** for no longer than its own part took. */
Test(par_team, join_waits_only_for_started_threads_and_for_its_own_part_at_most) {
  cr_expect(kn__par_wait_rule(2, 1, 0, 90000, 0));      /* the other runs: wait */
  cr_expect(kn__par_wait_rule(2, 1, 0, 90000, 90000));  /* up to its part */
  cr_expect(!kn__par_wait_rule(2, 1, 0, 90000, 90001)); /* then sleep at the barrier */
  cr_expect(!kn__par_wait_rule(2, 0, 0, 90000, 0));     /* not started (a busy machine) */
  cr_expect(!kn__par_wait_rule(2, 1, 1, 90000, 0));     /* all joined */
  cr_expect(kn__par_wait_rule(4, 3, 2, 1000, 10));
  cr_expect(!kn__par_wait_rule(4, 2, 2, 1000, 10));
  cr_expect(!kn__par_wait_rule(1, 0, 0, 1000, 0));      /* alone */
}

/* In a region of 2 threads the other thread counts itself in at its start
** and at its end, whatever the order; thread 0 leaves kn__par_join with
** the other's part done or returns to libgomp's barrier: either way, after
** the region every element is written once. */
Test(par_team, a_region_counts_its_threads_in_and_writes_every_element_once) {
  kn_set_num_threads(2);
  kn__join j = {0, 0, 0};
  int hits[4096] = {0}, nt = 0;
#pragma omp parallel num_threads(2)
  {
    kn__par_enter(&j);
#pragma omp single
    nt = omp_get_num_threads();
#pragma omp for schedule(static) nowait
    for (int i = 0; i < 4096; i++) hits[i]++;
    kn__par_join(&j);
  }
  cr_assert_eq(atomic_load(&j.started), nt - 1);
  cr_assert_eq(atomic_load(&j.arrived), nt - 1);
  for (int i = 0; i < 4096; i++) cr_assert_eq(hits[i], 1, "element %d written %d times", i, hits[i]);
}
