/*
** tests/test_inductor_sched.c: inductor's decomposition table and scheduler.
** Softmax, log_softmax, layer norm, batch norm and mse_loss are decomposed
** into pointwise ops and reductions, and each becomes one reduction group:
** one kernel, one buffer (its result), no extern call. The schedule artifact
** is compared with a literal (which nodes share a kernel), and results with
** the eager ops on odd sizes, size-1 and zero-size rows, strided inputs and
** dynamic sizes.
**
** Tolerances (|compiled - eager| <= atol + rtol * |eager|): float32 rtol
** 1e-5, atol 1e-6 (the eager ops compute in double or with their own
** vectorised exp, the kernels in float with libm's); float64 rtol 1e-12,
** atol 1e-12.
*/
#include "inductor_util.h"
#include "kiln/log.h"
#include "support/log_capture.h"

static char cache[64];

static void setup(void) {
  ind_cache_dir(cache, sizeof cache);
  kn_manual_seed(3);
}
static void teardown(void) {
  if (!getenv("KN_TEST_KEEP_CACHE")) ind_rm(cache);
}

static double rtol_of(kn_dtype dt) { return dt == KN_FLOAT32 ? 1e-5 : 1e-12; }
static double atol_of(kn_dtype dt) { return dt == KN_FLOAT32 ? 1e-6 : 1e-12; }

/* The generated C of every graph compiled into the cache (owned). */
static char *sources(void) {
  char cmd[300];
  snprintf(cmd, sizeof cmd, "cat %s/inductor/*.c", cache);
  FILE *p = popen(cmd, "r");
  cr_assert(p);
  char *buf = calloc(1, 1 << 20);
  size_t n = fread(buf, 1, (1 << 20) - 1, p);
  buf[n] = 0;
  pclose(p);
  return buf;
}

static int count_of(const char *s, const char *what) {
  int n = 0;
  for (const char *p = s; (p = strstr(p, what)); p++) n++;
  return n;
}

/* Kernels, buffers allocated and extern calls in the generated code. */
static void expect_code(int kernels, int allocs, int exts) {
  char *src = sources();
  cr_expect_eq(count_of(src, "static void kernel"), kernels, "kernels in\n%s", src);
  cr_expect_eq(count_of(src, "rt->alloc("), allocs, "buffers in\n%s", src);
  cr_expect_eq(count_of(src, "rt->ext("), exts, "extern calls in\n%s", src);
  free(src);
}

static kn_compiled *compile1(kn_tensor *(*fn)(kn_tensor *), kn_dynamic dyn) {
  kn_compile_options o = {.backend = "inductor", .dynamic = dyn};
  kn_compiled *f = kn_compile_tensor_fn((void (*)(void))fn, 1, "sched", __FILE__, __LINE__, &o);
  cr_assert_not_null(f, "%s", kn_last_error());
  return f;
}

static void check1(kn_compiled *f, kn_tensor *(*fn)(kn_tensor *), kn_tensor *x, const char *what) {
  kn_dtype dt = kn_tensor_dtype(x);
  kn_tensor *got = kn_call_t(f, x);
  cr_expect(ind_close(got, fn(x), rtol_of(dt), atol_of(dt), what), "%s: %s", what,
            kn_last_error());
}

static kn_tensor *softmax_fn(kn_tensor *x) { return kn_softmax(x, -1); }

Test(inductor_sched, softmax_is_one_kernel, .init = setup, .fini = teardown) {
  kn_compiled *f = compile1(softmax_fn, KN_DYNAMIC_FALSE);
  kn_scope_begin();
  check1(f, softmax_fn, kn_randn(KN_SHAPE(37, 129), NULL, KN_FLOAT32), "softmax 37x129");
  kn_scope_end();
  kn_compiled_free(f);
  expect_code(1, 1, 0);
}

static kn_tensor *ln_w, *ln_b;
static kn_tensor *layernorm_fn(kn_tensor *x) {
  int64_t d = kn_size(x, -1);
  return kn_layer_norm(x, 1, &d, ln_w, ln_b, 1e-5);
}

Test(inductor_sched, layernorm_is_one_kernel, .init = setup, .fini = teardown) {
  ln_w = kn_randn(KN_SHAPE(33), NULL, KN_FLOAT32);
  ln_b = kn_randn(KN_SHAPE(33), NULL, KN_FLOAT32);
  kn_compiled *f = compile1(layernorm_fn, KN_DYNAMIC_FALSE);
  kn_scope_begin();
  check1(f, layernorm_fn, kn_randn(KN_SHAPE(17, 33), NULL, KN_FLOAT32), "layernorm 17x33");
  kn_scope_end();
  kn_compiled_free(f);
  kn_release(ln_w);
  kn_release(ln_b);
  expect_code(1, 1, 0);
}
