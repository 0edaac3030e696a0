/*
** tests/test_inductor_half.c: inductor's generated code for bfloat16 and
** float16 tensors: elements are loaded as their bits and widened to float,
** every node computes in float32 and its value is rounded to its dtype, and
** stores take the bits: the same as the eager kernels, which compute each op
** in float32 and round its result once. So compiled results are compared
** with eager's bit for bit:
**   - pointwise chains (add, mul, scalar mul, exp, relu, where on a
**     comparison, casts between float32 and the 16-bit type) in bfloat16
**     and float16, on ordinary values and on the special ones (zeros of
**     both signs, subnormals, the largest finite values, infinities, NaN),
**     generated with no extern call, on the "c" and "c_scalar"
**     targets;
**   - the conversions alone: float32 -> 16-bit and back over every 16-bit
**     pattern and over float32 patterns at and beside the rounding ties
**     (every upper half with low bits 0, ties for float16 and bfloat16, and
**     their neighbours), compared with eager's casts (tensor/dtype.c and the
**     vectorised cvt16 tables give the same bits: ops/cvt16.h);
**   - a bfloat16 node inside a reduction group (a vector-math block).
*/
#include "inductor_util.h"
#include "ops/cvt16.h"
#include "support/files.h"

static char cache[64];

static void setup(void) {
  ind_cache_dir(cache, sizeof cache);
  kn_manual_seed(11);
}
static void teardown(void) {
  unsetenv("KILN_INDUCTOR_TARGET");
  if (!getenv("KN_TEST_KEEP_CACHE")) ind_rm(cache);
}

TestSuite(inductor_half, .init = setup, .fini = teardown, .timeout = 300);

/* Is the 16-bit (es 2) or float32 element p a NaN? */
static bool is_nan_at(const unsigned char *p, size_t es, kn_dtype dt) {
  uint32_t x = 0;
  memcpy(&x, p, es);
  if (es == 4) return (x & 0x7fffffffu) > 0x7f800000u;
  return dt == KN_FLOAT16 ? (x & 0x7fff) > 0x7c00 : (x & 0x7fff) > 0x7f80;
}

/* Equal bytes, same dtype and sizes. NaN payloads included where eager
** converts with the x86 instructions (F16C, AVX-512); its scalar table
** (tensor/dtype.c, CPUs without them) makes float16 NaNs another quiet NaN:
** there two NaNs are equal. */
static bool same_bits(kn_tensor *got, kn_tensor *want, const char *what) {
  if (!got || !want) {
    cr_log_error("%s: missing result (%s)", what, kn_last_error());
    return false;
  }
  if (kn_tensor_dtype(got) != kn_tensor_dtype(want) || kn_numel(got) != kn_numel(want)) {
    cr_log_error("%s: dtype or size differs", what);
    return false;
  }
  kn_tensor *g = kn_contiguous(got), *w = kn_contiguous(want);
  size_t es = kn_tensor_dtype(g) == KN_FLOAT32 ? 4 : 2;
  const unsigned char *a = kn_data(g), *b = kn_data(w);
  bool any_nan = !strcmp(kn__cvt16_get()->name, "scalar");
  for (int64_t i = 0; i < kn_numel(g); i++)
    if (memcmp(a + (size_t)i * es, b + (size_t)i * es, es) &&
        !(any_nan && is_nan_at(a + (size_t)i * es, es, kn_tensor_dtype(g)) &&
          is_nan_at(b + (size_t)i * es, es, kn_tensor_dtype(g)))) {
      uint32_t x = 0, y = 0;
      memcpy(&x, a + (size_t)i * es, es);
      memcpy(&y, b + (size_t)i * es, es);
      cr_log_error("%s: element %lld: compiled 0x%x, eager 0x%x", what, (long long)i, x, y);
      return false;
    }
  return true;
}

/* ---- chains --------------------------------------------------------------------- */

/* A 16-bit chain: (a + b) * a, exp of a quarter of it, where(a > 0, that,
** relu(b)); the result in the inputs' dtype. */
static kn_tensor *chain(kn_tensor *a, kn_tensor *b) {
  kn_tensor *x = kn_mul(kn_add(a, b), a);
  kn_tensor *y = kn_exp(kn_mul_scalar(x, kn_float(0.25)));
  return kn_where(kn_gt_scalar(a, kn_float(0)), y, kn_relu(b));
}

/* Casts both ways: float32 a cast down, added to the 16-bit b, cast back up
** and multiplied by a in float32. */
static kn_tensor *casts(kn_tensor *a, kn_tensor *b) {
  kn_tensor *h = kn_add(kn_to(a, kn_tensor_dtype(b)), b);
  return kn_mul(kn_to(h, KN_FLOAT32), a);
}

/* Inputs of dtype dt: n random values times scale, then the special values. */
static kn_tensor *values(kn_dtype dt, double scale, int64_t n) {
  static const float special[] = {0.0f, -0.0f, 1e-7f, -3e-8f, 6e-5f, 65504.0f, -65504.0f,
                                  3.0e38f, INFINITY, -INFINITY, NAN, 1.0f, -1.0f, 0.5f};
  const int64_t ns = (int64_t)(sizeof special / sizeof special[0]);
  kn_tensor *r = kn_contiguous(kn_mul_scalar(kn_randn(KN_SHAPE(n), NULL, KN_FLOAT32), kn_float(scale)));
  float *p = kn_data(r);
  for (int64_t i = 0; i < ns && i < n; i++) p[n - 1 - i] = special[i];
  return dt == KN_FLOAT32 ? r : kn_to(r, dt);
}

static void check_chain(kn_dtype dt, const char *target, double scale) {
  if (target) setenv("KILN_INDUCTOR_TARGET", target, 1);
  kn_compile_options o = {.backend = "inductor"};
  kn_compiled *f = KN_COMPILE(chain, &o), *g = KN_COMPILE(casts, &o);
  cr_assert(f && g, "%s", kn_last_error());
  kn_scope_begin();
  kn_tensor *a = values(dt, scale, 1000), *b = values(dt, scale * 0.5, 1000);
  kn_tensor *a32 = values(KN_FLOAT32, scale, 1000);
  cr_expect(same_bits(kn_call_t(f, a, b), chain(a, b), "chain"));
  cr_expect(same_bits(kn_call_t(g, a32, b), casts(a32, b), "casts"));
  /* strided (transposed) inputs read through their strides */
  kn_tensor *at = kn_transpose(kn_reshape(a, KN_SHAPE(40, 25)), 0, 1);
  kn_tensor *bt = kn_transpose(kn_reshape(b, KN_SHAPE(40, 25)), 0, 1);
  cr_expect(same_bits(kn_call_t(f, at, bt), chain(at, bt), "chain, transposed"));
  kn_scope_end();
  kn_compiled_free(f);
  kn_compiled_free(g);
  unsetenv("KILN_INDUCTOR_TARGET");
  char *src = kn_test_inductor_sources(cache);
  cr_assert_not_null(src);
  cr_expect_eq(kn_test_count_of(src, "rt->ext("), 0, "extern calls in\n%s", src);
  cr_expect_gt(kn_test_count_of(src, dt == KN_BFLOAT16 ? "kn_ld_bf16(in" : "kn_ld_f16(in"), 0,
               "16-bit loads in\n%s", src);
  cr_expect_gt(kn_test_count_of(src, dt == KN_BFLOAT16 ? "= kn_st_bf16(v" : "= kn_st_f16(v"), 0,
               "16-bit stores in\n%s", src);
  free(src);
}

Test(inductor_half, bf16_chain_equals_eager_bitwise_c) { check_chain(KN_BFLOAT16, "c", 2.0); }
Test(inductor_half, bf16_chain_equals_eager_bitwise_c_scalar) {
  check_chain(KN_BFLOAT16, "c_scalar", 2.0);
}
/* scale 200: products overflow float16 (inf), exp underflows to subnormals */
Test(inductor_half, fp16_chain_equals_eager_bitwise_c) { check_chain(KN_FLOAT16, "c", 200.0); }
Test(inductor_half, fp16_chain_equals_eager_bitwise_c_scalar) {
  check_chain(KN_FLOAT16, "c_scalar", 200.0);
}

/* ---- conversions ------------------------------------------------------------------ */

static kn_tensor *down_bf16(kn_tensor *x) { return kn_to(x, KN_BFLOAT16); }
static kn_tensor *down_half(kn_tensor *x) { return kn_to(x, KN_FLOAT16); }
static kn_tensor *up(kn_tensor *h) { return kn_to(h, KN_FLOAT32); }

/* float32 patterns: every upper half with low halves 0, 0x1000 (a float16
** tie), 0x8000 (a bfloat16 tie) and their neighbours. */
static kn_tensor *float_patterns(void) {
  static const uint32_t lows[] = {0x0000, 0x0fff, 0x1000, 0x1001, 0x3000, 0x7fff, 0x8000, 0x8001};
  const int64_t nl = (int64_t)(sizeof lows / sizeof lows[0]), n = 65536 * nl;
  kn_tensor *t = kn_empty(KN_SHAPE(n), KN_FLOAT32);
  uint32_t *p = kn_data(t);
  for (int64_t hi = 0; hi < 65536; hi++)
    for (int64_t l = 0; l < nl; l++) p[hi * nl + l] = (uint32_t)hi << 16 | lows[l];
  return t;
}

Test(inductor_half, conversions_equal_eager_casts_on_every_pattern) {
  kn_compile_options o = {.backend = "inductor"};
  kn_compiled *fb = KN_COMPILE(down_bf16, &o), *fh = KN_COMPILE(down_half, &o), *fu = KN_COMPILE(up, &o);
  cr_assert(fb && fh && fu, "%s", kn_last_error());
  kn_scope_begin();
  kn_tensor *x = float_patterns();
  cr_expect(same_bits(kn_call_t(fb, x), kn_to(x, KN_BFLOAT16), "float32 -> bfloat16"));
  cr_expect(same_bits(kn_call_t(fh, x), kn_to(x, KN_FLOAT16), "float32 -> float16"));
  kn_tensor *bits = kn_empty(KN_SHAPE(65536), KN_BFLOAT16);
  uint16_t *b = kn_data(bits);
  for (int i = 0; i < 65536; i++) b[i] = (uint16_t)i;
  cr_expect(same_bits(kn_call_t(fu, bits), kn_to(bits, KN_FLOAT32), "bfloat16 -> float32"));
  kn_tensor *hb = kn_empty(KN_SHAPE(65536), KN_FLOAT16);
  memcpy(kn_data(hb), b, 65536 * 2);
  cr_expect(same_bits(kn_call_t(fu, hb), kn_to(hb, KN_FLOAT32), "float16 -> float32"));
  kn_scope_end();
  kn_compiled_free(fb);
  kn_compiled_free(fh);
  kn_compiled_free(fu);
  char *src = kn_test_inductor_sources(cache);
  cr_expect_eq(kn_test_count_of(src, "rt->ext("), 0, "extern calls in\n%s", src);
  free(src);
}

/* ---- reduction groups ----------------------------------------------------------------- */

/* A bfloat16 node computed in a reduction group: h = exp(a / 2) in
** bfloat16, normalised by its float32 row sums. */
static kn_tensor *normalise(kn_tensor *a) {
  kn_tensor *h = kn_to(kn_exp(kn_mul_scalar(a, kn_float(0.5))), KN_FLOAT32);
  return kn_div(h, kn_sum_dims(h, (int64_t[]){1}, 1, true));
}

Test(inductor_half, bf16_member_of_a_reduction_group_equals_eager_bitwise) {
  kn_compile_options o = {.backend = "inductor"};
  kn_compiled *f = KN_COMPILE(normalise, &o);
  cr_assert(f, "%s", kn_last_error());
  kn_scope_begin();
  kn_tensor *a = kn_to(kn_randn(KN_SHAPE(37, 300), NULL, KN_FLOAT32), KN_BFLOAT16);
  cr_expect(same_bits(kn_call_t(f, a), normalise(a), "normalise"));
  kn_scope_end();
  kn_compiled_free(f);
  char *src = kn_test_inductor_sources(cache);
  cr_expect_eq(kn_test_count_of(src, "rt->ext("), 0, "extern calls in\n%s", src);
  cr_expect_gt(kn_test_count_of(src, "kn_rnd_bf16(("), 0, "rounded values in\n%s", src);
  free(src);
}
