/*
** test_factory.c: random generators (Philox known answers, determinism,
** distribution moments), ranges, eye, tensors from C arrays. Expected values
** of ranges come from torch 1.13.
*/
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "kiln/kiln.h"
#include "kiln/random.h"
#include "tensor/random.h"

Test(philox, random123_known_answers) {
  /* Known-answer vectors of Random123's philox4x32_10. */
  uint32_t out[4];
  kn__philox4x32((uint32_t[]){0, 0, 0, 0}, (uint32_t[]){0, 0}, out);
  cr_assert_eq(out[0], 0x6627e8d5u);
  cr_assert_eq(out[1], 0xe169c58du);
  cr_assert_eq(out[2], 0xbc57ac4cu);
  cr_assert_eq(out[3], 0x9b00dbd8u);
  kn__philox4x32((uint32_t[]){0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu},
                 (uint32_t[]){0xffffffffu, 0xffffffffu}, out);
  cr_assert_eq(out[0], 0x408f276du);
  cr_assert_eq(out[1], 0x41c83b0eu);
  cr_assert_eq(out[2], 0xa20bc7c6u);
  cr_assert_eq(out[3], 0x6d5451fdu);
}

static double mean_of(kn_tensor *t) {
  double s = 0;
  int64_t n = kn_numel(t);
  for (int64_t i = 0; i < n; i++) s += kn_get(t, (int64_t[]){i});
  return s / (double)n;
}

Test(random, same_seed_same_values_and_streams_advance) {
  kn_generator *g = kn_generator_new(42);
  kn_tensor *a = kn_rand(KN_SHAPE(1000), g, KN_FLOAT32);
  kn_tensor *b = kn_rand(KN_SHAPE(1000), g, KN_FLOAT32);
  cr_assert(memcmp(kn_data(a), kn_data(b), 4000) != 0, "stream advances");
  kn_generator_seed(g, 42);
  kn_tensor *c = kn_rand(KN_SHAPE(1000), g, KN_FLOAT32);
  cr_assert(memcmp(kn_data(a), kn_data(c), 4000) == 0, "same seed, same values");
  cr_assert_eq(kn_generator_offset(g), 1000);
  for (int i = 0; i < 1000; i++) {
    float v = ((float *)kn_data(a))[i];
    cr_assert(v >= 0.0f && v < 1.0f);
  }
  kn_release(a); kn_release(b); kn_release(c);
  kn_generator_free(g);
}

Test(random, moments_of_rand_and_randn) {
  kn_generator *g = kn_generator_new(7);
  kn_tensor *u = kn_rand(KN_SHAPE(200000), g, KN_FLOAT64);
  kn_tensor *z = kn_randn(KN_SHAPE(200000), g, KN_FLOAT64);
  /* 200k samples: standard errors ~0.0006 (uniform mean) and ~0.0022 */
  cr_assert(fabs(mean_of(u) - 0.5) < 0.004, "uniform mean %f", mean_of(u));
  double m = mean_of(z), v = 0;
  for (int64_t i = 0; i < 200000; i++) {
    double x = ((double *)kn_data(z))[i];
    v += (x - m) * (x - m);
  }
  v /= 200000;
  cr_assert(fabs(m) < 0.01, "normal mean %f", m);
  cr_assert(fabs(v - 1.0) < 0.02, "normal variance %f", v);
  kn_release(u); kn_release(z);
  kn_generator_free(g);
}

Test(random, randint_range_and_errors) {
  kn_generator *g = kn_generator_new(1);
  kn_tensor *r = kn_randint(-3, 4, KN_SHAPE(5000), g, KN_INT64);
  int seen[7] = {0};
  for (int i = 0; i < 5000; i++) {
    int64_t v = ((int64_t *)kn_data(r))[i];
    cr_assert(v >= -3 && v < 4);
    seen[v + 3]++;
  }
  for (int k = 0; k < 7; k++) cr_assert(seen[k] > 500, "value %d seen %d times", k - 3, seen[k]);
  cr_assert_null(kn_randint(5, 3, KN_SHAPE(2), g, KN_INT64));
  cr_assert_str_eq(kn_last_error(),
                   "random_ expects 'from' to be less than 'to', but got from=5 >= to=3");
  cr_assert_null(kn_rand(KN_SHAPE(2), g, KN_INT32));
  cr_assert_eq(kn_last_status(), KN_EDTYPE);
  kn_release(r);
  kn_generator_free(g);
  cr_assert_eq(kn_live_tensors(), 0);
}

Test(range, arange_matches_torch) {
  kn_tensor *a = kn_arange(kn_int(0), kn_int(10), kn_int(3));
  cr_assert_eq(kn_tensor_dtype(a), KN_INT64);
  int64_t ea[] = {0, 3, 6, 9};
  cr_assert_eq(kn_numel(a), 4);
  cr_assert(memcmp(kn_data(a), ea, sizeof ea) == 0);
  kn_tensor *b = kn_arange(kn_float(0.5), kn_float(2.0), kn_float(0.25));
  cr_assert_eq(kn_tensor_dtype(b), KN_FLOAT32);
  float eb[] = {0.5f, 0.75f, 1.0f, 1.25f, 1.5f, 1.75f};
  cr_assert_eq(kn_numel(b), 6);
  cr_assert(memcmp(kn_data(b), eb, sizeof eb) == 0);
  kn_tensor *c = kn_arange(kn_int(10), kn_int(0), kn_int(-3));
  int64_t ec[] = {10, 7, 4, 1};
  cr_assert(memcmp(kn_data(c), ec, sizeof ec) == 0);
  kn_tensor *d = kn_arange(kn_int(0), kn_int(1), kn_float(0.1));
  cr_assert_eq(kn_numel(d), 10);
  cr_assert_null(kn_arange(kn_int(0), kn_int(5), kn_int(0)));
  cr_assert_str_eq(kn_last_error(), "step must be nonzero");
  cr_assert_null(kn_arange(kn_int(0), kn_int(5), kn_int(-1)));
  cr_assert_str_eq(kn_last_error(), "upper bound and larger bound inconsistent with step sign");
  kn_release(a); kn_release(b); kn_release(c); kn_release(d);
}

Test(range, linspace_and_eye_match_torch) {
  kn_tensor *a = kn_linspace(-1, 1, 5, KN_FLOAT32);
  float ea[] = {-1.0f, -0.5f, 0.0f, 0.5f, 1.0f};
  cr_assert(memcmp(kn_data(a), ea, sizeof ea) == 0);
  kn_tensor *b = kn_linspace(0, 1, 7, KN_FLOAT32);
  /* torch.linspace(0, 1, 7) in float32, bit for bit */
  float eb[] = {0.0f, 0.1666666716337204f, 0.3333333432674408f, 0.5f,
                0.6666666269302368f, 0.8333333134651184f, 1.0f};
  cr_assert(memcmp(kn_data(b), eb, sizeof eb) == 0);
  kn_tensor *e = kn_eye(2, 3, KN_FLOAT32);
  float ee[] = {1, 0, 0, 0, 1, 0};
  cr_assert(memcmp(kn_data(e), ee, sizeof ee) == 0);
  kn_release(a); kn_release(b); kn_release(e);
}

Test(array, from_c_arrays_copies_data) {
  double d[] = {1.5, -2, 3};
  kn_tensor *t = kn_from_doubles(d, KN_SHAPE(3));
  d[0] = 99;
  cr_assert_eq(kn_get(t, (int64_t[]){0}), 1.5);
  cr_assert_eq(kn_get(t, (int64_t[]){2}), 3.0);
  kn_tensor *s = kn_scalar_tensor(kn_float(2.5), KN_FLOAT64);
  cr_assert_eq(kn_ndim(s), 0);
  double v;
  cr_assert_eq(kn_item_double(s, &v), KN_OK);
  cr_assert_eq(v, 2.5);
  cr_assert_eq(kn_item_double(t, &v), KN_EINVAL);
  cr_assert_str_eq(kn_last_error(), "a Tensor with 3 elements cannot be converted to Scalar");
  kn_release(t); kn_release(s);
}
