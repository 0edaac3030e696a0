/*
** test_cuda_eager.c: eager ops on CUDA tensors run as single-op graphs
** cached per op, dtype and rank (inductor/cuda_eager.c), without a GPU: the
** fake driver runs the generated kernels on the host. One program serves
** every size of a contiguous pattern (sizes of 2 or more are symbols; equal
** sizes share one, 0 and 1 stay constants); strided inputs take programs of
** their sizes. Every value is compared with the same op on the CPU,
** and the programs are counted in a private code cache.
*/
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "inductor_util.h"
#include "kiln/cuda.h"
#include "kiln/kiln.h"

static char cache[64];

/* The fake driver, and a reference to dynamo/backends.c, whose constructor
** registers the CUDA eager handler (a static link keeps only the objects a
** program references). */
static void setup(void) {
  kn_compile_counter cc = {0};
  kn_compile_counter_clear(&cc);
  setenv("KILN_CUDA_DRIVER", KN_FAKECUDA_PATH, 1);
  setenv("KILN_CUDA_CUBLAS", KN_FAKECUDA_PATH, 1);
  setenv("KILN_CUDA_NVRTC", KN_FAKENVRTC_PATH, 1);
  ind_cache_dir(cache, sizeof cache);
}

static void teardown(void) { ind_rm(cache); }

TestSuite(cuda_eager, .init = setup, .fini = teardown, .timeout = 300);

static kn_tensor *dev(kn_tensor *t, kn_device d) {
  kn_tensor *o = NULL;
  cr_assert_eq(kn_to_device(t, d, &o), KN_OK, "%s", kn_last_error());
  return o;
}

static kn_tensor *rnd(int nd, const int64_t *sizes, kn_dtype dt) {
  return kn_randn(nd, sizes, NULL, dt);
}

static void expect_close(kn_tensor *got_dev, kn_tensor *want, const char *what) {
  cr_assert_not_null(got_dev, "%s: %s", what, kn_last_error());
  cr_expect_eq(kn_tensor_device(got_dev), KN_CUDA, "%s", what);
  cr_expect(ind_close(dev(got_dev, KN_CPU), want, 1e-6, 1e-6, what), "%s", what);
}

/* Compiled programs in the private cache so far. */
static int programs(void) { return ind_count(cache, ".so"); }

/* One add program for every 2-d float32 shape whose two sizes differ. */
Test(cuda_eager, one_program_serves_every_size_of_a_pattern) {
  static const int64_t shapes[][2] = {{3, 5}, {7, 9}, {130, 2}, {2, 1000}};
  for (int i = 0; i < 4; i++) {
    kn_scope_begin();
    kn_tensor *a = rnd(2, shapes[i], KN_FLOAT32), *b = rnd(2, shapes[i], KN_FLOAT32);
    char what[64];
    snprintf(what, sizeof what, "add [%lld, %lld]", (long long)shapes[i][0],
             (long long)shapes[i][1]);
    expect_close(kn_add(dev(a, KN_CUDA), dev(b, KN_CUDA)), kn_add(a, b), what);
    kn_scope_end();
  }
  cr_expect_eq(programs(), 1, "four shapes, one program: %d", programs());
  /* a square matrix is another pattern (both dims one symbol), float64 another dtype */
  kn_scope_begin();
  kn_tensor *a = rnd(2, (int64_t[]){6, 6}, KN_FLOAT32), *b = rnd(2, (int64_t[]){6, 6}, KN_FLOAT32);
  expect_close(kn_add(dev(a, KN_CUDA), dev(b, KN_CUDA)), kn_add(a, b), "add [6, 6]");
  kn_tensor *c = rnd(2, (int64_t[]){3, 4}, KN_FLOAT64), *d = rnd(2, (int64_t[]){3, 4}, KN_FLOAT64);
  expect_close(kn_add(dev(c, KN_CUDA), dev(d, KN_CUDA)), kn_add(c, d), "add float64");
  kn_scope_end();
  cr_expect_eq(programs(), 3, "square and float64 patterns: %d programs", programs());
}

/* Broadcasting: which sizes are equal and which are 1 is the key; a size
** that happens to equal another takes the program where they are one
** symbol, and every result matches the CPU. */
Test(cuda_eager, broadcasts_by_pattern) {
  static const int64_t cases[][4] = {
      /* a's two sizes, b's two sizes */
      {4, 5, 1, 5}, {9, 3, 1, 3}, {4, 5, 4, 1}, {8, 8, 1, 8}, {8, 8, 8, 1},
      {5, 1, 1, 7}, {6, 1, 1, 6}, {1, 1, 3, 4}, {0, 5, 1, 5}, {2, 3, 2, 3},
  };
  for (int i = 0; i < 10; i++) {
    kn_scope_begin();
    kn_tensor *a = rnd(2, &cases[i][0], KN_FLOAT32), *b = rnd(2, &cases[i][2], KN_FLOAT32);
    char what[80];
    snprintf(what, sizeof what, "mul [%lld, %lld] x [%lld, %lld]", (long long)cases[i][0],
             (long long)cases[i][1], (long long)cases[i][2], (long long)cases[i][3]);
    expect_close(kn_mul(dev(a, KN_CUDA), dev(b, KN_CUDA)), kn_mul(a, b), what);
    kn_scope_end();
  }
}

/* Strided inputs keep their sizes and strides in the key: a transposed
** operand, an operand at an offset; then the contiguous program again. */
Test(cuda_eager, strided_inputs_take_programs_of_their_sizes) {
  kn_scope_begin();
  kn_tensor *a = rnd(2, (int64_t[]){5, 3}, KN_FLOAT32), *b = rnd(2, (int64_t[]){3, 5}, KN_FLOAT32);
  kn_tensor *da = dev(a, KN_CUDA), *db = dev(b, KN_CUDA);
  expect_close(kn_sub(kn_t(da), db), kn_sub(kn_t(a), b), "transposed operand");
  kn_tensor *c = rnd(2, (int64_t[]){4, 7}, KN_FLOAT32), *d = rnd(2, (int64_t[]){7, 4}, KN_FLOAT32);
  expect_close(kn_sub(kn_t(dev(c, KN_CUDA)), dev(d, KN_CUDA)), kn_sub(kn_t(c), d),
               "transposed operand, other sizes");
  kn_tensor *e = rnd(1, (int64_t[]){20}, KN_FLOAT32);
  kn_tensor *de = dev(e, KN_CUDA);
  expect_close(kn_sub(kn_narrow(de, 0, 3, 15), kn_narrow(de, 0, 0, 15)),
               kn_sub(kn_narrow(e, 0, 3, 15), kn_narrow(e, 0, 0, 15)), "operands at offsets");
  expect_close(kn_sub(db, kn_t(da)), kn_sub(b, kn_t(a)), "contiguous first operand");
  kn_scope_end();
}

/* Reductions and row ops over symbolic sizes, several shapes each: rows
** short and long, one row and more rows than a split serves (the sums of
** 40000 and 66000 elements split by their run-time length). (Few output
** elements: the fake driver runs a block's threads as host threads.) */
Test(cuda_eager, reductions_over_symbolic_sizes) {
  static const int64_t shapes[][2] = {{3, 5}, {8, 300}, {1, 40000}, {2, 33000}, {70, 2}};
  for (int i = 0; i < 5; i++) {
    kn_scope_begin();
    kn_tensor *x = rnd(2, shapes[i], KN_FLOAT32), *dx = dev(x, KN_CUDA);

    char what[64];
    snprintf(what, sizeof what, "[%lld, %lld]", (long long)shapes[i][0], (long long)shapes[i][1]);
    expect_close(kn_sum_dims(dx, (int64_t[]){1}, 1, false), kn_sum_dims(x, (int64_t[]){1}, 1, false),
                 what);
    expect_close(kn_sum(dx), kn_sum(x), what);
    expect_close(kn_mean(dx), kn_mean(x), what);
    expect_close(kn_amax(dx, (int64_t[]){1}, 1, true), kn_amax(x, (int64_t[]){1}, 1, true), what);
    expect_close(kn_softmax(dx, 1), kn_softmax(x, 1), what);
    kn_scope_end();
  }
}
