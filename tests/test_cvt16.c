/*
** test_cvt16.c: the vectorised float32 <-> bfloat16/float16 conversions
** (ops/cvt16.h). Each ISA table the CPU has gives the bits of the scalar
** conversions (a second implementation) over special values, rounding ties
** and random bit patterns, at every length around the vector width; a few
** literal roundings pin the scalar side too; _to_copy uses them.
*/
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "kiln/kiln.h"
#include "ops/cvt16.h"
#include "tensor/tensor.h"

static uint32_t rng = 12345;
static uint32_t next(void) {
  rng = rng * 1664525u + 1013904223u;
  return rng;
}

static float from_bits(uint32_t u) {
  float f;
  memcpy(&f, &u, 4);
  return f;
}

#define N 300
static float xs[N];
static uint16_t hs[N];

static void fill(void) {
  static const uint32_t special[] = {
      0x00000000, 0x80000000, 0x00000001, 0x007fffff, 0x00800000, 0x7f7fffff, 0x7f800000,
      0xff800000, 0x7fc00000, 0x7f800001, 0xffc00123, 0x3f808000, 0x3f818000, 0x3f80ffff,
      0x477fe000, 0x477ff000, 0x477fefff, 0x33800000, 0x33000000, 0x38800000, 0x387fc000};
  int ns = (int)(sizeof special / sizeof special[0]);
  for (int i = 0; i < N; i++) {
    xs[i] = from_bits(i < ns ? special[i] : next());
    hs[i] = (uint16_t)next();
  }
}

static void same_f32(const float *a, const float *b, int n, const char *what) {
  for (int i = 0; i < n; i++) {
    if (isnan(a[i]) && isnan(b[i])) continue;
    cr_assert_eq(memcmp(&a[i], &b[i], 4), 0, "%s: element %d: %a vs %a", what, i, (double)a[i],
                 (double)b[i]);
  }
}

static bool is_nan16(uint16_t h, bool bf) {
  return bf ? (h & 0x7fff) > 0x7f80 : (h & 0x7fff) > 0x7c00;
}

static void same_16(const uint16_t *a, const uint16_t *b, int n, bool bf, const char *what) {
  for (int i = 0; i < n; i++) {
    if (is_nan16(a[i], bf) && is_nan16(b[i], bf)) continue;
    cr_assert_eq(a[i], b[i], "%s: element %d (%a): 0x%04x vs 0x%04x", what, i, (double)xs[i],
                 a[i], b[i]);
  }
}

static void check_table(const kn__cvt16 *t) {
  const kn__cvt16 *s = &kn__cvt16_scalar;
  float fa[N], fb[N];
  uint16_t ha[N], hb[N];
  for (int n = 0; n <= 40; n++) {
    for (int off = 0; off + n <= N; off += 37) {
      t->f32_to_bf16(ha, xs + off, n);
      s->f32_to_bf16(hb, xs + off, n);
      same_16(ha, hb, n, true, t->name);
      t->f32_to_f16(ha, xs + off, n);
      s->f32_to_f16(hb, xs + off, n);
      same_16(ha, hb, n, false, t->name);
      t->bf16_to_f32(fa, hs + off, n);
      s->bf16_to_f32(fb, hs + off, n);
      same_f32(fa, fb, n, t->name);
      t->f16_to_f32(fa, hs + off, n);
      s->f16_to_f32(fb, hs + off, n);
      same_f32(fa, fb, n, t->name);
    }
  }
}

Test(cvt16, every_isa_table_matches_the_scalar_conversions) {
  fill();
  int tables = 0;
  for (int isa = KN__ISA_SCALAR; isa < KN__ISA_COUNT; isa++) {
    const kn__cvt16 *t = kn__cvt16_table((kn__isa)isa);
    if (!t) continue;
    check_table(t);
    tables++;
  }
  cr_assert_geq(tables, 1);
  cr_log_info("conversion table in use: %s", kn__cvt16_get()->name);
}

Test(cvt16, literal_roundings) {
  const kn__cvt16 *t = kn__cvt16_get();
  float x[16] = {1.0f, from_bits(0x3f808000), from_bits(0x3f818000), from_bits(0x3f80ffff),
                 65504.0f, 65520.0f, 1e-8f, -2.5f};
  uint16_t b[16], h[16];
  t->f32_to_bf16(b, x, 16);
  t->f32_to_f16(h, x, 16);
  cr_assert_eq(b[0], 0x3f80);
  cr_assert_eq(b[1], 0x3f80); /* tie, even stays */
  cr_assert_eq(b[2], 0x3f82); /* tie, odd rounds up */
  cr_assert_eq(b[3], 0x3f81);
  cr_assert_eq(b[7], 0xc020);
  cr_assert_eq(h[0], 0x3c00);
  cr_assert_eq(h[4], 0x7bff); /* float16 max */
  cr_assert_eq(h[5], 0x7c00); /* rounds to infinity */
  cr_assert_eq(h[6], 0x0000); /* below half the smallest subnormal */
  cr_assert_eq(h[7], 0xc100);
}

/* _to_copy of a contiguous tensor goes through the table: its bits are the
** per-element conversions of tensor/dtype.c. */
Test(cvt16, to_copy_gives_the_scalar_conversions) {
  kn_scope_begin();
  kn_tensor *a = kn_randn(2, (int64_t[]){33, 65}, NULL, KN_FLOAT32);
  const float *x = kn_data(a);
  kn_dtype dts[2] = {KN_BFLOAT16, KN_FLOAT16};
  for (int k = 0; k < 2; k++) {
    kn_tensor *h = kn_to_copy(a, dts[k]);
    kn_tensor *back = kn_to_copy(h, KN_FLOAT32);
    const uint16_t *hp = kn_data(h);
    const float *bp = kn_data(back);
    for (int i = 0; i < 33 * 65; i++) {
      uint16_t want = k ? kn__float_to_half(x[i]) : kn__float_to_bf16(x[i]);
      cr_assert_eq(hp[i], want, "%s element %d", kn_dtype_name(dts[k]), i);
      float wf = k ? kn__half_to_float(want) : kn__bf16_to_float(want);
      cr_assert_eq(memcmp(&bp[i], &wf, 4), 0, "%s back element %d", kn_dtype_name(dts[k]), i);
    }
  }
  kn_scope_end();
}
