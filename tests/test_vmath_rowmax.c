/*
** test_vmath_rowmax.c: the row maximum of every vector-math table this CPU
** runs (kn__vm_rowmax_f32, ops/vmath.h), against a plain loop: the largest
** element with NaNs skipped (-inf when there is none), and the NaN flag set
** exactly when the row holds a NaN (left as it was otherwise). Zeros of
** both signs compare equal (which one the maximum is, is unspecified).
** Lengths 0..70 at every offset mod 16, long unaligned rows, rows of NaN
** only, -inf only, zeros of both signs, +inf and FLT_MAX, the NaN at the
** first, the last and a middle position.
*/
#include <criterion/criterion.h>
#include <float.h>
#include <math.h>
#include <string.h>

#include "ops/vmath.h"

#define NMAX 5000

static float plain_max(const float *x, int64_t n, int *nan) {
  float m = -INFINITY;
  for (int64_t i = 0; i < n; i++) {
    if (x[i] != x[i]) *nan = 1;
    else if (x[i] > m) m = x[i];
  }
  return m;
}

static void fill(float *x, int64_t n, uint32_t s) {
  for (int64_t i = 0; i < n; i++) {
    s = s * 1664525u + 1013904223u;
    x[i] = ((float)(s >> 8) / 16777216.0f - 0.5f) * 1e4f;
  }
}

/* Every table on x[0..n): the same maximum (as a value) and flag. */
static void check(const float *x, int64_t n, const char *what) {
  int want_nan = 0;
  float want = plain_max(x, n, &want_nan);
  for (int isa = 0; isa < KN__ISA_COUNT; isa++) {
    const kn__vmath *t = kn__vmath_table((kn__isa)isa);
    if (!t) continue;
    int nan = 0, kept = 7;
    float m = t->rowmax_f32(x, n, &nan);
    cr_expect(m == want || (m == 0 && want == 0), "%s %s n %lld: max %a, want %a", t->name, what,
              (long long)n, m, want);
    cr_expect_eq(nan, want_nan, "%s %s n %lld: NaN flag %d, want %d", t->name, what,
                 (long long)n, nan, want_nan);
    (void)t->rowmax_f32(x, n, &kept); /* a set flag is never cleared */
    cr_expect(kept == 7 || (want_nan && kept == 1), "%s %s n %lld: flag %d", t->name, what,
              (long long)n, kept);
  }
}

Test(vmath_rowmax, every_table_short_rows_at_every_offset) {
  static float buf[NMAX + 16];
  fill(buf, NMAX + 16, 99);
  for (int64_t n = 0; n <= 70; n++)
    for (int off = 0; off < 16; off++) check(buf + off, n, "random");
}

Test(vmath_rowmax, every_table_long_rows_unaligned) {
  static float buf[NMAX + 16];
  fill(buf, NMAX + 16, 7);
  const int64_t lens[] = {127, 128, 129, 1000, 1023, 1024, 1025, 4099, NMAX};
  for (size_t j = 0; j < sizeof lens / sizeof lens[0]; j++) check(buf + j % 5, lens[j], "long");
}

Test(vmath_rowmax, nan_anywhere_and_special_rows) {
  static float x[NMAX];
  const int64_t lens[] = {1, 15, 16, 17, 63, 64, 65, 1024, 1031};
  for (size_t j = 0; j < sizeof lens / sizeof lens[0]; j++) {
    int64_t n = lens[j];
    const int64_t at[] = {0, n / 2, n - 1};
    for (int a = 0; a < 3; a++) {
      fill(x, n, (uint32_t)(j * 3 + a));
      x[at[a]] = NAN;
      check(x, n, "one NaN");
    }
    for (int64_t i = 0; i < n; i++) x[i] = NAN;
    check(x, n, "NaN only");
    for (int64_t i = 0; i < n; i++) x[i] = -INFINITY;
    check(x, n, "-inf only");
    for (int64_t i = 0; i < n; i++) x[i] = i % 3 ? -0.0f : 0.0f;
    check(x, n, "zeros");
    for (int64_t i = 0; i < n; i++) x[i] = -FLT_MAX;
    x[n - 1] = FLT_MAX;
    check(x, n, "FLT_MAX last");
    x[0] = INFINITY;
    check(x, n, "+inf first");
  }
}
